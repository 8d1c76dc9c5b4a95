//! Failover of a link between sites: a testbed of 2 sites x 1 host, one
//! rank per host. Rank 0 streams 100 000 numbered messages to rank 1; at
//! a random point of the stream (rank 0 says where and pauses) the test
//! cuts the pair's tcp inside s0h0's network namespace with nftables, so
//! the `encrypt+tcp` link breaks mid-stream.
//!
//! Asserted:
//! - cut with a reset (`reject with tcp reset`, both ways) and with the
//!   default methods, the link fails over (to `encrypt+udp`), the job
//!   passes, rank 1 received every number exactly once and in order (and
//!   no message more), and stderr shows the new method;
//! - cut **silently** (tcp dropped both ways): only `GW_LINK_TIMEOUT`
//!   (2 s here) notices, and the same holds;
//! - with only `encrypt+tcp` allowed (`GW_METHODS`), nothing applies after
//!   the cut: the job fails on its own, well before its `--timeout`, with
//!   an error naming the pair and the method tried;
//! - the same in a ping-pong cut silently: both ranks wait in `MPI_Recv`
//!   when the pair fails, and the receive fails (`MPI_ERR_PROC_ABORTED`,
//!   the pair and the method in the message), which with the default
//!   error handler ends the job instead of leaving it hanging.
//!
//! Needs root: skipped by the project's rule otherwise (a failure under CI=true).

use gridwire_testbed::harness::{self, Testbed};
use std::path::PathBuf;
use std::time::Duration;

mod common;
use common::failover::{build_c, run_and_cut, Cut, CutPlan, PINGPONG_C, STREAM_C};

/// The stream cut on s0h0 as `how`: every number once, in order, over `encrypt+udp` after.
fn stream_fails_over(tb: &Testbed, gwrun: &str, prog: &str, cut_at: &str, how: Cut, timeout: &str) {
    let plan = CutPlan {
        host: "s0h0",
        peer: "s1h0",
        how,
    };
    let o = run_and_cut(tb, gwrun, 2, &[timeout], &[prog, cut_at], &plan);
    let all = o.all();
    assert!(o.cut, "{how:?}: rank 0 never reached the cut point:\n{all}");
    assert!(o.ok, "{how:?}: the job failed after the cut:\n{all}");
    assert!(
        o.stdout
            .contains("RECEIVED 100000 BAD 0 FIRST_BAD -1 EXTRA 0"),
        "{how:?}: every number once, in order, nothing more:\n{all}"
    );
    assert!(
        all.contains("failing over") && all.contains("now over encrypt+udp"),
        "{how:?}: the link was replaced by encrypt+udp:\n{all}"
    );
}

#[test]
fn a_link_cut_mid_stream_fails_over_and_loses_nothing() {
    if !gridwire_testkit::is_root() {
        gridwire_testkit::skip("gw-testbed needs root (namespaces, mounts, bridges, nftables)");
        return;
    }
    if let Err(why) = harness::ready() {
        gridwire_testkit::skip(&why);
        return;
    }
    let gwrun = common::build_bin("gridwire-launch", "gwrun");
    let dir = PathBuf::from(format!(
        "{}/wan-failover-{}",
        env!("CARGO_TARGET_TMPDIR"),
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let stream = build_c(&dir, "stream_check", STREAM_C);
    let pingpong = build_c(&dir, "pingpong", PINGPONG_C);
    let tb = Testbed::up(&["--sites", "2", "--hosts", "1"]).unwrap_or_else(|e| panic!("{e}"));
    let gwrun = gwrun.display().to_string();
    let (stream, pingpong) = (stream.display().to_string(), pingpong.display().to_string());
    // A random cut point, printed so a failure can be replayed.
    let cut_at = (20_000 + (std::process::id() * 7919) % 60_000).to_string();
    eprintln!("cutting at message {cut_at}");

    // 1. Default methods, reset: encrypt+tcp breaks at the next send, the
    // pair goes on over encrypt+udp.
    stream_fails_over(
        &tb,
        &gwrun,
        &stream,
        &cut_at,
        Cut::TcpReset,
        "GW_LINK_TIMEOUT=3",
    );
    // 2. Default methods, silent drop: the silence (2 s) breaks it.
    stream_fails_over(
        &tb,
        &gwrun,
        &stream,
        &cut_at,
        Cut::TcpDrop,
        "GW_LINK_TIMEOUT=2",
    );

    // 3. Only encrypt+tcp: nothing applies after the cut; the job fails by
    // itself with an error naming the pair, not by its 90 s timeout.
    let only_tcp = "GW_METHODS=self,shm,encrypt+tcp";
    let reset = CutPlan {
        host: "s0h0",
        peer: "s1h0",
        how: Cut::TcpReset,
    };
    let o = run_and_cut(
        &tb,
        &gwrun,
        2,
        &[only_tcp, "GW_LINK_TIMEOUT=3"],
        &[&stream, &cut_at],
        &reset,
    );
    let all = o.all();
    assert!(o.cut, "rank 0 never reached the cut point:\n{all}");
    assert!(!o.ok, "the job passed although no method was left:\n{all}");
    assert!(
        o.elapsed < Duration::from_secs(60),
        "the job ended by timeout ({:?}), not by the link's error:\n{all}",
        o.elapsed
    );
    assert!(
        (all.contains("link rank 0 -> rank 1") || all.contains("link rank 1 -> rank 0"))
            && all.contains("every applicable method failed: encrypt+tcp"),
        "the error names the pair and the method tried:\n{all}"
    );

    // 4. Ping-pong cut silently, only encrypt+tcp: the failed pair's
    // receive fails and, errors being fatal, ends the job with its message.
    let silent = CutPlan {
        host: "s0h0",
        peer: "s1h0",
        how: Cut::TcpDrop,
    };
    let o = run_and_cut(
        &tb,
        &gwrun,
        2,
        &[only_tcp, "GW_LINK_TIMEOUT=2"],
        &[&pingpong, "1000"],
        &silent,
    );
    let all = o.all();
    assert!(o.cut, "rank 0 never reached the cut point:\n{all}");
    assert!(
        !o.ok,
        "the ping-pong passed although the pair failed:\n{all}"
    );
    assert!(
        o.elapsed < Duration::from_secs(60),
        "the receive hung until the job's timeout ({:?}):\n{all}",
        o.elapsed
    );
    let failed_recv = all.lines().any(|l| {
        l.contains("MPI_Recv")
            && l.contains("MPI_ERR_PROC_ABORTED")
            && (l.contains("link rank 0 -> rank 1") || l.contains("link rank 1 -> rank 0"))
            && l.contains("every applicable method failed: encrypt+tcp")
    });
    assert!(
        failed_recv,
        "MPI_Recv failed with MPI_ERR_PROC_ABORTED naming the pair and the method:\n{all}"
    );
    drop(tb);
}
