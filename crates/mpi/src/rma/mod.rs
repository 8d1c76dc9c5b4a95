//! One-sided communication (MPI windows) over remote service requests.
//!
//! Puts and gets to the process itself, and to members of its host whose
//! memory it maps (windows from `MPI_Win_allocate` and
//! `MPI_Win_allocate_shared`), are loads and stores ([`direct`]). Every
//! other one-sided operation is one request to the target's `H_RMA`
//! handler, which applies it to the target's window memory inside the
//! target's progress and answers the origin (an acknowledgement, or the
//! data of a get). The origin counts the operations still unanswered per
//! target: a flush, an unlock, a fence or a complete waits for that count
//! to reach zero, so "done at the target" is exactly "answered". Locks and
//! exposure epochs are messages to the same handler (see [`wire`]).
//!
//! Atomicity: handlers run one at a time inside progress (the runtime's
//! progress lock), so every accumulate, fetch-and-op and compare-and-swap
//! applies to the target memory as a whole before any other one-sided
//! operation on that process starts: stronger than MPI's per-element rule.
//!
//! Progress: the target applies operations when it enters the library (any
//! MPI call that drives progress, waits included) and, while it has
//! windows, on a progress thread that sleeps until work arrives
//! ([`progress_thread`]), so a passive-target epoch completes while the
//! target computes.
//!
//! Trust: a message's window id, displacement and layout are the peer's
//! word. The target looks the window up, requires the sender to be a member
//! of it, computes every address from its own base and displacement unit
//! and refuses (answering `MPI_ERR_RMA_RANGE`) any piece outside the window
//! or the attached regions of a dynamic one. Answers are matched to the
//! operation id *and* the rank it was sent to.

mod acc_kernels;
mod access;
mod batch;
mod direct;
mod fast;
mod fast_request;
mod lent_answers;
pub mod ops;
mod paced_gets;
mod placed;
pub(crate) mod polling;
mod progress_thread;
mod segment;
mod single_copy;
mod sync;
mod target;
pub mod window;
pub mod wire;

#[cfg(test)]
mod hostile_tests;

pub use window::{Flavor, Win};

use crate::datatype::{Basic, Datatype};
use crate::error::{class, err, MpiError};
use crate::request::{Buf, Req};
use gridwire_core::{Context, Request};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

/// The handler of every one-sided message.
pub const H_RMA: u32 = 0x0004_d510;

/// Lock types (the ABI's values).
pub const LOCK_EXCLUSIVE: i32 = 301;
pub const LOCK_SHARED: i32 = 302;
/// Assertions (the ABI's values).
pub const MODE_NOCHECK: i32 = 1024;
pub const MODE_NOPRECEDE: i32 = 2048;
pub const MODE_NOPUT: i32 = 4096;
pub const MODE_NOSTORE: i32 = 8192;
pub const MODE_NOSUCCEED: i32 = 16384;
const MODE_ALL: i32 = MODE_NOCHECK | MODE_NOPRECEDE | MODE_NOPUT | MODE_NOSTORE | MODE_NOSUCCEED;

/// How many refused messages are reported on stderr (the rest are counted).
const REPORTED_REJECTS: u64 = 8;

/// The hash of the pending operations' ids and the windows' ids: one
/// multiply (Fibonacci hashing) instead of SipHash's rounds, on every
/// request and answer. Sound against a hostile peer: keys are only
/// inserted by this process (sequential operation ids, agreed window ids);
/// a peer's id is only looked up, which cannot grow a bucket.
#[derive(Default, Clone, Copy)]
pub(crate) struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0.wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8)) ^ b as u64;
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.0 = n as u64;
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// A map keyed by ids, hashed by [`IdHasher`].
pub(crate) type IdMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<IdHasher>>;

/// An operation the origin waits an answer for.
struct Pending {
    win: Arc<Win>,
    /// World rank the request went to: only it may answer.
    target: u32,
    /// Rank of the target in the window.
    target_rank: u32,
    /// Where the answer's data goes (gets).
    result: Option<Buf>,
    /// The request of `MPI_Rget` and the like.
    req: Option<Arc<Req>>,
    /// The transport is writing the answer's data straight into `result`
    /// ([`placed`]): the operation completes when that ends.
    placing: bool,
    /// The answer came whole (on another link) while it was being placed:
    /// the operation completes when the placement ends or is abandoned.
    answered_while_placing: bool,
    /// A put whose origin buffer is lent to the runtime
    /// ([`Mpi::fast_request_put_get`]): settled before the operation
    /// completes, so the program may reuse its buffer after the
    /// synchronization.
    lent: Option<gridwire_core::LentTicket>,
    /// A paced get ([`paced_gets`]): its answer's bytes, no longer in
    /// flight when it completes (0: not paced).
    paced: usize,
}

/// The one-sided state of one process: its windows, by id, and the
/// operations waiting for an answer.
#[derive(Default)]
pub struct Rma {
    pub(crate) wins: RwLock<IdMap<u32, Arc<Win>>>,
    pending: Mutex<IdMap<u64, Pending>>,
    next_op: AtomicU64,
    rejected: AtomicU64,
    /// Answers the transport read straight into their result buffer ([`placed`]).
    placed_answers: AtomicU64,
    /// Puts the transport read straight into the window ([`placed`]).
    placed_puts: AtomicU64,
    /// Large get answers lent to the runtime ([`lent_answers`]).
    lent_answers: Mutex<lent_answers::LentAnswers>,
    /// Large gets asked a few at a time per target ([`paced_gets`]).
    paced: Mutex<paced_gets::PacedGets>,
    /// Predefined datatypes by basic type, for applying operations at the target.
    basics: Mutex<HashMap<Basic, Arc<Datatype>>>,
    /// Runs this process's progress while it has windows.
    pub(crate) progress_thread: progress_thread::ProgressThread,
}

impl Rma {
    /// The state, with its handler registered on `ctx`. Call before the
    /// bootstrap barrier, so no peer's request finds the handler missing.
    pub fn new(ctx: &Context) -> Arc<Rma> {
        let r = Arc::new(Rma::default());
        let weak = Arc::downgrade(&r);
        ctx.register_handler(H_RMA, move |c, req| {
            if let Some(r) = weak.upgrade() {
                r.on_message(c, req);
            }
        })
        .expect("handler ids are below the limit");
        // Large get answers over stream methods land in the result buffer.
        ctx.register_placer(
            H_RMA,
            Arc::new(placed::AnswerPlacer {
                rma: Arc::downgrade(&r),
            }),
        )
        .expect("not inside a handler");
        r
    }

    /// Whether the one-sided progress thread runs (for tests and reports).
    pub fn progress_thread_running(&self) -> bool {
        self.progress_thread.is_running()
    }

    /// Stops the progress thread (the last window was freed, or finalize).
    pub(crate) fn stop_progress_thread(&self) {
        self.progress_thread.stop();
        // No handler answers any more from this thread: what is lent is copied.
        self.settle_lent_answers();
    }

    /// Answers placed by the transport so far (an `MPI_T` counter).
    pub fn placed_answers(&self) -> u64 {
        self.placed_answers.load(Ordering::Relaxed)
    }

    /// Puts placed in this process's windows by the transport so far (an
    /// `MPI_T` counter).
    pub fn placed_puts(&self) -> u64 {
        self.placed_puts.load(Ordering::Relaxed)
    }

    /// Messages refused so far because they broke the protocol.
    pub fn rejected(&self) -> u64 {
        self.rejected.load(Ordering::Relaxed)
    }

    pub(crate) fn win(&self, id: u32) -> Option<Arc<Win>> {
        self.wins
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&id)
            .cloned()
    }

    fn basic_type(&self, b: Basic) -> Arc<Datatype> {
        self.basics
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(b)
            .or_insert_with(|| Datatype::predefined(b, ""))
            .clone()
    }

    /// Drops a message that broke the protocol: counts it and says why
    /// (the first few times). Never a panic: it is the peer's word.
    #[cold]
    fn reject(&self, ctx: &Context, from: u32, why: std::fmt::Arguments<'_>) {
        let n = self.rejected.fetch_add(1, Ordering::Relaxed) + 1;
        if n <= REPORTED_REJECTS {
            gridwire_core::say!(
                "gridwire mpi: rank {}: dropped a one-sided message from rank {from}: {why}",
                ctx.rank()
            );
        }
    }

    fn on_message(&self, ctx: &Context, req: Request<'_>) {
        let Some((h, rest)) = wire::Header::decode(req.payload) else {
            return self.reject(ctx, req.src, format_args!("shorter than its header"));
        };
        if h.kind == wire::ANSWER {
            return self.on_answer(ctx, req.src, &h, rest);
        }
        self.on_target(ctx, req.src, &h, rest);
    }

    /// An answer to one of our operations.
    fn on_answer(&self, ctx: &Context, from: u32, h: &wire::Header, data: &[u8]) {
        if h.op_id == 0 {
            // The refusal of an operation sent without an answer (op id 0:
            // a small put in a start epoch): noted for the window's next
            // synchronization. A success is never answered.
            if h.arg != 0 {
                if let Some(w) = self
                    .win(h.win)
                    .filter(|w| w.comm.group.rank_of(from).is_some())
                {
                    w.note_error(err(
                        h.arg as i32,
                        format!(
                            "process {from} refused a put: {}",
                            class::describe(h.arg as i32)
                        ),
                    ));
                }
            }
            return;
        }
        let p = {
            let mut pend = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            match pend.get_mut(&h.op_id) {
                Some(p) if p.target == from && p.win.id == h.win && p.placing => {
                    // This copy overtook the one being placed (another
                    // link): its data is written now, and the operation
                    // completes when the placement lets go of the buffer.
                    if h.arg == 0 {
                        if let Some(buf) = &p.result {
                            if data.len() <= buf.bytes() {
                                buf.unpack(data);
                            }
                        }
                    }
                    p.answered_while_placing = true;
                    return;
                }
                Some(p) if p.target == from && p.win.id == h.win => pend.remove(&h.op_id),
                _ => None,
            }
        };
        let Some(p) = p else {
            return self.reject(
                ctx,
                from,
                format_args!("it answers operation {} it was not asked", h.op_id),
            );
        };
        if let Some(t) = &p.lent {
            // The answer carried the peer's ack of the put: this lets go
            // of the buffer's address without copying (see `settle_lent`).
            settle_lent_put(ctx, t);
        }
        if h.arg == 0 {
            if let Some(buf) = &p.result {
                if data.len() as u64 > buf.bytes() as u64 {
                    self.reject(ctx, from, format_args!("its answer is longer than asked"));
                } else {
                    buf.unpack(data);
                }
            }
        }
        self.finish(p, h.arg);
    }

    /// Completes answered operation `p` (its data, if any, is in place):
    /// notes a target's refusal (`status`, an error class) for the next
    /// synchronization, completes its request and counts it answered.
    fn finish(&self, p: Pending, status: u8) {
        if p.paced > 0 {
            self.paced_get_done(p.target, p.paced, p.win.gets_in_flight);
        }
        let status = status as i32;
        if status != 0 {
            p.win.note_error(err(
                status,
                format!(
                    "rank {} of the window refused an operation: {}",
                    p.target_rank,
                    class::describe(status)
                ),
            ));
        }
        if let Some(r) = &p.req {
            if status != 0 {
                r.d.lock().status.error = status;
            }
            r.complete();
        }
        p.win.answered(p.target_rank);
    }

    /// Registers an operation to `target` (world rank) and returns its id.
    fn expect_answer(
        &self,
        win: &Arc<Win>,
        target_rank: u32,
        result: Option<Buf>,
        req: Option<Arc<Req>>,
    ) -> u64 {
        let id = self.next_op.fetch_add(1, Ordering::Relaxed) + 1;
        win.outstanding[target_rank as usize].fetch_add(1, Ordering::AcqRel);
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
                id,
                Pending {
                    win: win.clone(),
                    target: win.comm.world_of(target_rank),
                    target_rank,
                    result,
                    req,
                    placing: false,
                    answered_while_placing: false,
                    lent: None,
                    paced: 0,
                },
            );
        id
    }

    /// Notes that operation `id`'s origin buffer was lent as `t`; if it
    /// was answered meanwhile (by another thread's progress), settles it
    /// now, before the call returns.
    fn note_lent(&self, ctx: &Context, id: u64, t: gridwire_core::LentTicket) {
        let answered = {
            let mut pend = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            match pend.get_mut(&id) {
                Some(p) => {
                    p.lent = Some(t);
                    false
                }
                None => true,
            }
        };
        if answered {
            settle_lent_put(ctx, &t);
        }
    }

    /// Marks operation `id` a paced get of `bytes` ([`paced_gets`]).
    fn mark_paced(&self, id: u64, bytes: usize) {
        if let Some(p) = self
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(&id)
        {
            p.paced = bytes;
        }
    }

    /// Whether a get of at least [`lent_answers::LEND_MIN`] bytes to world
    /// rank `world` is unanswered: its target may answer it from the
    /// window's memory itself, lent to the runtime
    /// ([`Rma::answer_from_window`]), which reads the window until the
    /// answer is sent whole. A message that ends the epoch must then not
    /// pass the answer: the target could change its window while the
    /// runtime still reads it.
    pub(super) fn large_gets_unanswered(&self, world: u32) -> bool {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .any(|p| {
                p.target == world
                    && p.result
                        .as_ref()
                        .is_some_and(|b| b.bytes() >= lent_answers::LEND_MIN)
            })
    }

    /// Forgets an operation whose request could not be sent.
    fn forget(&self, id: u64) {
        if let Some(p) = self
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id)
        {
            p.win.answered(p.target_rank);
        }
    }
}

/// Copies (or, acknowledged, lets go of) what the runtime still holds of
/// lent put `t`: the origin buffer is the program's again.
fn settle_lent_put(ctx: &Context, t: &gridwire_core::LentTicket) {
    if !ctx.lent_released(t) {
        ctx.settle_lent(t);
    }
}

/// Checks an assertion argument of a synchronization call.
fn check_assert(assert: i32) -> Result<(), MpiError> {
    if assert & !MODE_ALL != 0 {
        return Err(err(
            class::ASSERT,
            format!("assertion {assert:#x} has bits no MPI_MODE_* constant defines"),
        ));
    }
    Ok(())
}
