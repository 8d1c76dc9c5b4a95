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
//! # What is measured
//!
//! A *probe* is an ordinary message, sent while nothing else of the pair
//! was unacknowledged, whose sequence header asks the receiver to
//! acknowledge it at once (`ACK_NOW`, `failover.rs`: the ack goes back at
//! the end of the receiver's progress round, on the link the probe came
//! by). Its send-to-ack time is then the message's transfer plus one
//! small message back, with no ack policy in it. What went wrong before
//! (bulk timed to whatever ack covered it): acks are cumulative and lazy
//! (every 64 messages or 1 MiB, or when idle, or riding the peer's next
//! message), so a 256 KiB MPI piece was timed to an ack sent four pieces
//! later or carried by a 4 MiB reply, and tcp on loopback read 207–340
//! MB/s against ~4000 true. Taking the transports' own figures instead
//! (congestion window per round trip) was tried and was worse: a window
//! that never met a loss says nothing about capacity.
//!
//! Per slot and per *size class* (powers of four, [`CLASS_BOUNDS`]) the
//! one-way cost is kept: a probe's send-to-ack time minus half the slot's
//! round trip (the ack's way back): the least of the last [`RECENT`]
//! samples (a late ack — the receiver was busy — only inflates a sample).
//! The round trip comes from probes of the smallest class; the bandwidth
//! (bulk probes: `size / (elapsed − rtt)`) and the transport's round trip
//! (a seed until probes time one) give the line `rtt/2 + size/bandwidth`
//! that stands in for a class not measured yet. Each class goes to the
//! slot cheapest for it; the classes are kept as at most [`MAX_BANDS`]
//! size bands, so the send path scans a few integers: no allocation, no
//! floating point, no lock beyond the pair's send lock it already holds.
//! (Why classes and not the line alone: udp's cost is flat up to a
//! datagram and steep beyond it, so one line per stack put 1 KiB on tcp
//! where udp was faster.)
//!
//! # When it probes
//!
//! Probes cost the receiver one ack frame each, so they are rationed: at
//! most one per [`PROBE_GAP`] per pair, a class of the chosen slot
//! re-measured every [`REFRESH_CHOSEN`], of another slot every
//! [`REFRESH_OTHER`] (bulk classes: [`REFRESH_OTHER_BULK`], and only with
//! messages up to [`REPROBE_MAX`]: a message there costs what that stack
//! is slower). A class never measured on a slot is probed at the first
//! chance. Small messages open every slot's link first (the probe at
//! connect is real traffic).
//!
//! - forced: `GW_SELECT_ESTIMATES=udp=5/50,tcp=200/2000` (stack or base =
//!   one-way latency µs / bandwidth MB/s) fixes the estimates and turns
//!   measuring off: the bands are the lines' exact crossings, independent
//!   of load (tests, and operators who know their links).
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
               asks for), each costed per size class from probes (messages acknowledged at \
               once), and each message on the cheapest for its size (docs/wan.md). A \
               communicator's `gw_select` info key overrides it.",
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

/// Size classes: class `c` holds the sizes below `CLASS_BOUNDS[c]` (and
/// from the bound before it); the last class every larger size. MPI's
/// rendezvous pieces (256 KiB and a header) fall in the one below 1 MiB.
pub const CLASS_BOUNDS: [u64; NCLASSES - 1] = [
    256,
    1 << 10,
    4 << 10,
    16 << 10,
    64 << 10,
    256 << 10,
    1 << 20,
];
pub const NCLASSES: usize = 8;

/// At most this many size bands (one per class at worst).
pub const MAX_BANDS: usize = NCLASSES;

/// Messages from this size on are bulk: their probes time bandwidth.
pub const PROBE_MIN: usize = 64 << 10;

/// At most one probe per pair in this time (each costs the receiver an
/// ack frame: at most a thousand a second).
pub const PROBE_GAP: Duration = Duration::from_millis(1);

/// A class of the slot that carries it is re-measured this often.
pub const REFRESH_CHOSEN: Duration = Duration::from_millis(100);

/// A class of a slot not chosen for it is re-measured this often (each
/// such probe costs a message's worth of that stack's slowness) ...
pub const REFRESH_OTHER: Duration = Duration::from_secs(1);

/// ... and a bulk class (from [`PROBE_MIN`]) this often: there one probe
/// on a stack ten times slower costs a millisecond (the first bench's 2 s
/// re-probes at 1 MiB showed in its medians).
pub const REFRESH_OTHER_BULK: Duration = Duration::from_secs(10);

/// A slot not chosen for a size is probed with messages up to this size
/// only (MPI's rendezvous pieces fit; whole 4 MiB messages do not).
pub const REPROBE_MAX: usize = (1 << 20) - 1;

/// Weight of a new sample in the running averages.
const EWMA_NEW: f64 = 0.25;

/// The size class of a message of `len` bytes.
#[inline]
pub fn class_of(len: u64) -> usize {
    let mut c = 0;
    while c < NCLASSES - 1 && len >= CLASS_BOUNDS[c] {
        c += 1;
    }
    c
}

/// A size inside class `c` that stands for it where the line model is
/// evaluated (the middle of its range; 4 MiB for the last).
fn class_size(c: usize) -> u64 {
    let lo = if c == 0 { 0 } else { CLASS_BOUNDS[c - 1] };
    let hi = CLASS_BOUNDS.get(c).copied().unwrap_or(8 << 20);
    (lo + hi) / 2
}

/// What is known of one candidate stack of a pair (the line model).
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

/// How many recent samples a figure keeps.
pub const RECENT: usize = 4;

/// The last [`RECENT`] samples of a figure, of which the least counts: a
/// late ack (the receiver was busy or asleep) only ever inflates a sample,
/// so on a loaded machine the least of a few is what the stack costs; a
/// lasting change shows after `RECENT` samples. The same for every slot,
/// however often it is probed: a running average moved up by a quarter
/// per sample made the slot probed most often look the worst under load.
#[derive(Debug, Clone, Copy, Default)]
struct Recent {
    samples: [f64; RECENT],
    len: u8,
    next: u8,
}

impl Recent {
    fn push(&mut self, v: f64) {
        self.samples[self.next as usize] = v;
        self.next = (self.next + 1) % RECENT as u8;
        self.len = (self.len + 1).min(RECENT as u8);
    }

    fn least(&self) -> Option<f64> {
        self.samples[..self.len as usize]
            .iter()
            .copied()
            .reduce(f64::min)
    }
}

/// A probe in flight: its ack times the slot.
#[derive(Debug, Clone, Copy)]
struct Probe {
    seq: u64,
    len: usize,
    sent: Instant,
}

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
    /// Measured one-way cost per size class, ns: the least of the recent
    /// samples.
    class_ns: [Option<f64>; NCLASSES],
    class_recent: [Recent; NCLASSES],
    /// Round trips and transfer times per byte of the recent probes.
    rtt_recent: Recent,
    ns_per_byte_recent: Recent,
    /// When each class was last probed on this slot.
    probed_at: [Option<Instant>; NCLASSES],
    /// The round trip comes from probes (the transport's estimate only
    /// seeds it: it is measured differently, and under load its delayed
    /// acks made it ten times the pair's).
    rtt_from_acks: bool,
    probe: Option<Probe>,
}

impl Slot {
    /// The slot's cost for class `c`: measured, else from the line.
    fn class_cost(&self, c: usize) -> Option<f64> {
        self.class_ns[c].or_else(|| self.est.cost_ns(class_size(c)))
    }

    /// The measured cost of class `c`, ns (`None`: not measured yet).
    pub fn measured_ns(&self, c: usize) -> Option<f64> {
        self.class_ns.get(c).copied().flatten()
    }
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
    bands: [Band; MAX_BANDS],
    nbands: usize,
    /// Per class, the slot its band gives it.
    chosen: [u8; NCLASSES],
    /// Estimates fixed by `GW_SELECT_ESTIMATES`: no measuring, no probing.
    forced: bool,
    /// Slots whose link no message opened yet (bit per slot).
    unopened: u8,
    /// Slots with a probe in flight.
    probing: u8,
    /// No probe before this.
    next_probe: Option<Instant>,
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
                class_ns: [None; NCLASSES],
                class_recent: [Recent::default(); NCLASSES],
                rtt_recent: Recent::default(),
                ns_per_byte_recent: Recent::default(),
                probed_at: [None; NCLASSES],
                rtt_from_acks: false,
                probe: None,
            })
            .collect();
        let forced =
            forced.is_some_and(|f| f.len() >= slots.len() && f.iter().all(|e| e.complete()));
        let all = ((1u16 << slots.len()) - 1) as u8;
        let mut s = Selector {
            slots,
            bands: [Band::default(); MAX_BANDS],
            nbands: 0,
            chosen: [0; NCLASSES],
            forced,
            unopened: if forced { 0 } else { all },
            probing: 0,
            next_probe: None,
        };
        s.recompute();
        s
    }

    /// The slot for a message of `len` bytes sent at `now`, and whether
    /// to send it as a probe (asking for an ack at once). `alone`: nothing
    /// else of the pair is unacknowledged (only such a message times a
    /// slot: behind others, their queueing would count).
    #[inline]
    pub fn pick(&self, len: usize, now: Instant, alone: bool) -> (usize, bool) {
        if !self.forced {
            if self.unopened != 0 && len < PROBE_MIN {
                // A slot not used yet: its link opens with this message.
                let k = self.unopened.trailing_zeros() as usize;
                return (k, alone && self.probe_allowed(k, now));
            }
            if alone && self.next_probe.is_none_or(|t| now >= t) {
                if let Some(k) = self.probe_due(len, now) {
                    return (k, true);
                }
            }
        }
        (self.banded(len as u64), false)
    }

    /// The slot the bands give a message of `len` bytes.
    #[inline]
    fn banded(&self, len: u64) -> usize {
        for b in &self.bands[..self.nbands] {
            if len < b.upto {
                return b.slot as usize;
            }
        }
        0
    }

    fn probe_allowed(&self, k: usize, now: Instant) -> bool {
        self.probing & (1 << k) == 0 && self.next_probe.is_none_or(|t| now >= t)
    }

    /// A slot whose measurement of `len`'s class is missing or stale (the
    /// most overdue), if any.
    #[cold]
    fn probe_due(&self, len: usize, now: Instant) -> Option<usize> {
        let c = class_of(len as u64);
        let chosen = self.chosen[c] as usize;
        let mut best: Option<(usize, Option<Instant>)> = None;
        for (k, s) in self.slots.iter().enumerate() {
            if self.probing & (1 << k) != 0 || (k != chosen && len > REPROBE_MAX) {
                continue;
            }
            let every = if k == chosen {
                REFRESH_CHOSEN
            } else if len >= PROBE_MIN {
                REFRESH_OTHER_BULK
            } else {
                REFRESH_OTHER
            };
            let at = s.probed_at[c];
            if at.is_some_and(|t| now.saturating_duration_since(t) < every) {
                continue;
            }
            // Never measured first, then the oldest.
            if best.is_none_or(|(_, b)| at < b) {
                best = Some((k, at));
            }
        }
        best.map(|(k, _)| k)
    }

    /// Slot `k` carried message `seq` of `len` bytes at `now`; `probe`:
    /// it was sent asking for an ack at once (its ack times it).
    pub fn sent(&mut self, k: usize, seq: u64, len: usize, now: Instant, probe: bool) {
        let forced = self.forced;
        let Some(s) = self.slots.get_mut(k) else {
            return;
        };
        s.msgs += 1;
        s.bytes += len as u64;
        self.unopened &= !(1 << k);
        if !forced && probe && s.probe.is_none() {
            s.probe = Some(Probe {
                seq,
                len,
                sent: now,
            });
            s.probed_at[class_of(len as u64)] = Some(now);
            self.probing |= 1 << k;
            self.next_probe = Some(now + PROBE_GAP);
        }
    }

    /// Whether a probe waits for its ack.
    #[inline]
    pub fn probing(&self) -> bool {
        self.probing != 0
    }

    /// Probes in flight are not timed (a link was replaced: their acks
    /// would count the failover).
    pub fn forget_probes(&mut self) {
        for s in &mut self.slots {
            s.probe = None;
        }
        self.probing = 0;
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
            let c = class_of(p.len as u64);
            if c == 0 {
                // Send to ack of a small message: the round trip.
                s.rtt_recent.push(elapsed);
                s.est.rtt_ns = s.rtt_recent.least();
                s.rtt_from_acks = true;
            }
            // The ack's way back is half a round trip (a round trip above
            // the whole exchange is not trusted: then half of it counts).
            let back = s
                .est
                .rtt_ns
                .map_or(elapsed / 2.0, |r| (r / 2.0).min(elapsed / 2.0));
            s.class_recent[c].push(elapsed - back);
            s.class_ns[c] = s.class_recent[c].least();
            if p.len >= PROBE_MIN {
                let rtt = s.est.rtt_ns.unwrap_or(0.0);
                let transfer = if rtt <= elapsed / 2.0 {
                    elapsed - rtt
                } else {
                    elapsed
                };
                s.ns_per_byte_recent.push(transfer / p.len as f64);
                s.est.bytes_per_s = s.ns_per_byte_recent.least().map(|t| 1e9 / t.max(1e-6));
            }
            changed = true;
        }
        if changed {
            self.recompute();
        }
    }

    /// Slot `k`'s transport measured a round trip of `rtt`: a seed until
    /// probes timed one.
    pub fn rtt_sample(&mut self, k: usize, rtt: Duration) {
        if self.forced {
            return;
        }
        let Some(s) = self.slots.get_mut(k).filter(|s| !s.rtt_from_acks) else {
            return;
        };
        let old = s.est.rtt_ns;
        s.est.rtt_ns = Some(ewma(old, rtt.as_nanos() as f64));
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

    /// Recomputes the bands: forced, the lines' exact crossings; measured,
    /// per class the slot with the lowest cost (none known: the first
    /// slot, the route's preference). No allocation when measuring: it
    /// runs at every probe's ack.
    fn recompute(&mut self) {
        if self.forced {
            let lines: Vec<(usize, f64, f64)> = self
                .slots
                .iter()
                .enumerate()
                .filter_map(|(k, s)| s.est.line().map(|(l, p)| (k, l, p)))
                .collect();
            let bands = envelope(&lines);
            self.nbands = 0;
            for (i, b) in bands.iter().take(MAX_BANDS).enumerate() {
                self.bands[i] = *b;
                self.nbands = i + 1;
            }
            for c in 0..NCLASSES {
                self.chosen[c] = self.banded(class_size(c)) as u8;
            }
        } else {
            self.nbands = 0;
            for c in 0..NCLASSES {
                let mut best: Option<(usize, f64)> = None;
                for (k, s) in self.slots.iter().enumerate() {
                    if let Some(cost) = s.class_cost(c) {
                        if best.is_none_or(|(_, b)| cost < b) {
                            best = Some((k, cost));
                        }
                    }
                }
                let k = best.map_or(0, |(k, _)| k) as u8;
                self.chosen[c] = k;
                let upto = CLASS_BOUNDS.get(c).copied().unwrap_or(u64::MAX);
                if self.nbands > 0 && self.bands[self.nbands - 1].slot == k {
                    self.bands[self.nbands - 1].upto = upto;
                } else {
                    self.bands[self.nbands] = Band { upto, slot: k };
                    self.nbands += 1;
                }
            }
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

    /// The one-line account (`--stats`, verbose logs).
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
#[path = "measured_tests.rs"]
mod tests;
