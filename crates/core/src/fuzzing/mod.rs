//! Fuzz targets: one function per target, `pub fn TARGET(data: &[u8])`,
//! which must never panic, hang or allocate beyond the bound its module
//! states, for any input. `cargo test` replays the seed corpus in
//! `fuzz/corpus/TARGET/` and runs property tests through them; `make fuzz`
//! runs them coverage-guided. A panic here is a bug found.

pub mod netaddr;
pub mod pmi;
pub mod pmi2;
pub mod shm;
pub mod tcp;
pub mod udp;

pub use netaddr::net_descriptor;
pub use pmi::pmi_client;
pub use pmi2::pmi2_client;
pub use shm::shm_ring_consumer;
pub use tcp::tcp_frames;
pub use udp::udp_authenticated;
