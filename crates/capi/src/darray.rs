//! `MPI_Type_create_darray(_c)` (over [`gridwire_mpi::datatype::darray`]).

use crate::abi::*;
use crate::arr;
use crate::errors::run;
use crate::handles::{dtype, new_type};
use gridwire_mpi::datatype::darray::Distrib;
use gridwire_mpi::{class, err, Datatype, Result};
use std::ffi::c_int;

pub const MPI_DISTRIBUTE_NONE: c_int = 16;
pub const MPI_DISTRIBUTE_BLOCK: c_int = 17;
pub const MPI_DISTRIBUTE_CYCLIC: c_int = 18;
/// The standard ABI's value: a block size of 19 cannot be asked for
/// explicitly (it reads as "the default").
pub const MPI_DISTRIBUTE_DFLT_DARG: c_int = 19;

/// One dimension's (distribution, darg) from the C arguments.
fn distrib(d: c_int, darg: c_int) -> Result<Distrib> {
    let darg = match darg {
        MPI_DISTRIBUTE_DFLT_DARG => None,
        x if x > 0 => Some(x as i64),
        x => {
            return Err(err(
                class::ARG,
                format!("darray: darg {x} is neither positive nor MPI_DISTRIBUTE_DFLT_DARG"),
            ))
        }
    };
    match d {
        MPI_DISTRIBUTE_NONE => Ok(Distrib::None),
        MPI_DISTRIBUTE_BLOCK => Ok(Distrib::Block(darg)),
        MPI_DISTRIBUTE_CYCLIC => Ok(Distrib::Cyclic(darg)),
        _ => Err(err(
            class::ARG,
            format!("darray: distribution {d} is not MPI_DISTRIBUTE_NONE, _BLOCK or _CYCLIC"),
        )),
    }
}

/// The C (distribution, darg) of a dimension, for `MPI_Type_get_contents`.
pub fn distrib_c(d: Distrib) -> (c_int, c_int) {
    let darg = |x: Option<i64>| x.map_or(MPI_DISTRIBUTE_DFLT_DARG, |v| v as c_int);
    match d {
        Distrib::None => (MPI_DISTRIBUTE_NONE, MPI_DISTRIBUTE_DFLT_DARG),
        Distrib::Block(x) => (MPI_DISTRIBUTE_BLOCK, darg(x)),
        Distrib::Cyclic(x) => (MPI_DISTRIBUTE_CYCLIC, darg(x)),
    }
}

/// Both forms after the global sizes are read.
///
/// # Safety
/// The arrays hold `nd` ints each (the MPI contract).
#[allow(clippy::too_many_arguments)]
unsafe fn darray(
    size: c_int,
    rank: c_int,
    nd: c_int,
    gsizes: Vec<i64>,
    distribs: *const c_int,
    dargs: *const c_int,
    psizes: *const c_int,
    order: c_int,
    old: MPI_Datatype,
    out: *mut MPI_Datatype,
) -> Result<()> {
    if nd <= 0 {
        return Err(err(
            class::ARG,
            format!("darray: ndims {nd} is not positive"),
        ));
    }
    if distribs.is_null() || dargs.is_null() || psizes.is_null() {
        return Err(err(class::ARG, "darray: an array argument is NULL"));
    }
    let order_c = match order {
        MPI_ORDER_C => true,
        MPI_ORDER_FORTRAN => false,
        _ => {
            return Err(err(
                class::ARG,
                format!("order {order} is neither MPI_ORDER_C nor MPI_ORDER_FORTRAN"),
            ))
        }
    };
    // SAFETY: `nd` ints each, by the caller's contract.
    let (ds, da, ps) = unsafe { (arr(distribs, nd), arr(dargs, nd), arr(psizes, nd)) };
    let dist = ds
        .iter()
        .zip(da)
        .map(|(&d, &a)| distrib(d, a))
        .collect::<Result<Vec<_>>>()?;
    let ps: Vec<i64> = ps.iter().map(|&p| p as i64).collect();
    let old = dtype(old)?;
    let t = Datatype::darray(size as i64, rank as i64, &gsizes, &dist, &ps, order_c, &old)?;
    if out.is_null() {
        return Err(err(class::ARG, "the output datatype pointer is NULL"));
    }
    // SAFETY: checked non-null output argument.
    unsafe { *out = new_type(t) };
    Ok(())
}

mpi_fn!(fn MPI_Type_create_darray / PMPI_Type_create_darray(size: c_int, rank: c_int, nd: c_int, gsizes: *const c_int, distribs: *const c_int,
        dargs: *const c_int, psizes: *const c_int, order: c_int, old: MPI_Datatype, out: *mut MPI_Datatype) -> c_int {
    run("MPI_Type_create_darray", MPI_COMM_WORLD, || {
        if nd > 0 && gsizes.is_null() {
            return Err(err(class::ARG, "darray: gsizes is NULL"));
        }
        // SAFETY: `nd` ints (the MPI contract).
        let g = unsafe { arr(gsizes, nd) }.iter().map(|&x| x as i64).collect();
        // SAFETY: forwarded argument contract.
        unsafe { darray(size, rank, nd, g, distribs, dargs, psizes, order, old, out) }
    })
});

mpi_fn!(fn MPI_Type_create_darray_c / PMPI_Type_create_darray_c(size: c_int, rank: c_int, nd: c_int, gsizes: *const MPI_Count, distribs: *const c_int,
        dargs: *const c_int, psizes: *const c_int, order: c_int, old: MPI_Datatype, out: *mut MPI_Datatype) -> c_int {
    run("MPI_Type_create_darray_c", MPI_COMM_WORLD, || {
        if nd > 0 && gsizes.is_null() {
            return Err(err(class::ARG, "darray: gsizes is NULL"));
        }
        // SAFETY: `nd` counts (the MPI contract).
        let g = unsafe { arr(gsizes, nd) }.to_vec();
        // SAFETY: forwarded argument contract.
        unsafe { darray(size, rank, nd, g, distribs, dargs, psizes, order, old, out) }
    })
});
