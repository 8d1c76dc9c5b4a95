//! The C test suite (`tests/mpi/*.c`): each program is compiled with `gwcc`
//! against this crate's `libmpi.so` and run under `gwrun` with several rank
//! counts, on one host and on two emulated hosts (so shared memory and TCP
//! are both used). Every program checks itself and prints `PASS <name>`.
//!
//! Needs a C compiler (`cc`, or `GWCC_CC`): without one each test follows the
//! project's skip rule (`gridwire_testkit::skip`: fails under `CI=true`, says
//! `SKIPPED` elsewhere). `GW_MPI_TEST_RANKS="1 2"` narrows the rank counts.

mod common;

use common::{gwrun, have_cc, profile_dir, repo};
use gridwire_testkit::skip;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The jobs share two cores: run one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// The suite's lock and C test `name` compiled, or `None` after the skip
/// rule (a failure under `CI=true`) when there is no C compiler.
fn serial_compiled(name: &str, extra: &[&str]) -> Option<(MutexGuard<'static, ()>, PathBuf)> {
    if !have_cc() {
        skip(&format!("{name}: no C compiler (cc or GWCC_CC)"));
        return None;
    }
    let g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    Some((g, compile(name, extra)))
}

fn compile(name: &str, extra: &[&str]) -> PathBuf {
    let out_dir = profile_dir().join("mpi-tests");
    std::fs::create_dir_all(&out_dir).unwrap();
    let exe = out_dir.join(name);
    let src = repo().join("tests/mpi").join(format!("{name}.c"));
    let out = Command::new(repo().join("scripts/gwcc"))
        .env("GW_MPI_LIBDIR", profile_dir())
        .args(["-Wall", "-O1", "-o"])
        .arg(&exe)
        .arg(&src)
        .args(extra)
        .output()
        .expect("gwcc runs");
    assert!(
        out.status.success(),
        "gwcc {name}.c failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

struct Run {
    ok: bool,
    stdout: String,
    stderr: String,
    secs: f64,
}

fn run(exe: &Path, n: u32, hosts: u32) -> Run {
    run_env(exe, n, hosts, &[])
}

fn run_env(exe: &Path, n: u32, hosts: u32, env: &[(&str, &str)]) -> Run {
    let mut c = Command::new(gwrun());
    c.envs(env.iter().copied());
    c.args(["--timeout", "60", "-n", &n.to_string()]);
    if hosts > 1 {
        c.args(["--emulate-hosts", &hosts.to_string()]);
    }
    c.arg(exe)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // Its own process group, so that the backstop below ends gwrun and the
    // ranks it started together.
    c.process_group(0);
    let t = Instant::now();
    let child = c.spawn().expect("gwrun starts");
    // gwrun enforces --timeout itself; this is the backstop.
    let (status, stdout, stderr) = wait_with_backstop(child, Duration::from_secs(90));
    Run {
        ok: status.success(),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
        secs: t.elapsed().as_secs_f64(),
    }
}

/// Waits for `child` (the leader of its own process group) and collects its
/// output; past `limit` kills the group and then reaps.
///
/// The kill happens in this thread and only while `try_wait` has not yet
/// reaped the child: an exited but unreaped child stays a zombie, so its pid,
/// and the process group id it leads, cannot be reused by another process
/// at the moment of the kill. (A separate timer thread that kills a pid once
/// a sleep ends could hit an unrelated process that got the pid after the
/// test finished.)
fn wait_with_backstop(mut child: Child, limit: Duration) -> (ExitStatus, Vec<u8>, Vec<u8>) {
    fn drain(r: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<Vec<u8>> {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut buf);
            }
            buf
        })
    }
    let out = drain(child.stdout.take());
    let err = drain(child.stderr.take());
    let deadline = Instant::now() + limit;
    let status = loop {
        match child.try_wait().expect("waiting for gwrun") {
            Some(st) => break st,
            None if Instant::now() >= deadline => {
                let pgid = child.id() as libc::pid_t;
                // SAFETY: kill(2) has no memory effects; `pgid` names the group
                // our unreaped child leads (see above: it cannot be reused yet).
                unsafe { libc::kill(-pgid, libc::SIGKILL) };
                break child.wait().expect("reaping gwrun");
            }
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    let stdout = out.join().unwrap_or_default();
    let mut stderr = err.join().unwrap_or_default();
    if Instant::now() >= deadline {
        stderr.extend_from_slice(
            format!("\n[c_suite: killed after {} s backstop]\n", limit.as_secs()).as_bytes(),
        );
    }
    (status, stdout, stderr)
}

fn ranks(default: &[u32]) -> Vec<u32> {
    match std::env::var("GW_MPI_TEST_RANKS") {
        Ok(s) => s
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect(),
        Err(_) => default.to_vec(),
    }
}

/// Runs `name` with each rank count on one host and on two emulated hosts.
fn suite(name: &str, extra: &[&str], counts: &[u32]) {
    let Some((_g, exe)) = serial_compiled(name, extra) else {
        return;
    };
    let mut failures = Vec::new();
    for n in ranks(counts) {
        for hosts in [1, 2] {
            if hosts > n {
                continue;
            }
            let r = run(&exe, n, hosts);
            let passed = r.ok && r.stdout.contains(&format!("PASS {name}"));
            eprintln!(
                "{name}: -n {n} hosts {hosts}: {} ({:.2} s)",
                if passed { "ok" } else { "FAILED" },
                r.secs
            );
            if !passed {
                failures.push(format!(
                    "-n {n} hosts {hosts}:\n--- stdout\n{}--- stderr\n{}",
                    r.stdout, r.stderr
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{name} failed:\n{}",
        failures.join("\n")
    );
}

const COUNTS: &[u32] = &[1, 2, 3, 4, 8];

#[test]
fn basic() {
    suite("basic", &[], COUNTS);
}

#[test]
fn p2p() {
    suite("p2p", &[], COUNTS);
}

/// Members thousands of nonblocking collectives ahead of a sleeping one
/// (the root of MPI_Ibcast, the non-roots of MPI_Ireduce): nothing lost.
#[test]
fn nbc_runahead() {
    suite("nbc_runahead", &[], &[2, 3]);
}

/// An error found when a request completes (a truncated receive, eager
/// and rendezvous) is raised on the request's communicator by every wait
/// and test call, not on the world's fatal handler.
#[test]
fn request_errors() {
    suite("request_errors", &[], &[2]);
}

/// Eager messages placed into posted receives (shared memory), unexpected
/// and truncated ones interleaved, around every size threshold.
#[test]
fn eager_place() {
    suite("eager_place", &[], &[2, 3]);
}

/// The same with every shared-memory placement and fragment setting the
/// path can take: medium messages as back-to-back fragments from 4 KiB
/// (each fragment copied into the receive), placement off, and
/// rendezvous data through the ring (no single copy: `H_DATA` pieces
/// placed fragment by fragment); also `p2p` and `basic` with fragments.
#[test]
fn eager_place_settings() {
    if !have_cc() {
        return skip("no C compiler (cc or GWCC_CC)");
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let settings: [&[(&str, &str)]; 3] = [
        &[("GW_SHM_PIPELINE_MIN", "4k")],
        &[("GW_SHM_PLACE_MIN", "1g"), ("GW_SHM_PIPELINE_MIN", "1g")],
        &[("GW_MPI_NO_CMA", "1"), ("GW_SHM_PIPELINE_MIN", "4k")],
    ];
    let exes: Vec<_> = ["eager_place", "p2p", "basic"]
        .into_iter()
        .map(|name| (name, compile(name, &[])))
        .collect();
    for env in settings {
        for (name, exe) in &exes {
            let r = run_env(exe, 2, 1, env);
            assert!(
                r.ok && r.stdout.contains(&format!("PASS {name}")),
                "{name} with {env:?}:\n{}\n{}",
                r.stdout,
                r.stderr
            );
        }
    }
}

/// Large messages within a host copied by both processes at once
/// (`engine/assist.rs`), at misaligned addresses, in windows, both ways,
/// truncated, noncontiguous and unexpected; on two hosts through the
/// runtime.
#[test]
fn cma_assist() {
    suite("cma_assist", &[], &[2, 3]);
}

/// The same program with every message above 4 KiB a two-part copy (the
/// smallest parts), and with the sender's help off; with `GW_MPI_DEBUG`
/// the receiver says when it first asks for help, which must happen on
/// one host (else the test above proved nothing about the path).
#[test]
fn cma_assist_settings() {
    let Some((_g, exe)) = serial_compiled("cma_assist", &[]) else {
        return;
    };
    let settings: [&[(&str, &str)]; 2] = [
        &[
            ("GW_MPI_EAGER_SHM", "4096"),
            ("GW_MPI_CMA_ASSIST_MIN", "4097"),
            ("GW_MPI_DEBUG", "1"),
        ],
        &[("GW_MPI_CMA_ASSIST_MIN", "1g"), ("GW_MPI_DEBUG", "1")],
    ];
    for (i, env) in settings.iter().enumerate() {
        let r = run_env(&exe, 2, 1, env);
        assert!(
            r.ok && r.stdout.contains("PASS cma_assist"),
            "cma_assist with {env:?}:\n{}\n{}",
            r.stdout,
            r.stderr
        );
        if r.stderr.contains("single copy from") && r.stderr.contains("refused") {
            return skip("process_vm_readv is not permitted between the ranks here");
        }
        let helped = r.stderr.contains("made with the sender's help");
        assert_eq!(
            helped,
            i == 0,
            "with {env:?} the two-part copy was {}used:\n{}",
            if helped { "" } else { "not " },
            r.stderr
        );
    }
}

/// A first message is seen by a program that probes between blocks of work
/// (tests/mpi/probe_pace.c: HPL's ring broadcasts).
#[test]
fn probe_pace() {
    suite("probe_pace", &[], &[2, 3]);
}

#[test]
fn comm() {
    suite("comm", &[], COUNTS);
}

#[test]
fn coll() {
    suite("coll", &[], COUNTS);
}

/// Small collectives through a one-host communicator's shared segment
/// (tests/mpi/coll_sm.c), and the same program with the segment off
/// (`GW_MPI_COLL_SM=0`: it then asserts that messages carried them).
#[test]
fn coll_sm() {
    suite("coll_sm", &[], &[1, 2, 3, 4]);
    let Some((_g, exe)) = serial_compiled("coll_sm", &[]) else {
        return;
    };
    let r = run_env(&exe, 2, 1, &[("GW_MPI_COLL_SM", "0")]);
    assert!(
        r.ok && r.stdout.contains("PASS coll_sm") && r.stdout.contains("coll_sm: messages"),
        "coll_sm with GW_MPI_COLL_SM=0:\n--- stdout\n{}--- stderr\n{}",
        r.stdout,
        r.stderr
    );
}

/// Intercommunicators between the even and the odd ranks: creation,
/// point-to-point, merge, dup/split/create and every collective.
#[test]
fn intercomm() {
    suite("intercomm", &[], &[2, 3, 4]);
}

/// Dynamic processes: `MPI_Comm_spawn` and `_spawn_multiple` of copies of
/// the program, talking over the parent intercommunicator; spawn errors.
#[test]
fn spawn() {
    suite("spawn", &[], &[1, 2, 3]);
}

/// Ports, names and `MPI_Comm_join` within a job: the halves of the world
/// connect through a published port (a wrong token is refused), two ranks
/// join over a socket.
#[test]
fn dynproc() {
    suite("dynproc", &[], &[2, 3, 4]);
}

/// Spawn info keys `wdir`, `path`, `host` (an emulated host), an unknown
/// key ignored, and refusals of a bad `wdir` or `host`.
#[test]
fn spawn_info() {
    suite("spawn_info", &[], &[1, 3]);
}

/// The name server outlives a job: one gwrun job publishes a port through
/// `gw-nameserver`, a second finds it there (and connecting to the port of
/// the job that ended is `MPI_ERR_PORT`).
#[test]
fn dynproc_two_jobs() {
    let Some((_g, exe)) = serial_compiled("dynproc", &[]) else {
        return;
    };
    let ns = common::launcher_bin("gw-nameserver");
    let mut server = Command::new(&ns)
        .arg("127.0.0.1:0")
        .stdout(Stdio::piped())
        .spawn()
        .expect("gw-nameserver starts");
    let mut first = [0u8; 128];
    let n = server.stdout.as_mut().unwrap().read(&mut first).unwrap();
    let line = String::from_utf8_lossy(&first[..n]).into_owned();
    let addr = line
        .trim()
        .rsplit(' ')
        .next()
        .expect("the server says where it listens")
        .to_string();
    let env = [("GW_NAMESERVER", addr.as_str())];
    let publish = run_env_args(&exe, 2, &env, &["publish", "svc-two-jobs"]);
    let lookup = run_env_args(&exe, 2, &env, &["lookup", "svc-two-jobs"]);
    let _ = server.kill();
    let _ = server.wait();
    assert!(
        publish.ok && publish.stdout.contains("PASS dynproc-publish"),
        "{}{}",
        publish.stdout,
        publish.stderr
    );
    assert!(
        lookup.ok && lookup.stdout.contains("PASS dynproc-lookup"),
        "{}{}",
        lookup.stdout,
        lookup.stderr
    );
}

fn run_env_args(exe: &Path, n: u32, env: &[(&str, &str)], args: &[&str]) -> Run {
    let t = Instant::now();
    let child = Command::new(gwrun())
        .envs(env.iter().copied())
        .args(["--timeout", "60", "-n", &n.to_string()])
        .arg(exe)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("gwrun starts");
    let (status, stdout, stderr) = wait_with_backstop(child, Duration::from_secs(90));
    Run {
        ok: status.success(),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
        secs: t.elapsed().as_secs_f64(),
    }
}

/// The MPI-1 names removed in MPI-3 (`MPI_Errhandler_set`, `MPI_Type_struct`, ...).
#[test]
fn legacy() {
    suite("legacy", &[], &[1, 2]);
}

/// Persistent collectives (`MPI_Bcast_init`, ...): several rounds of
/// `MPI_Start`/`MPI_Startall` with new data, inactive requests.
#[test]
fn persistent() {
    suite("persistent", &[], &[1, 2, 3, 4]);
}

#[test]
fn nbc() {
    suite("nbc", &[], COUNTS);
}

#[test]
fn topo() {
    suite("topo", &[], &[1, 2, 4, 6]);
}

#[test]
fn graph() {
    suite("graph", &[], &[1, 2, 3, 5]);
}

#[test]
fn neighbor() {
    suite("neighbor", &[], &[1, 2, 3, 4, 6]);
}

#[test]
fn dtype() {
    suite("dtype", &[], &[1, 2, 3, 4]);
}

/// Generalized requests: local to each rank, so few rank counts.
#[test]
fn grequest() {
    suite("grequest", &["-pthread"], &[1, 2]);
}

#[test]
fn darray() {
    suite("darray", &[], &[1, 2, 3, 4, 6]);
}

#[test]
fn largecount() {
    suite("largecount", &[], &[1, 2]);
}

#[test]
fn external32() {
    suite("external32", &[], &[1, 2]);
}

#[test]
fn cancel() {
    suite("cancel", &[], &[1, 2, 3]);
}

/// `MPI_MINLOC`/`MPI_MAXLOC` on every predefined pair type, `MPI_LONG_DOUBLE_INT` included.
#[test]
fn pairloc() {
    suite("pairloc", &[], &[1, 2, 3, 4]);
}

/// `MPI_Comm_idup` amid other nonblocking collectives on the parent and on
/// a sub-communicator (each duplicate its own context; once a hang).
#[test]
fn idup() {
    suite("idup", &[], &[1, 2, 4]);
}

#[test]
fn attr() {
    suite("attr", &[], &[1, 2, 3]);
}

/// One-sided communication: every window flavor and synchronization mode.
#[test]
fn rma() {
    suite("rma", &[], &[1, 2, 4]);
}

/// One-sided communication when other ranks are reached only by tcp or
/// only by udp (each operation and its answer then cross a socket), and
/// over shared memory without loads and stores (`GW_MPI_RMA_DIRECT=0`).
#[test]
fn rma_over_tcp_and_udp() {
    let Some((_g, exe)) = serial_compiled("rma", &[]) else {
        return;
    };
    for methods in ["self,tcp", "self,udp"] {
        for (n, hosts) in [(2, 1), (4, 2)] {
            must_pass(&exe, "rma", n, hosts, &[("GW_METHODS", methods)]);
        }
    }
    // And over shared memory with every operation a request to the target.
    must_pass(&exe, "rma", 3, 1, &[("GW_MPI_RMA_DIRECT", "0")]);
}

/// Puts and gets on `MPI_Win_allocate` windows are loads and stores
/// between ranks of a host that talk over shared memory, and only then:
/// the program tells the two apart (see tests/mpi/rma_direct.c).
#[test]
fn rma_direct_load_store() {
    let Some((_g, exe)) = serial_compiled("rma_direct", &[]) else {
        return;
    };
    let cases: &[(&str, &str, &str, u32, u32)] = &[
        // (expect direct, GW_MPI_RMA_DIRECT, GW_METHODS, ranks, hosts)
        ("1", "1", "", 2, 1),
        ("1", "1", "", 4, 1),
        ("1", "1", "", 4, 2),
        ("0", "0", "", 3, 1),
        ("0", "1", "self,tcp", 2, 1),
    ];
    for &(expect, direct, methods, n, hosts) in cases {
        let mut env = vec![
            ("GW_MPI_RMA_PROGRESS", "none"),
            ("GW_TEST_EXPECT_DIRECT", expect),
            ("GW_MPI_RMA_DIRECT", direct),
        ];
        if !methods.is_empty() {
            env.push(("GW_METHODS", methods));
        }
        must_pass(&exe, "rma_direct", n, hosts, &env);
    }
}

/// Puts and gets on windows over the program's memory (`MPI_Win_create`,
/// dynamic) are single copies by the origin between ranks of a host that
/// talk over shared memory, and only then (see tests/mpi/rma_single_copy.c).
#[test]
fn rma_single_copy() {
    let Some((_g, exe)) = serial_compiled("rma_single_copy", &[]) else {
        return;
    };
    let cases: &[(&str, &str, &str, u32, u32)] = &[
        // (expect single copies, GW_MPI_RMA_DIRECT, GW_METHODS, ranks, hosts)
        ("1", "1", "", 2, 1),
        ("1", "1", "", 3, 1),
        ("0", "0", "", 2, 1),
        ("0", "1", "self,tcp", 2, 1),
    ];
    for &(expect, direct, methods, n, hosts) in cases {
        let mut env = vec![
            ("GW_MPI_RMA_PROGRESS", "none"),
            ("GW_TEST_EXPECT_DIRECT", expect),
            ("GW_MPI_RMA_DIRECT", direct),
        ];
        if !methods.is_empty() {
            env.push(("GW_METHODS", methods));
        }
        must_pass(&exe, "rma_single_copy", n, hosts, &env);
    }
}

/// Large gets from every rank to every other at once, some as `MPI_Rget`,
/// one into a strided buffer and one into a larger one, every byte checked
/// (and the bytes around each get's part of the buffer): over tcp their
/// answers are read straight into the result buffer, and the program checks
/// that some were (`gw_mpi_rma_placed_answers`); on shared memory the same
/// gets by loads and stores, single copies or requests (see
/// tests/mpi/rma_large_get.c). Large gets are paced (at most
/// `GW_MPI_RMA_GETS_IN_FLIGHT` bytes of answers asked of a target at a
/// time): also with one at a time, and with no bound.
#[test]
fn rma_large_get() {
    let Some((_g, exe)) = serial_compiled("rma_large_get", &[]) else {
        return;
    };
    let cases: &[(&str, &str, &str, u32, u32)] = &[
        // (expect placed answers, GW_METHODS, GW_MPI_RMA_GETS_IN_FLIGHT
        // or GW_MPI_RMA_LARGE_GETS, ranks, hosts)
        ("1", "", "8m", 2, 2),
        ("1", "", "8m", 4, 2),
        // One large get in flight per target at a time: every later one
        // is held and sent when the one before completes.
        ("1", "", "1", 2, 2),
        ("1", "", "0", 2, 2),
        // Answers copied out of the window, not lent from it.
        ("1", "", "large_gets=0", 4, 2),
        ("1", "self,tcp", "8m", 2, 1),
        ("0", "", "8m", 3, 1),
    ];
    for &(expect, methods, in_flight, n, hosts) in cases {
        let mut env = vec![("GW_TEST_EXPECT_PLACED", expect)];
        match in_flight.strip_prefix("large_gets=") {
            Some(v) => env.push(("GW_MPI_RMA_LARGE_GETS", v)),
            None => env.push(("GW_MPI_RMA_GETS_IN_FLIGHT", in_flight)),
        }
        if !methods.is_empty() {
            env.push(("GW_METHODS", methods));
        }
        must_pass(&exe, "rma_large_get", n, hosts, &env);
    }
}

/// Large puts from every rank to every other at once, in lock_all and
/// exclusive epochs, with strided origin and target types among them, the
/// origin buffers overwritten right after the flush, every byte of every
/// window checked (guard bytes included): over tcp their data is read
/// straight into the window and the origin buffers are lent, and the
/// program checks that some puts were placed (`gw_mpi_rma_placed_puts`);
/// with `GW_MPI_RMA_LARGE_PUTS=0` the same puts are copied (see
/// tests/mpi/rma_large_put.c).
#[test]
fn rma_large_put() {
    let Some((_g, exe)) = serial_compiled("rma_large_put", &[]) else {
        return;
    };
    let cases: &[(&str, &str, &str, u32, u32)] = &[
        // (expect placed puts, GW_METHODS, GW_MPI_RMA_LARGE_PUTS, ranks, hosts)
        ("1", "", "1", 2, 2),
        ("1", "", "1", 4, 2),
        ("1", "self,tcp", "1", 2, 1),
        ("0", "", "0", 2, 2),
        ("0", "", "1", 3, 1),
    ];
    for &(expect, methods, large, n, hosts) in cases {
        let mut env = vec![
            ("GW_TEST_EXPECT_PLACED", expect),
            ("GW_MPI_RMA_LARGE_PUTS", large),
        ];
        if !methods.is_empty() {
            env.push(("GW_METHODS", methods));
        }
        must_pass(&exe, "rma_large_put", n, hosts, &env);
    }
}

/// Post/start/complete/wait epochs between every pair of ranks whose
/// puts (8 B to 1 MiB), accumulates and gets must all have landed when
/// `MPI_Win_wait` returns, checked byte by byte right then: over tcp and
/// udp between 2 hosts, over shared memory, and with large gets held by
/// the origin's pacing when it completes (see tests/mpi/rma_pscw.c).
#[test]
fn rma_pscw() {
    let Some((_g, exe)) = serial_compiled("rma_pscw", &[]) else {
        return;
    };
    let cases: &[(&str, &str, u32, u32)] = &[
        // (GW_METHODS, GW_MPI_RMA_GETS_IN_FLIGHT, ranks, hosts)
        ("", "8m", 2, 2),
        ("", "64k", 3, 2),
        ("self,udp", "64k", 2, 2),
        ("", "8m", 3, 1),
        ("self,tcp", "64k", 2, 1),
    ];
    for &(methods, in_flight, n, hosts) in cases {
        let mut env = vec![("GW_MPI_RMA_GETS_IN_FLIGHT", in_flight)];
        if !methods.is_empty() {
            env.push(("GW_METHODS", methods));
        }
        if methods.is_empty() && (n, hosts) == (2, 2) {
            // One tcp message per small epoch each way (the put carries
            // the complete; no answer).
            env.push(("GW_TEST_EXPECT_EPOCH_MSGS", "1"));
        }
        must_pass(&exe, "rma_pscw", n, hosts, &env);
    }
}

/// Dynamic windows whose attached regions change between epochs: origins
/// see every attach and detach (a put to detached memory is refused and
/// changes nothing, one to newly attached memory lands), by single copies
/// on one host, across two hosts, and with requests only (see
/// tests/mpi/rma_dyn_regions.c).
#[test]
fn rma_dyn_regions() {
    let Some((_g, exe)) = serial_compiled("rma_dyn_regions", &[]) else {
        return;
    };
    let cases: &[(&str, u32, u32)] = &[
        // (GW_MPI_RMA_DIRECT, ranks, hosts)
        ("1", 2, 1),
        ("1", 3, 1),
        ("1", 4, 2),
        ("0", 2, 1),
    ];
    for &(direct, n, hosts) in cases {
        must_pass(
            &exe,
            "rma_dyn_regions",
            n,
            hosts,
            &[("GW_MPI_RMA_DIRECT", direct)],
        );
    }
}

/// Puts and gets by single copies are deferred to the next synchronization
/// and issued together; every synchronization completes them, request-based
/// ones complete at their request, and mixed operations keep program order
/// (see tests/mpi/rma_deferred.c); the same with requests only.
#[test]
fn rma_deferred() {
    let Some((_g, exe)) = serial_compiled("rma_deferred", &[]) else {
        return;
    };
    for &(direct, n) in &[("1", 2), ("1", 3), ("0", 2)] {
        must_pass(&exe, "rma_deferred", n, 1, &[("GW_MPI_RMA_DIRECT", direct)]);
    }
}

/// Accumulates to a member of the host go as requests while it polls inside
/// MPI and by single copies otherwise: the same results, in order, while the
/// target polls, computes, or alternates (see tests/mpi/rma_acc_choice.c).
#[test]
fn rma_acc_choice() {
    let Some((_g, exe)) = serial_compiled("rma_acc_choice", &[]) else {
        return;
    };
    let cases: &[(&str, &str, u32)] = &[
        // (window flavour, GW_MPI_RMA_ACC_CHOICE, ranks)
        ("create", "1", 3),
        ("dynamic", "1", 2),
        ("create", "0", 2),
    ];
    for &(flavour, choice, n) in cases {
        must_pass(
            &exe,
            "rma_acc_choice",
            n,
            1,
            &[
                ("GW_TEST_FLAVOUR", flavour),
                ("GW_MPI_RMA_ACC_CHOICE", choice),
            ],
        );
    }
}

/// One-sided calls from several threads at once on windows of each kind
/// that has a fast path (see tests/mpi/rma_threads.c), on one host and on two.
#[test]
fn rma_threads() {
    let Some((_g, exe)) = serial_compiled("rma_threads", &["-pthread"]) else {
        return;
    };
    must_pass(&exe, "rma_threads", 2, 1, &[]);
    must_pass(&exe, "rma_threads", 3, 1, &[]);
    must_pass(&exe, "rma_threads", 2, 2, &[("GW_TEST_ROUNDS", "30")]);
}

/// Runs `exe` (the C test `name`) with `env` under `gwrun -n n` on `hosts`
/// emulated hosts and asserts that it passed, naming the case if not.
fn must_pass(exe: &Path, name: &str, n: u32, hosts: u32, env: &[(&str, &str)]) {
    let r = run_env(exe, n, hosts, env);
    eprintln!("{name}: {env:?} -n {n} hosts {hosts}: {:.2} s", r.secs);
    assert!(
        r.ok && r.stdout.contains(&format!("PASS {name}")),
        "{name} with {env:?} -n {n} hosts {hosts}:\n{}\n{}",
        r.stdout,
        r.stderr
    );
}

/// Passive-target epochs complete while the target computes without
/// calling MPI (the one-sided progress thread), on shm, tcp and udp; and
/// with `GW_MPI_RMA_PROGRESS=none` they do not (the program checks both).
#[test]
fn rma_passive_progress() {
    let Some((_g, exe)) = serial_compiled("rma_passive", &[]) else {
        return;
    };
    let cases: &[(&str, &str, u32, u32)] = &[
        ("thread", "", 2, 1),
        ("thread", "", 3, 1),
        ("thread", "self,tcp", 3, 2),
        ("thread", "self,udp", 2, 2),
        ("none", "", 2, 1),
        ("none", "self,tcp", 2, 2),
    ];
    for &(mode, methods, n, hosts) in cases {
        let mut env = vec![("GW_MPI_RMA_PROGRESS", mode)];
        if !methods.is_empty() {
            env.push(("GW_METHODS", methods));
        }
        must_pass(&exe, "rma_passive", n, hosts, &env);
    }
}

/// Point-to-point, collectives and one-sided operations when the links
/// between (emulated) hosts are `encrypt+tcp` and `compress+encrypt+udp`
/// (issue 13's transforms; GW_COMPRESS_MIN low so compression runs on
/// messages of the suite's sizes).
#[test]
fn mpi_over_transform_stacks() {
    if !have_cc() {
        return skip("no C compiler (cc or GWCC_CC)");
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for name in ["p2p", "coll", "rma"] {
        let exe = compile(name, &[]);
        for env in [
            &[("GW_ENCRYPT", "always")][..],
            &[
                ("GW_METHODS", "self,shm,compress+encrypt+udp"),
                ("GW_COMPRESS_MIN", "64"),
            ][..],
        ] {
            must_pass(&exe, name, 4, 2, env);
        }
    }
}

/// Messages to itself on duplicates of `MPI_COMM_SELF` (mprobe/improbe/mrecv,
/// the pattern of mpi4py's `test_util_pkl5`).
#[test]
fn selfmsg() {
    suite("selfmsg", &[], &[1, 2, 4]);
}

#[test]
fn threads() {
    suite("threads", &["-pthread"], &[1, 2, 4]);
}

/// Rendezvous without the single-copy path (as where `process_vm_readv` is
/// not permitted): the data then comes through the runtime (`CTS`/`DATA`).
#[test]
fn rendezvous_without_single_copy() {
    if !have_cc() {
        return skip("no C compiler (cc or GWCC_CC)");
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for name in ["basic", "p2p", "dtype"] {
        let exe = compile(name, &[]);
        let r = run_env(&exe, 3, 1, &[("GW_MPI_NO_CMA", "1")]);
        assert!(
            r.ok && r.stdout.contains(&format!("PASS {name}")),
            "{name}:\n{}\n{}",
            r.stdout,
            r.stderr
        );
    }
}

/// Every wait sleeps at once (no spinning, no yielding), on four emulated
/// hosts: each message, each new connection and the finalize barrier must
/// wake a rank that sleeps on its sockets (tcp registers its connections
/// with epoll only around such sleeps).
#[test]
fn sleeping_waits_over_tcp() {
    if !have_cc() {
        return skip("no C compiler (cc or GWCC_CC)");
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let sleep_at_once = [
        ("GW_SPIN_US", "0"),
        ("GW_SPIN_ITERS", "0"),
        ("GW_YIELD_US", "0"),
    ];
    for name in ["p2p", "coll", "nbc"] {
        let exe = compile(name, &[]);
        let r = run_env(&exe, 4, 4, &sleep_at_once);
        eprintln!("{name}: -n 4 hosts 4, sleeping waits: {:.2} s", r.secs);
        assert!(
            r.ok && r.stdout.contains(&format!("PASS {name}")),
            "{name}:\n{}\n{}",
            r.stdout,
            r.stderr
        );
    }
}

/// Idle waits give the core back (tests/mpi/idle_wait.c: every rank pinned
/// to one CPU, rank 0 computes, the others wait in receives, barriers and
/// broadcasts; each waiter's CPU time must stay under a quarter of rank 0's
/// work). With `GW_SPIN_US=0` the MPI layer's waits follow the runtime's
/// (before, a host of 2 ranks on 2 cores spun 2 ms per MPI wait whatever
/// `GW_SPIN_US` said); over 2 emulated hosts too (waits sleep on sockets);
/// on a machine of at most 3 cores, 4 ranks also with the automatic rule.
#[test]
fn idle_waits_give_the_core_back() {
    let Some((_g, exe)) = serial_compiled("idle_wait", &[]) else {
        return;
    };
    let no_spin = [("GW_SPIN_US", "0")];
    must_pass(&exe, "idle_wait", 2, 1, &no_spin);
    must_pass(&exe, "idle_wait", 4, 1, &no_spin);
    must_pass(&exe, "idle_wait", 3, 2, &no_spin);
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 4 {
        must_pass(&exe, "idle_wait", 4, 1, &[]);
    }
}

/// The default error handler aborts the job with a message naming the
/// function, the error class and the rank.
#[test]
fn errors_are_fatal() {
    let Some((_g, exe)) = serial_compiled("fatal", &[]) else {
        return;
    };
    let r = run(&exe, 2, 1);
    assert!(!r.ok, "the job should fail");
    assert!(!r.stdout.contains("NOT REACHED"), "{}", r.stdout);
    for want in ["rank 0", "MPI_Send", "MPI_ERR_RANK", "invalid rank"] {
        assert!(
            r.stderr.contains(want),
            "stderr lacks {want:?}:\n{}",
            r.stderr
        );
    }
}

/// `gwcc -show` prints the compile line with our include and library directories.
#[test]
fn gwcc_show() {
    let out = Command::new(repo().join("scripts/gwcc"))
        .env("GW_MPI_LIBDIR", profile_dir())
        .args(["-show", "-o", "x", "x.c"])
        .output()
        .unwrap();
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(
        s.contains(&format!("-I{}", repo().join("include").display())),
        "{s}"
    );
    assert!(s.contains("-lmpi") && s.contains("-Wl,-rpath,"), "{s}");
}

/// A link line that names another directory holding a `libmpi.so` (Debian's
/// Python adds `/usr/lib/x86_64-linux-gnu`, where Open MPI's is, to every
/// extension it builds) still links gridwire's library: mpi4py built that
/// way loaded Open MPI and failed on the first MPI-4 symbol.
#[test]
fn gwcc_links_ours_before_other_library_dirs() {
    if !have_cc() {
        return skip("no C compiler (cc or GWCC_CC)");
    }
    let dir = profile_dir().join("gwcc-libdir-test");
    let other = dir.join("other");
    std::fs::create_dir_all(&other).unwrap();
    // A decoy libmpi.so (with its own SONAME) in the directory the caller names.
    let decoy_src = dir.join("decoy.c");
    std::fs::write(
        &decoy_src,
        "int MPI_Init(int *c, char ***v) { (void)c; (void)v; return 99; }\n",
    )
    .unwrap();
    let st = Command::new("cc")
        .args(["-shared", "-fPIC", "-Wl,-soname,libdecoympi.so", "-o"])
        .arg(other.join("libmpi.so"))
        .arg(&decoy_src)
        .status()
        .unwrap();
    assert!(st.success(), "building the decoy library");
    let src = dir.join("uses_mpi.c");
    std::fs::write(
        &src,
        "#include <mpi.h>\nint main(void) { return MPI_Abi_get_version(0, 0) == MPI_SUCCESS ? 0 : 1; }\n",
    )
    .unwrap();
    let exe = dir.join("uses_mpi");
    let out = Command::new(repo().join("scripts/gwcc"))
        .env("GW_MPI_LIBDIR", profile_dir())
        .arg(format!("-L{}", other.display()))
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "gwcc failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let needed = Command::new("readelf")
        .arg("-d")
        .arg(&exe)
        .output()
        .unwrap();
    let needed = String::from_utf8_lossy(&needed.stdout);
    assert!(
        !needed.contains("libdecoympi"),
        "linked the other directory's libmpi.so:\n{needed}"
    );
    assert!(
        needed.contains("[libmpi.so]"),
        "does not need gridwire's libmpi.so:\n{needed}"
    );
}

/// `MPI_Comm_spawn` of a gridwire program under MPICH's Hydra
/// (`mpiexec.mpich` serves PMI-1 `mcmd=spawn`): the children are a job of
/// their own and connect to the parents' port, which Hydra puts into their
/// key-value space; checksummed messages both ways, merge, allreduce
/// (`tests/mpi/spawn_grid.c once`), with 1 and 2 parents; a missing
/// program is `MPI_ERR_SPAWN` (`missing`).
#[test]
fn spawn_under_hydra() {
    let run = "mpiexec.mpich";
    if Command::new(run).arg("--version").output().is_err() {
        return skip("MPICH's mpiexec.mpich not installed");
    }
    let Some((_g, exe)) = serial_compiled("spawn_grid", &[]) else {
        return;
    };
    for n in ["1", "2"] {
        let out = Command::new("timeout")
            .args(["60", run, "-n", n])
            .arg(&exe)
            .arg("once")
            .env_remove("GW_WORLD")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let so = String::from_utf8_lossy(&out.stdout);
        let spawned = so.lines().filter(|l| l.starts_with("SPAWNED ")).count();
        assert!(
            out.status.success() && so.contains("PASS spawn_grid once") && spawned == 4,
            "spawn under Hydra with {n} parents:\n{so}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // A program Hydra cannot start never connects: MPI_ERR_SPAWN after
    // GW_MPI_CONNECT_TIMEOUT (Hydra itself says "execvp error").
    let out = Command::new("timeout")
        .args(["60", run, "-n", "2", "-genv", "GW_MPI_CONNECT_TIMEOUT", "3"])
        .arg(&exe)
        .arg("missing")
        .env_remove("GW_WORLD")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let so = String::from_utf8_lossy(&out.stdout);
    assert!(
        so.contains("PASS spawn_grid missing"),
        "a missing program under Hydra:\n{so}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The same sources build with MPICH's compiler and pass under its launcher
/// (the tests are portable MPI); skipped where MPICH is not installed.
#[test]
fn same_tests_pass_on_mpich() {
    let (cc, run) = ("mpicc.mpich", "mpiexec.mpich");
    if Command::new(cc).arg("-show").output().is_err()
        || Command::new(run).arg("--version").output().is_err()
    {
        return skip("MPICH (mpicc.mpich, mpiexec.mpich) not installed");
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = profile_dir().join("mpi-tests-mpich");
    std::fs::create_dir_all(&dir).unwrap();
    for name in [
        "basic", "p2p", "coll", "comm", "dtype", "nbc", "topo", "legacy", "pairloc", "idup",
    ] {
        let exe = dir.join(name);
        let st = Command::new(cc)
            .args(["-O1", "-o"])
            .arg(&exe)
            .arg(repo().join("tests/mpi").join(format!("{name}.c")))
            .status()
            .unwrap();
        assert!(st.success(), "{cc} {name}.c");
        let out = Command::new("timeout")
            .args(["60", run, "-n", "3"])
            .arg(&exe)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let so = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && so.contains(&format!("PASS {name}")),
            "{name} under MPICH:\n{so}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// `make -f mk/mpi.mk install-mpi-files` lays out bin/ include/ lib/ like
/// other MPIs; the installed `mpicc` and `mpiexec` work, pkg-config answers,
/// and CMake's `find_package(MPI)` finds it through `gwcc`.
#[test]
fn install_layout_mpicc_pkgconfig_cmake() {
    if !have_cc() || Command::new("make").arg("--version").output().is_err() {
        return skip("no C compiler or no make");
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    gwrun();
    let prefix = profile_dir().join("mpi-install-test");
    let _ = std::fs::remove_dir_all(&prefix);
    let st = Command::new("make")
        .current_dir(repo())
        .args(["-s", "-f", "mk/mpi.mk", "install-mpi-files"])
        .arg(format!("PREFIX={}", prefix.display()))
        .arg(format!("MPI_TARGET_DIR={}", profile_dir().display()))
        .status()
        .unwrap();
    assert!(st.success(), "make install-mpi-files");
    for f in [
        "bin/gwcc",
        "bin/mpicc",
        "bin/gwrun",
        "bin/mpiexec",
        "bin/mpirun",
        "include/mpi.h",
        "lib/libmpi.so",
        "lib/libmpi_abi.so",
        "lib/pkgconfig/mpi.pc",
    ] {
        assert!(prefix.join(f).exists(), "{f} not installed");
    }
    let exe = prefix.join("basic");
    let st = Command::new(prefix.join("bin/mpicc"))
        .env_remove("GW_MPI_LIBDIR")
        .arg("-o")
        .arg(&exe)
        .arg(repo().join("tests/mpi/basic.c"))
        .status()
        .unwrap();
    assert!(st.success(), "installed mpicc");
    let out = Command::new(prefix.join("bin/mpiexec"))
        .args(["--timeout", "60", "-n", "2"])
        .arg(&exe)
        .output()
        .unwrap();
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("PASS basic"),
        "installed mpiexec"
    );
    match Command::new("pkg-config")
        .env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig"))
        .args(["--cflags", "--libs", "mpi"])
        .output()
    {
        Ok(o) => {
            let s = String::from_utf8_lossy(&o.stdout);
            assert!(
                s.contains(&format!("-I{}/include", prefix.display())) && s.contains("-lmpi"),
                "pkg-config: {s}"
            );
        }
        Err(_) => skip("pkg-config not installed: the .pc files are unchecked"),
    }
    if Command::new("cmake").arg("--version").output().is_err() {
        return skip("cmake not installed: find_package(MPI) is unchecked");
    }
    {
        let src = prefix.join("cmake-src");
        std::fs::create_dir_all(&src).unwrap();
        std::fs::write(
            src.join("CMakeLists.txt"),
            format!(
                "cmake_minimum_required(VERSION 3.10)\nproject(t C)\nfind_package(MPI REQUIRED COMPONENTS C)\n\
                 add_executable(basic {})\ntarget_link_libraries(basic MPI::MPI_C)\n",
                repo().join("tests/mpi/basic.c").display()
            ),
        )
        .unwrap();
        let build = prefix.join("cmake-build");
        let out = Command::new("cmake")
            .arg("-S")
            .arg(&src)
            .arg("-B")
            .arg(&build)
            .arg(format!(
                "-DMPI_C_COMPILER={}",
                prefix.join("bin/gwcc").display()
            ))
            .output()
            .unwrap();
        let log = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && log.contains("Found MPI_C") && log.contains("version \"5.0\""),
            "cmake:\n{log}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let st = Command::new("cmake")
            .arg("--build")
            .arg(&build)
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(st.success(), "cmake --build");
    }
}

/// The backstop kills the whole process group of a job that outlives it (gwrun
/// and the ranks it started), from the thread that reaps it; a job that ends
/// in time is reaped and nothing is killed afterwards (no timer thread is
/// left behind holding a pid that may be reused).
#[test]
fn backstop_kills_the_group_only_before_reaping() {
    let mut c = Command::new("sh");
    c.args(["-c", "sleep 30 & echo $!; wait"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let t = Instant::now();
    let (status, stdout, stderr) =
        wait_with_backstop(c.spawn().unwrap(), Duration::from_millis(300));
    assert!(!status.success());
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    assert!(String::from_utf8_lossy(&stderr).contains("backstop"));
    let grandchild: libc::pid_t = String::from_utf8_lossy(&stdout).trim().parse().unwrap();
    let gone = (0..100).any(|_| {
        // SAFETY: signal 0 only checks for existence.
        let alive = unsafe { libc::kill(grandchild, 0) } == 0
            && !std::fs::read_to_string(format!("/proc/{grandchild}/stat"))
                .is_ok_and(|s| s.contains(") Z "));
        if alive {
            std::thread::sleep(Duration::from_millis(20));
        }
        !alive
    });
    assert!(
        gone,
        "the rank-like grandchild {grandchild} survived the backstop"
    );

    let mut quick = Command::new("true");
    quick
        .process_group(0)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let (status, _, stderr) = wait_with_backstop(quick.spawn().unwrap(), Duration::from_secs(5));
    assert!(status.success());
    assert!(!String::from_utf8_lossy(&stderr).contains("backstop"));
    // The old backstop slept in its own thread and killed the pid when the
    // sleep ended, whether or not the job had ended and been reaped; the new
    // one returns with nothing pending: the function holds no thread of its own.
}

/// Runs `gwrun ARGS` and says whether `name` passed.
fn run_gwrun(args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut c = Command::new(gwrun());
    c.envs(env.iter().copied())
        .args(["--timeout", "60"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let t = Instant::now();
    let child = c.spawn().expect("gwrun starts");
    let (status, stdout, stderr) = wait_with_backstop(child, Duration::from_secs(90));
    Run {
        ok: status.success(),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
        secs: t.elapsed().as_secs_f64(),
    }
}

/// Topology levels (`MPI_Comm_split_type` by host and site): one site
/// (no `GW_SITE`) on one and two emulated hosts; two sites over four
/// emulated hosts (a wrapper sets `GW_SITE` from `PMI_RANK`); and the most
/// realistic case, `gwrun -f` with two `start=local` sites, where the
/// launcher's `GW_SITE` must reach the ranks. `TOPO_EXPECT_*` make the
/// program fail if the sites or hosts it sees are not the ones placed.
#[test]
fn topology_levels() {
    let Some((_g, exe)) = serial_compiled("topology_levels", &[]) else {
        return;
    };
    let dir = profile_dir().join("mpi-tests");
    let wrapper = dir.join("topology_levels_sites.sh");
    std::fs::write(
        &wrapper,
        "#!/bin/sh\n# Ranks 0,1 at site s0, ranks 2,3 at s1.\nGW_SITE=s$((PMI_RANK / 2)) exec \"$@\"\n",
    )
    .unwrap();
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let machines = dir.join("topology_levels.machines");
    std::fs::write(
        &machines,
        "[site a] start=local\nh1:2\n[site b] start=local\nh2\nh3\n",
    )
    .unwrap();
    let exe_s = exe.to_str().unwrap();
    let cases: Vec<(&str, Vec<&str>, [&str; 2])> = vec![
        ("one host", vec!["-n", "4", exe_s], ["1", "1"]),
        (
            "two hosts, one site",
            vec!["-n", "4", "--emulate-hosts", "2", exe_s],
            ["1", "2"],
        ),
        (
            "four hosts, two sites",
            vec![
                "-n",
                "4",
                "--emulate-hosts",
                "4",
                wrapper.to_str().unwrap(),
                exe_s,
            ],
            ["2", "4"],
        ),
        // start=local hosts are one real machine: one host, two sites.
        (
            "gwrun -f, two sites",
            vec!["-f", machines.to_str().unwrap(), "-n", "4", exe_s],
            ["2", "1"],
        ),
    ];
    for (what, args, [sites, hosts]) in cases {
        let r = run_gwrun(
            &args,
            &[("TOPO_EXPECT_SITES", sites), ("TOPO_EXPECT_HOSTS", hosts)],
        );
        eprintln!("topology_levels: {what}: {:.2} s", r.secs);
        assert!(
            r.ok && r.stdout.contains("PASS topology_levels"),
            "topology_levels, {what}:\n--- stdout\n{}--- stderr\n{}",
            r.stdout,
            r.stderr
        );
    }
}

/// Hierarchical collectives (`tests/mpi/coll_hier.c`): every collective
/// with `gw_coll=hier` gives the flat algorithms' (and the expected)
/// results, on placements a wrapper gives sites to: 2 sites × 2 hosts × 2
/// ranks; uneven hosts (1, 5, 2, 3 ranks) in sites of 6 and 5 ranks; 3 sites
/// round-robin over 3 hosts. Then, with `wan`, the count of messages that
/// cross sites (MPI_T `gw_link_sent_msgs`) for Bcast/Reduce/Gather/Scatter
/// from several roots, Barrier, Allreduce, Allgather and Alltoall, against
/// what the algorithms send; and once with `GW_COLL=flat`, which
/// `MPI_COMM_WORLD` (no info key) must follow. The same for
/// `tests/mpi/coll_hier_v.c`: Gatherv/Scatterv into a strided type,
/// Alltoallv/w, Reduce_scatter with uneven counts, a non-commutative op in
/// Reduce/Allreduce/Scan/Exscan, nonblocking forms in flight together; its
/// `wan` run counts Gatherv/Scatterv/Ibcast (one message per remote site),
/// Alltoallv/Ialltoallv (one per pair of sites), the non-commutative Reduce
/// and Scan (level by level where ranks are consecutive per host and site).
#[test]
fn coll_hier() {
    let Some((_g, exe)) = serial_compiled("coll_hier", &[]) else {
        return;
    };
    let exe_v = compile("coll_hier_v", &[]);
    let dir = profile_dir().join("mpi-tests");
    let script = |name: &str, body: &str| {
        let p = dir.join(name);
        std::fs::write(
            &p,
            format!("#!/bin/sh\n{body}\nexport GW_SITE\nexec \"$@\"\n"),
        )
        .unwrap();
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        p.to_str().unwrap().to_string()
    };
    let blocks = script("coll_hier_blocks.sh", "GW_SITE=s$((PMI_RANK / 4))");
    let uneven = script(
        "coll_hier_uneven.sh",
        "if [ \"$PMI_RANK\" -lt 6 ]; then GW_SITE=s0; else GW_SITE=s1; fi",
    );
    let rr = script("coll_hier_rr.sh", "GW_SITE=s$((PMI_RANK % 3))");
    let hostfile = dir.join("coll_hier.hosts");
    std::fs::write(&hostfile, "a:1\nb:5\nc:2\nd:3\n").unwrap();
    let (exe_s, exe_v) = (exe.to_str().unwrap(), exe_v.to_str().unwrap());
    let placements: Vec<(&str, Vec<&str>)> = vec![
        (
            "2 sites x 2 hosts x 2 ranks",
            vec!["-n", "8", "--emulate-hosts", "4", &blocks],
        ),
        (
            "uneven hosts and sites",
            vec![
                "-n",
                "11",
                "--emulate-hostfile",
                hostfile.to_str().unwrap(),
                &uneven,
            ],
        ),
        (
            "3 sites round-robin",
            vec!["-n", "7", "--emulate-hosts", "3", &rr],
        ),
    ];
    for (i, (what, args)) in placements.into_iter().enumerate() {
        // Part one (`coll_hier`) and part two (`coll_hier_v`: v/w variants,
        // non-commutative ops, scans, nonblocking). The wide-area counts
        // once more with GW_COLL=flat (on the first placement):
        // MPI_COMM_WORLD, which has no info key, goes flat then.
        // (program, argument, environment)
        type Job<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)]);
        let mut runs: Vec<Job> = vec![
            (exe_s, "", &[]),
            (exe_s, "wan", &[]),
            (exe_v, "", &[]),
            (exe_v, "wan", &[]),
        ];
        if i == 0 {
            runs.push((exe_s, "wan", &[("GW_COLL", "flat")]));
        }
        for (exe, mode, env) in runs {
            let name = if exe == exe_v {
                "coll_hier_v"
            } else {
                "coll_hier"
            };
            let mut a = args.clone();
            a.push(exe);
            if !mode.is_empty() {
                a.push(mode);
            }
            let r = run_gwrun(&a, env);
            let want = format!("PASS {name}{}", if mode.is_empty() { "" } else { " wan" });
            eprintln!(
                "{name} {mode} {env:?}: {what}: {:.2} s\n{}",
                r.secs, r.stdout
            );
            assert!(
                r.ok && r.stdout.contains(&want),
                "{name} {mode} {env:?}, {what}:\n--- stdout\n{}--- stderr\n{}",
                r.stdout,
                r.stderr
            );
        }
    }
}
