//! Thin wrappers over the few system calls `gwrun` needs beyond std:
//! signal delivery through a self-pipe, process groups, reaping, poll.
//! Every `unsafe` block is a single syscall on values we own.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicI32, Ordering};

/// Write end of the self-pipe, read by the signal handler.
static SIG_PIPE_W: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(sig: libc::c_int) {
    // The handler interrupts arbitrary code between a failing system call
    // and its read of errno: the write below must not change what that code
    // sees, so errno is saved and restored around it.
    // SAFETY: __errno_location returns this thread's errno slot, valid for
    // the thread's lifetime; reading and writing an int there is
    // async-signal-safe.
    let errno = unsafe { *libc::__errno_location() };
    let fd = SIG_PIPE_W.load(Ordering::Relaxed);
    if fd >= 0 {
        let b = sig as u8;
        // SAFETY: write(2) is async-signal-safe; the buffer is a local byte.
        // A full pipe (EAGAIN) just drops the byte: a signal of the same
        // kind is already pending in it.
        unsafe { libc::write(fd, &b as *const u8 as *const libc::c_void, 1) };
    }
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
}

/// In the child between fork and exec: asks the kernel to SIGKILL this
/// process when its parent dies, then checks that the parent is still
/// `parent` — if gwrun died between fork and prctl the request came too
/// late (the child was already re-parented) and the child must not run on
/// unsupervised. Only async-signal-safe calls.
pub fn die_with_parent(parent: libc::pid_t) -> io::Result<()> {
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: getppid has no preconditions.
    if unsafe { libc::getppid() } != parent {
        // SAFETY: _exit ends this forked child at once, without running
        // the parent's atexit handlers or flushing its copied buffers.
        unsafe { libc::_exit(EXIT_ORPHANED) };
    }
    Ok(())
}

/// Exit status of a rank whose launcher died before it could be started.
pub const EXIT_ORPHANED: i32 = 125;

/// The signals `gwrun` watches: children exiting, and requests to stop.
pub const WATCHED: [libc::c_int; 5] = [
    libc::SIGCHLD,
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
];

/// Installs handlers that turn the watched signals into bytes on a pipe, so
/// the poll loop sees them as ordinary readable events. Returns the read end.
pub fn signal_pipe() -> io::Result<OwnedFd> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: pipe2 fills the two-element array we pass.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 just created these descriptors; we own them.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // The write end must live as long as the handlers: leak it on purpose.
    SIG_PIPE_W.store(w.as_raw_fd(), Ordering::SeqCst);
    std::mem::forget(w);
    for sig in WATCHED {
        // SAFETY: a zeroed sigaction is a valid starting point; we set the
        // handler, an empty mask and flags, then install it.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            sa.sa_flags = libc::SA_RESTART
                | if sig == libc::SIGCHLD {
                    libc::SA_NOCLDSTOP
                } else {
                    0
                };
            if libc::sigaction(sig, &sa, std::ptr::null_mut()) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
    }
    Ok(r)
}

/// Drains the self-pipe: the signals that arrived since the last call.
pub fn read_signals(fd: RawFd) -> Vec<libc::c_int> {
    let mut out = Vec::new();
    let mut buf = [0u8; 64];
    loop {
        // SAFETY: reading into a local buffer of the given length.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len()) };
        if n <= 0 {
            break;
        }
        out.extend(buf[..n as usize].iter().map(|&b| b as libc::c_int));
    }
    out
}

/// Makes `gwrun` the reaper of orphaned descendants, so grandchildren that
/// outlive their rank are re-parented to us and can be killed and reaped
/// instead of lingering under init.
pub fn become_subreaper() {
    // SAFETY: prctl with integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
}

/// Raises the soft limit on open files to the hard limit: `gwrun` holds
/// three descriptors per rank, and the common soft limit of 1024 would cap
/// jobs at about 300 ranks.
pub fn raise_fd_limit() {
    // SAFETY: getrlimit/setrlimit on a local struct.
    unsafe {
        let mut lim: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

/// Sends `sig` to the process group `pgid` (ignoring "no such group").
pub fn kill_group(pgid: i32, sig: libc::c_int) {
    if pgid > 1 {
        // SAFETY: kill(2) with a negative pid targets exactly that group.
        unsafe { libc::kill(-pgid, sig) };
    }
}

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
}

/// Reaps one exited child if any: `Some((pid, exit))`, `None` if none is ready.
pub fn reap_one() -> Option<(i32, Exit)> {
    let mut status = 0;
    // SAFETY: waitpid writes the status into our local.
    let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
    if pid <= 0 {
        return None;
    }
    let exit = if libc::WIFSIGNALED(status) {
        Exit::Signal(libc::WTERMSIG(status))
    } else {
        Exit::Code(libc::WEXITSTATUS(status))
    };
    Some((pid, exit))
}

/// `poll(2)` over `fds`, retrying nothing: EINTR returns Ok(0).
pub fn poll(fds: &mut [libc::pollfd], timeout_ms: i32) -> io::Result<usize> {
    // SAFETY: the slice is a valid array of pollfd of the given length.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
    if n < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(0);
        }
        return Err(e);
    }
    Ok(n as usize)
}

/// Puts a descriptor in non-blocking mode (our ends of pipes and sockets).
pub fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor we own.
    unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        if fl < 0 || libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// A connected `AF_UNIX` stream pair, both ends close-on-exec (the child's
/// end is made inheritable only in the child, between fork and exec).
pub fn socketpair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: socketpair fills the two-element array we pass.
    if unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    } != 0
    {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: just created, owned by us.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// `read(2)` into `buf`: Ok(0) at end of file, WouldBlock when empty.
pub fn read(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: reading into a buffer of the given length.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// `write(2)` of `buf`: how much was written.
pub fn write(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: writing from a buffer of the given length.
    let n = unsafe { libc::write(fd, buf.as_ptr() as *const libc::c_void, buf.len()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// Writes all of `buf` to a blocking descriptor (our stdout/stderr),
/// giving up silently if the reader went away: the job must not die
/// because nobody reads its output.
pub fn write_all_blocking(fd: RawFd, mut buf: &[u8]) {
    while !buf.is_empty() {
        match write(fd, buf) {
            Ok(0) => return,
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let mut p = [libc::pollfd {
                    fd,
                    events: libc::POLLOUT,
                    revents: 0,
                }];
                let _ = poll(&mut p, 1000);
            }
            Err(_) => return,
        }
    }
}

/// `SIGKILL`, `SIGTERM`, … for messages.
pub fn signal_name(sig: i32) -> String {
    let name = match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        libc::SIGSYS => "SIGSYS",
        _ => return format!("SIG{sig}"),
    };
    name.to_string()
}

/// The OS message of an I/O error without Rust's " (os error N)" suffix.
pub fn os_message(e: &io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// Prints one of gwrun's own messages (always on stderr, always prefixed).
pub fn say(msg: &str) {
    let mut s = String::with_capacity(msg.len() + 8);
    for l in msg.lines() {
        s.push_str("gwrun: ");
        s.push_str(l);
        s.push('\n');
    }
    write_all_blocking(2, s.as_bytes());
}

/// SIGKILLs every process whose parent is `gwrun`: once the ranks are
/// gone, those can only be descendants that escaped their rank's process
/// group (e.g. with `setsid`) and were re-parented to us as subreaper.
pub fn kill_orphans() {
    let me = std::process::id() as i32;
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Fields after the parenthesised command name: state ppid …
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let ppid = rest
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse::<i32>().ok());
        if ppid == Some(me) {
            // SAFETY: kill(2) of one of our own children.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

/// Removes `/dev/shm/gw-<job id>*`: the runtime's segments, which its own
/// cleanup cannot remove when a rank is SIGKILLed.
pub fn remove_shm(job_id: &str) {
    let prefix = format!("gw-{job_id}");
    let Ok(dir) = std::fs::read_dir("/dev/shm") else {
        return;
    };
    for e in dir.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.starts_with(&prefix) {
            continue;
        }
        let path = e.path();
        let r = match e.file_type() {
            Ok(t) if t.is_dir() => std::fs::remove_dir_all(&path),
            _ => std::fs::remove_file(&path),
        };
        if let Err(err) = r {
            if err.kind() != io::ErrorKind::NotFound {
                say(&format!(
                    "cannot remove {}: {}",
                    path.display(),
                    os_message(&err)
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_handler_preserves_errno() {
        // A write end that fails (EBADF) makes the handler's write(2) set
        // errno: the interrupted code must still see its own value.
        let saved = SIG_PIPE_W.swap(1_000_000, Ordering::SeqCst);
        // SAFETY: this thread's errno slot.
        unsafe { *libc::__errno_location() = libc::EINPROGRESS };
        on_signal(libc::SIGCHLD);
        // SAFETY: as above.
        let after = unsafe { *libc::__errno_location() };
        SIG_PIPE_W.store(saved, Ordering::SeqCst);
        assert_eq!(after, libc::EINPROGRESS);
    }

    #[test]
    fn child_of_a_dead_parent_exits_instead_of_running_on() {
        // A forked child told that its parent is some other process (as
        // when gwrun died before the child's prctl) must exit at once.
        // SAFETY: the child only calls async-signal-safe functions
        // (prctl, getppid, _exit) before it ends.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            // SAFETY: getppid has no preconditions.
            let wrong = unsafe { libc::getppid() } + 1;
            let _ = die_with_parent(wrong);
            // SAFETY: ending the forked child.
            unsafe { libc::_exit(0) };
        }
        let mut status = 0;
        // SAFETY: waiting for the child forked above.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(libc::WIFEXITED(status));
        assert_eq!(libc::WEXITSTATUS(status), EXIT_ORPHANED);

        // With the right parent it carries on.
        // SAFETY: as above.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: getppid has no preconditions.
            let me = unsafe { libc::getppid() };
            let code = if die_with_parent(me).is_ok() { 0 } else { 1 };
            // SAFETY: ending the forked child.
            unsafe { libc::_exit(code) };
        }
        // SAFETY: as above.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert_eq!(libc::WEXITSTATUS(status), 0);
    }
}
