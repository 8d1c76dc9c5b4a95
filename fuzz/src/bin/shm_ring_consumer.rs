//! The shared-memory ring consumer against a hostile producer (indices, headers, lengths, wrap markers, rendezvous totals).
gridwire_fuzz::fuzz_main!(gridwire_core::fuzzing::shm_ring_consumer);
