//! gwrun's PMI server (PMI-1 and PMI-2, detected per connection) against
//! 4 ranks whose bytes are the input.
gridwire_fuzz::fuzz_main!(gridwire_launch::fuzzing::pmi2_server);
