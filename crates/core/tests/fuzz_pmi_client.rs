//! Replays the seed corpus of the `pmi_client` fuzz target
//! (fuzz/corpus/pmi_client/) and runs random and mutated inputs through it:
//! none may panic or hang.

use gridwire_core::fuzzing::pmi_client;
use proptest::prelude::*;

fn corpus() -> Vec<(String, Vec<u8>)> {
    let out: Vec<(String, Vec<u8>)> = gridwire_testkit::fuzz_corpus("pmi_client")
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
        pmi_client(&data);
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
        pmi_client(&data);
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
        pmi_client(&d);
        pmi_client(&d[..cut % d.len()]);
    }
}
