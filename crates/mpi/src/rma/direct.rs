//! Puts and gets as loads and stores: to this process's own window memory,
//! and to members of its host whose memory it maps ([`super::segment`]),
//! without a request to the target.
//!
//! Why this is correct: a put or get only has to be complete at the next
//! synchronization, and every synchronization that makes it visible to the
//! target (unlock, flush, fence, complete) is a message this process sends
//! after the copy, or a barrier; the shared-memory ring's release/acquire
//! pair orders the copy before the target's view of that message. The
//! target's lock is still taken with a request, so exclusive locks keep
//! excluding.
//!
//! Accumulates, `Fetch_and_op` and `Compare_and_swap` must be atomic with
//! respect to each other whoever sends them, also from other hosts, whose
//! requests the target's handler applies. So every member of a host
//! segment has an accumulate lock word in it ([`AccLock`]): an origin of the
//! host applies its accumulate to the target's memory itself while holding
//! the target's lock, and the target's handler holds the same lock while it
//! applies a request. Windows over the program's memory (created, dynamic)
//! have a segment of lock words only, and their origins of the host apply
//! accumulates by single copies under the same lock
//! ([`super::single_copy::accumulate`]).

use super::ops::{Kind, Origin, Target};
use super::window::Win;
use crate::mem;
use crate::op::Op;
use std::sync::atomic::{AtomicU32, Ordering};

/// Holds an accumulate lock word of a host segment until dropped.
pub(super) struct AccLock<'a>(&'a AtomicU32);

impl AccLock<'_> {
    /// Spins until the word at `addr` is taken (yielding the core now and
    /// then: on an oversubscribed host the holder may be waiting for it).
    ///
    /// # Safety
    /// `addr` is a 4-byte-aligned lock word of a segment mapped for at least
    /// as long as the guard lives.
    pub(super) unsafe fn take<'a>(addr: usize) -> AccLock<'a> {
        // SAFETY: the caller's contract. An atomic is the one way Rust lets
        // two processes share a word: every access below is atomic, and a
        // value a peer stores there can only delay us, not corrupt memory.
        let word = unsafe { AtomicU32::from_ptr(addr as *mut u32) };
        let mut spins = 0u32;
        while word
            .compare_exchange_weak(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(64) {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        AccLock(word)
    }
}

impl Drop for AccLock<'_> {
    fn drop(&mut self) {
        self.0.store(0, Ordering::Release);
    }
}

/// Copies `n` bytes between two addresses, either of which may be memory
/// another process writes (so no Rust reference is made to either).
///
/// # Safety
/// Both ranges must be mapped, readable (`src`) and writable (`dst`).
unsafe fn copy_raw(src: usize, dst: usize, n: usize) {
    if n > 0 {
        // SAFETY: the caller's contract; `copy` allows overlap (a put from a
        // window's own memory into itself).
        unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, n) }
    }
}

/// Whether operation `kind` to window rank `rank` goes by loads and stores.
pub(super) fn applies(w: &Win, kind: Kind, rank: u32) -> bool {
    let r = rank as usize;
    match kind {
        Kind::Put | Kind::Get => w.direct.get(r).is_some_and(|&a| a != 0),
        _ => w.acc_locks.get(r).is_some_and(|&a| a != 0),
    }
}

/// Bytes an accumulate keeps on the stack (larger ones allocate).
pub(super) const SMALL: usize = 256;

/// An origin operand as packed bytes: the buffer itself when contiguous,
/// else packed into `store`.
pub(super) fn operand<'a>(b: Option<&'a crate::Buf>, store: &'a mut Vec<u8>) -> &'a [u8] {
    match b {
        None => &[],
        Some(b) => match b.contig() {
            Some(s) => s,
            None => {
                *store = b.pack();
                store
            }
        },
    }
}

/// The operands of accumulate `kind`: (data, compare), packed.
pub(super) fn operands<'a>(
    kind: Kind,
    o: &'a Origin<'_>,
    store: &'a mut (Vec<u8>, Vec<u8>),
) -> (&'a [u8], &'a [u8]) {
    let data = match (kind, o.op) {
        (Kind::GetAccumulate, Some(Op::NoOp)) => None,
        _ => o.data,
    };
    (
        operand(data, &mut store.0),
        operand(o.compare, &mut store.1),
    )
}

/// Applies accumulate `kind` to `cur` (the target's current contents,
/// packed), after handing the old contents to the result buffer if there
/// is one. Whether `cur` changed (and must be written back).
pub(super) fn apply(
    kind: Kind,
    o: &Origin<'_>,
    t: &Target<'_>,
    data: &[u8],
    compare: &[u8],
    cur: &mut [u8],
) -> bool {
    if let Some(r) = &o.result {
        r.unpack(cur);
    }
    match kind {
        Kind::CompareAndSwap => {
            let same = compare == &*cur;
            if same {
                cur.copy_from_slice(data);
            }
            same
        }
        _ => match o.op {
            Some(Op::NoOp) | None => false,
            Some(op) => {
                op.apply(t.dt, t.count, data, cur);
                true
            }
        },
    }
}

/// Does accumulate, get-accumulate or compare-and-swap `kind` on the
/// target's memory under its accumulate lock. Checked as for
/// [`put_or_get`]; the operation (not a user one: refused before) applies
/// to packed data of the target's basic type.
pub(super) fn accumulate(w: &Win, kind: Kind, o: &Origin<'_>, t: &Target<'_>) {
    let tbytes = t.count * t.dt.size;
    let mut small = [0u8; SMALL];
    let mut large = Vec::new();
    let cur: &mut [u8] = if tbytes <= SMALL {
        &mut small[..tbytes]
    } else {
        large.resize(tbytes, 0);
        &mut large
    };
    // The origin's operands, packed (unless they lie contiguously), before
    // the lock is taken.
    let mut store = (Vec::new(), Vec::new());
    let (data, compare) = operands(kind, o, &mut store);
    // SAFETY: `applies` found the lock word of a segment this window maps,
    // which stays mapped while the window exists.
    let _held = unsafe { AccLock::take(w.acc_locks[t.rank as usize]) };
    each_piece(w, t, |addr, at, n| {
        // SAFETY: the piece lies inside the target's window (checked).
        unsafe { mem::read(addr, &mut cur[at..at + n]) }
    });
    if apply(kind, o, t, data, compare, cur) {
        each_piece(w, t, |addr, at, n| {
            // SAFETY: as above.
            unsafe { mem::write(addr, &cur[at..at + n]) }
        });
    }
}

/// Calls `f(address, offset in the packed data, length)` for each piece of
/// the target's memory that `t` names, in packed order.
fn each_piece(w: &Win, t: &Target<'_>, mut f: impl FnMut(usize, usize, usize)) {
    let rank = t.rank as usize;
    let unit = w.remote[rank].disp_unit as isize;
    let start = w.direct[rank].wrapping_add_signed(t.disp as isize * unit);
    if t.dt.contig {
        f(
            start.wrapping_add_signed(t.dt.true_lb),
            0,
            t.count * t.dt.size,
        );
        return;
    }
    let mut at = 0usize;
    for i in 0..t.count {
        let el = start.wrapping_add_signed(i as isize * t.dt.extent);
        for b in t.dt.blocks.iter().filter(|b| b.len > 0) {
            f(el.wrapping_add_signed(b.off), at, b.len);
            at += b.len;
        }
    }
}

/// Does put or get `kind` by copying. The caller checked the epoch, the
/// buffers, the type signatures and that the access lies inside the
/// target's window (`check_range`), and that [`applies`] holds.
pub(super) fn put_or_get(w: &Win, kind: Kind, o: &Origin<'_>, t: &Target<'_>) {
    let rank = t.rank as usize;
    let base = w.direct[rank];
    let unit = w.remote[rank].disp_unit as isize;
    // In range: checked against the target's size, which fits this mapping.
    let start = base.wrapping_add_signed(t.disp as isize * unit);
    let tbytes = t.count * t.dt.size;
    if t.dt.contig {
        let at = start.wrapping_add_signed(t.dt.true_lb);
        match kind {
            Kind::Put => {
                let data = o.data.expect("a put has data");
                match data.contig_addr() {
                    // SAFETY: the origin buffer is the user's (MPI's contract),
                    // the target range lies in the mapped window (checked).
                    Some(src) => unsafe { copy_raw(src, at, tbytes) },
                    // SAFETY: as above, for the packed copy.
                    None => unsafe { mem::write(at, &data.pack()) },
                }
            }
            _ => {
                let result = o.result.as_ref().expect("a get has a result buffer");
                match result.contig_addr() {
                    // SAFETY: the result buffer is the user's and writable
                    // (checked), the source range lies in the window.
                    Some(dst) => unsafe { copy_raw(at, dst, tbytes) },
                    None => {
                        let mut v = vec![0u8; tbytes];
                        // SAFETY: the source range lies in the window.
                        unsafe { mem::read(at, &mut v) };
                        result.unpack(&v);
                    }
                }
            }
        }
    } else {
        // A derived target type: its pieces, in packed order.
        let mut packed = match kind {
            Kind::Put => o.data.expect("a put has data").pack(),
            _ => vec![0u8; tbytes],
        };
        each_piece(w, t, |addr, at, n| {
            let piece = &mut packed[at..at + n];
            // SAFETY: every piece lies inside the target's window
            // (`check_range` covered the type's true extent per element).
            unsafe {
                if kind == Kind::Put {
                    mem::write(addr, piece)
                } else {
                    mem::read(addr, piece)
                }
            }
        });
        if kind == Kind::Get {
            o.result
                .as_ref()
                .expect("a get has a result buffer")
                .unpack(&packed);
        }
    }
    // The copy is ordered before whatever synchronization follows.
    std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
}
