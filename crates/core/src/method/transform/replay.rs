//! The anti-replay window of a receive direction (RFC 4303 §3.4.3 style):
//! the highest counter accepted so far and a bitmap of the `WINDOW`
//! counters below it. A counter inside the window that was not seen is
//! accepted (reordering is normal: two threads may send on one link, and
//! a datagram method may reorder); one already seen, or older than the
//! window, is a replay.

/// Counters a frame may lag the newest one and still be accepted.
pub const WINDOW: u64 = 1024;

pub struct ReplayWindow {
    /// Highest counter accepted; 0 = none yet (counters start at 1).
    top: u64,
    /// Bit `i` = counter `top - i` was accepted.
    seen: [u64; (WINDOW / 64) as usize],
}

impl Default for ReplayWindow {
    fn default() -> Self {
        Self::new()
    }
}

impl ReplayWindow {
    pub fn new() -> Self {
        ReplayWindow {
            top: 0,
            seen: [0; (WINDOW / 64) as usize],
        }
    }

    /// Whether `ctr` would be accepted (call before authenticating, so a
    /// replay costs no decryption; mark it only once the frame checks out).
    pub fn check(&self, ctr: u64) -> bool {
        if ctr == 0 {
            return false;
        }
        if ctr > self.top {
            return true;
        }
        let lag = self.top - ctr;
        lag < WINDOW && !self.bit(lag)
    }

    /// Records `ctr` as accepted (after [`check`](Self::check) said yes and the frame authenticated).
    pub fn mark(&mut self, ctr: u64) {
        if ctr > self.top {
            let shift = ctr - self.top;
            self.shift(shift);
            self.top = ctr;
            self.set(0);
        } else {
            self.set(self.top - ctr);
        }
    }

    fn bit(&self, lag: u64) -> bool {
        self.seen[(lag / 64) as usize] >> (lag % 64) & 1 == 1
    }

    fn set(&mut self, lag: u64) {
        self.seen[(lag / 64) as usize] |= 1 << (lag % 64);
    }

    /// Moves every bit `by` places towards older (bits past the window fall off).
    fn shift(&mut self, by: u64) {
        if by >= WINDOW {
            self.seen = [0; (WINDOW / 64) as usize];
            return;
        }
        let words = (by / 64) as usize;
        let bits = (by % 64) as u32;
        let n = self.seen.len();
        for i in (0..n).rev() {
            let src = i.checked_sub(words);
            let hi = src.map_or(0, |s| self.seen[s]);
            let lo = src
                .and_then(|s| s.checked_sub(1))
                .map_or(0, |s| self.seen[s]);
            self.seen[i] = if bits == 0 {
                hi
            } else {
                (hi << bits) | (lo >> (64 - bits))
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(w: &mut ReplayWindow, c: u64) -> bool {
        let ok = w.check(c);
        if ok {
            w.mark(c);
        }
        ok
    }

    #[test]
    fn in_order_reordered_replayed_and_too_old() {
        let mut w = ReplayWindow::new();
        assert!(!accept(&mut w, 0), "counter 0 is the hello's, never data");
        for c in 1..=100 {
            assert!(accept(&mut w, c));
        }
        assert!(!accept(&mut w, 50), "replay inside the window");
        assert!(!accept(&mut w, 100), "replay of the newest");
        // Reordering: 105 before 101..104.
        assert!(accept(&mut w, 105));
        for c in [103, 101, 104, 102] {
            assert!(accept(&mut w, c), "reordered {c}");
        }
        assert!(!accept(&mut w, 103));
        // A jump (rekey to the next epoch) and then an old one.
        assert!(accept(&mut w, 105 + WINDOW + 10));
        assert!(!accept(&mut w, 104), "older than the window");
        assert!(
            accept(&mut w, 105 + WINDOW + 5),
            "inside the window after the jump"
        );
        assert!(!accept(&mut w, 105 + WINDOW + 5));
    }

    #[test]
    fn matches_a_set_model_under_random_orders() {
        // A small deterministic generator: reorder a sequence by up to 300
        // places, replay some, and compare with a set that remembers all.
        let mut x: u64 = 0x9e3779b97f4a7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut w = ReplayWindow::new();
        let mut seen = std::collections::HashSet::new();
        let mut top = 0u64;
        for i in 1..20_000u64 {
            let c = if next() % 5 == 0 {
                i.saturating_sub(next() % 300).max(1)
            } else {
                i
            };
            let want = !seen.contains(&c) && (c > top || top - c < WINDOW);
            assert_eq!(accept(&mut w, c), want, "counter {c} at step {i}");
            if want {
                seen.insert(c);
                top = top.max(c);
            }
        }
    }
}
