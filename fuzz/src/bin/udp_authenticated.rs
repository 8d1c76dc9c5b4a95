//! The reliable-UDP protocol on an authenticated path: every datagram kind from a confirmed peer's address (and some from others).
gridwire_fuzz::fuzz_main!(gridwire_core::fuzzing::udp_authenticated);
