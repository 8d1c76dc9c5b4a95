//! `MPI_Comm_spawn`, `MPI_Comm_spawn_multiple`, `MPI_Comm_get_parent`
//! (gridwire-mpi's spawn module does the work).

use crate::abi::*;
use crate::comm::info_or_empty;
use crate::errors::run;
use crate::handles::{comm, mpi, new_comm};
use crate::{cstr, put};
use gridwire_core::bootstrap::spawn_wire::SpawnApp;
use gridwire_mpi::{class, err, Result};
use std::ffi::{c_char, c_int};
use std::sync::Mutex;

/// Most arguments of one spawned program (and most programs) read from the
/// caller's arrays: they end at a NULL, which a broken program may forget.
const MAX_ITEMS: usize = 1024;

/// The handle `MPI_Comm_get_parent` returns: made on the first call, the
/// same after, `MPI_COMM_NULL` once the program freed or disconnected it.
/// (handle, freed)
static PARENT: Mutex<(MPI_Comm, bool)> = Mutex::new((MPI_COMM_NULL, false));

/// Called when a communicator handle is freed.
pub(crate) fn forget_parent(h: MPI_Comm) {
    let mut p = PARENT.lock().unwrap_or_else(|e| e.into_inner());
    if p.0 == h && h != MPI_COMM_NULL {
        *p = (MPI_COMM_NULL, true);
    }
}

mpi_fn!(fn MPI_Comm_get_parent / PMPI_Comm_get_parent(parent: *mut MPI_Comm) -> c_int {
    run("MPI_Comm_get_parent", MPI_COMM_WORLD, || {
        if parent.is_null() {
            return Err(err(class::ARG, "the output communicator pointer is NULL"));
        }
        let m = mpi()?;
        let mut p = PARENT.lock().unwrap_or_else(|e| e.into_inner());
        if p.0 == MPI_COMM_NULL && !p.1 {
            if let Some(ic) = &m.parent {
                p.0 = new_comm(ic.clone());
            }
        }
        // SAFETY: checked non-null output argument.
        unsafe { put(parent, p.0) };
        Ok(())
    })
});

/// A NULL-terminated array of C strings (`MPI_ARGV_NULL` = none).
///
/// # Safety
/// `argv` is NULL or a NULL-terminated array of C strings.
unsafe fn argv_of(argv: *const *mut c_char) -> Result<Vec<String>> {
    let mut out = Vec::new();
    if argv.is_null() {
        return Ok(out);
    }
    loop {
        if out.len() > MAX_ITEMS {
            return Err(err(
                class::ARG,
                format!("a spawned program's argv has more than {MAX_ITEMS} entries (no NULL at its end?)"),
            ));
        }
        // SAFETY: within the NULL-terminated array (we stop at the NULL).
        let a = unsafe { *argv.add(out.len()) };
        if a.is_null() {
            return Ok(out);
        }
        // SAFETY: each entry is a C string.
        out.push(unsafe { cstr(a) });
    }
}

fn app(command: String, args: Vec<String>, maxprocs: c_int, info: MPI_Info) -> Result<SpawnApp> {
    if command.is_empty() {
        return Err(err(class::ARG, "the command to spawn is empty"));
    }
    if maxprocs <= 0 {
        return Err(err(
            class::ARG,
            format!("maxprocs must be positive (got {maxprocs})"),
        ));
    }
    let info = info_or_empty(info)?.pairs;
    Ok(SpawnApp {
        command,
        args,
        maxprocs: maxprocs as u32,
        info,
    })
}

/// Spawns at the root, builds the intercommunicator everywhere, fills the
/// error codes at every member, as MPICH and Open MPI do (every code the
/// call's outcome: the launcher starts all or nothing).
///
/// # Safety
/// `out` and `errcodes` are the program's arguments (`errcodes` NULL or
/// room for the sum of maxprocs).
unsafe fn spawn_common(
    name: &str,
    apps: impl FnOnce() -> Result<Vec<SpawnApp>>,
    root: c_int,
    c: MPI_Comm,
    out: *mut MPI_Comm,
    errcodes: *mut c_int,
) -> c_int {
    run(name, c, || {
        let cm = comm(c)?;
        if out.is_null() {
            return Err(err(class::ARG, "the output communicator pointer is NULL"));
        }
        let m = mpi()?;
        // The arguments matter at the root only; elsewhere they may be junk.
        let at_root = root >= 0 && (root as u32) == cm.rank && !cm.is_inter();
        let apps = if at_root { apps()? } else { Vec::new() };
        let (asked, r) = m.spawn(&cm, root, &apps);
        if !errcodes.is_null() {
            let code = r.as_ref().map_or_else(|e| e.class, |_| MPI_SUCCESS);
            for i in 0..asked as usize {
                // SAFETY: the array has room for every process asked for
                // (the sum of maxprocs, which every member passes).
                unsafe { *errcodes.add(i) = code };
            }
        }
        match r {
            Ok(ic) => {
                let eh = cm.errhandler.load(std::sync::atomic::Ordering::Relaxed);
                ic.errhandler
                    .store(eh, std::sync::atomic::Ordering::Relaxed);
                // SAFETY: checked non-null output argument.
                unsafe { *out = new_comm(ic) };
                Ok(())
            }
            Err(e) => {
                // SAFETY: as above.
                unsafe { *out = MPI_COMM_NULL };
                Err(e)
            }
        }
    })
}

mpi_fn!(fn MPI_Comm_spawn / PMPI_Comm_spawn(command: *const c_char, argv: *mut *mut c_char, maxprocs: c_int, info: MPI_Info, root: c_int, c: MPI_Comm, intercomm: *mut MPI_Comm, errcodes: *mut c_int) -> c_int {
    // SAFETY: the arguments as MPI defines them (strings, NULL-terminated argv).
    unsafe {
        spawn_common(
            "MPI_Comm_spawn",
            || Ok(vec![app(cstr(command), argv_of(argv)?, maxprocs, info)?]),
            root,
            c,
            intercomm,
            errcodes,
        )
    }
});

mpi_fn!(fn MPI_Comm_spawn_multiple / PMPI_Comm_spawn_multiple(count: c_int, commands: *mut *mut c_char, argvs: *mut *mut *mut c_char, maxprocs: *const c_int, infos: *const MPI_Info, root: c_int, c: MPI_Comm, intercomm: *mut MPI_Comm, errcodes: *mut c_int) -> c_int {
    let apps = || -> Result<Vec<SpawnApp>> {
        if count <= 0 || count as usize > MAX_ITEMS {
            return Err(err(class::ARG, format!("count must be 1 to {MAX_ITEMS} (got {count})")));
        }
        if commands.is_null() || maxprocs.is_null() || infos.is_null() {
            return Err(err(class::ARG, "the commands, maxprocs or infos array is NULL"));
        }
        (0..count as usize)
            .map(|i| {
                // SAFETY: arrays of `count` entries as MPI defines them;
                // MPI_ARGVS_NULL (NULL) means no arguments for any program.
                unsafe {
                    let argv = if argvs.is_null() { std::ptr::null_mut() } else { *argvs.add(i) };
                    app(cstr(*commands.add(i)), argv_of(argv)?, *maxprocs.add(i), *infos.add(i))
                }
            })
            .collect()
    };
    // SAFETY: forwarded argument contract.
    unsafe { spawn_common("MPI_Comm_spawn_multiple", apps, root, c, intercomm, errcodes) }
});
