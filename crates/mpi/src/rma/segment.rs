//! Shared segments of window memory: one per host, holding the memory of
//! every member of the window on that host, mapped by each of them.
//!
//! `MPI_Win_allocate_shared` needs one (every member on one host, the
//! segment the program sees). `MPI_Win_allocate` makes one per host too, so
//! that puts and gets between members of a host are loads and stores
//! ([`super::direct`]): the library owns that memory, so nothing stops it
//! from living where the other members can reach it.
//!
//! The segment's name lives only while the members map it: the host's
//! leader unlinks it once every member has answered, so a job killed after
//! that leaves nothing in `/dev/shm`.

use crate::comm::Comm;
use crate::error::{class, err, Result};
use crate::Mpi;

/// Every segment's pieces start on this boundary (a cache line).
pub(crate) const SHARED_ALIGN: usize = 64;

/// Bytes of a segment per member before the members' memory: its
/// accumulate lock word alone on the first cache line, and on the second
/// the words its owner writes while it waits or attaches memory (the
/// polling stamp, [`super::polling::STAMP_OFFSET`], and the attach
/// generation, [`super::single_copy::GEN_OFFSET`]). On one line, every
/// stamp the target wrote took the line from an origin spinning on or
/// holding the lock word, and every lock an origin took took it from the
/// target's next stamp (false sharing between two processes' writes).
pub(crate) const LOCK_STRIDE: usize = 2 * SHARED_ALIGN;

/// One host's segment as this process maps it.
pub(crate) struct HostSegment {
    /// The mapping's address and length (unmapped with the window).
    pub addr: usize,
    pub len: usize,
    /// Per window rank: where its memory lies in this mapping (0 = not on this host).
    pub bases: Vec<usize>,
    /// Per window rank: its accumulate lock in this mapping (0 = not on this
    /// host): a 32-bit word, 0 free, 1 held, that whoever applies an
    /// accumulate to that member's memory holds (see [`super::direct`]);
    /// [`LOCK_STRIDE`] bytes are that member's from there.
    pub locks: Vec<usize>,
}

/// What one member tells the others before a segment is made.
const RECORD: usize = 64 + 4 + 1 + 8;

impl Mpi {
    /// Makes and maps the segment of this process's host for a window of
    /// `size` bytes here (collective over `c`). `None` when no segment is
    /// made for this host: a member did not want one (`wanted` false), this
    /// process is alone on its host (unless `even_alone`), or a member failed
    /// to make or map it (then every member of `c` gets `None`: all fall
    /// back together).
    pub(crate) fn host_segment(
        &self,
        c: &Comm,
        size: usize,
        wanted: bool,
        even_alone: bool,
    ) -> Result<Option<HostSegment>> {
        let n = c.size as usize;
        let mut mine = [0u8; RECORD];
        let host = self.ctx().host_id().as_bytes();
        mine[..host.len().min(64)].copy_from_slice(&host[..host.len().min(64)]);
        mine[64..68].copy_from_slice(&crate::cma::my_pid().to_le_bytes());
        mine[68] = wanted as u8;
        mine[69..77].copy_from_slice(&(size as u64).to_le_bytes());
        let mut all = vec![0u8; RECORD * n];
        self.allgather_bytes(c, &mine, &mut all)?;
        let rec = |r: usize| &all[r * RECORD..(r + 1) * RECORD];
        if (0..n).any(|r| rec(r)[68] == 0) {
            return Ok(None);
        }
        let me = c.rank as usize;
        let members: Vec<usize> = (0..n).filter(|&r| rec(r)[..64] == mine[..64]).collect();
        let leader = members[0];
        // First one accumulate lock per member ([`LOCK_STRIDE`] each), then
        // each member's piece rounded up to the alignment, in rank order.
        let mut locks = vec![None; n];
        for (i, &m) in members.iter().enumerate() {
            locks[m] = Some(i * LOCK_STRIDE);
        }
        let mut offsets = vec![None; n];
        let mut total: u64 = (members.len() * LOCK_STRIDE) as u64;
        for &m in &members {
            offsets[m] = Some(total);
            let sz = u64::from_le_bytes(rec(m)[69..77].try_into().unwrap());
            total = sz
                .div_ceil(SHARED_ALIGN as u64)
                .checked_mul(SHARED_ALIGN as u64)
                .and_then(|s| total.checked_add(s))
                .ok_or_else(|| err(class::SIZE, "the window is too large"))?;
        }
        let total = usize::try_from(total)
            .map_err(|_| err(class::SIZE, "the window is too large"))?
            .max(1);
        let alone = members.len() == 1 && !even_alone;
        let leader_pid = u32::from_le_bytes(rec(leader)[64..68].try_into().unwrap());
        let name = format!("/gw-win-{leader_pid}-{}-{leader}", c.ctx);
        // Step 1: each host's leader creates its segment. 2 = takes no part.
        let made = if alone {
            Ok(0)
        } else if me == leader {
            map_shared(&name, total, true)
        } else {
            Ok(0)
        };
        let step = |ok: bool| [if alone { 2 } else { ok as u8 }];
        let mut oks = vec![0u8; n];
        self.allgather_bytes(c, &step(made.is_ok()), &mut oks)?;
        // Step 2: the others open it, if their leader made it.
        let mapped = if alone || me == leader {
            made
        } else if oks[leader] == 1 {
            map_shared(&name, total, false)
        } else {
            Err(err(class::NO_MEM, "the host's leader could not make it"))
        };
        self.allgather_bytes(c, &step(mapped.is_ok()), &mut oks)?;
        if me == leader && !alone {
            // Every member of the host mapped it or failed: the name goes.
            if let Ok(cname) = std::ffi::CString::new(name) {
                // SAFETY: a valid NUL-terminated name.
                unsafe { libc::shm_unlink(cname.as_ptr()) };
            }
        }
        let everyone = oks.iter().all(|&o| o != 0);
        match mapped {
            Ok(addr) if everyone && !alone => Ok(Some(HostSegment {
                addr,
                len: total,
                bases: offsets
                    .iter()
                    .map(|o| o.map_or(0, |o| addr + o as usize))
                    .collect(),
                locks: locks.iter().map(|o| o.map_or(0, |o| addr + o)).collect(),
            })),
            Ok(addr) => {
                if addr != 0 {
                    // SAFETY: mapped above with this length, not used since.
                    unsafe { libc::munmap(addr as *mut libc::c_void, total) };
                }
                Ok(None)
            }
            Err(_) => Ok(None),
        }
    }
}

/// Creates (`create`) or opens a POSIX shared memory segment of `len`
/// bytes and maps it; returns the address.
pub(crate) fn map_shared(name: &str, len: usize, create: bool) -> Result<usize> {
    let cname = std::ffi::CString::new(name).map_err(|_| err(class::INTERN, "bad segment name"))?;
    let flags = if create {
        libc::O_CREAT | libc::O_EXCL | libc::O_RDWR
    } else {
        libc::O_RDWR
    };
    // SAFETY: a valid NUL-terminated name; the result is checked.
    let fd = unsafe { libc::shm_open(cname.as_ptr(), flags, 0o600) };
    if fd < 0 {
        return Err(err(
            class::RMA_SHARED,
            format!("shm_open {name}: {}", std::io::Error::last_os_error()),
        ));
    }
    // SAFETY: `fd` is ours; ftruncate and mmap report errors by their result.
    let addr = unsafe {
        if create && libc::ftruncate(fd, len as libc::off_t) != 0 {
            libc::close(fd);
            return Err(err(
                class::RMA_SHARED,
                format!(
                    "cannot size the shared segment: {}",
                    std::io::Error::last_os_error()
                ),
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
        p
    };
    if addr == libc::MAP_FAILED {
        return Err(err(
            class::RMA_SHARED,
            format!(
                "cannot map the shared segment: {}",
                std::io::Error::last_os_error()
            ),
        ));
    }
    Ok(addr as usize)
}
