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
//!
//! Large puts, the other way: a put of one piece (every contiguous target
//! type) of at least `PLACE_MIN` bytes arriving on a stream method is read
//! by the transport straight into the target's window memory instead of
//! into the connection's buffer and copied from there by the handler
//! ([`Rma::place_put`]); it is answered when the placement ends. The
//! target judges the put from its headers exactly as
//! `Rma::apply_one_piece` does (window, membership, the piece inside the
//! window or an attached region, the data as long as the piece) before a
//! byte is placed; anything else is delivered whole and judged by the
//! handler as before. Sound for the same reason as the put itself: the
//! window's memory is written only through raw pointers, and MPI forbids
//! the program any conflicting access to those bytes until the origin's
//! synchronization, which waits for the answer sent at the end. An
//! abandoned placement (the connection closed mid-put) leaves some of the
//! put's bytes written and no answer: the put, sent again on another
//! link, writes the same bytes whole and is answered then.

use super::{wire, Pending, Rma, Win};
use gridwire_core::method::Destination;
use gridwire_core::{Context, Placer};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

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

/// A put being placed: its window, kept alive until it is answered.
struct PutGuard {
    _win: Arc<Win>,
}

impl Rma {
    /// Where the data of put `h` from `src` (world rank) goes, `rest` its
    /// layout and the start of its data, `len` the request's whole length
    /// (header included): the window's memory, when the layout is one
    /// piece inside it and the data exactly that long. None: delivered
    /// whole to the handler, which judges it.
    pub(super) fn place_put(
        &self,
        src: u32,
        h: &wire::Header,
        rest: &[u8],
        len: usize,
    ) -> Option<Destination> {
        // A put carrying its origin's complete is the handler's (which
        // counts the complete); an honest origin sends only small ones so.
        if h.arg != 0 {
            return None;
        }
        let (disp, off, piece, _) = wire::decode_one_piece(rest)?;
        let at = wire::HEADER + wire::ONE_PIECE;
        if piece == 0 || len.checked_sub(at)? != piece {
            return None;
        }
        let win = self.win(h.win).filter(|w| w.large_puts)?;
        win.comm.group.rank_of(src)?;
        // As `apply_one_piece` computes the piece's place.
        let start = if win.flavor == super::Flavor::Dynamic {
            Some(disp as i128)
        } else {
            (disp as i128).checked_mul(win.disp_unit as i128)
        };
        let dst = start.and_then(|s| win.local_range(s + off as i128, piece))?;
        Some(Destination {
            at,
            dst,
            len: piece,
            guard: Box::new(PutGuard { _win: win }),
        })
    }
}

impl Placer for AnswerPlacer {
    fn place(&self, src: u32, head: &[u8], len: usize) -> Option<Destination> {
        let rma = self.rma.upgrade()?;
        let (h, rest) = wire::Header::decode(head)?;
        if h.kind == wire::PUT {
            return rma.place_put(src, &h, rest, len);
        }
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

    fn placed(&self, ctx: &Context, src: u32, head: &[u8], dest: Destination) {
        if dest.guard.is::<PutGuard>() {
            // A put's data is in the window: answer it (on the window's
            // route, as the handler does).
            let (Some(rma), Some((h, _))) = (self.rma.upgrade(), wire::Header::decode(head)) else {
                return;
            };
            rma.placed_puts.fetch_add(1, Ordering::Relaxed);
            return rma.answer(ctx, src, &h, 0, &[]);
        }
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
