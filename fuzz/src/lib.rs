//! gridwire's fuzz targets. Each target is a library harness
//! `pub fn TARGET(data: &[u8])` in the crate that owns the code (its
//! `#[doc(hidden)] pub mod fuzzing`), which must never panic, hang or allocate
//! beyond its stated bound; a panic is a bug found.
//!
//! Adding a target is one line in [`TARGETS`] and one file
//! `src/bin/TARGET.rs` holding `gridwire_fuzz::fuzz_main!(path::to::TARGET);`,
//! plus its seed corpus in `fuzz/corpus/TARGET/` (docs/testing.md).
//!
//! Without `--cfg fuzzing` (a plain `cargo build`) each binary replays files
//! instead: the paths given, or its corpus folder, so the harnesses build and
//! run in CI on stable Rust; `cargo afl build` turns the same binaries into
//! AFL++ persistent-mode fuzzers.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[cfg(fuzzing)]
#[doc(hidden)]
pub use afl;

/// A fuzz harness: any bytes in, never a panic.
pub type Harness = fn(&[u8]);

/// Every target: its name (the binary's and the corpus folder's) and harness.
pub const TARGETS: &[(&str, Harness)] = &[
    ("record_decode", gridwire_wire::fuzzing::record_decode),
    ("metadata_parse", gridwire_wire::fuzzing::metadata_parse),
    (
        "udp_authenticated",
        gridwire_core::fuzzing::udp_authenticated,
    ),
    ("tcp_frames", gridwire_core::fuzzing::tcp_frames),
    (
        "shm_ring_consumer",
        gridwire_core::fuzzing::shm_ring_consumer,
    ),
    ("pmi_client", gridwire_core::fuzzing::pmi_client),
    ("net_descriptor", gridwire_core::fuzzing::net_descriptor),
    ("pmi2_client", gridwire_core::fuzzing::pmi2_client),
    ("pmi_server", gridwire_launch::fuzzing::pmi_server),
    ("pmi2_server", gridwire_launch::fuzzing::pmi2_server),
    ("engine_messages", gridwire_mpi::fuzzing::engine_messages),
];

/// The `main` of a target's binary: AFL++'s persistent loop under
/// `cargo afl build`, a corpus replay otherwise.
#[macro_export]
macro_rules! fuzz_main {
    ($harness:path) => {
        #[cfg(fuzzing)]
        fn main() {
            $crate::afl::fuzz!(|data: &[u8]| {
                $harness(data);
            });
        }

        #[cfg(not(fuzzing))]
        fn main() {
            let args: Vec<std::path::PathBuf> =
                std::env::args_os().skip(1).map(Into::into).collect();
            std::process::exit($crate::replay_main(env!("CARGO_BIN_NAME"), $harness, &args));
        }
    };
}

/// `fuzz/corpus/<target>/` of this repository.
pub fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target)
}

/// The files to replay: each path, or each file directly inside a folder
/// (sorted, so a replay is repeatable).
pub fn input_files(paths: &[PathBuf]) -> std::io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut inner: Vec<PathBuf> = std::fs::read_dir(p)?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_file())
                .collect();
            inner.sort();
            files.extend(inner);
        } else {
            files.push(p.clone());
        }
    }
    Ok(files)
}

/// What replaying a set of inputs found.
#[derive(Debug, Default)]
pub struct Replay {
    pub inputs: usize,
    /// Inputs whose harness call panicked, with the panic's message.
    pub panics: Vec<(PathBuf, String)>,
    /// The slowest input and how long it took (a hang shows here).
    pub slowest: Option<(PathBuf, Duration)>,
}

/// Runs `harness` over every file, catching panics.
pub fn replay(harness: Harness, files: &[PathBuf]) -> std::io::Result<Replay> {
    let mut r = Replay::default();
    for f in files {
        let data = std::fs::read(f)?;
        let t = Instant::now();
        let res = std::panic::catch_unwind(|| harness(&data));
        let took = t.elapsed();
        r.inputs += 1;
        if r.slowest.as_ref().is_none_or(|(_, d)| took > *d) {
            r.slowest = Some((f.clone(), took));
        }
        if let Err(e) = res {
            let msg = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "non-string panic".into());
            r.panics.push((f.clone(), msg));
        }
    }
    Ok(r)
}

/// The replay binary's body: exit status 0 when no input panicked.
pub fn replay_main(target: &str, harness: Harness, args: &[PathBuf]) -> i32 {
    let paths = if args.is_empty() {
        vec![corpus_dir(target)]
    } else {
        args.to_vec()
    };
    let files = match input_files(&paths) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("{target}: cannot list {paths:?}: {e}");
            return 2;
        }
    };
    // The harness's own panic message goes to stderr once per input; the
    // summary below names the files.
    let r = match replay(harness, &files) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{target}: cannot read an input: {e}");
            return 2;
        }
    };
    let slowest = r
        .slowest
        .as_ref()
        .map(|(p, d)| {
            format!(
                "; slowest {} ({:.1} ms)",
                p.display(),
                d.as_secs_f64() * 1e3
            )
        })
        .unwrap_or_default();
    println!(
        "{target}: {} inputs replayed, {} panicked{slowest}",
        r.inputs,
        r.panics.len()
    );
    for (p, m) in &r.panics {
        println!("  PANIC {}: {m}", p.display());
    }
    i32::from(!r.panics.is_empty())
}
