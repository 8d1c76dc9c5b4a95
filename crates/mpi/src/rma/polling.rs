//! Whether a window's member is polling inside MPI right now, for origins
//! on its host choosing how to apply an accumulate to it.
//!
//! An accumulate to a member of the host over the program's memory goes
//! either by single copies (`process_vm_readv` + the operation +
//! `process_vm_writev`, about 1.2 µs, needs nothing from the target) or as
//! a request the target's progress applies (about 1 µs when the target
//! polls, a progress-thread slice — up to milliseconds — when it computes
//! or sleeps). So the request wins only while the target polls.
//!
//! Each member says so in the window's lock segment: after its
//! accumulate lock word (on the next cache line, at [`STAMP_OFFSET`]:
//! [`super::segment::LOCK_STRIDE`]) it stores
//! the time stamp counter when it enters a blocking wait, on every 16th
//! round of that wait once its stamp is [`REFRESH_TICKS`] old, and 0 when
//! it leaves. An origin that reads a stamp fresher
//! than [`FRESH_TICKS`] sends a request; anything else (0, stale because
//! the wait went to sleep, or another architecture, where stamps stay 0)
//! gives single copies. Both paths are correct at any time (the target's
//! handler takes the same lock word): a wrong guess costs time only.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::RwLock;

/// Bytes from a member's accumulate lock word to its polling stamp: the
/// start of the cache line after the lock word's, which the lock word
/// then has alone (see [`super::segment::LOCK_STRIDE`]).
pub(crate) const STAMP_OFFSET: usize = super::segment::SHARED_ALIGN;

/// A stamp this much older than now means the member stopped polling
/// (about 0.5 ms at 2.3 GHz). A polling member stamps every microsecond or
/// so while it has a core, but on a loaded machine it loses the core for
/// tens of microseconds now and then while still in its wait (and a request
/// keeps it polling); one that went to sleep in its wait (milliseconds of
/// idleness first) stops stamping and is found stale soon after.
const FRESH_TICKS: u64 = 1_200_000;

/// A polling member writes its stamp again once it is this old (about 30
/// µs): far inside [`FRESH_TICKS`], and rare enough that origins reading
/// the stamp on every operation mostly find the line in their cache.
pub(crate) const REFRESH_TICKS: u64 = FRESH_TICKS / 16;

/// The time stamp counter: invariant and synchronized across cores on
/// every x86-64 CPU of the last fifteen years; 0 elsewhere (no stamps).
#[inline]
pub(crate) fn now() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `rdtsc` has no preconditions on x86-64.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        0
    }
}

/// Whether the member whose lock word is at `lock` polls now.
///
/// # Safety
/// `lock` is a lock word of a window's lock segment, mapped while the
/// window exists (with the member's [`super::segment::LOCK_STRIDE`] bytes).
#[inline]
pub(crate) unsafe fn polls(lock: usize) -> bool {
    // SAFETY: the caller's contract; 8-aligned (the stamp starts a cache line).
    let stamp = unsafe { &*((lock + STAMP_OFFSET) as *const AtomicU64) }.load(Ordering::Relaxed);
    stamp != 0 && now().wrapping_sub(stamp) < FRESH_TICKS
}

/// This process's stamp words (one per window with a lock segment), which
/// the engine's waits write. One per process (windows of every `Mpi`
/// instance): a window's `Drop` removes its word before it unmaps it.
pub(crate) static STAMPS: PollStamps = PollStamps {
    count: AtomicUsize::new(0),
    words: RwLock::new(Vec::new()),
};

pub struct PollStamps {
    count: AtomicUsize,
    words: RwLock<Vec<usize>>,
}

impl PollStamps {
    /// Whether any window wants stamps: one load on every wait.
    #[inline]
    pub(crate) fn any(&self) -> bool {
        self.count.load(Ordering::Relaxed) != 0
    }

    /// Writes `stamp` to every word (skipped while a window is added or
    /// removed: the next round writes it).
    pub(crate) fn stamp(&self, stamp: u64) {
        if let Ok(words) = self.words.try_read() {
            for &w in words.iter() {
                // SAFETY: registered by `add` while its window's segment is
                // mapped and removed (under the write lock) before it is
                // unmapped; 8-aligned.
                unsafe { &*(w as *const AtomicU64) }.store(stamp, Ordering::Relaxed);
            }
        }
    }

    /// Starts stamping the word of lock word `lock` (a window's own one).
    pub(crate) fn add(&self, lock: usize) {
        let mut words = self.words.write().unwrap_or_else(|e| e.into_inner());
        words.push(lock + STAMP_OFFSET);
        self.count.store(words.len(), Ordering::Relaxed);
    }

    /// Stops stamping it (before its segment is unmapped).
    pub(crate) fn remove(&self, lock: usize) {
        let mut words = self.words.write().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = words.iter().position(|&w| w == lock + STAMP_OFFSET) {
            words.swap_remove(i);
            // SAFETY: as in `stamp`: still mapped here.
            unsafe { &*((lock + STAMP_OFFSET) as *const AtomicU64) }.store(0, Ordering::Relaxed);
        }
        self.count.store(words.len(), Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A member's lock word's lines, as in a window's lock segment.
    #[repr(C, align(64))]
    struct Line([u64; 16]);

    #[test]
    fn a_fresh_stamp_says_polling_and_an_old_or_cleared_one_does_not() {
        let line = Line([0; 16]);
        let lock = &line as *const Line as usize;
        let stamp = |v: u64| {
            unsafe { &*((lock + STAMP_OFFSET) as *const AtomicU64) }.store(v, Ordering::Relaxed)
        };
        // SAFETY (all `polls` calls): `line` is a live, aligned cache line.
        assert!(!unsafe { polls(lock) }, "0 is no stamp");
        stamp(now());
        assert_eq!(unsafe { polls(lock) }, cfg!(target_arch = "x86_64"));
        stamp(now().wrapping_sub(100 * FRESH_TICKS));
        assert!(
            !unsafe { polls(lock) },
            "a stale stamp: the member stopped polling"
        );
    }

    #[test]
    fn the_lock_word_has_its_cache_line_alone() {
        use crate::rma::segment::{LOCK_STRIDE, SHARED_ALIGN};
        use crate::rma::single_copy::GEN_OFFSET;
        let line = |off: usize| off / SHARED_ALIGN;
        // The lock word is 4 bytes at offset 0; the stamp and the attach
        // generation (8 bytes each) are written by the member itself.
        for (what, off) in [("stamp", STAMP_OFFSET), ("generation", GEN_OFFSET)] {
            assert_ne!(line(off), line(0), "the {what} shares the lock word's line");
            assert_eq!(line(off), line(off + 7), "the {what} straddles two lines");
            assert!(
                off + 8 <= LOCK_STRIDE,
                "the {what} is past the member's bytes"
            );
            assert_eq!(off % 8, 0, "the {what} is not 8-aligned");
        }
        assert_ne!(STAMP_OFFSET, GEN_OFFSET);
        assert_eq!(LOCK_STRIDE % SHARED_ALIGN, 0);
    }

    #[test]
    fn registered_words_are_stamped_until_removed() {
        let line = Line([0; 16]);
        let lock = &line as *const Line as usize;
        let word =
            || unsafe { &*((lock + STAMP_OFFSET) as *const AtomicU64) }.load(Ordering::Relaxed);
        STAMPS.add(lock);
        assert!(STAMPS.any());
        // Another test's window may hold the write lock for a moment.
        while word() != 12345 {
            STAMPS.stamp(12345);
        }
        STAMPS.remove(lock);
        assert_eq!(word(), 0, "removing clears the stamp");
        STAMPS.stamp(777);
        assert_eq!(word(), 0, "a removed word is not written");
        assert_eq!(line.0[0], 0, "the lock word itself is never touched");
    }
}
