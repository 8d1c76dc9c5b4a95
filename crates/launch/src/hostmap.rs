//! Which host of a machines file each rank of `gwrun -f MACHINES -n N`
//! runs on.
//!
//! What we follow, and where the two launchers differ:
//!
//! - **Slots.** A host's slots are its `host:N` / `slots=N` count, 1 when
//!   none is given (Hydra; Open MPI would use the core count, which the
//!   front end does not know before it reaches the host).
//! - **`--map-by slot`** (the default, Hydra's default and Open MPI's
//!   `--map-by slot`): fill each host's slots in file order, a block of
//!   consecutive ranks per host.
//! - **`--map-by host`** (Open MPI's `--map-by node`, Hydra's
//!   `-rr`/`-ppn 1` pattern): one rank per host in file order, round after
//!   round, skipping hosts whose slots are all taken.
//! - **More ranks than slots** is an error naming both numbers unless
//!   `--oversubscribe` (Open MPI's rule; Hydra always wraps silently). With
//!   `--oversubscribe` the extra ranks wrap around as Hydra wraps: by slot,
//!   another pass over the hosts in file order giving each its slot count
//!   again; by host, further rounds of one rank per host. Open MPI's
//!   `max_slots` stays a hard cap even then (Open MPI's meaning): a host at
//!   its `max_slots` is skipped, and `-n` above the sum of the caps is an
//!   error. (Open MPI spreads oversubscribed ranks evenly instead of
//!   wrapping; we keep Hydra's simpler, predictable order.)
//!
//! The cost is O(n + hosts): rounds and passes only visit hosts that still
//! take ranks.

use crate::machines::Machines;

/// At most this many ranks in a map (gwrun's `-n` allows 100 000; the
/// bound keeps a `Vec` of `n` entries from being a way to exhaust memory).
pub const MAX_RANKS: usize = 1_000_000;

/// How ranks are spread over the hosts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MapBy {
    /// Fill each host's slots in file order (block).
    #[default]
    Slot,
    /// Round-robin over the hosts, one rank per host per round.
    Host,
}

impl MapBy {
    /// `slot` (also `core`) or `host` (also Open MPI's `node`).
    pub fn parse(s: &str) -> Result<MapBy, String> {
        match s {
            "slot" | "core" => Ok(MapBy::Slot),
            "host" | "node" => Ok(MapBy::Host),
            _ => Err(format!("--map-by {s:?}: expected slot or host")),
        }
    }
}

/// The host of every rank.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankMap {
    /// `host_of_rank[r]` is an index into `Machines::hosts`.
    pub host_of_rank: Vec<usize>,
}

/// Places `n` ranks on the hosts of `m` (see the module documentation).
pub fn map_ranks(
    m: &Machines,
    n: usize,
    by: MapBy,
    oversubscribe: bool,
) -> Result<RankMap, String> {
    if m.hosts.is_empty() {
        return Err("the machines file names no hosts".into());
    }
    if n > MAX_RANKS {
        return Err(format!("-n {n} is more than {MAX_RANKS} ranks"));
    }
    let slots: Vec<usize> = m.hosts.iter().map(|h| h.effective_slots()).collect();
    let caps: Vec<usize> = m
        .hosts
        .iter()
        .map(|h| h.max_slots.unwrap_or(usize::MAX).max(h.effective_slots()))
        .collect();
    let total = slots.iter().fold(0usize, |a, &s| a.saturating_add(s));
    if n > total {
        if !oversubscribe {
            return Err(format!(
                "-n {n} is more than the {total} slots of the machines file's {} host(s); \
                 give the hosts more slots (host:N or slots=N) or use --oversubscribe",
                m.hosts.len()
            ));
        }
        let allowed = caps.iter().fold(0usize, |a, &c| a.saturating_add(c));
        if n > allowed {
            return Err(format!(
                "-n {n} is more than the {allowed} ranks the max_slots of the machines file allow, \
                 even with --oversubscribe"
            ));
        }
    }

    let mut out: Vec<usize> = Vec::with_capacity(n);
    let mut used = vec![0usize; slots.len()];

    // Within the slots.
    match by {
        MapBy::Slot => {
            for (h, &s) in slots.iter().enumerate() {
                let take = s.min(n - out.len());
                out.extend(std::iter::repeat_n(h, take));
                used[h] = take;
                if out.len() == n {
                    break;
                }
            }
        }
        MapBy::Host => {
            let mut open: Vec<usize> = (0..slots.len()).collect();
            while out.len() < n && !open.is_empty() {
                for &h in &open {
                    if out.len() == n {
                        break;
                    }
                    out.push(h);
                    used[h] += 1;
                }
                open.retain(|&h| used[h] < slots[h]);
            }
        }
    }

    // Oversubscribed: wrap around as Hydra does, up to the caps. The checks
    // above make this reachable only with `oversubscribe` and enough room.
    let mut open: Vec<usize> = (0..slots.len()).filter(|&h| used[h] < caps[h]).collect();
    while out.len() < n {
        if open.is_empty() {
            // Not reachable after the checks above; an error, not a loop.
            return Err(format!("-n {n}: no host takes more ranks"));
        }
        for &h in &open {
            let room = caps[h] - used[h];
            let per_visit = match by {
                MapBy::Slot => slots[h],
                MapBy::Host => 1,
            };
            let take = per_visit.min(room).min(n - out.len());
            out.extend(std::iter::repeat_n(h, take));
            used[h] += take;
            if out.len() == n {
                break;
            }
        }
        open.retain(|&h| used[h] < caps[h]);
    }
    Ok(RankMap { host_of_rank: out })
}

impl RankMap {
    /// The number of ranks.
    pub fn len(&self) -> usize {
        self.host_of_rank.len()
    }

    /// True for a map of no ranks.
    pub fn is_empty(&self) -> bool {
        self.host_of_rank.is_empty()
    }

    /// The ranks on host `host`, ascending. O(n); see
    /// [`RankMap::ranks_by_host`] for all hosts.
    pub fn ranks_on(&self, host: usize) -> Vec<usize> {
        (0..self.host_of_rank.len())
            .filter(|&r| self.host_of_rank[r] == host)
            .collect()
    }

    /// The ranks of every host at once, in O(n + hosts):
    /// `ranks_by_host()[h] == ranks_on(h)` for every host that has a rank
    /// (the list ends at the last host used).
    pub fn ranks_by_host(&self) -> Vec<Vec<usize>> {
        let hosts = self.host_of_rank.iter().max().map_or(0, |&h| h + 1);
        let mut out = vec![Vec::new(); hosts];
        for (r, &h) in self.host_of_rank.iter().enumerate() {
            out[h].push(r);
        }
        out
    }

    /// `(index of rank among the ranks of its host, ranks on that host)`,
    /// as Hydra's `MPI_LOCALRANKID` / `MPI_LOCALNRANKS`. `(0, 0)` for a rank
    /// outside the map. O(n); see [`RankMap::local_ranks`] for all at once.
    pub fn local_rank(&self, rank: usize) -> (usize, usize) {
        let Some(&h) = self.host_of_rank.get(rank) else {
            return (0, 0);
        };
        let index = self.host_of_rank[..rank]
            .iter()
            .filter(|&&x| x == h)
            .count();
        let count = self.host_of_rank.iter().filter(|&&x| x == h).count();
        (index, count)
    }

    /// [`RankMap::local_rank`] of every rank, in O(n + hosts).
    pub fn local_ranks(&self) -> Vec<(usize, usize)> {
        let hosts = self.host_of_rank.iter().max().map_or(0, |&h| h + 1);
        let mut count = vec![0usize; hosts];
        let mut out = Vec::with_capacity(self.host_of_rank.len());
        for &h in &self.host_of_rank {
            out.push((count[h], 0));
            count[h] += 1;
        }
        for (entry, &h) in out.iter_mut().zip(&self.host_of_rank) {
            entry.1 = count[h];
        }
        out
    }

    /// The hosts that get at least one rank, ascending (file order): the
    /// hosts that need a proxy.
    pub fn hosts_used(&self) -> Vec<usize> {
        let mut v = self.host_of_rank.clone();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// MPICH's `PMI_process_mapping`: `(vector,(node,nodes,ranks),…)`.
    /// Nodes are numbered in the order ranks first use them (MPICH only
    /// compares node ids; rank 0 is thus always on node 0, which MPICH's
    /// decoder relies on when it repeats the vector, below).
    ///
    /// Runs of consecutive ranks on one node, merged into blocks of
    /// consecutive nodes with equal counts, as placement.rs does; then, as
    /// MPICH applies the vector cyclically when it covers fewer ranks than
    /// the job (`MPIR_NODEMAP_populate_ids_from_mapping`, repeating from the
    /// first block of node 0), only the first period is written when the
    /// blocks repeat: a round-robin map of many ranks over `h` hosts is
    /// `(vector,(0,h,1))`, as Hydra writes it.
    pub fn process_mapping(&self) -> String {
        let hosts = self.host_of_rank.iter().max().map_or(0, |&h| h + 1);
        let mut id: Vec<Option<usize>> = vec![None; hosts];
        let mut next = 0usize;
        let mut nodes: Vec<usize> = Vec::with_capacity(self.host_of_rank.len());
        for &h in &self.host_of_rank {
            let node = *id[h].get_or_insert_with(|| {
                next += 1;
                next - 1
            });
            nodes.push(node);
        }

        let mut runs: Vec<(usize, usize)> = Vec::new();
        for &node in &nodes {
            match runs.last_mut() {
                Some((last, count)) if *last == node => *count += 1,
                _ => runs.push((node, 1)),
            }
        }
        let mut blocks: Vec<(usize, usize, usize)> = Vec::new();
        for (node, count) in runs {
            match blocks.last_mut() {
                Some((start, n, c)) if *c == count && *start + *n == node => *n += 1,
                _ => blocks.push((node, 1, count)),
            }
        }
        let keep = period(&blocks, &nodes);
        let parts: Vec<String> = blocks[..keep]
            .iter()
            .map(|(s, n, c)| format!("({s},{n},{c})"))
            .collect();
        format!("(vector,{})", parts.join(","))
    }

    /// One line: which ranks are on which host, e.g. `a: ranks 0-1,4; b: ranks 2-3`.
    pub fn describe(&self, m: &Machines) -> String {
        let mut per_host: Vec<Vec<usize>> = vec![Vec::new(); m.hosts.len()];
        for (r, &h) in self.host_of_rank.iter().enumerate() {
            if let Some(list) = per_host.get_mut(h) {
                list.push(r);
            }
        }
        per_host
            .iter()
            .enumerate()
            .filter(|(_, ranks)| !ranks.is_empty())
            .map(|(h, ranks)| {
                let name = m.hosts.get(h).map_or("?", |x| x.name.as_str());
                format!("{name}: ranks {}", ranges(ranks))
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// The fewest leading `blocks` whose cyclic repetition gives `nodes`
/// (all of them when there is no shorter period). Only a few candidates
/// are tried, so this stays O(n) in practice.
fn period(blocks: &[(usize, usize, usize)], nodes: &[usize]) -> usize {
    const TRIES: usize = 16;
    let mut ranks = 0usize;
    for (k, &(_, n, c)) in blocks.iter().enumerate().take(TRIES) {
        ranks += n * c;
        if k + 1 == blocks.len() {
            break;
        }
        if ranks > 0
            && nodes
                .iter()
                .enumerate()
                .all(|(i, &x)| nodes[i % ranks] == x)
        {
            return k + 1;
        }
    }
    blocks.len()
}

/// `[0,1,2,5]` → `"0-2,5"`.
fn ranges(v: &[usize]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            v[i].to_string()
        } else {
            format!("{}-{}", v[i], v[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

#[cfg(test)]
mod tests;
