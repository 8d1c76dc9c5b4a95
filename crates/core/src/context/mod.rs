//! The context: one per process. It owns the initialised methods, its own
//! descriptor table, the handler and endpoint tables, the links to peers
//! (opened on demand by the selection policy) and the progress engine.
//!
//! Threads: every public method takes `&self` and may be called from several
//! threads at once. Sends lock only the link they use; progress is owned by
//! one thread at a time (`try_lock`), and a thread that finds it taken lets
//! the owner work and re-checks its own condition.
//!
//! Handlers run inside progress, on the thread that polled. They must not
//! block; a send from a handler that cannot complete at once is queued by its
//! link instead of waiting (see [`Waiter`]).

use crate::bootstrap::Pmi;
use crate::descriptor::{DescriptorTable, Entry};
use crate::error::{Error, Result};
use crate::method::{self, JobInfo, Link, Method, MethodEnv, PollClass, Sink, Waiter};
use crate::params::Params;
use crate::select::{FirstApplicable, SelectionPolicy};
use crate::startpoint::Startpoint;
use crate::sync::TryLock;
use std::cell::Cell;
use std::collections::HashSet;
use std::io::IoSlice;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

mod failover;
mod finalize;
mod foreign;
mod lent;
pub mod measured;
mod membership;
mod multicast;
mod placed;
mod placement;
mod progress;
mod routes;
mod select;
mod setup;
pub mod spin_guard;
mod stats;
#[cfg(test)]
mod tests;
mod world;

pub use lent::LentTicket;
pub use membership::{JoinSpec, MembershipEvent, MembershipKind, MAX_CAPACITY};
pub use multicast::{MulticastStartpoint, FANOUT as MULTICAST_FANOUT};
pub use placement::{check_site_name, Placement, DEFAULT_SITE, MAX_SITE_LEN};
use placement::{lookup_placement, own_placement, publish_placement};
#[cfg(test)]
use progress::Dispatch;
use progress::ProgressWaiter;
pub use routes::{RouteId, RouteSpec, Select, MAX_ROUTES, NO_TRAFFIC_KEY};
use setup::*;
pub use setup::{host_identity, methods_from_params, real_host_identity};
pub use stats::{LinkStats, MethodStats};
use world::{world_layout, World};

/// What a handler receives.
pub struct Request<'a> {
    /// The context that sent the request.
    pub src: u32,
    /// The endpoint it was addressed to (0 = the context's default endpoint).
    pub endpoint: u32,
    pub payload: &'a [u8],
}

/// A handler: runs inside progress when a request for it arrives.
pub type Handler = Arc<dyn Fn(&Context, Request<'_>) + Send + Sync>;

/// What an owning handler ([`Context::register_owning_handler`]) receives.
pub struct OwnedRequest<'a> {
    pub src: u32,
    pub endpoint: u32,
    pub payload: Payload<'a>,
}

/// A request's payload for an owning handler: borrowed from the method
/// (small messages, straight from a ring or a socket buffer), or a buffer
/// the method reassembled a large message in, given away instead of copied.
pub enum Payload<'a> {
    Borrowed(&'a [u8]),
    /// The payload is `buf[start..]`.
    Owned {
        buf: Vec<u8>,
        start: usize,
    },
}

impl Payload<'_> {
    pub fn as_slice(&self) -> &[u8] {
        match self {
            Payload::Borrowed(p) => p,
            Payload::Owned { buf, start } => &buf[*start..],
        }
    }

    /// The payload as a buffer and where in it the payload starts: the
    /// given buffer, or a copy of a borrowed payload (starting at 0).
    pub fn into_buffer(self) -> (Vec<u8>, usize) {
        match self {
            Payload::Borrowed(p) => (p.to_vec(), 0),
            Payload::Owned { buf, start } => (buf, start),
        }
    }
}

/// A handler that may keep its payload ([`Context::register_owning_handler`]).
pub type OwningHandler = Arc<dyn Fn(&Context, OwnedRequest<'_>) + Send + Sync>;

/// A registered handler: one that borrows its payload, or one that may keep it.
pub(crate) enum Registered {
    Borrowing(Handler),
    Owning(OwningHandler),
}

/// A handler's companion for large requests on stream methods (tcp): it
/// may name where a request's payload goes before the payload arrives, so
/// the transport reads it there directly (one copy, the kernel's, instead
/// of two). See [`Context::register_placer`] and
/// [`crate::method::Destination`] for the contract.
pub trait Placer: Send + Sync {
    /// A request for this placer's handler of `len` payload bytes from
    /// `src` is arriving; `head` is the payload's start (up to
    /// `method::PLACE_HEAD` bytes less the runtime's headers). `None`:
    /// deliver it to the handler as usual. A destination's `at` counts
    /// from the start of the payload.
    fn place(&self, src: u32, head: &[u8], len: usize) -> Option<method::Destination>;
    /// [`place`](Self::place) for a request the transport holds whole
    /// already or gets in fragments nothing else from `src` comes between
    /// (`method::Sink::place_whole`): the destination is filled and handed
    /// to [`placed`](Self::placed) before anything else from `src` is
    /// delivered, and abandoned only with a link that failed for good, so
    /// the request may be taken as arrived now. Default: as `place`.
    fn place_whole(&self, src: u32, head: &[u8], len: usize) -> Option<method::Destination> {
        self.place(src, head, len)
    }
    /// The payload arrived whole: `head` is its first `dest.at` bytes and
    /// the rest is at `dest.dst`. Runs instead of the handler, like it
    /// inside progress.
    fn placed(&self, ctx: &Context, src: u32, head: &[u8], dest: method::Destination);
}

/// A hook run at the end of a round of progress that ran handlers (see
/// [`Context::register_round_end`]).
pub type RoundEnd = Arc<dyn Fn(&Context) + Send + Sync>;

/// The id of every context's default endpoint, which exists from the start.
pub const DEFAULT_ENDPOINT: u32 = 0;

/// Size of the header the context puts in front of every payload:
/// handler id, endpoint id (both `u32` little-endian).
pub(crate) const RSR_HEADER: usize = 8;

/// Handler ids from here up belong to the runtime itself.
pub const FIRST_INTERNAL_HANDLER: u32 = 0xffff_0000;
const H_BARRIER: u32 = FIRST_INTERNAL_HANDLER + 1;
/// A context announces that it leaves the job (see [`Context::leave`]).
const H_LEAVE: u32 = FIRST_INTERNAL_HANDLER + 2;

#[derive(Default)]
struct Peer {
    /// The peer's descriptor table, once known (from a startpoint or the bootstrap).
    table: OnceLock<DescriptorTable>,
    link: OnceLock<Arc<dyn Link>>,
    /// Serialises connection establishment to this peer.
    connecting: Mutex<()>,
    /// Why the link broke (the first cause), if it did; sends then fail
    /// with this reason. A `OnceLock`: waits check it on every iteration.
    failed: OnceLock<String>,
    /// Sequencing and failover of a link between hosts (see `failover.rs`):
    /// links of this peer then live here, not in `link`.
    seq: OnceLock<failover::Sequenced>,
    /// Contexts whose tables we already sent to this peer inside startpoints.
    tables_sent: Mutex<HashSet<u32>>,
    /// How we learned the table (for reports and tests): 1 = startpoint,
    /// 2 = bootstrap, 3 = given at run time (dynamic membership).
    table_source: AtomicU32,
    /// The peer's host and site, once read from the bootstrap.
    placement: OnceLock<Placement>,
    sent_msgs: AtomicU64,
    sent_bytes: AtomicU64,
    recv_msgs: AtomicU64,
    recv_bytes: AtomicU64,
}

impl Inner {
    /// Whether any peer has sequencing state (a silence check has work).
    fn seq_peers_any(&self) -> bool {
        !self
            .seq_peers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    }
}

impl Peer {
    /// The link in use to this peer now (direct, or the sequenced one).
    fn link_now(&self) -> Option<Arc<dyn Link>> {
        match self.link.get() {
            Some(l) => Some(l.clone()),
            None => self.seq.get().and_then(|s| s.link()),
        }
    }
}

/// How messages to a peer go: straight on a link (same host), or
/// sequenced (between hosts).
enum Route<'a> {
    Direct(&'a Arc<dyn Link>),
    Sequenced(&'a failover::Sequenced),
}

/// Where a peer's descriptor table came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableSource {
    Unknown,
    /// Attached to a startpoint that reached us.
    Startpoint,
    /// Looked up in the bootstrap's key-value space.
    Bootstrap,
    /// Handed over at run time (a peer that joined a running job).
    Given,
}

struct ProgressState {
    iter: u64,
    /// Current interval between polls of expensive methods.
    skip: u64,
    next_expensive: u64,
    /// Handlers by id. They live under the progress lock because only the
    /// thread holding it delivers: dispatch then needs no lock of its own
    /// (registration, which is rare, takes the progress lock to change them).
    handlers: Vec<Option<Registered>>,
    /// Placers by handler id (a handful at most; see [`Placer`]).
    placers: Vec<(u32, Arc<dyn Placer>)>,
    /// Round-end hooks by handler id (see [`Context::register_round_end`]).
    round_ends: Vec<(u32, RoundEnd)>,
    /// A socket method delivered a message at least once.
    sockets_used: bool,
    /// The next round of progress polls every method thoroughly (see
    /// `Method::poll_thorough`): set after a sleep.
    thorough: bool,
    /// The same for the cheap methods, taken by the next round whether or
    /// not the sockets' turn has come (see `progress`).
    thorough_cheap: bool,
    /// A cheap method other than `self` (shared memory) delivered a message
    /// at least once: only then is there shared-memory latency that skipping
    /// socket polls protects.
    shared_used: bool,
    /// When idle rounds last looked for silent links (failover.rs).
    last_silence_check: std::time::Instant,
}

struct Inner {
    job: JobInfo,
    /// The contexts that started together with this one (the bootstrap's
    /// and the collective shutdown's participants).
    world: World,
    params: Params,
    methods: Vec<Arc<dyn Method>>,
    cheap: Vec<usize>,
    expensive: Vec<usize>,
    wait_fds: Vec<RawFd>,
    table: DescriptorTable,
    peers: Vec<Peer>,
    policy: Box<dyn SelectionPolicy>,
    /// Which links get transforms (`GW_ENCRYPT`, `GW_COMPRESS`).
    transforms: method::transform::policy::Policy,
    endpoints: RwLock<HashSet<u32>>,
    next_endpoint: AtomicU32,
    progress: TryLock<ProgressState>,
    /// Rounds of progress made so far (a copy of `ProgressState::iter`,
    /// stored by the round's owner, never read on the message path): lets a
    /// library thread see whether anyone else is polling.
    rounds: AtomicU64,
    pmi: Mutex<Pmi>,
    skip_param: u64,
    spin_iters: u64,
    /// `GW_YIELD_US`: how long an idle wait yields before it sleeps.
    yield_for: Duration,
    /// Idle time a waiting thread keeps its core before yielding (see `wait`).
    spin: Duration,
    dropped: AtomicU64,
    finalized: AtomicBool,
    barrier_epoch: AtomicU64,
    /// Barrier messages received, by (epoch, round).
    barrier_seen: Mutex<std::collections::HashMap<(u64, u32), u32>>,
    /// Barrier messages received so far: a waiting barrier looks at
    /// `barrier_seen` only when this moved (its wait loop spins on it).
    barrier_arrivals: AtomicU64,
    /// Membership of a job that changes at run time (see `membership.rs`).
    members: membership::Members,
    /// Per method: whether its links are sequenced (between hosts, with
    /// `GW_FAILOVER` on); see `failover.rs`.
    sequenced: Vec<bool>,
    /// Peers that have sequencing state (the ones housekeeping visits).
    seq_peers: Mutex<Vec<u32>>,
    /// Housekeeping has work: an ack is due or a link was reported broken.
    seq_work: AtomicBool,
    /// Some peer's messages were delivered and not acknowledged yet: an
    /// idle round sends the acks.
    seq_idle_acks: AtomicBool,
    /// `GW_LINK_TIMEOUT`.
    link_timeout: Duration,
    /// Per-traffic link choices (`routes.rs`).
    routes: routes::Routes,
}

/// A process's runtime. Cloning is cheap and shares the same context.
#[derive(Clone)]
pub struct Context {
    inner: Arc<Inner>,
}

thread_local! {
    /// Set while this thread runs a handler: sends must not wait then.
    static IN_HANDLER: Cell<bool> = const { Cell::new(false) };
}

impl Context {
    /// Initialises the runtime: reads parameters, bootstraps through PMI
    /// (or runs as a singleton without a launcher), initialises the methods,
    /// publishes the descriptor table and waits for every rank to do so.
    pub fn init() -> Result<Context> {
        let params = Params::from_env()?;
        let pmi = Pmi::connect(crate::bootstrap::PmiChoice::parse(params.text("PMI"))?)?;
        if params.num("VERBOSE") >= 1 && !pmi.is_singleton() {
            crate::say!(
                "gw[{}]: bootstrap {} (job {})",
                pmi.rank(),
                pmi.protocol(),
                pmi.kvsname()
            );
        }
        Self::with(params, pmi)
    }

    /// Initialises with explicit parameters and bootstrap.
    pub fn with(params: Params, mut pmi: Pmi) -> Result<Context> {
        let rank = pmi.rank();
        let world = world_layout(params.text("WORLD"), rank, pmi.size())?;
        let job = job_info(&params, &mut pmi, rank, world.capacity)?;
        let mut ctx = Self::build(params, pmi, job, false)?;
        if let Some(inner) = Arc::get_mut(&mut ctx.inner) {
            // Spinning is decided by the processes that run (the world), not
            // by the room reserved for spawned ones (the capacity).
            inner.spin = spin_budget(&inner.params, world.size)?;
            inner.world = world;
        }
        Ok(ctx)
    }

    /// The common part of [`with`](Self::with) and [`join`](Self::join).
    /// A context that joins a running job has no bootstrap to publish to
    /// (`dynamic`): peers learn its table on demand instead.
    fn build(params: Params, mut pmi: Pmi, job: JobInfo, dynamic: bool) -> Result<Context> {
        let rank = job.ctx_id;
        let size = job.size;
        let chosen = methods_from_params(&params)?;
        let env = MethodEnv {
            job: &job,
            params: &params,
        };
        let mut methods: Vec<Arc<dyn Method>> = Vec::new();
        for info in chosen {
            match (info.init)(&env)? {
                Some(m) => methods.push(m),
                None if params.is_set("METHODS") => {
                    return Err(Error::BadParam {
                        var: "GW_METHODS".into(),
                        value: params.text("METHODS").into(),
                        reason: format!("method {} is not available on this host", info.name),
                    })
                }
                None => {}
            }
        }
        let policy = method::transform::policy::Policy::from_params(&params)?;
        let stacks = method::transform::policy::build_stacks(&env, &policy, &methods)?;
        methods.extend(stacks);
        methods.extend(method::relay::build_stacks(&env, &policy)?);
        let table = DescriptorTable {
            entries: methods
                .iter()
                .map(|m| Entry {
                    method: m.name().into(),
                    descriptor: m.descriptor(),
                })
                .collect(),
        };
        let placement = own_placement(&params, &job.host_id)?;
        if !dynamic {
            publish_table(&mut pmi, rank, &table.to_hex())?;
            publish_placement(&mut pmi, rank, &placement)?;
            pmi.commit()?;
            pmi.barrier()?;
        }
        let mut cheap = Vec::new();
        let mut expensive = Vec::new();
        for (i, m) in methods.iter().enumerate() {
            match m.poll_class() {
                PollClass::EveryIteration => cheap.push(i),
                PollClass::Expensive => expensive.push(i),
            }
        }
        let wait_fds = methods.iter().filter_map(|m| m.wait_fd()).collect();
        // Beyond the job's ids: room for processes of other jobs reached
        // through a port (`foreign.rs`).
        let slots = size as usize + foreign::slots(&params);
        let mut peers = Vec::with_capacity(slots);
        peers.resize_with(slots, Peer::default);
        let _ = peers[rank as usize].table.set(table.clone());
        let _ = peers[rank as usize].placement.set(placement);
        let failover_on = params.flag("FAILOVER");
        let sequenced = methods
            .iter()
            .map(|m| failover_on && !matches!(m.name(), "self" | "shm"))
            .collect();
        let link_timeout = Duration::from_secs(params.num("LINK_TIMEOUT"));
        let skip_param = params.num("SKIP_POLL");
        let spin_iters = params.num("SPIN_ITERS");
        let yield_for = Duration::from_micros(params.num("YIELD_US"));
        let spin = spin_budget(&params, size)?;
        let forced = measured::parse_forced(params.text("SELECT_ESTIMATES")).map_err(|reason| {
            Error::BadParam {
                var: "GW_SELECT_ESTIMATES".into(),
                value: params.text("SELECT_ESTIMATES").into(),
                reason,
            }
        })?;
        let inner = Inner {
            world: World {
                first: 0,
                size: job.size,
                capacity: job.size,
            },
            job,
            methods,
            cheap,
            expensive,
            wait_fds,
            table,
            peers,
            policy: Box::new(FirstApplicable),
            transforms: policy,
            endpoints: RwLock::new(HashSet::from([DEFAULT_ENDPOINT])),
            next_endpoint: AtomicU32::new(1),
            rounds: AtomicU64::new(0),
            progress: TryLock::new(ProgressState {
                iter: 0,
                skip: skip_param.max(1),
                next_expensive: 0,
                handlers: Vec::new(),
                placers: Vec::new(),
                round_ends: Vec::new(),
                sockets_used: false,
                shared_used: false,
                thorough: false,
                thorough_cheap: false,
                last_silence_check: std::time::Instant::now(),
            }),
            pmi: Mutex::new(pmi),
            skip_param,
            spin_iters,
            yield_for,
            spin,
            dropped: AtomicU64::new(0),
            finalized: AtomicBool::new(false),
            barrier_epoch: AtomicU64::new(0),
            barrier_seen: Mutex::new(std::collections::HashMap::new()),
            barrier_arrivals: AtomicU64::new(0),
            members: membership::Members::new(dynamic),
            params,
            sequenced,
            seq_peers: Mutex::new(Vec::new()),
            seq_work: AtomicBool::new(false),
            seq_idle_acks: AtomicBool::new(false),
            link_timeout,
            routes: routes::Routes::new(forced),
        };
        let ctx = Context {
            inner: Arc::new(inner),
        };
        if ctx.job_select() == Select::Measured {
            // The job's default route is measured: its per-stack sub-routes.
            ctx.make_measured(RouteId::DEFAULT, &RouteSpec::default())?;
        }
        Ok(ctx)
    }

    pub fn rank(&self) -> u32 {
        self.inner.job.ctx_id
    }

    /// A public digest of the job secret ([`crate::auth::fingerprint`]),
    /// for tests of how the secret was made.
    #[doc(hidden)]
    pub fn secret_fingerprint(&self) -> String {
        crate::auth::fingerprint(&self.inner.job.secret)
    }

    /// The PMI key-value space's name (public: `ps` may show it).
    #[doc(hidden)]
    pub fn kvsname(&self) -> String {
        self.inner
            .pmi
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .kvsname()
            .to_string()
    }

    /// How long an idle wait keeps its core before it yields (`GW_SPIN_US`,
    /// its `auto` rule applied): the MPI layer's waits follow it too unless
    /// `GW_MPI_SPIN_US` says otherwise.
    pub fn spin_budget(&self) -> std::time::Duration {
        self.inner.spin
    }

    /// Number of contexts that started together with this one (its world:
    /// ids [`world_first`](Self::world_first)`..+size`).
    pub fn size(&self) -> u32 {
        self.inner.world.size
    }

    /// The first context id of this context's world (0 but in processes
    /// spawned into a running job).
    pub fn world_first(&self) -> u32 {
        self.inner.world.first
    }

    /// Context ids of the job run from 0 to `capacity() - 1`: the world
    /// and room for processes spawned later.
    pub fn capacity(&self) -> u32 {
        self.inner.job.size
    }

    /// The host identity used for shared-memory applicability.
    pub fn host_id(&self) -> &str {
        &self.inner.job.host_id
    }

    pub fn params(&self) -> &Params {
        &self.inner.params
    }

    /// This context's descriptor table.
    pub fn table(&self) -> &DescriptorTable {
        &self.inner.table
    }

    /// Names of the methods this context initialised, in table order.
    pub fn method_names(&self) -> Vec<&'static str> {
        self.inner.methods.iter().map(|m| m.name()).collect()
    }

    /// Registers `handler` under `id`, replacing any earlier one. Ids from
    /// [`FIRST_INTERNAL_HANDLER`] up are reserved for the runtime.
    pub fn register_handler(
        &self,
        id: u32,
        handler: impl Fn(&Context, Request<'_>) + Send + Sync + 'static,
    ) -> Result<()> {
        self.install_handler(id, Registered::Borrowing(Arc::new(handler)))
    }

    /// Like [`register_handler`](Self::register_handler), for a handler that
    /// keeps what it receives (a mailbox): a large message the method
    /// reassembled reaches it as that buffer, not as a slice to copy.
    pub fn register_owning_handler(
        &self,
        id: u32,
        handler: impl Fn(&Context, OwnedRequest<'_>) + Send + Sync + 'static,
    ) -> Result<()> {
        self.install_handler(id, Registered::Owning(Arc::new(handler)))
    }

    fn install_handler(&self, id: u32, handler: Registered) -> Result<()> {
        if IN_HANDLER.with(|c| c.get()) {
            return Err(Error::BadParam {
                var: "handler id".into(),
                value: id.to_string(),
                reason: "handlers cannot be registered from inside a handler".into(),
            });
        }
        if id >= FIRST_INTERNAL_HANDLER || id > 1 << 20 {
            return Err(Error::BadParam {
                var: "handler id".into(),
                value: id.to_string(),
                reason: "user handler ids must be below 1048576".into(),
            });
        }
        let mut st = self.inner.progress.lock();
        let h = &mut st.handlers;
        let i = id as usize;
        if h.len() <= i {
            h.resize_with(i + 1, || None);
        }
        h[i] = Some(handler);
        Ok(())
    }

    /// Removes the handler of `id`; requests for it are then counted as
    /// dropped. Handlers run under the progress lock, which this takes, so
    /// when it returns no call of the old handler is running or will start:
    /// state the handler borrowed may then be freed.
    pub fn unregister_handler(&self, id: u32) -> Result<()> {
        if IN_HANDLER.with(|c| c.get()) {
            return Err(Error::BadParam {
                var: "handler id".into(),
                value: id.to_string(),
                reason: "handlers cannot be unregistered from inside a handler".into(),
            });
        }
        let mut st = self.inner.progress.lock();
        if let Some(h) = st.handlers.get_mut(id as usize) {
            *h = None;
        }
        st.placers.retain(|(h, _)| *h != id);
        st.round_ends.retain(|(h, _)| *h != id);
        Ok(())
    }

    /// Registers `placer` for the requests of handler `id` (see
    /// [`Placer`]); removed with the handler by
    /// [`unregister_handler`](Self::unregister_handler).
    pub fn register_placer(&self, id: u32, placer: Arc<dyn Placer>) -> Result<()> {
        if IN_HANDLER.with(|c| c.get()) {
            return Err(Error::BadParam {
                var: "handler id".into(),
                value: id.to_string(),
                reason: "placers cannot be registered from inside a handler".into(),
            });
        }
        let mut st = self.inner.progress.lock();
        st.placers.retain(|(h, _)| *h != id);
        st.placers.push((id, placer));
        Ok(())
    }

    /// Registers `hook` to run, inside progress like a handler, at the
    /// end of every round of progress in which a handler ran (after the
    /// round's last one); removed with handler `id` by
    /// [`unregister_handler`](Self::unregister_handler). Why: a handler
    /// may keep state across the messages of one round (the MPI engine
    /// keeps its matching lock across a drained batch of messages instead
    /// of taking it per message) and must know when the batch is over.
    pub fn register_round_end(&self, id: u32, hook: RoundEnd) -> Result<()> {
        if IN_HANDLER.with(|c| c.get()) {
            return Err(Error::BadParam {
                var: "handler id".into(),
                value: id.to_string(),
                reason: "round-end hooks cannot be registered from inside a handler".into(),
            });
        }
        let mut st = self.inner.progress.lock();
        st.round_ends.retain(|(h, _)| *h != id);
        st.round_ends.push((id, hook));
        Ok(())
    }

    /// Creates a new endpoint and returns a startpoint bound to it.
    pub fn create_endpoint(&self) -> Startpoint {
        let id = self.inner.next_endpoint.fetch_add(1, Ordering::Relaxed);
        self.inner
            .endpoints
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id);
        Startpoint {
            ctx: self.rank(),
            endpoint: id,
        }
    }

    /// Destroys an endpoint; requests that arrive for it later are dropped and counted.
    pub fn destroy_endpoint(&self, sp: &Startpoint) {
        if sp.endpoint != DEFAULT_ENDPOINT {
            self.inner
                .endpoints
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&sp.endpoint);
        }
    }

    /// A startpoint to the default endpoint of context `rank`.
    pub fn startpoint(&self, rank: u32) -> Result<Startpoint> {
        let peer = self.peer(rank)?;
        // Ids beyond the capacity are aliases of other jobs' processes
        // (`foreign.rs`): one exists only once attached.
        if rank >= self.capacity() && peer.link_now().is_none() {
            return Err(Error::BadStartpoint(format!(
                "rank {rank} does not exist (the job has {} ranks, and no process of \
                 another job is attached as {rank})",
                self.capacity()
            )));
        }
        Ok(Startpoint {
            ctx: rank,
            endpoint: DEFAULT_ENDPOINT,
        })
    }

    fn peer(&self, rank: u32) -> Result<&Peer> {
        self.inner.peers.get(rank as usize).ok_or_else(|| {
            Error::BadStartpoint(format!(
                "rank {rank} does not exist (the job has {} ranks)",
                self.capacity()
            ))
        })
    }

    /// Issues a remote service request: runs handler `handler` on the
    /// startpoint's endpoint with `payload`. Returns when `payload` may be reused.
    pub fn rsr(&self, sp: &Startpoint, handler: u32, payload: &[u8]) -> Result<()> {
        self.rsr_v(sp, handler, &[IoSlice::new(payload)])
    }

    /// Like [`rsr`](Self::rsr) with a gathered payload (no copy to join the parts).
    #[inline]
    pub fn rsr_v(&self, sp: &Startpoint, handler: u32, payload: &[IoSlice<'_>]) -> Result<()> {
        self.rsr_v_keyed(sp, handler, payload, NO_TRAFFIC_KEY)
    }

    /// [`rsr`](Self::rsr) of traffic `key`: between hosts it goes on the
    /// route the key is mapped to ([`Context::set_traffic_route`]); within
    /// a host the key is not looked at.
    #[inline]
    pub fn rsr_keyed(&self, sp: &Startpoint, handler: u32, payload: &[u8], key: u32) -> Result<()> {
        self.rsr_v_keyed(sp, handler, &[IoSlice::new(payload)], key)
    }

    /// [`rsr_v`](Self::rsr_v) of traffic `key` (see [`rsr_keyed`](Self::rsr_keyed)).
    pub fn rsr_v_keyed(
        &self,
        sp: &Startpoint,
        handler: u32,
        payload: &[IoSlice<'_>],
        key: u32,
    ) -> Result<()> {
        let peer = self.peer(sp.ctx)?;
        // A departed peer (it left, or died and someone told us) fails at
        // once with its reason: its link may never drain again.
        if let Some(why) = peer.failed.get() {
            return Err(Error::LinkFailed {
                peer: sp.ctx,
                method: self.method_to(sp.ctx).unwrap_or("none"),
                reason: why.clone(),
            });
        }
        let mut hdr = [0u8; RSR_HEADER];
        hdr[..4].copy_from_slice(&handler.to_le_bytes());
        hdr[4..].copy_from_slice(&sp.endpoint.to_le_bytes());
        let waiter = ProgressWaiter { ctx: self };
        let link = match peer.link.get() {
            Some(l) => l,
            None => match peer.seq.get().filter(|s| s.routed()) {
                Some(s) => return self.rsr_sequenced(sp.ctx, s, &hdr, payload, &waiter, key),
                None => match self.connect(sp.ctx)? {
                    Route::Direct(l) => l,
                    Route::Sequenced(s) => {
                        return self.rsr_sequenced(sp.ctx, s, &hdr, payload, &waiter, key)
                    }
                },
            },
        };
        // The header and the caller's parts in one iovec, on the stack for
        // the usual shapes (MPI's eager message is envelope + data: two).
        let res = if let [a, b] = payload {
            link.send(&[IoSlice::new(&hdr), *a, *b], &waiter)
        } else if payload.len() < 8 {
            let mut iov = [IoSlice::new(&[]); 8];
            iov[0] = IoSlice::new(&hdr);
            iov[1..=payload.len()].copy_from_slice(payload);
            link.send(&iov[..=payload.len()], &waiter)
        } else {
            let mut iov = Vec::with_capacity(payload.len() + 1);
            iov.push(IoSlice::new(&hdr));
            iov.extend_from_slice(payload);
            link.send(&iov, &waiter)
        };
        if let Err(e) = res {
            if let Some(why) = peer.failed.get().cloned() {
                return Err(Error::LinkFailed {
                    peer: sp.ctx,
                    method: link.method(),
                    reason: why,
                });
            }
            return Err(e);
        }
        if !link.counts_sends() {
            let len = method::iov_len(payload);
            peer.sent_msgs.fetch_add(1, Ordering::Relaxed);
            peer.sent_bytes
                .fetch_add((len + RSR_HEADER) as u64, Ordering::Relaxed);
        }
        Ok(())
    }

    /// A request to a peer on another host: sequenced (see `failover.rs`),
    /// on the route of traffic `key` (`routes.rs`).
    fn rsr_sequenced(
        &self,
        rank: u32,
        s: &failover::Sequenced,
        hdr: &[u8; RSR_HEADER],
        payload: &[IoSlice<'_>],
        waiter: &ProgressWaiter<'_>,
        key: u32,
    ) -> Result<()> {
        self.rsr_sequenced_as(rank, s, hdr, payload, waiter, key, None)
            .map(|_| ())
    }

    /// Opens the link to `rank` with the selection policy (once; later
    /// callers reuse it). A link between hosts is sequenced: it is opened
    /// by its first send (`failover.rs`), which can also replace it.
    fn connect(&self, rank: u32) -> Result<Route<'_>> {
        let peer = self.peer(rank)?;
        let _guard = peer.connecting.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(l) = peer.link.get() {
            return Ok(Route::Direct(l));
        }
        if let Some(s) = peer.seq.get().filter(|s| s.routed()) {
            return Ok(Route::Sequenced(s));
        }
        if let Some(why) = peer.failed.get().cloned() {
            return Err(Error::LinkFailed {
                peer: rank,
                method: "none",
                reason: why,
            });
        }
        // A peer that joined at run time and reached us first: answer over
        // its connection instead of asking the membership keeper for its
        // table (a round trip to another process on the first reply).
        if self.inner.members.dynamic && peer.table.get().is_none() {
            // Not for a sequenced (between hosts) method: its link is
            // opened by the first send, with the sequencing (`failover.rs`).
            let found = self
                .inner
                .methods
                .iter()
                .enumerate()
                .filter(|(mi, _)| !self.is_sequenced(*mi))
                .find_map(|(_, m)| m.existing_link(rank).map(|l| (m.name(), l)));
            if let Some((name, l)) = found {
                if self.inner.job.verbose >= 1 {
                    crate::say!(
                        "gw[{}]: rank {rank} reached by {name} (the connection it opened)",
                        self.rank()
                    );
                }
                return Ok(Route::Direct(self.install_link(peer, rank, l)));
            }
        }
        let table = self.table_of(rank)?;
        let candidates = self.candidates_for(rank, &table)?;
        if candidates.is_empty() {
            return Err(Error::NoMethod {
                peer: rank,
                offered: table.names(),
            });
        }
        if self.is_sequenced(candidates[0].0) {
            let s = self.sequenced(rank).expect("the peer exists");
            s.set_routed();
            return Ok(Route::Sequenced(s));
        }
        let mut last_err = None;
        let mut link = None;
        for (mi, entry) in candidates {
            let m = &self.inner.methods[mi];
            let desc = &table.entries[entry].descriptor;
            match m.connect(rank, desc) {
                Ok(l) => {
                    if self.inner.job.verbose >= 1 {
                        crate::say!(
                            "gw[{}]: rank {rank} reached by {} ({})",
                            self.rank(),
                            m.name(),
                            m.describe(desc)
                        );
                    }
                    link = Some(l);
                    break;
                }
                Err(e) => {
                    if crate::events::listening() {
                        crate::events::emit(crate::events::LinkEvent {
                            kind: crate::events::LinkEventKind::ConnectFailed,
                            rank: self.rank(),
                            peer: rank,
                            method: m.name(),
                            reason: &e.to_string(),
                        });
                    }
                    // Fall back to the next applicable method, and say why.
                    crate::say!(
                        "gw[{}]: {} to rank {rank} failed ({e}); trying the next method",
                        self.rank(),
                        m.name()
                    );
                    last_err = Some(e);
                }
            }
        }
        let Some(link) = link else {
            return Err(last_err.expect("at least one candidate was tried"));
        };
        Ok(Route::Direct(self.install_link(peer, rank, link)))
    }

    /// Makes `link` the peer's link and tells event listeners.
    fn install_link<'a>(
        &self,
        peer: &'a Peer,
        rank: u32,
        link: Arc<dyn Link>,
    ) -> &'a Arc<dyn Link> {
        let _ = peer.link.set(link);
        let link = peer.link.get().expect("just set");
        // After the link is in place: a listener reading the peer's method sees it.
        crate::events::emit(crate::events::LinkEvent {
            kind: crate::events::LinkEventKind::Selected,
            rank: self.rank(),
            peer: rank,
            method: link.method(),
            reason: "",
        });
        link
    }

    /// Where `rank` runs (host digest and site): cached, or read from what
    /// it published through the bootstrap at start-up.
    pub fn placement_of(&self, rank: u32) -> Result<Placement> {
        let peer = self.peer(rank)?;
        if let Some(p) = peer.placement.get() {
            return Ok(p.clone());
        }
        let p = lookup_placement(
            &mut self.inner.pmi.lock().unwrap_or_else(|e| e.into_inner()),
            rank,
        )?;
        Ok(peer.placement.get_or_init(|| p).clone())
    }

    /// The site of `rank` (`GW_SITE` where it started, else "default").
    pub fn site_of(&self, rank: u32) -> Result<String> {
        Ok(self.placement_of(rank)?.site)
    }

    /// A digest of `rank`'s host identity: equal digests, same host.
    pub fn host_of(&self, rank: u32) -> Result<[u8; 32]> {
        Ok(self.placement_of(rank)?.host)
    }

    /// The descriptor table of `rank`: cached, or looked up in the bootstrap.
    fn table_of(&self, rank: u32) -> Result<DescriptorTable> {
        let peer = self.peer(rank)?;
        if let Some(t) = peer.table.get() {
            return Ok(t.clone());
        }
        if self.inner.members.dynamic {
            return self.resolve_table(rank);
        }
        let hex = lookup_table(
            &mut self.inner.pmi.lock().unwrap_or_else(|e| e.into_inner()),
            rank,
        )?;
        let t = DescriptorTable::from_hex(&hex)?;
        if peer.table.set(t.clone()).is_ok() {
            peer.table_source.store(2, Ordering::Relaxed);
        }
        Ok(peer.table.get().cloned().unwrap_or(t))
    }

    /// Why the link to `rank` failed, if it did.
    pub fn link_error(&self, rank: u32) -> Option<String> {
        self.peer(rank).ok()?.failed.get().cloned()
    }

    /// Where this context learned `rank`'s descriptor table.
    pub fn table_source(&self, rank: u32) -> TableSource {
        match self
            .peer(rank)
            .map(|p| p.table_source.load(Ordering::Relaxed))
        {
            Ok(1) => TableSource::Startpoint,
            Ok(2) => TableSource::Bootstrap,
            Ok(3) => TableSource::Given,
            _ => TableSource::Unknown,
        }
    }

    /// Serialises `sp` to travel to context `dest`. The endpoint's descriptor
    /// table is attached the first time a startpoint of that context goes to
    /// `dest`, and omitted after (the peer caches it).
    pub fn pack_startpoint(&self, sp: &Startpoint, dest: u32) -> Result<Vec<u8>> {
        let to = self.peer(dest)?;
        let mut out = Vec::with_capacity(64);
        out.extend_from_slice(&sp.ctx.to_le_bytes());
        out.extend_from_slice(&sp.endpoint.to_le_bytes());
        let first = dest != sp.ctx
            && to
                .tables_sent
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(sp.ctx);
        if first {
            let table = self.table_of(sp.ctx)?;
            out.push(1);
            out.extend_from_slice(&table.encode());
        } else {
            out.push(0);
        }
        Ok(out)
    }

    /// Reads a startpoint packed by [`pack_startpoint`](Self::pack_startpoint),
    /// caching an attached descriptor table. Returns the startpoint and the bytes used.
    pub fn unpack_startpoint(&self, buf: &[u8]) -> Result<(Startpoint, usize)> {
        let bad = |w: &str| Error::BadStartpoint(w.into());
        let head = buf.get(..9).ok_or_else(|| bad("truncated"))?;
        let ctx = u32::from_le_bytes(head[..4].try_into().unwrap());
        let endpoint = u32::from_le_bytes(head[4..8].try_into().unwrap());
        let peer = self.peer(ctx)?;
        match head[8] {
            0 => Ok((Startpoint { ctx, endpoint }, 9)),
            1 => {
                let (table, used) = DescriptorTable::decode(&buf[9..])?;
                if peer.table.set(table).is_ok() {
                    peer.table_source.store(1, Ordering::Relaxed);
                }
                Ok((Startpoint { ctx, endpoint }, 9 + used))
            }
            _ => Err(bad("bad table flag")),
        }
    }

    /// The method of the link to `rank`, if one was opened.
    pub fn method_to(&self, rank: u32) -> Option<&'static str> {
        self.peer(rank).ok()?.link_now().map(|l| l.method())
    }

    /// Links between hosts replaced after a break, and duplicates dropped
    /// after resending, summed over peers (for tests and reports).
    pub fn failover_counters(&self) -> (u64, u64) {
        self.inner
            .peers
            .iter()
            .filter_map(|p| p.seq.get())
            .fold((0, 0), |(f, d), s| {
                (
                    f + s.failovers.load(Ordering::Relaxed),
                    d + s.duplicates.load(Ordering::Relaxed),
                )
            })
    }

    /// Messages that arrived ahead of their turn on a second link of a pair
    /// and waited in the reorder buffer, summed over peers.
    pub fn reordered_messages(&self) -> u64 {
        self.inner
            .peers
            .iter()
            .filter_map(|p| p.seq.get())
            .map(|s| s.reordered.load(Ordering::Relaxed))
            .sum()
    }

    /// Opens the link to `rank` now, as the first send to it would (for an
    /// upper layer that knows a send will follow and wants the set-up cost
    /// paid ahead of it); the method chosen.
    pub fn open_link(&self, rank: u32) -> Result<&'static str> {
        Ok(match self.peer(rank)?.link.get() {
            Some(l) => l.method(),
            None => match self.connect(rank)? {
                Route::Direct(l) => l.method(),
                // Between hosts the first send opens the link (with its
                // sequencing): say which one, if any, is in place.
                Route::Sequenced(_) => self
                    .peer(rank)?
                    .link_now()
                    .map_or("none yet", |l| l.method()),
            },
        })
    }

    /// The method the selection policy would choose to reach `rank` (without connecting).
    pub fn would_select(&self, rank: u32) -> Result<&'static str> {
        let table = self.table_of(rank)?;
        self.candidates_for(rank, &table)?
            .first()
            .map(|&(mi, ei)| self.inner.methods[mi].link_name(&table.entries[ei].descriptor))
            .ok_or_else(|| Error::NoMethod {
                peer: rank,
                offered: table.names(),
            })
    }

    /// Aborts the whole job through the bootstrap.
    pub fn abort(&self, code: i32, msg: &str) -> ! {
        let _ = self
            .inner
            .pmi
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .abort(code, msg);
        std::process::exit(code);
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Without finalize (an error path), still release segments and sockets.
        for m in &self.methods {
            m.shutdown();
        }
    }
}
