//! Segments: a broadcast of more than one segment goes level
//! by level piece by piece, so that the wide-area link carries one piece
//! while the sites send or combine the next, instead of every level waiting
//! for the whole message of the level before it.
//!
//! Size of a piece ([`segment_len`]): the message is cut into
//! [`PIPELINE_DEPTH`] pieces, none smaller than [`MIN_SEGMENT`] (below
//! that a piece's own costs — a message per level, a wake-up of the
//! receiver — outweigh the overlap) nor larger than `GW_MPI_COLL_SEGMENT`
//! (64 KiB). So a 64 KiB message goes in 4 pieces of 16 KiB, each under the
//! shared-memory eager limit (32 KiB: no rendezvous within a host), and a
//! 1 MiB one in 16 pieces of 64 KiB; 8 KiB and less stay whole.
//!
//! Reduce and Allreduce went piece by piece too for a while (each site's
//! representative sending a reduced piece on at once); on 8 ranks over
//! emulated hosts that made the equality test 4x slower (6 s against 1.4)
//! and it timed out on the testbed, so they are whole-vector again until
//! that is understood.

#[cfg(test)]
use std::ops::Range;

/// Pieces a message is cut into when it is large enough.
const PIPELINE_DEPTH: usize = 4;
/// Smallest piece (see the module's comment).
const MIN_SEGMENT: usize = 8 * 1024;

/// `GW_MPI_COLL_SEGMENT`, read once: the largest piece.
fn max_segment() -> usize {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static SEGMENT: AtomicUsize = AtomicUsize::new(0);
    match SEGMENT.load(Ordering::Relaxed) {
        0 => {
            let v = usize::try_from(crate::params::num("MPI_COLL_SEGMENT"))
                .unwrap_or(usize::MAX)
                .max(1);
            SEGMENT.store(v, Ordering::Relaxed);
            v
        }
        v => v,
    }
}

/// Bytes per piece of a `len`-byte message of `elem`-byte elements: whole
/// elements, at least one (see the module's comment). Every member computes
/// the same from the same arguments, so all cut alike.
pub(super) fn segment_len(len: usize, elem: usize) -> usize {
    let want = len
        .div_ceil(PIPELINE_DEPTH)
        .max(MIN_SEGMENT)
        .min(max_segment());
    let elem = elem.max(1);
    (want / elem).max(1) * elem
}

#[cfg(test)]
/// The pieces of a `len`-byte message cut every `seg` bytes.
fn pieces(len: usize, seg: usize) -> Vec<Range<usize>> {
    (0..len)
        .step_by(seg.max(1))
        .map(|s| s..(s + seg).min(len))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_cover_the_message_in_whole_elements() {
        // 64 KiB: 4 pieces of 16 KiB; 8 KiB and less: one piece.
        assert_eq!(segment_len(65536, 4), 16384);
        assert!(segment_len(8192, 4) >= 8192);
        assert!(segment_len(100, 4) >= 100);
        // Whole elements of an odd size.
        let s = segment_len(65536 * 3, 12);
        assert_eq!(s % 12, 0);
        let p = pieces(65536 * 3, s);
        assert_eq!(p.first().map(|r| r.start), Some(0));
        assert_eq!(p.last().map(|r| r.end), Some(65536 * 3));
        assert!(p.windows(2).all(|w| w[0].end == w[1].start));
        // An element larger than a piece: one element per piece.
        assert_eq!(segment_len(1 << 20, 100_000), 100_000);
    }
}
