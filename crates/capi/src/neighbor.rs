//! Neighbourhood collectives, blocking and nonblocking, `int` and `_c`
//! forms: the user's buffers cut into one piece per neighbour, then
//! [`gridwire_mpi::Mpi::neighbor_exchange`].

use crate::abi::*;
use crate::errors::run;
use crate::handles::{buf, comm, dtype, mpi, PKind, Persistent, PersistentColl, ReqObj, REQS};
use crate::{arr, Void};
use gridwire_mpi::neighbor::Neighbors;
use gridwire_mpi::{class, err, Buf, Comm, Mpi, Result};
use std::ffi::c_int;
use std::sync::{Arc, Mutex};

/// What every form prepares: the communicator, its neighbours, and one buffer per destination and per source.
type Prep = Result<(Arc<Comm>, Neighbors, Vec<Buf>, Vec<Buf>)>;

fn not_in_place(sbuf: *const Void) -> Result<()> {
    if sbuf as usize == MPI_IN_PLACE {
        return Err(err(
            class::ARG,
            "MPI_IN_PLACE is not allowed in a neighbourhood collective",
        ));
    }
    Ok(())
}

/// `count` elements of `dt` at element displacement `displ` of `base`.
///
/// # Safety
/// The range is part of the user's buffer as the call's arguments describe it.
unsafe fn piece(base: *const Void, displ: i64, count: i64, dt: MPI_Datatype) -> Result<Buf> {
    let ext = dtype(dt)?.extent as i64;
    let off = displ
        .checked_mul(ext)
        .ok_or_else(|| err(class::ARG, "displacement overflows"))?;
    // SAFETY: forwarded contract; wrapping arithmetic: the address is the user's.
    unsafe {
        buf(
            (base as *const u8).wrapping_offset(off as isize) as *const Void,
            count,
            dt,
        )
    }
}

/// `count` elements of `dt` at byte displacement `displ` of `base` (the `w` form).
///
/// # Safety
/// As [`piece`].
unsafe fn piece_bytes(base: *const Void, displ: i64, count: i64, dt: MPI_Datatype) -> Result<Buf> {
    // SAFETY: forwarded contract.
    unsafe {
        buf(
            (base as *const u8).wrapping_offset(displ as isize) as *const Void,
            count,
            dt,
        )
    }
}

/// Reads an array of `n` counts or displacements (int or `MPI_Count`/`MPI_Aint`) as i64.
///
/// # Safety
/// `p` holds `n` elements.
unsafe fn read<T: Copy + Into<i64>>(what: &str, p: *const T, n: usize) -> Result<Vec<i64>> {
    if n > 0 && p.is_null() {
        return Err(err(class::ARG, format!("{what} is NULL")));
    }
    // SAFETY: `n` elements by the caller's contract.
    Ok(unsafe { arr(p, n as c_int) }
        .iter()
        .map(|&x| x.into())
        .collect())
}

/// Reads `n` datatype handles.
///
/// # Safety
/// `p` holds `n` handles.
unsafe fn read_types(p: *const MPI_Datatype, n: usize) -> Result<Vec<MPI_Datatype>> {
    if n > 0 && p.is_null() {
        return Err(err(class::ARG, "the datatype array is NULL"));
    }
    // SAFETY: `n` handles by the caller's contract.
    Ok(unsafe { arr(p, n as c_int) }.to_vec())
}

fn topology(c: MPI_Comm) -> Result<(Arc<Comm>, Neighbors)> {
    let cm = comm(c)?;
    let nb = Neighbors::of(&cm)?;
    Ok((cm, nb))
}

/// # Safety
/// The MPI contract of `MPI_Neighbor_allgather`.
unsafe fn allgather(
    sb: *const Void,
    sc: i64,
    st: MPI_Datatype,
    rb: *mut Void,
    rc: i64,
    rt: MPI_Datatype,
    c: MPI_Comm,
) -> Prep {
    not_in_place(sb)?;
    let (cm, nb) = topology(c)?;
    // SAFETY: the call's buffers.
    let s = unsafe { buf(sb, sc, st) }?;
    let sends = vec![s; nb.destinations.len()];
    // SAFETY: block k of the receive buffer.
    let recvs = (0..nb.sources.len())
        .map(|k| unsafe { piece(rb, k as i64 * rc, rc, rt) })
        .collect::<Result<_>>()?;
    Ok((cm, nb, sends, recvs))
}

/// # Safety
/// The MPI contract of `MPI_Neighbor_allgatherv`.
unsafe fn allgatherv<C: Copy + Into<i64>, D: Copy + Into<i64>>(
    sb: *const Void,
    sc: i64,
    st: MPI_Datatype,
    rb: *mut Void,
    rcs: *const C,
    rds: *const D,
    rt: MPI_Datatype,
    c: MPI_Comm,
) -> Prep {
    not_in_place(sb)?;
    let (cm, nb) = topology(c)?;
    let n = nb.sources.len();
    // SAFETY: indegree counts and displacements.
    let (cs, ds) = unsafe { (read("recvcounts", rcs, n)?, read("displs", rds, n)?) };
    // SAFETY: the call's buffers.
    let s = unsafe { buf(sb, sc, st) }?;
    let sends = vec![s; nb.destinations.len()];
    // SAFETY: the pieces the displacements describe.
    let recvs = (0..n)
        .map(|k| unsafe { piece(rb, ds[k], cs[k], rt) })
        .collect::<Result<_>>()?;
    Ok((cm, nb, sends, recvs))
}

/// # Safety
/// The MPI contract of `MPI_Neighbor_alltoall`.
unsafe fn alltoall(
    sb: *const Void,
    sc: i64,
    st: MPI_Datatype,
    rb: *mut Void,
    rc: i64,
    rt: MPI_Datatype,
    c: MPI_Comm,
) -> Prep {
    not_in_place(sb)?;
    let (cm, nb) = topology(c)?;
    // SAFETY: block j of the send buffer, block k of the receive buffer.
    let sends = (0..nb.destinations.len())
        .map(|j| unsafe { piece(sb, j as i64 * sc, sc, st) })
        .collect::<Result<_>>()?;
    let recvs = (0..nb.sources.len())
        .map(|k| unsafe { piece(rb, k as i64 * rc, rc, rt) })
        .collect::<Result<_>>()?;
    Ok((cm, nb, sends, recvs))
}

/// # Safety
/// The MPI contract of `MPI_Neighbor_alltoallv`.
unsafe fn alltoallv<C: Copy + Into<i64>, D: Copy + Into<i64>>(
    sb: *const Void,
    scs: *const C,
    sds: *const D,
    st: MPI_Datatype,
    rb: *mut Void,
    rcs: *const C,
    rds: *const D,
    rt: MPI_Datatype,
    c: MPI_Comm,
) -> Prep {
    not_in_place(sb)?;
    let (cm, nb) = topology(c)?;
    let (no, ni) = (nb.destinations.len(), nb.sources.len());
    // SAFETY: outdegree and indegree counts and displacements.
    let (sc, sd, rc, rd) = unsafe {
        (
            read("sendcounts", scs, no)?,
            read("sdispls", sds, no)?,
            read("recvcounts", rcs, ni)?,
            read("rdispls", rds, ni)?,
        )
    };
    // SAFETY: the pieces the displacements describe.
    let sends = (0..no)
        .map(|j| unsafe { piece(sb, sd[j], sc[j], st) })
        .collect::<Result<_>>()?;
    let recvs = (0..ni)
        .map(|k| unsafe { piece(rb, rd[k], rc[k], rt) })
        .collect::<Result<_>>()?;
    Ok((cm, nb, sends, recvs))
}

/// # Safety
/// The MPI contract of `MPI_Neighbor_alltoallw`.
unsafe fn alltoallw<C: Copy + Into<i64>>(
    sb: *const Void,
    scs: *const C,
    sds: *const MPI_Aint,
    sts: *const MPI_Datatype,
    rb: *mut Void,
    rcs: *const C,
    rds: *const MPI_Aint,
    rts: *const MPI_Datatype,
    c: MPI_Comm,
) -> Prep {
    not_in_place(sb)?;
    let (cm, nb) = topology(c)?;
    let (no, ni) = (nb.destinations.len(), nb.sources.len());
    let aints = |p: *const MPI_Aint, n: usize, what: &str| -> Result<Vec<i64>> {
        // SAFETY: `n` addresses by the call's contract (MPI_Aint is 64-bit here).
        unsafe { read(what, p as *const i64, n) }
    };
    // SAFETY: the per-neighbour arrays of the call.
    let (sc, rc, st, rt) = unsafe {
        (
            read("sendcounts", scs, no)?,
            read("recvcounts", rcs, ni)?,
            read_types(sts, no)?,
            read_types(rts, ni)?,
        )
    };
    let (sd, rd) = (aints(sds, no, "sdispls")?, aints(rds, ni, "rdispls")?);
    // SAFETY: the pieces the byte displacements describe.
    let sends = (0..no)
        .map(|j| unsafe { piece_bytes(sb, sd[j], sc[j], st[j]) })
        .collect::<Result<_>>()?;
    let recvs = (0..ni)
        .map(|k| unsafe { piece_bytes(rb, rd[k], rc[k], rt[k]) })
        .collect::<Result<_>>()?;
    Ok((cm, nb, sends, recvs))
}

/// Exports the blocking and the nonblocking form of one neighbourhood collective.
macro_rules! neighbor {
    ($name:ident / $pname:ident, $iname:ident / $piname:ident, ($($a:ident : $t:ty),*), $c:ident, $prep:expr) => {
        mpi_fn!(fn $name / $pname($($a: $t),*) -> c_int {
            run(stringify!($name), $c, || {
                let m = mpi()?;
                // SAFETY: the arguments follow the MPI contract of this call.
                let (cm, nb, sends, recvs) = unsafe { $prep }?;
                m.neighbor_exchange(&cm, &nb, &sends, &recvs)
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
                let (cm, nb, sends, recvs) = unsafe { $prep }?;
                let r = m.icoll(&cm, move |m, shadow| m.neighbor_exchange(shadow, &nb, &sends, &recvs))?;
                // SAFETY: checked output argument.
                unsafe { *req = REQS.insert(ReqObj::Plain(r)) };
                Ok(())
            })
        });
    };
}

neighbor!(MPI_Neighbor_allgather / PMPI_Neighbor_allgather, MPI_Ineighbor_allgather / PMPI_Ineighbor_allgather,
    (sb: *const Void, sc: c_int, st: MPI_Datatype, rb: *mut Void, rc: c_int, rt: MPI_Datatype, c: MPI_Comm), c,
    allgather(sb, sc as i64, st, rb, rc as i64, rt, c));
neighbor!(MPI_Neighbor_allgather_c / PMPI_Neighbor_allgather_c, MPI_Ineighbor_allgather_c / PMPI_Ineighbor_allgather_c,
    (sb: *const Void, sc: MPI_Count, st: MPI_Datatype, rb: *mut Void, rc: MPI_Count, rt: MPI_Datatype, c: MPI_Comm), c,
    allgather(sb, sc, st, rb, rc, rt, c));
neighbor!(MPI_Neighbor_allgatherv / PMPI_Neighbor_allgatherv, MPI_Ineighbor_allgatherv / PMPI_Ineighbor_allgatherv,
    (sb: *const Void, sc: c_int, st: MPI_Datatype, rb: *mut Void, rcs: *const c_int, rds: *const c_int, rt: MPI_Datatype, c: MPI_Comm), c,
    allgatherv(sb, sc as i64, st, rb, rcs, rds, rt, c));
neighbor!(MPI_Neighbor_allgatherv_c / PMPI_Neighbor_allgatherv_c, MPI_Ineighbor_allgatherv_c / PMPI_Ineighbor_allgatherv_c,
    (sb: *const Void, sc: MPI_Count, st: MPI_Datatype, rb: *mut Void, rcs: *const MPI_Count, rds: *const MPI_Aint, rt: MPI_Datatype, c: MPI_Comm), c,
    allgatherv(sb, sc, st, rb, rcs, rds as *const i64, rt, c));
neighbor!(MPI_Neighbor_alltoall / PMPI_Neighbor_alltoall, MPI_Ineighbor_alltoall / PMPI_Ineighbor_alltoall,
    (sb: *const Void, sc: c_int, st: MPI_Datatype, rb: *mut Void, rc: c_int, rt: MPI_Datatype, c: MPI_Comm), c,
    alltoall(sb, sc as i64, st, rb, rc as i64, rt, c));
neighbor!(MPI_Neighbor_alltoall_c / PMPI_Neighbor_alltoall_c, MPI_Ineighbor_alltoall_c / PMPI_Ineighbor_alltoall_c,
    (sb: *const Void, sc: MPI_Count, st: MPI_Datatype, rb: *mut Void, rc: MPI_Count, rt: MPI_Datatype, c: MPI_Comm), c,
    alltoall(sb, sc, st, rb, rc, rt, c));
neighbor!(MPI_Neighbor_alltoallv / PMPI_Neighbor_alltoallv, MPI_Ineighbor_alltoallv / PMPI_Ineighbor_alltoallv,
    (sb: *const Void, scs: *const c_int, sds: *const c_int, st: MPI_Datatype, rb: *mut Void, rcs: *const c_int, rds: *const c_int, rt: MPI_Datatype, c: MPI_Comm), c,
    alltoallv(sb, scs, sds, st, rb, rcs, rds, rt, c));
neighbor!(MPI_Neighbor_alltoallv_c / PMPI_Neighbor_alltoallv_c, MPI_Ineighbor_alltoallv_c / PMPI_Ineighbor_alltoallv_c,
    (sb: *const Void, scs: *const MPI_Count, sds: *const MPI_Aint, st: MPI_Datatype, rb: *mut Void, rcs: *const MPI_Count, rds: *const MPI_Aint, rt: MPI_Datatype, c: MPI_Comm), c,
    alltoallv(sb, scs, sds as *const i64, st, rb, rcs, rds as *const i64, rt, c));
neighbor!(MPI_Neighbor_alltoallw / PMPI_Neighbor_alltoallw, MPI_Ineighbor_alltoallw / PMPI_Ineighbor_alltoallw,
    (sb: *const Void, scs: *const c_int, sds: *const MPI_Aint, sts: *const MPI_Datatype, rb: *mut Void, rcs: *const c_int, rds: *const MPI_Aint, rts: *const MPI_Datatype, c: MPI_Comm), c,
    alltoallw(sb, scs, sds, sts, rb, rcs, rds, rts, c));
neighbor!(MPI_Neighbor_alltoallw_c / PMPI_Neighbor_alltoallw_c, MPI_Ineighbor_alltoallw_c / PMPI_Ineighbor_alltoallw_c,
    (sb: *const Void, scs: *const MPI_Count, sds: *const MPI_Aint, sts: *const MPI_Datatype, rb: *mut Void, rcs: *const MPI_Count, rds: *const MPI_Aint, rts: *const MPI_Datatype, c: MPI_Comm), c,
    alltoallw(sb, scs, sds, sts, rb, rcs, rds, rts, c));

/// Exports the persistent form (`MPI_Neighbor_X_init`, MPI 4.0) of one
/// neighbourhood collective: the arguments are checked and cut into
/// per-neighbour pieces once; each `MPI_Start` runs a fresh instance of the
/// nonblocking exchange on those pieces, reading the buffers as they are then.
macro_rules! neighbor_init {
    ($name:ident / $pname:ident, ($($a:ident : $t:ty),*), $c:ident, $prep:expr) => {
        mpi_fn!(fn $name / $pname($($a: $t,)* info: MPI_Info, req: *mut MPI_Request) -> c_int {
            run(stringify!($name), $c, || {
                if req.is_null() {
                    return Err(err(class::REQUEST, "request pointer is NULL"));
                }
                crate::comm::info_or_empty(info)?;
                // SAFETY: the arguments follow the MPI contract of this call;
                // the buffers stay valid while the persistent request exists.
                let (cm, nb, sends, recvs) = unsafe { $prep }?;
                let start: PersistentColl = Box::new(move |m: &'static Mpi, cm: &Comm| {
                    let (nb, sends, recvs) = (nb.clone(), sends.clone(), recvs.clone());
                    m.icoll(cm, move |m, shadow| m.neighbor_exchange(shadow, &nb, &sends, &recvs))
                });
                let p = Persistent { kind: PKind::Coll(start), comm: cm, active: None };
                // SAFETY: checked output argument.
                unsafe { *req = REQS.insert(ReqObj::Persistent(Arc::new(Mutex::new(p)))) };
                Ok(())
            })
        });
    };
}

neighbor_init!(MPI_Neighbor_allgather_init / PMPI_Neighbor_allgather_init,
    (sb: *const Void, sc: c_int, st: MPI_Datatype, rb: *mut Void, rc: c_int, rt: MPI_Datatype, c: MPI_Comm), c,
    allgather(sb, sc as i64, st, rb, rc as i64, rt, c));
neighbor_init!(MPI_Neighbor_allgather_init_c / PMPI_Neighbor_allgather_init_c,
    (sb: *const Void, sc: MPI_Count, st: MPI_Datatype, rb: *mut Void, rc: MPI_Count, rt: MPI_Datatype, c: MPI_Comm), c,
    allgather(sb, sc, st, rb, rc, rt, c));
neighbor_init!(MPI_Neighbor_allgatherv_init / PMPI_Neighbor_allgatherv_init,
    (sb: *const Void, sc: c_int, st: MPI_Datatype, rb: *mut Void, rcs: *const c_int, rds: *const c_int, rt: MPI_Datatype, c: MPI_Comm), c,
    allgatherv(sb, sc as i64, st, rb, rcs, rds, rt, c));
neighbor_init!(MPI_Neighbor_allgatherv_init_c / PMPI_Neighbor_allgatherv_init_c,
    (sb: *const Void, sc: MPI_Count, st: MPI_Datatype, rb: *mut Void, rcs: *const MPI_Count, rds: *const MPI_Aint, rt: MPI_Datatype, c: MPI_Comm), c,
    allgatherv(sb, sc, st, rb, rcs, rds as *const i64, rt, c));
neighbor_init!(MPI_Neighbor_alltoall_init / PMPI_Neighbor_alltoall_init,
    (sb: *const Void, sc: c_int, st: MPI_Datatype, rb: *mut Void, rc: c_int, rt: MPI_Datatype, c: MPI_Comm), c,
    alltoall(sb, sc as i64, st, rb, rc as i64, rt, c));
neighbor_init!(MPI_Neighbor_alltoall_init_c / PMPI_Neighbor_alltoall_init_c,
    (sb: *const Void, sc: MPI_Count, st: MPI_Datatype, rb: *mut Void, rc: MPI_Count, rt: MPI_Datatype, c: MPI_Comm), c,
    alltoall(sb, sc, st, rb, rc, rt, c));
neighbor_init!(MPI_Neighbor_alltoallv_init / PMPI_Neighbor_alltoallv_init,
    (sb: *const Void, scs: *const c_int, sds: *const c_int, st: MPI_Datatype, rb: *mut Void, rcs: *const c_int, rds: *const c_int, rt: MPI_Datatype, c: MPI_Comm), c,
    alltoallv(sb, scs, sds, st, rb, rcs, rds, rt, c));
neighbor_init!(MPI_Neighbor_alltoallv_init_c / PMPI_Neighbor_alltoallv_init_c,
    (sb: *const Void, scs: *const MPI_Count, sds: *const MPI_Aint, st: MPI_Datatype, rb: *mut Void, rcs: *const MPI_Count, rds: *const MPI_Aint, rt: MPI_Datatype, c: MPI_Comm), c,
    alltoallv(sb, scs, sds as *const i64, st, rb, rcs, rds as *const i64, rt, c));
neighbor_init!(MPI_Neighbor_alltoallw_init / PMPI_Neighbor_alltoallw_init,
    (sb: *const Void, scs: *const c_int, sds: *const MPI_Aint, sts: *const MPI_Datatype, rb: *mut Void, rcs: *const c_int, rds: *const MPI_Aint, rts: *const MPI_Datatype, c: MPI_Comm), c,
    alltoallw(sb, scs, sds, sts, rb, rcs, rds, rts, c));
neighbor_init!(MPI_Neighbor_alltoallw_init_c / PMPI_Neighbor_alltoallw_init_c,
    (sb: *const Void, scs: *const MPI_Count, sds: *const MPI_Aint, sts: *const MPI_Datatype, rb: *mut Void, rcs: *const MPI_Count, rds: *const MPI_Aint, rts: *const MPI_Datatype, c: MPI_Comm), c,
    alltoallw(sb, scs, sds, sts, rb, rcs, rds, rts, c));
