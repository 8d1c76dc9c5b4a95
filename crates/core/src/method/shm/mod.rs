//! `shm`: contexts on the same host talk through lock-free rings in shared
//! memory, with no system call per message.
//!
//! **Overview.** Each context listens on an abstract unix socket named by a
//! random nonce in its descriptor ([`handoff`]). To reach peer P, a sender
//! creates a pair segment — a sealed memfd ([`segment`]) holding a
//! single-producer/single-consumer ring ([`ring`], layout in [`layout`]) —
//! connects to P's socket and hands the segment over (`SCM_RIGHTS`). P looks
//! at its socket once every `ACCEPT_EVERY` (16384) polls (and whenever it wakes from
//! a sleep), checks and maps new rings, then drains every incoming ring,
//! copying each record out of shared memory before delivering it.
//!
//! **Features.** Small messages (≤ `SHM_EAGER_MAX`): one record gathered from the
//! caller's iovecs. Larger ones: fragments through the ring, reassembled by
//! the receiver; from `SHM_CMA_MIN` on, a single copy with `process_vm_readv`
//! by the receiver (cross-memory attach) when the pair allows it. Connection
//! on demand, per link FIFO order, a backlog when the sender may not wait
//! (see [`link`]).
//!
//! **Hostile peers.** Nothing has a name in `/dev/shm`: segments and sockets
//! vanish with the processes that hold them (killed ones included, under any
//! launcher), and a repeated job id cannot collide. Segments are sealed, so
//! no peer can shrink one under our mapping (SIGBUS). Every word a peer
//! writes is read once, checked, and bounded (`SHM_MAX_MSG`); a violation
//! fails that link with a message naming the rank.
//!
//! **Limitations.** Both sides must share a host identity, a network
//! namespace (the abstract socket) and a user. A dead sender simply stops
//! producing; a dead receiver is noticed by a waiting sender (every few
//! hundred progress rounds) by its end of the connection closing — whatever
//! its pid namespace, and immune to pid reuse — and reported as a link
//! failure. Per connected pair and direction: `SHM_RING_SIZE` + 4 KiB of
//! memory and one file descriptor on each side (the connection), plus one
//! listening socket per context: mind `ulimit -n` with hundreds of ranks per host.
//!
//! **Parameters.** See [`PARAMS`]: `SHM_RING_SIZE`, `SHM_EAGER_MAX`,
//! `SHM_PLACE_MIN`, `SHM_PIPELINE_MIN`, `SHM_CMA_MIN`, `SHM_CMA`, `SHM_MAX_MSG`.

mod cma;
mod doorbell;
mod handoff;
#[doc(hidden)]
pub mod hostile;
mod layout;
mod link;
mod ring;
mod segment;

use self::handoff::{Cred, Listener};
use self::layout::*;
use self::link::ShmLink;
use self::ring::Consumer;
use self::segment::Segment;
use super::{Cost, JobInfo, Link, Method, MethodEnv, MethodInfo, PollClass, Sink, PLACE_HEAD};
use crate::error::{Error, Result};
use crate::params::{Kind, ParamDecl};
use crate::sync::TryLock;
use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

pub const PARAMS: &[ParamDecl] = &[
    ParamDecl {
        name: "SHM_RING_SIZE",
        default: "256k",
        kind: Kind::Size { min: 4096, max: 1 << 30 },
        help: "Bytes of each shared-memory ring (one per connected pair and direction; rounded up to \
               a power of two). 256k keeps a ring in L2 while holding four 64 KiB fragments in flight.",
    },
    ParamDecl {
        name: "SHM_EAGER_MAX",
        default: "64k",
        kind: Kind::Size { min: 64, max: 1 << 29 },
        help: "Largest message copied through the ring as one record (lowest latency). Larger ones \
               go as ring fragments, or by single copy from SHM_CMA_MIN on. Capped at half the ring. \
               64k (the fragment size): a 32 KiB MPI message as one record took 4.5 us one way, as \
               fragments reassembled by the receiver (a third copy) 5.2 us.",
    },
    ParamDecl {
        name: "SHM_PLACE_MIN",
        default: "2k",
        kind: Kind::Size { min: 64, max: 1 << 40 },
        help: "Smallest message record offered to the receiver's placement: an MPI eager message that \
               a posted receive matches is copied from the ring straight into the receive buffer \
               (one copy on the receiving side instead of two). Below it the copy saved costs less \
               than the matching and bookkeeping of a placement. Above SHM_EAGER_MAX: never.",
    },
    ParamDecl {
        name: "SHM_PIPELINE_MIN",
        default: "1g",
        kind: Kind::Size { min: 64, max: 1 << 40 },
        help: "Smallest message record (up to SHM_EAGER_MAX) sent as a few fragments pushed one after \
               another, so that the receiver copies each while the sender writes the next, \
               instead of as one record. Above SHM_EAGER_MAX: never.",
    },
    ParamDecl {
        name: "SHM_CMA_MIN",
        default: "32m",
        kind: Kind::Size { min: 0, max: 1 << 40 },
        help: "Smallest message sent by single copy (process_vm_readv) rather than ring fragments. \
               Measured on a 2-core KVM guest: process_vm_readv copies ~14 GB/s (page pinning), two \
               cache-resident copies through the ring ~40 GB/s up to 4 MiB and still ~2x at 64 MiB; \
               single copy saves memory bandwidth when many ranks share a host.",
    },
    ParamDecl {
        name: "SHM_MAX_MSG",
        default: "2g",
        kind: Kind::Size {
            min: 1024,
            max: 1 << 40,
        },
        help: "Largest message accepted from a peer on this host (fragmented or by single copy): \
               a longer announced length is a protocol error, never an allocation.",
    },
    ParamDecl {
        name: "SHM_CMA",
        default: "auto",
        kind: Kind::Choice(&["auto", "on", "off"]),
        help: "Single-copy large messages with process_vm_readv: auto = where permitted (probed per pair), \
               on = fail at start-up if not permitted here, off = always use ring fragments.",
    },
    ParamDecl {
        name: "SHM_DOORBELL",
        default: "1",
        kind: Kind::Bool,
        help: "A receiver that sleeps (out of spinning, e.g. more ranks than cores) is woken by a \
               byte on its sender's connection when a record arrives, instead of at the end of its \
               sleep slice (1-20 ms). Costs a sender one load per message while nobody sleeps.",
    },
];

pub const INFO: MethodInfo = MethodInfo {
    name: "shm",
    summary: "same host: lock-free rings in POSIX shared memory; huge messages by single copy (process_vm_readv)",
    params: PARAMS,
    init,
};

/// Record tags (the ring's per-record `u32`).
pub(crate) const TAG_EAGER: u32 = 1;
pub(crate) const TAG_RNDV: u32 = 2;
pub(crate) const TAG_FIRST: u32 = 3;
pub(crate) const TAG_MORE: u32 = 4;
/// Most iovecs a rendezvous record lists (more go as fragments).
pub(crate) const MAX_RNDV_IOV: usize = 64;
/// Records taken from one ring per poll, so one busy sender cannot starve the others.
const POLL_BUDGET: usize = 64;
/// A ring's receive buffer larger than this is not kept by the ring after use;
/// the largest one (up to `MAX_SPARE`) is kept once per process instead, so a
/// stream of huge messages does not pay for fresh pages each time (page faults
/// cost more than the copy) while memory stays bounded.
const KEEP_RBUF: usize = 4 << 20;
const MAX_SPARE: usize = 256 << 20;

pub(crate) struct Config {
    /// Ring data bytes (power of two).
    pub cap: usize,
    pub eager_max: usize,
    /// Eager records of at least this many bytes are offered to
    /// [`Sink::place_whole`] (`SHM_PLACE_MIN`).
    pub place_min: usize,
    /// Records of at least this many bytes (up to `eager_max`) go as
    /// fragments pushed back to back (`SHM_PIPELINE_MIN`, see `link.rs`).
    pub pipe_min: usize,
    /// Messages of at least this many bytes go by single copy when the pair allows it.
    pub cma_min: usize,
    /// Data bytes per fragment.
    pub chunk: usize,
    /// We may use CMA (as a receiver: probe senders; as a sender: use it when the receiver says so).
    pub cma: bool,
    /// Largest message we accept (`SHM_MAX_MSG`): bounds what a peer's
    /// announced length can make us allocate.
    pub max_msg: usize,
}

/// What the method and its links share.
pub(crate) struct Shared {
    pub cfg: Config,
    pub closed: AtomicBool,
    /// Links with a backlog or unfinished owned rendezvous.
    pub pending_links: AtomicUsize,
    /// The process-wide large receive buffer (see `KEEP_RBUF`).
    spare: Mutex<Vec<u8>>,
}

impl Shared {
    /// Empties `buf` and makes it able to hold `n` bytes without growing,
    /// borrowing the spare if it helps.
    fn lend(&self, buf: &mut Vec<u8>, n: usize) {
        if buf.capacity() < n {
            if let Ok(mut s) = self.spare.try_lock() {
                if s.capacity() > buf.capacity() {
                    std::mem::swap(buf, &mut *s);
                }
            }
        }
        buf.clear();
    }

    /// After a delivery: keeps the larger of `buf` and the spare as the spare,
    /// and leaves `buf` no larger than `KEEP_RBUF`.
    fn give_back(&self, buf: &mut Vec<u8>) {
        if buf.capacity() <= KEEP_RBUF {
            return;
        }
        if let Ok(mut s) = self.spare.try_lock() {
            if buf.capacity() > s.capacity() && buf.capacity() <= MAX_SPARE {
                std::mem::swap(buf, &mut *s);
            }
        }
        if buf.capacity() > KEEP_RBUF {
            *buf = Vec::new();
        }
    }
}

/// Our descriptor: `[2, cma, pid u32, nonce u64, host len u16, host, job len u16, job]`
/// (`nonce` names our listening socket, see [`handoff`]).
struct Desc {
    cma: bool,
    pid: u32,
    nonce: u64,
    host: String,
    job: String,
}

impl Desc {
    fn encode(&self) -> Vec<u8> {
        let mut v = vec![2u8, self.cma as u8];
        v.extend_from_slice(&self.pid.to_le_bytes());
        v.extend_from_slice(&self.nonce.to_le_bytes());
        for s in [&self.host, &self.job] {
            v.extend_from_slice(&(s.len() as u16).to_le_bytes());
            v.extend_from_slice(s.as_bytes());
        }
        v
    }

    fn parse(b: &[u8]) -> Option<Desc> {
        if b.len() < 14 || b[0] != 2 {
            return None;
        }
        let pid = u32::from_le_bytes(b[2..6].try_into().ok()?);
        let nonce = u64::from_le_bytes(b[6..14].try_into().ok()?);
        let mut rest = &b[14..];
        let mut take = || -> Option<String> {
            let n = u16::from_le_bytes(rest.get(..2)?.try_into().ok()?) as usize;
            let s = String::from_utf8(rest.get(2..2 + n)?.to_vec()).ok()?;
            rest = &rest[2 + n..];
            Some(s)
        };
        let host = take()?;
        let job = take()?;
        Some(Desc {
            cma: b[1] != 0,
            pid,
            nonce,
            host,
            job,
        })
    }
}

/// A fragmented message placed by the sink ([`Sink::place_whole`]).
struct Placing {
    dest: super::Destination,
    /// The message's first bytes (handed back with it: `dest.at` of them).
    head: [u8; PLACE_HEAD],
    /// Bytes of the message arrived so far.
    got: usize,
}

/// One incoming ring (from context `src`).
struct Incoming {
    src: u32,
    pid: libc::pid_t,
    cons: Consumer,
    /// Receive buffer for rendezvous copies and reassembly, reused (a
    /// fragmented message is contiguous in the ring, so they never overlap);
    /// `expect` = total length of the message being reassembled.
    buf: Vec<u8>,
    /// Where an eager record is copied out of the ring before delivery (the
    /// sender can still write the ring; see `ring::Record`). Grows to the
    /// largest eager record seen, then is reused: no allocation per message.
    eager: Vec<u8>,
    expect: Option<usize>,
    /// The fragmented message being received straight where the sink
    /// placed it (instead of into `buf`); dropped (abandoned) with the
    /// link if it fails before the last fragment.
    placing: Option<Placing>,
    failed: bool,
    /// Our end of the sender's connection, open while we consume: its
    /// closing (we died, or dropped the pair) is the sender's notice.
    _conn: Option<OwnedFd>,
    // Last: outlives the consumer's pointers.
    seg: Segment,
}

impl Incoming {
    fn rx(&self) -> &RxState {
        // SAFETY: the mapping lives as long as self and is a checked pair segment.
        unsafe { pair_rx(self.seg.as_ptr()) }
    }

    /// Delivers up to `POLL_BUDGET` messages; returns how many.
    fn drain(&mut self, sink: &mut dyn Sink, shared: &Shared) -> usize {
        if self.failed {
            return 0;
        }
        // SAFETY: as in `rx`; a reference to an atomic, taken from the raw
        // pointer so the consumer can be borrowed mutably alongside it.
        let done = unsafe { pair_done(self.seg.as_ptr()) };
        let Incoming {
            src,
            pid,
            cons,
            buf,
            eager,
            expect,
            placing,
            ..
        } = self;
        let src = *src;
        let mut n = 0;
        let mut err = None;
        for _ in 0..POLL_BUDGET {
            let rec = match cons.peek() {
                Ok(Some(r)) => r,
                Ok(None) => break,
                Err(e) => {
                    err = Some(e.to_string());
                    break;
                }
            };
            let tag = rec.tag;
            // The sender owns its producer from a message's first fragment to
            // its last, so nothing else may come in between.
            if expect.is_some() && tag != TAG_MORE {
                err = Some(format!("record of kind {tag} inside a fragmented message"));
                break;
            }
            match tag {
                TAG_EAGER => {
                    // A large one straight where the sink wants it, if it
                    // says (MPI: a posted receive matches): one copy on
                    // this side instead of two.
                    if rec.len() < shared.cfg.place_min || !place_record(src, &rec, sink) {
                        eager.clear();
                        rec.append_to(0, eager);
                        sink.deliver_buf(src, eager);
                    }
                    n += 1;
                }
                TAG_RNDV => match rndv_copy(*pid, &rec, buf, shared) {
                    Ok(token) => {
                        // Release the sender before delivering: the copy is complete,
                        // and the handler may want to talk to that very sender.
                        done.store(token, Ordering::Release);
                        sink.deliver_buf(src, buf);
                        n += 1;
                        shared.give_back(buf);
                    }
                    Err(e) => {
                        err = Some(e);
                        break;
                    }
                },
                TAG_FIRST | TAG_MORE => {
                    let from = if tag == TAG_FIRST {
                        let mut word = [0u8; 8];
                        if !rec.copy_to(0, &mut word) {
                            err = Some("short first fragment".into());
                            break;
                        }
                        let total = u64::from_le_bytes(word);
                        if total > shared.cfg.max_msg as u64 {
                            err = Some(format!(
                                "fragmented message of {total} bytes exceeds GW_SHM_MAX_MSG ({})",
                                shared.cfg.max_msg
                            ));
                            break;
                        }
                        let total = total as usize;
                        if total >= shared.cfg.place_min {
                            *placing = place_first(src, &rec, total, sink);
                        }
                        if placing.is_none() {
                            shared.lend(buf, total);
                            // What the peer announced only bounds the message:
                            // beyond `KEEP_RBUF` the buffer grows with the bytes
                            // that arrive. Up to it, room for all at once: a
                            // buffer an owning handler kept is gone, and growing
                            // its successor by doubling would copy it again.
                            buf.reserve(total.min(KEEP_RBUF.max(shared.cfg.chunk)));
                        }
                        *expect = Some(total);
                        8
                    } else {
                        if expect.is_none() {
                            err = Some("fragment without a first fragment".into());
                            break;
                        }
                        0
                    };
                    let total = expect.unwrap_or_default();
                    if let Some(p) = placing {
                        let more = rec.len() - from;
                        if p.got + more > total {
                            err = Some("fragments exceed the announced length".into());
                            break;
                        }
                        // The fragment holds message bytes [got, got + more);
                        // the placed part starts at `dest.at` (the head
                        // before it is in `p.head`).
                        let start = p.got.max(p.dest.at);
                        if start < p.got + more {
                            // SAFETY: `dest.dst..+dest.len` is writable memory
                            // nothing else touches until the placement is handed
                            // back (`Destination`'s contract), not in our ring;
                            // message byte `start` goes to `dst + start - at`,
                            // and `got + more <= total = at + len` keeps the
                            // copy inside it. The source range is checked inside.
                            let copied = unsafe {
                                rec.copy_to_raw(
                                    from + (start - p.got),
                                    (p.dest.dst + (start - p.dest.at)) as *mut u8,
                                    p.got + more - start,
                                )
                            };
                            debug_assert!(copied, "inside the record");
                        }
                        p.got += more;
                        if p.got == total {
                            *expect = None;
                            let p = placing.take().expect("placing");
                            sink.deliver_placed(src, &p.head[..p.dest.at], p.dest);
                            n += 1;
                        }
                        cons.pop();
                        continue;
                    }
                    if buf.len() + (rec.len() - from) > total {
                        err = Some("fragments exceed the announced length".into());
                        break;
                    }
                    rec.append_to(from, buf);
                    if buf.len() == total {
                        *expect = None;
                        sink.deliver_buf(src, buf);
                        n += 1;
                        shared.give_back(buf);
                    }
                }
                t => {
                    err = Some(format!("unknown record tag {t}"));
                    break;
                }
            }
            cons.pop();
        }
        if let Some(reason) = err {
            self.failed = true;
            // A message placed half way is abandoned (its placer fails it).
            self.placing = None;
            // Tell the sender: it must not wait for us any more.
            self.rx().closed.store(1, Ordering::Release);
            sink.link_failed(src, format!("shm: rank {src} sent bad data: {reason}"));
        }
        n
    }
}

/// Offers eager record `rec` from `src` to the sink's placement
/// ([`Sink::place_whole`]); when the sink names a destination, copies the
/// payload there from the ring and delivers it placed. Returns whether it
/// did (else the record is still to be delivered as usual).
fn place_record(src: u32, rec: &ring::Record<'_>, sink: &mut dyn Sink) -> bool {
    let len = rec.len();
    let mut head = [0u8; PLACE_HEAD];
    let shown = len.min(PLACE_HEAD);
    rec.copy_to(0, &mut head[..shown]);
    let Some(dest) = sink.place_whole(src, &head[..shown], len) else {
        return false;
    };
    let fits = dest.at <= shown && dest.at.checked_add(dest.len) == Some(len);
    debug_assert!(
        fits,
        "a placement of {}+{} bytes for a record of {len}",
        dest.at, dest.len
    );
    if !fits {
        // Not the message shown: a placer's bug. Its destination is given
        // back (dropped: abandoned) and the record delivered as usual.
        return false;
    }
    // SAFETY: `dest.dst..+dest.len` is writable memory nothing else touches
    // until the placement is handed back (`Destination`'s contract), and it
    // is not in our ring (the sink's own memory); the source range lies in
    // the record (checked inside).
    let copied = unsafe { rec.copy_to_raw(dest.at, dest.dst as *mut u8, dest.len) };
    debug_assert!(copied, "range checked above");
    sink.deliver_placed(src, &head[..dest.at], dest);
    true
}

/// Offers the fragmented message of `total` bytes whose first fragment
/// (`FIRST {total, data}`) is `rec` to the sink's placement (the caller
/// copies each fragment, this one too, where the sink said). The first
/// fragment must hold the head the sink is shown.
fn place_first(
    src: u32,
    rec: &ring::Record<'_>,
    total: usize,
    sink: &mut dyn Sink,
) -> Option<Placing> {
    let mut head = [0u8; PLACE_HEAD];
    let shown = total.min(PLACE_HEAD);
    let here = rec.len().checked_sub(8)?;
    if here < shown || here > total || !rec.copy_to(8, &mut head[..shown]) {
        return None;
    }
    let dest = sink.place_whole(src, &head[..shown], total)?;
    let fits = dest.at <= shown && dest.at.checked_add(dest.len) == Some(total);
    debug_assert!(
        fits,
        "a placement of {}+{} bytes for a message of {total}",
        dest.at, dest.len
    );
    if !fits {
        return None;
    }
    Some(Placing { dest, head, got: 0 })
}

/// Largest rendezvous record: `{token, total, n}` and `n` ranges.
const RNDV_REC_MAX: usize = 24 + 16 * MAX_RNDV_IOV;

/// Performs the copy a rendezvous record asks for; returns its token. The
/// record is copied out of the ring once and checked as a local copy; the
/// receive buffer holds at most `max_msg` bytes, whatever the record says.
fn rndv_copy(
    pid: libc::pid_t,
    rec: &ring::Record<'_>,
    buf: &mut Vec<u8>,
    shared: &Shared,
) -> std::result::Result<u64, String> {
    let len = rec.len();
    if !(24..=RNDV_REC_MAX).contains(&len) {
        return Err(format!("rendezvous record of {len} bytes"));
    }
    let mut local = [0u8; RNDV_REC_MAX];
    rec.copy_to(0, &mut local[..len]);
    let word = |i: usize| u64::from_le_bytes(local[8 * i..8 * i + 8].try_into().unwrap());
    let (token, total, n) = (word(0), word(1), word(2));
    if n > MAX_RNDV_IOV as u64 || len != 24 + 16 * n as usize {
        return Err("malformed rendezvous record".into());
    }
    let mut ranges = [(0u64, 0u64); MAX_RNDV_IOV];
    let mut sum = 0u64;
    for (i, r) in ranges.iter_mut().enumerate().take(n as usize) {
        *r = (word(3 + 2 * i), word(4 + 2 * i));
        sum = sum.checked_add(r.1).ok_or("rendezvous lengths overflow")?;
    }
    if sum != total {
        return Err("rendezvous lengths do not add up".into());
    }
    if total > shared.cfg.max_msg as u64 {
        return Err(format!(
            "rendezvous of {total} bytes exceeds GW_SHM_MAX_MSG ({})",
            shared.cfg.max_msg
        ));
    }
    let total = total as usize;
    shared.lend(buf, total);
    buf.reserve(total);
    // SAFETY: buf has capacity for total bytes; the kernel writes them all
    // before we set the length (a failure leaves the length at 0).
    unsafe {
        cma::read(pid, &ranges[..n as usize], buf.as_mut_ptr(), total)
            .map_err(|e| format!("process_vm_readv from pid {pid}: {e}"))?;
        buf.set_len(total);
    }
    Ok(token)
}

pub struct Shm {
    shared: Arc<Shared>,
    job_id: String,
    host_id: String,
    ctx: u32,
    size: u32,
    pid: u32,
    verbose: u8,
    /// The word senders' receivers read to probe CMA on a pair.
    probe: Box<u64>,
    /// Names our listening socket (published in our descriptor).
    nonce: u64,
    listener: Listener,
    /// What a sleeping context waits on: the listener, senders' bells.
    bell: doorbell::Bell,
    /// `GW_SHM_DOORBELL`: whether we ask senders to ring.
    doorbell: bool,
    /// Polls since the listener was last looked at (see `ACCEPT_EVERY`).
    /// Plain load and store, not a read-modify-write: a lost count between
    /// two threads only shifts when the next look happens.
    polls: AtomicU32,
    /// Whether any incoming ring was ever attached (they stay until
    /// shutdown): until then a poll takes no lock (a rank whose peers are
    /// all on other hosts polls this method on every round of its socket loop).
    has_incoming: AtomicBool,
    /// The rings we consume, and accepted connections whose hello has not
    /// arrived yet. One try-lock for all of them (not one per ring): only one
    /// thread polls at a time anyway (the context's progress lock), and each
    /// lock taken costs a locked instruction per poll.
    incoming: TryLock<Rx>,
    links: Mutex<HashMap<u32, Arc<ShmLink>>>,
    /// Departed peers whose rings are still to be dropped (`release_peer`).
    released: Mutex<Vec<u32>>,
    has_released: AtomicBool,
}

#[derive(Default)]
struct Rx {
    rings: Vec<Incoming>,
    waiting: Vec<(OwnedFd, Cred)>,
}

/// A poll looks at the listener (one `accept4`, a system call) once in this
/// many rounds (a power of two), and on every thorough poll (after a sleep,
/// which the listener's readability ends). At 1024 an MPI ping-pong lost
/// ~15% (bench/mpi-ab.sh, 8 bytes): a message arriving during the system
/// call (~1 us on a KVM guest) waits for it. At 16384 rounds (a few hundred
/// microseconds of spinning) that cost is lost in the noise, and a new
/// sender's first message waits at most that long (or one sleep slice).
const ACCEPT_EVERY: u32 = 1 << 14;
/// Connections taken per look at the listener.
const ACCEPT_BATCH: usize = 16;

fn init(env: &MethodEnv) -> Result<Option<Arc<dyn Method>>> {
    Ok(Shm::new(env.job, env.params)?.map(|m| Arc::new(m) as Arc<dyn Method>))
}

impl Shm {
    fn new(job: &JobInfo, params: &crate::params::Params) -> Result<Option<Shm>> {
        if job.job_id.is_empty() || job.ctx_id >= job.size {
            return Ok(None);
        }
        let cap = (params.num("SHM_RING_SIZE") as usize).next_power_of_two();
        let eager_max = (params.num("SHM_EAGER_MAX") as usize).min(ring::max_payload(cap));
        // Four fragments fit in the ring, so sender and receiver overlap.
        let chunk = cap / 4 - 64;
        let cma_min = (params.num("SHM_CMA_MIN") as usize).max(eager_max + 1);
        let cma = match params.text("SHM_CMA") {
            "off" => false,
            "on" => {
                if let Err(e) = cma::check_self() {
                    return Err(Error::io(
                        "GW_SHM_CMA=on but process_vm_readv is not permitted here",
                        e,
                    ));
                }
                true
            }
            _ => cma::probe_self(),
        };
        let nonce = *cma::probe_word();
        let listener = match Listener::bind(&job.job_id, job.ctx_id, nonce, job.size + 16) {
            Ok(l) => l,
            Err(e) => {
                if job.verbose >= 1 {
                    crate::say!(
                        "gridwire[{}]: shm unavailable: unix socket: {e}",
                        job.ctx_id
                    );
                }
                return Ok(None);
            }
        };
        let bell = match doorbell::Bell::new(listener.fd()) {
            Ok(b) => b,
            Err(e) => {
                if job.verbose >= 1 {
                    crate::say!("gridwire[{}]: shm unavailable: epoll: {e}", job.ctx_id);
                }
                return Ok(None);
            }
        };
        Ok(Some(Shm {
            shared: Arc::new(Shared {
                cfg: Config {
                    cap,
                    eager_max,
                    place_min: params.num("SHM_PLACE_MIN") as usize,
                    pipe_min: params.num("SHM_PIPELINE_MIN") as usize,
                    cma_min,
                    chunk,
                    cma,
                    max_msg: params.num("SHM_MAX_MSG") as usize,
                },
                closed: AtomicBool::new(false),
                pending_links: AtomicUsize::new(0),
                spare: Mutex::new(Vec::new()),
            }),
            job_id: job.job_id.clone(),
            host_id: job.host_id.clone(),
            ctx: job.ctx_id,
            size: job.size,
            pid: std::process::id(),
            verbose: job.verbose,
            probe: cma::probe_word(),
            nonce,
            listener,
            bell,
            doorbell: params.flag("SHM_DOORBELL"),
            polls: AtomicU32::new(0),
            has_incoming: AtomicBool::new(false),
            incoming: TryLock::new(Rx::default()),
            links: Mutex::new(HashMap::new()),
            released: Mutex::new(Vec::new()),
            has_released: AtomicBool::new(false),
        }))
    }

    fn my_desc(&self) -> Desc {
        Desc {
            cma: self.shared.cfg.cma,
            pid: self.pid,
            nonce: self.nonce,
            host: self.host_id.clone(),
            job: self.job_id.clone(),
        }
    }

    fn fail(&self, peer: u32, reason: String) -> Error {
        Error::LinkFailed {
            peer,
            method: "shm",
            reason,
        }
    }

    /// Takes new connections and maps the rings whose hello has arrived
    /// (the caller holds `incoming`).
    fn attach_new(&self, rx: &mut Rx, sink: &mut dyn Sink) {
        // SAFETY: geteuid has no preconditions.
        let uid = unsafe { libc::geteuid() };
        for _ in 0..ACCEPT_BATCH {
            match self.listener.accept() {
                Ok(Some((conn, cred))) => {
                    // Only our own user's processes, as segment files with
                    // mode 0600 enforced before (abstract sockets have no
                    // permissions of their own).
                    if cred.uid != uid {
                        continue;
                    }
                    // Bounded: a peer that connects and never says hello
                    // loses its place to newer ones.
                    if rx.waiting.len() > self.size as usize + 16 {
                        rx.waiting.remove(0);
                    }
                    rx.waiting.push((conn, cred));
                }
                Ok(None) => break,
                Err(e) => {
                    if self.verbose >= 1 {
                        crate::say!("gridwire[{}]: shm accept: {e}", self.ctx);
                    }
                    break;
                }
            }
        }
        let mut i = 0;
        while i < rx.waiting.len() {
            let hello = match handoff::receive(&rx.waiting[i].0) {
                Ok(None) => {
                    i += 1;
                    continue;
                }
                Ok(Some(h)) => Some(h),
                Err(_) => None,
            };
            let (conn, cred) = rx.waiting.swap_remove(i);
            let Some((hello, fd)) = hello else { continue };
            match self.attach_one(&hello, fd, conn, cred, &rx.rings) {
                Ok(inc) => {
                    // A fresh pair from a sender replaces the one we dropped.
                    rx.rings.retain(|r| r.src != inc.src);
                    rx.rings.push(inc);
                    self.has_incoming.store(true, Ordering::Relaxed);
                }
                Err((Some(src), e)) => sink.link_failed(src, e.to_string()),
                Err((None, e)) => {
                    if self.verbose >= 1 {
                        crate::say!("gridwire[{}]: shm: refused a connection: {e}", self.ctx);
                    }
                }
            }
        }
    }

    /// Checks and maps one offered pair segment. The error names the
    /// sender's rank when the hello did.
    fn attach_one(
        &self,
        hello: &[u8; handoff::HELLO_LEN],
        fd: OwnedFd,
        conn: OwnedFd,
        cred: Cred,
        rings: &[Incoming],
    ) -> std::result::Result<Incoming, (Option<u32>, Error)> {
        let magic = u64::from_le_bytes(hello[..8].try_into().unwrap());
        let src = u32::from_le_bytes(hello[8..12].try_into().unwrap());
        let dst = u32::from_le_bytes(hello[12..].try_into().unwrap());
        if magic != PAIR_MAGIC || src >= self.size || dst != self.ctx || src == self.ctx {
            return Err((None, self.fail(src, "malformed hello".into())));
        }
        // One live pair per sender: a second one while the first works is
        // not something a correct sender does.
        if rings.iter().any(|r| r.src == src && !r.failed) {
            return Err((None, self.fail(src, "second pair while one is live".into())));
        }
        let name = format!("shm pair from rank {src}");
        let seg = Segment::map_sealed(&fd, PAIR_DATA_OFF + 64, PAIR_DATA_OFF + MAX_RING, &name)
            .map_err(|e| (Some(src), self.fail(src, e.to_string())))?;
        drop(fd);
        // Read once, checked and used as this local copy.
        // SAFETY: the mapping holds at least a PairHeader (size checked).
        let id = unsafe { read_pair_ident(seg.as_ptr()) };
        let cap = id.cap as usize;
        if id.magic != PAIR_MAGIC
            || id.src != src
            || id.dst != self.ctx
            || !cap.is_power_of_two()
            || cap < 64
            || cap > seg.len() - PAIR_DATA_OFF
        {
            return Err((
                Some(src),
                self.fail(src, format!("{name}: not a valid pair segment")),
            ));
        }
        // The kernel's pid of the sender, in our namespace (0: not visible),
        // not the one it wrote.
        let pid = cred.pid;
        let cma_ok = self.shared.cfg.cma
            && pid > 0
            && matches!(cma::read_u64(pid, id.probe_addr), Ok(v) if v == id.probe_val);
        // SAFETY: a checked pair segment, mapped while `seg` lives (this scope).
        let rx = unsafe { pair_rx(seg.as_ptr()) };
        rx.cma
            .store(if cma_ok { CMA_OK } else { CMA_NO }, Ordering::Release);
        rx.attached.store(1, Ordering::Release);
        if self.verbose >= 2 {
            crate::say!(
                "gridwire[{}]: shm ring from {src} attached (cma={})",
                self.ctx,
                if cma_ok { "yes" } else { "no" }
            );
        }
        // SAFETY: header and data are inside the mapping (checked), which the
        // Incoming owns; we are the only consumer of this pair's ring.
        let cons = unsafe {
            Consumer::new(
                pair_ring(seg.as_ptr()),
                seg.as_ptr().add(PAIR_DATA_OFF),
                cap,
            )
        }
        .map_err(|e| (Some(src), self.fail(src, format!("{name}: {e}"))))?;
        if let Err(e) = self.bell.watch(conn.as_raw_fd()) {
            // Not fatal: a sleep then lasts its slice, as without a bell.
            crate::say!("gridwire[{}]: shm: doorbell for {src}: {e}", self.ctx);
        }
        Ok(Incoming {
            src,
            pid,
            cons,
            buf: Vec::new(),
            eager: Vec::new(),
            expect: None,
            placing: None,
            failed: false,
            _conn: Some(conn),
            seg,
        })
    }

    fn poll_as(&self, sink: &mut dyn Sink, thorough: bool) -> Result<usize> {
        if self.shared.closed.load(Ordering::Relaxed) {
            return Ok(0);
        }
        let mut n = 0;
        let polls = self.polls.load(Ordering::Relaxed).wrapping_add(1);
        self.polls.store(polls, Ordering::Relaxed);
        let look = thorough || polls & (ACCEPT_EVERY - 1) == 0;
        // Another thread (or an outer poll on this thread, from a handler) is
        // draining: it will deliver what is there.
        if look || self.has_incoming.load(Ordering::Relaxed) {
            if let Some(mut rx) = self.incoming.try_lock() {
                if look {
                    self.attach_new(&mut rx, sink);
                }
                for inc in rx.rings.iter_mut() {
                    n += inc.drain(sink, &self.shared);
                }
                if self.has_released.load(Ordering::Relaxed) {
                    self.drop_released(&mut rx);
                }
            }
        }
        if self.shared.pending_links.load(Ordering::Acquire) > 0 {
            if let Ok(links) = self.links.try_lock() {
                for l in links.values() {
                    l.flush();
                }
            }
        }
        Ok(n)
    }
}

impl Shm {
    /// Drops the rings consumed from peers [`Method::release_peer`] named,
    /// once nothing is left in them: a peer that left on purpose may have
    /// sent its last messages just before, and its leave notice may come by
    /// another way (the coordinator) before they are taken.
    fn drop_released(&self, rx: &mut Rx) {
        let mut gone = self.released.lock().unwrap_or_else(|p| p.into_inner());
        rx.rings.retain(|inc| {
            let drop_it = gone.contains(&inc.src) && !inc.cons.ready();
            if drop_it {
                inc.rx().closed.store(1, Ordering::Release);
            }
            !drop_it
        });
        // Peers whose ring is gone (or who never had one) are done.
        gone.retain(|p| rx.rings.iter().any(|inc| inc.src == *p));
        self.has_released.store(!gone.is_empty(), Ordering::Release);
    }
}

/// Largest ring a sender may offer (`SHM_RING_SIZE`'s maximum).
const MAX_RING: usize = 1 << 30;

impl Method for Shm {
    fn name(&self) -> &'static str {
        "shm"
    }

    fn descriptor(&self) -> Vec<u8> {
        self.my_desc().encode()
    }

    fn describe(&self, descriptor: &[u8]) -> String {
        match Desc::parse(descriptor) {
            Some(d) => format!(
                "host={} pid={} cma={}",
                d.host,
                d.pid,
                if d.cma { "yes" } else { "no" }
            ),
            None => format!("(malformed shm descriptor, {} bytes)", descriptor.len()),
        }
    }

    fn reachable(&self, remote: &[u8]) -> bool {
        Desc::parse(remote).is_some_and(|d| d.host == self.host_id && d.job == self.job_id)
    }

    fn connect(&self, peer: u32, remote: &[u8]) -> Result<Arc<dyn Link>> {
        if self.shared.closed.load(Ordering::Acquire) {
            return Err(Error::Shutdown);
        }
        if peer == self.ctx {
            // The receiver refuses a pair from itself (`attach_one`): a link
            // made here would hang every message to oneself. Refusing now
            // lets the selection take the next method (`self`).
            return Err(self.fail(peer, "no shared-memory pair to oneself".into()));
        }
        let d = Desc::parse(remote)
            .filter(|d| d.host == self.host_id && d.job == self.job_id)
            .ok_or_else(|| self.fail(peer, "descriptor is not for this host and job".into()))?;
        let mut links = self.links.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(l) = links.get(&peer) {
            if !l.is_broken() {
                return Ok(l.clone());
            }
            // The receiver dropped the old pair (e.g. it found garbage): start
            // a fresh one.
            l.abandon();
            links.remove(&peer);
        }
        let cap = self.shared.cfg.cap;
        let (seg, fd) = Segment::create_sealed("gw-shm-pair", PAIR_DATA_OFF + cap)?;
        // SAFETY: fresh zero-filled mapping (a zero RingHeader is an empty
        // ring); nobody else has it until we hand it over below.
        unsafe {
            std::ptr::write(
                seg.as_ptr() as *mut PairIdent,
                PairIdent {
                    magic: PAIR_MAGIC,
                    src: self.ctx,
                    dst: peer,
                    pid: self.pid,
                    _r: 0,
                    cap: cap as u64,
                    probe_addr: &*self.probe as *const u64 as u64,
                    probe_val: *self.probe,
                },
            )
        };
        // SAFETY: the ring header is inside our fresh mapping, unshared until handed over.
        unsafe { ring::set_key(pair_ring(seg.as_ptr()), *cma::probe_word()) };
        let mut hello = [0u8; handoff::HELLO_LEN];
        hello[..8].copy_from_slice(&PAIR_MAGIC.to_le_bytes());
        hello[8..12].copy_from_slice(&self.ctx.to_le_bytes());
        hello[12..].copy_from_slice(&peer.to_le_bytes());
        let conn = handoff::offer(&self.job_id, peer, d.nonce, &hello, &fd).map_err(|e| {
            self.fail(
                peer,
                format!("cannot hand rank {peer} its ring (unix socket): {e}"),
            )
        })?;
        // The receiver has its own descriptor now (or will never need one).
        drop(fd);
        // SAFETY: a fresh pair segment with a zeroed (empty) ring of `cap` bytes; this link is its only producer.
        let link = Arc::new(unsafe { ShmLink::new(peer, conn, self.shared.clone(), seg, cap) });
        if self.verbose >= 2 {
            crate::say!("gridwire[{}]: shm link to {peer}", self.ctx);
        }
        links.insert(peer, link.clone());
        Ok(link)
    }

    fn poll(&self, sink: &mut dyn Sink) -> Result<usize> {
        self.poll_as(sink, false)
    }

    fn poll_thorough(&self, sink: &mut dyn Sink) -> Result<usize> {
        self.poll_as(sink, true)
    }

    fn poll_class(&self) -> PollClass {
        PollClass::EveryIteration
    }

    fn wait_fd(&self) -> Option<RawFd> {
        // Readable when a sender connects or rings (see `doorbell`).
        Some(self.bell.fd())
    }

    fn before_block(&self) {
        if !self.doorbell {
            return;
        }
        // Taken: another thread polls our rings and delivers what comes;
        // this one then sleeps at most a slice, as without a bell.
        if let Some(rx) = self.incoming.try_lock() {
            self.bell.before_sleep(rx.rings.iter().map(|i| i.rx()), || {
                rx.rings.iter().any(|i| i.cons.ready())
            });
        }
    }

    fn after_block(&self) {
        match self.incoming.try_lock() {
            Some(rx) => self.bell.after_sleep(rx.rings.iter().map(|i| i.rx())),
            None => self.bell.after_sleep(std::iter::empty()),
        }
    }

    fn has_pending_output(&self) -> bool {
        self.shared.pending_links.load(Ordering::Acquire) > 0
    }

    fn cost(&self) -> Cost {
        // Measured in-process on a 2-core KVM guest (`tests::bench`, release):
        // 8-byte one-way 80-300 ns, 4 MiB streaming 10-40 GB/s (noisy host);
        // the conservative ends of those ranges.
        Cost {
            latency_ns: 300,
            bandwidth_mb_s: 10_000,
        }
    }

    /// Drops our ring to a departed peer (its segment is unmapped with the
    /// last user of the link) and the ring we consume from it (unmapped, its
    /// connection closed) once it is empty. A peer's leave notice can arrive
    /// inside a poll of that very ring: the ring is then looked at again at
    /// the end of that poll and of the next ones until it is drained.
    fn release_peer(&self, peer: u32) {
        let link = self
            .links
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&peer);
        if let Some(l) = link {
            l.discard();
        }
        self.released
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(peer);
        self.has_released.store(true, Ordering::Release);
        if let Some(mut rx) = self.incoming.try_lock() {
            self.drop_released(&mut rx);
        }
    }

    fn shutdown(&self) {
        if self.shared.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        let rx = std::mem::take(&mut *self.incoming.lock());
        for inc in rx.rings {
            inc.rx().closed.store(1, Ordering::Release);
        }
        // Nothing has a name to remove: segments and sockets go with their
        // last descriptor and mapping.
        drop(std::mem::take(
            &mut *self.links.lock().unwrap_or_else(|p| p.into_inner()),
        ));
    }
}

impl Drop for Shm {
    fn drop(&mut self) {
        self.shutdown();
    }
}

#[cfg(test)]
mod tests;
