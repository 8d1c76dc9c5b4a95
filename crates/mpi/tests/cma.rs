//! Single-copy rendezvous (`process_vm_readv`) between two processes: a
//! forked child holds data at a known address (its copy of ours), the
//! parent reads it with `gridwire_mpi::cma::read`. Where the kernel does not
//! permit it (Yama, seccomp, containers) the test cannot run: it says so by
//! the project's skip rule (a failure under CI), never passes silently.

use gridwire_mpi::cma;

#[test]
fn single_copy_reads_another_process() {
    let data: Vec<u8> = (0..64 * 1024).map(|i| (i * 7 % 251) as u8).collect();
    let mut ready = [0 as libc::c_int; 2];
    let mut done = [0 as libc::c_int; 2];
    // SAFETY: plain pipe creation into arrays of two fds.
    unsafe {
        assert_eq!(libc::pipe(ready.as_mut_ptr()), 0);
        assert_eq!(libc::pipe(done.as_mut_ptr()), 0);
    }
    // SAFETY: the child only calls async-signal-safe functions (write,
    // read, _exit) on fds it inherited, then exits; `data` is its copy.
    let child = unsafe { libc::fork() };
    assert!(child >= 0, "fork failed");
    if child == 0 {
        // SAFETY: see above.
        unsafe {
            libc::write(ready[1], b"r".as_ptr().cast(), 1);
            let mut b = 0u8;
            libc::read(done[0], (&mut b as *mut u8).cast(), 1);
            libc::_exit(0);
        }
    }
    let mut b = 0u8;
    // SAFETY: reading one byte from our pipe.
    unsafe { libc::read(ready[0], (&mut b as *mut u8).cast(), 1) };
    let mut out = vec![0u8; data.len()];
    // SAFETY: `out` is ours and `data.len()` long; the remote range is the
    // child's copy of `data`, checked by the kernel.
    let res = unsafe {
        cma::read(
            child as u32,
            data.as_ptr() as u64,
            out.as_mut_ptr() as usize,
            out.len(),
        )
    };
    // SAFETY: wake the child and reap it.
    unsafe {
        libc::write(done[1], b"d".as_ptr().cast(), 1);
        let mut status = 0;
        libc::waitpid(child, &mut status, 0);
        for fd in ready.into_iter().chain(done) {
            libc::close(fd);
        }
    }
    match res {
        Ok(()) => assert!(out == data, "the copy differs from the child's data"),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::ENOSYS)) => {
            gridwire_testkit::skip(&format!(
                "process_vm_readv not permitted here ({e}): single copy cannot be tested"
            ));
        }
        Err(e) => panic!("process_vm_readv failed: {e}"),
    }
}
