//! Measured, size-aware selection (issue 13): per pair, each message takes
//! the candidate stack that is cheapest for its size.
//!
//! A *measured* route (`GW_SELECT=measured` for the job's default route,
//! or a communicator's `gw_select=measured`, `routes.rs`) keeps, per pair
//! between hosts, one link per applicable candidate stack (tcp and udp,
//! each with the transforms the policy asks for). Each candidate is a
//! *slot* here: its own sub-route whose candidate list is the measured
//! route's with that stack first, so a broken slot fails over to the next
//! stack like any route, and the pair's one end-to-end sequence and the
//! receiver's reorder buffer keep MPI's order across them (`failover.rs`).
//!
//! The cost model: `cost(size) = rtt / 2 + size / bandwidth`, per slot.
//! The lines' lower envelope is computed whenever an estimate changes and
//! kept as at most [`MAX_SLOTS`] size bands ("below 9 KiB udp, from there
//! tcp"), so the send path only scans a few integers: no allocation, no
//! floating point, no lock beyond the pair's send lock it already holds.
//!
//! Estimates:
//! - round trip: a small message (≤ [`RTT_PROBE_MAX`]) sent while nothing
//!   else of the pair was unacknowledged is timed from its send to the ack
//!   that covers it, averaged (EWMA, 1/4); until then the slot's
//!   transport's own estimate (tcp's kernel `TCP_INFO`, udp's smoothed
//!   RTT, read at every silence check) seeds it;
//! - bandwidth: a bulk message (≥ [`PROBE_MIN`]) sent while nothing else
//!   of the pair was unacknowledged is timed from its send to the ack that
//!   covers it: `size / (elapsed − rtt)`, averaged (EWMA, 1/4). Acks are
//!   the sequencing layer's own, so this costs nothing on the wire.
//! - start: until every slot has a round trip, small messages go round
//!   the slots that lack one (this opens their links: the "probe at
//!   connect" are real messages); until every slot has a bandwidth, bulk
//!   messages go round those that lack one. Every [`REPROBE_EVERY`] a bulk
//!   message of at most [`REPROBE_MAX`] goes to the slot whose bandwidth
//!   sample is the oldest, so a stack that is never chosen is still
//!   measured.
//! - forced: `GW_SELECT_ESTIMATES=udp=5/50,tcp=200/2000` (stack or base =
//!   one-way latency µs / bandwidth MB/s) fixes the estimates and turns
//!   measuring off: the choice is then independent of load (tests, and
//!   operators who know their links).
//!
//! This module does no I/O and reads no clock: the context passes `now`
//! in, so the unit tests drive it with a virtual clock.

use crate::params::{Kind, ParamDecl};
use std::time::{Duration, Instant};

/// The selection's parameters (listed by `gwinfo`).
pub const PARAMS: &[ParamDecl] = &[
    ParamDecl {
        name: "SELECT",
        default: "fixed",
        kind: Kind::Choice(&["fixed", "measured"]),
        help: "How a message between hosts picks its method stack. `fixed`: the first \
               applicable one for every message (the pair's one link). `measured`: per \
               pair, a link per applicable stack (tcp, udp, with the transforms the policy \
               asks for), each costed from measurements (round trip + size / bandwidth), and \
               each message on the cheapest for its size (docs/wan.md). A communicator's \
               `gw_select` info key overrides it.",
    },
    ParamDecl {
        name: "SELECT_ESTIMATES",
        default: "",
        kind: Kind::Text,
        help: "Fixes the measured selection's estimates instead of measuring: \
               `STACK=LATENCY_US/MBPS,...` (a stack such as encrypt+tcp or a base method; \
               one-way latency in microseconds, bandwidth in MB/s), e.g. `udp=5/50,tcp=200/2000`. \
               For tests and for links whose figures are known.",
    },
];

/// At most this many candidate stacks per pair (tcp, udp, and their
/// transformed variants: a handful).
pub const MAX_SLOTS: usize = 4;

/// Messages from this size on are bulk: they probe bandwidth.
pub const PROBE_MIN: usize = 64 << 10;

/// How old a slot's bandwidth sample may get before a bulk message is
/// sent on it to refresh it (rarely: on a stack much slower for bulk each
/// re-probe costs a message's worth of that slowness; the first bench had
/// 2 s, and at 1 MiB ping-pong those re-probes showed in the medians).
pub const REPROBE_EVERY: Duration = Duration::from_secs(10);

/// Re-probes take bulk messages up to this size only (bounded cost).
pub const REPROBE_MAX: usize = 4 * PROBE_MIN;

/// Weight of a new sample in the running averages.
const EWMA_NEW: f64 = 0.25;

/// What is known of one candidate stack of a pair.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Estimate {
    /// Round trip, ns.
    pub rtt_ns: Option<f64>,
    /// Bandwidth, bytes per second.
    pub bytes_per_s: Option<f64>,
}

impl Estimate {
    fn complete(&self) -> bool {
        self.rtt_ns.is_some() && self.bytes_per_s.is_some()
    }

    /// `(one-way latency ns, ns per byte)` of a complete estimate.
    fn line(&self) -> Option<(f64, f64)> {
        Some((self.rtt_ns? / 2.0, 1e9 / self.bytes_per_s?.max(1.0)))
    }

    /// The modelled time of a message of `size` bytes, ns.
    pub fn cost_ns(&self, size: u64) -> Option<f64> {
        let (lat, per_byte) = self.line()?;
        Some(lat + size as f64 * per_byte)
    }
}

fn ewma(old: Option<f64>, new: f64) -> f64 {
    match old {
        Some(o) => o + EWMA_NEW * (new - o),
        None => new,
    }
}

/// A message in flight whose ack times the slot: a small one its round
/// trip, a bulk one its bandwidth.
#[derive(Debug, Clone, Copy)]
struct Probe {
    seq: u64,
    len: usize,
    sent: Instant,
}

/// Messages up to this size time the round trip when sent alone (their
/// own transfer is negligible beside it).
pub const RTT_PROBE_MAX: usize = 4 << 10;

/// One candidate stack of a pair.
#[derive(Debug)]
pub struct Slot {
    /// The sub-route its messages take (`routes.rs`).
    pub route: usize,
    /// The stack it was chosen for (`udp`, `encrypt+tcp`).
    pub stack: &'static str,
    pub est: Estimate,
    /// Messages and bytes this selection sent on it.
    pub msgs: u64,
    pub bytes: u64,
    last_bw_sample: Option<Instant>,
    /// The round trip comes from the pair's own acks (the transport's
    /// estimate only seeds it: it is measured differently, and under load
    /// its delayed acks made it ten times the pair's).
    rtt_from_acks: bool,
    probe: Option<Probe>,
}

/// Sizes below `upto` go to `slot`; the last band's `upto` is `u64::MAX`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Band {
    pub upto: u64,
    pub slot: u8,
}

/// The per-pair choice of a measured route.
#[derive(Debug)]
pub struct Selector {
    pub slots: Vec<Slot>,
    bands: [Band; MAX_SLOTS],
    nbands: usize,
    /// Estimates fixed by `GW_SELECT_ESTIMATES`: no measuring, no probing.
    forced: bool,
    /// Slots still without a round trip / a bandwidth (bit per slot).
    need_rtt: u8,
    need_bw: u8,
    /// Slots with a bandwidth probe in flight.
    probing: u8,
    /// When the next re-probe of the stalest bandwidth is due.
    reprobe_at: Option<Instant>,
}

impl Selector {
    /// A selector over `slots` (sub-route, stack), in preference order;
    /// `forced[i]` fixes slot `i`'s estimate when given for every slot.
    pub fn new(slots: &[(usize, &'static str)], forced: Option<&[Estimate]>) -> Selector {
        let slots: Vec<Slot> = slots
            .iter()
            .take(MAX_SLOTS)
            .enumerate()
            .map(|(i, &(route, stack))| Slot {
                route,
                stack,
                est: forced.and_then(|f| f.get(i).copied()).unwrap_or_default(),
                msgs: 0,
                bytes: 0,
                last_bw_sample: None,
                rtt_from_acks: false,
                probe: None,
            })
            .collect();
        let forced =
            forced.is_some_and(|f| f.len() >= slots.len() && f.iter().all(|e| e.complete()));
        let all = ((1u16 << slots.len()) - 1) as u8;
        let mut s = Selector {
            slots,
            bands: [Band::default(); MAX_SLOTS],
            nbands: 0,
            forced,
            need_rtt: if forced { 0 } else { all },
            need_bw: if forced { 0 } else { all },
            probing: 0,
            reprobe_at: None,
        };
        s.recompute();
        s
    }

    /// The slot for a message of `len` bytes sent at `now`.
    #[inline]
    pub fn pick(&mut self, len: usize, now: Instant) -> usize {
        if (self.need_rtt | self.need_bw) != 0 || self.reprobe_at.is_some() {
            if let Some(k) = self.explore(len, now) {
                return k;
            }
        }
        let len = len as u64;
        for b in &self.bands[..self.nbands] {
            if len < b.upto {
                return b.slot as usize;
            }
        }
        0
    }

    /// A slot to measure rather than the cheapest, if one is due.
    #[cold]
    fn explore(&mut self, len: usize, now: Instant) -> Option<usize> {
        let bulk = len >= PROBE_MIN;
        if !bulk && self.need_rtt != 0 {
            // A slot not used yet: its link opens with this message, and
            // its transport's round trip is read at the next check.
            let unused = (0..self.slots.len())
                .find(|&k| self.need_rtt & (1 << k) != 0 && self.slots[k].msgs == 0);
            if unused.is_some() {
                return unused;
            }
        }
        if bulk && self.need_bw & !self.probing != 0 {
            return Some((self.need_bw & !self.probing).trailing_zeros() as usize);
        }
        if bulk
            && len <= REPROBE_MAX
            && self.reprobe_at.is_some_and(|t| now >= t)
            && self.probing == 0
        {
            self.reprobe_at = Some(now + REPROBE_EVERY);
            return self
                .slots
                .iter()
                .enumerate()
                .min_by_key(|(_, s)| s.last_bw_sample)
                .map(|(k, _)| k);
        }
        None
    }

    /// Slot `k` carried message `seq` of `len` bytes at `now`; `alone`:
    /// nothing else of the pair was unacknowledged (its ack then times it).
    pub fn sent(&mut self, k: usize, seq: u64, len: usize, now: Instant, alone: bool) {
        let forced = self.forced;
        let Some(s) = self.slots.get_mut(k) else {
            return;
        };
        s.msgs += 1;
        s.bytes += len as u64;
        let timed = len <= RTT_PROBE_MAX || len >= PROBE_MIN;
        if !forced && alone && timed && s.probe.is_none() {
            s.probe = Some(Probe {
                seq,
                len,
                sent: now,
            });
            self.probing |= 1 << k;
        }
    }

    /// Whether a bandwidth probe waits for its ack.
    #[inline]
    pub fn probing(&self) -> bool {
        self.probing != 0
    }

    /// The peer acknowledged everything up to `acked` (seen at `now`).
    pub fn acked(&mut self, acked: u64, now: Instant) {
        let mut changed = false;
        for k in 0..self.slots.len() {
            let s = &mut self.slots[k];
            let Some(p) = s.probe.filter(|p| p.seq <= acked) else {
                continue;
            };
            s.probe = None;
            self.probing &= !(1 << k);
            let elapsed = (now.saturating_duration_since(p.sent).as_nanos() as f64).max(1.0);
            if p.len <= RTT_PROBE_MAX {
                // Send to ack: the round trip as this pair sees it, the
                // receiver's ack delay included (bulk probes see it too,
                // so it cancels out of their bandwidth).
                // Down at once, up slowly: a late ack (the process was
                // busy or asleep) only inflates a sample, never shrinks it.
                let old = s.est.rtt_ns.filter(|_| s.rtt_from_acks);
                s.est.rtt_ns = Some(match old {
                    Some(o) if elapsed < o => elapsed,
                    _ => ewma(old, elapsed),
                });
                s.rtt_from_acks = true;
                self.need_rtt &= !(1 << k);
                changed = true;
                continue;
            }
            // The ack came back a round trip after the data left. A round
            // trip estimate above half the whole exchange is not trusted
            // (subtracting it made a bench's udp look 4x faster than it
            // was): the exchange then counts whole, a slower figure.
            let rtt = s.est.rtt_ns.unwrap_or(0.0);
            let transfer = if rtt <= elapsed / 2.0 {
                elapsed - rtt
            } else {
                elapsed
            };
            let sample = p.len as f64 * 1e9 / transfer;
            s.est.bytes_per_s = Some(ewma(s.est.bytes_per_s, sample));
            s.last_bw_sample = Some(now);
            self.need_bw &= !(1 << k);
            changed = true;
        }
        if changed {
            if self.need_bw == 0 && self.reprobe_at.is_none() && self.slots.len() > 1 {
                self.reprobe_at = Some(now + REPROBE_EVERY);
            }
            self.recompute();
        }
    }

    /// Slot `k`'s transport measured a round trip of `rtt`: a seed until
    /// the pair's acks timed one.
    pub fn rtt_sample(&mut self, k: usize, rtt: Duration) {
        if self.forced {
            return;
        }
        let Some(s) = self.slots.get_mut(k).filter(|s| !s.rtt_from_acks) else {
            return;
        };
        let old = s.est.rtt_ns;
        s.est.rtt_ns = Some(ewma(old, rtt.as_nanos() as f64));
        self.need_rtt &= !(1 << k);
        // Bands move only when the change matters (≥ 1/16).
        let moved = old.is_none_or(|o| (s.est.rtt_ns.unwrap_or(o) - o).abs() * 16.0 > o);
        if moved {
            self.recompute();
        }
    }

    /// The size bands now.
    pub fn bands(&self) -> &[Band] {
        &self.bands[..self.nbands]
    }

    pub fn forced(&self) -> bool {
        self.forced
    }

    /// Recomputes the bands from the complete estimates (none complete:
    /// everything on the first slot, the route's preference).
    fn recompute(&mut self) {
        let lines: Vec<(usize, f64, f64)> = self
            .slots
            .iter()
            .enumerate()
            .filter_map(|(k, s)| s.est.line().map(|(l, p)| (k, l, p)))
            .collect();
        let bands = envelope(&lines);
        self.nbands = 0;
        for (i, b) in bands.iter().take(MAX_SLOTS).enumerate() {
            self.bands[i] = *b;
            self.nbands = i + 1;
        }
        if self.nbands == 0 {
            self.bands[0] = Band {
                upto: u64::MAX,
                slot: 0,
            };
            self.nbands = 1;
        }
        // The last band covers every size.
        self.bands[self.nbands - 1].upto = u64::MAX;
    }

    /// What the selection chose and knows, for `--stats` and `gwinfo`.
    pub fn summary(&self) -> Summary {
        let mut from = 0;
        let bands = self
            .bands()
            .iter()
            .map(|b| {
                let band = (from, b.upto, self.slots[b.slot as usize].stack.to_string());
                from = b.upto;
                band
            })
            .collect();
        Summary {
            bands,
            forced: self.forced,
            slots: self
                .slots
                .iter()
                .map(|s| SlotSummary {
                    stack: s.stack.to_string(),
                    rtt_ns: s.est.rtt_ns.map(|r| r as u64),
                    bytes_per_s: s.est.bytes_per_s.map(|b| b as u64),
                    msgs: s.msgs,
                    bytes: s.bytes,
                })
                .collect(),
        }
    }

    /// [`Selector::summary`] as one line.
    pub fn describe(&self) -> String {
        self.summary().to_string()
    }
}

/// A selector's account: its size bands and each slot's estimates and
/// traffic. Crosses the stats record as JSON (no spaces in PMI values),
/// printed by `gwrun --stats` with [`Display`](std::fmt::Display).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// (from, below, stack): sizes `from..below` go to `stack`.
    pub bands: Vec<(u64, u64, String)>,
    pub forced: bool,
    pub slots: Vec<SlotSummary>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotSummary {
    pub stack: String,
    pub rtt_ns: Option<u64>,
    pub bytes_per_s: Option<u64>,
    pub msgs: u64,
    pub bytes: u64,
}

impl Summary {
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "bands": self.bands.iter().map(|(f, b, s)| serde_json::json!([f, b, s])).collect::<Vec<_>>(),
            "forced": self.forced,
            "slots": self.slots.iter().map(|s| serde_json::json!({
                "stack": s.stack, "rtt_ns": s.rtt_ns, "bytes_per_s": s.bytes_per_s,
                "msgs": s.msgs, "bytes": s.bytes,
            })).collect::<Vec<_>>(),
        })
    }

    /// Reads [`Summary::to_json`]'s output (`None` when it is not that:
    /// the record comes from another process and is checked).
    pub fn from_json(v: &serde_json::Value) -> Option<Summary> {
        let bands = v
            .get("bands")?
            .as_array()?
            .iter()
            .map(|b| {
                Some((
                    b.get(0)?.as_u64()?,
                    b.get(1)?.as_u64()?,
                    b.get(2)?.as_str()?.to_string(),
                ))
            })
            .collect::<Option<Vec<_>>>()?;
        let slots = v
            .get("slots")?
            .as_array()?
            .iter()
            .map(|s| {
                Some(SlotSummary {
                    stack: s.get("stack")?.as_str()?.to_string(),
                    rtt_ns: s.get("rtt_ns").and_then(|v| v.as_u64()),
                    bytes_per_s: s.get("bytes_per_s").and_then(|v| v.as_u64()),
                    msgs: s.get("msgs")?.as_u64()?,
                    bytes: s.get("bytes")?.as_u64()?,
                })
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Summary {
            bands,
            forced: v.get("forced")?.as_bool()?,
            slots,
        })
    }
}

impl Summary {
    /// The bands alone: `udp below 10000 B, tcp from 10000 B`.
    pub fn bands_text(&self) -> String {
        let words: Vec<String> = self
            .bands
            .iter()
            .map(|(from, below, name)| match (*from, *below) {
                (0, u64::MAX) => format!("{name} for every size"),
                (0, to) => format!("{name} below {to} B"),
                (fr, u64::MAX) => format!("{name} from {fr} B"),
                (fr, to) => format!("{name} from {fr} B below {to} B"),
            })
            .collect();
        words.join(", ")
    }
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.bands_text())?;
        f.write_str(if self.forced {
            " (estimates forced by GW_SELECT_ESTIMATES)"
        } else {
            " (measured)"
        })?;
        for s in &self.slots {
            let rtt = s
                .rtt_ns
                .map_or("?".to_string(), |r| format!("{:.0} us", r as f64 / 1e3));
            let bw = s
                .bytes_per_s
                .map_or("?".to_string(), |b| format!("{:.1} MB/s", b as f64 / 1e6));
            write!(
                f,
                "; {}: rtt {rtt}, {bw}, {} msgs/{} B",
                s.stack, s.msgs, s.bytes
            )?;
        }
        Ok(())
    }
}

/// The lower envelope of the cost lines `(slot, latency ns, ns per
/// byte)`: which slot is cheapest from which size on. Ties go to the
/// lower latency, then to the earlier (preferred) slot.
pub fn envelope(lines: &[(usize, f64, f64)]) -> Vec<Band> {
    let better_at_zero = |a: &(usize, f64, f64), b: &(usize, f64, f64)| {
        (a.1, a.2, a.0)
            .partial_cmp(&(b.1, b.2, b.0))
            .unwrap_or(std::cmp::Ordering::Equal)
    };
    let Some(mut cur) = lines.iter().copied().min_by(better_at_zero) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut x = 0.0f64;
    loop {
        // The next line to undercut the current one: a smaller slope,
        // crossing it at the smallest size beyond `x`.
        let next = lines
            .iter()
            .filter(|o| o.2 < cur.2)
            .map(|o| {
                let cross = ((o.1 - cur.1) / (cur.2 - o.2)).max(x);
                (cross, *o)
            })
            .min_by(|a, b| {
                (a.0, a.1 .2)
                    .partial_cmp(&(b.0, b.1 .2))
                    .unwrap_or(std::cmp::Ordering::Equal)
            });
        match next {
            Some((cross, o)) if cross < u64::MAX as f64 => {
                let upto = cross.ceil() as u64;
                if upto > 0 && out.last().is_none_or(|b: &Band| b.upto < upto) {
                    out.push(Band {
                        upto,
                        slot: cur.0 as u8,
                    });
                }
                cur = o;
                x = cross;
            }
            _ => {
                out.push(Band {
                    upto: u64::MAX,
                    slot: cur.0 as u8,
                });
                return out;
            }
        }
    }
}

/// `GW_SELECT_ESTIMATES`: `name=LAT_US/MBPS,...` (name = a stack or a
/// base method; latency one-way in µs, bandwidth in MB/s = 10^6 B/s).
pub fn parse_forced(text: &str) -> Result<Vec<(String, Estimate)>, String> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, vals) = part
            .split_once('=')
            .ok_or_else(|| format!("{part:?}: expected STACK=LATENCY_US/MBPS"))?;
        let (lat, bw) = vals
            .split_once('/')
            .ok_or_else(|| format!("{part:?}: expected STACK=LATENCY_US/MBPS"))?;
        let num = |v: &str| -> Result<f64, String> {
            v.trim()
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite() && *x >= 0.0)
                .ok_or_else(|| format!("{part:?}: {v:?} is not a non-negative number"))
        };
        let (lat, bw) = (num(lat)?, num(bw)?);
        if bw <= 0.0 {
            return Err(format!("{part:?}: the bandwidth must be above 0"));
        }
        out.push((
            name.trim().to_string(),
            Estimate {
                rtt_ns: Some(lat * 2e3),
                bytes_per_s: Some(bw * 1e6),
            },
        ));
    }
    Ok(out)
}

/// The forced estimate of `stack` among `forced` (its exact name first,
/// then its base method).
pub fn forced_for(forced: &[(String, Estimate)], stack: &str) -> Option<Estimate> {
    let base = stack.rsplit('+').next().unwrap_or(stack);
    forced
        .iter()
        .find(|(n, _)| n == stack)
        .or_else(|| forced.iter().find(|(n, _)| n == base))
        .map(|(_, e)| *e)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum_has_spaces(v: &serde_json::Value) -> bool {
        v.to_string().contains(' ')
    }

    fn est(lat_us: f64, mbps: f64) -> Estimate {
        Estimate {
            rtt_ns: Some(lat_us * 2e3),
            bytes_per_s: Some(mbps * 1e6),
        }
    }

    #[test]
    fn the_envelope_switches_where_the_costs_cross() {
        // udp: 5 us + s/50 MB/s; tcp: 200 us + s/2000 MB/s. Equal where
        // 195 us = s (1/50e6 - 1/2000e6) s/B, i.e. s = 10 000 B.
        let s = Selector::new(
            &[(1, "tcp"), (2, "udp")],
            Some(&[est(200.0, 2000.0), est(5.0, 50.0)]),
        );
        assert_eq!(
            s.bands(),
            &[
                Band {
                    upto: 10_000,
                    slot: 1
                },
                Band {
                    upto: u64::MAX,
                    slot: 0
                }
            ]
        );
        let mut s = s;
        let t = Instant::now();
        assert_eq!(s.pick(8, t), 1);
        assert_eq!(s.pick(9_999, t), 1);
        assert_eq!(s.pick(10_000, t), 0);
        assert_eq!(s.pick(4 << 20, t), 0);
        assert!(
            s.describe()
                .starts_with("udp below 10000 B, tcp from 10000 B"),
            "{}",
            s.describe()
        );
        // The stats record's form reads back as it was, has no spaces
        // (PMI values cannot), and junk does not read.
        let sum = s.summary();
        assert_eq!(Summary::from_json(&sum.to_json()), Some(sum.clone()));
        assert!(!sum_has_spaces(&sum.to_json()));
        assert_eq!(Summary::from_json(&serde_json::json!({"bands": 7})), None);
    }

    #[test]
    fn a_dominated_stack_gets_no_band_and_ties_keep_the_preference() {
        // tcp is faster at every size: one band.
        let s = Selector::new(
            &[(1, "tcp"), (2, "udp")],
            Some(&[est(5.0, 2000.0), est(50.0, 100.0)]),
        );
        assert_eq!(
            s.bands(),
            &[Band {
                upto: u64::MAX,
                slot: 0
            }]
        );
        // Identical lines: the first (preferred) slot.
        let s = Selector::new(
            &[(1, "tcp"), (2, "udp")],
            Some(&[est(5.0, 100.0), est(5.0, 100.0)]),
        );
        assert_eq!(
            s.bands(),
            &[Band {
                upto: u64::MAX,
                slot: 0
            }]
        );
        // Three lines, the middle one owns a middle band.
        let b = envelope(&[(0, 0.0, 10.0), (1, 100.0, 1.0), (2, 10_000.0, 0.5)]);
        let slots: Vec<u8> = b.iter().map(|b| b.slot).collect();
        assert_eq!(slots, vec![0, 1, 2]);
        assert_eq!(b[0].upto, 12); // 100 / 9 = 11.1
        assert_eq!(b[1].upto, 19_800); // 9900 / 0.5
        assert_eq!(b[2].upto, u64::MAX);
    }

    #[test]
    fn measuring_starts_by_visiting_every_slot_then_follows_the_traffic() {
        let t0 = Instant::now();
        let at = |us: u64| t0 + Duration::from_micros(us);
        let mut s = Selector::new(&[(1, "tcp"), (2, "udp")], None);
        // No estimates: small messages open each slot in turn, then stay
        // on the preferred one until the round trips are timed.
        assert_eq!(s.pick(8, at(0)), 0);
        s.sent(0, 1, 8, at(0), true);
        assert_eq!(s.pick(8, at(1)), 1);
        assert_eq!(s.pick(8, at(1)), 1, "not used yet");
        assert!(s.probing());
        // A small message sent alone is timed by its ack: tcp 400 us.
        s.acked(1, at(400));
        assert_eq!(s.slots[0].est.rtt_ns, Some(400_000.0));
        // The transport's own figure is ignored once the acks timed one.
        s.rtt_sample(0, Duration::from_millis(9));
        assert_eq!(s.slots[0].est.rtt_ns, Some(400_000.0));
        // udp: 20 us; a seed from its transport is replaced.
        s.rtt_sample(1, Duration::from_millis(7));
        s.sent(1, 2, 8, at(500), true);
        s.acked(2, at(520));
        assert_eq!(s.slots[1].est.rtt_ns, Some(20_000.0));
        // A late ack moves it up by a quarter of the difference only; a
        // fast one brings it down at once.
        s.sent(1, 3, 8, at(530), true);
        s.acked(3, at(530 + 420));
        assert_eq!(s.slots[1].est.rtt_ns, Some(120_000.0));
        s.sent(1, 4, 8, at(1000), true);
        s.acked(4, at(1020));
        assert_eq!(s.slots[1].est.rtt_ns, Some(20_000.0));
        // Bulk messages measure each slot's bandwidth once.
        assert_eq!(s.pick(1 << 20, at(600)), 0);
        s.sent(0, 5, 1 << 20, at(600), true);
        assert!(s.probing());
        // While slot 0's probe is out, the next bulk message times slot 1.
        assert_eq!(s.pick(1 << 20, at(601)), 1);
        // tcp: 1 MiB in 400 us rtt + 1048.576 us = 1000 MB/s.
        s.acked(5, at(600 + 400 + 1049));
        assert!(!s.probing());
        let bw0 = s.slots[0].est.bytes_per_s.unwrap();
        assert!((bw0 / 1e6 - 1000.0).abs() < 2.0, "{bw0}");
        // udp: 1 MiB in 20 us rtt + 20 971 us = 50 MB/s.
        s.sent(1, 6, 1 << 20, at(3000), true);
        s.acked(6, at(3000 + 20 + 20_972));
        // Crossing: 190 us = s (1/50e6 - 1/1000e6) → s = 10 000 B.
        let b = s.bands();
        assert_eq!((b[0].slot, b[1].slot), (1, 0));
        assert!((9_900..=10_100).contains(&b[0].upto), "{b:?}");
        assert_eq!(s.pick(100, at(30_000)), 1);
        assert_eq!(s.pick(1 << 20, at(30_000)), 0);
        // A message sent behind others is not timed (queueing would count).
        s.sent(0, 7, 1 << 20, at(30_000), false);
        assert!(!s.probing());
        // tcp slows down tenfold: its bandwidth follows (EWMA), and the
        // crossing moves up.
        for i in 0..20u64 {
            let t = 40_000 + i * 20_000;
            s.sent(0, 10 + i, 1 << 20, at(t), true);
            s.acked(10 + i, at(t + 400 + 10_486));
        }
        let bw0 = s.slots[0].est.bytes_per_s.unwrap();
        assert!(bw0 < 110e6, "{bw0}");
        assert!(s.bands()[0].upto > 15_000, "{:?}", s.bands());
        // Counters: every message sent is counted on its slot.
        assert_eq!((s.slots[0].msgs, s.slots[1].msgs), (23, 4));
    }

    #[test]
    fn a_stale_bandwidth_is_probed_again() {
        let t0 = Instant::now();
        let mut s = Selector::new(&[(1, "tcp"), (2, "udp")], None);
        s.rtt_sample(0, Duration::from_micros(100));
        s.rtt_sample(1, Duration::from_micros(10));
        s.sent(0, 1, 1 << 20, t0, true);
        s.acked(1, t0 + Duration::from_millis(2));
        s.sent(1, 2, 1 << 20, t0, true);
        s.acked(2, t0 + Duration::from_millis(40));
        // tcp carries bulk, which refreshes its own estimate.
        s.sent(0, 3, 1 << 20, t0 + Duration::from_millis(100), true);
        s.acked(3, t0 + Duration::from_millis(102));
        // udp is slow for bulk: tcp gets it ...
        assert_eq!(s.pick(1 << 20, t0 + Duration::from_millis(50)), 0);
        // ... until udp's sample is REPROBE_EVERY old: one bulk message of
        // at most REPROBE_MAX goes there, then tcp again.
        let later = t0 + REPROBE_EVERY + Duration::from_millis(50);
        assert_eq!(s.pick(REPROBE_MAX + 1, later), 0, "too large to re-probe");
        assert_eq!(s.pick(REPROBE_MAX, later), 1);
        assert_eq!(s.pick(REPROBE_MAX, later), 0);
    }

    #[test]
    fn forced_estimates_parse_and_bad_ones_are_refused() {
        let f = parse_forced("udp=5/50, encrypt+tcp=200/2000").unwrap();
        assert_eq!(forced_for(&f, "udp"), Some(est(5.0, 50.0)));
        assert_eq!(forced_for(&f, "encrypt+udp"), Some(est(5.0, 50.0)));
        assert_eq!(forced_for(&f, "encrypt+tcp"), Some(est(200.0, 2000.0)));
        assert_eq!(forced_for(&f, "tcp"), None);
        for bad in [
            "udp",
            "udp=5",
            "udp=x/50",
            "udp=5/0",
            "udp=-1/5",
            "udp=5/inf",
        ] {
            assert!(parse_forced(bad).is_err(), "{bad}");
        }
        // Forced estimates are not measured over.
        let mut s = Selector::new(
            &[(1, "tcp"), (2, "udp")],
            Some(&[est(200.0, 2000.0), est(5.0, 50.0)]),
        );
        s.rtt_sample(0, Duration::from_micros(1));
        s.sent(0, 1, 1 << 20, Instant::now(), true);
        assert!(!s.probing());
        assert_eq!(s.bands()[0].upto, 10_000);
    }
}
