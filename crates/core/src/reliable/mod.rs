//! End-to-end sequencing above the methods: what lets a link between hosts
//! be replaced mid-job without losing, duplicating or reordering a message.
//!
//! Every message to a peer on another host carries a 16-byte header
//! `[seq u64][ack u64]` (little-endian): `seq` numbers the messages of that
//! direction from 1 (0 = an ack-only frame, no payload), `ack` is the
//! highest sequence the sender has *delivered* from the other direction
//! (cumulative). The sender keeps what was not acknowledged yet in a
//! bounded ring ([`Sender`]); when the link is replaced it resends the ring
//! on the new link, and the receiver ([`Receiver`]) delivers exactly the
//! next sequence and drops whatever it already has. Since every link
//! delivers in order and resending starts at or below what the receiver
//! expects, a gap can only mean a broken peer: it fails the link hard.
//!
//! This module does no I/O and reads no clock: the context passes `now`
//! in, so the unit tests drive it with a fake wire and a virtual clock.
//! Shared memory and the process itself need none of it (they do not
//! cross a network, and a host that fails takes both ends with it).

use std::collections::VecDeque;
use std::io::IoSlice;
use std::time::{Duration, Instant};

mod reorder;
#[cfg(test)]
mod tests;

/// Length of the sequencing header in front of each message.
pub const HEADER: usize = 16;

/// Unacknowledged messages a sender keeps at most (then it waits for acks).
pub const MAX_FRAMES: usize = 4096;
/// Unacknowledged bytes a sender keeps at most; one larger message is
/// accepted alone.
pub const MAX_BYTES: usize = 16 << 20;
/// How far ahead of the next expected sequence a receiver holds messages
/// that took another link, and how many bytes of them (twice what an
/// honest sender keeps unacknowledged: see `reorder.rs`).
pub const REORDER_FRAMES: u64 = 2 * MAX_FRAMES as u64;
pub const REORDER_BYTES: usize = 2 * MAX_BYTES;
/// A receiver acknowledges at the latest after this many messages …
pub const ACK_EVERY_MSGS: u64 = 64;
/// … or this many bytes (well below [`MAX_BYTES`] / [`MAX_FRAMES`], so a
/// sender never waits on a full ring for an ack that is not owed yet).
pub const ACK_EVERY_BYTES: u64 = 1 << 20;
/// Recycled buffers kept for reuse, the largest one kept, and the most
/// bytes kept in all. Why 1 MiB was not enough: MPI's rendezvous data comes
/// in pieces of 256 KiB plus headers, but a runtime user (and the core's
/// own benchmark) sends 4 MiB messages whole; each cost a fresh allocation
/// whose 1024 pages faulted in, and tcp's bandwidth between the hosts of a
/// site was 0.52x of that without sequencing on an idle machine. Four
/// such buffers fit in the byte bound.
const FREE_KEEP: usize = 256;
const FREE_MAX_CAP: usize = (4 << 20) + 4096;
const FREE_MAX_BYTES: usize = 16 << 20;
/// From this size on, `push` looks through the recycled buffers for one
/// large enough instead of growing the last one (a search over at most
/// [`FREE_KEEP`] entries is nothing beside copying this many bytes).
const FIT_SEARCH_FROM: usize = 64 << 10;

/// Writes the header for `seq` carrying the cumulative `ack`.
#[inline]
pub fn header(seq: u64, ack: u64) -> [u8; HEADER] {
    let mut h = [0u8; HEADER];
    h[..8].copy_from_slice(&seq.to_le_bytes());
    h[8..].copy_from_slice(&ack.to_le_bytes());
    h
}

/// Reads a header: `(seq, ack, payload)`, or `None` when the message is too
/// short to carry one.
#[inline]
pub fn parse(msg: &[u8]) -> Option<(u64, u64, &[u8])> {
    let seq = u64::from_le_bytes(msg.get(..8)?.try_into().ok()?);
    let ack = u64::from_le_bytes(msg.get(8..HEADER)?.try_into().ok()?);
    Some((seq, ack, &msg[HEADER..]))
}

struct Frame {
    seq: u64,
    data: Vec<u8>,
    /// The message's last part, lent by the caller of
    /// [`Sender::push_lent`] (address, length) instead of copied.
    lent: Option<(usize, usize)>,
}

impl Frame {
    fn len(&self) -> usize {
        self.data.len() + self.lent.map_or(0, |(_, n)| n)
    }

    /// The lent part (empty when there is none).
    fn lent(&self) -> &[u8] {
        match self.lent {
            // SAFETY: `push_lent`'s contract: the lent bytes stay valid and
            // unchanged while the frame is in the ring, unless `settle`
            // copied them first (which clears `lent`).
            Some((at, n)) => unsafe { std::slice::from_raw_parts(at as *const u8, n) },
            None => &[],
        }
    }
}

/// The sending half: sequence numbers and the retransmit ring.
pub struct Sender {
    next_seq: u64,
    acked: u64,
    ring: VecDeque<Frame>,
    bytes: usize,
    free: Vec<Vec<u8>>,
    /// Capacity of the buffers in `free`, bytes.
    free_bytes: usize,
    max_frames: usize,
    max_bytes: usize,
    /// When the ring last went from empty to not empty, or an ack last
    /// moved it: silence is measured from here.
    waiting_since: Option<Instant>,
}

impl Sender {
    pub fn new(max_frames: usize, max_bytes: usize) -> Sender {
        Sender {
            next_seq: 1,
            acked: 0,
            ring: VecDeque::new(),
            bytes: 0,
            free: Vec::new(),
            free_bytes: 0,
            max_frames: max_frames.max(1),
            max_bytes,
            waiting_since: None,
        }
    }

    /// Whether a message of `len` bytes fits in the ring now.
    pub fn has_room(&self, len: usize) -> bool {
        self.ring.is_empty()
            || (self.ring.len() < self.max_frames && self.bytes + len <= self.max_bytes)
    }

    /// Takes a copy of the message `iov` into the ring and returns its
    /// sequence number. The copy reuses a recycled buffer: no allocation
    /// per message once the ring has warmed up.
    pub fn push(&mut self, iov: &[IoSlice<'_>], now: Instant) -> u64 {
        let len: usize = iov.iter().map(|s| s.len()).sum();
        let fit = if len >= FIT_SEARCH_FROM && self.free.last().is_some_and(|b| b.capacity() < len)
        {
            self.free.iter().rposition(|b| b.capacity() >= len)
        } else {
            None
        };
        let mut data = match fit {
            Some(i) => self.free.swap_remove(i),
            None => self.free.pop().unwrap_or_default(),
        };
        self.free_bytes -= data.capacity();
        data.clear();
        data.reserve(len);
        for s in iov {
            data.extend_from_slice(s);
        }
        self.push_frame(data, None, now)
    }

    /// [`push`](Self::push) of `iov` followed by `lent`, whose bytes are
    /// not copied: the ring keeps their address until the peer
    /// acknowledges the message (or [`settle`](Self::settle) copies them).
    ///
    /// # Safety
    /// `lent` must stay valid and unchanged until the message is
    /// acknowledged (it left the ring: `acked() >= seq`) or `settle` was
    /// called with a sequence at or beyond it.
    pub unsafe fn push_lent(&mut self, iov: &[IoSlice<'_>], lent: &[u8], now: Instant) -> u64 {
        let len: usize = iov.iter().map(|s| s.len()).sum();
        let mut data = self.free.pop().unwrap_or_default();
        self.free_bytes -= data.capacity();
        data.clear();
        data.reserve(len);
        for s in iov {
            data.extend_from_slice(s);
        }
        self.push_frame(data, Some((lent.as_ptr() as usize, lent.len())), now)
    }

    fn push_frame(&mut self, data: Vec<u8>, lent: Option<(usize, usize)>, now: Instant) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        if self.ring.is_empty() {
            self.waiting_since = Some(now);
        }
        let f = Frame { seq, data, lent };
        self.bytes += f.len();
        self.ring.push_back(f);
        seq
    }

    /// Copies the lent part of every message up to `upto` still in the
    /// ring: their lenders may take their memory back after this.
    pub fn settle(&mut self, upto: u64) {
        for f in self.ring.iter_mut().take_while(|f| f.seq <= upto) {
            if f.lent.is_some() {
                let mut owned = std::mem::take(&mut f.data);
                owned.extend_from_slice(f.lent());
                f.data = owned;
                f.lent = None;
            }
        }
    }

    /// The peer delivered everything up to `ack`: frees those frames.
    /// Returns how many were freed. An ack beyond what was sent is a
    /// protocol violation (`Err`).
    pub fn ack(&mut self, ack: u64, now: Instant) -> Result<usize, String> {
        if ack >= self.next_seq {
            return Err(format!(
                "acknowledged message {ack}, but only {} were sent",
                self.next_seq - 1
            ));
        }
        if ack <= self.acked {
            return Ok(0);
        }
        self.acked = ack;
        let mut n = 0;
        while self.ring.front().is_some_and(|f| f.seq <= ack) {
            let f = self.ring.pop_front().expect("front checked");
            self.bytes -= f.len();
            let cap = f.data.capacity();
            if self.free.len() < FREE_KEEP
                && cap <= FREE_MAX_CAP
                && self.free_bytes + cap <= FREE_MAX_BYTES
            {
                self.free_bytes += cap;
                self.free.push(f.data);
            }
            n += 1;
        }
        self.waiting_since = (!self.ring.is_empty()).then_some(now);
        Ok(n)
    }

    /// The highest sequence the peer acknowledged.
    pub fn acked(&self) -> u64 {
        self.acked
    }

    /// The last sequence number handed out (0 = none yet).
    pub fn last_seq(&self) -> u64 {
        self.next_seq - 1
    }

    /// Messages sent and not acknowledged, oldest first: what a replacement
    /// link must carry again (each as its copied part and its lent part).
    pub fn unacked(&self) -> impl Iterator<Item = (u64, &[u8], &[u8])> {
        self.ring.iter().map(|f| (f.seq, &f.data[..], f.lent()))
    }

    pub fn unacked_len(&self) -> usize {
        self.ring.len()
    }

    /// Whether messages have waited for an ack for longer than `timeout`
    /// with no ack moving: the link is silent.
    pub fn silent(&self, now: Instant, timeout: Duration) -> bool {
        self.waiting_since
            .is_some_and(|t| now.saturating_duration_since(t) > timeout)
    }

    /// Restarts the silence clock (a new link was just put in place).
    pub fn restart_clock(&mut self, now: Instant) {
        if !self.ring.is_empty() {
            self.waiting_since = Some(now);
        }
    }
}

/// What a receiver does with an arriving frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The next message: deliver it.
    Deliver,
    /// Already delivered, or already held (resent across a link
    /// replacement, or sent again on a second link): drop it.
    Duplicate,
    /// An ack-only frame: nothing to deliver.
    AckOnly,
    /// A message ahead of the next one, within the reorder window (the
    /// pair's messages travel several links): the caller keeps a copy with
    /// [`Receiver::hold`]; it is delivered once the ones before it were.
    Early,
    /// A message beyond the reorder window (or any skip, without a
    /// window): only a broken peer sends it — fail the link.
    Gap { expected: u64, got: u64 },
    /// Holding this early message would take the held bytes beyond the
    /// window's byte bound: fail the link.
    Overflow { held_bytes: usize, len: usize },
}

/// The receiving half: delivers each sequence exactly once, in order, and
/// says when an ack is owed. With a reorder window (a pair whose messages
/// take several links at once, see `context/failover.rs`) it also holds
/// messages that arrive ahead of their turn, bounded in count and bytes.
#[derive(Default)]
pub struct Receiver {
    delivered: u64,
    acked_msgs: u64,
    since_ack_bytes: u64,
    reorder: reorder::Held,
}

impl Receiver {
    /// A receiver that holds up to `frames` messages ahead of the next one
    /// and `bytes` of them in all. `Receiver::default()` holds none: any
    /// skip is a gap.
    pub fn with_window(frames: u64, bytes: usize) -> Receiver {
        Receiver {
            reorder: reorder::Held::new(frames, bytes),
            ..Receiver::default()
        }
    }

    pub fn accept(&mut self, seq: u64, len: usize) -> Verdict {
        if seq == 0 {
            return Verdict::AckOnly;
        }
        if seq <= self.delivered || self.reorder.contains(seq) {
            return Verdict::Duplicate;
        }
        if seq != self.delivered + 1 {
            return self.reorder.admit(self.delivered, seq, len);
        }
        self.delivered = seq;
        self.since_ack_bytes += len as u64;
        Verdict::Deliver
    }

    /// Keeps a copy of `body`, which [`accept`](Self::accept) called
    /// [`Verdict::Early`].
    pub fn hold(&mut self, seq: u64, body: &[u8]) {
        self.reorder.hold(seq, body);
    }

    /// The held message whose turn it is now, if any: it counts as
    /// delivered. Give its buffer back with [`recycle`](Self::recycle).
    pub fn take_next(&mut self) -> Option<Vec<u8>> {
        let next = self.delivered + 1;
        let data = self.reorder.take(next)?;
        self.delivered = next;
        self.since_ack_bytes += data.len() as u64;
        Some(data)
    }

    /// Returns a buffer from [`take_next`](Self::take_next) for reuse.
    pub fn recycle(&mut self, buf: Vec<u8>) {
        self.reorder.recycle(buf);
    }

    /// Messages held and their bytes.
    pub fn held(&self) -> (usize, usize) {
        self.reorder.len_bytes()
    }

    /// The cumulative ack to send: everything delivered so far.
    pub fn delivered(&self) -> u64 {
        self.delivered
    }

    /// Whether enough arrived since the last ack that one is owed now.
    pub fn ack_due(&self) -> bool {
        self.delivered - self.acked_msgs >= ACK_EVERY_MSGS
            || self.since_ack_bytes >= ACK_EVERY_BYTES
    }

    /// Whether anything was delivered that no ack covered yet.
    pub fn unacked(&self) -> bool {
        self.delivered > self.acked_msgs
    }

    /// An ack for everything delivered went out (alone or piggybacked).
    pub fn acked_up_to(&mut self, ack: u64) {
        if ack >= self.acked_msgs {
            self.acked_msgs = ack;
            self.since_ack_bytes = 0;
        }
    }
}
