//! Failover of a link between sites: a testbed of 2 sites x 1 host, one
//! rank per host. Rank 0 streams 100 000 numbered messages to rank 1;
//! at a random point of the stream (rank 0 says where and pauses) the
//! test cuts the pair's tcp inside s0h0's network namespace with nftables
//! (`reject with tcp reset`, both ways), so the `encrypt+tcp` link breaks
//! mid-stream.
//!
//! Asserted:
//! - with the default methods the link fails over (to `encrypt+udp`), the
//!   job passes, rank 1 received every number exactly once and in order
//!   (and no message more), and `--stats` shows the new method;
//! - with only `encrypt+tcp` allowed (`GW_METHODS`), nothing applies after
//!   the cut: the job fails on its own, well before its `--timeout`, with
//!   an error naming the pair and the method tried.
//!
//! Needs root: skipped by the project's rule otherwise (a failure under CI=true).

use gridwire_testbed::harness::{self, run_with_timeout, Testbed};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

mod common;

const STREAM_C: &str = r#"
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define N 100000

int main(int argc, char **argv) {
    int rank, i, v, bad = 0, first_bad = -1, extra = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int cut_at = argc > 1 ? atoi(argv[1]) : N / 2;
    if (rank == 0) {
        for (i = 0; i < N; i++) {
            if (i == cut_at) {
                printf("CUT-NOW %d\n", i);
                fflush(stdout);
                sleep(3);
            }
            MPI_Send(&i, 1, MPI_INT, 1, 5, MPI_COMM_WORLD);
        }
    } else if (rank == 1) {
        for (i = 0; i < N; i++) {
            MPI_Recv(&v, 1, MPI_INT, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (v != i) {
                if (first_bad < 0) first_bad = i;
                bad++;
            }
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {
        /* Nothing may arrive beyond the N messages (no duplicate). */
        MPI_Iprobe(0, 5, MPI_COMM_WORLD, &extra, MPI_STATUS_IGNORE);
        printf("RECEIVED %d BAD %d FIRST_BAD %d EXTRA %d\n", N, bad, first_bad, extra);
        fflush(stdout);
    }
    MPI_Finalize();
    return bad || extra ? 1 : 0;
}
"#;

fn build_program(dir: &Path) -> PathBuf {
    let lib = common::build_libmpi().join("libmpi.so");
    std::fs::copy(&lib, dir.join("libmpi.so")).unwrap();
    let src = dir.join("stream.c");
    std::fs::write(&src, STREAM_C).unwrap();
    let prog = dir.join("stream_check");
    let gwcc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/gwcc");
    let out = run_with_timeout(
        std::process::Command::new(gwcc)
            .env("GW_MPI_LIBDIR", dir)
            .args(["-Wall", "-O1", "-o"])
            .arg(&prog)
            .arg(&src),
        Duration::from_secs(120),
    )
    .unwrap();
    assert!(
        out.status.success(),
        "gwcc stream.c: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    prog
}

/// The IPv4 addresses `host` resolves to on `from`.
fn addresses(tb: &Testbed, from: &str, host: &str) -> Vec<String> {
    let out = tb
        .exec_ok(from, &["getent", "ahostsv4", host])
        .unwrap_or_else(|e| panic!("{e}"));
    let mut v: Vec<String> = out
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(String::from))
        .collect();
    v.sort();
    v.dedup();
    assert!(!v.is_empty(), "{host} resolves to nothing on {from}");
    v
}

/// Rejects every tcp packet between s0h0 and `peer_addrs` (both ways) with
/// a reset, inside s0h0's network namespace.
fn cut_tcp(tb: &Testbed, peer_addrs: &[String]) {
    let set = peer_addrs.join(", ");
    let rules = format!(
        "table inet gwcut {{\n chain out {{\n  type filter hook output priority 0; policy accept;\n  ip daddr {{ {set} }} meta l4proto tcp reject with tcp reset\n }}\n chain in {{\n  type filter hook input priority 0; policy accept;\n  ip saddr {{ {set} }} meta l4proto tcp reject with tcp reset\n }}\n}}\n"
    );
    // On nft's stdin: the host's file system does not show the test's files.
    let mut child = tb
        .command("s0h0", &["nft", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(rules.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "cutting the pair's tcp: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn uncut(tb: &Testbed) {
    let _ = tb.exec("s0h0", &["nft", "delete", "table", "inet", "gwcut"]);
}

struct Outcome {
    ok: bool,
    stdout: String,
    stderr: String,
    elapsed: Duration,
    cut: bool,
}

/// Runs the stream with `env` and cuts the pair's tcp when rank 0 says.
fn run_stream(tb: &Testbed, gwrun: &str, prog: &str, env: &[&str], cut_at: u32) -> Outcome {
    let machines = tb.dir().join("machines").display().to_string();
    let cut_at = cut_at.to_string();
    let mut args: Vec<&str> = vec!["env"];
    args.extend_from_slice(env);
    args.extend_from_slice(&[
        gwrun,
        "-f",
        &machines,
        "-n",
        "2",
        "--stats",
        "--timeout",
        "90",
        prog,
        &cut_at,
    ]);
    let started = Instant::now();
    let mut child = tb
        .command("login", &args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line.clone());
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    let mut stderr_pipe = child.stderr.take().unwrap();
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr_pipe.read_to_string(&mut s);
        s
    });
    let peer = addresses(tb, "s0h0", "s1h0");
    let mut cut = false;
    let until = Instant::now() + Duration::from_secs(100);
    while Instant::now() < until {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(l) if l.contains("CUT-NOW") => {
                cut_tcp(tb, &peer);
                cut = true;
                break;
            }
            Ok(_) => {}
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    let status = loop {
        if let Ok(Some(s)) = child.try_wait() {
            break Some(s);
        }
        if Instant::now() > until {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let elapsed = started.elapsed();
    uncut(tb);
    Outcome {
        ok: status.is_some_and(|s| s.success()),
        stdout: reader.join().unwrap(),
        stderr: err_reader.join().unwrap(),
        elapsed,
        cut,
    }
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
    let prog = build_program(&dir);
    let tb = Testbed::up(&["--sites", "2", "--hosts", "1"]).unwrap_or_else(|e| panic!("{e}"));
    let (gwrun, prog) = (gwrun.display().to_string(), prog.display().to_string());
    // A random cut point, printed so a failure can be replayed.
    let cut_at = 20_000 + (std::process::id() * 7919) % 60_000;
    eprintln!("cutting at message {cut_at}");

    // 1. Default methods: encrypt+tcp breaks, the pair goes on over encrypt+udp.
    let o = run_stream(&tb, &gwrun, &prog, &["GW_LINK_TIMEOUT=3"], cut_at);
    let all = format!("{}\n{}", o.stdout, o.stderr);
    assert!(o.cut, "rank 0 never reached the cut point:\n{all}");
    assert!(o.ok, "the job failed after the cut:\n{all}");
    assert!(
        o.stdout
            .contains("RECEIVED 100000 BAD 0 FIRST_BAD -1 EXTRA 0"),
        "every number once, in order, nothing more:\n{all}"
    );
    assert!(
        all.contains("failing over") && all.contains("now over encrypt+udp"),
        "the link was replaced by encrypt+udp:\n{all}"
    );

    // 2. Only encrypt+tcp: nothing applies after the cut; the job fails by
    // itself with an error naming the pair, not by its 90 s timeout.
    let o = run_stream(
        &tb,
        &gwrun,
        &prog,
        &["GW_METHODS=self,shm,encrypt+tcp", "GW_LINK_TIMEOUT=3"],
        cut_at,
    );
    let all = format!("{}\n{}", o.stdout, o.stderr);
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
    drop(tb);
}
