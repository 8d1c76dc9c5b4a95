//! `MPI_Reduce` on intracommunicators (flat: a binomial tree, or in rank
//! order at the root for a non-commutative op; hierarchical where
//! [`Mpi::hier_plan`] says so).
//!
//! The tree moves no byte more than it must: a leaf sends its own buffer as
//! it is (no packed copy first); a node receives its first child's data
//! straight into its accumulator and combines its own data into it there
//! (`own op child`, the order the tree always used); and the root's
//! accumulator is its contiguous receive buffer itself, so nothing is
//! unpacked at the end. On 2 ranks the root's work is then one receive (a
//! single copy within a host) and one pass of the op, where it was a pack,
//! the receive, the op and an unpack (and the other rank's a pack too):
//! 256 KiB took 2.7x Open MPI's time, and 0.64x of that after (see
//! docs/benchmarks.md, "Collectives on 2 ranks").

use crate::coll::check_root;
use crate::error::{class, err, Result};
use crate::mem;
use crate::request::{Buf, DtRef};
use crate::{Comm, Mpi, Op};

impl Mpi {
    /// `MPI_Reduce`. `send` None = `MPI_IN_PLACE` (at the root). `recv` matters at the root only.
    pub fn reduce(
        &self,
        comm: &Comm,
        send: Option<&Buf>,
        recv: &Buf,
        op: &Op,
        root: i32,
    ) -> Result<()> {
        if comm.is_inter() {
            return self.inter_reduce(comm, send, recv, op, root);
        }
        check_root(comm, root)?;
        let is_root = comm.rank == root as u32;
        let src = match send {
            Some(s) => s,
            None if is_root => recv,
            None => {
                return Err(err(
                    class::BUFFER,
                    "MPI_IN_PLACE is allowed at the root only",
                ))
            }
        };
        self.check_buf(src, "send buffer")?;
        if is_root {
            self.check_buf(recv, "receive buffer")?;
        }
        op.check(&src.dt)?;
        if let Some(seg) = self.sm_seg_reduce(comm, src)? {
            return self.sm_reduce(comm, seg, src, recv, op, Some(root as u32));
        }
        // A non-commutative op goes level by level only where that keeps
        // rank order (`Plan::contiguous`), else flat (rank order at the root).
        if let Some(plan) = self.hier_plan(comm) {
            if op.commutative() {
                return self.hier_reduce(comm, &plan, src, recv, op, root as u32);
            }
            if plan.contiguous() {
                return self.hier_reduce_ordered(comm, &plan, src, recv, op, root as u32);
            }
        }
        if !op.commutative() {
            return self.reduce_in_order(comm, src, recv, op, root as u32);
        }
        self.reduce_tree(comm, send, src, recv, op, root as u32)
    }

    /// Non-commutative: every rank sends to the root, which combines in
    /// rank order: a0 op a1 op ... op a(n-1).
    fn reduce_in_order(
        &self,
        comm: &Comm,
        src: &Buf,
        recv: &Buf,
        op: &Op,
        root: u32,
    ) -> Result<()> {
        let (dt, count) = (&src.dt, src.count);
        if comm.rank != root {
            let r = self.c_isend_buf(comm, src, root)?;
            return self.wait_all_internal(r);
        }
        let n = comm.size;
        let mut parts: Vec<Vec<u8>> = vec![Vec::new(); n as usize];
        for r in 0..n {
            if r != root {
                let mut t = vec![0u8; src.bytes()];
                self.c_recv(comm, &mut t, r)?;
                parts[r as usize] = t;
            }
        }
        parts[root as usize] = src.pack();
        let mut res = std::mem::take(&mut parts[0]);
        for p in parts.iter_mut().skip(1) {
            op.apply(dt, count, &res, p);
            res = std::mem::take(p);
        }
        recv.unpack(&res);
        Ok(())
    }

    /// Commutative: a binomial tree rooted at `root`; partial results
    /// combine lower virtual ranks op higher ones, as they always did (so
    /// MIN/MAX with NaNs and "commutative" user ops give the bits they gave).
    fn reduce_tree(
        &self,
        comm: &Comm,
        send: Option<&Buf>,
        src: &Buf,
        recv: &Buf,
        op: &Op,
        root: u32,
    ) -> Result<()> {
        let (dt, count, len) = (&src.dt, src.count, src.bytes());
        let n = comm.size;
        let vr = (comm.rank + n - root) % n;
        let real = |v: u32| (v + root) % n;
        if n > 1 && vr & 1 == 1 {
            // A leaf: its first step is to send, and what it sends is its own data.
            let r = self.c_isend_buf(comm, src, real(vr - 1))?;
            return self.wait_all_internal(r);
        }
        // The root's accumulator is its receive buffer when that is
        // contiguous and apart from the send buffer (MPI forbids overlap;
        // a program that overlaps them anyway, or passes MPI_IN_PLACE, gets
        // a temporary).
        let direct = if comm.rank == root {
            recv.contig_addr().filter(|&a| {
                recv.bytes() == len
                    && send.is_some_and(|s| {
                        s.contig_addr().is_some_and(|b| {
                            len == 0 || b.wrapping_add(len) <= a || a.wrapping_add(len) <= b
                        })
                    })
            })
        } else {
            None
        };
        // Reused temporaries (`scratch_take`): a fresh vector per call cost
        // large reductions a page fault per page.
        let mut acc_vec = if direct.is_some() {
            Vec::new()
        } else {
            self.scratch_take(len)
        };
        let mut own_packed = Vec::new();
        let own: &[u8] = match src.contig() {
            Some(s) => s,
            None => {
                own_packed = self.scratch_take(len);
                src.pack_into(&mut own_packed);
                &own_packed
            }
        };
        // Whether the accumulator holds a result yet (else the own data is
        // still only in `own`).
        let mut have = false;
        let mut tmp: Option<Vec<u8>> = None;
        let mut mask = 1;
        let res = loop {
            if mask >= n {
                break Ok(());
            }
            // SAFETY: `direct` is the root's receive buffer of this call,
            // `len` bytes (contiguous type), writable, apart from the send
            // buffer (checked above) and not otherwise used while this view
            // lives (until the next loop round).
            let acc: &mut [u8] = match direct {
                Some(a) => unsafe { mem::slice_mut(a, len) },
                None => &mut acc_vec,
            };
            if vr & mask != 0 {
                let parent = real(vr & !mask);
                break if have {
                    self.c_send(comm, acc, parent)
                } else {
                    self.c_isend_buf(comm, src, parent)
                        .and_then(|r| self.wait_all_internal(r))
                };
            }
            let child = vr | mask;
            if child < n {
                if !have {
                    // The child's data lands where the result goes; the own
                    // data (lower rank) is combined into it: own op child.
                    if let Err(e) = self.c_recv(comm, acc, real(child)) {
                        break Err(e);
                    }
                    op.apply(dt, count, own, acc);
                    have = true;
                } else {
                    let mut t = tmp.take().unwrap_or_else(|| self.scratch_take(len));
                    if let Err(e) = self.c_recv(comm, &mut t, real(child)) {
                        break Err(e);
                    }
                    // acc (lower ranks) op t (higher ranks)
                    op.apply(dt, count, acc, &mut t);
                    if direct.is_some() {
                        acc.copy_from_slice(&t);
                    } else {
                        std::mem::swap(&mut acc_vec, &mut t);
                    }
                    tmp = Some(t);
                }
            }
            mask <<= 1;
        };
        if res.is_ok() && comm.rank == root {
            match direct {
                Some(a) if !have => {
                    // SAFETY: as above (a communicator of one: no child came).
                    unsafe { mem::slice_mut(a, len) }.copy_from_slice(own);
                }
                Some(_) => {}
                None if have => recv.unpack(&acc_vec),
                None => recv.unpack(own),
            }
        }
        self.scratch_give(acc_vec);
        self.scratch_give(own_packed);
        if let Some(t) = tmp {
            self.scratch_give(t);
        }
        res
    }
}

impl Mpi {
    /// The large `allreduce` of two ranks (what recursive halving does with
    /// two: each keeps one half, sends the other, combines the half it
    /// keeps, then the halves cross back), taking the half it gives
    /// straight from the send buffer `own` and copying only the half it
    /// keeps into the accumulator `acc` (the receive buffer): the general
    /// path first copies the whole send buffer there. The element split and
    /// the order of the operands (peer op own in the kept half) are
    /// `allreduce_halving`'s, so the bits are the same.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn allreduce_pair_halves(
        &self,
        comm: &Comm,
        dt: &DtRef,
        count: usize,
        op: &Op,
        own: &[u8],
        acc: &mut [u8],
        tmp: &mut [u8],
    ) -> Result<()> {
        let esize = acc.len() / count;
        let lower = (count / 2 + count % 2) * esize;
        let peer = 1 - comm.rank;
        let (keep, give) = if comm.rank == 0 {
            (0..lower, lower..acc.len())
        } else {
            (lower..acc.len(), 0..lower)
        };
        acc[keep.clone()].copy_from_slice(&own[keep.clone()]);
        self.c_sendrecv(comm, &own[give.clone()], peer, &mut tmp[keep.clone()], peer)?;
        let n = keep.len() / esize;
        op.apply(dt, n, &tmp[keep.clone()], &mut acc[keep.clone()]);
        let (out, into) = crate::coll::disjoint(acc, keep, give);
        self.c_sendrecv(comm, out, peer, into, peer)?;
        Ok(())
    }
}
