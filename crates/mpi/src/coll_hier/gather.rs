//! Gather, scatter and allgather(v) over the levels of a [`Plan`]: blocks
//! travel up (or down) the levels concatenated, so that a site's blocks
//! cross the wide area in one message to each remote site (allgather) or
//! to the root's site (gather; the reverse for scatter), and each byte
//! crosses once.
//!
//! The blocks are packed, in one array indexed by communicator rank
//! (`off[r]..off[r + 1]`); a member of a list carries the blocks of the
//! ranks [`Plan::under`] it.

use super::tree::index_of;
use super::{LevelKind, Plan};
use crate::coll::{at, block};
use crate::error::{class, err, Result};
use crate::request::Buf;
use crate::{Comm, Mpi};
use std::sync::Arc;

/// Prefix sums of the block sizes: block r is `off[r]..off[r + 1]`.
fn offsets(sizes: impl Iterator<Item = usize>) -> Vec<usize> {
    let mut off = vec![0];
    for s in sizes {
        off.push(off.last().expect("non-empty") + s);
    }
    off
}

fn concat(arr: &[u8], off: &[usize], ranks: &[u32]) -> Vec<u8> {
    let mut v = Vec::with_capacity(ranks.iter().map(|&r| block_len(off, r)).sum());
    for &r in ranks {
        v.extend_from_slice(&arr[off[r as usize]..off[r as usize + 1]]);
    }
    v
}

fn spread(arr: &mut [u8], off: &[usize], ranks: &[u32], data: &[u8]) {
    let mut at = 0;
    for &r in ranks {
        let n = block_len(off, r);
        arr[off[r as usize]..off[r as usize + 1]].copy_from_slice(&data[at..at + n]);
        at += n;
    }
}

fn block_len(off: &[usize], r: u32) -> usize {
    off[r as usize + 1] - off[r as usize]
}

impl Mpi {
    /// The first member of `list` receives from every other member the
    /// blocks under it; the others send theirs.
    fn gather_level(
        &self,
        comm: &Comm,
        plan: &Plan,
        kind: LevelKind,
        list: &[u32],
        arr: &mut [u8],
        off: &[usize],
    ) -> Result<()> {
        match index_of(list, comm.rank) {
            None => Ok(()),
            Some(0) => {
                let from: Vec<Vec<u32>> = list[1..].iter().map(|&m| plan.under(kind, m)).collect();
                let mut bufs: Vec<Vec<u8>> = from
                    .iter()
                    .map(|rs| vec![0u8; rs.iter().map(|&r| block_len(off, r)).sum()])
                    .collect();
                let mut reqs = Vec::new();
                for (b, &m) in bufs.iter_mut().zip(&list[1..]) {
                    // SAFETY: `bufs` outlives the wait below.
                    reqs.push(unsafe { self.c_irecv(comm, b, m) }?);
                }
                self.wait_all_internal(reqs)?;
                for (rs, b) in from.iter().zip(&bufs) {
                    spread(arr, off, rs, b);
                }
                Ok(())
            }
            Some(_) => self.c_send(
                comm,
                &concat(arr, off, &plan.under(kind, comm.rank)),
                list[0],
            ),
        }
    }

    /// The reverse of [`Mpi::gather_level`]: the first member sends every
    /// other member the blocks under it.
    fn scatter_level(
        &self,
        comm: &Comm,
        plan: &Plan,
        kind: LevelKind,
        list: &[u32],
        arr: &mut [u8],
        off: &[usize],
    ) -> Result<()> {
        match index_of(list, comm.rank) {
            None => Ok(()),
            Some(0) => {
                let parts: Vec<Vec<u8>> = list[1..]
                    .iter()
                    .map(|&m| concat(arr, off, &plan.under(kind, m)))
                    .collect();
                let mut reqs = Vec::new();
                for (p, &m) in parts.iter().zip(&list[1..]) {
                    // SAFETY: `parts` outlives the wait below.
                    if let Some(r) = unsafe { self.c_isend(comm, p, m) }? {
                        reqs.push(r);
                    }
                }
                self.wait_all_internal(reqs)
            }
            Some(_) => {
                let mine = plan.under(kind, comm.rank);
                let mut b = vec![0u8; mine.iter().map(|&r| block_len(off, r)).sum()];
                self.c_recv(comm, &mut b, list[0])?;
                spread(arr, off, &mine, &b);
                Ok(())
            }
        }
    }

    /// Every member of `list` sends the blocks under it to every other
    /// member and receives theirs.
    fn exchange_level(
        &self,
        comm: &Comm,
        plan: &Plan,
        kind: LevelKind,
        list: &[u32],
        arr: &mut [u8],
        off: &[usize],
    ) -> Result<()> {
        if index_of(list, comm.rank).is_none() || list.len() < 2 {
            return Ok(());
        }
        let others: Vec<u32> = list.iter().copied().filter(|&m| m != comm.rank).collect();
        let from: Vec<Vec<u32>> = others.iter().map(|&m| plan.under(kind, m)).collect();
        let mut bufs: Vec<Vec<u8>> = from
            .iter()
            .map(|rs| vec![0u8; rs.iter().map(|&r| block_len(off, r)).sum()])
            .collect();
        let mine = concat(arr, off, &plan.under(kind, comm.rank));
        let mut reqs: Vec<Arc<crate::Req>> = Vec::new();
        for (b, &m) in bufs.iter_mut().zip(&others) {
            // SAFETY: `bufs` outlives the wait below.
            reqs.push(unsafe { self.c_irecv(comm, b, m) }?);
        }
        for &m in &others {
            // SAFETY: `mine` outlives the wait below.
            if let Some(r) = unsafe { self.c_isend(comm, &mine, m) }? {
                reqs.push(r);
            }
        }
        self.wait_all_internal(reqs)?;
        for (rs, b) in from.iter().zip(&bufs) {
            spread(arr, off, rs, b);
        }
        Ok(())
    }

    /// `MPI_Allgather(v)`: blocks gathered to each host's and each site's
    /// leader, exchanged among the site leaders (each site's blocks cross
    /// to each other site once), then broadcast within the sites and hosts.
    pub(crate) fn hier_allgatherv(
        &self,
        comm: &Comm,
        plan: &Plan,
        send: Option<&Buf>,
        recv: &Buf,
        counts: Option<(&[i64], &[i64])>,
    ) -> Result<()> {
        let n = comm.size as usize;
        let me = comm.rank as usize;
        let slot = |i: usize| match counts {
            Some((c, d)) => at(recv, d[i], c[i] as usize),
            None => block(recv, i, recv.count),
        };
        let off = offsets((0..n).map(|i| slot(i).bytes()));
        let mut arr = vec![0u8; off[n]];
        let own = &mut arr[off[me]..off[me + 1]];
        match send {
            Some(s) => {
                self.check_buf(s, "send buffer")?;
                if s.bytes() != own.len() {
                    return Err(err(
                        class::TRUNCATE,
                        format!(
                            "allgather: this rank sends {} bytes, its block holds {}",
                            s.bytes(),
                            own.len()
                        ),
                    ));
                }
                s.pack_into(own);
            }
            None => slot(me).pack_into(own),
        }
        let lv = plan.lists(0, comm.rank);
        self.gather_level(comm, plan, LevelKind::Host, &lv.host, &mut arr, &off)?;
        self.gather_level(comm, plan, LevelKind::Site, &lv.site, &mut arr, &off)?;
        self.exchange_level(comm, plan, LevelKind::Wan, &lv.wan, &mut arr, &off)?;
        self.list_bcast(comm, &lv.site, &mut arr)?;
        self.list_bcast(comm, &lv.host, &mut arr)?;
        for i in 0..n {
            if i != me || send.is_some() {
                slot(i).unpack(&arr[off[i]..off[i + 1]]);
            }
        }
        Ok(())
    }

    /// `MPI_Gather` (the plain form: every block has this rank's size):
    /// each host's blocks to its representative, each site's to its
    /// representative, then one message per remote site to the root.
    pub(crate) fn hier_gather(
        &self,
        comm: &Comm,
        plan: &Plan,
        send: Option<&Buf>,
        recv: &Buf,
        root: u32,
    ) -> Result<()> {
        let n = comm.size as usize;
        let me = comm.rank;
        let blk = match send {
            Some(s) => s.bytes(),
            None => recv.count * recv.dt.size,
        };
        let lv = plan.lists(root, me);
        if lv.host[0] != me {
            // An ordinary member: its block to its host's representative.
            let s = send.expect("checked by gatherv: only the root passes MPI_IN_PLACE");
            return self.c_send(comm, &s.pack(), lv.host[0]);
        }
        let off = offsets((0..n).map(|_| blk));
        let mut arr = vec![0u8; off[n]];
        if let Some(s) = send {
            s.pack_into(&mut arr[off[me as usize]..off[me as usize + 1]]);
        }
        self.gather_level(comm, plan, LevelKind::Host, &lv.host, &mut arr, &off)?;
        self.gather_level(comm, plan, LevelKind::Site, &lv.site, &mut arr, &off)?;
        self.gather_level(comm, plan, LevelKind::Wan, &lv.wan, &mut arr, &off)?;
        if me == root {
            for i in 0..n {
                if i != me as usize || send.is_some() {
                    block(recv, i, recv.count).unpack(&arr[off[i]..off[i + 1]]);
                }
            }
        }
        Ok(())
    }

    /// `MPI_Scatter` (plain form): the reverse of [`Mpi::hier_gather`].
    pub(crate) fn hier_scatter(
        &self,
        comm: &Comm,
        plan: &Plan,
        send: &Buf,
        recv: Option<&Buf>,
        root: u32,
    ) -> Result<()> {
        let n = comm.size as usize;
        let me = comm.rank;
        let lv = plan.lists(root, me);
        if lv.host[0] != me {
            let r = recv.expect("checked by scatterv: only the root passes MPI_IN_PLACE");
            let mut b = vec![0u8; r.bytes()];
            self.c_recv(comm, &mut b, lv.host[0])?;
            r.unpack(&b);
            return Ok(());
        }
        let blk = if me == root {
            send.count * send.dt.size
        } else {
            recv.map_or(0, |r| r.bytes())
        };
        let off = offsets((0..n).map(|_| blk));
        let mut arr = vec![0u8; off[n]];
        if me == root {
            for i in 0..n {
                block(send, i, send.count).pack_into(&mut arr[off[i]..off[i + 1]]);
            }
        }
        self.scatter_level(comm, plan, LevelKind::Wan, &lv.wan, &mut arr, &off)?;
        self.scatter_level(comm, plan, LevelKind::Site, &lv.site, &mut arr, &off)?;
        self.scatter_level(comm, plan, LevelKind::Host, &lv.host, &mut arr, &off)?;
        if let Some(r) = recv {
            r.unpack(&arr[off[me as usize]..off[me as usize + 1]]);
        }
        Ok(())
    }
}
