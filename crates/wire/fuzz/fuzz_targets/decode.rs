#![no_main]
//! The record decoder (nightly `cargo fuzz` with the JIT; the stable,
//! coverage-guided run is `make fuzz FUZZ_TARGET=record_decode`).
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| gridwire_wire::fuzzing::record_decode(data));
