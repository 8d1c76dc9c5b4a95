//! Fuzz target for the shared-memory ring consumer against a hostile producer.

/// The receiving side of an shm pair (ring records, eager delivery,
/// reassembly of fragments, rendezvous records) driven by a script of what a
/// hostile producer writes into the shared segment: indices, record headers,
/// lengths, wrap markers, rendezvous totals. Must never panic or read out of
/// bounds; the receiver's buffers stay below
/// `2 * method::shm::hostile::FUZZ_MAX_MSG` (1 MiB) plus the ring size.
/// Input format: see `method::shm::hostile`.
pub fn shm_ring_consumer(data: &[u8]) {
    crate::method::shm::hostile::ring_consumer(data)
}
