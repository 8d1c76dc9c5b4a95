//! Timers and what goes out: retransmission timeouts, handshake retries,
//! the retry limit, pacing of new and resent data.

use super::*;

impl<A: Copy + Eq + Hash + Debug> Endpoint<A> {
    /// Runs timers: handshake retries, retransmission timeouts, the retry limit.
    pub fn handle_timeout(&mut self, now: Instant) {
        let grace = self.release_grace();
        let quiet: Vec<u32> = self
            .peers
            .iter()
            .filter(|(_, p)| p.departed.is_some_and(|t| now >= t + grace))
            .map(|(&id, _)| id)
            .collect();
        for id in quiet {
            self.drop_peer(id);
        }
        let cfg = self.cfg.clone();
        let mut failures = Vec::new();
        let mut retries = Vec::new();
        for (&id, p) in self.peers.iter_mut() {
            if p.failed.is_some() {
                continue;
            }
            // Handshake retries (exponential backoff from the initial timeout).
            match p.hs.clone() {
                Hs::Hello { nonce, next, tries } if now >= next => {
                    if tries >= cfg.retries {
                        failures.push((id, format!(
                            "rank {id} did not complete authentication after {} attempts: it is dead, unreachable, or does not share the job secret",
                            tries + 1
                        )));
                        continue;
                    }
                    p.hs = Hs::Hello {
                        nonce,
                        next: now + backoff(cfg.initial_rto, tries + 1, cfg.max_rto),
                        tries: tries + 1,
                    };
                    if let Some(a) = p.addr {
                        retries.push((a, hello_dgram(cfg.me, id, &nonce)));
                    }
                }
                Hs::Proof {
                    nonce,
                    theirs,
                    next,
                    tries,
                } if now >= next && !p.confirmed => {
                    if tries >= cfg.retries {
                        failures.push((
                            id,
                            format!(
                                "rank {id} never confirmed authentication after {} attempts",
                                tries + 1
                            ),
                        ));
                        continue;
                    }
                    p.hs = Hs::Proof {
                        nonce,
                        theirs,
                        next: now + backoff(cfg.initial_rto, tries + 1, cfg.max_rto),
                        tries: tries + 1,
                    };
                    if let Some(a) = p.addr {
                        retries.push((a, proof_dgram(&cfg.secret, cfg.me, id, &nonce, &theirs)));
                    }
                }
                _ => {}
            }
            if p.loss_time.is_some_and(|t| now >= t) {
                p.detect_losses(now, &cfg);
            }
            // Retransmission timeout.
            if let Some(deadline) = p.rto_deadline(&cfg) {
                if now >= deadline {
                    self.counters.timeouts += 1;
                    p.backoff += 1;
                    if p.backoff > cfg.retries {
                        let waited = (0..p.backoff)
                            .map(|i| backoff(p.rto, i, cfg.max_rto))
                            .sum::<Duration>();
                        failures.push((id, format!(
                            "rank {id} is unreachable: no acknowledgement after {} retransmissions over {:.1} s (peer dead or network down)",
                            cfg.retries,
                            waited.as_secs_f64()
                        )));
                        continue;
                    }
                    // Presume lost what has been in flight longer than the
                    // timeout that just expired (at least the oldest, sent
                    // again as a probe), not the whole window: datagrams sent
                    // recently may well arrive. Marking only the oldest would
                    // cost one timeout per lost datagram when the window is
                    // blocked behind them (nothing newer gets acked).
                    let expired = backoff(p.rto, p.backoff - 1, cfg.max_rto);
                    let mut first = true;
                    while let Some(seq) = p.oldest_in_flight() {
                        let Some(s) = p.pkt(seq) else { break };
                        if !first && now.saturating_duration_since(s.sent_at) < expired {
                            break;
                        }
                        first = false;
                        s.in_flight = false;
                        let len = s.body.len() - 8;
                        p.in_flight -= len.min(p.in_flight);
                        p.lost.insert(seq);
                        p.txmap.pop_first();
                    }
                    p.probe = true;
                    p.rto_base = Some(now);
                    p.rto_tx = Some(p.next_tx);
                    // The first timeout is a tail-loss probe (QUIC's PTO):
                    // usually the last datagrams of a burst were lost and
                    // nothing after them could reveal it. Only a second
                    // consecutive timeout says the path is congested or gone.
                    if p.backoff >= 2 {
                        p.cc.on_timeout(now);
                    }
                }
            }
        }
        for d in retries {
            self.push_ctl(d);
        }
        for (id, why) in failures {
            self.fail(id, why);
        }
    }

    /// The next instant at which [`handle_timeout`](Self::handle_timeout) or
    /// [`poll_transmit`](Self::poll_transmit) has work.
    pub fn poll_timeout(&mut self) -> Option<Instant> {
        self.deadline(true)
    }

    /// Like [`poll_timeout`](Self::poll_timeout) without the delayed-ack
    /// deadlines: what a sleeping process should wake up for. A delayed ack
    /// only saves a datagram when a reply comes first; waking up for each
    /// would put timer calls on the request/reply path, so it goes out at
    /// the next wake-up instead (the retransmission timeout's floor allows for
    /// that).
    pub fn poll_wakeup(&mut self) -> Option<Instant> {
        self.deadline(false)
    }

    fn deadline(&mut self, acks: bool) -> Option<Instant> {
        let cfg = self.cfg.clone();
        let grace = self.release_grace();
        let mut t: Option<Instant> = None;
        for p in self.peers.values_mut() {
            if p.failed.is_some() {
                continue;
            }
            if let Some(quiet) = p.departed {
                let c = quiet + grace;
                t = Some(t.map_or(c, |t| t.min(c)));
            }
            let hs = match p.hs {
                Hs::Hello { next, .. } => Some(next),
                Hs::Proof { next, .. } if !p.confirmed => Some(next),
                _ => None,
            };
            // The pacer's clock, when it alone holds back a datagram.
            let pace = match p.pace_next {
                Some(t) if p.established() => p
                    .sendable(cfg.depth)
                    .filter(|&(_, _, probe)| !probe)
                    .map(|_| t),
                _ => None,
            };
            let ack = p.ack_due.filter(|_| acks);
            for c in [hs, p.rto_deadline(&cfg), ack, p.loss_time, pace]
                .into_iter()
                .flatten()
            {
                t = Some(t.map_or(c, |t| t.min(c)));
            }
        }
        t
    }

    /// Writes the next datagram to send into `buf` and returns its destination.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<A> {
        if let Some((a, b)) = self.ctl.pop_front() {
            buf.clear();
            buf.extend_from_slice(&b);
            self.counters.dgrams_sent += 1;
            return Some(a);
        }
        let n = self.order.len();
        for k in 0..n {
            let idx = (self.cursor + k) % n;
            let id = self.order[idx];
            let Some(p) = self.peers.get_mut(&id) else {
                continue;
            };
            let Some(addr) = p.addr else { continue };
            if p.failed.is_some() || !p.verified {
                continue;
            }
            if p.established() {
                if let Some(seq) = self.next_data(id, now) {
                    let p = self.peers.get_mut(&id).expect("present");
                    let cum = p.rcv_next;
                    if p.ooo.is_empty() {
                        p.ack_now = false;
                        p.ack_due = None;
                        p.unacked_rx = 0;
                    }
                    let Some(s) = p.pkt(seq) else { continue };
                    header(buf, T_DATA, self.cfg.me, id);
                    buf.extend_from_slice(&cum.to_le_bytes());
                    buf.extend_from_slice(&seq.to_le_bytes());
                    buf.extend_from_slice(&s.body);
                    self.cursor = (idx + 1) % n;
                    self.counters.dgrams_sent += 1;
                    return Some(addr);
                }
            }
            let p = self.peers.get_mut(&id).expect("present");
            if p.ack_now || p.ack_due.is_some_and(|t| t <= now) {
                p.ack_now = false;
                p.ack_due = None;
                p.unacked_rx = 0;
                header(buf, T_ACK, self.cfg.me, id);
                buf.extend_from_slice(&p.rcv_next.to_le_bytes());
                let at = buf.len();
                buf.push(0);
                let room = ((self.cfg.dgram - HDR - 9) / 8).min(MAX_SACK);
                let base = p.rcv_next;
                let newest = p.ooo_ranges.containing(p.rcv_last);
                let mut runs = 0usize;
                let mut truncated = false;
                for (a, b) in newest
                    .into_iter()
                    .chain(p.ooo_ranges.iter().filter(|r| Some(*r) != newest))
                {
                    if runs == room {
                        truncated = true;
                        break;
                    }
                    // Within the window (< 2^20 datagrams), so the offsets fit.
                    buf.extend_from_slice(&((a - base).min(u32::MAX as u64) as u32).to_le_bytes());
                    buf.extend_from_slice(&((b - a).min(u32::MAX as u64) as u32).to_le_bytes());
                    runs += 1;
                }
                buf[at] = runs as u8 | if truncated { 0x80 } else { 0 };
                self.cursor = (idx + 1) % n;
                self.counters.dgrams_sent += 1;
                return Some(addr);
            }
        }
        None
    }

    /// Picks the next datagram for an established peer (a lost one first, then
    /// new data) if the congestion and sequence windows allow, and records its
    /// transmission.
    fn next_data(&mut self, id: u32, now: Instant) -> Option<u64> {
        let (depth, mss) = (self.cfg.depth, self.cfg.mss());
        let p = self.peers.get_mut(&id)?;
        let (seq, len, probe) = p.sendable(depth)?;
        if !probe && p.pace_next.is_some_and(|t| t > now) {
            return None;
        }
        p.paced(now, len, mss);
        p.probe = false;
        if p.in_flight == 0 {
            p.rto_base = Some(now);
        }
        let retrans = seq < p.next_new;
        if retrans {
            p.lost.remove(&seq);
            self.counters.retransmits += 1;
        } else {
            p.next_new += 1;
        }
        let tx = p.next_tx;
        p.next_tx += 1;
        let s = p.pkt(seq)?;
        s.tx = tx;
        s.sent_at = now;
        s.in_flight = true;
        s.retransmitted |= retrans;
        p.txmap.insert(tx, seq);
        p.in_flight += len;
        Some(seq)
    }
}
