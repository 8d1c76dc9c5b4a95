//! The communication calls: `MPI_Put`, `MPI_Get`, the accumulates,
//! fetch-and-op, compare-and-swap, their request-based forms and the
//! large-count (`_c`) variants.

use super::{fast, run_win, with_win, MPI_Win};
use crate::abi::*;
use crate::handles::{self, mpi, ReqObj, REQS};
use crate::{put, Void};
use gridwire_mpi::rma::ops::{Kind, Origin, Target};
use gridwire_mpi::{class, err, Op, Result};
use std::ffi::c_int;

/// One side of a call as C gives it: address, count, datatype.
#[derive(Clone, Copy)]
struct Side {
    addr: *const Void,
    count: i64,
    dt: MPI_Datatype,
}

/// Everything a communication call may carry.
struct Call {
    kind: Kind,
    data: Option<Side>,
    compare: Option<Side>,
    result: Option<Side>,
    rank: c_int,
    disp: MPI_Aint,
    tcount: i64,
    tdt: MPI_Datatype,
    op: Option<MPI_Op>,
}

/// Runs a call; with `req` stores its request.
///
/// # Safety
/// The sides are the user's buffers of the call (valid until it completes,
/// as MPI requires); `req` is NULL or a valid `MPI_Request*`.
unsafe fn issue(name: &str, w: MPI_Win, c: Call, req: *mut MPI_Request) -> c_int {
    run_win(name, w, || {
        let m = mpi()?;
        if c.tcount < 0 {
            return Err(err(
                class::COUNT,
                format!("target count {} is negative", c.tcount),
            ));
        }
        // SAFETY: the caller's contract for each side.
        let mk = |s: Side| unsafe { handles::buf(s.addr, s.count, s.dt) };
        let data = c.data.map(mk).transpose()?;
        let compare = c.compare.map(mk).transpose()?;
        let result = c.result.map(mk).transpose()?;
        // Borrowed, not counted, when predefined (the usual case).
        let op = c.op.map(handles::op_ref).transpose()?;
        let tdt = handles::dtype_ref(c.tdt)?;
        let r = with_win(w, |o| {
            m.rma_op(
                &o.win,
                c.kind,
                Origin {
                    data: data.as_ref(),
                    compare: compare.as_ref(),
                    result,
                    op: op.as_deref(),
                },
                Target {
                    rank: c.rank,
                    disp: c.disp as i64,
                    count: c.tcount as usize,
                    dt: &tdt,
                },
                !req.is_null(),
            )
        })?;
        if let Some(r) = r {
            // SAFETY: the caller's contract for `req`.
            unsafe { put(req, REQS.insert(ReqObj::Plain(r))) };
        }
        Ok(())
    })
}

fn side(addr: *const Void, count: i64, dt: MPI_Datatype) -> Option<Side> {
    Some(Side { addr, count, dt })
}

/// Generates a call and its `_c` form (counts as `MPI_Count`), with and without a request.
macro_rules! put_get {
    ($name:ident, $pname:ident, $cname:ident, $pcname:ident, $rname:ident, $prname:ident, $rcname:ident, $prcname:ident, $kind:expr, $origin_in:expr) => {
        put_get!(@one $name, $pname, c_int, $kind, $origin_in, false);
        put_get!(@one $cname, $pcname, MPI_Count, $kind, $origin_in, false);
        put_get!(@one $rname, $prname, c_int, $kind, $origin_in, true);
        put_get!(@one $rcname, $prcname, MPI_Count, $kind, $origin_in, true);
    };
    (@one $name:ident, $pname:ident, $ct:ty, $kind:expr, $origin_in:expr, false) => {
        mpi_fn!(fn $name / $pname(oaddr: *const Void, ocount: $ct, odt: MPI_Datatype, rank: c_int, disp: MPI_Aint, tcount: $ct, tdt: MPI_Datatype, w: MPI_Win) -> c_int {
            // SAFETY: the standard's contract for the arguments.
            if unsafe { fast::put_get($origin_in, oaddr, ocount as i64, odt, rank, disp, tcount as i64, tdt, w) } {
                return MPI_SUCCESS;
            }
            let o = side(oaddr, ocount as i64, odt);
            let c = Call { kind: $kind, data: o.filter(|_| $origin_in), compare: None, result: o.filter(|_| !$origin_in), rank, disp, tcount: tcount as i64, tdt, op: None };
            // SAFETY: the standard's contract for the arguments.
            unsafe { issue(stringify!($name), w, c, std::ptr::null_mut()) }
        });
    };
    (@one $name:ident, $pname:ident, $ct:ty, $kind:expr, $origin_in:expr, true) => {
        mpi_fn!(fn $name / $pname(oaddr: *const Void, ocount: $ct, odt: MPI_Datatype, rank: c_int, disp: MPI_Aint, tcount: $ct, tdt: MPI_Datatype, w: MPI_Win, req: *mut MPI_Request) -> c_int {
            if req.is_null() {
                return crate::errors::fail(stringify!($name), MPI_COMM_WORLD, err(class::ARG, "the request pointer is NULL"));
            }
            let o = side(oaddr, ocount as i64, odt);
            let c = Call { kind: $kind, data: o.filter(|_| $origin_in), compare: None, result: o.filter(|_| !$origin_in), rank, disp, tcount: tcount as i64, tdt, op: None };
            // SAFETY: the standard's contract for the arguments.
            unsafe { issue(stringify!($name), w, c, req) }
        });
    };
}

put_get!(
    MPI_Put,
    PMPI_Put,
    MPI_Put_c,
    PMPI_Put_c,
    MPI_Rput,
    PMPI_Rput,
    MPI_Rput_c,
    PMPI_Rput_c,
    Kind::Put,
    true
);
put_get!(
    MPI_Get,
    PMPI_Get,
    MPI_Get_c,
    PMPI_Get_c,
    MPI_Rget,
    PMPI_Rget,
    MPI_Rget_c,
    PMPI_Rget_c,
    Kind::Get,
    false
);

macro_rules! accumulate {
    ($name:ident, $pname:ident, $ct:ty, $with_req:tt) => {
        accumulate!(@body $name, $pname, $ct, $with_req);
    };
    (@body $name:ident, $pname:ident, $ct:ty, false) => {
        mpi_fn!(fn $name / $pname(oaddr: *const Void, ocount: $ct, odt: MPI_Datatype, rank: c_int, disp: MPI_Aint, tcount: $ct, tdt: MPI_Datatype, op: MPI_Op, w: MPI_Win) -> c_int {
            // SAFETY: the standard's contract for the arguments.
            if unsafe { fast::accumulate(oaddr, ocount as i64, odt, std::ptr::null_mut(), 0, odt, rank, disp, tcount as i64, tdt, op, w) } {
                return MPI_SUCCESS;
            }
            let c = Call { kind: Kind::Accumulate, data: side(oaddr, ocount as i64, odt), compare: None, result: None, rank, disp, tcount: tcount as i64, tdt, op: Some(op) };
            // SAFETY: the standard's contract for the arguments.
            unsafe { issue(stringify!($name), w, c, std::ptr::null_mut()) }
        });
    };
    (@body $name:ident, $pname:ident, $ct:ty, true) => {
        mpi_fn!(fn $name / $pname(oaddr: *const Void, ocount: $ct, odt: MPI_Datatype, rank: c_int, disp: MPI_Aint, tcount: $ct, tdt: MPI_Datatype, op: MPI_Op, w: MPI_Win, req: *mut MPI_Request) -> c_int {
            if req.is_null() {
                return crate::errors::fail(stringify!($name), MPI_COMM_WORLD, err(class::ARG, "the request pointer is NULL"));
            }
            let c = Call { kind: Kind::Accumulate, data: side(oaddr, ocount as i64, odt), compare: None, result: None, rank, disp, tcount: tcount as i64, tdt, op: Some(op) };
            // SAFETY: the standard's contract for the arguments.
            unsafe { issue(stringify!($name), w, c, req) }
        });
    };
}

accumulate!(MPI_Accumulate, PMPI_Accumulate, c_int, false);
accumulate!(MPI_Accumulate_c, PMPI_Accumulate_c, MPI_Count, false);
accumulate!(MPI_Raccumulate, PMPI_Raccumulate, c_int, true);
accumulate!(MPI_Raccumulate_c, PMPI_Raccumulate_c, MPI_Count, true);

/// `MPI_NO_OP` reads only: the origin buffer is then not used (it may be NULL).
fn origin_unless_no_op(op: MPI_Op, s: Side) -> Option<Side> {
    let no_op = handles::op_ref(op).is_ok_and(|o| matches!(*o, Op::NoOp));
    (!no_op).then_some(s)
}

macro_rules! get_accumulate {
    ($name:ident, $pname:ident, $ct:ty, $with_req:tt) => {
        get_accumulate!(@body $name, $pname, $ct, $with_req);
    };
    (@body $name:ident, $pname:ident, $ct:ty, false) => {
        mpi_fn!(fn $name / $pname(oaddr: *const Void, ocount: $ct, odt: MPI_Datatype, raddr: *mut Void, rcount: $ct, rdt: MPI_Datatype, rank: c_int, disp: MPI_Aint, tcount: $ct, tdt: MPI_Datatype, op: MPI_Op, w: MPI_Win) -> c_int {
            // SAFETY: the standard's contract for the arguments.
            if !raddr.is_null() && unsafe { fast::accumulate(oaddr, ocount as i64, odt, raddr, rcount as i64, rdt, rank, disp, tcount as i64, tdt, op, w) } {
                return MPI_SUCCESS;
            }
            let c = Call { kind: Kind::GetAccumulate, data: origin_unless_no_op(op, Side { addr: oaddr, count: ocount as i64, dt: odt }), compare: None, result: side(raddr, rcount as i64, rdt), rank, disp, tcount: tcount as i64, tdt, op: Some(op) };
            // SAFETY: the standard's contract for the arguments.
            unsafe { issue(stringify!($name), w, c, std::ptr::null_mut()) }
        });
    };
    (@body $name:ident, $pname:ident, $ct:ty, true) => {
        mpi_fn!(fn $name / $pname(oaddr: *const Void, ocount: $ct, odt: MPI_Datatype, raddr: *mut Void, rcount: $ct, rdt: MPI_Datatype, rank: c_int, disp: MPI_Aint, tcount: $ct, tdt: MPI_Datatype, op: MPI_Op, w: MPI_Win, req: *mut MPI_Request) -> c_int {
            if req.is_null() {
                return crate::errors::fail(stringify!($name), MPI_COMM_WORLD, err(class::ARG, "the request pointer is NULL"));
            }
            let c = Call { kind: Kind::GetAccumulate, data: origin_unless_no_op(op, Side { addr: oaddr, count: ocount as i64, dt: odt }), compare: None, result: side(raddr, rcount as i64, rdt), rank, disp, tcount: tcount as i64, tdt, op: Some(op) };
            // SAFETY: the standard's contract for the arguments.
            unsafe { issue(stringify!($name), w, c, req) }
        });
    };
}

get_accumulate!(MPI_Get_accumulate, PMPI_Get_accumulate, c_int, false);
get_accumulate!(
    MPI_Get_accumulate_c,
    PMPI_Get_accumulate_c,
    MPI_Count,
    false
);
get_accumulate!(MPI_Rget_accumulate, PMPI_Rget_accumulate, c_int, true);
get_accumulate!(
    MPI_Rget_accumulate_c,
    PMPI_Rget_accumulate_c,
    MPI_Count,
    true
);

mpi_fn!(fn MPI_Fetch_and_op / PMPI_Fetch_and_op(oaddr: *const Void, raddr: *mut Void, dt: MPI_Datatype, rank: c_int, disp: MPI_Aint, op: MPI_Op, w: MPI_Win) -> c_int {
    // SAFETY: the standard's contract for the arguments.
    if !raddr.is_null() && unsafe { fast::accumulate(oaddr, 1, dt, raddr, 1, dt, rank, disp, 1, dt, op, w) } {
        return MPI_SUCCESS;
    }
    let c = Call {
        kind: Kind::GetAccumulate,
        data: origin_unless_no_op(op, Side { addr: oaddr, count: 1, dt }),
        compare: None,
        result: side(raddr, 1, dt),
        rank,
        disp,
        tcount: 1,
        tdt: dt,
        op: Some(op),
    };
    // SAFETY: the standard's contract for the arguments.
    unsafe { issue("MPI_Fetch_and_op", w, c, std::ptr::null_mut()) }
});

mpi_fn!(fn MPI_Compare_and_swap / PMPI_Compare_and_swap(oaddr: *const Void, caddr: *const Void, raddr: *mut Void, dt: MPI_Datatype, rank: c_int, disp: MPI_Aint, w: MPI_Win) -> c_int {
    // SAFETY: the standard's contract for the arguments.
    if unsafe { fast::compare_and_swap(oaddr, caddr, raddr, dt, rank, disp, w) } {
        return MPI_SUCCESS;
    }
    let check = || -> Result<()> {
        let t = handles::dtype_ref(dt)?;
        if t.basic.is_none() || t.nbasic != 1 {
            return Err(err(class::TYPE, "MPI_Compare_and_swap takes one element of a predefined type"));
        }
        Ok(())
    };
    if let Err(e) = check() {
        return run_win("MPI_Compare_and_swap", w, || Err(e));
    }
    let c = Call {
        kind: Kind::CompareAndSwap,
        data: side(oaddr, 1, dt),
        compare: side(caddr, 1, dt),
        result: side(raddr, 1, dt),
        rank,
        disp,
        tcount: 1,
        tdt: dt,
        op: None,
    };
    // SAFETY: the standard's contract for the arguments.
    unsafe { issue("MPI_Compare_and_swap", w, c, std::ptr::null_mut()) }
});
