//! Communicators: a group, a context id pair (point-to-point and collective),
//! this process's rank, and per-destination sequence counters.
//!
//! An intercommunicator has a local group (`group`, `rank`, `size`: what
//! `MPI_Comm_group/rank/size` report) and a remote group (`peers`): the
//! processes that ranks of point-to-point calls and of its collective
//! messages name. On an intracommunicator `peers` is `group` itself, so the
//! point-to-point paths read `peers` on both kinds without a branch.

use crate::attr::AttrSet;
use crate::datatype::{Basic, Datatype};
use crate::error::{class, err, Result};
use crate::group::Group;
use crate::info::Info;
use crate::{Buf, Mode, Mpi, Op, UNDEFINED};
use std::sync::atomic::Ordering;
use std::sync::atomic::{AtomicU32, AtomicUsize};
use std::sync::{Arc, Mutex};

#[derive(Debug)]
pub struct Comm {
    /// Point-to-point context id; collectives use `ctx + 1`.
    pub ctx: u32,
    /// Nonblocking-collective instance this shadow communicator runs (0 = a real communicator).
    pub nbc: u32,
    /// Instances of nonblocking collectives started on this communicator
    /// (every member starts them in the same order, so they agree on it).
    pub(crate) nbc_next: AtomicU32,
    pub group: Arc<Group>,
    pub rank: u32,
    pub size: u32,
    /// The group ranks of point-to-point calls address (the remote group of
    /// an intercommunicator, else `group`), and its size.
    pub peers: Arc<Group>,
    pub peer_size: u32,
    /// What only an intercommunicator has (None on an intracommunicator).
    pub inter: Option<Box<Inter>>,
    /// Next sequence number per destination, point-to-point and collective.
    pub(crate) seq: Box<[AtomicU32]>,
    pub(crate) cseq: Box<[AtomicU32]>,
    pub name: Mutex<String>,
    pub attrs: Mutex<AttrSet>,
    pub info: Mutex<Info>,
    /// The C handle of this communicator's error handler (set by `capi`).
    pub errhandler: AtomicUsize,
    /// The C handle `capi` gave this communicator.
    pub handle: AtomicUsize,
    /// Cartesian topology, if the communicator has one.
    pub cart: Mutex<Option<Cart>>,
    /// Graph or distributed-graph topology, if the communicator has one.
    pub graph: Mutex<Option<crate::topology::Topology>>,
    /// Buffer for `MPI_Bsend` on this communicator (`MPI_Comm_attach_buffer`).
    pub(crate) bsend: Mutex<crate::Bsend>,
    /// The levels the hierarchical collectives follow (computed at the first
    /// collective that may use them; None inside: flat).
    pub(crate) hier: std::sync::OnceLock<Option<Arc<crate::coll_hier::Plan>>>,
    /// The segment of small collectives when all members share one host
    /// (`coll_sm`; made at the first call that may use it, None inside: messages).
    pub(crate) sm: std::sync::OnceLock<Option<Arc<crate::coll_sm::SmSeg>>>,
}

/// The parts of an intercommunicator besides its two groups.
#[derive(Debug)]
pub struct Inter {
    /// A hidden intracommunicator over the local group (its own context id)
    /// that the intercommunicator's collectives run their local halves on.
    pub local: Arc<Comm>,
}

/// A Cartesian topology: extent and periodicity of each dimension (row-major ranks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cart {
    pub dims: Vec<i32>,
    pub periods: Vec<bool>,
}

impl Cart {
    pub fn coords(&self, mut rank: i32) -> Vec<i32> {
        let mut c = vec![0; self.dims.len()];
        for i in (0..self.dims.len()).rev() {
            c[i] = rank % self.dims[i];
            rank /= self.dims[i];
        }
        c
    }

    /// Rank of `coords` (periodic dimensions wrap); None if out of a non-periodic range.
    pub fn rank(&self, coords: &[i32]) -> Option<i32> {
        let mut r = 0;
        for ((&d, &periodic), &c) in self.dims.iter().zip(&self.periods).zip(coords) {
            let mut c = c;
            if periodic {
                c = c.rem_euclid(d);
            } else if c < 0 || c >= d {
                return None;
            }
            r = r * d + c;
        }
        Some(r)
    }
}

impl Comm {
    pub fn new(ctx: u32, group: Arc<Group>, rank: u32, name: &str) -> Arc<Comm> {
        Self::build(ctx, group.clone(), group, rank, name, None)
    }

    /// An intercommunicator: `local` is this process's group (rank `rank`),
    /// `remote` the other; `local_comm` its hidden intracommunicator.
    pub fn new_inter(
        ctx: u32,
        local: Arc<Group>,
        remote: Arc<Group>,
        rank: u32,
        local_comm: Arc<Comm>,
    ) -> Arc<Comm> {
        let inter = Some(Box::new(Inter { local: local_comm }));
        Self::build(ctx, local, remote, rank, "", inter)
    }

    fn build(
        ctx: u32,
        group: Arc<Group>,
        peers: Arc<Group>,
        rank: u32,
        name: &str,
        inter: Option<Box<Inter>>,
    ) -> Arc<Comm> {
        let size = group.size();
        let peer_size = peers.size();
        let counters = |n| {
            (0..n)
                .map(|_| AtomicU32::new(0))
                .collect::<Vec<_>>()
                .into_boxed_slice()
        };
        Arc::new(Comm {
            ctx,
            nbc: 0,
            nbc_next: AtomicU32::new(0),
            rank,
            size,
            seq: counters(peer_size),
            cseq: counters(peer_size),
            group,
            peers,
            peer_size,
            inter,
            name: Mutex::new(name.to_string()),
            attrs: Default::default(),
            info: Default::default(),
            errhandler: AtomicUsize::new(0),
            handle: AtomicUsize::new(0),
            cart: Mutex::new(None),
            graph: Mutex::new(None),
            bsend: Default::default(),
            hier: Default::default(),
            sm: Default::default(),
        })
    }

    /// The matching key of point-to-point traffic (collective traffic uses `key() + 1`).
    pub fn key(&self) -> u64 {
        self.ctx as u64 | (self.nbc as u64) << 32
    }

    /// A private copy of this communicator for one nonblocking collective:
    /// same group, own matching queues and sequence numbers.
    pub fn shadow(&self) -> Arc<Comm> {
        let n = self
            .nbc_next
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        // An intercommunicator's shadow runs its local halves on a shadow
        // of the local communicator (both advance in step on every member).
        let inter = self.inter.as_ref().map(|i| {
            Box::new(Inter {
                local: i.local.shadow(),
            })
        });
        let mut c = Comm::build(
            self.ctx,
            self.group.clone(),
            self.peers.clone(),
            self.rank,
            "",
            inter,
        );
        let fresh = Arc::get_mut(&mut c).expect("fresh");
        fresh.nbc = n;
        // The same collective algorithms as the communicator's blocking ones
        // (every member's shadow sees the same): its plan if computed, and
        // its choice of algorithm.
        if let Some(p) = self.hier.get() {
            let _ = fresh.hier.set(p.clone());
        }
        // The same links too: the shadow's traffic shares the
        // communicator's context ids (and so its route), and an
        // `MPI_Comm_idup` of it must inherit the `gw_` hints in force.
        let choice = self.info.lock().unwrap_or_else(|e| e.into_inner());
        let keys = std::iter::once(crate::coll_hier::INFO_KEY)
            .chain(crate::comm_links::KEYS.iter().copied());
        for key in keys {
            if let Some(v) = choice.get(key) {
                let _ = fresh
                    .info
                    .get_mut()
                    .unwrap_or_else(|e| e.into_inner())
                    .set(key, v);
            }
        }
        drop(choice);
        c
    }

    /// World rank of peer rank `r` (of the remote group on an intercommunicator).
    pub fn world_of(&self, r: u32) -> u32 {
        self.peers.world(r)
    }

    pub fn is_inter(&self) -> bool {
        self.inter.is_some()
    }

    /// The hidden local intracommunicator of an intercommunicator.
    pub fn local_comm(&self) -> Option<&Arc<Comm>> {
        self.inter.as_ref().map(|i| &i.local)
    }
}

// The communicator constructors of the library (collective calls).
impl Mpi {
    /// Refuses an intercommunicator where the standard allows only intracommunicators.
    pub(crate) fn intra_only(comm: &Comm, what: &str) -> Result<()> {
        if comm.is_inter() {
            return Err(err(
                class::COMM,
                format!("{what} needs an intracommunicator; this is an intercommunicator"),
            ));
        }
        Ok(())
    }

    /// Agrees on a fresh context id among the members of `comm` (collective).
    ///
    /// Every id at or above a process's `next_ctx` is free there. Round one
    /// takes the largest `next_ctx` of the members; round two has each member
    /// claim that id by moving its `next_ctx` past it, which works only if
    /// nothing else claimed an id at or above it meanwhile. Agreements run
    /// concurrently in one process (`MPI_Comm_idup` jobs on several
    /// communicators, run by waiting threads and the runner): two of them
    /// could read the same `next_ctx` and hand two communicators one id
    /// (the hang of issue 15). If any member could not claim, all try again
    /// with their new `next_ctx` (ids passed over stay unused).
    fn new_ctx(&self, comm: &Comm) -> Result<u32> {
        loop {
            let mut v = self.next_ctx.load(Ordering::Acquire).to_le_bytes();
            self.allreduce_u32_max(comm, &mut v)?;
            let id = u32::from_le_bytes(v);
            let claimed = self
                .next_ctx
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |cur| {
                    (cur <= id).then_some(id + 2)
                })
                .is_ok();
            let mut lost = (!claimed as u32).to_le_bytes();
            self.allreduce_u32_max(comm, &mut lost)?;
            if u32::from_le_bytes(lost) == 0 {
                return Ok(id);
            }
            std::thread::yield_now();
        }
    }

    pub(crate) fn allreduce_u32_max(&self, comm: &Comm, v: &mut [u8; 4]) -> Result<()> {
        let u32_op = Datatype::predefined(Basic::U32, "u32");
        let mut out = [0u8; 4];
        // SAFETY: `v` outlives the allreduce, which only reads it.
        let b = unsafe { Buf::bytes_of(v, &self.byte) };
        // SAFETY: `out` lives until the allreduce returns.
        let ob = unsafe { Buf::new(out.as_mut_ptr() as usize, 1, u32_op.clone()) };
        let ib = unsafe { Buf::new(b.addr(), 1, u32_op) };
        self.allreduce(comm, Some(&ib), &ob, &Op::Max)?;
        *v = out;
        Ok(())
    }

    pub fn comm_dup(&self, comm: &Comm) -> Result<Arc<Comm>> {
        if comm.is_inter() {
            return self.intercomm_dup(comm);
        }
        let id = self.new_ctx(comm)?;
        let c = Comm::new(id, comm.group.clone(), comm.rank, "");
        // The standard: a duplicate keeps the hints, and so its links.
        *c.info.lock().unwrap() = comm.info.lock().unwrap().clone();
        self.inherit_links(comm, &c);
        *c.cart.lock().unwrap() = comm.cart.lock().unwrap().clone();
        *c.graph.lock().unwrap() = comm.graph.lock().unwrap().clone();
        Ok(c)
    }

    /// `MPI_Comm_split`; None for `MPI_UNDEFINED` colour.
    pub fn comm_split(&self, comm: &Comm, color: i32, key: i32) -> Result<Option<Arc<Comm>>> {
        if color < 0 && color != UNDEFINED {
            return Err(err(
                class::ARG,
                format!("colour {color} is negative (use MPI_UNDEFINED to opt out)"),
            ));
        }
        if comm.is_inter() {
            return self.intercomm_split(comm, color, key);
        }
        let id = self.new_ctx(comm)?;
        let mut mine = [0u8; 8];
        mine[..4].copy_from_slice(&color.to_le_bytes());
        mine[4..].copy_from_slice(&key.to_le_bytes());
        let mut all = vec![0u8; 8 * comm.size as usize];
        self.allgather_bytes(comm, &mine, &mut all)?;
        if color == UNDEFINED {
            return Ok(None);
        }
        let mut members: Vec<(i32, u32)> = Vec::new();
        for r in 0..comm.size {
            let c = i32::from_le_bytes(all[8 * r as usize..8 * r as usize + 4].try_into().unwrap());
            let k = i32::from_le_bytes(
                all[8 * r as usize + 4..8 * r as usize + 8]
                    .try_into()
                    .unwrap(),
            );
            if c == color {
                members.push((k, r));
            }
        }
        members.sort();
        let world: Vec<u32> = members.iter().map(|&(_, r)| comm.group.world(r)).collect();
        let rank = members
            .iter()
            .position(|&(_, r)| r == comm.rank)
            .expect("I am in my colour") as u32;
        Ok(Some(Comm::new(id, Group::new(world), rank, "")))
    }

    /// `MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)`: one communicator per host;
    /// None where `join` is false (`MPI_UNDEFINED`). Every member of `comm`
    /// calls this, joining or not, so all run the same collectives.
    pub fn comm_split_shared(
        &self,
        comm: &Comm,
        join: bool,
        key: i32,
    ) -> Result<Option<Arc<Comm>>> {
        // The host's identity as a fixed-size digest: ids are longer than
        // any fixed slot (hostname, boot id, three namespace inodes), and a
        // truncated one could put two hosts that differ only in their tail
        // (their IPC or pid namespace) in one "shared memory" communicator.
        self.comm_split_by_place(comm, join, key, host_digest(self.ctx().host_id()))
    }

    /// One communicator per site (`GW_SITE`); same exchange as
    /// [`Mpi::comm_split_shared`], so ranks passing `MPI_UNDEFINED` run the
    /// same collectives whichever level the others split by.
    pub fn comm_split_site(&self, comm: &Comm, join: bool, key: i32) -> Result<Option<Arc<Comm>>> {
        let site = self.own_site()?;
        self.comm_split_by_place(comm, join, key, host_digest(&format!("site:{site}")))
    }

    /// One communicator per host *within its site* (the `gw:host` level):
    /// the same as per host wherever a host belongs to one site, but keeps
    /// the hierarchy strict where a machines file puts one machine in
    /// several sites (as `start=local` test sites do).
    pub fn comm_split_host_in_site(
        &self,
        comm: &Comm,
        join: bool,
        key: i32,
    ) -> Result<Option<Arc<Comm>>> {
        let site = self.own_site()?;
        let place = format!("host:{site}\0{}", self.ctx().host_id());
        self.comm_split_by_place(comm, join, key, host_digest(&place))
    }

    fn own_site(&self) -> Result<String> {
        self.ctx()
            .site_of(self.ctx().rank())
            .map_err(|e| err(class::INTERN, format!("own site: {e}")))
    }

    /// Splits `comm` into groups of equal `place` digests.
    fn comm_split_by_place(
        &self,
        comm: &Comm,
        join: bool,
        key: i32,
        place: [u8; 32],
    ) -> Result<Option<Arc<Comm>>> {
        let mut h = [0u8; 64];
        h[..32].copy_from_slice(&place);
        if let Some(local) = comm.local_comm() {
            // An intercommunicator: one per host between the two groups'
            // processes on it. Colour = the lowest world rank on my host in
            // either group (the leaders swap their groups' host lists).
            let mut all = vec![0u8; 64 * comm.size as usize];
            self.allgather_bytes(local, &h, &mut all)?;
            let theirs = self.leader_swap(comm, &all)?;
            if theirs.len() != 64 * comm.peer_size as usize {
                return Err(err(
                    class::INTERN,
                    "the other group's leader sent a malformed host list",
                ));
            }
            let on_my_host = |g: &Group, list: &[u8]| -> Vec<u32> {
                (0..g.size())
                    .filter(|&r| list[64 * r as usize..64 * r as usize + 64] == h)
                    .map(|r| g.world(r))
                    .collect()
            };
            let mut mine = on_my_host(&comm.group, &all);
            mine.extend(on_my_host(&comm.peers, &theirs));
            let color = match (join, mine.iter().min()) {
                (true, Some(&w)) => w as i32,
                _ => UNDEFINED,
            };
            return self.intercomm_split(comm, color, key);
        }
        let mut all = vec![0u8; 64 * comm.size as usize];
        self.allgather_bytes(comm, &h, &mut all)?;
        // Colour = lowest rank on my host.
        let color = if join {
            (0..comm.size as usize)
                .find(|&r| all[64 * r..64 * r + 64] == h)
                .unwrap_or(0) as i32
        } else {
            UNDEFINED
        };
        self.comm_split(comm, color, key)
    }

    /// `MPI_Comm_create`: collective over `comm`; None where the caller is not in `group`.
    pub fn comm_create(&self, comm: &Comm, group: &Arc<Group>) -> Result<Option<Arc<Comm>>> {
        if comm.is_inter() {
            return self.intercomm_create_sub(comm, group);
        }
        for &w in &group.members {
            if comm.group.rank_of(w).is_none() {
                return Err(err(
                    class::GROUP,
                    "the group is not a subset of the communicator's group",
                ));
            }
        }
        let id = self.new_ctx(comm)?;
        let me = comm.group.world(comm.rank);
        Ok(group
            .rank_of(me)
            .map(|r| Comm::new(id, group.clone(), r, "")))
    }

    /// `MPI_Cart_create` (no reordering): the first prod(dims) ranks get the grid.
    pub fn cart_create(
        &self,
        comm: &Comm,
        dims: &[i32],
        periods: &[bool],
    ) -> Result<Option<Arc<Comm>>> {
        Self::intra_only(comm, "MPI_Cart_create")?;
        let n: i64 = dims.iter().map(|&d| d as i64).product();
        if dims.iter().any(|&d| d <= 0) || n > comm.size as i64 {
            return Err(err(
                class::DIMS,
                format!("grid {dims:?} does not fit in {} processes", comm.size),
            ));
        }
        let color = if (comm.rank as i64) < n { 0 } else { UNDEFINED };
        let c = self.comm_split(comm, color, comm.rank as i32)?;
        if let Some(c) = &c {
            *c.cart.lock().unwrap() = Some(Cart {
                dims: dims.to_vec(),
                periods: periods.to_vec(),
            });
        }
        Ok(c)
    }

    /// `MPI_Cart_sub`: keeps the dimensions marked in `remain`.
    pub fn cart_sub(&self, comm: &Comm, remain: &[bool]) -> Result<Arc<Comm>> {
        let cart = comm.cart.lock().unwrap().clone().ok_or_else(|| {
            err(
                class::TOPOLOGY,
                "the communicator has no Cartesian topology",
            )
        })?;
        if remain.len() != cart.dims.len() {
            return Err(err(class::ARG, "remain_dims has the wrong length"));
        }
        let coords = cart.coords(comm.rank as i32);
        // Colour: the coordinates in the dropped dimensions; key: those kept.
        let mut color = 0i32;
        let mut key = 0i32;
        for i in 0..cart.dims.len() {
            if remain[i] {
                key = key * cart.dims[i] + coords[i];
            } else {
                color = color * cart.dims[i] + coords[i];
            }
        }
        let c = self
            .comm_split(comm, color, key)?
            .expect("a colour was given");
        let sub = Cart {
            dims: (0..cart.dims.len())
                .filter(|&i| remain[i])
                .map(|i| cart.dims[i])
                .collect(),
            periods: (0..cart.dims.len())
                .filter(|&i| remain[i])
                .map(|i| cart.periods[i])
                .collect(),
        };
        *c.cart.lock().unwrap() = Some(sub);
        Ok(c)
    }

    /// `MPI_Comm_create_group`: collective over the members of `group` only;
    /// they agree on a context id through messages with `tag` on `comm`.
    pub fn comm_create_group(
        &self,
        comm: &Comm,
        group: &Arc<Group>,
        tag: i32,
    ) -> Result<Option<Arc<Comm>>> {
        Self::intra_only(comm, "MPI_Comm_create_group")?;
        Self::check_tag(tag, false)?;
        let me = comm.group.world(comm.rank);
        let Some(r) = group.rank_of(me) else {
            return Ok(None);
        };
        let mut parent = Vec::with_capacity(group.members.len());
        for &w in &group.members {
            match comm.group.rank_of(w) {
                Some(p) => parent.push(p as i32),
                None => {
                    return Err(err(
                        class::GROUP,
                        "the group is not a subset of the communicator's group",
                    ))
                }
            }
        }
        let u32t = Datatype::predefined(Basic::U32, "u32");
        let mut v = [self.next_ctx.load(Ordering::Acquire)];
        // SAFETY: `v` lives across each blocking call that uses it.
        let b = unsafe { Buf::new(v.as_mut_ptr() as usize, 1, u32t.clone()) };
        if r == 0 {
            let mut best = v[0];
            for &p in &parent[1..] {
                self.recv(comm, b.clone(), p, tag)?;
                best = best.max(v[0]);
            }
            v[0] = best;
            for &p in &parent[1..] {
                self.send(comm, &b, p, tag, Mode::Standard)?;
            }
        } else {
            self.send(comm, &b, parent[0], tag, Mode::Standard)?;
            self.recv(comm, b.clone(), parent[0], tag)?;
        }
        self.next_ctx.fetch_max(v[0] + 2, Ordering::AcqRel);
        Ok(Some(Comm::new(v[0], group.clone(), r, "")))
    }
}

/// SHA-256 of a host id (see `comm_split_shared`).
fn host_digest(host: &str) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    Sha256::digest(host.as_bytes()).into()
}
