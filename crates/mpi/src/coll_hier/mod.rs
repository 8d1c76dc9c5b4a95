//! Hierarchical collectives: a communicator whose members run on several
//! hosts or sites does its collectives level by level — within each host,
//! then among one representative per host of a site, then among one
//! representative per site across the wide-area links — so that a broadcast
//! or a reduction sends one message to each remote site instead of one per
//! remote process, and the slow links carry it once.
//!
//! The levels are not sub-communicators with context ids of their own: they
//! are lists of the communicator's ranks ([`Plan`]), computed once per
//! communicator from the placements every rank published at start-up (no
//! messages), and every message goes over the communicator's own collective
//! context. So any communicator gets them without a collective to create
//! them, and a nonblocking collective's shadow communicator (own queues)
//! inherits the plan as it is.
//!
//! Which algorithm runs ([`Mpi::hier_plan`]): the communicator's info key
//! `gw_coll` (`flat`, `hier`, `auto`), else `GW_COLL` (read once per
//! process), else `auto` = hierarchical when the members span more than one
//! host. Every member must choose alike (the same info on every member, the
//! same `GW_COLL` in the whole job). `auto` leaves communicators of two
//! members flat: there is no level to gain from.

mod alltoall;
mod alltoallw;
mod gather;
mod gatherv;
mod ops;
mod ordered;
mod packets;
mod pipeline;
mod shm;
mod tree;
mod wan;

use crate::comm::Comm;
use crate::Mpi;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

/// The levels of one communicator: per member its site and host, and the
/// members of each host and the hosts of each site.
#[derive(Debug)]
pub struct Plan {
    /// Per rank: index of its site (0.. in order of first appearance).
    site: Vec<u32>,
    /// Per rank: index of its host (a host within a site).
    host: Vec<u32>,
    /// Per site: its hosts, in order of their lowest rank.
    hosts_of_site: Vec<Vec<u32>>,
    /// Per host: its ranks, ascending (the first is the host's leader).
    ranks_of_host: Vec<Vec<u32>>,
    /// Per site: its lowest rank (the site's leader).
    site_leader: Vec<u32>,
    /// Per site: its ranks, ascending.
    ranks_of_site: Vec<Vec<u32>>,
    /// Every host's ranks and every site's ranks are consecutive: partial
    /// results combined level by level then cover consecutive ranks, so a
    /// non-commutative reduction or a scan can keep MPI's rank order.
    contiguous: bool,
    /// The host's shared segment for reductions (`shm.rs`), made at the
    /// first one that can use it; None inside: messages.
    host_seg: std::sync::OnceLock<Option<Arc<shm::HostSeg>>>,
}

impl Plan {
    /// The plan of members with `colours[r]` = `[site, host]` (as
    /// [`Mpi::level_colours`] numbers them); None when they all share one
    /// host (nothing to gain over the flat algorithms).
    pub fn new(colours: &[[u32; crate::topology_levels::LEVEL_DEPTH]]) -> Option<Plan> {
        let nsites = colours.iter().map(|c| c[0] + 1).max()? as usize;
        let nhosts = colours.iter().map(|c| c[1] + 1).max()? as usize;
        if nhosts < 2 {
            return None;
        }
        let mut ranks_of_host = vec![Vec::new(); nhosts];
        let mut hosts_of_site = vec![Vec::new(); nsites];
        let mut site_leader = vec![u32::MAX; nsites];
        let mut ranks_of_site = vec![Vec::new(); nsites];
        for (r, c) in colours.iter().enumerate() {
            let (s, h) = (c[0] as usize, c[1] as usize);
            if ranks_of_host[h].is_empty() {
                hosts_of_site[s].push(h as u32);
            }
            ranks_of_host[h].push(r as u32);
            site_leader[s] = site_leader[s].min(r as u32);
            ranks_of_site[s].push(r as u32);
        }
        let consecutive = |rs: &Vec<u32>| rs.windows(2).all(|w| w[1] == w[0] + 1);
        let contiguous =
            ranks_of_host.iter().all(consecutive) && ranks_of_site.iter().all(consecutive);
        Some(Plan {
            contiguous,
            host_seg: std::sync::OnceLock::new(),
            site: colours.iter().map(|c| c[0]).collect(),
            host: colours.iter().map(|c| c[1]).collect(),
            hosts_of_site,
            ranks_of_host,
            site_leader,
            ranks_of_site,
        })
    }

    /// Number of sites.
    pub fn sites(&self) -> usize {
        self.site_leader.len()
    }

    /// Whether rank order survives combining level by level (see `contiguous`).
    pub fn contiguous(&self) -> bool {
        self.contiguous
    }

    /// Number of hosts.
    pub fn hosts(&self) -> usize {
        self.ranks_of_host.len()
    }

    /// The ranks whose data member `m` of a list of `level` carries (at the
    /// host level itself, at the site level its host, across sites its site).
    pub fn under(&self, level: LevelKind, m: u32) -> Vec<u32> {
        match level {
            LevelKind::Host => vec![m],
            LevelKind::Site => self.ranks_of_host[self.host[m as usize] as usize].clone(),
            LevelKind::Wan => self.ranks_of_site[self.site[m as usize] as usize].clone(),
        }
    }

    /// The three lists of ranks `me` takes part in for a collective rooted at
    /// `root`: at each level the first entry is the one that holds (or ends
    /// with) the data. The root stands for its host and its site; elsewhere
    /// the lowest rank of a host stands for it, and of a site for the site.
    pub fn lists(&self, root: u32, me: u32) -> Levels {
        let rep_host = |h: u32| {
            if h == self.host[root as usize] {
                root
            } else {
                self.ranks_of_host[h as usize][0]
            }
        };
        let rep_site = |s: u32| {
            if s == self.site[root as usize] {
                root
            } else {
                self.site_leader[s as usize]
            }
        };
        let (my_site, my_host) = (self.site[me as usize], self.host[me as usize]);
        // Host: its representative first, then the others in rank order.
        let hr = rep_host(my_host);
        let mut host = vec![hr];
        host.extend(
            self.ranks_of_host[my_host as usize]
                .iter()
                .filter(|&&r| r != hr),
        );
        // Site: if I represent my host, the representatives of my site's hosts.
        let mut site = Vec::new();
        if me == hr {
            let sr = rep_site(my_site);
            site.push(sr);
            let sr_host = self.host[sr as usize];
            site.extend(
                self.hosts_of_site[my_site as usize]
                    .iter()
                    .filter(|&&h| h != sr_host)
                    .map(|&h| rep_host(h)),
            );
        }
        // Wide area: if I represent my site, the representatives of all sites.
        let mut wan = Vec::new();
        if me == rep_site(my_site) {
            let root_site = self.site[root as usize];
            wan.push(root);
            wan.extend(
                (0..self.sites() as u32)
                    .filter(|&s| s != root_site)
                    .map(rep_site),
            );
        }
        Levels { host, site, wan }
    }
}

/// The ranks one member exchanges with at each level of one collective (see
/// [`Plan::lists`]); an empty list: this member has no part at that level.
#[derive(Debug, PartialEq, Eq)]
pub struct Levels {
    pub host: Vec<u32>,
    pub site: Vec<u32>,
    pub wan: Vec<u32>,
}

/// The levels of a [`Levels`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LevelKind {
    Host,
    Site,
    Wan,
}

/// Which algorithms a communicator's collectives use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CollMode {
    Flat,
    Hier,
    Auto,
}

impl CollMode {
    fn parse(s: &str) -> Option<CollMode> {
        match s.trim() {
            "flat" => Some(CollMode::Flat),
            "hier" => Some(CollMode::Hier),
            "auto" | "" => Some(CollMode::Auto),
            _ => None,
        }
    }
}

/// The info key that overrides `GW_COLL` on one communicator.
pub const INFO_KEY: &str = "gw_coll";

/// `GW_COLL`, read once (0 = not read yet, else 1 + the mode's index).
static ENV_MODE: AtomicU8 = AtomicU8::new(0);

fn env_mode() -> CollMode {
    const MODES: [CollMode; 3] = [CollMode::Flat, CollMode::Hier, CollMode::Auto];
    match ENV_MODE.load(Ordering::Relaxed) {
        0 => {
            let m = crate::params::raw("COLL")
                .and_then(|v| CollMode::parse(&v))
                .unwrap_or(CollMode::Auto);
            let i = MODES.iter().position(|&x| x == m).expect("listed");
            ENV_MODE.store(i as u8 + 1, Ordering::Relaxed);
            m
        }
        i => MODES[i as usize - 1],
    }
}

impl Mpi {
    /// The plan the collectives of `comm` follow, or None for the flat
    /// algorithms (an intercommunicator, one host, `flat` chosen, or
    /// members whose placement is unknown here: other jobs' processes).
    pub fn hier_plan(&self, comm: &Comm) -> Option<Arc<Plan>> {
        if comm.is_inter() || comm.size < 2 {
            return None;
        }
        let env = env_mode();
        let info = comm
            .info
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(INFO_KEY)
            .and_then(CollMode::parse);
        match info.unwrap_or(env) {
            CollMode::Flat => return None,
            // Two members are one pair whatever their hosts and sites: the
            // levels would send the same messages as the flat algorithms,
            // plus their packing, concatenating and segmenting (2 ranks on
            // 2 hosts: a 1 MiB Allgather took 3.8x Open MPI's time, Bcast
            // 1.5-3.7x). `hier` chosen explicitly still runs them.
            CollMode::Auto if comm.size == 2 => return None,
            _ => {}
        }
        comm.hier
            .get_or_init(|| {
                self.level_colours(comm)
                    .ok()
                    .and_then(|c| Plan::new(&c))
                    .map(Arc::new)
            })
            .clone()
    }
}

#[cfg(test)]
mod tests;
