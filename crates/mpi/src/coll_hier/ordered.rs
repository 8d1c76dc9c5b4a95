//! Reductions that keep MPI's rank order over the levels of a [`Plan`]:
//! `Reduce`/`Allreduce` with a non-commutative operation, and
//! `Scan`/`Exscan`. They need a [contiguous](Plan::contiguous) plan (every
//! host's and every site's ranks consecutive, as `gwrun` places ranks site
//! by site): then each partial result covers consecutive ranks, and the
//! partials of a level, sorted by their first rank, combine left to right
//! into the result of the ranks they cover. On other placements (ranks
//! round-robin over the hosts) the callers in `coll.rs` keep the flat
//! algorithms, which combine in rank order anyway.

use super::tree::index_of;
use super::{LevelKind, Plan};
use crate::error::{class, err, Result};
use crate::request::{Buf, DtRef};
use crate::{Comm, Mpi, Op};

/// `a op b` (a covers lower ranks than b); `a` None = nothing before `b`.
fn combine(op: &Op, dt: &DtRef, count: usize, a: Option<&[u8]>, b: &[u8]) -> Vec<u8> {
    let mut t = b.to_vec();
    if let Some(a) = a {
        op.apply(dt, count, a, &mut t);
    }
    t
}

/// Folds partial results (first rank covered, data) in rank order.
fn fold(op: &Op, dt: &DtRef, count: usize, mut parts: Vec<(u32, Vec<u8>)>) -> Vec<u8> {
    parts.sort_by_key(|p| p.0);
    let mut it = parts.into_iter();
    let (_, mut res) = it.next().expect("at least this member's part");
    for (_, mut p) in it {
        op.apply(dt, count, &res, &mut p);
        res = p;
    }
    res
}

/// The shared arguments of one reduction.
struct Red<'a> {
    dt: &'a DtRef,
    count: usize,
    op: &'a Op,
}

impl Mpi {
    /// Receives one `len`-byte message from each of `from`, all at once.
    fn recv_each(&self, comm: &Comm, from: &[u32], len: usize) -> Result<Vec<Vec<u8>>> {
        let mut bufs = vec![vec![0u8; len]; from.len()];
        let mut reqs = Vec::new();
        for (b, &m) in bufs.iter_mut().zip(from) {
            // SAFETY: `bufs` outlives the wait below.
            reqs.push(unsafe { self.c_irecv(comm, b, m) }?);
        }
        self.wait_all_internal(reqs)?;
        Ok(bufs)
    }

    /// One level of an ordered reduction: `list[0]` receives every other
    /// member's partial result and combines all in rank order into `acc`;
    /// the others send theirs and return false (no part further up).
    fn ordered_level(
        &self,
        comm: &Comm,
        plan: &Plan,
        kind: LevelKind,
        list: &[u32],
        red: &Red,
        acc: &mut Vec<u8>,
    ) -> Result<bool> {
        let first = |m: u32| plan.under(kind, m)[0];
        match index_of(list, comm.rank) {
            None => Ok(true),
            Some(0) => {
                let got = self.recv_each(comm, &list[1..], acc.len())?;
                let mut parts = vec![(first(comm.rank), std::mem::take(acc))];
                parts.extend(list[1..].iter().map(|&m| first(m)).zip(got));
                *acc = fold(red.op, red.dt, red.count, parts);
                Ok(true)
            }
            Some(_) => {
                self.c_send(comm, acc, list[0])?;
                Ok(false)
            }
        }
    }

    /// `MPI_Reduce` with a non-commutative `op` on a contiguous plan: in
    /// rank order within each host, then each site, then to the root (one
    /// message from each remote site).
    pub(crate) fn hier_reduce_ordered(
        &self,
        comm: &Comm,
        plan: &Plan,
        src: &Buf,
        recv: &Buf,
        op: &Op,
        root: u32,
    ) -> Result<()> {
        let lv = plan.lists(root, comm.rank);
        let red = Red {
            dt: &src.dt,
            count: src.count,
            op,
        };
        let mut acc = src.pack();
        for (kind, list) in [
            (LevelKind::Host, &lv.host),
            (LevelKind::Site, &lv.site),
            (LevelKind::Wan, &lv.wan),
        ] {
            if !self.ordered_level(comm, plan, kind, list, &red, &mut acc)? {
                return Ok(());
            }
        }
        if comm.rank == root {
            recv.unpack(&acc);
        }
        Ok(())
    }

    /// `MPI_Allreduce` with a non-commutative `op` on a contiguous plan: an
    /// ordered reduction to the site leaders, which send each other their
    /// site's result (one wide-area round) and all combine them in site
    /// order (the same bits everywhere), then a broadcast down each site.
    pub(crate) fn hier_allreduce_ordered(
        &self,
        comm: &Comm,
        plan: &Plan,
        src: &Buf,
        recv: &Buf,
        op: &Op,
    ) -> Result<()> {
        let me = comm.rank;
        let lv = plan.lists(0, me);
        let red = Red {
            dt: &src.dt,
            count: src.count,
            op,
        };
        let mut acc = src.pack();
        if self.ordered_level(comm, plan, LevelKind::Host, &lv.host, &red, &mut acc)? {
            self.ordered_level(comm, plan, LevelKind::Site, &lv.site, &red, &mut acc)?;
        }
        if lv.wan.len() > 1 {
            let others: Vec<u32> = lv.wan.iter().copied().filter(|&m| m != me).collect();
            let mut sends = Vec::new();
            for &m in &others {
                // SAFETY: `acc` is not touched until the wait below.
                sends.extend(unsafe { self.c_isend(comm, &acc, m) }?);
            }
            let got = self.recv_each(comm, &others, acc.len());
            self.wait_all_internal(sends)?;
            let first = |m: u32| plan.under(LevelKind::Wan, m)[0];
            let mut parts = vec![(first(me), std::mem::take(&mut acc))];
            parts.extend(others.iter().map(|&m| first(m)).zip(got?));
            acc = fold(op, red.dt, red.count, parts);
        }
        self.list_bcast(comm, &lv.site, &mut acc)?;
        self.list_bcast(comm, &lv.host, &mut acc)?;
        recv.unpack(&acc);
        Ok(())
    }

    /// `MPI_Scan` (`exclusive`: `MPI_Exscan`) on a contiguous plan, any op.
    /// Up: each host's leader collects its members' values, each site's
    /// leader its hosts' totals, the site leaders send their site's total to
    /// the leaders of later sites (one wide-area round). Down: each leader
    /// hands each member below it the combination of everything before it.
    /// Prefixes travel as a flag byte (0: nothing before, rank 0's host or
    /// site) and the data.
    pub(crate) fn hier_scan(
        &self,
        comm: &Comm,
        plan: &Plan,
        src: &Buf,
        recv: &Buf,
        op: &Op,
        exclusive: bool,
    ) -> Result<()> {
        let me = comm.rank;
        let lv = plan.lists(0, me);
        let (dt, count) = (&src.dt, src.count);
        let own = src.pack();
        let len = own.len();
        let result = if lv.host[0] != me {
            self.c_send(comm, &own, lv.host[0])?;
            self.recv_prefix(comm, lv.host[0], len)?
        } else {
            // Host leader: the values of the host, in rank order (the leader
            // is the lowest rank, the list ascends).
            let mut vals = vec![own];
            vals.extend(self.recv_each(comm, &lv.host[1..], len)?);
            let mut incl: Vec<Vec<u8>> = Vec::with_capacity(vals.len());
            for v in &vals {
                let prev = incl.last().map(|p: &Vec<u8>| &p[..]);
                incl.push(combine(op, dt, count, prev, v));
            }
            let host_total = incl.last().expect("the leader's own").clone();
            let before_host = if lv.site[0] != me {
                self.c_send(comm, &host_total, lv.site[0])?;
                self.recv_prefix(comm, lv.site[0], len)?
            } else {
                self.site_prefixes(comm, plan, &lv.site, &lv.wan, host_total, op, dt, count)?
            };
            // Each member: everything before it, and with its own value.
            let mut sends = Vec::new();
            let mut msgs = Vec::new();
            for i in 1..vals.len() {
                let r = if exclusive {
                    Some(combine(op, dt, count, before_host.as_deref(), &incl[i - 1]))
                } else {
                    Some(combine(op, dt, count, before_host.as_deref(), &incl[i]))
                };
                msgs.push(prefix_msg(r.as_deref(), len));
            }
            for (m, &d) in msgs.iter().zip(&lv.host[1..]) {
                // SAFETY: `msgs` outlives the wait below.
                sends.extend(unsafe { self.c_isend(comm, m, d) }?);
            }
            self.wait_all_internal(sends)?;
            if exclusive {
                before_host
            } else {
                Some(combine(op, dt, count, before_host.as_deref(), &vals[0]))
            }
        };
        if let Some(r) = result {
            recv.unpack(&r);
        }
        Ok(())
    }

    /// The site leader's part of a scan: the totals of its hosts, those of
    /// the earlier sites, and to each host leader the combination of all
    /// that comes before its host. Returns its own host's prefix.
    #[allow(clippy::too_many_arguments)]
    fn site_prefixes(
        &self,
        comm: &Comm,
        plan: &Plan,
        site: &[u32],
        wan: &[u32],
        own_total: Vec<u8>,
        op: &Op,
        dt: &DtRef,
        count: usize,
    ) -> Result<Option<Vec<u8>>> {
        let me = comm.rank;
        let len = own_total.len();
        let mut totals = vec![own_total];
        totals.extend(self.recv_each(comm, &site[1..], len)?);
        let mut site_total: Option<Vec<u8>> = None;
        for t in &totals {
            site_total = Some(combine(op, dt, count, site_total.as_deref(), t));
        }
        let site_total = site_total.expect("at least one host");
        // Across sites: each leader sends its total to the later sites'
        // leaders and combines the earlier ones' in site order.
        let first = |m: u32| plan.under(LevelKind::Wan, m)[0];
        let later: Vec<u32> = wan.iter().copied().filter(|&m| m > me).collect();
        let earlier: Vec<u32> = wan.iter().copied().filter(|&m| m < me).collect();
        let mut sends = Vec::new();
        for &m in &later {
            // SAFETY: `site_total` is not touched until the wait below.
            sends.extend(unsafe { self.c_isend(comm, &site_total, m) }?);
        }
        let got = self.recv_each(comm, &earlier, len);
        self.wait_all_internal(sends)?;
        let before_site = if earlier.is_empty() {
            None
        } else {
            let parts = earlier.iter().map(|&m| first(m)).zip(got?).collect();
            Some(fold(op, dt, count, parts))
        };
        // Down to the host leaders of this site (the list ascends).
        let mut before = before_site;
        let mut msgs = Vec::new();
        let mut mine = None;
        for (k, t) in totals.iter().enumerate() {
            if k == 0 {
                mine = before.clone();
            } else {
                msgs.push(prefix_msg(before.as_deref(), len));
            }
            before = Some(combine(op, dt, count, before.as_deref(), t));
        }
        let mut sends = Vec::new();
        for (m, &d) in msgs.iter().zip(&site[1..]) {
            // SAFETY: `msgs` outlives the wait below.
            sends.extend(unsafe { self.c_isend(comm, m, d) }?);
        }
        self.wait_all_internal(sends)?;
        Ok(mine)
    }

    /// Receives a prefix message (see [`Mpi::hier_scan`]) of `len` data bytes.
    fn recv_prefix(&self, comm: &Comm, from: u32, len: usize) -> Result<Option<Vec<u8>>> {
        let mut m = vec![0u8; len + 1];
        let got = self.c_recv(comm, &mut m, from)?;
        match (got, m[0]) {
            (1, 0) => Ok(None),
            (g, 1) if g == len + 1 => Ok(Some(m.split_off(1))),
            _ => Err(err(
                class::INTERN,
                format!("scan: malformed prefix from rank {from}"),
            )),
        }
    }
}

/// A prefix message: a flag byte, then the data if there is any.
fn prefix_msg(p: Option<&[u8]>, len: usize) -> Vec<u8> {
    match p {
        None => vec![0],
        Some(d) => {
            let mut v = Vec::with_capacity(len + 1);
            v.push(1);
            v.extend_from_slice(d);
            v
        }
    }
}
