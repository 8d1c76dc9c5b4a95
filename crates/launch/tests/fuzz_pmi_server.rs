//! Replays the seed corpus of the `pmi_server` fuzz target
//! (fuzz/corpus/pmi_server/) and runs random and mutated inputs through it:
//! none may panic or hang.

gridwire_testkit::fuzz_replay_tests!("pmi_server", gridwire_launch::fuzzing::pmi_server);
