//! The matching state of the engine: posted and unexpected queues per
//! context, sequence numbers, the rendezvous slabs, and the bounds that keep
//! what a peer's messages make it hold finite.

use super::assist::{AssistOut, AssistRecv};
use super::{Engine, Env, DENSE_CTX, MAX_PEER_NBC_QUEUES, MAX_PEER_QUEUES};
use crate::group::Group;
use crate::request::{Req, Status};
use std::collections::VecDeque;
use std::sync::Arc;

/// A message that arrived before its receive was posted (or was taken by `MPI_Mprobe`).
#[derive(Debug)]
pub struct Unexpected {
    pub env: Env,
    /// World rank of the sender.
    pub from: u32,
    /// Eager data (empty for a rendezvous envelope).
    pub data: Vec<u8>,
}

impl Unexpected {
    pub fn status(&self) -> Status {
        Status {
            source: self.env.src,
            tag: self.env.tag,
            error: 0,
            comm_ctx: 0,
            bytes: self.env.size as usize,
            cancelled: false,
        }
    }
}

/// A posted receive in a matching queue.
///
/// Its request is held in one of two ways:
/// - **owned**: the entry holds a reference count of its own (receives the
///   library posts for itself, and any caller that may drop its reference
///   while the receive waits);
/// - **kept** by the caller ([`super::Engine::recv_kept`]): the caller
///   promises to keep a reference until the request is done or to hand it
///   over with [`super::Engine::release_recv`], so the entry holds a bare
///   pointer. Why: a posted receive shared by the C handle table and this
///   queue cost a clone and a drop of the `Arc`, two locked instructions per
///   message (of six on the receive path).
///
/// Rule for kept entries: the pointer is dereferenced only under the
/// matching lock, while the entry is in a queue or was taken out under the
/// same hold of the lock (then [`Posted::into_arc`] gives a counted
/// reference to use after the lock is released). The caller's reference is
/// alive all that time: a request that is not done stays referenced, and
/// `release_recv` looks for the entry under the lock.
pub(super) struct Posted {
    pub(super) src: i32,
    pub(super) tag: i32,
    req: std::ptr::NonNull<Req>,
    /// Whether the entry holds a reference count (see above).
    owned: bool,
}

// SAFETY: a `Posted` is an `Arc<Req>` (owned) or a pointer to a request kept
// alive by another `Arc` (kept); `Req` is `Send + Sync`, so moving the entry
// (with the matching state) to another thread is as sound as moving an
// `Arc<Req>`.
unsafe impl Send for Posted {}

impl Posted {
    /// An entry with a reference of its own.
    pub(super) fn owned(src: i32, tag: i32, req: Arc<Req>) -> Posted {
        let p = Arc::into_raw(req) as *mut Req;
        Posted {
            src,
            tag,
            // SAFETY: `Arc::into_raw` never gives a null pointer.
            req: unsafe { std::ptr::NonNull::new_unchecked(p) },
            owned: true,
        }
    }

    /// An entry that borrows `req`.
    ///
    /// # Safety
    /// The caller keeps a reference to `req` alive until the request is
    /// done, or until it hands one over with `Engine::release_recv` (see
    /// the type's documentation).
    pub(super) unsafe fn kept(src: i32, tag: i32, req: &Arc<Req>) -> Posted {
        Posted {
            src,
            tag,
            req: std::ptr::NonNull::from(&**req),
            owned: false,
        }
    }

    /// The request. Only under the matching lock (see the type's rule).
    #[inline]
    pub(super) fn req(&self) -> &Req {
        // SAFETY: owned: our reference count keeps it; kept: the caller's,
        // for as long as the entry is reachable under the lock we hold.
        unsafe { self.req.as_ref() }
    }

    /// Whether this entry is for `r`.
    #[inline]
    pub(super) fn is(&self, r: &Arc<Req>) -> bool {
        std::ptr::eq(self.req.as_ptr(), Arc::as_ptr(r))
    }

    /// A counted reference to the request, the entry staying as it is.
    /// Under the matching lock only.
    pub(super) fn arc(&self) -> Arc<Req> {
        // SAFETY: the pointer came from an `Arc` (ours or the caller's,
        // alive under the lock as the type's rule says): adding a count and
        // making a new `Arc` of it is what `Arc::clone` does.
        unsafe {
            Arc::increment_strong_count(self.req.as_ptr());
            Arc::from_raw(self.req.as_ptr())
        }
    }

    /// The entry as a counted reference (its own when owned, a new one
    /// when kept). Under the matching lock only.
    #[inline]
    pub(super) fn into_arc(self) -> Arc<Req> {
        let me = std::mem::ManuallyDrop::new(self);
        if me.owned {
            // SAFETY: our reference, from `Arc::into_raw`, given back once
            // (`me` is not dropped).
            unsafe { Arc::from_raw(me.req.as_ptr()) }
        } else {
            me.arc()
        }
    }

    /// Takes over the caller's reference `r` to this entry's request (the
    /// entry is kept): from now on the entry owns it.
    pub(super) fn adopt(&mut self, r: Arc<Req>) {
        debug_assert!(self.is(&r), "adopting another request");
        if self.owned {
            drop(r);
        } else {
            let _ = Arc::into_raw(r);
            self.owned = true;
        }
    }
}

impl Drop for Posted {
    fn drop(&mut self) {
        if self.owned {
            // SAFETY: our reference, from `Arc::into_raw`, given back once.
            drop(unsafe { Arc::from_raw(self.req.as_ptr()) });
        }
    }
}

#[derive(Default)]
pub(super) struct Queues {
    pub(super) posted: VecDeque<Posted>,
    pub(super) unexpected: VecDeque<Unexpected>,
    /// Next sequence number expected from each sender, by *world* rank (the
    /// transport's sender, below the job size: the envelope's rank is the
    /// peer's word and cannot size anything).
    pub(super) expected: Vec<u32>,
    /// Envelopes that arrived ahead of their turn.
    pub(super) early: Vec<Unexpected>,
    /// The communicator's group (comm rank -> world rank), known once this
    /// process posted or probed on the context: an envelope must name as its
    /// source the comm rank of the process it came from.
    pub(super) members: Option<Arc<Group>>,
    /// Created by a peer's message, not yet used here (see [`MAX_PEER_QUEUES`]).
    pub(super) peer_made: bool,
    /// Used here: `members` is set and `peer_made` cleared (one load on the
    /// receive path instead of two).
    pub(super) used: bool,
}

impl Queues {
    /// Drops queued messages whose envelope names a source other than the
    /// process they came from; returns them (sender, named rank) for the report.
    pub(super) fn purge_forged(&mut self, g: &Group) -> Vec<(u32, i32)> {
        let ok = |u: &Unexpected| sender_is(g, u.env.src, u.from);
        let mut bad = Vec::new();
        for u in self.unexpected.iter().chain(self.early.iter()) {
            if !ok(u) {
                bad.push((u.from, u.env.src));
            }
        }
        if !bad.is_empty() {
            self.unexpected.retain(|u| ok(u));
            self.early.retain(|u| ok(u));
        }
        bad
    }

    /// What the queued messages cost (see [`held_cost`]).
    pub(super) fn held(&self) -> usize {
        let msgs = self.unexpected.iter().chain(self.early.iter());
        msgs.map(|u| held_cost(u.data.len())).sum()
    }
}

/// What a queued message costs against [`Engine::held_limit`]: its data
/// and its slot (so that empty messages count too).
pub(super) fn held_cost(data_len: usize) -> usize {
    data_len + std::mem::size_of::<Unexpected>()
}

/// Default of `GW_MPI_UNEXPECTED_LIMIT`: bytes of messages that arrived
/// before their receive that a process holds before it drops more.
pub(super) const DEFAULT_HELD_LIMIT: usize = 1 << 30;

/// Whether comm rank `src` of group `g` is world rank `from`.
#[inline]
pub(super) fn sender_is(g: &Group, src: i32, from: u32) -> bool {
    usize::try_from(src)
        .ok()
        .and_then(|i| g.members.get(i))
        .is_some_and(|&w| w == from)
}

/// A request waiting for a rendezvous step, with the one peer that may take it.
pub(super) struct Slot {
    pub(super) req: Arc<Req>,
    /// World rank of the other side.
    pub(super) peer: u32,
    /// Receives: the size the sender announced (every `H_DATA` must agree).
    pub(super) size: u64,
    /// Receives copied in two parts with the sender's help (`assist.rs`).
    pub(super) assist: Option<AssistRecv>,
}

/// A slab of requests waiting for a rendezvous step, by id. The ids go on
/// the wire and come back in `H_CTS`, `H_DATA` and `H_FIN`: a lookup needs
/// the id *and* the peer the request belongs to, so a peer that guesses
/// another's id gets nothing.
#[derive(Default)]
pub(super) struct Slab {
    pub(super) items: Vec<Option<Slot>>,
    pub(super) free: Vec<usize>,
}

impl Slab {
    pub(super) fn insert(&mut self, req: Arc<Req>, peer: u32, size: u64) -> u64 {
        self.insert_slot(Slot {
            req,
            peer,
            size,
            assist: None,
        })
    }

    /// Whether a slot waits on `peer` (for sends: a rendezvous send to
    /// `peer` not yet finished, so `peer` has a copy of ours to make).
    pub(super) fn waits_on(&self, peer: u32) -> bool {
        self.items.iter().flatten().any(|s| s.peer == peer)
    }

    /// [`Slab::insert`] for a receive copied with the sender's help.
    pub(super) fn insert_assisted(
        &mut self,
        req: Arc<Req>,
        peer: u32,
        size: u64,
        a: AssistRecv,
    ) -> u64 {
        self.insert_slot(Slot {
            req,
            peer,
            size,
            assist: Some(a),
        })
    }

    fn insert_slot(&mut self, slot: Slot) -> u64 {
        let slot = Some(slot);
        match self.free.pop() {
            Some(i) => {
                self.items[i] = slot;
                i as u64
            }
            None => {
                self.items.push(slot);
                (self.items.len() - 1) as u64
            }
        }
    }

    /// The request `id` if it waits for `peer`.
    pub(super) fn get(&self, id: u64, peer: u32) -> Option<&Slot> {
        let slot = self.items.get(usize::try_from(id).ok()?)?.as_ref()?;
        (slot.peer == peer).then_some(slot)
    }

    /// The two-part copy state of receive `id` if it waits for `peer` and
    /// is copied with its help.
    pub(super) fn assisted_mut(&mut self, id: u64, peer: u32) -> Option<&mut AssistRecv> {
        let slot = self.items.get_mut(usize::try_from(id).ok()?)?.as_mut()?;
        if slot.peer != peer {
            return None;
        }
        slot.assist.as_mut()
    }

    /// Takes request `id` out if it waits for `peer`.
    pub(super) fn remove(&mut self, id: u64, peer: u32) -> Option<Arc<Req>> {
        self.get(id, peer)?;
        let i = id as usize;
        let slot = self.items[i].take()?;
        self.free.push(i);
        Some(slot.req)
    }
}

#[derive(Default)]
pub(super) struct State {
    /// Matching queues by context id, below [`DENSE_CTX`].
    pub(super) queues: Vec<Option<Box<Queues>>>,
    /// The other queues: context ids from [`DENSE_CTX`] up and
    /// nonblocking-collective instances (keys above 2^32, removed when they finish).
    pub(super) sparse: std::collections::HashMap<u64, Box<Queues>>,
    /// Queues that exist only because a peer's message created them: of
    /// communicators, and of nonblocking-collective instances (keys above
    /// 2^32; see [`MAX_PEER_NBC_QUEUES`]).
    pub(super) peer_queues: usize,
    pub(super) peer_nbc_queues: usize,
    /// Bytes of messages held in unexpected and early queues (see [`held_cost`]).
    pub(super) held: usize,
    /// The most `held` has been (the MPI_T high-water mark).
    pub(super) held_max: usize,
    pub(super) rndv_send: Slab,
    pub(super) rndv_recv: Slab,
    /// Rendezvous sends cleared to go: (request, world rank, receiver request id).
    pub(super) ready: VecDeque<(Arc<Req>, u32, u64)>,
    /// Rendezvous sends whose data the runtime holds by address until the
    /// receiver acknowledges it (`engine/lent.rs`): (request, ticket, since).
    pub(super) lent: VecDeque<(Arc<Req>, gridwire_core::LentTicket, std::time::Instant)>,
    /// Matched single-copy rendezvous receives to copy: (request, sender, envelope).
    pub(super) pulls: VecDeque<(Arc<Req>, u32, Env)>,
    /// Parts of our sends that their receivers asked us to copy (`assist.rs`).
    pub(super) assists_out: VecDeque<AssistOut>,
    /// Assisted receives whose sender declined its part: (receiver request id, sender).
    pub(super) assist_rest: VecDeque<(u64, u32)>,
    /// Spare buffers for unexpected eager data.
    pub(super) pool: Vec<Vec<u8>>,
    /// Spare requests, reset, that no one else holds (see `Engine::give_back`).
    pub(super) spare_reqs: Vec<Arc<Req>>,
    /// Send cancellations waiting for their answer: token -> (peer, answer).
    pub(super) cancels: std::collections::HashMap<u64, (u32, Option<bool>)>,
    pub(super) next_cancel: u64,
}

impl State {
    /// The matching queues of context `ctx`. Inlined for the common case
    /// (a communicator's queues that exist already), on every message.
    #[inline]
    pub(super) fn queues(&mut self, ctx: u64) -> &mut Queues {
        let i = ctx as usize;
        if ctx < DENSE_CTX as u64 && i < self.queues.len() && self.queues[i].is_some() {
            return self.queues[i].as_mut().expect("checked just above");
        }
        self.queues_slow(ctx)
    }

    #[inline(never)]
    pub(super) fn queues_slow(&mut self, ctx: u64) -> &mut Queues {
        if ctx >= DENSE_CTX as u64 {
            return self.sparse.entry(ctx).or_default();
        }
        let i = ctx as usize;
        if self.queues.len() <= i {
            self.queues.resize_with(i + 1, || None);
        }
        self.queues[i].get_or_insert_with(Default::default)
    }

    /// Whether the queues of `ctx` exist.
    pub(super) fn has_queues(&self, ctx: u64) -> bool {
        if ctx < DENSE_CTX as u64 {
            matches!(self.queues.get(ctx as usize), Some(Some(_)))
        } else {
            self.sparse.contains_key(&ctx)
        }
    }

    /// The queues of `ctx` for a message that arrived: created if the limit
    /// of peer-made queues allows (see [`MAX_PEER_QUEUES`]).
    #[inline]
    pub(super) fn incoming(&mut self, ctx: u64) -> Option<&mut Queues> {
        let i = ctx as usize;
        if ctx < DENSE_CTX as u64 && i < self.queues.len() && self.queues[i].is_some() {
            return self.queues[i].as_deref_mut();
        }
        self.incoming_slow(ctx)
    }

    #[inline(never)]
    pub(super) fn incoming_slow(&mut self, ctx: u64) -> Option<&mut Queues> {
        if !self.has_queues(ctx) {
            let (count, max) = match ctx >> 32 {
                0 => (&mut self.peer_queues, MAX_PEER_QUEUES),
                _ => (&mut self.peer_nbc_queues, MAX_PEER_NBC_QUEUES),
            };
            if *count >= max {
                return None;
            }
            *count += 1;
            self.queues(ctx).peer_made = true;
        }
        Some(self.queues(ctx))
    }

    /// The queues of `ctx` for this process's own post or probe on a
    /// communicator of group `g`. The first use records the group and
    /// drops (and reports through `eng`) what peers sent under a false
    /// source meanwhile.
    #[inline]
    pub(super) fn local(&mut self, ctx: u64, g: &Arc<Group>, eng: &Engine) -> &mut Queues {
        let i = ctx as usize;
        let used = ctx < DENSE_CTX as u64
            && i < self.queues.len()
            && self.queues[i].as_ref().is_some_and(|q| q.used);
        if used {
            return self.queues[i].as_deref_mut().expect("checked just above");
        }
        self.local_slow(ctx, g, eng)
    }

    #[inline(never)]
    pub(super) fn local_slow(&mut self, ctx: u64, g: &Arc<Group>, eng: &Engine) -> &mut Queues {
        let q = self.queues(ctx);
        let was_peer_made = std::mem::take(&mut q.peer_made);
        q.used = true;
        if q.members.is_none() {
            q.members = Some(g.clone());
            let before = q.held();
            let bad = q.purge_forged(g);
            let after = q.held();
            self.held = self.held.saturating_sub(before - after);
            eng.report_forged(&bad);
        }
        if was_peer_made {
            match ctx >> 32 {
                0 => self.peer_queues -= 1,
                _ => self.peer_nbc_queues -= 1,
            }
        }
        self.queues(ctx)
    }

    pub(super) fn take_buf(&mut self, data: &[u8]) -> Vec<u8> {
        let mut v = self.pool.pop().unwrap_or_default();
        v.clear();
        v.extend_from_slice(data);
        v
    }

    pub(super) fn give_buf(&mut self, v: Vec<u8>) {
        if self.pool.len() < 64 && v.capacity() <= 1 << 20 {
            self.pool.push(v);
        }
    }
}
