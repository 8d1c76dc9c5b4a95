//! Shared-memory segments: anonymous `memfd`s, sealed so that nobody —
//! including the peer that created one — can shrink or grow them, handed to
//! the peer as a file descriptor (see `handoff`), never by name.
//!
//! Why not named POSIX segments (`/dev/shm/gw-…`, as before): a name outlives
//! a killed process unless a launcher sweeps it (Hydra and Slurm do not), a
//! repeated job id then hits `EEXIST`, and any process of the user could open
//! a mapped segment and `ftruncate` it, after which touching the mapping
//! kills us with SIGBUS. A memfd has no name, vanishes with its last mapping
//! or descriptor, and with `F_SEAL_SHRINK` its size is final: the receiver
//! checks the seals before it maps one.

use crate::error::{Error, Result};
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Segments up to this size are mapped with `MAP_POPULATE` (see `map`).
const POPULATE_MAX: usize = 8 << 20;

/// One mapping of a shared-memory segment, unmapped on drop (the memory goes
/// when the last mapping and descriptor of it do).
pub struct Segment {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; all concurrent access to it goes
// through atomics or the ring protocol, which the users of `as_ptr` uphold.
unsafe impl Send for Segment {}
unsafe impl Sync for Segment {}

fn c_name(name: &str) -> Result<CString> {
    CString::new(name).map_err(|_| {
        Error::io(
            format!("shm name {name:?}"),
            io::ErrorKind::InvalidInput.into(),
        )
    })
}

/// The seals every segment carries: its size is final, and no seal may be
/// added or changed later (writes stay allowed: it is shared memory).
pub const SEALS: libc::c_int = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;

impl Segment {
    /// Creates a sealed memfd segment of `len` zeroed bytes; returns it
    /// mapped, with the descriptor to hand over (close it once handed).
    pub fn create_sealed(what: &str, len: usize) -> Result<(Segment, OwnedFd)> {
        let c = c_name(what)?;
        // SAFETY: c is a valid NUL-terminated string; flags are plain ints.
        let fd =
            unsafe { libc::memfd_create(c.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
        if fd < 0 {
            return Err(Error::io(
                format!("memfd_create({what})"),
                io::Error::last_os_error(),
            ));
        }
        // SAFETY: fd was just returned to us and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: fd is open; plain integer arguments.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) } != 0 {
            return Err(Error::io(
                format!("ftruncate({what}, {len})"),
                io::Error::last_os_error(),
            ));
        }
        // Reserve the pages now: shared memory is allocated on first touch,
        // and a full memory cgroup or shmem limit would then kill us with
        // SIGBUS in the middle of a send instead of failing here.
        // SAFETY: fd is open; plain integer arguments.
        let rc = unsafe { libc::posix_fallocate(fd.as_raw_fd(), 0, len as libc::off_t) };
        if rc != 0 && rc != libc::EOPNOTSUPP && rc != libc::EINVAL {
            return Err(Error::io(
                format!("posix_fallocate({what}, {len})"),
                io::Error::from_raw_os_error(rc),
            ));
        }
        // SAFETY: fd is open; F_ADD_SEALS takes an int.
        if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, SEALS) } != 0 {
            return Err(Error::io(
                format!("sealing {what}"),
                io::Error::last_os_error(),
            ));
        }
        let seg = Self::map(fd.as_raw_fd(), len, what)?;
        Ok((seg, fd))
    }

    /// Maps a segment handed to us by a peer, whole, after checking that it
    /// is sealed against shrinking (so touching the mapping can never fault)
    /// and that its size lies in `min..=max`.
    pub fn map_sealed(fd: &OwnedFd, min: usize, max: usize, what: &str) -> Result<Segment> {
        let bad = |why: String| {
            Error::io(
                what.to_string(),
                io::Error::new(io::ErrorKind::InvalidData, why),
            )
        };
        // SAFETY: fd is open; F_GET_SEALS takes no argument.
        let seals = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) };
        if seals < 0
            || seals & (libc::F_SEAL_SHRINK | libc::F_SEAL_SEAL)
                != (libc::F_SEAL_SHRINK | libc::F_SEAL_SEAL)
        {
            return Err(bad("segment is not sealed against shrinking".into()));
        }
        // SAFETY: an all-zero stat is a valid value to be overwritten by fstat.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fd is open; st is a valid out-pointer.
        if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
            return Err(Error::io(
                format!("fstat({what})"),
                io::Error::last_os_error(),
            ));
        }
        let len = st.st_size as u64;
        if len < min as u64 || len > max as u64 || st.st_mode & libc::S_IFMT != libc::S_IFREG {
            return Err(bad(format!("segment of {len} bytes")));
        }
        Self::map(fd.as_raw_fd(), len as usize, what)
    }

    /// Maps `fd` (the caller keeps and closes it: the mapping keeps the memory).
    fn map(fd: libc::c_int, len: usize, name: &str) -> Result<Segment> {
        if len == 0 {
            return Err(Error::io(
                format!("mmap({name})"),
                io::Error::new(io::ErrorKind::InvalidData, "empty segment"),
            ));
        }
        // Rings and their control blocks are mapped with their page-table
        // entries filled now: otherwise the first message to pass each page
        // of a ring takes a fault on both sides (a 10 KB PVM round trip went
        // from 15 to 33 µs on average over its first 20 messages). The
        // memory is allocated already (posix_fallocate); only the mapping
        // work moves to connection time. Big segments (windows) fault lazily.
        let populate = if len <= POPULATE_MAX {
            libc::MAP_POPULATE
        } else {
            0
        };
        // SAFETY: a fresh shared mapping of an fd we own; the kernel picks the address.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | populate,
                fd,
                0,
            )
        };
        let e = io::Error::last_os_error();
        if p == libc::MAP_FAILED {
            return Err(Error::io(format!("mmap({name}, {len})"), e));
        }
        Ok(Segment {
            ptr: p as *mut u8,
            len,
        })
    }

    /// A private shared-anonymous mapping of `len` zeroed bytes (no name, no
    /// file): the fuzz harness plays both sides of a ring in it.
    pub fn anonymous(len: usize) -> Result<Segment> {
        // SAFETY: a fresh anonymous mapping; the kernel picks the address.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(Error::io(
                format!("mmap(anonymous, {len})"),
                io::Error::last_os_error(),
            ));
        }
        Ok(Segment {
            ptr: p as *mut u8,
            len,
        })
    }

    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }

    pub fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: ptr/len describe a mapping we made and nobody uses any more
        // (users hold the Segment, directly or through an Arc, while they use it).
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sealed segment cannot be shrunk (the SIGBUS a hostile peer could
    /// cause by truncating a mapped segment) nor grown, by anyone.
    #[test]
    fn sealed_segment_cannot_be_truncated() {
        let (a, fd) = Segment::create_sealed("gw-test", 8192).unwrap();
        // SAFETY: fd is open.
        assert_ne!(unsafe { libc::ftruncate(fd.as_raw_fd(), 4096) }, 0);
        assert_eq!(io::Error::last_os_error().raw_os_error(), Some(libc::EPERM));
        // SAFETY: fd is open.
        assert_ne!(unsafe { libc::ftruncate(fd.as_raw_fd(), 1 << 20) }, 0);
        let b = Segment::map_sealed(&fd, 4096, 8192, "test").unwrap();
        assert_eq!(b.len(), 8192);
        // SAFETY: both map the same 8192 bytes; single-threaded test.
        unsafe {
            *a.as_ptr().add(8000) = 42;
            assert_eq!(*b.as_ptr().add(8000), 42);
        }
        // the seals cannot be removed or changed either
        // SAFETY: fd is open.
        assert_ne!(
            unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, libc::F_SEAL_WRITE) },
            0
        );
        assert!(
            Segment::map_sealed(&fd, 4096, 4096, "test").is_err(),
            "size above max"
        );
    }

    /// A segment without the seals (which a hostile peer could still
    /// truncate) is refused before it is mapped.
    #[test]
    fn unsealed_segment_is_refused() {
        let c = CString::new("gw-test").unwrap();
        // SAFETY: valid C string.
        let fd = unsafe { libc::memfd_create(c.as_ptr(), libc::MFD_CLOEXEC) };
        assert!(fd >= 0);
        // SAFETY: fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: fd is open.
        assert_eq!(unsafe { libc::ftruncate(fd.as_raw_fd(), 8192) }, 0);
        let e = Segment::map_sealed(&fd, 4096, 8192, "test").err().unwrap();
        assert!(e.to_string().contains("sealed"), "{e}");
    }
}
