//! The context's side of the measured, size-aware selection
//! (`measured.rs` has the cost model): which sub-route a message of a
//! measured route takes to a peer, and feeding the model what the pair's
//! links and acks tell.
//!
//! Everything here runs under the pair's send lock (`Sequenced::send`),
//! which the send path holds anyway: the choice adds no lock. A pair's
//! selector is built on its first message on the route (the cold part:
//! the peer's table, the candidates per stack); after that a send costs a
//! bit test, a few comparisons, and two counter updates.

use super::failover::{SendSide, Sequenced};
use super::measured::{self, Estimate, Selector};
use super::*;
use std::time::Instant;

/// A pair's choice on one measured route, made on its first message.
pub(super) enum PairSelect {
    /// Fewer than two stacks apply to this peer: the route's own link.
    Fixed,
    Measured(Box<Selector>),
}

impl Context {
    /// The route a message of `len` bytes on measured `route` takes to
    /// `rank`, and the selector's slot for it with whether to send it as a
    /// probe (`None`: the route is fixed for this pair). `alone`: nothing
    /// else of the pair is unacknowledged.
    #[inline]
    pub(super) fn pick_route(
        &self,
        rank: u32,
        g: &mut SendSide,
        route: usize,
        len: usize,
        now: Instant,
        alone: bool,
    ) -> Result<(usize, Option<(usize, bool)>)> {
        if g.selectors.len() <= route || g.selectors[route].is_none() {
            let built = self.build_selector(rank, route)?;
            if g.selectors.len() <= route {
                g.selectors.resize_with(route + 1, || None);
            }
            g.selectors[route] = Some(built);
        }
        match &mut g.selectors[route] {
            Some(PairSelect::Measured(sel)) => {
                let (k, probe) = sel.pick(len, now, alone);
                Ok((sel.slots[k].route, Some((k, probe))))
            }
            _ => Ok((route, None)),
        }
    }

    /// The selector of measured `route` for `rank`: a slot per sub-route
    /// whose first candidate for this peer is the stack it stands for.
    #[cold]
    fn build_selector(&self, rank: u32, route: usize) -> Result<PairSelect> {
        let table = self.table_of(rank)?;
        // On the job's default route, the stack the default link would
        // take is carried by that link itself: acks ride it, and a peer
        // that only receives follows it when it fails over (`failover.rs`).
        let default_first = if route == 0 {
            self.route_candidates(rank, &table, 0)?.first().copied()
        } else {
            None
        };
        let mut slots: Vec<(usize, &'static str)> = Vec::new();
        for (base, sub) in self.inner.routes.subs_of(route) {
            let candidates = self
                .route_candidates(rank, &table, sub as usize)
                .unwrap_or_default();
            let Some(&(mi, _)) = candidates.first() else {
                continue;
            };
            let name = self.inner.methods[mi].name();
            let is_it = name == base || name.rsplit('+').next() == Some(base.as_str());
            if is_it && self.is_sequenced(mi) && !slots.iter().any(|&(_, n)| n == name) {
                let via = if default_first == candidates.first().copied() {
                    0
                } else {
                    sub as usize
                };
                slots.push((via, name));
            }
        }
        if slots.len() < 2 {
            if route != 0 && self.route_candidates(rank, &table, route)?.is_empty() {
                return Err(self.no_route_error(rank, &table, route));
            }
            return Ok(PairSelect::Fixed);
        }
        let forced = &self.inner.routes.forced;
        let forced: Option<Vec<Estimate>> = if forced.is_empty() {
            None
        } else {
            slots
                .iter()
                .map(|&(_, n)| measured::forced_for(forced, n))
                .collect()
        };
        let sel = Selector::new(&slots, forced.as_deref());
        if self.inner.job.verbose >= 1 {
            crate::say!(
                "gw[{}]: rank {rank}: size-aware selection over {}: {}",
                self.rank(),
                slots.iter().map(|s| s.1).collect::<Vec<_>>().join(", "),
                sel.describe()
            );
        }
        Ok(PairSelect::Measured(Box::new(sel)))
    }
}

impl SendSide {
    /// A link was replaced: the probes in flight are not timed (their
    /// acks would count the failover).
    pub(super) fn selectors_forget_probes(&mut self) {
        for sel in self.selectors.iter_mut().flatten() {
            if let PairSelect::Measured(sel) = sel {
                sel.forget_probes();
            }
        }
    }

    /// The peer acknowledged up to `acked` at `now`: the probes it covers
    /// are timed.
    pub(super) fn selectors_acked(&mut self, acked: u64, now: Instant) -> bool {
        let mut still = false;
        for sel in self.selectors.iter_mut().flatten() {
            if let PairSelect::Measured(sel) = sel {
                if sel.probing() {
                    sel.acked(acked, now);
                    still |= sel.probing();
                }
            }
        }
        still
    }

    /// Slot `k` of measured `route` carried message `seq` (`probe`: its
    /// header asked for an ack at once). Whether a probe waits.
    pub(super) fn selector_sent(
        &mut self,
        route: usize,
        k: usize,
        seq: u64,
        len: usize,
        now: Instant,
        probe: bool,
    ) -> bool {
        match self.selectors.get_mut(route) {
            Some(Some(PairSelect::Measured(sel))) => {
                sel.sent(k, seq, len, now, probe);
                sel.probing()
            }
            _ => false,
        }
    }

    /// Feeds each selector the round trips its open links' transports
    /// measured (every silence check: not on the send path).
    pub(super) fn refresh_rtts(&mut self) {
        let SendSide {
            selectors, links, ..
        } = self;
        for sel in selectors.iter_mut().flatten() {
            let PairSelect::Measured(sel) = sel else {
                continue;
            };
            for k in 0..sel.slots.len() {
                let rtt = links
                    .get(sel.slots[k].route)
                    .and_then(|l| l.link.as_ref())
                    .and_then(|l| l.rtt());
                if let Some(rtt) = rtt {
                    sel.rtt_sample(k, rtt);
                }
            }
        }
    }

    /// One account per measured route of this pair (for `--stats`).
    pub(super) fn selection_summaries(&self) -> Vec<measured::Summary> {
        self.selectors
            .iter()
            .flatten()
            .filter_map(|s| match s {
                PairSelect::Measured(sel) => Some(sel.summary()),
                PairSelect::Fixed => None,
            })
            .collect()
    }
}

impl Sequenced {
    /// What the pair's measured routes chose (empty: none).
    pub(super) fn selection(&self) -> Vec<measured::Summary> {
        self.send
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .selection_summaries()
    }
}
