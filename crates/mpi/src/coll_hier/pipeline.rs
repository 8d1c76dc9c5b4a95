//! Segments: a broadcast or reduction of more than one segment goes level
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
//! Reduce: the host level combines the whole vector once (in the host's
//! shared segment where it fits), then each piece is reduced within the
//! site, and each site's representative starts sending it to the root at
//! once and goes on with the next; the root posted every piece's receive
//! beforehand and combines at the end. Allreduce: the representatives
//! exchange each piece all-to-all as soon as their site has reduced it,
//! spread each result piece down the site as soon as all sites' copies of
//! it are in, and the host level takes the whole result once at the end.
//!
//! Why the host level is not cut: it is one pass over the host's shared
//! segment, where there is no link to keep busy, and cutting it costs a
//! round of wake-ups per piece, with each member waiting (in the segment's
//! spin-and-sleep loop, which runs no MPI progress) for its representative
//! to take piece k before it may write piece k + 1. A first version cut it
//! and was taken out after the equality test `coll_hier` ran 4x slower with
//! it (6 s against 1.4) and timed out on the testbed. On the code of
//! 2026-11-27 17:00 the slowdown on emulated hosts did not come back (the
//! test took 2.7-4.3 s with that version, 3.0-5.7 s whole-vector, 4.0-4.4 s
//! with this one, interleaved at load 6-15: docs/benchmarks.md,
//! "Hierarchical collectives, part 4"), so its cause is not known; this
//! version avoids the per-piece waits in any case.

use super::tree::index_of;
use super::Plan;
use crate::error::Result;
use crate::request::DtRef;
use crate::{Comm, Mpi, Op, Req};
use std::ops::Range;
use std::sync::Arc;

/// Pieces a message is cut into when it is large enough.
const PIPELINE_DEPTH: usize = 4;
/// Smallest piece (see the module's comment).
const MIN_SEGMENT: usize = 8 * 1024;
/// Allreduce pipelines its all-to-all exchange up to this many bytes; larger
/// ones (each representative would send S − 1 copies of them across the
/// wide area) use recursive doubling, unsegmented.
const PIPELINED_ALLREDUCE_MAX: usize = 1 << 20;

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

/// The piece size of a pipelined allreduce of `len` bytes of `elem`-byte
/// elements, or None when it is not pipelined (one piece, or above
/// [`PIPELINED_ALLREDUCE_MAX`]): the caller then runs the unsegmented one.
pub(super) fn allreduce_segment(len: usize, elem: usize) -> Option<usize> {
    let seg = segment_len(len, elem);
    (seg < len && len <= PIPELINED_ALLREDUCE_MAX).then_some(seg)
}

/// The pieces of a `len`-byte message cut every `seg` bytes.
fn pieces(len: usize, seg: usize) -> Vec<Range<usize>> {
    (0..len)
        .step_by(seg.max(1))
        .map(|s| s..(s + seg).min(len))
        .collect()
}

impl Mpi {
    /// Waits for `sends` and gives up `recvs` (cancelled, or waited for if
    /// already matched): for an error path, before the buffers go.
    fn drain(&self, sends: Vec<Arc<Req>>, recvs: Vec<Arc<Req>>) {
        for r in &recvs {
            self.abandon_recv(r);
        }
        let _ = self.wait_all_internal(sends);
    }

    /// Reduce of `acc` (packed, `count` elements of `dt`) into the root of
    /// `plan.lists(root, ..)`, piece by piece (pieces of `seg` bytes, more
    /// than one). `tmp` is scratch of `acc`'s length.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn pipelined_reduce(
        &self,
        comm: &Comm,
        plan: &Plan,
        root: u32,
        dt: &DtRef,
        count: usize,
        op: &Op,
        acc: &mut [u8],
        tmp: &mut [u8],
        seg: usize,
    ) -> Result<()> {
        let lv = plan.lists(root, comm.rank);
        let parts = pieces(acc.len(), seg);
        let elems = |r: &Range<usize>| (r.end - r.start) / dt.size.max(1);
        let wan_at = index_of(&lv.wan, comm.rank);
        // The root: every piece of every remote site, posted up front.
        let mut theirs: Vec<Vec<u8>> = Vec::new();
        let mut recvs = Vec::new();
        if wan_at == Some(0) {
            theirs = vec![vec![0u8; acc.len()]; lv.wan.len() - 1];
            for (buf, &m) in theirs.iter_mut().zip(&lv.wan[1..]) {
                for r in &parts {
                    // SAFETY: `theirs` outlives every request: they are
                    // waited for (or given up, `drain`) before it goes.
                    match unsafe { self.c_irecv(comm, &mut buf[r.clone()], m) } {
                        Ok(q) => recvs.push(q),
                        Err(e) => {
                            self.drain(Vec::new(), recvs);
                            return Err(e);
                        }
                    }
                }
            }
        }
        // The host level once, on the whole vector (see the module's comment).
        if let Err(e) = self.host_reduce(comm, plan, &lv.host, dt, count, op, acc, tmp) {
            self.drain(Vec::new(), recvs);
            return Err(e);
        }
        let mut sends = Vec::new();
        for r in &parts {
            let n = elems(r);
            let (a, t) = (&mut acc[r.clone()], &mut tmp[r.clone()]);
            let step =
                self.list_reduce(comm, &lv.site, dt, n, op, a, t)
                    .and_then(|_| match wan_at {
                        // SAFETY: this piece of `acc` is not written again
                        // (the next pieces are others) before the wait below.
                        Some(i) if i > 0 => unsafe { self.c_isend(comm, a, lv.wan[0]) },
                        _ => Ok(None),
                    });
            match step {
                Ok(q) => sends.extend(q),
                Err(e) => {
                    self.drain(sends, recvs);
                    return Err(e);
                }
            }
        }
        self.wait_all_internal(sends)?;
        self.wait_all_internal(recvs)?;
        // In list order, as the unsegmented reduction combines.
        for mut t in theirs {
            op.apply(dt, acc.len() / dt.size.max(1), acc, &mut t);
            acc.copy_from_slice(&t);
        }
        Ok(())
    }

    /// Allreduce of `acc` among all members piece by piece (pieces of `seg`
    /// bytes, more than one): up within hosts and sites, all-to-all among the
    /// site representatives, back down the site, each piece as soon as it
    /// can go; the host level once on the whole vector, both ways.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn pipelined_allreduce(
        &self,
        comm: &Comm,
        plan: &Plan,
        dt: &DtRef,
        count: usize,
        op: &Op,
        acc: &mut [u8],
        tmp: &mut [u8],
        seg: usize,
    ) -> Result<()> {
        let lv = plan.lists(0, comm.rank);
        let parts = pieces(acc.len(), seg);
        let elems = |r: &Range<usize>| (r.end - r.start) / dt.size.max(1);
        let me = index_of(&lv.wan, comm.rank).filter(|_| lv.wan.len() > 1);
        let others: Vec<u32> = lv.wan.iter().copied().filter(|&m| m != comm.rank).collect();
        // Per wide-area member (list order), its copy of the whole vector.
        let mut theirs: Vec<Vec<u8>> = if me.is_some() {
            vec![vec![0u8; acc.len()]; others.len()]
        } else {
            Vec::new()
        };
        // Per piece: its sends, and its receives from each other member.
        let mut sends: Vec<Vec<Arc<Req>>> = Vec::new();
        let mut recvs: Vec<Vec<Arc<Req>>> = Vec::new();
        let give_up = |s: Vec<Vec<Arc<Req>>>, r: Vec<Vec<Arc<Req>>>| {
            self.drain(
                s.into_iter().flatten().collect(),
                r.into_iter().flatten().collect(),
            );
        };
        // The host level once, on the whole vector (see the module's comment).
        self.host_reduce(comm, plan, &lv.host, dt, count, op, acc, tmp)?;
        // Up: reduce each piece within the site, then start its exchange.
        for r in &parts {
            let n = elems(r);
            let (a, t) = (&mut acc[r.clone()], &mut tmp[r.clone()]);
            let up = self.list_reduce(comm, &lv.site, dt, n, op, a, t);
            if let Err(e) = up {
                give_up(sends, recvs);
                return Err(e);
            }
            if me.is_none() {
                continue;
            }
            let (mut s, mut q) = (Vec::new(), Vec::new());
            let mut started = Ok(());
            for (buf, &m) in theirs.iter_mut().zip(&others) {
                // SAFETY: `theirs` and this piece of `acc` are left alone
                // until this piece's requests are waited for (below, or
                // `drain` on an error).
                let res = unsafe { self.c_irecv(comm, &mut buf[r.clone()], m) }
                    .map(|x| q.push(x))
                    .and_then(|_| unsafe { self.c_isend(comm, a, m) })
                    .map(|x| s.extend(x));
                if res.is_err() {
                    started = res;
                    break;
                }
            }
            sends.push(s);
            recvs.push(q);
            if let Err(e) = started {
                give_up(sends, recvs);
                return Err(e);
            }
        }
        // Down: each piece once every site's copy of it is in.
        let mut sends = sends.into_iter();
        let mut recvs = recvs.into_iter();
        for r in &parts {
            if let Some(i) = me {
                let (s, q) = (
                    sends.next().unwrap_or_default(),
                    recvs.next().unwrap_or_default(),
                );
                let waited = self.wait_all_internal(s).and(self.wait_all_internal(q));
                if let Err(e) = waited {
                    give_up(sends.collect(), recvs.collect());
                    return Err(e);
                }
                // Combine in list order (the same bits on every member).
                let n = elems(r);
                let mut res: Vec<u8> = Vec::with_capacity(r.len());
                let mut at = 0;
                for k in 0..lv.wan.len() {
                    let part: &[u8] = if k == i {
                        &acc[r.clone()]
                    } else {
                        let p = &theirs[at][r.clone()];
                        at += 1;
                        p
                    };
                    if k == 0 {
                        res.extend_from_slice(part);
                    } else {
                        let mut p = part.to_vec();
                        op.apply(dt, n, &res, &mut p);
                        res = p;
                    }
                }
                acc[r.clone()].copy_from_slice(&res);
            }
            let a = &mut acc[r.clone()];
            if let Err(e) = self.list_bcast(comm, &lv.site, a) {
                give_up(sends.collect(), recvs.collect());
                return Err(e);
            }
        }
        // The host level once: the whole result, through the shared segment
        // where the host level of the way up used it.
        self.host_bcast_result(comm, plan, &lv.host, op, acc)
    }
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
