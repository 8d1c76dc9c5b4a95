//! Replays the seed corpus of the `pmi_client` fuzz target
//! (fuzz/corpus/pmi_client/) and runs random and mutated inputs through it:
//! none may panic or hang.

gridwire_testkit::fuzz_replay_tests!("pmi_client", gridwire_core::fuzzing::pmi_client);
