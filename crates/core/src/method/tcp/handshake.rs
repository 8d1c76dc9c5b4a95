//! Authentication of a new connection and the simultaneous-connect tie.

use super::*;

impl TcpMethod {
    /// Runs the handshake and frame parser over the buffered bytes.
    pub(super) fn process(
        &self,
        conn: &Arc<Conn>,
        inp: &mut In,
        sink: &mut dyn Sink,
    ) -> std::result::Result<usize, String> {
        let mut delivered = 0;
        loop {
            let avail = inp.rx.end - inp.rx.start;
            match inp.state {
                HsState::Connecting => {
                    // Unreachable for a well-behaved peer: readable skips
                    // connects in progress, and an acceptor speaks only
                    // after our hello.
                    if avail > 0 {
                        return Err("the peer spoke before our hello".into());
                    }
                    return Ok(delivered);
                }
                HsState::AwaitHello => {
                    if avail < HELLO_LEN {
                        return Ok(delivered);
                    }
                    let h = &inp.rx.buf[inp.rx.start..inp.rx.start + HELLO_LEN];
                    if &h[..4] != MAGIC {
                        return Err(self.refuse(conn, "not a gridwire connection (bad magic)"));
                    }
                    let their_id = u32::from_le_bytes(h[4..8].try_into().unwrap());
                    let wanted = u32::from_le_bytes(h[8..12].try_into().unwrap());
                    let their_nonce: [u8; NONCE_LEN] = h[12..12 + NONCE_LEN].try_into().unwrap();
                    if their_id >= self.size {
                        return Err(self.refuse(
                            conn,
                            &format!(
                                "claims rank {their_id}, but the job has {} ranks",
                                self.size
                            ),
                        ));
                    }
                    if wanted != self.me {
                        return Err(
                            self.refuse(conn, &format!("connection meant for rank {wanted}"))
                        );
                    }
                    inp.rx.start += HELLO_LEN;
                    let mine = auth::try_nonce().map_err(|e| self.refuse(conn, &e.to_string()))?;
                    let proof = auth::proof(
                        &self.secret,
                        Role::Acceptor,
                        &mine,
                        &their_nonce,
                        self.me,
                        their_id,
                    );
                    let mut reply = [0u8; CHALLENGE_LEN];
                    reply[..NONCE_LEN].copy_from_slice(&mine);
                    reply[NONCE_LEN..NONCE_LEN + PROOF_LEN].copy_from_slice(&proof);
                    reply[CHALLENGE_LEN - 1] = self.tie_break(their_id);
                    // The peer id is provisional until its proof arrives.
                    conn.peer.store(their_id, Ordering::Relaxed);
                    inp.my_nonce = mine;
                    inp.state = HsState::AwaitProof { their_nonce };
                    conn.write_raw(&reply)
                        .map_err(|e| format!("handshake write: {e}"))?;
                }
                HsState::AwaitProof { their_nonce } => {
                    if avail < PROOF_LEN {
                        return Ok(delivered);
                    }
                    let their_id = conn.peer.load(Ordering::Relaxed);
                    let ok = auth::verify(
                        &self.secret,
                        Role::Connector,
                        &their_nonce,
                        &inp.my_nonce,
                        their_id,
                        self.me,
                        &inp.rx.buf[inp.rx.start..inp.rx.start + PROOF_LEN],
                    );
                    if !ok {
                        return Err(self.refuse(conn, "wrong job secret"));
                    }
                    inp.rx.start += PROOF_LEN;
                    inp.state = HsState::Ready;
                    self.handshake_over(conn);
                    conn.out.lock().ready = true;
                    self.by_peer
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .entry(their_id)
                        .or_insert_with(|| conn.clone());
                    self.merge(their_id);
                    if self.verbose >= 2 {
                        crate::say!(
                            "gw[{}]: tcp: accepted authenticated connection from rank {their_id}",
                            self.me
                        );
                    }
                }
                HsState::AwaitChallenge { my_nonce } => {
                    if avail < CHALLENGE_LEN {
                        return Ok(delivered);
                    }
                    let their_id = conn.peer.load(Ordering::Relaxed);
                    let c = &inp.rx.buf[inp.rx.start..inp.rx.start + CHALLENGE_LEN];
                    let their_nonce: [u8; NONCE_LEN] = c[..NONCE_LEN].try_into().unwrap();
                    let flags = c[CHALLENGE_LEN - 1];
                    let ok = auth::verify(
                        &self.secret,
                        Role::Acceptor,
                        &their_nonce,
                        &my_nonce,
                        their_id,
                        self.me,
                        &c[NONCE_LEN..NONCE_LEN + PROOF_LEN],
                    );
                    if !ok {
                        return Err(self.refuse(conn, "peer does not know the job secret"));
                    }
                    inp.rx.start += CHALLENGE_LEN;
                    inp.state = HsState::Ready;
                    self.handshake_over(conn);
                    let proof = auth::proof(
                        &self.secret,
                        Role::Connector,
                        &my_nonce,
                        &their_nonce,
                        self.me,
                        their_id,
                    );
                    // The proof must precede any queued data: put it at the front.
                    let mut out = conn.out.lock();
                    if flags & USE_MINE != 0 && !out.hold {
                        // The peer keeps its own connection to us: ours only
                        // finishes the handshake (so the peer sees a clean one).
                        out.hold = true;
                        out.awaiting_pair = true;
                        self.holding.fetch_add(1, Ordering::Relaxed);
                        let off = out.off;
                        let pending = out.buf.split_off(off);
                        out.held.extend_from_slice(&pending);
                        out.buf.clear();
                        out.off = 0;
                    }
                    let off = out.off;
                    let pending = out.buf.split_off(off);
                    out.buf.clear();
                    out.off = 0;
                    out.buf.extend_from_slice(&proof);
                    out.buf.extend_from_slice(&pending);
                    out.ready = true;
                    let hold = out.hold;
                    if conn.queued.swap(out.buf.len(), Ordering::Relaxed) == 0 {
                        self.queued_conns.fetch_add(1, Ordering::Relaxed);
                    }
                    drop(out);
                    self.flush(conn);
                    if hold {
                        self.merge(their_id);
                    }
                }
                HsState::Ready => {
                    let peer = conn.peer.load(Ordering::Relaxed);
                    if self.try_place(peer, inp, sink) {
                        // The rest of this frame is read to its placement.
                        return Ok(delivered);
                    }
                    match inp.rx.next_frame(self.max_msg) {
                        Ok(Some(msg)) => {
                            sink.deliver(peer, &inp.rx.buf[msg]);
                            delivered += 1;
                        }
                        Ok(None) => return Ok(delivered),
                        Err(why) => {
                            return Err(format!("rank {peer} broke the tcp framing: {why}"))
                        }
                    }
                }
            }
        }
    }

    /// Acceptor side of the tie (see the module doc): we got a hello from
    /// `peer`; returns the challenge flags. If we are connecting to `peer`
    /// too, ours is the pair's connection when it already carried payload or
    /// when we are the lower context: we answer `USE_MINE`, and the peer
    /// (once our proof checks out) holds its payload for ours. Otherwise we
    /// answer normally and the peer, being the lower, answers our own hello
    /// with `USE_MINE`. Nothing is decided on the unauthenticated hello
    /// alone: a forged one can at most receive a flag it cannot use.
    pub(super) fn tie_break(&self, peer: u32) -> u8 {
        if peer == self.me {
            // Our own connection to ourselves: both ends are one connection.
            return 0;
        }
        let Some(own) = self
            .by_peer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&peer)
            .cloned()
        else {
            return 0;
        };
        // A connect still in progress may yet fail: the peer must not hold
        // its payload for a connection that might never exist. Both
        // connections then stay, or the peer's wins when ours says hello.
        if !own.outgoing || own.redirect.get().is_some() || own.established.get().is_none() {
            return 0;
        }
        let out = own.out.lock();
        if !out.hold && (out.committed() || self.me < peer) {
            USE_MINE
        } else {
            0
        }
    }

    /// The connection we made to `peer`, if it is still the one our sends
    /// use (not yet redirected to the connection `peer` made to us).
    fn own_connection_to(&self, peer: u32) -> Option<Arc<Conn>> {
        let own = self
            .by_peer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&peer)
            .cloned()?;
        (own.outgoing && own.redirect.get().is_none()).then_some(own)
    }

    /// Our connection to `peer` that holds output for the pair's connection
    /// (it lost the tie), wherever the peer table points. The table need not
    /// name it: when another thread's connect to `peer` raced with the
    /// authentication of the connection `peer` made to us, the table took
    /// the accepted one first and our connect went on in the background, to
    /// lose the tie later. Found by the table alone, such a connection would
    /// hold (and count as pending output) forever and `finalize` would wait
    /// for it.
    fn holding_connection_to(&self, peer: u32) -> Option<Arc<Conn>> {
        if let Some(own) = self.own_connection_to(peer) {
            if own.out.lock().awaiting_pair {
                return Some(own);
            }
        }
        self.conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .find(|c| {
                c.outgoing
                    && c.peer.load(Ordering::Relaxed) == peer
                    && c.redirect.get().is_none()
                    && c.out.lock().awaiting_pair
            })
            .cloned()
    }

    /// Moves the payload held by our connection to `peer` (if it lost the
    /// tie) to the authenticated connection `peer` made to us, in order, and
    /// points later sends there.
    pub(super) fn merge(&self, peer: u32) {
        let Some(own) = self.holding_connection_to(peer) else {
            return;
        };
        let winner = self
            .conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .find(|c| !c.outgoing && c.peer.load(Ordering::Relaxed) == peer && c.out.lock().ready)
            .cloned();
        let Some(winner) = winner else { return };
        let mut out = own.out.lock();
        if !out.hold {
            return;
        }
        let held = std::mem::take(&mut out.held);
        // Set while holding `own.out`: a sender that takes that lock after
        // this sees the redirect and goes to `winner`, behind `held`.
        let _ = own.redirect.set(winner.clone());
        if std::mem::take(&mut out.awaiting_pair) {
            self.holding.fetch_sub(1, Ordering::Relaxed);
        }
        {
            let mut w = winner.out.lock();
            if !held.is_empty() {
                let was_empty = w.off == w.buf.len();
                w.buf.extend_from_slice(&held);
                winner.queued.store(w.buf.len() - w.off, Ordering::Relaxed);
                if was_empty {
                    self.queued_conns.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        drop(out);
        self.by_peer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(peer, winner.clone());
        self.flush(&winner);
        self.merged.fetch_add(1, Ordering::Relaxed);
        if self.verbose >= 2 {
            crate::say!(
                "gw[{}]: tcp: both ends connected; using the connection rank {peer} made",
                self.me
            );
        }
    }

    /// The connection `peer` made to us closed before it authenticated. If
    /// our own connection to `peer` holds output for it (it lost the tie),
    /// no other connection from `peer` can take that output over: it goes
    /// out on our own connection, in order, behind our proof. That is safe
    /// whatever closed: `peer` delivers frames from any authenticated
    /// connection, and nothing of ours went anywhere else yet (no
    /// redirect). The pair then keeps two connections, one per direction,
    /// as when the tie could not be settled. An impostor claiming to be
    /// `peer` can cause at most that.
    pub(super) fn release_held(&self, peer: u32) {
        let Some(own) = self.holding_connection_to(peer) else {
            return;
        };
        // Another connection from `peer` still authenticating may yet take
        // the output over.
        let pair_pending = self
            .conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .any(|c| {
                !c.outgoing
                    && c.peer.load(Ordering::Relaxed) == peer
                    && c.in_handshake.load(Ordering::Relaxed)
            });
        if pair_pending {
            return;
        }
        let mut out = own.out.lock();
        if !std::mem::take(&mut out.awaiting_pair) {
            return;
        }
        self.holding.fetch_sub(1, Ordering::Relaxed);
        out.hold = false;
        let held = std::mem::take(&mut out.held);
        let was_empty = out.off == out.buf.len();
        out.buf.extend_from_slice(&held);
        let queued = out.buf.len() - out.off;
        own.queued.store(queued, Ordering::Relaxed);
        if was_empty && queued > 0 {
            self.queued_conns.fetch_add(1, Ordering::Relaxed);
        }
        drop(out);
        // Later sends to `peer` go here too (the table may have named the
        // connection that just closed).
        self.by_peer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(peer)
            .or_insert_with(|| own.clone());
        self.flush(&own);
        if self.verbose >= 1 {
            crate::say!(
                "gw[{}]: tcp: the connection rank {peer} made to us closed before it \
                 authenticated; output for rank {peer} goes over our own connection",
                self.me
            );
        }
    }

    /// Logs and counts a connection that failed authentication. As acceptor
    /// we refuse a connection; as connector we abandon one to a peer that
    /// could not prove it knows the secret.
    pub(super) fn refuse(&self, conn: &Arc<Conn>, why: &str) -> String {
        let n = self.refused.fetch_add(1, Ordering::Relaxed) + 1;
        if !conn.outgoing {
            // Anyone can open connections: at most one line a second.
            self.unauthenticated_notice.say(self.me, || {
                format!(
                    "refused TCP connection (claims to be {}): authentication failed: \
                     {why}; nothing delivered; {n} refused so far",
                    conn.peer_name()
                )
            });
        } else {
            crate::say!(
                "gw[{}]: tcp: abandoned TCP connection to {}: authentication failed: {why}",
                self.me,
                conn.peer_name()
            );
        }
        format!("authentication failed: {why}")
    }
}
