//! Fuzz targets: library functions `TARGET(data: &[u8])` that must never
//! panic, hang or allocate beyond a stated bound for any input. The
//! coverage-guided `make fuzz` crate calls them by path; `cargo test`
//! replays the seed corpora in `fuzz/corpus/TARGET/` and runs proptests.

pub mod pmi;
pub use pmi::pmi_client;
