//! The origin's epoch state as the communication calls read it.
//!
//! [`super::window::Epoch`] is the truth, kept under the window's epoch
//! mutex by the synchronization calls (they are rare and may wait). Every
//! put, get, accumulate and flush has to ask "may I access rank r now?",
//! and on one host such a call is otherwise a few loads and stores: a mutex
//! there cost more than the copy. So the synchronization calls mirror the
//! answer into atomics after each change ([`Access::mirror`], still under
//! the mutex), and the communication calls read them without a lock.
//!
//! Why plain loads are enough, also under `MPI_THREAD_MULTIPLE`: the
//! standard makes a program that opens or closes an epoch in one thread
//! while another thread issues operations in it erroneous unless the
//! program itself orders the two (a join, a mutex, a barrier), and that
//! ordering carries the release store of the mirror to the acquire load of
//! the operation. A racing program at worst sees the old state: it gets an
//! `MPI_ERR_RMA_SYNC` it deserved, or an operation completes at the next
//! synchronization as any other does; memory is never at stake, because
//! the operation's address checks do not depend on the epoch.

use super::window::Epoch;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

/// Bits of [`Access::per_rank`]. The fence and lock-all states are copied
/// into every rank's byte, so that "may I access rank r?" is one load (the
/// fast path of `super::fast` asks it on every call).
const LOCKED: u8 = 1;
const STARTED: u8 = 2;
const FENCE: u8 = 4;
const LOCK_ALL: u8 = 8;

/// Lock-free mirror of an [`Epoch`] (see the module's comment).
pub(crate) struct Access {
    /// Per window rank: [`LOCKED`] (a lock epoch to it), [`STARTED`] (in
    /// the group of `MPI_Win_start`), [`FENCE`] (between two fences),
    /// [`LOCK_ALL`] (inside `MPI_Win_lock_all`).
    per_rank: Box<[AtomicU8]>,
    /// Bumped at every change: what an origin read from a target in one
    /// epoch (a dynamic window's regions) is read again in the next.
    serial: AtomicU64,
}

impl Access {
    pub(crate) fn new(n: usize) -> Access {
        Access {
            per_rank: (0..n).map(|_| AtomicU8::new(0)).collect(),
            serial: AtomicU64::new(0),
        }
    }

    /// Copies what the communication calls read from `e`. Call with the
    /// epoch mutex held, after every change to `e`.
    pub(crate) fn mirror(&self, e: &Epoch) {
        self.serial.fetch_add(1, Ordering::AcqRel);
        let common = common_bits(e);
        for (r, a) in self.per_rank.iter().enumerate() {
            let locked = e.locked.get(r).is_some_and(|&l| l != 0);
            a.store(common | if locked { LOCKED } else { 0 }, Ordering::Release);
        }
        // The start group once (not a search of it per rank).
        for &r in e.started.iter().flatten() {
            if let Some(a) = self.per_rank.get(r as usize) {
                a.fetch_or(STARTED, Ordering::Release);
            }
        }
    }

    /// Copies one rank's lock state (`MPI_Win_lock`, `MPI_Win_unlock`: the
    /// rest of the epoch did not change).
    pub(crate) fn mirror_rank(&self, e: &Epoch, rank: usize) {
        self.serial.fetch_add(1, Ordering::AcqRel);
        if let Some(a) = self.per_rank.get(rank) {
            a.store(bits(e, rank), Ordering::Release);
        }
    }

    /// Changes so far (see `serial`).
    #[inline]
    pub(crate) fn serial(&self) -> u64 {
        self.serial.load(Ordering::Acquire)
    }

    #[inline(always)]
    fn rank_bits(&self, rank: u32) -> u8 {
        self.per_rank
            .get(rank as usize)
            .map_or(0, |a| a.load(Ordering::Acquire))
    }

    /// Whether an access epoch to window rank `rank` is open: between
    /// fences, in a lock epoch to it or of all, or in the start group.
    #[inline(always)]
    pub(crate) fn may_access(&self, rank: u32) -> bool {
        self.rank_bits(rank) != 0
    }

    /// Whether any passive-target epoch is open (to some rank, or of all).
    #[inline]
    pub(crate) fn any_passive(&self) -> bool {
        self.per_rank
            .iter()
            .any(|a| a.load(Ordering::Acquire) & (LOCKED | LOCK_ALL) != 0)
    }

    /// Whether a passive-target (lock) epoch to `rank` is open.
    #[inline(always)]
    pub(crate) fn passive(&self, rank: u32) -> bool {
        self.rank_bits(rank) & (LOCKED | LOCK_ALL) != 0
    }

    /// Whether `rank` is reached in a fence epoch only (no lock epoch to
    /// it, not in a start group): the epoch ends with a fence of every
    /// member, the target's included.
    #[inline(always)]
    pub(crate) fn fence_only(&self, rank: u32) -> bool {
        self.rank_bits(rank) == FENCE
    }

    /// Whether `rank` is reached in a start epoch only (in the group of
    /// `MPI_Win_start`; no fence epoch, no lock epoch to it): the epoch
    /// ends with `MPI_Win_complete`, whose COMPLETE goes behind every
    /// operation on the same ordered route.
    #[inline(always)]
    pub(crate) fn start_only(&self, rank: u32) -> bool {
        self.rank_bits(rank) == STARTED
    }
}

/// The bits every rank shares in `e`: fence, lock-all.
fn common_bits(e: &Epoch) -> u8 {
    (if e.fence { FENCE } else { 0 }) | (if e.lock_all { LOCK_ALL } else { 0 })
}

/// The [`Access::per_rank`] bits of rank `r` in `e`.
fn bits(e: &Epoch, r: usize) -> u8 {
    let locked = e.locked.get(r).is_some_and(|&l| l != 0);
    let started = e.started.as_ref().is_some_and(|g| g.contains(&(r as u32)));
    common_bits(e) | (if locked { LOCKED } else { 0 }) | (if started { STARTED } else { 0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mirror_follows_every_kind_of_epoch() {
        let a = Access::new(3);
        let mut e = Epoch {
            locked: vec![0; 3],
            ..Default::default()
        };
        a.mirror(&e);
        assert!((0..3).all(|r| !a.may_access(r) && !a.passive(r)));
        let s0 = a.serial();
        e.locked[1] = 2;
        a.mirror_rank(&e, 1);
        assert!(a.serial() > s0, "a change is a new serial");
        assert!(a.may_access(1) && a.passive(1));
        assert!(a.any_passive(), "one rank locked");
        assert!(!a.may_access(0) && !a.may_access(2));
        e.locked[1] = 0;
        e.started = Some(vec![2]);
        a.mirror(&e);
        assert!(
            a.may_access(2) && !a.passive(2),
            "a start group is active, not passive"
        );
        assert!(!a.may_access(1));
        assert!(a.start_only(2) && !a.start_only(1) && !a.start_only(0));
        // A start group after a fence that left an epoch open: not start only.
        e.fence = true;
        a.mirror(&e);
        assert!(a.may_access(2) && !a.start_only(2));
        e.started = None;
        a.mirror(&e);
        assert!((0..3).all(|r| a.may_access(r) && !a.passive(r)));
        assert!(!a.any_passive(), "a fence is no passive epoch");
        e.fence = false;
        e.lock_all = true;
        a.mirror(&e);
        assert!((0..3).all(|r| a.may_access(r) && a.passive(r)));
        assert!(a.any_passive(), "lock_all");
        // A rank outside the window is never accessible.
        assert!(!a.passive(7) && !a.may_access(7));
        // A lock after a fence (allowed) keeps the fence's access to the others.
        e.lock_all = false;
        e.fence = true;
        a.mirror(&e);
        e.locked[1] = 1;
        a.mirror_rank(&e, 1);
        assert!(a.may_access(0) && a.may_access(2) && !a.passive(0));
        assert!(a.passive(1), "the locked rank is passive");
        e.locked[1] = 0;
        a.mirror_rank(&e, 1);
        assert!(
            a.may_access(1) && !a.passive(1),
            "unlocked: back to the fence"
        );
        e.fence = false;
        a.mirror(&e);
        assert!(!a.may_access(7) && !a.passive(7));
    }
}
