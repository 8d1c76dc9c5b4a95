//! Relays across a firewall: a testbed of 2 sites x 2 hosts where `s1` is
//! firewalled (`--firewall s1`: from outside only its gateway s1h0 is
//! reachable), 4 ranks, one per host. The ranks of s0 reach s1h1 only
//! through the relay on s1h0.
//!
//! Asserted:
//! - a C MPI program (p2p ring, alltoall between every pair, bcast,
//!   allreduce, each checksummed, then a stream of pattern messages) passes,
//!   and `--stats` shows `encrypt+relay(s1h0)+tcp` from s0 to s1h1 and no
//!   relay anywhere else;
//! - while the job runs, the relay process's memory (read through
//!   /proc/PID/maps and /proc/PID/mem) holds no copy of the messages'
//!   plaintext pattern, which a rank's memory does (the scan works), and
//!   the relay's environment carries no job secret;
//! - with the relay's test hook flipping one bit of every relayed stream
//!   (`GW_RELAY_TEST_FLIP`), the job fails naming the rejected frame, and
//!   the rank behind the relay counts it.
//!
//! Needs root: skipped by the project's rule otherwise (a failure under CI=true).

use gridwire_testbed::harness::{self, run_with_timeout, Testbed};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

mod common;

const PATTERN: &str = "GW-RELAY-PLAINTEXT-7f3a9c";

const RELAY_C: &str = r#"
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <poll.h>

#define COUNT (1 << 16)
static const char PAT[] = "GW-RELAY-PLAINTEXT-7f3a9c";

static unsigned int pattern(int rank, int i) {
    return (unsigned int)rank * 2654435761u + (unsigned int)i * 40503u + 7u;
}

int main(int argc, char **argv) {
    int rank, size, i, r, bad = 0;
    char host[256] = "";
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    gethostname(host, sizeof host - 1);
    unsigned int *out = malloc(COUNT * sizeof *out), *in = malloc(COUNT * sizeof *in);
    unsigned int *a2a_out = malloc((size_t)size * COUNT * sizeof *out);
    unsigned int *a2a_in = malloc((size_t)size * COUNT * sizeof *in);
    if (!out || !in || !a2a_out || !a2a_in) MPI_Abort(MPI_COMM_WORLD, 2);
    /* p2p: a ring of 256 KiB. */
    for (i = 0; i < COUNT; i++) out[i] = pattern(rank, i);
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    MPI_Sendrecv(out, COUNT, MPI_UNSIGNED, next, 7, in, COUNT, MPI_UNSIGNED, prev, 7,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    for (i = 0; i < COUNT; i++) bad += in[i] != pattern(prev, i);
    /* alltoall: every pair, 256 KiB each way. */
    for (r = 0; r < size; r++)
        for (i = 0; i < COUNT; i++) a2a_out[(size_t)r * COUNT + i] = pattern(rank * 64 + r, i);
    MPI_Alltoall(a2a_out, COUNT, MPI_UNSIGNED, a2a_in, COUNT, MPI_UNSIGNED, MPI_COMM_WORLD);
    for (r = 0; r < size; r++)
        for (i = 0; i < COUNT; i++) bad += a2a_in[(size_t)r * COUNT + i] != pattern(r * 64 + rank, i);
    /* bcast from the rank behind the relay, allreduce of checksums. */
    for (i = 0; i < COUNT; i++) in[i] = rank == size - 1 ? pattern(999, i) : 0;
    MPI_Bcast(in, COUNT, MPI_UNSIGNED, size - 1, MPI_COMM_WORLD);
    for (i = 0; i < COUNT; i++) bad += in[i] != pattern(999, i);
    unsigned long long mine = 0, total = 0, want_total = 0;
    for (i = 0; i < COUNT; i++) mine += out[i];
    MPI_Allreduce(&mine, &total, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    for (r = 0; r < size; r++)
        for (i = 0; i < COUNT; i++) want_total += pattern(r, i);
    bad += total != want_total;
    printf("RANK %d HOST %s CHECKS %s\n", rank, host, bad ? "BAD" : "ok");
    fflush(stdout);
    /* A stream of 1 MiB pattern messages from every rank of s0 to the last
       rank (behind the relay), for `seconds`: the test scans memory meanwhile.
       With "stdin" after the seconds, rank 0 also stops when its stdin (gwrun
       forwards its own) has data or reaches its end: the test closes it once
       its scan is done, so a slow, loaded machine cannot end the stream first. */
    double seconds = argc > 1 ? atof(argv[1]) : 0;
    int watch_stdin = argc > 2 && strcmp(argv[2], "stdin") == 0;
    size_t plen = strlen(PAT), big = 1 << 20;
    char *msg = malloc(big), *got = malloc(big);
    if (!msg || !got) MPI_Abort(MPI_COMM_WORLD, 2);
    for (i = 0; i < (int)big; i++) msg[i] = PAT[i % plen];
    if (rank == 0) { printf("STREAMING\n"); fflush(stdout); }
    double until = MPI_Wtime() + seconds;
    int go = 1, rounds = 0;
    while (go) {
        if (rank < size / 2) {
            MPI_Send(msg, (int)big, MPI_CHAR, size - 1, 9, MPI_COMM_WORLD);
        } else if (rank == size - 1) {
            for (r = 0; r < size / 2; r++) {
                MPI_Recv(got, (int)big, MPI_CHAR, r, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                bad += memcmp(got, msg, big) != 0;
            }
        }
        rounds++;
        if (rank == 0) {
            struct pollfd in0 = {0, POLLIN, 0};
            go = MPI_Wtime() < until && !(watch_stdin && poll(&in0, 1, 0) > 0);
        } else {
            go = 0;
        }
        MPI_Bcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD);
    }
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("RANK %d STREAM %d rounds %s\n", rank, rounds, bad ? "BAD" : "ok");
    fflush(stdout);
    MPI_Finalize();
    return bad ? 1 : 0;
}
"#;

/// The program, built with gwcc against this tree's libmpi.so.
fn build_program(dir: &Path) -> PathBuf {
    let lib = common::build_libmpi().join("libmpi.so");
    std::fs::copy(&lib, dir.join("libmpi.so")).unwrap();
    let src = dir.join("relay.c");
    std::fs::write(&src, RELAY_C).unwrap();
    let prog = dir.join("relay_check");
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
        "gwcc relay.c: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    prog
}

/// `argv` of a process, split at NULs.
fn argv(pid: i32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            b.split(|c| *c == 0)
                .filter(|s| !s.is_empty())
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Processes in the PID namespace of `init`, whose argv matches `pick`.
fn processes_of(init: i32, pick: impl Fn(&[String]) -> bool) -> Vec<i32> {
    let ns = |p: i32| std::fs::read_link(format!("/proc/{p}/ns/pid")).ok();
    let want = ns(init).expect("the host's init runs");
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&p| ns(p).as_ref() == Some(&want) && pick(&argv(p)))
        .collect()
}

/// Whether `needle` occurs in any readable mapping of `pid`; `None` when
/// the process is gone.
fn memory_holds(pid: i32, needle: &[u8]) -> Option<bool> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    let mut mem = std::fs::File::open(format!("/proc/{pid}/mem")).ok()?;
    let mut scanned = 0usize;
    for line in maps.lines() {
        let mut w = line.split_whitespace();
        let (Some(range), Some(perms)) = (w.next(), w.next()) else {
            continue;
        };
        if !perms.starts_with('r') || line.ends_with("[vvar]") || line.ends_with("[vsyscall]") {
            continue;
        }
        let (a, b) = range.split_once('-').unwrap();
        let (a, b) = (
            u64::from_str_radix(a, 16).unwrap(),
            u64::from_str_radix(b, 16).unwrap(),
        );
        let mut buf = vec![0u8; (b - a) as usize];
        if mem.seek(SeekFrom::Start(a)).is_err() {
            continue;
        }
        let mut got = 0;
        while got < buf.len() {
            match mem.read(&mut buf[got..]) {
                Ok(0) | Err(_) => break,
                Ok(n) => got += n,
            }
        }
        scanned += got;
        if buf[..got].windows(needle.len()).any(|w| w == needle) {
            return Some(true);
        }
    }
    (scanned > 0).then_some(false)
}

/// The child's exit status, or `None` (and the child killed) after `limit`.
fn wait_bounded(
    child: &mut std::process::Child,
    limit: Duration,
) -> Option<std::process::ExitStatus> {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        if let Ok(Some(s)) = child.try_wait() {
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

fn init_pid(tb: &Testbed, host: &str) -> i32 {
    std::fs::read_to_string(tb.dir().join("hosts").join(host).join("init.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn a_firewalled_site_joins_through_a_relay_that_sees_only_ciphertext() {
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
        "{}/wan-relay-{}",
        env!("CARGO_TARGET_TMPDIR"),
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let prog = build_program(&dir);
    let tb = Testbed::up(&["--sites", "2", "--hosts", "2", "--firewall", "s1"])
        .unwrap_or_else(|e| panic!("{e}"));
    let machines = tb.dir().join("machines").display().to_string();
    let (gwrun, prog) = (gwrun.display().to_string(), prog.display().to_string());
    let args = |extra: &[&str], secs: &[&str], timeout: &str| -> Vec<String> {
        let mut v: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        v.extend(
            [
                &gwrun,
                "-f",
                &machines,
                "-n",
                "4",
                "--tag-output",
                "--stats",
                "--timeout",
                timeout,
                &prog,
            ]
            .map(String::from),
        );
        v.extend(secs.iter().map(|s| s.to_string()));
        v
    };

    // 1. The job passes; memory is scanned while it streams.
    // The stream lasts until the scan is done (the test closes gwrun's
    // stdin, forwarded to rank 0), at most 40 s.
    let a = args(&[], &["40", "stdin"], "90");
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let mut child = tb
        .command("login", &a)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stream_stopper = child.stdin.take();
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
    let until = Instant::now() + Duration::from_secs(90);
    let mut streaming = false;
    while Instant::now() < until {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(l) if l.ends_with("STREAMING") => {
                streaming = true;
                break;
            }
            Ok(_) => {}
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    let mut scan = None;
    if streaming {
        // Let the stream run through the relay a moment first.
        std::thread::sleep(Duration::from_millis(800));
        let relays = processes_of(init_pid(&tb, "s1h0"), |a| {
            a.get(1).map(String::as_str) == Some("--relay")
        });
        let ranks = processes_of(init_pid(&tb, "s1h1"), |a| {
            a.first().is_some_and(|p| p.ends_with("relay_check"))
        });
        let relay_holds: Vec<Option<bool>> = relays
            .iter()
            .map(|&p| memory_holds(p, PATTERN.as_bytes()))
            .collect();
        // A process that matched may be gone (a short-lived helper): only
        // those scanned count, and at least one rank must be.
        let rank_holds: Vec<bool> = ranks
            .iter()
            .filter_map(|&p| memory_holds(p, PATTERN.as_bytes()))
            .collect();
        let environ: Vec<String> = relays
            .iter()
            .map(|p| {
                String::from_utf8_lossy(
                    &std::fs::read(format!("/proc/{p}/environ")).unwrap_or_default(),
                )
                .into_owned()
            })
            .collect();
        scan = Some((relays, relay_holds, ranks, rank_holds, environ));
    }
    drop(stream_stopper);
    let status = wait_bounded(&mut child, Duration::from_secs(90));
    let stdout = reader.join().unwrap();
    let stderr = err_reader.join().unwrap();
    assert!(
        status.is_some_and(|s| s.success()),
        "gwrun failed ({status:?}):\n{stdout}\n{stderr}"
    );
    for (r, h) in ["s0h0", "s0h1", "s1h0", "s1h1"].iter().enumerate() {
        let want = format!("[{r}@{h}] RANK {r} HOST {h} CHECKS ok");
        assert!(
            stdout.contains(&want),
            "no {want:?} in:\n{stdout}\n{stderr}"
        );
        assert!(
            stdout.lines().any(
                |l| l.starts_with(&format!("[{r}@{h}] RANK {r} STREAM ")) && l.ends_with(" ok")
            ),
            "rank {r}'s stream not ok:\n{stdout}\n{stderr}"
        );
    }
    // The matrix: s0 -> s1h1 relayed, nothing else.
    for line in stderr.lines().filter(|l| l.starts_with("gwrun: ")) {
        let w: Vec<&str> = line.split_whitespace().collect();
        if w.len() < 3 || !w[1].chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        let row: usize = w[1].parse().unwrap();
        let relayed = line.contains("relay(");
        if row < 2 {
            assert!(
                line.contains("encrypt+relay(s1h0)+tcp"),
                "rank {row} does not reach s1h1 through the relay:\n{stderr}"
            );
        } else {
            assert!(!relayed, "rank {row} uses a relay:\n{stderr}");
        }
    }
    assert!(
        stderr.contains(
            "encrypt+relay(s1h0)+tcp = TCP sockets, encrypted (AEAD), through the relay on s1h0"
        ),
        "{stderr}"
    );
    let (relays, relay_holds, ranks, rank_holds, environ) =
        scan.unwrap_or_else(|| panic!("the job never streamed:\n{stdout}\n{stderr}"));
    assert_eq!(relays.len(), 1, "relay processes on s1h0: {relays:?}");
    assert!(
        !rank_holds.is_empty(),
        "no rank process scanned on s1h1: {ranks:?}"
    );
    assert!(
        rank_holds.iter().all(|h| *h),
        "the scan does not find the pattern in a rank's memory: {rank_holds:?}"
    );
    assert_eq!(
        relay_holds,
        vec![Some(false)],
        "plaintext in the relay's memory (None: it could not be read)"
    );
    assert!(
        environ.iter().all(|e| !e.contains("GW_JOB_SECRET")),
        "the relay's environment holds the job secret"
    );

    // 2. The relay flips a bit of every relayed stream: the rank behind it
    // rejects the frame, counts it, and the job fails naming it.
    // The stream stops at the first tampered frame: the receiver's link
    // from that sender fails hard, its receive never completes, and the
    // job ends by its --timeout (MPI gets no error for a failed link yet).
    let a = args(&["env", "GW_RELAY_TEST_FLIP=600000"], &["40"], "20");
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let out = run_with_timeout(&mut tb.command("login", &a), Duration::from_secs(120)).unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "a job whose relay alters bytes passed:\n{stdout}\n{stderr}"
    );
    assert!(
        stderr.lines().any(|l| l.contains("gw[3]: link from rank ")
            && l.contains("failed: encrypt rejected a frame")
            && l.contains("does not authenticate")),
        "the tampered frame is not named:\n{stdout}\n{stderr}"
    );
    assert!(
        !stdout.contains("RANK 3 STREAM"),
        "rank 3 finished its stream on tampered data:\n{stdout}"
    );
    drop(tb);
    let _ = std::fs::remove_dir_all(&dir);
}
