//! Membership that changes while a job runs.
//!
//! A job started by a launcher has a fixed set of contexts, all known from
//! the bootstrap. A context may also *join* a running job: it is given the
//! job's id and secret (the secret authenticates every link it opens or
//! accepts, as for any other context), a context id nobody else holds, and
//! the capacity of the job (the largest id + 1). It publishes nothing: its
//! peers learn its descriptor table on demand, from whoever keeps the job's
//! membership (the PVM coordinator, for instance), through the resolver an
//! upper layer installs ([`Context::set_table_resolver`]) or by being handed
//! it ([`Context::add_peer`]); tables that travel inside startpoints work
//! as before.
//!
//! A context leaves with [`Context::leave`]: every peer it has a link to
//! hears it at once. One that dies is noticed by its links breaking, or
//! reported by an upper layer ([`Context::peer_departed`]). Either way the
//! peer is marked departed, sends to it fail at once with the reason, each
//! method releases what it holds for the peer (`Method::release_peer`: tcp
//! closes the connections and frees their sockets, shm drops the rings once
//! drained, udp drops what it was sending at once and the peer's state once
//! its last datagrams are in), and every subscriber
//! ([`Context::subscribe_membership`]) is told.
//!
//! Context ids are never reused within a job: a departed id stays departed.

use super::*;

/// What happened to a member of the job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MembershipKind {
    /// A context joined (its table became known through [`Context::add_peer`]).
    Joined,
    /// It left on purpose ([`Context::leave`]).
    Left,
    /// It died: its link broke, or an upper layer said so.
    Died,
}

/// One membership change, handed to every subscriber.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MembershipEvent {
    pub kind: MembershipKind,
    pub peer: u32,
    /// Why it left or died ("" for a join).
    pub reason: String,
}

/// How a context joins a running job.
#[derive(Debug, Clone)]
pub struct JoinSpec {
    /// The job's id: names shared-memory resources, and shm reaches only
    /// contexts of the same job.
    pub job_id: String,
    /// The job secret: links between contexts authenticate with it.
    pub secret: [u8; 32],
    /// This context's id, unique in the job for its whole life.
    pub ctx_id: u32,
    /// Ids run from 0 to `capacity - 1`.
    pub capacity: u32,
}

/// The largest capacity a joined job may declare: every id has a peer slot.
pub const MAX_CAPACITY: u32 = 1 << 16;

type Listener = Arc<dyn Fn(&Context, &MembershipEvent) + Send + Sync>;
type Resolver = Arc<dyn Fn(u32) -> Option<DescriptorTable> + Send + Sync>;

pub(super) struct Members {
    /// The context joined a running job (no bootstrap tables).
    pub(super) dynamic: bool,
    listeners: RwLock<Vec<Listener>>,
    resolver: RwLock<Option<Resolver>>,
}

impl Members {
    pub(super) fn new(dynamic: bool) -> Self {
        Members {
            dynamic,
            listeners: RwLock::new(Vec::new()),
            resolver: RwLock::new(None),
        }
    }
}

impl Context {
    /// Joins a running job as context `spec.ctx_id` (see the module
    /// documentation). Parameters are read as for [`init`](Self::init).
    pub fn join(params: Params, spec: JoinSpec) -> Result<Context> {
        if spec.capacity == 0 || spec.capacity > MAX_CAPACITY || spec.ctx_id >= spec.capacity {
            return Err(Error::BadParam {
                var: "join".into(),
                value: format!("ctx_id {} capacity {}", spec.ctx_id, spec.capacity),
                reason: format!(
                    "the context id must be below the capacity, which is at most {MAX_CAPACITY}"
                ),
            });
        }
        if spec.job_id.is_empty()
            || !spec
                .job_id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(Error::BadParam {
                var: "join".into(),
                value: spec.job_id,
                reason: "a job id is a non-empty run of letters, digits, '_' and '-'".into(),
            });
        }
        let job = JobInfo {
            ctx_id: spec.ctx_id,
            size: spec.capacity,
            job_id: spec.job_id,
            host_id: host_identity(&params),
            secret: spec.secret,
            verbose: params.num("VERBOSE") as u8,
        };
        Self::build(params, Pmi::singleton(), job, true)
    }

    /// Whether this context joined a running job (its membership is dynamic).
    pub fn is_dynamic(&self) -> bool {
        self.inner.members.dynamic
    }

    /// Installs the function that finds a peer's descriptor table when a
    /// send needs one that is not known yet (dynamic jobs). It runs on the
    /// sending thread, outside progress; `None` = unknown peer.
    pub fn set_table_resolver(
        &self,
        f: impl Fn(u32) -> Option<DescriptorTable> + Send + Sync + 'static,
    ) {
        *self
            .inner
            .members
            .resolver
            .write()
            .unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(f));
    }

    pub(super) fn resolve_table(&self, rank: u32) -> Result<DescriptorTable> {
        let peer = self.peer(rank)?;
        if let Some(why) = peer.failed.get() {
            return Err(Error::LinkFailed {
                peer: rank,
                method: "none",
                reason: why.clone(),
            });
        }
        let resolver = self
            .inner
            .members
            .resolver
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let table = resolver.and_then(|f| f(rank)).ok_or_else(|| {
            Error::BadStartpoint(format!(
                "context {rank} is not a member of this job (no descriptor table for it)"
            ))
        })?;
        if peer.table.set(table.clone()).is_ok() {
            peer.table_source.store(3, Ordering::Relaxed);
        }
        Ok(peer.table.get().cloned().unwrap_or(table))
    }

    /// Makes `rank` known with its descriptor table (it joined). Telling
    /// the same table twice is harmless; a different one is refused (ids
    /// are not reused), as is a departed id.
    pub fn add_peer(&self, rank: u32, table: DescriptorTable) -> Result<()> {
        let peer = self.peer(rank)?;
        if let Some(why) = peer.failed.get() {
            return Err(Error::LinkFailed {
                peer: rank,
                method: "none",
                reason: format!("context {rank} already departed ({why}); ids are not reused"),
            });
        }
        if peer.table.set(table.clone()).is_ok() {
            peer.table_source.store(3, Ordering::Relaxed);
            self.tell_members(&MembershipEvent {
                kind: MembershipKind::Joined,
                peer: rank,
                reason: String::new(),
            });
            return Ok(());
        }
        if peer.table.get() == Some(&table) {
            Ok(())
        } else {
            Err(Error::BadStartpoint(format!(
                "context {rank} is already known with another descriptor table"
            )))
        }
    }

    /// The descriptor table of `rank` (cached, from the bootstrap, or from
    /// the resolver), to hand to a context that needs it.
    pub fn peer_table(&self, rank: u32) -> Result<DescriptorTable> {
        self.table_of(rank)
    }

    /// Subscribes to membership changes. The subscriber runs where the
    /// change is noticed, possibly inside progress: it must not block or send.
    pub fn subscribe_membership(
        &self,
        f: impl Fn(&Context, &MembershipEvent) + Send + Sync + 'static,
    ) {
        self.inner
            .members
            .listeners
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push(Arc::new(f));
    }

    pub(super) fn tell_members(&self, ev: &MembershipEvent) {
        let listeners = self
            .inner
            .members
            .listeners
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        for l in listeners {
            l(self, ev);
        }
    }

    /// Whether `rank` left or died (as far as this context knows).
    pub fn has_departed(&self, rank: u32) -> bool {
        self.peer(rank).is_ok_and(|p| p.failed.get().is_some())
    }

    /// Marks `rank` departed: from now on sends to it fail with `reason`,
    /// and subscribers hear of it (once, whoever noticed first). For upper
    /// layers that learn of a death another way (a coordinator saw the
    /// process go).
    pub fn peer_departed(&self, rank: u32, reason: &str) -> Result<()> {
        self.peer(rank)?;
        self.mark_departed(rank, MembershipKind::Died, reason.to_string());
        Ok(())
    }

    /// Sets the peer's failure reason; the first to do so tells subscribers.
    pub(super) fn mark_departed(&self, rank: u32, kind: MembershipKind, reason: String) -> bool {
        let Some(peer) = self.inner.peers.get(rank as usize) else {
            return false;
        };
        if peer.failed.set(reason.clone()).is_err() {
            return false;
        }
        // Its links are closed and what they hold freed now, not when this
        // context ends: a long-lived job sees many peers come and go.
        for m in &self.inner.methods {
            m.release_peer(rank);
        }
        self.tell_members(&MembershipEvent {
            kind,
            peer: rank,
            reason,
        });
        true
    }

    /// Leaves the job: flushes queued output, tells every peer this context
    /// has a link to (they mark it departed and tell their subscribers),
    /// and releases the methods. The context is unusable afterwards. Unlike
    /// [`finalize`](Self::finalize) it waits for nobody.
    pub fn leave(&self) -> Result<()> {
        if self.inner.finalized.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let me = self.rank().to_le_bytes();
        for (i, p) in self.inner.peers.iter().enumerate() {
            if i as u32 != self.rank() && p.link_now().is_some() && p.failed.get().is_none() {
                // A peer that cannot be told has departed itself, or will
                // notice when our links close.
                let _ = self.send_internal(i as u32, H_LEAVE, &me);
            }
        }
        self.wait_timeout(Duration::from_secs(10), || {
            !self.inner.methods.iter().any(|m| m.has_pending_output())
        });
        for m in &self.inner.methods {
            m.shutdown();
        }
        Ok(())
    }
}
