//! Start-up over PMIx: gridwire MPI programs started by Open MPI's
//! `mpirun.openmpi`, whose daemons serve PMIx (OpenPMIx) to the processes
//! they start, with the runtime's PMIx client (`GW_PMI=pmix`, and `auto`).
//! An MPI program in C, built with `scripts/gwcc` against the workspace's
//! `libmpi.so`, passes a 64 KiB buffer around a ring and runs an
//! allreduce; every rank's checksum is compared with the one computed
//! here. Also: PMIx abort (directly and through MPI_Abort) ends the job
//! with its code, and the clear errors when no PMIx server is there, when
//! its address is dead, and when it never answers.

mod common;

use common::{example, run, GWRUN};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn mpirun() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("mpirun.openmpi"))
        .find(|p| p.exists())
}

/// `mpirun.openmpi` or the skip (a failure under CI).
macro_rules! mpirun_or_skip {
    () => {
        match mpirun() {
            Some(p) => p.to_string_lossy().into_owned(),
            None => {
                gridwire_testkit::skip(
                    "mpirun.openmpi is not installed (Debian package openmpi-bin; \
                     scripts/install-deps.sh installs it)",
                );
                return;
            }
        }
    };
}

const RING_C: &str = r#"#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#define N 16384
#define M 1000
static uint64_t checksum(const uint32_t *b) {
    uint64_t s = 0;
    for (uint64_t i = 0; i < N; i++) s += (uint64_t)b[i] * (i + 1);
    return s;
}
int main(int argc, char **argv) {
    int r, s;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &s);
    static uint32_t buf[N];
    /* The ring: rank 0 starts with buf[i] = i; every other rank mixes in
       its rank and passes the buffer on; rank 0 gets it back. */
    if (r == 0) {
        for (uint32_t i = 0; i < N; i++) buf[i] = i;
        if (s > 1) {
            MPI_Send(buf, N, MPI_UINT32_T, 1, 7, MPI_COMM_WORLD);
            MPI_Recv(buf, N, MPI_UINT32_T, s - 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
    } else {
        MPI_Recv(buf, N, MPI_UINT32_T, r - 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (uint32_t i = 0; i < N; i++) buf[i] = buf[i] * 33u + (uint32_t)r + i;
        MPI_Send(buf, N, MPI_UINT32_T, (r + 1) % s, 7, MPI_COMM_WORLD);
    }
    /* The allreduce: a[i] = (r+1)*i + r summed over every rank. */
    static long a[M], sum[M];
    for (long i = 0; i < M; i++) a[i] = (long)(r + 1) * i + r;
    MPI_Allreduce(a, sum, M, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    long total = 0;
    for (long i = 0; i < M; i++) total += sum[i];
    printf("RESULT rank %d of %d ring %llu allreduce %ld\n", r, s,
           (unsigned long long)checksum(buf), total);
    fflush(stdout);
    /* `ring R CODE`: rank R calls MPI_Abort while the others wait in a
       barrier that can only end by the job being torn down. */
    if (argc > 2 && r == atoi(argv[1])) MPI_Abort(MPI_COMM_WORLD, atoi(argv[2]));
    if (argc > 2) MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
"#;

/// What rank `r` of `s` must print: the checksum of the buffer it holds
/// after the ring, and the sum of the allreduced array.
fn expected(r: u32, s: u32) -> (u64, i64) {
    const N: usize = 16384;
    const M: i64 = 1000;
    let mut buf: Vec<u32> = (0..N as u32).collect();
    // Rank r > 0 holds the buffer after ranks 1..=r mixed it in; rank 0
    // after all of 1..s did.
    let last = if r == 0 { s - 1 } else { r };
    for k in 1..=last {
        for (i, b) in buf.iter_mut().enumerate() {
            *b = b.wrapping_mul(33).wrapping_add(k).wrapping_add(i as u32);
        }
    }
    let ring = buf.iter().enumerate().fold(0u64, |acc, (i, &b)| {
        acc.wrapping_add(u64::from(b) * (i as u64 + 1))
    });
    let s = i64::from(s);
    let total: i64 = (0..M).map(|i| i * s * (s + 1) / 2 + s * (s - 1) / 2).sum();
    (ring, total)
}

/// Builds the ring program with `scripts/gwcc` against the `libmpi.so`
/// next to gwrun, once per test process.
fn ring_program() -> String {
    static PROG: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PROG.get_or_init(|| {
        let libdir = Path::new(GWRUN).parent().unwrap();
        assert!(
            libdir.join("libmpi.so").exists(),
            "{} missing: build the workspace first (make build-debug)",
            libdir.join("libmpi.so").display()
        );
        let gwcc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/gwcc");
        let dir = std::env::temp_dir().join(format!("gw-pmix-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let src = dir.join("ring.c");
        std::fs::write(&src, RING_C).unwrap();
        let exe = dir.join("ring");
        let o = run(
            gwcc.to_str().unwrap(),
            &["-O1", "-o", exe.to_str().unwrap(), src.to_str().unwrap()],
            &[("GW_MPI_LIBDIR", libdir.to_str().unwrap())],
            Duration::from_secs(60),
        );
        assert_eq!(o.code, 0, "gwcc failed:\n{}", o.stderr);
        exe.to_string_lossy().into_owned()
    })
    .clone()
}

/// Runs `prog args` under `mpirun.openmpi -np n` with `envs`.
fn under_mpirun(mpirun: &str, n: u32, args: &[&str], envs: &[(&str, &str)]) -> common::Out {
    under_mpirun_with(mpirun, n, &[], args, envs)
}

fn under_mpirun_with(
    mpirun: &str,
    n: u32,
    options: &[&str],
    args: &[&str],
    envs: &[(&str, &str)],
) -> common::Out {
    let np = n.to_string();
    let mut all = vec!["--allow-run-as-root", "--oversubscribe", "-np", &np];
    all.extend_from_slice(options);
    all.extend_from_slice(args);
    run(mpirun, &all, envs, Duration::from_secs(40))
}

/// Each rank's stdout and stderr, from the files `mpirun
/// --output-filename DIR` writes (`DIR/<job>/rank.<r>/std{out,err}`):
/// mpirun forwards the ranks' output in whatever pieces they wrote it, so
/// the merged streams can split one rank's line with another's.
fn rank_output(dir: &Path, r: u32) -> (String, String) {
    let mut found = None;
    for job in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let d = job.path().join(format!("rank.{r}"));
        if d.is_dir() {
            found = Some(d);
        }
    }
    let Some(d) = found else {
        panic!("no output of rank {r} under {}", dir.display());
    };
    let read = |f: &str| std::fs::read_to_string(d.join(f)).unwrap_or_default();
    (read("stdout"), read("stderr"))
}

/// Runs the ring program on `n` ranks and checks that every rank printed
/// the right RESULT line and bootstrapped over PMIx.
fn run_ring(mpirun: &str, n: u32, envs: &[(&str, &str)]) {
    let prog = ring_program();
    let dir = std::env::temp_dir().join(format!(
        "gw-pmix-out-{}-{n}-{}",
        std::process::id(),
        envs.len()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let o = under_mpirun_with(
        mpirun,
        n,
        &["--output-filename", dir.to_str().unwrap()],
        &[&prog],
        envs,
    );
    assert_eq!(o.code, 0, "stdout:\n{}\nstderr:\n{}", o.stdout, o.stderr);
    for r in 0..n {
        let (out, err) = rank_output(&dir, r);
        let (ring, total) = expected(r, n);
        let want = format!("RESULT rank {r} of {n} ring {ring} allreduce {total}");
        assert_eq!(out.trim_end(), want, "rank {r}'s stdout");
        assert!(
            err.lines()
                .any(|l| l.starts_with(&format!("gw[{r}]: bootstrap PMIx (job "))),
            "rank {r} did not bootstrap over PMIx (is target/debug/libmpi.so \
             current? make build-debug):\n{err}"
        );
        if r == 0 {
            // Without a launcher secret rank 0 makes one and passes it
            // through PMIx: the exchange ran.
            assert!(err.contains("rank 0 makes a random one"), "{err}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn mpi_ring_and_allreduce_over_pmix_under_mpirun_4_ranks() {
    let mpirun = mpirun_or_skip!();
    run_ring(
        &mpirun,
        4,
        &[
            ("GW_PMI", "pmix"),
            ("GW_VERBOSE", "1"),
            ("GW_PMI_TIMEOUT", "30"),
        ],
    );
}

/// One rank, and `GW_PMI` left at `auto`: the PMIx server in the
/// environment is found without being asked for.
#[test]
fn one_rank_under_mpirun_picks_pmix_by_itself() {
    let mpirun = mpirun_or_skip!();
    run_ring(&mpirun, 1, &[("GW_VERBOSE", "1"), ("GW_PMI_TIMEOUT", "30")]);
}

/// `auto` with 3 ranks of the plain PMI test program: keys put by each
/// rank are read back by every other one (get by owner and, for the
/// missing key, the look-up in every rank's data).
#[test]
fn key_value_exchange_over_pmix_with_auto() {
    let mpirun = mpirun_or_skip!();
    let prog = example("pmi_check");
    let o = under_mpirun(&mpirun, 3, &[&prog], &[("GW_PMI_TIMEOUT", "30")]);
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let lines: Vec<&str> = o.stdout.lines().filter(|l| l.contains("kvs ok")).collect();
    assert_eq!(lines.len(), 3, "{}", o.stdout);
    // Every rank names the same namespace, Open MPI's job id (a number).
    let ns: Vec<&str> = lines
        .iter()
        .map(|l| l.rsplit("kvsname ").next().unwrap().trim_end_matches(')'))
        .collect();
    assert!(ns.iter().all(|n| *n == ns[0]), "{lines:?}");
    assert!(ns[0].parse::<u64>().is_ok(), "{lines:?}");
    for r in 0..3 {
        assert!(
            o.stdout.contains(&format!("rank {r} of 3: kvs ok")),
            "{}",
            o.stdout
        );
    }
}

/// `PMIx_Abort` from rank 1 ends the job promptly, with its exit code,
/// while the other ranks sleep.
#[test]
fn abort_over_pmix_ends_the_job_with_its_code() {
    let mpirun = mpirun_or_skip!();
    let prog = example("pmi_check");
    let t = Instant::now();
    let o = under_mpirun(
        &mpirun,
        3,
        &[&prog, "--abort", "1", "7", "--sleep", "30"],
        &[("GW_PMI", "pmix"), ("GW_PMI_TIMEOUT", "30")],
    );
    assert_eq!(o.code, 7, "{}\n{}", o.stdout, o.stderr);
    assert!(
        t.elapsed() < Duration::from_secs(15),
        "the job outlived the abort: {:?}",
        t.elapsed()
    );
}

/// MPI_Abort in one rank of a gridwire MPI program (the runtime's abort,
/// `PMIx_Abort` underneath) ends the job promptly with the code given.
#[test]
fn mpi_abort_under_mpirun_ends_the_job_with_its_code() {
    let mpirun = mpirun_or_skip!();
    let prog = ring_program();
    let t = Instant::now();
    let o = under_mpirun(&mpirun, 3, &[&prog, "2", "9"], &[("GW_PMI_TIMEOUT", "30")]);
    assert_eq!(o.code, 9, "{}\n{}", o.stdout, o.stderr);
    assert!(
        o.stderr
            .contains("MPI_Abort called by rank 2 with error code 9"),
        "{}",
        o.stderr
    );
    assert!(
        t.elapsed() < Duration::from_secs(15),
        "the job outlived the abort: {:?}",
        t.elapsed()
    );
}

/// Runs `prog` directly (no launcher) with the PMIx variables and
/// `PMI_FD` of an enclosing job removed (if the tests run inside one),
/// then `envs` set.
fn without_pmix_env(prog: &str, envs: &[(&str, &str)]) -> common::Out {
    let mut script = String::from("exec env");
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("PMIX_") || k == "PMI_FD") {
        script.push_str(&format!(" -u {k}"));
    }
    script.push_str(" \"$0\"");
    run("sh", &["-c", &script, prog], envs, Duration::from_secs(30))
}

/// True when OpenPMIx's client library is installed where the runtime
/// looks for it.
fn libpmix_installed() -> bool {
    [
        "/usr/lib/x86_64-linux-gnu/libpmix.so.2",
        gridwire_core::bootstrap::pmix::LIBRARY_CANDIDATES[1],
    ]
    .iter()
    .any(|p| Path::new(p).exists())
}

/// `GW_PMI=pmix` with no PMIx server in the environment: a clear error at
/// once, not a hang and not a singleton.
#[test]
fn forced_pmix_without_a_server_is_a_clear_error() {
    let prog = example("pmi_check");
    let o = without_pmix_env(&prog, &[("GW_PMI", "pmix")]);
    assert_ne!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    assert!(
        o.stderr.contains("GW_PMI=pmix") && o.stderr.contains("no PMIx server started"),
        "{}",
        o.stderr
    );
    assert!(o.elapsed < Duration::from_secs(10), "{:?}", o.elapsed);
}

/// An environment naming a PMIx server at an address where nothing
/// listens: the library's error, explained.
#[test]
fn dead_pmix_server_address_is_a_clear_error() {
    if !libpmix_installed() {
        gridwire_testkit::skip("libpmix.so.2 is not installed (Debian package libpmix2)");
        return;
    }
    // A port that was free a moment ago: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let uri = format!("0.0;tcp4://127.0.0.1:{port}");
    let prog = example("pmi_check");
    let o = without_pmix_env(
        &prog,
        &[
            ("GW_PMI", "pmix"),
            ("PMIX_NAMESPACE", "gw-test"),
            ("PMIX_RANK", "0"),
            ("PMIX_SERVER_URI41", &uri),
            ("PMIX_SERVER_URI4", &uri),
            ("GW_PMI_TIMEOUT", "5"),
        ],
    );
    assert_ne!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    assert!(
        o.stderr.contains("PMIx_Init failed") && o.stderr.contains(&uri),
        "{}",
        o.stderr
    );
    assert!(o.elapsed < Duration::from_secs(15), "{:?}", o.elapsed);
}

/// A "server" that accepts the connection and never answers blocks
/// `PMIx_Init` inside the library: the client gives up after
/// `GW_PMI_TIMEOUT` with a clear error instead of hanging.
#[test]
fn silent_pmix_server_times_out_instead_of_hanging() {
    if !libpmix_installed() {
        gridwire_testkit::skip("libpmix.so.2 is not installed (Debian package libpmix2)");
        return;
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // Accept and hold connections, never writing a byte, until the test
    // ends (the thread is left to the process's exit).
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in listener.incoming().flatten() {
            held.push(c);
        }
    });
    let uri = format!("0.0;tcp4://127.0.0.1:{port}");
    let prog = example("pmi_check");
    let o = without_pmix_env(
        &prog,
        &[
            ("PMIX_NAMESPACE", "gw-test"),
            ("PMIX_RANK", "0"),
            ("PMIX_SERVER_URI41", &uri),
            ("PMIX_SERVER_URI4", &uri),
            ("GW_PMI_TIMEOUT", "2"),
        ],
    );
    assert_ne!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    assert!(
        o.stderr
            .contains("no answer from the PMIx server to PMIx_Init within 2 s"),
        "{}",
        o.stderr
    );
    assert!(o.elapsed < Duration::from_secs(12), "{:?}", o.elapsed);
}
