//! The shm ring consumer against a hostile producer: replays the checked-in
//! corpus `fuzz/corpus/shm_ring_consumer/` and runs random and mutated
//! scripts through `gridwire_core::fuzzing::shm_ring_consumer` (which must
//! never panic, read out of bounds or allocate beyond its bound).

use gridwire_core::fuzzing::shm_ring_consumer;
use proptest::prelude::*;
use std::path::PathBuf;

fn corpus() -> Vec<(PathBuf, Vec<u8>)> {
    gridwire_testkit::fuzz_corpus("shm_ring_consumer")
}

#[test]
fn replay_corpus() {
    let files = corpus();
    assert!(files.len() >= 5, "the seed corpus is missing");
    for (path, data) in files {
        eprintln!("{}", path.display());
        shm_ring_consumer(&data);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn random_scripts(data in proptest::collection::vec(any::<u8>(), 0..600)) {
        shm_ring_consumer(&data);
    }

    /// Seeds with bytes flipped, inserted or cut: stays near valid scripts.
    #[test]
    fn mutated_seeds(pick in any::<usize>(), edits in proptest::collection::vec((any::<usize>(), any::<u8>(), 0u8..3), 1..8)) {
        let files = corpus();
        let mut data = files[pick % files.len()].1.clone();
        for (at, byte, kind) in edits {
            let at = at % (data.len() + 1);
            match kind {
                0 if at < data.len() => data[at] ^= byte | 1,
                1 => data.insert(at, byte),
                _ => data.truncate(at.max(2)),
            }
        }
        shm_ring_consumer(&data);
    }
}
