//! gridwire-core: the multimethod runtime (the Nexus layer).
//!
//! A [`Context`] per process owns communication [`method`]s (self, shm, tcp),
//! publishes a [`descriptor`] table through the [`bootstrap`], and opens links
//! to peers on demand with the method chosen by [`select`]. Users register
//! handlers, create endpoints, pass [`Startpoint`]s around, and issue remote
//! service requests ([`Context::rsr`]) that run those handlers remotely.

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
pub mod select;
pub mod startpoint;
pub mod sync;

pub use context::{Context, LinkStats, Request, TableSource, DEFAULT_ENDPOINT};
pub use error::{Error, Result};
pub use startpoint::Startpoint;
