//! The handshake: HELLO, the stateless CHALLENGE with its cookie, PROOF
//! (see the protocol in the parent module).

use super::*;

impl<A: Copy + Eq + Hash + Debug> Endpoint<A> {
    /// Answers a HELLO statelessly (as QUIC's Retry): our nonce is a
    /// cookie, `stamp | MAC(key, stamp | their nonce | ids | address)`, so
    /// the acceptor keeps nothing per HELLO — a flood of forged HELLOs has
    /// no table to fill and no real handshake to evict — and the PROOF that
    /// echoes it shows the sender received our challenge at that address.
    pub(super) fn on_hello(&mut self, now: Instant, from: A, src: u32, d: &[u8]) {
        let Some(theirs) = nonce_at(d, HDR).filter(|_| d.len() >= HELLO_LEN) else {
            self.counters.garbage += 1;
            return;
        };
        if self.peers.get(&src).is_some_and(|p| p.failed.is_some()) {
            return;
        }
        let (me, secret) = (self.cfg.me, self.cfg.secret);
        let us = self.stamp_clock(now);
        self.last_stamp = us.max(self.last_stamp.saturating_add(1));
        let mine = self.cookie(self.last_stamp, from, src, &theirs);
        let proof = auth::proof(&secret, Role::Acceptor, &mine, &theirs, me, src);
        let mut b = Vec::with_capacity(CHALLENGE_LEN);
        header(&mut b, T_CHALLENGE, me, src);
        b.extend_from_slice(&theirs);
        b.extend_from_slice(&mine);
        b.extend_from_slice(&proof);
        // Holds by construction (HELLO_LEN): the check keeps it so.
        if b.len() > AMPLIFICATION_LIMIT.saturating_mul(d.len()) {
            self.counters.garbage += 1;
            return;
        }
        self.push_ctl((from, b));
    }

    /// Microseconds from the first handshake to `now` (the cookies' clock).
    pub(super) fn stamp_clock(&mut self, now: Instant) -> u64 {
        let t0 = *self.cookie_t0.get_or_insert(now);
        u64::try_from(now.saturating_duration_since(t0).as_micros()).unwrap_or(u64::MAX)
    }

    /// The challenge nonce for a HELLO with nonce `theirs` from `src` at
    /// `from`, issued at `stamp`.
    pub(super) fn cookie(
        &self,
        stamp: u64,
        from: A,
        src: u32,
        theirs: &[u8; NONCE_LEN],
    ) -> [u8; NONCE_LEN] {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.cookie_key).expect("any key length");
        mac.update(b"gridwire-udp-cookie");
        mac.update(&stamp.to_le_bytes());
        mac.update(theirs);
        mac.update(&src.to_le_bytes());
        mac.update(&self.cfg.me.to_le_bytes());
        from.hash(&mut MacWriter(&mut mac));
        let tag = mac.finalize().into_bytes();
        let mut n = [0u8; NONCE_LEN];
        n[..8].copy_from_slice(&stamp.to_le_bytes());
        n[8..].copy_from_slice(&tag[..NONCE_LEN - 8]);
        n
    }

    /// The stamp of `mine` if it is a cookie we issued, to `from`, for
    /// this HELLO, recently enough.
    pub(super) fn cookie_stamp(
        &mut self,
        now: Instant,
        from: A,
        src: u32,
        theirs: &[u8; NONCE_LEN],
        mine: &[u8; NONCE_LEN],
    ) -> Option<u64> {
        let stamp = u64::from_le_bytes(mine[..8].try_into().ok()?);
        if self.cookie_t0.is_none() || stamp == 0 || stamp > self.last_stamp {
            return None;
        }
        let age = self.stamp_clock(now).saturating_sub(stamp);
        if u128::from(age) > self.cookie_lifetime.as_micros() {
            return None;
        }
        (self.cookie(stamp, from, src, theirs) == *mine).then_some(stamp)
    }

    pub(super) fn on_challenge(&mut self, now: Instant, from: A, src: u32, d: &[u8]) {
        let (Some(echo), Some(theirs), Some(proof)) = (
            nonce_at(d, HDR),
            nonce_at(d, HDR + NONCE_LEN),
            d.get(HDR + 2 * NONCE_LEN..)
                .filter(|p| p.len() == PROOF_LEN),
        ) else {
            self.counters.garbage += 1;
            return;
        };
        let (me, secret, rto) = (self.cfg.me, self.cfg.secret, self.cfg.initial_rto);
        let Some(p) = self
            .peers
            .get_mut(&src)
            .filter(|p| p.failed.is_none() && p.addr == Some(from))
        else {
            self.counters.unauthenticated += 1;
            return;
        };
        let ours = match &p.hs {
            Hs::Hello { nonce, .. } if *nonce == echo => *nonce,
            // A duplicate challenge: our PROOF may have been lost; answer again.
            Hs::Proof {
                nonce, theirs: t, ..
            } if *nonce == echo && *t == theirs => *nonce,
            _ => {
                self.counters.unauthenticated += 1; // stale or unsolicited
                return;
            }
        };
        if !auth::verify(&secret, Role::Acceptor, &theirs, &ours, src, me, proof) {
            self.counters.auth_failed += 1;
            return;
        }
        p.verified = true;
        if !p.confirmed {
            let tries = if let Hs::Proof { tries, .. } = p.hs {
                tries
            } else {
                0
            };
            p.hs = Hs::Proof {
                nonce: ours,
                theirs,
                next: now + rto,
                tries,
            };
        }
        let b = proof_dgram(&secret, me, src, &ours, &theirs);
        self.push_ctl((from, b));
    }

    /// The connector's answer to our challenge. Accepted once per cookie:
    /// the handshake with the newest stamp wins, older or equal stamps are
    /// retired (a duplicate of the accepted PROOF from the peer's own
    /// address is only re-acknowledged: the connector resends it until it
    /// hears from us). Accepting binds the peer to `from` — the address our
    /// challenge went to (the cookie says so) — which is how an
    /// authenticated peer moves: never by a datagram alone.
    pub(super) fn on_proof(&mut self, now: Instant, from: A, src: u32, d: &[u8]) {
        let (Some(theirs), Some(mine), Some(proof)) = (
            nonce_at(d, HDR),
            nonce_at(d, HDR + NONCE_LEN),
            d.get(HDR + 2 * NONCE_LEN..)
                .filter(|p| p.len() == PROOF_LEN),
        ) else {
            self.counters.garbage += 1;
            return;
        };
        let (me, secret) = (self.cfg.me, self.cfg.secret);
        if self.peers.get(&src).is_some_and(|p| p.failed.is_some()) {
            return;
        }
        let Some(stamp) = self.cookie_stamp(now, from, src, &theirs, &mine) else {
            self.counters.unauthenticated += 1;
            return;
        };
        if !auth::verify(&secret, Role::Connector, &theirs, &mine, src, me, proof) {
            self.counters.auth_failed += 1;
            return;
        }
        let p = self.peer_mut(src);
        if let Some((last, t, m)) = p.accepted {
            if stamp <= last {
                if (t, m) == (theirs, mine) && p.addr == Some(from) {
                    p.ack_now = true;
                } else {
                    self.counters.replayed += 1;
                }
                return;
            }
        }
        let moved = p.confirmed && p.addr != Some(from);
        // Both sides have now proved knowledge of the secret to each other.
        p.accepted = Some((stamp, theirs, mine));
        p.addr = Some(from);
        p.verified = true;
        p.confirmed = true;
        p.hs = Hs::Done;
        p.ack_now = true; // tells the connector we accepted its proof
        if moved {
            self.counters.migrations += 1;
        }
    }
}

pub(super) fn hello_dgram(me: u32, peer: u32, nonce: &[u8; NONCE_LEN]) -> Vec<u8> {
    let mut b = Vec::with_capacity(HELLO_LEN);
    header(&mut b, T_HELLO, me, peer);
    b.extend_from_slice(nonce);
    b.resize(HELLO_LEN, 0);
    b
}

/// Feeds what `Hash` writes (an address) into a MAC.
pub(super) struct MacWriter<'a>(&'a mut Hmac<Sha256>);

impl std::hash::Hasher for MacWriter<'_> {
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
    fn finish(&self) -> u64 {
        0
    }
}

pub(super) fn proof_dgram(
    secret: &[u8; 32],
    me: u32,
    peer: u32,
    ours: &[u8; NONCE_LEN],
    theirs: &[u8; NONCE_LEN],
) -> Vec<u8> {
    let proof = auth::proof(secret, Role::Connector, ours, theirs, me, peer);
    let mut b = Vec::with_capacity(HDR + 2 * NONCE_LEN + PROOF_LEN);
    header(&mut b, T_PROOF, me, peer);
    b.extend_from_slice(ours);
    b.extend_from_slice(theirs);
    b.extend_from_slice(&proof);
    b
}
