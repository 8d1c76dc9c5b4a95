//! The reorder buffer of a [`Receiver`](super::Receiver): messages of a
//! pair that arrived ahead of their turn because the pair's sequence runs
//! over several links at once (a communicator on `udp` beside the pair's
//! `tcp`, see `context/failover.rs`). Each link delivers in order, but two
//! links do not keep order between them, so message 7 may arrive on udp
//! while 6 is still in tcp's socket buffer.
//!
//! The peer is hostile like every peer: what it can make us hold is
//! bounded in count (a sequence further ahead than the window is refused,
//! [`Verdict::Gap`]) and in bytes ([`Verdict::Overflow`]); both fail the
//! link. An honest sender never reaches either bound: it keeps at most
//! [`MAX_FRAMES`](super::MAX_FRAMES) messages and
//! [`MAX_BYTES`](super::MAX_BYTES) bytes unacknowledged (its retransmit
//! ring), and everything we hold is in that ring, since we have not
//! delivered (so not acknowledged) it yet. The window is twice those
//! bounds: a sender inside a handler may take its ring a little over the
//! bound rather than wait (see `failover.rs`).

use super::Verdict;
use std::collections::BTreeMap;

/// Buffers kept for reuse, and the largest one kept.
const FREE_KEEP: usize = 64;
const FREE_MAX_CAP: usize = 1 << 20;

/// Early messages by sequence number.
#[derive(Default)]
pub(super) struct Held {
    /// How far ahead of the next expected sequence a message may be (0 = no
    /// holding: any skip is a gap).
    frames: u64,
    /// Bytes held at most.
    max_bytes: usize,
    held: BTreeMap<u64, Vec<u8>>,
    bytes: usize,
    free: Vec<Vec<u8>>,
}

impl Held {
    pub(super) fn new(frames: u64, max_bytes: usize) -> Held {
        Held {
            frames,
            max_bytes,
            ..Held::default()
        }
    }

    pub(super) fn contains(&self, seq: u64) -> bool {
        !self.held.is_empty() && self.held.contains_key(&seq)
    }

    /// Whether `seq` (beyond `delivered + 1`, not held yet) of `len` bytes
    /// may be held.
    pub(super) fn admit(&self, delivered: u64, seq: u64, len: usize) -> Verdict {
        if seq - delivered > self.frames {
            return Verdict::Gap {
                expected: delivered + 1,
                got: seq,
            };
        }
        if self.bytes.saturating_add(len) > self.max_bytes {
            return Verdict::Overflow {
                held_bytes: self.bytes,
                len,
            };
        }
        Verdict::Early
    }

    /// Keeps a copy of `body` (after [`admit`](Self::admit) said `Early`).
    pub(super) fn hold(&mut self, seq: u64, body: &[u8]) {
        let mut buf = self.free.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(body);
        self.bytes += buf.len();
        if let Some(old) = self.held.insert(seq, buf) {
            // `accept` calls a held sequence a duplicate: not reached, but
            // the count must stay right if a caller holds twice.
            self.bytes -= old.len();
        }
    }

    /// Removes and returns the message `seq`, if held.
    pub(super) fn take(&mut self, seq: u64) -> Option<Vec<u8>> {
        if self.held.is_empty() {
            return None;
        }
        let data = self.held.remove(&seq)?;
        self.bytes -= data.len();
        Some(data)
    }

    pub(super) fn recycle(&mut self, buf: Vec<u8>) {
        if self.free.len() < FREE_KEEP && buf.capacity() <= FREE_MAX_CAP {
            self.free.push(buf);
        }
    }

    pub(super) fn len_bytes(&self) -> (usize, usize) {
        (self.held.len(), self.bytes)
    }
}
