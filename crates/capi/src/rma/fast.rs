//! The first thing `MPI_Put`, `MPI_Get`, `MPI_Accumulate`,
//! `MPI_Get_accumulate`, `MPI_Fetch_and_op`, `MPI_Compare_and_swap` and
//! `MPI_Win_flush(_local)(_all)` try: the common case — a window this thread
//! used before (the per-thread cache of [`super::cache::peek`]), one
//! predefined contiguous datatype and the same count on every side, a
//! predefined operation — handed to the window's fast path
//! (`gridwire_mpi::rma::Win::fast_put` and the like) with plain addresses
//! and sizes: no `Buf`, `Result` or request is built.
//!
//! Each function answers whether the call is done. `false` is never an
//! error: the caller runs the general path (`super::ops::issue`), which
//! checks everything and reports what is wrong through the window's error
//! handler, exactly as before the fast path existed.

use super::{cache, MPI_Win};
use crate::abi::*;
use crate::handles;
use crate::Void;
use std::ffi::c_int;

/// The byte count of `count` elements of the predefined contiguous type
/// `dt` on both sides of a call (origin `ocount`/`odt`, target
/// `tcount`/`tdt`), if the call is the fast path's case.
#[inline(always)]
fn same_sides(
    ocount: i64,
    odt: MPI_Datatype,
    tcount: i64,
    tdt: MPI_Datatype,
) -> Option<(&'static gridwire_mpi::Datatype, usize)> {
    if odt != tdt || ocount != tcount || ocount <= 0 {
        return None;
    }
    let t = handles::predef_contig_type(odt)?;
    let n = usize::try_from(ocount).ok()?.checked_mul(t.size)?;
    Some((t, n))
}

/// `MPI_Put` (`put`) or `MPI_Get` to or from `addr`.
///
/// # Safety
/// `addr` is the call's origin (put) or result (get) buffer (MPI's rule).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn put_get(
    put: bool,
    addr: *const Void,
    ocount: i64,
    odt: MPI_Datatype,
    rank: c_int,
    disp: MPI_Aint,
    tcount: i64,
    tdt: MPI_Datatype,
    w: MPI_Win,
) -> bool {
    let Some((t, n)) = same_sides(ocount, odt, tcount, tdt) else {
        return false;
    };
    cache::peek(w, |win| {
        // SAFETY: the caller's contract for `addr`, `n` bytes of it.
        let done = unsafe {
            if put {
                win.fast_put(rank, disp as i64, addr as *const u8, n)
            } else {
                win.fast_get(rank, disp as i64, addr as *mut u8, n)
            }
        };
        // Not mapped here: as one request, when that is what it would be.
        done || handles::mpi().is_ok_and(|m| {
            // SAFETY: as above; `t` is predefined; `ocount` elements of it
            // are the `n` bytes (`same_sides`).
            unsafe {
                m.fast_request_put_get(
                    win,
                    put,
                    rank,
                    disp as i64,
                    addr as usize,
                    ocount as usize,
                    t,
                )
            }
        })
    })
    .unwrap_or(false)
}

/// `MPI_Accumulate` (`raddr` NULL, `rcount`/`rdt` ignored) or
/// `MPI_Get_accumulate` / `MPI_Fetch_and_op` (result buffer `raddr` of
/// `rcount` elements of `rdt`).
///
/// # Safety
/// `oaddr` and `raddr` are the call's buffers (MPI's rule; `oaddr` may be
/// anything for `MPI_NO_OP`).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn accumulate(
    oaddr: *const Void,
    ocount: i64,
    odt: MPI_Datatype,
    raddr: *mut Void,
    rcount: i64,
    rdt: MPI_Datatype,
    rank: c_int,
    disp: MPI_Aint,
    tcount: i64,
    tdt: MPI_Datatype,
    op: MPI_Op,
    w: MPI_Win,
) -> bool {
    let Some(o) = handles::predef_op(op) else {
        return false;
    };
    let no_op = matches!(o, gridwire_mpi::Op::NoOp);
    // MPI_NO_OP reads only: the origin side is not used (MPI's rule).
    let (ocount, odt, oaddr) = if no_op {
        (tcount, tdt, std::ptr::null())
    } else {
        (ocount, odt, oaddr)
    };
    let Some((t, _)) = same_sides(ocount, odt, tcount, tdt) else {
        return false;
    };
    if !raddr.is_null() && (rdt != tdt || rcount != tcount) {
        return false;
    }
    cache::peek(w, |win| {
        // SAFETY: the caller's contract for the buffers; `t` is predefined.
        let done = unsafe {
            win.fast_accumulate(
                rank,
                disp as i64,
                t,
                tcount as usize,
                o,
                oaddr as *const u8,
                raddr as *mut u8,
            )
        };
        // Not mapped here: as one request, when that is what it would be.
        done || handles::mpi().is_ok_and(|m| {
            // SAFETY: as above.
            unsafe {
                m.fast_request_accumulate(
                    win,
                    rank,
                    disp as i64,
                    t,
                    tcount as usize,
                    o,
                    oaddr as usize,
                    raddr as usize,
                )
            }
        })
    })
    .unwrap_or(false)
}

/// `MPI_Compare_and_swap`.
///
/// # Safety
/// The three addresses are the call's buffers of one element of `dt`.
#[inline(always)]
pub(super) unsafe fn compare_and_swap(
    oaddr: *const Void,
    caddr: *const Void,
    raddr: *mut Void,
    dt: MPI_Datatype,
    rank: c_int,
    disp: MPI_Aint,
    w: MPI_Win,
) -> bool {
    let Some(t) = handles::predef_contig_type(dt) else {
        return false;
    };
    cache::peek(w, |win| {
        // SAFETY: the caller's contract for the buffers; `t` is predefined.
        unsafe {
            win.fast_compare_and_swap(
                rank,
                disp as i64,
                t,
                oaddr as *const u8,
                caddr as *const u8,
                raddr as *mut u8,
            )
        }
    })
    .unwrap_or(false)
}

/// `MPI_Win_flush` and `MPI_Win_flush_local` with nothing to wait for.
#[inline(always)]
pub(super) fn flush(rank: c_int, w: MPI_Win) -> bool {
    cache::peek(w, |win| win.fast_flush(rank)).unwrap_or(false)
}

/// `MPI_Win_flush_all` and `MPI_Win_flush_local_all` with nothing to wait for.
#[inline(always)]
pub(super) fn flush_all(w: MPI_Win) -> bool {
    cache::peek(w, |win| win.fast_flush_all()).unwrap_or(false)
}
