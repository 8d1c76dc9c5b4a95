//! Operations on a peer the runtime gave up on.
//!
//! When the runtime declares a peer failed for good — its link between
//! hosts broke and no method or relay was left (`context/failover.rs`), or
//! the peer went away — sends to it fail at once, but what waits *for* it
//! would wait forever: a receive posted for it, a rendezvous send waiting
//! for its clear-to-send or its `FIN`, a rendezvous receive waiting for its
//! data, a cancel waiting for its answer. Those complete here with
//! `MPI_ERR_PROC_ABORTED`, the error naming the pair and what was tried
//! (the runtime's reason), so that under `MPI_ERRORS_ARE_FATAL` the job
//! ends with that message instead of hanging until its timeout.
//!
//! The runtime tells us through a membership subscription, which runs
//! inside progress and must neither block nor take the matching lock (a
//! handler may hold it): it only queues the peer. The waiting threads pick
//! the queue up on their next round ([`Engine::push_ready`]), outside
//! handlers, and fail what waits for that peer; receives posted later for
//! a failed peer fail when posted ([`Engine::recv`]).

use super::{Engine, Queues, State, Unexpected};
use crate::error::class;
use crate::error::err;
use crate::group::Group;
use crate::request::Req;
use crate::request::Status;
use crate::ANY_SOURCE;
use gridwire_core::{Context, MembershipEvent, MembershipKind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// Peers the runtime failed, shared between the engine and its subscription.
#[derive(Default)]
pub(super) struct PeerFailures {
    /// World ranks failed and not yet handled by a waiting thread.
    queued: Mutex<Vec<u32>>,
    /// `queued` is not empty (checked on every round of a wait).
    pub(super) pending: AtomicBool,
    /// Some peer failed (receives posted from then on check their source).
    pub(super) any: AtomicBool,
}

/// How many failure reasons an error message quotes (the rest are counted).
const QUOTED_REASONS: usize = 4;

/// The reasons the runtime gave for failed peers, process-wide: a
/// request's status carries only its error class, and the message that
/// `MPI_Wait` reports is made from these ([`failure_message`]).
fn reasons() -> &'static Mutex<Vec<(u32, String)>> {
    static REASONS: OnceLock<Mutex<Vec<(u32, String)>>> = OnceLock::new();
    REASONS.get_or_init(Default::default)
}

/// The message of an `MPI_ERR_PROC_ABORTED` status: what the runtime said
/// about the failed peers (world ranks), e.g. `link rank 0 -> rank 1:
/// every applicable method failed: encrypt+tcp (Connection reset by peer)`.
pub fn failure_message() -> String {
    let r = reasons().lock().unwrap_or_else(|e| e.into_inner());
    if r.is_empty() {
        return "the peer of this operation failed".into();
    }
    let mut quoted: Vec<String> = r
        .iter()
        .take(QUOTED_REASONS)
        .map(|(rank, why)| format!("rank {rank}: {why}"))
        .collect();
    if r.len() > QUOTED_REASONS {
        quoted.push(format!("{} more failed peer(s)", r.len() - QUOTED_REASONS));
    }
    format!(
        "the peer of this operation failed for good ({})",
        quoted.join("; ")
    )
}

impl PeerFailures {
    /// Subscribes to `ctx`'s membership changes: a peer that died (which
    /// includes a link that failed for good) is queued for the waiters.
    pub(super) fn subscribe(self: &Arc<Self>, ctx: &Context) {
        let me = self.clone();
        ctx.subscribe_membership(move |_, ev: &MembershipEvent| {
            if ev.kind != MembershipKind::Died {
                return;
            }
            {
                let mut r = reasons().lock().unwrap_or_else(|e| e.into_inner());
                if !r.iter().any(|(p, _)| *p == ev.peer) {
                    r.push((ev.peer, ev.reason.clone()));
                }
            }
            me.queued
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(ev.peer);
            me.any.store(true, Ordering::Release);
            me.pending.store(true, Ordering::Release);
        });
    }
}

/// Takes out of `q` the posted receives that wait for world rank `dead`
/// alone (a named source), or for any source of a group whose every other
/// member failed (`all_gone`).
fn take_posted(q: &mut Queues, dead: u32, all_gone: bool, out: &mut Vec<(Arc<Req>, i32)>) {
    let Some(g) = q.members.clone() else {
        return;
    };
    q.posted.retain(|p| {
        let waits_for_dead = if p.src == ANY_SOURCE {
            all_gone
        } else {
            usize::try_from(p.src)
                .ok()
                .and_then(|i| g.members.get(i))
                .is_some_and(|&w| w == dead)
        };
        if waits_for_dead {
            // Under the matching lock (the caller's): a counted reference.
            out.push((p.arc(), p.src));
        }
        !waits_for_dead
    });
}

impl Engine {
    /// Fails what waits for the peers the runtime failed since the last
    /// call (see the module's comment). Not inside a handler.
    #[cold]
    #[inline(never)]
    pub(super) fn handle_peer_failures(&self) {
        if !self.failures.pending.swap(false, Ordering::AcqRel) {
            return;
        }
        let dead: Vec<u32> = std::mem::take(
            &mut *self
                .failures
                .queued
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        );
        for w in dead {
            self.fail_waiting_for(w);
        }
    }

    /// Completes with `MPI_ERR_PROC_ABORTED` every operation that waits
    /// for world rank `dead`.
    fn fail_waiting_for(&self, dead: u32) {
        let me = self.ctx.rank();
        // Whether the failed peer was a member of a group and every other
        // member but us failed too (an `MPI_ANY_SOURCE` receive on it can
        // then never match; one on a group of us alone is left alone).
        let all_gone = |members: &[u32]| {
            members.contains(&dead)
                && members
                    .iter()
                    .all(|&w| w == me || w == dead || self.ctx.has_departed(w))
        };
        let mut failed: Vec<(Arc<Req>, i32)> = Vec::new();
        {
            let mut st = self.lock();
            let st: &mut State = &mut st;
            for q in st.queues.iter_mut().flatten() {
                let gone = q.members.as_ref().is_some_and(|g| all_gone(&g.members));
                take_posted(q, dead, gone, &mut failed);
            }
            for q in st.sparse.values_mut() {
                let gone = q.members.as_ref().is_some_and(|g| all_gone(&g.members));
                take_posted(q, dead, gone, &mut failed);
            }
            // Rendezvous steps that only the failed peer could take.
            for slab in [&mut st.rndv_send, &mut st.rndv_recv] {
                for i in 0..slab.items.len() {
                    if slab.items[i].as_ref().is_some_and(|s| s.peer == dead) {
                        let s = slab.items[i].take().expect("checked");
                        slab.free.push(i);
                        failed.push((s.req, -1));
                    }
                }
            }
            // Cancels it will never answer: the message was not withdrawn.
            for c in st.cancels.values_mut() {
                if c.0 == dead && c.1.is_none() {
                    c.1 = Some(false);
                }
            }
        }
        for (req, src) in failed {
            fail_request(&req, src);
        }
    }

    /// Whether a receive posted now from comm rank `src` of `members` (the
    /// communicator's group) can never match: its peer failed (or, for
    /// `MPI_ANY_SOURCE`, every other member did).
    ///
    /// Inlined: on every receive's path, where no peer has failed (one
    /// load; the call alone cost about 20 instructions per receive).
    #[inline]
    pub(super) fn posted_for_failed(&self, members: &[u32], src: i32) -> bool {
        if !self.failures.any.load(Ordering::Acquire) {
            return false;
        }
        self.posted_for_failed_slow(members, src)
    }

    /// Whether comm rank `m` of `group` failed for good: for waits outside
    /// the matching queues (the small collectives' shared segment).
    pub(crate) fn member_failed(&self, group: &Group, m: usize) -> bool {
        i32::try_from(m).is_ok_and(|m| self.posted_for_failed(&group.members, m))
    }

    #[cold]
    #[inline(never)]
    fn posted_for_failed_slow(&self, members: &[u32], src: i32) -> bool {
        let me = self.ctx.rank();
        if src == ANY_SOURCE {
            return members.iter().any(|&w| w != me)
                && members.iter().all(|&w| w == me || self.ctx.has_departed(w));
        }
        usize::try_from(src)
            .ok()
            .and_then(|i| members.get(i))
            .is_some_and(|&w| self.ctx.has_departed(w))
    }
}

impl Engine {
    /// A blocking `MPI_Probe` / `MPI_Mprobe` (`remove`): waits for a
    /// message from comm rank `src` (or any source) of `group` with `tag`,
    /// and fails with `MPI_ERR_PROC_ABORTED` instead of waiting forever
    /// once none can come: its peer failed for good (for `MPI_ANY_SOURCE`:
    /// every other member did). A message the failed peer sent before it
    /// failed is still found first.
    pub fn wait_probe(
        &self,
        ctx: u64,
        group: &Arc<Group>,
        src: i32,
        tag: i32,
        remove: bool,
    ) -> crate::error::Result<Result<Unexpected, Status>> {
        let mut got = None;
        let mut failed = false;
        self.wait_for(|| {
            got = self.probe(ctx, group, src, tag, remove);
            failed = got.is_none() && self.posted_for_failed(&group.members, src);
            got.is_some() || failed
        });
        got.ok_or_else(|| err(class::PROC_ABORTED, failure_message()))
    }
}

/// Completes `req` with `MPI_ERR_PROC_ABORTED` (`src`: the comm rank it
/// waited for, or -1 when the status already names it).
pub(super) fn fail_request(req: &Req, src: i32) {
    {
        let mut d = req.d.lock();
        d.status.error = class::PROC_ABORTED;
        d.status.bytes = 0;
        if src >= 0 {
            d.status.source = src;
        }
        if d.placing > 0 {
            // The transport still writes into the buffer: the request
            // completes when it stops (`engine/placed.rs`).
            d.complete_when_unplaced = true;
            return;
        }
    }
    req.complete();
}

#[cfg(test)]
mod tests {
    use super::super::status_error;
    use super::*;
    use crate::datatype::{Basic, Datatype};
    use crate::group::Group;
    use crate::request::Buf;
    use crate::ANY_TAG;
    use gridwire_core::params::Params;
    use gridwire_core::JoinSpec;

    /// Rank 0 of a job of 3 contexts, with only the `self` method (no
    /// sockets): ranks 1 and 2 are peers the runtime can declare failed.
    fn engine() -> Arc<Engine> {
        let params = Params::from_lookup(|k| (k == "GW_METHODS").then(|| "self".into()))
            .expect("fixed parameters are valid");
        let job = format!("peerfail{}", std::process::id());
        let ctx = Context::join(
            params,
            JoinSpec {
                job_id: job,
                secret: [7; 32],
                ctx_id: 0,
                capacity: 3,
            },
        )
        .expect("a self-only context joins");
        Engine::with_job_size(ctx, 3)
    }

    fn recv(e: &Engine, src: i32, out: &mut [u8]) -> Arc<Req> {
        let byte = Datatype::predefined(Basic::U8, "MPI_BYTE");
        // SAFETY: the tests keep `out` alive and untouched while the request lives.
        let buf = unsafe { Buf::new(out.as_mut_ptr() as usize, out.len(), byte) };
        e.recv(0, &Group::new(vec![0, 1, 2]), src, ANY_TAG, buf)
            .expect("posted")
    }

    const WHY: &str =
        "link rank 0 -> rank 1: every applicable method failed: tcp (Connection reset by peer)";

    #[test]
    fn what_waits_for_a_failed_peer_completes_with_its_reason() {
        let e = engine();
        let (mut a, mut b, mut c) = ([0u8; 4], [0u8; 4], [0u8; 4]);
        let from1 = recv(&e, 1, &mut a);
        let from2 = recv(&e, 2, &mut b);
        let from_any = recv(&e, ANY_SOURCE, &mut c);
        let byte = Datatype::predefined(Basic::U8, "MPI_BYTE");
        let data = [1u8; 64];
        // SAFETY: `data` outlives the request.
        let (rndv_to1, _) = e.stage_send(1, unsafe { Buf::bytes_of(&data, &byte) });
        e.poke();
        assert!(!from1.done() && !rndv_to1.done(), "nothing failed yet");

        e.ctx.peer_departed(1, WHY).expect("rank 1 is a peer");
        // The subscription only queues; the next round of a wait fails.
        assert!(!from1.done());
        e.poke();
        assert!(from1.done() && rndv_to1.done());
        let s = from1.status();
        assert_eq!((s.error, s.source), (class::PROC_ABORTED, 1));
        let msg = status_error(&s, 4).expect("an error").to_string();
        assert!(
            msg.contains("MPI_ERR_PROC_ABORTED") && msg.contains(WHY),
            "{msg}"
        );
        assert_eq!(rndv_to1.status().error, class::PROC_ABORTED);
        // Rank 2 may still send: its receive and the any-source one wait.
        assert!(!from2.done() && !from_any.done());

        // Posted after the failure: fails at once.
        let mut d = [0u8; 4];
        let late = recv(&e, 1, &mut d);
        assert!(late.done());
        assert_eq!(late.status().error, class::PROC_ABORTED);

        // A receive on a group of this process alone is not about the peer.
        let mut own = [0u8; 4];
        let byte = Datatype::predefined(Basic::U8, "MPI_BYTE");
        // SAFETY: `own` outlives the request, which is cancelled below.
        let own_buf = unsafe { Buf::new(own.as_mut_ptr() as usize, 4, byte) };
        let alone = e
            .recv(1, &Group::new(vec![0]), ANY_SOURCE, ANY_TAG, own_buf)
            .expect("posted");

        // Every other member gone: the any-source receive cannot match.
        e.ctx
            .peer_departed(2, "rank 2 died")
            .expect("rank 2 is a peer");
        e.poke();
        assert!(from2.done() && from_any.done());
        assert_eq!(from_any.status().error, class::PROC_ABORTED);
        let msg = status_error(&from_any.status(), 4).unwrap().to_string();
        assert!(msg.contains("rank 2 died"), "{msg}");
        assert!(
            !alone.done(),
            "a receive on a group of this process alone failed"
        );
        assert!(e.cancel_recv(&alone));
    }

    /// A blocking probe that waits for a peer ends with its failure; one
    /// on `MPI_ANY_SOURCE` ends once every other member failed.
    #[test]
    fn a_blocking_probe_on_a_failed_peer_fails() {
        let e = engine();
        let group = Group::new(vec![0, 1, 2]);
        let waiter = {
            let (e, group) = (e.clone(), group.clone());
            std::thread::spawn(move || e.wait_probe(0, &group, 1, ANY_TAG, false).map(|_| ()))
        };
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!waiter.is_finished(), "the probe returned before a failure");
        e.ctx.peer_departed(1, WHY).expect("rank 1 is a peer");
        let got = waiter.join().expect("the probing thread did not panic");
        let msg = got.expect_err("the probe failed").to_string();
        assert!(
            msg.contains("MPI_ERR_PROC_ABORTED") && msg.contains(WHY),
            "{msg}"
        );
        // Rank 2 alive: an any-source mprobe would wait; once it fails too,
        // it fails at once.
        e.ctx
            .peer_departed(2, "rank 2 died")
            .expect("rank 2 is a peer");
        let msg = e
            .wait_probe(0, &group, ANY_SOURCE, ANY_TAG, true)
            .map(|_| ())
            .expect_err("nothing can come")
            .to_string();
        assert!(msg.contains("rank 2 died"), "{msg}");
    }
}
