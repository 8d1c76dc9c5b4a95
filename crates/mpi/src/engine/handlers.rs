//! The handlers of the engine's messages from peers (`H_MSG`, `H_CTS`,
//! `H_DATA`, `H_FIN`): every field is the peer's word and is checked before
//! use (see the module documentation of [`super`]).

use super::matching::{held_cost, sender_is, State, Unexpected};
use super::{
    deliver, deliver_matched, set_envelope, After, Engine, Env, DATA_HDR, DELIVER_LOCKED_MAX,
    EAGER, MAX_EARLY, MAX_PEER_NBC_QUEUES, MAX_PEER_QUEUES, RTS,
};
use crate::error::class;
use crate::request::SendData;
use crate::TAG_UB;
use gridwire_core::sync::TryLockGuard;
use gridwire_core::{Context, Request};
use std::sync::atomic::Ordering;

impl Engine {
    #[inline]
    pub(super) fn on_msg(&self, _ctx: &Context, r: Request<'_>) {
        self.handle_msg_as(r.src, r.payload, true);
    }

    /// The matching lock for an `H_MSG` handler of a round of progress:
    /// the one an earlier message of the round kept, or taken now.
    #[inline]
    fn lock_in_round(&self) -> TryLockGuard<'_, State> {
        if self.round_held.load(Ordering::Relaxed) {
            self.round_held.store(false, Ordering::Relaxed);
            // SAFETY: `round_held` is set only by a handler of this round
            // (this thread: handlers run under the progress lock) right
            // after it kept its guard, and cleared by whoever takes it back.
            unsafe { self.st.guard_of_kept() }
        } else {
            self.lock()
        }
    }

    /// Keeps the matching lock for the round's next `H_MSG` handler: the
    /// round-end hook, or any other handler or placer, releases it
    /// ([`Engine::end_round`]). Other threads wait for it at most the rest
    /// of one round (the messages the methods had drained).
    #[inline]
    fn hold_for_round(&self, st: TryLockGuard<'_, State>) {
        st.keep();
        self.round_held.store(true, Ordering::Relaxed);
    }

    /// Releases the matching lock if a handler of this round kept it.
    /// Handlers, placers and the round-end hook only (the thread in progress).
    #[inline]
    pub(super) fn end_round(&self) {
        if self.round_held.load(Ordering::Relaxed) {
            self.round_held.store(false, Ordering::Relaxed);
            // SAFETY: as in `lock_in_round`; dropping releases the lock.
            drop(unsafe { self.st.guard_of_kept() });
        }
    }

    /// An `H_MSG` from world rank `from` (the transport's sender). Every
    /// field is the peer's word: the context must exist or be allowed to
    /// (see [`State::incoming`]), the source must be the comm rank of
    /// `from` where the communicator is known here (else it is checked when
    /// it becomes known), the tag a valid one; the sequence number decides
    /// the turn within [`MAX_EARLY`].
    #[inline(always)]
    pub(crate) fn handle_msg(&self, from: u32, payload: &[u8]) {
        self.handle_msg_as(from, payload, false)
    }

    /// [`Engine::handle_msg`]; `in_round`: called as the `H_MSG` handler
    /// inside a round of progress, where an eager message delivered on the
    /// fast path keeps the matching lock for the round's next one.
    #[inline(always)]
    fn handle_msg_as(&self, from: u32, payload: &[u8], in_round: bool) {
        let Some((env, env_len)) = Env::decode(payload) else {
            self.end_round();
            return self.reject(from, "point-to-point", format_args!("malformed envelope"));
        };
        if !self.is_rank(from) || !(0..=TAG_UB).contains(&env.tag) {
            self.end_round();
            return self.reject_envelope(from, &env);
        }
        let data = &payload[env_len..];
        let mut st = if in_round {
            self.lock_in_round()
        } else {
            self.lock()
        };
        let Some(q) = st.incoming(env.ctx) else {
            drop(st);
            return self.reject(
                from,
                "point-to-point",
                format_args!(
                    "communicator context {:#x} is unknown here and {} unknown ones hold messages already",
                    env.ctx,
                    if env.ctx >> 32 == 0 { MAX_PEER_QUEUES } else { MAX_PEER_NBC_QUEUES }
                ),
            );
        };
        if let Some(g) = &q.members {
            if !sender_is(g, env.src, from) {
                drop(st);
                return self.reject_envelope(from, &env);
            }
        }
        let s = from as usize;
        if q.expected.len() <= s {
            q.expected.resize(s + 1, 0);
        }
        // The common case first: an eager message in its turn, nothing held
        // back, and a receive waiting for it. A small message is copied
        // under the lock (a receive kept by its caller, `Posted`, may be
        // used only under it; and no reference count is taken); a larger
        // one after releasing it, from a counted reference.
        if env.kind == EAGER && env.seq == q.expected[s] && q.early.is_empty() {
            // The receive posted first usually matches (a window of
            // receives): look at it before starting a search.
            let hit = match q.posted.front() {
                Some(p) if env.matches(p.src, p.tag) => Some(0),
                Some(_) => q.posted.iter().position(|p| env.matches(p.src, p.tag)),
                None => None,
            };
            if let Some(i) = hit {
                q.expected[s] = q.expected[s].wrapping_add(1);
                let p = if i == 0 {
                    q.posted.pop_front()
                } else {
                    q.posted.remove(i)
                };
                let p = p.expect("index from position");
                if data.len() <= DELIVER_LOCKED_MAX {
                    // SAFETY: under the matching lock (`st`), `p` just
                    // taken out of its posted queue.
                    unsafe { deliver_matched(p.req(), &env, data) };
                    if in_round {
                        self.hold_for_round(st);
                    } else {
                        drop(st);
                    }
                    // An owned entry's reference goes outside the lock
                    // (or a kept round's).
                    drop(p);
                } else {
                    let req = p.into_arc();
                    drop(st);
                    deliver(&req, &env, data);
                }
                return;
            }
        }
        self.on_msg_slow(st, env, from, data);
    }

    #[cold]
    #[inline(never)]
    fn reject_envelope(&self, from: u32, env: &Env) {
        let why = if !self.is_rank(from) {
            format!("the job has no rank {from}")
        } else if !(0..=TAG_UB).contains(&env.tag) {
            format!("tag {} is not a valid tag", env.tag)
        } else {
            format!(
                "its envelope names rank {} of the communicator as the source",
                env.src
            )
        };
        self.reject(from, "point-to-point", format_args!("{why}"));
    }

    /// The rest of [`Engine::handle_msg`]: out-of-turn, unexpected and rendezvous
    /// envelopes. The queues of `env.ctx` exist and `expected` covers `from`.
    #[inline(never)]
    fn on_msg_slow(&self, mut st: TryLockGuard<'_, State>, env: Env, from: u32, data: &[u8]) {
        // The sender's data lies in its memory: a size beyond isize::MAX
        // is a lie that probes would hand the program as a count.
        if env.kind == RTS && env.size > isize::MAX as u64 {
            drop(st);
            return self.reject(
                from,
                "point-to-point",
                format_args!("its rendezvous announces {} bytes", env.size),
            );
        }
        if env.kind == RTS && env.pid != 0 && from != self.ctx.rank() {
            let slot = &self.peer_pid[from as usize];
            let pinned =
                match slot.compare_exchange(0, env.pid, Ordering::Relaxed, Ordering::Relaxed) {
                    Ok(_) => env.pid,
                    Err(p) => p,
                };
            if pinned != env.pid {
                drop(st);
                return self.reject(
                    from,
                    "point-to-point",
                    format_args!(
                        "its rendezvous names process {} for a single copy, its earlier ones process {pinned}",
                        env.pid
                    ),
                );
            }
        }
        let s = from as usize;
        let q = st.queues(env.ctx);
        if env.seq != q.expected[s] {
            let ahead = env.seq.wrapping_sub(q.expected[s]);
            if ahead >= MAX_EARLY || q.early.len() >= MAX_EARLY as usize {
                let expected = q.expected[s];
                drop(st);
                return self.reject(
                    from,
                    "point-to-point",
                    format_args!(
                        "sequence number {} is not within {MAX_EARLY} after the expected {expected}",
                        env.seq
                    ),
                );
            }
            if !self.may_hold(&mut st, from, data.len()) {
                return;
            }
            let v = st.take_buf(data);
            st.held += held_cost(v.len());
            st.held_max = st.held_max.max(st.held);
            st.queues(env.ctx)
                .early
                .push(Unexpected { env, from, data: v });
            return;
        }
        // Without early envelopes this allocates nothing: `more` stays
        // empty, and an empty Vec owns no memory.
        let first = self.arrive(&mut st, env, from, data, None);
        let mut more = Vec::new();
        // Envelopes that were waiting for this one.
        loop {
            let q = st.queues(env.ctx);
            q.expected[s] = q.expected[s].wrapping_add(1);
            let next = q.expected[s];
            let Some(i) = q
                .early
                .iter()
                .position(|u| u.from == from && u.env.seq == next)
            else {
                break;
            };
            let u = q.early.swap_remove(i);
            st.held = st.held.saturating_sub(held_cost(u.data.len()));
            let a = self.arrive(&mut st, u.env, u.from, &[], Some(u.data));
            more.push(a);
        }
        let mut first = [first];
        // Copies wait for the receiving thread's wait loop (not in a handler).
        for a in first.iter_mut().chain(more.iter_mut()) {
            if matches!(a, After::Pull { .. }) {
                if let After::Pull { req, from, env } = std::mem::replace(a, After::Nothing) {
                    st.pulls.push_back((req, from, env));
                    self.ready_len.fetch_add(1, Ordering::AcqRel);
                }
            }
        }
        drop(st);
        for a in first.into_iter().chain(more) {
            if let After::Cts {
                to,
                sreq,
                rreq,
                ctx,
            } = a
            {
                if let Err(e) = self.send_cts(to, sreq, rreq, ctx) {
                    gridwire_core::say!(
                        "gridwire mpi: rank {}: clear-to-send to rank {to} failed: {e}",
                        self.ctx.rank()
                    );
                }
            }
        }
    }

    /// Whether a message of `len` bytes from `from` may be queued (counted
    /// then by the caller's push), or is dropped and reported because
    /// unexpected messages fill [`Engine::held_limit`] already.
    fn may_hold(&self, st: &mut State, from: u32, len: usize) -> bool {
        let limit = self.held_limit.load(Ordering::Relaxed);
        if st.held.saturating_add(held_cost(len)) <= limit {
            return true;
        }
        let held = st.held;
        self.reject(
            from,
            "point-to-point",
            format_args!(
                "{held} bytes of messages nobody has received yet are held (GW_MPI_UNEXPECTED_LIMIT={limit})"
            ),
        );
        false
    }

    /// An envelope in its turn: match it or queue it.
    fn arrive(
        &self,
        st: &mut State,
        env: Env,
        from: u32,
        data: &[u8],
        owned: Option<Vec<u8>>,
    ) -> After {
        let q = st.queues(env.ctx);
        let hit = q.posted.iter().position(|p| env.matches(p.src, p.tag));
        let Some(i) = hit else {
            let data = match owned {
                Some(v) => v,
                None if !self.may_hold(st, from, data.len()) => return After::Nothing,
                None => st.take_buf(data),
            };
            st.held += held_cost(data.len());
            st.held_max = st.held_max.max(st.held);
            st.queues(env.ctx)
                .unexpected
                .push_back(Unexpected { env, from, data });
            return After::Nothing;
        };
        // Under the matching lock (`st`): a kept entry may be used here.
        let p = q.posted.remove(i).expect("index from position");
        if env.kind == EAGER {
            // SAFETY: under the matching lock (`st`), `p` just taken out
            // of its posted queue.
            match &owned {
                Some(v) => unsafe { deliver_matched(p.req(), &env, v) },
                None => unsafe { deliver_matched(p.req(), &env, data) },
            }
            if let Some(v) = owned {
                st.give_buf(v);
            }
            After::Nothing
        } else if self.can_pull(from, &env) {
            set_envelope(p.req(), &env);
            After::Pull {
                req: p.into_arc(),
                from,
                env,
            }
        } else {
            set_envelope(p.req(), &env);
            let rreq = st.rndv_recv.insert(p.into_arc(), from, env.size);
            After::Cts {
                to: from,
                sreq: env.sreq,
                rreq,
                ctx: env.ctx,
            }
        }
    }

    pub(super) fn on_cts(&self, _ctx: &Context, r: Request<'_>) {
        self.handle_cts(r.src, r.payload);
    }

    /// `H_CTS` from `from`: only a send of ours to `from` that waits for its
    /// receiver may be cleared (an id of another peer's send is refused).
    pub(crate) fn handle_cts(&self, from: u32, payload: &[u8]) {
        let (Some(sreq), Some(rreq), 16) = (word(payload, 0), word(payload, 8), payload.len())
        else {
            return self.reject(from, "clear-to-send", format_args!("it is not 16 bytes"));
        };
        let mut st = self.lock();
        if let Some(req) = st.rndv_send.remove(sreq, from) {
            st.ready.push_back((req, from, rreq));
            self.ready_len.fetch_add(1, Ordering::AcqRel);
        } else {
            drop(st);
            self.reject(
                from,
                "clear-to-send",
                format_args!("no send of ours to that rank waits under id {sreq}"),
            );
        }
    }

    pub(super) fn on_fin(&self, _ctx: &Context, r: Request<'_>) {
        self.handle_fin(r.src, r.payload);
    }

    /// `H_FIN` from `from`: completes a single-copy send of ours to `from`.
    pub(crate) fn handle_fin(&self, from: u32, payload: &[u8]) {
        let (Some(sreq), 8) = (word(payload, 0), payload.len()) else {
            return self.reject(
                from,
                "rendezvous completion",
                format_args!("it is not 8 bytes"),
            );
        };
        let req = self.lock().rndv_send.remove(sreq, from);
        match req {
            Some(req) => {
                req.d.lock().send = SendData::None;
                req.complete();
            }
            None => self.reject(
                from,
                "rendezvous completion",
                format_args!("no send of ours to that rank waits under id {sreq}"),
            ),
        }
    }

    pub(super) fn on_data(&self, _ctx: &Context, r: Request<'_>) {
        self.handle_data(r.src, r.payload);
    }

    /// `H_DATA` from `from`: a piece of a rendezvous into a receive of ours
    /// matched with a send of `from`. The total must be the size its
    /// envelope announced and the piece must lie within it; only the part
    /// within the receive buffer is written.
    pub(crate) fn handle_data(&self, from: u32, payload: &[u8]) {
        let (Some(rreq), Some(off), Some(total)) =
            (word(payload, 0), word(payload, 8), word(payload, 16))
        else {
            return self.reject(
                from,
                "rendezvous data",
                format_args!("the header is cut short"),
            );
        };
        let data = &payload[DATA_HDR..];
        let slot = self
            .lock()
            .rndv_recv
            .get(rreq, from)
            // A receive copied in two parts takes no pieces (`assist.rs`).
            .filter(|s| s.assist.is_none())
            .map(|s| (s.req.clone(), s.size));
        let Some((req, size)) = slot else {
            return self.reject(
                from,
                "rendezvous data",
                format_args!("no receive of ours from that rank waits under id {rreq}"),
            );
        };
        let end = off.checked_add(data.len() as u64);
        if total != size || end.is_none_or(|e| e > total) {
            return self.reject(
                from,
                "rendezvous data",
                format_args!(
                    "bytes {off}..+{} of {total} do not lie within the {size} its envelope announced",
                    data.len()
                ),
            );
        }
        let (done, complete_now) = {
            let mut d = req.d.lock();
            let cap = d.recv.as_ref().map_or(0, |b| b.bytes());
            // `total` fits in memory only if it fits in the buffer; both
            // bounds below are then at most `cap`.
            let fits = usize::try_from(total).unwrap_or(usize::MAX).min(cap);
            // The part of this piece that fits in the receive buffer.
            let lo = usize::try_from(off).unwrap_or(usize::MAX).min(fits);
            let hi = lo.saturating_add(data.len()).min(fits);
            let part = &data[..hi - lo];
            match d.recv.as_ref().and_then(|b| b.contig_addr()) {
                // SAFETY: `Buf::new`'s contract: the receive buffer is
                // writable for `cap` bytes at its contiguous address, and
                // `lo..hi` lies within `fits` <= `cap`.
                Some(addr) => unsafe { crate::mem::write(addr + lo, part) },
                None => {
                    // A noncontiguous type: stage the packed bytes, unpack at the end.
                    if d.staged.len() < fits {
                        d.staged.resize(fits, 0);
                    }
                    d.staged[lo..hi].copy_from_slice(part);
                }
            }
            d.rndv_got = d.rndv_got.saturating_add(data.len());
            let done = d.rndv_got as u64 >= total;
            if done {
                if !d.staged.is_empty() {
                    let staged = std::mem::take(&mut d.staged);
                    if let Some(b) = &d.recv {
                        b.unpack(&staged);
                    }
                }
                d.status.bytes = fits;
                if total > cap as u64 {
                    d.status.error = class::TRUNCATE;
                }
            }
            // A piece still being placed (a copy of one on another link)
            // completes it when the transport lets go of the buffer.
            let now = !(done && d.placing > 0);
            if !now {
                d.complete_when_unplaced = true;
            }
            (done, now)
        };
        self.rndv_piece_counted(rreq, from, &req, done, complete_now);
    }

    /// After a rendezvous piece was counted (copied by `handle_data` or
    /// placed by the transport, `placed.rs`): the last one ends the
    /// receive's slot, and completes the request unless a placement still
    /// holds its buffer (then the placement's end completes it).
    pub(super) fn rndv_piece_counted(
        &self,
        rreq: u64,
        from: u32,
        req: &crate::Req,
        done: bool,
        complete_now: bool,
    ) {
        if done {
            self.lock().rndv_recv.remove(rreq, from);
            if complete_now {
                req.complete();
            }
        }
    }
}

/// The little-endian u64 at `at` in `b`, if `b` holds it.
#[inline]
fn word(b: &[u8], at: usize) -> Option<u64> {
    let bytes = b.get(at..at.checked_add(8)?)?;
    Some(u64::from_le_bytes(bytes.try_into().ok()?))
}
