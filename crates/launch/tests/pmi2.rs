//! Start-up over PMI-2: gridwire programs started by MPICH's Hydra with the
//! client forced to PMI-2 (`GW_PMI=pmi2`; Hydra answers whichever version
//! the client's `init` line asks for), exchanging messages between 3 ranks
//! and sharing a random job secret through the PMI-2 key-value space. Also
//! the clear error when a launcher (gwrun, PMI-1 only) refuses PMI-2.
//! Slurm's `srun --mpi=pmi2` is not tested here (Slurm is not installed on
//! the test machines yet).

mod common;

use common::{example, run, GWRUN};
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

/// gwrun serves PMI-1 only: a client forced to PMI-2 gets a clear error
/// that says how to fix it, and the job ends.
#[test]
fn pmi2_refused_by_a_pmi1_launcher_is_a_clear_error() {
    let prog = example("secret_check");
    let o = run(
        GWRUN,
        &["-n", "2", "--timeout", "30", &prog],
        &[("GW_PMI", "pmi2")],
        Duration::from_secs(60),
    );
    assert_ne!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    assert!(
        o.stderr.contains("refused PMI version 2.0") && o.stderr.contains("GW_PMI=pmi1"),
        "{}",
        o.stderr
    );
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
