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
//! excluding. Accumulates and the fetching atomics still go to the target,
//! whose handler applies them one at a time: that is what keeps them
//! atomic with respect to each other, whoever sends them.

use super::ops::{Kind, Origin, Target};
use super::window::Win;
use crate::mem;

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

/// Whether a put or get to window rank `rank` goes by loads and stores.
pub(super) fn applies(w: &Win, kind: Kind, rank: u32) -> bool {
    matches!(kind, Kind::Put | Kind::Get) && w.direct.get(rank as usize).is_some_and(|&a| a != 0)
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
        let mut at = 0usize;
        for i in 0..t.count {
            let el = start.wrapping_add_signed(i as isize * t.dt.extent);
            for b in t.dt.blocks.iter().filter(|b| b.len > 0) {
                let addr = el.wrapping_add_signed(b.off);
                let piece = &mut packed[at..at + b.len];
                // SAFETY: every piece lies inside the target's window
                // (`check_range` covered the type's true extent per element).
                unsafe {
                    if kind == Kind::Put {
                        mem::write(addr, piece)
                    } else {
                        mem::read(addr, piece)
                    }
                }
                at += b.len;
            }
        }
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
