//! Collectives on intracommunicators, over point-to-point messages on the
//! communicator's collective context (so they never match user messages).
//!
//! Algorithms: dissemination barrier; binomial-tree broadcast and reduce;
//! allreduce by recursive doubling (commutative or not: blocks of ranks
//! stay contiguous), and from `GW_MPI_ALLREDUCE_SPLIT` bytes (64 KiB) with
//! a commutative op by reduce-scatter (recursive halving) + allgather
//! (recursive doubling); ring allgather; pairwise alltoall;
//! recursive-doubling scan and exscan; linear gather/scatter and the
//! `v`/`w` variants. Data is handled packed; contiguous user buffers are
//! used in place (allreduce accumulates in a contiguous receive buffer).

use crate::error::{class, err, Result};
use crate::mem;
use crate::request::{Buf, DtRef, Req};
use crate::{Comm, Datatype, Mpi, Op};
use std::ops::Range;
use std::sync::Arc;

/// A buffer's memory copied aside, with an address that lays it out like the original.
struct Snapshot {
    _data: Vec<u8>,
    addr: usize,
}

fn snapshot(addr: usize, count: usize, dt: &Datatype) -> Snapshot {
    if count == 0 || dt.size == 0 {
        return Snapshot {
            _data: Vec::new(),
            addr,
        };
    }
    let lo = dt
        .true_lb
        .min(dt.true_lb + (count as isize - 1) * dt.extent);
    let hi = (dt.true_lb + dt.true_extent)
        .max(dt.true_lb + dt.true_extent + (count as isize - 1) * dt.extent);
    let mut v = vec![0u8; (hi - lo) as usize];
    // SAFETY: the range is the user's buffer of the running collective.
    unsafe { mem::read(addr.wrapping_add_signed(lo), &mut v) };
    let a = (v.as_ptr() as usize).wrapping_add_signed(-lo);
    Snapshot { _data: v, addr: a }
}

/// Block `i` of `count` elements of a buffer.
pub(crate) fn block(b: &Buf, i: usize, count: usize) -> Buf {
    let addr = b
        .addr()
        .wrapping_add_signed(i as isize * count as isize * b.dt.extent);
    // SAFETY: a sub-range of `b`, which is valid by `b`'s own contract.
    unsafe { Buf::new(addr, count, b.dt.clone()) }
}

/// `count` elements at element displacement `displ` of a buffer.
pub(crate) fn at(b: &Buf, displ: i64, count: usize) -> Buf {
    let addr = b.addr().wrapping_add_signed(displ as isize * b.dt.extent);
    // SAFETY: a sub-range of the user's buffer as the call's displacements describe.
    unsafe { Buf::new(addr, count, b.dt.clone()) }
}

/// Copies between two user buffers of the same type signature (through a packed temporary).
fn local_copy(from: &Buf, to: &Buf) -> Result<()> {
    if from.bytes() != to.bytes() {
        return Err(err(
            class::TRUNCATE,
            format!(
                "local copy of {} bytes into {} bytes",
                from.bytes(),
                to.bytes()
            ),
        ));
    }
    if let (Some(a), Some(b)) = (from.contig_addr(), to.contig_addr()) {
        // One copy, no temporary: packing into a fresh vector and unpacking
        // from it cost a 1 MiB alltoall on 2 ranks a page fault per page.
        // SAFETY: `Buf::new`'s contract: `from`'s packed bytes are readable
        // at `a` and `to`'s writable at `b`, `bytes()` long (contiguous
        // types); `ptr::copy` allows overlap, which MPI forbids anyway.
        unsafe { std::ptr::copy(a as *const u8, b as *mut u8, from.bytes()) };
        return Ok(());
    }
    let p = from.pack();
    to.unpack(&p);
    Ok(())
}

impl Mpi {
    fn push(&self, v: &mut Vec<Arc<Req>>, r: Option<Arc<Req>>) {
        if let Some(r) = r {
            v.push(r);
        }
    }

    pub fn barrier(&self, comm: &Comm) -> Result<()> {
        if comm.is_inter() {
            return self.inter_barrier(comm);
        }
        if let Some(seg) = self.sm_seg(comm, 0)? {
            return self.sm_barrier(comm, seg);
        }
        if let Some(plan) = self.hier_plan(comm) {
            return self.hier_barrier(comm, &plan);
        }
        let n = comm.size;
        let mut d = 1;
        while d < n {
            let to = (comm.rank + d) % n;
            let from = (comm.rank + n - d) % n;
            self.c_sendrecv(comm, &[], to, &mut [], from)?;
            d *= 2;
        }
        Ok(())
    }

    pub fn bcast(&self, comm: &Comm, buf: &Buf, root: i32) -> Result<()> {
        if comm.is_inter() {
            return self.inter_bcast(comm, buf, root);
        }
        self.check_buf(buf, "broadcast buffer")?;
        check_root(comm, root)?;
        let n = comm.size;
        if n == 1 || buf.bytes() == 0 {
            return Ok(());
        }
        let root = root as u32;
        if let Some(seg) = self.sm_seg_pieces(comm, buf.bytes())? {
            return self.sm_bcast(comm, seg, buf, root);
        }
        if let Some(plan) = self.hier_plan(comm) {
            return self.hier_bcast(comm, &plan, buf, root);
        }
        let vr = (comm.rank + n - root) % n;
        let mut mask = 1;
        while mask < n {
            if vr & mask != 0 {
                let src = (vr - mask + root) % n;
                let r = self.c_irecv_buf(comm, buf.clone(), src)?;
                self.wait_all_internal(Some(r))?;
                break;
            }
            mask <<= 1;
        }
        mask >>= 1;
        let mut sends = Vec::new();
        while mask > 0 {
            if vr + mask < n {
                let dst = (vr + mask + root) % n;
                let r = self.c_isend_buf(comm, buf, dst)?;
                self.push(&mut sends, r);
            }
            mask >>= 1;
        }
        self.wait_all_internal(sends)
    }

    /// `MPI_Allreduce`. `send` None = `MPI_IN_PLACE`.
    pub fn allreduce(&self, comm: &Comm, send: Option<&Buf>, recv: &Buf, op: &Op) -> Result<()> {
        if comm.is_inter() {
            return self.inter_allreduce(comm, send, recv, op);
        }
        let src = send.unwrap_or(recv);
        self.check_buf(src, "send buffer")?;
        self.check_buf(recv, "receive buffer")?;
        op.check(&src.dt)?;
        if let Some(seg) = self.sm_seg_reduce(comm, src)? {
            return self.sm_reduce(comm, seg, src, recv, op, None);
        }
        if let Some(plan) = self.hier_plan(comm) {
            if op.commutative() {
                return self.hier_allreduce(comm, &plan, src, recv, op);
            }
            if plan.contiguous() {
                return self.hier_allreduce_ordered(comm, &plan, src, recv, op);
            }
        }
        let dt = &src.dt;
        let count = src.count;
        let len = src.bytes();
        let n = comm.size;
        let mut pof2 = 1;
        while pof2 * 2 <= n {
            pof2 *= 2;
        }
        let rem = n - pof2;
        // A small temporary lives on the stack: a small allreduce is all
        // fixed costs, and the pool of temporaries is a lock taken twice.
        let mut small = [0u8; SMALL_TMP];
        let mut tmp_vec = Vec::new();
        let tmp: &mut [u8] = if len <= SMALL_TMP {
            &mut small[..len]
        } else {
            tmp_vec = self.scratch_take(len);
            &mut tmp_vec
        };
        // A contiguous receive buffer is the accumulator itself: no
        // temporary to pack into and unpack from (at 1 MiB those two copies
        // were a fifth of the call). Not when the send buffer overlaps it
        // (MPI forbids that; such a program gets the packed path).
        let direct = recv.contig_addr().filter(|&a| {
            recv.bytes() == len
                && send.is_none_or(|s| {
                    s.contig_addr().is_some_and(|b| {
                        len == 0 || b.wrapping_add(len) <= a || a.wrapping_add(len) <= b
                    })
                })
        });
        let res = if let Some(addr) = direct {
            // SAFETY: `recv` is the user's writable receive buffer of this
            // call (`Buf::new`'s contract), `len` bytes at `addr` since its
            // type is contiguous, and no other view of it is used while
            // `acc` lives (the send buffer does not overlap it, see above).
            let acc = unsafe { mem::slice_mut(addr, len) };
            match send.and_then(|s| s.contig()) {
                Some(own)
                    if n == 2 && op.commutative() && count >= 2 && len >= allreduce_split() =>
                {
                    self.allreduce_pair_halves(comm, dt, count, op, own, acc, tmp)
                }
                _ => {
                    if let Some(s) = send {
                        s.pack_into(acc);
                    }
                    self.allreduce_on(comm, dt, count, op, acc, tmp, rem, pof2)
                }
            }
        } else {
            let mut acc = self.scratch_take(len);
            src.pack_into(&mut acc);
            let res = self.allreduce_on(comm, dt, count, op, &mut acc, tmp, rem, pof2);
            if res.is_ok() {
                recv.unpack(&acc);
            }
            self.scratch_give(acc);
            res
        };
        self.scratch_give(tmp_vec);
        res
    }

    /// Picks the algorithm by size: large data with a commutative op
    /// reduce-scatters by recursive halving, then allgathers by recursive
    /// doubling (Rabenseifner, as MPICH): each rank moves about twice its
    /// data and reduces it once, instead of moving and reducing the whole of
    /// it in each of log2(n) rounds.
    #[allow(clippy::too_many_arguments)]
    fn allreduce_on(
        &self,
        comm: &Comm,
        dt: &DtRef,
        count: usize,
        op: &Op,
        acc: &mut [u8],
        tmp: &mut [u8],
        rem: u32,
        pof2: u32,
    ) -> Result<()> {
        if op.commutative() && count >= pof2 as usize && acc.len() >= allreduce_split() {
            self.allreduce_halving(comm, dt, count, op, acc, tmp, rem, pof2)
        } else {
            self.allreduce_rounds(comm, dt, count, op, acc, tmp, rem, pof2)
        }
    }

    /// The exchanges of `allreduce` (recursive doubling, with the ranks
    /// beyond the largest power of two folded in first).
    #[allow(clippy::too_many_arguments)]
    fn allreduce_rounds(
        &self,
        comm: &Comm,
        dt: &DtRef,
        count: usize,
        op: &Op,
        acc: &mut [u8],
        tmp: &mut [u8],
        rem: u32,
        pof2: u32,
    ) -> Result<()> {
        let rank = comm.rank;
        let newrank: i64 = if rank < 2 * rem {
            if rank.is_multiple_of(2) {
                self.c_send(comm, acc, rank + 1)?;
                -1
            } else {
                self.c_recv(comm, tmp, rank - 1)?;
                op.apply(dt, count, tmp, acc);
                (rank / 2) as i64
            }
        } else {
            (rank - rem) as i64
        };
        if newrank >= 0 {
            let nr = newrank as u32;
            let mut mask = 1;
            while mask < pof2 {
                let nd = nr ^ mask;
                let dst = if nd < rem { nd * 2 + 1 } else { nd + rem };
                self.c_sendrecv(comm, acc, dst, tmp, dst)?;
                // acc = lower rank's data op higher rank's, on both sides
                // alike, so every rank ends with the same bits (MIN/MAX
                // with NaNs, user ops that are "commutative" up to rounding).
                if dst < rank {
                    op.apply(dt, count, tmp, acc);
                } else {
                    op.apply(dt, count, acc, tmp);
                    acc.copy_from_slice(tmp);
                }
                mask <<= 1;
            }
        }
        if rank < 2 * rem {
            if rank % 2 == 1 {
                self.c_send(comm, acc, rank - 1)?;
            } else {
                self.c_recv(comm, acc, rank + 1)?;
            }
        }
        Ok(())
    }

    /// The large-message `allreduce`: ranks beyond the largest power of two
    /// fold in first (as in `allreduce_rounds`), then the `pof2` others
    /// reduce-scatter by recursive halving (each ends owning the reduced
    /// 1/pof2 of the data) and allgather by recursive doubling, then the
    /// folded ranks get the result. Commutative ops only: blocks are reduced
    /// in whatever order the halving meets them. The index arithmetic is
    /// MPICH's (`allreduce_intra_reduce_scatter_allgather`).
    #[allow(clippy::too_many_arguments)]
    fn allreduce_halving(
        &self,
        comm: &Comm,
        dt: &DtRef,
        count: usize,
        op: &Op,
        acc: &mut [u8],
        tmp: &mut [u8],
        rem: u32,
        pof2: u32,
    ) -> Result<()> {
        let rank = comm.rank;
        let esize = acc.len() / count;
        let newrank: Option<usize> = if rank < 2 * rem {
            if rank.is_multiple_of(2) {
                self.c_send(comm, acc, rank + 1)?;
                None
            } else {
                self.c_recv(comm, tmp, rank - 1)?;
                op.apply(dt, count, tmp, acc);
                Some((rank / 2) as usize)
            }
        } else {
            Some((rank - rem) as usize)
        };
        if let Some(nr) = newrank {
            let p = pof2 as usize;
            let real = |nd: usize| -> u32 {
                let nd = nd as u32;
                if nd < rem {
                    nd * 2 + 1
                } else {
                    nd + rem
                }
            };
            // Block i of the data: elements disps[i]..disps[i + 1].
            let mut disps = vec![0usize; p + 1];
            for i in 0..p {
                disps[i + 1] = disps[i] + count / p + usize::from(i < count % p);
            }
            let bytes = |lo: usize, hi: usize| disps[lo] * esize..disps[hi] * esize;
            let (mut send_idx, mut recv_idx, mut last_idx) = (0usize, 0usize, p);
            let mut mask = 1usize;
            while mask < p {
                let nd = nr ^ mask;
                let dst = real(nd);
                let (send, recv) = if nr < nd {
                    send_idx = recv_idx + p / (mask * 2);
                    (bytes(send_idx, last_idx), bytes(recv_idx, send_idx))
                } else {
                    recv_idx = send_idx + p / (mask * 2);
                    (bytes(send_idx, recv_idx), bytes(recv_idx, last_idx))
                };
                self.c_sendrecv(comm, &acc[send], dst, &mut tmp[recv.clone()], dst)?;
                let n = (recv.end - recv.start) / esize;
                op.apply(dt, n, &tmp[recv.clone()], &mut acc[recv]);
                send_idx = recv_idx;
                mask <<= 1;
                if mask < p {
                    last_idx = recv_idx + p / mask;
                }
            }
            mask >>= 1;
            while mask > 0 {
                let nd = nr ^ mask;
                let dst = real(nd);
                let (send, recv) = if nr < nd {
                    if mask != p / 2 {
                        last_idx += p / (mask * 2);
                    }
                    recv_idx = send_idx + p / (mask * 2);
                    (bytes(send_idx, recv_idx), bytes(recv_idx, last_idx))
                } else {
                    recv_idx = send_idx - p / (mask * 2);
                    (bytes(send_idx, last_idx), bytes(recv_idx, send_idx))
                };
                let (out, into) = disjoint(acc, send, recv);
                self.c_sendrecv(comm, out, dst, into, dst)?;
                if nr > nd {
                    send_idx = recv_idx;
                }
                mask >>= 1;
            }
        }
        if rank < 2 * rem {
            if rank % 2 == 1 {
                self.c_send(comm, acc, rank - 1)?;
            } else {
                self.c_recv(comm, acc, rank + 1)?;
            }
        }
        Ok(())
    }

    /// `MPI_Gather`: hierarchical where [`Mpi::hier_plan`] says so (equal
    /// blocks: the levels size what they carry without packet headers),
    /// else [`Mpi::gatherv`] with equal blocks.
    pub fn gather(&self, comm: &Comm, send: Option<&Buf>, recv: &Buf, root: i32) -> Result<()> {
        if !comm.is_inter() {
            check_root(comm, root)?;
            if comm.rank == root as u32 {
                self.check_buf(recv, "receive buffer")?;
            }
            match send {
                Some(s) => self.check_buf(s, "send buffer")?,
                None if comm.rank != root as u32 => {
                    return Err(err(
                        class::BUFFER,
                        "MPI_IN_PLACE is allowed at the root only",
                    ))
                }
                None => {}
            }
            if let Some(plan) = self.hier_plan(comm) {
                return self.hier_gather(comm, &plan, send, recv, root as u32);
            }
        }
        self.gatherv(comm, send, recv, None, root)
    }

    /// `MPI_Scatter`: as [`Mpi::gather`], the reverse way.
    pub fn scatter(&self, comm: &Comm, send: &Buf, recv: Option<&Buf>, root: i32) -> Result<()> {
        if !comm.is_inter() {
            check_root(comm, root)?;
            if comm.rank == root as u32 {
                self.check_buf(send, "send buffer")?;
            }
            match recv {
                Some(r) => self.check_buf(r, "receive buffer")?,
                None if comm.rank != root as u32 => {
                    return Err(err(
                        class::BUFFER,
                        "MPI_IN_PLACE is allowed at the root only",
                    ))
                }
                None => {}
            }
            if let Some(plan) = self.hier_plan(comm) {
                return self.hier_scatter(comm, &plan, send, recv, root as u32);
            }
        }
        self.scatterv(comm, send, None, recv, root)
    }

    /// `MPI_Gather(v)`. `counts`/`displs` None = the plain form with `recv.count` per rank.
    pub fn gatherv(
        &self,
        comm: &Comm,
        send: Option<&Buf>,
        recv: &Buf,
        counts: Option<(&[i64], &[i64])>,
        root: i32,
    ) -> Result<()> {
        if comm.is_inter() {
            return self.inter_gatherv(comm, send, recv, counts, root);
        }
        check_root(comm, root)?;
        let root = root as u32;
        let n = comm.size as usize;
        if let Some(plan) = self.hier_plan(comm) {
            match send {
                Some(s) => self.check_buf(s, "send buffer")?,
                None if comm.rank != root => {
                    return Err(err(
                        class::BUFFER,
                        "MPI_IN_PLACE is allowed at the root only",
                    ))
                }
                None => {}
            }
            if comm.rank == root {
                self.check_buf(recv, "receive buffer")?;
            }
            return self.hier_gatherv(comm, &plan, send, recv, counts, root);
        }
        if comm.rank != root {
            let s =
                send.ok_or_else(|| err(class::BUFFER, "MPI_IN_PLACE is allowed at the root only"))?;
            self.check_buf(s, "send buffer")?;
            let r = self.c_isend_buf(comm, s, root)?;
            return self.wait_all_internal(r);
        }
        self.check_buf(recv, "receive buffer")?;
        let slot = |i: usize| match counts {
            Some((c, d)) => at(recv, d[i], c[i] as usize),
            None => block(recv, i, recv.count),
        };
        let mut reqs = Vec::new();
        for i in 0..n {
            if i as u32 != root {
                reqs.push(self.c_irecv_buf(comm, slot(i), i as u32)?);
            }
        }
        if let Some(s) = send {
            self.check_buf(s, "send buffer")?;
            local_copy(s, &slot(root as usize))?;
        }
        self.wait_all_internal(reqs)
    }

    /// `MPI_Scatter(v)`. `recv` None = `MPI_IN_PLACE` at the root.
    pub fn scatterv(
        &self,
        comm: &Comm,
        send: &Buf,
        counts: Option<(&[i64], &[i64])>,
        recv: Option<&Buf>,
        root: i32,
    ) -> Result<()> {
        if comm.is_inter() {
            return self.inter_scatterv(comm, send, counts, recv, root);
        }
        check_root(comm, root)?;
        let root = root as u32;
        let n = comm.size as usize;
        if let Some(plan) = self.hier_plan(comm) {
            match recv {
                Some(r) => self.check_buf(r, "receive buffer")?,
                None if comm.rank != root => {
                    return Err(err(
                        class::BUFFER,
                        "MPI_IN_PLACE is allowed at the root only",
                    ))
                }
                None => {}
            }
            if comm.rank == root {
                self.check_buf(send, "send buffer")?;
            }
            return self.hier_scatterv(comm, &plan, send, counts, recv, root);
        }
        if comm.rank != root {
            let r =
                recv.ok_or_else(|| err(class::BUFFER, "MPI_IN_PLACE is allowed at the root only"))?;
            self.check_buf(r, "receive buffer")?;
            let q = self.c_irecv_buf(comm, r.clone(), root)?;
            return self.wait_all_internal(vec![q]);
        }
        self.check_buf(send, "send buffer")?;
        let slot = |i: usize| match counts {
            Some((c, d)) => at(send, d[i], c[i] as usize),
            None => block(send, i, send.count),
        };
        let mut reqs = Vec::new();
        for i in 0..n {
            if i as u32 != root {
                let r = self.c_isend_buf(comm, &slot(i), i as u32)?;
                self.push(&mut reqs, r);
            }
        }
        if let Some(r) = recv {
            self.check_buf(r, "receive buffer")?;
            local_copy(&slot(root as usize), r)?;
        }
        self.wait_all_internal(reqs)
    }

    /// `MPI_Allgather(v)` by a ring. `send` None = `MPI_IN_PLACE`.
    pub fn allgatherv(
        &self,
        comm: &Comm,
        send: Option<&Buf>,
        recv: &Buf,
        counts: Option<(&[i64], &[i64])>,
    ) -> Result<()> {
        if comm.is_inter() {
            return self.inter_allgatherv(comm, send, recv, counts);
        }
        self.check_buf(recv, "receive buffer")?;
        if let Some(plan) = self.hier_plan(comm) {
            return self.hier_allgatherv(comm, &plan, send, recv, counts);
        }
        let n = comm.size;
        let me = comm.rank;
        let slot = |i: u32| match counts {
            Some((c, d)) => at(recv, d[i as usize], c[i as usize] as usize),
            None => block(recv, i as usize, recv.count),
        };
        if let Some(s) = send {
            self.check_buf(s, "send buffer")?;
            if s.bytes() != slot(me).bytes() {
                // local_copy's error, before any message moves.
                return local_copy(s, &slot(me));
            }
        }
        if counts.is_none() {
            if let Some(seg) = self.sm_seg_pieces(comm, slot(me).bytes())? {
                return self.sm_allgather(comm, seg, send, recv);
            }
        }
        let right = (me + 1) % n;
        let left = (me + n - 1) % n;
        for k in 0..n - 1 {
            let sb = (me + n - k) % n;
            let rb = (me + n - k - 1) % n;
            let rr = self.c_irecv_buf(comm, slot(rb), left)?;
            // The own block goes from the send buffer, and its copy into
            // the receive buffer is made while the exchange is in flight
            // (a receiver on this host pulls it meanwhile), not before it.
            let sr = match send {
                Some(s) if k == 0 => self.c_isend_buf(comm, s, right),
                _ => self.c_isend_buf(comm, &slot(sb), right),
            };
            let sr = match sr {
                Ok(sr) => sr,
                Err(e) => {
                    self.abandon_recv(&rr);
                    return Err(e);
                }
            };
            let copied = match send {
                Some(s) if k == 0 => local_copy(s, &slot(me)),
                _ => Ok(()),
            };
            self.wait_all_internal(sr.into_iter().chain(Some(rr)))?;
            copied?;
        }
        if n == 1 {
            if let Some(s) = send {
                local_copy(s, &slot(me))?;
            }
        }
        Ok(())
    }

    /// Byte allgather for internal agreement (`Comm_split`).
    pub(crate) fn allgather_bytes(&self, comm: &Comm, mine: &[u8], all: &mut [u8]) -> Result<()> {
        // SAFETY: `mine` outlives the call, which completes the send.
        let s = unsafe { Buf::bytes_of(mine, &self.byte) };
        // SAFETY: `all` outlives the call.
        let r = unsafe { Buf::new(all.as_mut_ptr() as usize, mine.len(), self.byte.clone()) };
        self.allgatherv(comm, Some(&s), &r, None)
    }

    /// `MPI_Alltoall`: `send` None = `MPI_IN_PLACE`.
    pub fn alltoall(&self, comm: &Comm, send: Option<&Buf>, recv: &Buf) -> Result<()> {
        if comm.is_inter() {
            let n = comm.peer_size as usize;
            let blocks = |b: &Buf| (0..n).map(|i| block(b, i, b.count)).collect::<Vec<_>>();
            return self.inter_alltoallw(comm, send.map(blocks), blocks(recv));
        }
        self.check_buf(recv, "receive buffer")?;
        let n = comm.size as usize;
        let snap;
        let send = match send {
            Some(s) => s.clone(),
            None => {
                snap = snapshot(recv.addr(), recv.count * n, &recv.dt);
                // SAFETY: the snapshot lives until the end of this call.
                unsafe { Buf::new(snap.addr, recv.count, recv.dt.clone()) }
            }
        };
        self.check_buf(&send, "send buffer")?;
        if let Some(plan) = self.hier_plan(comm).filter(|p| p.sites() > 1) {
            return self.hier_alltoall(comm, &plan, &send, recv);
        }
        let me = comm.rank as usize;
        let (own, own_dst) = (block(&send, me, send.count), block(recv, me, recv.count));
        if n == 1 || own.bytes() != own_dst.bytes() {
            // (local_copy's error, before any message moves.)
            return local_copy(&own, &own_dst);
        }
        if let Some(seg) = self.sm_seg(comm, own.bytes() * n)? {
            return self.sm_alltoall(comm, seg, &send, recv);
        }
        for i in 1..n {
            let dst = (me + i) % n;
            let src = (me + n - i) % n;
            let rr = self.c_irecv_buf(comm, block(recv, src, recv.count), src as u32)?;
            let sr = match self.c_isend_buf(comm, &block(&send, dst, send.count), dst as u32) {
                Ok(sr) => sr,
                Err(e) => {
                    self.abandon_recv(&rr);
                    return Err(e);
                }
            };
            // The own block is copied while the first exchange is in flight.
            let copied = if i == 1 {
                local_copy(&own, &own_dst)
            } else {
                Ok(())
            };
            self.wait_all_internal(sr.into_iter().chain(Some(rr)))?;
            copied?;
        }
        Ok(())
    }

    /// `MPI_Alltoallw` (and, with one datatype, `Alltoallv`): per-peer buffers given explicitly.
    /// `sends` None = `MPI_IN_PLACE`.
    pub fn alltoallw(&self, comm: &Comm, sends: Option<Vec<Buf>>, recvs: Vec<Buf>) -> Result<()> {
        if comm.is_inter() {
            return self.inter_alltoallw(comm, sends, recvs);
        }
        let n = comm.size as usize;
        let mut snaps = Vec::new();
        let sends = match sends {
            Some(s) => s,
            None => recvs
                .iter()
                .map(|b| {
                    let s = snapshot(b.addr(), b.count, &b.dt);
                    // SAFETY: the snapshot lives until the end of this call.
                    let nb = unsafe { Buf::new(s.addr, b.count, b.dt.clone()) };
                    snaps.push(s);
                    nb
                })
                .collect(),
        };
        for b in sends.iter().chain(recvs.iter()) {
            self.check_buf(b, "buffer")?;
        }
        if let Some(plan) = self.hier_plan(comm).filter(|p| p.sites() > 1) {
            return self.hier_alltoallw(comm, &plan, &sends, &recvs);
        }
        let me = comm.rank as usize;
        let mut reqs = Vec::new();
        for (i, b) in recvs.iter().enumerate().take(n) {
            if i != me {
                reqs.push(self.c_irecv_buf(comm, b.clone(), i as u32)?);
            }
        }
        for k in 1..n {
            let i = (me + k) % n;
            let r = self.c_isend_buf(comm, &sends[i], i as u32)?;
            self.push(&mut reqs, r);
        }
        local_copy(&sends[me], &recvs[me])?;
        self.wait_all_internal(reqs)
    }

    /// `MPI_Reduce_scatter`: `counts[i]` elements of the result go to rank i.
    pub fn reduce_scatter(
        &self,
        comm: &Comm,
        send: Option<&Buf>,
        recv: &Buf,
        counts: &[i64],
        op: &Op,
    ) -> Result<()> {
        if comm.is_inter() {
            return self.inter_reduce_scatter(comm, send, recv, counts, op);
        }
        let dt = recv.dt.clone();
        let total = counts
            .iter()
            .try_fold(0usize, |a, &c| a.checked_add(usize::try_from(c).ok()?))
            .filter(|&t| {
                t.checked_mul(dt.size)
                    .is_some_and(|b| b <= isize::MAX as usize)
            })
            .ok_or_else(|| {
                crate::err(
                    class::COUNT,
                    "reduce_scatter: the counts sum beyond the address space",
                )
            })?;
        let mut whole = vec![0u8; total * dt.size];
        let me = comm.rank as usize;
        let displ: i64 = counts[..me].iter().sum();
        let src = match send {
            Some(s) => s.clone(),
            None => recv.clone(),
        };
        // SAFETY: MPI_Reduce_scatter's rule: the send buffer (in place: the
        // receive buffer) holds the sum of the counts.
        let src = unsafe { src.with_count_unchecked(total) };
        // Reduce to rank 0 in packed form, then scatter the packed pieces.
        let packed_t = packed_type(&dt);
        // SAFETY: `whole` lives until the end of this call.
        let wb = unsafe { Buf::new(whole.as_mut_ptr() as usize, total, packed_t.clone()) };
        self.reduce(comm, Some(&src), &wb, op, 0)?;
        let mine = recv.pack().len().max(counts[me] as usize * dt.size);
        let mut piece = vec![0u8; mine];
        // SAFETY: `piece` lives until the end of this call.
        let pb = unsafe { Buf::new(piece.as_mut_ptr() as usize, counts[me] as usize, packed_t) };
        let displs: Vec<i64> = counts
            .iter()
            .scan(0, |a, &c| {
                let d = *a;
                *a += c;
                Some(d)
            })
            .collect();
        if counts.iter().all(|&c| c == counts[0]) {
            // Equal pieces (`Reduce_scatter_block`): the plain scatter, which
            // is hierarchical across hosts and sites.
            // SAFETY: `whole` holds `total` = size × counts[0] elements and lives
            // until the end of this call.
            let blocks = unsafe {
                Buf::new(
                    whole.as_mut_ptr() as usize,
                    counts[0] as usize,
                    wb.dt.clone(),
                )
            };
            self.scatter(comm, &blocks, Some(&pb), 0)?;
        } else {
            self.scatterv(comm, &wb, Some((counts, &displs)), Some(&pb), 0)?;
        }
        let _ = displ;
        // In place the receive buffer holds all counts, else its own: never fewer.
        let mine = recv.with_count(counts[me] as usize).ok_or_else(|| {
            crate::err(
                class::COUNT,
                "reduce_scatter: the receive buffer holds fewer elements than this rank's count",
            )
        })?;
        mine.unpack(&piece[..counts[me] as usize * dt.size]);
        Ok(())
    }

    /// `MPI_Scan` (`exclusive` = `MPI_Exscan`). `send` None = `MPI_IN_PLACE`.
    pub fn scan(
        &self,
        comm: &Comm,
        send: Option<&Buf>,
        recv: &Buf,
        op: &Op,
        exclusive: bool,
    ) -> Result<()> {
        Self::intra_only(comm, if exclusive { "MPI_Exscan" } else { "MPI_Scan" })?;
        let src = send.unwrap_or(recv);
        self.check_buf(src, "send buffer")?;
        self.check_buf(recv, "receive buffer")?;
        op.check(&src.dt)?;
        if let Some(plan) = self.hier_plan(comm).filter(|p| p.contiguous()) {
            return self.hier_scan(comm, &plan, src, recv, op, exclusive);
        }
        let dt = &src.dt;
        let count = src.count;
        let mut partial = src.pack();
        let mut result = if exclusive {
            Vec::new()
        } else {
            partial.clone()
        };
        let mut have = !exclusive;
        let mut tmp = vec![0u8; partial.len()];
        let (n, rank) = (comm.size, comm.rank);
        let mut mask = 1;
        while mask < n {
            let dst = rank ^ mask;
            if dst < n {
                self.c_sendrecv(comm, &partial, dst, &mut tmp, dst)?;
                if rank > dst {
                    op.apply(dt, count, &tmp, &mut partial);
                    if have {
                        op.apply(dt, count, &tmp, &mut result);
                    } else {
                        result = tmp.clone();
                        have = true;
                    }
                } else if op.commutative() {
                    op.apply(dt, count, &tmp, &mut partial);
                } else {
                    op.apply(dt, count, &partial, &mut tmp);
                    std::mem::swap(&mut partial, &mut tmp);
                }
            }
            mask <<= 1;
        }
        if have {
            recv.unpack(&result);
        }
        Ok(())
    }
}

/// A contiguous datatype with the same element type as `dt` and no holes
/// (to reduce packed data in temporaries).
/// Two disjoint ranges of one buffer, one to read and one to write.
pub(crate) fn disjoint(
    buf: &mut [u8],
    read: Range<usize>,
    write: Range<usize>,
) -> (&[u8], &mut [u8]) {
    if read.end <= write.start {
        let (a, b) = buf.split_at_mut(write.start);
        (&a[read], &mut b[..write.end - write.start])
    } else {
        assert!(write.end <= read.start, "overlapping ranges");
        let (a, b) = buf.split_at_mut(read.start);
        (&b[..read.end - read.start], &mut a[write])
    }
}

/// Largest `allreduce` whose temporary is on the stack.
const SMALL_TMP: usize = 256;

/// Bytes from which `allreduce` with a commutative op reduce-scatters and
/// allgathers rather than exchanging the whole data in every round
/// (`GW_MPI_ALLREDUCE_SPLIT`, default 64 KiB). 2 ranks on one host,
/// `bench/mpi/osu.c allreduce`, µs at 32 KiB / 256 KiB / 1 MiB: recursive
/// doubling only 6.7 / 59.5 / 274; split at 64 KiB 6.7 / 43.3 / 230; at
/// 16 KiB 7.8 / 43.1 / 227 (MPICH 11.0 / 44.1 / 212 in the same session).
/// Read once (a lock and a parse would cost at every allreduce) unless an
/// MPI_T write changed it: [`set_allreduce_split`] then replaces the cache.
fn allreduce_split() -> usize {
    match ALLREDUCE_SPLIT.load(std::sync::atomic::Ordering::Relaxed) {
        0 => {
            let v =
                usize::try_from(crate::params::num("MPI_ALLREDUCE_SPLIT")).unwrap_or(usize::MAX);
            ALLREDUCE_SPLIT.store(v, std::sync::atomic::Ordering::Relaxed);
            v
        }
        v => v,
    }
}

/// The cached `GW_MPI_ALLREDUCE_SPLIT` (0 = not read yet).
static ALLREDUCE_SPLIT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Makes later allreduces use `bytes` (after an MPI_T write of the parameter).
pub fn set_allreduce_split(bytes: usize) {
    ALLREDUCE_SPLIT.store(bytes.max(1), std::sync::atomic::Ordering::Relaxed);
}

fn packed_type(dt: &DtRef) -> DtRef {
    if dt.contig {
        return dt.clone();
    }
    let t = match dt.basic {
        Some(b) => {
            let bt = Datatype::predefined(b, "");
            let per = dt.size / bt.size.max(1);
            Datatype::contiguous(per as i64, &bt).expect("non-negative")
        }
        None => Datatype::predefined(crate::Basic::Byte, ""),
    };
    t.commit();
    DtRef::shared(t)
}

pub(crate) fn check_root(comm: &Comm, root: i32) -> Result<()> {
    if root < 0 || root as u32 >= comm.size {
        return Err(err(
            class::ROOT,
            format!(
                "root {root} is invalid in a communicator of size {}",
                comm.size
            ),
        ));
    }
    Ok(())
}
