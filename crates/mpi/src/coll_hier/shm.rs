//! The host level of a reduction in a shared segment: the members of a host
//! write their contributions into their slot of one POSIX shared-memory
//! segment, and the host's representative combines them straight from
//! there — no copy into and out of a message.
//!
//! One segment per communicator and host (`Plan::host_seg`), made at the
//! first eligible reduction: the host's lowest rank creates it and sends its
//! name to the others, which map it and answer; the verdict (all mapped, or
//! not: then messages, for good) goes back to everyone, so every member
//! decides alike. Eligible: a blocking call on the communicator itself (a
//! nonblocking one runs on a shadow, possibly beside another: messages),
//! at most `GW_MPI_COLL_SHM` bytes, a commutative op.
//!
//! Per call, each slot's header says where it is: `ready` = the call
//! (generation) whose data it holds, `consumed` = the last call whose data
//! its reader has combined. A member waits until its slot's previous data
//! was consumed, writes, publishes `ready`, and sends its reader an empty
//! message (the wake-up: nobody spins for long); the reader, once woken,
//! checks `ready` and combines. Every member counts calls alike, since each
//! blocking reduction on the communicator uses the segment on all of them.

use super::Plan;
use crate::error::{class, err, Result};
use crate::request::DtRef;
use crate::{Comm, Mpi, Op};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Bytes of a member's slot (`GW_MPI_COLL_SHM`, 64 KiB; 0: no segment):
/// larger reductions use messages (a copy saved matters most for small and
/// mid sizes). Read once.
fn slot() -> usize {
    static SLOT: AtomicU64 = AtomicU64::new(u64::MAX);
    match SLOT.load(Ordering::Relaxed) {
        u64::MAX => {
            let v = crate::params::num("MPI_COLL_SHM").min(1 << 30);
            SLOT.store(v, Ordering::Relaxed);
            v as usize
        }
        v => v as usize,
    }
}
/// A slot's header: `ready` and `consumed`, on a cache line of their own.
const HEAD: usize = 64;

/// One host's mapped segment.
#[derive(Debug)]
pub(crate) struct HostSeg {
    addr: usize,
    len: usize,
    /// This process's count of calls that used the segment.
    gen: AtomicU64,
}

// SAFETY: the mapping is process-wide memory; every access goes through
// atomics (headers) or the protocol above (slots), never through `&mut`.
unsafe impl Send for HostSeg {}
// SAFETY: as for Send.
unsafe impl Sync for HostSeg {}

impl Drop for HostSeg {
    fn drop(&mut self) {
        // SAFETY: mapped by `map` with this length, unmapped once here.
        unsafe { libc::munmap(self.addr as *mut libc::c_void, self.len) };
    }
}

impl HostSeg {
    fn slot_base(&self, i: usize) -> usize {
        self.addr + i * (HEAD + slot().next_multiple_of(HEAD))
    }

    fn ready(&self, i: usize) -> &AtomicU64 {
        // SAFETY: slot i's header lies inside the mapping (the members'
        // count sized it), 64-byte aligned (page-aligned mapping, slots a
        // multiple of 64), and is only ever accessed atomically.
        unsafe { &*(self.slot_base(i) as *const AtomicU64) }
    }

    fn consumed(&self, i: usize) -> &AtomicU64 {
        // SAFETY: as `ready`, 8 bytes further.
        unsafe { &*((self.slot_base(i) + 8) as *const AtomicU64) }
    }

    fn data(&self, i: usize) -> usize {
        self.slot_base(i) + HEAD
    }
}

/// Waits (yielding, then sleeping) until `a` reaches `want`. The naps grow
/// from 50 µs to 1 ms: a long wait here is a member waiting for its
/// representative, which is busy with other levels (the network), and
/// several members waking every 50 µs for that long took a good part of
/// the cores the representatives needed when ranks outnumber cores.
fn wait_for(a: &AtomicU64, want: u64) {
    let mut spins = 0u32;
    let mut nap = std::time::Duration::from_micros(50);
    while a.load(Ordering::Acquire) < want {
        spins += 1;
        if spins < 200 {
            std::thread::yield_now();
        } else {
            std::thread::sleep(nap);
            nap = (nap * 2).min(std::time::Duration::from_millis(1));
        }
    }
}

/// Creates (`create`) or opens the segment `name` of `len` bytes and maps it.
fn map(name: &str, len: usize, create: bool) -> Result<usize> {
    let bad = |what: &str| {
        err(
            class::OTHER,
            format!(
                "collective segment {name}: {what}: {}",
                std::io::Error::last_os_error()
            ),
        )
    };
    let cname = std::ffi::CString::new(name).map_err(|_| err(class::INTERN, "bad segment name"))?;
    let flags = if create {
        libc::O_CREAT | libc::O_EXCL | libc::O_RDWR
    } else {
        libc::O_RDWR
    };
    // SAFETY: a valid NUL-terminated name; the result is checked.
    let fd = unsafe { libc::shm_open(cname.as_ptr(), flags, 0o600) };
    if fd < 0 {
        return Err(bad("shm_open"));
    }
    // SAFETY: `fd` is ours; each call's result is checked, and `st` is a
    // plain C struct that fstat fills.
    unsafe {
        if create && libc::ftruncate(fd, len as libc::off_t) != 0 {
            libc::close(fd);
            return Err(bad("ftruncate"));
        }
        // A segment named by a peer must really be as long as we map it
        // (touching a shorter one would be SIGBUS).
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(fd, &mut st) != 0 || (st.st_size as u64) < len as u64 {
            libc::close(fd);
            return Err(err(
                class::OTHER,
                format!("collective segment {name} is too short"),
            ));
        }
        let p = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            0,
        );
        libc::close(fd);
        if p == libc::MAP_FAILED {
            return Err(bad("mmap"));
        }
        Ok(p as usize)
    }
}

fn unlink(name: &str) {
    if let Ok(c) = std::ffi::CString::new(name) {
        // SAFETY: a valid NUL-terminated name.
        unsafe { libc::shm_unlink(c.as_ptr()) };
    }
}

/// Distinguishes the segments one process creates.
static SERIAL: AtomicU64 = AtomicU64::new(0);

impl Mpi {
    /// Makes (or refuses, on every member alike) a segment of `len` bytes
    /// shared by `members` (ranks of `comm`, all on this host; the first
    /// creates it): its address here, or None on every member alike. The
    /// name lives only until every member has mapped it (or failed to).
    pub(crate) fn shared_segment_setup(
        &self,
        comm: &Comm,
        members: &[u32],
        len: usize,
    ) -> Result<Option<usize>> {
        let me = comm.rank;
        if me == members[0] {
            // Under the job's id (gwrun removes `/dev/shm/gw-<job id>*`
            // after a job, even a killed one: a rank killed between create
            // and unlink leaves nothing behind), when it is a plain name.
            let job = self.ctx().job_id();
            let job = if !job.is_empty()
                && job.len() <= 16
                && job
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            {
                format!("{job}-")
            } else {
                String::new()
            };
            let name = format!(
                "/gw-{job}coll-{}-{}",
                crate::cma::my_pid(),
                SERIAL.fetch_add(1, Ordering::Relaxed)
            );
            let made = map(&name, len, true);
            let msg = if made.is_ok() { name.as_bytes() } else { &[] };
            for &m in &members[1..] {
                self.c_send(comm, msg, m)?;
            }
            let mut all = made.is_ok();
            for &m in &members[1..] {
                let mut ok = [0u8];
                self.c_recv(comm, &mut ok, m)?;
                all &= ok[0] == 1;
            }
            if made.is_ok() {
                unlink(&name);
            }
            for &m in &members[1..] {
                self.c_send(comm, &[all as u8], m)?;
            }
            Ok(match made {
                Ok(addr) if all => Some(addr),
                Ok(addr) => {
                    // SAFETY: mapped just above with this length.
                    unsafe { libc::munmap(addr as *mut libc::c_void, len) };
                    None
                }
                Err(_) => None,
            })
        } else {
            let mut name = [0u8; 64];
            let n = self.c_recv(comm, &mut name, members[0])?;
            let mapped = std::str::from_utf8(&name[..n])
                .ok()
                .filter(|s| {
                    n > 0 && s.starts_with("/gw-") && s.contains("coll-") && !s[1..].contains('/')
                })
                .and_then(|s| map(s, len, false).ok());
            self.c_send(comm, &[mapped.is_some() as u8], members[0])?;
            let mut verdict = [0u8];
            self.c_recv(comm, &mut verdict, members[0])?;
            Ok(match mapped {
                Some(addr) if verdict[0] == 1 => Some(addr),
                Some(addr) => {
                    // SAFETY: mapped just above with this length.
                    unsafe { libc::munmap(addr as *mut libc::c_void, len) };
                    None
                }
                None => None,
            })
        }
    }

    /// Makes (or refuses, on every member alike) this host's segment.
    fn host_seg_setup(&self, comm: &Comm, members: &[u32]) -> Result<Option<Arc<HostSeg>>> {
        // One slot per member, then the result slot (allreduce).
        let len = (members.len() + 1) * (HEAD + slot().next_multiple_of(HEAD));
        Ok(self.shared_segment_setup(comm, members, len)?.map(|addr| {
            Arc::new(HostSeg {
                addr,
                len,
                gen: AtomicU64::new(0),
            })
        }))
    }

    /// The host's segment if a reduction of `len` bytes with `op` over the
    /// host level `list` may use it (made at the first such call).
    fn host_seg_for(
        &self,
        comm: &Comm,
        plan: &Plan,
        list: &[u32],
        len: usize,
        op: &Op,
    ) -> Result<Option<Arc<HostSeg>>> {
        let eligible =
            list.len() > 1 && comm.nbc == 0 && len <= slot() && slot() > 0 && op.commutative();
        if !eligible {
            return Ok(None);
        }
        if let Some(s) = plan.host_seg.get() {
            return Ok(s.clone());
        }
        let members = &plan.ranks_of_host[plan.host[comm.rank as usize] as usize];
        let s = self.host_seg_setup(comm, members)?;
        let _ = plan.host_seg.set(s.clone());
        Ok(s)
    }

    /// The way down of an allreduce within a host, after [`Mpi::host_reduce`]
    /// of the same call: the reader puts the result in the segment's result
    /// slot (after the members' slots) and wakes each member with an empty
    /// message; each copies the result out. Where the reduction used
    /// messages, so does this ([`Mpi::list_bcast`]). The result slot is
    /// free again by the next call: its reader writes only after every
    /// member's next contribution, sent after reading this result.
    pub(super) fn host_bcast_result(
        &self,
        comm: &Comm,
        plan: &Plan,
        list: &[u32],
        op: &Op,
        acc: &mut [u8],
    ) -> Result<()> {
        let Some(seg) = self.host_seg_for(comm, plan, list, acc.len(), op)? else {
            return self.list_bcast(comm, list, acc);
        };
        let members = plan.ranks_of_host[plan.host[comm.rank as usize] as usize].len();
        let gen = seg.gen.load(Ordering::Relaxed);
        if comm.rank == list[0] {
            // SAFETY: the result slot's data area holds ≥ acc.len() bytes
            // (eligible) and nobody reads it before `ready` says this call.
            unsafe {
                std::ptr::copy_nonoverlapping(acc.as_ptr(), seg.data(members) as *mut u8, acc.len())
            };
            seg.ready(members).store(gen, Ordering::Release);
            for &m in &list[1..] {
                self.c_send(comm, &[], m)?;
            }
            return Ok(());
        }
        self.c_recv(comm, &mut [], list[0])?;
        wait_for(seg.ready(members), gen);
        // SAFETY: written for this call (`ready` = gen, Acquire) and not
        // written again before this member's next contribution.
        unsafe {
            std::ptr::copy_nonoverlapping(
                seg.data(members) as *const u8,
                acc.as_mut_ptr(),
                acc.len(),
            )
        };
        Ok(())
    }

    /// The host level of a commutative reduction of `acc` into `list[0]`:
    /// in the host's shared segment where eligible, else by messages
    /// ([`Mpi::list_reduce`]).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn host_reduce(
        &self,
        comm: &Comm,
        plan: &Plan,
        list: &[u32],
        dt: &DtRef,
        count: usize,
        op: &Op,
        acc: &mut [u8],
        tmp: &mut [u8],
    ) -> Result<()> {
        let Some(seg) = self.host_seg_for(comm, plan, list, acc.len(), op)? else {
            return self.list_reduce(comm, list, dt, count, op, acc, tmp);
        };
        let members = &plan.ranks_of_host[plan.host[comm.rank as usize] as usize];
        let gen = seg.gen.fetch_add(1, Ordering::Relaxed) + 1;
        let slot_of = |r: u32| members.iter().position(|&m| m == r).expect("a member");
        let me = comm.rank;
        if me != list[0] {
            let i = slot_of(me);
            wait_for(seg.consumed(i), gen - 1);
            // SAFETY: slot i's data area (≥ acc.len() bytes, see `eligible`) is written
            // by this member only, and only after its reader marked the
            // previous call's data consumed (waited for just above).
            unsafe {
                std::ptr::copy_nonoverlapping(acc.as_ptr(), seg.data(i) as *mut u8, acc.len())
            };
            seg.ready(i).store(gen, Ordering::Release);
            return self.c_send(comm, &[], list[0]);
        }
        let mut reqs = Vec::new();
        let mut none = [0u8; 0];
        for &m in &list[1..] {
            // SAFETY: an empty receive buffer (nothing is written), alive
            // until the wait below.
            reqs.push(unsafe { self.c_irecv(comm, &mut none, m) }?);
        }
        self.wait_all_internal(reqs)?;
        // The reader's own slot held nothing this call: mark it consumed,
        // so that it may write there when it is not the reader.
        seg.consumed(slot_of(me)).store(gen, Ordering::Release);
        for &m in &list[1..] {
            let i = slot_of(m);
            wait_for(seg.ready(i), gen);
            // Copied out first: the operation never reads memory another
            // process can write (a buggy or hostile member could change it
            // under a Rust reference).
            let theirs = &mut tmp[..acc.len()];
            // SAFETY: member m wrote this call's data (`ready` = gen, read
            // with Acquire) into its slot, which holds at least `acc.len()`
            // bytes (`eligible`); `theirs` is our own memory of that length.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    seg.data(i) as *const u8,
                    theirs.as_mut_ptr(),
                    acc.len(),
                )
            };
            op.apply(dt, count, theirs, acc);
            seg.consumed(i).store(gen, Ordering::Release);
        }
        Ok(())
    }
}
