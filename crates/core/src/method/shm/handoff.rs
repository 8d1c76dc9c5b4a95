//! How a pair segment reaches its receiver, and how a sender learns that its
//! receiver is gone.
//!
//! Each context listens on an abstract-namespace unix `SOCK_SEQPACKET`
//! socket named after a random nonce it publishes in its descriptor (no file:
//! the name vanishes with the process, and a repeated job id can never
//! collide with a leftover). A sender connects, sends a 16-byte hello
//! (`PAIR_MAGIC`, src, dst) with the sealed memfd of the pair segment attached
//! (`SCM_RIGHTS`), and keeps the connection: the receiver keeps its end open
//! for as long as it consumes the ring, so when it dies — killed, in any pid
//! namespace, whatever pid the kernel hands out next — the sender's end reads
//! EOF (or `ECONNRESET` if it died before accepting). That replaces probing a
//! pid with `kill(pid, 0)`, which saw neither another pid namespace nor pid
//! reuse.
//!
//! The receiver accepts only connections from its own user (`SO_PEERCRED`,
//! as the 0600 segment files enforced before) and learns the sender's pid
//! from the kernel, translated into its own pid namespace (0 if invisible),
//! for cross-memory attach. Everything else in the hello and the segment is
//! checked like any peer input.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

pub const HELLO_LEN: usize = 16;

/// The kernel's view of the connecting process.
#[derive(Clone, Copy, Debug)]
pub struct Cred {
    /// In our pid namespace; 0 when the sender's is not visible from ours.
    pub pid: libc::pid_t,
    pub uid: libc::uid_t,
}

fn address(job: &str, ctx: u32, nonce: u64) -> (libc::sockaddr_un, libc::socklen_t) {
    // SAFETY: sockaddr_un is plain integers; all-zero is a valid value.
    let mut a: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    a.sun_family = libc::AF_UNIX as libc::sa_family_t;
    // Abstract namespace: a leading NUL. The nonce makes the name unique; the
    // job id (cut to fit) only helps a human reading `ss -x`.
    let name = format!("gw-{nonce:016x}-{ctx}-{job}");
    let room = a.sun_path.len() - 1;
    let bytes = &name.as_bytes()[..name.len().min(room)];
    for (d, s) in a.sun_path[1..].iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sa_family_t>() + 1 + bytes.len();
    (a, len as libc::socklen_t)
}

fn socket() -> io::Result<OwnedFd> {
    // SAFETY: plain integer arguments.
    let fd = unsafe {
        libc::socket(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A context's listening socket.
pub struct Listener {
    fd: OwnedFd,
}

impl Listener {
    pub fn bind(job: &str, ctx: u32, nonce: u64, backlog: u32) -> io::Result<Listener> {
        let fd = socket()?;
        let (a, len) = address(job, ctx, nonce);
        // SAFETY: a is a valid sockaddr_un of `len` meaningful bytes.
        if unsafe { libc::bind(fd.as_raw_fd(), &a as *const _ as *const libc::sockaddr, len) } != 0
        {
            return Err(io::Error::last_os_error());
        }
        let backlog = backlog.min(4096) as libc::c_int;
        // SAFETY: fd is a bound socket.
        if unsafe { libc::listen(fd.as_raw_fd(), backlog) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Listener { fd })
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// One pending connection and its peer's credentials; `None` when there is none.
    pub fn accept(&self) -> io::Result<Option<(OwnedFd, Cred)>> {
        // SAFETY: null address pointers are allowed; flags are plain ints.
        let fd = unsafe {
            libc::accept4(
                self.fd.as_raw_fd(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            )
        };
        if fd < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::ECONNABORTED) | Some(libc::EINTR) => Ok(None),
                _ => Err(e),
            };
        }
        // SAFETY: a fresh descriptor owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut cred = libc::ucred {
            pid: 0,
            uid: 0,
            gid: 0,
        };
        let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
        // SAFETY: cred/len are valid out-pointers of the size given.
        let rc = unsafe {
            libc::getsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_PEERCRED,
                &mut cred as *mut _ as *mut libc::c_void,
                &mut len,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Some((
            fd,
            Cred {
                pid: cred.pid,
                uid: cred.uid,
            },
        )))
    }
}

/// Connects to context `ctx`'s listener and hands it `seg` with `hello`;
/// returns the connection (keep it: its EOF is the receiver's death notice).
pub fn offer(
    job: &str,
    ctx: u32,
    nonce: u64,
    hello: &[u8; HELLO_LEN],
    seg: &OwnedFd,
) -> io::Result<OwnedFd> {
    let sock = socket()?;
    let (a, len) = address(job, ctx, nonce);
    // SAFETY: a is a valid sockaddr_un of `len` meaningful bytes. A unix
    // connect does not wait for the accept: it fails with EAGAIN only when
    // the listener's backlog is full.
    if unsafe {
        libc::connect(
            sock.as_raw_fd(),
            &a as *const _ as *const libc::sockaddr,
            len,
        )
    } != 0
    {
        return Err(io::Error::last_os_error());
    }
    let mut iov = libc::iovec {
        iov_base: hello.as_ptr() as *mut libc::c_void,
        iov_len: HELLO_LEN,
    };
    let mut cbuf = [0u64; 4]; // u64s: aligned for cmsghdr
                              // SAFETY: CMSG_SPACE is a pure computation.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as usize;
    assert!(space <= std::mem::size_of_val(&cbuf));
    // SAFETY: msghdr is plain data; zero is valid.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = space as _;
    // SAFETY: msg points to a control buffer of `space` bytes, room for one
    // cmsghdr carrying one fd (checked above); CMSG_* stay inside it.
    unsafe {
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = libc::SCM_RIGHTS;
        (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut RawFd, seg.as_raw_fd());
    }
    // SAFETY: msg and everything it points to are live for the call.
    let n = unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    if n as usize != HELLO_LEN {
        return Err(io::Error::new(io::ErrorKind::WriteZero, "short hello"));
    }
    Ok(sock)
}

/// Reads a connection's hello and segment: `Ok(None)` when it has not
/// arrived yet; an error when the peer closed or sent anything else than one
/// 16-byte hello with exactly one descriptor (all received descriptors are
/// closed then).
pub fn receive(sock: &OwnedFd) -> io::Result<Option<([u8; HELLO_LEN], OwnedFd)>> {
    let mut hello = [0u8; HELLO_LEN + 1];
    let mut iov = libc::iovec {
        iov_base: hello.as_mut_ptr() as *mut libc::c_void,
        iov_len: hello.len(),
    };
    let mut cbuf = [0u64; 16]; // room for a few descriptors: extra ones are closed
                               // SAFETY: msghdr is plain data; zero is valid.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = std::mem::size_of_val(&cbuf) as _;
    // SAFETY: msg and its buffers are live for the call.
    let n = unsafe {
        libc::recvmsg(
            sock.as_raw_fd(),
            &mut msg,
            libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC,
        )
    };
    if n < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(None),
            _ => Err(e),
        };
    }
    // Take ownership of every descriptor received, whatever else is wrong.
    let mut fds: Vec<OwnedFd> = Vec::new();
    // SAFETY: the kernel filled msg_control with well-formed cmsghdrs
    // (within msg_controllen); CMSG_NXTHDR stays inside it. Each SCM_RIGHTS
    // entry holds (cmsg_len - CMSG_LEN(0)) / 4 descriptors now installed in
    // our table and owned by nobody else.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let bytes = ((*c).cmsg_len as usize).saturating_sub(libc::CMSG_LEN(0) as usize);
                let data = libc::CMSG_DATA(c) as *const RawFd;
                // At most what fits in `cbuf` (a few dozen): every one is
                // owned, so the extra ones are closed when `fds` drops.
                for i in 0..bytes / std::mem::size_of::<RawFd>() {
                    let fd = std::ptr::read_unaligned(data.add(i));
                    if fd >= 0 {
                        fds.push(OwnedFd::from_raw_fd(fd));
                    }
                }
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    let bad = |why: &str| Err(io::Error::new(io::ErrorKind::InvalidData, why.to_string()));
    if n == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "closed before its hello",
        ));
    }
    if msg.msg_flags & (libc::MSG_CTRUNC | libc::MSG_TRUNC) != 0 || n as usize != HELLO_LEN {
        return bad("malformed hello");
    }
    if fds.len() != 1 {
        return bad("hello without exactly one segment");
    }
    let mut h = [0u8; HELLO_LEN];
    h.copy_from_slice(&hello[..HELLO_LEN]);
    Ok(Some((h, fds.pop().expect("one descriptor"))))
}

/// Whether the other end of a connection has closed (its process is gone,
/// or it dropped the link): one non-blocking peek, for the waiting path only.
pub fn peer_gone(sock: &OwnedFd) -> bool {
    let mut b = [0u8; 1];
    // SAFETY: b is a valid 1-byte buffer.
    let n = unsafe {
        libc::recv(
            sock.as_raw_fd(),
            b.as_mut_ptr() as *mut libc::c_void,
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    if n == 0 {
        return true;
    }
    n < 0
        && !matches!(
            io::Error::last_os_error().raw_os_error(),
            Some(libc::EAGAIN) | Some(libc::EINTR)
        )
}
