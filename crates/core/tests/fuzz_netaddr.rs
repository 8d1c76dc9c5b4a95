//! Replays the checked-in corpus of the `net_descriptor` fuzz target and
//! runs a few hundred random, structured and mutated inputs through it (a
//! panic is a bug found).

use gridwire_core::fuzzing::net_descriptor;
use proptest::prelude::*;
use std::path::PathBuf;

fn corpus() -> Vec<(PathBuf, Vec<u8>)> {
    gridwire_testkit::fuzz_corpus("net_descriptor")
}

#[test]
fn replays_the_seed_corpus() {
    let files = corpus();
    assert!(
        files.len() >= 5,
        "the seed corpus has {} files",
        files.len()
    );
    for (path, bytes) in files {
        eprintln!("net_descriptor {}", path.display());
        net_descriptor(&bytes);
    }
}

/// Descriptors that are mostly well-formed: tag, namespace key, port, addresses.
fn descriptor() -> impl Strategy<Value = Vec<u8>> {
    (
        "[0-9a-fA-F]{0,20}",
        any::<u32>(),
        prop::collection::vec((any::<[u8; 4]>(), 0u8..40), 0..20),
    )
        .prop_map(|(ns, port, addrs)| {
            let list: Vec<String> = addrs
                .iter()
                .map(|(ip, p)| format!("{}.{}.{}.{}/{p}", ip[0], ip[1], ip[2], ip[3]))
                .collect();
            format!("gw2 {ns} {port} {}", list.join(",")).into_bytes()
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..256)) {
        net_descriptor(&data);
    }

    #[test]
    fn structured_descriptors_never_panic(data in descriptor()) {
        net_descriptor(&data);
    }

    #[test]
    fn mutated_corpus_never_panics(
        pick in any::<prop::sample::Index>(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
    ) {
        let files = corpus();
        let mut data = files[pick.index(files.len())].1.clone();
        for (at, byte) in flips {
            let i = at.index(data.len());
            data[i] ^= byte;
        }
        net_descriptor(&data);
    }
}
