//! Replays the seed corpus of the `pmi2_server` fuzz target
//! (fuzz/corpus/pmi2_server/) and runs random and mutated inputs through
//! it: none may panic or hang.

gridwire_testkit::fuzz_replay_tests!("pmi2_server", gridwire_launch::fuzzing::pmi2_server);
