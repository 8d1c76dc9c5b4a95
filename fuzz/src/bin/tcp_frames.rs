//! tcp framing after authentication: any bytes as a confirmed peer's stream.
gridwire_fuzz::fuzz_main!(gridwire_core::fuzzing::tcp_frames);
