//! Replays the seed corpus of the `pmi2_client` fuzz target
//! (fuzz/corpus/pmi2_client/) and runs random and mutated inputs through it:
//! none may panic or hang.

use gridwire_core::fuzzing::pmi2_client;
use proptest::prelude::*;

fn corpus() -> Vec<(String, Vec<u8>)> {
    let out: Vec<(String, Vec<u8>)> = gridwire_testkit::fuzz_corpus("pmi2_client")
        .into_iter()
        .map(|(p, b)| (p.display().to_string(), b))
        .collect();
    assert!(out.len() >= 4, "the seed corpus is missing files");
    out
}

#[test]
fn corpus_replays_without_panic() {
    for (name, data) in corpus() {
        let start = std::time::Instant::now();
        pmi2_client(&data);
        assert!(
            start.elapsed() < std::time::Duration::from_secs(5),
            "{name} took {:?}",
            start.elapsed()
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_replies(data in proptest::collection::vec(any::<u8>(), 0..2048)) {
        pmi2_client(&data);
    }

    #[test]
    fn mutated_replies(which in any::<usize>(), flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8), cut in any::<usize>()) {
        let c = corpus();
        let mut d = c[which % c.len()].1.clone();
        if d.is_empty() {
            return Ok(());
        }
        for (p, v) in flips {
            let i = p % d.len();
            d[i] = v;
        }
        pmi2_client(&d);
        pmi2_client(&d[..cut % d.len()]);
    }
}

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
