//! Congestion control for the reliable-UDP protocol, behind one small trait
//! (the shape of quinn-proto's controllers), so a better algorithm plugs in
//! without touching the loss-recovery code in [`super::proto`].
//!
//! The protocol calls the controller with *bytes*: acknowledged (with an RTT
//! sample when it is unambiguous), lost (a loss event), and retransmission
//! timeouts. The controller answers one question, [`Controller::window`]:
//! how many bytes may be in flight.

use std::time::{Duration, Instant};

/// A congestion controller. Time is passed in (the protocol has no clock).
pub trait Controller: Send + std::fmt::Debug {
    /// Bytes that may be unacknowledged in the network right now.
    fn window(&self) -> usize;
    /// `bytes` sent at `sent_at` were acknowledged at `now`.
    fn on_ack(&mut self, now: Instant, sent_at: Instant, bytes: usize);
    /// A round-trip sample (unambiguous: not a retransmission, the newest
    /// datagram an ack covers).
    fn on_rtt(&mut self, rtt: Duration);
    /// A packet sent at `sent_at` was declared lost at `now` (fast loss detection).
    fn on_loss(&mut self, now: Instant, sent_at: Instant);
    /// The retransmission timer fired.
    fn on_timeout(&mut self, now: Instant);
    /// Pacing rate as a multiple of window per round trip: above 1, so the
    /// pacer spreads a window over the round trip without limiting it.
    fn pacing_gain(&self) -> f64 {
        1.25
    }
    /// An original transmission from before the last timeout was acknowledged:
    /// the timeout was spurious (the path was slow, not broken); undo it.
    fn on_spurious_timeout(&mut self) {}
}

/// AIMD with loss differentiation (in the spirit of TCP Veno).
///
/// The links this method is meant for (long, lossy, wireless, emulated) lose
/// packets at random, and Reno's rule — halve on every loss episode — caps
/// such a link at `MSS/RTT · 1.2/√p` whatever its capacity (0.9 MB/s at 1%
/// loss and 20 ms). So a loss reduces the window only when the round-trip
/// time says a queue is building (smoothed RTT above the minimum by a quarter
/// or 1 ms): that is congestion, and the window is multiplied by 0.7 (CUBIC's
/// β), once per recovery period. A loss with no queue is taken as random: no
/// reduction, but slow start ends. Growth: slow start (doubling per round
/// trip) to the first loss; then +50% per round trip while there is no queue
/// and +1 datagram per round trip while there is one. A timeout still
/// collapses the window to 2 datagrams. Queue overflow (tail drop, a full
/// socket buffer) always comes with a grown RTT, so real congestion is seen.
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
    min_rtt: Option<Duration>,
    /// EWMA (gain 1/4) of recent RTT samples (the length of a round trip).
    rtt: Option<Duration>,
    /// (cwnd, ssthresh) before the last timeout, for undoing a spurious one.
    undo: Option<(usize, usize)>,
    /// The current round trip's loss tally (for the burst-loss rule): it
    /// ends at `round_end`; bytes acknowledged and datagrams lost in it.
    round_end: Option<Instant>,
    round_acked: usize,
    round_lost: usize,
    /// The least RTT sample of this round trip and of the one before.
    round_min: Option<Duration>,
    prev_round_min: Option<Duration>,
}

/// A round trip losing more than this share of its datagrams (and at least
/// [`BURST_MIN`] of them) is congestion whatever the RTT says: random loss
/// is independent, while an overflowing queue too short to show in the RTT
/// (a device ring, a shallow switch buffer) or a policer loses runs.
pub const BURST_SHARE: f64 = 0.15;
pub const BURST_MIN: usize = 8;

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
            min_rtt: None,
            rtt: None,
            undo: None,
            round_end: None,
            round_acked: 0,
            round_lost: 0,
            round_min: None,
            prev_round_min: None,
        }
    }

    /// Whether the RTT shows a standing queue (without samples: assume so):
    /// the least RTT of this round trip and the last is above the minimum by
    /// a quarter or 1 ms. The least, not an average: a queue delays every
    /// datagram, while a process that was not scheduled for a few
    /// milliseconds (a loaded machine) delays only the acks of that moment —
    /// an average of samples took such spikes for congestion.
    fn queueing(&self) -> bool {
        let recent = match (self.prev_round_min, self.round_min) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        match (self.min_rtt, recent) {
            (Some(min), Some(r)) => r > min + (min / 4).max(Duration::from_millis(1)),
            _ => true,
        }
    }

    /// Starts a new loss tally when the round trip it covers is over.
    fn roll(&mut self, now: Instant) {
        if self.round_end.is_none_or(|e| now >= e) {
            let rtt = self.rtt.unwrap_or(Duration::from_millis(100));
            self.round_end = Some(now + rtt);
            self.round_acked = 0;
            self.round_lost = 0;
            if self.round_min.is_some() {
                self.prev_round_min = self.round_min.take();
            }
        }
    }

    /// Whether this round trip's losses come in a burst (see [`BURST_SHARE`]).
    fn burst_loss(&self) -> bool {
        let total = self.round_acked / self.mss + self.round_lost;
        self.round_lost >= BURST_MIN && self.round_lost as f64 > BURST_SHARE * total as f64
    }

    fn reduce(&mut self, now: Instant) {
        self.undo = None;
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

    /// Twice the window per round trip in slow start (it doubles per round
    /// trip), 1.25 times after (Linux's TCP pacing ratios).
    fn pacing_gain(&self) -> f64 {
        if self.cwnd < self.ssthresh {
            2.0
        } else {
            1.25
        }
    }

    fn on_rtt(&mut self, r: Duration) {
        self.min_rtt = Some(self.min_rtt.map_or(r, |m| m.min(r)));
        self.round_min = Some(self.round_min.map_or(r, |m| m.min(r)));
        self.rtt = Some(self.rtt.map_or(r, |s| (s * 3 + r) / 4));
    }

    fn on_ack(&mut self, now: Instant, sent_at: Instant, bytes: usize) {
        self.roll(now);
        self.round_acked += bytes;
        if self.recovery_start.is_some_and(|r| sent_at <= r) {
            return; // acks of packets from before the reduction do not grow the window
        }
        if self.cwnd < self.ssthresh && self.rtt.is_some() && self.queueing() {
            // HyStart's delay signal: a queue is building, leave slow start.
            self.ssthresh = self.cwnd;
        }
        if self.cwnd < self.ssthresh {
            self.cwnd += bytes;
        } else if !self.queueing() {
            self.cwnd += bytes / 2;
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
        self.roll(now);
        self.round_lost += 1;
        if self.recovery_start.is_some_and(|r| sent_at <= r) {
            return;
        }
        if self.queueing() || self.burst_loss() {
            self.reduce(now);
        }
        // Otherwise random loss: the window, its growth and slow start go on.
    }

    fn on_timeout(&mut self, now: Instant) {
        if self.undo.is_none() {
            self.undo = Some((self.cwnd, self.ssthresh));
        }
        self.ssthresh = (self.cwnd / 2).max(self.min);
        self.cwnd = self.min;
        self.recovery_start = Some(now);
        self.acked_acc = 0;
    }

    fn on_spurious_timeout(&mut self) {
        if let Some((cwnd, ssthresh)) = self.undo.take() {
            self.cwnd = self.cwnd.max(cwnd);
            self.ssthresh = ssthresh;
            self.recovery_start = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// Feeds `rounds` round trips of RTT samples `r` (no bytes acked);
    /// returns the time after them.
    fn rounds(c: &mut Aimd, mut t: Instant, r: Duration, rounds: u32) -> Instant {
        for _ in 0..rounds {
            t += r + MS;
            c.on_rtt(r);
            c.on_ack(t, t, 0);
        }
        t
    }

    #[test]
    fn a_scheduling_spike_is_not_a_queue() {
        let t0 = Instant::now();
        let mut c = Aimd::new(1000, 10, 1000);
        let t = rounds(&mut c, t0, 20 * MS, 2);
        // Acks delayed by a process that was not scheduled: a few samples
        // far above the minimum, among normal ones in the same round trip.
        for _ in 0..6 {
            c.on_rtt(35 * MS);
        }
        c.on_rtt(20 * MS);
        c.on_ack(t + MS, t + MS, 0);
        let w = c.window();
        c.on_loss(t + 2 * MS, t + MS);
        assert_eq!(c.window(), w, "a spike is not congestion");
        // Every sample of two round trips high: a standing queue.
        let t = rounds(&mut c, t + 2 * MS, 35 * MS, 3);
        c.on_loss(t + MS, t);
        assert_eq!(c.window(), w * 7 / 10);
    }

    #[test]
    fn congestion_loss_reduces_once_per_recovery_period() {
        let t0 = Instant::now();
        let mut c = Aimd::new(1000, 4, 1000);
        assert_eq!(c.window(), 4000);
        c.on_rtt(20 * MS);
        c.on_ack(t0, t0, 4000);
        assert_eq!(c.window(), 8000, "slow start doubles per window");
        let t0 = rounds(&mut c, t0, 40 * MS, 3); // a queue builds
        let t1 = t0 + 10 * MS;
        c.on_loss(t1, t0);
        assert_eq!(c.window(), 5600);
        c.on_loss(t1, t0 + 5 * MS);
        assert_eq!(
            c.window(),
            5600,
            "a loss from before the reduction does not reduce again"
        );
        let t2 = t1 + MS;
        c.on_rtt(40 * MS);
        c.on_ack(t2, t2, 5600);
        assert_eq!(
            c.window(),
            6600,
            "congestion avoidance with a queue: one datagram per window"
        );
        c.on_timeout(t2);
        assert_eq!(c.window(), 2000);
    }

    #[test]
    fn a_burst_of_losses_is_congestion_even_without_a_queue() {
        let t0 = Instant::now();
        let mut c = Aimd::new(1000, 100, 1000);
        c.on_rtt(20 * MS);
        c.on_ack(t0, t0, 40_000);
        let w = c.window();
        // A few losses: random loss, the window stays.
        for i in 0..3u32 {
            c.on_loss(t0 + MS * i, t0);
        }
        assert_eq!(c.window(), w);
        // Then a run of losses (a queue too short to show in the RTT overflowed).
        for i in 3..7u32 {
            c.on_loss(t0 + MS * i, t0);
        }
        assert_eq!(c.window(), w, "7 of 47 datagrams lost: not yet a burst");
        c.on_loss(t0 + 7 * MS, t0);
        assert_eq!(
            c.window(),
            w * 7 / 10,
            "8 of 48 datagrams in a round trip lost"
        );
        // The next round trip starts a new tally.
        let t1 = t0 + 30 * MS;
        c.on_ack(t1, t1, 1000);
        assert_eq!(c.round_lost, 0);
    }

    #[test]
    fn random_loss_without_a_queue_keeps_the_window_and_slow_start() {
        let t0 = Instant::now();
        let mut c = Aimd::new(1000, 10, 1000);
        c.on_rtt(20 * MS);
        c.on_ack(t0, t0, 1000);
        let w = c.window();
        c.on_loss(t0 + MS, t0);
        assert_eq!(
            c.window(),
            w,
            "RTT at its minimum: the loss is not congestion"
        );
        let t2 = t0 + 2 * MS;
        c.on_rtt(20 * MS);
        c.on_ack(t2, t2, 2000);
        assert_eq!(
            c.window(),
            w + 2000,
            "a random loss neither ends slow start nor holds back growth"
        );
        // A queue builds (HyStart's delay signal): slow start ends without a loss.
        let t2 = rounds(&mut c, t2, 40 * MS, 3);
        c.on_ack(t2, t2, 1000);
        assert_eq!(
            c.window(),
            w + 2000,
            "with a queue: one datagram per window of acks, not slow start"
        );
        // The queue drains: congestion avoidance without a queue (+50% per round trip).
        let t2 = rounds(&mut c, t2, 20 * MS, 3);
        c.on_ack(t2, t2, 2000);
        assert_eq!(
            c.window(),
            w + 3000,
            "no queue: grows by half the acked bytes"
        );
    }
}
