//! The MPICH-ABI shim (`compat/mpich-abi`, docs/mpi.md): programs built for
//! MPICH's ABI, such as mpi4py's PyPI wheel, run on gridwire when they load the
//! shim's `libmpi.so.12` instead of MPICH. gwrun puts the shim's directory first
//! in the ranks' `LD_LIBRARY_PATH` when it exists beside gwrun (build tree:
//! `target/<profile>/mpich-abi`; installed: `PREFIX/lib/mpich-abi`). That
//! directory holds only `libmpi.so.12` and `libmpich.so.12`, so programs linked
//! with gwcc (`libmpi.so`, by rpath) are unaffected. It also points mpi4py's ABI
//! detection at the shim (`MPI4PY_LIBMPI`) unless the user chose
//! (`MPI4PY_LIBMPI`/`MPI4PY_MPIABI` set). `GW_MPICH_ABI=0` turns this off;
//! `GW_MPICH_ABI=DIR` names another directory.
use std::path::PathBuf;
use std::process::Command;

fn shim_dir() -> Option<PathBuf> {
    let choice = std::env::var_os("GW_MPICH_ABI");
    if let Some(v) = &choice {
        if v == "0" {
            return None;
        }
        if !v.is_empty() {
            return Some(PathBuf::from(v));
        }
    }
    let exe = std::env::current_exe().ok()?;
    let bin = exe.parent()?;
    [bin.join("mpich-abi"), bin.join("../lib/mpich-abi")]
        .into_iter()
        .find(|d| d.join("libmpi.so.12").is_file())
}

/// Sets the rank's environment for the shim (nothing when there is none).
pub fn apply(cmd: &mut Command) {
    let Some(dir) = shim_dir() else { return };
    let mut paths = vec![dir.clone()];
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH") {
        paths.extend(std::env::split_paths(&old));
    }
    if let Ok(p) = std::env::join_paths(paths) {
        cmd.env("LD_LIBRARY_PATH", p);
    }
    if std::env::var_os("MPI4PY_LIBMPI").is_none() && std::env::var_os("MPI4PY_MPIABI").is_none() {
        cmd.env("MPI4PY_LIBMPI", dir.join("libmpi.so.12"));
    }
}
