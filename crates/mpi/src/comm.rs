//! Communicators: a group, a context id pair (point-to-point and collective),
//! this process's rank, and per-destination sequence counters.

use crate::attr::AttrSet;
use crate::group::Group;
use crate::info::Info;
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
        let size = group.size();
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
            seq: counters(size),
            cseq: counters(size),
            group,
            name: Mutex::new(name.to_string()),
            attrs: Default::default(),
            info: Default::default(),
            errhandler: AtomicUsize::new(0),
            handle: AtomicUsize::new(0),
            cart: Mutex::new(None),
            graph: Mutex::new(None),
            bsend: Default::default(),
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
        let mut c = Comm::new(self.ctx, self.group.clone(), self.rank, "");
        Arc::get_mut(&mut c).expect("fresh").nbc = n;
        c
    }

    pub fn world_of(&self, r: u32) -> u32 {
        self.group.world(r)
    }
}
