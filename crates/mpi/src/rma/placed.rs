//! Get answers read by the transport straight into the result buffer.
//!
//! Over tcp the data of a get's answer used to be read into the
//! connection's buffer and copied from there into the origin's result
//! buffer by [`Rma::on_answer`]: two copies of every byte on the origin's
//! core. For an answer large enough that the transport offers it
//! (`gridwire_core::method::PLACE_MIN`), the [`AnswerPlacer`] names the
//! result buffer from the answer's 16-byte header (`gridwire_core::Placer`,
//! as `H_DATA` pieces of rendezvous messages are placed), and the transport
//! reads the rest of the frame there: one copy.
//!
//! Soundness: the result buffer is the program's, which it may not touch
//! before the synchronization that completes the get (MPI); that
//! synchronization waits for the operation to be answered, and while the
//! transport writes the buffer the operation stays pending (`placing`): it
//! completes when the placement is handed back ([`AnswerPlacer::placed`])
//! or, if the same answer came whole on another link first, when the
//! placement ends or is abandoned ([`AnswerGuard`]'s `Drop`). An abandoned
//! placement (its connection closed mid-answer) leaves the operation
//! pending, and the answer, sent again on another link, completes it.

use super::{wire, Pending, Rma};
use gridwire_core::method::Destination;
use gridwire_core::{Context, Placer};
use std::sync::atomic::Ordering;
use std::sync::Weak;

/// The `H_RMA` placer of a process's one-sided state.
pub(super) struct AnswerPlacer {
    pub(super) rma: Weak<Rma>,
}

/// Keeps an operation pending while its answer is placed; let go of when
/// the placement is abandoned.
struct AnswerGuard {
    rma: Weak<Rma>,
    op_id: u64,
    /// False once [`AnswerPlacer::placed`] took over.
    armed: bool,
}

impl Drop for AnswerGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let Some(rma) = self.rma.upgrade() else {
            return;
        };
        let done = {
            let mut pend = rma.pending.lock().unwrap_or_else(|e| e.into_inner());
            match pend.get_mut(&self.op_id) {
                Some(p) if p.answered_while_placing => pend.remove(&self.op_id),
                Some(p) => {
                    p.placing = false;
                    None
                }
                None => None,
            }
        };
        if let Some(p) = done {
            rma.finish(p, 0);
        }
    }
}

impl Placer for AnswerPlacer {
    fn place(&self, src: u32, head: &[u8], len: usize) -> Option<Destination> {
        let rma = self.rma.upgrade()?;
        let (h, _) = wire::Header::decode(head)?;
        // Only a successful answer carries data to place.
        if h.kind != wire::ANSWER || h.arg != 0 {
            return None;
        }
        let data_len = len.checked_sub(wire::HEADER)?;
        let mut pend = rma.pending.lock().unwrap_or_else(|e| e.into_inner());
        let p: &mut Pending = pend.get_mut(&h.op_id)?;
        if p.target != src || p.win.id != h.win || p.placing {
            return None;
        }
        // A contiguous result buffer that holds the whole answer; anything
        // else is delivered whole and judged by `on_answer` as before.
        let buf = p.result.as_ref()?;
        if !buf.writable() || data_len > buf.bytes() {
            return None;
        }
        let dst = buf.contig_addr()?;
        p.placing = true;
        Some(Destination {
            at: wire::HEADER,
            dst,
            len: data_len,
            guard: Box::new(AnswerGuard {
                rma: self.rma.clone(),
                op_id: h.op_id,
                armed: true,
            }),
        })
    }

    fn placed(&self, _ctx: &Context, _src: u32, _head: &[u8], dest: Destination) {
        let Ok(mut guard) = dest.guard.downcast::<AnswerGuard>() else {
            return;
        };
        guard.armed = false;
        let Some(rma) = self.rma.upgrade() else {
            return;
        };
        let p = {
            let mut pend = rma.pending.lock().unwrap_or_else(|e| e.into_inner());
            match pend.get(&guard.op_id) {
                Some(p) if p.placing => pend.remove(&guard.op_id),
                _ => None,
            }
        };
        if let Some(p) = p {
            rma.placed_answers.fetch_add(1, Ordering::Relaxed);
            rma.finish(p, 0);
        }
    }
}
