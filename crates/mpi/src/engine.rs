//! Point-to-point: the matching engine and the eager/rendezvous protocols,
//! over remote service requests of the core runtime.
//!
//! Wire messages (all little-endian):
//! - `H_MSG` — an envelope ([`Env`]) and, for `EAGER`, the data. An eager
//!   envelope is 24 bytes (kind, context id, source, tag, sequence number);
//!   an `RTS` is 56 and adds the size, the sender's request id and, within a
//!   host, the sender's pid and data address.
//! - `H_CTS` — receiver → sender: (sender request id, receiver request id):
//!   the receive is matched, send the data.
//! - `H_DATA` — sender → receiver: receiver request id, offset, total size,
//!   then up to `DATA_CHUNK` bytes of the data (a large message is a train
//!   of them, so the receiver copies each piece while it is still in cache).
//! - `H_FIN` — receiver → sender: sender request id: the receiver copied the
//!   data itself (single copy within a host, see [`crate::cma`]).
//! - `H_ASSIST`, `H_ASSISTED` — a large single copy made by both processes,
//!   each copying a part (`engine/assist.rs`).
//!
//! An eager message a transport holds whole in shared memory is matched
//! there (`placed.rs`, `EagerPlacer`): a posted receive that takes it names
//! its buffer, and the transport copies the data from its ring into it.
//!
//! Within a host the `RTS` also carries the sender's pid and the address of
//! its (contiguous or packed) data; the receiver of a matched `RTS` copies it
//! with `process_vm_readv` straight into the receive buffer and answers
//! `FIN`. Where that is not permitted it answers `CTS` and the data comes as
//! `H_DATA` (for that peer from then on).
//!
//! Ordering: every envelope carries a sequence number per (context id,
//! source); the receiver processes envelopes of a pair strictly in that
//! order, holding back early ones, so non-overtaking holds whatever path
//! (method, eager or rendezvous) each message took.
//!
//! Trust: every field of a peer's message is its word, checked before use
//! (a few compares on the eager path). The sender is the transport's (the
//! link the message came in on), and the envelope's source must be that
//! process's rank in the communicator; context ids index nothing that a
//! peer can grow (see [`DENSE_CTX`], [`MAX_PEER_QUEUES`]); sequence numbers
//! are taken within [`MAX_EARLY`]; request ids in `CTS`/`DATA`/`FIN` are
//! looked up together with the peer they belong to, and `DATA` must lie
//! within the size its envelope announced. A message that breaks a rule is
//! dropped, counted and reported naming the rank ([`Engine::rejected`]).
//!
//! Locks: one try-lock over the matching state. It is never held across a
//! send (a send can drive progress, which runs handlers that take it).
//! Within one round of progress the `H_MSG` handler keeps it from one
//! eager message to the next (`handlers.rs`, `hold_for_round`); every other
//! entry from progress (handlers, placers, the round-end hook) releases it
//! first.

mod assist;
#[cfg(test)]
mod assist_tests;
mod cancel;
mod handlers;
#[cfg(test)]
mod hostile_tests;
mod kept;
#[cfg(test)]
mod kept_tests;
mod lent;
mod matching;
mod peer_failure;
mod placed;
mod waiting;

pub use assist::{H_ASSIST, H_ASSISTED};
pub use kept::KeptRecv;
pub use matching::Unexpected;
use matching::{held_cost, Posted, Queues, Slot, State, DEFAULT_HELD_LIMIT};
pub use peer_failure::failure_message;

use crate::error::{class, err, MpiError, Result};
use crate::group::Group;
use crate::request::{Buf, Req, SendData, Status};
use crate::{ANY_SOURCE, ANY_TAG};
use gridwire_core::sync::{TryLock, TryLockGuard};
use gridwire_core::{Context, Request, Startpoint};
use std::io::IoSlice;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const H_MSG: u32 = 0x0004_d500;
pub const H_CTS: u32 = 0x0004_d501;
pub const H_DATA: u32 = 0x0004_d502;

/// Bytes of data per `H_DATA` message. One frame per message made the
/// receiver (tcp) read 4 MiB into its buffer and then copy it out of
/// memory; in 256 KiB pieces the copy reads what the socket read just put
/// in the cache.
pub const DATA_CHUNK: usize = 256 << 10;

/// `H_DATA` header: receiver request id, offset, total size.
const DATA_HDR: usize = 24;
pub const H_FIN: u32 = 0x0004_d503;
/// Send cancellation: request and answer (see [`cancel`]).
pub const H_CANCEL: u32 = 0x0004_d504;
pub const H_CANCEL_ACK: u32 = 0x0004_d505;

const EAGER: u8 = 0;
const RTS: u8 = 1;
const ENV_LEN: usize = 56;
const EAGER_ENV_LEN: usize = 24;

/// Context ids below this have their matching queues in a vector indexed
/// by the id (one load on every message); the others (and every
/// nonblocking-collective instance) in a map. Why a limit: the id comes from
/// the wire, and a vector indexed by it would grow to whatever a peer names
/// (a 24-byte envelope asked for 32 GiB). Honest ids start at 4 and grow by
/// 2 per communicator, so programs with fewer than 32 Ki communicators never
/// leave the vector. Bound: 512 KiB of slots.
const DENSE_CTX: usize = 1 << 16;

/// At most this many matching queues may exist that a peer's message
/// created before this process used the context itself (a communicator a
/// peer finished creating first, a collective it started first). Beyond,
/// such messages are dropped and reported: they can only come from a peer
/// that names contexts that do not exist.
pub const MAX_PEER_QUEUES: usize = 1024;

/// [`MAX_PEER_QUEUES`] for the instances of nonblocking collectives
/// (context keys above 2^32), counted apart: an honest member may run
/// ahead of a slow one by as many instances as it likes (a root's
/// `MPI_Ibcast` completes as soon as it is sent), and a loop of 2000
/// `MPI_Ibcast` + `MPI_Wait` at the root of 2 ranks on a loaded machine
/// went past 1024, lost a message and hung. A queue a peer made costs about
/// 200 bytes here (boxed, in a map), so this bound holds a hostile peer to
/// about 50 MiB, beside `GW_MPI_UNEXPECTED_LIMIT` for the messages.
pub const MAX_PEER_NBC_QUEUES: usize = 1 << 18;

/// How far ahead of the next expected sequence number (per context and
/// sender) an envelope may be, and how many early envelopes a queue holds.
/// Envelopes of one pair travel one link in order, so honest ones are at
/// most a few ahead; one further ahead (or behind: a replay) is dropped and
/// reported instead of being held forever.
pub const MAX_EARLY: u32 = 4096;

/// Eager messages up to this size are copied into a matched receive while
/// the matching lock is held (see `handlers.rs`): no reference count for
/// the copy, and other threads wait at most a short copy for the lock.
/// Larger ones are copied after releasing it.
const DELIVER_LOCKED_MAX: usize = 4096;

// The envelope: `engine/envelope.rs`.
mod envelope;
pub use envelope::Env;

/// What a handler decided to send once the lock is released.
enum After {
    Nothing,
    Cts {
        to: u32,
        sreq: u64,
        rreq: u64,
        /// The message's matching context: the CTS takes its route.
        ctx: u64,
    },
    /// Copy the data with `process_vm_readv` (outside the handler), then `FIN`.
    Pull {
        req: Arc<Req>,
        from: u32,
        env: Env,
    },
}

/// The point-to-point engine of one process.
pub struct Engine {
    pub ctx: Context,
    /// The matching state. A [`TryLock`]: it is held only for short,
    /// non-blocking steps (never across a send), and taking it twice per
    /// message (post, arrival) is on every message's path.
    st: TryLock<State>,
    /// Whether a handler kept `st` locked for the rest of the current round
    /// of progress (`handlers.rs`: the eager messages of a drained batch
    /// take the lock once, not once each). Read and written by handlers
    /// only, which run one thread at a time under the runtime's progress
    /// lock (that lock orders the rounds of different threads); released
    /// by the round-end hook or by any other handler or placer first.
    round_held: AtomicBool,
    /// Spare requests: a try-lock, apart from `st`, so taking and giving
    /// back a request costs one compare-exchange, not a mutex round trip.
    pool: TryLock<Vec<Arc<Req>>>,
    /// Number of entries in `ready` (checked without the lock on every wait iteration).
    ready_len: AtomicUsize,
    /// `State::lent`'s length (one load on every round of a wait).
    lent_len: AtomicUsize,
    /// Eager limit per world rank, 0 = not yet known.
    eager: Vec<AtomicUsize>,
    /// Per world rank: 0 = single copy untried or working, 1 = not permitted.
    no_cma: Vec<AtomicBool>,
    /// Per world rank: from what size a single copy from it is made with
    /// its help (`engine/assist.rs`: `ASSIST_UNPROVEN` until a whole one
    /// worked, `ASSIST_NEVER` once it declined).
    assist: Vec<AtomicUsize>,
    /// Whether the peer is on this host (reached by shared memory): 0 unknown, 1 yes, 2 no.
    same_host: Vec<AtomicU8>,
    /// Per world rank: the process id its first single-copy `RTS` named (0 =
    /// none yet). A later one naming another process is refused: a peer
    /// must not make us copy from whatever process of ours it names.
    peer_pid: Vec<AtomicU32>,
    /// How long a blocking call polls without yielding before it falls back
    /// to the runtime's wait (which yields and then sleeps).
    spin: Duration,
    /// Helper threads running (nonblocking collectives, `Isendrecv`): while
    /// any runs, waiting threads nap instead of spinning, so the helper that
    /// does the work gets a core.
    helpers: AtomicUsize,
    /// Whether several threads may send at once (`MPI_THREAD_MULTIPLE`; the
    /// default). Below that level sequence numbers are taken with a load and
    /// a store instead of a locked add (see [`Engine::set_threaded`]).
    threaded: AtomicBool,
    /// Messages dropped because a field broke the protocol (see [`Engine::reject`]).
    rejected: AtomicU64,
    /// Most bytes of unexpected and early messages held (`GW_MPI_UNEXPECTED_LIMIT`):
    /// a peer that sends what nobody receives fills memory up to this, no further.
    held_limit: AtomicUsize,
    /// When [`Engine::poke`] last made a thorough round, in nanoseconds
    /// since `born`.
    last_thorough_poke: AtomicU64,
    /// Pokes so far (the clock is read on every 8th).
    pokes: AtomicU32,
    born: Instant,
    /// Peers the runtime failed for good, whose waiting operations the
    /// next round of a wait fails (`engine/peer_failure.rs`).
    failures: Arc<peer_failure::PeerFailures>,
}

/// A `poke` (`MPI_Test*`, `MPI_Iprobe`; every 8th looks at the clock)
/// makes a thorough round when the last thorough one was this long ago. The runtime spares its costlier
/// looks by counting rounds — shm looks for new senders every 16384
/// rounds, sockets are polled every 64 (1024 before they carried
/// anything) — which suits a wait loop (a round every ~50 ns) but not a
/// program that computes and probes now and then: HPL's ring broadcasts
/// probe between blocks of work, and a new sender's first message over shm
/// waited for 16384 of those probes (seconds), a message over tcp for 64.
/// A thorough round costs a few system calls (bounded: see the tcp
/// method's direct polling), so by time: at most one per interval, ≤ 3 %
/// of a loop that does nothing but test.
const POKE_GAP: Duration = Duration::from_micros(200);

/// Most requests kept in [`State::spare_reqs`] (the receives of a window
/// of `MPI_Waitall` and then some).
const SPARE_REQS: usize = 256;

/// How many rejected messages are reported on stderr; the rest are only
/// counted ([`Engine::rejected`]): a hostile peer must not fill the log.
const REPORTED_REJECTS: u64 = 8;

impl Drop for Engine {
    fn drop(&mut self) {
        for id in [
            H_MSG,
            H_CTS,
            H_DATA,
            H_FIN,
            H_CANCEL,
            H_CANCEL_ACK,
            H_ASSIST,
            H_ASSISTED,
        ] {
            // Fails only inside a handler, which holds no `Arc<Engine>` to drop.
            let _ = self.ctx.unregister_handler(id);
        }
    }
}

/// Marks the current thread as a library helper for its lifetime (see [`Engine::helper`]).
pub struct Helper<'a>(&'a Engine);

impl Drop for Helper<'_> {
    fn drop(&mut self) {
        self.0.helpers.fetch_sub(1, Ordering::AcqRel);
    }
}

/// `GW_MPI_SPIN_US`, or by default the runtime's spin (`GW_SPIN_US`, whose
/// `auto` is 2 ms when every rank on this machine can have a core and 0 when
/// the machine is oversubscribed). Following the runtime's setting matters
/// where a job says how to wait: bench/coll-hier.sh runs 16 ranks on this
/// 2-core machine as 8 emulated hosts of 2 ranks with `GW_SPIN_US=0`; each
/// host alone passed the rule, so the MPI layer's waits (and the shared
/// segment's) spun 2 ms each while the runtime's did not, and the
/// zero-delay collectives took 21-42 ms per call instead of 2-4
/// (docs/benchmarks.md).
fn spin_budget(ctx: &Context) -> Duration {
    if let Some(us) = crate::params::raw("MPI_SPIN_US").and_then(|v| v.trim().parse::<u64>().ok()) {
        return Duration::from_micros(us.min(10_000_000));
    }
    ctx.spin_budget()
}

impl Engine {
    pub fn new(ctx: Context) -> Arc<Engine> {
        // Per-peer state for every context id of the job (spawned ones
        // too) and the aliases of other jobs' processes (`ports_jobs.rs`).
        let n = ctx.id_limit();
        Self::with_job_size(ctx, n)
    }

    /// An engine that believes the job has `n` ranks, for driving the
    /// handlers directly ([`crate::fuzzing`]): ranks the context does not
    /// have are peers whose every send fails.
    pub(crate) fn with_job_size(ctx: Context, n: u32) -> Arc<Engine> {
        let n = n as usize;
        let no_cma = crate::params::flag("MPI_NO_CMA");
        // As the runtime decided it (for the processes that run now, the
        // world, not the room reserved for spawned ones).
        let spin = spin_budget(&ctx);
        let e = Arc::new(Engine {
            ctx,
            st: TryLock::new(State::default()),
            round_held: AtomicBool::new(false),
            pool: TryLock::new(Vec::new()),
            ready_len: AtomicUsize::new(0),
            lent_len: AtomicUsize::new(0),
            eager: (0..n).map(|_| AtomicUsize::new(0)).collect(),
            spin,
            no_cma: (0..n).map(|_| AtomicBool::new(no_cma)).collect(),
            assist: (0..n)
                .map(|_| AtomicUsize::new(assist::ASSIST_UNPROVEN))
                .collect(),
            same_host: (0..n).map(|_| AtomicU8::new(0)).collect(),
            peer_pid: (0..n).map(|_| AtomicU32::new(0)).collect(),
            helpers: AtomicUsize::new(0),
            threaded: AtomicBool::new(true),
            rejected: AtomicU64::new(0),
            held_limit: AtomicUsize::new(
                usize::try_from(crate::params::num("MPI_UNEXPECTED_LIMIT"))
                    .unwrap_or(DEFAULT_HELD_LIMIT),
            ),
            last_thorough_poke: AtomicU64::new(0),
            pokes: AtomicU32::new(0),
            born: Instant::now(),
            failures: Arc::default(),
        });
        e.failures.subscribe(&e.ctx);
        // The handlers reach the engine by address, not through a `Weak`:
        // upgrading one costs two locked instructions per message.
        let at = Arc::as_ptr(&e) as usize;
        let reg = |id, f: fn(&Engine, &Context, Request<'_>)| {
            e.ctx
                .register_handler(id, move |c, r| {
                    // SAFETY: `Engine::drop` unregisters these handlers, and
                    // unregistering waits for running ones, before the
                    // engine's memory is freed: while a handler can run, `at`
                    // is a live `Engine`.
                    let e = unsafe { &*(at as *const Engine) };
                    if id != H_MSG {
                        // Only `H_MSG` keeps the matching lock across a round.
                        e.end_round();
                    }
                    f(e, c, r)
                })
                .expect("handler ids are below the limit");
        };
        reg(H_MSG, Engine::on_msg);
        reg(H_CTS, Engine::on_cts);
        reg(H_DATA, Engine::on_data);
        reg(H_FIN, Engine::on_fin);
        reg(H_CANCEL, Engine::on_cancel);
        reg(H_CANCEL_ACK, Engine::on_cancel_ack);
        reg(H_ASSIST, Engine::on_assist);
        reg(H_ASSISTED, Engine::on_assisted);
        // Same lifetime argument as the handlers' (unregistered with H_DATA).
        e.ctx
            .register_placer(H_DATA, Arc::new(placed::DataPlacer { at }))
            .expect("not inside a handler");
        // Same lifetime argument (unregistered with H_MSG).
        e.ctx
            .register_placer(H_MSG, Arc::new(placed::EagerPlacer { at }))
            .expect("not inside a handler");
        // Same lifetime argument (unregistered with H_MSG).
        e.ctx
            .register_round_end(
                H_MSG,
                // SAFETY: as for the handlers above.
                Arc::new(move |_| unsafe { &*(at as *const Engine) }.end_round()),
            )
            .expect("not inside a handler");
        e
    }

    #[inline]
    fn lock(&self) -> TryLockGuard<'_, State> {
        self.st.lock()
    }

    /// Drops a message from world rank `from` that broke the protocol:
    /// counts it and says why (the first few times). Never a panic: the
    /// message is the peer's word, not ours.
    #[cold]
    #[inline(never)]
    fn reject(&self, from: u32, kind: &str, why: std::fmt::Arguments<'_>) {
        let n = self.rejected.fetch_add(1, Ordering::Relaxed) + 1;
        if n <= REPORTED_REJECTS {
            gridwire_core::say!(
                "gridwire mpi: rank {}: dropped a {kind} message from rank {from}: {why}{}",
                self.ctx.rank(),
                if n == REPORTED_REJECTS {
                    " (further dropped messages are only counted)"
                } else {
                    ""
                }
            );
        }
    }

    /// Sets the limit of held unexpected messages (tests, and an MPI_T
    /// write of `GW_MPI_UNEXPECTED_LIMIT`, which applies at once).
    pub fn set_held_limit(&self, bytes: usize) {
        self.held_limit.store(bytes, Ordering::Relaxed);
    }

    /// The limit of held unexpected messages, bytes.
    pub fn held_limit(&self) -> usize {
        self.held_limit.load(Ordering::Relaxed)
    }

    /// Bytes of messages held now because their receive was not posted yet
    /// (unexpected and early queues; see `held_cost`). Takes the matching lock.
    pub fn held_bytes(&self) -> usize {
        self.lock().held
    }

    /// Messages of communicator context `ctx` (its point-to-point id) that
    /// arrived before their receive was posted. Takes the matching lock.
    pub fn unexpected_count(&self, ctx: u32) -> usize {
        let st = self.lock();
        let q = match st.queues.get(ctx as usize) {
            Some(Some(q)) => Some(q),
            _ => st.sparse.get(&(ctx as u64)),
        };
        q.map_or(0, |q| q.unexpected.len())
    }

    /// The most bytes held at once so far (see [`Engine::held_bytes`]).
    pub fn held_bytes_max(&self) -> usize {
        self.lock().held_max
    }

    /// Messages dropped so far because they broke the protocol.
    pub fn rejected(&self) -> u64 {
        self.rejected.load(Ordering::Relaxed)
    }

    /// Whether `from` (the transport's sender) is a rank of this job.
    #[inline]
    fn is_rank(&self, from: u32) -> bool {
        (from as usize) < self.eager.len()
    }

    /// A rendezvous send to `to` whose envelope went out (for driving the
    /// handlers directly): returns the request and the id a `CTS` or `FIN` names.
    pub(crate) fn stage_send(&self, to: u32, buf: Buf) -> (Arc<Req>, u64) {
        let req = self.new_req();
        let size = buf.bytes() as u64;
        req.d.lock().send = SendData::User(buf);
        let id = self.lock().rndv_send.insert(req.clone(), to, size);
        (req, id)
    }

    /// Bytes the matching state holds, roughly (queued data, queue and slab
    /// slots): what a peer's messages can make it hold, for the bounds the
    /// fuzz harness checks.
    pub(crate) fn footprint(&self) -> usize {
        let st = self.lock();
        let q_bytes = |q: &Queues| {
            let msgs = q.unexpected.iter().chain(q.early.iter());
            msgs.map(|u| u.data.capacity() + std::mem::size_of::<Unexpected>())
                .sum::<usize>()
                + q.posted.len() * std::mem::size_of::<Posted>()
                + q.expected.capacity() * 4
                + std::mem::size_of::<Queues>()
        };
        let dense = st
            .queues
            .iter()
            .flatten()
            .map(|q| q_bytes(q))
            .sum::<usize>();
        let sparse = st.sparse.values().map(|q| q_bytes(q)).sum::<usize>();
        let pool = st.pool.iter().map(|v| v.capacity()).sum::<usize>();
        dense
            + sparse
            + pool
            + st.queues.capacity() * std::mem::size_of::<Option<Box<Queues>>>()
            + (st.rndv_send.items.capacity() + st.rndv_recv.items.capacity())
                * std::mem::size_of::<Option<Slot>>()
    }

    /// Reports messages that [`State::local`] dropped for a false source.
    #[cold]
    fn report_forged(&self, bad: &[(u32, i32)]) {
        for &(from, src) in bad {
            self.reject(
                from,
                "point-to-point",
                format_args!("its envelope names rank {src} of the communicator as the source"),
            );
        }
    }

    /// A fresh (or recycled) request.
    pub fn new_req(&self) -> Arc<Req> {
        self.pool
            .try_lock()
            .and_then(|mut p| p.pop())
            .unwrap_or_default()
    }

    /// The status of a finished request, which is then recycled if nobody
    /// else holds it (one lock of the request for both).
    /// How long a blocking call polls without yielding (zero when there
    /// are more ranks than cores: then waits yield at once).
    pub(crate) fn spin_budget(&self) -> Duration {
        self.spin
    }

    pub fn finish(&self, r: Arc<Req>) -> Status {
        // The sole holder: read and reset without the request's lock.
        let Some(s) = r.take_status_and_reset_sole() else {
            return r.status();
        };
        if let Some(mut p) = self.pool.try_lock() {
            if p.len() < 256 {
                p.push(r);
            }
        }
        s
    }

    /// [`Engine::finish`] for a batch (`MPI_Waitall`): a recyclable request
    /// goes to `spare`, for [`Engine::give_back`] to return all at once.
    pub fn finish_into(&self, r: Arc<Req>, spare: &mut Vec<Arc<Req>>) -> Status {
        let Some(s) = r.take_status_and_reset_sole() else {
            return r.status();
        };
        spare.push(r);
        s
    }

    /// Returns requests reset by [`Engine::finish_into`] to the spares that
    /// [`Engine::recv`] takes under the matching lock it holds anyway: one
    /// lock per batch, none per receive. (Beyond a bound they are dropped.)
    pub fn give_back(&self, spare: &mut Vec<Arc<Req>>) {
        if spare.is_empty() {
            return;
        }
        {
            let mut st = self.lock();
            let room = SPARE_REQS.saturating_sub(st.spare_reqs.len());
            let n = room.min(spare.len());
            st.spare_reqs.extend(spare.drain(..n));
        }
        // The rest is freed outside the lock.
        spare.clear();
    }

    /// [`Engine::give_back`] from an array of slots (`MPI_Waitall`'s, on
    /// its stack): every request in `slots` must have been reset by its
    /// sole holder ([`Req::take_status_and_reset_sole`]). Empties the slots.
    pub fn give_back_slots(&self, slots: &mut [Option<Arc<Req>>]) {
        let mut rest = 0;
        {
            let mut st = self.lock();
            for s in slots.iter_mut() {
                if s.is_none() {
                    continue;
                }
                if st.spare_reqs.len() < SPARE_REQS {
                    st.spare_reqs.extend(s.take());
                } else {
                    rest += 1;
                }
            }
        }
        if rest > 0 {
            // Beyond the bound: freed outside the lock.
            slots.iter_mut().for_each(|s| drop(s.take()));
        }
    }

    /// Gives a finished request back for reuse if nobody else holds it.
    pub fn recycle(&self, r: Arc<Req>) {
        if Arc::strong_count(&r) == 1 {
            r.reset();
            // The pool is a cache: when another thread has it, just drop.
            if let Some(mut p) = self.pool.try_lock() {
                if p.len() < 256 {
                    p.push(r);
                }
            }
        }
    }

    /// The eager limit towards `world`: one load once known (inlined into
    /// every send; the first look-up, which formats a parameter name, is not).
    #[inline]
    fn eager_limit(&self, world: u32) -> usize {
        match self.eager[world as usize].load(Ordering::Relaxed) {
            0 => self.eager_limit_first(world),
            v => v,
        }
    }

    #[cold]
    #[inline(never)]
    fn eager_limit_first(&self, world: u32) -> usize {
        let slot = &self.eager[world as usize];
        let m = self
            .ctx
            .method_to(world)
            .or_else(|| self.ctx.would_select(world).ok())
            .unwrap_or("tcp");
        // A method without its own row (a new one) gets udp's conservative limit.
        let name = format!("MPI_EAGER_{}", m.to_ascii_uppercase());
        let name = if crate::params::MPI_PARAMS.iter().any(|d| d.name == name) {
            name
        } else {
            "MPI_EAGER_UDP".to_string()
        };
        let v = usize::try_from(crate::params::num(&name))
            .unwrap_or(usize::MAX)
            .max(1);
        slot.store(v, Ordering::Relaxed);
        v
    }

    /// Whether single-copy transfers with `world` may be tried (same host, not refused before).
    fn cma_ok(&self, world: u32) -> bool {
        if self.no_cma[world as usize].load(Ordering::Relaxed) {
            return false;
        }
        let slot = &self.same_host[world as usize];
        match slot.load(Ordering::Relaxed) {
            1 => true,
            2 => false,
            _ => {
                let m = self
                    .ctx
                    .method_to(world)
                    .or_else(|| self.ctx.would_select(world).ok());
                let yes = matches!(m, Some("shm"));
                if crate::params::flag("MPI_DEBUG") {
                    gridwire_core::say!(
                        "gridwire mpi: rank {}: peer {world} by {m:?}: single copy {}",
                        self.ctx.rank(),
                        if yes { "possible" } else { "not possible" }
                    );
                }
                slot.store(if yes { 1 } else { 2 }, Ordering::Relaxed);
                yes
            }
        }
    }

    /// Whether the receiver of rendezvous `env` from `from` copies the data
    /// itself: from this very process (always) or from a peer on this host
    /// that permits `process_vm_readv`.
    fn can_pull(&self, from: u32, env: &Env) -> bool {
        env.pid != 0
            && ((from == self.ctx.rank() && env.pid == crate::cma::my_pid()) || self.cma_ok(from))
    }

    /// Copies a matched single-copy rendezvous into `req`'s buffer and tells
    /// the sender; falls back to `CTS` if the copy is not permitted.
    fn pull(&self, req: Arc<Req>, from: u32, env: Env) {
        let buf = req.d.lock().recv.clone();
        let cap = buf.as_ref().map_or(0, |b| b.bytes());
        let n = (env.size as usize).min(cap);
        // A message to ourselves: the sender's data is in this address space.
        let local = from == self.ctx.rank() && env.pid == crate::cma::my_pid();
        let read = |dst: usize| -> std::io::Result<()> {
            if local {
                // SAFETY: the sender's data (kept until we answer FIN) and a
                // destination of `n` bytes (the receive buffer or `tmp`).
                unsafe { crate::mem::write(dst, crate::mem::slice(env.addr as usize, n)) };
                Ok(())
            } else {
                // SAFETY: as above; the kernel checks the remote range.
                unsafe { crate::cma::read(env.pid, env.addr, dst, n) }
            }
        };
        let contig = buf.as_ref().and_then(|b| b.contig_addr());
        // A large message into a contiguous receive that takes it whole,
        // from a peer read from before: copied with its help (`assist.rs`).
        if let Some(dst) = contig {
            if !local
                && n as u64 == env.size
                && n >= 2
                && self.assist_wanted(from, n)
                && self.pull_assisted(&req, from, &env, dst, n)
            {
                return;
            }
        }
        let res = match contig {
            // The receive buffer of this pending request, `cap >= n` bytes.
            Some(dst) => read(dst),
            None => {
                let mut tmp = vec![0u8; n];
                let r = read(tmp.as_mut_ptr() as usize);
                if r.is_ok() {
                    if let Some(b) = &buf {
                        b.unpack(&tmp);
                    }
                }
                r
            }
        };
        if let Err(e) = res {
            if crate::params::flag("MPI_DEBUG") {
                gridwire_core::say!("gridwire mpi: rank {}: single copy from {from} refused ({e}); copying through the runtime", self.ctx.rank());
            }
            self.no_cma[from as usize].store(true, Ordering::Relaxed);
            let rreq = self.lock().rndv_recv.insert(req, from, env.size);
            if let Err(e) = self.send_cts(from, env.sreq, rreq, env.ctx) {
                gridwire_core::say!(
                    "gridwire mpi: rank {}: clear-to-send to {from} failed: {e}",
                    self.ctx.rank()
                );
            }
            return;
        }
        if !local && n > 0 {
            self.assist_proven(from);
        }
        {
            let mut d = req.d.lock();
            d.status.bytes = n;
            if env.size as usize > cap {
                d.status.error = class::TRUNCATE;
            }
        }
        req.complete();
        self.send_fin(from, env.sreq, env.ctx);
    }

    /// Declares whether the program may call MPI from several threads at
    /// once. With `false` (`MPI_THREAD_SINGLE`, `FUNNELED`, `SERIALIZED`:
    /// calls are ordered by the program) a send takes its sequence number
    /// with a plain load and store: one locked instruction less per message.
    /// The library's own threads never send on a program's communicators
    /// (nonblocking collectives run on shadows with their own numbers).
    pub fn set_threaded(&self, yes: bool) {
        self.threaded.store(yes, Ordering::Relaxed);
    }

    // Waiting and progress (`wait_for`, helpers, pokes, ready rendezvous
    // data): `engine/waiting.rs`.

    /// The data of a rendezvous, as `H_DATA` pieces of at most `DATA_CHUNK`
    /// bytes (one, empty, for an empty message), as traffic `key` (the
    /// communicator's, `comm_links`).
    fn send_data(&self, to: u32, rreq: u64, data: &[u8], key: u32) -> gridwire_core::Result<()> {
        let sp = Startpoint {
            ctx: to,
            endpoint: 0,
        };
        let total = data.len() as u64;
        let mut off = 0usize;
        loop {
            let piece = &data[off..(off + DATA_CHUNK).min(data.len())];
            let mut hdr = [0u8; DATA_HDR];
            hdr[..8].copy_from_slice(&rreq.to_le_bytes());
            hdr[8..16].copy_from_slice(&(off as u64).to_le_bytes());
            hdr[16..].copy_from_slice(&total.to_le_bytes());
            self.ctx
                .rsr_v_keyed(&sp, H_DATA, &[IoSlice::new(&hdr), IoSlice::new(piece)], key)?;
            off += piece.len();
            if off >= data.len() {
                return Ok(());
            }
        }
    }

    /// Sends `buf` to comm-rank `dest` (world rank `world`) on context `ctx`.
    /// Returns None when the send is already complete (eager), or the request
    /// of a rendezvous in flight. `sync` forces the rendezvous (completion
    /// then implies the receive matched). `owned` is data already packed by
    /// the caller (buffered sends).
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub fn send(
        &self,
        ctx: u64,
        seq: &AtomicU32,
        me: i32,
        world: u32,
        tag: i32,
        buf: &Buf,
        sync: bool,
        owned: Option<Vec<u8>>,
    ) -> Result<Option<Arc<Req>>> {
        self.send_seq(ctx, seq, me, world, tag, buf, sync, owned)
            .map(|(r, _)| r)
    }

    /// [`Engine::send`] that also says the message's sequence number (what
    /// `MPI_Cancel` names an eager message by). Inlined into both callers:
    /// the number is in a register already.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub fn send_seq(
        &self,
        ctx: u64,
        seq: &AtomicU32,
        me: i32,
        world: u32,
        tag: i32,
        buf: &Buf,
        sync: bool,
        owned: Option<Vec<u8>>,
    ) -> Result<(Option<Arc<Req>>, u32)> {
        let bytes = buf.bytes();
        let seqno = if self.threaded.load(Ordering::Relaxed) {
            seq.fetch_add(1, Ordering::Relaxed)
        } else {
            let v = seq.load(Ordering::Relaxed);
            seq.store(v.wrapping_add(1), Ordering::Relaxed);
            v
        };
        let env = Env {
            kind: EAGER,
            ctx,
            src: me,
            tag,
            seq: seqno,
            size: bytes as u64,
            sreq: 0,
            addr: 0,
            pid: 0,
        };
        let sp = Startpoint {
            ctx: world,
            endpoint: 0,
        };
        if sync || bytes > self.eager_limit(world) {
            return Ok((self.send_rendezvous(env, sp, buf, owned)?, seqno));
        }
        {
            let h = env.encode_eager();
            // The communicator's link choice between hosts (`comm_links`).
            let key = crate::comm_links::traffic_key(ctx);
            match (&owned, buf.contig()) {
                (Some(v), _) => {
                    self.ctx
                        .rsr_v_keyed(&sp, H_MSG, &[IoSlice::new(&h), IoSlice::new(v)], key)?
                }
                (None, Some(s)) => {
                    self.ctx
                        .rsr_v_keyed(&sp, H_MSG, &[IoSlice::new(&h), IoSlice::new(s)], key)?
                }
                (None, None) => {
                    let p = buf.pack();
                    self.ctx
                        .rsr_v_keyed(&sp, H_MSG, &[IoSlice::new(&h), IoSlice::new(&p)], key)?
                }
            }
        }
        Ok((None, seqno))
    }

    /// The rendezvous half of [`Engine::send`], apart so that the eager half
    /// stays small enough to inline into the callers.
    #[inline(never)]
    fn send_rendezvous(
        &self,
        mut env: Env,
        sp: Startpoint,
        buf: &Buf,
        owned: Option<Vec<u8>>,
    ) -> Result<Option<Arc<Req>>> {
        let world = sp.ctx;
        let req = self.new_req();
        {
            let mut d = req.d.lock();
            d.send = match owned {
                Some(v) => SendData::Owned(v),
                None if buf.dt.contig => SendData::User(buf.clone()),
                None => SendData::Owned(buf.pack()),
            };
        }
        env.kind = RTS;
        // To ourselves the receiver copies straight from the data (no
        // round trip through the self method: the receive completes as soon
        // as it matches, as in other MPIs, which programs such as mpi4py's
        // tests rely on); to a peer on this host with `process_vm_readv`.
        if world == self.ctx.rank() || self.cma_ok(world) {
            // The data stays where it is until the receiver says FIN (or CTS).
            let d = req.d.lock();
            let addr = match &d.send {
                SendData::User(b) => b.contig_addr(),
                SendData::Owned(v) => Some(v.as_ptr() as usize),
                SendData::None => None,
            };
            if let Some(a) = addr {
                env.addr = a as u64;
                env.pid = crate::cma::my_pid();
            }
        }
        env.sreq = self.lock().rndv_send.insert(req.clone(), world, env.size);
        {
            // What `MPI_Cancel` needs to name this message to its receiver.
            let mut d = req.d.lock();
            d.ctx = env.ctx;
            d.rndv_send = Some((env.sreq, env.seq, world));
        }
        let key = crate::comm_links::traffic_key(env.ctx);
        if let Err(e) = self.ctx.rsr_keyed(&sp, H_MSG, &env.encode(), key) {
            // Nobody will answer an envelope that was not sent.
            self.lock().rndv_send.remove(env.sreq, world);
            return Err(e.into());
        }
        Ok(Some(req))
    }

    /// Posts a receive on context `ctx` of a communicator of group `group`;
    /// the request completes when data has arrived.
    #[inline]
    pub fn recv(
        &self,
        ctx: u64,
        group: &Arc<Group>,
        src: i32,
        tag: i32,
        buf: Buf,
    ) -> Result<Arc<Req>> {
        // SAFETY: not kept (`false`): the queue holds its own reference.
        unsafe { self.recv_as(ctx, group, src, tag, buf, false) }
    }

    /// [`Engine::recv`] and [`Engine::recv_kept`].
    ///
    /// # Safety
    /// With `kept`, the contract of [`Engine::recv_kept`].
    #[inline(always)]
    unsafe fn recv_as(
        &self,
        ctx: u64,
        group: &Arc<Group>,
        src: i32,
        tag: i32,
        buf: Buf,
        kept: bool,
    ) -> Result<Arc<Req>> {
        if !buf.writable() {
            return Err(read_only());
        }
        let mut st = self.lock();
        let req = match st.spare_reqs.pop() {
            Some(r) => r,
            None => self.new_req(),
        };
        // A spare request (or a new one) is ours alone until it is queued
        // below: set it up without its lock.
        let mut buf = Some(buf);
        let init = |d: &mut crate::request::ReqData, buf: &mut Option<Buf>| {
            d.recv = buf.take();
            d.ctx = ctx;
            d.is_recv = true;
        };
        if req.with_sole(|d| init(d, &mut buf)).is_none() {
            init(&mut req.d.lock(), &mut buf);
        }
        let q = st.local(ctx, group, self);
        let hit = if q.unexpected.is_empty() {
            None
        } else {
            q.unexpected.iter().position(|u| u.env.matches(src, tag))
        };
        match hit {
            Some(i) => {
                let u = q.unexpected.remove(i).expect("index from position");
                st.held = st.held.saturating_sub(held_cost(u.data.len()));
                self.take_unexpected(st, u, &req)?;
            }
            None if self.posted_for_failed(&group.members, src) => {
                drop(st);
                peer_failure::fail_request(&req, src);
            }
            None if kept => {
                // SAFETY: the caller's contract (`recv_kept`).
                q.posted.push_back(unsafe { Posted::kept(src, tag, &req) })
            }
            None => q.posted.push_back(Posted::owned(src, tag, req.clone())),
        }
        Ok(req)
    }

    /// Delivers an unexpected message (from the queue or `MPI_Mprobe`) to `req`. Consumes the lock.
    fn take_unexpected(
        &self,
        mut st: TryLockGuard<'_, State>,
        u: Unexpected,
        req: &Arc<Req>,
    ) -> Result<()> {
        if u.env.kind == EAGER {
            let data = u.data;
            drop(st);
            deliver(req, &u.env, &data);
            self.lock().give_buf(data);
            Ok(())
        } else if self.can_pull(u.from, &u.env) {
            drop(st);
            set_envelope(req, &u.env);
            self.pull(req.clone(), u.from, u.env);
            Ok(())
        } else {
            let rreq = st.rndv_recv.insert(req.clone(), u.from, u.env.size);
            drop(st);
            set_envelope(req, &u.env);
            self.send_cts(u.from, u.env.sreq, rreq, u.env.ctx)
        }
    }

    /// `MPI_Mrecv`: receives a message taken by `MPI_Mprobe`.
    pub fn recv_message(&self, u: Unexpected, buf: Buf) -> Result<Arc<Req>> {
        if !buf.writable() {
            return Err(read_only());
        }
        let req = self.new_req();
        {
            let mut d = req.d.lock();
            d.recv = Some(buf);
            d.is_recv = true;
        }
        let st = self.lock();
        self.take_unexpected(st, u, &req)?;
        Ok(req)
    }

    /// The clear-to-send of a rendezvous on matching context `ctx`: on
    /// that communicator's route (its `gw_methods` hold for the whole
    /// exchange, not only the sender's part).
    fn send_cts(&self, to: u32, sreq: u64, rreq: u64, ctx: u64) -> Result<()> {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&sreq.to_le_bytes());
        b[8..].copy_from_slice(&rreq.to_le_bytes());
        self.ctx.rsr_keyed(
            &Startpoint {
                ctx: to,
                endpoint: 0,
            },
            H_CTS,
            &b,
            crate::comm_links::traffic_key(ctx),
        )?;
        Ok(())
    }

    /// `MPI_Iprobe` (after one round of progress) without removing the message.
    pub fn probe(
        &self,
        ctx: u64,
        group: &Arc<Group>,
        src: i32,
        tag: i32,
        remove: bool,
    ) -> Option<Result<Unexpected, Status>> {
        let mut st = self.lock();
        let q = st.local(ctx, group, self);
        let i = q.unexpected.iter().position(|u| u.env.matches(src, tag))?;
        if remove {
            let u = q.unexpected.remove(i).expect("index from position");
            st.held = st.held.saturating_sub(held_cost(u.data.len()));
            Some(Ok(u))
        } else {
            Some(Err(q.unexpected[i].status()))
        }
    }

    /// Forgets the queues of a finished nonblocking-collective instance.
    pub fn remove_queues(&self, key: u64) {
        if key >> 32 != 0 {
            let mut st = self.lock();
            if let Some(q) = st.sparse.remove(&key) {
                st.held = st.held.saturating_sub(q.held());
                if q.peer_made {
                    st.peer_nbc_queues -= 1;
                }
            }
        }
    }

    /// Whether `req` is a receive. Under the matching lock: a posted
    /// receive's data is written without the request's lock by whoever
    /// matches it under this one (`deliver_matched`).
    pub fn is_recv(&self, req: &Req) -> bool {
        let _st = self.lock();
        req.d.lock().is_recv
    }

    /// Cancels a posted receive that has not matched. Returns whether it was cancelled.
    pub fn cancel_recv(&self, req: &Arc<Req>) -> bool {
        let mut st = self.lock();
        // Under the matching lock: a posted receive's data is written
        // without the request's lock by whoever matches it under this one
        // (`deliver_matched`).
        let ctx = req.d.lock().ctx;
        let q = st.queues(ctx);
        if let Some(i) = q.posted.iter().position(|p| p.is(req)) {
            // A kept entry borrows the caller's `req`; an owned one's count
            // is not the last (the caller holds `req`).
            q.posted.remove(i);
            drop(st);
            {
                let mut d = req.d.lock();
                d.status.cancelled = true;
                d.status.source = crate::ANY_SOURCE;
                d.status.tag = ANY_TAG;
            }
            req.complete();
            return true;
        }
        false
    }
}

#[cold]
fn read_only() -> MpiError {
    err(
        class::BUFFER,
        "a receive into a read-only buffer (made from a shared slice)",
    )
}

/// Source and tag of a matched rendezvous (the data comes later).
fn set_envelope(req: &Req, env: &Env) {
    let mut d = req.d.lock();
    d.status.source = env.src;
    d.status.tag = env.tag;
}

/// Copies eager data into a matched receive and completes it. Inlined:
/// out of line, the call's register saves were a third of its cost.
#[inline(always)]
fn deliver(req: &Req, env: &Env, data: &[u8]) {
    {
        let mut d = req.d.lock();
        let cap = d.recv.as_ref().map_or(0, |b| b.bytes());
        let n = data.len().min(cap);
        if let Some(b) = &d.recv {
            b.unpack(&data[..n]);
        }
        d.status = Status {
            source: env.src,
            tag: env.tag,
            error: 0,
            comm_ctx: 0,
            bytes: n,
            cancelled: false,
        };
        if data.len() > cap {
            d.status.error = class::TRUNCATE;
        }
    }
    req.complete();
}

/// [`deliver`] without the request's lock, for the receive that the
/// matching lock's holder has just taken out of its posted queue (the
/// `H_MSG` fast path). Why: the request's lock was the last locked
/// instruction of a small message's delivery besides the matching lock.
///
/// Why no lock is needed: a posted receive's data (its buffer and status)
/// is written only by the thread that takes it out of the queue under the
/// matching lock, and read by others only (a) under the matching lock
/// (`Engine::cancel_recv`, `Engine::release_recv`, `Engine::is_recv`, the
/// placers and handlers), which the caller holds now, or (b) after an
/// Acquire of `Req::done` (waits, tests, `MPI_Request_get_status`), which
/// the Release store of `complete` below orders after these writes.
///
/// # Safety
/// The caller holds the matching lock and has just removed `req` from
/// its posted queue (so no other thread delivers to it, and no thread
/// holds a reference into its data: see above).
#[inline(always)]
unsafe fn deliver_matched(req: &Req, env: &Env, data: &[u8]) {
    let d = req.d.as_ptr();
    // SAFETY: per the contract and the rule above, this thread alone
    // reaches the request's data until `complete`; only its fields are
    // borrowed (the buffer shared, the status written), never the whole.
    unsafe {
        let recv = &(*d).recv;
        let cap = recv.as_ref().map_or(0, |b| b.bytes());
        let n = data.len().min(cap);
        if let Some(b) = recv {
            b.unpack(&data[..n]);
        }
        (*d).status = Status {
            source: env.src,
            tag: env.tag,
            error: if data.len() > cap { class::TRUNCATE } else { 0 },
            comm_ctx: 0,
            bytes: n,
            cancelled: false,
        };
    }
    req.complete();
}

/// The error of a completed request, as an `MpiError`.
pub fn status_error(s: &Status, cap_hint: usize) -> Option<MpiError> {
    match s.error {
        0 => None,
        class::TRUNCATE => Some(err(
            class::TRUNCATE,
            format!(
            "message truncated: the receive buffer holds {cap_hint} bytes, the message was longer"
        ),
        )),
        class::PROC_ABORTED => Some(err(class::PROC_ABORTED, failure_message())),
        c => Some(err(c, "the operation failed")),
    }
}

#[cfg(test)]
mod tests;
