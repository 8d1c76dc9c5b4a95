//! Small collectives of a communicator whose members all run on one host,
//! through one shared segment instead of messages (as Open MPI's `coll/sm`
//! and MPICH's release/gather collectives do).
//!
//! Why: between two ranks on one host a small collective by messages is a
//! message each way through the shm method's rings, with matching and a
//! request on both sides (0.26-0.42 µs on this machine, Open MPI 0.19-0.29).
//! Here each member writes its contribution once into its own buffer of the
//! segment and publishes it with one release store; the others read it
//! straight from there: a cache line or two between the cores, no matching,
//! no request, no system call.
//!
//! Eligible (every member decides alike from what all of them know): an
//! intracommunicator itself (not a nonblocking collective's shadow) of 2 to
//! [`MAX_MEMBERS`] members on one host, at most `GW_MPI_COLL_SM` bytes per
//! member and call (32 KiB; 0: never; Alltoall at most [`MAX_BYTES`]);
//! above a buffer's room, piece by piece (`bcast_gather.rs`, `reduce.rs`). The segment is made at the first eligible
//! call (the lowest rank creates it, see [`Mpi::shared_segment_setup`]);
//! where that fails on any member, the communicator keeps messages.
//!
//! Layout: per member a line with `done` (the last call whose data this
//! member has finished reading), then two buffers used by alternate calls,
//! each a header (`ready` = the call whose data it holds, and the data's
//! length) and the data. A member writes call `g`'s buffer only once every
//! other member's `done` is at least `g - 2` (nobody still reads the data of
//! the call that used that buffer last); readers wait until `ready` says
//! `g`. Reductions combine in rank order on every member alike, so the
//! result is the same everywhere and non-commutative operations keep MPI's
//! order. Data is copied in and out with raw copies: no Rust reference ever
//! points into memory another process can write.

mod bcast_gather;
mod ops;
mod reduce;

use crate::error::{class, err, Result};
use crate::{Comm, Mpi};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The most members a segment serves: beyond, every member reading every
/// other's buffer costs more than a tree of messages.
pub const MAX_MEMBERS: u32 = 16;
/// The largest Alltoall (bytes per member, all blocks) through the
/// segment: its blocks pass through stack buffers of this size.
pub const MAX_BYTES: usize = 4096;
/// The data bytes of one buffer: also the piece size of the calls larger
/// than the limit that go through the segment piece by piece (up to
/// [`PIPE_MAX`]).
const ROOM: usize = 8192;
/// The most `GW_MPI_COLL_SM` may say: the largest Bcast, Allgather,
/// Reduce or Allreduce (bytes per member) through the segment: up to the shm method's eager limit (32 KiB)
/// messages cost three copies, beyond it rendezvous moves the data with
/// one (a single copy between the processes), which pieces do not beat.
pub const PIPE_MAX: usize = 32768;
/// How long [`Mpi::sm_wait`] yields without a message delivered before it naps.
const YIELD_FOR: std::time::Duration = std::time::Duration::from_micros(100);
/// A yield that took this long ran another process's time slice.
const SLOW_YIELD: std::time::Duration = std::time::Duration::from_micros(50);
/// A buffer's header: `ready` and the length.
const HEAD: usize = 16;
const LINE: usize = 64;

/// `GW_MPI_COLL_SM`, read once (at most [`PIPE_MAX`]).
pub(crate) fn limit() -> usize {
    static LIMIT: AtomicU64 = AtomicU64::new(u64::MAX);
    match LIMIT.load(Ordering::Relaxed) {
        u64::MAX => {
            let v = crate::params::num("MPI_COLL_SM").min(PIPE_MAX as u64);
            LIMIT.store(v, Ordering::Relaxed);
            v as usize
        }
        v => v as usize,
    }
}

/// One communicator's mapped segment.
#[derive(Debug)]
pub(crate) struct SmSeg {
    addr: usize,
    len: usize,
    members: usize,
    /// Bytes of one buffer, header included (a multiple of [`LINE`]).
    block: usize,
    /// This process's count of calls that used the segment.
    gen: AtomicU64,
    /// The least `done` of the other members last seen (saves reading
    /// their lines on every call).
    others_done: AtomicU64,
}

// SAFETY: the mapping is process-wide memory; every access goes through
// atomics (headers) or raw copies (data), never through a Rust reference
// to the data.
unsafe impl Send for SmSeg {}
// SAFETY: as for Send.
unsafe impl Sync for SmSeg {}

impl Drop for SmSeg {
    fn drop(&mut self) {
        // SAFETY: mapped by `shared_segment_setup` with this length, unmapped once here.
        unsafe { libc::munmap(self.addr as *mut libc::c_void, self.len) };
    }
}

impl SmSeg {
    fn stride(&self) -> usize {
        LINE + 2 * self.block
    }

    fn atomic(&self, at: usize) -> &AtomicU64 {
        debug_assert!(at + 8 <= self.len && at.is_multiple_of(8));
        // SAFETY: `at` lies inside the mapping (every caller computes it
        // from a member index < `members` and the layout that sized the
        // mapping), 8-byte aligned (page-aligned mapping, offsets multiples
        // of 8), and the word is only ever accessed atomically, by every
        // process: an atomic's interior mutability allows the others' writes.
        unsafe { &*((self.addr + at) as *const AtomicU64) }
    }

    fn done(&self, m: usize) -> &AtomicU64 {
        self.atomic(m * self.stride())
    }

    fn buffer(&self, m: usize, gen: u64) -> usize {
        m * self.stride() + LINE + (gen & 1) as usize * self.block
    }

    fn ready(&self, m: usize, gen: u64) -> &AtomicU64 {
        self.atomic(self.buffer(m, gen))
    }

    fn length(&self, m: usize, gen: u64) -> &AtomicU64 {
        self.atomic(self.buffer(m, gen) + 8)
    }

    /// Address of the data of member `m`'s buffer for call `gen`.
    fn data(&self, m: usize, gen: u64) -> usize {
        self.addr + self.buffer(m, gen) + HEAD
    }

    /// The data bytes one buffer holds (at least `GW_MPI_COLL_SM`): a piece.
    fn room(&self) -> usize {
        self.block - HEAD
    }

    /// Ends a call: member `me` has read all it needed of call `gen`.
    fn end(&self, me: usize, gen: u64) {
        self.done(me).store(gen, Ordering::Release);
    }
}

impl Mpi {
    /// The communicator's segment if a Barrier or an Alltoall moving
    /// `bytes` per member (in one segment call: at most [`MAX_BYTES`]) may
    /// use it (made at the first such call; None on every member alike).
    /// Borrowed from the communicator: no reference count touched per call.
    pub(crate) fn sm_seg<'c>(&self, comm: &'c Comm, bytes: usize) -> Result<Option<&'c SmSeg>> {
        self.sm_seg_if(comm, limit() > 0 && bytes <= limit().min(MAX_BYTES))
    }

    /// The segment for a Bcast or Allgather of `bytes` per member (piece
    /// by piece above a buffer's room).
    pub(crate) fn sm_seg_pieces<'c>(
        &self,
        comm: &'c Comm,
        bytes: usize,
    ) -> Result<Option<&'c SmSeg>> {
        self.sm_seg_if(comm, limit() > 0 && bytes <= limit())
    }

    /// The segment for a Reduce or Allreduce of `src` (the same datatype
    /// and count on every member, as MPI requires), piece by piece above a
    /// buffer's room, of elements that fit in one.
    pub(crate) fn sm_seg_reduce<'c>(
        &self,
        comm: &'c Comm,
        src: &crate::request::Buf,
    ) -> Result<Option<&'c SmSeg>> {
        self.sm_seg_if(
            comm,
            limit() > 0 && src.bytes() <= limit() && src.dt.size <= ROOM,
        )
    }

    fn sm_seg_if<'c>(&self, comm: &'c Comm, fits: bool) -> Result<Option<&'c SmSeg>> {
        if !fits {
            return Ok(None);
        }
        if let Some(s) = comm.sm.get() {
            return Ok(s.as_deref());
        }
        let cap = limit();
        if cap == 0 || comm.nbc != 0 || comm.is_inter() {
            return Ok(None);
        }
        if comm.size < 2 || comm.size > MAX_MEMBERS {
            return Ok(None);
        }
        let made = self.sm_setup(comm)?;
        let _ = comm.sm.set(made);
        Ok(comm.sm.get().and_then(|s| s.as_deref()))
    }

    fn sm_setup(&self, comm: &Comm) -> Result<Option<Arc<SmSeg>>> {
        // One host: from the placements every rank published at start-up
        // (no messages), so every member answers alike.
        let colours = self.level_colours(comm)?;
        if colours.iter().any(|c| c != &colours[0]) {
            return Ok(None);
        }
        let members = comm.size as usize;
        let block = (HEAD + ROOM).next_multiple_of(LINE);
        let len = (members * (LINE + 2 * block)).next_multiple_of(4096);
        let all: Vec<u32> = (0..comm.size).collect();
        Ok(self.shared_segment_setup(comm, &all, len)?.map(|addr| {
            Arc::new(SmSeg {
                addr,
                len,
                members,
                block,
                gen: AtomicU64::new(0),
                others_done: AtomicU64::new(0),
            })
        }))
    }

    /// Waits until `a`, a word member `m` writes, reaches `want`, or the
    /// runtime declares `m` failed for good (then `MPI_ERR_PROC_ABORTED`,
    /// as a receive from it gets). In three phases:
    /// - a short spin (well under a microsecond): the other member is
    ///   usually a few hundred nanoseconds behind;
    /// - rounds of progress, with a `sched_yield` every 64th, until
    ///   [`YIELD_FOR`] has passed without a message delivered: what we wait
    ///   for may need progress here (a fence waits in a barrier while the
    ///   other side's one-sided requests need this process: a progress
    ///   round only every 16th yield made a fence 15 µs instead of 1; an
    ///   origin's requests through a whole lock epoch to a target waiting
    ///   in a barrier keep coming, and a nap between them made each wait
    ///   for a wake-up: 8-byte accumulate + flush 4 µs instead of 0.5), and
    ///   the member we wait for may need this core (more ranks than cores);
    ///   a spin of 4096 pauses here made a 4-rank Allreduce on 2 cores take
    ///   119 µs instead of 25 by messages;
    /// - naps growing from 10 µs to 1 ms with progress between them, at
    ///   once if a yield took long (another process ran its time slice: the
    ///   machine is oversubscribed, and yielding again would only spin).
    ///
    /// While windows exist the first two phases say in the windows' lock
    /// segments that this process polls (as the engine's waits do,
    /// `rma/polling.rs`): an origin then sends its one-sided requests for
    /// this progress to serve instead of waking the progress thread. The
    /// stamp goes first, before the spin: an origin leaving the last fence
    /// finds it fresh only if it is written before the origin's next fence
    /// sends its puts (stamped after the spin, a fence's put took 2.5 µs
    /// instead of 0.5).
    ///
    /// Not the engine's own wait: past its spin it sleeps in `poll` on the
    /// methods' descriptors for up to 1-20 ms, and a member's store into
    /// the segment rings no descriptor.
    fn sm_wait(&self, comm: &Comm, a: &AtomicU64, want: u64, m: usize) -> Result<()> {
        use crate::rma::polling::{now, REFRESH_TICKS, STAMPS};
        use gridwire_core::context::spin_guard;
        let arrived = || a.load(Ordering::Acquire) >= want;
        if arrived() {
            return Ok(());
        }
        let stamping = STAMPS.any();
        let mut stamped = 0;
        if stamping {
            stamped = now();
            STAMPS.stamp(stamped);
        }
        let spun = 'spin: {
            // Not while windows exist: 64 pauses take microseconds, which
            // a one-sided request waiting for this progress (a fence's put)
            // would wait on top (a fence's put took 2.5 µs instead of 0.5).
            for _ in 0..if stamping { 0 } else { 64 } {
                if arrived() {
                    break 'spin true;
                }
                std::hint::spin_loop();
            }
            // With a core each, rounds without yields for the engine's
            // spin of idleness (as its waits poll; a yield every 64th
            // round made a put + flush to a target in a barrier 2.0 µs
            // instead of 0.5); with more ranks than cores, a yield every
            // 64th round for [`YIELD_FOR`] of idleness.
            // Spins held (a spin was descheduled lately: the core is
            // shared, see `gridwire_core::context::spin_guard`): yields.
            let budget = self.engine.spin_budget();
            let (mut yielding, mut idle_for) = if budget.is_zero() || spin_guard::held() {
                (true, YIELD_FOR)
            } else {
                (false, budget)
            };
            let mut read: Option<std::time::Instant> = None;
            let mut start = std::time::Instant::now();
            let mut rounds = 0u32;
            let mut delivered = false;
            loop {
                if arrived() {
                    break 'spin true;
                }
                delivered |= self.engine.progress_round() > 0;
                rounds = rounds.wrapping_add(1);
                if !rounds.is_multiple_of(64) {
                    continue;
                }
                if stamping {
                    // Only once the last is old: each store takes the line
                    // from the origins that read it on every operation.
                    let t = now();
                    if t.wrapping_sub(stamped) >= REFRESH_TICKS {
                        STAMPS.stamp(t);
                        stamped = t;
                    }
                }
                let before = std::time::Instant::now();
                let mut after = before;
                if yielding {
                    std::thread::yield_now();
                    after = std::time::Instant::now();
                } else if spin_guard::descheduled(read, before) {
                    yielding = true;
                    idle_for = YIELD_FOR;
                }
                read = Some(after);
                if delivered {
                    // Traffic for this process: the idleness counts from here.
                    start = after;
                    delivered = false;
                    read = None;
                }
                if after - before >= SLOW_YIELD || after - start >= idle_for {
                    break 'spin false;
                }
            }
        };
        if stamping {
            STAMPS.stamp(0);
        }
        if spun {
            return Ok(());
        }
        self.sm_nap(comm, &arrived, m)
    }

    /// The last phase of [`Mpi::sm_wait`]: naps with progress between them.
    fn sm_nap(&self, comm: &Comm, arrived: &impl Fn() -> bool, m: usize) -> Result<()> {
        let mut failed = false;
        self.engine.wait_beside_helpers(|| {
            if arrived() {
                return true;
            }
            failed = self.engine.member_failed(&comm.group, m);
            failed
        });
        if failed {
            return Err(err(class::PROC_ABORTED, crate::engine::failure_message()));
        }
        Ok(())
    }

    /// Starts a call on `seg`: its number, once this member may write its
    /// buffer for it (every other member done with the call two before).
    fn sm_begin(&self, comm: &Comm, seg: &SmSeg, me: usize) -> Result<u64> {
        let gen = seg.gen.load(Ordering::Relaxed) + 1;
        seg.gen.store(gen, Ordering::Relaxed);
        if gen >= 3 && seg.others_done.load(Ordering::Relaxed) < gen - 2 {
            let mut least = u64::MAX;
            for m in (0..seg.members).filter(|&m| m != me) {
                self.sm_wait(comm, seg.done(m), gen - 2, m)?;
                least = least.min(seg.done(m).load(Ordering::Acquire));
            }
            seg.others_done.store(least, Ordering::Relaxed);
        }
        Ok(gen)
    }
}

/// Packed copies of up to this many bytes live on the stack.
const STACK: usize = 128;

/// Bytes on the stack when few, else on the heap (never zeroed twice).
pub(super) enum Room {
    Stack([u8; STACK], usize),
    Heap(Vec<u8>),
}

impl Room {
    pub(super) fn new(len: usize) -> Room {
        if len == 0 {
            Room::Heap(Vec::new())
        } else if len <= STACK {
            Room::Stack([0u8; STACK], len)
        } else {
            Room::Heap(vec![0u8; len])
        }
    }

    pub(super) fn bytes(&mut self) -> &mut [u8] {
        match self {
            Room::Stack(b, n) => &mut b[..*n],
            Room::Heap(v) => v,
        }
    }
}

/// Copies `data` into member `me`'s buffer of call `gen` and publishes it.
fn publish(seg: &SmSeg, me: usize, gen: u64, data: &[u8]) {
    // SAFETY: a live slice of our own memory.
    unsafe { publish_raw(seg, me, gen, data.as_ptr(), data.len()) }
}

/// Publishes `len` bytes at `src` as member `me`'s data of call `gen`.
///
/// # Safety
/// `src` is readable for `len` bytes and lies outside the segment.
unsafe fn publish_raw(seg: &SmSeg, me: usize, gen: u64, src: *const u8, len: usize) {
    assert!(len <= seg.room(), "checked by sm_seg");
    // SAFETY: the buffer lies inside the mapping and holds `room()`
    // bytes (checked above); only this member writes it, and nobody reads
    // it for this call before the release store of `ready` below, nor for
    // the call two before any more (`sm_begin` waited for their `done`).
    // `src` is the caller's (contract).
    unsafe { std::ptr::copy_nonoverlapping(src, seg.data(me, gen) as *mut u8, len) };
    seg.length(me, gen).store(len as u64, Ordering::Relaxed);
    seg.ready(me, gen).store(gen, Ordering::Release);
}

/// Copies up to `cap` bytes of member `m`'s data of call `gen` (published)
/// to `dst`: its length if it fits, else None (nothing copied).
///
/// # Safety
/// `dst` is writable for `cap` bytes, lies outside the segment, and no Rust
/// reference to it is alive.
unsafe fn fetch_raw(seg: &SmSeg, m: usize, gen: u64, dst: *mut u8, cap: usize) -> Option<usize> {
    let n = seg.length(m, gen).load(Ordering::Relaxed) as usize;
    if n > cap || n > seg.room() {
        return None;
    }
    // SAFETY: `n` bytes of member m's buffer, inside the mapping (checked
    // against its room: the length word is the peer's and not
    // trusted); the writer does not write them again before this member's
    // `done` says this call (the copy may race only with a buggy or
    // hostile peer, and then copies garbage bytes into our own buffer,
    // nothing worse). `dst` is the caller's (contract), `n <= cap`.
    unsafe { std::ptr::copy_nonoverlapping(seg.data(m, gen) as *const u8, dst, n) };
    Some(n)
}

/// Copies member `m`'s data of call `gen` (published: the caller waited for
/// its `ready`) into `out`; its length if it fits, else None.
fn fetch(seg: &SmSeg, m: usize, gen: u64, out: &mut [u8]) -> Option<usize> {
    // SAFETY: a live slice of our own memory, borrowed mutably here only.
    unsafe { fetch_raw(seg, m, gen, out.as_mut_ptr(), out.len()) }
}
