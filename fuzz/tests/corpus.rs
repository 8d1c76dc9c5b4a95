//! Every target's checked-in corpus (`fuzz/corpus/<target>/`) replays without
//! a panic or a slow input, and every binary in src/bin/ is a listed target
//! with a corpus (so a target cannot be added half-way).

use gridwire_fuzz::{corpus_dir, input_files, replay, TARGETS};
use std::time::Duration;

#[test]
fn every_corpus_replays_without_a_panic_or_a_hang() {
    for (name, harness) in TARGETS {
        let files = input_files(&[corpus_dir(name)]).unwrap();
        assert!(
            !files.is_empty(),
            "{name}: empty corpus {:?}",
            corpus_dir(name)
        );
        let r = replay(*harness, &files).unwrap();
        assert!(r.panics.is_empty(), "{name}: {:?}", r.panics);
        let (slowest, took) = r.slowest.unwrap();
        assert!(
            took < Duration::from_secs(2),
            "{name}: {} took {took:?}",
            slowest.display()
        );
    }
}

#[test]
fn every_binary_is_a_listed_target_with_a_corpus() {
    let bins = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/bin");
    let mut names: Vec<String> = std::fs::read_dir(bins)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut listed: Vec<String> = TARGETS.iter().map(|(n, _)| n.to_string()).collect();
    listed.sort();
    assert_eq!(names, listed, "src/bin/*.rs and TARGETS differ");
    for n in &names {
        assert!(corpus_dir(n).is_dir(), "no corpus folder for {n}");
    }
}
