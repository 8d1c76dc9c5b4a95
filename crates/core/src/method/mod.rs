//! Communication methods: the one interface every transport fills in.
//!
//! A method is initialised once per context ([`MethodInfo::init`]), publishes a
//! descriptor (its address on this host), decides whether it can reach a
//! remote descriptor ([`Method::reachable`]), opens links on demand
//! ([`Method::connect`]), and delivers whole messages from [`Method::poll`].
//! Methods know nothing of endpoints or handlers: they move opaque messages
//! between contexts. Adding a method means one new module and one row in
//! [`registry`]; nothing else changes.

use crate::error::Result;
use crate::params::{ParamDecl, Params};
use std::io::IoSlice;
use std::os::fd::RawFd;
use std::sync::Arc;

pub mod netaddr;
pub mod relay;
pub mod self_method;
pub mod shm;
pub mod tcp;
pub mod transform;
pub mod udp;

/// What a method needs to know about the job and this process.
#[derive(Debug, Clone)]
pub struct JobInfo {
    /// This context's id (the PMI rank).
    pub ctx_id: u32,
    /// Number of contexts in the job (the PMI size).
    pub size: u32,
    /// Job identifier; names shared-memory segments so the launcher can remove them.
    pub job_id: String,
    /// Host identity (hostname + boot id, or the emulated host set by the launcher).
    pub host_id: String,
    /// The job secret (32 bytes) for authenticating connections.
    pub secret: [u8; 32],
    /// Diagnostic level from `GW_VERBOSE`.
    pub verbose: u8,
}

/// Everything a method's `init` gets.
pub struct MethodEnv<'a> {
    pub job: &'a JobInfo,
    pub params: &'a Params,
}

/// A method's constructor: `Ok(None)` when the method is not available here.
pub type InitFn = fn(&MethodEnv) -> Result<Option<Arc<dyn Method>>>;

/// One built-in method: its name, parameters and constructor.
pub struct MethodInfo {
    pub name: &'static str,
    /// One line for `gwinfo`.
    pub summary: &'static str,
    pub params: &'static [ParamDecl],
    /// Initialises the method for this context. `Ok(None)` = not available here
    /// (e.g. shared memory cannot be created); the method is then left out of
    /// the descriptor table.
    pub init: InitFn,
}

/// The built-in methods, fastest first: the default order of descriptor tables.
pub fn registry() -> &'static [MethodInfo] {
    static REG: &[MethodInfo] = &[self_method::INFO, shm::INFO, tcp::INFO, udp::INFO];
    REG
}

/// How often the progress engine polls a method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PollClass {
    /// Cheap (a memory load): every progress iteration.
    EveryIteration,
    /// Costs a system call: every `skip_poll` iterations.
    Expensive,
}

/// A method's own performance estimate, for selection policies and `gwinfo`.
#[derive(Debug, Clone, Copy)]
pub struct Cost {
    pub latency_ns: u64,
    pub bandwidth_mb_s: u64,
}

/// Where the rest of a large message goes as it arrives (see
/// [`Sink::place`]): bytes `at..at + len` of the message are written by the
/// method straight to `dst`, so a stream method's receive copies them once
/// (the kernel's copy) instead of twice (into its buffer, then out of it).
///
/// Contract of whoever makes one: `dst..dst + len` is writable memory that
/// nothing else reads or writes, and that stays so, until the placement is
/// handed back by [`Sink::deliver_placed`] or dropped (`guard`'s `Drop`
/// runs when the message is abandoned: the connection closed mid-message).
pub struct Destination {
    /// Bytes of the message before the placed part (kept by the method and
    /// handed back as `head` in [`Sink::deliver_placed`]); at most
    /// [`PLACE_HEAD`].
    pub at: usize,
    /// Address the placed part goes to.
    pub dst: usize,
    /// Length of the placed part: `at + len` is the whole message.
    pub len: usize,
    /// The maker's own state (e.g. what keeps the destination reserved),
    /// returned with the placement; dropped when the message is abandoned.
    pub guard: Box<dyn std::any::Any + Send>,
}

/// The most bytes of a message's start a method shows [`Sink::place`]
/// (and keeps as the head of a placed message). 128: a one-sided put's
/// headers (sequencing 16, request 8, MPI's 16 and its one-piece layout 48)
/// must all be shown for its data to be placed in the window.
pub const PLACE_HEAD: usize = 128;

/// Messages from this size on are offered to [`Sink::place`].
pub const PLACE_MIN: usize = 32 << 10;

/// Receives what a method's poll produced.
pub trait Sink {
    /// A whole message from context `src` (the bytes the sender's iovecs held, concatenated).
    fn deliver(&mut self, src: u32, msg: &[u8]);
    /// The same for a message the method reassembled into a buffer of its
    /// own: the sink may take the buffer (leaving an empty one behind)
    /// instead of copying the message out of it. A method that recycles
    /// its reassembly buffers gets a new one then; nothing else changes.
    fn deliver_buf(&mut self, src: u32, buf: &mut Vec<u8>) {
        self.deliver(src, buf)
    }
    /// A message of `len` bytes (at least [`PLACE_MIN`]) from `src` has
    /// begun to arrive; `head` is its first `PLACE_HEAD` bytes. The sink
    /// may say where the rest goes ([`Destination`]); the method then writes
    /// it there and calls [`deliver_placed`](Self::deliver_placed) when it
    /// is complete, instead of [`deliver`](Self::deliver). Default: none
    /// (the message is delivered whole).
    fn place(&mut self, _src: u32, _head: &[u8], _len: usize) -> Option<Destination> {
        None
    }
    /// [`place`](Self::place) for a message of `len` bytes (large enough
    /// for the copy saved to outweigh asking: the method's choice, e.g.
    /// `GW_SHM_PLACE_MIN`) that the method holds whole already, or gets in
    /// fragments that nothing else from `src` can come between (a
    /// shared-memory ring): the method fills a destination given here and
    /// hands it back by [`deliver_placed`](Self::deliver_placed) before it
    /// delivers anything else from `src`, and drops it (abandons it) only
    /// when the link from `src` fails for good (garbage: the peer is
    /// failed; no other link resends the message). So the sink may take
    /// the message as arrived when it names the destination (MPI: match an
    /// eager message against a posted receive). Default: none.
    fn place_whole(&mut self, _src: u32, _head: &[u8], _len: usize) -> Option<Destination> {
        None
    }
    /// The message [`place`](Self::place) or [`place_whole`](Self::place_whole)
    /// placed arrived whole: `head` is its first `placement.at` bytes, the
    /// rest is at `placement.dst`.
    fn deliver_placed(&mut self, _src: u32, _head: &[u8], _placement: Destination) {}
    /// The link from `src` broke (peer died or sent garbage). The context records it.
    fn link_failed(&mut self, src: u32, reason: String);
    /// The link with `src` broke by the network (reset, closed in the
    /// middle of a message, a connect that failed or timed out), as
    /// opposed to a peer that sent garbage or failed authentication: the
    /// context may replace it (failover). Default: a failure like any other.
    fn link_broken(&mut self, src: u32, reason: String) {
        self.link_failed(src, reason)
    }
}

/// Lets a link that cannot proceed drive the progress engine while it waits.
pub trait Waiter {
    /// Runs one round of progress (receives, flushes). Returns `false` when the
    /// caller must not wait (it is inside a handler, or progress is owned by a
    /// thread that is waiting on us): the link must then queue the message and
    /// return instead of blocking.
    fn progress(&self) -> bool;
}

/// A transport. See the module documentation.
pub trait Method: Send + Sync {
    fn name(&self) -> &'static str;
    /// This context's address for the method, published in the descriptor table.
    fn descriptor(&self) -> Vec<u8>;
    /// Human-readable form of a descriptor (for `gwinfo` and verbose output).
    fn describe(&self, descriptor: &[u8]) -> String;
    /// Whether a context with `remote` descriptor can be reached by this method
    /// (shm: same host identity; tcp: an address we can route to).
    fn reachable(&self, remote: &[u8]) -> bool;
    /// Opens (or reuses) a link to context `peer`. Called only when `reachable`.
    fn connect(&self, peer: u32, remote: &[u8]) -> Result<Arc<dyn Link>>;
    /// Takes over a stream socket that the caller connected and
    /// authenticated itself (a peer of another job, see
    /// `Context::attach_foreign`): frames flow on it at once, attributed to
    /// `peer`. Only stream methods (tcp) can.
    fn adopt(&self, _peer: u32, _stream: std::net::TcpStream) -> Result<Arc<dyn Link>> {
        Err(crate::error::Error::NoMethod {
            peer: _peer,
            offered: format!("{} (it cannot take over a socket)", self.name()),
        })
    }
    /// The name a link to `remote` will carry (its [`Link::method`]): the
    /// method's own name, except where the link says more (a relayed link
    /// names its gateway: `relay(s1h0)+tcp`).
    fn link_name(&self, _remote: &[u8]) -> &'static str {
        self.name()
    }
    /// Receives whatever has arrived and flushes queued output; returns the
    /// number of messages delivered.
    fn poll(&self, sink: &mut dyn Sink) -> Result<usize>;
    /// Like [`poll`](Self::poll), but also looks where a poll may skip to
    /// save time on the hot path (e.g. connections idle for a while): after
    /// a sleep, or when polls are far apart.
    fn poll_thorough(&self, sink: &mut dyn Sink) -> Result<usize> {
        self.poll(sink)
    }
    fn poll_class(&self) -> PollClass;
    /// A file descriptor that becomes readable when `poll` has work, for idle blocking.
    fn wait_fd(&self) -> Option<RawFd> {
        None
    }
    /// Called by a thread about to sleep on [`wait_fd`](Self::wait_fd), and
    /// [`after_block`](Self::after_block) when it wakes. A method whose
    /// `wait_fd` would cost the hot path something while nobody sleeps on it
    /// (tcp: a socket registered with epoll pays an epoll callback on every
    /// packet it receives) registers its sources here and drops them after.
    fn before_block(&self) {}
    /// See [`before_block`](Self::before_block).
    fn after_block(&self) {}
    /// Whether `poll` has output still queued (the context must keep polling).
    fn has_pending_output(&self) -> bool {
        false
    }
    fn cost(&self) -> Cost;
    /// Method-specific counters (e.g. connections refused by authentication,
    /// datagrams dropped), for tests, `gwinfo` and reports.
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
    /// Closes links and releases resources (segments, sockets).
    fn shutdown(&self);
    /// `peer` left the job or died: close this method's connections to it
    /// and free what they hold. Sends to a departed peer fail before they
    /// reach a link, so nothing uses them afterwards. Default: nothing held
    /// per peer that must go before the context ends.
    fn release_peer(&self, _peer: u32) {}
    /// A link over a connection `peer` already opened to us and proved the
    /// job secret on, if this method holds one: a context that joined at
    /// run time answers such a peer without looking its table up first
    /// (a round trip to whoever keeps the membership). Default: none.
    fn existing_link(&self, _peer: u32) -> Option<Arc<dyn Link>> {
        None
    }
}

/// A connection to one remote context over one method.
pub trait Link: Send + Sync {
    fn method(&self) -> &'static str;
    /// Sends one message made of `iov` (all slices, in order). When it returns
    /// the caller may reuse the buffers. A link that cannot proceed calls
    /// `waiter.progress()`; if that returns `false` it copies what is left and
    /// queues it, to be flushed by its method's `poll`. Messages on one link
    /// are delivered in the order they were sent.
    fn send(&self, iov: &[IoSlice<'_>], waiter: &dyn Waiter) -> Result<()>;
    /// Whether the link counts its own sent messages and bytes ([`Link::sent`]).
    /// A link that takes a lock per send anyway can count under it for free,
    /// which saves the context two locked additions per message.
    fn counts_sends(&self) -> bool {
        false
    }
    /// Messages and bytes (whole iovecs) sent, when [`Link::counts_sends`].
    fn sent(&self) -> (u64, u64) {
        (0, 0)
    }
    /// The round-trip time the transport measured on this link (TCP: the
    /// kernel's smoothed RTT; udp: the protocol's), for reports. `None`
    /// where nothing is measured (shared memory, the process itself) or not
    /// yet. Not on the message path: read at finalize for the statistics.
    fn rtt(&self) -> Option<std::time::Duration> {
        None
    }
    /// Whether the transport itself has sent data that nothing
    /// acknowledged for at least `for_at_least` (TCP: unacknowledged
    /// segments and no ACK from the other end for that long). A link
    /// silent end to end but not stalled has a busy peer, not a broken
    /// network: failover waits for both. Default: never.
    fn stalled(&self, _for_at_least: std::time::Duration) -> bool {
        false
    }
}

/// Total length of an iovec list.
pub fn iov_len(iov: &[IoSlice<'_>]) -> usize {
    iov.iter().map(|s| s.len()).sum()
}
