//! The window handle → object lookup of the communication calls and
//! flushes, without a lock or a reference count on the way.
//!
//! On one host an `MPI_Put` to a window from `MPI_Win_allocate` is a copy
//! of a few bytes; the handle table's lock and the `Arc` clone and drop of
//! the window object were most of its cost. Each thread keeps the objects
//! of the last few windows it used, with the value of [`WIN_FREES`] when it
//! looked them up: while no window was freed since, the handle still names
//! the same object (a handle is never reused before its slot's generation
//! wraps), so the cached one is borrowed, and the call costs a
//! thread-local access and one atomic load.
//!
//! `MPI_Win_free` bumps [`WIN_FREES`] after removing the handle: every
//! cache entry made before then misses, looks the handle up again and
//! finds it gone (`MPI_ERR_WIN`, as before). A thread racing the free of
//! the window it uses (erroneous by the standard) may finish its call on
//! the object its entry still holds: that object is alive, so this is
//! memory-safe; the window's memory is released when the last thread that
//! cached it looks up a window again, or exits. The freeing thread clears
//! its own cache at once.

use super::{win_obj, MPI_Win, WinObj};
use gridwire_mpi::rma::Win;
use gridwire_mpi::{class, err, Result};
use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Windows freed so far in this process.
static WIN_FREES: AtomicU64 = AtomicU64::new(0);

/// Entries per thread (windows used in turn by one thread, indexed by the
/// handle's low bits, which are its slot in the table).
const WAYS: usize = 4;

struct Entry {
    handle: MPI_Win,
    frees: u64,
    obj: Arc<WinObj>,
}

thread_local! {
    static CACHE: RefCell<[Option<Entry>; WAYS]> = const { RefCell::new([None, None, None, None]) };
}

/// Runs `f` on the object of window handle `h`, borrowed from this thread's
/// cache (see the module's comment); an invalid handle is `MPI_ERR_WIN`.
pub(crate) fn with_win<R>(h: MPI_Win, f: impl FnOnce(&WinObj) -> Result<R>) -> Result<R> {
    let mut f = Some(f);
    let frees = WIN_FREES.load(Ordering::Acquire);
    let cached = CACHE.try_with(|c| {
        // Taken already: `f` of an outer call on this thread called back
        // into the library (never on the fast path): look the handle up.
        let mut c = c.try_borrow_mut().ok()?;
        let slot = &mut c[h % WAYS];
        let hit = slot
            .as_ref()
            .is_some_and(|e| e.handle == h && e.frees == frees);
        if !hit {
            match win_obj(h) {
                Ok(obj) => {
                    *slot = Some(Entry {
                        handle: h,
                        frees,
                        obj,
                    })
                }
                Err(e) => return Some(Err(e)),
            }
        }
        let obj = &slot.as_ref()?.obj;
        let f = f.take()?;
        Some(f(obj))
    });
    match (cached, f) {
        (Ok(Some(r)), _) => r,
        // No cache (the thread is exiting, or it is in use above us).
        (_, Some(f)) => f(&*win_obj(h)?),
        // `f` was taken only where its answer is returned above.
        (_, None) => Err(err(
            class::INTERN,
            "window cache: the call ran without an answer",
        )),
    }
}

/// Runs `f` on the window of handle `h` if this thread's cache holds it
/// (valid, see the module's comment); None on a miss, without looking the
/// handle up: the fast path (`super::fast`) then takes the general path,
/// whose [`with_win`] fills the cache or reports the bad handle.
#[inline(always)]
pub(crate) fn peek<R>(h: MPI_Win, f: impl FnOnce(&Arc<Win>) -> R) -> Option<R> {
    let frees = WIN_FREES.load(Ordering::Acquire);
    CACHE
        .try_with(|c| {
            // A shared borrow: a `with_win` below us (never on the fast
            // path) would find the cache taken and look the handle up.
            let c = c.try_borrow().ok()?;
            let e = c[h % WAYS].as_ref()?;
            if e.handle != h || e.frees != frees {
                return None;
            }
            Some(f(&e.obj.win))
        })
        .ok()
        .flatten()
}

/// Called by `MPI_Win_free` once the handle is out of the table.
pub(crate) fn forget_freed() {
    WIN_FREES.fetch_add(1, Ordering::AcqRel);
    // Drop this thread's references now (its entries would miss anyway).
    let _ = CACHE.try_with(|c| {
        if let Ok(mut c) = c.try_borrow_mut() {
            *c = [None, None, None, None];
        }
    });
}
