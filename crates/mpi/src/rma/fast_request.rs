//! The lean path of `MPI_Put` and `MPI_Get` that go as requests: windows
//! over the program's memory (`MPI_Win_create`, dynamic) to a target that
//! polls inside MPI, and any window's members on other hosts; and of those
//! (and of accumulates) that go by single copies to a member of this host
//! that does not poll, where the copy is made here, not by the general path.
//!
//! A small put or get to a created window on one host is a round trip of
//! the shared-memory rings, about 150 ns; the general path
//! ([`super::ops`]) took some 1200 instructions around it (the C layer's
//! buffers and look-ups, then every check and choice of `rma_op`), which
//! made a put + flush 1.3–1.4× MPICH's time. Here, for the common case —
//! one predefined contiguous datatype and the same count on both sides —
//! the checks the general path makes for that case are made from the
//! window's per-rank state, and the request is built on the stack and sent.
//!
//! Why this cannot change a result or an error: as [`super::fast`], it
//! answers `false` for anything it does not recognise as a correct call
//! that the general path would send as this very request — no epoch, a rank
//! or an access outside the window, puts or gets deferred or to be deferred
//! (`super::batch`), a target reached by single copies that the general
//! path would copy to — and the caller then runs the general path, which
//! checks again and reports errors as before. It counts the call for the
//! deferral decision exactly when the general path would have.

use super::fast::FastTarget;
use super::wire::{self, Header};
use super::Win;
use crate::datatype::Datatype;
use crate::request::Buf;
use crate::Mpi;
use std::io::IoSlice;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Puts of at least this many bytes lend their origin buffer to the
/// runtime (`Win::large_puts`): between hosts it keeps every message until
/// the peer acknowledged it, and the copy it took of a large put cost as
/// much as the kernel's own (as for get answers, `super::lent_answers`).
const LEND_PUT_MIN: usize = 64 << 10;

impl Mpi {
    /// `MPI_Put` (`put`: from `addr`) or `MPI_Get` (into `addr`) of `n` (>
    /// 0) bytes, `count` elements of the predefined contiguous type `dt` on
    /// both sides, to displacement `disp` of window rank `rank`, as one
    /// request. False: not done, run the general path.
    ///
    /// # Safety
    /// `addr .. addr + n` is the call's origin (put, readable) or result
    /// (get, writable) buffer, valid as MPI requires (until the
    /// synchronization that completes the operation); `dt` is predefined.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn fast_request_put_get(
        &self,
        w: &Arc<Win>,
        put: bool,
        rank: i32,
        disp: i64,
        addr: usize,
        count: usize,
        dt: &'static Datatype,
    ) -> bool {
        let n = count.wrapping_mul(dt.size);
        let Ok(r) = u32::try_from(rank) else {
            return false;
        };
        let ri = r as usize;
        // Loads and stores (the fast path proper) are not requests.
        if n == 0 || addr == 0 || !dt.contig || w.fast.get(ri).is_none_or(FastTarget::mapped) {
            return false;
        }
        if !w.access.may_access(r) || w.error_pending() {
            return false;
        }
        if !fits_target(w, ri, disp, dt, n) {
            return false;
        }
        let sc = &w.single_copy;
        let counted = sc.defer && ri < sc.batches.len();
        if counted
            && (sc.held[ri].load(Ordering::Acquire)
                || (sc.batching[ri].load(Ordering::Relaxed) && super::single_copy::reached(w, ri)))
        {
            // Something is deferred, or this one would be: `batch`'s. (A
            // member not reached by single copies never defers: every put
            // and get to another host took the general path once a flush
            // had completed more than one, and missed what this path does
            // for large ones.)
            return false;
        }
        if !super::single_copy::goes_as_request(w, ri, n) {
            // A single copy (a member of this host not polling inside MPI,
            // or a put or get above `GW_MPI_RMA_PUT_CHOICE`): the copy
            // itself, not the general path around it. Not deferred (the
            // check above), so counted as `rma_defer` counts it.
            // SAFETY: the caller's contract for `addr .. addr + n`.
            if !unsafe { super::single_copy::fast_put_or_get(w, r, put, disp, dt, addr, n) } {
                return false;
            }
            if counted {
                count_call(&sc.calls[ri], true);
            }
            return true;
        }
        // A put held for this epoch's complete goes before this operation.
        if self.send_held_put(w, r, false).is_err() {
            return false;
        }
        if counted {
            count_call(&sc.calls[ri], true);
        }
        let layout = wire::encode_one_piece(disp, dt.true_lb, n);
        // SAFETY: the caller's contract: `count` elements of the predefined
        // `dt` at `addr`, valid until the operation completes.
        let result =
            (!put).then(|| unsafe { Buf::new(addr, count, crate::request::DtRef::borrowed(dt)) });
        if put && unanswered_put(w, r, n) {
            // A small put in a start epoch asks for no answer (op id 0, see
            // `unanswered_put`) and is held until the next operation to
            // this target or the epoch's `MPI_Win_complete`, which sends it
            // with the complete as one message ([`HeldPut`]).
            let h = Header {
                kind: wire::PUT,
                op: 0,
                basic: dt.basic.map_or(0, wire::basic_code),
                arg: 0,
                win: w.id,
                op_id: 0,
            }
            .encode();
            let mut slot = w.held_put[ri].lock().unwrap_or_else(|e| e.into_inner());
            *slot = Some(HeldPut {
                header: h,
                layout,
                data: addr.wrapping_add_signed(dt.true_lb),
                len: n,
            });
            w.put_held[ri].store(true, Ordering::Release);
            return true;
        }
        // Everything else is counted until answered.
        let id = self.rma.expect_answer(w, r, result, None);
        let h = Header {
            kind: if put { wire::PUT } else { wire::GET },
            op: 0,
            basic: dt.basic.map_or(0, wire::basic_code),
            arg: 0,
            win: w.id,
            op_id: id,
        }
        .encode();
        if !put && held_get(w, r, n) {
            // Held as a small put is (its answer is waited for by
            // `MPI_Win_complete`, which sends it with the complete).
            let mut slot = w.held_put[ri].lock().unwrap_or_else(|e| e.into_inner());
            *slot = Some(HeldPut {
                header: h,
                layout,
                data: 0,
                len: 0,
            });
            w.put_held[ri].store(true, Ordering::Release);
            return true;
        }
        let sent = if put {
            // SAFETY: the caller's contract: `n` readable bytes at `addr`.
            let data = unsafe { crate::mem::slice(addr.wrapping_add_signed(dt.true_lb), n) };
            let parts = [IoSlice::new(&h), IoSlice::new(&layout), IoSlice::new(data)];
            if n >= LEND_PUT_MIN && w.large_puts {
                // SAFETY: MPI leaves the origin buffer unchanged until the
                // synchronization that completes the put, which waits for
                // its answer; the answer settles the loan (`Rma::on_answer`,
                // or `note_lent` here if it came first).
                match unsafe { self.rma_send_lent(w, r, &parts) } {
                    Ok(Some(t)) => {
                        self.rma.note_lent(self.ctx(), id, t);
                        Ok(())
                    }
                    Ok(None) => Ok(()),
                    Err(e) => Err(e),
                }
            } else {
                self.rma_send(w, r, &parts)
            }
        } else if n >= super::paced_gets::PACE_MIN {
            self.rma.mark_paced(id, n);
            let g = super::paced_gets::HeldGet {
                win: w.clone(),
                world: w.comm.world_of(r),
                id,
                bytes: n,
                header: h,
                layout,
            };
            match self.rma.pace_get(self.ctx(), g, w.gets_in_flight) {
                // Held: sent when an earlier one completes.
                None => Ok(()),
                Some(g) => {
                    let sent = self.rma_send(w, r, &[IoSlice::new(&h), IoSlice::new(&layout)]);
                    if sent.is_err() {
                        self.rma.paced_get_done(g.world, n, w.gets_in_flight);
                    }
                    sent
                }
            }
        } else {
            self.rma_send(w, r, &[IoSlice::new(&h), IoSlice::new(&layout)])
        };
        if sent.is_err() {
            // The general path sends it again and reports the error.
            self.rma.forget(id);
            if counted {
                count_call(&sc.calls[ri], false);
            }
            return false;
        }
        true
    }
}

impl Mpi {
    /// `MPI_Accumulate` (`result` 0) or `MPI_Get_accumulate` /
    /// `MPI_Fetch_and_op` (`result` the result buffer's address) of `count`
    /// elements of the predefined contiguous type `dt` on every side, with
    /// predefined operation `op` (`data` 0 only for `MPI_NO_OP`), as one
    /// request, when the general path would send it so. False: not done,
    /// run the general path.
    ///
    /// # Safety
    /// `data` (unless 0) and `result` (unless 0) are the call's buffers of
    /// `count` elements of `dt`, valid as MPI requires; `dt` is predefined.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn fast_request_accumulate(
        &self,
        w: &Arc<Win>,
        rank: i32,
        disp: i64,
        dt: &'static Datatype,
        count: usize,
        op: &crate::op::Op,
        data: usize,
        result: usize,
    ) -> bool {
        use crate::op::Op;
        let n = count.wrapping_mul(dt.size);
        let Ok(r) = u32::try_from(rank) else {
            return false;
        };
        let ri = r as usize;
        let no_op = matches!(op, Op::NoOp);
        if n == 0
            || !dt.contig
            || dt.basic.is_none()
            || matches!(op, Op::User { .. })
            || (data == 0 && !no_op)
            // A plain accumulate of MPI_NO_OP: the general path's.
            || (no_op && result == 0)
            || op.check(dt).is_err()
            || ri >= w.outstanding.len()
        {
            return false;
        }
        if !w.access.may_access(r) || w.error_pending() {
            return false;
        }
        if super::direct::applies(w, super::ops::Kind::Accumulate, r) {
            return false;
        }
        if !fits_target(w, ri, disp, dt, n) {
            return false;
        }
        let sc = &w.single_copy;
        // Deferred puts and gets go first (the general path issues them).
        if sc.held.get(ri).is_some_and(|h| h.load(Ordering::Acquire)) {
            return false;
        }
        // So does a put held for the epoch's complete.
        if self.send_held_put(w, r, false).is_err() {
            return false;
        }
        if !super::single_copy::accumulate_goes_as_request(w, ri) {
            // By single copies under the target's lock word: the general
            // path's `single_copy::accumulate` itself, without the ~1000
            // instructions of buffers and checks around it.
            use super::ops::{Kind, Origin, Target};
            use crate::request::DtRef;
            // SAFETY: the caller's contract for `data` and `result`.
            let operand =
                (data != 0).then(|| unsafe { Buf::new(data, count, DtRef::borrowed(dt)) });
            let o = Origin {
                data: operand.as_ref(),
                compare: None,
                // SAFETY: as above.
                result: (result != 0)
                    .then(|| unsafe { Buf::new(result, count, DtRef::borrowed(dt)) }),
                op: Some(op),
            };
            let t = Target {
                rank,
                disp,
                count,
                dt,
            };
            let kind = if result != 0 {
                Kind::GetAccumulate
            } else {
                Kind::Accumulate
            };
            // False: nothing was changed; the general path judges it again.
            return super::single_copy::accumulate(w, kind, &o, &t);
        }
        let Ok(code) = wire::op_code(op) else {
            return false;
        };
        let layout = wire::encode_one_piece(disp, dt.true_lb, n);
        // SAFETY: the caller's contract for `result`.
        let res = (result != 0)
            .then(|| unsafe { Buf::new(result, count, crate::request::DtRef::borrowed(dt)) });
        let fetches = res.is_some();
        let id = self.rma.expect_answer(w, r, res, None);
        let h = Header {
            kind: if fetches { wire::GET_ACC } else { wire::ACC },
            op: code,
            basic: dt.basic.map_or(0, wire::basic_code),
            arg: 0,
            win: w.id,
            op_id: id,
        }
        .encode();
        let sent = if no_op {
            self.rma_send(w, r, &[IoSlice::new(&h), IoSlice::new(&layout)])
        } else {
            // SAFETY: the caller's contract: `n` readable bytes at `data`.
            let operand = unsafe { crate::mem::slice(data.wrapping_add_signed(dt.true_lb), n) };
            self.rma_send(
                w,
                r,
                &[
                    IoSlice::new(&h),
                    IoSlice::new(&layout),
                    IoSlice::new(operand),
                ],
            )
        };
        if sent.is_err() {
            self.rma.forget(id);
            return false;
        }
        true
    }
}

/// The last put of a start epoch to a target reached by requests only
/// ([`unanswered_put`]), or its last small get ([`held_get`]: registered
/// for its answer, no data), held until the next operation to that target or
/// the epoch's `MPI_Win_complete`, which sends it with [`wire::THEN_COMPLETE`]
/// in its header's `arg`: the target applies the put and counts the
/// complete, one message where there were two (an epoch of one small put
/// over tcp was post, put, complete; now post and put-with-complete: one
/// round trip). The origin buffer is read when it is sent: MPI leaves it
/// unchanged until the synchronization that ends the epoch.
pub(crate) struct HeldPut {
    header: [u8; wire::HEADER],
    layout: [u8; wire::ONE_PIECE],
    /// The origin bytes' address and length.
    data: usize,
    len: usize,
}

impl Mpi {
    /// Sends the put held for window rank `r` ([`HeldPut`]), if any; with
    /// `complete`, as the epoch's complete too. Whether one was sent. A
    /// failed send is noted on the window (its next synchronization
    /// reports it) and returned.
    pub(crate) fn send_held_put(
        &self,
        w: &Win,
        r: u32,
        complete: bool,
    ) -> crate::error::Result<bool> {
        let ri = r as usize;
        if !w
            .put_held
            .get(ri)
            .is_some_and(|f| f.load(Ordering::Acquire))
        {
            return Ok(false);
        }
        let held = {
            let mut slot = w.held_put[ri].lock().unwrap_or_else(|e| e.into_inner());
            w.put_held[ri].store(false, Ordering::Release);
            slot.take()
        };
        let Some(mut p) = held else {
            return Ok(false);
        };
        if complete {
            p.header[3] = wire::THEN_COMPLETE;
        }
        let sent = if p.len == 0 {
            // A get: no data.
            self.rma_send(w, r, &[IoSlice::new(&p.header), IoSlice::new(&p.layout)])
        } else {
            // SAFETY: the put's origin buffer, `len` bytes, unchanged until
            // the synchronization that ends the epoch (MPI's contract),
            // which is this call or a later one.
            let data = unsafe { crate::mem::slice(p.data, p.len) };
            let parts = [
                IoSlice::new(&p.header),
                IoSlice::new(&p.layout),
                IoSlice::new(data),
            ];
            self.rma_send(w, r, &parts)
        };
        match sent {
            Ok(()) => Ok(true),
            Err(e) => {
                // A get waits for its answer: not any more.
                let id = u64::from_le_bytes(p.header[8..16].try_into().unwrap_or([0; 8]));
                if id != 0 {
                    self.rma.forget(id);
                }
                w.note_error(e.clone());
                Err(e)
            }
        }
    }
}

/// Puts below this many bytes may go without an answer
/// ([`unanswered_put`]): larger ones may be placed by the transport
/// (`super::placed`, answered when the placement ends) or lend their
/// buffer (settled by the answer).
const UNANSWERED_PUT_MAX: usize = 32 << 10;

/// Whether a put of `n` bytes to window rank `r`, checked by the caller,
/// may go without an answer (op id 0; the target answers only a refusal,
/// which the window notes for its next synchronization). Only in a start
/// epoch to `r` alone (no fence or lock epoch to it): that epoch ends with
/// `MPI_Win_complete`, whose COMPLETE goes right behind the put on the same
/// ordered route (`win_complete`), and the target's `MPI_Win_wait` returns
/// only once it handled the COMPLETE, so after the put is in its memory —
/// the put's answer told nobody anything. The origin's part is done when
/// the send returns (the runtime copied what it did not hand over), which
/// is all `MPI_Win_complete` must wait for. So each epoch over tcp sends
/// one message fewer, and the target no longer sends an answer before it
/// can post the next epoch. Not to a member reached by single copies or
/// loads and stores (a later copy could overtake the request, which an
/// unanswered count would have held back: `single_copy::prefers_request`),
/// nor on dynamic windows (only the target checks their range, and its
/// refusal must reach this epoch's `MPI_Win_complete`).
#[inline]
fn unanswered_put(w: &Win, r: u32, n: usize) -> bool {
    n < UNANSWERED_PUT_MAX
        && w.flavor != super::Flavor::Dynamic
        && w.access.start_only(r)
        && !super::single_copy::reached(w, r as usize)
}

/// Whether a get of `n` bytes to window rank `r` (registered for its
/// answer) is held to carry the epoch's complete ([`HeldPut`]): in a start
/// epoch to `r` alone, to a member reached by requests only, and below the
/// size whose gets are paced (`super::paced_gets`; `MPI_Win_complete`
/// waits for those answers before its complete, `answers_before_sync`).
/// The target answers it in its handler, reading the window there, before
/// it counts the complete (as it handled a COMPLETE behind it).
#[inline]
fn held_get(w: &Win, r: u32, n: usize) -> bool {
    n < super::paced_gets::PACE_MIN
        && w.access.start_only(r)
        && !super::single_copy::reached(w, r as usize)
}

/// Whether `n` bytes of `dt` at displacement `disp` lie inside rank `ri`'s
/// window (as `check_range`, for one contiguous piece); a dynamic window's
/// regions are checked at the target.
fn fits_target(w: &Win, ri: usize, disp: i64, dt: &Datatype, n: usize) -> bool {
    if w.flavor == super::Flavor::Dynamic {
        return true;
    }
    let Some(rem) = w.remote.get(ri) else {
        return false;
    };
    u64::try_from(disp)
        .ok()
        .and_then(|d| d.checked_mul(rem.disp_unit))
        .and_then(|s| s.checked_add(dt.true_lb as u64))
        .and_then(|s| s.checked_add(n as u64))
        .is_some_and(|end| end <= rem.size && dt.true_lb >= 0)
}

/// One more (`up`) or one fewer operation in a target's count, as
/// `rma_defer` counts (`batch.rs`): a load and a store, no locked
/// instruction; a count lost between threads only changes whether the
/// next operations are batched.
#[inline]
fn count_call(calls: &std::sync::atomic::AtomicU32, up: bool) {
    let n = calls.load(Ordering::Relaxed);
    calls.store(
        if up {
            n.saturating_add(1)
        } else {
            n.saturating_sub(1)
        },
        Ordering::Relaxed,
    );
}
