//! Opening a connection without blocking.
//!
//! `connect` is called on demand, from whatever thread first sends to a
//! rank — also from inside a handler, while the context's progress is held.
//! A blocking connect (up to `GW_TCP_CONNECT_TIMEOUT`, 10 s) there froze
//! every link of the process for as long as an unreachable peer took to
//! time out. The socket is now non-blocking: `connect` returns a link at
//! once (messages queue behind the handshake as they always did), and each
//! poll checks the connects in progress with one `poll(2)` over their
//! sockets, sends the hello when one completes, and fails the link with an
//! error naming the rank when one fails or takes longer than
//! `GW_TCP_CONNECT_TIMEOUT`.

use super::*;

/// A connect in progress.
pub(super) struct PendingConnect {
    pub(super) conn: Arc<Conn>,
    pub(super) addr: SocketAddr,
    pub(super) started: Instant,
    pub(super) my_nonce: [u8; NONCE_LEN],
    /// The peer's other addresses, tried in turn when this one fails.
    pub(super) rest: Vec<SocketAddr>,
    /// Why each address tried so far failed.
    pub(super) failures: Vec<String>,
    /// Bytes written before the hello once connected: the request to a
    /// relay (`method::relay`), which then splices the connection through
    /// to the peer, so the handshake that follows runs end to end.
    pub(super) preamble: Option<Arc<[u8]>>,
}

/// `addr` as a C socket address.
fn sockaddr(addr: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain old data; all zeroes is a valid value.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            // SAFETY: sockaddr_storage is large and aligned enough for any
            // socket address; we write a sockaddr_in at its start.
            let sin = unsafe { &mut *(&mut storage as *mut _ as *mut libc::sockaddr_in) };
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = a.port().to_be();
            sin.sin_addr = libc::in_addr {
                s_addr: u32::from_ne_bytes(a.ip().octets()),
            };
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            // SAFETY: as above, for a sockaddr_in6.
            let sin6 = unsafe { &mut *(&mut storage as *mut _ as *mut libc::sockaddr_in6) };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = a.port().to_be();
            sin6.sin6_flowinfo = a.flowinfo();
            sin6.sin6_addr = libc::in6_addr {
                s6_addr: a.ip().octets(),
            };
            sin6.sin6_scope_id = a.scope_id();
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len as libc::socklen_t)
}

/// Starts a non-blocking connect; `true` when it completed at once.
fn start_connect(addr: &SocketAddr) -> io::Result<(TcpStream, bool)> {
    let family = match addr {
        SocketAddr::V4(_) => libc::AF_INET,
        SocketAddr::V6(_) => libc::AF_INET6,
    };
    // SAFETY: socket has no memory arguments; the result is checked.
    let fd = unsafe {
        libc::socket(
            family,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor we own exclusively from here on.
    let stream = TcpStream::from(unsafe { OwnedFd::from_raw_fd(fd) });
    let (sa, len) = sockaddr(addr);
    // SAFETY: `sa` is a valid socket address of `len` bytes, live for the call.
    let r = unsafe { libc::connect(fd, &sa as *const _ as *const libc::sockaddr, len) };
    if r == 0 {
        return Ok((stream, true));
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        // EINTR: the connect goes on asynchronously, like EINPROGRESS.
        Some(libc::EINPROGRESS | libc::EINTR) => Ok((stream, false)),
        _ => Err(e),
    }
}

impl TcpMethod {
    /// Opens a connection to `peer` at the first of `addrs` that accepts
    /// one (best first; a connect that fails later moves on to the next in
    /// `advance_connects`); see the module doc.
    pub(super) fn open(&self, peer: u32, addrs: Vec<SocketAddr>) -> Result<Arc<Conn>> {
        self.open_with(peer, addrs, None)
    }

    /// Like [`open`](Self::open), connecting to a relay at `addrs` that
    /// gets `preamble` (its request) before the hello.
    pub(super) fn open_via_relay(
        &self,
        peer: u32,
        addrs: Vec<SocketAddr>,
        preamble: Vec<u8>,
    ) -> Result<Arc<Conn>> {
        self.open_with(peer, addrs, Some(preamble.into()))
    }

    fn open_with(
        &self,
        peer: u32,
        addrs: Vec<SocketAddr>,
        preamble: Option<Arc<[u8]>>,
    ) -> Result<Arc<Conn>> {
        let mut rest = addrs.into_iter();
        let mut failures = Vec::new();
        let (stream, done, addr) = loop {
            let Some(addr) = rest.next() else {
                return Err(Error::LinkFailed {
                    peer,
                    method: "tcp",
                    reason: all_failed(peer, &failures),
                });
            };
            match start_connect(&addr) {
                Ok((stream, done)) => break (stream, done, addr),
                Err(e) => failures.push(format!("{addr}: {e}")),
            }
        };
        let my_nonce = auth::try_nonce().map_err(|e| Error::io("tcp: handshake", e))?;
        let conn = self.register(stream, HsState::Connecting, peer)?;
        let pending = PendingConnect {
            conn: conn.clone(),
            addr,
            started: Instant::now(),
            my_nonce,
            rest: rest.collect(),
            failures,
            preamble,
        };
        if done {
            self.connected(&pending).map_err(|reason| {
                self.close(&conn);
                Error::LinkFailed {
                    peer,
                    method: "tcp",
                    reason,
                }
            })?;
        } else {
            let mut list = self.connecting.lock().unwrap_or_else(|e| e.into_inner());
            list.push(pending);
            self.connects_pending.store(list.len(), Ordering::Relaxed);
        }
        Ok(conn)
    }

    /// The connect of `p` to `p.addr` failed (`why`): starts one to the
    /// next address on a fresh socket put in place of the connection's own
    /// (same descriptor number, so the connection, its queued output and its
    /// table entry stay). `Ok(true)` when it completed at once; `Err` with
    /// the whole story when no address is left.
    fn next_address(
        &self,
        p: &mut PendingConnect,
        why: String,
    ) -> std::result::Result<bool, String> {
        let peer = p.conn.peer.load(Ordering::Relaxed);
        p.failures.push(why);
        while !p.rest.is_empty() {
            let addr = p.rest.remove(0);
            match start_connect(&addr) {
                Ok((stream, done)) => {
                    self.replace_socket(&p.conn, stream)
                        .map_err(|e| format!("tcp: switching to {addr} for rank {peer}: {e}"))?;
                    if self.verbose >= 2 {
                        crate::say!(
                            "gw[{}]: tcp: {}; trying rank {peer} at {addr}",
                            self.me,
                            p.failures.last().map_or("", String::as_str)
                        );
                    }
                    p.addr = addr;
                    p.started = Instant::now();
                    return Ok(done);
                }
                Err(e) => p.failures.push(format!("{addr}: {e}")),
            }
        }
        Err(all_failed(peer, &p.failures))
    }

    /// Puts `stream`'s socket in place of `conn`'s (dup3 onto its number).
    fn replace_socket(&self, conn: &Conn, stream: TcpStream) -> io::Result<()> {
        self.tune(&stream);
        let conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        let fd = conn.fd.as_raw_fd();
        if conn.in_epoll.load(Ordering::Relaxed) {
            // SAFETY: removes our own descriptor from our own epoll set.
            unsafe {
                libc::epoll_ctl(
                    self.epoll.as_raw_fd(),
                    libc::EPOLL_CTL_DEL,
                    fd,
                    std::ptr::null_mut(),
                )
            };
            conn.in_epoll.store(false, Ordering::Relaxed);
        }
        // SAFETY: both descriptors are open and ours; dup3 atomically closes
        // the old socket behind `fd` and makes `fd` name the new one.
        if unsafe { libc::dup3(stream.as_raw_fd(), fd, libc::O_CLOEXEC) } < 0 {
            return Err(io::Error::last_os_error());
        }
        drop(stream);
        self.sync_epoll(&conns).map_err(io::Error::other)
    }

    /// The TCP connection is established: says hello.
    fn connected(&self, p: &PendingConnect) -> std::result::Result<(), String> {
        let peer = p.conn.peer.load(Ordering::Relaxed);
        let _ = p.conn.established.set(Instant::now());
        let mut hello = [0u8; HELLO_LEN];
        hello[..4].copy_from_slice(MAGIC);
        hello[4..8].copy_from_slice(&self.me.to_le_bytes());
        hello[8..12].copy_from_slice(&peer.to_le_bytes());
        hello[12..].copy_from_slice(&p.my_nonce);
        // The state first: a challenge can only follow the hello.
        p.conn.inp.lock().state = HsState::AwaitChallenge {
            my_nonce: p.my_nonce,
        };
        if let Some(pre) = &p.preamble {
            p.conn
                .write_raw(pre)
                .map_err(|e| format!("tcp: relay request for rank {peer} to {}: {e}", p.addr))?;
        }
        p.conn
            .write_raw(&hello)
            .map_err(|e| format!("tcp handshake with rank {peer} at {}: {e}", p.addr))?;
        if self.verbose >= 2 {
            crate::say!(
                "gw[{}]: tcp: connected to rank {peer} at {}",
                self.me,
                p.addr
            );
        }
        Ok(())
    }

    /// Completes, fails or times out the connects in progress (one
    /// `poll(2)` over their sockets; one load when there are none).
    pub(super) fn advance_connects(&self, sink: &mut dyn Sink) {
        if self.connects_pending.load(Ordering::Relaxed) == 0 {
            return;
        }
        let list = std::mem::take(&mut *self.connecting.lock().unwrap_or_else(|e| e.into_inner()));
        let mut fds: Vec<libc::pollfd> = list
            .iter()
            .map(|p| libc::pollfd {
                fd: p.conn.fd.as_raw_fd(),
                events: libc::POLLOUT,
                revents: 0,
            })
            .collect();
        // SAFETY: `fds` is a live array of pollfd of the length passed.
        unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 0) };
        let now = Instant::now();
        let mut still = Vec::new();
        for (p, pfd) in list.into_iter().zip(&fds) {
            if p.conn.out.lock().broken.is_some() {
                // Closed meanwhile (shutdown): nothing to complete.
                continue;
            }
            let mut p = p;
            let failed = if pfd.revents == 0 {
                if now.duration_since(p.started) < self.connect_timeout {
                    still.push(p);
                    continue;
                }
                format!(
                    "{} timed out after {} s (GW_TCP_CONNECT_TIMEOUT)",
                    p.addr,
                    self.connect_timeout.as_secs()
                )
            } else {
                match so_error(p.conn.fd.as_raw_fd()) {
                    Ok(()) => {
                        if let Err(why) = self.connected(&p) {
                            self.broken(&p.conn, sink, why);
                        }
                        continue;
                    }
                    Err(e) => format!("{}: {e}", p.addr),
                }
            };
            match self.next_address(&mut p, failed) {
                Ok(true) => {
                    if let Err(why) = self.connected(&p) {
                        self.broken(&p.conn, sink, why);
                    }
                }
                Ok(false) => still.push(p),
                Err(why) => self.broken(&p.conn, sink, why),
            }
        }
        let mut list = self.connecting.lock().unwrap_or_else(|e| e.into_inner());
        list.extend(still);
        self.connects_pending.store(list.len(), Ordering::Relaxed);
    }
}

/// The outcome of a non-blocking connect (`SO_ERROR`).
fn so_error(fd: RawFd) -> io::Result<()> {
    let mut err: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: passes a pointer to a live c_int and its exact size.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            &mut err as *mut _ as *mut libc::c_void,
            &mut len,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    if err != 0 {
        return Err(io::Error::from_raw_os_error(err));
    }
    Ok(())
}

/// The message when no address of `peer` could be connected to.
fn all_failed(peer: u32, failures: &[String]) -> String {
    match failures {
        [] => format!(
            "rank {peer} published no address reachable from here \
             (loopback only, or every interface left out by GW_IFACE)"
        ),
        [one] => format!("connect to rank {peer} at {one}"),
        many => format!(
            "connect to rank {peer} failed at every address it published: {} \
             (GW_IFACE chooses the interfaces)",
            many.join("; ")
        ),
    }
}
