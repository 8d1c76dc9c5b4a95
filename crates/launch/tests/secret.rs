//! The job secret under other launchers: without `GW_JOB_SECRET` it must be
//! random and shared through PMI, not derived from the kvsname (which any
//! local user sees in `ps`). Under gwrun it is the one gwrun passes in the
//! environment.

mod common;

use common::{example, run, GWRUN};
use std::time::Duration;

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
fn secret_under_hydra_is_random_shared_and_not_derived_from_the_kvsname() {
    let Some(mpiexec) = ["/usr/bin/mpiexec.mpich", "/usr/bin/mpiexec.hydra"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
    else {
        gridwire_testkit::skip(
            "mpiexec.mpich is not installed (scripts/install-deps.sh installs it)",
        );
        return;
    };
    let prog = example("secret_check");
    let mut fingerprints = Vec::new();
    for _ in 0..2 {
        let o = run(mpiexec, &["-n", "2", &prog], &[], Duration::from_secs(60));
        assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
        let s = secrets(&o.stdout);
        assert_eq!(s.len(), 2, "{}", o.stdout);
        assert_eq!(s[0].1, s[1].1, "the ranks disagree on the secret");
        for (rank, fp, derived) in &s {
            assert_ne!(
                fp, derived,
                "rank {rank}: the secret is the hash of the public kvsname"
            );
        }
        fingerprints.push(s[0].1.clone());
    }
    assert_ne!(fingerprints[0], fingerprints[1], "two jobs got one secret");
}

#[test]
fn secret_under_gwrun_is_the_one_in_the_environment() {
    let prog = example("secret_check");
    let o = run(
        GWRUN,
        &["-n", "2", "--timeout", "30", &prog],
        &[],
        Duration::from_secs(60),
    );
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let s = secrets(&o.stdout);
    assert_eq!(s.len(), 2, "{}", o.stdout);
    assert_eq!(s[0].1, s[1].1);
    assert_ne!(s[0].1, s[0].2);
}
