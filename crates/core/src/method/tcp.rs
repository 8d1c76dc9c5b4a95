//! The `tcp` method: stream sockets, epoll-driven, connected on demand.
//!
//! * One listening socket per context; its address is the descriptor.
//! * A connection is usable in both directions: whoever connects first, both
//!   ends send on it (an accepted, authenticated connection is reused).
//! * One connection per pair, also when both ends connect at the same moment
//!   (the first exchange of a job is usually symmetric: a barrier). Two
//!   connections, one per direction, cost a pure ACK packet per message and
//!   ~50% latency against one (`/tmp`-style raw C test: 7.9 vs 5.3 µs). The
//!   acceptor of a hello from a peer it is itself connecting to answers
//!   `USE_MINE` when its own connection already carried payload or it is the
//!   lower context (see `tie_break`); the connector acts on the flag only once
//!   the acceptor's proof checks out. The loser's payload is *held* (never
//!   written to its socket) and moved, in order, to the winner once that one
//!   is authenticated; later sends follow `redirect`. The loser completes its
//!   handshake and then idles.
//! * Every connection is authenticated (see [`crate::auth`]) before a single
//!   payload byte is delivered: connector sends `hello`, acceptor answers with
//!   its nonce and proof, connector answers with its proof. The connector may
//!   queue data behind its proof; the acceptor buffers it and delivers nothing
//!   until the proof checks out, and drops the connection if it does not.
//! * Frames are `[u32 little-endian length][message]`.
//! * Sends write directly with `sendmsg` (gathered, `MSG_NOSIGNAL`); what the
//!   kernel does not take is copied to a per-connection queue that `poll`
//!   flushes, so a send never deadlocks against a peer that is also sending.
//!   A sender whose queue grows beyond `TCP_MAX_QUEUED` drives progress until
//!   it drains (when it may), which bounds memory.
//! * Up to `DIRECT_POLL_MAX` connections are read directly with `recv`, and
//!   are *not* registered with epoll while no thread sleeps on it: a socket
//!   in an epoll set pays the epoll wake-up callback on every packet it
//!   receives, 0.12-0.19 µs of a 2.6 µs loopback one-way on our 2-core
//!   guest (raw C ping-pong with and without the registration). A thread
//!   about to sleep registers them (`before_block`) and drops them when it
//!   wakes; epoll always watches the listener, and every connection once
//!   there are more than `DIRECT_POLL_MAX`.

use super::{iov_len, Cost, Link, Method, MethodEnv, MethodInfo, PollClass, Sink, Waiter};
use crate::auth::{self, Role, NONCE_LEN, PROOF_LEN};
use crate::error::{Error, Result};
use crate::params::{Kind, ParamDecl};
use crate::sync::TryLock;
use std::collections::HashMap;
use std::io::{self, IoSlice};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub const INFO: MethodInfo = MethodInfo {
    name: "tcp",
    summary: "TCP sockets (epoll, TCP_NODELAY, authenticated, connected on demand)",
    params: PARAMS,
    init,
};

const PARAMS: &[ParamDecl] = &[
    ParamDecl {
        name: "TCP_ADDR",
        default: "127.0.0.1",
        kind: Kind::Text,
        help: "IP address to listen on and publish in the descriptor (use the host's address on \
               a real network; 0.0.0.0 is not publishable).",
    },
    ParamDecl {
        name: "TCP_SNDBUF",
        default: "0",
        kind: Kind::Size {
            min: 0,
            max: 1 << 30,
        },
        help: "SO_SNDBUF for every connection; 0 = kernel default (auto-tuned).",
    },
    ParamDecl {
        name: "TCP_RCVBUF",
        default: "0",
        kind: Kind::Size {
            min: 0,
            max: 1 << 30,
        },
        help: "SO_RCVBUF for every connection; 0 = kernel default (auto-tuned).",
    },
    ParamDecl {
        name: "TCP_MAX_MSG",
        default: "2g",
        kind: Kind::Size {
            min: 1024,
            max: u32::MAX as u64,
        },
        help: "Largest message accepted from a peer; a longer frame header is a protocol error.",
    },
    ParamDecl {
        name: "TCP_MAX_QUEUED",
        default: "8m",
        kind: Kind::Size {
            min: 0,
            max: 1 << 40,
        },
        help: "Bytes a connection may queue in user space before a sender waits (driving \
               progress) for the queue to drain.",
    },
    ParamDecl {
        name: "TCP_CONNECT_TIMEOUT",
        default: "10",
        kind: Kind::UInt { min: 1, max: 3600 },
        help: "Seconds to wait for a TCP connection to be established.",
    },
];

const MAGIC: &[u8; 4] = b"GWT2";
/// hello = magic, connector id, acceptor id it expects, nonce.
const HELLO_LEN: usize = 4 + 4 + 4 + NONCE_LEN;
/// challenge = acceptor's nonce, acceptor's proof, flags.
const CHALLENGE_LEN: usize = NONCE_LEN + PROOF_LEN + 1;
/// Challenge flag: "I am connecting to you too, and my connection is the
/// pair's": the connector must not send payload on this one.
const USE_MINE: u8 = 1;
const LISTENER_TOKEN: u64 = u64::MAX;
/// A connection whose last this-many direct reads found nothing is "cold":
/// the direct path skips it and leaves it to the epoll pass (every
/// `EPOLL_EVERY`th poll). Two ranks that connect to each other at the same moment keep two
/// connections, each carrying one direction; without this, every spin of a
/// waiting rank pays a second, always-empty `recv` — and a second socket
/// lock that the sender's softirq contends for.
const COLD_AFTER: u32 = 256;

/// With direct reads, every this-many polls go through epoll instead (new
/// connections, cold ones). Each such poll is an extra system call on the
/// latency path: at 16 it was one poll in sixteen; from 64 to 256 (with
/// udp's unused polls likewise) an MPI ping-pong between two emulated hosts
/// went from 3.445 to 3.353 µs one-way (`bench/mpi-ab.sh`, 8 interleaved
/// runs each, medians). A new connection waits at most this many polls, once.
const EPOLL_EVERY: u64 = 256;

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

/// Up to this many connections, `poll` reads them directly instead of asking epoll.
const DIRECT_POLL_MAX: usize = 4;

fn init(env: &MethodEnv) -> Result<Option<Arc<dyn Method>>> {
    let addr: std::net::IpAddr =
        env.params
            .text("TCP_ADDR")
            .parse()
            .map_err(|_| Error::BadParam {
                var: "GW_TCP_ADDR".into(),
                value: env.params.text("TCP_ADDR").into(),
                reason: "expected an IP address".into(),
            })?;
    let listener =
        TcpListener::bind((addr, 0)).map_err(|e| Error::io(format!("tcp: bind {addr}"), e))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| Error::io("tcp: set_nonblocking", e))?;
    let local = listener
        .local_addr()
        .map_err(|e| Error::io("tcp: local_addr", e))?;
    // SAFETY: epoll_create1 has no memory arguments; the result is checked.
    let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if ep < 0 {
        return Err(Error::io("tcp: epoll_create1", io::Error::last_os_error()));
    }
    // SAFETY: `ep` is a fresh descriptor we own exclusively from here on.
    let epoll = unsafe { OwnedFd::from_raw_fd(ep) };
    epoll_add(epoll.as_raw_fd(), listener.as_raw_fd(), LISTENER_TOKEN)?;
    Ok(Some(Arc::new(TcpMethod {
        me: env.job.ctx_id,
        secret: env.job.secret,
        verbose: env.job.verbose,
        local,
        listener,
        epoll,
        sndbuf: env.params.num("TCP_SNDBUF") as usize,
        rcvbuf: env.params.num("TCP_RCVBUF") as usize,
        max_msg: env.params.num("TCP_MAX_MSG") as usize,
        max_queued: env.params.num("TCP_MAX_QUEUED") as usize,
        connect_timeout: Duration::from_secs(env.params.num("TCP_CONNECT_TIMEOUT")),
        conns: Mutex::new(HashMap::new()),
        direct: Mutex::new(Arc::from(Vec::new())),
        direct_gen: AtomicU64::new(1),
        blockers: AtomicUsize::new(0),
        poll_list: TryLock::new((0, Arc::from(Vec::new()))),
        polls: AtomicU64::new(0),
        by_peer: Mutex::new(HashMap::new()),
        queued_conns: Arc::new(AtomicUsize::new(0)),
        refused: AtomicU64::new(0),
        merged: AtomicU64::new(0),
        down: AtomicBool::new(false),
    })))
}

fn epoll_add(ep: RawFd, fd: RawFd, token: u64) -> Result<()> {
    let mut ev = libc::epoll_event {
        events: libc::EPOLLIN as u32,
        u64: token,
    };
    // SAFETY: `ev` is a valid epoll_event for the duration of the call.
    if unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, &mut ev) } < 0 {
        return Err(Error::io("tcp: epoll_ctl", io::Error::last_os_error()));
    }
    Ok(())
}

pub struct TcpMethod {
    me: u32,
    secret: [u8; 32],
    verbose: u8,
    local: SocketAddr,
    listener: TcpListener,
    epoll: OwnedFd,
    sndbuf: usize,
    rcvbuf: usize,
    max_msg: usize,
    max_queued: usize,
    connect_timeout: Duration,
    /// Every open connection by file descriptor (the epoll token).
    conns: Mutex<HashMap<RawFd, Arc<Conn>>>,
    /// Snapshot of the open connections, for polling them directly (see `poll`).
    direct: Mutex<Arc<[Arc<Conn>]>>,
    /// Bumped after every change of `direct`.
    direct_gen: AtomicU64,
    /// `poll`'s own copy of `direct`, with the generation it was taken at.
    /// Reading `direct` itself on every poll cost a mutex round trip and two
    /// reference-count updates: four locked instructions in the spin loop
    /// that waits for the next message, where this costs one.
    poll_list: TryLock<(u64, Arc<[Arc<Conn>]>)>,
    /// Threads sleeping on the epoll set (see `before_block`); changed
    /// under `conns`' lock.
    blockers: AtomicUsize,
    /// Polls so far (decides when the direct path also runs epoll).
    polls: AtomicU64,
    /// The connection used to send to each peer.
    by_peer: Mutex<HashMap<u32, Arc<Conn>>>,
    /// How many connections have queued output (so poll skips the flush scan when zero).
    queued_conns: Arc<AtomicUsize>,
    /// Connections refused by authentication (observable for tests and `gwinfo`).
    refused: AtomicU64,
    /// Our connections that lost a simultaneous-connect tie and moved their
    /// payload to the peer's (see the module doc).
    merged: AtomicU64,
    down: AtomicBool,
}

impl TcpMethod {
    /// Connections refused because they failed authentication.
    pub fn refused_connections(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    fn tune(&self, s: &TcpStream) {
        let _ = s.set_nodelay(true);
        let fd = s.as_raw_fd();
        for (opt, val) in [
            (libc::SO_SNDBUF, self.sndbuf),
            (libc::SO_RCVBUF, self.rcvbuf),
        ] {
            if val > 0 {
                let v = val as libc::c_int;
                // SAFETY: passes a pointer to a live c_int with its exact size.
                unsafe {
                    libc::setsockopt(
                        fd,
                        libc::SOL_SOCKET,
                        opt,
                        &v as *const _ as *const libc::c_void,
                        4,
                    );
                }
            }
        }
    }

    fn register(&self, stream: TcpStream, state: HsState, peer: u32) -> Result<Arc<Conn>> {
        stream
            .set_nonblocking(true)
            .map_err(|e| Error::io("tcp: set_nonblocking", e))?;
        self.tune(&stream);
        let fd = stream.as_raw_fd();
        // SAFETY: into_raw_fd transfers ownership of the descriptor to the OwnedFd.
        let owned = unsafe { OwnedFd::from_raw_fd(stream.into_raw_fd()) };
        let conn = Arc::new(Conn {
            idle_reads: AtomicU32::new(0),
            in_epoll: AtomicBool::new(false),
            outgoing: matches!(state, HsState::AwaitChallenge { .. }),
            redirect: std::sync::OnceLock::new(),
            fd: owned,
            peer: AtomicU32::new(peer),
            out: TryLock::new(Out {
                ready: false,
                buf: Vec::new(),
                off: 0,
                broken: None,
                hold: false,
                held: Vec::new(),
                sent_msgs: 0,
                sent_bytes: 0,
            }),
            inp: TryLock::new(In {
                state,
                buf: Vec::new(),
                start: 0,
                end: 0,
                my_nonce: [0; NONCE_LEN],
            }),
            queued: AtomicUsize::new(0),
        });
        {
            let mut conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
            conns.insert(fd, conn.clone());
            self.refresh_direct(&conns);
            if let Err(e) = self.sync_epoll(&conns) {
                conns.remove(&fd);
                self.refresh_direct(&conns);
                return Err(e);
            }
        }
        Ok(conn)
    }

    fn accept_all(&self) {
        loop {
            match self.listener.accept() {
                Ok((s, _)) => {
                    if let Err(e) = self.register(s, HsState::AwaitHello, u32::MAX) {
                        eprintln!(
                            "gw[{}]: tcp: cannot register accepted connection: {e}",
                            self.me
                        );
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    eprintln!("gw[{}]: tcp: accept: {e}", self.me);
                    return;
                }
            }
        }
    }

    /// Registers every connection with epoll, or none, as the rule in the
    /// module doc says: all of them while a thread sleeps on epoll or there
    /// are too many to read directly. Call with `conns`' lock held.
    fn sync_epoll(&self, conns: &HashMap<RawFd, Arc<Conn>>) -> Result<()> {
        let want = conns.len() > DIRECT_POLL_MAX || self.blockers.load(Ordering::Relaxed) > 0;
        let ep = self.epoll.as_raw_fd();
        let mut first_err = Ok(());
        for (&fd, c) in conns {
            if c.in_epoll.load(Ordering::Relaxed) == want {
                continue;
            }
            if want {
                match epoll_add(ep, fd, fd as u64) {
                    Ok(()) => c.in_epoll.store(true, Ordering::Relaxed),
                    Err(e) => {
                        if first_err.is_ok() {
                            first_err = Err(e);
                        }
                    }
                }
            } else {
                // SAFETY: removing a registered fd; a null event pointer is allowed for DEL.
                unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_DEL, fd, std::ptr::null_mut()) };
                c.in_epoll.store(false, Ordering::Relaxed);
            }
        }
        first_err
    }

    fn refresh_direct(&self, conns: &HashMap<RawFd, Arc<Conn>>) {
        let v: Vec<Arc<Conn>> = conns.values().cloned().collect();
        *self.direct.lock().unwrap_or_else(|e| e.into_inner()) = Arc::from(v);
        self.direct_gen.fetch_add(1, Ordering::Release);
    }

    fn close(&self, conn: &Arc<Conn>) {
        let fd = conn.fd.as_raw_fd();
        // SAFETY: removing a registered fd; a null event pointer is allowed for DEL.
        unsafe {
            libc::epoll_ctl(
                self.epoll.as_raw_fd(),
                libc::EPOLL_CTL_DEL,
                fd,
                std::ptr::null_mut(),
            )
        };
        let was_open = {
            let mut conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
            let was = conns.remove(&fd).is_some();
            conn.in_epoll.store(false, Ordering::Relaxed);
            self.refresh_direct(&conns);
            if let Err(e) = self.sync_epoll(&conns) {
                eprintln!("gw[{}]: tcp: {e}", self.me);
            }
            was
        };
        // Output queued on a dead connection will never drain: drop it, so
        // the method does not report pending output forever.
        if was_open {
            let mut out = conn.out.lock();
            out.buf = Vec::new();
            out.off = 0;
            if conn.queued.swap(0, Ordering::Relaxed) != 0 {
                self.queued_conns.fetch_sub(1, Ordering::Relaxed);
            }
            out.broken.get_or_insert_with(|| "connection closed".into());
        }
        let peer = conn.peer.load(Ordering::Relaxed);
        let mut bp = self.by_peer.lock().unwrap_or_else(|e| e.into_inner());
        if bp.get(&peer).is_some_and(|c| Arc::ptr_eq(c, conn)) {
            bp.remove(&peer);
        }
        // SAFETY: shutdown on a descriptor we own; wakes any peer blocked on it.
        unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
    }

    /// Reads what is available on `conn` and delivers complete frames.
    fn readable(&self, conn: &Arc<Conn>, sink: &mut dyn Sink) -> usize {
        // Another thread reading this connection delivers what is there.
        let Some(mut inp) = conn.inp.try_lock() else {
            return 0;
        };
        let mut delivered = 0;
        // Bound the work per poll so one busy connection cannot starve others.
        let mut budget = 8usize << 20;
        loop {
            // Make room: at least 64 KiB, or the whole current frame.
            let want = inp.next_need(self.max_msg).max(64 << 10);
            inp.reserve(want);
            let fd = conn.fd.as_raw_fd();
            let end = inp.end;
            let spare = &mut inp.buf[end..];
            let spare_len = spare.len();
            // recv rather than read: a socket call skips the VFS layers
            // (rw_verify_area, security_file_permission, fdget_pos), and
            // while idle this call is the whole spin loop, so its cost is
            // the detection delay of the next message.
            // SAFETY: `spare` is a live, writable slice; recv writes at most its length.
            let n = unsafe {
                libc::recv(
                    fd,
                    spare.as_mut_ptr() as *mut libc::c_void,
                    spare.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if n < 0 {
                // The common case, an empty socket, without building an io::Error.
                // SAFETY: errno is this thread's, set by the failed recv just above.
                let errno = unsafe { *libc::__errno_location() };
                if errno == libc::EAGAIN && delivered == 0 && inp.end == end {
                    let idle = conn.idle_reads.load(Ordering::Relaxed);
                    conn.idle_reads
                        .store(idle.saturating_add(1), Ordering::Relaxed);
                    break;
                }
                let e = io::Error::from_raw_os_error(errno);
                match e.kind() {
                    io::ErrorKind::WouldBlock => {
                        if delivered == 0 && inp.end == end {
                            let idle = conn.idle_reads.load(Ordering::Relaxed);
                            conn.idle_reads
                                .store(idle.saturating_add(1), Ordering::Relaxed);
                        }
                        break;
                    }
                    io::ErrorKind::Interrupted => continue,
                    _ => {
                        drop(inp);
                        self.fail(conn, sink, format!("read: {e}"));
                        return delivered;
                    }
                }
            }
            if n == 0 {
                let clean = inp.end == inp.start && matches!(inp.state, HsState::Ready);
                // An acceptor closes on us during our handshake when it refuses
                // our proof (or does not know the secret itself).
                let refused_us = matches!(inp.state, HsState::AwaitChallenge { .. });
                let authed = matches!(inp.state, HsState::Ready);
                let inp_was_proof = matches!(inp.state, HsState::AwaitProof { .. });
                drop(inp);
                if refused_us {
                    self.fail(
                        conn,
                        sink,
                        "the peer closed the connection during authentication (wrong job secret?)"
                            .into(),
                    );
                } else if !authed && inp_was_proof {
                    // The connector saw our proof and left: it does not share our secret.
                    self.refused.fetch_add(1, Ordering::Relaxed);
                    eprintln!(
                        "gw[{}]: tcp: refused TCP connection (claims to be context {}): it closed during authentication; nothing delivered",
                        self.me,
                        conn.peer_name()
                    );
                    self.close(conn);
                } else if clean || !authed {
                    if self.verbose >= 2 {
                        eprintln!(
                            "gw[{}]: tcp: connection from {} closed",
                            self.me,
                            conn.peer_name()
                        );
                    }
                    self.close(conn);
                } else {
                    self.fail(
                        conn,
                        sink,
                        "connection closed in the middle of a message".into(),
                    );
                }
                return delivered;
            }
            let short = (n as usize) < spare_len;
            conn.idle_reads.store(0, Ordering::Relaxed);
            inp.end += n as usize;
            budget = budget.saturating_sub(n as usize);
            match self.process(conn, &mut inp, sink) {
                Ok(d) => delivered += d,
                Err(why) => {
                    // A connection that never authenticated to us tells us
                    // nothing about the context it claimed to be: drop it
                    // without touching that context's real link.
                    let unproven =
                        matches!(inp.state, HsState::AwaitHello | HsState::AwaitProof { .. });
                    drop(inp);
                    if unproven {
                        self.close(conn);
                    } else {
                        self.fail(conn, sink, why);
                    }
                    return delivered;
                }
            }
            // A short read drained the socket: skip the read that would only
            // say EAGAIN (level-triggered epoll reports any later data).
            if budget == 0 || short {
                break;
            }
        }
        delivered
    }

    /// Runs the handshake and frame parser over the buffered bytes.
    fn process(
        &self,
        conn: &Arc<Conn>,
        inp: &mut In,
        sink: &mut dyn Sink,
    ) -> std::result::Result<usize, String> {
        let mut delivered = 0;
        loop {
            let avail = inp.end - inp.start;
            match inp.state {
                HsState::AwaitHello => {
                    if avail < HELLO_LEN {
                        return Ok(delivered);
                    }
                    let h = &inp.buf[inp.start..inp.start + HELLO_LEN];
                    if &h[..4] != MAGIC {
                        return Err(self.refuse(conn, "not a gridwire connection (bad magic)"));
                    }
                    let their_id = u32::from_le_bytes(h[4..8].try_into().unwrap());
                    let wanted = u32::from_le_bytes(h[8..12].try_into().unwrap());
                    let their_nonce: [u8; NONCE_LEN] = h[12..12 + NONCE_LEN].try_into().unwrap();
                    if wanted != self.me {
                        return Err(
                            self.refuse(conn, &format!("connection meant for context {wanted}"))
                        );
                    }
                    inp.start += HELLO_LEN;
                    let mine = auth::nonce();
                    let proof = auth::proof(
                        &self.secret,
                        Role::Acceptor,
                        &mine,
                        &their_nonce,
                        self.me,
                        their_id,
                    );
                    let mut reply = [0u8; CHALLENGE_LEN];
                    reply[..NONCE_LEN].copy_from_slice(&mine);
                    reply[NONCE_LEN..NONCE_LEN + PROOF_LEN].copy_from_slice(&proof);
                    reply[CHALLENGE_LEN - 1] = self.tie_break(their_id);
                    // The peer id is provisional until its proof arrives.
                    conn.peer.store(their_id, Ordering::Relaxed);
                    inp.my_nonce = mine;
                    inp.state = HsState::AwaitProof { their_nonce };
                    conn.write_raw(&reply)
                        .map_err(|e| format!("handshake write: {e}"))?;
                }
                HsState::AwaitProof { their_nonce } => {
                    if avail < PROOF_LEN {
                        return Ok(delivered);
                    }
                    let their_id = conn.peer.load(Ordering::Relaxed);
                    let ok = auth::verify(
                        &self.secret,
                        Role::Connector,
                        &their_nonce,
                        &inp.my_nonce,
                        their_id,
                        self.me,
                        &inp.buf[inp.start..inp.start + PROOF_LEN],
                    );
                    if !ok {
                        return Err(self.refuse(conn, "wrong job secret"));
                    }
                    inp.start += PROOF_LEN;
                    inp.state = HsState::Ready;
                    conn.out.lock().ready = true;
                    self.by_peer
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .entry(their_id)
                        .or_insert_with(|| conn.clone());
                    self.merge(their_id);
                    if self.verbose >= 2 {
                        eprintln!("gw[{}]: tcp: accepted authenticated connection from context {their_id}", self.me);
                    }
                }
                HsState::AwaitChallenge { my_nonce } => {
                    if avail < CHALLENGE_LEN {
                        return Ok(delivered);
                    }
                    let their_id = conn.peer.load(Ordering::Relaxed);
                    let c = &inp.buf[inp.start..inp.start + CHALLENGE_LEN];
                    let their_nonce: [u8; NONCE_LEN] = c[..NONCE_LEN].try_into().unwrap();
                    let flags = c[CHALLENGE_LEN - 1];
                    let ok = auth::verify(
                        &self.secret,
                        Role::Acceptor,
                        &their_nonce,
                        &my_nonce,
                        their_id,
                        self.me,
                        &c[NONCE_LEN..NONCE_LEN + PROOF_LEN],
                    );
                    if !ok {
                        return Err(self.refuse(conn, "peer does not know the job secret"));
                    }
                    inp.start += CHALLENGE_LEN;
                    inp.state = HsState::Ready;
                    let proof = auth::proof(
                        &self.secret,
                        Role::Connector,
                        &my_nonce,
                        &their_nonce,
                        self.me,
                        their_id,
                    );
                    // The proof must precede any queued data: put it at the front.
                    let mut out = conn.out.lock();
                    if flags & USE_MINE != 0 && !out.hold {
                        // The peer keeps its own connection to us: ours only
                        // finishes the handshake (so the peer sees a clean one).
                        out.hold = true;
                        let off = out.off;
                        let pending = out.buf.split_off(off);
                        out.held.extend_from_slice(&pending);
                        out.buf.clear();
                        out.off = 0;
                    }
                    let off = out.off;
                    let pending = out.buf.split_off(off);
                    out.buf.clear();
                    out.off = 0;
                    out.buf.extend_from_slice(&proof);
                    out.buf.extend_from_slice(&pending);
                    out.ready = true;
                    let hold = out.hold;
                    if conn.queued.swap(out.buf.len(), Ordering::Relaxed) == 0 {
                        self.queued_conns.fetch_add(1, Ordering::Relaxed);
                    }
                    drop(out);
                    self.flush(conn);
                    if hold {
                        self.merge(their_id);
                    }
                }
                HsState::Ready => {
                    if avail < 4 {
                        inp.compact();
                        return Ok(delivered);
                    }
                    let len =
                        u32::from_le_bytes(inp.buf[inp.start..inp.start + 4].try_into().unwrap())
                            as usize;
                    if len > self.max_msg {
                        return Err(format!(
                            "frame of {len} bytes exceeds GW_TCP_MAX_MSG ({})",
                            self.max_msg
                        ));
                    }
                    if avail < 4 + len {
                        inp.compact();
                        return Ok(delivered);
                    }
                    let s = inp.start + 4;
                    let peer = conn.peer.load(Ordering::Relaxed);
                    sink.deliver(peer, &inp.buf[s..s + len]);
                    inp.start = s + len;
                    delivered += 1;
                }
            }
        }
    }

    /// Acceptor side of the tie (see the module doc): we got a hello from
    /// `peer`; returns the challenge flags. If we are connecting to `peer`
    /// too, ours is the pair's connection when it already carried payload or
    /// when we are the lower context: we answer `USE_MINE`, and the peer
    /// (once our proof checks out) holds its payload for ours. Otherwise we
    /// answer normally and the peer, being the lower, answers our own hello
    /// with `USE_MINE`. Nothing is decided on the unauthenticated hello
    /// alone: a forged one can at most receive a flag it cannot use.
    fn tie_break(&self, peer: u32) -> u8 {
        if peer == self.me {
            // Our own connection to ourselves: both ends are one connection.
            return 0;
        }
        let Some(own) = self
            .by_peer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&peer)
            .cloned()
        else {
            return 0;
        };
        if !own.outgoing || own.redirect.get().is_some() {
            return 0;
        }
        let out = own.out.lock();
        if !out.hold && (out.committed() || self.me < peer) {
            USE_MINE
        } else {
            0
        }
    }

    /// Moves the payload held by our connection to `peer` (if it lost the
    /// tie) to the authenticated connection `peer` made to us, in order, and
    /// points later sends there.
    fn merge(&self, peer: u32) {
        let own = self
            .by_peer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&peer)
            .cloned();
        let Some(own) = own else { return };
        if !own.outgoing || own.redirect.get().is_some() {
            return;
        }
        let winner = self
            .conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .find(|c| !c.outgoing && c.peer.load(Ordering::Relaxed) == peer && c.out.lock().ready)
            .cloned();
        let Some(winner) = winner else { return };
        let mut out = own.out.lock();
        if !out.hold {
            return;
        }
        let held = std::mem::take(&mut out.held);
        // Set while holding `own.out`: a sender that takes that lock after
        // this sees the redirect and goes to `winner`, behind `held`.
        let _ = own.redirect.set(winner.clone());
        {
            let mut w = winner.out.lock();
            if !held.is_empty() {
                let was_empty = w.off == w.buf.len();
                w.buf.extend_from_slice(&held);
                winner.queued.store(w.buf.len() - w.off, Ordering::Relaxed);
                if was_empty {
                    self.queued_conns.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        drop(out);
        self.by_peer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(peer, winner.clone());
        self.flush(&winner);
        self.merged.fetch_add(1, Ordering::Relaxed);
        if self.verbose >= 2 {
            eprintln!(
                "gw[{}]: tcp: both ends connected; using the connection context {peer} made",
                self.me
            );
        }
    }

    /// Logs and counts a connection that failed authentication. As acceptor
    /// we refuse a connection; as connector we abandon one to a peer that
    /// could not prove it knows the secret.
    fn refuse(&self, conn: &Arc<Conn>, why: &str) -> String {
        self.refused.fetch_add(1, Ordering::Relaxed);
        let acceptor = matches!(
            conn.inp.try_lock().map(|i| i.state),
            Some(HsState::AwaitHello | HsState::AwaitProof { .. })
        ) || conn.peer.load(Ordering::Relaxed) == u32::MAX;
        if acceptor {
            eprintln!(
                "gw[{}]: tcp: refused TCP connection (claims to be context {}): authentication failed: {why}; nothing delivered",
                self.me,
                conn.peer_name()
            );
        } else {
            eprintln!(
                "gw[{}]: tcp: abandoned TCP connection to context {}: authentication failed: {why}",
                self.me,
                conn.peer_name()
            );
        }
        format!("authentication failed: {why}")
    }

    fn fail(&self, conn: &Arc<Conn>, sink: &mut dyn Sink, why: String) {
        let peer = conn.peer.load(Ordering::Relaxed);
        conn.out.lock().broken = Some(why.clone());
        self.close(conn);
        if peer != u32::MAX {
            sink.link_failed(peer, why);
        }
    }

    /// Writes queued output of `conn` if another thread is not already doing so.
    fn flush(&self, conn: &Conn) {
        let Some(mut out) = conn.out.try_lock() else {
            return;
        };
        if !out.ready || out.off == out.buf.len() {
            return;
        }
        let before = out.buf.len() - out.off;
        match conn.send_vectored(&[IoSlice::new(&out.buf[out.off..])]) {
            Ok(n) => out.off += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => out.broken = Some(format!("write: {e}")),
        }
        if out.off == out.buf.len() || out.broken.is_some() {
            out.buf.clear();
            out.off = 0;
            if conn.queued.swap(0, Ordering::Relaxed) != 0 {
                self.queued_conns.fetch_sub(1, Ordering::Relaxed);
            }
        } else if out.off > (1 << 20) && out.off * 2 > out.buf.len() {
            let off = out.off;
            out.buf.drain(..off);
            out.off = 0;
            conn.queued.store(out.buf.len(), Ordering::Relaxed);
        } else {
            let _ = before;
            conn.queued
                .store(out.buf.len() - out.off, Ordering::Relaxed);
        }
    }
}

/// Handshake state of a connection's receive side.
#[derive(Debug, Clone, Copy)]
enum HsState {
    /// Acceptor: waiting for the connector's hello.
    AwaitHello,
    /// Acceptor: sent our challenge, waiting for the connector's proof.
    AwaitProof { their_nonce: [u8; NONCE_LEN] },
    /// Connector: sent hello, waiting for the acceptor's nonce and proof.
    AwaitChallenge { my_nonce: [u8; NONCE_LEN] },
    /// Authenticated: frames flow.
    Ready,
}

struct Out {
    /// Payload may be written (connector: after the acceptor proved itself).
    ready: bool,
    buf: Vec<u8>,
    off: usize,
    broken: Option<String>,
    /// This connection lost the tie: payload goes to `held`, never to the socket.
    hold: bool,
    /// Framed payload waiting to move to the pair's connection.
    held: Vec<u8>,
    /// Messages and bytes sent through this connection (counted under this
    /// lock, see `Link::counts_sends`).
    sent_msgs: u64,
    sent_bytes: u64,
}

impl Out {
    /// Payload may have reached the socket: this connection can no longer
    /// give way to another without reordering.
    fn committed(&self) -> bool {
        self.ready && !self.hold
    }
}

struct In {
    state: HsState,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    my_nonce: [u8; NONCE_LEN],
}

impl In {
    /// Bytes the parser needs buffered to make progress on the current frame.
    fn next_need(&self, max_msg: usize) -> usize {
        let avail = self.end - self.start;
        if matches!(self.state, HsState::Ready) && avail >= 4 {
            let len = u32::from_le_bytes(self.buf[self.start..self.start + 4].try_into().unwrap())
                as usize;
            (4 + len.min(max_msg)).saturating_sub(avail)
        } else {
            0
        }
    }

    /// Ensures at least `want` writable bytes after `end`.
    fn reserve(&mut self, want: usize) {
        if self.buf.len() - self.end >= want {
            return;
        }
        self.compact();
        if self.buf.len() - self.end < want {
            self.buf.resize(self.end + want, 0);
        }
    }

    /// Moves unparsed bytes to the front of the buffer.
    fn compact(&mut self) {
        if self.start == 0 {
            return;
        }
        if self.start == self.end {
            // Everything parsed (the usual case between small messages): nothing to move.
            self.start = 0;
            self.end = 0;
            return;
        }
        self.buf.copy_within(self.start..self.end, 0);
        self.end -= self.start;
        self.start = 0;
        // Give back memory after a very large message, but keep a buffer
        // that fits common large messages: growing it again for every 4 MiB
        // message costs a remap and fresh page faults each time.
        if self.buf.len() > (64 << 20) && self.end < (1 << 20) {
            self.buf.truncate((1 << 20).max(self.end));
            self.buf.shrink_to_fit();
        }
    }
}

struct Conn {
    fd: OwnedFd,
    peer: AtomicU32,
    out: TryLock<Out>,
    inp: TryLock<In>,
    /// Bytes queued in `out.buf` (read without the lock by poll's flush scan).
    queued: AtomicUsize,
    /// Direct reads in a row that found nothing (see `COLD_AFTER`).
    idle_reads: AtomicU32,
    /// Registered with the method's epoll set (changed under `conns`' lock).
    in_epoll: AtomicBool,
    /// We connected (rather than accepted) it.
    outgoing: bool,
    /// The pair's connection, once this one lost the tie (see the module doc).
    redirect: std::sync::OnceLock<Arc<Conn>>,
}

impl Conn {
    fn peer_name(&self) -> String {
        match self.peer.load(Ordering::Relaxed) {
            u32::MAX => "unknown".into(),
            p => p.to_string(),
        }
    }

    /// Gathered, non-blocking send that never raises SIGPIPE.
    fn send_vectored(&self, iov: &[IoSlice<'_>]) -> io::Result<usize> {
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
    fn send_flat(&self, bytes: &[u8]) -> io::Result<usize> {
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
    fn write_raw(&self, bytes: &[u8]) -> io::Result<()> {
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
struct TcpLink {
    conn: Arc<Conn>,
    max_queued: usize,
    /// Shared with the method: how many connections have queued output.
    queued_conns: Arc<AtomicUsize>,
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

impl Method for TcpMethod {
    fn name(&self) -> &'static str {
        "tcp"
    }

    fn descriptor(&self) -> Vec<u8> {
        self.local.to_string().into_bytes()
    }

    fn describe(&self, d: &[u8]) -> String {
        String::from_utf8_lossy(d).into_owned()
    }

    fn reachable(&self, remote: &[u8]) -> bool {
        std::str::from_utf8(remote)
            .ok()
            .and_then(|s| s.parse::<SocketAddr>().ok())
            .is_some()
    }

    fn connect(&self, peer: u32, remote: &[u8]) -> Result<Arc<dyn Link>> {
        if let Some(c) = self
            .by_peer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&peer)
        {
            return Ok(self.link(c.clone()));
        }
        let addr: SocketAddr = std::str::from_utf8(remote)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| Error::Protocol {
                peer: peer.to_string(),
                what: "malformed tcp descriptor".into(),
            })?;
        let stream = TcpStream::connect_timeout(&addr, self.connect_timeout).map_err(|e| {
            Error::LinkFailed {
                peer,
                method: "tcp",
                reason: format!("connect to {addr}: {e}"),
            }
        })?;
        let my_nonce = auth::nonce();
        let conn = self.register(stream, HsState::AwaitChallenge { my_nonce }, peer)?;
        let mut hello = [0u8; HELLO_LEN];
        hello[..4].copy_from_slice(MAGIC);
        hello[4..8].copy_from_slice(&self.me.to_le_bytes());
        hello[8..12].copy_from_slice(&peer.to_le_bytes());
        hello[12..].copy_from_slice(&my_nonce);
        conn.write_raw(&hello)
            .map_err(|e| Error::io("tcp: handshake", e))?;
        if self.verbose >= 2 {
            eprintln!(
                "gw[{}]: tcp: connected to context {peer} at {addr}",
                self.me
            );
        }
        let conn = self
            .by_peer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(peer)
            .or_insert(conn)
            .clone();
        Ok(self.link(conn))
    }

    fn poll_thorough(&self, sink: &mut dyn Sink) -> Result<usize> {
        self.poll_as(sink, true)
    }

    fn poll(&self, sink: &mut dyn Sink) -> Result<usize> {
        // Polls are serialized by the context's progress lock: a plain load
        // and store count them (no locked instruction per poll).
        let n = self.polls.load(Ordering::Relaxed);
        self.polls.store(n.wrapping_add(1), Ordering::Relaxed);
        self.poll_as(sink, n.is_multiple_of(EPOLL_EVERY))
    }

    fn before_block(&self) {
        let conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        self.blockers.fetch_add(1, Ordering::Relaxed);
        // Level-triggered: a connection that became readable before it was
        // added is reported at once, so no message is slept through.
        if let Err(e) = self.sync_epoll(&conns) {
            eprintln!("gw[{}]: tcp: {e}", self.me);
        }
    }

    fn after_block(&self) {
        let conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        self.blockers.fetch_sub(1, Ordering::Relaxed);
        if let Err(e) = self.sync_epoll(&conns) {
            eprintln!("gw[{}]: tcp: {e}", self.me);
        }
    }

    fn poll_class(&self) -> PollClass {
        PollClass::Expensive
    }

    fn wait_fd(&self) -> Option<RawFd> {
        Some(self.epoll.as_raw_fd())
    }

    fn has_pending_output(&self) -> bool {
        self.queued_conns.load(Ordering::Relaxed) > 0
    }

    fn cost(&self) -> Cost {
        Cost {
            latency_ns: 15_000,
            bandwidth_mb_s: 3_000,
        }
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("refused_connections", self.refused_connections()),
            ("merged_connections", self.merged.load(Ordering::Relaxed)),
        ]
    }

    fn shutdown(&self) {
        if self.down.swap(true, Ordering::Relaxed) {
            return;
        }
        let conns: Vec<Arc<Conn>> = self
            .conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect();
        for c in conns {
            self.close(&c);
        }
    }
}

impl TcpMethod {
    fn flush_queued(&self) {
        if self.queued_conns.load(Ordering::Relaxed) > 0 {
            let conns: Vec<Arc<Conn>> = self
                .conns
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .values()
                .filter(|c| c.queued.load(Ordering::Relaxed) > 0)
                .cloned()
                .collect();
            for c in conns {
                self.flush(&c);
            }
        }
    }
}

impl TcpMethod {
    fn link(&self, conn: Arc<Conn>) -> Arc<dyn Link> {
        Arc::new(TcpLink {
            conn,
            max_queued: self.max_queued,
            queued_conns: self.queued_conns.clone(),
        })
    }
}

impl TcpMethod {
    /// With few connections, reading each one directly costs one system
    /// call per connection, where epoll costs epoll_wait plus the read (and
    /// an epoll callback per packet, see the module doc): on the
    /// latency-critical path that is most of the gap to a raw socket. A
    /// `thorough` poll (every `EPOLL_EVERY`th, and after a sleep) also reads
    /// the cold connections and asks epoll, which accepts new connections;
    /// with many connections every poll goes through epoll.
    fn poll_as(&self, sink: &mut dyn Sink, thorough: bool) -> Result<usize> {
        let mut delivered = 0;
        let mut direct = false;
        // Polls are serialized, so this lock is always free; if it is not,
        // the epoll pass below still finds what epoll watches.
        if let Some(mut list) = self.poll_list.try_lock() {
            let gen = self.direct_gen.load(Ordering::Acquire);
            if list.0 != gen {
                *list = (
                    gen,
                    self.direct
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .clone(),
                );
            }
            if list.1.len() <= DIRECT_POLL_MAX {
                direct = true;
                // Skipping a cold connection saves a system call on the
                // path of the others; with only one there are no others,
                // and skipping would only delay its next message.
                let alone = list.1.len() == 1;
                for conn in list.1.iter() {
                    if thorough || alone || conn.idle_reads.load(Ordering::Relaxed) < COLD_AFTER {
                        delivered += self.readable(conn, sink);
                    }
                }
            }
        }
        if thorough || !direct {
            delivered += self.poll_epoll(sink)?;
        } else {
            self.flush_queued();
        }
        Ok(delivered)
    }

    /// The epoll pass: every readable connection epoll watches, and new
    /// connections.
    fn poll_epoll(&self, sink: &mut dyn Sink) -> Result<usize> {
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 32];
        // SAFETY: `events` is a writable array of the length passed.
        let n = unsafe {
            libc::epoll_wait(
                self.epoll.as_raw_fd(),
                events.as_mut_ptr(),
                events.len() as i32,
                0,
            )
        };
        let mut delivered = 0;
        for ev in events.iter().take(n.max(0) as usize) {
            let token = ev.u64;
            if token == LISTENER_TOKEN {
                self.accept_all();
                continue;
            }
            let conn = self
                .conns
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&(token as RawFd))
                .cloned();
            if let Some(conn) = conn {
                delivered += self.readable(&conn, sink);
            }
        }
        self.flush_queued();
        Ok(delivered)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::method::JobInfo;
    use crate::params::Params;
    use std::io::{Read, Write};

    struct Collect(Vec<(u32, Vec<u8>)>, Vec<u32>);
    impl Sink for Collect {
        fn deliver(&mut self, src: u32, msg: &[u8]) {
            self.0.push((src, msg.to_vec()));
        }
        fn link_failed(&mut self, src: u32, _: String) {
            self.1.push(src);
        }
    }

    fn method(id: u32, secret: [u8; 32]) -> Arc<dyn Method> {
        let job = JobInfo {
            ctx_id: id,
            size: 4,
            job_id: "tcptest".into(),
            host_id: "h".into(),
            secret,
            verbose: 0,
        };
        let params = Params::from_lookup(|_| None).unwrap();
        (INFO.init)(&MethodEnv {
            job: &job,
            params: &params,
        })
        .unwrap()
        .unwrap()
    }

    fn poll_for(m: &Arc<dyn Method>, sink: &mut Collect, ms: u64) {
        let end = std::time::Instant::now() + Duration::from_millis(ms);
        while std::time::Instant::now() < end {
            m.poll(sink).unwrap();
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    struct NoWait;
    impl Waiter for NoWait {
        fn progress(&self) -> bool {
            false
        }
    }

    #[test]
    fn garbage_and_forged_handshakes_are_refused_and_never_delivered() {
        let server = method(0, [1; 32]);
        let addr: SocketAddr = String::from_utf8(server.descriptor())
            .unwrap()
            .parse()
            .unwrap();
        let mut sink = Collect(Vec::new(), Vec::new());

        // 1. Garbage bytes.
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(&[0xde; 200]).unwrap();
        // 2. A well-formed hello, then a made-up proof and a frame behind it.
        let mut t = TcpStream::connect(addr).unwrap();
        let mut hello = Vec::from(&MAGIC[..]);
        hello.extend_from_slice(&1u32.to_le_bytes());
        hello.extend_from_slice(&0u32.to_le_bytes());
        hello.extend_from_slice(&[9; NONCE_LEN]);
        t.write_all(&hello).unwrap();
        poll_for(&server, &mut sink, 100);
        let mut challenge = [0u8; CHALLENGE_LEN];
        t.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        t.read_exact(&mut challenge).unwrap();
        t.write_all(&[7; PROOF_LEN]).unwrap();
        t.write_all(&8u32.to_le_bytes()).unwrap();
        t.write_all(b"payload!").unwrap();
        poll_for(&server, &mut sink, 200);

        assert!(sink.0.is_empty(), "nothing may be delivered: {:?}", sink.0);
        assert!(
            sink.1.is_empty(),
            "unauthenticated connections must not fail real links"
        );
        assert_eq!(server.counters()[0], ("refused_connections", 2));
        server.shutdown();
    }

    #[test]
    fn peers_with_different_secrets_never_exchange_payload() {
        let a = method(0, [1; 32]);
        let b = method(1, [2; 32]);
        let link = b.connect(0, &a.descriptor()).unwrap();
        link.send(&[IoSlice::new(b"secret data")], &NoWait).unwrap();
        let (mut sa, mut sb) = (
            Collect(Vec::new(), Vec::new()),
            Collect(Vec::new(), Vec::new()),
        );
        for _ in 0..100 {
            a.poll(&mut sa).unwrap();
            b.poll(&mut sb).unwrap();
            std::thread::sleep(Duration::from_millis(2));
        }
        assert!(sa.0.is_empty() && sb.0.is_empty());
        assert_eq!(sb.1, vec![0], "the connector learns its link failed");
        assert!(link.send(&[IoSlice::new(b"more")], &NoWait).is_err());
        a.shutdown();
        b.shutdown();
    }

    #[test]
    fn simultaneous_connects_end_on_one_connection_in_order() {
        // Both ends connect before either polls (as at a job's first
        // barrier), send before, during and after the tie is settled.
        let a = method(0, [5; 32]);
        let b = method(1, [5; 32]);
        let ab = a.connect(1, &b.descriptor()).unwrap();
        let ba = b.connect(0, &a.descriptor()).unwrap();
        let (mut sa, mut sb) = (
            Collect(Vec::new(), Vec::new()),
            Collect(Vec::new(), Vec::new()),
        );
        let mut next = 0u32;
        for round in 0..400 {
            if next < 300 && round % 2 == 0 {
                for _ in 0..3 {
                    let m = next.to_le_bytes();
                    ab.send(&[IoSlice::new(&m)], &NoWait).unwrap();
                    ba.send(&[IoSlice::new(&m)], &NoWait).unwrap();
                    next += 1;
                }
            }
            a.poll(&mut sa).unwrap();
            b.poll(&mut sb).unwrap();
            if sa.0.len() == 300 && sb.0.len() == 300 {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        for (name, got) in [("a", &sa.0), ("b", &sb.0)] {
            let seq: Vec<u32> = got
                .iter()
                .map(|(_, m)| u32::from_le_bytes(m[..4].try_into().unwrap()))
                .collect();
            assert_eq!(
                seq,
                (0..300).collect::<Vec<_>>(),
                "{name} got every message once, in order"
            );
        }
        assert!(sa.1.is_empty() && sb.1.is_empty(), "no link failed");
        let merged = |m: &Arc<dyn Method>| {
            m.counters()
                .iter()
                .find(|c| c.0 == "merged_connections")
                .unwrap()
                .1
        };
        // The higher context's connection gave way; the lower's carries both directions.
        assert_eq!((merged(&a), merged(&b)), (0, 1));
        a.shutdown();
        b.shutdown();
    }

    #[test]
    fn a_forged_hello_cannot_stall_a_connection_in_progress() {
        // Context 1 connects to 0 and queues payload; before 0 answers, an
        // impostor claiming to be context 0 says hello to 1 (as if both ends
        // were connecting at once). Nothing may be decided on that hello: 1's
        // connection carries everything, in order.
        let a = method(0, [6; 32]);
        let b = method(1, [6; 32]);
        let ba = b.connect(0, &a.descriptor()).unwrap();
        for i in 0..10u32 {
            ba.send(&[IoSlice::new(&i.to_le_bytes())], &NoWait).unwrap();
        }
        let b_addr: SocketAddr = String::from_utf8(b.descriptor()).unwrap().parse().unwrap();
        let mut imp = TcpStream::connect(b_addr).unwrap();
        let mut hello = Vec::from(&MAGIC[..]);
        hello.extend_from_slice(&0u32.to_le_bytes());
        hello.extend_from_slice(&1u32.to_le_bytes());
        hello.extend_from_slice(&[9; NONCE_LEN]);
        imp.write_all(&hello).unwrap();
        let mut sb = Collect(Vec::new(), Vec::new());
        poll_for(&b, &mut sb, 100);
        let mut challenge = [0u8; CHALLENGE_LEN];
        imp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        imp.read_exact(&mut challenge).unwrap();
        imp.write_all(&[7; PROOF_LEN]).unwrap();
        let mut sa = Collect(Vec::new(), Vec::new());
        for round in 0..500 {
            if round == 50 {
                for i in 10..20u32 {
                    ba.send(&[IoSlice::new(&i.to_le_bytes())], &NoWait).unwrap();
                }
            }
            a.poll(&mut sa).unwrap();
            b.poll(&mut sb).unwrap();
            if sa.0.len() == 20 {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let seq: Vec<u32> =
            sa.0.iter()
                .map(|(_, m)| u32::from_le_bytes(m[..4].try_into().unwrap()))
                .collect();
        assert_eq!(
            seq,
            (0..20).collect::<Vec<_>>(),
            "everything arrives once, in order"
        );
        assert!(sa.0.iter().all(|(src, _)| *src == 1));
        assert!(
            sb.0.is_empty() && sb.1.is_empty(),
            "the impostor delivered nothing and failed no link"
        );
        assert_eq!(
            b.counters(),
            vec![("refused_connections", 1), ("merged_connections", 0)]
        );
        a.shutdown();
        b.shutdown();
    }

    #[test]
    fn same_secret_delivers_in_order_both_ways() {
        let a = method(0, [3; 32]);
        let b = method(1, [3; 32]);
        let ab = b.connect(0, &a.descriptor()).unwrap();
        for i in 0..50u32 {
            ab.send(
                &[IoSlice::new(&i.to_le_bytes()), IoSlice::new(&[0u8; 3000])],
                &NoWait,
            )
            .unwrap();
        }
        let (mut sa, mut sb) = (
            Collect(Vec::new(), Vec::new()),
            Collect(Vec::new(), Vec::new()),
        );
        for _ in 0..500 {
            a.poll(&mut sa).unwrap();
            b.poll(&mut sb).unwrap();
            if sa.0.len() == 50 {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(sa.0.len(), 50);
        for (i, (src, m)) in sa.0.iter().enumerate() {
            assert_eq!(*src, 1);
            assert_eq!(&m[..4], &(i as u32).to_le_bytes());
            assert_eq!(m.len(), 3004);
        }
        // The accepted connection is reused for the reply direction.
        let ba = a.connect(1, &b.descriptor()).unwrap();
        ba.send(&[IoSlice::new(b"back")], &NoWait).unwrap();
        for _ in 0..500 {
            b.poll(&mut sb).unwrap();
            if !sb.0.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(sb.0, vec![(0, b"back".to_vec())]);
        a.shutdown();
        b.shutdown();
    }
}
