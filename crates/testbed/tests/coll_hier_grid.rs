//! Hierarchical collectives on real hosts and sites: a testbed of 2 sites
//! x 2 hosts (5 ms WAN), 2 ranks per host, started from `login` by
//! `gwrun -f` (which stages the program and libmpi.so). `tests/mpi/
//! coll_hier.c` checks every collective with `gw_coll=hier` against
//! `gw_coll=flat` and the expected values, then (`wan`) counts with MPI_T
//! the messages that cross sites: one per remote site for Bcast, Reduce,
//! Gather, Scatter; two for Barrier and Allreduce; one each way for
//! Allgather and Alltoall. Needs root and sshd: skipped by the
//! project's rule otherwise (a failure under CI=true).

use gridwire_testbed::harness::{run_with_timeout, Testbed};
use std::time::Duration;

mod common;

#[test]
fn hierarchical_collectives_across_two_sites() {
    if !common::testbed_ready() {
        return;
    }
    let gwrun = common::build_bin("gridwire-launch", "gwrun");
    let dir = common::ScratchDir::new("coll-hier-grid");
    let prog = common::stage_mpi_test(&dir.0, "coll_hier");
    let mut tb = Testbed::up(&["--sites", "2", "--hosts", "2", "--wan-delay", "5"])
        .unwrap_or_else(|e| panic!("{e}"));
    // Two slots per host: ranks 0-3 at s0, 4-7 at s1.
    let machines = std::fs::read_to_string(tb.dir().join("machines")).unwrap();
    let two_slots: String = machines
        .lines()
        .map(|l| {
            let host = l.starts_with('s') && l.chars().all(|c| c.is_ascii_alphanumeric());
            if host {
                format!("{l}:2\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    let mfile = dir.0.join("machines");
    std::fs::write(&mfile, two_slots).unwrap();
    for mode in ["", "wan"] {
        let mut args = vec![
            gwrun.to_str().unwrap(),
            "-f",
            mfile.to_str().unwrap(),
            "-n",
            "8",
            "--timeout",
            "120",
            prog.to_str().unwrap(),
        ];
        if !mode.is_empty() {
            args.push(mode);
        }
        let started = std::time::Instant::now();
        let out =
            run_with_timeout(&mut tb.command("login", &args), Duration::from_secs(150)).unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        eprintln!("coll_hier {mode}: {:?}\n{stdout}", started.elapsed());
        let want = if mode.is_empty() {
            "PASS coll_hier\n"
        } else {
            "PASS coll_hier wan\n"
        };
        assert!(
            out.status.success() && stdout.contains(want),
            "coll_hier {mode} on the testbed:\n{stdout}\n{stderr}"
        );
    }
    tb.down().unwrap();
}
