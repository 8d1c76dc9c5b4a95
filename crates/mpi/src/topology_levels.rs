//! Topology levels for the program: which ranks share a host, which share a
//! site. Every rank published its placement (host digest, `GW_SITE`) through
//! the bootstrap at start-up, so the split colours below are computed from
//! that, with no exchange beyond the split itself.

use crate::comm::Comm;
use crate::error::{err, Result};
use crate::{class, Mpi, UNDEFINED};
use gridwire_core::context::Placement;
use std::sync::Arc;

/// A level of the hierarchy, from widest to narrowest (a process is below a host).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Site,
    Host,
}

/// Number of levels [`Mpi::level_colours`] reports per process (site, host).
pub const LEVEL_DEPTH: usize = 2;

impl Level {
    fn same(self, a: &Placement, b: &Placement) -> bool {
        match self {
            Level::Site => a.site == b.site,
            // A host within its site (see `comm_split_host_in_site`).
            Level::Host => a.host == b.host && a.site == b.site,
        }
    }
}

impl Mpi {
    fn placements(&self, worlds: impl Iterator<Item = u32>) -> Result<Vec<(u32, Placement)>> {
        worlds
            .map(|w| {
                let p = self
                    .ctx()
                    .placement_of(w)
                    .map_err(|e| err(class::INTERN, format!("placement of world rank {w}: {e}")))?;
                Ok((w, p))
            })
            .collect()
    }

    /// The world ranks of `comm`'s members, both groups of an intercommunicator.
    fn member_worlds(comm: &Comm) -> Vec<u32> {
        let mut v: Vec<u32> = (0..comm.size).map(|r| comm.group.world(r)).collect();
        if comm.is_inter() {
            v.extend((0..comm.peer_size).map(|r| comm.peers.world(r)));
        }
        v
    }

    /// Whether `comm`'s members run at more than one site.
    pub fn spans_sites(&self, comm: &Comm) -> Result<bool> {
        let all = self.placements(Self::member_worlds(comm).into_iter())?;
        Ok(all.iter().any(|(_, p)| p.site != all[0].1.site))
    }

    /// Whether `comm`'s members run on more than one host.
    pub fn spans_hosts(&self, comm: &Comm) -> Result<bool> {
        let all = self.placements(Self::member_worlds(comm).into_iter())?;
        Ok(all.iter().any(|(_, p)| p.host != all[0].1.host))
    }

    /// `MPI_Comm_split_type` by a level: one communicator per site or per
    /// host; None where `level` is None (`MPI_UNDEFINED`). Collective: every
    /// member calls it. The colour is the lowest world rank at my site (host)
    /// among all members, which every member computes alike from the
    /// published placements.
    pub fn comm_split_level(
        &self,
        comm: &Comm,
        level: Option<Level>,
        key: i32,
    ) -> Result<Option<Arc<Comm>>> {
        let color = match level {
            None => UNDEFINED,
            Some(level) => {
                let me = self
                    .ctx()
                    .placement_of(self.ctx().rank())
                    .map_err(|e| err(class::INTERN, format!("own placement: {e}")))?;
                let all = self.placements(Self::member_worlds(comm).into_iter())?;
                let lowest = all
                    .iter()
                    .filter(|(_, p)| level.same(p, &me))
                    .map(|&(w, _)| w)
                    .min()
                    .ok_or_else(|| err(class::INTERN, "I am not among my own communicator"))?;
                i32::try_from(lowest).map_err(|_| err(class::INTERN, "world rank overflow"))?
            }
        };
        self.comm_split(comm, color, key)
    }

    /// Per member of `comm`'s (local) group, its colour at each level:
    /// `[site, host]`, numbered 0, 1, ... in order of first appearance among
    /// the members (rank 0 has colours 0, 0). Equal colour, same site (host).
    pub fn level_colours(&self, comm: &Comm) -> Result<Vec<[u32; LEVEL_DEPTH]>> {
        let all = self.placements((0..comm.size).map(|r| comm.group.world(r)))?;
        let mut sites: Vec<&str> = Vec::new();
        let mut hosts: Vec<(&str, [u8; 32])> = Vec::new();
        let mut out = Vec::with_capacity(all.len());
        for (_, p) in &all {
            let s = match sites.iter().position(|s| *s == p.site) {
                Some(i) => i,
                None => {
                    sites.push(&p.site);
                    sites.len() - 1
                }
            };
            let h = match hosts.iter().position(|h| *h == (p.site.as_str(), p.host)) {
                Some(i) => i,
                None => {
                    hosts.push((&p.site, p.host));
                    hosts.len() - 1
                }
            };
            out.push([s as u32, h as u32]);
        }
        Ok(out)
    }
}
