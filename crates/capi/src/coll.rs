//! Collective operations (blocking and nonblocking) and reduction operations.
//!
//! Each collective's arguments are checked and turned into a closure once
//! (`prep_*`); the blocking function runs it, the nonblocking one hands it
//! to [`gridwire_mpi::Mpi::icoll`].

use crate::abi::*;
use crate::errors::run;
use crate::handles::{self, buf, comm, mpi, ReqObj, OPS, REQS};
use crate::{arr, put, Void};
use gridwire_mpi::{class, err, Buf, Comm, Mpi, Op, Result};
use std::ffi::c_int;
use std::sync::Arc;

fn in_place(p: *const Void) -> bool {
    p as usize == MPI_IN_PLACE
}

/// A send buffer that may be `MPI_IN_PLACE`.
///
/// # Safety
/// As [`buf`].
unsafe fn sbuf(p: *const Void, count: i64, dt: MPI_Datatype) -> Result<Option<Buf>> {
    if in_place(p) {
        return Ok(None);
    }
    // SAFETY: forwarded contract.
    unsafe { buf(p, count, dt) }.map(Some)
}

/// Whether this process is the root (on an intercommunicator: passed `MPI_ROOT`).
fn is_root(c: &Comm, root: c_int) -> bool {
    if c.is_inter() {
        return root == gridwire_mpi::ROOT;
    }
    root >= 0 && c.rank == root as u32
}

/// Whether this process contributes to (gather, reduce) or receives from
/// (scatter) a rooted collective as a non-root: always on an
/// intracommunicator; on an intercommunicator only in the other group than
/// the root's (whose processes pass `MPI_ROOT` or `MPI_PROC_NULL`, and
/// whose arguments for that side are not significant).
fn non_root_side(c: &Comm, root: c_int) -> bool {
    !c.is_inter() || (root != gridwire_mpi::ROOT && root != gridwire_mpi::PROC_NULL)
}

type Counts = (Vec<i64>, Vec<i64>);

/// The counts and displacements arrays of a `v`/`w` collective, as given:
/// ints, or `MPI_Count` counts with `MPI_Aint` displacements (`_c` forms).
/// Read only where the standard says they are significant.
#[derive(Clone, Copy)]
pub(crate) enum VArgs {
    Int(*const c_int, *const c_int),
    Big(*const MPI_Count, *const MPI_Aint),
}

/// One entry per process the call exchanges data with (on an
/// intercommunicator: each process of the remote group).
fn resolve(c: &Comm, v: VArgs) -> Result<Counts> {
    let n = c.peer_size as c_int;
    let (cs, ds): (Vec<i64>, Vec<i64>) = match v {
        VArgs::Int(cp, dp) => {
            if cp.is_null() || dp.is_null() {
                return Err(err(class::ARG, "counts or displacements array is NULL"));
            }
            // SAFETY: arrays of comm-size entries by the standard.
            unsafe {
                (
                    arr(cp, n).iter().map(|&x| x as i64).collect(),
                    arr(dp, n).iter().map(|&x| x as i64).collect(),
                )
            }
        }
        VArgs::Big(cp, dp) => {
            if cp.is_null() || dp.is_null() {
                return Err(err(class::ARG, "counts or displacements array is NULL"));
            }
            // SAFETY: arrays of comm-size entries by the standard.
            unsafe {
                (
                    arr(cp, n).to_vec(),
                    arr(dp, n).iter().map(|&x| x as i64).collect(),
                )
            }
        }
    };
    if let Some(x) = cs.iter().find(|&&x| x < 0) {
        return Err(err(class::COUNT, format!("count {x} is negative")));
    }
    Ok((cs, ds))
}

/// The counts of `MPI_Reduce_scatter(_c)` (no displacements).
fn resolve_counts(c: &Comm, v: VArgs) -> Result<Vec<i64>> {
    let n = c.size as c_int;
    let cs: Vec<i64> = match v {
        VArgs::Int(cp, _) if !cp.is_null() => {
            unsafe { arr(cp, n) }.iter().map(|&x| x as i64).collect()
        }
        VArgs::Big(cp, _) if !cp.is_null() => unsafe { arr(cp, n) }.to_vec(),
        _ => return Err(err(class::ARG, "recvcounts is NULL")),
    };
    if let Some(x) = cs.iter().find(|&&x| x < 0) {
        return Err(err(class::COUNT, format!("count {x} is negative")));
    }
    Ok(cs)
}

fn cd(v: &Option<Counts>) -> Option<(&[i64], &[i64])> {
    v.as_ref().map(|(c, d)| (&c[..], &d[..]))
}

/// Exports the blocking and the nonblocking form of one collective.
macro_rules! coll {
    ($name:ident / $pname:ident, $iname:ident / $piname:ident, ($($a:ident : $t:ty),*), $c:ident, $prep:expr) => {
        mpi_fn!(fn $name / $pname($($a: $t),*) -> c_int {
            run(stringify!($name), $c, || {
                let m = mpi()?;
                // SAFETY: the arguments follow the MPI contract of this call.
                let (cm, f) = unsafe { $prep }?;
                f(m, &cm)
            })
        });
        mpi_fn!(fn $iname / $piname($($a: $t,)* req: *mut MPI_Request) -> c_int {
            run(stringify!($iname), $c, || {
                if req.is_null() {
                    return Err(err(class::REQUEST, "request pointer is NULL"));
                }
                let m = mpi()?;
                // SAFETY: the arguments follow the MPI contract of this call;
                // buffers stay valid until the request completes.
                let (cm, f) = unsafe { $prep }?;
                let r = m.icoll(&cm, f)?;
                // SAFETY: checked output argument.
                unsafe { *req = REQS.insert(ReqObj::Plain(r)) };
                Ok(())
            })
        });
    };
}

pub(crate) type Prep<F> = Result<(Arc<Comm>, F)>;

pub(crate) unsafe fn prep_barrier(
    c: MPI_Comm,
) -> Prep<impl FnOnce(&Mpi, &Comm) -> Result<()> + Send + Clone + 'static> {
    Ok((comm(c)?, |m: &Mpi, cm: &Comm| m.barrier(cm)))
}

pub(crate) unsafe fn prep_bcast(
    b: *mut Void,
    count: i64,
    dt: MPI_Datatype,
    root: c_int,
    c: MPI_Comm,
) -> Prep<impl FnOnce(&Mpi, &Comm) -> Result<()> + Send + Clone + 'static> {
    let cm = comm(c)?;
    // SAFETY: the program's buffer for this call (none in the root's group
    // but the root on an intercommunicator).
    let bf = if cm.is_inter() && root == gridwire_mpi::PROC_NULL {
        mpi()?.empty_buf()
    } else {
        unsafe { buf(b, count, dt) }?
    };
    Ok((cm, move |m: &Mpi, cm: &Comm| m.bcast(cm, &bf, root)))
}

pub(crate) unsafe fn prep_reduce(
    s: *const Void,
    r: *mut Void,
    count: i64,
    dt: MPI_Datatype,
    o: MPI_Op,
    root: c_int,
    c: MPI_Comm,
) -> Prep<impl FnOnce(&Mpi, &Comm) -> Result<()> + Send + Clone + 'static> {
    let cm = comm(c)?;
    let op = handles::op(o)?;
    // SAFETY: the program's buffers (recv only significant at the root).
    let (sb, rb) = unsafe { (sbuf(s, count, dt)?, buf(r, count, dt)?) };
    Ok((cm, move |m: &Mpi, cm: &Comm| {
        m.reduce(cm, sb.as_ref(), &rb, &op, root)
    }))
}

pub(crate) unsafe fn prep_allreduce(
    s: *const Void,
    r: *mut Void,
    count: i64,
    dt: MPI_Datatype,
    o: MPI_Op,
    c: MPI_Comm,
) -> Prep<impl FnOnce(&Mpi, &Comm) -> Result<()> + Send + Clone + 'static> {
    let cm = comm(c)?;
    let op = handles::op(o)?;
    // SAFETY: the program's buffers.
    let (sb, rb) = unsafe { (sbuf(s, count, dt)?, buf(r, count, dt)?) };
    Ok((cm, move |m: &Mpi, cm: &Comm| {
        m.allreduce(cm, sb.as_ref(), &rb, &op)
    }))
}

pub(crate) unsafe fn prep_gather(
    s: *const Void,
    sc: i64,
    st: MPI_Datatype,
    r: *mut Void,
    rc: i64,
    rt: MPI_Datatype,
    root: c_int,
    c: MPI_Comm,
) -> Prep<impl FnOnce(&Mpi, &Comm) -> Result<()> + Send + Clone + 'static> {
    let cm = comm(c)?;
    let m = mpi()?;
    // SAFETY: the program's buffers (recv only significant at the root).
    let sb = if non_root_side(&cm, root) {
        unsafe { sbuf(s, sc, st) }?
    } else {
        None
    };
    let rb = if is_root(&cm, root) {
        unsafe { buf(r, rc, rt) }?
    } else {
        m.empty_buf()
    };
    Ok((cm, move |m: &Mpi, cm: &Comm| {
        m.gather(cm, sb.as_ref(), &rb, root)
    }))
}

pub(crate) unsafe fn prep_gatherv(
    s: *const Void,
    sc: i64,
    st: MPI_Datatype,
    r: *mut Void,
    v: VArgs,
    rt: MPI_Datatype,
    root: c_int,
    c: MPI_Comm,
) -> Prep<impl FnOnce(&Mpi, &Comm) -> Result<()> + Send + Clone + 'static> {
    let cm = comm(c)?;
    let m = mpi()?;
    // SAFETY: the program's buffers.
    let sb = if non_root_side(&cm, root) {
        unsafe { sbuf(s, sc, st) }?
    } else {
        None
    };
    let (rb, v) = if is_root(&cm, root) {
        (unsafe { buf(r, 0, rt) }?, Some(resolve(&cm, v)?))
    } else {
        (m.empty_buf(), None)
    };
    Ok((cm, move |m: &Mpi, cm: &Comm| {
        m.gatherv(cm, sb.as_ref(), &rb, cd(&v), root)
    }))
}

pub(crate) unsafe fn prep_scatter(
    s: *const Void,
    sc: i64,
    st: MPI_Datatype,
    r: *mut Void,
    rc: i64,
    rt: MPI_Datatype,
    root: c_int,
    c: MPI_Comm,
) -> Prep<impl FnOnce(&Mpi, &Comm) -> Result<()> + Send + Clone + 'static> {
    let cm = comm(c)?;
    let m = mpi()?;
    // SAFETY: the program's buffers (send only significant at the root).
    let sb = if is_root(&cm, root) {
        unsafe { buf(s, sc, st) }?
    } else {
        m.empty_buf()
    };
    let rb = if non_root_side(&cm, root) {
        unsafe { sbuf(r, rc, rt) }?
    } else {
        None
    };
    Ok((cm, move |m: &Mpi, cm: &Comm| {
        m.scatter(cm, &sb, rb.as_ref(), root)
    }))
}

pub(crate) unsafe fn prep_scatterv(
    s: *const Void,
    v: VArgs,
    st: MPI_Datatype,
    r: *mut Void,
    rc: i64,
    rt: MPI_Datatype,
    root: c_int,
    c: MPI_Comm,
) -> Prep<impl FnOnce(&Mpi, &Comm) -> Result<()> + Send + Clone + 'static> {
    let cm = comm(c)?;
    let m = mpi()?;
    // SAFETY: the program's buffers.
    let rb = if non_root_side(&cm, root) {
        unsafe { sbuf(r, rc, rt) }?
    } else {
        None
    };
    let (sb, v) = if is_root(&cm, root) {
        (unsafe { buf(s, 0, st) }?, Some(resolve(&cm, v)?))
    } else {
        (m.empty_buf(), None)
    };
    Ok((cm, move |m: &Mpi, cm: &Comm| {
        m.scatterv(cm, &sb, cd(&v), rb.as_ref(), root)
    }))
}

pub(crate) unsafe fn prep_allgather(
    s: *const Void,
    sc: i64,
    st: MPI_Datatype,
    r: *mut Void,
    rc: i64,
    rt: MPI_Datatype,
    c: MPI_Comm,
) -> Prep<impl FnOnce(&Mpi, &Comm) -> Result<()> + Send + Clone + 'static> {
    let cm = comm(c)?;
    // SAFETY: the program's buffers.
    let (sb, rb) = unsafe { (sbuf(s, sc, st)?, buf(r, rc, rt)?) };
    Ok((cm, move |m: &Mpi, cm: &Comm| {
        m.allgatherv(cm, sb.as_ref(), &rb, None)
    }))
}

pub(crate) unsafe fn prep_allgatherv(
    s: *const Void,
    sc: i64,
    st: MPI_Datatype,
    r: *mut Void,
    v: VArgs,
    rt: MPI_Datatype,
    c: MPI_Comm,
) -> Prep<impl FnOnce(&Mpi, &Comm) -> Result<()> + Send + Clone + 'static> {
    let cm = comm(c)?;
    let v = Some(resolve(&cm, v)?);
    // SAFETY: the program's buffers.
    let (sb, rb) = unsafe { (sbuf(s, sc, st)?, buf(r, 0, rt)?) };
    Ok((cm, move |m: &Mpi, cm: &Comm| {
        m.allgatherv(cm, sb.as_ref(), &rb, cd(&v))
    }))
}

pub(crate) unsafe fn prep_alltoall(
    s: *const Void,
    sc: i64,
    st: MPI_Datatype,
    r: *mut Void,
    rc: i64,
    rt: MPI_Datatype,
    c: MPI_Comm,
) -> Prep<impl FnOnce(&Mpi, &Comm) -> Result<()> + Send + Clone + 'static> {
    let cm = comm(c)?;
    // SAFETY: the program's buffers.
    let (sb, rb) = unsafe { (sbuf(s, sc, st)?, buf(r, rc, rt)?) };
    Ok((cm, move |m: &Mpi, cm: &Comm| {
        m.alltoall(cm, sb.as_ref(), &rb)
    }))
}

/// Per-peer buffers of a `v`/`w` call: byte displacements if `bytes`, else in extents.
///
/// # Safety
/// The arrays hold comm-size entries; the buffers are the program's.
unsafe fn peers(
    cm: &Comm,
    base: *const Void,
    v: VArgs,
    types: &[MPI_Datatype],
    bytes: bool,
) -> Result<Vec<Buf>> {
    let n = cm.peer_size as c_int;
    if types.len() < n as usize {
        return Err(err(class::ARG, "datatypes array is NULL"));
    }
    let (cs, ds) = resolve(cm, v)?;
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
                cs[i],
                types[i],
            )
        }?);
    }
    Ok(out)
}

pub(crate) unsafe fn prep_alltoallv(
    s: *const Void,
    sv: VArgs,
    st: MPI_Datatype,
    r: *mut Void,
    rv: VArgs,
    rt: MPI_Datatype,
    c: MPI_Comm,
) -> Prep<impl FnOnce(&Mpi, &Comm) -> Result<()> + Send + Clone + 'static> {
    let cm = comm(c)?;
    let n = cm.peer_size as usize;
    // SAFETY: the program's arrays and buffers.
    let rb = unsafe { peers(&cm, r, rv, &vec![rt; n], false) }?;
    let sb = if in_place(s) {
        None
    } else {
        Some(unsafe { peers(&cm, s, sv, &vec![st; n], false) }?)
    };
    Ok((cm, move |m: &Mpi, cm: &Comm| m.alltoallw(cm, sb, rb)))
}

pub(crate) unsafe fn prep_alltoallw(
    s: *const Void,
    sv: VArgs,
    sts: *const MPI_Datatype,
    r: *mut Void,
    rv: VArgs,
    rts: *const MPI_Datatype,
    c: MPI_Comm,
) -> Prep<impl FnOnce(&Mpi, &Comm) -> Result<()> + Send + Clone + 'static> {
    let cm = comm(c)?;
    let n = cm.peer_size as c_int;
    // SAFETY: the program's arrays and buffers.
    let rb = unsafe { peers(&cm, r, rv, arr(rts, n), true) }?;
    let sb = if in_place(s) {
        None
    } else {
        Some(unsafe { peers(&cm, s, sv, arr(sts, n), true) }?)
    };
    Ok((cm, move |m: &Mpi, cm: &Comm| m.alltoallw(cm, sb, rb)))
}

pub(crate) unsafe fn prep_reduce_scatter(
    s: *const Void,
    r: *mut Void,
    rcs: VArgs,
    dt: MPI_Datatype,
    o: MPI_Op,
    c: MPI_Comm,
) -> Prep<impl FnOnce(&Mpi, &Comm) -> Result<()> + Send + Clone + 'static> {
    let cm = comm(c)?;
    let op = handles::op(o)?;
    let cs = resolve_counts(&cm, rcs)?;
    let total = cs
        .iter()
        .try_fold(0i64, |a, &x| a.checked_add(x))
        .ok_or_else(|| err(class::COUNT, "the sum of the counts overflows"))?;
    // SAFETY: the program's buffers.
    let sb = unsafe { sbuf(s, total, dt) }?;
    let rb = unsafe {
        buf(
            r,
            if sb.is_none() {
                total
            } else {
                cs[cm.rank as usize]
            },
            dt,
        )
    }?;
    Ok((cm, move |m: &Mpi, cm: &Comm| {
        m.reduce_scatter(cm, sb.as_ref(), &rb, &cs, &op)
    }))
}

pub(crate) unsafe fn prep_reduce_scatter_block(
    s: *const Void,
    r: *mut Void,
    rc: i64,
    dt: MPI_Datatype,
    o: MPI_Op,
    c: MPI_Comm,
) -> Prep<impl FnOnce(&Mpi, &Comm) -> Result<()> + Send + Clone + 'static> {
    let cm = comm(c)?;
    let op = handles::op(o)?;
    if rc < 0 {
        return Err(err(class::COUNT, format!("count {rc} is negative")));
    }
    let cs = vec![rc; cm.size as usize];
    let total = rc.checked_mul(cm.size as i64).ok_or_else(|| {
        err(
            class::COUNT,
            format!("count {rc} times the group size overflows"),
        )
    })?;
    // SAFETY: the program's buffers.
    let sb = unsafe { sbuf(s, total, dt) }?;
    let rb = unsafe { buf(r, if sb.is_none() { total } else { rc }, dt) }?;
    Ok((cm, move |m: &Mpi, cm: &Comm| {
        m.reduce_scatter(cm, sb.as_ref(), &rb, &cs, &op)
    }))
}

pub(crate) unsafe fn prep_scan(
    s: *const Void,
    r: *mut Void,
    count: i64,
    dt: MPI_Datatype,
    o: MPI_Op,
    c: MPI_Comm,
    exclusive: bool,
) -> Prep<impl FnOnce(&Mpi, &Comm) -> Result<()> + Send + Clone + 'static> {
    let cm = comm(c)?;
    let op = handles::op(o)?;
    // SAFETY: the program's buffers.
    let (sb, rb) = unsafe { (sbuf(s, count, dt)?, buf(r, count, dt)?) };
    Ok((cm, move |m: &Mpi, cm: &Comm| {
        m.scan(cm, sb.as_ref(), &rb, &op, exclusive)
    }))
}

coll!(MPI_Barrier / PMPI_Barrier, MPI_Ibarrier / PMPI_Ibarrier, (c: MPI_Comm), c, prep_barrier(c));
coll!(MPI_Bcast / PMPI_Bcast, MPI_Ibcast / PMPI_Ibcast,
      (b: *mut Void, count: c_int, dt: MPI_Datatype, root: c_int, c: MPI_Comm), c, prep_bcast(b, i64::from(count), dt, root, c));
coll!(MPI_Reduce / PMPI_Reduce, MPI_Ireduce / PMPI_Ireduce,
      (s: *const Void, r: *mut Void, count: c_int, dt: MPI_Datatype, o: MPI_Op, root: c_int, c: MPI_Comm), c,
      prep_reduce(s, r, i64::from(count), dt, o, root, c));
coll!(MPI_Allreduce / PMPI_Allreduce, MPI_Iallreduce / PMPI_Iallreduce,
      (s: *const Void, r: *mut Void, count: c_int, dt: MPI_Datatype, o: MPI_Op, c: MPI_Comm), c,
      prep_allreduce(s, r, i64::from(count), dt, o, c));
coll!(MPI_Gather / PMPI_Gather, MPI_Igather / PMPI_Igather,
      (s: *const Void, sc: c_int, st: MPI_Datatype, r: *mut Void, rc: c_int, rt: MPI_Datatype, root: c_int, c: MPI_Comm), c,
      prep_gather(s, i64::from(sc), st, r, i64::from(rc), rt, root, c));
coll!(MPI_Gatherv / PMPI_Gatherv, MPI_Igatherv / PMPI_Igatherv,
      (s: *const Void, sc: c_int, st: MPI_Datatype, r: *mut Void, rcs: *const c_int, displs: *const c_int, rt: MPI_Datatype, root: c_int, c: MPI_Comm), c,
      prep_gatherv(s, i64::from(sc), st, r, VArgs::Int(rcs, displs), rt, root, c));
coll!(MPI_Scatter / PMPI_Scatter, MPI_Iscatter / PMPI_Iscatter,
      (s: *const Void, sc: c_int, st: MPI_Datatype, r: *mut Void, rc: c_int, rt: MPI_Datatype, root: c_int, c: MPI_Comm), c,
      prep_scatter(s, i64::from(sc), st, r, i64::from(rc), rt, root, c));
coll!(MPI_Scatterv / PMPI_Scatterv, MPI_Iscatterv / PMPI_Iscatterv,
      (s: *const Void, scs: *const c_int, displs: *const c_int, st: MPI_Datatype, r: *mut Void, rc: c_int, rt: MPI_Datatype, root: c_int, c: MPI_Comm), c,
      prep_scatterv(s, VArgs::Int(scs, displs), st, r, i64::from(rc), rt, root, c));
coll!(MPI_Allgather / PMPI_Allgather, MPI_Iallgather / PMPI_Iallgather,
      (s: *const Void, sc: c_int, st: MPI_Datatype, r: *mut Void, rc: c_int, rt: MPI_Datatype, c: MPI_Comm), c,
      prep_allgather(s, i64::from(sc), st, r, i64::from(rc), rt, c));
coll!(MPI_Allgatherv / PMPI_Allgatherv, MPI_Iallgatherv / PMPI_Iallgatherv,
      (s: *const Void, sc: c_int, st: MPI_Datatype, r: *mut Void, rcs: *const c_int, displs: *const c_int, rt: MPI_Datatype, c: MPI_Comm), c,
      prep_allgatherv(s, i64::from(sc), st, r, VArgs::Int(rcs, displs), rt, c));
coll!(MPI_Alltoall / PMPI_Alltoall, MPI_Ialltoall / PMPI_Ialltoall,
      (s: *const Void, sc: c_int, st: MPI_Datatype, r: *mut Void, rc: c_int, rt: MPI_Datatype, c: MPI_Comm), c,
      prep_alltoall(s, i64::from(sc), st, r, i64::from(rc), rt, c));
coll!(MPI_Alltoallv / PMPI_Alltoallv, MPI_Ialltoallv / PMPI_Ialltoallv,
      (s: *const Void, scs: *const c_int, sds: *const c_int, st: MPI_Datatype, r: *mut Void, rcs: *const c_int, rds: *const c_int, rt: MPI_Datatype, c: MPI_Comm), c,
      prep_alltoallv(s, VArgs::Int(scs, sds), st, r, VArgs::Int(rcs, rds), rt, c));
coll!(MPI_Alltoallw / PMPI_Alltoallw, MPI_Ialltoallw / PMPI_Ialltoallw,
      (s: *const Void, scs: *const c_int, sds: *const c_int, sts: *const MPI_Datatype, r: *mut Void, rcs: *const c_int, rds: *const c_int, rts: *const MPI_Datatype, c: MPI_Comm), c,
      prep_alltoallw(s, VArgs::Int(scs, sds), sts, r, VArgs::Int(rcs, rds), rts, c));
coll!(MPI_Reduce_scatter / PMPI_Reduce_scatter, MPI_Ireduce_scatter / PMPI_Ireduce_scatter,
      (s: *const Void, r: *mut Void, rcs: *const c_int, dt: MPI_Datatype, o: MPI_Op, c: MPI_Comm), c,
      prep_reduce_scatter(s, r, VArgs::Int(rcs, std::ptr::null()), dt, o, c));
coll!(MPI_Reduce_scatter_block / PMPI_Reduce_scatter_block, MPI_Ireduce_scatter_block / PMPI_Ireduce_scatter_block,
      (s: *const Void, r: *mut Void, rc: c_int, dt: MPI_Datatype, o: MPI_Op, c: MPI_Comm), c,
      prep_reduce_scatter_block(s, r, i64::from(rc), dt, o, c));
coll!(MPI_Scan / PMPI_Scan, MPI_Iscan / PMPI_Iscan,
      (s: *const Void, r: *mut Void, count: c_int, dt: MPI_Datatype, o: MPI_Op, c: MPI_Comm), c,
      prep_scan(s, r, i64::from(count), dt, o, c, false));
coll!(MPI_Exscan / PMPI_Exscan, MPI_Iexscan / PMPI_Iexscan,
      (s: *const Void, r: *mut Void, count: c_int, dt: MPI_Datatype, o: MPI_Op, c: MPI_Comm), c,
      prep_scan(s, r, i64::from(count), dt, o, c, true));

mpi_fn!(fn MPI_Reduce_local / PMPI_Reduce_local(s: *const Void, r: *mut Void, count: c_int, dt: MPI_Datatype, o: MPI_Op) -> c_int {
    // SAFETY: the program's buffers for this blocking call.
    run("MPI_Reduce_local", MPI_COMM_WORLD, || unsafe { reduce_local(s, r, count.into(), dt, o) })
});

/// `MPI_Reduce_local(_c)`.
///
/// # Safety
/// `s` and `r` hold `count` elements of `dt`.
unsafe fn reduce_local(
    s: *const Void,
    r: *mut Void,
    count: i64,
    dt: MPI_Datatype,
    o: MPI_Op,
) -> Result<()> {
    let op = handles::op(o)?;
    // SAFETY: forwarded contract.
    let (sb, rb) = unsafe { (buf(s, count, dt)?, buf(r, count, dt)?) };
    op.check(&sb.dt)?;
    let a = sb.pack();
    let mut b = rb.pack();
    op.apply(&sb.dt, sb.count, &a, &mut b);
    rb.unpack(&b);
    Ok(())
}

type UserFnC = unsafe extern "C" fn(*mut Void, *mut Void, *mut c_int, *mut MPI_Datatype);

mpi_fn!(fn MPI_Op_create / PMPI_Op_create(f: Option<UserFnC>, commute: c_int, out: *mut MPI_Op) -> c_int {
    run("MPI_Op_create", MPI_COMM_WORLD, || {
        let f = f.ok_or_else(|| err(class::ARG, "the user function is NULL"))?;
        let call = move |a: usize, b: usize, n: usize, dt: &gridwire_mpi::Datatype| {
            // The C function takes an int count: a large-count reduction
            // calls it on pieces of at most INT_MAX elements, each piece
            // `len` extents further on.
            let (mut a, mut b, mut left) = (a, b, n);
            while left > 0 {
                let piece = left.min(c_int::MAX as usize);
                let mut len = piece as c_int;
                let mut h = dt.handle.load(std::sync::atomic::Ordering::Relaxed);
                // SAFETY: the program's reduction function, called with the
                // standard's arguments: two buffers of `len` elements of `h`.
                unsafe { f(a as *mut Void, b as *mut Void, &mut len, &mut h) };
                let step = (piece as isize).wrapping_mul(dt.extent);
                a = a.wrapping_add_signed(step);
                b = b.wrapping_add_signed(step);
                left -= piece;
            }
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

mpi_fn!(fn MPI_Comm_idup / PMPI_Comm_idup(c: MPI_Comm, out: *mut MPI_Comm, req: *mut MPI_Request) -> c_int {
    // SAFETY: the caller's contract for MPI_Comm_idup.
    unsafe { comm_idup("MPI_Comm_idup", c, None, out, req) }
});

/// `MPI_Comm_idup` and, with `info`, `MPI_Comm_idup_with_info`: the new
/// communicator gets the hints of `info` instead of those of `c` (as
/// `MPI_Comm_dup_with_info`), applied when it is made.
///
/// # Safety
/// `out` and `req` are the program's output arguments (checked for NULL);
/// `out` must stay valid until the request completes (the MPI rule).
pub(crate) unsafe fn comm_idup(
    name: &'static str,
    c: MPI_Comm,
    info: Option<gridwire_mpi::info::Info>,
    out: *mut MPI_Comm,
    req: *mut MPI_Request,
) -> c_int {
    run(name, c, || {
        if out.is_null() || req.is_null() {
            return Err(err(class::ARG, "output pointer is NULL"));
        }
        let m = mpi()?;
        let parent = comm(c)?;
        let outp = out as usize;
        let r = m.icoll(&parent.clone(), move |m: &Mpi, shadow: &Comm| {
            let n = m.comm_dup(shadow)?;
            let made = match &info {
                Some(i) => m.comm_set_info(&n, i, true),
                None => Ok(()),
            }
            .and_then(|()| crate::attr::copy_comm_attrs(c, &parent, &n));
            if let Err(e) = made {
                // SAFETY: as below.
                unsafe { *(outp as *mut MPI_Comm) = MPI_COMM_NULL };
                return Err(e);
            }
            n.errhandler.store(
                parent.errhandler.load(std::sync::atomic::Ordering::Relaxed),
                std::sync::atomic::Ordering::Relaxed,
            );
            // SAFETY: the program's MPI_Comm variable, which it must not
            // touch before the request completes (the MPI rule for idup).
            unsafe { *(outp as *mut MPI_Comm) = handles::new_comm(n) };
            Ok(())
        })?;
        // SAFETY: checked output argument.
        unsafe { *req = REQS.insert(ReqObj::Plain(r)) };
        Ok(())
    })
}

// ---- large-count (`_c`) forms of the collectives with one count ----------------

coll!(MPI_Bcast_c / PMPI_Bcast_c, MPI_Ibcast_c / PMPI_Ibcast_c,
      (b: *mut Void, count: MPI_Count, dt: MPI_Datatype, root: c_int, c: MPI_Comm), c, prep_bcast(b, count, dt, root, c));
coll!(MPI_Reduce_c / PMPI_Reduce_c, MPI_Ireduce_c / PMPI_Ireduce_c,
      (s: *const Void, r: *mut Void, count: MPI_Count, dt: MPI_Datatype, o: MPI_Op, root: c_int, c: MPI_Comm), c,
      prep_reduce(s, r, count, dt, o, root, c));
coll!(MPI_Allreduce_c / PMPI_Allreduce_c, MPI_Iallreduce_c / PMPI_Iallreduce_c,
      (s: *const Void, r: *mut Void, count: MPI_Count, dt: MPI_Datatype, o: MPI_Op, c: MPI_Comm), c,
      prep_allreduce(s, r, count, dt, o, c));
coll!(MPI_Gather_c / PMPI_Gather_c, MPI_Igather_c / PMPI_Igather_c,
      (s: *const Void, sc: MPI_Count, st: MPI_Datatype, r: *mut Void, rc: MPI_Count, rt: MPI_Datatype, root: c_int, c: MPI_Comm), c,
      prep_gather(s, sc, st, r, rc, rt, root, c));
coll!(MPI_Scatter_c / PMPI_Scatter_c, MPI_Iscatter_c / PMPI_Iscatter_c,
      (s: *const Void, sc: MPI_Count, st: MPI_Datatype, r: *mut Void, rc: MPI_Count, rt: MPI_Datatype, root: c_int, c: MPI_Comm), c,
      prep_scatter(s, sc, st, r, rc, rt, root, c));
coll!(MPI_Allgather_c / PMPI_Allgather_c, MPI_Iallgather_c / PMPI_Iallgather_c,
      (s: *const Void, sc: MPI_Count, st: MPI_Datatype, r: *mut Void, rc: MPI_Count, rt: MPI_Datatype, c: MPI_Comm), c,
      prep_allgather(s, sc, st, r, rc, rt, c));
coll!(MPI_Alltoall_c / PMPI_Alltoall_c, MPI_Ialltoall_c / PMPI_Ialltoall_c,
      (s: *const Void, sc: MPI_Count, st: MPI_Datatype, r: *mut Void, rc: MPI_Count, rt: MPI_Datatype, c: MPI_Comm), c,
      prep_alltoall(s, sc, st, r, rc, rt, c));
coll!(MPI_Reduce_scatter_block_c / PMPI_Reduce_scatter_block_c, MPI_Ireduce_scatter_block_c / PMPI_Ireduce_scatter_block_c,
      (s: *const Void, r: *mut Void, rc: MPI_Count, dt: MPI_Datatype, o: MPI_Op, c: MPI_Comm), c,
      prep_reduce_scatter_block(s, r, rc, dt, o, c));
coll!(MPI_Scan_c / PMPI_Scan_c, MPI_Iscan_c / PMPI_Iscan_c,
      (s: *const Void, r: *mut Void, count: MPI_Count, dt: MPI_Datatype, o: MPI_Op, c: MPI_Comm), c,
      prep_scan(s, r, count, dt, o, c, false));
coll!(MPI_Exscan_c / PMPI_Exscan_c, MPI_Iexscan_c / PMPI_Iexscan_c,
      (s: *const Void, r: *mut Void, count: MPI_Count, dt: MPI_Datatype, o: MPI_Op, c: MPI_Comm), c,
      prep_scan(s, r, count, dt, o, c, true));

mpi_fn!(fn MPI_Reduce_local_c / PMPI_Reduce_local_c(s: *const Void, r: *mut Void, count: MPI_Count, dt: MPI_Datatype, o: MPI_Op) -> c_int {
    // SAFETY: the program's buffers for this blocking call.
    run("MPI_Reduce_local_c", MPI_COMM_WORLD, || unsafe { reduce_local(s, r, count, dt, o) })
});

coll!(MPI_Gatherv_c / PMPI_Gatherv_c, MPI_Igatherv_c / PMPI_Igatherv_c,
      (s: *const Void, sc: MPI_Count, st: MPI_Datatype, r: *mut Void, rcs: *const MPI_Count, displs: *const MPI_Aint, rt: MPI_Datatype, root: c_int, c: MPI_Comm), c,
      prep_gatherv(s, sc, st, r, VArgs::Big(rcs, displs), rt, root, c));
coll!(MPI_Scatterv_c / PMPI_Scatterv_c, MPI_Iscatterv_c / PMPI_Iscatterv_c,
      (s: *const Void, scs: *const MPI_Count, displs: *const MPI_Aint, st: MPI_Datatype, r: *mut Void, rc: MPI_Count, rt: MPI_Datatype, root: c_int, c: MPI_Comm), c,
      prep_scatterv(s, VArgs::Big(scs, displs), st, r, rc, rt, root, c));
coll!(MPI_Allgatherv_c / PMPI_Allgatherv_c, MPI_Iallgatherv_c / PMPI_Iallgatherv_c,
      (s: *const Void, sc: MPI_Count, st: MPI_Datatype, r: *mut Void, rcs: *const MPI_Count, displs: *const MPI_Aint, rt: MPI_Datatype, c: MPI_Comm), c,
      prep_allgatherv(s, sc, st, r, VArgs::Big(rcs, displs), rt, c));
coll!(MPI_Alltoallv_c / PMPI_Alltoallv_c, MPI_Ialltoallv_c / PMPI_Ialltoallv_c,
      (s: *const Void, scs: *const MPI_Count, sds: *const MPI_Aint, st: MPI_Datatype, r: *mut Void, rcs: *const MPI_Count, rds: *const MPI_Aint, rt: MPI_Datatype, c: MPI_Comm), c,
      prep_alltoallv(s, VArgs::Big(scs, sds), st, r, VArgs::Big(rcs, rds), rt, c));
coll!(MPI_Alltoallw_c / PMPI_Alltoallw_c, MPI_Ialltoallw_c / PMPI_Ialltoallw_c,
      (s: *const Void, scs: *const MPI_Count, sds: *const MPI_Aint, sts: *const MPI_Datatype, r: *mut Void, rcs: *const MPI_Count, rds: *const MPI_Aint, rts: *const MPI_Datatype, c: MPI_Comm), c,
      prep_alltoallw(s, VArgs::Big(scs, sds), sts, r, VArgs::Big(rcs, rds), rts, c));
coll!(MPI_Reduce_scatter_c / PMPI_Reduce_scatter_c, MPI_Ireduce_scatter_c / PMPI_Ireduce_scatter_c,
      (s: *const Void, r: *mut Void, rcs: *const MPI_Count, dt: MPI_Datatype, o: MPI_Op, c: MPI_Comm), c,
      prep_reduce_scatter(s, r, VArgs::Big(rcs, std::ptr::null()), dt, o, c));

type UserFnBig = unsafe extern "C" fn(*mut Void, *mut Void, *mut MPI_Count, *mut MPI_Datatype);

mpi_fn!(fn MPI_Op_create_c / PMPI_Op_create_c(f: Option<UserFnBig>, commute: c_int, out: *mut MPI_Op) -> c_int {
    run("MPI_Op_create_c", MPI_COMM_WORLD, || {
        let f = f.ok_or_else(|| err(class::ARG, "the user function is NULL"))?;
        let call = move |a: usize, b: usize, n: usize, dt: &gridwire_mpi::Datatype| {
            let mut len = n as MPI_Count;
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
