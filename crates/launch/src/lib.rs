//! The library half of `gwrun`: the parts fuzz targets, tests and both
//! modes of the binary share — the PMI-1/PMI-2 server, the grid start-up (front
//! end and proxy), machines files and placement, staging, system calls.
//! The single-machine job loop stays in the binary (src/main.rs, job.rs).

pub mod grid;
pub mod hostmap;
pub mod machines;
pub mod names;
pub mod report;
pub mod server;
pub mod stage;
pub mod stats;
pub mod sys;

#[doc(hidden)]
pub mod fuzzing;
