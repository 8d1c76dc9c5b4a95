//! The target's side: applying a peer's operation to this process's window
//! memory, the window lock, and the exposure epoch's messages.
//!
//! Every address is computed here, from this process's base, displacement
//! unit (or attached regions) and the peer's layout; every piece is checked
//! to lie inside before any byte moves, so a refused operation changes nothing.

use super::window::Win;
use super::wire::{self, Header, Layout};
use super::{Rma, H_RMA};
use crate::error::class;
use crate::mem;
use gridwire_core::Context;
use std::io::IoSlice;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Why a target refuses an operation: the class it answers, and the text it logs.
type Refusal = (i32, String);

/// Gets (and fetching accumulates) up to this many bytes are answered
/// from the stack ([`Rma::apply_one_piece`]).
const STACK_ANSWER: usize = 256;

impl Rma {
    pub(super) fn on_target(&self, ctx: &Context, from: u32, h: &Header, rest: &[u8]) {
        let Some(win) = self.win(h.win) else {
            // A window this process does not have (freed, or never made):
            // answer so an honest origin does not wait forever.
            self.reject(
                ctx,
                from,
                format_args!("it names window {} this process does not have", h.win),
            );
            return self.answer(ctx, from, h, class::WIN, &[]);
        };
        let Some(from_rank) = win.comm.group.rank_of(from) else {
            return self.reject(
                ctx,
                from,
                format_args!("the sender is not a member of window {}", h.win),
            );
        };
        match h.kind {
            wire::PUT | wire::GET | wire::ACC | wire::GET_ACC | wire::CAS => {
                let key = crate::comm_links::traffic_key(win.comm.ctx as u64);
                if !self.apply_one_piece(ctx, &win, from, h, rest, key) {
                    match self.apply(&win, h, rest) {
                        Ok(old) => self.answer_owned(ctx, from, h, old, key),
                        Err((c, why)) => {
                            self.reject(ctx, from, format_args!("{why}"));
                            self.answer_keyed(ctx, from, h, c, &[], key);
                        }
                    }
                }
                if matches!(h.kind, wire::PUT | wire::GET) && h.arg == wire::THEN_COMPLETE {
                    // The origin's `MPI_Win_complete` rode on its last put
                    // or get (`fast_request::HeldPut`): counted after it was
                    // applied and answered, as a COMPLETE behind it would be.
                    let _ = win.completes[from_rank as usize].fetch_update(
                        Ordering::AcqRel,
                        Ordering::Acquire,
                        |v| v.checked_add(1),
                    );
                }
            }
            wire::LOCK => self.on_lock(ctx, &win, from, h),
            wire::UNLOCK => self.on_unlock(ctx, &win, from, h),
            wire::POST => {
                // Saturating: a peer that posts without end gains nothing.
                let _ = win.posts[from_rank as usize].fetch_update(
                    Ordering::AcqRel,
                    Ordering::Acquire,
                    |v| v.checked_add(1),
                );
            }
            wire::COMPLETE => {
                let _ = win.completes[from_rank as usize].fetch_update(
                    Ordering::AcqRel,
                    Ordering::Acquire,
                    |v| v.checked_add(1),
                );
            }
            k => self.reject(ctx, from, format_args!("unknown kind {k}")),
        }
    }

    /// Sends the answer to operation `h` of `to`. A failed send means the
    /// origin is gone: nothing more to do here.
    pub(super) fn answer(&self, ctx: &Context, to: u32, h: &Header, status: i32, data: &[u8]) {
        // On the window's communicator's route, as the request came.
        let key = self.win(h.win).map_or(gridwire_core::NO_TRAFFIC_KEY, |w| {
            crate::comm_links::traffic_key(w.comm.ctx as u64)
        });
        self.answer_keyed(ctx, to, h, status, data, key);
    }

    /// [`Rma::answer`] on traffic key `key` (the window's, which the
    /// caller has at hand: no second look-up of the window).
    pub(super) fn answer_keyed(
        &self,
        ctx: &Context,
        to: u32,
        h: &Header,
        status: i32,
        data: &[u8],
        key: u32,
    ) {
        if h.op_id == 0 && status == 0 {
            // An operation sent without an answer (a small put in a start
            // epoch, `Mpi::fast_request_put_get`): only a refusal is told.
            return;
        }
        let hdr = h.answer(status.clamp(0, 255) as u8).encode();
        if let Ok(sp) = ctx.startpoint(to) {
            // No empty part: one part when there is no data.
            let _ = if data.is_empty() {
                ctx.rsr_keyed(&sp, H_RMA, &hdr, key)
            } else {
                ctx.rsr_v_keyed(&sp, H_RMA, &[IoSlice::new(&hdr), IoSlice::new(data)], key)
            };
        }
    }

    /// The common request, applied and answered without allocating (a
    /// small one) and without building a [`Layout`]: a put, get,
    /// accumulate or get-accumulate whose layout is one piece (every
    /// contiguous target datatype) lying inside the window, accumulates
    /// only with an operation and type [`super::acc_kernels`] applies in
    /// place. False: nothing was done or answered, [`Rma::apply`] judges
    /// the request (and refuses it, if it must, with the class it gives).
    fn apply_one_piece(
        &self,
        ctx: &Context,
        win: &Win,
        from: u32,
        h: &Header,
        rest: &[u8],
        key: u32,
    ) -> bool {
        let Some((disp, off, len, data)) = wire::decode_one_piece(rest) else {
            return false;
        };
        if len == 0 {
            return false;
        }
        // As `walk` computes the piece's place (one element, one block).
        let start = if win.flavor == super::Flavor::Dynamic {
            Some(disp as i128)
        } else {
            (disp as i128).checked_mul(win.disp_unit as i128)
        };
        let Some(at) = start.and_then(|s| win.local_range(s + off as i128, len)) else {
            return false;
        };
        let fetches = matches!(h.kind, wire::GET | wire::GET_ACC);
        if fetches && len as u64 > wire::MAX_GET_BYTES {
            return false;
        }
        if fetches
            && h.kind == wire::GET
            && data.is_empty()
            && len >= super::lent_answers::LEND_MIN
            && win.lend_window
        {
            // SAFETY: `local_range` checked `at .. at + len` to lie in the
            // window's memory.
            return unsafe { self.answer_from_window(ctx, from, h, at, len, key) };
        }
        if fetches
            && h.kind == wire::GET
            && data.is_empty()
            && len > STACK_ANSWER
            && len < super::lent_answers::LEND_MIN
        {
            // A get below the size that is lent: answered straight from the
            // window, without copying it into a buffer first (and without
            // allocating one). The send returns only once the runtime may
            // let go of the bytes (`Link::send`: what the kernel or ring
            // does not take within the call is copied and queued), so they
            // are read here, inside this handler, as the copy was: nothing
            // is lent, and the target's epoch cannot end before (its end is
            // a message behind this one on the same link, `answers_before_sync`).
            // SAFETY: `local_range` checked `at .. at + len` to lie in the
            // window's memory, mapped while the window is in the table; the
            // view reaches only the send's copy and the kernel (as in
            // `answer_from_window`).
            let window = unsafe { mem::slice(at, len) };
            self.answer_keyed(ctx, from, h, 0, window, key);
            return true;
        }
        let (mut stack, mut heap) = ([0u8; STACK_ANSWER], Vec::new());
        // A large get's answer is copied out of the window into a buffer
        // of earlier answers (`lent_answers`), not zeroed first: a fresh
        // buffer of MiBs faults in every page, and zeroing it is a
        // second pass over it.
        let read_whole = fetches && len > STACK_ANSWER && h.kind == wire::GET && data.is_empty();
        let old: &mut [u8] = if !fetches {
            &mut []
        } else if len <= STACK_ANSWER {
            &mut stack[..len]
        } else if read_whole {
            // SAFETY: as for the put below: `at .. at + len` lies in the
            // window's memory.
            heap = unsafe { self.answer_from(at, len) };
            heap.as_mut_slice()
        } else {
            heap.resize(len, 0);
            heap.as_mut_slice()
        };
        match h.kind {
            wire::PUT if data.len() == len => {
                // SAFETY: `local_range` checked `at .. at + len` to lie in
                // the window's memory, mapped while it is in the table.
                unsafe { mem::write(at, data) };
            }
            wire::GET if read_whole => {}
            // SAFETY: as for the put.
            wire::GET if data.is_empty() => unsafe { mem::read(at, old) },
            wire::ACC | wire::GET_ACC => {
                let (Some(op), Some(basic)) = (wire::op_of(h.op), wire::basic_of(h.basic)) else {
                    return false;
                };
                let no_op = matches!(op, crate::op::Op::NoOp);
                // Get-accumulate of MPI_NO_OP carries no operand; a plain
                // accumulate of it (which changes nothing) is the general path's.
                let operand_ok = if no_op {
                    h.kind == wire::GET_ACC && data.is_empty()
                } else {
                    data.len() == len
                };
                if !operand_ok {
                    return false;
                }
                // The same lock word as `apply` and the origins of this host.
                let _held = (win.own_acc_lock != 0)
                    // SAFETY: the lock word of this window's segment, mapped
                    // while the window is in the table.
                    .then(|| unsafe { super::direct::AccLock::take(win.own_acc_lock) });
                if no_op {
                    // SAFETY: as for the get.
                    unsafe { mem::read(at, old) };
                } else {
                    let result = if fetches {
                        old.as_mut_ptr()
                    } else {
                        std::ptr::null_mut()
                    };
                    // SAFETY: `at` as for the put, readable and writable for
                    // `len` bytes; `data` and `old` hold `len` bytes; the
                    // lock is held. False changes nothing.
                    if !unsafe {
                        super::acc_kernels::apply(
                            &op,
                            basic,
                            len,
                            data.as_ptr(),
                            at as *mut u8,
                            result,
                        )
                    } {
                        return false;
                    }
                }
            }
            _ => return false,
        }
        if fetches && len > STACK_ANSWER {
            // Ours: lent to the runtime when large (`lent_answers`).
            self.answer_owned(ctx, from, h, heap, key);
        } else {
            self.answer_keyed(ctx, from, h, 0, old, key);
        }
        true
    }

    /// Applies a data operation; returns the data to answer with (the old
    /// target contents for gets and fetching operations). A first walk over
    /// the layout checks every piece and the data's length; only then does
    /// a byte move (the pieces are walked again, never stored: a peer's
    /// layout must not make us allocate per piece).
    fn apply(&self, win: &Win, h: &Header, rest: &[u8]) -> Result<Vec<u8>, Refusal> {
        let (layout, data) = Layout::decode(rest).map_err(|e| (class::ARG, e))?;
        let mut total = 0usize;
        walk(win, &layout, |_, n| total = total.saturating_add(n))?;
        let gets = matches!(h.kind, wire::GET | wire::GET_ACC | wire::CAS);
        if gets && total as u64 > wire::MAX_GET_BYTES {
            return Err((
                class::SIZE,
                format!("a get of {total} bytes (at most {})", wire::MAX_GET_BYTES),
            ));
        }
        let expected = match h.kind {
            wire::GET => 0,
            wire::CAS => total.saturating_mul(2),
            wire::GET_ACC if h.op == op_code_noop() => 0,
            _ => total,
        };
        if data.len() != expected {
            return Err((
                class::ARG,
                format!("{} bytes of data for an access of {total}", data.len()),
            ));
        }
        // Accumulates to memory in a host segment: origins of the host apply
        // theirs under this lock too (see `direct`).
        let _held = (matches!(h.kind, wire::ACC | wire::GET_ACC | wire::CAS)
            && win.own_acc_lock != 0)
            // SAFETY: the lock word of this window's segment, mapped while
            // the window is in the table.
            .then(|| unsafe { super::direct::AccLock::take(win.own_acc_lock) });
        let mut old = Vec::new();
        if gets {
            old = vec![0u8; total];
            gather(win, &layout, &mut old)?;
        }
        match h.kind {
            wire::PUT => scatter(win, &layout, data)?,
            wire::GET => {}
            wire::ACC | wire::GET_ACC => {
                let op =
                    wire::op_of(h.op).ok_or((class::OP, format!("unknown operation {}", h.op)))?;
                let basic = wire::basic_of(h.basic)
                    .ok_or((class::TYPE, format!("unknown type {}", h.basic)))?;
                let dt = self.basic_type(basic);
                op.check(&dt).map_err(|e| (e.class, e.msg))?;
                if !total.is_multiple_of(dt.size.max(1)) {
                    return Err((
                        class::TYPE,
                        format!("{total} bytes are not whole elements of {basic:?}"),
                    ));
                }
                if !matches!(op, crate::op::Op::NoOp) {
                    let mut cur = if gets {
                        old.clone()
                    } else {
                        let mut c = vec![0u8; total];
                        gather(win, &layout, &mut c)?;
                        c
                    };
                    op.apply(&dt, total / dt.size.max(1), data, &mut cur);
                    scatter(win, &layout, &cur)?;
                }
            }
            wire::CAS => {
                let (new, compare) = data.split_at(total);
                if old == compare {
                    scatter(win, &layout, new)?;
                }
            }
            _ => unreachable!("kind checked by the caller"),
        }
        Ok(old)
    }

    fn on_lock(&self, ctx: &Context, win: &Arc<Win>, from: u32, h: &Header) {
        let exclusive = h.arg == 1;
        let granted = {
            let mut l = win.locks.lock().unwrap_or_else(|e| e.into_inner());
            if l.exclusive == Some(from)
                || l.shared.contains(&from)
                || l.queue.iter().any(|q| q.0 == from)
            {
                drop(l);
                self.reject(
                    ctx,
                    from,
                    format_args!("it asks a lock of window {} it holds or waits for", h.win),
                );
                return self.answer(ctx, from, h, class::RMA_SYNC, &[]);
            }
            let free =
                l.queue.is_empty() && l.exclusive.is_none() && (!exclusive || l.shared.is_empty());
            if free {
                if exclusive {
                    l.exclusive = Some(from);
                } else {
                    l.shared.push(from);
                }
            } else {
                l.queue.push_back((from, exclusive, h.op_id));
            }
            free
        };
        if granted {
            self.answer(ctx, from, h, 0, &[]);
        }
    }

    fn on_unlock(&self, ctx: &Context, win: &Arc<Win>, from: u32, h: &Header) {
        let mut grant = Vec::new();
        {
            let mut l = win.locks.lock().unwrap_or_else(|e| e.into_inner());
            if l.exclusive == Some(from) {
                l.exclusive = None;
            } else if let Some(i) = l.shared.iter().position(|&r| r == from) {
                l.shared.swap_remove(i);
            } else {
                drop(l);
                self.reject(
                    ctx,
                    from,
                    format_args!("it unlocks window {} it does not hold", h.win),
                );
                return self.answer(ctx, from, h, class::RMA_SYNC, &[]);
            }
            // Grant waiting requests in order while they are compatible.
            while let Some(&(r, excl, id)) = l.queue.front() {
                let ok = l.exclusive.is_none() && (!excl || l.shared.is_empty());
                if !ok {
                    break;
                }
                l.queue.pop_front();
                if excl {
                    l.exclusive = Some(r);
                } else {
                    l.shared.push(r);
                }
                grant.push((r, id));
            }
        }
        self.answer(ctx, from, h, 0, &[]);
        for (r, id) in grant {
            self.answer(ctx, r, &Header { op_id: id, ..*h }, 0, &[]);
        }
    }
}

fn op_code_noop() -> u8 {
    wire::op_code(&crate::op::Op::NoOp).unwrap_or(0)
}

/// Calls `f(address, length)` for each piece of this process's window
/// memory that `l` names, in packed order; fails at the first piece that
/// does not lie inside the window (earlier pieces were already visited:
/// callers walk once with a no-op to check before they move data).
pub(crate) fn walk(win: &Win, l: &Layout, mut f: impl FnMut(usize, usize)) -> Result<(), Refusal> {
    let out_of_range = || {
        (
            class::RMA_RANGE,
            format!(
                "the access at displacement {} lies outside the window",
                l.disp
            ),
        )
    };
    // Dynamic windows: the displacement is an address. Others: units of this process.
    let start = if win.flavor == super::Flavor::Dynamic {
        l.disp as i128
    } else {
        (l.disp as i128)
            .checked_mul(win.disp_unit as i128)
            .ok_or_else(out_of_range)?
    };
    for i in 0..l.count as i128 {
        let el = start + i * l.extent as i128;
        for b in &l.blocks {
            if b.len == 0 {
                continue;
            }
            let addr = win
                .local_range(el + b.off as i128, b.len)
                .ok_or_else(out_of_range)?;
            f(addr, b.len);
        }
    }
    Ok(())
}

/// Copies the pieces' bytes into `out` (packed order).
fn gather(win: &Win, l: &Layout, out: &mut [u8]) -> Result<(), Refusal> {
    let mut o = 0;
    walk(win, l, |a, n| {
        // SAFETY: `walk` checked the range to lie in the window's memory,
        // which stays mapped while the window is in the table; `out` holds
        // the total the checking walk counted.
        unsafe { mem::read(a, &mut out[o..o + n]) };
        o += n;
    })
}

/// Copies packed `data` into the pieces.
fn scatter(win: &Win, l: &Layout, data: &[u8]) -> Result<(), Refusal> {
    let mut o = 0;
    walk(win, l, |a, n| {
        // SAFETY: as in `gather`: a range inside the window's memory.
        unsafe { mem::write(a, &data[o..o + n]) };
        o += n;
    })
}
