//! Alltoall across sites: each site's leader collects its site's send
//! buffers, sends every other site's leader, in one message, the blocks its
//! site has for that site, and hands each member of its own site the blocks
//! addressed to it. Each byte crosses the wide area once, as in the flat
//! pairwise exchange, but in S·(S − 1) messages instead of one per pair of
//! ranks at different sites, and without the flat algorithm's n − 1 rounds,
//! most of which wait for a wide-area round trip.

use super::Plan;
use crate::coll::block;
use crate::error::Result;
use crate::request::Buf;
use crate::{Comm, Mpi, Req};
use std::sync::Arc;

impl Mpi {
    /// `MPI_Alltoall` (plain form; `send` is the caller's send buffer or a
    /// snapshot of the receive buffer for `MPI_IN_PLACE`), on a plan with
    /// two sites or more.
    pub(crate) fn hier_alltoall(
        &self,
        comm: &Comm,
        plan: &Plan,
        send: &Buf,
        recv: &Buf,
    ) -> Result<()> {
        let n = comm.size as usize;
        let me = comm.rank;
        let blk = send.count * send.dt.size;
        let my_site = plan.site[me as usize] as usize;
        let leader = plan.site_leader[my_site];
        let mut mine = vec![0u8; n * blk];
        for d in 0..n {
            block(send, d, send.count).pack_into(&mut mine[d * blk..(d + 1) * blk]);
        }
        if me != leader {
            self.c_send(comm, &mine, leader)?;
            let mut got = vec![0u8; n * blk];
            self.c_recv(comm, &mut got, leader)?;
            for s in 0..n {
                block(recv, s, recv.count).unpack(&got[s * blk..(s + 1) * blk]);
            }
            return Ok(());
        }
        // The leader: `rows[src]` = the n blocks rank `src` sends, for the
        // ranks of this site; `cols[dst]` = the n blocks rank `dst`
        // receives, in source order, for the ranks of this site.
        let site_ranks = &plan.ranks_of_site[my_site];
        let mut rows: Vec<Vec<u8>> = vec![Vec::new(); n];
        {
            let mut bufs: Vec<Vec<u8>> = vec![vec![0u8; n * blk]; site_ranks.len()];
            let mut reqs = Vec::new();
            for (b, &m) in bufs.iter_mut().zip(site_ranks) {
                if m != me {
                    // SAFETY: `bufs` outlives the wait below.
                    reqs.push(unsafe { self.c_irecv(comm, b, m) }?);
                }
            }
            self.wait_all_internal(reqs)?;
            for (b, &m) in bufs.into_iter().zip(site_ranks) {
                rows[m as usize] = b;
            }
            rows[me as usize] = std::mem::take(&mut mine);
        }
        let mut cols: Vec<Vec<u8>> = vec![Vec::new(); n];
        for &d in site_ranks {
            cols[d as usize] = vec![0u8; n * blk];
        }
        // Blocks within the site.
        for &s in site_ranks {
            for &d in site_ranks {
                let (s, d) = (s as usize, d as usize);
                cols[d][s * blk..(s + 1) * blk].copy_from_slice(&rows[s][d * blk..(d + 1) * blk]);
            }
        }
        // Across sites: one message each way per other site, blocks in
        // (source, destination) order of the two sites' ranks.
        let others: Vec<usize> = (0..plan.sites()).filter(|&t| t != my_site).collect();
        let outgoing: Vec<Vec<u8>> = others
            .iter()
            .map(|&t| {
                let mut v =
                    Vec::with_capacity(site_ranks.len() * plan.ranks_of_site[t].len() * blk);
                for &s in site_ranks {
                    for &d in &plan.ranks_of_site[t] {
                        let d = d as usize;
                        v.extend_from_slice(&rows[s as usize][d * blk..(d + 1) * blk]);
                    }
                }
                v
            })
            .collect();
        let mut incoming: Vec<Vec<u8>> = others
            .iter()
            .map(|&t| vec![0u8; plan.ranks_of_site[t].len() * site_ranks.len() * blk])
            .collect();
        let mut reqs: Vec<Arc<Req>> = Vec::new();
        for (b, &t) in incoming.iter_mut().zip(&others) {
            // SAFETY: `incoming` outlives the wait below.
            reqs.push(unsafe { self.c_irecv(comm, b, plan.site_leader[t]) }?);
        }
        for (v, &t) in outgoing.iter().zip(&others) {
            // SAFETY: `outgoing` outlives the wait below.
            if let Some(r) = unsafe { self.c_isend(comm, v, plan.site_leader[t]) }? {
                reqs.push(r);
            }
        }
        self.wait_all_internal(reqs)?;
        for (b, &t) in incoming.iter().zip(&others) {
            let mut at = 0;
            for &s in &plan.ranks_of_site[t] {
                for &d in site_ranks {
                    let s = s as usize;
                    cols[d as usize][s * blk..(s + 1) * blk].copy_from_slice(&b[at..at + blk]);
                    at += blk;
                }
            }
        }
        // Each member of the site its column.
        let mut reqs: Vec<Arc<Req>> = Vec::new();
        for &d in site_ranks {
            if d != me {
                // SAFETY: `cols` outlives the wait below.
                if let Some(r) = unsafe { self.c_isend(comm, &cols[d as usize], d) }? {
                    reqs.push(r);
                }
            }
        }
        for s in 0..n {
            block(recv, s, recv.count).unpack(&cols[me as usize][s * blk..(s + 1) * blk]);
        }
        self.wait_all_internal(reqs)
    }
}
