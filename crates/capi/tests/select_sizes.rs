//! Measured, size-aware selection (issue 13), through `gwrun` between two
//! emulated hosts (tcp and udp both apply), with the C program
//! `tests/mpi/select_sizes.c`, which checks order and content itself.
//!
//! - `GW_SELECT=measured` with the estimates forced
//!   (`GW_SELECT_ESTIMATES=udp=5/50,tcp=200/2000`: the crossing is at
//!   10 000 bytes): small messages go on udp, bulk on tcp, interleaved on
//!   one communicator in MPI order; asserted from `--stats` message and
//!   byte counts per stack. The estimates are forced because real ones
//!   on a loaded two-core machine (both "hosts" are this machine) could
//!   make either stack cheaper: what the selection does with given
//!   estimates is what is tested here, the measuring itself by the unit
//!   tests with a virtual clock (`crates/core/src/context/measured.rs`).
//! - The same with measuring on: order and content hold, and `--stats`
//!   reports a measured choice (no assertion on what it chose).
//! - A communicator with `gw_methods=udp`: the receiver's clear-to-send
//!   answers and the RMA answers (with the data) go on udp too.
//!
//! Needs a C compiler (the project's skip rule otherwise).

mod common;

use common::{gwrun, have_cc, profile_dir, repo, run_with_backstop};
use gridwire_testkit::skip;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

/// The jobs share two cores: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn compiled() -> Option<PathBuf> {
    if !have_cc() {
        skip("select_sizes: no C compiler (cc or GWCC_CC)");
        return None;
    }
    let out_dir = profile_dir().join("mpi-tests");
    std::fs::create_dir_all(&out_dir).unwrap();
    let exe = out_dir.join("select_sizes");
    let out = Command::new(repo().join("scripts/gwcc"))
        .env("GW_MPI_LIBDIR", profile_dir())
        .args(["-Wall", "-O1", "-o"])
        .arg(&exe)
        .arg(repo().join("tests/mpi/select_sizes.c"))
        .output()
        .expect("gwcc runs");
    assert!(
        out.status.success(),
        "gwcc select_sizes.c failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(exe)
}

/// `gwrun --stats -n 2 --emulate-hosts 2`: whether it succeeded, and its
/// stdout then stderr. gwrun's `--timeout` ends a hung job; a backstop
/// kills its process group after 150 s.
fn run(exe: &PathBuf, env: &[(&str, &str)]) -> (bool, String) {
    let mut c = Command::new(gwrun());
    c.envs(env.iter().copied())
        .args([
            "--timeout",
            "120",
            "--stats",
            "-n",
            "2",
            "--emulate-hosts",
            "2",
        ])
        .arg(exe);
    let (ok, out, err) = run_with_backstop(c, Duration::from_secs(150));
    (ok, format!("{out}\n{err}"))
}

/// `name=<number>` in `line`.
fn field(line: &str, name: &str) -> Option<u64> {
    let at = line.find(&format!("{name}="))? + name.len() + 1;
    let digits: String = line[at..]
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    digits.parse().ok()
}

/// The rank 0 line starting `SENT `.
fn sent_line(text: &str) -> &str {
    text.lines()
        .find(|l| l.starts_with("SENT "))
        .unwrap_or_else(|| panic!("no SENT line:\n{text}"))
}

/// (messages, bytes) stack `name` carried from `from` to `to`, from the
/// `--stats` line of a pair on several links (`tcp 12/34K, udp 5/600
/// (bytes: tcp=34816 udp=600)`).
fn carried(text: &str, from: u32, to: u32, name: &str) -> Option<(u64, u64)> {
    let line = text
        .lines()
        .find(|l| l.contains(&format!("links {from}->{to} (several at once)")))?;
    let at = line.find("(several at once): ")? + "(several at once): ".len();
    let head = &line[at..line.find(" (bytes:")?];
    let msgs = head.split(", ").find_map(|part| {
        let (n, counts) = part.split_once(' ')?;
        (n == name).then(|| counts.split('/').next()?.parse().ok())?
    })?;
    let bytes = field(&line[line.find("(bytes:")?..], &format!(" {name}"))?;
    Some((msgs, bytes))
}

/// Messages the size-aware selection of `from` → `to` put on `stack`
/// (its `--stats` line: `...; udp: rtt 10 us, 50.0 MB/s, 41 msgs/2000 B`).
fn chosen(text: &str, from: u32, to: u32, stack: &str) -> Option<u64> {
    let line = text
        .lines()
        .find(|l| l.contains(&format!("size-aware {from}->{to}: ")))?;
    let part = &line[line.find(&format!("; {stack}: rtt "))?..];
    let upto = part.find(" msgs/")?;
    part[..upto].rsplit(' ').next()?.parse().ok()
}

#[test]
fn small_messages_take_the_low_latency_stack_and_bulk_the_fast_one() {
    // Serial from the compile on: the tests write the same executable.
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(exe) = compiled() else { return };
    let (ok, text) = run(
        &exe,
        &[
            ("GW_SELECT", "measured"),
            ("GW_SELECT_ESTIMATES", "udp=5/50,tcp=200/2000"),
            ("GW_TEST_MODE", "sizes"),
        ],
    );
    assert!(ok && text.contains("PASS select_sizes"), "{text}");
    let sent = sent_line(&text);
    let small_msgs = field(sent, "small_msgs").unwrap();
    let big_bytes = field(sent, "big_bytes").unwrap();
    let big_msgs = field(sent, "big_msgs").unwrap();
    let (udp_msgs, udp_bytes) =
        carried(&text, 0, 1, "udp").unwrap_or_else(|| panic!("no udp share of 0->1:\n{text}"));
    let (tcp_msgs, tcp_bytes) =
        carried(&text, 0, 1, "tcp").unwrap_or_else(|| panic!("no tcp share of 0->1:\n{text}"));
    // Every small message (and the rendezvous envelopes) on udp, no bulk:
    // what udp carried is far below one bulk message per ten.
    assert!(udp_msgs >= small_msgs, "udp {udp_msgs} msgs:\n{text}");
    assert!(
        udp_bytes < big_bytes / 10,
        "udp carried {udp_bytes} bytes of {big_bytes} bulk:\n{text}"
    );
    // Every bulk byte on tcp, and tcp carried no small message: at most
    // one message per bulk one or rendezvous piece, plus the job's own few.
    assert!(
        tcp_bytes >= big_bytes,
        "tcp {tcp_bytes} < {big_bytes}:\n{text}"
    );
    assert!(
        tcp_msgs < 2 * big_msgs + 20,
        "tcp carried {tcp_msgs} messages for {big_msgs} bulk ones:\n{text}"
    );
    // The choice is shown, with where it came from.
    assert!(
        text.contains("size-aware 0->1: udp below 10000 B, tcp from 10000 B (estimates forced"),
        "{text}"
    );
    // The selection's own counts agree.
    assert!(chosen(&text, 0, 1, "udp").unwrap() >= small_msgs, "{text}");
    assert!(chosen(&text, 0, 1, "tcp").unwrap() >= big_msgs, "{text}");
    // The receiver's clear-to-send answers are small: on udp, and
    // nothing of rank 1 (all small) took tcp.
    let back_udp =
        chosen(&text, 1, 0, "udp").unwrap_or_else(|| panic!("no size-aware line of 1->0:\n{text}"));
    assert!(back_udp >= big_msgs / 2, "{text}");
    assert_eq!(chosen(&text, 1, 0, "tcp"), Some(0), "{text}");
}

#[test]
fn measured_estimates_keep_order_and_are_reported() {
    // Serial from the compile on: the tests write the same executable.
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(exe) = compiled() else { return };
    let (ok, text) = run(
        &exe,
        &[("GW_SELECT", "measured"), ("GW_TEST_MODE", "sizes")],
    );
    assert!(ok && text.contains("PASS select_sizes"), "{text}");
    let line = text
        .lines()
        .find(|l| l.contains("size-aware 0->1: "))
        .unwrap_or_else(|| panic!("no size-aware line:\n{text}"));
    assert!(line.contains("(measured)"), "{line}");
    // Both stacks were used (the first messages open each).
    for stack in ["tcp", "udp"] {
        let n = chosen(&text, 0, 1, stack).unwrap_or_else(|| panic!("{stack}: {line}"));
        assert!(n > 0, "{stack}: {line}");
    }
}

#[test]
fn rendezvous_answers_and_rma_follow_the_communicators_route() {
    // Serial from the compile on: the tests write the same executable.
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(exe) = compiled() else { return };
    let (ok, text) = run(&exe, &[("GW_TEST_MODE", "route")]);
    assert!(ok && text.contains("PASS select_sizes"), "{text}");
    let sent = sent_line(&text);
    let rndv = field(sent, "rndv").unwrap();
    let get_bytes = field(sent, "get_bytes").unwrap();
    // Rank 1 sent nothing of its own on the udp communicator: what it
    // sent there are the answers, one clear-to-send per rendezvous and
    // the gets' data. They went on udp; tcp carried only the job's own
    // few messages (start-up, the communicator's set-up, finalize).
    let (udp_msgs, udp_bytes) =
        carried(&text, 1, 0, "udp").unwrap_or_else(|| panic!("no udp share of 1->0:\n{text}"));
    assert!(udp_msgs >= rndv, "udp carried {udp_msgs} of 1->0:\n{text}");
    assert!(
        udp_bytes >= get_bytes,
        "udp {udp_bytes} < {get_bytes}:\n{text}"
    );
    if let Some((tcp_msgs, tcp_bytes)) = carried(&text, 1, 0, "tcp") {
        assert!(
            tcp_msgs < rndv / 4 && tcp_bytes < get_bytes / 8,
            "tcp carried {tcp_msgs} msgs / {tcp_bytes} bytes of 1->0:\n{text}"
        );
    }
}
