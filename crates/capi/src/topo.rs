//! Cartesian topologies and `MPI_Dims_create`.

use crate::abi::*;
use crate::errors::run;
use crate::handles::{comm, mpi, new_comm};
use crate::{arr, arr_mut, put};
use gridwire_mpi::{class, err, Comm, Result};
use std::ffi::c_int;
use std::sync::atomic::Ordering;
use std::sync::Arc;

const MPI_CART: c_int = 211;
const MPI_GRAPH: c_int = 212;
const MPI_DIST_GRAPH: c_int = 213;

fn cart_of(c: &Comm) -> Result<gridwire_mpi::comm::Cart> {
    c.cart.lock().unwrap().clone().ok_or_else(|| {
        err(
            class::TOPOLOGY,
            "the communicator has no Cartesian topology",
        )
    })
}

pub(crate) unsafe fn out_comm(
    out: *mut MPI_Comm,
    parent: &Comm,
    c: Option<Arc<Comm>>,
) -> Result<()> {
    if out.is_null() {
        return Err(err(class::ARG, "the output communicator pointer is NULL"));
    }
    let h = match c {
        Some(c) => {
            c.errhandler
                .store(parent.errhandler.load(Ordering::Relaxed), Ordering::Relaxed);
            new_comm(c)
        }
        None => MPI_COMM_NULL,
    };
    // SAFETY: checked output argument.
    unsafe { *out = h };
    Ok(())
}

mpi_fn!(fn MPI_Dims_create / PMPI_Dims_create(n: c_int, nd: c_int, dims: *mut c_int) -> c_int {
    run("MPI_Dims_create", MPI_COMM_WORLD, || {
        if nd < 0 || (nd > 0 && dims.is_null()) {
            return Err(err(class::DIMS, "ndims is negative or dims is NULL"));
        }
        // SAFETY: in/out array of `nd` ints.
        gridwire_mpi::group::dims_create(n, unsafe { arr_mut(dims, nd) })
    })
});

mpi_fn!(fn MPI_Cart_create / PMPI_Cart_create(c: MPI_Comm, nd: c_int, dims: *const c_int, periods: *const c_int, _reorder: c_int, out: *mut MPI_Comm) -> c_int {
    run("MPI_Cart_create", c, || {
        let cm = comm(c)?;
        // SAFETY: arrays of `nd` ints.
        let (d, p) = unsafe { (arr(dims, nd).to_vec(), arr(periods, nd).iter().map(|&x| x != 0).collect::<Vec<_>>()) };
        let n = mpi()?.cart_create(&cm, &d, &p)?;
        // SAFETY: output argument.
        unsafe { out_comm(out, &cm, n) }
    })
});

mpi_fn!(fn MPI_Cart_sub / PMPI_Cart_sub(c: MPI_Comm, remain: *const c_int, out: *mut MPI_Comm) -> c_int {
    run("MPI_Cart_sub", c, || {
        let cm = comm(c)?;
        let nd = cart_of(&cm)?.dims.len() as c_int;
        // SAFETY: array of ndims ints.
        let r: Vec<bool> = unsafe { arr(remain, nd) }.iter().map(|&x| x != 0).collect();
        let n = mpi()?.cart_sub(&cm, &r)?;
        // SAFETY: output argument.
        unsafe { out_comm(out, &cm, Some(n)) }
    })
});

mpi_fn!(fn MPI_Topo_test / PMPI_Topo_test(c: MPI_Comm, status: *mut c_int) -> c_int {
    run("MPI_Topo_test", c, || {
        let cm = comm(c)?;
        let t = match &*cm.graph.lock().unwrap() {
            Some(gridwire_mpi::topology::Topology::Graph(_)) => MPI_GRAPH,
            Some(gridwire_mpi::topology::Topology::DistGraph(_)) => MPI_DIST_GRAPH,
            None if cm.cart.lock().unwrap().is_some() => MPI_CART,
            None => MPI_UNDEFINED,
        };
        // SAFETY: output argument.
        unsafe { put(status, t) };
        Ok(())
    })
});

mpi_fn!(fn MPI_Cartdim_get / PMPI_Cartdim_get(c: MPI_Comm, nd: *mut c_int) -> c_int {
    run("MPI_Cartdim_get", c, || {
        let n = cart_of(&*comm(c)?)?.dims.len();
        // SAFETY: output argument.
        unsafe { put(nd, n as c_int) };
        Ok(())
    })
});

mpi_fn!(fn MPI_Cart_get / PMPI_Cart_get(c: MPI_Comm, maxdims: c_int, dims: *mut c_int, periods: *mut c_int, coords: *mut c_int) -> c_int {
    run("MPI_Cart_get", c, || {
        let cm = comm(c)?;
        let t = cart_of(&cm)?;
        let n = t.dims.len().min(maxdims.max(0) as usize) as c_int;
        let co = t.coords(cm.rank as i32);
        // SAFETY: output arrays of `maxdims` ints.
        unsafe {
            arr_mut(dims, n).copy_from_slice(&t.dims[..n as usize]);
            for (o, p) in arr_mut(periods, n).iter_mut().zip(&t.periods) {
                *o = *p as c_int;
            }
            arr_mut(coords, n).copy_from_slice(&co[..n as usize]);
        }
        Ok(())
    })
});

mpi_fn!(fn MPI_Cart_rank / PMPI_Cart_rank(c: MPI_Comm, coords: *const c_int, rank: *mut c_int) -> c_int {
    run("MPI_Cart_rank", c, || {
        let t = cart_of(&*comm(c)?)?;
        // SAFETY: array of ndims ints.
        let co = unsafe { arr(coords, t.dims.len() as c_int) };
        let r = t.rank(co).ok_or_else(|| err(class::RANK, format!("coordinates {co:?} are outside the grid {:?}", t.dims)))?;
        // SAFETY: output argument.
        unsafe { put(rank, r) };
        Ok(())
    })
});

mpi_fn!(fn MPI_Cart_coords / PMPI_Cart_coords(c: MPI_Comm, rank: c_int, maxdims: c_int, coords: *mut c_int) -> c_int {
    run("MPI_Cart_coords", c, || {
        let cm = comm(c)?;
        let t = cart_of(&cm)?;
        if rank < 0 || rank as u32 >= cm.size {
            return Err(err(class::RANK, format!("rank {rank} is invalid in a communicator of size {}", cm.size)));
        }
        let co = t.coords(rank);
        let n = co.len().min(maxdims.max(0) as usize);
        // SAFETY: output array of `maxdims` ints.
        unsafe { arr_mut(coords, n as c_int) }.copy_from_slice(&co[..n]);
        Ok(())
    })
});

mpi_fn!(fn MPI_Cart_shift / PMPI_Cart_shift(c: MPI_Comm, dir: c_int, disp: c_int, src: *mut c_int, dest: *mut c_int) -> c_int {
    run("MPI_Cart_shift", c, || {
        let cm = comm(c)?;
        let t = cart_of(&cm)?;
        if dir < 0 || dir as usize >= t.dims.len() {
            return Err(err(class::DIMS, format!("direction {dir} is not a dimension of the grid")));
        }
        let me = t.coords(cm.rank as i32);
        let at = |delta: i32| {
            let mut co = me.clone();
            co[dir as usize] += delta;
            t.rank(&co).unwrap_or(gridwire_mpi::PROC_NULL)
        };
        // SAFETY: output arguments.
        unsafe {
            put(src, at(-disp));
            put(dest, at(disp));
        }
        Ok(())
    })
});

mpi_fn!(fn MPI_Cart_map / PMPI_Cart_map(c: MPI_Comm, nd: c_int, dims: *const c_int, _periods: *const c_int, newrank: *mut c_int) -> c_int {
    run("MPI_Cart_map", c, || {
        let cm = comm(c)?;
        // SAFETY: array of `nd` ints.
        let n: i64 = unsafe { arr(dims, nd) }.iter().map(|&d| d as i64).product();
        let r = if (cm.rank as i64) < n { cm.rank as c_int } else { MPI_UNDEFINED };
        // SAFETY: output argument.
        unsafe { put(newrank, r) };
        Ok(())
    })
});
