//! Data a transport writes straight into the receive buffer: rendezvous
//! pieces ([`DataPlacer`]) and eager messages held whole in shared memory
//! ([`EagerPlacer`], see there).
//!
//! Over tcp, an `H_DATA` piece used to be read into the connection's
//! buffer and copied from there into the receive buffer: two copies of
//! every byte on the receiving core (the kernel's and ours). The
//! [`DataPlacer`] tells the runtime, from the piece's 24-byte header,
//! where its data goes (`gridwire_core::Placer`), and the transport reads
//! the rest of the frame there: one copy.
//!
//! While a piece is being placed the request counts it (`placing`) and
//! does not complete: a peer failure, or the same piece delivered by
//! another link first, leaves completing to the end of the placement
//! (`complete_when_unplaced`), so the buffer is never written after the
//! program got it back. A placement the transport abandons (its connection
//! closed mid-piece) drops its [`PlaceGuard`], which does the same; the
//! piece then comes again (failover resends it) or the request fails.

use super::*;
use gridwire_core::method::Destination;
use gridwire_core::Placer;

/// The `H_DATA` placer of an engine (registered beside its handlers).
pub(super) struct DataPlacer {
    /// The engine's address (see `Engine::new`: handlers and this placer
    /// are unregistered, which waits for running ones, before it is freed).
    pub(super) at: usize,
}

impl DataPlacer {
    fn engine(&self) -> &Engine {
        // SAFETY: `at` is a live `Engine` while this placer can run (see the field).
        unsafe { &*(self.at as *const Engine) }
    }
}

impl Placer for DataPlacer {
    fn place(&self, src: u32, head: &[u8], len: usize) -> Option<Destination> {
        // Inside progress, like a handler: the matching lock a round's
        // `H_MSG` handlers kept is released first (`place_data` takes it).
        self.engine().end_round();
        self.engine().place_data(src, head, len)
    }

    fn placed(&self, _ctx: &Context, src: u32, head: &[u8], dest: Destination) {
        self.engine().end_round();
        self.engine().placed_data(src, head, dest);
    }
}

/// The `H_MSG` placer of an engine: an eager message that a transport
/// holds whole or gets in fragments nothing comes between (a
/// shared-memory ring, `Sink::place_whole`) goes straight into the posted
/// receive it matches, instead of into the transport's buffer and from
/// there into the receive buffer (one copy fewer of every byte).
/// Registered beside the handlers, like [`DataPlacer`].
pub(super) struct EagerPlacer {
    /// The engine's address (as [`DataPlacer::at`]).
    pub(super) at: usize,
}

impl EagerPlacer {
    fn engine(&self) -> &Engine {
        // SAFETY: `at` is a live `Engine` while this placer can run (see `DataPlacer::at`).
        unsafe { &*(self.at as *const Engine) }
    }
}

impl Placer for EagerPlacer {
    /// A stream may abandon a placement half way (its connection closed),
    /// after the message took its receive: never placed from there.
    fn place(&self, _src: u32, _head: &[u8], _len: usize) -> Option<Destination> {
        None
    }

    fn place_whole(&self, src: u32, head: &[u8], len: usize) -> Option<Destination> {
        self.engine().end_round();
        self.engine().place_eager(src, head, len)
    }

    fn placed(&self, _ctx: &Context, _src: u32, _head: &[u8], dest: Destination) {
        self.engine().end_round();
        placed_eager(dest);
    }
}

/// What an eager message placed into a matched receive completes it with.
pub(super) struct EagerGuard {
    req: Option<Arc<Req>>,
    /// The envelope's source and tag (the status).
    src: i32,
    tag: i32,
}

impl Drop for EagerGuard {
    /// Abandoned: the link from the sender failed for good in the middle
    /// of the message (`place_whole`'s contract: the sender is failed). The
    /// receive matched a message whose data will not come: it fails as
    /// the sender's other operations do, rather than wait forever.
    fn drop(&mut self) {
        if let Some(req) = self.req.take() {
            let (source, tag) = (self.src, self.tag);
            end_eager(&req, |st| {
                st.source = source;
                st.tag = tag;
                st.error = class::PROC_ABORTED;
            });
        }
    }
}

/// A placed eager message arrived whole: its receive completes.
fn placed_eager(dest: Destination) {
    let Ok(mut guard) = dest.guard.downcast::<EagerGuard>() else {
        return;
    };
    let Some(req) = guard.req.take() else {
        return;
    };
    let (source, tag, bytes) = (guard.src, guard.tag, dest.len);
    end_eager(&req, |st| {
        *st = Status {
            source,
            tag,
            error: 0,
            comm_ctx: 0,
            bytes,
            cancelled: false,
        }
    });
}

/// The placement of an eager message into `req` ended: sets its status and
/// completes it (the placement was its only one: the receive was taken
/// out of its queue for it, where nothing else can reach it).
fn end_eager(req: &Req, status: impl FnOnce(&mut Status)) {
    {
        let mut d = req.d.lock();
        status(&mut d.status);
        d.placing = d.placing.saturating_sub(1);
        debug_assert_eq!(d.placing, 0, "an eager receive is placed once");
        d.complete_when_unplaced = false;
    }
    req.complete();
}

/// What keeps a placed piece's request from completing (see the module doc).
pub(super) struct PlaceGuard {
    req: Option<Arc<Req>>,
}

impl Drop for PlaceGuard {
    /// Abandoned: the request is not written to any more.
    fn drop(&mut self) {
        if let Some(req) = self.req.take() {
            unplace(&req);
        }
    }
}

/// One placement of `req` ended; completes it if that was waited for.
fn unplace(req: &Req) {
    let complete = {
        let mut d = req.d.lock();
        d.placing = d.placing.saturating_sub(1);
        d.placing == 0 && std::mem::take(&mut d.complete_when_unplaced)
    };
    if complete {
        req.complete();
    }
}

/// The `H_DATA` header: receiver request id, offset, total size.
fn data_header(head: &[u8]) -> Option<(u64, u64, u64)> {
    let w = |at: usize| Some(u64::from_le_bytes(head.get(at..at + 8)?.try_into().ok()?));
    Some((w(0)?, w(8)?, w(16)?))
}

impl Engine {
    /// Where the data of the `H_DATA` piece starting `head` goes: the
    /// receive buffer at the piece's offset, when the receive is contiguous
    /// and the whole piece lies within it (anything else is delivered and
    /// checked by `handle_data` as before).
    pub(super) fn place_data(&self, from: u32, head: &[u8], len: usize) -> Option<Destination> {
        let (rreq, off, total) = data_header(head)?;
        let data_len = len.checked_sub(DATA_HDR)?;
        let req = {
            let st = self.lock();
            let slot = st.rndv_recv.get(rreq, from)?;
            if slot.assist.is_some()
                || total != slot.size
                || off.checked_add(data_len as u64)? > total
            {
                return None;
            }
            slot.req.clone()
        };
        let off = usize::try_from(off).ok()?;
        let mut d = req.d.lock();
        let buf = d.recv.as_ref()?;
        if off.checked_add(data_len)? > buf.bytes() {
            return None;
        }
        let addr = buf.contig_addr()?;
        d.placing += 1;
        drop(d);
        Some(Destination {
            at: DATA_HDR,
            dst: addr + off,
            len: data_len,
            guard: Box::new(PlaceGuard { req: Some(req) }),
        })
    }

    /// Where the data of the eager `H_MSG` starting `head` (`len` bytes
    /// with the envelope) goes: the receive it matches now, when that is
    /// the fast path's case of `handle_msg` (the message in its turn,
    /// nothing held back, queues that exist, a source that is the sender)
    /// and the receive is contiguous and large enough. Anything else —
    /// unexpected, early, truncated, noncontiguous, malformed — is left to
    /// `handle_msg` (`None`), which checks and reports as before. The
    /// receive is taken out of its queue and its sequence number counted
    /// here: the transport fills the destination before it delivers
    /// anything else from `from` (`place_whole`), so this is the message's
    /// arrival.
    pub(super) fn place_eager(&self, from: u32, head: &[u8], len: usize) -> Option<Destination> {
        if head.first() != Some(&EAGER) || !self.is_rank(from) {
            return None;
        }
        let (env, env_len) = Env::decode(head.get(..EAGER_ENV_LEN)?)?;
        let data_len = len.checked_sub(env_len)?;
        if !(0..=crate::TAG_UB).contains(&env.tag) {
            return None;
        }
        let mut st = self.lock();
        if !st.has_queues(env.ctx) {
            return None;
        }
        let q = st.queues(env.ctx);
        if let Some(g) = &q.members {
            if !super::matching::sender_is(g, env.src, from) {
                return None;
            }
        }
        let s = from as usize;
        if env.seq != q.expected.get(s).copied().unwrap_or(0) || !q.early.is_empty() {
            return None;
        }
        let i = q.posted.iter().position(|p| env.matches(p.src, p.tag))?;
        let dst = {
            // Under the matching lock: a kept entry may be used here.
            let mut d = q.posted[i].req().d.lock();
            let buf = d.recv.as_ref()?;
            if buf.bytes() < data_len {
                return None;
            }
            let dst = buf.contig_addr()?;
            d.placing += 1;
            dst
        };
        if q.expected.len() <= s {
            q.expected.resize(s + 1, 0);
        }
        q.expected[s] = q.expected[s].wrapping_add(1);
        let req = q.posted.remove(i).expect("index from position").into_arc();
        drop(st);
        Some(Destination {
            at: env_len,
            dst,
            len: data_len,
            guard: Box::new(EagerGuard {
                req: Some(req),
                src: env.src,
                tag: env.tag,
            }),
        })
    }

    /// A placed piece arrived whole: counts it like `handle_data` would
    /// have, without the copy.
    pub(super) fn placed_data(&self, from: u32, head: &[u8], dest: Destination) {
        let Ok(mut guard) = dest.guard.downcast::<PlaceGuard>() else {
            return;
        };
        let Some(req) = guard.req.take() else {
            return;
        };
        let Some((rreq, _, total)) = data_header(head) else {
            return unplace(&req);
        };
        // Still the request we placed for? (Not if it failed meanwhile.)
        let ours = self
            .lock()
            .rndv_recv
            .get(rreq, from)
            .is_some_and(|s| Arc::ptr_eq(&s.req, &req));
        if !ours {
            return unplace(&req);
        }
        let (done, complete_now) = {
            let mut d = req.d.lock();
            d.placing = d.placing.saturating_sub(1);
            d.rndv_got = d.rndv_got.saturating_add(dest.len);
            let done = d.rndv_got as u64 >= total;
            if done {
                let cap = d.recv.as_ref().map_or(0, |b| b.bytes());
                d.status.bytes = usize::try_from(total).unwrap_or(usize::MAX).min(cap);
                if total > cap as u64 {
                    d.status.error = class::TRUNCATE;
                }
            }
            let now = d.placing == 0;
            if done && !now {
                d.complete_when_unplaced = true;
            }
            (done, now)
        };
        self.rndv_piece_counted(rreq, from, &req, done, complete_now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_failed_while_placing_completes_when_the_placement_ends() {
        let req = Arc::new(Req::default());
        req.d.lock().placing = 1;
        let guard = PlaceGuard {
            req: Some(req.clone()),
        };
        peer_failure::fail_request(&req, 1);
        assert!(!req.done(), "the transport may still write its buffer");
        drop(guard);
        assert!(req.done());
        let d = req.d.lock();
        assert_eq!(d.status.error, class::PROC_ABORTED);
        assert_eq!(d.placing, 0);
        assert!(!d.complete_when_unplaced);
    }

    use crate::datatype::{Basic, Datatype};

    /// An eager `H_MSG` from world rank 1 (comm rank 1 of `0..2`) on context 0.
    fn eager_wire(seq: u32, tag: i32, data: &[u8]) -> Vec<u8> {
        let mut w = Env {
            kind: EAGER,
            ctx: 0,
            src: 1,
            tag,
            seq,
            size: data.len() as u64,
            sreq: 0,
            addr: 0,
            pid: 0,
        }
        .encode_eager()
        .to_vec();
        w.extend_from_slice(data);
        w
    }

    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31) ^ seed)
            .collect()
    }

    /// What a transport holding `wire` whole does with a placement: the
    /// data from `at` on copied to the destination, then `placed`.
    fn fill(dest: Destination, wire: &[u8]) {
        assert_eq!(dest.at + dest.len, wire.len());
        // SAFETY: the destination's contract (a receive buffer of at least
        // `dest.len` bytes that nothing else touches until `placed`).
        unsafe {
            std::ptr::copy_nonoverlapping(wire[dest.at..].as_ptr(), dest.dst as *mut u8, dest.len)
        };
        placed_eager(dest);
    }

    /// Placed receives of sizes around the placement threshold, one copy
    /// each, in turn with messages that are not placed (no receive posted
    /// yet: unexpected; a receive too small: truncated) and go through
    /// `handle_msg`: every byte and every status checked, and the sequence
    /// numbers stay in step across both paths.
    #[test]
    fn eager_messages_go_into_posted_receives_and_the_rest_as_before() {
        let e = crate::fuzzing::engine_of_job(2);
        let g = crate::group::Group::new(vec![0, 1]);
        let byte = Datatype::predefined(Basic::U8, "MPI_BYTE");
        let min = 2048; // GW_SHM_PLACE_MIN's default
        let mut seq = 0u32;
        for (k, &len) in [min - 1, min, min + 1, 4096, 32767, 32768, 65536]
            .iter()
            .enumerate()
        {
            let seed = k as u8;
            // Placed: the receive is posted first.
            let data = pattern(len, seed);
            let mut into = vec![0u8; len + 3];
            // SAFETY: `into` outlives the receive (done below).
            let b = unsafe { Buf::bytes_of_mut(&mut into, &byte) };
            let r = e.recv(0, &g, 1, 7, b).expect("posted");
            let wire = eager_wire(seq, 7, &data);
            seq += 1;
            let shown = &wire[..wire.len().min(64)];
            let dest = e.place_eager(1, shown, wire.len()).expect("placed");
            assert_eq!((dest.at, dest.len), (EAGER_ENV_LEN, len));
            assert_eq!(dest.dst, into.as_ptr() as usize);
            assert!(!r.done(), "complete only once the data is in");
            fill(dest, &wire);
            assert!(r.done());
            let s = r.status();
            assert_eq!((s.source, s.tag, s.bytes, s.error), (1, 7, len, 0));
            assert_eq!(&into[..len], &data[..]);
            assert_eq!(
                &into[len..],
                &[0u8; 3],
                "nothing written beyond the message"
            );

            // Unexpected: not placed, queued by the handler, received later.
            let data = pattern(len, seed ^ 0x55);
            let wire = eager_wire(seq, 8, &data);
            seq += 1;
            assert!(e.place_eager(1, &wire[..64], wire.len()).is_none());
            e.handle_msg(1, &wire);
            let mut into = vec![0u8; len];
            // SAFETY: as above.
            let b = unsafe { Buf::bytes_of_mut(&mut into, &byte) };
            let r = e.recv(0, &g, 1, 8, b).expect("matched the queued message");
            assert!(r.done());
            assert_eq!(r.status().bytes, len);
            assert_eq!(into, data);

            // Truncated: a receive one byte short is not placed; the
            // handler fills it and reports the truncation.
            let data = pattern(len, seed ^ 0xaa);
            let mut into = vec![0u8; len - 1];
            // SAFETY: as above.
            let b = unsafe { Buf::bytes_of_mut(&mut into, &byte) };
            let r = e.recv(0, &g, 1, 9, b).expect("posted");
            let wire = eager_wire(seq, 9, &data);
            seq += 1;
            assert!(e.place_eager(1, &wire[..64], wire.len()).is_none());
            assert!(!r.done(), "a refused placement leaves the receive posted");
            e.handle_msg(1, &wire);
            assert!(r.done());
            let s = r.status();
            assert_eq!((s.bytes, s.error), (len - 1, class::TRUNCATE));
            assert_eq!(into, &data[..len - 1]);
        }
        assert_eq!(e.rejected(), 0);
    }

    /// Not placed: a message out of its turn, one with an early one held,
    /// another tag, a sender that is not the envelope's source, a queue
    /// that does not exist, a rendezvous envelope, a short head.
    #[test]
    fn eager_placement_leaves_every_other_case_to_the_handler() {
        let e = crate::fuzzing::engine_of_job(3);
        let g = crate::group::Group::new(vec![0, 1, 2]);
        let byte = Datatype::predefined(Basic::U8, "MPI_BYTE");
        let mut into = vec![0u8; 8192];
        // SAFETY: `into` outlives the receive (cancelled below).
        let b = unsafe { Buf::bytes_of_mut(&mut into, &byte) };
        let r = e.recv(0, &g, 1, 7, b).expect("posted");
        let data = pattern(4096, 1);
        let ahead = eager_wire(1, 7, &data);
        assert!(
            e.place_eager(1, &ahead[..64], ahead.len()).is_none(),
            "out of turn"
        );
        let other_tag = eager_wire(0, 70, &data);
        assert!(e
            .place_eager(1, &other_tag[..64], other_tag.len())
            .is_none());
        let wire = eager_wire(0, 7, &data);
        // World rank 2 is not comm rank 1 (the envelope's source).
        assert!(e.place_eager(2, &wire[..64], wire.len()).is_none());
        assert!(
            e.place_eager(5, &wire[..64], wire.len()).is_none(),
            "no such rank"
        );
        assert!(
            e.place_eager(1, &wire[..20], wire.len()).is_none(),
            "short head"
        );
        let mut rts = wire.clone();
        rts[0] = RTS;
        assert!(e.place_eager(1, &rts[..64], rts.len()).is_none());
        let mut elsewhere = wire.clone();
        elsewhere[4] = 40; // context 40: no queues
        assert!(e
            .place_eager(1, &elsewhere[..64], elsewhere.len())
            .is_none());
        // An early message held: even the one in turn goes the slow way.
        e.handle_msg(1, &ahead);
        assert!(e.place_eager(1, &wire[..64], wire.len()).is_none());
        assert!(!r.done());
        e.handle_msg(1, &wire);
        assert!(r.done());
        assert_eq!(&into[..4096], &data[..]);
        assert_eq!(e.rejected(), 0);
    }

    /// A placement abandoned (the sender's link failed mid-message): the
    /// receive fails instead of waiting.
    #[test]
    fn an_abandoned_eager_placement_fails_its_receive() {
        let e = crate::fuzzing::engine_of_job(2);
        let g = crate::group::Group::new(vec![0, 1]);
        let byte = Datatype::predefined(Basic::U8, "MPI_BYTE");
        let mut into = vec![0u8; 4096];
        // SAFETY: `into` outlives the receive (done below).
        let b = unsafe { Buf::bytes_of_mut(&mut into, &byte) };
        let r = e.recv(0, &g, 1, 7, b).expect("posted");
        let wire = eager_wire(0, 7, &pattern(4096, 3));
        let dest = e.place_eager(1, &wire[..64], wire.len()).expect("placed");
        assert!(!r.done());
        drop(dest);
        assert!(r.done());
        assert_eq!(r.status().error, class::PROC_ABORTED);
        assert_eq!(r.d.lock().placing, 0);
    }

    #[test]
    fn a_request_not_placing_fails_at_once() {
        let req = Arc::new(Req::default());
        peer_failure::fail_request(&req, 1);
        assert!(req.done());
    }
}
