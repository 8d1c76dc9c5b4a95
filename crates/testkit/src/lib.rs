//! Helpers shared by gridwire's test suites (a dev-dependency only).
//!
//! The skip rule of the project: a test that cannot run (no root, no
//! compiler, no network namespace, a missing tool) **fails** with the reason
//! when `CI=true`, because CI runs as root on a machine prepared by
//! `scripts/install-deps.sh` where nothing should be missing. Elsewhere it may
//! skip, but it says `SKIPPED: reason` on stderr and appends the reason to the
//! file named by `GW_SKIP_LOG` (set by `make test`), so the closing summary
//! counts skips instead of hiding them among the passes.

use std::io::Write;

/// True when running under CI (`CI=true` or `CI=1`).
pub fn under_ci() -> bool {
    matches!(std::env::var("CI").as_deref(), Ok("true") | Ok("1"))
}

/// Records that the calling test cannot run, for `reason`.
///
/// Under CI this panics (the test fails, naming the reason). Elsewhere it
/// prints `SKIPPED: <test>: <reason>` and logs it; the caller then returns.
///
/// ```ignore
/// if !is_root() { return gridwire_testkit::skip("needs root for network namespaces"); }
/// ```
#[track_caller]
pub fn skip(reason: &str) {
    let name = std::thread::current()
        .name()
        .unwrap_or("unnamed test")
        .to_string();
    if under_ci() {
        panic!("{name} cannot run under CI=true: {reason}");
    }
    let line = format!("SKIPPED: {name}: {reason}");
    eprintln!("{line}");
    // Captured stderr of a passing test is not shown by cargo test: the log is
    // what the summary of `make test` counts.
    if let Some(path) = std::env::var_os("GW_SKIP_LOG") {
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = writeln!(f, "{line}");
        }
    }
}

/// True when this process runs as root (network namespaces, nftables, mounts).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc_geteuid() == 0 }
}

extern "C" {
    #[link_name = "geteuid"]
    fn libc_geteuid() -> u32;
}

/// The seed corpus of fuzz target `target` (`fuzz/corpus/<target>/` at the
/// top of the repository): every file as (path, bytes), sorted by path, so
/// each crate's replay test reads it the same way. Panics when the folder is
/// missing or empty: a replay of nothing would pass without testing.
pub fn fuzz_corpus(target: &str) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut files: Vec<(std::path::PathBuf, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("the seed corpus {} is missing: {e}", dir.display()))
        .map(|e| {
            let path = e.expect("readable corpus entry").path();
            let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            (path, bytes)
        })
        .collect();
    files.sort();
    assert!(
        !files.is_empty(),
        "the seed corpus {} is empty",
        dir.display()
    );
    files
}

/// The replay and property tests of a fuzz target whose harness takes any
/// bytes: every seed of `fuzz/corpus/<target>/` within 5 s, 256 random
/// inputs, and 256 seeds with a few bytes changed, whole and cut short. The
/// calling crate needs `proptest` as a dev-dependency.
///
/// ```ignore
/// gridwire_testkit::fuzz_replay_tests!("pmi_client", gridwire_core::fuzzing::pmi_client);
/// ```
#[macro_export]
macro_rules! fuzz_replay_tests {
    ($target:literal, $harness:path) => {
        fn corpus() -> Vec<(String, Vec<u8>)> {
            let out: Vec<(String, Vec<u8>)> = $crate::fuzz_corpus($target)
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
                $harness(&data);
                assert!(
                    start.elapsed() < std::time::Duration::from_secs(5),
                    "{name} took {:?}",
                    start.elapsed()
                );
            }
        }

        proptest::proptest! {
            #![proptest_config(proptest::prelude::ProptestConfig {
                cases: 256,
                ..proptest::prelude::ProptestConfig::default()
            })]

            #[test]
            fn random_inputs(data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..2048)) {
                $harness(&data);
            }

            #[test]
            fn mutated_seeds(
                which in proptest::prelude::any::<usize>(),
                flips in proptest::collection::vec(
                    (proptest::prelude::any::<usize>(), proptest::prelude::any::<u8>()),
                    1..8,
                ),
                cut in proptest::prelude::any::<usize>(),
            ) {
                let c = corpus();
                let mut d = c[which % c.len()].1.clone();
                if !d.is_empty() {
                    for (p, v) in flips {
                        let i = p % d.len();
                        d[i] = v;
                    }
                    $harness(&d);
                    $harness(&d[..cut % d.len()]);
                }
            }
        }
    };
}
