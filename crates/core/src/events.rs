//! A hook for the few things a tool may want to hear about as they happen:
//! a peer's link being selected, a method failing to connect (the next one
//! is tried), a link failing. The MPI library's tools interface (MPI_T
//! events) installs the one listener.
//!
//! None of these happens on the message path: a link is selected once per
//! peer and fails at most once. Emitting costs one atomic load when nobody
//! listens.

use std::sync::OnceLock;

/// What happened to the link to a peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkEventKind {
    /// `method` now carries this context's messages to `peer`.
    Selected,
    /// `method` could not connect to `peer`; the next applicable method is tried.
    ConnectFailed,
    /// The link to `peer` broke; later sends to it fail.
    Failed,
}

/// One event, handed to the listener on the thread where it happened.
#[derive(Debug, Clone, Copy)]
pub struct LinkEvent<'a> {
    pub kind: LinkEventKind,
    /// The rank of the context the event happened in.
    pub rank: u32,
    pub peer: u32,
    /// The method concerned ("" if the peer never had a link).
    pub method: &'static str,
    /// Why it failed ("" for a selection).
    pub reason: &'a str,
}

static LISTENER: OnceLock<fn(&LinkEvent<'_>)> = OnceLock::new();

/// Installs the process's listener (once: later calls keep the first one and
/// return false). The listener runs inside the runtime, possibly with the
/// peer's connection lock held: it must not send to that peer.
pub fn set_link_listener(f: fn(&LinkEvent<'_>)) -> bool {
    LISTENER.set(f).is_ok()
}

/// Whether a listener is installed (to skip building an event's text).
pub(crate) fn listening() -> bool {
    LISTENER.get().is_some()
}

/// Calls the listener, if one is installed.
pub(crate) fn emit(ev: LinkEvent<'_>) {
    if let Some(f) = LISTENER.get() {
        f(&ev);
    }
}
