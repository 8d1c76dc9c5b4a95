//! `MPI_Comm_spawn` of a gridwire program started by Open MPI's
//! `mpirun.openmpi`, whose daemons serve PMIx: the root asks with
//! `PMIx_Spawn`, the children are a job of their own (a new namespace) and
//! connect to the parents' port, whose name they find in their environment
//! (`GW_PARENT_PORT`, passed through the spawn's application `env`).
//! `tests/mpi/spawn_grid.c once`: 4 children, checksummed short and 1 MiB
//! messages every parent to every child and back, `Intercomm_merge`,
//! allreduce over parents and children; with 1 and 2 parents.
//! (Spawn under Hydra is `c_suite::spawn_under_hydra`; under Slurm's pmi2
//! plugin, the testbed's `slurm_pmi2` test.)

mod common;

use common::{compile_mpi_test, have_cc};
use gridwire_testkit::skip;
use std::path::PathBuf;
use std::process::{Command, Stdio};

fn mpirun() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("mpirun.openmpi"))
        .find(|p| p.exists())
}

fn compile(name: &str) -> PathBuf {
    // A directory of this test file's own: c_suite builds the same
    // program into mpi-tests, and the two may run at once.
    compile_mpi_test("mpi-tests-spawn-launchers", name)
}

/// `mpirun.openmpi -n N exe args` (bounded by `timeout`): success, stdout,
/// stderr.
fn under_mpirun(mpirun: &PathBuf, n: u32, exe: &PathBuf, args: &[&str]) -> (bool, String, String) {
    let out = Command::new("timeout")
        .arg("90")
        .arg(mpirun)
        .args([
            "--allow-run-as-root",
            "--oversubscribe",
            "-n",
            &n.to_string(),
        ])
        // The connect timeout bounds a child that never comes.
        .args(["-x", "GW_MPI_CONNECT_TIMEOUT=30"])
        .arg(exe)
        .args(args)
        .env_remove("GW_WORLD")
        .env_remove("GW_PMI")
        .stdin(Stdio::null())
        .output()
        .expect("timeout and mpirun.openmpi run");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn spawn_under_open_mpi() {
    let Some(mpirun) = mpirun() else {
        skip(
            "mpirun.openmpi is not installed (Debian package openmpi-bin; \
             scripts/install-deps.sh installs it)",
        );
        return;
    };
    if !have_cc() {
        skip("spawn_under_open_mpi: no C compiler (cc or GWCC_CC)");
        return;
    }
    let exe = compile("spawn_grid");
    for n in [1, 2] {
        let (ok, so, se) = under_mpirun(&mpirun, n, &exe, &["once"]);
        let spawned = so.lines().filter(|l| l.starts_with("SPAWNED ")).count();
        assert!(
            ok && so.contains("PASS spawn_grid once") && spawned == 4,
            "spawn under mpirun.openmpi with {n} parents ({spawned} children said so):\n{so}\n{se}"
        );
    }
    // No `missing` case: Open MPI 4's mpirun ends the whole job when it
    // cannot start a spawned program ("unable to launch the specified
    // application"), before PMIx_Spawn returns (docs/mpi.md).
}
