//! A big site that was warm on its last run: the front end starts a few
//! of its hosts itself, beside the leader's login (grid/frontend/warm.rs).
//! Testbed of 1 site x 6 hosts, no shared file system (gwrun stages the
//! program and libmpi.so), front end on `login`, `tests/mpi/basic.c`
//! (checksummed point-to-point and collectives) on 6 ranks, three runs
//! with the front end's cache in a scratch directory:
//! 1. cold: the plain site tree (the front end reaches the leader only),
//!    which stages once for the site, and the site is marked warm;
//! 2. warm: three hosts are started beside the leader, and the job passes
//!    with what their caches hold (nothing is sent to them);
//! 3. `GW_LAUNCH_DIRECT=0`: the plain tree again.
//!
//! Nothing of any job is left on a host. Needs root and sshd: skipped by
//! the project's rule otherwise (a failure under CI=true).

use gridwire_testbed::harness::{run_with_timeout, Testbed};
use std::time::{Duration, Instant};

mod common;

#[test]
fn a_warm_site_starts_hosts_beside_its_leader() {
    if !common::testbed_ready() {
        return;
    }
    let gwrun = common::build_bin("gridwire-launch", "gwrun");
    let dir = common::ScratchDir::new("warm-site");
    let prog = common::stage_mpi_test(&dir.0, "basic");
    let cache = dir.0.join("cache");
    let mut tb = Testbed::up(&["--sites", "1", "--hosts", "6"]).unwrap_or_else(|e| panic!("{e}"));
    let machines = tb.dir().join("machines").display().to_string();
    let run = |tb: &mut Testbed, direct: &str| {
        let xdg = format!("XDG_CACHE_HOME={}", cache.display());
        let direct = format!("GW_LAUNCH_DIRECT={direct}");
        let out = run_with_timeout(
            &mut tb.command(
                "login",
                &[
                    "env",
                    &xdg,
                    &direct,
                    "GW_VERBOSE=1",
                    gwrun.to_str().unwrap(),
                    "-f",
                    &machines,
                    "-n",
                    "6",
                    "--timeout",
                    "120",
                    prog.to_str().unwrap(),
                ],
            ),
            Duration::from_secs(150),
        )
        .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            out.status.success() && stdout.contains("PASS basic (6 ranks)"),
            "basic on 6 hosts ({direct}):\n{stdout}\n{stderr}"
        );
        stderr
    };
    const BESIDE: &str = "site s0 is warm: starting s0h1, s0h2, s0h3 beside its leader s0h0";
    let cold = run(&mut tb, "3");
    assert!(
        !cold.contains("is warm"),
        "a first run started hosts directly:\n{cold}"
    );
    let warm_markers = std::fs::read_dir(cache.join("gridwire").join("warm"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(warm_markers, 1, "the successful run marked its site warm");
    let warm = run(&mut tb, "3");
    assert!(
        warm.contains(BESIDE),
        "the warm run kept the plain tree:\n{warm}"
    );
    let off = run(&mut tb, "0");
    assert!(
        !off.contains("is warm"),
        "GW_LAUNCH_DIRECT=0 started hosts directly:\n{off}"
    );
    // Nothing of the jobs is left on any host.
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let left: Vec<String> = ["s0h0", "s0h1", "s0h2", "s0h3", "s0h4", "s0h5"]
            .iter()
            .filter_map(|h| {
                let o = tb.exec(h, &["pgrep", "-a", "-f", "basic|--proxy"]).ok()?;
                let s = String::from_utf8_lossy(&o.stdout).trim().to_string();
                (!s.is_empty()).then(|| format!("{h}: {s}"))
            })
            .collect();
        if left.is_empty() {
            break;
        }
        assert!(Instant::now() < until, "left running: {left:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    tb.down().unwrap();
}
