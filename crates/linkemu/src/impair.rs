//! The link model, without I/O: packets go in with the current time and come
//! out when they are due. One [`Direction`] per way of the link, so the two
//! ways are impaired (and rate-limited) independently, like two wires.
//!
//! Order of effects for one packet, as in Linux's netem: rate limit (a
//! FIFO with a serialisation time per byte and a bounded backlog: a full
//! backlog drops the packet — congestion loss), then random loss, then
//! duplication, then delay with jitter. "Reorder" sends a fraction of
//! packets without the delay, so they overtake the ones still delayed.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

/// Impairments of one direction.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Impairments {
    pub delay: Duration,
    /// Uniform in `[-jitter, +jitter]` added to the delay (never below zero).
    pub jitter: Duration,
    /// Probabilities in `0.0..=1.0`.
    pub loss: f64,
    pub dup: f64,
    pub reorder: f64,
    /// Bits per second; 0 = unlimited.
    pub rate_bps: u64,
    /// Longest backlog the rate limiter holds before dropping.
    pub queue: Duration,
}

impl Default for Impairments {
    fn default() -> Self {
        Impairments {
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            loss: 0.0,
            dup: 0.0,
            reorder: 0.0,
            rate_bps: 0,
            queue: Duration::from_millis(50),
        }
    }
}

/// Counters of one direction.
#[derive(Debug, Default, Clone, Copy)]
pub struct Stats {
    pub packets_in: u64,
    pub bytes_in: u64,
    pub packets_out: u64,
    pub dropped_loss: u64,
    pub dropped_queue: u64,
    pub duplicated: u64,
    pub reordered: u64,
}

/// SplitMix64: small, seedable, good enough for impairment decisions.
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.unit() < p
    }
}

/// One direction of the emulated link.
pub struct Direction {
    pub imp: Impairments,
    pub stats: Stats,
    rng: Rng,
    /// When the rate limiter's wire is free again.
    busy_until: Option<Instant>,
    /// (due, arrival order, packet): a min-heap on due time, FIFO among equals.
    due: BinaryHeap<Reverse<(Instant, u64, Vec<u8>)>>,
    n: u64,
}

impl Direction {
    pub fn new(imp: Impairments, seed: u64) -> Self {
        Direction {
            imp,
            stats: Stats::default(),
            rng: Rng(seed),
            busy_until: None,
            due: BinaryHeap::new(),
            n: 0,
        }
    }

    /// A packet entered the link at `now`.
    pub fn push(&mut self, now: Instant, pkt: Vec<u8>) {
        self.stats.packets_in += 1;
        self.stats.bytes_in += pkt.len() as u64;
        let mut leave = now;
        if let Some(ns) = (pkt.len() as u64 * 8 * 1_000_000_000).checked_div(self.imp.rate_bps) {
            let free = self.busy_until.map_or(now, |b| b.max(now));
            if free.duration_since(now) > self.imp.queue {
                self.stats.dropped_queue += 1;
                return;
            }
            leave = free + Duration::from_nanos(ns);
            self.busy_until = Some(leave);
        }
        if self.rng.chance(self.imp.loss) {
            self.stats.dropped_loss += 1;
            return;
        }
        let mut copies = Vec::with_capacity(2);
        if self.rng.chance(self.imp.dup) {
            self.stats.duplicated += 1;
            copies.push(pkt.clone());
        }
        copies.push(pkt);
        for p in copies {
            let at = if self.rng.chance(self.imp.reorder) {
                self.stats.reordered += 1;
                leave
            } else {
                let j = self.imp.jitter.as_nanos() as f64 * (2.0 * self.rng.unit() - 1.0);
                let d = (self.imp.delay.as_nanos() as f64 + j).max(0.0);
                leave + Duration::from_nanos(d as u64)
            };
            self.n += 1;
            self.due.push(Reverse((at, self.n, p)));
        }
    }

    /// When the next packet is due, if any.
    pub fn next_due(&self) -> Option<Instant> {
        self.due.peek().map(|Reverse(e)| e.0)
    }

    /// The next packet due at or before `now`.
    pub fn pop_due(&mut self, now: Instant) -> Option<Vec<u8>> {
        if self.next_due()? > now {
            return None;
        }
        let Reverse((_, _, p)) = self.due.pop()?;
        self.stats.packets_out += 1;
        Some(p)
    }
}

/// Parses `10ms`, `1.5s`, `250us`, `0` (milliseconds when no unit).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, mult) = if let Some(n) = s.strip_suffix("us") {
        (n, 1e-6)
    } else if let Some(n) = s.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else {
        (s, 1e-3)
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("bad duration {s:?} (e.g. 10ms, 1.5s, 250us)"))?;
    if !(0.0..=3600.0 / mult).contains(&v) {
        return Err(format!("duration {s:?} out of range"));
    }
    Ok(Duration::from_secs_f64(v * mult))
}

/// Parses a percentage (`5`, `0.5`, `5%`) into a probability.
pub fn parse_percent(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("bad percentage {s:?}"))?;
    if !(0.0..=100.0).contains(&v) {
        return Err(format!("percentage {s:?} out of 0..100"));
    }
    Ok(v / 100.0)
}

/// Parses a rate: `100mbit`, `1gbit`, `500kbit`, `10mbps` (bytes), plain bits/s; 0 = unlimited.
pub fn parse_rate(s: &str) -> Result<u64, String> {
    let l = s.trim().to_ascii_lowercase();
    let units: [(&str, f64); 8] = [
        ("gbit", 1e9),
        ("mbit", 1e6),
        ("kbit", 1e3),
        ("gbps", 8e9),
        ("mbps", 8e6),
        ("kbps", 8e3),
        ("bit", 1.0),
        ("bps", 8.0),
    ];
    for (u, m) in units {
        if let Some(n) = l.strip_suffix(u) {
            let v: f64 = n.trim().parse().map_err(|_| format!("bad rate {s:?}"))?;
            return Ok((v * m) as u64);
        }
    }
    l.parse()
        .map_err(|_| format!("bad rate {s:?} (e.g. 100mbit, 1gbit, 10mbps)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(imp: Impairments, n: usize, gap: Duration) -> (Direction, Vec<(Duration, u32)>) {
        let t0 = Instant::now();
        let mut d = Direction::new(imp, 1);
        let mut out = Vec::new();
        let mut now = t0;
        for i in 0..n as u32 {
            d.push(now, i.to_le_bytes().to_vec());
            now += gap;
            while let Some(p) = d.pop_due(now) {
                out.push((now - t0, u32::from_le_bytes(p[..4].try_into().unwrap())));
            }
        }
        while let Some(t) = d.next_due() {
            now = now.max(t);
            while let Some(p) = d.pop_due(now) {
                out.push((now - t0, u32::from_le_bytes(p[..4].try_into().unwrap())));
            }
        }
        (d, out)
    }

    #[test]
    fn delay_only_keeps_order_and_delays() {
        let imp = Impairments {
            delay: Duration::from_millis(10),
            ..Default::default()
        };
        let (_, out) = run(imp, 100, Duration::from_micros(100));
        assert_eq!(out.len(), 100);
        assert!(out.windows(2).all(|w| w[0].1 < w[1].1));
        assert!(out[0].0 >= Duration::from_millis(10));
    }

    #[test]
    fn loss_dup_reorder_rates_are_roughly_right() {
        let imp = Impairments {
            delay: Duration::from_millis(5),
            loss: 0.1,
            dup: 0.05,
            reorder: 0.2,
            ..Default::default()
        };
        let (d, out) = run(imp, 20_000, Duration::from_micros(50));
        let s = d.stats;
        assert!((1700..2300).contains(&s.dropped_loss), "{s:?}");
        assert!((700..1100).contains(&s.duplicated), "{s:?}");
        assert_eq!(out.len() as u64, 20_000 - s.dropped_loss + s.duplicated);
        assert!(
            out.windows(2).any(|w| w[0].1 > w[1].1),
            "some packets overtake"
        );
    }

    #[test]
    fn rate_limit_spaces_packets_and_drops_on_a_full_queue() {
        // 1000-byte packets at 8 Mbit/s = 1 ms each, offered every 0.5 ms.
        let imp = Impairments {
            rate_bps: 8_000_000,
            queue: Duration::from_millis(10),
            ..Default::default()
        };
        let t0 = Instant::now();
        let mut d = Direction::new(imp, 1);
        for i in 0..200u32 {
            d.push(t0 + Duration::from_micros(500) * i, vec![0; 1000]);
        }
        assert!(d.stats.dropped_queue > 50, "{:?}", d.stats);
        let first = d.next_due().unwrap();
        assert_eq!(first - t0, Duration::from_millis(1));
    }

    #[test]
    fn parsers() {
        assert_eq!(parse_duration("10ms").unwrap(), Duration::from_millis(10));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("250us").unwrap(), Duration::from_micros(250));
        assert_eq!(parse_duration("3").unwrap(), Duration::from_millis(3));
        assert!(parse_duration("x").is_err());
        assert_eq!(parse_percent("5%").unwrap(), 0.05);
        assert!(parse_percent("101").is_err());
        assert_eq!(parse_rate("100mbit").unwrap(), 100_000_000);
        assert_eq!(parse_rate("10mbps").unwrap(), 80_000_000);
        assert_eq!(parse_rate("0").unwrap(), 0);
    }
}
