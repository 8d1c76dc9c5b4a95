//! The format metadata parser: any bytes; what it accepts round-trips.
gridwire_fuzz::fuzz_main!(gridwire_wire::fuzzing::metadata_parse);
