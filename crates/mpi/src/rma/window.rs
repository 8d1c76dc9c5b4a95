//! Windows: their memory, what every member knows of the others, and
//! their creation and freeing (collective over the communicator).
//!
//! Memory a peer writes is kept as an address, never behind a Rust
//! reference: the target's handler reads and writes it through
//! [`crate::mem`], and shared windows are mapped by several processes.

use super::access::Access;
use super::segment::{HostSegment, SHARED_ALIGN};
use super::single_copy::{AttachTable, SingleCopy};
use super::{Rma, H_RMA};
use crate::comm::Comm;
use crate::error::{class, err, MpiError, Result};
use crate::info::Info;
use crate::Mpi;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// How a window's memory came to be (`MPI_WIN_CREATE_FLAVOR`; the ABI's values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    Create = 311,
    Allocate = 312,
    Dynamic = 313,
    Shared = 314,
}

/// What every member knows of another member's window.
#[derive(Debug, Clone, Copy, Default)]
pub struct Remote {
    pub size: u64,
    pub disp_unit: u64,
}

/// Memory the library allocated for a window, freed with it.
pub(crate) enum Owned {
    None,
    Heap {
        addr: usize,
        layout: std::alloc::Layout,
    },
    Mapped {
        addr: usize,
        len: usize,
    },
}

/// This process's memory of a window being built.
pub(crate) struct Memory {
    pub base: usize,
    pub size: usize,
    pub disp_unit: usize,
    pub owned: Owned,
    /// Shared windows: every member's segment in this process's mapping.
    pub shared_bases: Vec<usize>,
    /// Per window rank: its memory in this process's mapping, for loads and
    /// stores (0 = reached through the target only).
    pub direct: Vec<usize>,
    /// Per window rank: its accumulate lock in this process's mapping (empty
    /// or 0 = not in a segment this process maps).
    pub locks: Vec<usize>,
    /// Per window rank: how puts and gets reach its memory by single copies.
    pub single_copy: SingleCopy,
    /// Dynamic windows: this process's attached regions, for the others.
    pub attach_table: Option<Box<AttachTable>>,
}

/// The target's lock of one window.
#[derive(Default)]
pub(crate) struct TargetLocks {
    pub exclusive: Option<u32>,
    /// World ranks holding a shared lock.
    pub shared: Vec<u32>,
    /// Waiting: (world rank, exclusive, operation id of the request).
    pub queue: VecDeque<(u32, bool, u64)>,
}

/// An [`Epoch::locked`] value: a lock epoch opened with `MPI_MODE_NOCHECK`.
pub(crate) const LOCKED_NOCHECK: u8 = 3;

/// The origin's synchronization state of one window.
#[derive(Default, Debug)]
pub(crate) struct Epoch {
    /// Between two fences (not after one with `MPI_MODE_NOSUCCEED`).
    pub fence: bool,
    /// Per window rank: 0 = not locked, 1 = shared, 2 = exclusive,
    /// [`LOCKED_NOCHECK`] = under `MPI_MODE_NOCHECK` (no lock was taken).
    pub locked: Vec<u8>,
    pub lock_all: bool,
    /// The `MPI_Win_lock_all` took no locks (`MPI_MODE_NOCHECK`).
    pub lock_all_nocheck: bool,
    /// Window ranks of the access epoch of `MPI_Win_start`.
    pub started: Option<Vec<u32>>,
    /// Window ranks of the exposure epoch of `MPI_Win_post`.
    pub posted: Option<Vec<u32>>,
}

/// A window.
pub struct Win {
    /// Agreed by every member (the context id of its private communicator).
    pub id: u32,
    /// A private duplicate of the creating communicator.
    pub comm: Arc<Comm>,
    pub flavor: Flavor,
    /// This process's memory: address (0 for dynamic windows), bytes, unit.
    pub base: usize,
    pub size: usize,
    pub disp_unit: usize,
    /// Every member's size and unit, by window rank.
    pub remote: Vec<Remote>,
    /// Shared windows: every member's segment in this process's mapping.
    pub shared_bases: Vec<usize>,
    /// Per window rank: where its memory lies in this process's mapping when
    /// puts and gets to it are loads and stores (0 = requests to the target).
    pub(crate) direct: Vec<usize>,
    /// Per window rank: the accumulate lock to hold when applying an
    /// accumulate to its memory from here (0 = send it to the target).
    pub(crate) acc_locks: Vec<usize>,
    /// This process's own accumulate lock (0 = none: no one else applies
    /// accumulates to its memory, its handler alone does).
    pub(crate) own_acc_lock: usize,
    /// Per window rank: `direct`, `acc_locks` and `remote` packed for the
    /// fast path ([`super::fast`]).
    pub(crate) fast: Box<[super::fast::FastTarget]>,
    owned: Owned,
    /// Dynamic windows: attached (address, bytes).
    pub(crate) attached: Mutex<Vec<(usize, usize)>>,
    /// Dynamic windows: `attached` where the other members read it.
    attach_table: Option<Box<AttachTable>>,
    /// Per window rank: puts and gets by one kernel copy ([`super::single_copy`]).
    pub(crate) single_copy: SingleCopy,
    /// Large puts as requests lend their origin buffer to the runtime and
    /// are placed in the target's memory by a stream method
    /// (`GW_MPI_RMA_LARGE_PUTS`; see `super::placed`).
    pub(crate) large_puts: bool,
    /// Answer bytes of large gets asked of one target at a time
    /// (`GW_MPI_RMA_GETS_IN_FLIGHT`, 0 = no bound; see `super::paced_gets`).
    pub(crate) gets_in_flight: usize,
    /// Large get answers to another host are lent to the runtime from the
    /// window's memory itself (`GW_MPI_RMA_LARGE_GETS`; see
    /// `super::lent_answers`).
    pub(crate) lend_window: bool,
    /// Operations sent to each window rank and not answered yet.
    pub(crate) outstanding: Box<[AtomicU32]>,
    /// `MPI_Win_post` messages received from each window rank and not yet used by a start.
    pub(crate) posts: Box<[AtomicU32]>,
    /// `MPI_Win_complete` messages received from each window rank and not yet used by a wait.
    pub(crate) completes: Box<[AtomicU32]>,
    /// Per window rank: the last put of a start epoch, held to travel
    /// with the epoch's complete (`super::fast_request::HeldPut`), and
    /// whether one is (read without the lock by every call to that rank).
    pub(crate) held_put: Box<[Mutex<Option<super::fast_request::HeldPut>>]>,
    pub(crate) put_held: Box<[AtomicBool]>,
    pub(crate) locks: Mutex<TargetLocks>,
    pub(crate) epoch: Mutex<Epoch>,
    /// The first error a target answered, reported by the next synchronization.
    error: Mutex<Option<MpiError>>,
    /// Whether `error` holds one: a flush without one takes no lock.
    has_error: AtomicBool,
    /// `epoch` as the communication calls read it, without a lock.
    pub(crate) access: Access,
    pub name: Mutex<String>,
    pub info: Mutex<Info>,
    /// The C handle of the window's error handler (set by `capi`, 0 = fatal).
    pub errhandler: AtomicUsize,
}

impl Drop for Win {
    fn drop(&mut self) {
        if self.own_acc_lock != 0 {
            // Before the segment goes: waits stop writing its stamp.
            super::polling::STAMPS.remove(self.own_acc_lock);
        }
        match self.owned {
            Owned::None => {}
            // SAFETY: allocated with this layout by `Mpi::win_allocate`; the
            // window is gone from the table, so no handler reaches it.
            Owned::Heap { addr, layout } => unsafe { std::alloc::dealloc(addr as *mut u8, layout) },
            // SAFETY: mapped by `map_shared` with this length; unmapped once.
            Owned::Mapped { addr, len } => unsafe {
                libc::munmap(addr as *mut libc::c_void, len);
            },
        }
    }
}

impl std::fmt::Debug for Win {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Win")
            .field("id", &self.id)
            .field("flavor", &self.flavor)
            .field("size", &self.size)
            .finish()
    }
}

impl Win {
    pub(crate) fn note_error(&self, e: MpiError) {
        let mut g = self.error.lock().unwrap_or_else(|e| e.into_inner());
        if g.is_none() {
            *g = Some(e);
        }
        self.has_error.store(true, Ordering::Release);
    }

    /// The first error a target answered since the last call, if any.
    #[inline]
    pub(crate) fn take_error(&self) -> Result<()> {
        // An error noted by another thread after this load is reported by
        // the next synchronization call, as one noted after the call.
        if !self.has_error.load(Ordering::Acquire) {
            return Ok(());
        }
        self.take_error_slow()
    }

    /// Whether a target answered an error not yet reported.
    #[inline]
    pub(crate) fn error_pending(&self) -> bool {
        self.has_error.load(Ordering::Acquire)
    }

    #[cold]
    fn take_error_slow(&self) -> Result<()> {
        let mut g = self.error.lock().unwrap_or_else(|e| e.into_inner());
        self.has_error.store(false, Ordering::Release);
        match g.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    pub(crate) fn answered(&self, rank: u32) {
        self.outstanding[rank as usize].fetch_sub(1, Ordering::AcqRel);
    }

    pub fn group(&self) -> Arc<crate::group::Group> {
        self.comm.group.clone()
    }

    /// The address range `[addr, addr + len)` of this process's window
    /// memory that a peer's piece `offset .. offset + len` names, if it lies
    /// inside (for dynamic windows `offset` is an address and must lie in
    /// one attached region).
    pub(crate) fn local_range(&self, offset: i128, len: usize) -> Option<usize> {
        let end = offset.checked_add(len as i128)?;
        if offset < 0 {
            return None;
        }
        if self.flavor == Flavor::Dynamic {
            let a = self.attached.lock().unwrap_or_else(|e| e.into_inner());
            return a
                .iter()
                .any(|&(b, n)| offset >= b as i128 && end <= b as i128 + n as i128)
                .then_some(offset as usize);
        }
        (end <= self.size as i128).then(|| self.base + offset as usize)
    }

    /// Builds a window (not yet visible to handlers).
    pub(crate) fn build(
        comm: Arc<Comm>,
        flavor: Flavor,
        m: Memory,
        remote: Vec<Remote>,
    ) -> Arc<Win> {
        let Memory {
            base,
            size,
            disp_unit,
            owned,
            shared_bases,
            direct,
            locks,
            single_copy,
            attach_table,
        } = m;
        let lock_of = |r: usize| locks.get(r).copied().unwrap_or(0);
        // Accumulates load and store only where puts do, and under the lock.
        let acc_locks: Vec<usize> = (0..direct.len())
            .map(|r| if direct[r] != 0 { lock_of(r) } else { 0 })
            .collect();
        let own_acc_lock = lock_of(comm.rank as usize);
        let n = comm.size as usize;
        let fast = super::fast::targets(&direct, &acc_locks, &remote, n);
        let counters = || (0..n).map(|_| AtomicU32::new(0)).collect::<Box<[_]>>();
        Arc::new(Win {
            id: comm.ctx,
            flavor,
            base,
            size,
            disp_unit,
            remote,
            shared_bases,
            direct,
            acc_locks,
            own_acc_lock,
            fast,
            owned,
            attached: Mutex::new(Vec::new()),
            attach_table,
            single_copy,
            large_puts: crate::params::flag("MPI_RMA_LARGE_PUTS"),
            gets_in_flight: usize::try_from(crate::params::num("MPI_RMA_GETS_IN_FLIGHT"))
                .unwrap_or(usize::MAX),
            lend_window: crate::params::flag("MPI_RMA_LARGE_GETS"),
            outstanding: counters(),
            posts: counters(),
            completes: counters(),
            held_put: (0..n).map(|_| Mutex::new(None)).collect(),
            put_held: (0..n).map(|_| AtomicBool::new(false)).collect(),
            locks: Mutex::new(TargetLocks::default()),
            epoch: Mutex::new(Epoch {
                locked: vec![0; n],
                ..Default::default()
            }),
            error: Mutex::new(None),
            has_error: AtomicBool::new(false),
            access: Access::new(n),
            name: Mutex::new(String::new()),
            info: Mutex::new(Info::default()),
            errhandler: AtomicUsize::new(0),
            comm,
        })
    }
}

impl Mpi {
    pub(crate) fn rma(&self) -> &Arc<Rma> {
        &self.rma
    }

    /// Exchanges (size, unit) with every member of `comm`.
    /// Fails on every member if `ok` is false on any (a failed allocation).
    fn exchange_shapes(
        &self,
        comm: &Comm,
        size: usize,
        unit: usize,
        ok: bool,
    ) -> Result<Vec<Remote>> {
        let mut mine = [0u8; 17];
        mine[..8].copy_from_slice(&(size as u64).to_le_bytes());
        mine[8..16].copy_from_slice(&(unit as u64).to_le_bytes());
        mine[16] = ok as u8;
        let mut all = vec![0u8; 17 * comm.size as usize];
        self.allgather_bytes(comm, &mine, &mut all)?;
        if all.chunks_exact(17).any(|c| c[16] == 0) {
            return Err(err(
                class::NO_MEM,
                format!("a member could not allocate its window memory ({size} bytes here)"),
            ));
        }
        Ok(all
            .chunks_exact(17)
            .map(|c| Remote {
                size: u64::from_le_bytes(c[..8].try_into().unwrap()),
                disp_unit: u64::from_le_bytes(c[8..16].try_into().unwrap()),
            })
            .collect())
    }

    fn check_shape(size: i64, unit: i64) -> Result<(usize, usize)> {
        if size < 0 {
            return Err(err(class::SIZE, format!("window size {size} is negative")));
        }
        if unit <= 0 {
            return Err(err(
                class::DISP,
                format!("displacement unit {unit} is not positive"),
            ));
        }
        Ok((size as usize, unit as usize))
    }

    fn publish(&self, w: Arc<Win>) -> Result<Arc<Win>> {
        self.rma()
            .wins
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(w.id, w.clone());
        self.rma().progress_thread.ensure_started(self.ctx());
        // Nobody sends to the window before every member can find it.
        self.barrier(&w.comm)?;
        Ok(w)
    }

    /// `MPI_Win_create` over the user's memory at `base`.
    pub fn win_create(&self, comm: &Comm, base: usize, size: i64, unit: i64) -> Result<Arc<Win>> {
        let (size, unit) = Self::check_shape(size, unit)?;
        if base == 0 && size > 0 {
            return Err(err(
                class::BASE,
                "the window's base is NULL but its size is not 0",
            ));
        }
        let c = self.comm_dup(comm)?;
        let remote = self.exchange_shapes(&c, size, unit, true)?;
        let direct = self.direct_targets(&c, base, None);
        let (single_copy, owned, locks) = self.single_copy_with_locks(&c, base as u64)?;
        let w = Win::build(
            c,
            Flavor::Create,
            Memory {
                base,
                size,
                disp_unit: unit,
                owned,
                shared_bases: Vec::new(),
                direct,
                locks,
                single_copy,
                attach_table: None,
            },
            remote,
        );
        self.stamp_polling(&w);
        self.publish(w)
    }

    /// `MPI_Win_allocate`: memory the library allocates (64-byte aligned).
    /// The members on one host share one segment (unless
    /// `GW_MPI_RMA_DIRECT=0`), so their puts and gets are loads and stores.
    pub fn win_allocate(&self, comm: &Comm, size: i64, unit: i64) -> Result<Arc<Win>> {
        let (size, unit) = Self::check_shape(size, unit)?;
        let c = self.comm_dup(comm)?;
        let seg = self.host_segment(&c, size, crate::params::flag("MPI_RMA_DIRECT"), false)?;
        let (addr, owned, seg_bases) = match seg {
            Some(HostSegment {
                addr,
                len,
                bases,
                locks,
            }) => (
                bases[c.rank as usize],
                Owned::Mapped { addr, len },
                Some((bases, locks)),
            ),
            None => {
                let layout = std::alloc::Layout::from_size_align(size.max(1), SHARED_ALIGN).ok();
                // SAFETY: the layout has a non-zero size.
                let addr = layout.map_or(0, |l| unsafe { std::alloc::alloc_zeroed(l) } as usize);
                let owned = match layout {
                    Some(layout) if addr != 0 => Owned::Heap { addr, layout },
                    _ => Owned::None,
                };
                (addr, owned, None)
            }
        };
        // Every member learns whether every allocation worked: all fail together.
        let remote = self.exchange_shapes(&c, size, unit, addr != 0);
        let (seg_bases, locks) = seg_bases.unzip();
        let direct = self.direct_targets(&c, addr, seg_bases);
        let w = Win::build(
            c,
            Flavor::Allocate,
            Memory {
                base: addr,
                size,
                disp_unit: unit,
                owned,
                shared_bases: Vec::new(),
                direct,
                locks: locks.unwrap_or_default(),
                single_copy: SingleCopy::none(),
                attach_table: None,
            },
            remote.clone().unwrap_or_default(),
        );
        remote?;
        self.publish(w)
    }

    /// `MPI_Win_create_dynamic`: no memory until `MPI_Win_attach`.
    pub fn win_create_dynamic(&self, comm: &Comm) -> Result<Arc<Win>> {
        let c = self.comm_dup(comm)?;
        let remote = self.exchange_shapes(&c, 0, 1, true)?;
        let table = AttachTable::new();
        let (single_copy, owned, locks) = self.single_copy_with_locks(&c, table.addr())?;
        let w = Win::build(
            c,
            Flavor::Dynamic,
            Memory {
                base: 0,
                size: 0,
                disp_unit: 1,
                owned,
                shared_bases: Vec::new(),
                direct: Vec::new(),
                locks,
                single_copy,
                attach_table: Some(table),
            },
            remote,
        );
        self.stamp_polling(&w);
        self.publish(w)
    }

    /// Windows over the program's memory with a lock segment: this
    /// process's waits say in it when it polls, so that origins of the host
    /// choose how to send accumulates (`super::polling`).
    fn stamp_polling(&self, w: &Win) {
        if w.own_acc_lock != 0 && w.single_copy.wants_stamps() {
            super::polling::STAMPS.add(w.own_acc_lock);
        }
    }

    /// `MPI_Win_attach`.
    pub fn win_attach(&self, w: &Win, base: usize, size: i64) -> Result<()> {
        if w.flavor != Flavor::Dynamic {
            return Err(err(
                class::RMA_FLAVOR,
                "MPI_Win_attach needs a dynamic window",
            ));
        }
        if size < 0 {
            return Err(err(class::SIZE, format!("size {size} is negative")));
        }
        if base == 0 && size > 0 {
            return Err(err(class::BASE, "the memory to attach is NULL"));
        }
        let size = size as usize;
        let end = base
            .checked_add(size)
            .ok_or_else(|| err(class::RMA_ATTACH, "the region wraps the address space"))?;
        let mut a = w.attached.lock().unwrap_or_else(|e| e.into_inner());
        if a.iter().any(|&(b, n)| base < b + n && b < end) {
            return Err(err(
                class::RMA_ATTACH,
                "the region overlaps memory already attached to the window",
            ));
        }
        a.push((base, size));
        if let Some(t) = &w.attach_table {
            super::single_copy::publish_regions(t, w.own_acc_lock, &a);
        }
        Ok(())
    }

    /// `MPI_Win_detach`.
    pub fn win_detach(&self, w: &Win, base: usize) -> Result<()> {
        if w.flavor != Flavor::Dynamic {
            return Err(err(
                class::RMA_FLAVOR,
                "MPI_Win_detach needs a dynamic window",
            ));
        }
        let mut a = w.attached.lock().unwrap_or_else(|e| e.into_inner());
        match a.iter().position(|&(b, _)| b == base) {
            Some(i) => {
                a.remove(i);
                if let Some(t) = &w.attach_table {
                    super::single_copy::publish_regions(t, w.own_acc_lock, &a);
                }
                drop(a);
                // The program may free the region now: what the runtime
                // still holds of answers lent from it is copied first.
                self.rma().settle_lent_answers();
                Ok(())
            }
            None => Err(err(
                class::RMA_ATTACH,
                format!("no region attached at {base:#x}"),
            )),
        }
    }

    /// `MPI_Win_allocate_shared`: one mapping of every member's segment, in
    /// rank order, in every member (all must be on one host).
    pub fn win_allocate_shared(&self, comm: &Comm, size: i64, unit: i64) -> Result<Arc<Win>> {
        let (size, unit) = Self::check_shape(size, unit)?;
        let c = self.comm_dup(comm)?;
        let seg = self.host_segment(&c, size, true, true)?;
        let remote = self.exchange_shapes(&c, size, unit, true)?;
        let Some(HostSegment {
            addr,
            len,
            bases,
            locks,
        }) = seg
        else {
            return Err(err(
                class::RMA_SHARED,
                "a member could not make or map the shared segment",
            ));
        };
        if bases.contains(&0) {
            // SAFETY: mapped by `host_segment` with this length, not used since.
            unsafe { libc::munmap(addr as *mut libc::c_void, len) };
            return Err(err(
                class::RMA_SHARED,
                "MPI_Win_allocate_shared needs every member on one host (use MPI_Comm_split_type with MPI_COMM_TYPE_SHARED)",
            ));
        }
        let direct = self.direct_targets(&c, bases[c.rank as usize], Some(bases.clone()));
        let w = Win::build(
            c.clone(),
            Flavor::Shared,
            Memory {
                base: bases[c.rank as usize],
                size,
                disp_unit: unit,
                owned: Owned::Mapped { addr, len },
                shared_bases: bases,
                direct,
                locks,
                single_copy: SingleCopy::none(),
                attach_table: None,
            },
            remote,
        );
        self.publish(w)
    }

    /// Per window rank, where puts and gets may load and store: this
    /// process's own memory, and the members of its host segment that the
    /// runtime reaches over shared memory (a pair that selected another
    /// method, e.g. `GW_METHODS=tcp`, keeps going through the target).
    fn direct_targets(&self, c: &Comm, base: usize, seg: Option<Vec<usize>>) -> Vec<usize> {
        let mut direct = seg.unwrap_or_else(|| vec![0; c.size as usize]);
        let ctx = self.ctx();
        for (r, d) in direct.iter_mut().enumerate() {
            if r as u32 != c.rank && ctx.would_select(c.world_of(r as u32)).ok() != Some("shm") {
                *d = 0;
            }
        }
        if crate::params::flag("MPI_RMA_DIRECT") {
            direct[c.rank as usize] = base;
        } else {
            direct.iter_mut().for_each(|d| *d = 0);
        }
        direct
    }

    /// Per window rank, whether puts and gets reach its memory by single
    /// copies ([`super::single_copy`]): the members the runtime reaches over
    /// shared memory (so on this host), unless `GW_MPI_RMA_DIRECT=0`. Every
    /// member gives the others its process id and `addr` (its memory's
    /// base, or its table of attached regions). Collective over `c`.
    ///
    /// Trust: a peer's process id is its word. A peer that shares memory
    /// rings with us runs on this host as a user who may already write into
    /// our processes (the kernel checks the same permission on every copy),
    /// and what we copy there is our own data of the call.
    fn single_copy_targets(&self, c: &Comm, addr: u64) -> Result<SingleCopy> {
        let mut mine = [0u8; 12];
        mine[..4].copy_from_slice(&crate::cma::my_pid().to_le_bytes());
        mine[4..].copy_from_slice(&addr.to_le_bytes());
        let mut all = vec![0u8; 12 * c.size as usize];
        self.allgather_bytes(c, &mine, &mut all)?;
        let on = crate::params::flag("MPI_RMA_DIRECT");
        let ctx = self.ctx();
        let mut pids = Vec::with_capacity(c.size as usize);
        let mut addrs = Vec::with_capacity(c.size as usize);
        for (r, rec) in all.chunks_exact(12).enumerate() {
            let pid = u32::from_le_bytes(rec[..4].try_into().unwrap());
            let shm = ctx.would_select(c.world_of(r as u32)).ok() == Some("shm");
            // Not to ourselves: a copy to our own memory is a load or store.
            let usable = on && shm && r as u32 != c.rank && pid != 0 && pid != crate::cma::my_pid();
            pids.push(if usable { pid } else { 0 });
            addrs.push(u64::from_le_bytes(rec[4..].try_into().unwrap()));
        }
        Ok(SingleCopy::new(pids, addrs))
    }

    /// Single copies for a window over the program's memory
    /// ([`Mpi::single_copy_targets`]) and, when some member is reached so,
    /// the host's lock segment: one accumulate lock word per member of the
    /// host and no memory, so that origins of the host apply accumulates
    /// by single copies under the same lock the target's handler takes
    /// (`single_copy::accumulate`). The segment is the window's to unmap;
    /// the lock words by window rank (for the handler's own one).
    /// Collective over `c`.
    fn single_copy_with_locks(
        &self,
        c: &Comm,
        addr: u64,
    ) -> Result<(SingleCopy, Owned, Vec<usize>)> {
        let sc = self.single_copy_targets(c, addr)?;
        // Every member decides alike whether to make segments (the same
        // parameter), as `host_segment` needs; one alone on its host makes none.
        let seg = self.host_segment(c, 0, crate::params::flag("MPI_RMA_DIRECT"), false)?;
        Ok(match seg {
            Some(HostSegment {
                addr, len, locks, ..
            }) => (
                sc.with_locks(locks.clone()),
                Owned::Mapped { addr, len },
                locks,
            ),
            None => (sc, Owned::None, Vec::new()),
        })
    }

    /// `MPI_Win_shared_query`: (size, unit, address) of `rank`'s segment
    /// (`MPI_PROC_NULL`: the first non-empty one). Windows of other flavors
    /// (MPI 4.1) share only this process's own memory with itself: another
    /// rank's is answered as size 0 and a NULL address.
    pub fn win_shared_query(&self, w: &Win, rank: i32) -> Result<(usize, usize, usize)> {
        let r = if rank == crate::PROC_NULL {
            (0..w.remote.len())
                .find(|&i| w.remote[i].size > 0)
                .unwrap_or(0)
        } else if rank >= 0 && (rank as u32) < w.comm.size {
            rank as usize
        } else {
            return Err(err(
                class::RANK,
                format!("rank {rank} is not in the window"),
            ));
        };
        let unit = w.remote[r].disp_unit as usize;
        match w.flavor {
            Flavor::Shared => Ok((w.remote[r].size as usize, unit, w.shared_bases[r])),
            Flavor::Dynamic => Ok((0, unit, 0)),
            // Memory of the host segment this process maps.
            _ if w.direct[r] != 0 => Ok((w.remote[r].size as usize, unit, w.direct[r])),
            _ if r == w.comm.rank as usize => Ok((w.size, unit, w.base)),
            _ => Ok((0, unit, 0)),
        }
    }

    /// `MPI_Win_free`: ends with a barrier, after every operation of this
    /// process completed; then the window is gone from the handler's table.
    pub fn win_free(&self, w: &Arc<Win>) -> Result<()> {
        {
            let e = w.epoch.lock().unwrap_or_else(|e| e.into_inner());
            if e.lock_all
                || e.locked.iter().any(|&l| l != 0)
                || e.started.is_some()
                || e.posted.is_some()
            {
                return Err(err(
                    class::RMA_SYNC,
                    "MPI_Win_free inside an epoch (unlock, complete or wait first)",
                ));
            }
        }
        // Only an erroneous program leaves any (its last epoch not closed).
        let issued = self.rma_issue_deferred(w, None, true);
        self.wait_answers(w, None);
        let barrier = self.barrier(&w.comm);
        issued?;
        barrier?;
        self.rma()
            .wins
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&w.id);
        let last = self
            .rma()
            .wins
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty();
        if last {
            self.rma().stop_progress_thread();
        } else {
            // The program may free the window's memory now: what the
            // runtime still holds of answers lent from it is copied first
            // (`stop_progress_thread` does it for the last window).
            self.rma().settle_lent_answers();
        }
        let _ = H_RMA;
        w.take_error()
    }
}
