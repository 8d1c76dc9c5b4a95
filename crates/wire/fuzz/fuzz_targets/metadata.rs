#![no_main]
//! Any bytes: the metadata parser must return, never panic; anything it
//! accepts must re-serialise to the same bytes (so its id is their hash).
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(f) = gridwire_wire::meta::parse(data) {
        assert_eq!(gridwire_wire::meta::serialize(&f), data);
    }
});
