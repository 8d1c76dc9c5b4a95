//! POSIX shared-memory segments: `shm_open` + `ftruncate` + `mmap`.
//!
//! Every name this module is given starts with `gw-<job_id>` (the callers build
//! them), so the launcher's end-of-job sweep of `/dev/shm/gw-<job_id>*` removes
//! whatever a killed process left behind. Segments are created `O_EXCL` with
//! mode 0600: only this user's processes of this job can map them, and a stale
//! or foreign segment of the same name is an error rather than silently shared.

use crate::error::{Error, Result};
use std::ffi::CString;
use std::io;

/// One mapping of a shared-memory segment. Unmapped on drop; the name is
/// removed explicitly ([`unlink`]) as early as the protocol allows.
pub struct Segment {
    ptr: *mut u8,
    len: usize,
    name: String,
}

// SAFETY: the mapping is plain shared memory; all concurrent access to it goes
// through atomics or the ring protocol, which the users of `as_ptr` uphold.
unsafe impl Send for Segment {}
unsafe impl Sync for Segment {}

fn c_name(name: &str) -> Result<CString> {
    CString::new(format!("/{name}")).map_err(|_| {
        Error::io(
            format!("shm name {name:?}"),
            io::ErrorKind::InvalidInput.into(),
        )
    })
}

impl Segment {
    /// Creates a new segment of `len` bytes (zero-filled), failing if the name exists.
    pub fn create(name: &str, len: usize) -> Result<Segment> {
        let c = c_name(name)?;
        // SAFETY: c is a valid NUL-terminated string; the flags/mode are plain ints.
        let fd = unsafe {
            libc::shm_open(
                c.as_ptr(),
                libc::O_CREAT | libc::O_EXCL | libc::O_RDWR | libc::O_CLOEXEC,
                0o600,
            )
        };
        if fd < 0 {
            return Err(Error::io(
                format!("shm_open(/{name}, O_CREAT|O_EXCL)"),
                io::Error::last_os_error(),
            ));
        }
        // SAFETY: fd is the descriptor we just opened.
        if unsafe { libc::ftruncate(fd, len as libc::off_t) } != 0 {
            let e = io::Error::last_os_error();
            // SAFETY: fd is ours; c is valid; removing the half-made segment.
            unsafe {
                libc::close(fd);
                libc::shm_unlink(c.as_ptr());
            }
            return Err(Error::io(format!("ftruncate(/{name}, {len})"), e));
        }
        // Reserve the pages now: tmpfs allocates on first touch, and a full
        // /dev/shm (64 MiB by default in containers) would then kill us with
        // SIGBUS in the middle of a send instead of failing here.
        // SAFETY: fd is ours; plain integer arguments.
        let rc = unsafe { libc::posix_fallocate(fd, 0, len as libc::off_t) };
        if rc != 0 && rc != libc::EOPNOTSUPP && rc != libc::EINVAL {
            // SAFETY: fd is ours; c is valid; removing the half-made segment.
            unsafe {
                libc::close(fd);
                libc::shm_unlink(c.as_ptr());
            }
            return Err(Error::io(
                format!("posix_fallocate(/{name}, {len})"),
                io::Error::from_raw_os_error(rc),
            ));
        }
        let r = Self::map(fd, len, name);
        if r.is_err() {
            // SAFETY: c is valid; the segment is ours and unusable.
            unsafe { libc::shm_unlink(c.as_ptr()) };
        }
        r
    }

    /// Maps an existing segment with its whole current size.
    pub fn open(name: &str) -> Result<Segment> {
        let c = c_name(name)?;
        // SAFETY: valid C string.
        let fd = unsafe { libc::shm_open(c.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC, 0) };
        if fd < 0 {
            return Err(Error::io(
                format!("shm_open(/{name})"),
                io::Error::last_os_error(),
            ));
        }
        // SAFETY: an all-zero stat is a valid value to be overwritten by fstat.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fd is open; st is a valid out-pointer.
        if unsafe { libc::fstat(fd, &mut st) } != 0 {
            let e = io::Error::last_os_error();
            // SAFETY: fd is ours.
            unsafe { libc::close(fd) };
            return Err(Error::io(format!("fstat(/{name})"), e));
        }
        Self::map(fd, st.st_size as usize, name)
    }

    /// Maps `fd` (and closes it: the mapping keeps the memory).
    fn map(fd: libc::c_int, len: usize, name: &str) -> Result<Segment> {
        if len == 0 {
            // SAFETY: fd is ours.
            unsafe { libc::close(fd) };
            return Err(Error::io(
                format!("mmap(/{name})"),
                io::Error::new(io::ErrorKind::InvalidData, "empty segment"),
            ));
        }
        // SAFETY: a fresh shared mapping of an fd we own; the kernel picks the address.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        let e = io::Error::last_os_error();
        // SAFETY: fd is ours; the mapping (if any) does not need it.
        unsafe { libc::close(fd) };
        if p == libc::MAP_FAILED {
            return Err(Error::io(format!("mmap(/{name}, {len})"), e));
        }
        Ok(Segment {
            ptr: p as *mut u8,
            len,
            name: name.to_string(),
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
            name: String::new(),
        })
    }

    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: ptr/len describe a mapping we made and nobody uses any more
        // (users hold the Segment, directly or through an Arc, while they use it).
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
    }
}

/// Removes a segment name (mappings stay valid). A name already gone is fine.
pub fn unlink(name: &str) {
    if let Ok(c) = c_name(name) {
        // SAFETY: valid C string; failure (ENOENT) is harmless.
        unsafe { libc::shm_unlink(c.as_ptr()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_open_unlink() {
        let name = format!("gw-segtest{}-a", std::process::id());
        let a = Segment::create(&name, 8192).unwrap();
        assert!(
            Segment::create(&name, 8192).is_err(),
            "O_EXCL must refuse an existing name"
        );
        let b = Segment::open(&name).unwrap();
        assert_eq!(b.len(), 8192);
        // SAFETY: both map the same 8192 bytes; single-threaded test.
        unsafe {
            *a.as_ptr().add(100) = 42;
            assert_eq!(*b.as_ptr().add(100), 42);
        }
        let mode = std::fs::metadata(format!("/dev/shm/{name}")).map(|m| {
            use std::os::unix::fs::PermissionsExt;
            m.permissions().mode() & 0o777
        });
        assert_eq!(mode.unwrap(), 0o600);
        unlink(&name);
        assert!(Segment::open(&name).is_err());
        // SAFETY: still mapped after unlink.
        assert_eq!(unsafe { *b.as_ptr().add(100) }, 42);
    }
}
