//! The MPI tools interface through the real launcher: `tests/mpi/mpi_t.c`
//! compiled with `gwcc` and run by `gwrun` with 2 ranks, over shared memory
//! (one host, the default choice), over TCP chosen by an MPI_T write of
//! `GW_METHODS` before `MPI_Init`, and over TCP between two emulated hosts.
//! The program gets the parameter table (every `GW_*` name and its default,
//! from the Rust tables themselves) in a file, and checks every one is a
//! control variable reading that default.
//!
//! Needs a C compiler (`cc`, or `GWCC_CC`): without one the test follows the
//! project's skip rule (`gridwire_testkit::skip`).

mod common;

use common::{compile_mpi_test, gwrun, have_cc, profile_dir, run_with_backstop};
use gridwire_core::params::{parse_size, Kind, ParamDecl};
use gridwire_testkit::skip;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A default as the variable reads it: sizes in bytes, booleans as 0/1.
fn canonical(d: &ParamDecl) -> String {
    match d.kind {
        Kind::Size { .. } => parse_size(d.default).expect("defaults parse").to_string(),
        Kind::Bool => match d.default {
            "1" | "yes" | "true" | "on" => "1".into(),
            _ => "0".into(),
        },
        _ => d.default.to_string(),
    }
}

/// The expectation file: one "GW_NAME<TAB>default" line per parameter.
fn expectations(dir: &Path) -> PathBuf {
    let mut decls = gridwire_core::params::all_decls();
    decls.extend(gridwire_mpi::params::MPI_PARAMS.iter());
    let text: String = decls
        .iter()
        .map(|d| format!("{}\t{}\n", d.var(), canonical(d)))
        .collect();
    let p = dir.join("mpi_t-expect.tsv");
    std::fs::write(&p, text).unwrap();
    p
}

/// Runs the program under gwrun (its own process group, killed after 90 s
/// as a backstop to gwrun's own --timeout); returns (ok, stdout, stderr).
fn run(exe: &Path, expect: &Path, hosts: u32, args: &[&str]) -> (bool, String, String) {
    let mut c = Command::new(gwrun());
    c.args(["--timeout", "60", "-n", "2"]);
    if hosts > 1 {
        c.args(["--emulate-hosts", &hosts.to_string()]);
    }
    c.arg(exe)
        .args(args)
        .env("GW_MPI_T_EXPECT", expect)
        .env_remove("GW_METHODS");
    run_with_backstop(c, Duration::from_secs(90))
}

#[test]
fn mpi_t_lists_reads_writes_and_counts_over_shm_and_tcp() {
    if !have_cc() {
        return skip("mpi_t: no C compiler (cc or GWCC_CC)");
    }
    let exe = compile_mpi_test("mpi-tests", "mpi_t");
    let dir = profile_dir().join("mpi-tests");
    let expect = expectations(&dir);
    let mut failures = Vec::new();
    for (hosts, args, pass) in [
        (1, &["shm"][..], "PASS mpi_t\n"),
        (
            1,
            &["tcp", "self,tcp"][..],
            "PASS mpi_t (GW_METHODS written)",
        ),
        (2, &["tcp"][..], "PASS mpi_t\n"),
    ] {
        let t = Instant::now();
        let (ok, stdout, stderr) = run(&exe, &expect, hosts, args);
        let passed = ok && stdout.contains(pass);
        eprintln!(
            "mpi_t {args:?} on {hosts} host(s): {} ({:.2} s)",
            if passed { "ok" } else { "FAILED" },
            t.elapsed().as_secs_f64()
        );
        if !passed {
            failures.push(format!(
                "{args:?} hosts {hosts}:\n--- stdout\n{stdout}--- stderr\n{stderr}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `gwtools --init` (a singleton MPI process) lists every parameter as a
/// control variable, the per-link and per-method variables, the categories
/// and the events.
#[test]
fn gwtools_lists_every_variable_category_and_event() {
    let out = Command::new(env!("CARGO_BIN_EXE_gwtools"))
        .arg("--init")
        .env_remove("GW_METHODS")
        .env("GW_JOB_ID", format!("gwtools{}", std::process::id()))
        .output()
        .expect("gwtools runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "gwtools failed:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut decls = gridwire_core::params::all_decls();
    decls.extend(gridwire_mpi::params::MPI_PARAMS.iter());
    assert!(
        text.contains(&format!("Control variables ({}):", decls.len())),
        "{text}"
    );
    for d in decls {
        assert!(
            text.contains(&format!("  {} ", d.var())),
            "{} missing",
            d.var()
        );
    }
    for m in gridwire_core::method::registry() {
        assert!(
            text.contains(&format!("  gw_{}_sent_bytes ", m.name)),
            "{text}"
        );
        assert!(
            text.contains(&format!("  gw_{} ", m.name)),
            "category gw_{}",
            m.name
        );
    }
    for name in [
        "gw_link_method",
        "gw_mpi_comm_unexpected_msgs",
        "gw_link_selected",
        "gw_link_failed",
    ] {
        assert!(text.contains(name), "{name} missing:\n{text}");
    }
    assert!(text.contains("Events (3):"), "{text}");
}
