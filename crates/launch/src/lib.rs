//! The library half of `gwrun`: the parts fuzz targets and tests reach
//! from outside the binary: the PMI-1 server and the staging building blocks
//! (`stage`); the rest of the launcher stays in the binary (src/main.rs).

pub mod server;
pub mod stage;

#[doc(hidden)]
pub mod fuzzing;
