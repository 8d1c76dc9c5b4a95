//! Barrier, broadcast, reduce and allreduce over the levels of a [`Plan`].
//! The argument checks are the flat functions' (in `coll.rs`), which call
//! these once they have chosen the hierarchical algorithm.

use super::pipeline::{allreduce_segment, segment_len};
use super::Plan;
use crate::error::Result;
use crate::mem;
use crate::request::Buf;
use crate::{Comm, Mpi, Op};

impl Mpi {
    /// Barrier: each host's members report to its leader, each site's host
    /// leaders to the site's leader; each site leader tells every other it
    /// has arrived (one wide-area latency, `wan.rs`); then the release
    /// travels back down the same trees.
    pub(crate) fn hier_barrier(&self, comm: &Comm, plan: &Plan) -> Result<()> {
        let lv = plan.lists(0, comm.rank);
        self.list_fan_in(comm, &lv.host)?;
        self.list_fan_in(comm, &lv.site)?;
        self.wan_barrier(comm, &lv.wan)?;
        self.list_bcast(comm, &lv.site, &mut [])?;
        self.list_bcast(comm, &lv.host, &mut [])
    }

    /// Broadcast: the root sends to one representative per remote site, each
    /// site's representative to one per host of its site, each host's to its
    /// other members; segment by segment for large data.
    pub(crate) fn hier_bcast(&self, comm: &Comm, plan: &Plan, buf: &Buf, root: u32) -> Result<()> {
        let lv = plan.lists(root, comm.rank);
        let len = buf.bytes();
        let contig = buf.contig_addr();
        let mut packed = Vec::new();
        let data: &mut [u8] = match contig {
            // SAFETY: `buf` is the user's broadcast buffer of this call
            // (`Buf::new`'s contract): `len` bytes at `a` for a contiguous
            // type, readable at the root and writable elsewhere; the root
            // only reads it (it receives nothing), and no other view of it
            // is used while `data` lives.
            Some(a) => unsafe { mem::slice_mut(a, len) },
            None => {
                packed = self.scratch_take(len);
                if comm.rank == root {
                    buf.pack_into(&mut packed);
                }
                &mut packed[..]
            }
        };
        // Each level's sends stay in flight while this rank goes on to the
        // next segment: the segments stream without a wait per level.
        let mut sends = Vec::new();
        let mut res = Ok(());
        for chunk in data.chunks_mut(segment_len(len, 1).max(1)) {
            // SAFETY: every request in `sends` is waited for below, before
            // `data` (the user's buffer or `packed`) is touched again.
            res = unsafe {
                self.wan_bcast_start(comm, &lv.wan, chunk, &mut sends)
                    .and_then(|_| self.list_bcast_start(comm, &lv.site, chunk, &mut sends))
                    .and_then(|_| self.list_bcast_start(comm, &lv.host, chunk, &mut sends))
            };
            if res.is_err() {
                break;
            }
        }
        let waited = self.wait_all_internal(sends);
        let res = res.and(waited);
        if contig.is_none() {
            if res.is_ok() && comm.rank != root {
                buf.unpack(data);
            }
            self.scratch_give(packed);
        }
        res
    }

    /// Reduce with a commutative `op`: within each host to its
    /// representative, within each site to its representative, then across
    /// the sites to the root (one message from each remote site).
    pub(crate) fn hier_reduce(
        &self,
        comm: &Comm,
        plan: &Plan,
        src: &Buf,
        recv: &Buf,
        op: &Op,
        root: u32,
    ) -> Result<()> {
        let lv = plan.lists(root, comm.rank);
        let (dt, count) = (&src.dt, src.count);
        let mut acc = self.scratch_take(src.bytes());
        src.pack_into(&mut acc);
        let mut tmp = self.scratch_take(acc.len());
        let seg = segment_len(acc.len(), dt.size);
        let res = if seg < acc.len() {
            self.pipelined_reduce(comm, plan, root, dt, count, op, &mut acc, &mut tmp, seg)
        } else {
            self.host_reduce(comm, plan, &lv.host, dt, count, op, &mut acc, &mut tmp)
                .and_then(|_| self.list_reduce(comm, &lv.site, dt, count, op, &mut acc, &mut tmp))
                .and_then(|_| self.wan_reduce(comm, &lv.wan, dt, count, op, &mut acc))
        };
        if res.is_ok() && comm.rank == root {
            recv.unpack(&acc);
        }
        self.scratch_give(acc);
        self.scratch_give(tmp);
        res
    }

    /// Allreduce with a commutative `op`: reduce within hosts and sites to
    /// the site leaders, which exchange their partial results all-to-all
    /// (one wide-area latency; recursive doubling above 64 KiB, `wan.rs`),
    /// broadcast back down.
    pub(crate) fn hier_allreduce(
        &self,
        comm: &Comm,
        plan: &Plan,
        src: &Buf,
        recv: &Buf,
        op: &Op,
    ) -> Result<()> {
        let lv = plan.lists(0, comm.rank);
        let (dt, count) = (&src.dt, src.count);
        let mut acc = self.scratch_take(src.bytes());
        src.pack_into(&mut acc);
        let mut tmp = self.scratch_take(acc.len());
        if let Some(seg) = allreduce_segment(acc.len(), dt.size) {
            let res = self.pipelined_allreduce(comm, plan, dt, count, op, &mut acc, &mut tmp, seg);
            if res.is_ok() {
                recv.unpack(&acc);
            }
            self.scratch_give(acc);
            self.scratch_give(tmp);
            return res;
        }
        let res = self
            .host_reduce(comm, plan, &lv.host, dt, count, op, &mut acc, &mut tmp)
            .and_then(|_| self.list_reduce(comm, &lv.site, dt, count, op, &mut acc, &mut tmp))
            .and_then(|_| self.wan_allreduce(comm, &lv.wan, dt, count, op, &mut acc, &mut tmp))
            .and_then(|_| self.list_bcast(comm, &lv.site, &mut acc))
            .and_then(|_| self.host_bcast_result(comm, plan, &lv.host, op, &mut acc));
        if res.is_ok() {
            recv.unpack(&acc);
        }
        self.scratch_give(acc);
        self.scratch_give(tmp);
        res
    }
}
