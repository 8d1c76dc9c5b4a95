//! A lock for the hot path: [`TryLock`].
//!
//! Why not `std::sync::Mutex`: taking and releasing an uncontended std mutex
//! costs two locked read-modify-writes (a compare-exchange to lock, an
//! exchange to unlock, because unlocking must learn whether to wake a
//! sleeper). On the machines we target a locked instruction costs 15–25
//! cycles, and the small-message path crossed six such locks per message
//! (progress, ring table, ring, handler table, link, twice each): more than
//! the cache-line transfer the message itself needs. A `TryLock` never
//! sleeps, so releasing it is a plain release store, and callers on the hot
//! path only ever *try* it (progress that finds it taken simply lets the
//! other thread do the work). The rare callers that must wait use
//! [`TryLock::lock`], which spins briefly, then yields.

use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};

/// Mutual exclusion by one flag; see the module documentation.
pub struct TryLock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the flag gives at most one guard at a time, so `&TryLock<T>` shared
// between threads only ever hands out exclusive access to `T` to one of them;
// that is sound when `T` may move between threads (`Send`), as for `Mutex`.
unsafe impl<T: Send> Sync for TryLock<T> {}

impl<T> TryLock<T> {
    pub const fn new(value: T) -> Self {
        TryLock {
            locked: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// Takes the lock if it is free now; never waits.
    #[inline]
    pub fn try_lock(&self) -> Option<TryLockGuard<'_, T>> {
        // A plain load first: a contended lock costs no locked instruction
        // (and does not pull the line away from the holder).
        if self.locked.load(Ordering::Relaxed) {
            return None;
        }
        self.locked
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .ok()
            .map(|_| TryLockGuard {
                lock: self,
                _borrow: PhantomData,
            })
    }

    /// Takes the lock, spinning and then yielding while another thread holds
    /// it. For rare operations and short critical sections only; never call
    /// it while this thread may already hold the lock (it would never return).
    pub fn lock(&self) -> TryLockGuard<'_, T> {
        let mut spins = 0u32;
        loop {
            if let Some(g) = self.try_lock() {
                return g;
            }
            spins = spins.wrapping_add(1);
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }

    /// A raw pointer to the value, for a caller whose exclusive access
    /// comes from another lock than this one (see the users' comments);
    /// dereferencing it is the caller's `unsafe` (as `Mutex::data_ptr`).
    #[inline]
    pub fn as_ptr(&self) -> *mut T {
        self.value.get()
    }

    pub fn get_mut(&mut self) -> &mut T {
        self.value.get_mut()
    }

    /// The value without taking the lock: for an owner that can prove no
    /// other thread can reach this `TryLock` at all (e.g. the only `Arc` of
    /// the object that holds it), where the lock's compare-exchange would
    /// buy nothing. Why: a request is initialised and recycled by the
    /// thread that holds its only reference, twice per small message.
    ///
    /// # Safety
    /// While the returned reference lives, no other reference to the value
    /// may exist and no thread may take the lock; the caller must also have
    /// synchronised (Acquire) with the last thread that released it.
    #[allow(clippy::mut_from_ref)]
    #[inline]
    pub unsafe fn get_unshared(&self) -> &mut T {
        // SAFETY: the caller's contract: this is the only access.
        unsafe { &mut *self.value.get() }
    }
}

impl<'a, T> TryLockGuard<'a, T> {
    /// Keeps the lock held past this guard: no release store. Take it back
    /// with [`TryLock::guard_of_kept`] (which is how it is ever released).
    /// Why: a holder that keeps a lock across several calls (a handler
    /// across the messages of one round of progress) without a locked
    /// instruction per call.
    pub fn keep(self) {
        std::mem::forget(self);
    }
}

impl<T> TryLock<T> {
    /// A guard for the lock that [`TryLockGuard::keep`] kept.
    ///
    /// # Safety
    /// The lock is held by a kept guard whose holding the caller now takes
    /// over (so no other guard exists), and the caller is synchronised
    /// with the thread that kept it (the same thread, or through another
    /// lock that both held in turn).
    #[inline]
    pub unsafe fn guard_of_kept(&self) -> TryLockGuard<'_, T> {
        debug_assert!(self.locked.load(Ordering::Relaxed), "no kept guard");
        TryLockGuard {
            lock: self,
            _borrow: PhantomData,
        }
    }
}

impl<T: Default> Default for TryLock<T> {
    fn default() -> Self {
        TryLock::new(T::default())
    }
}

/// Exclusive access to the value of a [`TryLock`] until dropped.
pub struct TryLockGuard<'a, T> {
    lock: &'a TryLock<T>,
    /// The guard hands out `&mut T` and `&T`, so it may be shared between
    /// threads only where `&T` may (`T: Sync`), as std's `MutexGuard`. Why
    /// the marker: from `&TryLock<T>` alone the guard was `Sync` for any
    /// `T: Send` (a `Cell` read from two threads at once through a shared guard).
    _borrow: PhantomData<&'a mut T>,
}

impl<T> Deref for TryLockGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: the guard exists only while this thread holds the flag, so
        // no other reference to the value exists.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for TryLockGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; `&mut self` makes this the only borrow through the guard.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for TryLockGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        // Release: our writes to the value happen-before the next holder's Acquire.
        self.lock.locked.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::{TryLock, TryLockGuard};
    use std::cell::Cell;
    use std::marker::PhantomData;
    use std::sync::Arc;

    /// Whether `T` is `Sync`, as a value: the inherent constant exists only
    /// for `Sync` types and wins over the trait's default when it does.
    struct Probe<T: ?Sized>(PhantomData<T>);
    trait NotSync {
        const SYNC: bool = false;
    }
    impl<T: ?Sized> NotSync for Probe<T> {}
    impl<T: ?Sized + Sync> Probe<T> {
        const SYNC: bool = true;
    }

    #[test]
    fn a_guard_is_sync_only_for_sync_values() {
        // `Cell<u8>` is `Send` but not `Sync`: sharing a guard to it between
        // threads would let both read and write it at once.
        let sync = [
            Probe::<TryLockGuard<'static, Cell<u8>>>::SYNC,
            Probe::<TryLockGuard<'static, u8>>::SYNC,
            Probe::<TryLock<Cell<u8>>>::SYNC,
        ];
        assert_eq!(sync, [false, true, true]);
    }

    #[test]
    fn try_lock_excludes_a_second_holder_until_the_first_is_dropped() {
        let l = TryLock::new(5);
        let g = l.try_lock().expect("free lock");
        assert!(l.try_lock().is_none());
        drop(g);
        assert_eq!(*l.try_lock().expect("free again"), 5);
    }

    #[test]
    fn lock_serialises_increments_from_several_threads() {
        let l = Arc::new(TryLock::new(0u64));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let l = l.clone();
                std::thread::spawn(move || {
                    for _ in 0..20_000 {
                        // Non-atomic read-modify-write: only exclusion keeps the count.
                        let mut g = l.lock();
                        let v = *g;
                        *g = v + 1;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*l.lock(), 80_000);
    }
}
