//! One connection: its output queue, input buffer, raw sends, and the link over it.

use super::*;

/// Messages up to this size (with headers) are copied into one buffer and
/// sent flat rather than as a gather list (see `Conn::send_vectored`).
const SMALL_GATHER: usize = 256;

/// Copies a short piece of a small message with fixed-size moves: a call to
/// `memcpy` per piece (4-byte frame header, 8-byte request header, 24-byte
/// MPI envelope, a few bytes of data) costs more than the piece.
#[inline(always)]
fn copy_short(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    if n > 32 {
        dst.copy_from_slice(src);
    } else if n >= 16 {
        // Two 16-byte moves that overlap rather than overrun.
        dst[..16].copy_from_slice(&src[..16]);
        dst[n - 16..n].copy_from_slice(&src[n - 16..]);
    } else if n >= 8 {
        dst[..8].copy_from_slice(&src[..8]);
        dst[n - 8..n].copy_from_slice(&src[n - 8..]);
    } else if n >= 4 {
        dst[..4].copy_from_slice(&src[..4]);
        dst[n - 4..n].copy_from_slice(&src[n - 4..]);
    } else {
        // A loop of at most three bytes, not a call to memcpy.
        for (d, s) in dst.iter_mut().zip(src) {
            *d = *s;
        }
    }
}

pub(super) struct Out {
    /// Payload may be written (connector: after the acceptor proved itself).
    pub(super) ready: bool,
    pub(super) buf: Vec<u8>,
    pub(super) off: usize,
    pub(super) broken: Option<String>,
    /// This connection lost the tie: payload goes to `held`, never to the socket.
    pub(super) hold: bool,
    /// Framed payload waiting to move to the pair's connection.
    pub(super) held: Vec<u8>,
    /// `hold` is set and the pair's connection has not taken over yet
    /// (neither merged nor given up): counted in the method's `holding`,
    /// so the held payload counts as pending output.
    pub(super) awaiting_pair: bool,
    /// Messages and bytes sent through this connection (counted under this
    /// lock, see `Link::counts_sends`).
    pub(super) sent_msgs: u64,
    pub(super) sent_bytes: u64,
}

impl Out {
    /// Payload may have reached the socket: this connection can no longer
    /// give way to another without reordering.
    pub(super) fn committed(&self) -> bool {
        self.ready && !self.hold
    }
}

pub(super) struct In {
    pub(super) state: HsState,
    pub(super) rx: RxBuf,
    pub(super) my_nonce: [u8; NONCE_LEN],
    /// A large message whose rest is read straight to where the sink
    /// placed it (see `Sink::place`).
    pub(super) placing: Option<Placing>,
    /// The last frame was placed: the next read is short (see
    /// `FIRST_READ_AFTER_PLACED`), so that a large frame behind it is
    /// placed too rather than read whole into the buffer.
    pub(super) after_placed: bool,
}

/// A message being read into its placement.
pub(super) struct Placing {
    /// The message's first `placement.at` bytes.
    pub(super) head: [u8; super::super::PLACE_HEAD],
    pub(super) placement: super::super::Destination,
    /// Bytes of the placed part written so far.
    pub(super) got: usize,
}

pub(super) struct Conn {
    pub(super) fd: OwnedFd,
    pub(super) peer: AtomicU32,
    pub(super) out: TryLock<Out>,
    pub(super) inp: TryLock<In>,
    /// Bytes queued in `out.buf` (read without the lock by poll's flush scan).
    pub(super) queued: AtomicUsize,
    /// When it was accepted or its connect completed (for
    /// `GW_TCP_HANDSHAKE_TIMEOUT`; a connect in progress has its own timeout).
    pub(super) established: std::sync::OnceLock<Instant>,
    /// Not yet authenticated (counted in the method's `handshaking`).
    pub(super) in_handshake: AtomicBool,
    /// Direct reads in a row that found nothing (see `COLD_AFTER`).
    pub(super) idle_reads: AtomicU32,
    /// Registered with the method's epoll set (changed under `conns`' lock).
    pub(super) in_epoll: AtomicBool,
    /// We connected (rather than accepted) it.
    pub(super) outgoing: bool,
    /// The pair's connection, once this one lost the tie (see the module doc).
    pub(super) redirect: std::sync::OnceLock<Arc<Conn>>,
}

impl Conn {
    pub(super) fn peer_name(&self) -> String {
        match self.peer.load(Ordering::Relaxed) {
            u32::MAX => "an unknown rank".into(),
            p => format!("rank {p}"),
        }
    }

    /// Gathered, non-blocking send that never raises SIGPIPE.
    pub(super) fn send_vectored(&self, iov: &[IoSlice<'_>]) -> io::Result<usize> {
        if let [one] = iov {
            return self.send_flat(one);
        }
        loop {
            // SAFETY: IoSlice is ABI-compatible with iovec; the msghdr only
            // points at `iov`, which outlives the call.
            let n = unsafe {
                let mut msg: libc::msghdr = std::mem::zeroed();
                msg.msg_iov = iov.as_ptr() as *mut libc::iovec;
                msg.msg_iovlen = iov.len() as _;
                libc::sendmsg(
                    self.fd.as_raw_fd(),
                    &msg,
                    libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
                )
            };
            if n >= 0 {
                return Ok(n as usize);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    /// Non-blocking `send` of one buffer that never raises SIGPIPE.
    pub(super) fn send_flat(&self, bytes: &[u8]) -> io::Result<usize> {
        loop {
            // SAFETY: `bytes` is a live, initialized buffer of the length passed.
            let n = unsafe {
                libc::send(
                    self.fd.as_raw_fd(),
                    bytes.as_ptr() as *const libc::c_void,
                    bytes.len(),
                    libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
                )
            };
            if n >= 0 {
                return Ok(n as usize);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    /// Writes a short handshake message completely (a fresh socket always has room).
    pub(super) fn write_raw(&self, bytes: &[u8]) -> io::Result<()> {
        let mut off = 0;
        let mut spins = 0;
        while off < bytes.len() {
            match self.send_vectored(&[IoSlice::new(&bytes[off..])]) {
                Ok(n) => off += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && spins < 1000 => {
                    spins += 1;
                    std::thread::yield_now();
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// A link is a connection plus what a sender needs of the method.
pub(super) struct TcpLink {
    pub(super) conn: Arc<Conn>,
    pub(super) max_queued: usize,
    /// How long a sender waits for the pair's connection to authenticate
    /// when output held for it reached its bound.
    pub(super) handshake_timeout: Duration,
    /// Shared with the method: how many connections have queued output.
    pub(super) queued_conns: Arc<AtomicUsize>,
}

/// The least bound on output held for the pair's connection (see
/// `TcpLink::held_bound`), whatever `GW_TCP_MAX_QUEUED` says.
const MIN_HELD_BOUND: usize = 64 << 10;

impl TcpLink {
    /// Output a connection that lost the simultaneous-connect tie holds
    /// (copied, waiting for the pair's connection to authenticate) is
    /// bounded like a queue, by `GW_TCP_MAX_QUEUED`; a single larger
    /// message is still taken when nothing is held.
    fn held_bound(&self) -> usize {
        self.max_queued.max(MIN_HELD_BOUND)
    }

    /// The held output of `conn` reached its bound: drives progress until
    /// the pair's connection takes it over (then sends there), and fails
    /// with a clear error when progress cannot be driven (inside a handler)
    /// or the pair's connection does not authenticate in time.
    #[cold]
    fn wait_for_the_pair(
        &self,
        conn: &Arc<Conn>,
        iov: &[IoSlice<'_>],
        waiter: &dyn Waiter,
    ) -> Result<()> {
        let peer = conn.peer.load(Ordering::Relaxed);
        let deadline = Instant::now() + self.handshake_timeout;
        loop {
            if conn.redirect.get().is_some() {
                // The winner never gives way: this send goes straight there.
                return self.send(iov, waiter);
            }
            {
                let out = conn.out.lock();
                if let Some(why) = &out.broken {
                    return Err(Error::LinkFailed {
                        peer,
                        method: "tcp",
                        reason: why.clone(),
                    });
                }
                if !out.hold {
                    // The pair's connection died before it authenticated:
                    // this one took its output back (see `release_held`).
                    drop(out);
                    return self.send(iov, waiter);
                }
            }
            let why = if Instant::now() >= deadline {
                "did not authenticate in time (GW_TCP_HANDSHAKE_TIMEOUT)"
            } else if !waiter.progress() {
                "is not authenticated yet, and this send cannot wait for it here (inside a handler)"
            } else {
                continue;
            };
            return Err(Error::LinkFailed {
                peer,
                method: "tcp",
                reason: format!(
                    "rank {peer} and this rank connected to each other at once; output for \
                     rank {peer} is held until the connection rank {peer} made is \
                     authenticated, and more than {} bytes (GW_TCP_MAX_QUEUED) would be held: \
                     that connection {why}",
                    self.held_bound()
                ),
            });
        }
    }
}

impl Link for TcpLink {
    fn method(&self) -> &'static str {
        "tcp"
    }

    fn counts_sends(&self) -> bool {
        true
    }

    fn sent(&self) -> (u64, u64) {
        // A redirected link's later messages went through the winner.
        let mut total = (0, 0);
        for c in std::iter::once(&self.conn).chain(self.conn.redirect.get()) {
            let out = c.out.lock();
            total.0 += out.sent_msgs;
            total.1 += out.sent_bytes;
        }
        total
    }

    fn rtt(&self) -> Option<std::time::Duration> {
        let conn = self.conn.redirect.get().unwrap_or(&self.conn);
        kernel_rtt(conn.fd.as_raw_fd())
    }

    fn stalled(&self, for_at_least: std::time::Duration) -> bool {
        let conn = self.conn.redirect.get().unwrap_or(&self.conn);
        kernel_stalled(conn.fd.as_raw_fd(), for_at_least)
    }

    fn send(&self, iov: &[IoSlice<'_>], waiter: &dyn Waiter) -> Result<()> {
        let total = iov_len(iov);
        let hdr = u32::try_from(total)
            .map_err(|_| Error::LinkFailed {
                peer: self.conn.peer.load(Ordering::Relaxed),
                method: "tcp",
                reason: format!("message of {total} bytes exceeds the 4 GiB frame limit"),
            })?
            .to_le_bytes();
        // Follow the tie's outcome (at most one hop: a winner never gives way).
        let mut conn = self.conn.redirect.get().unwrap_or(&self.conn);
        let mut out = conn.out.lock();
        if let Some(w) = conn.redirect.get() {
            // Redirected between our look and the lock.
            drop(out);
            conn = w;
            out = conn.out.lock();
        }
        if let Some(why) = &out.broken {
            return Err(Error::LinkFailed {
                peer: conn.peer.load(Ordering::Relaxed),
                method: "tcp",
                reason: why.clone(),
            });
        }
        if out.hold && !out.held.is_empty() && out.held.len() + 4 + total > self.held_bound() {
            drop(out);
            return self.wait_for_the_pair(conn, iov, waiter);
        }
        // Every path below takes the message (sent, queued or held).
        out.sent_msgs += 1;
        out.sent_bytes += total as u64;
        if out.hold {
            // Lost the tie, the pair's connection is not authenticated yet.
            out.held.extend_from_slice(&hdr);
            for s in iov {
                out.held.extend_from_slice(s);
            }
            return Ok(());
        }
        let mut written = 0;
        if out.ready && out.off == out.buf.len() {
            // Fast path: straight to the kernel, header and payload gathered.
            // A small message in several pieces (frame header, request
            // header, envelope, data) is copied into one flat buffer and sent
            // with one `send`: the kernel's per-segment work and the iovec
            // import cost more than copying a few dozen bytes.
            let sent = if 4 + total <= SMALL_GATHER {
                let mut flat = [0u8; SMALL_GATHER];
                flat[..4].copy_from_slice(&hdr);
                let mut at = 4;
                for s in iov {
                    copy_short(&mut flat[at..at + s.len()], s);
                    at += s.len();
                }
                Some(conn.send_flat(&flat[..at]))
            } else if iov.len() < 8 {
                let mut v: [IoSlice<'_>; 8] = [IoSlice::new(&[]); 8];
                v[0] = IoSlice::new(&hdr);
                v[1..=iov.len()].copy_from_slice(iov);
                Some(conn.send_vectored(&v[..=iov.len()]))
            } else {
                None
            };
            if let Some(res) = sent {
                written = match res {
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
                    Err(e) => {
                        out.broken = Some(format!("write: {e}"));
                        out.sent_msgs -= 1;
                        out.sent_bytes -= total as u64;
                        return Err(Error::LinkFailed {
                            peer: conn.peer.load(Ordering::Relaxed),
                            method: "tcp",
                            reason: e.to_string(),
                        });
                    }
                };
            }
            if written == 4 + total {
                return Ok(());
            }
        }
        // Queue what the kernel did not take.
        let was_empty = out.buf.len() == out.off;
        let mut skip = written;
        for s in std::iter::once(&hdr[..]).chain(iov.iter().map(|s| &**s)) {
            if skip >= s.len() {
                skip -= s.len();
                continue;
            }
            out.buf.extend_from_slice(&s[skip..]);
            skip = 0;
        }
        let queued = out.buf.len() - out.off;
        conn.queued.store(queued, Ordering::Relaxed);
        if was_empty {
            self.queued_conns.fetch_add(1, Ordering::Relaxed);
        }
        drop(out);
        // Bound user-space queueing: wait (driving progress) while over the limit.
        while conn.queued.load(Ordering::Relaxed) > self.max_queued {
            if !waiter.progress() {
                break;
            }
            if let Some(why) = &conn.out.lock().broken {
                return Err(Error::LinkFailed {
                    peer: conn.peer.load(Ordering::Relaxed),
                    method: "tcp",
                    reason: why.clone(),
                });
            }
        }
        Ok(())
    }
}

/// Whether the kernel has unacknowledged data on a TCP socket and heard no
/// ACK for at least `for_at_least` (`TCP_INFO`'s `tcpi_unacked` and
/// `tcpi_last_ack_recv`, ms). A peer that is busy (not reading) still has
/// its kernel acknowledge, or advertise a zero window, which counts too.
fn kernel_stalled(fd: std::os::fd::RawFd, for_at_least: std::time::Duration) -> bool {
    // SAFETY: tcp_info is plain old data; all zeroes is a valid value.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: as in `kernel_rtt`: a live tcp_info of `len` bytes, checked result.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            &mut info as *mut libc::tcp_info as *mut libc::c_void,
            &mut len,
        )
    };
    if rc != 0 || u128::from(info.tcpi_last_ack_recv) < for_at_least.as_millis() {
        return false;
    }
    // Data waiting in the kernel counts too: a path that rejects our
    // packets locally (a firewall's reject) leaves them unsent, not unacked.
    let mut outq: libc::c_int = 0;
    // SAFETY: TIOCOUTQ writes one c_int through the pointer, a live local.
    let rc = unsafe { libc::ioctl(fd, libc::TIOCOUTQ, &mut outq as *mut libc::c_int) };
    info.tcpi_unacked > 0 || (rc == 0 && outq > 0)
}

/// The kernel's smoothed round-trip time of a TCP socket (`TCP_INFO`'s
/// `tcpi_rtt`, µs), or `None` if it cannot be read or is not measured yet.
fn kernel_rtt(fd: std::os::fd::RawFd) -> Option<std::time::Duration> {
    // SAFETY: tcp_info is plain old data; all zeroes is a valid value.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: `info` is a live tcp_info of `len` bytes; the kernel writes at
    // most `len` bytes and says how many; the result is checked.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            &mut info as *mut libc::tcp_info as *mut libc::c_void,
            &mut len,
        )
    };
    (rc == 0 && info.tcpi_rtt > 0)
        .then(|| std::time::Duration::from_micros(u64::from(info.tcpi_rtt)))
}
