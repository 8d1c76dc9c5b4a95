//! gridwire-core: the multimethod runtime (the Nexus layer).

pub mod bootstrap;
pub mod error;
pub mod method;
pub mod params;

pub use error::{Error, Result};
