//! The MPI-1 names that MPI-3 removed, which the MPI 5.0 ABI still lists
//! and existing programs still call: thin wrappers over their successors
//! (same checks, same errors; the successor's name is in its messages).

use crate::abi::*;
use crate::errors::{run, ErrFn};
use crate::Void;
use gridwire_mpi::{class, err};
use std::ffi::c_int;

mpi_fn!(fn MPI_Errhandler_create / PMPI_Errhandler_create(f: Option<ErrFn>, eh: *mut MPI_Errhandler) -> c_int {
    // SAFETY: same contract as MPI_Comm_create_errhandler.
    unsafe { crate::errors::PMPI_Comm_create_errhandler(f, eh) }
});

mpi_fn!(fn MPI_Errhandler_set / PMPI_Errhandler_set(comm: MPI_Comm, eh: MPI_Errhandler) -> c_int {
    // SAFETY: same contract as MPI_Comm_set_errhandler.
    unsafe { crate::errors::PMPI_Comm_set_errhandler(comm, eh) }
});

mpi_fn!(fn MPI_Errhandler_get / PMPI_Errhandler_get(comm: MPI_Comm, eh: *mut MPI_Errhandler) -> c_int {
    // SAFETY: same contract as MPI_Comm_get_errhandler.
    unsafe { crate::errors::PMPI_Comm_get_errhandler(comm, eh) }
});

mpi_fn!(fn MPI_Address / PMPI_Address(location: *const Void, address: *mut MPI_Aint) -> c_int {
    // SAFETY: same contract as MPI_Get_address.
    unsafe { crate::env::PMPI_Get_address(location, address) }
});

mpi_fn!(fn MPI_Type_extent / PMPI_Type_extent(dt: MPI_Datatype, extent: *mut MPI_Aint) -> c_int {
    let mut lb: MPI_Aint = 0;
    // SAFETY: `lb` is a local; `extent` is the program's output argument,
    // which MPI_Type_get_extent checks.
    unsafe { crate::dtype::PMPI_Type_get_extent(dt, &mut lb, extent) }
});

/// `MPI_Type_lb` / `MPI_Type_ub`: the lower bound, or lower bound + extent.
///
/// # Safety
/// `out` is NULL or the program's `MPI_Aint` output argument.
unsafe fn bound(name: &str, dt: MPI_Datatype, out: *mut MPI_Aint, upper: bool) -> c_int {
    let (mut lb, mut extent): (MPI_Aint, MPI_Aint) = (0, 0);
    // SAFETY: both outputs are locals.
    let rc = unsafe { crate::dtype::PMPI_Type_get_extent(dt, &mut lb, &mut extent) };
    if rc != MPI_SUCCESS {
        return rc;
    }
    run(name, MPI_COMM_WORLD, || {
        if out.is_null() {
            return Err(err(class::ARG, "displacement pointer is NULL"));
        }
        // SAFETY: checked output argument.
        unsafe { *out = if upper { lb + extent } else { lb } };
        Ok(())
    })
}

mpi_fn!(fn MPI_Type_lb / PMPI_Type_lb(dt: MPI_Datatype, displacement: *mut MPI_Aint) -> c_int {
    // SAFETY: forwarded output argument.
    unsafe { bound("MPI_Type_lb", dt, displacement, false) }
});

mpi_fn!(fn MPI_Type_ub / PMPI_Type_ub(dt: MPI_Datatype, displacement: *mut MPI_Aint) -> c_int {
    // SAFETY: forwarded output argument.
    unsafe { bound("MPI_Type_ub", dt, displacement, true) }
});

mpi_fn!(fn MPI_Type_hvector / PMPI_Type_hvector(n: c_int, bl: c_int, stride: MPI_Aint, old: MPI_Datatype, out: *mut MPI_Datatype) -> c_int {
    // SAFETY: same contract as MPI_Type_create_hvector.
    unsafe { crate::dtype::PMPI_Type_create_hvector(n, bl, stride, old, out) }
});

mpi_fn!(fn MPI_Type_hindexed / PMPI_Type_hindexed(n: c_int, bls: *const c_int, ds: *const MPI_Aint, old: MPI_Datatype, out: *mut MPI_Datatype) -> c_int {
    // SAFETY: same contract as MPI_Type_create_hindexed.
    unsafe { crate::dtype::PMPI_Type_create_hindexed(n, bls, ds, old, out) }
});

mpi_fn!(fn MPI_Type_struct / PMPI_Type_struct(n: c_int, bls: *const c_int, ds: *const MPI_Aint, ts: *const MPI_Datatype, out: *mut MPI_Datatype) -> c_int {
    // SAFETY: same contract as MPI_Type_create_struct.
    unsafe { crate::dtype::PMPI_Type_create_struct(n, bls, ds, ts, out) }
});
