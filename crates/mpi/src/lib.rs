//! gridwire-mpi: MPI's semantics in Rust over the multimethod runtime.
//!
//! Point-to-point ([`engine`]) is built on remote service requests of
//! `gridwire-core`; communicators, groups, datatypes, reductions and
//! collectives sit above it. No C types here: `gridwire-capi` translates
//! handles and calls this crate.

pub mod attr;
pub mod cma;
pub mod coll;
pub mod coll_hier;
mod coll_reduce;
mod coll_sm;
pub mod comm;
pub mod comm_links;
pub mod datatype;
pub mod deferred;
pub mod engine;
pub mod error;
pub mod external32;
#[doc(hidden)]
pub mod fuzzing;
pub mod group;
pub mod info;
pub mod intercoll;
pub mod intercomm;
pub mod isend;
pub mod mem;
pub mod neighbor;
pub mod op;
pub mod params;
pub mod ports;
pub mod ports_jobs;
pub mod request;
pub mod rma;
pub mod spawn;
pub mod topology;
pub mod topology_levels;
pub mod x87;

pub use comm::Comm;
pub use datatype::{Basic, Datatype};
pub use error::{class, err, MpiError, Result};
pub use group::Group;
pub use op::Op;
pub use request::{Buf, DtRef, Req, Status};

use engine::{Engine, Unexpected};
use gridwire_core::Context;
use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Mutex};
use std::time::Instant;

pub const ANY_SOURCE: i32 = -1;
pub const ANY_TAG: i32 = -2;
pub const PROC_NULL: i32 = -3;
/// The root of a rooted collective on an intercommunicator, at the root itself.
pub const ROOT: i32 = -4;
pub const UNDEFINED: i32 = -32766;
pub const IDENT: i32 = 201;
pub const CONGRUENT: i32 = 202;
pub const SIMILAR: i32 = 203;
pub const UNEQUAL: i32 = 204;
/// Largest tag a program may use.
pub const TAG_UB: i32 = (1 << 30) - 1;
/// Space `MPI_Bsend` needs besides the data, per message.
pub const BSEND_OVERHEAD: usize = 512;

/// Send modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Standard,
    Sync,
    Buffered,
    Ready,
}

/// An attached buffer for `MPI_Bsend` (the process's, or a communicator's).
#[derive(Default, Debug)]
pub(crate) struct Bsend {
    size: usize,
    used: usize,
    attached: bool,
    addr: usize,
    pending: Vec<Arc<Req>>,
}

/// The MPI library state of one process.
pub struct Mpi {
    pub engine: Arc<Engine>,
    pub world: Arc<Comm>,
    pub self_comm: Arc<Comm>,
    /// Next context id this process may propose (even; `+1` is the collective one).
    next_ctx: AtomicU32,
    pub byte: Arc<Datatype>,
    pub start: Instant,
    bsend: Mutex<Bsend>,
    /// Reusable temporaries of collectives: a fresh buffer per call cost a
    /// page fault per page for large ones (freed memory goes back to the OS).
    scratch: Mutex<Vec<Vec<u8>>>,
    /// Background progress of nonblocking collectives nobody waits for.
    deferred: deferred::Deferred,
    /// The hidden communicator of the constructors from groups (see
    /// `intercomm::Mpi::bootstrap`), made on first use.
    bootstrap: std::sync::OnceLock<Arc<Comm>>,
    /// One-sided communication: windows and operations waiting for answers.
    pub rma: Arc<rma::Rma>,
    /// In a spawned process: the intercommunicator to its parents
    /// (`MPI_Comm_get_parent`), made at start-up (spawn.rs).
    pub parent: Option<Arc<Comm>>,
}

impl Mpi {
    /// Starts the runtime and makes `MPI_COMM_WORLD` and `MPI_COMM_SELF`.
    pub fn init() -> Result<Mpi> {
        let ctx = Context::init()?;
        let engine = Engine::new(ctx);
        let ctx = &engine.ctx;
        // The world: contexts `first..first + size` (first > 0 in spawned
        // processes, spawn.rs); group members are context ids.
        let (me, size, first) = (ctx.rank(), ctx.size(), ctx.world_first());
        let world = Comm::new(
            0,
            Group::new((first..first + size).collect()),
            me - first,
            "MPI_COMM_WORLD",
        );
        let self_comm = Comm::new(2, Group::new(vec![me]), 0, "MPI_COMM_SELF");
        let rma = rma::Rma::new(ctx);
        // Nobody sends before every rank's handlers exist.
        ctx.bootstrap_barrier()?;
        let mut mpi = Mpi {
            engine,
            world,
            self_comm,
            next_ctx: AtomicU32::new(4),
            byte: Datatype::predefined(Basic::Byte, "MPI_BYTE"),
            start: Instant::now(),
            bsend: Default::default(),
            scratch: Default::default(),
            deferred: Default::default(),
            bootstrap: Default::default(),
            rma,
            parent: None,
        };
        mpi.parent = mpi.parent_from_env()?;
        Ok(mpi)
    }

    /// This process's context id: its member number in groups (a "world
    /// rank"; equal to its `MPI_COMM_WORLD` rank but in spawned processes).
    pub fn me(&self) -> u32 {
        self.ctx().rank()
    }

    /// A temporary of `len` bytes, reused across calls (see `scratch`). Its
    /// contents are whatever a previous call left: every caller writes what
    /// it later reads (packed data, received data), and zeroing a reused
    /// 1 MiB temporary cost a 1 MiB allreduce a memset per call.
    pub(crate) fn scratch_take(&self, len: usize) -> Vec<u8> {
        let mut v = self
            .scratch
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop()
            .unwrap_or_default();
        if v.len() >= len {
            v.truncate(len);
        } else {
            v.resize(len, 0);
        }
        v
    }

    /// Gives a temporary back (kept up to 4 buffers of at most 64 MiB).
    pub(crate) fn scratch_give(&self, v: Vec<u8>) {
        // An empty vector (a temporary a call did not need) would take a
        // slot and be grown again by the next taker.
        if v.capacity() == 0 {
            return;
        }
        let mut s = self.scratch.lock().unwrap_or_else(|e| e.into_inner());
        if s.len() < 4 && v.capacity() <= 64 << 20 {
            s.push(v);
        }
    }

    pub fn ctx(&self) -> &Context {
        &self.engine.ctx
    }

    pub fn finalize(&self) -> Result<()> {
        self.detach_wait(None);
        // Windows the program did not free: their thread must not poll a
        // context that is shutting down.
        self.rma().stop_progress_thread();
        self.ctx().finalize()?;
        Ok(())
    }

    /// A buffer of no elements (arguments that do not matter at this rank).
    pub fn empty_buf(&self) -> Buf {
        // SAFETY: an empty static slice: nothing to read or write.
        unsafe { Buf::bytes_of(&[], &self.byte) }
    }

    pub fn wtime(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    // ---- argument checks -------------------------------------------------

    // The checks run on every call: the tests are inlined, the messages
    // (formatting, allocation) are built out of line, only on failure.
    #[inline]
    pub fn check_buf(&self, buf: &Buf, what: &str) -> Result<()> {
        if !buf.dt.is_committed()
            || (buf.addr() == 0 && buf.count > 0 && buf.dt.size > 0 && buf.dt.true_lb < 4096)
        {
            return Err(Self::bad_buf(buf, what));
        }
        Ok(())
    }

    #[cold]
    #[inline(never)]
    fn bad_buf(buf: &Buf, what: &str) -> MpiError {
        if !buf.dt.is_committed() {
            err(
                class::TYPE,
                format!("{what}: the datatype is not committed (call MPI_Type_commit)"),
            )
        } else {
            err(
                class::BUFFER,
                format!("{what}: buffer is NULL but count is {}", buf.count),
            )
        }
    }

    #[inline]
    fn check_peer(comm: &Comm, r: i32, any_ok: bool) -> Result<()> {
        if r == PROC_NULL || (any_ok && r == ANY_SOURCE) || (r >= 0 && (r as u32) < comm.peer_size)
        {
            Ok(())
        } else {
            Err(Self::bad_peer(comm, r))
        }
    }

    #[cold]
    #[inline(never)]
    fn bad_peer(comm: &Comm, r: i32) -> MpiError {
        err(
            class::RANK,
            format!(
                "rank {r} is invalid in a communicator of size {}",
                comm.peer_size
            ),
        )
    }

    #[inline]
    fn check_tag(t: i32, any_ok: bool) -> Result<()> {
        if (0..=TAG_UB).contains(&t) || (any_ok && t == ANY_TAG) {
            Ok(())
        } else {
            Err(Self::bad_tag(t, any_ok))
        }
    }

    #[cold]
    #[inline(never)]
    fn bad_tag(t: i32, any_ok: bool) -> MpiError {
        err(
            class::TAG,
            format!(
                "tag {t} is invalid (valid: 0..={TAG_UB}{})",
                if any_ok { " or MPI_ANY_TAG" } else { "" }
            ),
        )
    }

    // ---- point-to-point --------------------------------------------------

    /// Starts a send; the request may already be complete.
    pub fn isend(
        &self,
        comm: &Comm,
        buf: &Buf,
        dest: i32,
        tag: i32,
        mode: Mode,
    ) -> Result<Arc<Req>> {
        match self.isend_started(comm, buf, dest, tag, mode)? {
            Some(r) => Ok(r),
            None => Ok(Req::new_done(Status::default())),
        }
    }

    /// [`Mpi::isend`] without a request object when the send completed
    /// within the call (eager): `None` then. Saves an allocation per
    /// small nonblocking send.
    #[inline]
    pub fn isend_started(
        &self,
        comm: &Comm,
        buf: &Buf,
        dest: i32,
        tag: i32,
        mode: Mode,
    ) -> Result<Option<Arc<Req>>> {
        self.check_buf(buf, "send buffer")?;
        Self::check_peer(comm, dest, false)?;
        Self::check_tag(tag, false)?;
        self.send_on(comm, false, buf, dest, tag, mode)
    }

    /// Blocking send (no request object on the eager path).
    #[inline]
    pub fn send(&self, comm: &Comm, buf: &Buf, dest: i32, tag: i32, mode: Mode) -> Result<()> {
        if let Some(r) = self.isend_started(comm, buf, dest, tag, mode)? {
            self.wait(&r);
            let s = self.engine.finish(r);
            if let Some(e) = engine::status_error(&s, 0) {
                return Err(e);
            }
        }
        Ok(())
    }

    #[inline]
    fn send_on(
        &self,
        comm: &Comm,
        coll: bool,
        buf: &Buf,
        dest: i32,
        tag: i32,
        mode: Mode,
    ) -> Result<Option<Arc<Req>>> {
        if dest == PROC_NULL {
            return Ok(None);
        }
        let (ctx, seq) = if coll {
            (comm.key() + 1, &comm.cseq)
        } else {
            (comm.key(), &comm.seq)
        };
        let world = comm.world_of(dest as u32);
        let seq = &seq[dest as usize];
        match mode {
            Mode::Standard | Mode::Ready => {
                self.engine
                    .send(ctx, seq, comm.rank as i32, world, tag, buf, false, None)
            }
            Mode::Sync => self
                .engine
                .send(ctx, seq, comm.rank as i32, world, tag, buf, true, None),
            Mode::Buffered => self.bsend_on(comm, ctx, seq, world, buf, tag),
        }
    }

    /// `MPI_Bsend`'s path of [`Mpi::send_on`], apart so that the others stay small.
    #[inline(never)]
    fn bsend_on(
        &self,
        comm: &Comm,
        ctx: u64,
        seq: &AtomicU32,
        world: u32,
        buf: &Buf,
        tag: i32,
    ) -> Result<Option<Arc<Req>>> {
        let n = buf.bytes();
        // The communicator's buffer if one is attached, else the process's.
        let pool = if comm.bsend.lock().unwrap().attached {
            &comm.bsend
        } else {
            &self.bsend
        };
        if !pool.lock().unwrap().pending.is_empty() {
            // Let finished buffered sends (matched rendezvous) complete, so
            // their room counts as free below.
            self.poke();
        }
        {
            let mut b = pool.lock().unwrap();
            b.pending.retain(|r| !r.done());
            let used: usize = b.pending.iter().map(|r| r.d.lock().bsend_bytes).sum();
            b.used = used;
            if !b.attached || b.used + n + BSEND_OVERHEAD > b.size {
                return Err(err(class::BUFFER, format!(
                    "MPI_Bsend of {n} bytes: the attached buffer ({} bytes, {} in use) is too small; attach a larger one with MPI_Buffer_attach",
                    b.size, b.used
                )));
            }
        }
        let data = buf.pack();
        // A message to itself stays in this process's own queue until it is
        // received, so it keeps its room in the buffer until then (as in
        // MPICH): sent as a rendezvous, whose request completes on the match.
        // To another process the eager copy leaves at once and frees its room.
        let to_self = world == self.me();
        let r = self.engine.send(
            ctx,
            seq,
            comm.rank as i32,
            world,
            tag,
            buf,
            to_self,
            Some(data),
        )?;
        if let Some(r) = r {
            r.d.lock().bsend_bytes = n + BSEND_OVERHEAD;
            pool.lock().unwrap().pending.push(r);
        }
        Ok(None)
    }

    /// The buffer of `comm` (`MPI_Comm_*_buffer`) or, for None, of the process (`MPI_Buffer_*`).
    fn pool<'a>(&'a self, comm: Option<&'a Comm>) -> &'a Mutex<Bsend> {
        comm.map_or(&self.bsend, |c| &c.bsend)
    }

    /// `MPI_Buffer_attach` / `MPI_Comm_attach_buffer`.
    pub fn buffer_attach(&self, comm: Option<&Comm>, addr: usize, size: usize) -> Result<()> {
        let mut b = self.pool(comm).lock().unwrap();
        if b.attached {
            return Err(err(
                class::BUFFER,
                "a buffer is already attached (MPI_Buffer_detach it first)",
            ));
        }
        b.attached = true;
        // MPI_BUFFER_AUTOMATIC (address 2): the library buffers without limit.
        b.size = if addr == 2 { usize::MAX / 2 } else { size };
        b.addr = addr;
        Ok(())
    }

    fn detach_wait(&self, comm: Option<&Comm>) {
        let pending: Vec<Arc<Req>> = std::mem::take(&mut self.pool(comm).lock().unwrap().pending);
        for r in pending {
            self.wait(&r);
        }
    }

    /// `MPI_Buffer_flush` / `MPI_Comm_flush_buffer`: waits until every buffered send has left.
    pub fn buffer_flush(&self, comm: Option<&Comm>) {
        self.detach_wait(comm);
    }

    /// Waits for buffered sends to leave, then detaches. Returns (addr, size).
    pub fn buffer_detach(&self, comm: Option<&Comm>) -> Result<(usize, usize)> {
        self.detach_wait(comm);
        let mut b = self.pool(comm).lock().unwrap();
        if !b.attached {
            return Err(err(class::BUFFER, "no buffer is attached"));
        }
        b.attached = false;
        Ok((b.addr, b.size))
    }

    #[inline]
    pub fn irecv(&self, comm: &Comm, buf: Buf, src: i32, tag: i32) -> Result<Arc<Req>> {
        self.check_buf(&buf, "receive buffer")?;
        Self::check_peer(comm, src, true)?;
        Self::check_tag(tag, true)?;
        if src == PROC_NULL {
            return Ok(Req::new_done(Status::proc_null()));
        }
        self.engine.recv(comm.key(), &comm.peers, src, tag, buf)
    }

    /// [`Mpi::irecv`] whose pending request the matching queue borrows
    /// instead of counting a reference (see [`engine::Engine::recv_kept`]).
    ///
    /// # Safety
    /// The caller keeps a reference to the returned request until it is
    /// done, or hands one to [`engine::Engine::release_recv`].
    #[inline]
    pub unsafe fn irecv_kept(&self, comm: &Comm, buf: Buf, src: i32, tag: i32) -> Result<Arc<Req>> {
        self.check_buf(&buf, "receive buffer")?;
        Self::check_peer(comm, src, true)?;
        Self::check_tag(tag, true)?;
        if src == PROC_NULL {
            return Ok(Req::new_done(Status::proc_null()));
        }
        // SAFETY: forwarded contract.
        unsafe {
            self.engine
                .recv_kept(comm.key(), &comm.peers, src, tag, buf)
        }
    }

    /// Blocking receive.
    pub fn recv(&self, comm: &Comm, buf: Buf, src: i32, tag: i32) -> Result<Status> {
        let cap = buf.bytes();
        // SAFETY: `r` lives on this stack until the wait below saw it done;
        // should anything unwind before, `Kept` hands it to the engine.
        let r = unsafe { self.irecv_kept(comm, buf, src, tag)? };
        let r = engine::KeptRecv::new(&self.engine, r);
        self.wait(&r);
        let s = self.engine.finish(r.into_inner());
        match engine::status_error(&s, cap) {
            Some(e) => Err(e),
            None => Ok(s),
        }
    }

    pub fn wait(&self, r: &Arc<Req>) {
        if r.done() {
            return;
        }
        if r.run_job() {
            return;
        }
        self.engine.wait_for(|| r.done());
    }

    /// Drives progress until one of `reqs` is done; returns its index.
    pub fn wait_any(&self, reqs: &[&Arc<Req>]) -> usize {
        let mut idx = 0;
        self.engine
            .wait_for(|| match reqs.iter().position(|r| r.done()) {
                Some(i) => {
                    idx = i;
                    true
                }
                None => false,
            });
        idx
    }

    pub fn poke(&self) {
        self.engine.poke();
    }

    pub fn iprobe(&self, comm: &Comm, src: i32, tag: i32) -> Result<Option<Status>> {
        Self::check_peer(comm, src, true)?;
        Self::check_tag(tag, true)?;
        if src == PROC_NULL {
            return Ok(Some(Status::proc_null()));
        }
        if let Some(Err(s)) = self.engine.probe(comm.key(), &comm.peers, src, tag, false) {
            return Ok(Some(s));
        }
        self.poke();
        Ok(self
            .engine
            .probe(comm.key(), &comm.peers, src, tag, false)
            .map(|r| r.expect_err("not removed")))
    }

    pub fn probe(&self, comm: &Comm, src: i32, tag: i32) -> Result<Status> {
        Self::check_peer(comm, src, true)?;
        Self::check_tag(tag, true)?;
        if src == PROC_NULL {
            return Ok(Status::proc_null());
        }
        let got = self
            .engine
            .wait_probe(comm.key(), &comm.peers, src, tag, false)?;
        Ok(got.expect_err("not removed"))
    }

    /// `MPI_Improbe`: takes the message out of the queue. `Some(None)` = the `MPI_PROC_NULL` message.
    pub fn improbe(
        &self,
        comm: &Comm,
        src: i32,
        tag: i32,
        block: bool,
    ) -> Result<Option<Option<Unexpected>>> {
        Self::check_peer(comm, src, true)?;
        Self::check_tag(tag, true)?;
        if src == PROC_NULL {
            return Ok(Some(None));
        }
        let mut got = None;
        let mut try_take = || {
            got = self
                .engine
                .probe(comm.key(), &comm.peers, src, tag, true)
                .map(|r| r.expect("removed"));
            got.is_some()
        };
        if block {
            let u = self
                .engine
                .wait_probe(comm.key(), &comm.peers, src, tag, true)?;
            return Ok(Some(Some(u.expect("removed"))));
        } else if !try_take() {
            self.poke();
            try_take();
        }
        Ok(got.map(Some))
    }

    pub fn mrecv(&self, msg: Option<Unexpected>, buf: Buf) -> Result<Arc<Req>> {
        self.check_buf(&buf, "receive buffer")?;
        match msg {
            None => Ok(Req::new_done(Status::proc_null())),
            Some(u) => self.engine.recv_message(u, buf),
        }
    }

    pub fn cancel(&self, r: &Arc<Req>) {
        let is_recv = self.engine.is_recv(r);
        if is_recv && !r.done() {
            self.engine.cancel_recv(r);
        } else if !is_recv && !r.done() {
            // Not withdrawn: the send completes as it would have.
            self.engine.cancel_send(r);
        }
    }

    // ---- internal (collective-context) messaging ---------------------------

    /// Starts sending `data` on the collective context.
    ///
    /// # Safety
    /// The returned request reads `data` until it completes: the caller
    /// must keep `data` alive and unchanged until then (wait for it).
    pub(crate) unsafe fn c_isend(
        &self,
        comm: &Comm,
        data: &[u8],
        dest: u32,
    ) -> Result<Option<Arc<Req>>> {
        // SAFETY: forwarded from this function's contract.
        let b = unsafe { Buf::bytes_of(data, &self.byte) };
        self.send_on(comm, true, &b, dest as i32, 0, Mode::Standard)
    }

    pub(crate) fn c_isend_buf(&self, comm: &Comm, b: &Buf, dest: u32) -> Result<Option<Arc<Req>>> {
        self.send_on(comm, true, b, dest as i32, 0, Mode::Standard)
    }

    pub(crate) fn c_irecv_buf(&self, comm: &Comm, b: Buf, src: u32) -> Result<Arc<Req>> {
        self.engine
            .recv(comm.key() + 1, &comm.peers, src as i32, 0, b)
    }

    /// Waits for all, recycles them, and reports the first error. Any
    /// iterator: a collective's one or two requests need no vector.
    pub(crate) fn wait_all_internal(&self, reqs: impl IntoIterator<Item = Arc<Req>>) -> Result<()> {
        let mut first = None;
        for r in reqs {
            self.wait(&r);
            let s = self.engine.finish(r);
            if first.is_none() {
                first = engine::status_error(&s, 0);
            }
        }
        first.map_or(Ok(()), Err)
    }

    pub(crate) fn c_send(&self, comm: &Comm, data: &[u8], dest: u32) -> Result<()> {
        // SAFETY: the request is waited for before `data`'s borrow ends.
        if let Some(r) = unsafe { self.c_isend(comm, data, dest) }? {
            self.wait(&r);
            self.engine.recycle(r);
        }
        Ok(())
    }

    /// Posts a receive into `out` on the collective context.
    ///
    /// # Safety
    /// The returned request writes `out` until it completes, after the
    /// borrow has ended: the caller must keep `out` alive and leave it
    /// alone until then (wait for it, or see [`Mpi::abandon_recv`]).
    pub(crate) unsafe fn c_irecv(&self, comm: &Comm, out: &mut [u8], src: u32) -> Result<Arc<Req>> {
        // SAFETY: forwarded from this function's contract.
        let b = unsafe { Buf::bytes_of_mut(out, &self.byte) };
        self.engine
            .recv(comm.key() + 1, &comm.peers, src as i32, 0, b)
    }

    pub(crate) fn c_recv(&self, comm: &Comm, out: &mut [u8], src: u32) -> Result<usize> {
        // SAFETY: the request is waited for before `out`'s borrow ends.
        let r = unsafe { self.c_irecv(comm, out, src) }?;
        self.wait(&r);
        let s = self.engine.finish(r);
        if let Some(e) = engine::status_error(&s, out.len()) {
            return Err(e);
        }
        Ok(s.bytes)
    }

    /// Sends `data` to `dest` while receiving into `out` from `src`.
    pub(crate) fn c_sendrecv(
        &self,
        comm: &Comm,
        data: &[u8],
        dest: u32,
        out: &mut [u8],
        src: u32,
    ) -> Result<usize> {
        // SAFETY: both requests are waited for (or the receive cancelled)
        // before the borrows of `out` and `data` end.
        let rr = unsafe { self.c_irecv(comm, out, src) }?;
        let sr = match unsafe { self.c_isend(comm, data, dest) } {
            Ok(sr) => sr,
            Err(e) => {
                self.abandon_recv(&rr);
                return Err(e);
            }
        };
        if let Some(s) = sr {
            self.wait(&s);
            self.engine.recycle(s);
        }
        self.wait(&rr);
        let st = self.engine.finish(rr);
        if let Some(e) = engine::status_error(&st, out.len()) {
            return Err(e);
        }
        Ok(st.bytes)
    }

    /// Gives up a receive whose buffer is about to go away: cancels it if
    /// it has not matched, else waits until its data is in (a rendezvous
    /// in flight writes into the buffer until then).
    pub(crate) fn abandon_recv(&self, r: &Arc<Req>) {
        if !r.done() && !self.engine.cancel_recv(r) {
            self.wait(r);
        }
    }

    /// A request that completes when both `a` and `b` have (`MPI_Isendrecv`);
    /// its status is `a`'s. A helper thread waits when `b` is still in flight.
    pub fn join(&'static self, a: Arc<Req>, b: Arc<Req>) -> Result<Arc<Req>> {
        if b.done() {
            return Ok(a);
        }
        let req = Arc::new(Req::default());
        let done = req.clone();
        // Counted as a helper from now, not from when the thread first
        // runs: a caller that waits at once must see it and nap rather
        // than spin on the core the new thread needs (it spun for its 2 ms
        // budget, and a nonblocking collective took ~3 ms instead of µs).
        let helper = self.engine.helper();
        std::thread::Builder::new()
            .name("gw-mpi-join".into())
            .spawn(move || {
                let _helper = helper;
                self.engine.wait_for(|| a.done() && b.done());
                let mut st = a.status();
                if st.error == 0 {
                    st.error = b.status().error;
                }
                done.d.lock().status = st;
                done.complete();
            })
            .map_err(|e| err(class::NO_MEM, format!("cannot start a thread: {e}")))?;
        Ok(req)
    }

    /// `MPI_Isendrecv_replace`: sends a packed copy of `buf`, receives into it.
    pub fn isendrecv_replace(
        &'static self,
        comm: &Comm,
        buf: Buf,
        dest: i32,
        stag: i32,
        src: i32,
        rtag: i32,
    ) -> Result<Arc<Req>> {
        self.check_buf(&buf, "buffer")?;
        Self::check_peer(comm, dest, false)?;
        Self::check_tag(stag, false)?;
        let copy = buf.pack();
        let r = self.irecv(comm, buf.clone(), src, rtag)?;
        if dest == PROC_NULL {
            return Ok(r);
        }
        // SAFETY: the engine sends the owned `copy` passed along, not this view of it.
        let sbuf = unsafe { Buf::bytes_of(&copy, &self.byte) };
        let world = comm.world_of(dest as u32);
        let s = self.engine.send(
            comm.key(),
            &comm.seq[dest as usize],
            comm.rank as i32,
            world,
            stag,
            &sbuf,
            false,
            Some(copy.clone()),
        )?;
        match s {
            None => Ok(r),
            Some(s) => self.join(r, s),
        }
    }

    // ---- nonblocking collectives -------------------------------------------

    /// Starts a nonblocking collective: `f` runs the blocking algorithm on a
    /// shadow of `comm` (own matching queues, so several may be in flight and
    /// overlap with blocking ones), in the thread that first waits for the
    /// request or, if none does within [`deferred::GRACE`], in a runner
    /// thread of its own (so it completes while the caller computes or
    /// blocks elsewhere). The request completes with it.
    pub fn icoll(
        &'static self,
        comm: &Comm,
        f: impl FnOnce(&Mpi, &Comm) -> Result<()> + Send + 'static,
    ) -> Result<Arc<Req>> {
        let shadow = comm.shadow();
        let req = Arc::new(Req::default());
        let done = req.clone();
        // The work, as a job on the request: a thread that waits for the
        // request runs it itself (the usual `MPI_Ixxx` + `MPI_Wait`), or a
        // runner thread does once the grace period has passed (see
        // `deferred`). Either way it runs once; the shadow's own queues
        // keep it apart from everything else in flight.
        req.set_job(Box::new(move || {
            let res = f(self, &shadow);
            self.engine.remove_queues(shadow.key());
            self.engine.remove_queues(shadow.key() + 1);
            if let Some(local) = shadow.local_comm() {
                self.engine.remove_queues(local.key());
                self.engine.remove_queues(local.key() + 1);
            }
            {
                let mut d = done.d.lock();
                d.status = Status::default();
                if let Err(e) = res {
                    d.status.error = e.class;
                    gridwire_core::say!(
                        "gridwire MPI: rank {}: nonblocking collective failed: {e}",
                        self.world.rank
                    );
                }
            }
            done.complete();
        }));
        self.deferred
            .submit(&self.engine, req.clone())
            .map_err(|e| {
                err(
                    class::NO_MEM,
                    format!("cannot start the thread for nonblocking collectives: {e}"),
                )
            })?;
        Ok(req)
    }
}
