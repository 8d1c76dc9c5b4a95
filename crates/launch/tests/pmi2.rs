//! Start-up over PMI-2: gridwire programs started by MPICH's Hydra with the
//! client forced to PMI-2 (`GW_PMI=pmi2`; Hydra answers whichever version
//! the client's `init` line asks for), exchanging messages between 3 ranks
//! and sharing a random job secret through the PMI-2 key-value space.
//! Also gwrun's own PMI-2 server (it detects the protocol per rank): an MPI
//! program in C (built with `scripts/gwcc`) passing a checksummed buffer
//! around a ring plus an allreduce under `gwrun -n 4` and under `gwrun -f`
//! with two local proxies, and PMI-2 abort's exit code.
//! Slurm's `srun --mpi=pmi2` is not tested here (Slurm is not installed on
//! the test machines yet).

mod common;

use common::{example, run, GWRUN};
use std::path::Path;
use std::time::Duration;

fn mpiexec() -> Option<&'static str> {
    ["/usr/bin/mpiexec.mpich", "/usr/bin/mpiexec.hydra"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
}

/// `SELECT src dst method` lines as (src, dst, method).
fn selections(stdout: &str) -> Vec<(u32, u32, String)> {
    stdout
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w.first() == Some(&"SELECT") && w.len() == 4).then(|| {
                (
                    w[1].parse().unwrap(),
                    w[2].parse().unwrap(),
                    w[3].to_string(),
                )
            })
        })
        .collect()
}

#[test]
fn three_ranks_exchange_messages_under_hydra_over_pmi2() {
    let Some(mpiexec) = mpiexec() else {
        gridwire_testkit::skip(
            "mpiexec.mpich is not installed (scripts/install-deps.sh installs it)",
        );
        return;
    };
    let prog = example("rsr_check");
    let o = run(
        mpiexec,
        &["-n", "3", &prog, "select"],
        &[
            ("GW_PMI", "pmi2"),
            ("GW_VERBOSE", "1"),
            ("GW_PMI_TIMEOUT", "60"),
        ],
        Duration::from_secs(90),
    );
    assert_eq!(o.code, 0, "stdout:\n{}\nstderr:\n{}", o.stdout, o.stderr);
    for rank in 0..3 {
        assert!(
            o.stderr
                .contains(&format!("gw[{rank}]: bootstrap PMI-2 (job ")),
            "rank {rank} did not bootstrap over PMI-2:\n{}",
            o.stderr
        );
    }
    // Every rank sent to and heard from every rank (rsr_check checks the
    // messages; SELECT lines say over which method).
    let sel = selections(&o.stdout);
    assert_eq!(sel.len(), 9, "{}", o.stdout);
    for (s, d, m) in sel {
        assert_eq!(m, if s == d { "self" } else { "shm" }, "pair {s} -> {d}");
    }
}

/// (rank, fingerprint, fingerprint derived from the kvsname) per line.
fn secrets(stdout: &str) -> Vec<(u32, String, String)> {
    stdout
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w.len() == 5 && w[0] == "SECRET" && w[3] == "DERIVED")
                .then(|| (w[1].parse().unwrap(), w[2].to_string(), w[4].to_string()))
        })
        .collect()
}

#[test]
fn secret_over_pmi2_is_random_shared_and_not_derived_from_the_job_id() {
    let Some(mpiexec) = mpiexec() else {
        gridwire_testkit::skip(
            "mpiexec.mpich is not installed (scripts/install-deps.sh installs it)",
        );
        return;
    };
    let prog = example("secret_check");
    let mut fingerprints = Vec::new();
    for _ in 0..2 {
        let o = run(
            mpiexec,
            &["-n", "3", &prog],
            &[
                ("GW_PMI", "pmi2"),
                ("GW_VERBOSE", "1"),
                ("GW_PMI_TIMEOUT", "60"),
            ],
            Duration::from_secs(60),
        );
        assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
        assert!(o.stderr.contains("bootstrap PMI-2"), "{}", o.stderr);
        let s = secrets(&o.stdout);
        assert_eq!(s.len(), 3, "{}", o.stdout);
        assert!(
            s.iter().all(|x| x.1 == s[0].1),
            "the ranks disagree on the secret: {s:?}"
        );
        for (rank, fp, derived) in &s {
            assert_ne!(
                fp, derived,
                "rank {rank}: the secret is the hash of the public job id"
            );
        }
        fingerprints.push(s[0].1.clone());
    }
    assert_ne!(fingerprints[0], fingerprints[1], "two jobs got one secret");
}

/// An invalid `GW_PMI` is refused with the variable named.
#[test]
fn bad_gw_pmi_value_names_the_variable() {
    let prog = example("secret_check");
    let o = run(
        GWRUN,
        &["-n", "1", "--timeout", "30", &prog],
        &[("GW_PMI", "pmi3")],
        Duration::from_secs(60),
    );
    assert_ne!(o.code, 0);
    assert!(o.stderr.contains("GW_PMI"), "{}", o.stderr);
}

/// PMI-2 `abort` from one rank ends the whole job promptly with a failure,
/// while the other ranks sleep. (Hydra 4.0.2 does not know the PMI-2
/// `abort` command; it reports "Unrecognized PMI command: abort" and tears
/// the job down, which is the outcome abort asks for.)
#[test]
fn abort_over_pmi2_ends_the_job_under_hydra() {
    let Some(mpiexec) = mpiexec() else {
        gridwire_testkit::skip(
            "mpiexec.mpich is not installed (scripts/install-deps.sh installs it)",
        );
        return;
    };
    let prog = example("pmi_check");
    let started = std::time::Instant::now();
    let o = run(
        mpiexec,
        &["-n", "3", &prog, "--abort", "1", "7", "--sleep", "30"],
        &[("GW_PMI", "pmi2"), ("GW_PMI_TIMEOUT", "60")],
        Duration::from_secs(60),
    );
    assert_ne!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the job outlived the abort: {:?}",
        started.elapsed()
    );
}

const RING_C: &str = r#"#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
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
    static long a[M], sum[M];
    for (long i = 0; i < M; i++) a[i] = (long)(r + 1) * i + r;
    MPI_Allreduce(a, sum, M, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    long total = 0;
    for (long i = 0; i < M; i++) total += sum[i];
    printf("RESULT rank %d of %d ring %llu allreduce %ld\n", r, s,
           (unsigned long long)checksum(buf), total);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
"#;

/// The line rank `r` of `s` must print (see `RING_C`).
fn expected_line(r: u32, s: u32) -> String {
    const N: usize = 16384;
    const M: i64 = 1000;
    let mut buf: Vec<u32> = (0..N as u32).collect();
    let last = if r == 0 { s - 1 } else { r };
    for k in 1..=last {
        for (i, b) in buf.iter_mut().enumerate() {
            *b = b.wrapping_mul(33).wrapping_add(k).wrapping_add(i as u32);
        }
    }
    let ring = buf.iter().enumerate().fold(0u64, |acc, (i, &b)| {
        acc.wrapping_add(u64::from(b) * (i as u64 + 1))
    });
    let n = i64::from(s);
    let total: i64 = (0..M).map(|i| i * n * (n + 1) / 2 + n * (n - 1) / 2).sum();
    format!("RESULT rank {r} of {s} ring {ring} allreduce {total}")
}

/// Builds the ring with `scripts/gwcc` against the `libmpi.so` next to
/// gwrun, once per test process; `None` (after the skip) without a C
/// compiler.
fn ring_program() -> Option<String> {
    static PROG: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    PROG.get_or_init(|| {
        let libdir = Path::new(GWRUN).parent().unwrap();
        assert!(
            libdir.join("libmpi.so").exists(),
            "{} missing: build the workspace first (make build-debug)",
            libdir.join("libmpi.so").display()
        );
        if !Path::new("/usr/bin/cc").exists() {
            gridwire_testkit::skip("no C compiler (/usr/bin/cc) to build the MPI ring");
            return None;
        }
        let gwcc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/gwcc");
        let dir = std::env::temp_dir().join(format!("gw-pmi2-test-{}", std::process::id()));
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
        Some(exe.to_string_lossy().into_owned())
    })
    .clone()
}

/// Every rank bootstrapped over PMI-2 and printed the right checksums.
fn assert_ring_over_pmi2(o: &common::Out, n: u32) {
    assert_ring_over(o, n, |_| "PMI-2")
}

/// Every rank bootstrapped over the protocol `proto` names for it and
/// printed the right checksums.
fn assert_ring_over(o: &common::Out, n: u32, proto: impl Fn(u32) -> &'static str) {
    assert_eq!(o.code, 0, "stdout:\n{}\nstderr:\n{}", o.stdout, o.stderr);
    for rank in 0..n {
        let p = proto(rank);
        assert!(
            o.stderr
                .contains(&format!("gw[{rank}]: bootstrap {p} (job ")),
            "rank {rank} did not bootstrap over {p}:\n{}",
            o.stderr
        );
        let want = expected_line(rank, n);
        assert!(
            o.stdout.lines().any(|l| l.trim() == want),
            "rank {rank}: want {want:?} in\n{}\nstderr:\n{}",
            o.stdout,
            o.stderr
        );
    }
}

/// gwrun serves PMI-2 to ranks that ask for it: an MPI job of 4 ranks
/// starts, communicates and checks its data.
#[test]
fn mpi_ring_under_gwrun_over_pmi2() {
    let Some(prog) = ring_program() else { return };
    let o = run(
        GWRUN,
        &["-n", "4", "--timeout", "60", &prog],
        &[
            ("GW_PMI", "pmi2"),
            ("GW_VERBOSE", "1"),
            ("GW_PMI_TIMEOUT", "60"),
        ],
        Duration::from_secs(90),
    );
    assert_ring_over_pmi2(&o, 4);
}

/// The proxies of `gwrun -f` serve PMI-2 too, and their fence (the
/// host's part of the job-wide exchange) works for it: two hosts started
/// locally, two ranks each.
#[test]
fn mpi_ring_under_gwrun_f_with_local_proxies_over_pmi2() {
    let Some(prog) = ring_program() else { return };
    let dir = std::env::temp_dir().join(format!("gw-pmi2-machines-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let machines = dir.join("machines");
    std::fs::write(&machines, "[site a] start=local\nh1:2\nh2:2\n").unwrap();
    let o = run(
        GWRUN,
        &[
            "-f",
            machines.to_str().unwrap(),
            "-n",
            "4",
            "--timeout",
            "60",
            &prog,
        ],
        &[
            ("GW_PMI", "pmi2"),
            ("GW_VERBOSE", "1"),
            ("GW_PMI_TIMEOUT", "60"),
        ],
        Duration::from_secs(90),
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert_ring_over_pmi2(&o, 4);
}

/// One job whose odd ranks speak PMI-1 and even ranks PMI-2 (a shell
/// wrapper sets `GW_PMI` by `PMI_RANK`), under `gwrun -n 4` and under the
/// proxies of `gwrun -f`: one key-value space and one fence serve both.
#[test]
fn mpi_ring_with_mixed_pmi1_and_pmi2_ranks() {
    let Some(prog) = ring_program() else { return };
    let dir = std::env::temp_dir().join(format!("gw-pmi2-mixed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let machines = dir.join("machines");
    std::fs::write(&machines, "[site a] start=local\nh1:2\nh2:2\n").unwrap();
    let wrapper = format!(
        "if [ $((PMI_RANK % 2)) -eq 1 ]; then GW_PMI=pmi1; else GW_PMI=pmi2; fi; \
         export GW_PMI; exec {prog}"
    );
    let envs = [("GW_VERBOSE", "1"), ("GW_PMI_TIMEOUT", "60")];
    let single = run(
        GWRUN,
        &["-n", "4", "--timeout", "60", "/bin/sh", "-c", &wrapper],
        &envs,
        Duration::from_secs(90),
    );
    let grid = run(
        GWRUN,
        &[
            "-f",
            machines.to_str().unwrap(),
            "-n",
            "4",
            "--timeout",
            "60",
            "/bin/sh",
            "-c",
            &wrapper,
        ],
        &envs,
        Duration::from_secs(90),
    );
    let _ = std::fs::remove_dir_all(&dir);
    let proto = |r: u32| if r % 2 == 1 { "PMI-1" } else { "PMI-2" };
    assert_ring_over(&single, 4, proto);
    assert_ring_over(&grid, 4, proto);
}

/// `pmi_check`'s key exchange (put, fence, a get of every other rank's
/// key, finalize) over PMI-2 under gwrun, without a protocol error. (A job
/// mixing PMI-1 and PMI-2 ranks is checked by the server's unit tests:
/// gwrun's command line gives every rank the same environment.)
#[test]
fn pmi_check_exchanges_keys_over_pmi2_under_gwrun() {
    let prog = example("pmi_check");
    let o = run(
        GWRUN,
        &["-n", "3", "--timeout", "30", &prog],
        &[("GW_PMI", "pmi2"), ("GW_PMI_TIMEOUT", "30")],
        Duration::from_secs(60),
    );
    assert_eq!(o.code, 0, "stdout:\n{}\nstderr:\n{}", o.stdout, o.stderr);
    assert!(!o.stderr.contains("PMI protocol error"), "{}", o.stderr);
}

/// PMI-2 `abort` from one rank under gwrun ends the job promptly with the
/// rank's exit code (carried in the abort message) while the others sleep.
#[test]
fn abort_over_pmi2_under_gwrun_ends_the_job_with_its_code() {
    let prog = example("pmi_check");
    let started = std::time::Instant::now();
    let o = run(
        GWRUN,
        &[
            "-n",
            "3",
            "--timeout",
            "60",
            &prog,
            "--abort",
            "1",
            "7",
            "--sleep",
            "30",
        ],
        &[("GW_PMI", "pmi2"), ("GW_PMI_TIMEOUT", "60")],
        Duration::from_secs(60),
    );
    assert_eq!(o.code, 7, "stdout:\n{}\nstderr:\n{}", o.stdout, o.stderr);
    assert!(
        o.stderr.contains("rank 1") && o.stderr.contains("abort"),
        "{}",
        o.stderr
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the job outlived the abort: {:?}",
        started.elapsed()
    );
}
