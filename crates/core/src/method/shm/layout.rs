//! The bytes of a pair segment (a sealed memfd created by the sender `src`
//! and handed to the receiver `dst`, see `handoff`):
//!
//! ```text
//!    0  PairIdent  magic, src, dst, sender pid, ring capacity, CMA probe address/value
//!  128  RxState    cma (0 unknown, 1 usable, 2 not), attached, closed — written by the receiver
//!  256  done       AtomicU64: last rendezvous token the receiver has copied
//!  384  RingHeader tail (its own line; records carry their own seals, see `ring`)
//! 4096  ring data  `cap` bytes
//! ```

use super::ring::RingHeader;
use std::sync::atomic::{AtomicU32, AtomicU64};

pub const PAIR_MAGIC: u64 = u64::from_le_bytes(*b"GWSHMPR1");

/// A value alone on its (pair of) cache line(s).
#[repr(C, align(128))]
pub struct Padded<T>(pub T);

#[repr(C)]
#[derive(Clone, Copy)]
pub struct PairIdent {
    pub magic: u64,
    pub src: u32,
    pub dst: u32,
    pub pid: u32,
    pub _r: u32,
    pub cap: u64,
    pub probe_addr: u64,
    pub probe_val: u64,
}

pub const CMA_UNKNOWN: u32 = 0;
pub const CMA_OK: u32 = 1;
pub const CMA_NO: u32 = 2;

#[repr(C)]
pub struct RxState {
    pub cma: AtomicU32,
    pub attached: AtomicU32,
    pub closed: AtomicU32,
    /// 1 while the receiver sleeps (or is about to): the sender rings its
    /// bell after a record (see `doorbell`). The sender may clear it.
    pub sleeping: AtomicU32,
}

#[repr(C)]
pub struct PairHeader {
    pub ident: Padded<PairIdent>,
    pub rx: Padded<RxState>,
    pub done: Padded<AtomicU64>,
    pub ring: RingHeader,
}

/// Offset of the ring data in a pair segment (page-aligned).
pub const PAIR_DATA_OFF: usize = 4096;
const _: () = assert!(std::mem::size_of::<PairHeader>() <= PAIR_DATA_OFF);

// Access to segment words. A peer can write every byte of a segment at any
// time, so no Rust reference ever covers a plain (non-atomic) field of one:
// the identity blocks are copied out once with a volatile read and checked as
// a local copy, and references are only made to atomics (whose concurrent
// modification is sound). Each accessor's contract: `base` is the start of a
// live mapping of a pair segment (at least `PAIR_DATA_OFF` bytes), valid and 128-aligned (mmap: page-aligned) for `'a`.

/// A copy of a pair segment's identity block, read once.
///
/// # Safety
/// See above (pair segment).
pub unsafe fn read_pair_ident(base: *const u8) -> PairIdent {
    // SAFETY: in bounds and aligned per the contract; PairIdent is plain
    // integers, so whatever bytes a peer left there form a valid value.
    unsafe { std::ptr::read_volatile(base as *const PairIdent) }
}

/// The receiver-written state of a pair segment.
///
/// # Safety
/// See above (pair segment).
pub unsafe fn pair_rx<'a>(base: *const u8) -> &'a RxState {
    // SAFETY: per the contract; RxState is all atomics.
    unsafe { &*std::ptr::addr_of!((*(base as *const PairHeader)).rx.0) }
}

/// The last rendezvous token the receiver copied.
///
/// # Safety
/// See above (pair segment).
pub unsafe fn pair_done<'a>(base: *const u8) -> &'a AtomicU64 {
    // SAFETY: per the contract; an atomic.
    unsafe { &*std::ptr::addr_of!((*(base as *const PairHeader)).done.0) }
}

/// The ring header of a pair segment (atomics only).
///
/// # Safety
/// See above (pair segment).
pub unsafe fn pair_ring(base: *const u8) -> *const RingHeader {
    // SAFETY: per the contract (a projection, no reference made).
    unsafe { std::ptr::addr_of!((*(base as *const PairHeader)).ring) }
}
