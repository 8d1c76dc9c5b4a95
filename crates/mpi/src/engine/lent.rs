//! Rendezvous data lent to the runtime instead of copied.
//!
//! To a peer on another host, every message is kept until the peer
//! acknowledges it, so that a replacement link can send it again
//! (failover). For rendezvous data that was a copy of every byte on the
//! sending core, beside the kernel's own. A contiguous send of at least
//! [`LEND_MIN`] bytes now lends the runtime its buffer
//! (`Context::rsr_v_lent`): the runtime keeps its address, and the send
//! completes when the receiver has acknowledged the data, which it does
//! every 1 MiB and, for the last piece (flagged), at once. A receiver that is slow to say so
//! (busy outside MPI) costs the sender at most [`LEND_PATIENCE`]: then the
//! runtime copies what is still unacknowledged (`Context::settle_lent`)
//! and the send completes as before.
//!
//! Soundness: the program may not touch the buffer of a send before it
//! completes (MPI), and it completes only once the runtime let go of the
//! address (released or settled).

use super::*;
use gridwire_core::LentTicket;

/// Sends at least this large are lent (smaller ones are one piece: the
/// copy is cheap beside the round trip its acknowledgement can take).
pub(super) const LEND_MIN: usize = DATA_CHUNK;

/// How long a lent send waits for its acknowledgement before the runtime
/// copies the rest and the send completes anyway.
pub(super) const LEND_PATIENCE: Duration = Duration::from_millis(5);

impl Engine {
    /// [`Engine::send_data`] lending `data` (see the module doc): the
    /// ticket of the last piece, or `None` when nothing was kept by address.
    pub(super) fn send_data_lent(
        &self,
        to: u32,
        rreq: u64,
        data: &[u8],
        key: u32,
    ) -> gridwire_core::Result<Option<LentTicket>> {
        let sp = Startpoint {
            ctx: to,
            endpoint: 0,
        };
        let total = data.len() as u64;
        let mut off = 0usize;
        let mut last = None;
        while off < data.len() {
            let piece = &data[off..(off + DATA_CHUNK).min(data.len())];
            let mut hdr = [0u8; DATA_HDR];
            hdr[..8].copy_from_slice(&rreq.to_le_bytes());
            hdr[8..16].copy_from_slice(&(off as u64).to_le_bytes());
            hdr[16..].copy_from_slice(&total.to_le_bytes());
            // SAFETY: `data` is the buffer of a send request that completes
            // only after `release_lent` saw the ticket released or settled
            // it (or, on an error here, after the settle below).
            let last_piece = off + piece.len() >= data.len();
            let sent = unsafe {
                self.ctx.rsr_v_lent(
                    &sp,
                    H_DATA,
                    &[IoSlice::new(&hdr), IoSlice::new(piece)],
                    key,
                    last_piece,
                )
            };
            match sent {
                Ok(t) => last = t.or(last),
                Err(e) => {
                    self.ctx.settle_lent(&LentTicket::all(to));
                    return Err(e);
                }
            }
            off += piece.len();
        }
        Ok(last)
    }

    /// Completes the lent sends the runtime let go of, and those that
    /// waited [`LEND_PATIENCE`] (after copying what is still lent), oldest
    /// first.
    #[inline(never)]
    pub(super) fn release_lent(&self) {
        let mut now = None;
        loop {
            let Some((req, ticket, since)) = self.lock().lent.pop_front() else {
                return;
            };
            if !self.ctx.lent_released(&ticket) {
                let now = *now.get_or_insert_with(Instant::now);
                if now.saturating_duration_since(since) < LEND_PATIENCE {
                    self.lock().lent.push_front((req, ticket, since));
                    return;
                }
                self.ctx.settle_lent(&ticket);
            }
            self.lent_len.fetch_sub(1, Ordering::Relaxed);
            req.complete();
        }
    }
}
