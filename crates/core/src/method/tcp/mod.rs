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
//!   written to its socket; bounded by `TCP_MAX_QUEUED`) and moved, in
//!   order, to the winner once that one is authenticated; later sends
//!   follow `redirect`. The loser completes its
//!   handshake and then idles. Held output is pending output (finalize
//!   waits for it); if the winner closes before it authenticates, the
//!   loser takes its output back and sends it itself (`release_held`).
//! * Every connection is authenticated (see [`crate::auth`]) before a single
//!   payload byte is delivered: connector sends `hello`, acceptor answers with
//!   its nonce and proof, connector answers with its proof. The connector may
//!   queue data behind its proof; the acceptor buffers it and delivers nothing
//!   until the proof checks out, and drops the connection if it does not.
//! * Frames are `[u32 little-endian length][message]`, parsed by `framing`
//!   (a pure parser, also the fuzz target `fuzzing::tcp_frames`); memory
//!   follows the bytes that arrived, never a header's announced length.
//! * Every byte from a peer is hostile, also after authentication; what an
//!   unauthenticated client can hold is bounded (`listener`: at most
//!   `GW_TCP_MAX_UNAUTHENTICATED` authenticating at once, none for longer
//!   than `GW_TCP_HANDSHAKE_TIMEOUT`), and at the open-file limit the
//!   listener backs off instead of spinning.
//! * `connect` never blocks (`connect`): a connect in progress is completed
//!   by poll, so an unreachable peer cannot freeze the process.
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

use super::netaddr::{self, Binding, IfaceFilter, Published};
use super::{
    iov_len, Cost, Link, Method, MethodEnv, MethodInfo, PollClass, Sink, Waiter, PLACE_HEAD,
    PLACE_MIN,
};
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
use std::time::{Duration, Instant};

mod conn;
mod connect;
mod framing;
mod handshake;
mod listener;
mod receive;

use conn::{Conn, In, Out, TcpLink};
pub(crate) use framing::fuzz_stream;
use framing::RxBuf;

pub const INFO: MethodInfo = MethodInfo {
    name: "tcp",
    summary: "TCP sockets (epoll, TCP_NODELAY, authenticated, connected on demand)",
    params: PARAMS,
    init,
};

const PARAMS: &[ParamDecl] = &[
    ParamDecl {
        name: "TCP_ADDR",
        default: "auto",
        kind: Kind::Text,
        help: "`auto`: listen on every address and publish every usable interface address \
               (see GW_IFACE); a peer in the same network namespace is reached over loopback, \
               one elsewhere at an address in a subnet it shares, else at the others in turn. \
               An IP address: listen on that one and publish only it (0.0.0.0 is not \
               publishable).",
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
        name: "TCP_CONGESTION",
        default: "system",
        kind: Kind::Text,
        help: "TCP congestion control set on every connection (TCP_CONGESTION), e.g. `cubic`, \
               `bbr`; `system` = the kernel's default. Unknown names are ignored. See \
               docs/runtime.md for what each did to 64 KiB messages across a WAN.",
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
        name: "TCP_HANDSHAKE_TIMEOUT",
        default: "10",
        kind: Kind::UInt { min: 1, max: 3600 },
        help: "Seconds a new connection may take to authenticate (from accept or connect); \
               one that takes longer is closed (and counted in `handshake_timeouts`), so a \
               silent or slow client cannot hold a connection slot.",
    },
    ParamDecl {
        name: "TCP_MAX_UNAUTHENTICATED",
        default: "64",
        kind: Kind::UInt {
            min: 1,
            max: 1 << 20,
        },
        help: "Accepted connections that may be authenticating at once; more are closed at \
               once (and counted in `unauthenticated_dropped`).",
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

/// Up to this many connections, `poll` reads them directly instead of asking epoll.
const DIRECT_POLL_MAX: usize = 4;

/// After a placed frame (`Sink::place`), the next read into the buffer
/// asks for at most this much: a train of large frames (MPI's rendezvous
/// pieces) then has each piece's header read alone and the piece placed,
/// where a full read would take most of the next piece into the buffer and
/// copy it out again. Small frames behind it end the short reads.
const FIRST_READ_AFTER_PLACED: usize = 4096;

fn init(env: &MethodEnv) -> Result<Option<Arc<dyn Method>>> {
    Ok(Some(Arc::new(TcpMethod::new(env)?)))
}

impl TcpMethod {
    fn new(env: &MethodEnv) -> Result<TcpMethod> {
        let binding = Binding::from_params(env.params, "TCP_ADDR")?;
        let addr = binding.bind_ip();
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
        let published = binding.publish(local.port());
        // Where a process of this network namespace reaches us (the wildcard
        // is bound in `auto` mode).
        let local = match binding {
            Binding::Auto(_) => SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), local.port()),
            Binding::Explicit(_) => local,
        };
        if env.job.verbose >= 2 {
            crate::say!(
                "gw[{}]: tcp: listening at {local}, published as {}",
                env.job.ctx_id,
                published.describe()
            );
        }
        let my_addrs = match binding {
            Binding::Auto(addrs) => addrs,
            Binding::Explicit(_) => netaddr::local_addrs(&IfaceFilter::from_params(env.params)?),
        };
        Ok(TcpMethod {
            local,
            published,
            my_netns: netaddr::netns_key(),
            my_addrs,
            me: env.job.ctx_id,
            size: env.job.size,
            secret: env.job.secret,
            verbose: env.job.verbose,
            listener,
            epoll,
            sndbuf: env.params.num("TCP_SNDBUF") as usize,
            rcvbuf: env.params.num("TCP_RCVBUF") as usize,
            congestion: match env.params.text("TCP_CONGESTION").trim() {
                "system" | "" => None,
                name => std::ffi::CString::new(name).ok(),
            },
            max_msg: env.params.num("TCP_MAX_MSG") as usize,
            max_queued: env.params.num("TCP_MAX_QUEUED") as usize,
            connect_timeout: Duration::from_secs(env.params.num("TCP_CONNECT_TIMEOUT")),
            handshake_timeout: Duration::from_secs(env.params.num("TCP_HANDSHAKE_TIMEOUT")),
            max_unauthenticated: env.params.num("TCP_MAX_UNAUTHENTICATED") as usize,
            handshaking: AtomicUsize::new(0),
            unauthenticated: AtomicUsize::new(0),
            unauthenticated_dropped: AtomicU64::new(0),
            handshake_timeouts: AtomicU64::new(0),
            unauthenticated_notice: listener::Notice::default(),
            accept_paused_until: Mutex::new(None),
            connecting: Mutex::new(Vec::new()),
            connects_pending: AtomicUsize::new(0),
            accept_paused: AtomicBool::new(false),
            accept_failures: AtomicU64::new(0),
            accept_notice: listener::Notice::default(),
            #[cfg(test)]
            accept_fault: std::sync::atomic::AtomicI32::new(0),
            conns: Mutex::new(HashMap::new()),
            direct: Mutex::new(Arc::from(Vec::new())),
            direct_gen: AtomicU64::new(1),
            blockers: AtomicUsize::new(0),
            poll_list: TryLock::new((0, Arc::from(Vec::new()))),
            polls: AtomicU64::new(0),
            by_peer: Mutex::new(HashMap::new()),
            queued_conns: Arc::new(AtomicUsize::new(0)),
            holding: AtomicUsize::new(0),
            refused: AtomicU64::new(0),
            merged: AtomicU64::new(0),
            down: AtomicBool::new(false),
        })
    }
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
    /// Ranks in the job: a hello from a rank outside is refused.
    size: u32,
    secret: [u8; 32],
    verbose: u8,
    /// Where a process of this network namespace connects to us (tests
    /// connect raw sockets there).
    #[cfg_attr(not(test), allow(dead_code))]
    local: SocketAddr,
    /// Our addresses as published (see `netaddr`).
    published: Published,
    /// Our network namespace (loopback reaches exactly the peers in it).
    my_netns: String,
    /// Our interface addresses (a peer's address in one of their subnets is tried first).
    my_addrs: Vec<netaddr::IfAddr>,
    listener: TcpListener,
    epoll: OwnedFd,
    sndbuf: usize,
    rcvbuf: usize,
    /// `GW_TCP_CONGESTION` (None: the kernel's default).
    congestion: Option<std::ffi::CString>,
    max_msg: usize,
    max_queued: usize,
    connect_timeout: Duration,
    /// How long a new connection may take to authenticate.
    handshake_timeout: Duration,
    /// Accepted connections that may be authenticating at once.
    max_unauthenticated: usize,
    /// Connections (both directions) still authenticating; while zero,
    /// `expire_handshakes` costs one load.
    handshaking: AtomicUsize,
    /// Accepted connections still authenticating (bounded by `max_unauthenticated`).
    unauthenticated: AtomicUsize,
    /// Accepted connections closed at once because too many were authenticating.
    unauthenticated_dropped: AtomicU64,
    /// Connections closed because they did not authenticate in time.
    handshake_timeouts: AtomicU64,
    /// Rate limit of the messages about the two counters above.
    unauthenticated_notice: listener::Notice,
    /// Set while the listener is out of the epoll set after accept failed
    /// for lack of resources (see `listener::ACCEPT_PAUSE`).
    accept_paused_until: Mutex<Option<Instant>>,
    /// Connects in progress (see `connect`).
    connecting: Mutex<Vec<connect::PendingConnect>>,
    /// `connecting.len()` (one load on the poll path).
    connects_pending: AtomicUsize,
    /// `accept_paused_until` is set (one load on the poll path).
    accept_paused: AtomicBool,
    /// Failed accepts (other than "nothing to accept").
    accept_failures: AtomicU64,
    /// Rate limit of the messages about failed accepts.
    accept_notice: listener::Notice,
    /// Tests: the errno the next accepts fail with (0 = none).
    #[cfg(test)]
    accept_fault: std::sync::atomic::AtomicI32,
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
    /// How many connections hold output for the pair's connection (see
    /// `Out::awaiting_pair`): pending output, like `queued_conns`.
    holding: AtomicUsize,
    /// Connections refused by authentication (observable for tests and `gwinfo`).
    refused: AtomicU64,
    /// Our connections that lost a simultaneous-connect tie and moved their
    /// payload to the peer's (see the module doc).
    merged: AtomicU64,
    down: AtomicBool,
}

impl TcpMethod {
    /// The addresses of a peer's descriptor to try, best first (see `netaddr`).
    fn addresses_of(&self, remote: &[u8]) -> Vec<SocketAddr> {
        Published::parse(remote)
            .map(|p| p.candidates(&self.my_netns, &self.my_addrs))
            .unwrap_or_default()
    }

    /// A tcp instance of its own (its own listener) for a method that
    /// builds on tcp (`relay`).
    pub(crate) fn instance(env: &MethodEnv) -> Result<Arc<TcpMethod>> {
        Ok(Arc::new(TcpMethod::new(env)?))
    }

    /// The addresses of a tcp descriptor (or a relay's published
    /// addresses) to try, best first.
    pub(crate) fn addresses_in(&self, remote: &[u8]) -> Vec<SocketAddr> {
        self.addresses_of(remote)
    }

    /// Opens (or reuses) a link to `peer` through a relay at `relay`,
    /// which gets `request` first (see `method::relay`).
    pub(crate) fn connect_via_relay(
        &self,
        peer: u32,
        relay: Vec<SocketAddr>,
        request: Vec<u8>,
    ) -> Result<Arc<dyn Link>> {
        if let Some(c) = self
            .by_peer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&peer)
        {
            return Ok(self.link(c.clone()));
        }
        let conn = self.open_via_relay(peer, relay, request)?;
        let conn = self
            .by_peer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(peer)
            .or_insert(conn)
            .clone();
        Ok(self.link(conn))
    }

    /// Connections refused because they failed authentication.
    pub fn refused_connections(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    fn tune(&self, s: &TcpStream) {
        let _ = s.set_nodelay(true);
        let fd = s.as_raw_fd();
        if let Some(cc) = &self.congestion {
            let name = cc.as_bytes();
            // SAFETY: passes a pointer to the live name's bytes with their
            // exact length; a name the kernel does not know fails harmlessly.
            unsafe {
                libc::setsockopt(
                    fd,
                    libc::IPPROTO_TCP,
                    libc::TCP_CONGESTION,
                    name.as_ptr() as *const libc::c_void,
                    name.len() as libc::socklen_t,
                );
            }
        }
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
            outgoing: matches!(state, HsState::AwaitChallenge { .. } | HsState::Connecting),
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
                awaiting_pair: false,
                sent_msgs: 0,
                sent_bytes: 0,
            }),
            inp: TryLock::new(In {
                state,
                rx: RxBuf::default(),
                my_nonce: [0; NONCE_LEN],
                placing: None,
                after_placed: false,
            }),
            queued: AtomicUsize::new(0),
            established: match state {
                HsState::Connecting => std::sync::OnceLock::new(),
                _ => std::sync::OnceLock::from(Instant::now()),
            },
            in_handshake: AtomicBool::new(!matches!(state, HsState::Ready)),
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
        if conn.in_handshake.load(Ordering::Relaxed) {
            self.handshaking.fetch_add(1, Ordering::Relaxed);
            if !conn.outgoing {
                self.unauthenticated.fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(conn)
    }
}

impl TcpMethod {
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
        let unauthenticated = conn.in_handshake.load(Ordering::Relaxed);
        // SAFETY: removing a registered fd; a null event pointer is allowed for DEL.
        unsafe {
            libc::epoll_ctl(
                self.epoll.as_raw_fd(),
                libc::EPOLL_CTL_DEL,
                fd,
                std::ptr::null_mut(),
            )
        };
        self.handshake_over(conn);
        // A message being placed will not be completed here: give the
        // placement back (its guard tells its maker). Not reachable while
        // another thread reads the connection; then it goes with the
        // connection.
        if let Some(mut inp) = conn.inp.try_lock() {
            inp.placing = None;
        }
        let was_open = {
            let mut conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
            let was = conns.remove(&fd).is_some();
            conn.in_epoll.store(false, Ordering::Relaxed);
            self.refresh_direct(&conns);
            if let Err(e) = self.sync_epoll(&conns) {
                crate::say!("gw[{}]: tcp: {e}", self.me);
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
            if std::mem::take(&mut out.awaiting_pair) {
                out.held = Vec::new();
                self.holding.fetch_sub(1, Ordering::Relaxed);
            }
        }
        let peer = conn.peer.load(Ordering::Relaxed);
        {
            let mut bp = self.by_peer.lock().unwrap_or_else(|e| e.into_inner());
            if bp.get(&peer).is_some_and(|c| Arc::ptr_eq(c, conn)) {
                bp.remove(&peer);
            }
        }
        if was_open
            && unauthenticated
            && !conn.outgoing
            && peer != u32::MAX
            && !self.down.load(Ordering::Relaxed)
        {
            // It may have been the pair's connection our own one holds
            // output for: that one must not wait for it forever.
            self.release_held(peer);
        }
        // SAFETY: shutdown on a descriptor we own; wakes any peer blocked on it.
        unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
    }

    /// Like [`fail`](Self::fail), for a break of the network (reset,
    /// closed mid-message, connect failed): the context may fail over.
    fn broken(&self, conn: &Arc<Conn>, sink: &mut dyn Sink, why: String) {
        let peer = conn.peer.load(Ordering::Relaxed);
        conn.out.lock().broken = Some(why.clone());
        self.close(conn);
        if peer != u32::MAX {
            sink.link_broken(peer, why);
        }
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
    /// Connector: the TCP connection is not established yet (see `connect`).
    Connecting,
    /// Acceptor: waiting for the connector's hello.
    AwaitHello,
    /// Acceptor: sent our challenge, waiting for the connector's proof.
    AwaitProof { their_nonce: [u8; NONCE_LEN] },
    /// Connector: sent hello, waiting for the acceptor's nonce and proof.
    AwaitChallenge { my_nonce: [u8; NONCE_LEN] },
    /// Authenticated: frames flow.
    Ready,
}

impl Method for TcpMethod {
    fn name(&self) -> &'static str {
        "tcp"
    }

    fn descriptor(&self) -> Vec<u8> {
        self.published.encode()
    }

    fn describe(&self, d: &[u8]) -> String {
        match Published::parse(d) {
            Some(p) => p.describe(),
            None => String::from_utf8_lossy(d).into_owned(),
        }
    }

    fn reachable(&self, remote: &[u8]) -> bool {
        !self.addresses_of(remote).is_empty()
    }

    fn adopt(&self, peer: u32, stream: TcpStream) -> Result<Arc<dyn Link>> {
        // The caller authenticated the socket (with a key of its own, not
        // the job secret): it starts in the ready state.
        let conn = self.register(stream, HsState::Ready, peer)?;
        conn.out.lock().ready = true;
        Ok(self.link(conn))
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
        if Published::parse(remote).is_none() {
            return Err(Error::Protocol {
                peer: peer.to_string(),
                what: "malformed tcp descriptor".into(),
            });
        }
        let conn = self.open(peer, self.addresses_of(remote))?;
        let conn = self
            .by_peer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(peer)
            .or_insert(conn)
            .clone();
        Ok(self.link(conn))
    }

    /// Any authenticated connection of `peer`'s (they are in `by_peer`
    /// once the handshake is over), as `connect` would return it.
    fn existing_link(&self, peer: u32) -> Option<Arc<dyn Link>> {
        let c = self
            .by_peer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&peer)
            .cloned()?;
        Some(self.link(c))
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
            crate::say!("gw[{}]: tcp: {e}", self.me);
        }
    }

    fn after_block(&self) {
        let conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        self.blockers.fetch_sub(1, Ordering::Relaxed);
        if let Err(e) = self.sync_epoll(&conns) {
            crate::say!("gw[{}]: tcp: {e}", self.me);
        }
    }

    fn poll_class(&self) -> PollClass {
        PollClass::Expensive
    }

    fn wait_fd(&self) -> Option<RawFd> {
        Some(self.epoll.as_raw_fd())
    }

    fn has_pending_output(&self) -> bool {
        // A connect in progress completes only if someone polls; output
        // held for the pair's connection leaves once that one authenticates.
        self.queued_conns.load(Ordering::Relaxed) > 0
            || self.connects_pending.load(Ordering::Relaxed) > 0
            || self.holding.load(Ordering::Relaxed) > 0
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
            (
                "unauthenticated_dropped",
                self.unauthenticated_dropped.load(Ordering::Relaxed),
            ),
            (
                "handshake_timeouts",
                self.handshake_timeouts.load(Ordering::Relaxed),
            ),
            (
                "accept_failures",
                self.accept_failures.load(Ordering::Relaxed),
            ),
        ]
    }

    /// Closes every connection to `peer` (out of the poll set and the
    /// tables, queued output dropped, shut down) and frees its socket: the
    /// descriptor is pointed at /dev/null (`dup2`, atomic), so the kernel
    /// releases the socket now while the number stays valid for the link
    /// object that may outlive it (nothing sends on it: the peer is marked
    /// departed first), and is closed with it.
    fn release_peer(&self, peer: u32) {
        let gone: Vec<Arc<Conn>> = self
            .conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .filter(|c| c.peer.load(Ordering::Relaxed) == peer)
            .cloned()
            .collect();
        let Ok(null) = std::fs::File::open("/dev/null") else {
            return;
        };
        for c in gone {
            // Bytes not read yet are the peer's last messages (a notice of
            // its departure can come by another way, e.g. a coordinator,
            // before them): such a connection is left to the poll, which
            // reads them and then closes it at the end of file.
            let mut unread: libc::c_int = 0;
            // SAFETY: FIONREAD writes one int.
            if unsafe { libc::ioctl(c.fd.as_raw_fd(), libc::FIONREAD, &mut unread) } == 0
                && unread > 0
            {
                continue;
            }
            self.close(&c);
            // SAFETY: dup2 onto a descriptor this connection owns; it stays
            // open (now /dev/null) until the OwnedFd is dropped.
            unsafe { libc::dup2(null.as_raw_fd(), c.fd.as_raw_fd()) };
        }
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
            handshake_timeout: self.handshake_timeout,
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
        self.advance_connects(sink);
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
                self.accept_all(sink);
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
        self.expire_handshakes(sink);
        self.resume_accept();
        self.flush_queued();
        Ok(delivered)
    }
}

#[cfg(test)]
mod place_tests;
#[cfg(test)]
mod tests;
