//! Replays the checked-in corpus of the `tcp_frames` fuzz target and runs a
//! few hundred random and mutated inputs through it (a panic is a bug found).

use gridwire_core::fuzzing::tcp_frames;
use proptest::prelude::*;
use std::path::PathBuf;

fn corpus() -> Vec<(PathBuf, Vec<u8>)> {
    gridwire_testkit::fuzz_corpus("tcp_frames")
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
        eprintln!("tcp_frames {}", path.display());
        tcp_frames(&bytes);
    }
}

/// A frame stream: headers that mostly match their payload, some that lie.
fn frame_stream() -> impl Strategy<Value = Vec<u8>> {
    let frame = (
        any::<bool>(),
        any::<u32>(),
        prop::collection::vec(any::<u8>(), 0..64),
    );
    (
        any::<u8>(),
        any::<u8>(),
        prop::collection::vec(frame, 0..16),
    )
        .prop_map(|(max, read, frames)| {
            let mut out = vec![max, read];
            for (honest, claimed, body) in frames {
                let len = if honest { body.len() as u32 } else { claimed };
                out.extend_from_slice(&len.to_le_bytes());
                out.extend_from_slice(&body);
            }
            out
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..512)) {
        tcp_frames(&data);
    }

    #[test]
    fn frame_streams_never_panic(data in frame_stream()) {
        tcp_frames(&data);
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
        tcp_frames(&data);
    }
}
