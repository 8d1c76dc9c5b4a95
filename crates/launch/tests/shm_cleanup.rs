//! Shared memory leaves nothing behind without gwrun: under MPICH's Hydra
//! (which knows nothing of gridwire's segments, and sweeps nothing) a job
//! whose rank is killed leaves no `/dev/shm` entry, and a later job with the
//! same job id starts. Before, each rank's control segment `gw-<job>-<ctx>`
//! and unattached pair segments leaked, and the repeat failed at init with
//! EEXIST.

mod common;

use common::{example, run};
use std::time::Duration;

fn mpiexec() -> Option<&'static str> {
    ["/usr/bin/mpiexec.mpich", "/usr/bin/mpiexec.hydra"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
}

fn shm_entries(job: &str) -> Vec<String> {
    let prefix = format!("gw-{job}");
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n.starts_with(&prefix))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn killed_rank_under_hydra_leaves_nothing_and_the_job_id_can_repeat() {
    let Some(mpiexec) = mpiexec() else {
        return gridwire_testkit::skip(
            "mpiexec.mpich is not installed (scripts/install-deps.sh installs it)",
        );
    };
    let prog = example("rsr_check");
    let job = format!("hydrashm{}", std::process::id());
    let envs = [("GW_JOB_ID", job.as_str())];
    // Rank 1 kills itself with SIGKILL once every rank connected to every other.
    let o = run(
        mpiexec,
        &["-n", "3", &prog, "die-after-setup"],
        &envs,
        Duration::from_secs(90),
    );
    assert_ne!(o.code, 0, "the job should fail\n{}\n{}", o.stdout, o.stderr);
    assert_eq!(
        o.stdout.matches("READY").count(),
        3,
        "every rank set up its links first\n{}\n{}",
        o.stdout,
        o.stderr
    );
    // Hydra has killed the others by the time mpiexec returns; nothing swept.
    assert_eq!(shm_entries(&job), Vec::<String>::new());
    // The same job id again: starts and runs (shm between every pair).
    let o = run(
        mpiexec,
        &["-n", "3", &prog, "select"],
        &envs,
        Duration::from_secs(90),
    );
    assert_eq!(
        o.code, 0,
        "repeat of job id {job}\n{}\n{}",
        o.stdout, o.stderr
    );
    assert!(o.stdout.contains("shm"), "{}", o.stdout);
    assert_eq!(shm_entries(&job), Vec::<String>::new());
}
