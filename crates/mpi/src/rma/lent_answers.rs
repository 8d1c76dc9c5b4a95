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

/// The answers lent and not yet let go of by the runtime.
#[derive(Default)]
pub(super) struct LentAnswers {
    lent: VecDeque<(LentTicket, Vec<u8>)>,
    bytes: usize,
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
        self.lent.retain(|(t, data)| {
            let keep = !ctx.lent_released(t);
            if !keep {
                freed += data.len();
            }
            keep
        });
        self.bytes -= freed;
        while self.bytes > LENT_MAX {
            let Some((t, data)) = self.lent.pop_front() else {
                break;
            };
            ctx.settle_lent(&t);
            self.bytes -= data.len();
        }
    }

    /// Settles every lent answer: the runtime holds none of our buffers
    /// when this returns.
    pub(super) fn settle_all(&mut self) {
        let Some(ctx) = self.ctx.clone() else {
            return;
        };
        for (t, _data) in self.lent.drain(..) {
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
        let hdr = wire::Header {
            kind: wire::ANSWER,
            op: 0,
            basic: 0,
            arg: 0,
            win: h.win,
            op_id: h.op_id,
        }
        .encode();
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
            Ok(Some(t)) => {
                let mut l = self.lent_answers();
                l.bytes += data.len();
                l.lent.push_back((t, data));
                if l.ctx.is_none() {
                    l.ctx = Some(ctx.clone());
                }
            }
            // Nothing kept by address (another link): free now.
            Ok(None) => {}
            // A failed send may have kept it: the runtime copies it now.
            Err(_) => ctx.settle_lent(&LentTicket::all(to)),
        }
    }

    fn lent_answers(&self) -> std::sync::MutexGuard<'_, LentAnswers> {
        self.lent_answers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Settles every lent answer (the last window was freed, or finalize).
    pub(crate) fn settle_lent_answers(&self) {
        self.lent_answers().settle_all();
    }
}
