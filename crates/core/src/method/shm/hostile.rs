//! The receiving side of a pair against a hostile producer, for fuzzing
//! (`crate::fuzzing::shm_ring_consumer`): the input is a script of what the
//! producer writes into the pair segment, interleaved with the real consumer
//! (`Incoming::drain`: ring records, eager delivery, reassembly, rendezvous).
//!
//! Script: byte 0 picks the ring size (64 << (b % 6)), byte 1 the starting
//! position the producer publishes (8 * b: misaligned ones must be refused;
//! from 0xf0 on, aligned positions just below 2^64); then
//! operations, each an opcode byte followed by its operands (little-endian;
//! a short input ends the script):
//!
//! | op % 8 | operands                          | effect                                          |
//! |--------|-----------------------------------|-------------------------------------------------|
//! | 0      | off u16, value u64                | raw store anywhere in the segment (headers too) |
//! | 1      | tag u8, len u16, n u8, n bytes    | a sealed record at the producer's position carrying the n bytes, declaring `len` (or n when tag's high bit is set; tag % 8) |
//! | 2      | —                                 | a sealed wrap marker                           |
//! | 3      | total u32, n u8, n bytes          | a first fragment announcing `total`            |
//! | 4      | total u64, n u8, n×(addr u64, len u64) | a rendezvous record (addresses of this process: the copy may fail, never crash) |
//! | 5      | —                                 | the consumer drains                            |
//! | 6      | pos u64                           | the producer jumps to any position             |
//! | 7      | tail u64                          | the consumer's published tail is overwritten   |
//!
//! Bound: the receiver never holds more than `2 * FUZZ_MAX_MSG` bytes of
//! buffers plus the ring size, whatever the script (checked by the harness).

use super::layout::*;
use super::ring::{self, Consumer};
use super::segment::Segment;
use super::{Config, Incoming, Shared, Sink, TAG_FIRST, TAG_RNDV};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

/// `GW_SHM_MAX_MSG` of the fuzzed receiver.
pub const FUZZ_MAX_MSG: usize = 1 << 20;

struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn bytes(&mut self, n: usize) -> Option<&[u8]> {
        let (a, b) = (self.0.get(..n)?, self.0.get(n..)?);
        self.0 = b;
        Some(a)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.bytes(1)?[0])
    }
    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_le_bytes(self.bytes(2)?.try_into().ok()?))
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.bytes(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.bytes(8)?.try_into().ok()?))
    }
}

/// Plays the producer: writes into the data area, masked into bounds (a
/// hostile producer writes what it likes, but only inside its segment).
struct Producer {
    /// The pair segment (owned by the `Incoming`, which outlives us).
    base: *mut u8,
    cap: u64,
    key: u64,
    pos: u64,
}

impl Producer {
    fn data_off(&self, pos: u64) -> usize {
        PAIR_DATA_OFF + (pos & (self.cap - 1)) as usize
    }

    /// Stores `bytes` at ring position `pos`, wrapping at the end of the data area.
    fn put(&self, pos: u64, bytes: &[u8]) {
        for (i, b) in bytes.iter().enumerate() {
            let at = self.data_off(pos.wrapping_add(i as u64));
            // SAFETY: at < PAIR_DATA_OFF + cap = the segment's length.
            unsafe { std::ptr::write_volatile(self.base.add(at), *b) };
        }
    }

    /// A record header at the current position, sealed as a correct producer
    /// would seal it, then the payload; advances by the declared size.
    fn record(&mut self, tag: u32, len: u32, payload: &[u8]) {
        let pos = self.pos & !15;
        self.put(pos.wrapping_add(16), payload);
        self.put(
            pos.wrapping_add(8),
            &((len as u64) | ((tag as u64) << 32)).to_le_bytes(),
        );
        let at = self.data_off(pos);
        // SAFETY: pos is 16-aligned, so the seal word is 8-aligned and inside
        // the data area; the consumer reads it atomically too.
        unsafe { &*(self.base.add(at) as *const AtomicU64) }
            .store(!pos ^ self.key, Ordering::Release);
        let size = if len == u32::MAX {
            self.cap - (pos & (self.cap - 1))
        } else {
            (16 + len as u64 + 63) & !63
        };
        self.pos = pos.wrapping_add(size);
    }
}

struct Count {
    delivered: usize,
    failed: bool,
}

impl Sink for Count {
    fn deliver(&mut self, _src: u32, msg: &[u8]) {
        // Touch every byte: an out-of-bounds slice would show here.
        let sum = msg.iter().fold(0u8, |a, &b| a.wrapping_add(b));
        std::hint::black_box(sum);
        self.delivered += 1;
    }
    fn link_failed(&mut self, _src: u32, reason: String) {
        assert!(!reason.is_empty());
        self.failed = true;
    }
}

/// See the module documentation.
pub fn ring_consumer(data: &[u8]) {
    std::hint::black_box(run(data));
}

/// Runs a script; returns how many messages were delivered and whether the
/// link failed (`None`: too short, or the ring was refused at attach).
pub fn run(data: &[u8]) -> Option<(usize, bool)> {
    let mut inp = Input(data);
    let b0 = inp.u8()?;
    let b1 = inp.u8()?;
    let cap = 64usize << (b0 % 6);
    let seg = Segment::anonymous(PAIR_DATA_OFF + cap).ok()?;
    // Even: `set_key` clears the low bit.
    let key = 0x5eed_5eed_0000_0000u64 | cap as u64;
    // SAFETY: a fresh, unshared pair-sized mapping.
    unsafe { ring::set_key(pair_ring(seg.as_ptr()), key) };
    // The position the ring starts at is the producer's to choose: small
    // ones (misaligned when b1 % 8 != 0), or aligned ones just below 2^64,
    // so the consumer's position wraps around.
    let start = if b1 >= 0xf0 {
        0u64.wrapping_sub((256 - b1 as u64) * 64)
    } else {
        b1 as u64 * 8
    };
    // SAFETY: as above; the tail word is atomic.
    unsafe { &*ring::tail_word(pair_ring(seg.as_ptr())) }.store(start, Ordering::Release);
    // SAFETY: header and data inside the mapping, which `seg` keeps (it
    // outlives `inc`, which holds the consumer: dropped in reverse order).
    let cons = match unsafe {
        Consumer::new(
            pair_ring(seg.as_ptr()),
            seg.as_ptr().add(PAIR_DATA_OFF),
            cap,
        )
    } {
        Ok(c) => c,
        Err(_) => {
            assert!(!start.is_multiple_of(64), "an aligned start was refused");
            return None;
        }
    };
    let shared = Shared {
        cfg: Config {
            cap,
            eager_max: ring::max_payload(cap),
            // Offered to a sink that declines (`place_whole`'s default).
            place_min: 2048,
            pipe_min: usize::MAX,
            cma_min: usize::MAX,
            chunk: (cap / 4).saturating_sub(64).max(1),
            cma: true,
            max_msg: FUZZ_MAX_MSG,
        },
        closed: AtomicBool::new(false),
        pending_links: AtomicUsize::new(0),
        spare: Mutex::new(Vec::new()),
    };
    let mut prod = Producer {
        base: seg.as_ptr(),
        cap: cap as u64,
        key,
        pos: start,
    };
    let base = seg.as_ptr();
    let mut inc = Incoming {
        src: 0,
        pid: std::process::id() as libc::pid_t,
        cons,
        buf: Vec::new(),
        eager: Vec::new(),
        expect: None,
        placing: None,
        failed: false,
        _conn: None,
        seg,
    };
    let mut sink = Count {
        delivered: 0,
        failed: false,
    };
    let bound = 2 * FUZZ_MAX_MSG + cap;
    let drain = |inc: &mut Incoming, sink: &mut Count| {
        inc.drain(sink, &shared);
        let held = inc.buf.capacity() + inc.eager.capacity();
        assert!(held <= bound, "receiver holds {held} bytes (bound {bound})");
    };
    let mut ops = 0;
    while let Some(op) = inp.u8() {
        ops += 1;
        if ops > 4096 {
            break;
        }
        let done = (|| -> Option<()> {
            match op % 8 {
                0 => {
                    let off = (inp.u16()? as usize % (PAIR_DATA_OFF + cap - 7)) & !7;
                    let v = inp.u64()?;
                    // SAFETY: off + 8 <= the segment's length, 8-aligned.
                    unsafe { &*(base.add(off) as *const AtomicU64) }.store(v, Ordering::Release);
                }
                1 => {
                    let tag = inp.u8()?;
                    let len = inp.u16()? as u32;
                    let n = inp.u8()? as usize;
                    let payload = inp.bytes(n)?.to_vec();
                    let len = if tag & 0x80 != 0 { n as u32 } else { len };
                    prod.record(tag as u32 % 8, len, &payload);
                }
                2 => prod.record(0, u32::MAX, &[]),
                3 => {
                    let total = inp.u32()? as u64;
                    let n = inp.u8()? as usize;
                    let mut rec = total.to_le_bytes().to_vec();
                    rec.extend_from_slice(inp.bytes(n)?);
                    prod.record(TAG_FIRST, rec.len() as u32, &rec);
                }
                4 => {
                    let total = inp.u64()?;
                    let n = inp.u8()? as u64 % 4;
                    let mut rec = Vec::new();
                    rec.extend_from_slice(&1u64.to_le_bytes());
                    rec.extend_from_slice(&total.to_le_bytes());
                    rec.extend_from_slice(&n.to_le_bytes());
                    for _ in 0..n {
                        rec.extend_from_slice(&inp.u64()?.to_le_bytes());
                        rec.extend_from_slice(
                            &(inp.u64()? % (2 * FUZZ_MAX_MSG as u64)).to_le_bytes(),
                        );
                    }
                    prod.record(TAG_RNDV, rec.len() as u32, &rec);
                }
                5 => drain(&mut inc, &mut sink),
                6 => prod.pos = inp.u64()?,
                _ => {
                    let t = inp.u64()?;
                    // SAFETY: the tail word is atomic, inside the mapping.
                    unsafe { &*ring::tail_word(pair_ring(base)) }.store(t, Ordering::Release);
                }
            }
            Some(())
        })();
        if done.is_none() {
            break;
        }
    }
    drain(&mut inc, &mut sink);
    Some((sink.delivered, sink.failed))
}
