//! The `udp` method: one datagram socket per context, with reliability,
//! ordering, fragmentation, authentication and congestion control done by our
//! own protocol ([`proto`], a state machine without I/O) — the PVM-over-AM
//! design of 1998 with cumulative/selective acks, RTT-based timeouts and a
//! congestion window ([`cc`]).
//!
//! This file is only the thin I/O layer: it owns the socket, reads the clock,
//! feeds received datagrams and the time to [`proto::Endpoint`], sends what it
//! polls out, and hands complete messages to the context. There is no timer
//! thread: timeouts are checked on every `poll`, and the context's idle wait
//! blocks in slices of at most ~20 ms, so an idle process still retransmits.
//!
//! For unprivileged tests the layer can also impair its own output
//! (`GW_UDP_DROP`, `GW_UDP_DUP`, `GW_UDP_REORDER`): the protocol then sees a
//! lossy, duplicating, reordering network even on loopback.

pub mod cc;
pub mod proto;
#[cfg(test)]
mod tests;

use super::netaddr::{self, Binding, IfaceFilter, Published};
use super::{Cost, Link, Method, MethodEnv, MethodInfo, PollClass, Sink, Waiter};
use crate::error::{Error, Result};
use crate::params::{Kind, ParamDecl};
use proto::{Config, Endpoint, Event};
use std::io::{self, IoSlice};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub const INFO: MethodInfo = MethodInfo {
    name: "udp",
    summary:
        "reliable UDP (own protocol: SACK, RACK loss detection, loss-tolerant AIMD, authenticated)",
    params: PARAMS,
    init,
};

const PARAMS: &[ParamDecl] = &[
    ParamDecl {
        name: "UDP_ADDR",
        default: "auto",
        kind: Kind::Text,
        help: "`auto`: bind every address and publish every usable interface address (see \
               GW_IFACE); a peer in the same network namespace is reached over loopback, one \
               elsewhere at an address in a subnet it shares, else at its first. An IP address: \
               bind and publish only that one (0.0.0.0 is not publishable).",
    },
    ParamDecl {
        name: "UDP_DGRAM",
        default: "0",
        kind: Kind::Size { min: 0, max: 65507 },
        help:
            "Largest datagram sent, headers included (36 bytes); longer messages are fragmented. \
               0 = automatic: 65000 when only loopback is published (bound to a loopback \
               address, or no other interface), else 1472 (an Ethernet \
               MTU minus IP/UDP headers, so IP never fragments: a lost fragment loses the whole \
               datagram). Set the path MTU minus 28 on other networks.",
    },
    ParamDecl {
        name: "UDP_DEPTH",
        default: "0",
        kind: Kind::UInt {
            min: 0,
            max: 1 << 20,
        },
        help: "Window per peer in datagrams: at most this many unacknowledged datagrams in \
               flight, and buffered out of order by the receiver (the AM protocol's depth). \
               0 = automatic: 16 MiB worth of datagrams (256..16384).",
    },
    ParamDecl {
        name: "UDP_CWND",
        default: "32",
        kind: Kind::UInt {
            min: 2,
            max: 1 << 20,
        },
        help: "Initial congestion window in datagrams (then AIMD: slow start, +1 per round \
               trip, x0.7 per loss episode).",
    },
    ParamDecl {
        name: "UDP_TIMEOUT",
        default: "100",
        kind: Kind::UInt {
            min: 1,
            max: 600_000,
        },
        help: "Initial retransmission timeout in milliseconds (before the first round-trip \
               sample; also the first handshake retry interval).",
    },
    ParamDecl {
        name: "UDP_MIN_TIMEOUT",
        default: "30",
        kind: Kind::UInt {
            min: 1,
            max: 600_000,
        },
        help: "Lower bound of the retransmission timeout in milliseconds. It covers a peer that \
               polls late: an idle context sleeps in slices of up to 20 ms before it acks.",
    },
    ParamDecl {
        name: "UDP_MAX_TIMEOUT",
        default: "2000",
        kind: Kind::UInt {
            min: 1,
            max: 600_000,
        },
        help: "Upper bound of the exponential backoff in milliseconds.",
    },
    ParamDecl {
        name: "UDP_ACK_DELAY",
        default: "500",
        kind: Kind::UInt {
            min: 0,
            max: 100_000,
        },
        help: "Microseconds the acknowledgement of a lone datagram waits for a reply to carry \
               it (saves one datagram per request/reply); a 4th datagram or a gap is \
               acknowledged at once.",
    },
    ParamDecl {
        name: "UDP_RETRIES",
        default: "12",
        kind: Kind::UInt { min: 1, max: 1000 },
        help: "Consecutive retransmission timeouts without any acknowledgement after which the \
               peer is declared unreachable and sends to it fail (~16 s with the defaults). \
               A peer must enter progress (any MPI/gridwire call) within this limit.",
    },
    ParamDecl {
        name: "UDP_SNDBUF",
        default: "4m",
        kind: Kind::Size {
            min: 0,
            max: 1 << 30,
        },
        help: "SO_SNDBUF of the socket (0 = kernel default); capped by net.core.wmem_max \
               unless running as root.",
    },
    ParamDecl {
        name: "UDP_RCVBUF",
        default: "4m",
        kind: Kind::Size {
            min: 0,
            max: 1 << 30,
        },
        help: "SO_RCVBUF of the socket (0 = kernel default); capped by net.core.rmem_max \
               unless running as root. Too small a buffer shows up as loss.",
    },
    ParamDecl {
        name: "UDP_MAX_QUEUED",
        default: "16m",
        kind: Kind::Size {
            min: 0,
            max: 1 << 40,
        },
        help: "Bytes per peer buffered unacknowledged before a sender waits (driving progress) \
               for acknowledgements.",
    },
    ParamDecl {
        name: "UDP_LINGER",
        default: "2000",
        kind: Kind::UInt {
            min: 0,
            max: 600_000,
        },
        help: "Milliseconds shutdown keeps retransmitting until every peer acknowledged the \
               last messages (a finalize barrier's last message must not die with the socket).",
    },
    ParamDecl {
        name: "UDP_DROP",
        default: "0",
        kind: Kind::Text,
        help: "Testing: percentage of outgoing datagrams silently dropped (e.g. 5 or 0.5).",
    },
    ParamDecl {
        name: "UDP_DUP",
        default: "0",
        kind: Kind::Text,
        help: "Testing: percentage of outgoing datagrams sent twice.",
    },
    ParamDecl {
        name: "UDP_REORDER",
        default: "0",
        kind: Kind::Text,
        help: "Testing: percentage of outgoing datagrams held back and sent after later ones.",
    },
];

fn percent(env: &MethodEnv, name: &str) -> Result<f64> {
    let raw = env.params.text(name);
    match raw.trim().parse::<f64>() {
        Ok(v) if (0.0..=100.0).contains(&v) => Ok(v / 100.0),
        _ => Err(Error::BadParam {
            var: format!("GW_{name}"),
            value: raw.into(),
            reason: "expected a percentage 0..100".into(),
        }),
    }
}

fn init(env: &MethodEnv) -> Result<Option<Arc<dyn Method>>> {
    let binding = Binding::from_params(env.params, "UDP_ADDR")?;
    let addr = binding.bind_ip();
    let sock = UdpSocket::bind((addr, 0)).map_err(|e| Error::io(format!("udp: bind {addr}"), e))?;
    sock.set_nonblocking(true)
        .map_err(|e| Error::io("udp: set_nonblocking", e))?;
    let local = sock
        .local_addr()
        .map_err(|e| Error::io("udp: local_addr", e))?;
    for (opt, force, val) in [
        (
            libc::SO_SNDBUF,
            libc::SO_SNDBUFFORCE,
            env.params.num("UDP_SNDBUF"),
        ),
        (
            libc::SO_RCVBUF,
            libc::SO_RCVBUFFORCE,
            env.params.num("UDP_RCVBUF"),
        ),
    ] {
        if val > 0 {
            let v = val.min(i32::MAX as u64) as libc::c_int;
            // SAFETY: passes a pointer to a live c_int with its exact size. The
            // FORCE variant (root only) may fail; then the capped one is used.
            unsafe {
                let p = &v as *const libc::c_int as *const libc::c_void;
                if libc::setsockopt(sock.as_raw_fd(), libc::SOL_SOCKET, force, p, 4) != 0 {
                    libc::setsockopt(sock.as_raw_fd(), libc::SOL_SOCKET, opt, p, 4);
                }
            }
        }
    }
    let published = binding.publish(local.port());
    let my_addrs = match binding {
        Binding::Auto(addrs) => addrs,
        Binding::Explicit(_) => netaddr::local_addrs(&IfaceFilter::from_params(env.params)?),
    };
    let ms = |n: &str| Duration::from_millis(env.params.num(n));
    let dgram = match env.params.num("UDP_DGRAM") as usize {
        // Only loopback to publish (explicitly, or no other interface): no
        // Ethernet on any path.
        0 if addr.is_loopback() || published.legacy.is_none() && published.addrs.is_empty() => {
            65000
        }
        0 => 1472,
        n => n,
    };
    let cfg = Config {
        me: env.job.ctx_id,
        size: env.job.size.max(1),
        secret: env.job.secret,
        dgram,
        depth: match env.params.num("UDP_DEPTH") {
            0 => ((16u64 << 20) / dgram as u64).clamp(256, 16384),
            n => n,
        },
        initial_rto: ms("UDP_TIMEOUT"),
        min_rto: ms("UDP_MIN_TIMEOUT"),
        max_rto: ms("UDP_MAX_TIMEOUT").max(ms("UDP_MIN_TIMEOUT")),
        retries: env.params.num("UDP_RETRIES") as u32,
        initial_cwnd: env.params.num("UDP_CWND") as usize,
        ack_delay: Duration::from_micros(env.params.num("UDP_ACK_DELAY")),
    };
    let inject = Inject {
        drop: percent(env, "UDP_DROP")?,
        dup: percent(env, "UDP_DUP")?,
        reorder: percent(env, "UDP_REORDER")?,
    };
    let (wait, timer) = wait_fds(sock.as_raw_fd())?;
    let seed = u64::from_le_bytes(crate::auth::nonce()[..8].try_into().expect("8 bytes")) | 1;
    Ok(Some(Arc::new(UdpMethod {
        shared: Arc::new(Shared {
            me: env.job.ctx_id,
            verbose: env.job.verbose,
            published,
            my_netns: netaddr::netns_key(),
            my_addrs,
            sock,
            wait,
            timer,
            max_queued: env.params.num("UDP_MAX_QUEUED") as usize,
            linger: ms("UDP_LINGER"),
            inject,
            st: Mutex::new(State {
                ep: Endpoint::new(cfg),
                rx: vec![0u8; 65536.max(RX_SLOT * RX_BATCH)],
                rng: seed,
                held: Vec::new(),
                out: std::collections::VecDeque::with_capacity(BATCH),
                spare: Vec::new(),
                io: IoCounters::default(),
                traced: Instant::now(),
                armed: None,
                single_rx: false,
            }),
            down: AtomicBool::new(false),
            in_use: AtomicBool::new(false),
            unused_polls: AtomicU32::new(0),
        }),
    })))
}

/// Hands one received datagram to the protocol. The protocol is written
/// not to panic on any input (it is fuzzed for that), but this runs inside
/// `extern "C"` MPI calls, where an unwinding panic aborts the process: a
/// bug triggered by one peer's datagram must cost that peer's link, not
/// every rank. Free when nothing panics.
fn handle_guarded(ep: &mut Endpoint<SocketAddr>, now: Instant, from: SocketAddr, d: &[u8]) {
    guarded(ep, from, d, |ep| ep.handle(now, from, d));
}

/// Runs `f` (the processing of datagram `d` from `from`) and contains a
/// panic in it (see [`handle_guarded`]).
fn guarded<A: Copy + Eq + std::hash::Hash + std::fmt::Debug>(
    ep: &mut Endpoint<A>,
    from: A,
    d: &[u8],
    f: impl FnOnce(&mut Endpoint<A>),
) {
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(ep)));
    if r.is_err() {
        ep.fail_after_panic(from, d);
    }
}

/// Impairment rates (fractions) applied to our own output, for tests.
#[derive(Debug, Clone, Copy)]
struct Inject {
    drop: f64,
    dup: f64,
    reorder: f64,
}

impl Inject {
    fn any(&self) -> bool {
        self.drop > 0.0 || self.dup > 0.0 || self.reorder > 0.0
    }
}

#[derive(Debug, Default)]
struct IoCounters {
    injected_drops: u64,
    injected_dups: u64,
    injected_reorders: u64,
    send_errors: u64,
}

struct State {
    ep: Endpoint<SocketAddr>,
    rx: Vec<u8>,
    rng: u64,
    /// Datagrams held back by reorder injection: (when, destination, bytes).
    held: Vec<(Instant, SocketAddr, Vec<u8>)>,
    /// Datagrams polled from the protocol and not yet taken by the kernel
    /// (the next batch, or what a full socket buffer refused: EAGAIN); they
    /// go out before anything else.
    out: std::collections::VecDeque<(SocketAddr, Vec<u8>)>,
    /// Buffers of datagrams already sent, for reuse.
    spare: Vec<Vec<u8>>,
    io: IoCounters,
    traced: Instant,
    /// When the timer descriptor is set to fire (see [`Shared::arm`]).
    armed: Option<Instant>,
    /// Receive one datagram per call (a peer sent one longer than a batch slot).
    single_rx: bool,
}

/// How often `GW_VERBOSE=3` prints each busy peer's congestion state.
const TRACE_EVERY: Duration = Duration::from_millis(10);

impl State {
    /// xorshift64*: cheap, and deterministic quality does not matter here.
    fn chance(&mut self, p: f64) -> bool {
        if p <= 0.0 {
            return false;
        }
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        let x = self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11;
        (x as f64 / (1u64 << 53) as f64) < p
    }
}

struct Shared {
    me: u32,
    verbose: u8,
    /// Our addresses as published (see `netaddr`).
    published: Published,
    /// Our network namespace (loopback reaches exactly the peers in it).
    my_netns: String,
    /// Our interface addresses (a peer's address in one of their subnets comes first).
    my_addrs: Vec<netaddr::IfAddr>,
    sock: UdpSocket,
    /// The descriptor an idle context sleeps on (`wait_fd`): an epoll set of
    /// the socket and `timer`, a timerfd set to the protocol's next deadline
    /// (pacing, acks, loss and retransmission timers), so a sleeping context
    /// wakes for its timers as well as for datagrams.
    wait: OwnedFd,
    timer: OwnedFd,
    max_queued: usize,
    linger: Duration,
    inject: Inject,
    st: Mutex<State>,
    down: AtomicBool,
    /// The endpoint has had a peer (a link was made or a datagram came).
    /// Until then a poll looks at the socket only every `UNUSED_POLL_EVERY`
    /// calls: each look is a system call and clock reads, and when every
    /// peer uses another method (the common case) they would all be spent
    /// on the latency path of that method's messages.
    in_use: AtomicBool,
    unused_polls: AtomicU32,
}

/// See `Shared::in_use`. A first datagram from a peer waits at most this many
/// polls, once.
const UNUSED_POLL_EVERY: u32 = 256;

pub struct UdpMethod {
    shared: Arc<Shared>,
}

/// Result of one `sendto`.
enum Sent {
    Ok,
    Full,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn sendto(&self, st: &mut State, to: SocketAddr, bytes: &[u8]) -> Sent {
        loop {
            match self.sock.send_to(bytes, to) {
                Ok(_) => return Sent::Ok,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Sent::Full,
                Err(e) => {
                    // E.g. ENETUNREACH or EPERM from a firewall: the datagram is
                    // lost, which the protocol handles like any other loss.
                    st.io.send_errors += 1;
                    if self.verbose >= 3 {
                        crate::say!("gw[{}]: udp: sendto {to}: {e}", self.me);
                    }
                    return Sent::Ok;
                }
            }
        }
    }

    /// Sends everything the protocol has to send (with test impairments),
    /// up to [`BATCH`] datagrams per `sendmmsg` call.
    fn flush(&self, st: &mut State, now: Instant) {
        let mut sent_new = false;
        loop {
            while st.out.len() < BATCH {
                let mut b = st.spare.pop().unwrap_or_default();
                let Some(to) = st.ep.poll_transmit(now, &mut b) else {
                    st.spare.push(b);
                    break;
                };
                if self.inject.any() {
                    if st.chance(self.inject.drop) {
                        st.io.injected_drops += 1;
                        st.spare.push(b);
                        continue;
                    }
                    if st.chance(self.inject.reorder) {
                        st.io.injected_reorders += 1;
                        st.held.push((now, to, b));
                        continue;
                    }
                    if st.chance(self.inject.dup) {
                        st.io.injected_dups += 1;
                        st.out.push_back((to, b.clone()));
                    }
                }
                sent_new = true;
                st.out.push_back((to, b));
            }
            if st.out.is_empty() {
                break;
            }
            let n = self.send_batch(st);
            for _ in 0..n {
                if let Some((_, b)) = st.out.pop_front() {
                    if st.spare.len() < BATCH {
                        st.spare.push(b);
                    }
                }
            }
            if !st.out.is_empty() {
                break; // the socket buffer is full: the rest goes at the next flush
            }
        }
        // Held datagrams go out after later ones did (or after 2 ms at most).
        if !st.held.is_empty() {
            let held = std::mem::take(&mut st.held);
            for (when, to, b) in held {
                if (sent_new && when < now) || now.duration_since(when) > Duration::from_millis(2) {
                    let _ = self.sendto(st, to, &b);
                } else {
                    st.held.push((when, to, b));
                }
            }
        }
    }

    /// Receives up to [`RX_BATCH`] datagrams with one `recvmmsg` into slots
    /// of [`RX_SLOT`] bytes of `rx` and handles them; returns how many. A
    /// datagram longer than a slot (a peer with a larger `GW_UDP_DGRAM`) is
    /// truncated by the kernel: it is dropped (the peer resends it) and this
    /// context receives one datagram per call into the whole buffer from then on.
    fn recv_batch(&self, st: &mut State, rx: &mut [u8]) -> usize {
        let n = (rx.len() / RX_SLOT).min(RX_BATCH);
        // SAFETY: all-zero is a valid value of these plain C structs.
        let mut names: [libc::sockaddr_storage; RX_BATCH] = unsafe { std::mem::zeroed() };
        let mut iov: [libc::iovec; RX_BATCH] = unsafe { std::mem::zeroed() };
        let mut msgs: [libc::mmsghdr; RX_BATCH] = unsafe { std::mem::zeroed() };
        for (i, slot) in rx.chunks_exact_mut(RX_SLOT).take(n).enumerate() {
            iov[i] = libc::iovec {
                iov_base: slot.as_mut_ptr() as *mut libc::c_void,
                iov_len: RX_SLOT,
            };
            let h = &mut msgs[i].msg_hdr;
            h.msg_name = &mut names[i] as *mut libc::sockaddr_storage as *mut libc::c_void;
            h.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            h.msg_iov = &mut iov[i];
            h.msg_iovlen = 1;
        }
        // SAFETY: `msgs[..n]` point into `names`, `iov` and disjoint slots of
        // `rx`, all alive and not otherwise accessed during the call.
        let r = unsafe {
            libc::recvmmsg(
                self.sock.as_raw_fd(),
                msgs.as_mut_ptr(),
                n as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if r <= 0 {
            return 0; // EAGAIN, EINTR, or an ICMP error report: nothing to read now
        }
        let r = r as usize;
        for i in 0..r {
            let h = &msgs[i].msg_hdr;
            let len = msgs[i].msg_len as usize;
            if h.msg_flags & libc::MSG_TRUNC != 0 {
                st.single_rx = true;
                continue;
            }
            let Some(from) = from_sockaddr(&names[i]) else {
                continue;
            };
            let d = &rx[i * RX_SLOT..i * RX_SLOT + len.min(RX_SLOT)];
            handle_guarded(&mut st.ep, Instant::now(), from, d);
        }
        r
    }

    /// Sets the timer descriptor to the protocol's next deadline, unless it
    /// is already set to fire sooner (an early wake-up only costs a poll).
    fn arm(&self, st: &mut State, now: Instant) {
        let Some(t) = st.ep.poll_wakeup() else {
            return;
        };
        if st.armed.is_some_and(|a| a > now && a <= t) {
            return;
        }
        // At least 20 us ahead: a deadline already due (a full socket buffer)
        // must not turn the idle wait into a spin.
        let d = t
            .saturating_duration_since(now)
            .max(Duration::from_micros(20));
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: d.as_secs() as libc::time_t,
                tv_nsec: d.subsec_nanos() as libc::c_long,
            },
        };
        // SAFETY: `spec` is a live itimerspec; the old value is not wanted.
        unsafe { libc::timerfd_settime(self.timer.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
        st.armed = Some(now + d);
    }

    /// Hands the first datagrams of `st.out` (at most [`BATCH`]) to the
    /// kernel with one `sendmmsg`; returns how many it took (a datagram
    /// refused with an error other than EAGAIN counts as taken: it is lost,
    /// which the protocol repairs like any other loss).
    fn send_batch(&self, st: &mut State) -> usize {
        let n = st.out.len().min(BATCH);
        if n == 1 {
            // One datagram (a request or reply): a plain sendto is cheaper
            // than setting up a batch (the latency path).
            let (to, b) = st.out.pop_front().expect("one datagram");
            let sent = self.sendto(st, to, &b);
            st.out.push_front((to, b));
            return match sent {
                Sent::Ok => 1,
                Sent::Full => 0,
            };
        }
        // SAFETY: all-zero is a valid value of these plain C structs.
        let mut names: [libc::sockaddr_storage; BATCH] = unsafe { std::mem::zeroed() };
        let mut iov: [libc::iovec; BATCH] = unsafe { std::mem::zeroed() };
        let mut msgs: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
        for (i, (to, b)) in st.out.iter().take(n).enumerate() {
            let len = sockaddr(to, &mut names[i]);
            iov[i] = libc::iovec {
                iov_base: b.as_ptr() as *mut libc::c_void,
                iov_len: b.len(),
            };
            let h = &mut msgs[i].msg_hdr;
            h.msg_name = &mut names[i] as *mut libc::sockaddr_storage as *mut libc::c_void;
            h.msg_namelen = len;
            h.msg_iov = &mut iov[i];
            h.msg_iovlen = 1;
        }
        let mut done = 0;
        while done < n {
            // SAFETY: `msgs[done..n]` are initialised mmsghdr whose names and
            // iovecs point into `names`, `iov` and the buffers of `st.out`,
            // all alive and unmodified until this call returns.
            let r = unsafe {
                libc::sendmmsg(
                    self.sock.as_raw_fd(),
                    msgs[done..].as_mut_ptr(),
                    (n - done) as libc::c_uint,
                    0,
                )
            };
            if r > 0 {
                done += r as usize;
                continue;
            }
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => break,
                _ => {
                    // E.g. ENETUNREACH or EPERM from a firewall: this datagram
                    // is lost; go on with the next.
                    st.io.send_errors += 1;
                    if self.verbose >= 3 {
                        crate::say!("gw[{}]: udp: sendmmsg to {}: {e}", self.me, st.out[done].0);
                    }
                    done += 1;
                }
            }
        }
        done
    }

    /// Reads every waiting datagram (bounded), runs timers, flushes, and
    /// returns the protocol's events. The lock is released by the caller
    /// before delivering, because handlers send (and so lock) again.
    fn drive(&self, st: &mut State) -> Vec<Event> {
        if st.armed.is_some_and(|a| a <= Instant::now()) {
            // The timer has fired (or is about to): consume its expiry so
            // the wait descriptor stops being readable.
            let mut n = [0u8; 8];
            // SAFETY: reads at most 8 bytes into a live 8-byte buffer; the
            // timerfd is non-blocking.
            unsafe {
                libc::read(
                    self.timer.as_raw_fd(),
                    n.as_mut_ptr() as *mut libc::c_void,
                    8,
                )
            };
            st.armed = None;
        }
        for _round in 0..16 {
            let mut got = 0;
            let mut rx = std::mem::take(&mut st.rx);
            while got < 64 {
                if !st.single_rx && st.ep.config().dgram <= RX_SLOT {
                    match self.recv_batch(st, &mut rx) {
                        0 => break,
                        k => {
                            got += k;
                            if k < RX_BATCH {
                                break; // the socket is drained
                            }
                            continue;
                        }
                    }
                }
                match self.sock.recv_from(&mut rx) {
                    Ok((n, from)) => {
                        got += 1;
                        // The clock is read after the datagram arrived: a time
                        // read before the receive call would be early by as
                        // long as the process was preempted in between (many
                        // ms on a loaded machine), and an ack processed with
                        // it gives a round-trip sample shorter than the path's,
                        // which the controller then takes for its minimum.
                        handle_guarded(&mut st.ep, Instant::now(), from, &rx[..n]);
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(_) => break, // WouldBlock, or an ICMP error report: nothing to read
                }
            }
            st.rx = rx;
            self.flush(st, Instant::now());
            if got < 64 {
                break;
            }
        }
        let now = Instant::now();
        st.ep.handle_timeout(now);
        self.flush(st, now);
        if self.verbose >= 3 && now.duration_since(st.traced) >= TRACE_EVERY {
            st.traced = now;
            let ms = |d: Option<Duration>| d.unwrap_or_default().as_secs_f64() * 1e3;
            for p in st.ep.peer_states() {
                crate::say!(
                    "gw[{}]: udp: cc to {}: window {} in_flight {} buffered {} srtt {:.1} ms min_rtt {:.1} ms lost {} retransmits {} timeouts {}",
                    self.me, p.peer, p.window, p.in_flight, p.buffered, ms(p.srtt), ms(p.min_rtt), p.lost,
                    st.ep.counters.retransmits, st.ep.counters.timeouts
                );
            }
        }
        self.arm(st, now);
        let mut ev = Vec::new();
        while let Some(e) = st.ep.poll_event() {
            ev.push(e);
        }
        ev
    }
}

impl Method for UdpMethod {
    fn name(&self) -> &'static str {
        "udp"
    }

    fn descriptor(&self) -> Vec<u8> {
        self.shared.published.encode()
    }

    fn describe(&self, d: &[u8]) -> String {
        format!("udp {}", String::from_utf8_lossy(d))
    }

    fn reachable(&self, remote: &[u8]) -> bool {
        self.shared.peer_addr(remote).is_some()
    }

    fn connect(&self, peer: u32, remote: &[u8]) -> Result<Arc<dyn Link>> {
        if Published::parse(remote).is_none() {
            return Err(Error::Protocol {
                peer: peer.to_string(),
                what: "malformed udp descriptor".into(),
            });
        }
        // Datagrams need no connect to try: the best address is used (the
        // handshake's retries and its failure message cover an unreachable one).
        let addr = self
            .shared
            .peer_addr(remote)
            .ok_or_else(|| Error::LinkFailed {
                peer,
                method: "udp",
                reason: format!(
                    "rank {peer} published no udp address reachable from here \
                 (loopback only, another address family, or left out by GW_IFACE)"
                ),
            })?;
        let s = &self.shared;
        let mut st = s.lock();
        st.ep.connect(peer, addr, Instant::now());
        s.in_use.store(true, Ordering::Relaxed);
        s.flush(&mut st, Instant::now());
        if s.verbose >= 2 {
            crate::say!(
                "gw[{}]: udp: authenticating with context {peer} at {addr}",
                s.me
            );
        }
        Ok(Arc::new(UdpLink {
            shared: s.clone(),
            peer,
        }))
    }

    fn poll(&self, sink: &mut dyn Sink) -> Result<usize> {
        let s = &self.shared;
        if s.down.load(Ordering::Relaxed) {
            return Ok(0);
        }
        if !s.in_use.load(Ordering::Relaxed) {
            // Only the thread holding the context's progress lock polls, so
            // a plain load and store count the polls.
            let n = s.unused_polls.load(Ordering::Relaxed);
            s.unused_polls.store(n.wrapping_add(1), Ordering::Relaxed);
            if !n.is_multiple_of(UNUSED_POLL_EVERY) {
                return Ok(0);
            }
        }
        let events = {
            let mut st = s.lock();
            let ev = s.drive(&mut st);
            if !st.ep.is_unused() {
                s.in_use.store(true, Ordering::Relaxed);
            }
            ev
        };
        let mut delivered = 0;
        for e in events {
            match e {
                Event::Message { src, data } => {
                    sink.deliver(src, &data);
                    delivered += 1;
                }
                Event::Failed { peer, reason } => sink.link_broken(peer, reason),
            }
        }
        Ok(delivered)
    }

    fn poll_class(&self) -> PollClass {
        PollClass::Expensive
    }

    fn wait_fd(&self) -> Option<RawFd> {
        Some(self.shared.wait.as_raw_fd())
    }

    fn has_pending_output(&self) -> bool {
        let st = self.shared.lock();
        st.ep.has_unacked() || !st.out.is_empty()
    }

    fn cost(&self) -> Cost {
        Cost {
            latency_ns: 20_000,
            bandwidth_mb_s: 1_000,
        }
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let st = self.shared.lock();
        let c = &st.ep.counters;
        vec![
            ("garbage_dropped", c.garbage),
            ("auth_failed", c.auth_failed),
            ("unauthenticated_dropped", c.unauthenticated),
            ("replayed", c.replayed),
            ("migrations", c.migrations),
            ("from_departed", c.from_departed),
            ("peers_held", st.ep.peer_count() as u64),
            ("over_budget", c.over_budget),
            ("ctl_overflow", c.ctl_overflow),
            ("retransmits", c.retransmits),
            ("timeouts", c.timeouts),
            ("duplicates", c.duplicates),
            ("dgrams_sent", c.dgrams_sent),
            ("dgrams_received", c.dgrams_received),
            ("injected_drops", st.io.injected_drops),
            ("injected_dups", st.io.injected_dups),
            ("injected_reorders", st.io.injected_reorders),
            ("send_errors", st.io.send_errors),
        ]
    }

    /// Drops what we were sending `peer` now and its whole state once its
    /// last datagrams are in (see `Endpoint::release`); the timer wakes the
    /// poll for that.
    fn release_peer(&self, peer: u32) {
        let mut st = self.shared.lock();
        st.ep.release(peer, Instant::now());
        let now = Instant::now();
        self.shared.arm(&mut st, now);
    }

    fn shutdown(&self) {
        let s = &self.shared;
        if s.down.swap(true, Ordering::Relaxed) {
            return;
        }
        // Linger: the last messages (a finalize barrier's) may still need
        // retransmitting; messages arriving now are dropped, acks are processed.
        // Acknowledgements held back for a reply to carry them go now: no
        // reply will come (see `Endpoint::ack_pending_now`).
        let end = Instant::now() + s.linger;
        s.lock().ep.ack_pending_now();
        loop {
            {
                let mut st = s.lock();
                let _ = s.drive(&mut st);
                let done = !st.ep.has_unacked() && !st.ep.acks_pending();
                if done || Instant::now() >= end {
                    break;
                }
            }
            let mut pfd = libc::pollfd {
                fd: s.sock.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one live pollfd, count 1.
            unsafe { libc::poll(&mut pfd, 1, 2) };
        }
        if s.verbose >= 2 {
            crate::say!(
                "gw[{}]: udp: shut down; counters {:?}",
                s.me,
                self.counters()
            );
        }
    }
}

/// Creates the wait descriptor: an epoll set holding the socket and a new
/// timerfd (returned second).
fn wait_fds(sock: RawFd) -> Result<(OwnedFd, OwnedFd)> {
    // SAFETY: plain descriptor-creating calls; results are checked.
    let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if ep < 0 {
        return Err(Error::io("udp: epoll_create1", io::Error::last_os_error()));
    }
    // SAFETY: `ep` is a fresh descriptor we own.
    let ep = unsafe { OwnedFd::from_raw_fd(ep) };
    // SAFETY: as above.
    let tfd = unsafe {
        libc::timerfd_create(
            libc::CLOCK_MONOTONIC,
            libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
        )
    };
    if tfd < 0 {
        return Err(Error::io("udp: timerfd_create", io::Error::last_os_error()));
    }
    // SAFETY: `tfd` is a fresh descriptor we own.
    let tfd = unsafe { OwnedFd::from_raw_fd(tfd) };
    for fd in [sock, tfd.as_raw_fd()] {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: fd as u64,
        };
        // SAFETY: `ev` is a live epoll_event; both descriptors are open.
        if unsafe { libc::epoll_ctl(ep.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) } != 0 {
            return Err(Error::io("udp: epoll_ctl", io::Error::last_os_error()));
        }
    }
    Ok((ep, tfd))
}

/// Datagrams received per `recvmmsg` call, into slots of `RX_SLOT` bytes
/// (used when the datagram size fits a slot; loopback's 65000-byte datagrams
/// are received one per call).
const RX_BATCH: usize = 16;
const RX_SLOT: usize = 4096;

/// The address in a C socket address filled in by the kernel.
fn from_sockaddr(ss: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match ss.ss_family as libc::c_int {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in, which it
            // is large enough and aligned for.
            let sin = unsafe { &*(ss as *const _ as *const libc::sockaddr_in) };
            Some(SocketAddr::from((
                u32::from_be(sin.sin_addr.s_addr).to_be_bytes(),
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: as above, for sockaddr_in6.
            let sin6 = unsafe { &*(ss as *const _ as *const libc::sockaddr_in6) };
            Some(SocketAddr::V6(std::net::SocketAddrV6::new(
                sin6.sin6_addr.s6_addr.into(),
                u16::from_be(sin6.sin6_port),
                sin6.sin6_flowinfo,
                sin6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// Datagrams handed to the kernel per `sendmmsg` call.
const BATCH: usize = 32;

/// Writes `a` as a C socket address into `out`; returns its length.
fn sockaddr(a: &SocketAddr, out: &mut libc::sockaddr_storage) -> libc::socklen_t {
    match a {
        SocketAddr::V4(v4) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: v4.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(v4.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
            unsafe { std::ptr::write(out as *mut _ as *mut libc::sockaddr_in, sin) };
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t
        }
        SocketAddr::V6(v6) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: v6.port().to_be(),
                sin6_flowinfo: v6.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: v6.ip().octets(),
                },
                sin6_scope_id: v6.scope_id(),
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in6.
            unsafe { std::ptr::write(out as *mut _ as *mut libc::sockaddr_in6, sin6) };
            std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t
        }
    }
}

impl Shared {
    /// The address to reach a peer's descriptor at (see `netaddr`): the
    /// best one of the same address family as our socket.
    fn peer_addr(&self, remote: &[u8]) -> Option<SocketAddr> {
        let v4 = self.published.legacy.is_none_or(|ip| ip.is_ipv4());
        Published::parse(remote)?
            .candidates(&self.my_netns, &self.my_addrs)
            .into_iter()
            .find(|a| a.is_ipv4() == v4)
    }
}

struct UdpLink {
    shared: Arc<Shared>,
    peer: u32,
}

impl UdpLink {
    fn failed(&self, reason: String) -> Error {
        Error::LinkFailed {
            peer: self.peer,
            method: "udp",
            reason,
        }
    }
}

impl Link for UdpLink {
    fn method(&self) -> &'static str {
        "udp"
    }

    fn rtt(&self) -> Option<Duration> {
        self.shared.lock().ep.srtt(self.peer)
    }

    fn send(&self, iov: &[IoSlice<'_>], waiter: &dyn Waiter) -> Result<()> {
        let s = &self.shared;
        let mut buffered = {
            let mut st = s.lock();
            let now = Instant::now();
            st.ep
                .send(self.peer, iov, now)
                .map_err(|why| self.failed(why))?;

            s.flush(&mut st, now);
            st.ep.buffered(self.peer)
        };
        // Bound memory: wait (driving progress, which processes acks) while
        // this peer holds too much unacknowledged data.
        while buffered > s.max_queued {
            if !waiter.progress() {
                break;
            }
            let st = s.lock();

            if let Some(why) = st.ep.failure(self.peer) {
                return Err(self.failed(why.to_string()));
            }
            buffered = st.ep.buffered(self.peer);
        }
        Ok(())
    }
}
