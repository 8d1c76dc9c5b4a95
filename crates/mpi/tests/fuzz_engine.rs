//! The fuzz target `gridwire_mpi::fuzzing::engine_messages` on the checked-in
//! corpus (`fuzz/corpus/engine_messages/`, valid and hostile message
//! sequences) and on a few hundred random and mutated inputs. The target
//! asserts its own memory bound; a panic here is a bug found.

use gridwire_mpi::fuzzing::engine_messages;
use proptest::prelude::*;

fn corpus() -> Vec<(String, Vec<u8>)> {
    gridwire_testkit::fuzz_corpus("engine_messages")
        .into_iter()
        .map(|(p, b)| (p.file_name().unwrap().to_string_lossy().into_owned(), b))
        .collect()
}

#[test]
fn the_seed_corpus_replays_without_a_panic() {
    let files = corpus();
    assert!(files.len() >= 10, "only {} seed files", files.len());
    for (name, data) in files {
        eprintln!("replaying {name} ({} bytes)", data.len());
        engine_messages(&data);
    }
}

/// A seed with some bytes overwritten, inserted or cut: most mutants keep
/// the seed's shape and reach deeper than random bytes.
fn mutant() -> impl Strategy<Value = Vec<u8>> {
    let seeds: Vec<Vec<u8>> = corpus().into_iter().map(|(_, d)| d).collect();
    (
        0..seeds.len(),
        prop::collection::vec((any::<u16>(), any::<u8>(), 0u8..3), 1..8),
    )
        .prop_map(move |(i, edits)| {
            let mut v = seeds[i].clone();
            for (at, byte, how) in edits {
                let at = at as usize % (v.len() + 1);
                match how {
                    0 if at < v.len() => v[at] = byte,
                    1 => v.insert(at, byte),
                    _ if at < v.len() => {
                        v.truncate(at);
                    }
                    _ => v.push(byte),
                }
            }
            v
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_inputs_never_panic(data in prop::collection::vec(any::<u8>(), 0..2048)) {
        engine_messages(&data);
    }

    #[test]
    fn mutated_seeds_never_panic(data in mutant()) {
        engine_messages(&data);
    }
}
