//! Striped Allreduce: the site level and the wide area split among the host
//! leaders of each site instead of going through the site leader alone.
//!
//! With K = the fewest hosts any site has (K ≥ 2), the vector is cut into K
//! stripes of whole elements and the j-th host leader of every site owns
//! stripe j:
//!
//! 1. host level as before (the whole vector once, in the host's shared
//!    segment where it fits);
//! 2. within each site, every host leader sends each owner its stripe
//!    (a reduce-scatter: one hop, every owner combines its stripe in host
//!    order);
//! 3. across the wide area, the owners of stripe j exchange it all-to-all
//!    and combine the sites' copies in site order (one wide-area hop, as the
//!    whole-vector exchange: the same bits on every owner);
//! 4. within each site, every owner sends its result stripe to the other
//!    host leaders (an allgather, one hop), and the host level takes the
//!    whole result once.
//!
//! So the critical path has the same hops as the pipelined exchange of the
//! site leaders (`pipeline.rs`) and the same bytes cross the wide area
//! (every site receives every other site's partial vector), but each
//! wide-area connection carries a K-th of them, K connections per pair of
//! sites carry them side by side, and K processes per site receive and
//! combine instead of one. Why: a stock TCP sender that was idle longer than
//! its retransmission timeout restarts from a halved (or the initial,
//! 10-segment) window; 64 KiB on one connection then takes 2 or 3 round
//! trips where 32 KiB takes 1 or 2 (docs/benchmarks.md, issue 14 part 6).
//! Each stripe goes whole: at the default bound (`GW_MPI_COLL_STRIPE_MAX`,
//! 64 KiB) a stripe is at most 32 KiB, eager over TCP (no rendezvous round
//! trip across the wide area). Wide-area messages: K·S·(S − 1) (the
//! pipelined exchange: 4·S·(S − 1) at 64 KiB).

use super::pipeline::MIN_SEGMENT;
use super::tree::index_of;
use super::Plan;
use crate::error::{class, err, Result};
use crate::request::DtRef;
use crate::{Comm, Mpi, Op, Req};
use std::ops::Range;
use std::sync::Arc;

/// `GW_MPI_COLL_STRIPE_MAX`, read once (0: never stripe).
fn stripe_max() -> usize {
    use std::sync::atomic::{AtomicUsize, Ordering};
    // usize::MAX: not read yet.
    static MAX: AtomicUsize = AtomicUsize::new(usize::MAX);
    match MAX.load(Ordering::Relaxed) {
        usize::MAX => {
            let v = usize::try_from(crate::params::num("MPI_COLL_STRIPE_MAX"))
                .unwrap_or(usize::MAX - 1)
                .min(usize::MAX - 1);
            MAX.store(v, Ordering::Relaxed);
            v
        }
        v => v,
    }
}

impl Plan {
    /// Stripes of a striped allreduce: the fewest hosts of any site.
    pub(super) fn stripes(&self) -> usize {
        self.hosts_of_site.iter().map(Vec::len).min().unwrap_or(0)
    }

    /// The host leaders of site `s` (each host's lowest rank), in the order
    /// of its hosts (the first is the site's leader).
    pub(super) fn host_leaders(&self, s: usize) -> Vec<u32> {
        self.hosts_of_site[s]
            .iter()
            .map(|&h| self.ranks_of_host[h as usize][0])
            .collect()
    }
}

/// The number of stripes an allreduce of `count` elements, `len` bytes,
/// takes on `plan`, or None for the other algorithms: not above 8 KiB (one
/// piece), above `GW_MPI_COLL_STRIPE_MAX`, a site of one host, or fewer
/// elements than stripes. The same on every member (same arguments).
pub(super) fn allreduce_stripes(plan: &Plan, len: usize, count: usize) -> Option<usize> {
    let k = plan.stripes();
    (k >= 2 && len > MIN_SEGMENT && len <= stripe_max() && count >= k).then_some(k)
}

/// The byte ranges of `k` stripes of `count` elements of `elem` bytes:
/// whole elements, sizes differing by one element at most.
pub(super) fn stripe_ranges(count: usize, elem: usize, k: usize) -> Vec<Range<usize>> {
    let k = k.max(1) as u128;
    let at = |j: u128| (j * count as u128 / k) as usize * elem;
    (0..k).map(|j| at(j)..at(j + 1)).collect()
}

/// `data` cut along `ranges` (consecutive, covering it from 0).
fn split_mut<'a>(mut data: &'a mut [u8], ranges: &[Range<usize>]) -> Vec<&'a mut [u8]> {
    let mut out = Vec::with_capacity(ranges.len());
    for r in ranges {
        let (a, b) = std::mem::take(&mut data).split_at_mut(r.len());
        out.push(a);
        data = b;
    }
    out
}

/// `parts` combined in order into `out` (`out` = parts[0] op parts[1] op …).
fn combine_in_order(dt: &DtRef, n: usize, op: &Op, parts: &[&[u8]], out: &mut [u8]) {
    let Some((first, rest)) = parts.split_first() else {
        return;
    };
    let mut res = first.to_vec();
    for p in rest {
        let mut next = p.to_vec();
        op.apply(dt, n, &res, &mut next);
        res = next;
    }
    out.copy_from_slice(&res);
}

impl Mpi {
    /// Allreduce of `acc` (packed, `count` elements of `dt`, commutative
    /// `op`) in `k` stripes (see the module's comment). `tmp` is scratch of
    /// `acc`'s length.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn striped_allreduce(
        &self,
        comm: &Comm,
        plan: &Plan,
        dt: &DtRef,
        count: usize,
        op: &Op,
        acc: &mut [u8],
        tmp: &mut [u8],
        k: usize,
    ) -> Result<()> {
        let lv = plan.lists(0, comm.rank);
        self.host_reduce(comm, plan, &lv.host, dt, count, op, acc, tmp)?;
        if lv.host.first() == Some(&comm.rank) {
            let ranges = stripe_ranges(count, dt.size, k);
            self.stripe_exchange(comm, plan, dt, op, acc, &ranges)?;
        }
        self.host_bcast_result(comm, plan, &lv.host, op, acc)
    }

    /// Steps 2 to 4 of the module's comment, on a host leader.
    fn stripe_exchange(
        &self,
        comm: &Comm,
        plan: &Plan,
        dt: &DtRef,
        op: &Op,
        acc: &mut [u8],
        ranges: &[Range<usize>],
    ) -> Result<()> {
        let me = comm.rank;
        let site = plan.site[me as usize] as usize;
        let leaders = plan.host_leaders(site);
        let i = index_of(&leaders, me)
            .ok_or_else(|| err(class::INTERN, "striped allreduce: not a host leader"))?;
        let k = ranges.len();
        let elem = dt.size.max(1);
        let mine = (i < k).then(|| ranges[i].clone());
        // 2. Reduce-scatter within the site: my stripe from every other
        // host leader; each owner's stripe to it.
        if let Some(r) = &mine {
            let others: Vec<u32> = leaders.iter().copied().filter(|&l| l != me).collect();
            let mut got = vec![vec![0u8; r.len()]; others.len()];
            let mut sends = Vec::new();
            let recvs = self.post_recvs(comm, &others, &mut got)?;
            for (j, rj) in ranges.iter().enumerate() {
                if j == i {
                    continue;
                }
                // SAFETY: `acc` is not written before the wait below (or
                // `drain` on an error).
                match unsafe { self.c_isend(comm, &acc[rj.clone()], leaders[j]) } {
                    Ok(q) => sends.extend(q),
                    Err(e) => {
                        self.drain(sends, recvs);
                        return Err(e);
                    }
                }
            }
            self.wait_all_internal(sends)
                .and(self.wait_all_internal(recvs))?;
            // Host order: the others' copies with mine at its place.
            let own = acc[r.clone()].to_vec();
            let mut parts: Vec<&[u8]> = got.iter().map(Vec::as_slice).collect();
            parts.insert(i, own.as_slice());
            combine_in_order(dt, r.len() / elem, op, &parts, &mut acc[r.clone()]);
            // 3. The wide area: stripe i among the i-th host leaders of all
            // sites, combined in site order.
            let owners: Vec<u32> = (0..plan.sites()).map(|s| plan.host_leaders(s)[i]).collect();
            let at = index_of(&owners, me)
                .ok_or_else(|| err(class::INTERN, "striped allreduce: not a stripe owner"))?;
            let remote: Vec<u32> = owners.iter().copied().filter(|&o| o != me).collect();
            let mut theirs = vec![vec![0u8; r.len()]; remote.len()];
            let recvs = self.post_recvs(comm, &remote, &mut theirs)?;
            let mut sends = Vec::new();
            for &o in &remote {
                // SAFETY: as above.
                match unsafe { self.c_isend(comm, &acc[r.clone()], o) } {
                    Ok(q) => sends.extend(q),
                    Err(e) => {
                        self.drain(sends, recvs);
                        return Err(e);
                    }
                }
            }
            self.wait_all_internal(sends)
                .and(self.wait_all_internal(recvs))?;
            let own = acc[r.clone()].to_vec();
            let mut parts: Vec<&[u8]> = theirs.iter().map(Vec::as_slice).collect();
            parts.insert(at, own.as_slice());
            combine_in_order(dt, r.len() / elem, op, &parts, &mut acc[r.clone()]);
        } else {
            // Not an owner (a site with more hosts than stripes): every
            // stripe to its owner.
            let mut sends = Vec::new();
            for (j, rj) in ranges.iter().enumerate() {
                // SAFETY: as above.
                match unsafe { self.c_isend(comm, &acc[rj.clone()], leaders[j]) } {
                    Ok(q) => sends.extend(q),
                    Err(e) => {
                        self.drain(sends, Vec::new());
                        return Err(e);
                    }
                }
            }
            self.wait_all_internal(sends)?;
        }
        // 4. Allgather within the site: every other stripe from its owner,
        // mine to every other host leader.
        let mut slices = split_mut(acc, ranges);
        let mut recvs = Vec::new();
        let mut sends = Vec::new();
        let mut res = Ok(());
        for (j, s) in slices.iter_mut().enumerate() {
            if j == i {
                continue;
            }
            // SAFETY: `acc` outlives the wait below (or `drain`), and this
            // stripe is not touched before it.
            match unsafe { self.c_irecv(comm, s, leaders[j]) } {
                Ok(q) => recvs.push(q),
                Err(e) => {
                    res = Err(e);
                    break;
                }
            }
        }
        if let (Ok(()), Some(own)) = (&res, slices.get(i)) {
            for &l in leaders.iter().filter(|&&l| l != me) {
                // SAFETY: my stripe is only read until the wait below.
                match unsafe { self.c_isend(comm, own, l) } {
                    Ok(q) => sends.extend(q),
                    Err(e) => {
                        res = Err(e);
                        break;
                    }
                }
            }
        }
        if let Err(e) = res {
            self.drain(sends, recvs);
            return Err(e);
        }
        self.wait_all_internal(sends)
            .and(self.wait_all_internal(recvs))
    }

    /// One receive from each of `from` into the matching buffer of `bufs`.
    fn post_recvs(&self, comm: &Comm, from: &[u32], bufs: &mut [Vec<u8>]) -> Result<Vec<Arc<Req>>> {
        let mut recvs = Vec::new();
        for (b, &m) in bufs.iter_mut().zip(from) {
            // SAFETY: the caller keeps `bufs` alive and untouched until it
            // has waited for these requests (or given them up, `drain`).
            match unsafe { self.c_irecv(comm, b, m) } {
                Ok(q) => recvs.push(q),
                Err(e) => {
                    self.drain(Vec::new(), recvs);
                    return Err(e);
                }
            }
        }
        Ok(recvs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stripes_are_whole_elements_covering_the_vector() {
        let r = stripe_ranges(10001, 4, 2);
        assert_eq!(r, vec![0..20000, 20000..40004]);
        let r = stripe_ranges(7, 12, 3);
        assert_eq!(r.first().map(|x| x.start), Some(0));
        assert_eq!(r.last().map(|x| x.end), Some(84));
        assert!(r.windows(2).all(|w| w[0].end == w[1].start));
        assert!(r.iter().all(|x| x.len() % 12 == 0 && !x.is_empty()));
    }

    #[test]
    fn the_fewest_hosts_of_any_site_is_the_stripe_count() {
        // Site 0: hosts 0 and 1; site 1: host 2 alone.
        let p = Plan::new(&[[0, 0], [0, 1], [0, 0], [1, 2], [1, 2], [1, 2]]).expect("plan");
        assert_eq!(p.stripes(), 1);
        assert_eq!(allreduce_stripes(&p, 65536, 16384), None);
        // 2 sites x 2 hosts x 2 ranks, site by site.
        let p = Plan::new(&[
            [0, 0],
            [0, 0],
            [0, 1],
            [0, 1],
            [1, 2],
            [1, 2],
            [1, 3],
            [1, 3],
        ])
        .expect("plan");
        assert_eq!(p.stripes(), 2);
        assert_eq!(p.host_leaders(0), vec![0, 2]);
        assert_eq!(p.host_leaders(1), vec![4, 6]);
        // One piece (8 KiB and less) keeps the site leaders' exchange.
        assert_eq!(allreduce_stripes(&p, 8192, 2048), None);
        assert_eq!(allreduce_stripes(&p, 8196, 2049), Some(2));
    }
}
