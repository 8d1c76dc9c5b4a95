//! Single-copy rendezvous within a host: the receiver copies the sender's
//! data straight into its own buffer with `process_vm_readv` (cross-memory
//! attach); one-sided puts and gets to windows created over a peer's memory
//! use `process_vm_writev` and `process_vm_readv` the same way. Permission depends on the pair (Yama `ptrace_scope`, seccomp,
//! namespaces), so a failure is an answer, not an error: the caller falls
//! back to the copy-through-the-runtime path for that peer.

use std::io;

/// Copies `len` bytes at `remote` in process `pid` to address `dst` here.
///
/// # Safety
/// `dst .. dst + len` must be writable memory of ours (a receive buffer of a
/// pending operation or a temporary). The remote range is only read by the
/// kernel, which checks it.
pub unsafe fn read(pid: u32, remote: u64, dst: usize, len: usize) -> io::Result<()> {
    let mut done = 0usize;
    while done < len {
        let local = libc::iovec {
            iov_base: (dst + done) as *mut libc::c_void,
            iov_len: len - done,
        };
        let rem = libc::iovec {
            iov_base: (remote as usize + done) as *mut libc::c_void,
            iov_len: len - done,
        };
        // SAFETY: `local` lies in memory the caller lends us (see above); the
        // remote iovec is interpreted by the kernel in the other process only.
        let n = unsafe { libc::process_vm_readv(pid as libc::pid_t, &local, 1, &rem, 1, 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "process_vm_readv read nothing",
            ));
        }
        done += n as usize;
    }
    Ok(())
}

/// Copies `len` bytes at address `src` here to `remote` in process `pid`
/// (a put into a window created over another process's memory).
///
/// # Safety
/// `src .. src + len` must be readable memory of ours. The remote range is
/// only written by the kernel, which checks that it is mapped writable there.
pub unsafe fn write(pid: u32, remote: u64, src: usize, len: usize) -> io::Result<()> {
    let mut done = 0usize;
    while done < len {
        let local = libc::iovec {
            iov_base: (src + done) as *mut libc::c_void,
            iov_len: len - done,
        };
        let rem = libc::iovec {
            iov_base: (remote as usize + done) as *mut libc::c_void,
            iov_len: len - done,
        };
        // SAFETY: `local` lies in memory the caller lends us and is only
        // read; the remote iovec is interpreted by the kernel in the other
        // process only.
        let n = unsafe { libc::process_vm_writev(pid as libc::pid_t, &local, 1, &rem, 1, 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "process_vm_writev wrote nothing",
            ));
        }
        done += n as usize;
    }
    Ok(())
}

/// This process's id, as peers need it to read from us.
pub fn my_pid() -> u32 {
    std::process::id()
}
