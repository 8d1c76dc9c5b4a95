//! Cross-memory attach: the receiver copies a large message straight out of the
//! sender's address space with `process_vm_readv` (one copy instead of two).
//!
//! Whether it is permitted depends on the pair, not on the process: Yama
//! `ptrace_scope`, seccomp profiles, different user or pid namespaces can each
//! forbid it. So a process first checks it can read itself (cheap, rules out a
//! seccomp ban), and each receiver then probes its sender once per pair by
//! reading a known word (see `attach`); only a pair that passed uses it.

use std::io;

/// A random word (never zero). A sender publishes the address and value of one
/// for the per-pair probe; rings use one as their seal key.
pub fn probe_word() -> Box<u64> {
    let mut v = [0u8; 8];
    let _ = getrandom::getrandom(&mut v);
    Box::new(u64::from_le_bytes(v) | 1)
}

/// Whether `process_vm_readv` works on our own memory.
pub fn probe_self() -> bool {
    check_self().is_ok()
}

/// As [`probe_self`], with the reason when it does not work.
pub fn check_self() -> io::Result<()> {
    let word = probe_word();
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    let v = read_u64(pid, &*word as *const u64 as u64)?;
    if v != *word {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "process_vm_readv read the wrong bytes",
        ));
    }
    Ok(())
}

/// Reads one `u64` at `addr` in process `pid`.
pub fn read_u64(pid: libc::pid_t, addr: u64) -> io::Result<u64> {
    let mut v = 0u64;
    // SAFETY: the destination is our own 8-byte local; the remote address is
    // only dereferenced by the kernel, which checks it.
    unsafe { read(pid, &[(addr, 8)], &mut v as *mut u64 as *mut u8, 8)? };
    Ok(v)
}

/// Copies the remote ranges `(addr, len)` of process `pid`, concatenated, into
/// `dst[..total]`, looping over partial reads.
///
/// # Safety
/// `dst` must be valid for writes of `total` bytes, and `total` must equal the
/// sum of the lengths.
pub unsafe fn read(
    pid: libc::pid_t,
    remote: &[(u64, u64)],
    dst: *mut u8,
    total: usize,
) -> io::Result<()> {
    let mut done = 0usize;
    let mut idx = 0usize; // first remote range not fully read
    let mut skip = 0u64; // bytes of remote[idx] already read
    let mut riov: Vec<libc::iovec> = Vec::with_capacity(remote.len().min(1024));
    while done < total {
        riov.clear();
        for (i, &(addr, len)) in remote.iter().enumerate().skip(idx).take(1024) {
            let s = if i == idx { skip } else { 0 };
            riov.push(libc::iovec {
                // A hostile address is the kernel's to refuse (EFAULT); it must
                // not overflow here.
                iov_base: addr.wrapping_add(s) as *mut libc::c_void,
                iov_len: (len - s) as usize,
            });
        }
        let liov = libc::iovec {
            // SAFETY: done < total, inside the caller's buffer.
            iov_base: unsafe { dst.add(done) } as *mut libc::c_void,
            iov_len: total - done,
        };
        // SAFETY: the local iovec covers memory the caller lends us; the remote
        // iovecs are only interpreted by the kernel in the other process.
        let n = unsafe {
            libc::process_vm_readv(pid, &liov, 1, riov.as_ptr(), riov.len() as libc::c_ulong, 0)
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "process_vm_readv read nothing",
            ));
        }
        let mut n = n as u64;
        done += n as usize;
        // advance (idx, skip) by n bytes
        while n > 0 && idx < remote.len() {
            let left = remote[idx].1 - skip;
            if n >= left {
                n -= left;
                idx += 1;
                skip = 0;
            } else {
                skip += n;
                n = 0;
            }
        }
        while idx < remote.len() && remote[idx].1 == 0 {
            idx += 1;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_own_memory_in_pieces() {
        if let Err(e) = check_self() {
            return gridwire_testkit::skip(&format!("process_vm_readv not permitted here: {e}"));
        }
        let a: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
        let b: Vec<u8> = (0..5000u32).map(|i| (i * 3) as u8).collect();
        let ranges = [
            (a.as_ptr() as u64, a.len() as u64),
            (0, 0),
            (b.as_ptr() as u64, b.len() as u64),
        ];
        let mut out = vec![0u8; a.len() + b.len()];
        // SAFETY: out has exactly the sum of the lengths.
        unsafe {
            read(
                std::process::id() as i32,
                &ranges,
                out.as_mut_ptr(),
                out.len(),
            )
        }
        .unwrap();
        assert_eq!(&out[..a.len()], &a[..]);
        assert_eq!(&out[a.len()..], &b[..]);
        // a bad address is an error, not a crash
        let mut one = [0u8; 8];
        // SAFETY: one has 8 bytes.
        assert!(
            unsafe { read(std::process::id() as i32, &[(8, 8)], one.as_mut_ptr(), 8) }.is_err()
        );
    }
}
