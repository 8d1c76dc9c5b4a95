//! Collective operations and reduction operations.

use crate::abi::*;
use crate::errors::run;
use crate::handles::{self, buf, comm, mpi, OPS};
use crate::{arr, put, Void};
use gridwire_mpi::{class, err, Buf, Comm, Op, Result};
use std::ffi::c_int;
use std::sync::Arc;

fn in_place(p: *const Void) -> bool {
    p as usize == MPI_IN_PLACE
}

/// A send buffer that may be `MPI_IN_PLACE`.
///
/// # Safety
/// As [`buf`].
unsafe fn sbuf(p: *const Void, count: c_int, dt: MPI_Datatype) -> Result<Option<Buf>> {
    if in_place(p) {
        return Ok(None);
    }
    // SAFETY: forwarded contract.
    unsafe { buf(p, count as i64, dt) }.map(Some)
}

fn is_root(c: &Comm, root: c_int) -> bool {
    root >= 0 && c.rank == root as u32
}

fn counts_displs(
    c: &Comm,
    counts: *const c_int,
    displs: *const c_int,
) -> Result<(Vec<i64>, Vec<i64>)> {
    let n = c.size as c_int;
    if counts.is_null() || displs.is_null() {
        return Err(err(class::ARG, "counts or displacements array is NULL"));
    }
    // SAFETY: arrays of comm-size entries by the standard.
    let (cs, ds) = unsafe { (arr(counts, n), arr(displs, n)) };
    if let Some(x) = cs.iter().find(|&&x| x < 0) {
        return Err(err(class::COUNT, format!("count {x} is negative")));
    }
    Ok((
        cs.iter().map(|&x| x as i64).collect(),
        ds.iter().map(|&x| x as i64).collect(),
    ))
}

mpi_fn!(fn MPI_Barrier / PMPI_Barrier(c: MPI_Comm) -> c_int {
    run("MPI_Barrier", c, || mpi()?.barrier(&*comm(c)?))
});

mpi_fn!(fn MPI_Bcast / PMPI_Bcast(b: *mut Void, count: c_int, dt: MPI_Datatype, root: c_int, c: MPI_Comm) -> c_int {
    run("MPI_Bcast", c, || {
        let cm = comm(c)?;
        // SAFETY: the program's buffer for this blocking call.
        let bf = unsafe { buf(b, count as i64, dt) }?;
        mpi()?.bcast(&cm, &bf, root)
    })
});

mpi_fn!(fn MPI_Reduce / PMPI_Reduce(s: *const Void, r: *mut Void, count: c_int, dt: MPI_Datatype, o: MPI_Op, root: c_int, c: MPI_Comm) -> c_int {
    run("MPI_Reduce", c, || {
        let cm = comm(c)?;
        let op = handles::op(o)?;
        // SAFETY: the program's buffers for this blocking call (recv only significant at the root).
        let (sb, rb) = unsafe { (sbuf(s, count, dt)?, buf(r, count as i64, dt)?) };
        mpi()?.reduce(&cm, sb.as_ref(), &rb, &op, root)
    })
});

mpi_fn!(fn MPI_Allreduce / PMPI_Allreduce(s: *const Void, r: *mut Void, count: c_int, dt: MPI_Datatype, o: MPI_Op, c: MPI_Comm) -> c_int {
    run("MPI_Allreduce", c, || {
        let cm = comm(c)?;
        let op = handles::op(o)?;
        // SAFETY: the program's buffers for this blocking call.
        let (sb, rb) = unsafe { (sbuf(s, count, dt)?, buf(r, count as i64, dt)?) };
        mpi()?.allreduce(&cm, sb.as_ref(), &rb, &op)
    })
});

mpi_fn!(fn MPI_Reduce_local / PMPI_Reduce_local(s: *const Void, r: *mut Void, count: c_int, dt: MPI_Datatype, o: MPI_Op) -> c_int {
    run("MPI_Reduce_local", MPI_COMM_WORLD, || {
        let op = handles::op(o)?;
        // SAFETY: the program's buffers for this blocking call.
        let (sb, rb) = unsafe { (buf(s, count as i64, dt)?, buf(r, count as i64, dt)?) };
        op.check(&sb.dt)?;
        let a = sb.pack();
        let mut b = rb.pack();
        op.apply(&sb.dt, sb.count, &a, &mut b);
        rb.unpack(&b);
        Ok(())
    })
});

mpi_fn!(fn MPI_Gather / PMPI_Gather(s: *const Void, sc: c_int, st: MPI_Datatype, r: *mut Void, rc: c_int, rt: MPI_Datatype, root: c_int, c: MPI_Comm) -> c_int {
    run("MPI_Gather", c, || {
        let cm = comm(c)?;
        let root_here = is_root(&cm, root);
        // SAFETY: the program's buffers for this blocking call.
        let sb = unsafe { sbuf(s, sc, st) }?;
        let rb = if root_here { unsafe { buf(r, rc as i64, rt) }? } else { mpi()?.empty_buf() };
        mpi()?.gatherv(&cm, sb.as_ref(), &rb, None, root)
    })
});

mpi_fn!(fn MPI_Gatherv / PMPI_Gatherv(s: *const Void, sc: c_int, st: MPI_Datatype, r: *mut Void, rcs: *const c_int, displs: *const c_int, rt: MPI_Datatype, root: c_int, c: MPI_Comm) -> c_int {
    run("MPI_Gatherv", c, || {
        let cm = comm(c)?;
        // SAFETY: the program's buffers for this blocking call.
        let sb = unsafe { sbuf(s, sc, st) }?;
        if is_root(&cm, root) {
            let (cs, ds) = counts_displs(&cm, rcs, displs)?;
            // SAFETY: as above.
            let rb = unsafe { buf(r, 0, rt) }?;
            mpi()?.gatherv(&cm, sb.as_ref(), &rb, Some((&cs, &ds)), root)
        } else {
            let m = mpi()?;
            m.gatherv(&cm, sb.as_ref(), &m.empty_buf(), None, root)
        }
    })
});

mpi_fn!(fn MPI_Scatter / PMPI_Scatter(s: *const Void, sc: c_int, st: MPI_Datatype, r: *mut Void, rc: c_int, rt: MPI_Datatype, root: c_int, c: MPI_Comm) -> c_int {
    run("MPI_Scatter", c, || {
        let cm = comm(c)?;
        let m = mpi()?;
        // SAFETY: the program's buffers for this blocking call.
        let sb = if is_root(&cm, root) { unsafe { buf(s, sc as i64, st) }? } else { m.empty_buf() };
        let rb = unsafe { sbuf(r, rc, rt) }?;
        m.scatterv(&cm, &sb, None, rb.as_ref(), root)
    })
});

mpi_fn!(fn MPI_Scatterv / PMPI_Scatterv(s: *const Void, scs: *const c_int, displs: *const c_int, st: MPI_Datatype, r: *mut Void, rc: c_int, rt: MPI_Datatype, root: c_int, c: MPI_Comm) -> c_int {
    run("MPI_Scatterv", c, || {
        let cm = comm(c)?;
        let m = mpi()?;
        // SAFETY: the program's buffers for this blocking call.
        let rb = unsafe { sbuf(r, rc, rt) }?;
        if is_root(&cm, root) {
            let (cs, ds) = counts_displs(&cm, scs, displs)?;
            // SAFETY: as above.
            let sb = unsafe { buf(s, 0, st) }?;
            m.scatterv(&cm, &sb, Some((&cs, &ds)), rb.as_ref(), root)
        } else {
            m.scatterv(&cm, &m.empty_buf(), None, rb.as_ref(), root)
        }
    })
});

mpi_fn!(fn MPI_Allgather / PMPI_Allgather(s: *const Void, sc: c_int, st: MPI_Datatype, r: *mut Void, rc: c_int, rt: MPI_Datatype, c: MPI_Comm) -> c_int {
    run("MPI_Allgather", c, || {
        let cm = comm(c)?;
        // SAFETY: the program's buffers for this blocking call.
        let (sb, rb) = unsafe { (sbuf(s, sc, st)?, buf(r, rc as i64, rt)?) };
        mpi()?.allgatherv(&cm, sb.as_ref(), &rb, None)
    })
});

mpi_fn!(fn MPI_Allgatherv / PMPI_Allgatherv(s: *const Void, sc: c_int, st: MPI_Datatype, r: *mut Void, rcs: *const c_int, displs: *const c_int, rt: MPI_Datatype, c: MPI_Comm) -> c_int {
    run("MPI_Allgatherv", c, || {
        let cm = comm(c)?;
        let (cs, ds) = counts_displs(&cm, rcs, displs)?;
        // SAFETY: the program's buffers for this blocking call.
        let (sb, rb) = unsafe { (sbuf(s, sc, st)?, buf(r, 0, rt)?) };
        mpi()?.allgatherv(&cm, sb.as_ref(), &rb, Some((&cs, &ds)))
    })
});

mpi_fn!(fn MPI_Alltoall / PMPI_Alltoall(s: *const Void, sc: c_int, st: MPI_Datatype, r: *mut Void, rc: c_int, rt: MPI_Datatype, c: MPI_Comm) -> c_int {
    run("MPI_Alltoall", c, || {
        let cm = comm(c)?;
        // SAFETY: the program's buffers for this blocking call.
        let (sb, rb) = unsafe { (sbuf(s, sc, st)?, buf(r, rc as i64, rt)?) };
        mpi()?.alltoall(&cm, sb.as_ref(), &rb)
    })
});

/// Per-peer buffers of a `v`/`w` call: byte displacements if `bytes`, else in extents.
///
/// # Safety
/// The arrays hold comm-size entries; the buffers are the program's.
unsafe fn peers(
    cm: &Comm,
    base: *const Void,
    counts: *const c_int,
    displs: *const c_int,
    types: &[MPI_Datatype],
    bytes: bool,
) -> Result<Vec<Buf>> {
    let n = cm.size as c_int;
    if counts.is_null() || displs.is_null() {
        return Err(err(class::ARG, "counts or displacements array is NULL"));
    }
    // SAFETY: arrays of comm-size entries.
    let (cs, ds) = unsafe { (arr(counts, n), arr(displs, n)) };
    let mut out = Vec::with_capacity(n as usize);
    for i in 0..n as usize {
        let t = handles::dtype(types[i])?;
        let off = if bytes {
            ds[i] as isize
        } else {
            ds[i] as isize * t.extent
        };
        // SAFETY: the program's buffer at the displacement it gave.
        out.push(unsafe {
            buf(
                (base as usize).wrapping_add_signed(off) as *const Void,
                cs[i] as i64,
                types[i],
            )
        }?);
    }
    Ok(out)
}

mpi_fn!(fn MPI_Alltoallv / PMPI_Alltoallv(s: *const Void, scs: *const c_int, sds: *const c_int, st: MPI_Datatype,
        r: *mut Void, rcs: *const c_int, rds: *const c_int, rt: MPI_Datatype, c: MPI_Comm) -> c_int {
    run("MPI_Alltoallv", c, || {
        let cm = comm(c)?;
        let n = cm.size as usize;
        // SAFETY: the program's arrays and buffers for this blocking call.
        let rb = unsafe { peers(&cm, r, rcs, rds, &vec![rt; n], false) }?;
        let sb = if in_place(s) { None } else { Some(unsafe { peers(&cm, s, scs, sds, &vec![st; n], false) }?) };
        mpi()?.alltoallw(&cm, sb, rb)
    })
});

mpi_fn!(fn MPI_Alltoallw / PMPI_Alltoallw(s: *const Void, scs: *const c_int, sds: *const c_int, sts: *const MPI_Datatype,
        r: *mut Void, rcs: *const c_int, rds: *const c_int, rts: *const MPI_Datatype, c: MPI_Comm) -> c_int {
    run("MPI_Alltoallw", c, || {
        let cm = comm(c)?;
        let n = cm.size as c_int;
        // SAFETY: the program's arrays and buffers for this blocking call.
        let rb = unsafe { peers(&cm, r, rcs, rds, arr(rts, n), true) }?;
        let sb = if in_place(s) { None } else { Some(unsafe { peers(&cm, s, scs, sds, arr(sts, n), true) }?) };
        mpi()?.alltoallw(&cm, sb, rb)
    })
});

mpi_fn!(fn MPI_Reduce_scatter / PMPI_Reduce_scatter(s: *const Void, r: *mut Void, rcs: *const c_int, dt: MPI_Datatype, o: MPI_Op, c: MPI_Comm) -> c_int {
    run("MPI_Reduce_scatter", c, || {
        let cm = comm(c)?;
        let op = handles::op(o)?;
        if rcs.is_null() {
            return Err(err(class::ARG, "recvcounts is NULL"));
        }
        // SAFETY: comm-size counts.
        let cs: Vec<i64> = unsafe { arr(rcs, cm.size as c_int) }.iter().map(|&x| x as i64).collect();
        let total: i64 = cs.iter().sum();
        // SAFETY: the program's buffers for this blocking call.
        let sb = unsafe { sbuf(s, total as c_int, dt) }?;
        let rb = unsafe { buf(r, if sb.is_none() { total } else { cs[cm.rank as usize] }, dt) }?;
        mpi()?.reduce_scatter(&cm, sb.as_ref(), &rb, &cs, &op)
    })
});

mpi_fn!(fn MPI_Reduce_scatter_block / PMPI_Reduce_scatter_block(s: *const Void, r: *mut Void, rc: c_int, dt: MPI_Datatype, o: MPI_Op, c: MPI_Comm) -> c_int {
    run("MPI_Reduce_scatter_block", c, || {
        let cm = comm(c)?;
        let op = handles::op(o)?;
        let cs = vec![rc as i64; cm.size as usize];
        let total = rc as i64 * cm.size as i64;
        // SAFETY: the program's buffers for this blocking call.
        let sb = unsafe { sbuf(s, total as c_int, dt) }?;
        let rb = unsafe { buf(r, if sb.is_none() { total } else { rc as i64 }, dt) }?;
        mpi()?.reduce_scatter(&cm, sb.as_ref(), &rb, &cs, &op)
    })
});

mpi_fn!(fn MPI_Scan / PMPI_Scan(s: *const Void, r: *mut Void, count: c_int, dt: MPI_Datatype, o: MPI_Op, c: MPI_Comm) -> c_int {
    run("MPI_Scan", c, || {
        let cm = comm(c)?;
        let op = handles::op(o)?;
        // SAFETY: the program's buffers for this blocking call.
        let (sb, rb) = unsafe { (sbuf(s, count, dt)?, buf(r, count as i64, dt)?) };
        mpi()?.scan(&cm, sb.as_ref(), &rb, &op, false)
    })
});

mpi_fn!(fn MPI_Exscan / PMPI_Exscan(s: *const Void, r: *mut Void, count: c_int, dt: MPI_Datatype, o: MPI_Op, c: MPI_Comm) -> c_int {
    run("MPI_Exscan", c, || {
        let cm = comm(c)?;
        let op = handles::op(o)?;
        // SAFETY: the program's buffers for this blocking call.
        let (sb, rb) = unsafe { (sbuf(s, count, dt)?, buf(r, count as i64, dt)?) };
        mpi()?.scan(&cm, sb.as_ref(), &rb, &op, true)
    })
});

type UserFnC = unsafe extern "C" fn(*mut Void, *mut Void, *mut c_int, *mut MPI_Datatype);

mpi_fn!(fn MPI_Op_create / PMPI_Op_create(f: Option<UserFnC>, commute: c_int, out: *mut MPI_Op) -> c_int {
    run("MPI_Op_create", MPI_COMM_WORLD, || {
        let f = f.ok_or_else(|| err(class::ARG, "the user function is NULL"))?;
        let call = move |a: usize, b: usize, n: usize, dt: &Arc<gridwire_mpi::Datatype>| {
            let mut len = n as c_int;
            let mut h = dt.handle.load(std::sync::atomic::Ordering::Relaxed);
            // SAFETY: the program's reduction function, called with the
            // standard's arguments: two buffers of `len` elements of `h`.
            unsafe { f(a as *mut Void, b as *mut Void, &mut len, &mut h) };
        };
        let op = Op::User { f: Arc::new(call), commute: commute != 0 };
        // SAFETY: output argument.
        unsafe { put(out, OPS.insert(Arc::new(op))) };
        Ok(())
    })
});

mpi_fn!(fn MPI_Op_free / PMPI_Op_free(o: *mut MPI_Op) -> c_int {
    run("MPI_Op_free", MPI_COMM_WORLD, || {
        if o.is_null() {
            return Err(err(class::ARG, "op pointer is NULL"));
        }
        // SAFETY: checked in/out argument.
        let h = unsafe { *o };
        OPS.remove(h).ok_or_else(|| err(class::OP, format!("invalid or predefined operation {h:#x}")))?;
        // SAFETY: as above.
        unsafe { *o = MPI_OP_NULL };
        Ok(())
    })
});

mpi_fn!(fn MPI_Op_commutative / PMPI_Op_commutative(o: MPI_Op, flag: *mut c_int) -> c_int {
    run("MPI_Op_commutative", MPI_COMM_WORLD, || {
        let op = handles::op(o)?;
        // SAFETY: output argument.
        unsafe { put(flag, op.commutative() as c_int) };
        Ok(())
    })
});
