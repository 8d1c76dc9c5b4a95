//! The library half of `gwrun`: the parts fuzz targets and tests reach
//! from outside the binary. Only the PMI-1 server lives here; the rest of
//! the launcher stays in the binary (src/main.rs).

pub mod hostmap;
pub mod machines;
pub mod server;

#[doc(hidden)]
pub mod fuzzing;
