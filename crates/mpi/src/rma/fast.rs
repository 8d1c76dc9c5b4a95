//! The lean path of the one-sided calls to memory this process maps
//! (windows from `MPI_Win_allocate` and `MPI_Win_allocate_shared` on one
//! host, and every window's own memory): `MPI_Put`, `MPI_Get`,
//! `MPI_Accumulate`, `MPI_Get_accumulate`, `MPI_Fetch_and_op`,
//! `MPI_Compare_and_swap` and `MPI_Win_flush` (`_all`) for the common case — one
//! predefined contiguous datatype on both sides, the same count, a
//! predefined operation.
//!
//! On one host such a put is a copy of a few bytes, so what surrounds it
//! is the cost: the general path ([`super::ops`]) builds the call's
//! buffers, checks them against each other and dispatches on the kind of
//! operation and window. Here every check the general path makes for that
//! case is made again, from one packed record per target rank
//! ([`FastTarget`]) and the epoch's lock-free mirror ([`super::access`]),
//! and the copy or the accumulate is done inline.
//!
//! Why this cannot change a result or an error: these functions never
//! fail. Whatever they do not recognise as a correct call of the common
//! case — no access epoch, a rank or an access outside the window, an
//! operation the type does not support, a pending error from a target —
//! answers `false`, and the caller then runs the general path, which does
//! the same checks again and reports the error (`MPI_ERR_RMA_SYNC`,
//! `MPI_ERR_RMA_RANGE`, ...) through the window's error handler. A call
//! that succeeds here is one the general path would have done by the same
//! loads and stores ([`super::direct`]): under the target's accumulate
//! lock word for accumulates, so they stay atomic with respect to every
//! other accumulate, whatever its operation and whoever applies it.

use super::direct::AccLock;
use super::window::{Remote, Win};
use crate::datatype::Datatype;
use crate::op::Op;
use std::sync::atomic::{fence, Ordering};

/// What a call needs to reach one target's memory by loads and stores,
/// packed: two targets per cache line.
#[derive(Clone, Copy, Default, Debug)]
#[repr(C)]
pub(crate) struct FastTarget {
    /// The target's window memory in this process's mapping (0 = not
    /// reached by loads and stores: the general path decides).
    base: usize,
    /// The target's window size in bytes.
    size: u64,
    /// The target's displacement unit.
    unit: u64,
    /// The target's accumulate lock word in this mapping (0 = its
    /// accumulates take the general path).
    acc_lock: usize,
}

impl FastTarget {
    /// Whether the target's memory is mapped here (loads and stores).
    pub(crate) fn mapped(&self) -> bool {
        self.base != 0
    }
}

/// The records of a window's `n` ranks, from what the window knows of them.
pub(crate) fn targets(
    direct: &[usize],
    acc_locks: &[usize],
    remote: &[Remote],
    n: usize,
) -> Box<[FastTarget]> {
    (0..n)
        .map(|r| {
            let base = direct.get(r).copied().unwrap_or(0);
            match remote.get(r) {
                Some(rem) if base != 0 => FastTarget {
                    base,
                    size: rem.size,
                    unit: rem.disp_unit,
                    acc_lock: acc_locks.get(r).copied().unwrap_or(0),
                },
                _ => FastTarget::default(),
            }
        })
        .collect()
}

/// Compare-and-swap elements up to this many bytes go by the fast path
/// (on the stack).
const ACC_BYTES: usize = 64;
/// Accumulates are applied in chunks of up to this many bytes, on the
/// stack: large enough that the operation's loop, not the call per chunk,
/// sets the pace (64-byte chunks made a 4 KiB sum 1.8 µs).
const ACC_CHUNK: usize = 2048;
/// Accumulates up to this many bytes go by the fast path: applied in
/// chunks under the target's lock, which is held for at most some
/// microseconds (a 64 KiB sum: 1024 chunks of a few nanoseconds each).
const ACC_FAST_MAX: usize = 64 << 10;

/// Copies `n` bytes from `src` to `dst`, either of which may be memory
/// another process writes (so no Rust reference to either is made). The
/// usual sizes are one load and one store (no call to `memmove`).
///
/// # Safety
/// `src .. src + n` must be readable and `dst .. dst + n` writable; they
/// may overlap.
#[inline(always)]
unsafe fn copy(src: *const u8, dst: *mut u8, n: usize) {
    // SAFETY: the caller's contract; each small case reads the whole source
    // into a register before it writes (so overlap is harmless), unaligned.
    unsafe {
        match n {
            8 => dst
                .cast::<u64>()
                .write_unaligned(src.cast::<u64>().read_unaligned()),
            4 => dst
                .cast::<u32>()
                .write_unaligned(src.cast::<u32>().read_unaligned()),
            16 => dst
                .cast::<u128>()
                .write_unaligned(src.cast::<u128>().read_unaligned()),
            _ => std::ptr::copy(src, dst, n),
        }
    }
}

/// The operations and types [`super::acc_kernels`] has no loop for
/// (logical operations, complex numbers, `long double`, pairs, ...): the
/// origin's operand and the target's values go through stack chunks of
/// whole elements for [`Op::apply`] (either may lie in window memory
/// another process writes: copied, never borrowed). Out of line: its
/// 4 KiB of stack are not the common path's to pay for.
///
/// # Safety
/// As [`super::acc_kernels::apply`]; `dt` predefined, `op` not `MPI_NO_OP`,
/// the target's accumulate lock held.
#[inline(never)]
unsafe fn accumulate_chunked(
    dt: &Datatype,
    op: &Op,
    n: usize,
    data: *const u8,
    at: *mut u8,
    result: *mut u8,
) {
    let per_chunk = ACC_CHUNK / dt.size * dt.size;
    let (mut operand, mut cur) = ([0u8; ACC_CHUNK], [0u8; ACC_CHUNK]);
    let mut done = 0;
    while done < n {
        let len = per_chunk.min(n - done);
        // SAFETY: `done + len <= n`: within the origin, result and target
        // ranges (the caller's contract); `operand` and `cur` are ours.
        unsafe {
            copy(data.add(done), operand.as_mut_ptr(), len);
            copy(at.add(done), cur.as_mut_ptr(), len);
            if !result.is_null() {
                copy(cur.as_ptr(), result.add(done), len);
            }
        }
        op.apply(dt, len / dt.size, &operand[..len], &mut cur[..len]);
        // SAFETY: as for the read above.
        unsafe { copy(cur.as_ptr(), at.add(done), len) };
        done += len;
    }
}

impl Win {
    /// The address of `n` bytes at displacement `disp` of window rank
    /// `rank`'s memory, and its record, if this process may reach them by
    /// loads and stores now: an access epoch to `rank` is open, the target
    /// is mapped here and the bytes lie inside its window.
    #[inline(always)]
    fn fast_target(&self, rank: i32, disp: i64, n: usize) -> Option<(usize, &FastTarget)> {
        let r = u32::try_from(rank).ok()?;
        let t = self.fast.get(r as usize)?;
        if t.base == 0 || !self.access.may_access(r) {
            return None;
        }
        let start = u64::try_from(disp).ok()?.checked_mul(t.unit)?;
        if start.checked_add(n as u64)? > t.size {
            return None;
        }
        // In range of the target's memory, which fits this mapping.
        Some((t.base + start as usize, t))
    }

    /// `MPI_Put` of `n` (> 0) bytes at `src` (one predefined contiguous
    /// type, the same count on both sides) to displacement `disp` of
    /// `rank`. False: not done, run the general path.
    ///
    /// # Safety
    /// `src .. src + n` is the call's origin buffer (readable, MPI's rule).
    #[inline]
    pub unsafe fn fast_put(&self, rank: i32, disp: i64, src: *const u8, n: usize) -> bool {
        if n == 0 || src.is_null() {
            return false;
        }
        let Some((dst, _)) = self.fast_target(rank, disp, n) else {
            return false;
        };
        // SAFETY: the origin buffer is the caller's contract; the target
        // range lies inside the mapped window (checked above).
        unsafe { copy(src, dst as *mut u8, n) };
        // The copy is ordered before whatever synchronization follows.
        fence(Ordering::Release);
        true
    }

    /// `MPI_Get` into `n` (> 0) bytes at `dst`, as [`Win::fast_put`].
    ///
    /// # Safety
    /// `dst .. dst + n` is the call's result buffer (writable, MPI's rule).
    #[inline]
    pub unsafe fn fast_get(&self, rank: i32, disp: i64, dst: *mut u8, n: usize) -> bool {
        if n == 0 || dst.is_null() {
            return false;
        }
        let Some((src, _)) = self.fast_target(rank, disp, n) else {
            return false;
        };
        // SAFETY: the source range lies inside the mapped window (checked),
        // the result buffer is the caller's contract.
        unsafe { copy(src as *const u8, dst, n) };
        fence(Ordering::Release);
        true
    }

    /// `MPI_Accumulate` (`result` NULL), `MPI_Get_accumulate` or
    /// `MPI_Fetch_and_op` (`result` the result buffer) of `count` elements
    /// of the predefined contiguous type `dt` on both sides (and the result
    /// buffer), with predefined operation `op`; `data` is the origin
    /// buffer (NULL allowed only for `MPI_NO_OP`). Applied under the
    /// target's accumulate lock word, as [`super::direct::accumulate`]
    /// does. False: not done, run the general path.
    ///
    /// # Safety
    /// `data` (unless NULL) and `result` (unless NULL) are the call's
    /// buffers of `count` elements of `dt` (MPI's rule); `dt` is predefined.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn fast_accumulate(
        &self,
        rank: i32,
        disp: i64,
        dt: &Datatype,
        count: usize,
        op: &Op,
        data: *const u8,
        result: *mut u8,
    ) -> bool {
        let no_op = matches!(op, Op::NoOp);
        let n = count.wrapping_mul(dt.size);
        if count == 0
            || count > ACC_FAST_MAX
            || n == 0
            || n > ACC_FAST_MAX
            || dt.size > ACC_BYTES
            || !dt.contig
            || (data.is_null() && !no_op)
            || matches!(op, Op::User { .. })
            // A plain accumulate of MPI_NO_OP changes nothing: the general
            // path answers it (and checks it) as before.
            || (no_op && result.is_null())
            || op.check(dt).is_err()
        {
            return false;
        }
        let Some((at, t)) = self.fast_target(rank, disp, n) else {
            return false;
        };
        if t.acc_lock == 0 {
            return false;
        }
        {
            // SAFETY: the lock word of a segment this window maps, which
            // stays mapped while the window exists.
            let _held = unsafe { AccLock::take(t.acc_lock) };
            let at = at as *mut u8;
            // SAFETY (all three): `n` bytes at the origin, result and target
            // (the caller's contract; the target's range is checked).
            if no_op {
                unsafe { copy(at, result, n) };
            } else if !dt
                .basic
                .is_some_and(|b| unsafe { super::acc_kernels::apply(op, b, n, data, at, result) })
            {
                unsafe { accumulate_chunked(dt, op, n, data, at, result) };
            }
        }
        fence(Ordering::Release);
        true
    }

    /// `MPI_Compare_and_swap` of one element of the predefined contiguous
    /// type `dt`, under the target's accumulate lock word. False: not
    /// done, run the general path.
    ///
    /// # Safety
    /// `data`, `compare` and `result` are the call's buffers of one element
    /// of `dt` each (MPI's rule); `dt` is predefined.
    #[inline]
    pub unsafe fn fast_compare_and_swap(
        &self,
        rank: i32,
        disp: i64,
        dt: &Datatype,
        data: *const u8,
        compare: *const u8,
        result: *mut u8,
    ) -> bool {
        let n = dt.size;
        if n == 0
            || n > ACC_BYTES
            || !dt.contig
            || dt.basic.is_none()
            || dt.nbasic != 1
            || data.is_null()
            || compare.is_null()
            || result.is_null()
        {
            return false;
        }
        let Some((at, t)) = self.fast_target(rank, disp, n) else {
            return false;
        };
        if t.acc_lock == 0 {
            return false;
        }
        let (mut new, mut old, mut cur) = ([0u8; ACC_BYTES], [0u8; ACC_BYTES], [0u8; ACC_BYTES]);
        // SAFETY: the origin's buffers hold `n` bytes each (caller's contract).
        unsafe {
            copy(data, new.as_mut_ptr(), n);
            copy(compare, old.as_mut_ptr(), n);
        }
        {
            // SAFETY: as in `fast_accumulate`.
            let _held = unsafe { AccLock::take(t.acc_lock) };
            // SAFETY: the target range lies inside the mapped window (checked).
            unsafe { copy(at as *const u8, cur.as_mut_ptr(), n) };
            // SAFETY: the result buffer holds `n` bytes (caller's contract).
            unsafe { copy(cur.as_ptr(), result, n) };
            if cur[..n] == old[..n] {
                // SAFETY: as for the read above.
                unsafe { copy(new.as_ptr(), at as *mut u8, n) };
            }
        }
        fence(Ordering::Release);
        true
    }

    /// `MPI_Win_flush` (and `_local`) to `rank` when it has nothing to
    /// wait for: a passive-target epoch to `rank` is open, no operation to
    /// it is unanswered and no target reported an error. False: run the
    /// general path.
    #[inline]
    pub fn fast_flush(&self, rank: i32) -> bool {
        let Ok(r) = u32::try_from(rank) else {
            return false;
        };
        // `passive` is false for a rank outside the window.
        if !self.access.passive(r)
            || self
                .outstanding
                .get(r as usize)
                .is_none_or(|o| o.load(Ordering::Acquire) != 0)
            || self.error_pending()
            // Deferred single copies (created and dynamic windows).
            || self.single_copy.sync_work(r as usize)
        {
            return false;
        }
        // Every load and store of the epoch so far is ordered before what
        // the program does next (a message telling the target, say).
        fence(Ordering::Release);
        true
    }

    /// `MPI_Win_flush_all` (and `_local_all`) when nothing is unanswered:
    /// a passive-target epoch is open, no operation to any rank waits for
    /// an answer and no target reported an error. False: run the general
    /// path.
    #[inline]
    pub fn fast_flush_all(&self) -> bool {
        if !self.access.any_passive()
            || self
                .outstanding
                .iter()
                .any(|o| o.load(Ordering::Acquire) != 0)
            || self.error_pending()
            || self.single_copy.sync_work_any()
        {
            return false;
        }
        fence(Ordering::Release);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_follow_direct_targets_only() {
        let remote = [
            Remote {
                size: 64,
                disp_unit: 8,
            },
            Remote {
                size: 32,
                disp_unit: 1,
            },
            Remote {
                size: 16,
                disp_unit: 4,
            },
        ];
        let t = targets(&[0x1000, 0, 0x3000], &[0x40, 0x80, 0], &remote, 3);
        assert_eq!(t.len(), 3);
        assert_eq!(
            (t[0].base, t[0].size, t[0].unit, t[0].acc_lock),
            (0x1000, 64, 8, 0x40)
        );
        assert_eq!(t[1].base, 0, "not mapped: no record");
        assert_eq!(t[1].acc_lock, 0, "no lock without a mapping");
        assert_eq!((t[2].base, t[2].acc_lock), (0x3000, 0));
        // Dynamic windows: no direct targets at all.
        let t = targets(&[], &[], &remote, 3);
        assert!(t.iter().all(|t| t.base == 0));
    }

    #[test]
    fn copies_of_every_size_move_the_bytes() {
        for n in [1usize, 3, 4, 8, 16, 17, 4096] {
            let src: Vec<u8> = (0..n).map(|i| (i * 7 + 1) as u8).collect();
            let mut dst = vec![0u8; n];
            // SAFETY: both buffers hold `n` bytes.
            unsafe { copy(src.as_ptr(), dst.as_mut_ptr(), n) };
            assert_eq!(src, dst, "{n} bytes");
        }
        // Overlapping (a put from a window's own memory into itself).
        let mut b: Vec<u8> = (0..24).collect();
        let p = b.as_mut_ptr();
        // SAFETY: both ranges lie in `b`.
        unsafe { copy(p, p.add(4), 16) };
        assert_eq!(&b[4..20], &(0..16).collect::<Vec<u8>>()[..]);
    }
}
