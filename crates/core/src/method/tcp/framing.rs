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
    pub(crate) fn header(&self) -> Option<usize> {
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

/// The fuzz target behind [`crate::fuzzing::tcp_frames`]: the frame parser
/// of an authenticated connection, fed `data` as a peer's byte stream.
///
/// `data[0]` picks `GW_TCP_MAX_MSG` (16 B to 8 MiB), `data[1]` the size of
/// the reads that deliver the rest (1 B up to a full offer), and the rest is
/// the stream. Reads follow the connection's own rule (`room_wanted`,
/// `reserve`), frames are taken as `process` takes them, and the first
/// framing error ends the stream as it ends the link. Bound checked: the
/// buffer never exceeds twice the bytes fed plus twice `MIN_READ`.
pub(crate) fn fuzz_stream(data: &[u8]) {
    let [pick_max, pick_read, stream @ ..] = data else {
        return;
    };
    let max_msg = 16usize << (pick_max % 20);
    let read_size = match pick_read {
        0 => usize::MAX,
        n => 1usize << (n % 24),
    };
    let mut rx = RxBuf::default();
    let mut fed = 0usize;
    let mut frames = 0usize;
    while fed < stream.len() {
        let want = rx.room_wanted(true, max_msg);
        rx.reserve(want);
        let end = rx.end;
        let room = &mut rx.buf[end..];
        let n = room.len().min(read_size).min(stream.len() - fed);
        room[..n].copy_from_slice(&stream[fed..fed + n]);
        rx.filled(n);
        fed += n;
        assert!(
            rx.buf.len() <= 2 * fed + 2 * MIN_READ,
            "receive buffer of {} bytes after {fed} bytes fed",
            rx.buf.len()
        );
        loop {
            match rx.next_frame(max_msg) {
                Ok(Some(msg)) => {
                    assert!(msg.len() <= max_msg && msg.end <= rx.end);
                    // What `process` hands the sink.
                    std::hint::black_box(&rx.buf[msg]);
                    frames += 1;
                }
                Ok(None) => break,
                Err(_) => return,
            }
        }
    }
    assert!(frames <= stream.len() / HEADER);
}
