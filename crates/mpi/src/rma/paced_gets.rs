//! Large gets paced by their origin: at most `GW_MPI_RMA_GETS_IN_FLIGHT`
//! bytes of answers asked of one target at a time.
//!
//! A target answers every get it receives at once, inside its handler,
//! which may not wait for the transport. 64 gets of 4 MiB then put 256 MiB
//! of answers on its side of the connection in one progress round: what
//! the kernel did not take was copied into the connection's queue (grown
//! by reallocation, page by page), and beyond 64 MiB the lent answers were
//! copied again to free them (`lent_answers`); the bandwidth was a fifth
//! of Open MPI's, whose target sends each answer as the socket drains. So
//! the origin asks for no more than a bound of answer bytes at a time per
//! target, and asks the next one when an answer completes: the target's
//! queue holds at most that bound, and the connection stays busy (the
//! bound is two answers of the largest size the benchmarks use).
//!
//! Correctness: a held get is registered (counted unanswered, its result
//! buffer noted) when the call is made, so every synchronization waits for
//! it as for any other; it is sent when an earlier paced get to the same
//! target completes, and there is always one in flight while any is held
//! (the first is never held). MPI orders no get with respect to other
//! operations of the epoch, so later puts and accumulates may pass a held
//! get; gets keep their order among themselves.

use super::{Rma, Win, H_RMA};
use gridwire_core::Context;
use std::collections::VecDeque;
use std::io::IoSlice;
use std::sync::Arc;

/// Gets of at least this many bytes are paced (smaller ones cannot fill a
/// target's queue).
pub(super) const PACE_MIN: usize = 64 << 10;

/// A get not sent yet: its window, target and the request's bytes.
pub(super) struct HeldGet {
    pub(super) win: Arc<Win>,
    /// World rank of the target.
    pub(super) world: u32,
    pub(super) id: u64,
    pub(super) bytes: usize,
    pub(super) header: [u8; super::wire::HEADER],
    pub(super) layout: [u8; super::wire::ONE_PIECE],
}

/// The paced gets of one target.
#[derive(Default)]
pub(super) struct TargetPace {
    /// Answer bytes asked and not answered yet.
    in_flight: usize,
    held: VecDeque<HeldGet>,
}

/// The paced gets of this process, by target world rank.
#[derive(Default)]
pub(super) struct PacedGets {
    targets: super::IdMap<u32, TargetPace>,
    /// The context held gets are sent with (kept while any is held).
    ctx: Option<Context>,
}

impl Rma {
    /// A paced get of `g.bytes` bytes to `g.world` is about to go: `Some`
    /// (it is counted in flight: send it now), or `None` (held: sent when
    /// an earlier one completes). `limit` 0: no bound.
    pub(super) fn pace_get(&self, ctx: &Context, g: HeldGet, limit: usize) -> Option<HeldGet> {
        let mut p = self.paced.lock().unwrap_or_else(|e| e.into_inner());
        let t = p.targets.entry(g.world).or_default();
        if limit == 0 || t.in_flight == 0 || t.in_flight.saturating_add(g.bytes) <= limit {
            t.in_flight = t.in_flight.saturating_add(g.bytes);
            return Some(g);
        }
        t.held.push_back(g);
        if p.ctx.is_none() {
            p.ctx = Some(ctx.clone());
        }
        None
    }

    /// Whether paced gets to `world` are unanswered: held (not sent yet),
    /// or in flight. In flight counts too: a thread that completes one
    /// takes the next held get out of the queue and sends it after
    /// releasing the lock, and such a get is in flight (counted) but no
    /// longer held while it is being sent.
    pub(super) fn paced_gets_pending(&self, world: u32) -> bool {
        let p = self.paced.lock().unwrap_or_else(|e| e.into_inner());
        p.targets
            .get(&world)
            .is_some_and(|t| t.in_flight > 0 || !t.held.is_empty())
    }

    /// A paced get of `bytes` to `world` was not sent after all (its send
    /// failed), or completed: no longer in flight; sends the held gets to
    /// that target that now fit.
    pub(super) fn paced_get_done(&self, world: u32, bytes: usize, limit: usize) {
        let (go, ctx) = {
            let mut p = self.paced.lock().unwrap_or_else(|e| e.into_inner());
            let Some(t) = p.targets.get_mut(&world) else {
                return;
            };
            t.in_flight = t.in_flight.saturating_sub(bytes);
            let mut go = Vec::new();
            while let Some(g) = t.held.front() {
                if limit != 0 && t.in_flight != 0 && t.in_flight.saturating_add(g.bytes) > limit {
                    break;
                }
                t.in_flight = t.in_flight.saturating_add(g.bytes);
                go.extend(t.held.pop_front());
            }
            if go.is_empty() {
                return;
            }
            let ctx = p.ctx.clone();
            if p.targets.values().all(|t| t.held.is_empty()) {
                p.ctx = None;
            }
            (go, ctx)
        };
        let Some(ctx) = ctx else {
            return;
        };
        for g in go {
            self.send_held(&ctx, g, limit);
        }
    }

    /// Sends held get `g`; a failed send fails the operation (noted on its
    /// window, reported at the next synchronization).
    fn send_held(&self, ctx: &Context, g: HeldGet, limit: usize) {
        let key = crate::comm_links::traffic_key(g.win.comm.ctx as u64);
        let sent = ctx.startpoint(g.world).and_then(|sp| {
            ctx.rsr_v_keyed(
                &sp,
                H_RMA,
                &[IoSlice::new(&g.header), IoSlice::new(&g.layout)],
                key,
            )
        });
        if let Err(e) = sent {
            g.win.note_error(crate::error::err(
                crate::error::class::OTHER,
                format!("a get to rank {} could not be sent: {e}", g.world),
            ));
            self.forget(g.id);
            self.paced_get_done(g.world, g.bytes, limit);
        }
    }
}
