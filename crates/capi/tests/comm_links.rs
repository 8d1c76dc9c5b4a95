//! Link hints per communicator (issue 13), through `gwrun`: the C program
//! `tests/mpi/comm_links.c` gives one communicator `gw_methods=udp` and
//! keeps another on the pair's default (tcp) between two emulated hosts,
//! interleaves checksummed, numbered messages on both (eager and
//! rendezvous, both ways, a collective), and checks hints in force and
//! bad values itself. Here: `--stats` shows the pair's bytes split between
//! udp and tcp as each communicator sent them; without udp the hint is
//! refused with `MPI_ERR_INFO_VALUE`; within one host nothing changes.
//!
//! Needs a C compiler (the project's skip rule otherwise).

mod common;

use common::{compile_mpi_test, gwrun, have_cc, run_with_backstop};
use gridwire_testkit::skip;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

/// The jobs share two cores: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn compiled() -> Option<PathBuf> {
    if !have_cc() {
        skip("comm_links: no C compiler (cc or GWCC_CC)");
        return None;
    }
    Some(compile_mpi_test("mpi-tests", "comm_links"))
}

struct Run {
    ok: bool,
    /// stdout then stderr (gwrun prints --stats on stderr).
    text: String,
}

/// `gwrun --stats -n 2` on `hosts` emulated hosts; gwrun's own `--timeout`
/// ends a hung job, and a backstop kills its process group after 120 s.
fn run(exe: &PathBuf, hosts: u32, env: &[(&str, &str)]) -> Run {
    let mut c = Command::new(gwrun());
    c.envs(env.iter().copied())
        .args(["--timeout", "90", "--stats", "-n", "2"]);
    if hosts > 1 {
        c.args(["--emulate-hosts", &hosts.to_string()]);
    }
    c.arg(exe);
    let (ok, out, err) = run_with_backstop(c, Duration::from_secs(120));
    Run {
        ok,
        text: format!("{out}\n{err}"),
    }
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

/// The `--stats` line of a pair on several methods: the bytes of stacks
/// `a` and `b` (exact names: `tcp` is not `encrypt+tcp`).
fn split_of(text: &str, from: u32, to: u32, a: &str, b: &str) -> Option<(u64, u64)> {
    let line = text
        .lines()
        .find(|l| l.contains(&format!("links {from}->{to} (several at once)")))?;
    let bytes = &line[line.find("(bytes:")?..];
    let exact = |name: &str| field(bytes, &format!(" {name}"));
    Some((exact(a)?, exact(b)?))
}

/// (tcp bytes, udp bytes) of a pair's `--stats` line.
fn split_bytes(text: &str, from: u32, to: u32) -> Option<(u64, u64)> {
    split_of(text, from, to, "tcp", "udp")
}

#[test]
fn one_communicator_on_udp_the_other_on_tcp() {
    let Some(exe) = compiled() else { return };
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let r = run(&exe, 2, &[]);
    assert!(r.ok && r.text.contains("PASS comm_links"), "{}", r.text);
    // Bad values: returned with their class (the program checks it).
    let refused: Vec<&str> = r
        .text
        .lines()
        .filter(|l| l.starts_with("REFUSED"))
        .collect();
    for what in ["gw_methods=carrier-pigeon", "gw_encrypt=maybe"] {
        assert!(
            refused
                .iter()
                .any(|l| l.contains(what) && l.contains("MPI_ERR_INFO_VALUE")),
            "{what}:\n{}",
            r.text
        );
    }
    let sent = r
        .text
        .lines()
        .find(|l| l.starts_with("SENT "))
        .unwrap_or_else(|| panic!("no SENT line:\n{}", r.text));
    let (on_udp, on_tcp) = (
        field(sent, "udp_comm").unwrap(),
        field(sent, "tcp_comm").unwrap(),
    );
    let (tcp, udp) = split_bytes(&r.text, 0, 1)
        .unwrap_or_else(|| panic!("--stats shows no split of 0->1:\n{}", r.text));
    // Each communicator's bytes on its own method: the payloads plus
    // headers, envelopes and the communicators' own set-up (well under
    // 256 KiB), never the other communicator's megabytes.
    let slack = 256 << 10;
    assert!(
        udp >= on_udp && udp < on_udp + slack,
        "udp carried {udp} bytes; the udp communicator sent {on_udp}\n{}",
        r.text
    );
    assert!(
        tcp >= on_tcp && tcp < on_tcp + slack,
        "tcp carried {tcp} bytes; the tcp communicator sent {on_tcp}\n{}",
        r.text
    );
    // The way back too (64 messages of 700 bytes on each).
    let (tcp_back, udp_back) = split_bytes(&r.text, 1, 0)
        .unwrap_or_else(|| panic!("--stats shows no split of 1->0:\n{}", r.text));
    assert!(udp_back >= 64 * 700 && tcp_back >= 64 * 700, "{}", r.text);
}

/// Under `MPI_ERRORS_ARE_FATAL` a bad value ends the job with a message
/// naming the call, the class, the key, the value and why.
#[test]
fn a_bad_value_is_a_clear_fatal_error() {
    let Some(exe) = compiled() else { return };
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let r = run(&exe, 2, &[("GW_TEST_FATAL", "1")]);
    assert!(!r.ok && !r.text.contains("PASS comm_links"), "{}", r.text);
    assert!(
        r.text.lines().any(|l| l.contains("MPI_Comm_dup_with_info")
            && l.contains("MPI_ERR_INFO_VALUE")
            && l.contains("gw_methods=\"carrier-pigeon\"")
            && l.contains("unknown method")),
        "{}",
        r.text
    );
    let r = run(
        &exe,
        2,
        &[
            ("GW_METHODS", "self,shm,tcp"),
            ("GW_TEST_NO_UDP", "1"),
            ("GW_TEST_FATAL", "1"),
        ],
    );
    assert!(!r.ok, "{}", r.text);
    assert!(
        r.text.lines().any(|l| l.contains("MPI_ERR_INFO_VALUE")
            && l.contains("gw_methods=\"udp\"")
            && l.contains("udp does not run in this process")),
        "{}",
        r.text
    );
}

/// Every link encrypted by policy (`GW_ENCRYPT=always`): `gw_methods=udp`
/// alone gives `encrypt+udp`, and with `gw_encrypt=off` plain `udp`, while
/// the other communicator stays on `encrypt+tcp`.
#[test]
fn gw_encrypt_overrides_the_policy_for_one_communicator() {
    let Some(exe) = compiled() else { return };
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let r = run(&exe, 2, &[("GW_ENCRYPT", "always"), ("GW_TEST_PLAIN", "1")]);
    assert!(r.ok && r.text.contains("PASS comm_links"), "{}", r.text);
    let (tcp, udp) = split_of(&r.text, 0, 1, "encrypt+tcp", "udp")
        .unwrap_or_else(|| panic!("no encrypt+tcp / plain udp split:\n{}", r.text));
    assert!(tcp > udp && udp > 1 << 20, "{}", r.text);
    assert!(!r.text.contains("encrypt+udp"), "{}", r.text);
}

#[test]
fn gw_methods_naming_a_method_not_running_is_refused() {
    let Some(exe) = compiled() else { return };
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let r = run(
        &exe,
        2,
        &[("GW_METHODS", "self,shm,tcp"), ("GW_TEST_NO_UDP", "1")],
    );
    assert!(r.ok && r.text.contains("PASS comm_links"), "{}", r.text);
    assert!(
        r.text
            .lines()
            .any(|l| l.starts_with("REFUSED gw_methods=udp without udp")
                && l.contains("MPI_ERR_INFO_VALUE")),
        "{}",
        r.text
    );
}

#[test]
fn within_a_host_the_hints_change_nothing() {
    let Some(exe) = compiled() else { return };
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let r = run(&exe, 1, &[]);
    assert!(r.ok && r.text.contains("PASS comm_links"), "{}", r.text);
    assert!(!r.text.contains("several at once"), "{}", r.text);
    assert!(r.text.contains("shm "), "{}", r.text);
}
