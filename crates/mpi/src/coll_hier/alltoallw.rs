//! `Alltoallv`/`Alltoallw` across sites. Within a site the blocks go
//! straight from rank to rank (pairwise, as the flat algorithm); the blocks
//! for other sites go as one packet to the site's leader, which sends each
//! other site's leader, in one message, everything its site has for that
//! site, and hands each member, in one message, what came for it. Each
//! byte crosses the wide area once, in S·(S − 1) messages instead of one
//! per pair of ranks at different sites. Only each member knows its own
//! counts, so the blocks travel as packets ([`super::packets`]).

use super::packets::{decode, encode, unpack_exact};
use super::Plan;
use crate::error::{class, err, Result};
use crate::request::Buf;
use crate::{Comm, Mpi, Req};
use std::sync::Arc;

fn unexpected(from: u32, what: &str) -> crate::error::MpiError {
    err(
        class::INTERN,
        format!("hierarchical alltoallv: rank {from} sent {what}"),
    )
}

impl Mpi {
    /// `MPI_Alltoallw` with per-peer buffers (`sends` is the caller's or a
    /// snapshot of `recvs` for `MPI_IN_PLACE`), on a plan with two sites or
    /// more.
    pub(crate) fn hier_alltoallw(
        &self,
        comm: &Comm,
        plan: &Plan,
        sends: &[Buf],
        recvs: &[Buf],
    ) -> Result<()> {
        let n = comm.size as usize;
        let me = comm.rank;
        let my_site = plan.site[me as usize];
        let leader = plan.site_leader[my_site as usize];
        let site_ranks = &plan.ranks_of_site[my_site as usize];
        // Within the site: straight, pairwise (tag 0; packets have their own tag).
        let mut reqs: Vec<Arc<Req>> = Vec::new();
        for &s in site_ranks {
            if s != me {
                reqs.push(self.c_irecv_buf(comm, recvs[s as usize].clone(), s)?);
            }
        }
        for &d in site_ranks {
            if d != me {
                let r = self.c_isend_buf(comm, &sends[d as usize], d)?;
                reqs.extend(r);
            }
        }
        let own = sends[me as usize].pack();
        unpack_exact(&recvs[me as usize], &own, "alltoallv")?;
        // My blocks for other sites, keyed by destination.
        let out: Vec<(u64, Vec<u8>)> = (0..n)
            .filter(|&d| plan.site[d] != my_site)
            .map(|d| (d as u64, sends[d].pack()))
            .collect();
        let res = if me != leader {
            self.send_packet(comm, &encode(out.iter().map(|(k, b)| (*k, &b[..]))), leader)
                .and_then(|_| self.recv_packet(comm, leader))
                .and_then(|p| {
                    let blocks = decode(&p, leader)?;
                    self.file_column(plan, recvs, my_site, leader, &blocks)
                })
        } else {
            self.leader_alltoallw(comm, plan, recvs, out)
        };
        let waited = self.wait_all_internal(reqs);
        res.and(waited)
    }

    /// Unpacks the blocks that came from other sites, keyed by source: one
    /// for each rank of the other sites, each exactly its buffer's size.
    fn file_column(
        &self,
        plan: &Plan,
        recvs: &[Buf],
        my_site: u32,
        from: u32,
        blocks: &[(u64, &[u8])],
    ) -> Result<()> {
        let others = plan.site.iter().filter(|&&s| s != my_site).count();
        if blocks.len() != others {
            return Err(unexpected(from, "a wrong number of blocks"));
        }
        let mut seen = vec![false; recvs.len()];
        for &(k, b) in blocks {
            let s = usize::try_from(k)
                .ok()
                .filter(|&s| s < recvs.len() && plan.site[s] != my_site && !seen[s])
                .ok_or_else(|| unexpected(from, "a block from an unexpected source"))?;
            seen[s] = true;
            unpack_exact(&recvs[s], b, "alltoallv")?;
        }
        Ok(())
    }

    /// The leader's part: collect the site's blocks for other sites, trade
    /// them with the other leaders, deal out what came.
    fn leader_alltoallw(
        &self,
        comm: &Comm,
        plan: &Plan,
        recvs: &[Buf],
        mine: Vec<(u64, Vec<u8>)>,
    ) -> Result<()> {
        let n = comm.size as usize;
        let me = comm.rank;
        let my_site = plan.site[me as usize];
        let site_ranks = &plan.ranks_of_site[my_site as usize];
        let members: Vec<u32> = site_ranks.iter().copied().filter(|&m| m != me).collect();
        // rows[src][dst]: the blocks of this site's ranks for other sites.
        let mut rows: Vec<Vec<Option<Vec<u8>>>> = vec![Vec::new(); n];
        let mut fill = |src: u32, blocks: Vec<(u64, Vec<u8>)>| -> Result<()> {
            let mut row = vec![None; n];
            for (k, b) in blocks {
                let d = usize::try_from(k)
                    .ok()
                    .filter(|&d| d < n && plan.site[d] != my_site && row[d].is_none())
                    .ok_or_else(|| unexpected(src, "a block for an unexpected destination"))?;
                row[d] = Some(b);
            }
            if row.iter().filter(|b| b.is_some()).count() != n - site_ranks.len() {
                return Err(unexpected(src, "a wrong number of blocks"));
            }
            rows[src as usize] = row;
            Ok(())
        };
        fill(me, mine)?;
        for (p, &m) in self.recv_packets(comm, &members)?.iter().zip(&members) {
            let blocks = decode(p, m)?;
            fill(
                m,
                blocks.into_iter().map(|(k, b)| (k, b.to_vec())).collect(),
            )?;
        }
        // Across sites: one packet each way per other site, keyed src·n + dst.
        let others: Vec<u32> = (0..plan.sites() as u32).filter(|&t| t != my_site).collect();
        let out: Vec<(Vec<u8>, u32)> = others
            .iter()
            .map(|&t| {
                let theirs = &plan.ranks_of_site[t as usize];
                let blocks = site_ranks.iter().flat_map(|&s| {
                    let row = &rows[s as usize];
                    theirs.iter().map(move |&d| {
                        let b = row[d as usize].as_deref().expect("filled above");
                        (s as u64 * n as u64 + d as u64, b)
                    })
                });
                (encode(blocks), plan.site_leader[t as usize])
            })
            .collect();
        let leaders: Vec<u32> = others
            .iter()
            .map(|&t| plan.site_leader[t as usize])
            .collect();
        let mut sends = Vec::new();
        for (p, d) in &out {
            // SAFETY: `out` outlives the wait below.
            sends.extend(unsafe { self.isend_packet(comm, p, *d) }?);
        }
        let incoming = self.recv_packets(comm, &leaders);
        self.wait_all_internal(sends)?;
        // cols[dst]: (src, block) for each of this site's ranks.
        let mut cols: Vec<Vec<(u64, &[u8])>> = vec![Vec::new(); n];
        let incoming = incoming?;
        for ((p, &t), &l) in incoming.iter().zip(&others).zip(&leaders) {
            let blocks = decode(p, l)?;
            let theirs = &plan.ranks_of_site[t as usize];
            if blocks.len() != theirs.len() * site_ranks.len() {
                return Err(unexpected(l, "a wrong number of blocks"));
            }
            for (k, b) in blocks {
                let (s, d) = ((k / n as u64) as usize, (k % n as u64) as usize);
                if s >= n || plan.site[s] != t || plan.site[d] != my_site {
                    return Err(unexpected(l, "a block between unexpected ranks"));
                }
                cols[d].push((s as u64, b));
            }
        }
        let deal: Vec<(Vec<u8>, u32)> = members
            .iter()
            .map(|&d| (encode(cols[d as usize].iter().copied()), d))
            .collect();
        let dealt = self.send_packets(comm, &deal);
        self.file_column(plan, recvs, my_site, me, &cols[me as usize])?;
        dealt
    }
}
