//! Replays the seed corpus of the `pmi_server` fuzz target
//! (fuzz/corpus/pmi_server/) and runs random and mutated inputs through it:
//! none may panic or hang.

use gridwire_launch::fuzzing::pmi_server;
use proptest::prelude::*;

fn corpus() -> Vec<(String, Vec<u8>)> {
    let out: Vec<(String, Vec<u8>)> = gridwire_testkit::fuzz_corpus("pmi_server")
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
        pmi_server(&data);
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
    fn random_requests(data in proptest::collection::vec(any::<u8>(), 0..2048)) {
        pmi_server(&data);
    }

    #[test]
    fn mutated_requests(which in any::<usize>(), flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8), cut in any::<usize>()) {
        let c = corpus();
        let mut d = c[which % c.len()].1.clone();
        if d.is_empty() {
            return Ok(());
        }
        for (p, v) in flips {
            let i = p % d.len();
            d[i] = v;
        }
        pmi_server(&d);
        pmi_server(&d[..cut % d.len()]);
    }
}
