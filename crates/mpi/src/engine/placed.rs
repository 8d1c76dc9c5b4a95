//! Rendezvous data read by the transport straight into the receive buffer.
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
            if total != slot.size || off.checked_add(data_len as u64)? > total {
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

    #[test]
    fn a_request_not_placing_fails_at_once() {
        let req = Arc::new(Req::default());
        peer_failure::fail_request(&req, 1);
        assert!(req.done());
    }
}
