//! Replays the seed corpus of the `pmi2_client` fuzz target
//! (fuzz/corpus/pmi2_client/) and runs random and mutated inputs through it:
//! none may panic or hang.

gridwire_testkit::fuzz_replay_tests!("pmi2_client", gridwire_core::fuzzing::pmi2_client);

use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Whatever the client can encode, a server reading the frame gets back
    /// unchanged (and what it refuses to encode is an error, not a panic).
    #[test]
    fn encode_then_parse_is_identity(
        name in "[a-z][a-z-]{0,20}",
        args in proptest::collection::vec(("[A-Za-z0-9_.-]{1,16}", "[ -:<-~]{0,64}"), 0..8),
    ) {
        use gridwire_core::bootstrap::pmi2_wire::{encode, Frames};
        use gridwire_core::bootstrap::pmi_wire::Command;
        let mut c = Command::new(&name);
        for (k, v) in &args {
            c = c.arg(k, v);
        }
        let f = encode(&c).unwrap();
        let mut fr = Frames::new();
        fr.push(&f);
        prop_assert_eq!(fr.next_frame().unwrap().unwrap(), c);
        prop_assert_eq!(fr.pending(), 0);
    }

    /// Arbitrary keys and values: encode succeeds or refuses, never panics.
    #[test]
    fn encode_never_panics(k in any::<String>(), v in any::<String>()) {
        use gridwire_core::bootstrap::pmi2_wire::encode;
        use gridwire_core::bootstrap::pmi_wire::Command;
        let _ = encode(&Command::new("kvs-put").arg(&k, &v));
    }
}
