//! The PMI-2 client against a launcher whose replies are the input.
gridwire_fuzz::fuzz_main!(gridwire_core::fuzzing::pmi2_client);
