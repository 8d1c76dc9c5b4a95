//! Puts and gets to windows over a peer's own memory on this host
//! (`MPI_Win_create`, and the attached regions of dynamic windows): one
//! `process_vm_writev` or `process_vm_readv` by the origin, straight into
//! or out of the target's memory, without a request the target applies.
//!
//! Such memory is the program's, so it cannot live in a segment every
//! member maps as `MPI_Win_allocate`'s does ([`super::direct`]); the kernel
//! copies it instead (cross-memory attach, as the single-copy rendezvous
//! of point-to-point messages). Why this is correct is as for loads and
//! stores: the copy is done by the synchronization that completes it
//! (most are deferred until then: [`super::batch`]), before that
//! synchronization's own message to the target, and locks are still
//! requests to the target.
//!
//! Accumulates go the same way under a lock word per member in a small
//! segment of the host (the window's lock segment, made at creation, which
//! the target's handler also holds while it applies a request): see
//! [`accumulate`]. What stays a request: derived target datatypes, peers reached by
//! another method than shared memory, and a peer whose copy the kernel
//! refused once (Yama `ptrace_scope`, seccomp: the pair falls back for good).
//!
//! Dynamic windows: the origin must only write inside regions attached at
//! the target, which it cannot see. So every member keeps its attached
//! regions in a small table ([`AttachTable`]) whose address it gave the
//! others at creation, and counts its changes in a generation word beside
//! its lock word in the window's lock segment ([`GEN_OFFSET`], odd while
//! the table is rewritten). An origin reads a target's table (one
//! `process_vm_readv`) only when that generation differs from the one it
//! read the table at: one load per operation, where it used to read the
//! table again at the first operation of every epoch (a system call per
//! fence). Without a lock segment it still does that, and reads once more
//! when an address is not in what it read. An access outside every region
//! goes to the target as a request, which refuses it with
//! `MPI_ERR_RMA_RANGE` as before. A program that detaches a region while
//! another process still accesses it inside an epoch is erroneous (MPI
//! 4.1, 12.2.4); such an access may then land in the detached memory.

use super::batch::Batch;
use super::ops::{Kind, Origin, Target};
use super::window::{Flavor, Win};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;

/// Regions a dynamic window's table holds; with more attached, origins
/// send every operation to the target.
pub(crate) const TABLE_REGIONS: usize = 32;

/// Words of an [`AttachTable`]: the count, then (address, length) pairs.
const TABLE_WORDS: usize = 1 + 2 * TABLE_REGIONS;

/// Bytes from a member's accumulate lock word (in the window's lock
/// segment) to the generation of its [`AttachTable`]: bumped to odd before
/// the owner rewrites the table and to even after, so an origin knows
/// without a system call whether the table it read still holds.
/// On the line after the lock word's, beside the polling stamp (see
/// [`super::segment::LOCK_STRIDE`]).
pub(crate) const GEN_OFFSET: usize = super::polling::STAMP_OFFSET + 8;

/// The generation word of the member whose lock word is at `lock`.
///
/// # Safety
/// `lock` is a lock word of a window's lock segment, mapped for `'a`.
unsafe fn generation<'a>(lock: usize) -> &'a AtomicU64 {
    // SAFETY: the caller's contract; `lock` is 64-byte aligned and the
    // member's `LOCK_STRIDE` bytes from it are mapped, so the word is
    // 8-aligned and inside them. Shared with other processes: every
    // access is atomic.
    unsafe { AtomicU64::from_ptr((lock + GEN_OFFSET) as *mut u64) }
}

/// Rewrites `table` with `regions` under the generation word of the
/// owner's lock word `own_lock` (0 = no lock segment: no generation).
pub(crate) fn publish_regions(table: &AttachTable, own_lock: usize, regions: &[(usize, usize)]) {
    if own_lock == 0 {
        return table.publish(regions);
    }
    // SAFETY: the window's own lock word, mapped while the window exists.
    let gen = unsafe { generation(own_lock) };
    // A seqlock's writer (the owner alone writes its generation, under
    // the window's `attached` mutex): odd, the table, then even.
    let g = gen.load(Ordering::Relaxed);
    gen.store(g | 1, Ordering::Relaxed);
    std::sync::atomic::fence(Ordering::Release);
    table.publish(regions);
    gen.store((g | 1).wrapping_add(1), Ordering::Release);
}

/// [`AttachTable`]'s count when the regions do not fit.
const TABLE_OVERFLOW: u64 = u64::MAX;

/// A dynamic window's attached regions, where peers read them. Written by
/// the owner under its `attached` mutex, read by peers through the kernel.
pub(crate) struct AttachTable {
    words: [AtomicU64; TABLE_WORDS],
}

impl AttachTable {
    pub(crate) fn new() -> Box<AttachTable> {
        Box::new(AttachTable {
            words: std::array::from_fn(|_| AtomicU64::new(0)),
        })
    }

    /// Publishes `regions` (the window's attached list after a change).
    pub(crate) fn publish(&self, regions: &[(usize, usize)]) {
        if regions.len() > TABLE_REGIONS {
            self.words[0].store(TABLE_OVERFLOW, Ordering::Release);
            return;
        }
        for (i, &(b, n)) in regions.iter().enumerate() {
            self.words[1 + 2 * i].store(b as u64, Ordering::Relaxed);
            self.words[2 + 2 * i].store(n as u64, Ordering::Relaxed);
        }
        self.words[0].store(regions.len() as u64, Ordering::Release);
    }

    pub(crate) fn addr(&self) -> u64 {
        self.words.as_ptr() as u64
    }
}

/// Regions of one target as last read, and the epoch (no lock segment) or
/// the generation of its table (see [`GEN_OFFSET`]) they were read at.
#[derive(Default)]
struct Seen {
    serial: u64,
    read: bool,
    regions: Vec<(u64, u64)>,
}

/// Per window rank: how this process reaches its memory by single copies.
pub(crate) struct SingleCopy {
    /// Process id (0 = not by single copies).
    pub(super) pid: Vec<u32>,
    /// Create windows: the base of its memory there. Dynamic: the address
    /// of its [`AttachTable`] there.
    addr: Vec<u64>,
    /// Set once the kernel refused a copy to it: requests from then on.
    refused: Box<[AtomicBool]>,
    /// Dynamic windows: its regions as last read.
    seen: Box<[Mutex<Seen>]>,
    /// Its accumulate lock word in this process's mapping of the host's
    /// lock segment (0 = accumulates to it are requests).
    locks: Vec<usize>,
    /// Puts and gets to it deferred to the next synchronization
    /// ([`super::batch`]), and whether any is (read without the lock).
    pub(super) batches: Box<[Mutex<Batch>]>,
    pub(super) held: Box<[AtomicBool]>,
    /// Puts and gets to it since the last synchronization, and whether
    /// the next ones are deferred: only when the last synchronization
    /// completed more than one (a lone put and flush gain nothing from a
    /// batch and would pay its bookkeeping).
    pub(super) calls: Box<[AtomicU32]>,
    pub(super) batching: Box<[AtomicBool]>,
    /// Accumulates to a member polling inside MPI go as requests
    /// (`GW_MPI_RMA_ACC_CHOICE`, [`super::polling`]).
    pub(super) choose_by_polling: bool,
    /// Puts and gets wait for the next synchronization (`GW_MPI_RMA_DEFER`).
    pub(super) defer: bool,
    /// Puts and gets up to this many bytes to a member polling inside MPI
    /// go as requests (`GW_MPI_RMA_PUT_CHOICE`, 0 = never).
    request_max: usize,
}

impl SingleCopy {
    pub(crate) fn none() -> SingleCopy {
        SingleCopy::new(Vec::new(), Vec::new())
    }

    pub(crate) fn new(pid: Vec<u32>, addr: Vec<u64>) -> SingleCopy {
        let n = pid.len();
        SingleCopy {
            pid,
            addr,
            refused: (0..n).map(|_| AtomicBool::new(false)).collect(),
            seen: (0..n).map(|_| Mutex::new(Seen::default())).collect(),
            locks: Vec::new(),
            batches: (0..n).map(|_| Mutex::new(Batch::default())).collect(),
            held: (0..n).map(|_| AtomicBool::new(false)).collect(),
            calls: (0..n).map(|_| AtomicU32::new(0)).collect(),
            batching: (0..n).map(|_| AtomicBool::new(true)).collect(),
            choose_by_polling: n > 0 && crate::params::flag("MPI_RMA_ACC_CHOICE"),
            defer: n > 0 && crate::params::flag("MPI_RMA_DEFER"),
            request_max: if n > 0 {
                crate::params::num("MPI_RMA_PUT_CHOICE") as usize
            } else {
                0
            },
        }
    }

    /// Whether puts and gets to some member may be deferred
    /// ([`super::batch`]): false for windows without single copies.
    #[inline]
    pub(crate) fn defers(&self) -> bool {
        self.defer
    }

    /// Whether a synchronization to window rank `r` has work here: puts or
    /// gets deferred to it, or calls to it since the last synchronization
    /// (which decides whether the next ones are deferred). The C layer's
    /// fast flush must then take the general path (`Win::fast_flush`).
    #[inline]
    pub(crate) fn sync_work(&self, r: usize) -> bool {
        self.defer
            && (self.held.get(r).is_some_and(|h| h.load(Ordering::Acquire))
                || self
                    .calls
                    .get(r)
                    .is_some_and(|c| c.load(Ordering::Relaxed) != 0))
    }

    /// Whether origins choose by the members' polling stamps
    /// ([`super::polling`]): then the members must write them.
    pub(crate) fn wants_stamps(&self) -> bool {
        self.choose_by_polling || self.request_max > 0
    }

    /// [`SingleCopy::sync_work`] for any rank.
    pub(crate) fn sync_work_any(&self) -> bool {
        self.defer && (0..self.held.len()).any(|r| self.sync_work(r))
    }

    /// Lets accumulates to the members reached by single copies go by
    /// single copies too, under their lock words `locks` (by window rank,
    /// 0 = none).
    pub(crate) fn with_locks(mut self, locks: Vec<usize>) -> SingleCopy {
        self.locks = locks;
        self
    }
}

/// Where `[addr, addr + len)` of dynamic window rank `rank` may be copied:
/// from its table as last read, read again when its generation changed
/// (or, without a lock segment, once per epoch and once on a miss).
fn dynamic_ok(w: &Win, rank: usize, pid: u32, addr: u64, len: u64) -> Option<bool> {
    let sc = &w.single_copy;
    let lock = sc.locks.get(rank).copied().unwrap_or(0);
    let mut seen = sc.seen[rank].lock().unwrap_or_else(|e| e.into_inner());
    let inside = |s: &Seen| {
        let end = addr.checked_add(len)?;
        // `b` and `n` are the target's word: no sum of them may overflow.
        Some(
            s.regions
                .iter()
                .any(|&(b, n)| addr >= b && end <= b.saturating_add(n)),
        )
    };
    if lock == 0 {
        let serial = w.access.serial();
        if seen.read && seen.serial == serial && inside(&seen)? {
            return Some(true);
        }
        read_table(sc, rank, pid, &mut seen)?;
        seen.serial = serial;
        seen.read = true;
        return inside(&seen);
    }
    // SAFETY: a lock word of this window's lock segment, mapped while it exists.
    let gen = unsafe { generation(lock) };
    let before = gen.load(Ordering::Acquire);
    if seen.read && seen.serial == before {
        // The table is as read: a miss is a miss (the target refuses it).
        return inside(&seen);
    }
    if before & 1 == 1 {
        // Being rewritten right now: this one goes to the target.
        return Some(false);
    }
    read_table(sc, rank, pid, &mut seen)?;
    std::sync::atomic::fence(Ordering::Acquire);
    let after = gen.load(Ordering::Relaxed);
    // A table rewritten while it was read may be torn: not kept.
    seen.read = after == before;
    seen.serial = before;
    if !seen.read {
        return Some(false);
    }
    inside(&seen)
}

/// Reads the [`AttachTable`] of window rank `rank` (one system call) into
/// `seen`'s regions (none when it overflowed). None: the kernel refused.
fn read_table(sc: &SingleCopy, rank: usize, pid: u32, seen: &mut Seen) -> Option<()> {
    let mut words = [0u64; TABLE_WORDS];
    // SAFETY: `words` is ours and writable for its whole size; the kernel
    // checks the remote range in the target.
    let r = unsafe {
        crate::cma::read(
            pid,
            sc.addr[rank],
            words.as_mut_ptr() as usize,
            std::mem::size_of_val(&words),
        )
    };
    if r.is_err() {
        return None;
    }
    let count = words[0];
    seen.regions.clear();
    if count == TABLE_OVERFLOW || count > TABLE_REGIONS as u64 {
        // The target's word: anything else than a count sends requests.
        return Some(());
    }
    for i in 0..count as usize {
        seen.regions.push((words[1 + 2 * i], words[2 + 2 * i]));
    }
    Some(())
}

/// The process id and remote address of a contiguous access `t` of `len`
/// bytes by single copy, if window rank `t.rank` is reached so.
pub(super) fn remote_of(w: &Win, t: &Target<'_>, len: usize) -> Option<(u32, u64)> {
    let rank = t.rank as usize;
    let sc = &w.single_copy;
    let pid = match sc.pid.get(rank) {
        Some(&p) if p != 0 && !sc.refused[rank].load(Ordering::Relaxed) => p,
        _ => return None,
    };
    if !t.dt.contig {
        return None;
    }
    let remote = match w.flavor {
        Flavor::Dynamic => {
            let at = (t.disp as u64).wrapping_add_signed(t.dt.true_lb as i64);
            if dynamic_ok(w, rank, pid, at, len as u64) != Some(true) {
                return None;
            }
            at
        }
        _ => {
            let unit = w.remote[rank].disp_unit;
            // In range of the target's size (`check_range`); the base is the
            // target's word, so the sum wraps rather than overflows (a
            // wrong address is the kernel's to refuse).
            sc.addr[rank]
                .wrapping_add(t.disp as u64 * unit)
                .wrapping_add_signed(t.dt.true_lb as i64)
        }
    };
    Some((pid, remote))
}

/// Notes a copy the kernel refused for good (permissions, no such call or
/// process): that member gets requests from now on.
pub(super) fn note_refusal(w: &Win, rank: usize, e: &std::io::Error) {
    if matches!(
        e.raw_os_error(),
        Some(libc::EPERM | libc::ENOSYS | libc::ESRCH)
    ) {
        w.single_copy.refused[rank].store(true, Ordering::Relaxed);
    }
}

/// Does accumulate, get-accumulate, fetch-and-op or compare-and-swap `kind`
/// by single copies if window rank `t.rank` is reached so and has a lock
/// word; false = send it to the target. Under the target's accumulate lock
/// (which its handler also holds while it applies a request, from another
/// host say): one `process_vm_readv` of the target's elements, the
/// operation applied here, one `process_vm_writev` of the result (none for
/// `MPI_NO_OP` or a compare that failed). Atomic with respect to every
/// other accumulate to that member, as the standard asks (per element,
/// same operation; here the whole access). Checked by the caller as for
/// [`put_or_get`].
pub(super) fn accumulate(w: &Win, kind: Kind, o: &Origin<'_>, t: &Target<'_>) -> bool {
    use super::direct::{apply, operands, AccLock, SMALL};
    let rank = t.rank as usize;
    let lock = w.single_copy.locks.get(rank).copied().unwrap_or(0);
    if lock == 0 {
        return false;
    }
    // Accumulates from one origin to one target are applied in order
    // (`accumulate_ordering`'s default): one still travelling as a request
    // (a derived type, say) must not be overtaken, so while any is
    // unanswered this one is a request too, on the same ordered link.
    if w.outstanding[rank].load(Ordering::Acquire) != 0 {
        return false;
    }
    // A target polling inside MPI applies a request sooner than two
    // system calls take.
    // SAFETY: a lock word of this window's lock segment, mapped while it exists.
    if w.single_copy.choose_by_polling && unsafe { super::polling::polls(lock) } {
        return false;
    }
    let len = t.count * t.dt.size;
    let Some((pid, remote)) = remote_of(w, t, len) else {
        return false;
    };
    let mut store = (Vec::new(), Vec::new());
    let (data, compare) = operands(kind, o, &mut store);
    let (mut small, mut small_old) = ([0u8; SMALL], [0u8; SMALL]);
    let (mut large, mut large_old) = (Vec::new(), Vec::new());
    let (cur, old): (&mut [u8], &mut [u8]) = if len <= SMALL {
        (&mut small[..len], &mut small_old[..len])
    } else {
        large.resize(len, 0);
        large_old.resize(len, 0);
        (large.as_mut_slice(), large_old.as_mut_slice())
    };
    // SAFETY: a lock word of the host's lock segment of this window, mapped
    // while the window exists.
    let _held = unsafe { AccLock::take(lock) };
    // SAFETY: `cur` is ours, `len` bytes; the kernel checks the remote range.
    if let Err(e) = unsafe { crate::cma::read(pid, remote, cur.as_mut_ptr() as usize, len) } {
        note_refusal(w, rank, &e);
        return false;
    }
    old.copy_from_slice(cur);
    if apply(kind, o, t, data, compare, cur) {
        // SAFETY: as above, for our `cur`.
        if let Err(e) = unsafe { crate::cma::write(pid, remote, cur.as_ptr() as usize, len) } {
            // Put back what a partial write changed (best effort), so
            // that the request the target applies instead applies once.
            // SAFETY: as above.
            let _ = unsafe { crate::cma::write(pid, remote, old.as_ptr() as usize, len) };
            note_refusal(w, rank, &e);
            return false;
        }
    }
    true
}

/// Whether a contiguous put or get of `len` bytes to window rank `rank`
/// goes as a request although the member may be reached by single copies
/// (see [`put_or_get`]): one is unanswered, or the member polls.
fn prefers_request(w: &Win, rank: usize, len: usize) -> bool {
    if w.outstanding[rank].load(Ordering::Acquire) != 0 {
        return true;
    }
    let sc = &w.single_copy;
    match sc.locks.get(rank) {
        Some(&lock) if lock != 0 && len <= sc.request_max => {
            // SAFETY: a lock word of this window's lock segment, mapped while it exists.
            w.access.fence_only(rank as u32) || unsafe { super::polling::polls(lock) }
        }
        _ => false,
    }
}

/// Whether [`put_or_get`] sends a contiguous put or get of `len` bytes to
/// window rank `rank` as a request without trying a copy: it prefers one,
/// or the member is not reached by single copies at all. False: it may
/// copy (the caller takes the general path).
pub(super) fn goes_as_request(w: &Win, rank: usize, len: usize) -> bool {
    !reached(w, rank) || prefers_request(w, rank, len)
}

/// Whether window rank `rank` is reached by single copies (a member of
/// this host that the kernel has not refused): only then are puts and
/// gets to it ever deferred ([`super::batch`]).
#[inline]
pub(super) fn reached(w: &Win, rank: usize) -> bool {
    let sc = &w.single_copy;
    matches!(sc.pid.get(rank), Some(&p) if p != 0) && !sc.refused[rank].load(Ordering::Relaxed)
}

/// Whether [`accumulate`] sends an accumulate with a contiguous target
/// type to window rank `rank` as a request without trying single copies
/// (no lock word, one unanswered, the member polls, or it is not reached
/// by single copies). False: it may copy (the caller takes the general path).
pub(super) fn accumulate_goes_as_request(w: &Win, rank: usize) -> bool {
    let sc = &w.single_copy;
    let lock = sc.locks.get(rank).copied().unwrap_or(0);
    let reached =
        matches!(sc.pid.get(rank), Some(&p) if p != 0) && !sc.refused[rank].load(Ordering::Relaxed);
    lock == 0
        || !reached
        || w.outstanding[rank].load(Ordering::Acquire) != 0
        // SAFETY: a lock word of this window's lock segment, mapped while it exists.
        || (sc.choose_by_polling && unsafe { super::polling::polls(lock) })
}

/// The lean path's single copy (`Mpi::fast_request_put_get`): put (`put`,
/// from `local`) or get (into `local`) of `n` contiguous bytes to
/// displacement `disp` of window rank `rank` of a contiguous predefined
/// type `dt`, by one `process_vm_writev` or `process_vm_readv` — what
/// [`put_or_get`] does for that case once it chose a copy, without building
/// the general path's buffers and checks around it (about 1000
/// instructions of a 1300-instruction call on the general path). False:
/// not done (no copy to this member, the kernel refused), the caller runs
/// the general path, which judges it again. The caller checked the epoch,
/// the range (created windows), that nothing is deferred to the member
/// nor would be, and that it is not sent as a request ([`goes_as_request`]).
///
/// # Safety
/// `local .. local + n` is the call's origin (put, readable) or result
/// (get, writable) buffer, as MPI requires.
pub(super) unsafe fn fast_put_or_get(
    w: &Win,
    rank: u32,
    put: bool,
    disp: i64,
    dt: &super::super::datatype::Datatype,
    local: usize,
    n: usize,
) -> bool {
    let t = Target {
        rank: rank as i32,
        disp,
        count: n / dt.size.max(1),
        dt,
    };
    let Some((pid, remote)) = remote_of(w, &t, n) else {
        return false;
    };
    let at = local.wrapping_add_signed(dt.true_lb);
    let res = if put {
        // SAFETY: the caller's contract (the origin buffer, `n` bytes at its
        // true lower bound); the kernel checks the target's range.
        unsafe { crate::cma::write(pid, remote, at, n) }
    } else {
        // SAFETY: the caller's contract (the result buffer, writable).
        unsafe { crate::cma::read(pid, remote, at, n) }
    };
    match res {
        Ok(()) => true,
        Err(e) => {
            // As `put_or_get`: the general path then sends a request (a put
            // the kernel wrote part of is sent whole and overwrites it).
            note_refusal(w, rank as usize, &e);
            false
        }
    }
}

/// Does put or get `kind` by one single copy if window rank `t.rank` is
/// reached so; false = send it to the target. The caller checked the epoch,
/// buffers, signatures and (for windows other than dynamic ones) the range.
pub(super) fn put_or_get(w: &Win, kind: Kind, o: &Origin<'_>, t: &Target<'_>) -> bool {
    let rank = t.rank as usize;
    let len = t.count * t.dt.size;
    // A target inside MPI applies a small request in less time than the
    // system call takes (a shared-memory round trip against
    // `process_vm_writev`'s page walk and pinning; `GW_MPI_RMA_PUT_CHOICE`).
    // In a fence epoch it will be: the epoch ends only when the target
    // fences too, and the origin's fence waits for it anyway (not so a
    // start epoch: `MPI_Win_complete` need not wait for the target). Else
    // only while it polls (its stamp, one load). Both paths are correct
    // at any time.
    // While a request to it is unanswered (an earlier choice, a derived
    // type), this one follows it on the same ordered link: the target then
    // sees this origin's operations in program order, as before.
    if prefers_request(w, rank, len) {
        return false;
    }
    let Some((pid, remote)) = remote_of(w, t, len) else {
        return false;
    };
    let res = match kind {
        Kind::Put => {
            let data = o.data.expect("a put has data");
            match data.contig_addr() {
                // SAFETY: the user's origin buffer (MPI's contract), `len`
                // bytes (the signatures matched); the kernel checks the target.
                Some(src) => unsafe { crate::cma::write(pid, remote, src, len) },
                None => {
                    let packed = data.pack();
                    // SAFETY: our packed copy of `len` bytes.
                    unsafe { crate::cma::write(pid, remote, packed.as_ptr() as usize, len) }
                }
            }
        }
        _ => {
            let result = o.result.as_ref().expect("a get has a result buffer");
            match result.contig_addr() {
                // SAFETY: the user's result buffer, writable and at least
                // `len` bytes (checked by the caller).
                Some(dst) => unsafe { crate::cma::read(pid, remote, dst, len) },
                None => {
                    let mut v = vec![0u8; len];
                    // SAFETY: our buffer of `len` bytes.
                    let r = unsafe { crate::cma::read(pid, remote, v.as_mut_ptr() as usize, len) };
                    if r.is_ok() {
                        result.unpack(&v);
                    }
                    r
                }
            }
        }
    };
    match res {
        Ok(()) => true,
        Err(e) => {
            // Refused (permissions) or failed part way: the target applies
            // it, and every later one, itself. A put that failed part way is
            // sent whole: what the kernel wrote is overwritten.
            note_refusal(w, rank, &e);
            false
        }
    }
}
