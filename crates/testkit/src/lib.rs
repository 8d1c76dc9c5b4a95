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
