//! Large get answers lent to the runtime instead of copied.
//!
//! To a peer on another host every message is kept until the peer
//! acknowledges it, so that a replacement link can send it again
//! (failover): for a get's answer that was a copy of every byte on the
//! target's core, beside the copy out of the window and the kernel's. The
//! answer's data is already a buffer of ours (gathered from the window,
//! which may change once the answer is sent), so an answer of at least
//! [`LEND_MIN`] bytes lends it (`Context::rsr_v_lent`): the runtime keeps
//! its address, and the buffer is kept here until the runtime let go of it
//! (the peer acknowledged it, [`LentAnswers::reap`]) or copied what it
//! still holds (`Context::settle_lent`: when more than [`LENT_MAX`] bytes
//! are lent, when the last window is freed, at `MPI_Finalize`).
//!
//! Soundness: a lent buffer is never written after it was sent (it is
//! moved in here, which does not move its heap memory) and is freed only
//! after `lent_released` or `settle_lent` said the runtime no longer reads it.

use super::{wire, H_RMA};
use gridwire_core::{Context, LentTicket};
use std::collections::VecDeque;
use std::io::IoSlice;

/// Answers at least this large are lent (smaller ones are copied: the copy
/// is cheap beside the bookkeeping).
pub(super) const LEND_MIN: usize = 64 << 10;

/// Most bytes lent at once; beyond, the oldest are settled.
const LENT_MAX: usize = 64 << 20;

/// Buffers of answers the runtime let go of, kept for the next answers:
/// at most this many …
const SPARE_KEEP: usize = 4;
/// … of at most this many bytes each.
const SPARE_MAX: usize = 4 << 20;

/// The answers lent and not yet let go of by the runtime: the ticket,
/// the buffer (empty when the answer was lent from the window itself, see
/// [`super::Rma::answer_from_window`]) and the answer's length.
#[derive(Default)]
pub(super) struct LentAnswers {
    lent: VecDeque<(LentTicket, Vec<u8>, usize)>,
    bytes: usize,
    /// Buffers of released answers, reused by [`super::Rma::answer_from`].
    spare: Vec<Vec<u8>>,
    /// The context they were lent to (for settling them when dropped).
    ctx: Option<Context>,
}

impl LentAnswers {
    /// Frees the buffers the runtime let go of, and settles the oldest
    /// while more than [`LENT_MAX`] bytes are lent.
    pub(super) fn reap(&mut self, ctx: &Context) {
        if self.lent.is_empty() {
            return;
        }
        let mut freed = 0;
        let spare = &mut self.spare;
        self.lent.retain_mut(|(t, data, len)| {
            let keep = !ctx.lent_released(t);
            if !keep {
                freed += *len;
                if spare.len() < SPARE_KEEP && (1..=SPARE_MAX).contains(&data.capacity()) {
                    spare.push(std::mem::take(data));
                }
            }
            keep
        });
        self.bytes -= freed;
        while self.bytes > LENT_MAX {
            // (`data` is bound: the buffer must outlive the settling copy.)
            let Some((t, data, len)) = self.lent.pop_front() else {
                break;
            };
            ctx.settle_lent(&t);
            drop(data);
            self.bytes -= len;
        }
    }

    /// Settles every lent answer: the runtime holds none of our buffers
    /// when this returns.
    pub(super) fn settle_all(&mut self) {
        let Some(ctx) = self.ctx.clone() else {
            return;
        };
        for (t, _data, _) in self.lent.drain(..) {
            ctx.settle_lent(&t);
        }
        self.bytes = 0;
    }
}

impl Drop for LentAnswers {
    fn drop(&mut self) {
        self.settle_all();
    }
}

impl super::Rma {
    /// Answers operation `h` of `to` (successfully) with `data`, which
    /// this process owns: lent to the runtime when large (see the module
    /// doc), else sent as any answer.
    pub(super) fn answer_owned(
        &self,
        ctx: &Context,
        to: u32,
        h: &wire::Header,
        data: Vec<u8>,
        key: u32,
    ) {
        if data.len() < LEND_MIN {
            return self.answer_keyed(ctx, to, h, 0, &data, key);
        }
        let hdr = h.answer(0).encode();
        let Ok(sp) = ctx.startpoint(to) else {
            return;
        };
        self.lent_answers().reap(ctx);
        // The lock is not held while sending: the send may drive progress.
        // SAFETY: `data` is moved into `lent_answers` below unless nothing
        // was kept by address; its heap memory does not move and is
        // neither written nor freed until the runtime released the ticket
        // or settled it (`reap`, `settle_all`, and the error case here).
        let sent = unsafe {
            ctx.rsr_v_lent(
                &sp,
                H_RMA,
                &[IoSlice::new(&hdr), IoSlice::new(&data)],
                key,
                false,
            )
        };
        match sent {
            Ok(Some(t)) => self.keep_lent(ctx, t, data),
            // Nothing kept by address (another link): free now.
            Ok(None) => {}
            // A failed send may have kept it: the runtime copies it now.
            Err(_) => ctx.settle_lent(&LentTicket::all(to)),
        }
    }

    /// Keeps lent answer `t` (its buffer `data`, or `len` bytes of the
    /// window when `data` is empty) until the runtime lets go of it.
    fn keep_lent(&self, ctx: &Context, t: LentTicket, data: Vec<u8>) {
        self.keep_lent_len(ctx, t, data.len(), data);
    }

    fn keep_lent_len(&self, ctx: &Context, t: LentTicket, len: usize, data: Vec<u8>) {
        let mut l = self.lent_answers();
        l.bytes += len;
        l.lent.push_back((t, data, len));
        if l.ctx.is_none() {
            l.ctx = Some(ctx.clone());
        }
    }

    /// Answers get `h` of `to` (successfully) with the `len` (at least
    /// [`LEND_MIN`]) bytes of this process's window memory at `at`, lent to
    /// the runtime from the window itself: no copy on the target's core
    /// besides the kernel's. Returns false (nothing sent) when it cannot.
    ///
    /// Sound because the lent bytes stay mapped and MPI keeps them
    /// unchanged while they are read: the runtime reads them while it
    /// sends the answer (the origin's synchronization waits for all of it,
    /// and until then the program may not change them: a conflicting
    /// access) and, kept for failover, only to send them again to an origin
    /// that did not get them whole (and so has not synchronized either);
    /// anything still lent is settled (copied) before a window is freed or
    /// a region detached (`Mpi::win_free`, `Mpi::win_detach`), more than
    /// [`LENT_MAX`] bytes are lent, or the process finalizes. The view of
    /// the window as a slice only reaches the kernel and `memcpy`.
    ///
    /// # Safety
    /// `at .. at + len` lies in a window's memory (checked by the caller).
    pub(super) unsafe fn answer_from_window(
        &self,
        ctx: &Context,
        to: u32,
        h: &wire::Header,
        at: usize,
        len: usize,
        key: u32,
    ) -> bool {
        let hdr = h.answer(0).encode();
        let Ok(sp) = ctx.startpoint(to) else {
            return false;
        };
        self.lent_answers().reap(ctx);
        // SAFETY: the caller's contract; see the doc above for how long.
        let data = unsafe { crate::mem::slice(at, len) };
        // SAFETY: as above: the bytes stay mapped and unchanged until the
        // ticket is released or settled.
        let sent = unsafe {
            ctx.rsr_v_lent(
                &sp,
                H_RMA,
                &[IoSlice::new(&hdr), IoSlice::new(data)],
                key,
                false,
            )
        };
        match sent {
            Ok(Some(t)) => self.keep_lent_len(ctx, t, len, Vec::new()),
            Ok(None) => {}
            Err(_) => ctx.settle_lent(&LentTicket::all(to)),
        }
        true
    }

    /// A buffer holding a copy of the `len` bytes at `at`: one of the
    /// released answers' buffers when one is large enough, else a new one;
    /// never zeroed first (the copy writes every byte).
    ///
    /// # Safety
    /// `at .. at + len` is readable memory (the window's).
    pub(super) unsafe fn answer_from(&self, at: usize, len: usize) -> Vec<u8> {
        // (Smaller answers are not lent, so their buffers never come back.)
        let reused = (len >= LEND_MIN).then(|| {
            let mut l = self.lent_answers();
            let i = l.spare.iter().position(|b| b.capacity() >= len);
            i.map(|i| l.spare.swap_remove(i))
        });
        let mut buf = reused.flatten().unwrap_or_default();
        buf.clear();
        buf.reserve_exact(len);
        // SAFETY: `buf` has room for `len` bytes, which the copy writes
        // (the caller's contract for the source; a distinct buffer, so no
        // overlap) before `set_len` makes them its contents.
        unsafe {
            std::ptr::copy_nonoverlapping(at as *const u8, buf.as_mut_ptr(), len);
            buf.set_len(len);
        }
        buf
    }

    fn lent_answers(&self) -> std::sync::MutexGuard<'_, LentAnswers> {
        self.lent_answers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Settles every lent answer (the last window was freed, or finalize).
    pub(crate) fn settle_lent_answers(&self) {
        self.lent_answers().settle_all();
    }
}
