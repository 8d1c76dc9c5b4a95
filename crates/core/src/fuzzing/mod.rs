//! Fuzz targets: one `pub fn TARGET(data: &[u8])` per target, which must
//! never panic, hang or allocate beyond its stated bound for any input.
//! `cargo test` replays `fuzz/corpus/TARGET/` and runs property tests;
//! `make fuzz` runs them coverage-guided.

pub mod shm;
pub use shm::shm_ring_consumer;
