//! What comes in after the handshake: acks (the sender's scoreboard) and
//! data (in-order delivery, out-of-order ranges, reassembly).

use super::*;

impl<A: Copy + Eq + Hash + Debug> Endpoint<A> {
    pub(super) fn on_ack_dgram(&mut self, now: Instant, src: u32, d: &[u8]) -> Result<(), String> {
        let cum = u64_at(d, HDR).ok_or("short ack")?;
        let count = *d.get(HDR + 8).ok_or("short ack")?;
        // The top bit says the receiver had more ranges than fit.
        let (n, truncated) = ((count & 0x7f) as usize, count & 0x80 != 0);
        if n > MAX_SACK || d.len() != HDR + 9 + 8 * n {
            return Err("malformed ack".into());
        }
        // Each range: (offset of its start above `cum`, length), u32 each.
        let mut ranges = [(0u64, 0u64); MAX_SACK];
        for (i, r) in ranges.iter_mut().take(n).enumerate() {
            let at = HDR + 9 + 8 * i;
            let start = cum.saturating_add(u32_at(d, at).ok_or("short ack")? as u64);
            let len = u32_at(d, at + 4).ok_or("short ack")? as u64;
            *r = (start, start.saturating_add(len));
        }
        // How far the receiver's report is complete: everything up to here
        // that is not in a range is really missing. A truncated report is
        // complete only up to its lowest ranges (the first is the newest).
        // (A truncated report without ranges says nothing beyond `cum`.)
        let reported = &ranges[..n];
        let complete_part = if truncated {
            reported.get(1..).unwrap_or(&[])
        } else {
            reported
        };
        let complete = complete_part.iter().map(|r| r.1).max().unwrap_or(cum);
        self.on_ack(now, src, cum, &ranges[..n], complete.max(cum))
    }

    /// Processes an acknowledgement: `cum` (everything below received),
    /// selective `ranges`, and `complete`: below it, whatever is not
    /// acknowledged is known to be missing at the receiver.
    pub(super) fn on_ack(
        &mut self,
        now: Instant,
        src: u32,
        cum: u64,
        ranges: &[(u64, u64)],
        complete: u64,
    ) -> Result<(), String> {
        let cfg = self.cfg.clone();
        let Some(p) = self.peers.get_mut(&src) else {
            return Ok(());
        };
        if p.departed.is_some() {
            return Ok(()); // nothing of ours is outstanding any more
        }
        if !p.confirmed {
            // Any ack after our PROOF means the peer accepted it.
            p.confirmed = true;
            p.hs = Hs::Done;
        }
        let end = p.snd_una.max(p.next_new);
        if cum > end {
            return Err(format!(
                "acknowledges sequence {cum} never sent (next is {end})"
            ));
        }
        if let Some(&(a, b)) = ranges.iter().find(|r| r.1 > end) {
            return Err(format!(
                "acknowledges sequences {a}..{b} never sent (next is {end})"
            ));
        }
        let mut progress = false;
        let mut spurious = 0u64;
        let mut newest: Option<(u64, Instant)> = None;
        let prev_largest = p.largest_acked_tx;
        let mut ack_one = |p: &mut Peer<A>, seq: u64| {
            let Some(s) = p.pkt(seq) else { return };
            if s.acked {
                return;
            }
            s.acked = true;
            let (len, sent_at, retrans, tx, was_in_flight) = (
                s.body.len() - 8,
                s.sent_at,
                s.retransmitted,
                s.tx,
                s.in_flight,
            );
            s.in_flight = false;
            if was_in_flight {
                p.in_flight -= len.min(p.in_flight);
            }
            p.lost.remove(&seq);
            // An ack of a retransmitted datagram does not say which
            // transmission arrived (the original may just have been late):
            // only unambiguous acks advance the loss-detection reference, or
            // everything sent between the two transmissions would be
            // presumed lost.
            if !retrans {
                p.largest_acked_tx = Some(p.largest_acked_tx.map_or(tx, |l| l.max(tx)));
            }
            // RTT: sampled once per ack, from the newest datagram it newly
            // acknowledges (below). Older ones may have waited behind a hole
            // unreported, and would inflate the estimate.
            if !retrans && newest.is_none_or(|(t, _)| tx > t) {
                newest = Some((tx, sent_at));
            }
            if retrans
                && p.min_rtt
                    .is_some_and(|m| now.saturating_duration_since(sent_at) < m / 2)
            {
                // Acked sooner than the retransmission could have been: the
                // original arrived, it was only late. Tolerate more reordering.
                spurious += 1;
                let s = p.srtt.unwrap_or_default();
                p.reo_wnd = (p.reo_wnd * 2).max(s / 4).min(s * 4);
                // Resent by the last timeout, yet the original arrived: the
                // timeout was spurious (the path was slow, not lossy).
                if p.rto_tx.is_some_and(|t| tx >= t) {
                    p.rto_tx = None;
                    p.cc.on_spurious_timeout();
                }
            }
            p.cc.on_ack(now, sent_at, len.max(1));
            progress = true;
        };
        for seq in p.snd_una..cum {
            ack_one(p, seq);
        }
        let mut fresh = Vec::new();
        for &(a, b) in ranges {
            // Only what the scoreboard did not know yet is processed.
            p.sacked
                .insert(a.max(cum).max(p.snd_una), b.min(end), &mut fresh);
            for (x, y) in fresh.drain(..) {
                for seq in x..y {
                    ack_one(p, seq);
                }
            }
        }
        while p.pkts.front().is_some_and(|s| s.acked) {
            if let Some(s) = p.pkts.pop_front() {
                p.buffered -= (s.body.len() - 8).min(p.buffered);
            }
            p.snd_una += 1;
        }
        p.sacked.remove_below(p.snd_una);
        // What the receiver has told us about completely: nothing above this
        // is known to be lost (it may be in an unreported range).
        p.known = p.known.max(complete.min(end));

        self.counters.spurious += spurious;
        if let Some((tx, sent_at)) = newest {
            if prev_largest.is_none_or(|l| tx > l) {
                let r = now.saturating_duration_since(sent_at);
                p.rtt_sample(r, &cfg);
                p.cc.on_rtt(r);
            }
        }
        if progress {
            p.backoff = 0;
            p.rto_base = Some(now);
        }
        p.detect_losses(now, &cfg);
        Ok(())
    }

    pub(super) fn on_data(&mut self, now: Instant, src: u32, d: &[u8]) -> Result<(), String> {
        if d.len() < DATA_HDR {
            return Err("short data datagram".into());
        }
        let cum = u64_at(d, HDR).ok_or("short data")?;
        let seq = u64_at(d, HDR + 8).ok_or("short data")?;
        self.on_ack(now, src, cum, &[], cum)?;
        let (depth, ooo_budget) = (self.cfg.depth, self.ooo_budget());
        let Some(p) = self.peers.get_mut(&src) else {
            return Ok(());
        };
        if p.departed.is_some() {
            p.departed = Some(now);
        }
        if seq < p.rcv_next || p.ooo.contains_key(&seq) {
            self.counters.duplicates += 1;
            p.ack_now = true; // our ack was probably lost
            return Ok(());
        }
        if seq >= p.rcv_next.saturating_add(depth) {
            p.ack_now = true;
            return Ok(()); // beyond the window: the sender broke flow control or it is stale; it retransmits
        }
        let body = &d[HDR + 16..];
        if seq > p.rcv_next && p.ooo_bytes + body.len() > ooo_budget {
            // The window counts datagrams, not bytes: a peer sending datagrams
            // longer than ours must not make us hold `depth` × 64 KiB. Dropped
            // unacknowledged, it is resent once the hole before it is filled.
            self.counters.over_budget += 1;
            return Ok(());
        }
        // Ack policy: a new gap or a hole being filled is reported at once
        // (it drives loss detection); otherwise every ACK_EVERY datagrams, and
        // a lone one after `ack_delay` unless a reply carries the ack first.
        if seq != p.rcv_max {
            p.ack_now = true;
        } else {
            p.unacked_rx += 1;
            if p.unacked_rx >= ACK_EVERY {
                p.ack_now = true;
            } else if p.ack_due.is_none() {
                p.ack_due = Some(now + self.cfg.ack_delay);
            }
        }
        p.rcv_max = p.rcv_max.max(seq + 1);
        if seq > p.rcv_next {
            p.ooo_bytes += body.len();
            p.ooo.insert(seq, body.to_vec());
            p.ooo_ranges.insert(seq, seq + 1, &mut Vec::new());
            p.rcv_last = seq;
            return Ok(());
        }
        let mut out = Vec::new();
        reassemble(p, body, src, &mut out)?;
        p.rcv_next += 1;
        while let Some(b) = p.ooo.remove(&p.rcv_next) {
            p.ooo_bytes -= b.len().min(p.ooo_bytes);
            reassemble(p, &b, src, &mut out)?;
            p.rcv_next += 1;
        }
        p.ooo_ranges.remove_below(p.rcv_next);
        self.events.extend(out);
        Ok(())
    }
}

/// A set of `u64` as disjoint, non-adjacent half-open ranges.
#[derive(Debug, Default)]
pub(super) struct Ranges(pub(super) BTreeMap<u64, u64>);

impl Ranges {
    /// Adds `[a, b)`; appends the parts that were not in the set to `fresh`.
    pub(super) fn insert(&mut self, a: u64, b: u64, fresh: &mut Vec<(u64, u64)>) {
        if a >= b {
            return;
        }
        let (mut start, mut cursor) = (a, a);
        if let Some((&s, &e)) = self.0.range(..=a).next_back() {
            if e >= a {
                if e >= b {
                    return; // already covered
                }
                self.0.remove(&s);
                start = s;
                cursor = e;
            }
        }
        let mut end = b;
        loop {
            match self.0.range(cursor..).next().map(|(&s, &e)| (s, e)) {
                Some((s, e)) if s <= b => {
                    if s > cursor {
                        fresh.push((cursor, s));
                    }
                    self.0.remove(&s);
                    cursor = e;
                    end = end.max(e);
                    if cursor >= b {
                        break;
                    }
                }
                _ => {
                    fresh.push((cursor, b));
                    break;
                }
            }
        }
        self.0.insert(start, end);
    }

    /// Removes everything below `x`.
    pub(super) fn remove_below(&mut self, x: u64) {
        while let Some((&s, &e)) = self.0.first_key_value() {
            if s >= x {
                break;
            }
            self.0.remove(&s);
            if e > x {
                self.0.insert(x, e);
                break;
            }
        }
    }

    pub(super) fn containing(&self, x: u64) -> Option<(u64, u64)> {
        self.0
            .range(..=x)
            .next_back()
            .filter(|(_, &e)| e > x)
            .map(|(&s, &e)| (s, e))
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.0.iter().map(|(&s, &e)| (s, e))
    }
}

/// Appends one in-order fragment (`msg_len | offset | payload`) to the
/// peer's reassembly buffer, emitting the message when it is complete.
pub(super) fn reassemble<A>(
    p: &mut Peer<A>,
    body: &[u8],
    src: u32,
    out: &mut Vec<Event>,
) -> Result<(), String> {
    let msg_len = u32_at(body, 0).ok_or("short fragment")?;
    let off = u32_at(body, 4).ok_or("short fragment")?;
    let payload = &body[8..];
    match p.asm_len {
        None => {
            if off != 0 {
                return Err(format!("fragment at offset {off} without a first fragment"));
            }
            if payload.len() as u64 == msg_len as u64 {
                out.push(Event::Message {
                    src,
                    data: payload.to_vec(),
                });
                return Ok(());
            }
            if payload.len() as u64 > msg_len as u64 {
                return Err("fragment longer than its message".into());
            }
            // Grow with the data rather than trusting the announced length up front.
            p.asm = Vec::with_capacity((msg_len as usize).min(4 << 20));
            p.asm.extend_from_slice(payload);
            p.asm_len = Some(msg_len);
        }
        Some(len) => {
            if len != msg_len || off as usize != p.asm.len() {
                return Err(format!(
                    "fragment ({msg_len}, {off}) does not continue message ({len}, {})",
                    p.asm.len()
                ));
            }
            if p.asm.len() + payload.len() > len as usize {
                return Err("fragment overruns its message".into());
            }
            p.asm.extend_from_slice(payload);
            if p.asm.len() == len as usize {
                p.asm_len = None;
                out.push(Event::Message {
                    src,
                    data: std::mem::take(&mut p.asm),
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod ranges_tests {
    use super::Ranges;

    #[test]
    fn insert_reports_only_fresh_parts_and_merges() {
        let mut r = Ranges::default();
        let mut f = Vec::new();
        r.insert(10, 20, &mut f);
        assert_eq!(f, [(10, 20)]);
        f.clear();
        r.insert(30, 40, &mut f);
        r.insert(15, 35, &mut f);
        assert_eq!(f, [(30, 40), (20, 30)]);
        assert_eq!(r.iter().collect::<Vec<_>>(), [(10, 40)]);
        f.clear();
        r.insert(12, 18, &mut f);
        assert!(f.is_empty());
        r.insert(40, 41, &mut f);
        r.insert(5, 10, &mut f);
        assert_eq!(f, [(40, 41), (5, 10)]);
        assert_eq!(r.iter().collect::<Vec<_>>(), [(5, 41)]);
        r.insert(50, 60, &mut f);
        r.remove_below(45);
        assert_eq!(r.iter().collect::<Vec<_>>(), [(50, 60)]);
        r.remove_below(55);
        assert_eq!(r.iter().collect::<Vec<_>>(), [(55, 60)]);
        assert_eq!(r.containing(57), Some((55, 60)));
        assert_eq!(r.containing(60), None);
    }
}
