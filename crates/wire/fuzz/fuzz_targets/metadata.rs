#![no_main]
//! The metadata parser (nightly `cargo fuzz`; the stable, coverage-guided run
//! is `make fuzz FUZZ_TARGET=metadata_parse`).
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| gridwire_wire::fuzzing::metadata_parse(data));
