//! gridwire-core: the multimethod runtime (the Nexus layer).
//!
//! A [`Context`] per process owns communication [`method`]s (self, shm, tcp),
//! publishes a [`descriptor`] table through the [`bootstrap`], and opens links
//! to peers on demand with the method chosen by [`select`]. Users register
//! handlers, create endpoints, pass [`Startpoint`]s around, and issue remote
//! service requests ([`Context::rsr`]) that run those handlers remotely.

/// `eprintln!` in one `write(2)`: std's `eprintln!` writes each piece of
/// the format separately to the unbuffered stderr, so lines of ranks that
/// share a pipe (every launcher merges them) interleave mid-line. Formatting
/// first and writing the whole line at once keeps each line intact (a pipe
/// write of at most `PIPE_BUF` bytes is atomic).
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        let mut line = ::std::format!($($arg)*);
        line.push('\n');
        let _ = ::std::io::Write::write_all(&mut ::std::io::stderr(), line.as_bytes());
    }};
}

pub mod auth;
pub mod bootstrap;
pub mod context;
pub mod descriptor;
pub mod error;
pub mod events;
#[doc(hidden)]
pub mod fuzzing;
pub mod method;
pub mod params;
pub mod reliable;
pub mod select;
pub mod startpoint;
pub mod sync;

pub use context::{
    Context, JoinSpec, LentTicket, LinkStats, MembershipEvent, MembershipKind, MethodStats,
    MulticastStartpoint, OwnedRequest, Payload, Placer, Request, RoundEnd, RouteId, RouteSpec,
    Select, TableSource, DEFAULT_ENDPOINT, MULTICAST_FANOUT, NO_TRAFFIC_KEY,
};
pub use error::{Error, Result};
pub use startpoint::Startpoint;
