//! What the failover tests share: the checked C programs, the cut of a
//! pair's traffic with nftables inside one host's namespace, and a run of
//! `gwrun -f` that cuts when a rank says so.

use gridwire_testbed::harness::{run_with_timeout, Testbed};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A stream of N numbered messages from the rank on host `argv[2]` to the
/// rank on host `argv[3]` (default: rank 0 to rank 1); at message
/// `argv[1]` the sender says `CUT-NOW` and pauses 3 s while the test cuts.
/// The receiver checks every number arrived once, in order, nothing more.
pub const STREAM_C: &str = r#"
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N 100000

int main(int argc, char **argv) {
    int rank, i, v, bad = 0, first_bad = -1, extra = 0, src = 0, dst = 1;
    char host[256] = "";
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    gethostname(host, sizeof host - 1);
    int cut_at = argc > 1 ? atoi(argv[1]) : N / 2;
    if (argc > 3) {
        int mine[2] = {strcmp(host, argv[2]) == 0 ? rank : -1,
                       strcmp(host, argv[3]) == 0 ? rank : -1}, found[2];
        MPI_Allreduce(mine, found, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        src = found[0];
        dst = found[1];
        if (src < 0 || dst < 0) MPI_Abort(MPI_COMM_WORLD, 4);
    }
    if (rank == src) {
        for (i = 0; i < N; i++) {
            if (i == cut_at) {
                printf("CUT-NOW %d\n", i);
                fflush(stdout);
                sleep(3);
            }
            MPI_Send(&i, 1, MPI_INT, dst, 5, MPI_COMM_WORLD);
        }
    } else if (rank == dst) {
        for (i = 0; i < N; i++) {
            MPI_Recv(&v, 1, MPI_INT, src, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (v != i) {
                if (first_bad < 0) first_bad = i;
                bad++;
            }
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == dst) {
        /* Nothing may arrive beyond the N messages (no duplicate). */
        MPI_Iprobe(src, 5, MPI_COMM_WORLD, &extra, MPI_STATUS_IGNORE);
        printf("RECEIVED %d BAD %d FIRST_BAD %d EXTRA %d\n", N, bad, first_bad, extra);
        fflush(stdout);
    }
    MPI_Finalize();
    return bad || extra ? 1 : 0;
}
"#;

/// Ping-pong between ranks 0 and 1 with the default error handler
/// (errors are fatal); at round `argv[1]` rank 0 says `CUT-NOW` and pauses
/// 3 s. After a cut nothing can be sent, so both end up in `MPI_Recv`.
pub const PINGPONG_C: &str = r#"
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define ROUNDS 4000

int main(int argc, char **argv) {
    int rank, i, v = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int cut_at = argc > 1 ? atoi(argv[1]) : ROUNDS / 2;
    for (i = 0; i < ROUNDS; i++) {
        if (rank == 0) {
            if (i == cut_at) {
                printf("CUT-NOW %d\n", i);
                fflush(stdout);
                sleep(3);
            }
            MPI_Send(&i, 1, MPI_INT, 1, 9, MPI_COMM_WORLD);
            MPI_Recv(&v, 1, MPI_INT, 1, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Recv(&v, 1, MPI_INT, 0, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(&v, 1, MPI_INT, 0, 9, MPI_COMM_WORLD);
        }
    }
    printf("PINGPONG-DONE %d\n", rank);
    MPI_Finalize();
    return 0;
}
"#;

/// Copies libmpi.so into `dir` (once) and builds `source` there with gwcc
/// as `name`; the program's path.
pub fn build_c(dir: &Path, name: &str, source: &str) -> PathBuf {
    let lib = dir.join("libmpi.so");
    if !lib.exists() {
        std::fs::copy(super::build_libmpi().join("libmpi.so"), &lib).unwrap();
    }
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, source).unwrap();
    let prog = dir.join(name);
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
        "gwcc {name}.c: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    prog
}

/// The IPv4 addresses `host` resolves to on `from`.
pub fn addresses(tb: &Testbed, from: &str, host: &str) -> Vec<String> {
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

/// How a pair's traffic is cut.
#[derive(Clone, Copy, Debug)]
pub enum Cut {
    /// tcp rejected with a reset, both ways (the connection breaks loudly).
    TcpReset,
    /// tcp dropped silently, both ways (only `GW_LINK_TIMEOUT` notices).
    TcpDrop,
    /// Every packet dropped silently, both ways (tcp and udp).
    AllDrop,
}

/// Cuts the traffic between `host` and `peer_addrs` as `how` says, with an
/// nftables table `gwcut` inside `host`'s network namespace.
pub fn cut(tb: &Testbed, host: &str, peer_addrs: &[String], how: Cut) {
    let set = peer_addrs.join(", ");
    let (out, inp) = match how {
        Cut::TcpReset => (
            format!("ip daddr {{ {set} }} meta l4proto tcp reject with tcp reset"),
            // The resets the output rule makes come in from the peer's
            // address: let them in, or the local socket never sees one.
            format!("ip saddr {{ {set} }} tcp flags & rst == 0 reject with tcp reset"),
        ),
        Cut::TcpDrop => (
            format!("ip daddr {{ {set} }} meta l4proto tcp drop"),
            format!("ip saddr {{ {set} }} meta l4proto tcp drop"),
        ),
        Cut::AllDrop => (
            format!("ip daddr {{ {set} }} drop"),
            format!("ip saddr {{ {set} }} drop"),
        ),
    };
    let rules = format!(
        "table inet gwcut {{\n chain out {{\n  type filter hook output priority 0; policy accept;\n  {out}\n }}\n chain in {{\n  type filter hook input priority 0; policy accept;\n  {inp}\n }}\n}}\n"
    );
    // On nft's stdin: the host's file system does not show the test's files.
    let mut child = tb
        .command(host, &["nft", "-f", "-"])
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
        "cutting the pair's traffic ({how:?}): {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

pub fn uncut(tb: &Testbed, host: &str) {
    let _ = tb.exec(host, &["nft", "delete", "table", "inet", "gwcut"]);
}

pub struct Outcome {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
    pub cut: bool,
}

impl Outcome {
    pub fn all(&self) -> String {
        format!("{}\n{}", self.stdout, self.stderr)
    }
}

/// What a run cuts: on `host`, the traffic with `peer` (a host name), as `how`.
pub struct CutPlan<'a> {
    pub host: &'a str,
    pub peer: &'a str,
    pub how: Cut,
}

/// Runs `gwrun -f MACHINES -n N --stats --timeout 90 PROG ARGS...` from
/// `login` with `env`, and cuts as `plan` says when a rank prints `CUT-NOW`.
pub fn run_and_cut(
    tb: &Testbed,
    gwrun: &str,
    n: u32,
    env: &[&str],
    prog_and_args: &[&str],
    plan: &CutPlan<'_>,
) -> Outcome {
    let machines = tb.dir().join("machines").display().to_string();
    let n = n.to_string();
    let mut args: Vec<&str> = vec!["env"];
    args.extend_from_slice(env);
    args.extend_from_slice(&[
        gwrun,
        "-f",
        &machines,
        "-n",
        &n,
        "--stats",
        "--timeout",
        "90",
    ]);
    args.extend_from_slice(prog_and_args);
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
    let peer = addresses(tb, plan.host, plan.peer);
    let mut cut_done = false;
    let until = Instant::now() + Duration::from_secs(100);
    while Instant::now() < until {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(l) if l.contains("CUT-NOW") => {
                cut(tb, plan.host, &peer, plan.how);
                cut_done = true;
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
    uncut(tb, plan.host);
    Outcome {
        ok: status.is_some_and(|s| s.success()),
        stdout: reader.join().unwrap(),
        stderr: err_reader.join().unwrap(),
        elapsed,
        cut: cut_done,
    }
}
