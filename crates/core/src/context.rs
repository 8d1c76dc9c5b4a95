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

/// The id of every context's default endpoint, which exists from the start.
pub const DEFAULT_ENDPOINT: u32 = 0;

/// Size of the header the context puts in front of every payload:
/// handler id, endpoint id (both `u32` little-endian).
pub(crate) const RSR_HEADER: usize = 8;

/// Handler ids from here up belong to the runtime itself.
pub const FIRST_INTERNAL_HANDLER: u32 = 0xffff_0000;
const H_BARRIER: u32 = FIRST_INTERNAL_HANDLER + 1;

/// Per-link counters, as reported by [`Context::link_stats`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkStats {
    pub peer: u32,
    /// Method of the link this context opened to the peer ("" if it never sent).
    pub method: String,
    pub sent_msgs: u64,
    pub sent_bytes: u64,
    pub recv_msgs: u64,
    pub recv_bytes: u64,
}

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
    /// Contexts whose tables we already sent to this peer inside startpoints.
    tables_sent: Mutex<HashSet<u32>>,
    /// How we learned the table (for reports and tests): 1 = startpoint, 2 = bootstrap.
    table_source: AtomicU32,
    sent_msgs: AtomicU64,
    sent_bytes: AtomicU64,
    recv_msgs: AtomicU64,
    recv_bytes: AtomicU64,
}

/// Where a peer's descriptor table came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableSource {
    Unknown,
    /// Attached to a startpoint that reached us.
    Startpoint,
    /// Looked up in the bootstrap's key-value space.
    Bootstrap,
}

struct ProgressState {
    iter: u64,
    /// Current interval between polls of expensive methods.
    skip: u64,
    next_expensive: u64,
    /// Handlers by id. They live under the progress lock because only the
    /// thread holding it delivers: dispatch then needs no lock of its own
    /// (registration, which is rare, takes the progress lock to change them).
    handlers: Vec<Option<Handler>>,
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
}

struct Inner {
    job: JobInfo,
    params: Params,
    methods: Vec<Arc<dyn Method>>,
    cheap: Vec<usize>,
    expensive: Vec<usize>,
    wait_fds: Vec<RawFd>,
    table: DescriptorTable,
    peers: Vec<Peer>,
    policy: Box<dyn SelectionPolicy>,
    endpoints: RwLock<HashSet<u32>>,
    next_endpoint: AtomicU32,
    progress: TryLock<ProgressState>,
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
        let size = pmi.size();
        let job = job_info(&params, &mut pmi, rank, size)?;
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
        let table = DescriptorTable {
            entries: methods
                .iter()
                .map(|m| Entry {
                    method: m.name().into(),
                    descriptor: m.descriptor(),
                })
                .collect(),
        };
        publish_table(&mut pmi, rank, &table.to_hex())?;
        pmi.commit()?;
        pmi.barrier()?;
        let mut cheap = Vec::new();
        let mut expensive = Vec::new();
        for (i, m) in methods.iter().enumerate() {
            match m.poll_class() {
                PollClass::EveryIteration => cheap.push(i),
                PollClass::Expensive => expensive.push(i),
            }
        }
        let wait_fds = methods.iter().filter_map(|m| m.wait_fd()).collect();
        let mut peers = Vec::with_capacity(size as usize);
        peers.resize_with(size as usize, Peer::default);
        let _ = peers[rank as usize].table.set(table.clone());
        let skip_param = params.num("SKIP_POLL");
        let spin_iters = params.num("SPIN_ITERS");
        let yield_for = Duration::from_micros(params.num("YIELD_US"));
        let spin = spin_budget(&params, size)?;
        let inner = Inner {
            job,
            methods,
            cheap,
            expensive,
            wait_fds,
            table,
            peers,
            policy: Box::new(FirstApplicable),
            endpoints: RwLock::new(HashSet::from([DEFAULT_ENDPOINT])),
            next_endpoint: AtomicU32::new(1),
            progress: TryLock::new(ProgressState {
                iter: 0,
                skip: skip_param.max(1),
                next_expensive: 0,
                handlers: Vec::new(),
                sockets_used: false,
                shared_used: false,
                thorough: false,
                thorough_cheap: false,
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
            params,
        };
        Ok(Context {
            inner: Arc::new(inner),
        })
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

    pub fn size(&self) -> u32 {
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
        h[i] = Some(Arc::new(handler));
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
        self.peer(rank)?;
        Ok(Startpoint {
            ctx: rank,
            endpoint: DEFAULT_ENDPOINT,
        })
    }

    fn peer(&self, rank: u32) -> Result<&Peer> {
        self.inner.peers.get(rank as usize).ok_or_else(|| {
            Error::BadStartpoint(format!(
                "rank {rank} does not exist (the job has {} ranks)",
                self.size()
            ))
        })
    }

    /// Issues a remote service request: runs handler `handler` on the
    /// startpoint's endpoint with `payload`. Returns when `payload` may be reused.
    pub fn rsr(&self, sp: &Startpoint, handler: u32, payload: &[u8]) -> Result<()> {
        self.rsr_v(sp, handler, &[IoSlice::new(payload)])
    }

    /// Like [`rsr`](Self::rsr) with a gathered payload (no copy to join the parts).
    pub fn rsr_v(&self, sp: &Startpoint, handler: u32, payload: &[IoSlice<'_>]) -> Result<()> {
        let peer = self.peer(sp.ctx)?;
        let link = match peer.link.get() {
            Some(l) => l,
            None => self.connect(sp.ctx)?,
        };
        let mut hdr = [0u8; RSR_HEADER];
        hdr[..4].copy_from_slice(&handler.to_le_bytes());
        hdr[4..].copy_from_slice(&sp.endpoint.to_le_bytes());
        let waiter = ProgressWaiter { ctx: self };
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

    /// Opens the link to `rank` with the selection policy (once; later callers reuse it).
    fn connect(&self, rank: u32) -> Result<&Arc<dyn Link>> {
        let peer = self.peer(rank)?;
        let _guard = peer.connecting.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(l) = peer.link.get() {
            return Ok(l);
        }
        if let Some(why) = peer.failed.get().cloned() {
            return Err(Error::LinkFailed {
                peer: rank,
                method: "none",
                reason: why,
            });
        }
        let table = self.table_of(rank)?;
        let candidates = self.inner.policy.candidates(&self.inner.methods, &table);
        if candidates.is_empty() {
            return Err(Error::NoMethod {
                peer: rank,
                offered: table.names(),
            });
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
        Ok(link)
    }

    /// The descriptor table of `rank`: cached, or looked up in the bootstrap.
    fn table_of(&self, rank: u32) -> Result<DescriptorTable> {
        let peer = self.peer(rank)?;
        if let Some(t) = peer.table.get() {
            return Ok(t.clone());
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
        self.peer(rank).ok()?.link.get().map(|l| l.method())
    }

    /// The method the selection policy would choose to reach `rank` (without connecting).
    pub fn would_select(&self, rank: u32) -> Result<&'static str> {
        let table = self.table_of(rank)?;
        self.inner
            .policy
            .select(&self.inner.methods, &table)
            .map(|(mi, _)| self.inner.methods[mi].name())
            .ok_or_else(|| Error::NoMethod {
                peer: rank,
                offered: table.names(),
            })
    }

    /// Per-link statistics, one row per peer this context exchanged messages with.
    pub fn link_stats(&self) -> Vec<LinkStats> {
        self.inner
            .peers
            .iter()
            .enumerate()
            .filter_map(|(i, p)| {
                let (link_msgs, link_bytes) = p.link.get().map(|l| l.sent()).unwrap_or((0, 0));
                let s = LinkStats {
                    peer: i as u32,
                    method: p
                        .link
                        .get()
                        .map(|l| l.method().to_string())
                        .unwrap_or_default(),
                    sent_msgs: p.sent_msgs.load(Ordering::Relaxed) + link_msgs,
                    sent_bytes: p.sent_bytes.load(Ordering::Relaxed) + link_bytes,
                    recv_msgs: p.recv_msgs.load(Ordering::Relaxed),
                    recv_bytes: p.recv_bytes.load(Ordering::Relaxed),
                };
                (s.sent_msgs + s.recv_msgs > 0 || !s.method.is_empty()).then_some(s)
            })
            .collect()
    }

    /// Each method's own counters (e.g. `tcp refused_connections`, `udp
    /// auth_failed`), as (method, counter, value).
    pub fn method_counters(&self) -> Vec<(&'static str, &'static str, u64)> {
        self.inner
            .methods
            .iter()
            .flat_map(|m| m.counters().into_iter().map(move |(k, v)| (m.name(), k, v)))
            .collect()
    }

    /// Requests dropped because their endpoint or handler did not exist.
    pub fn dropped_requests(&self) -> u64 {
        self.inner.dropped.load(Ordering::Relaxed)
    }

    /// One round of progress. Returns the number of messages delivered, or 0
    /// if another thread is progressing right now.
    pub fn progress(&self) -> usize {
        let Some(mut guard) = self.inner.progress.try_lock() else {
            return 0;
        };
        let st = &mut *guard;
        st.iter += 1;
        let mut sink = Dispatch {
            ctx: self,
            handlers: &st.handlers,
        };
        let mut n = 0;
        // A thorough round (after a sleep, or now and then while yielding:
        // see `wait`) is thorough for the cheap methods too. shm looks at its
        // listener for new senders only every `ACCEPT_EVERY` rounds
        // otherwise, and a rank that sleeps or yields makes few rounds: a new
        // sender's first message waited for dozens of 1 ms sleeps (the
        // demo's ring: 3 ms a hop instead of 0.1).
        let thorough_cheap = std::mem::take(&mut st.thorough_cheap);
        for &i in &self.inner.cheap {
            let got = self.poll_method_as(i, &mut sink, thorough_cheap);
            if got > 0 && !st.shared_used && self.inner.methods[i].name() != "self" {
                st.shared_used = true;
            }
            n += got;
        }
        if st.iter >= st.next_expensive && !self.inner.expensive.is_empty() {
            let mut got = 0;
            let thorough = std::mem::take(&mut st.thorough);
            for &i in &self.inner.expensive {
                got += self.poll_method_as(i, &mut sink, thorough);
            }
            n += got;
            // Adaptive skip_poll: sockets quiet -> poll them less often (up to
            // every 64 iterations); socket traffic -> every iteration again.
            // With no cheap method besides `self`, or none that has ever
            // delivered (every peer on another host: shared memory is idle),
            // there is nothing to save the iterations for: poll the sockets
            // every time. (Skipping cost an MPI ping-pong between two hosts
            // 10-15% of its latency: a message waited for the next poll.)
            // Until a socket method has delivered anything at all (e.g. every
            // peer is on this host), poll them only every 1024 iterations:
            // each poll is a system call or two, and only a first connection
            // can be waiting (it then waits ~1024 cheap polls, once).
            if got > 0 {
                st.sockets_used = true;
            }
            if self.inner.skip_param == 0 {
                let cap = match (
                    self.inner.cheap.len() > 1 && st.shared_used,
                    st.sockets_used,
                ) {
                    (false, _) => 1,
                    (true, true) => 64,
                    (true, false) => 1024,
                };
                // Only socket traffic brings the sockets back to every
                // iteration: shm traffic says nothing about them, and a
                // socket poll after each shm message would put a system
                // call or two on the shm latency path.
                st.skip = if got > 0 { 1 } else { (st.skip * 2).min(cap) };
            }
            st.next_expensive = st.iter + st.skip;
        }
        n
    }

    /// One round of progress that polls every method thoroughly: for a
    /// thread that slept (a nap, a sleep on the sockets), whose polls are far
    /// apart, so the hot path's economies (sockets every 64 rounds, idle
    /// connections every 64 socket polls) would delay a message by as many
    /// sleeps.
    pub fn progress_thorough(&self) -> usize {
        if let Some(mut st) = self.inner.progress.try_lock() {
            st.next_expensive = 0;
            st.thorough = true;
            st.thorough_cheap = true;
        }
        self.progress()
    }

    /// Inlined into the progress loop, which calls it for every method on
    /// every round; the failure report is out of line.
    #[inline]
    fn poll_method_as(&self, i: usize, sink: &mut Dispatch<'_>, thorough: bool) -> usize {
        let m = &self.inner.methods[i];
        match if thorough {
            m.poll_thorough(sink)
        } else {
            m.poll(sink)
        } {
            Ok(n) => n,
            Err(e) => {
                self.report_poll_failure(i, e);
                0
            }
        }
    }

    #[cold]
    #[inline(never)]
    fn report_poll_failure(&self, i: usize, e: Error) {
        crate::say!(
            "gw[{}]: {} poll failed: {e}",
            self.rank(),
            self.inner.methods[i].name()
        );
    }

    /// Drives progress until `done()` holds. Spins for `GW_SPIN_ITERS` idle
    /// iterations, then yields for up to `GW_YIELD_US`, then sleeps on the
    /// sockets in short slices, so oversubscribed jobs do not burn the cores
    /// their peers need.
    pub fn wait(&self, mut done: impl FnMut() -> bool) {
        let mut idle: u64 = 0;
        // When every rank has a core, keep it for up to `spin` of idleness
        // (as other MPIs do): latency then does not depend on the scheduler.
        let mut idle_start: Option<std::time::Instant> = None;
        let mut spinning = !self.inner.spin.is_zero();
        let mut yield_start: Option<std::time::Instant> = None;
        let mut yielding = true;
        let mut checked = false;
        while !done() {
            // Cannot recurse into progress from a handler: the caller asked
            // to block where blocking is forbidden. Checked once, not per
            // round: a handler this thread runs inside the loop has returned
            // before the next round, and the check is a call into the TLS
            // resolver in a shared library, on the path that notices the
            // next message. (Not before the loop: `done` may consume what it
            // finds, so it is called exactly as often as before.)
            if !checked {
                checked = true;
                if IN_HANDLER.with(|c| c.get()) {
                    panic!("Context::wait called from inside a handler (handlers must not block)");
                }
            }
            if self.progress() > 0 {
                idle = 0;
                idle_start = None;
                yield_start = None;
                yielding = true;
                continue;
            }
            idle += 1;
            if spinning {
                // Reading the clock costs more than a poll: only now and then.
                if idle.is_multiple_of(256) {
                    let start = *idle_start.get_or_insert_with(std::time::Instant::now);
                    if start.elapsed() >= self.inner.spin {
                        spinning = false;
                        idle = 0;
                    }
                }
                // No pause instruction here: this branch runs only while every
                // rank has a core (nobody to yield the pipeline to), and a
                // pause (tens of cycles on current x86) is added to the time
                // to notice the next message.
            } else if idle < self.inner.spin_iters {
                std::hint::spin_loop();
            } else {
                // Yield for up to `GW_YIELD_US` of idleness, then sleep.
                // Yielding, not sleeping: a peer rank that shares this core
                // runs at once and its answer is seen microseconds later,
                // where a sleep in `block_briefly` costs up to a slice
                // (1 ms) per message. The clock is read every 64 yields.
                let start = *yield_start.get_or_insert_with(std::time::Instant::now);
                if idle.is_multiple_of(64) {
                    yielding = start.elapsed() < self.inner.yield_for;
                    if let Some(mut st) = self.inner.progress.try_lock() {
                        st.thorough_cheap = true;
                    }
                }
                if yielding {
                    std::thread::yield_now();
                } else {
                    self.block_briefly();
                }
            }
        }
    }

    /// Like [`wait`](Self::wait) with a deadline; returns false on timeout.
    pub fn wait_timeout(&self, timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
        let end = std::time::Instant::now() + timeout;
        let mut timed_out = false;
        self.wait(|| {
            if done() {
                return true;
            }
            timed_out = std::time::Instant::now() >= end;
            timed_out
        });
        !timed_out
    }

    /// Sleeps until a socket is readable or a short slice passes (shared
    /// memory has no file descriptor, so the slice bounds its extra latency).
    fn block_briefly(&self) {
        let mut fds: Vec<libc::pollfd> = self
            .inner
            .wait_fds
            .iter()
            .map(|&fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        let slice_ms = if self.inner.cheap.len() > 1 { 1 } else { 20 };
        for m in &self.inner.methods {
            m.before_block();
        }
        // SAFETY: `fds` is a live array of pollfd of the length passed.
        unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, slice_ms) };
        for m in &self.inner.methods {
            m.after_block();
        }
        // A readable socket must be polled at once, whatever skip_poll says,
        // idle connections included.
        if let Some(mut st) = self.inner.progress.try_lock() {
            st.next_expensive = 0;
            st.thorough = true;
            st.thorough_cheap = true;
        }
    }

    /// Waits until every context of the job has called `barrier`, driving
    /// progress meanwhile (a dissemination barrier over remote service
    /// requests: ceil(log2 n) rounds). Use it after registering handlers, so
    /// no request can reach a context before its handlers exist.
    pub fn barrier(&self) -> Result<()> {
        let n = self.size();
        let epoch = self.inner.barrier_epoch.fetch_add(1, Ordering::Relaxed);
        let mut dist = 1u32;
        let mut round = 0u32;
        while dist < n {
            let to = (self.rank() + dist) % n;
            let mut msg = [0u8; 12];
            msg[..8].copy_from_slice(&epoch.to_le_bytes());
            msg[8..].copy_from_slice(&round.to_le_bytes());
            self.send_internal(to, H_BARRIER, &msg)?;
            let key = (epoch, round);
            let from = (self.rank() + n - dist) % n;
            let mut broken = None;
            let mut arrivals_seen = u64::MAX;
            self.wait(|| {
                // A peer whose link broke will never answer: fail instead of hanging.
                for p in [to, from] {
                    if let Some(why) = self.link_error(p) {
                        broken = Some((p, why));
                        return true;
                    }
                }
                let arrivals = self.inner.barrier_arrivals.load(Ordering::Acquire);
                if arrivals == arrivals_seen {
                    return false;
                }
                arrivals_seen = arrivals;
                let mut seen = self
                    .inner
                    .barrier_seen
                    .lock()
                    .unwrap_or_else(|e| e.into_inner());
                match seen.get_mut(&key) {
                    Some(c) => {
                        *c -= 1;
                        if *c == 0 {
                            seen.remove(&key);
                        }
                        true
                    }
                    None => false,
                }
            });
            if let Some((p, why)) = broken {
                return Err(Error::LinkFailed {
                    peer: p,
                    method: self.method_to(p).unwrap_or("none"),
                    reason: why,
                });
            }
            dist *= 2;
            round += 1;
        }
        Ok(())
    }

    /// A barrier through the bootstrap (PMI). It does not drive progress, so
    /// use it only when no requests are in flight — typically once, right
    /// after registering handlers, before any rank sends. Unlike
    /// [`barrier`](Self::barrier) it opens no links.
    pub fn bootstrap_barrier(&self) -> Result<()> {
        self.wait(|| !self.inner.methods.iter().any(|m| m.has_pending_output()));
        self.inner
            .pmi
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .barrier()
    }

    fn send_internal(&self, to: u32, handler: u32, payload: &[u8]) -> Result<()> {
        self.rsr(
            &Startpoint {
                ctx: to,
                endpoint: DEFAULT_ENDPOINT,
            },
            handler,
            payload,
        )
    }

    /// Names of the methods that still report pending output (diagnostics).
    fn methods_with_pending_output(&self) -> String {
        let v: Vec<&str> = self
            .inner
            .methods
            .iter()
            .filter(|m| m.has_pending_output())
            .map(|m| m.name())
            .collect();
        v.join(",")
    }

    /// Collective shutdown: flushes queued output, waits for every rank (a
    /// barrier with progress running), publishes this context's statistics
    /// to the launcher, and releases the methods.
    pub fn finalize(&self) -> Result<()> {
        if self.inner.finalized.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let ok = self.wait_timeout(Duration::from_secs(60), || {
            !self.inner.methods.iter().any(|m| m.has_pending_output())
        });
        if !ok {
            crate::say!(
                "gw[{}]: finalize: output still queued after 60 s (methods: {}); giving up on it",
                self.rank(),
                self.methods_with_pending_output()
            );
        }
        // Every rank's sends complete before anyone leaves, with progress
        // running. A broken link must not keep the others from finishing: say
        // so and go on to the bootstrap barrier, which needs no link.
        if let Err(e) = self.barrier() {
            crate::say!("gw[{}]: finalize: {e}; continuing without it", self.rank());
        }
        // The barrier's own last messages may still be queued: behind the
        // handshake of a connection opened for the barrier (two ranks that
        // connect to each other at once: this rank may have finished on the
        // peer's connection while its own still authenticates), or held for
        // the pair's connection. Shutting down now would drop them, and the
        // peer would wait for them forever. A peer that needs them is still
        // in its barrier, driving progress, so this ends.
        let ok = self.wait_timeout(Duration::from_secs(60), || {
            !self.inner.methods.iter().any(|m| m.has_pending_output())
        });
        if !ok {
            crate::say!(
                "gw[{}]: finalize: barrier output still queued after 60 s (methods: {}); giving up on it",
                self.rank(),
                self.methods_with_pending_output()
            );
        }
        let stats = self.stats_json();
        let mut pmi = self.inner.pmi.lock().unwrap_or_else(|e| e.into_inner());
        // Statistics are a courtesy to the launcher; a launcher that refuses
        // the value (e.g. a small vallen_max) must not fail the job.
        let _ = pmi.put(&format!("gw.stats.{}", self.rank()), &stats);
        let _ = pmi.commit();
        // No bootstrap barrier here: it would stop progress while a peer may
        // still need ours (e.g. to finish a handshake); the barrier above
        // already synchronised every rank whose links work.
        pmi.finalize()?;
        drop(pmi);
        for m in &self.inner.methods {
            m.shutdown();
        }
        Ok(())
    }

    /// This context's statistics as the compact JSON the launcher reads.
    pub fn stats_json(&self) -> String {
        let links: Vec<serde_json::Value> = self
            .link_stats()
            .into_iter()
            .map(|s| {
                serde_json::json!({
                    "peer": s.peer, "method": s.method,
                    "sent_msgs": s.sent_msgs, "sent_bytes": s.sent_bytes,
                    "recv_msgs": s.recv_msgs, "recv_bytes": s.recv_bytes,
                })
            })
            .collect();
        serde_json::json!({ "rank": self.rank(), "host": self.inner.job.host_id, "links": links })
            .to_string()
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

/// Delivers polled messages to handlers.
struct Dispatch<'a> {
    ctx: &'a Context,
    handlers: &'a [Option<Handler>],
}

impl Sink for Dispatch<'_> {
    fn deliver(&mut self, src: u32, msg: &[u8]) {
        let inner = &self.ctx.inner;
        let Some(peer) = inner.peers.get(src as usize) else {
            inner.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        };
        // Only the thread that owns progress delivers, so plain load+store
        // suffices (no locked read-modify-write on the hot path).
        peer.recv_msgs.store(
            peer.recv_msgs.load(Ordering::Relaxed) + 1,
            Ordering::Relaxed,
        );
        peer.recv_bytes.store(
            peer.recv_bytes.load(Ordering::Relaxed) + msg.len() as u64,
            Ordering::Relaxed,
        );
        if msg.len() < RSR_HEADER {
            inner.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let handler = u32::from_le_bytes(msg[..4].try_into().unwrap());
        let endpoint = u32::from_le_bytes(msg[4..8].try_into().unwrap());
        if handler >= FIRST_INTERNAL_HANDLER {
            self.internal(src, handler, &msg[RSR_HEADER..]);
            return;
        }
        let known = endpoint == DEFAULT_ENDPOINT
            || inner
                .endpoints
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .contains(&endpoint);
        // The table is borrowed from the progress state we hold: no lock and
        // no reference count per message. Registering from inside a handler
        // is refused (it would need the progress lock this thread holds).
        match self.handlers.get(handler as usize).and_then(|h| h.as_ref()) {
            Some(h) if known => {
                // One TLS access (a call into the resolver in a shared library), not two.
                IN_HANDLER.with(|c| {
                    let was = c.replace(true);
                    h(
                        self.ctx,
                        Request {
                            src,
                            endpoint,
                            payload: &msg[RSR_HEADER..],
                        },
                    );
                    c.set(was);
                });
            }
            _ => {
                inner.dropped.fetch_add(1, Ordering::Relaxed);
                if inner.job.verbose >= 1 {
                    crate::say!(
                        "gw[{}]: dropped request from {src} for handler {handler} on endpoint {endpoint} (not registered)",
                        self.ctx.rank()
                    );
                }
            }
        }
    }

    fn link_failed(&mut self, src: u32, reason: String) {
        self.record_failure(src, reason);
    }
}

impl Dispatch<'_> {
    /// Requests for the runtime's own handlers.
    fn internal(&mut self, src: u32, handler: u32, payload: &[u8]) {
        let inner = &self.ctx.inner;
        match (handler, payload.len()) {
            (H_BARRIER, 12) => {
                let epoch = u64::from_le_bytes(payload[..8].try_into().unwrap());
                let round = u32::from_le_bytes(payload[8..].try_into().unwrap());
                *inner
                    .barrier_seen
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .entry((epoch, round))
                    .or_insert(0) += 1;
                inner.barrier_arrivals.fetch_add(1, Ordering::Release);
            }
            _ => {
                inner.dropped.fetch_add(1, Ordering::Relaxed);
                crate::say!(
                    "gw[{}]: malformed runtime request {handler:#x} from {src}",
                    self.ctx.rank()
                );
            }
        }
    }

    fn record_failure(&mut self, src: u32, reason: String) {
        let inner = &self.ctx.inner;
        if let Some(peer) = inner.peers.get(src as usize) {
            if peer.failed.set(reason.clone()).is_ok() {
                crate::events::emit(crate::events::LinkEvent {
                    kind: crate::events::LinkEventKind::Failed,
                    rank: self.ctx.rank(),
                    peer: src,
                    method: peer.link.get().map_or("", |l| l.method()),
                    reason: &reason,
                });
            }
        }
        if !inner.finalized.load(Ordering::Relaxed) {
            crate::say!(
                "gw[{}]: link from rank {src} failed: {reason}",
                self.ctx.rank()
            );
        }
    }
}

/// Lets a blocked link drive progress, except inside handlers.
struct ProgressWaiter<'a> {
    ctx: &'a Context,
}

impl Waiter for ProgressWaiter<'_> {
    fn progress(&self) -> bool {
        if IN_HANDLER.with(|c| c.get()) {
            return false;
        }
        if self.ctx.progress() == 0 {
            std::thread::yield_now();
        }
        true
    }
}

fn desc_key(rank: u32) -> String {
    format!("gw.desc.{rank}")
}

/// Publishes a descriptor table as `gw.desc.<rank>` = `<parts>:<hex>`, split
/// over `gw.desc.<rank>.<i>` keys when it exceeds the launcher's value limit
/// (Hydra allows only 1023 bytes).
fn publish_table(pmi: &mut Pmi, rank: u32, hex: &str) -> Result<()> {
    let room = pmi.max_value_len().saturating_sub(8).max(16);
    let chunks: Vec<&str> = hex
        .as_bytes()
        .chunks(room)
        .map(|c| std::str::from_utf8(c).expect("hex is ASCII"))
        .collect();
    let chunks = if chunks.is_empty() { vec![""] } else { chunks };
    pmi.put(&desc_key(rank), &format!("{}:{}", chunks.len(), chunks[0]))?;
    for (i, c) in chunks.iter().enumerate().skip(1) {
        pmi.put(&format!("{}.{i}", desc_key(rank)), c)?;
    }
    Ok(())
}

/// Reads back what [`publish_table`] wrote.
fn lookup_table(pmi: &mut Pmi, rank: u32) -> Result<String> {
    let missing = || Error::Bootstrap(format!("rank {rank} published no descriptor table"));
    let first = pmi.get_from(rank, &desc_key(rank))?.ok_or_else(missing)?;
    let (n, head) = first
        .split_once(':')
        .and_then(|(n, h)| Some((n.parse::<usize>().ok()?, h)))
        .ok_or_else(|| Error::Bootstrap(format!("malformed descriptor table of rank {rank}")))?;
    if n == 0 || n > 1024 {
        return Err(Error::Bootstrap(format!(
            "descriptor table of rank {rank} claims {n} parts"
        )));
    }
    let mut hex = head.to_string();
    for i in 1..n {
        hex.push_str(
            &pmi.get_from(rank, &format!("{}.{i}", desc_key(rank)))?
                .ok_or_else(missing)?,
        );
    }
    Ok(hex)
}

/// The methods to initialise, in order: `GW_METHODS` if set, else all built in.
pub fn methods_from_params(params: &Params) -> Result<Vec<&'static method::MethodInfo>> {
    let reg = method::registry();
    let spec = params.text("METHODS").trim().to_ascii_lowercase();
    if spec.is_empty() {
        return Ok(reg.iter().collect());
    }
    let mut out: Vec<&'static method::MethodInfo> = Vec::new();
    for name in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let info = reg
            .iter()
            .find(|m| m.name == name)
            .ok_or_else(|| Error::UnknownMethod {
                var: "GW_METHODS".into(),
                name: name.into(),
                valid: reg.iter().map(|m| m.name).collect::<Vec<_>>().join(", "),
            })?;
        if !out.iter().any(|m| m.name == name) {
            out.push(info);
        }
    }
    if out.is_empty() {
        return Err(Error::BadParam {
            var: "GW_METHODS".into(),
            value: spec,
            reason: "names no method".into(),
        });
    }
    Ok(out)
}

/// The host identity: who can share memory with whom. Two processes get the
/// same identity only when shm and CMA work between them: the same kernel
/// (boot id), the same network namespace (shm's handoff sockets are
/// abstract unix sockets, which live in a network namespace), the same IPC
/// namespace and the same PID namespace (CMA and the liveness checks name
/// peers by pid). Containers and `gw-testbed` hosts share a kernel and a
/// boot id, so the boot id alone would take them for one host.
///
/// `GW_HOST_ID` (set by `gwrun --emulate-hosts`) names the host *within*
/// that: its value replaces the hostname and boot id, but the namespaces
/// are still appended, so an emulated-host id never makes processes that
/// cannot map each other's segments look co-located.
pub fn host_identity(params: &Params) -> String {
    let set = params.text("HOST_ID");
    if !set.is_empty() {
        return format!("{set}/{}", namespace_key(&read_namespace));
    }
    real_host_identity()
}

/// hostname:boot-id/namespaces of this process (see [`host_identity`]).
pub fn real_host_identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    format!(
        "{}:{}/{}",
        host.trim(),
        boot.trim(),
        namespace_key(&read_namespace)
    )
}

/// The link `/proc/self/ns/KIND` (`net:[4026531840]`), or `None`.
fn read_namespace(kind: &str) -> Option<String> {
    std::fs::read_link(format!("/proc/self/ns/{kind}"))
        .ok()
        .map(|p| p.to_string_lossy().into_owned())
}

/// `n<net>i<ipc>p<pid>` from the namespace inode numbers `read` reports
/// (`net:[4026531840]` → `4026531840`); a namespace that cannot be read
/// (no /proc) counts as `?`, the same for every process of such a system.
fn namespace_key(read: &dyn Fn(&str) -> Option<String>) -> String {
    let ino = |kind: &str| -> String {
        read(kind)
            .and_then(|l| {
                let inner = l
                    .strip_prefix(kind)?
                    .strip_prefix(":[")?
                    .strip_suffix(']')?;
                inner.parse::<u64>().ok().map(|n| n.to_string())
            })
            .unwrap_or_else(|| "?".into())
    };
    format!("n{}i{}p{}", ino("net"), ino("ipc"), ino("pid"))
}

/// `GW_SPIN_US`: a number of microseconds, or `auto` = 2 ms when every rank
/// on this machine can have a core, else 0 (an oversubscribed job yields early).
fn spin_budget(params: &Params, size: u32) -> Result<Duration> {
    let v = params.text("SPIN_US");
    if v != "auto" {
        let us: u64 = v.parse().map_err(|_| Error::BadParam {
            var: "GW_SPIN_US".into(),
            value: v.into(),
            reason: "expected `auto` or a number of microseconds".into(),
        })?;
        return Ok(Duration::from_micros(us.min(10_000_000)));
    }
    let num = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u32>().ok());
    // Emulated hosts share one real machine: every rank of the job counts then.
    let local = if params.text("HOST_ID").is_empty() {
        num("MPI_LOCALNRANKS").unwrap_or(size)
    } else {
        size
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    Ok(if local <= cores {
        Duration::from_millis(2)
    } else {
        Duration::ZERO
    })
}

fn job_info(params: &Params, pmi: &mut Pmi, rank: u32, size: u32) -> Result<JobInfo> {
    let verbose = params.num("VERBOSE") as u8;
    let kvs = pmi.kvsname().to_string();
    let job_id = match params.text("JOB_ID") {
        "" => {
            // Under a foreign launcher: derive a file-name-safe id from the kvs
            // name, which every rank of the job shares.
            let safe: String = kvs
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                .collect();
            if safe.is_empty() {
                format!("single{}", std::process::id())
            } else {
                safe
            }
        }
        s => s.to_string(),
    };
    let secret = match crate::auth::parse_secret(params.text("JOB_SECRET")) {
        Some(s) => s,
        None => {
            if verbose >= 1 && rank == 0 {
                crate::say!("gw[0]: no GW_JOB_SECRET from the launcher; rank 0 makes a random one and passes it through PMI");
            }
            crate::auth::exchange_secret(pmi)?
        }
    };
    Ok(JobInfo {
        ctx_id: rank,
        size,
        job_id,
        host_id: host_identity(params),
        secret,
        verbose,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn params(pairs: &[(&str, &str)]) -> Result<Params> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Params::from_lookup(|k| m.get(k).cloned())
    }

    #[test]
    fn namespace_key_takes_the_inode_numbers() {
        let links = |kind: &str| -> Option<String> {
            Some(match kind {
                "net" => "net:[4026531840]".into(),
                "ipc" => "ipc:[4026531839]".into(),
                "pid" => "pid:[4026531836]".into(),
                _ => return None,
            })
        };
        assert_eq!(namespace_key(&links), "n4026531840i4026531839p4026531836");
        // Unreadable or malformed links: a fixed placeholder, never a panic.
        let broken = |kind: &str| -> Option<String> {
            match kind {
                "net" => Some("net:[12".into()),
                "ipc" => Some("mnt:[5]".into()),
                _ => None,
            }
        };
        assert_eq!(namespace_key(&broken), "n?i?p?");
    }

    #[test]
    fn host_identity_holds_namespaces_also_for_emulated_hosts() {
        let real = real_host_identity();
        let ns = namespace_key(&read_namespace);
        assert!(real.ends_with(&format!("/{ns}")), "{real}");
        assert!(!ns.contains('?'), "{ns}");
        let p = |id: &str| params(&[("GW_HOST_ID", id)]).unwrap();
        let a = host_identity(&p("h:b#emu0"));
        assert_eq!(a, format!("h:b#emu0/{ns}"));
        assert_eq!(a, host_identity(&p("h:b#emu0")));
        assert_ne!(a, host_identity(&p("h:b#emu1")));
        assert_eq!(host_identity(&params(&[]).unwrap()), real);
    }

    /// Not a test of its own: prints this process's host identity when
    /// `host_identity_differs_in_other_namespaces` runs it in other namespaces.
    #[test]
    fn print_host_identity_for_namespace_test() {
        if std::env::var_os("GW_TEST_PRINT_HOST_ID").is_some() {
            println!("HOST_ID={}", real_host_identity());
        }
    }

    /// Processes in another network / IPC / PID namespace of the same kernel
    /// (containers, gw-testbed hosts: same hostname possible, same boot id)
    /// are another host for shm and CMA.
    #[test]
    fn host_identity_differs_in_other_namespaces() {
        if !gridwire_testkit::is_root() {
            gridwire_testkit::skip("unshare of network, IPC and PID namespaces needs root");
            return;
        }
        if !std::path::Path::new("/usr/bin/unshare").exists() {
            gridwire_testkit::skip("/usr/bin/unshare is missing (Debian package util-linux)");
            return;
        }
        let exe = std::env::current_exe().unwrap();
        let run = |unshare: &[&str]| -> String {
            let out = std::process::Command::new("/usr/bin/unshare")
                .args(unshare)
                .arg(&exe)
                .args([
                    "--exact",
                    "context::tests::print_host_identity_for_namespace_test",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env("GW_TEST_PRINT_HOST_ID", "1")
                .output()
                .expect("run unshare");
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            assert!(
                out.status.success(),
                "unshare {unshare:?}: {text}{}",
                String::from_utf8_lossy(&out.stderr)
            );
            // The test harness prints the line after the test's name.
            text.lines()
                .find_map(|l| Some(l.split_once("HOST_ID=")?.1.trim()))
                .unwrap_or_else(|| panic!("no HOST_ID line: {text}"))
                .to_string()
        };
        let here = real_host_identity();
        // Same namespaces (a child that unshares nothing): same host.
        assert_eq!(run(&["--fork"]), here);
        for ns in ["--net", "--ipc", "--pid"] {
            let there = run(&["--fork", ns]);
            assert_ne!(there, here, "unshare {ns}");
            // Same kernel, same hostname: only the namespaces differ.
            let prefix = |s: &str| s.split('/').next().unwrap().to_string();
            assert_eq!(prefix(&there), prefix(&here));
        }
    }

    #[test]
    fn gw_methods_restricts_orders_and_rejects_unknown_names() {
        let all = methods_from_params(&params(&[]).unwrap()).unwrap();
        assert_eq!(
            all.iter().map(|m| m.name).collect::<Vec<_>>(),
            ["self", "shm", "tcp", "udp"]
        );
        let p = params(&[("GW_METHODS", "tcp, shm,tcp")]).unwrap();
        let v = methods_from_params(&p).unwrap();
        assert_eq!(v.iter().map(|m| m.name).collect::<Vec<_>>(), ["tcp", "shm"]);
        let p = params(&[("GW_METHODS", "tcp,infiniband")]).unwrap();
        let e = methods_from_params(&p).err().unwrap().to_string();
        assert!(
            e.contains("infiniband")
                && e.contains("self, shm, tcp, udp")
                && e.contains("GW_METHODS"),
            "{e}"
        );
    }

    fn singleton(pairs: &[(&str, &str)]) -> Context {
        let mut all = vec![("GW_JOB_ID", "unit"), ("GW_JOB_SECRET", "")];
        all.extend_from_slice(pairs);
        let job_id = format!(
            "unit{}x{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        all[0].1 = Box::leak(job_id.into_boxed_str());
        Context::with(params(&all).unwrap(), Pmi::singleton()).unwrap()
    }

    static COUNTER: AtomicU32 = AtomicU32::new(0);

    fn roundtrip(ctx: &Context, expect_method: &str) {
        let got = Arc::new(Mutex::new(Vec::<(u32, u32, Vec<u8>)>::new()));
        let g = got.clone();
        ctx.register_handler(3, move |_, req| {
            g.lock()
                .unwrap()
                .push((req.src, req.endpoint, req.payload.to_vec()))
        })
        .expect("valid handler id");
        let ep = ctx.create_endpoint();
        for i in 0..100u32 {
            ctx.rsr(&ep, 3, &i.to_le_bytes()).unwrap();
        }
        let big: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        ctx.rsr(&ctx.startpoint(0).unwrap(), 3, &big).unwrap();
        assert!(ctx.wait_timeout(Duration::from_secs(20), || got.lock().unwrap().len() == 101));
        let got = got.lock().unwrap();
        for (i, (src, endpoint, payload)) in got.iter().take(100).enumerate() {
            assert_eq!((*src, *endpoint), (0, ep.endpoint));
            assert_eq!(payload.as_slice(), (i as u32).to_le_bytes(), "in order");
        }
        assert_eq!(got[100].2, big);
        assert_eq!(ctx.method_to(0), Some(expect_method));
        let st = ctx.link_stats();
        assert_eq!(st.len(), 1);
        assert_eq!((st[0].sent_msgs, st[0].recv_msgs), (101, 101));
        assert_eq!(st[0].sent_bytes, st[0].recv_bytes);
    }

    /// Link events seen by this test binary's listener: (kind, peer, method, reason).
    type Seen = (crate::events::LinkEventKind, u32, &'static str, String);
    static EVENTS_SEEN: Mutex<Vec<Seen>> = Mutex::new(Vec::new());

    fn record_event(ev: &crate::events::LinkEvent<'_>) {
        EVENTS_SEEN
            .lock()
            .unwrap()
            .push((ev.kind, ev.peer, ev.method, ev.reason.to_string()));
    }

    #[test]
    fn link_selection_and_failure_reach_the_event_listener() {
        use crate::events::LinkEventKind;
        crate::events::set_link_listener(record_event);
        let ctx = singleton(&[]);
        roundtrip(&ctx, "self");
        let seen = |k: LinkEventKind, method: &str, reason: &str| {
            EVENTS_SEEN
                .lock()
                .unwrap()
                .iter()
                .any(|e| e.0 == k && e.1 == 0 && e.2 == method && e.3.contains(reason))
        };
        assert!(seen(LinkEventKind::Selected, "self", ""));
        let mut sink = Dispatch {
            ctx: &ctx,
            handlers: &[],
        };
        sink.link_failed(0, "unit test: the peer vanished".into());
        assert!(seen(LinkEventKind::Failed, "self", "peer vanished"));
        // Only the first failure of a link is an event (the link stays failed).
        sink.link_failed(0, "unit test: again".into());
        assert!(!seen(LinkEventKind::Failed, "self", "again"));
        ctx.finalize().unwrap();
    }

    #[test]
    fn singleton_requests_to_self_use_the_self_method() {
        let ctx = singleton(&[]);
        roundtrip(&ctx, "self");
        ctx.finalize().unwrap();
    }

    #[test]
    fn forced_tcp_connects_to_itself_authenticated() {
        let ctx = singleton(&[("GW_METHODS", "tcp"), ("GW_TCP_MAX_QUEUED", "64k")]);
        assert_eq!(ctx.method_names(), ["tcp"]);
        roundtrip(&ctx, "tcp");
        let counters = ctx.method_counters();
        assert!(counters.contains(&("tcp", "refused_connections", 0)));
        assert!(counters.contains(&("tcp", "merged_connections", 0)));
        ctx.finalize().unwrap();
    }

    #[test]
    fn unknown_endpoint_and_handler_are_dropped_and_counted() {
        let ctx = singleton(&[]);
        let hits = Arc::new(AtomicU32::new(0));
        let h = hits.clone();
        ctx.register_handler(1, move |_, _| {
            h.fetch_add(1, Ordering::Relaxed);
        })
        .expect("valid handler id");
        let ep = ctx.create_endpoint();
        ctx.destroy_endpoint(&ep);
        ctx.rsr(&ep, 1, b"x").unwrap();
        ctx.rsr(&ctx.startpoint(0).unwrap(), 99, b"x").unwrap();
        ctx.rsr(&ctx.startpoint(0).unwrap(), 1, b"x").unwrap();
        assert!(ctx.wait_timeout(Duration::from_secs(5), || hits.load(Ordering::Relaxed) == 1));
        assert_eq!(ctx.dropped_requests(), 2);
        assert!(ctx.startpoint(5).is_err(), "rank out of range is an error");
    }

    #[test]
    fn handlers_may_send_without_blocking() {
        // A handler that forwards to itself: exercises sends from inside progress.
        let ctx = singleton(&[]);
        let n = Arc::new(AtomicU32::new(0));
        let c = n.clone();
        ctx.register_handler(2, move |ctx, req| {
            let v = u32::from_le_bytes(req.payload.try_into().unwrap());
            c.store(v, Ordering::Relaxed);
            if v < 1000 {
                ctx.rsr(&ctx.startpoint(0).unwrap(), 2, &(v + 1).to_le_bytes())
                    .unwrap();
            }
        })
        .expect("valid handler id");
        ctx.rsr(&ctx.startpoint(0).unwrap(), 2, &0u32.to_le_bytes())
            .unwrap();
        assert!(
            ctx.wait_timeout(Duration::from_secs(10), || n.load(Ordering::Relaxed)
                == 1000)
        );
        // Registering from a handler is an error, not a deadlock.
        let refused = Arc::new(AtomicU32::new(0));
        let r = refused.clone();
        ctx.register_handler(4, move |ctx, _| {
            if ctx.register_handler(5, |_, _| {}).is_err() {
                r.store(1, Ordering::Relaxed);
            }
        })
        .unwrap();
        ctx.rsr(&ctx.startpoint(0).unwrap(), 4, b"").unwrap();
        assert!(
            ctx.wait_timeout(Duration::from_secs(10), || refused.load(Ordering::Relaxed)
                == 1)
        );
    }

    #[test]
    fn long_tables_are_split_over_several_bootstrap_keys() {
        let mut pmi = Pmi::singleton();
        let hex: String = "ab".repeat(100_000);
        publish_table(&mut pmi, 3, &hex).unwrap();
        assert!(
            pmi.get("gw.desc.3.1").unwrap().is_some(),
            "split into parts"
        );
        assert_eq!(lookup_table(&mut pmi, 3).unwrap(), hex);
        publish_table(&mut pmi, 4, "0102").unwrap();
        assert_eq!(pmi.get("gw.desc.4").unwrap().unwrap(), "1:0102");
        assert_eq!(lookup_table(&mut pmi, 4).unwrap(), "0102");
        pmi.put("gw.desc.5", "garbage").unwrap();
        assert!(lookup_table(&mut pmi, 5).is_err());
        assert!(lookup_table(&mut pmi, 6).is_err());
    }

    #[test]
    fn startpoints_carry_the_table_once() {
        let ctx = singleton(&[]);
        let ep = ctx.create_endpoint();
        // To ourselves the table is never attached (we know it).
        let packed = ctx.pack_startpoint(&ep, 0).unwrap();
        assert_eq!(packed.len(), 9);
        let (sp, used) = ctx.unpack_startpoint(&packed).unwrap();
        assert_eq!((sp, used), (ep, 9));
        for cut in 0..9 {
            assert!(ctx.unpack_startpoint(&packed[..cut]).is_err());
        }
        let mut bad = packed.clone();
        bad[8] = 7;
        assert!(ctx.unpack_startpoint(&bad).is_err());
    }
}
