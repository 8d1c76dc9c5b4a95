//! The wide-area level: one hop. Among the site representatives a tree
//! (binomial broadcast or reduce, recursive doubling, dissemination) costs
//! ⌈log₂ S⌉ wide-area latencies one after the other; with a few sites the
//! messages are cheap and the latency is everything, so here the first
//! member sends to (or receives from) every other directly, and the
//! symmetric operations exchange all-to-all: one wide-area latency on the
//! critical path whatever the number of sites.

use super::tree::index_of;
use crate::error::Result;
use crate::request::DtRef;
use crate::{Comm, Mpi, Op, Req};
use std::sync::Arc;

/// Allreduce exchanges whole vectors all-to-all up to this many bytes (S − 1
/// copies per leader instead of log₂ S); larger ones use recursive doubling.
const ALL_TO_ALL_MAX: usize = 64 * 1024;

impl Mpi {
    /// Broadcast from `list[0]` straight to every other member, leaving the
    /// sends in flight in `sends` (see [`Mpi::list_bcast_start`]).
    ///
    /// # Safety
    /// As [`Mpi::list_bcast_start`]: `data` must stay alive and unchanged
    /// until the requests in `sends` complete.
    pub(super) unsafe fn wan_bcast_start(
        &self,
        comm: &Comm,
        list: &[u32],
        data: &mut [u8],
        sends: &mut Vec<Arc<Req>>,
    ) -> Result<()> {
        match index_of(list, comm.rank) {
            None => Ok(()),
            Some(0) => {
                for &m in &list[1..] {
                    // SAFETY: forwarded from this function's contract.
                    sends.extend(unsafe { self.c_isend(comm, data, m) }?);
                }
                Ok(())
            }
            Some(_) => self.c_recv(comm, data, list[0]).map(|_| ()),
        }
    }

    /// Reduction into `list[0]`, which receives every other member's data at
    /// once and combines it in list order (a commutative `op`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn wan_reduce(
        &self,
        comm: &Comm,
        list: &[u32],
        dt: &DtRef,
        count: usize,
        op: &Op,
        acc: &mut [u8],
    ) -> Result<()> {
        match index_of(list, comm.rank) {
            None => Ok(()),
            Some(0) => {
                for mut theirs in self.recv_all(comm, &list[1..], acc.len())? {
                    // theirs = acc op theirs, then keep it.
                    op.apply(dt, count, acc, &mut theirs);
                    acc.copy_from_slice(&theirs);
                }
                Ok(())
            }
            Some(_) => self.c_send(comm, acc, list[0]),
        }
    }

    /// Allreduce among the members of `list`: up to [`ALL_TO_ALL_MAX`]
    /// bytes every member sends its data to every other and combines all in
    /// list order (the same bits everywhere); beyond, recursive doubling.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn wan_allreduce(
        &self,
        comm: &Comm,
        list: &[u32],
        dt: &DtRef,
        count: usize,
        op: &Op,
        acc: &mut [u8],
        tmp: &mut [u8],
    ) -> Result<()> {
        if acc.len() > ALL_TO_ALL_MAX {
            return self.list_allreduce(comm, list, dt, count, op, acc, tmp);
        }
        let Some(me) = index_of(list, comm.rank) else {
            return Ok(());
        };
        if list.len() < 2 {
            return Ok(());
        }
        let others: Vec<u32> = list.iter().copied().filter(|&m| m != comm.rank).collect();
        let mut sends = Vec::new();
        for &m in &others {
            // SAFETY: `acc` is not touched until the wait below.
            sends.extend(unsafe { self.c_isend(comm, acc, m) }?);
        }
        let got = self.recv_all(comm, &others, acc.len());
        self.wait_all_internal(sends)?;
        let mut parts = got?;
        parts.insert(me, acc.to_vec());
        let mut it = parts.into_iter();
        let mut res = it.next().expect("two members or more");
        for mut p in it {
            op.apply(dt, count, &res, &mut p);
            res = p;
        }
        acc.copy_from_slice(&res);
        Ok(())
    }

    /// Barrier among the members of `list`: each tells every other it has
    /// arrived and waits for all of them (one wide-area latency).
    pub(super) fn wan_barrier(&self, comm: &Comm, list: &[u32]) -> Result<()> {
        if index_of(list, comm.rank).is_none() || list.len() < 2 {
            return Ok(());
        }
        let others: Vec<u32> = list.iter().copied().filter(|&m| m != comm.rank).collect();
        let mut sends = Vec::new();
        for &m in &others {
            // SAFETY: an empty message: nothing to keep alive.
            sends.extend(unsafe { self.c_isend(comm, &[], m) }?);
        }
        let got = self.recv_all(comm, &others, 0);
        self.wait_all_internal(sends)?;
        got.map(|_| ())
    }

    /// One `len`-byte message from each of `from`, all receives posted at once.
    fn recv_all(&self, comm: &Comm, from: &[u32], len: usize) -> Result<Vec<Vec<u8>>> {
        let mut bufs = vec![vec![0u8; len]; from.len()];
        let mut reqs = Vec::new();
        for (b, &m) in bufs.iter_mut().zip(from) {
            // SAFETY: `bufs` outlives the wait below.
            reqs.push(unsafe { self.c_irecv(comm, b, m) }?);
        }
        self.wait_all_internal(reqs)?;
        Ok(bufs)
    }
}
