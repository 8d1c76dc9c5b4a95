//! Multi-process tests of the `udp` method under `gwrun` with
//! `GW_METHODS=udp`: a checksummed stream with loss, duplication and
//! reordering injected by the method itself, a collective, a peer that
//! freezes mid-stream, and garbage fired at a rank's socket. The rank
//! program is `crates/core/examples/udp_check.rs`. Every test is bounded by
//! `gwrun --timeout` and by a deadline here that kills the launcher.

mod common;

use common::{example, run, Out, GWRUN};
use std::time::Duration;

fn udp_check() -> String {
    example("udp_check")
}

/// `gwrun --timeout 150 args…` with `GW_METHODS=udp` and `envs`, bounded at 180 s.
fn gwrun(args: &[&str], envs: &[(&str, &str)]) -> Out {
    let mut a = vec!["--timeout", "150"];
    a.extend_from_slice(args);
    let mut e = vec![("GW_METHODS", "udp")];
    e.extend_from_slice(envs);
    run(GWRUN, &a, &e, Duration::from_secs(180))
}

fn assert_ok(o: &Out) {
    assert_eq!(
        o.code, 0,
        "job failed\nstdout:\n{}\nstderr:\n{}",
        o.stdout, o.stderr
    );
}

/// Checks the `STREAM` and `ALLREDUCE` lines of every rank.
fn check_stream(o: &Out, ranks: usize, n: u64) {
    assert_ok(o);
    let streams: Vec<&str> = o
        .stdout
        .lines()
        .filter(|l| l.starts_with("STREAM"))
        .collect();
    assert_eq!(streams.len(), ranks, "{}", o.stdout);
    for l in streams {
        assert!(l.contains(&format!("got={n} ")), "{l}");
        assert!(l.ends_with("method=udp"), "{l}");
    }
    let sums: Vec<&str> = o
        .stdout
        .lines()
        .filter(|l| l.starts_with("ALLREDUCE"))
        .collect();
    assert_eq!(sums.len(), ranks, "{}", o.stdout);
}

/// Messages per rank: debug builds are slow, release runs the full stream.
fn count(debug: u64, release: u64) -> u64 {
    if cfg!(debug_assertions) {
        debug
    } else {
        release
    }
}

#[test]
fn udp_stream_and_collective_with_injected_loss_dup_reorder() {
    let n = count(3000, 20_000);
    let o = gwrun(
        &["-n", "3", &udp_check(), "stream", &n.to_string()],
        &[
            ("GW_UDP_DROP", "5"),
            ("GW_UDP_DUP", "2"),
            ("GW_UDP_REORDER", "10"),
        ],
    );
    check_stream(&o, 3, n);
}

#[test]
fn udp_stream_small_datagrams_heavy_loss() {
    let n = count(500, 5000);
    let o = gwrun(
        &["-n", "2", &udp_check(), "stream", &n.to_string()],
        &[
            ("GW_UDP_DGRAM", "1472"),
            ("GW_UDP_DROP", "15"),
            ("GW_UDP_REORDER", "20"),
            ("GW_UDP_DEPTH", "64"),
        ],
    );
    check_stream(&o, 2, n);
}

#[test]
fn udp_frozen_peer_gives_sender_an_error_within_the_retry_limit() {
    // 6 timeouts: min 10 ms doubling, capped at 200 ms: well under 2 s.
    let o = gwrun(
        &["-n", "2", &udp_check(), "freeze"],
        &[
            ("GW_UDP_RETRIES", "6"),
            ("GW_UDP_MAX_TIMEOUT", "200"),
            ("GW_UDP_LINGER", "0"),
        ],
    );
    let line = o
        .stdout
        .lines()
        .find(|l| l.starts_with("PEER_ERROR"))
        .unwrap_or_else(|| panic!("no PEER_ERROR\n{}\n{}", o.stdout, o.stderr));
    let ms: u64 = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("ms="))
        .unwrap()
        .parse()
        .unwrap();
    assert!(line.contains("rank 1 is unreachable"), "{line}");
    assert!(ms < 3000, "detection took {ms} ms: {line}");
    assert!(o.elapsed < Duration::from_secs(60), "{:?}", o.elapsed);
}

#[test]
fn udp_garbage_at_a_rank_is_dropped_and_counted() {
    let n = count(300, 3000);
    let o = gwrun(
        &["-n", "2", &udp_check(), "garbage", &n.to_string()],
        &[("GW_VERBOSE", "2")],
    );
    check_stream(&o, 2, n);
    let sent: u64 = o
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("GARBAGE sent="))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(sent >= n * 5);
    // Rank 1's shutdown line: every forged datagram was dropped and counted.
    let counters = o
        .stderr
        .lines()
        .find(|l| l.starts_with("gw[1]: udp: shut down"))
        .unwrap_or_else(|| panic!("{}", o.stderr));
    let get = |name: &str| -> u64 {
        let at = counters.find(&format!("(\"{name}\", ")).unwrap() + name.len() + 5;
        counters[at..]
            .split(')')
            .next()
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let dropped = get("garbage_dropped") + get("unauthenticated_dropped") + get("auth_failed");
    assert!(
        dropped >= sent * 9 / 10,
        "sent {sent}, dropped {dropped}: {counters}"
    );
}
