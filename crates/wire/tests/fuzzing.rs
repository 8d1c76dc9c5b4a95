//! The fuzz harnesses of this crate (`gridwire_wire::fuzzing`) on stable
//! Rust: every file of their seed corpora (`fuzz/corpus/<target>/` at the
//! root of the repository) replays without a panic, and a few hundred
//! random and mutated inputs go through each (the coverage-guided runs are
//! `make fuzz`, docs/testing.md).

use gridwire_wire::fuzzing::{metadata_parse, record_decode};
use proptest::prelude::*;

fn corpus(target: &str) -> Vec<Vec<u8>> {
    gridwire_testkit::fuzz_corpus(target)
        .into_iter()
        .map(|(_, bytes)| bytes)
        .collect()
}

#[test]
fn record_decode_corpus_replays() {
    for seed in corpus("record_decode") {
        record_decode(&seed);
    }
}

#[test]
fn metadata_parse_corpus_replays() {
    for seed in corpus("metadata_parse") {
        metadata_parse(&seed);
    }
}

/// A seed with bytes overwritten, a cut, and bytes inserted.
fn mutated(seeds: Vec<Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    let n = seeds.len();
    (
        0..n,
        proptest::collection::vec((any::<usize>(), any::<u8>()), 0..8),
        any::<usize>(),
        proptest::collection::vec(any::<u8>(), 0..16),
        any::<usize>(),
    )
        .prop_map(move |(i, writes, cut, insert, at)| {
            let mut b = seeds[i].clone();
            for (pos, val) in writes {
                if !b.is_empty() {
                    let p = pos % b.len();
                    b[p] = val;
                }
            }
            let at = if b.is_empty() { 0 } else { at % b.len() };
            b.splice(at..at, insert);
            b.truncate(cut % (b.len() + 1) + b.len() / 2);
            b
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn record_decode_survives_mutated_seeds(data in mutated(corpus("record_decode"))) {
        record_decode(&data);
    }

    #[test]
    fn record_decode_survives_random_bytes(data in proptest::collection::vec(any::<u8>(), 0..600)) {
        record_decode(&data);
    }

    #[test]
    fn metadata_parse_survives_mutated_seeds(data in mutated(corpus("metadata_parse"))) {
        metadata_parse(&data);
    }
}
