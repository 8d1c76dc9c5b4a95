//! Sends that lend their last part to the runtime instead of giving a
//! copy (see [`Context::rsr_v_lent`]): between hosts every message is kept
//! until the peer acknowledges it (`failover.rs`), and for a large one the
//! copy was as costly as the kernel's own.

use super::progress::ProgressWaiter;
use super::*;

/// A lent send in flight (see [`Context::rsr_v_lent`]): the peer and the
/// message's number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LentTicket {
    rank: u32,
    seq: u64,
}

impl LentTicket {
    /// Everything lent to `rank` so far (to settle after a failed send).
    pub fn all(rank: u32) -> LentTicket {
        LentTicket {
            rank,
            seq: u64::MAX,
        }
    }
}

impl Context {
    /// [`rsr_sequenced`](Self::rsr_sequenced), lending the last part of
    /// `payload` when `lend` is `Some(ack_now)` (see
    /// [`Context::rsr_v_lent`]); returns the message's sequence number.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn rsr_sequenced_as(
        &self,
        rank: u32,
        s: &failover::Sequenced,
        hdr: &[u8; RSR_HEADER],
        payload: &[IoSlice<'_>],
        waiter: &ProgressWaiter<'_>,
        key: u32,
        lend: Option<bool>,
    ) -> Result<u64> {
        let route = self.inner.routes.of_key(key);
        let seq = if payload.len() < 8 {
            let mut iov = [IoSlice::new(&[]); 8];
            iov[0] = IoSlice::new(hdr);
            iov[1..=payload.len()].copy_from_slice(payload);
            self.send_sequenced(rank, s, &iov[..=payload.len()], waiter, route, lend)?
        } else {
            let mut iov = Vec::with_capacity(payload.len() + 1);
            iov.push(IoSlice::new(hdr));
            iov.extend_from_slice(payload);
            self.send_sequenced(rank, s, &iov, waiter, route, lend)?
        };
        // (`send_sequenced` counted it for the peer.)
        Ok(seq)
    }

    /// [`rsr_v_keyed`](Self::rsr_v_keyed) that *lends* the last part of
    /// `payload` instead of giving it: to a peer on another host, whose
    /// messages are kept until acknowledged for failover (`failover.rs`),
    /// the runtime keeps the part's address rather than a copy of it, and
    /// the returned ticket says when the peer has acknowledged it
    /// ([`lent_released`](Self::lent_released)). `None`: nothing is kept
    /// (another link; the transport has the bytes): the memory is free now.
    /// `ack_now` asks the peer to acknowledge the message as soon as it has
    /// it (for the last piece its sender waits on) instead of with the next
    /// MiB or when idle.
    ///
    /// # Safety
    /// With `Some(ticket)`, the last part's bytes must stay valid and
    /// unchanged until `lent_released(ticket)` returned `true` or
    /// [`settle_lent`](Self::settle_lent)`(ticket)` returned; also when
    /// this call fails, until `settle_lent` was called for the peer (the
    /// error names no ticket: use [`LentTicket::all`]).
    pub unsafe fn rsr_v_lent(
        &self,
        sp: &Startpoint,
        handler: u32,
        payload: &[IoSlice<'_>],
        key: u32,
        ack_now: bool,
    ) -> Result<Option<LentTicket>> {
        let peer = self.peer(sp.ctx)?;
        let s = match (peer.link.get(), peer.seq.get().filter(|s| s.routed())) {
            (None, Some(s)) if peer.failed.get().is_none() && !payload.is_empty() => s,
            _ => return self.rsr_v_keyed(sp, handler, payload, key).map(|()| None),
        };
        let mut hdr = [0u8; RSR_HEADER];
        hdr[..4].copy_from_slice(&handler.to_le_bytes());
        hdr[4..].copy_from_slice(&sp.endpoint.to_le_bytes());
        let waiter = ProgressWaiter { ctx: self };
        let seq = self.rsr_sequenced_as(sp.ctx, s, &hdr, payload, &waiter, key, Some(ack_now))?;
        Ok(Some(LentTicket { rank: sp.ctx, seq }))
    }

    /// Whether the memory of a lent send ([`rsr_v_lent`](Self::rsr_v_lent))
    /// is free again: the peer acknowledged the message and the runtime
    /// let go of its address.
    pub fn lent_released(&self, t: &LentTicket) -> bool {
        match self
            .inner
            .peers
            .get(t.rank as usize)
            .and_then(|p| p.seq.get())
        {
            Some(s) => self.lent_released_seq(s, t.seq),
            None => true,
        }
    }

    /// Copies what is still lent up to ticket `t` (see
    /// [`rsr_v_lent`](Self::rsr_v_lent)): the memory is free when it returns.
    pub fn settle_lent(&self, t: &LentTicket) {
        if let Some(s) = self
            .inner
            .peers
            .get(t.rank as usize)
            .and_then(|p| p.seq.get())
        {
            self.settle_lent_seq(s, t.seq);
        }
    }
}
