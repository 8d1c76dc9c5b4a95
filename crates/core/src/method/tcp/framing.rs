//! The receive buffer of a connection and the frame parser over it.
//!
//! Frames are `[u32 little-endian length][message]`. The parser is a pure
//! function of the buffered bytes (no socket), so the fuzz harness
//! ([`crate::fuzzing::tcp_frames`]) drives exactly the code a connection runs.
//!
//! Memory follows what arrived, never what a header announced: a header may
//! claim up to `GW_TCP_MAX_MSG` bytes, and zero-filling that much before the
//! payload exists let one 4-byte header from a peer commit gigabytes. The
//! buffer grows by at most the bytes already buffered (doubling as they
//! arrive, from a 64 KiB floor), so it stays below twice the received bytes
//! plus 64 KiB, while a large message still needs only a logarithmic number
//! of regrowths and large reads.

use std::ops::Range;

/// Smallest read offered to the kernel (and the growth floor).
pub(crate) const MIN_READ: usize = 64 << 10;

/// Length of the frame header.
pub(crate) const HEADER: usize = 4;

#[derive(Default)]
pub(crate) struct RxBuf {
    /// Bytes `start..end` are received and not yet parsed; `end..` is room.
    pub(crate) buf: Vec<u8>,
    pub(crate) start: usize,
    pub(crate) end: usize,
}

impl RxBuf {
    /// Unparsed bytes.
    pub(crate) fn pending(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// Room to offer the next read: what the current frame still needs
    /// (when `framed`, i.e. after the handshake), but at most as much as is
    /// already buffered, and at least `MIN_READ`.
    pub(crate) fn room_wanted(&self, framed: bool, max_msg: usize) -> usize {
        let avail = self.end - self.start;
        let need = match self.header() {
            Some(len) if framed => HEADER
                .saturating_add(len.min(max_msg))
                .saturating_sub(avail),
            _ => 0,
        };
        need.min(avail.max(MIN_READ)).max(MIN_READ)
    }

    /// The announced length of the frame at `start`, once its header is buffered.
    fn header(&self) -> Option<usize> {
        let h: [u8; HEADER] = self.pending().get(..HEADER)?.try_into().ok()?;
        Some(u32::from_le_bytes(h) as usize)
    }

    /// Ensures at least `want` writable bytes after `end`.
    pub(crate) fn reserve(&mut self, want: usize) {
        if self.buf.len() - self.end >= want {
            return;
        }
        self.compact();
        if self.buf.len() - self.end < want {
            self.buf.resize(self.end.saturating_add(want), 0);
        }
    }

    /// Records `n` bytes a read wrote after `end`.
    pub(crate) fn filled(&mut self, n: usize) {
        self.end = self.end.saturating_add(n).min(self.buf.len());
    }

    /// The next complete frame's message, as a range of `buf`, consumed;
    /// `Ok(None)` until one is complete; an error for a header longer than
    /// `max_msg` (the connection cannot continue after it).
    pub(crate) fn next_frame(&mut self, max_msg: usize) -> Result<Option<Range<usize>>, String> {
        let Some(len) = self.header() else {
            self.compact();
            return Ok(None);
        };
        if len > max_msg {
            return Err(format!(
                "a frame header announces {len} bytes, more than GW_TCP_MAX_MSG ({max_msg})"
            ));
        }
        let s = self.start + HEADER;
        let Some(e) = s.checked_add(len).filter(|&e| e <= self.end) else {
            self.compact();
            return Ok(None);
        };
        self.start = e;
        Ok(Some(s..e))
    }

    /// Moves unparsed bytes to the front of the buffer.
    pub(crate) fn compact(&mut self) {
        if self.start == 0 {
            return;
        }
        if self.start == self.end {
            // Everything parsed (the usual case between small messages): nothing to move.
            self.start = 0;
            self.end = 0;
            return;
        }
        self.buf.copy_within(self.start..self.end, 0);
        self.end -= self.start;
        self.start = 0;
        // Give back memory after a very large message, but keep a buffer
        // that fits common large messages: growing it again for every 4 MiB
        // message costs a remap and fresh page faults each time.
        if self.buf.len() > (64 << 20) && self.end < (1 << 20) {
            self.buf.truncate((1 << 20).max(self.end));
            self.buf.shrink_to_fit();
        }
    }
}
