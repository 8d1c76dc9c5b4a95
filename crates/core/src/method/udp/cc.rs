//! Congestion control for the reliable-UDP protocol, behind one small trait
//! (the shape of quinn-proto's controllers), so a better algorithm plugs in
//! without touching the loss-recovery code in [`super::proto`].
//!
//! The protocol calls the controller with *bytes*: acknowledged, lost (a
//! congestion event) and retransmission timeouts. The controller answers one
//! question, [`Controller::window`]: how many bytes may be in flight.

use std::time::Instant;

/// A congestion controller. Time is passed in (the protocol has no clock).
pub trait Controller: Send + std::fmt::Debug {
    /// Bytes that may be unacknowledged in the network right now.
    fn window(&self) -> usize;
    /// `bytes` of data sent at `sent_at` were acknowledged at `now`.
    fn on_ack(&mut self, now: Instant, sent_at: Instant, bytes: usize);
    /// A packet sent at `sent_at` was declared lost at `now` (fast loss detection).
    fn on_loss(&mut self, now: Instant, sent_at: Instant);
    /// The retransmission timer fired: everything in flight is presumed lost.
    fn on_timeout(&mut self, now: Instant);
}

/// AIMD in the NewReno style: slow start, then one datagram per window per
/// round trip; a loss multiplies the window by `beta` once per recovery
/// period (losses of packets sent before the last reduction do not reduce it
/// again, so one burst of loss costs one reduction, not one per packet).
///
/// `beta` is 0.7 (CUBIC's) rather than Reno's 0.5: the links this method is
/// meant for lose packets at random more often than they congest, and a
/// gentler decrease keeps throughput from collapsing there.
#[derive(Debug)]
pub struct Aimd {
    mss: usize,
    cwnd: usize,
    ssthresh: usize,
    min: usize,
    max: usize,
    /// Packets sent before this instant belong to the current recovery period.
    recovery_start: Option<Instant>,
    /// Bytes acknowledged since the last additive increase (congestion avoidance).
    acked_acc: usize,
}

impl Aimd {
    /// `mss` = payload bytes of a full datagram; `initial` and `max` in datagrams.
    pub fn new(mss: usize, initial: usize, max: usize) -> Self {
        let mss = mss.max(1);
        Aimd {
            mss,
            cwnd: initial.max(2) * mss,
            ssthresh: usize::MAX,
            min: 2 * mss,
            max: max.max(2) * mss,
            recovery_start: None,
            acked_acc: 0,
        }
    }

    fn reduce(&mut self, now: Instant) {
        self.cwnd = (self.cwnd * 7 / 10).max(self.min);
        self.ssthresh = self.cwnd;
        self.recovery_start = Some(now);
        self.acked_acc = 0;
    }
}

impl Controller for Aimd {
    fn window(&self) -> usize {
        self.cwnd
    }

    fn on_ack(&mut self, _now: Instant, sent_at: Instant, bytes: usize) {
        if self.recovery_start.is_some_and(|r| sent_at <= r) {
            return; // acks of packets from before the reduction do not grow the window
        }
        if self.cwnd < self.ssthresh {
            self.cwnd += bytes;
        } else {
            self.acked_acc += bytes;
            if self.acked_acc >= self.cwnd {
                self.acked_acc -= self.cwnd;
                self.cwnd += self.mss;
            }
        }
        self.cwnd = self.cwnd.min(self.max);
    }

    fn on_loss(&mut self, now: Instant, sent_at: Instant) {
        if self.recovery_start.is_some_and(|r| sent_at <= r) {
            return;
        }
        self.reduce(now);
    }

    fn on_timeout(&mut self, now: Instant) {
        self.ssthresh = (self.cwnd / 2).max(self.min);
        self.cwnd = self.min;
        self.recovery_start = Some(now);
        self.acked_acc = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn slow_start_then_one_reduction_per_recovery_period() {
        let t0 = Instant::now();
        let mut c = Aimd::new(1000, 4, 1000);
        assert_eq!(c.window(), 4000);
        c.on_ack(t0, t0, 4000);
        assert_eq!(c.window(), 8000, "slow start doubles per window");
        let t1 = t0 + Duration::from_millis(10);
        c.on_loss(t1, t0);
        assert_eq!(c.window(), 5600);
        c.on_loss(t1, t0 + Duration::from_millis(5));
        assert_eq!(c.window(), 5600, "a loss from before the reduction does not reduce again");
        let t2 = t1 + Duration::from_millis(1);
        c.on_ack(t2, t2, 5600);
        assert_eq!(c.window(), 6600, "congestion avoidance: one datagram per window");
        c.on_timeout(t2);
        assert_eq!(c.window(), 2000);
    }
}
