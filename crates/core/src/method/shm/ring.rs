//! A lock-free single-producer/single-consumer ring of variable-length records
//! in a caller-provided memory region (a shared-memory segment in practice).
//!
//! Layout of the region: a [`RingHeader`] (the consumer's `tail`, alone on its
//! cache line), then `cap` data bytes (`cap` a power of two, 16-aligned).
//! Positions are monotonic byte counters; `pos & (cap - 1)` is the offset in
//! the data area.
//!
//! A record is a 16-byte header — a *seal* `!pos ^ key` (u64), then `len: u32` and
//! `tag: u32` — followed by `len` payload bytes, padded to a 64-byte cache
//! line (see [`ALIGN`] for why). Records never
//! straddle the end of the data area: when a record does not fit in what is
//! left before the end, the producer writes a wrap marker (`len == u32::MAX`)
//! and starts the record at offset 0. So the consumer can hand a record to its
//! handler in place, as one contiguous slice.
//!
//! Why a seal rather than a shared `head` counter: the consumer polls the word
//! where the next record will start, and a small record's payload sits on that
//! same cache line, so a message costs one cache-line transfer instead of two
//! (head line, then data line) — the difference between ~1x and ~2x the
//! hardware floor for a ping-pong. The seal is the record's absolute position
//! (inverted so that zeroed memory never looks sealed) mixed with a random
//! per-ring key; whatever an earlier lap left at that offset is either an older
//! seal (a different position) or payload bytes, which would have to guess the
//! key to spell out a valid seal (user data such as small negative integers
//! could otherwise match `!pos` by accident).
//!
//! Ordering: the producer writes the length, tag and payload, then stores the
//! seal with Release; the consumer loads the seal with Acquire and only then
//! reads the rest. The consumer publishes `tail` with Release after it is done
//! with a record; the producer loads `tail` with Acquire before reusing that
//! space, and only when its cached copy says the ring is full, so a steady
//! stream does not bounce the tail line per record.
//!
//! Neither side trusts the other (it may be another process, hostile, or dead
//! in the middle of anything). The consumer reads each header word once into a
//! local, checks the length against the ring, and never hands out a Rust
//! reference into the ring: a [`Record`] is copied out ([`Record::copy_to`])
//! before anyone looks at it, so a producer rewriting a record under us can
//! change the bytes we copy but not break a check already made. The producer
//! checks the consumer's `tail` (it only moves forward, never past `head`)
//! before computing free space from it. An inconsistency is reported as
//! [`Corrupt`], never a panic.

use std::io::IoSlice;
use std::sync::atomic::{AtomicU64, Ordering};

/// Size of the record header (seal, then length and tag).
pub const REC_HDR: usize = 16;
/// Alignment of records: a cache line. A record of up to 64 bytes (an 8-byte
/// MPI message with its headers) then always sits on one line, so the
/// consumer waits for one line transfer, never two; with 16-byte alignment
/// half of the 48-byte records straddled two lines, and an MPI ping-pong of
/// 0 bytes took 5-8% longer (bench/mpi/osu.c latency). The cost: records
/// shorter than a line no longer share one, so a stream of tiny messages
/// moves more lines per message. (Also: a 16-byte wrap marker always fits
/// before the end.)
pub(crate) const ALIGN: u64 = 64;
/// `len` value of a wrap marker.
const WRAP: u32 = u32::MAX;

/// One counter alone on a cache line (128 bytes: adjacent-line prefetchers
/// pull pairs of 64-byte lines on x86, so 64 would still share in practice).
#[repr(C, align(128))]
struct Line {
    v: AtomicU64,
}

/// The shared control words of a ring; lives at the start of the region.
/// Zeroed memory plus [`set_key`] makes an empty ring at position 0.
#[repr(C)]
pub struct RingHeader {
    /// Seal key, written once by the ring's creator before it is shared.
    key: Line,
    tail: Line,
}

/// Sets the seal key of a fresh ring (the low bit is cleared, so that zeroed
/// memory never carries a valid seal).
///
/// # Safety
/// `hdr` must point to a valid, 128-aligned [`RingHeader`] that no producer or
/// consumer uses yet.
pub unsafe fn set_key(hdr: *const RingHeader, key: u64) {
    // SAFETY: per the contract.
    unsafe { &*hdr }.key.v.store(key & !1, Ordering::Release);
}

/// The consumer's `tail` word of a ring (for tests and the fuzz harness,
/// which play a hostile peer).
///
/// # Safety
/// `hdr` must point to a valid [`RingHeader`].
pub unsafe fn tail_word(hdr: *const RingHeader) -> *const AtomicU64 {
    // SAFETY: per the contract (a projection, no reference made).
    unsafe { std::ptr::addr_of!((*hdr).tail.v) }
}

/// Bytes taken by the header; the data area must start at least this far in.
#[cfg(test)]
pub const HEADER_BYTES: usize = std::mem::size_of::<RingHeader>();

/// The largest payload a ring of `cap` data bytes accepts. Half the ring (minus
/// the header) guarantees that a record always fits once the ring drains,
/// whatever the wrap position: the bytes skipped by a wrap marker are fewer
/// than the record itself.
pub const fn max_payload(cap: usize) -> usize {
    cap / 2 - REC_HDR
}

const fn align(n: u64) -> u64 {
    (n + ALIGN - 1) & !(ALIGN - 1)
}

/// The seal of a record at absolute position `pos`.
const fn seal(pos: u64, key: u64) -> u64 {
    !pos ^ key
}

/// The consumer found bytes that no correct producer writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Corrupt(pub String);

impl std::fmt::Display for Corrupt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "corrupt shared-memory ring: {}", self.0)
    }
}

/// The writing side. Exactly one `Producer` may exist per ring, for its whole
/// life (the write position is not stored in shared memory).
pub struct Producer {
    hdr: *const RingHeader,
    data: *mut u8,
    cap: u64,
    key: u64,
    head: u64,
    cached_tail: u64,
    /// Sticky: the consumer published an impossible `tail`.
    corrupt: bool,
}

// SAFETY: the producer only holds pointers into a region whose lifetime the
// owner (the segment mapping) guarantees; moving it to another thread is fine
// as long as there is one producer, which `&mut self` methods enforce.
unsafe impl Send for Producer {}

impl Producer {
    /// Attaches the producer side to a fresh ring.
    ///
    /// # Safety
    /// `hdr` must point to a zeroed [`RingHeader`] (128-aligned, key set by
    /// [`set_key`]) and `data` to `cap` zeroed writable bytes (16-aligned, `cap` a power of two ≥ 64),
    /// both valid for the producer's lifetime; no other producer may ever
    /// exist for the ring.
    pub unsafe fn new(hdr: *const RingHeader, data: *mut u8, cap: usize) -> Self {
        assert!(cap.is_power_of_two() && cap >= 64 && (data as usize) & 15 == 0);
        // SAFETY: hdr is valid per the contract.
        let h = unsafe { &*hdr };
        let key = h.key.v.load(Ordering::Acquire);
        let tail = h.tail.v.load(Ordering::Acquire);
        Producer {
            hdr,
            data,
            cap: cap as u64,
            key,
            head: tail,
            cached_tail: tail,
            corrupt: false,
        }
    }

    fn header(&self) -> &RingHeader {
        // SAFETY: valid for our lifetime per the constructor's contract.
        unsafe { &*self.hdr }
    }

    /// Largest payload [`Self::try_push`] accepts.
    pub fn max_payload(&self) -> usize {
        max_payload(self.cap as usize)
    }

    /// Writes the header at data offset `off` for position `pos` and seals it.
    ///
    /// # Safety
    /// `[off, off+16)` must be inside the data area, 16-aligned and free, and
    /// the payload (if any) already written after it.
    unsafe fn seal_at(&self, off: u64, pos: u64, len: u32, tag: u32) {
        // SAFETY: per the contract; the seal word is 8-aligned for the atomic.
        unsafe {
            let at = self.data.add(off as usize);
            std::ptr::write(
                at.add(8) as *mut u64,
                ((len as u64) | ((tag as u64) << 32)).to_le(),
            );
            (*(at as *const AtomicU64)).store(seal(pos, self.key), Ordering::Release);
        }
    }

    /// Appends one record made of `iov` (concatenated) with `tag`, all or
    /// nothing. Returns `Ok(false)` when the ring has no room now, an error
    /// once the consumer has published an impossible position.
    ///
    /// Panics if the payload exceeds [`Self::max_payload`] (a caller bug: it
    /// could never fit).
    pub fn try_push(&mut self, tag: u32, iov: &[IoSlice<'_>]) -> Result<bool, Corrupt> {
        let len: usize = iov.iter().map(|s| s.len()).sum();
        self.try_push_len(tag, iov, len)
    }

    /// Loads the consumer's `tail` and checks it: it never moves back and
    /// never passes what we wrote, so `head - tail <= cap` holds after it.
    #[cold]
    fn reload_tail(&mut self) -> Result<(), Corrupt> {
        let tail = self.header().tail.v.load(Ordering::Acquire);
        if tail < self.cached_tail || tail > self.head || !tail.is_multiple_of(ALIGN) {
            self.corrupt = true;
            return Err(self.corrupt_error(tail));
        }
        self.cached_tail = tail;
        Ok(())
    }

    #[cold]
    fn corrupt_error(&self, tail: u64) -> Corrupt {
        Corrupt(format!(
            "the consumer published position {tail} (we wrote up to {}, it had reached {})",
            self.head, self.cached_tail
        ))
    }

    /// [`Self::try_push`] for a caller that has already summed the parts
    /// (`len` must be their total; checked in debug builds).
    #[inline(always)]
    pub fn try_push_len(
        &mut self,
        tag: u32,
        iov: &[IoSlice<'_>],
        len: usize,
    ) -> Result<bool, Corrupt> {
        debug_assert_eq!(len, iov.iter().map(|s| s.len()).sum::<usize>());
        assert!(
            len <= self.max_payload(),
            "record of {len} bytes exceeds the ring's maximum"
        );
        if self.corrupt {
            return Err(self.corrupt_error(self.cached_tail));
        }
        let total = align((REC_HDR + len) as u64);
        let off = self.head & (self.cap - 1);
        let to_end = self.cap - off;
        let need = if total <= to_end {
            total
        } else {
            to_end + total
        };
        // cached_tail <= head and head - cached_tail <= cap always hold (checked
        // on every reload), so this cannot underflow.
        if self.cap - (self.head - self.cached_tail) < need {
            self.reload_tail()?;
            if self.cap - (self.head - self.cached_tail) < need {
                return Ok(false);
            }
        }
        let mut off = off;
        if total > to_end {
            // SAFETY: off is 16-aligned and < cap, so 16 bytes fit before the
            // end; [head, head+need) is free (checked against tail above).
            unsafe { self.seal_at(off, self.head, WRAP, 0) };
            self.head += to_end;
            off = 0;
        }
        // SAFETY: [off, off+total) lies inside the data area (total ≤ to_end,
        // or off == 0 and total ≤ cap) and is free; the seal goes last.
        unsafe {
            let mut dst = self.data.add(off as usize + REC_HDR);
            for s in iov {
                copy_small_or_large(s.as_ptr(), dst, s.len());
                dst = dst.add(s.len());
            }
            self.seal_at(off, self.head, len as u32, tag);
        }
        self.head += total;
        Ok(true)
    }

    /// Whether records of payloads `lens` fit the ring now, pushed one
    /// after another (wherever the ring wraps). Reloads the tail only when
    /// the cached one says no.
    pub fn has_room_for(
        &mut self,
        lens: impl Iterator<Item = usize> + Clone,
    ) -> Result<bool, Corrupt> {
        if self.corrupt {
            return Err(self.corrupt_error(self.cached_tail));
        }
        // Each record with its header and padding, and one wrap marker's
        // waste: less than the largest record.
        let mut need = 0u64;
        let mut largest = 0u64;
        for len in lens {
            let total = align((REC_HDR + len) as u64);
            need += total;
            largest = largest.max(total);
        }
        need += largest;
        if self.cap - (self.head - self.cached_tail) >= need {
            return Ok(true);
        }
        self.reload_tail()?;
        Ok(self.cap - (self.head - self.cached_tail) >= need)
    }

    /// Whether the consumer has taken every record (reloads the tail; a
    /// consumer that published garbage has not).
    #[cfg(test)]
    pub fn is_drained(&mut self) -> bool {
        self.reload_tail().is_ok() && self.cached_tail == self.head
    }
}

/// `copy_nonoverlapping`, with the short copies of small messages (headers,
/// 8-byte payloads) inlined: a call to `memcpy` per iovec part costs more
/// than the copy itself on the latency path.
///
/// # Safety
/// As for `copy_nonoverlapping`: `src` readable and `dst` writable for `n`
/// bytes, not overlapping.
#[inline(always)]
unsafe fn copy_small_or_large(src: *const u8, dst: *mut u8, n: usize) {
    // SAFETY: every access below stays within [0, n) of both ranges (for
    // 8 <= n <= 16 the two 8-byte words, for 16 < n <= 32 the two 16-byte
    // words, for 32 < n <= 64 the two 32-byte halves, overlap rather than
    // overrun), and the unaligned reads/writes
    // need no alignment.
    unsafe {
        if n > 32 && n <= 64 {
            // A 1-32 byte MPI message with its envelope and the runtime's
            // header (the whole record the receiver copies out): two
            // overlapping 32-byte halves, no call to memcpy.
            let a = std::ptr::read_unaligned(src as *const [u128; 2]);
            let b = std::ptr::read_unaligned(src.add(n - 32) as *const [u128; 2]);
            std::ptr::write_unaligned(dst as *mut [u128; 2], a);
            std::ptr::write_unaligned(dst.add(n - 32) as *mut [u128; 2], b);
        } else if n > 16 && n <= 32 {
            // MPI's 24-byte envelope.
            let a = std::ptr::read_unaligned(src as *const u128);
            let b = std::ptr::read_unaligned(src.add(n - 16) as *const u128);
            std::ptr::write_unaligned(dst as *mut u128, a);
            std::ptr::write_unaligned(dst.add(n - 16) as *mut u128, b);
        } else if (8..=16).contains(&n) {
            let a = std::ptr::read_unaligned(src as *const u64);
            let b = std::ptr::read_unaligned(src.add(n - 8) as *const u64);
            std::ptr::write_unaligned(dst as *mut u64, a);
            std::ptr::write_unaligned(dst.add(n - 8) as *mut u64, b);
        } else if n < 8 {
            for i in 0..n {
                *dst.add(i) = *src.add(i);
            }
        } else {
            std::ptr::copy_nonoverlapping(src, dst, n);
        }
    }
}

/// One record found by [`Consumer::peek`]: its tag and where its payload
/// lies in the ring. Not a slice: the producer can still write those bytes, so
/// they are only ever copied out ([`Self::copy_to`], [`Self::append_to`]).
pub struct Record<'a> {
    pub tag: u32,
    ptr: *const u8,
    len: usize,
    _ring: std::marker::PhantomData<&'a Consumer>,
}

impl Record<'_> {
    pub fn len(&self) -> usize {
        self.len
    }

    /// Copies payload bytes `[from, from + dst.len())` into `dst`; `false`
    /// (nothing copied) when that range is not inside the payload.
    pub fn copy_to(&self, from: usize, dst: &mut [u8]) -> bool {
        if from > self.len || dst.len() > self.len - from {
            return false;
        }
        // SAFETY: the range lies inside the payload, which `peek` checked lies
        // inside the mapped data area, mapped as long as the consumer that
        // this record borrows; `dst` is our own memory, so they cannot
        // overlap. The producer may write the source concurrently (a hostile
        // one): we then copy whatever bytes it wrote, and nothing depends on
        // them having any particular value.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.add(from), dst.as_mut_ptr(), dst.len()) };
        true
    }

    /// Copies payload bytes `[from, from + n)` to `dst`; `false` (nothing
    /// copied) when that range is not inside the payload. For a
    /// destination that is not ours to borrow as a slice (a receive buffer
    /// a placement named: `method::Destination`).
    ///
    /// # Safety
    /// `dst` is valid for writes of `n` bytes and does not overlap the ring.
    pub unsafe fn copy_to_raw(&self, from: usize, dst: *mut u8, n: usize) -> bool {
        if from > self.len || n > self.len - from {
            return false;
        }
        // SAFETY: the source range lies inside the payload (checked above),
        // mapped as long as the consumer this record borrows; the
        // destination is the caller's (contract). A producer writing the
        // source meanwhile changes only which bytes arrive, as in `copy_to`.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.add(from), dst, n) };
        true
    }

    /// Appends payload bytes `[from, len)` to `v` (which grows by exactly that).
    #[inline]
    pub fn append_to(&self, from: usize, v: &mut Vec<u8>) -> bool {
        let Some(n) = self.len.checked_sub(from) else {
            return false;
        };
        v.reserve(n);
        let old = v.len();
        // SAFETY: as in `copy_to` for the source; the destination is the
        // spare capacity just reserved, fully written before the length grows.
        // (The small-message case: short copies inlined, as on the send side.)
        unsafe {
            copy_small_or_large(self.ptr.add(from), v.as_mut_ptr().add(old), n);
            v.set_len(old + n);
        }
        true
    }

    /// The payload, copied.
    #[cfg(test)]
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::new();
        self.append_to(0, &mut v);
        v
    }
}

/// The reading side. Exactly one `Consumer` may exist per ring.
pub struct Consumer {
    hdr: *const RingHeader,
    data: *const u8,
    cap: u64,
    key: u64,
    tail: u64,
    /// Size of the record returned by the last `peek`, consumed by `pop`.
    pending: u64,
}

// SAFETY: as for `Producer`: pointers into a region kept alive by the owner;
// one consumer, enforced by `&mut self`.
unsafe impl Send for Consumer {}

impl Consumer {
    /// Attaches the consumer side to a ring whose header the producer wrote
    /// (its starting position is checked: a misaligned one is [`Corrupt`]).
    ///
    /// # Safety
    /// `hdr` must point to a 128-aligned [`RingHeader`] and `data` to `cap`
    /// readable bytes (16-aligned, `cap` a power of two ≥ 64), both valid for
    /// the consumer's lifetime; no other consumer may exist for the ring.
    pub unsafe fn new(
        hdr: *const RingHeader,
        data: *const u8,
        cap: usize,
    ) -> Result<Self, Corrupt> {
        assert!(cap.is_power_of_two() && cap >= 64 && (data as usize) & 15 == 0);
        // SAFETY: hdr is valid per the contract; its words are atomics.
        let h = unsafe { &*hdr };
        let key = h.key.v.load(Ordering::Acquire);
        let tail = h.tail.v.load(Ordering::Acquire);
        if !tail.is_multiple_of(ALIGN) {
            return Err(Corrupt(format!(
                "ring starts at misaligned position {tail}"
            )));
        }
        Ok(Consumer {
            hdr,
            data,
            cap: cap as u64,
            key,
            tail,
            pending: 0,
        })
    }

    fn header(&self) -> &RingHeader {
        // SAFETY: valid for our lifetime per the constructor's contract; the
        // header holds only atomics, so a shared reference is sound even while
        // the producer writes it.
        unsafe { &*self.hdr }
    }

    /// The next record, without consuming it; `None` when the ring is empty.
    /// Call [`Self::pop`] when done with it.
    pub fn peek(&mut self) -> Result<Option<Record<'_>>, Corrupt> {
        loop {
            // Our own position: 64-aligned (checked at attach, and every step
            // adds an aligned record size or the distance to the end).
            let off = self.tail & (self.cap - 1);
            // SAFETY: off < cap and 64-aligned, inside the data area.
            let at = unsafe { self.data.add(off as usize) };
            // SAFETY: an aligned u64 inside the mapping, only ever accessed
            // atomically by the producer.
            let sealed = unsafe { &*(at as *const AtomicU64) }.load(Ordering::Acquire);
            if sealed != seal(self.tail, self.key) {
                return Ok(None);
            }
            // Read once into a local: every decision below uses this copy,
            // whatever the producer writes there meanwhile.
            // SAFETY: off + 16 <= cap (off is 64-aligned, cap ≥ 64), inside
            // the mapping; a volatile read of plain bytes, any value is valid.
            let word = u64::from_le(unsafe { std::ptr::read_volatile(at.add(8) as *const u64) });
            let len = word as u32;
            let tag = (word >> 32) as u32;
            if len == WRAP {
                // Positions count modulo 2^64: the producer chose where the
                // ring starts, possibly just below the top.
                self.tail = self.tail.wrapping_add(self.cap - off);
                self.header().tail.v.store(self.tail, Ordering::Release);
                continue;
            }
            let total = align(REC_HDR as u64 + len as u64);
            if len as usize > max_payload(self.cap as usize) || off + total > self.cap {
                return Err(Corrupt(format!(
                    "record length {len} at offset {off} does not fit the ring"
                )));
            }
            self.pending = total;
            return Ok(Some(Record {
                tag,
                // SAFETY: off + 16 <= cap, inside the data area.
                ptr: unsafe { at.add(REC_HDR) },
                len: len as usize,
                _ring: std::marker::PhantomData,
            }));
        }
    }

    /// Whether a record (or a wrap marker) is waiting, without taking it.
    pub fn ready(&self) -> bool {
        let off = self.tail & (self.cap - 1);
        // SAFETY: as in `peek`: an aligned u64 inside the data area, only
        // ever accessed atomically by the producer.
        let sealed =
            unsafe { &*(self.data.add(off as usize) as *const AtomicU64) }.load(Ordering::Acquire);
        sealed == seal(self.tail, self.key)
    }

    /// Consumes the record returned by the last [`Self::peek`], giving its
    /// space back to the producer.
    pub fn pop(&mut self) {
        debug_assert!(self.pending != 0, "pop without peek");
        self.tail = self.tail.wrapping_add(self.pending);
        self.pending = 0;
        self.header().tail.v.store(self.tail, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::alloc::{alloc_zeroed, dealloc, Layout};
    use std::collections::VecDeque;

    /// A heap region laid out like a segment: header, then data.
    struct Region {
        ptr: *mut u8,
        layout: Layout,
        cap: usize,
    }
    // SAFETY: plain heap memory; the ring protocol orders the accesses.
    unsafe impl Send for Region {}
    unsafe impl Sync for Region {}

    impl Region {
        fn new(cap: usize) -> Region {
            let layout = Layout::from_size_align(HEADER_BYTES + cap, 128).unwrap();
            // SAFETY: non-zero size.
            let ptr = unsafe { alloc_zeroed(layout) };
            assert!(!ptr.is_null());
            // SAFETY: fresh, aligned, unshared.
            unsafe { set_key(ptr as *const RingHeader, 0x5eed_0000_1234_5678 ^ cap as u64) };
            Region { ptr, layout, cap }
        }
        fn producer(&self) -> Producer {
            // SAFETY: region outlives the test's producer; one producer per test.
            unsafe {
                Producer::new(
                    self.ptr as *const RingHeader,
                    self.ptr.add(HEADER_BYTES),
                    self.cap,
                )
            }
        }
        fn consumer(&self) -> Consumer {
            // SAFETY: as above, one consumer.
            unsafe {
                Consumer::new(
                    self.ptr as *const RingHeader,
                    self.ptr.add(HEADER_BYTES),
                    self.cap,
                )
            }
            .unwrap()
        }
    }
    impl Drop for Region {
        fn drop(&mut self) {
            // SAFETY: allocated with this layout.
            unsafe { dealloc(self.ptr, self.layout) }
        }
    }

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    fn tp(p: &mut Producer, tag: u32, iov: &[IoSlice<'_>]) -> bool {
        p.try_push(tag, iov).unwrap()
    }

    fn pk(c: &mut Consumer) -> Option<(u32, Vec<u8>)> {
        c.peek().unwrap().map(|r| (r.tag, r.to_vec()))
    }

    fn pattern(seq: u64, len: usize) -> Vec<u8> {
        (0..len)
            .map(|i| (seq.wrapping_mul(31).wrapping_add(i as u64 * 7)) as u8)
            .collect()
    }

    #[test]
    fn push_peek_pop_gathered() {
        let r = Region::new(256);
        let (mut p, mut c) = (r.producer(), r.consumer());
        assert_eq!(pk(&mut c), None);
        assert!(tp(
            &mut p,
            7,
            &[
                IoSlice::new(b"hello "),
                IoSlice::new(b""),
                IoSlice::new(b"world")
            ]
        ));
        assert!(tp(&mut p, 9, &[]));
        let (tag, rec) = pk(&mut c).unwrap();
        assert_eq!((tag, &rec[..]), (7, &b"hello world"[..]));
        // peek is idempotent until pop
        assert_eq!(pk(&mut c).unwrap().1, b"hello world");
        c.pop();
        assert_eq!(pk(&mut c).unwrap(), (9, vec![]));
        c.pop();
        assert_eq!(pk(&mut c), None);
        assert!(p.is_drained());
    }

    #[test]
    fn full_then_wrap() {
        let r = Region::new(128);
        let (mut p, mut c) = (r.producer(), r.consumer());
        let big = [1u8; 48]; // max payload for 128: 48 → 64-byte record
        assert_eq!(p.max_payload(), 48);
        assert!(tp(&mut p, 1, &[IoSlice::new(&big[..32])])); // 48 bytes
        assert!(tp(&mut p, 2, &[IoSlice::new(&big[..32])])); // 96
        assert!(
            !tp(&mut p, 3, &[IoSlice::new(&big[..32])]),
            "ring should be full"
        );
        pk(&mut c).unwrap();
        c.pop();
        // 32 bytes to the end, 48 freed at the start: a wrap needs 32 + 48 = 80, exactly free
        assert!(tp(&mut p, 3, &[IoSlice::new(&big[..32])]));
        assert_eq!(pk(&mut c).unwrap().0, 2);
        c.pop();
        let (tag, rec) = pk(&mut c).unwrap();
        assert_eq!((tag, rec.len()), (3, 32));
        c.pop();
        assert!(p.is_drained());
        // a maximal record always fits into a drained ring, whatever the position
        for _ in 0..5 {
            assert!(tp(&mut p, 4, &[IoSlice::new(&big)]));
            assert_eq!(pk(&mut c).unwrap().1, &big[..]);
            c.pop();
            assert!(tp(&mut p, 5, &[IoSlice::new(&big[..3])]));
            pk(&mut c).unwrap();
            c.pop();
        }
    }

    #[test]
    fn corrupt_length_is_reported() {
        let r = Region::new(128);
        let (mut p, mut c) = (r.producer(), r.consumer());
        assert!(tp(&mut p, 1, &[IoSlice::new(b"abc")]));
        // SAFETY: single-threaded test; overwrite the sealed record's length with garbage.
        unsafe { std::ptr::write(r.ptr.add(HEADER_BYTES + 8) as *mut u64, 1_000_000) };
        assert!(c.peek().is_err());
    }

    /// Writes the consumer's `tail` word as a hostile consumer would.
    fn write_tail(r: &Region, v: u64) {
        // SAFETY: test only; the header is ours and the tail word is atomic.
        unsafe { &*(r.ptr as *const RingHeader) }
            .tail
            .v
            .store(v, Ordering::Release);
    }

    /// A consumer that publishes a position ahead of what was written (tail >
    /// head), behind its last one, or misaligned makes the producer fail, not
    /// underflow into a huge free space (and overwrite unread records).
    #[test]
    fn impossible_tail_is_an_error() {
        for bad in [1 << 40, 64 * 5, 8] {
            let r = Region::new(256);
            let mut p = r.producer();
            assert!(tp(&mut p, 1, &[IoSlice::new(&[0u8; 100])]));
            assert!(tp(&mut p, 1, &[IoSlice::new(&[0u8; 40])]));
            write_tail(&r, bad);
            // The ring is full as far as the producer knows: it reloads the tail.
            let e = p.try_push(2, &[IoSlice::new(&[0u8; 100])]);
            assert!(e.is_err(), "tail {bad} accepted: {e:?}");
            // and it stays failed, even once the tail looks sane again
            write_tail(&r, 0);
            assert!(p.try_push(2, &[]).is_err());
            assert!(!p.is_drained());
        }
        // backwards
        let r = Region::new(256);
        let (mut p, mut c) = (r.producer(), r.consumer());
        assert!(tp(&mut p, 1, &[IoSlice::new(&[0u8; 100])]));
        assert!(pk(&mut c).is_some());
        c.pop();
        assert!(p.is_drained());
        write_tail(&r, 0);
        // noticed when the producer next needs the tail (the ring looks full)
        let results: Vec<_> = (0..4)
            .map(|_| p.try_push(1, &[IoSlice::new(&[0u8; 100])]))
            .collect();
        assert!(results.iter().any(|r| r.is_err()), "{results:?}");
    }

    /// A ring handed over with a misaligned starting position is refused.
    #[test]
    fn misaligned_start_is_refused() {
        let r = Region::new(256);
        write_tail(&r, 8);
        // SAFETY: as in Region::consumer.
        let c =
            unsafe { Consumer::new(r.ptr as *const RingHeader, r.ptr.add(HEADER_BYTES), r.cap) };
        assert!(c.is_err());
    }

    #[test]
    fn stale_bytes_are_not_records() {
        // Fill the ring with payload, drain it, and check an empty ring stays
        // empty although every offset holds old bytes.
        let r = Region::new(256);
        let (mut p, mut c) = (r.producer(), r.consumer());
        for i in 0..50u32 {
            let n = (i as usize * 13) % 100;
            assert!(tp(&mut p, i, &[IoSlice::new(&vec![0xffu8; n])]));
            assert_eq!(pk(&mut c).unwrap().0, i);
            c.pop();
            assert_eq!(pk(&mut c), None);
        }
    }

    /// Property test: random pushes/pops against a `VecDeque` model.
    #[test]
    fn matches_model() {
        for seed in 1..40u64 {
            let cap = 64 << (seed % 5);
            let r = Region::new(cap);
            let (mut p, mut c) = (r.producer(), r.consumer());
            let mut model: VecDeque<(u32, Vec<u8>)> = VecDeque::new();
            let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let mut used = 0u64; // bytes in flight as the producer sees them, upper bound check
            for step in 0..3000u64 {
                if rng.below(2) == 0 {
                    let len = rng.below(p.max_payload() as u64 + 1) as usize;
                    let data = pattern(step, len);
                    let split = rng.below(len as u64 + 1) as usize;
                    let ok = tp(
                        &mut p,
                        step as u32,
                        &[IoSlice::new(&data[..split]), IoSlice::new(&data[split..])],
                    );
                    if ok {
                        model.push_back((step as u32, data));
                        used += 1;
                    } else {
                        // a refusal is only allowed when the ring is not empty
                        assert!(
                            !model.is_empty(),
                            "refused a record into an empty ring (seed {seed})"
                        );
                    }
                } else {
                    let got = pk(&mut c);
                    assert_eq!(got, model.front().cloned(), "seed {seed} step {step}");
                    if got.is_some() {
                        c.pop();
                        model.pop_front();
                    }
                }
            }
            assert!(used > 0);
        }
    }

    /// Two threads, random sizes, wrap-around, checksums and sequence numbers.
    #[test]
    fn two_thread_stress() {
        const N: u64 = 200_000;
        let r = std::sync::Arc::new(Region::new(4096));
        let mut p = r.producer();
        let mut c = r.consumer();
        let prod = std::thread::spawn(move || {
            let mut rng = Rng(0x1234_5678);
            let mut buf = vec![0u8; p.max_payload()];
            for seq in 0..N {
                let len = 8 + rng.below(if seq % 64 == 0 {
                    p.max_payload() as u64 - 7
                } else {
                    120
                }) as usize;
                buf[..8].copy_from_slice(&seq.to_le_bytes());
                for (i, b) in buf[8..len].iter_mut().enumerate() {
                    *b = (seq as usize ^ i) as u8;
                }
                let sum: u32 = buf[..len].iter().map(|&b| b as u32).sum();
                while !tp(&mut p, sum, &[IoSlice::new(&buf[..len])]) {
                    std::hint::spin_loop();
                }
            }
        });
        let mut seq = 0u64;
        while seq < N {
            match pk(&mut c) {
                None => std::hint::spin_loop(),
                Some((sum, rec)) => {
                    assert_eq!(u64::from_le_bytes(rec[..8].try_into().unwrap()), seq);
                    assert_eq!(
                        rec.iter().map(|&b| b as u32).sum::<u32>(),
                        sum,
                        "checksum of record {seq}"
                    );
                    c.pop();
                    seq += 1;
                }
            }
        }
        prod.join().unwrap();
        assert_eq!(pk(&mut c), None);
    }
}
