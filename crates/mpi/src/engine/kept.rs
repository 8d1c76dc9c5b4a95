//! Receives whose request the matching queue borrows instead of counting a
//! reference ([`Engine::recv_kept`]; the rule in `matching::Posted`): how a
//! caller gives its reference up early ([`Engine::release_recv`]), and a
//! guard for receives held on a stack ([`KeptRecv`]).

use super::*;

impl Engine {
    /// [`Engine::recv`] whose request the matching queue does not count a
    /// reference of while it waits: the caller's reference keeps it (see
    /// `matching::Posted`). Two locked instructions fewer per message (the
    /// `Arc` clone into the queue and its drop after delivery).
    ///
    /// # Safety
    /// The caller keeps a reference to the returned request (the `Arc` or a
    /// clone) until the request is done (`Req::done`), or hands one over
    /// with [`Engine::release_recv`] (`MPI_Request_free` of a pending
    /// receive). Dropping the last reference of a pending receive otherwise
    /// leaves the queue a dangling pointer.
    #[inline]
    pub unsafe fn recv_kept(
        &self,
        ctx: u64,
        group: &Arc<Group>,
        src: i32,
        tag: i32,
        buf: Buf,
    ) -> Result<Arc<Req>> {
        // SAFETY: forwarded contract.
        unsafe { self.recv_as(ctx, group, src, tag, buf, true) }
    }

    /// The caller of a receive posted with [`Engine::recv_kept`] gives up
    /// its reference `req` before the request is done (`MPI_Request_free`):
    /// a queue entry still waiting takes it over, so the receive goes on
    /// (its data lands in the buffer, as the standard says) without a
    /// dangling pointer. A request matched already holds its own references
    /// where it waits (rendezvous) or is done. Also fine for a receive
    /// posted by [`Engine::recv`] (its entry then already owns one).
    pub fn release_recv(&self, req: Arc<Req>) {
        if req.done() {
            return;
        }
        let mut st = self.lock();
        // Under the matching lock (see `deliver_matched`).
        let ctx = req.d.lock().ctx;
        if !st.has_queues(ctx) {
            return;
        }
        let q = st.queues(ctx);
        if let Some(p) = q.posted.iter_mut().find(|p| p.is(&req)) {
            p.adopt(req);
        }
        // Else it was matched: an eager message was delivered under the
        // lock (done), a rendezvous counted its own reference.
    }
}

/// A receive posted with [`Engine::recv_kept`] held on a stack: should it
/// be dropped before it is done (an unwinding panic), its reference goes to
/// [`Engine::release_recv`] instead of leaving the queue a dangling pointer.
pub struct KeptRecv<'a> {
    engine: &'a Engine,
    req: Option<Arc<Req>>,
}

impl<'a> KeptRecv<'a> {
    pub fn new(engine: &'a Engine, req: Arc<Req>) -> KeptRecv<'a> {
        KeptRecv {
            engine,
            req: Some(req),
        }
    }

    /// The request, for a caller that saw it done (or keeps the contract
    /// of [`Engine::recv_kept`] itself from here on).
    pub fn into_inner(mut self) -> Arc<Req> {
        self.req.take().expect("taken only here")
    }
}

impl std::ops::Deref for KeptRecv<'_> {
    type Target = Arc<Req>;
    fn deref(&self) -> &Arc<Req> {
        self.req.as_ref().expect("taken only by into_inner")
    }
}

impl Drop for KeptRecv<'_> {
    fn drop(&mut self) {
        if let Some(r) = self.req.take() {
            self.engine.release_recv(r);
        }
    }
}
