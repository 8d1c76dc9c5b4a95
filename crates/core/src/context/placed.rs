//! Large requests read straight to where their handler wants them (see
//! [`Placer`]): the dispatch side of `Sink::place`.
//!
//! A stream method (tcp) that has the start of a large message and not its
//! end asks here where the rest goes. Only the message whose turn it is
//! (the next sequence number of a sequenced pair) is placed: an early or a
//! duplicate one is delivered whole, as before. When the message is
//! complete, it passes the sequencing like any other (its ack applied, its
//! number delivered) and goes to the placer instead of the handler; if the
//! sequencing drops it after all (a duplicate that overtook it on another
//! link), the destination is dropped, which tells the placer it was
//! abandoned.

use super::failover::seq_of;
use super::progress::Dispatch;
use super::*;
use crate::method::Destination;
use crate::reliable;

impl Dispatch<'_> {
    /// [`Sink::place`] and [`Sink::place_whole`]: the placer of the
    /// request's handler decides.
    /// `whole`: [`Sink::place_whole`] (the placer's `place_whole`).
    pub(super) fn place_request(
        &mut self,
        src: u32,
        head: &[u8],
        len: usize,
        whole: bool,
    ) -> Option<Destination> {
        if self.placers.is_empty() {
            return None;
        }
        let mut at = 0;
        if self.sequenced && src < self.ctx.capacity() {
            let (raw_seq, _, _) = reliable::parse(head)?;
            let s = self.ctx.inner.peers.get(src as usize)?.seq.get()?;
            if seq_of(raw_seq) != s.next_expected()? {
                return None;
            }
            at = reliable::HEADER;
        }
        let rsr = head.get(at..at + RSR_HEADER)?;
        let handler = u32::from_le_bytes(rsr[..4].try_into().ok()?);
        let endpoint = u32::from_le_bytes(rsr[4..].try_into().ok()?);
        if endpoint != DEFAULT_ENDPOINT || src >= self.ctx.capacity() {
            return None;
        }
        let (_, placer) = self.placers.iter().find(|(h, _)| *h == handler)?;
        let skip = at + RSR_HEADER;
        let (head, len) = (&head[skip..], len.checked_sub(skip)?);
        let mut dest = if whole {
            placer.place_whole(src, head, len)?
        } else {
            placer.place(src, head, len)?
        };
        dest.at = dest.at.checked_add(skip)?;
        Some(dest)
    }

    /// [`Sink::deliver_placed`]: sequencing, counting, then the placer.
    pub(super) fn deliver_placed_request(&mut self, src: u32, head: &[u8], mut dest: Destination) {
        let len = dest.at + dest.len;
        let sequenced = self.sequenced && src < self.ctx.capacity();
        let mut skip = 0;
        if sequenced {
            if !self.receive_sequenced_placed(src, head, len) {
                return;
            }
            skip = reliable::HEADER;
        }
        let inner = &self.ctx.inner;
        let Some(peer) = inner.peers.get(src as usize) else {
            inner.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        };
        // As `deliver_message` counts (only the progress owner writes them).
        peer.recv_msgs.store(
            peer.recv_msgs.load(Ordering::Relaxed) + 1,
            Ordering::Relaxed,
        );
        peer.recv_bytes.store(
            peer.recv_bytes.load(Ordering::Relaxed) + (len - skip) as u64,
            Ordering::Relaxed,
        );
        let Some(rsr) = head.get(skip..skip + RSR_HEADER) else {
            inner.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let handler = u32::from_le_bytes(rsr[..4].try_into().expect("4 bytes"));
        match self.placers.iter().find(|(h, _)| *h == handler) {
            Some((_, placer)) => {
                dest.at -= skip + RSR_HEADER;
                let ctx = self.ctx;
                IN_HANDLER.with(|c| {
                    let was = c.replace(true);
                    placer.placed(ctx, src, &head[skip + RSR_HEADER..], dest);
                    c.set(was);
                });
            }
            // Unregistered meanwhile: dropped (and the destination with it).
            None => {
                inner.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
        if sequenced {
            self.deliver_held(src);
        }
    }
}
