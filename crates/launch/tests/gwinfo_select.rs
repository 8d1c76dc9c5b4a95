//! `gwinfo` on the size-aware selection (issue 13): the candidates between
//! two emulated hosts, and with `GW_SELECT=measured` and forced estimates
//! what it would choose per size class.

mod common;

use common::{run, GWRUN};
use std::path::PathBuf;
use std::time::Duration;

/// gwinfo is a binary of gridwire-core, built next to gwrun.
fn gwinfo() -> String {
    let p = PathBuf::from(GWRUN).parent().unwrap().join("gwinfo");
    assert!(
        p.exists(),
        "{} missing: build it first (cargo build -p gridwire-core --bin gwinfo, or make build-debug)",
        p.display()
    );
    p.to_string_lossy().into_owned()
}

/// The size-class row of `label` (`      8 B: udp ...`).
fn choice<'t>(text: &'t str, label: &str) -> &'t str {
    text.lines()
        .find(|l| l.trim_start().starts_with(&format!("{label}: ")))
        .unwrap_or_else(|| panic!("no {label} row:\n{text}"))
}

#[test]
fn measured_mode_shows_the_choice_per_size() {
    let out = run(
        &gwinfo(),
        &["--methods-only"],
        &[
            ("GW_METHODS", "self,shm,tcp,udp"),
            ("GW_SELECT", "measured"),
            ("GW_SELECT_ESTIMATES", "udp=5/50,tcp=200/2000"),
        ],
        Duration::from_secs(60),
    );
    let t = &out.stdout;
    assert_eq!(out.code, 0, "{t}\n{}", out.stderr);
    assert!(
        t.contains("Size-aware selection (GW_SELECT=measured"),
        "{t}"
    );
    assert!(t.contains("candidates between hosts: tcp, udp"), "{t}");
    assert!(
        t.contains(
            "with the estimates of GW_SELECT_ESTIMATES: udp below 10000 B, tcp from 10000 B"
        ),
        "{t}"
    );
    for (label, stack) in [
        ("8 B", "udp"),
        ("4 KiB", "udp"),
        ("64 KiB", "tcp"),
        ("4 MiB", "tcp"),
    ] {
        let row = choice(t, label);
        assert_eq!(row.split_whitespace().nth(2), Some(stack), "{row}");
    }
}

#[test]
fn fixed_mode_and_bad_estimates() {
    let out = run(
        &gwinfo(),
        &["--methods-only"],
        &[("GW_METHODS", "self,shm,tcp,udp")],
        Duration::from_secs(60),
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("fixed: every message on tcp"),
        "{}",
        out.stdout
    );
    let out = run(
        &gwinfo(),
        &["--methods-only"],
        &[
            ("GW_SELECT", "measured"),
            ("GW_SELECT_ESTIMATES", "udp=fast"),
        ],
        Duration::from_secs(60),
    );
    assert_ne!(out.code, 0, "{}", out.stdout);
    assert!(out.stderr.contains("GW_SELECT_ESTIMATES"), "{}", out.stderr);
}
