//! gwrun's PMI-1 server against a rank whose requests are the input.
gridwire_fuzz::fuzz_main!(gridwire_launch::fuzzing::pmi_server);
