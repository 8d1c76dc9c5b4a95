//! Typed errors of the runtime. They become MPI error classes only in the
//! `mpi`/`capi` layers; here they say what went wrong and with whom.

use std::io;

/// Everything the runtime can report to its caller.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A parameter (environment variable) has a value that does not parse or is out of range.
    #[error("bad value for {var}={value:?}: {reason}")]
    BadParam {
        var: String,
        value: String,
        reason: String,
    },
    /// `GW_METHODS` names a method that is not built in.
    #[error("unknown communication method {name:?} in {var}; valid methods are: {valid}")]
    UnknownMethod {
        var: String,
        name: String,
        valid: String,
    },
    /// No method in the remote's descriptor table is applicable from here.
    #[error("no applicable communication method to rank {peer} (its table offers: {offered})")]
    NoMethod { peer: u32, offered: String },
    /// The bootstrap (PMI) failed or answered something unexpected.
    #[error("bootstrap (PMI) error: {0}")]
    Bootstrap(String),
    /// A peer sent bytes that do not follow the protocol.
    #[error("protocol error from {peer}: {what}")]
    Protocol { peer: String, what: String },
    /// A connection failed the challenge-response authentication.
    #[error("authentication failed for connection from {0}")]
    AuthFailed(String),
    /// A peer is unreachable or its link broke.
    #[error("link to rank {peer} ({method}) failed: {reason}")]
    LinkFailed {
        peer: u32,
        method: &'static str,
        reason: String,
    },
    /// A handler id that was never registered.
    #[error("no handler registered with id {0}")]
    NoHandler(u32),
    /// A startpoint that cannot be decoded.
    #[error("malformed startpoint: {0}")]
    BadStartpoint(String),
    /// The context has been shut down.
    #[error("the context has been shut down")]
    Shutdown,
    /// An operating system call failed.
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: io::Error,
    },
}

impl Error {
    /// Wraps an `io::Error` with a short description of the call that failed.
    pub fn io(what: impl Into<String>, source: io::Error) -> Self {
        Error::Io {
            what: what.into(),
            source,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
