//! The reliable-datagram protocol as a deterministic state machine: no
//! sockets, no clock, no threads (the quinn-proto shape). The socket layer
//! ([`super`]) feeds it datagrams and the current time and sends what it
//! polls out; the tests feed it a virtual clock and a simulated network.
//!
//! # Protocol
//!
//! Every datagram starts with a 12-byte header: magic `GU`, version, type,
//! source context id, destination context id (little-endian).
//!
//! * **Authentication** (once per pair, before any data): the connector sends
//!   `HELLO(nonce_c)`, padded to [`HELLO_LEN`]; the acceptor answers
//!   `CHALLENGE(nonce_c, nonce_a, proof_a)` without keeping state (`nonce_a`
//!   is a cookie bound to the HELLO's address, see `on_hello`); the
//!   connector checks `proof_a` and answers `PROOF(nonce_c, nonce_a,
//!   proof_c)`. The proofs are [`crate::auth`] MACs over both nonces and both
//!   ids with the job secret, so neither side sends the secret. The acceptor
//!   accepts a cookie once (newer stamps only: a replay is not a handshake)
//!   and binds the peer's id to the address the cookie was issued to, which
//!   is also the only way a confirmed peer moves (path validation).
//!   Afterwards data and acks are accepted only from that address (a "name
//!   check", as in the 1998 PVM-AM design, not a MAC per datagram, which
//!   would cost more than the copy). Anything that fails is dropped and
//!   counted, never delivered; an unvalidated address never gets more bytes
//!   than it sent ([`AMPLIFICATION_LIMIT`] is the rule, the padding makes it 1×).
//!   A confirmed peer that breaks the protocol (acks for data never sent, a
//!   malformed datagram) fails its link; nothing a peer sends panics or
//!   grows state beyond [`StateSizes::check`].
//! * **Data**: `DATA(cum_ack, seq, msg_len, offset, payload)`. Each peer has
//!   one 64-bit sequence space of datagrams; a message longer than a datagram
//!   is cut into consecutive sequence numbers and reassembled by offset.
//!   `cum_ack` piggybacks the cumulative acknowledgement of the reverse
//!   direction on every data datagram.
//! * **Acks**: `ACK(cum_ack, ranges)`: the next expected sequence number plus
//!   up to [`MAX_SACK`] selective ranges received beyond it (as many as fit
//!   the datagram size): first the range holding the newest arrival, then the
//!   lowest ones. The sender accumulates them in a scoreboard, so each range
//!   needs to be reported only once and repeated ranges cost nothing.
//!
//! # Reliability
//!
//! Where the PVM-AM protocol had `depth` request buffers, each with one
//! sequence bit and one ack per request, this one keeps a window of `depth`
//! sequence numbers per peer (flow control: the receiver buffers at most
//! `depth` datagrams out of order), acknowledges cumulatively and selectively,
//! and retransmits a datagram with its *original* sequence number, so the
//! receiver deduplicates and orders with one counter.
//!
//! Loss is detected two ways. Fast (TCP RACK's rule): every transmission gets
//! a transmit order number; a datagram is lost when a datagram transmitted
//! after it has been acknowledged unambiguously, the receiver's report below
//! it is complete, and it is older than an RTT plus a reordering window that
//! grows when a retransmission proves spurious (see `detect_losses`).
//! Counting transmissions rather than sequence numbers covers lost
//! retransmissions too. Slow: the retransmission timeout (RFC 6298 estimate,
//! Karn's rule, restarted by every ack of new data) presumes lost what has
//! been in flight longer than the timeout, and doubles; the first timeout is
//! a tail-loss probe, later ones also collapse the congestion window; after
//! `retries` consecutive timeouts without progress the peer is declared
//! unreachable and reported as [`Event::Failed`]. A congestion controller
//! ([`super::cc`]) bounds the bytes in flight.

mod handshake;
mod receive;
mod transmit;
use handshake::*;
use receive::*;

use super::cc::{Aimd, Controller};
use crate::auth::{self, Role, NONCE_LEN, PROOF_LEN};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::fmt::Debug;
use std::hash::Hash;
use std::io::IoSlice;
use std::time::{Duration, Instant};

pub const MAGIC: [u8; 2] = *b"GU";
/// 2: HELLO padded to [`HELLO_LEN`], stateless challenge cookies.
pub const VERSION: u8 = 2;
pub const T_HELLO: u8 = 1;
pub const T_CHALLENGE: u8 = 2;
pub const T_PROOF: u8 = 3;
pub const T_DATA: u8 = 4;
pub const T_ACK: u8 = 5;
/// Common header: magic, version, type, source id, destination id.
pub const HDR: usize = 12;
/// Data header: common header, cumulative ack, sequence number, message length, offset.
pub const DATA_HDR: usize = HDR + 8 + 8 + 4 + 4;
/// Most selective-ack ranges per ACK datagram (fewer when the datagram size is small).
pub const MAX_SACK: usize = 127;
/// A datagram may be declared lost once a transmission this many places
/// after it was acknowledged (and the time threshold has passed). 1, as in
/// RACK: reordering is handled by time, not by counting, because a window
/// blocked behind a few losses has no later datagrams to count.
pub const REORDER_THRESHOLD: u64 = 1;
/// In-order datagrams acknowledged together (sooner on a gap, or when the
/// ack delay expires). Fewer acks matter on links where each datagram costs
/// (a software router, an emulator, a busy receiver); 4 still gives the
/// sender a clock of acks several times per window.
pub const ACK_EVERY: u32 = 4;
/// Datagrams a paced sender may send back to back after a pause (the
/// pacer's bucket). Bursts longer than a few dozen datagrams overflow small
/// queues on the way — a TUN device's ring, a switch port, a software
/// router — as random loss that no window reduction can prevent.
pub const PACE_BURST: usize = 16;
/// Length of a CHALLENGE (and of a PROOF).
pub const CHALLENGE_LEN: usize = HDR + 2 * NONCE_LEN + PROOF_LEN;
/// A HELLO is padded to this length, so that the answer to it (a
/// CHALLENGE) is never longer than the HELLO: an acceptor cannot be used
/// to amplify traffic towards an address that spoofed the HELLO.
pub const HELLO_LEN: usize = CHALLENGE_LEN;
/// Bytes sent to an address that has not proved it holds the secret, at
/// most, per byte received from it (QUIC's limit, RFC 9000 8.1). The only
/// such answer is a CHALLENGE, one per HELLO, no retransmission.
pub const AMPLIFICATION_LIMIT: usize = 3;
/// Smallest datagram the protocol works with (handshake datagrams must fit).
pub const MIN_DGRAM: usize = 128;
/// Handshake datagrams queued for sending at most: the socket layer sends
/// them after every few dozen received datagrams, so only a flood of HELLOs
/// between two polls reaches this; what does not fit is dropped (a real
/// peer retries).
pub const CTL_MAX: usize = 256;

/// Protocol settings (from the method's parameters).
#[derive(Debug, Clone)]
pub struct Config {
    /// This context's id.
    pub me: u32,
    /// Contexts in the job: ids at or above are refused (bounds per-peer state).
    pub size: u32,
    pub secret: [u8; 32],
    /// Largest datagram sent, headers included.
    pub dgram: usize,
    /// Sequence-number window per peer (datagrams in flight / buffered out of order).
    pub depth: u64,
    /// Retransmission timeout before the first round-trip sample, and the
    /// handshake's first retry interval.
    pub initial_rto: Duration,
    pub min_rto: Duration,
    /// Cap of the exponential backoff.
    pub max_rto: Duration,
    /// Consecutive timeouts without progress before a peer is declared unreachable.
    pub retries: u32,
    /// Initial congestion window in datagrams.
    pub initial_cwnd: usize,
    /// How long a lone in-order datagram's acknowledgement may wait for a
    /// reply to piggyback on.
    pub ack_delay: Duration,
}

impl Config {
    /// Payload bytes per data datagram.
    pub fn mss(&self) -> usize {
        self.dgram.max(MIN_DGRAM) - DATA_HDR
    }
}

/// A snapshot of one peer's sending state (see [`Endpoint::peer_states`]).
#[derive(Debug, Clone)]
pub struct PeerState {
    pub peer: u32,
    /// Congestion window and bytes in flight.
    pub window: usize,
    pub in_flight: usize,
    /// Bytes queued or unacknowledged.
    pub buffered: usize,
    pub srtt: Option<Duration>,
    pub min_rtt: Option<Duration>,
    /// Datagrams declared lost and not yet resent.
    pub lost: usize,
}

/// The largest per-peer state (see [`Endpoint::state_sizes`]).
#[doc(hidden)]
#[derive(Debug, Default, Clone)]
pub struct StateSizes {
    pub peers: usize,
    pub ctl: usize,
    pub events: usize,
    pub ooo_dgrams: usize,
    pub ooo_bytes: usize,
    pub ooo_ranges: usize,
    pub sacked_ranges: usize,
    pub lost: usize,
    /// Datagrams queued or unacknowledged (our own sends).
    pub unacked: usize,
    pub asm_capacity: usize,
    pub asm_len: usize,
}

impl StateSizes {
    /// Checks the bounds every input must respect; `Err` names the first
    /// one broken. `unacked` is what the caller queued itself.
    pub fn check(&self, cfg: &Config, unacked: usize) -> Result<(), String> {
        let depth = cfg.depth as usize;
        let bounds = [
            ("peers", self.peers, cfg.size as usize),
            ("ctl", self.ctl, CTL_MAX),
            ("ooo_dgrams", self.ooo_dgrams, depth),
            ("ooo_bytes", self.ooo_bytes, depth.saturating_mul(cfg.dgram)),
            ("ooo_ranges", self.ooo_ranges, depth),
            ("sacked_ranges", self.sacked_ranges, self.unacked),
            ("lost", self.lost, self.unacked),
            ("unacked", self.unacked, unacked),
            // The reassembly buffer starts at most 4 MiB and grows with
            // data received (doubling), never from an announced length.
            (
                "asm_capacity",
                self.asm_capacity,
                (4 << 20).max(2 * self.asm_len),
            ),
        ];
        for (what, value, bound) in bounds {
            if value > bound {
                return Err(format!("{what} = {value} exceeds its bound {bound}"));
            }
        }
        Ok(())
    }
}

/// What the protocol tells its user.
#[derive(Debug, PartialEq, Eq)]
pub enum Event {
    /// A whole message from `src`, in order, exactly once.
    Message { src: u32, data: Vec<u8> },
    /// `peer` is unreachable (retry limit) or broke the protocol; sends to it fail from now on.
    Failed { peer: u32, reason: String },
}

/// Observable counters (tests, `gwinfo`, reports).
#[derive(Debug, Default, Clone)]
pub struct Counters {
    /// Datagrams that are not ours or are malformed.
    pub garbage: u64,
    /// Handshake datagrams whose proof did not verify (wrong secret or forged).
    pub auth_failed: u64,
    /// Well-formed datagrams from a sender not (yet) authenticated at that address.
    pub unauthenticated: u64,
    pub retransmits: u64,
    /// Retransmissions that proved unnecessary (the original was only late).
    pub spurious: u64,
    pub timeouts: u64,
    /// Data datagrams received more than once.
    pub duplicates: u64,
    pub dgrams_sent: u64,
    pub dgrams_received: u64,
    /// Out-of-order data datagrams dropped because the peer's out-of-order
    /// buffer was at its byte budget (the sender resends them).
    pub over_budget: u64,
    /// Handshake datagrams not queued because [`CTL_MAX`] were waiting.
    pub ctl_overflow: u64,
    /// PROOFs of a handshake already accepted or older than it (replays),
    /// from another address than the peer's.
    pub replayed: u64,
    /// Authenticated peers that moved to a new address after proving they
    /// receive there (a fresh handshake through it).
    pub migrations: u64,
    /// Datagrams from a peer released after it left the job (see
    /// [`Endpoint::release`]) once its state was dropped, or handshakes
    /// from it: dropped.
    pub from_departed: u64,
}

#[derive(Debug)]
struct Sent {
    /// `msg_len | offset | payload` (everything after the sequence number).
    body: Vec<u8>,
    acked: bool,
    in_flight: bool,
    retransmitted: bool,
    /// Transmit order number of the latest transmission.
    tx: u64,
    sent_at: Instant,
}

/// Our side of the handshake as connector.
#[derive(Debug, Clone)]
enum Hs {
    Idle,
    Hello {
        nonce: [u8; NONCE_LEN],
        next: Instant,
        tries: u32,
    },
    Proof {
        nonce: [u8; NONCE_LEN],
        theirs: [u8; NONCE_LEN],
        next: Instant,
        tries: u32,
    },
    Done,
}

#[derive(Debug)]
struct Peer<A> {
    addr: Option<A>,
    hs: Hs,
    /// Acceptor side: the cookie stamp and nonce pair (theirs, ours) of the
    /// handshake last accepted. Older stamps are retired: a replayed PROOF
    /// is never a new handshake (see [`Endpoint::on_proof`]).
    accepted: Option<(u64, [u8; NONCE_LEN], [u8; NONCE_LEN])>,
    /// We checked their proof.
    verified: bool,
    /// They checked ours (they sent PROOF, or any data/ack after our PROOF).
    confirmed: bool,
    failed: Option<String>,
    // Send side.
    snd_una: u64,
    /// Datagrams from `snd_una` on: unacknowledged, then never sent.
    pkts: VecDeque<Sent>,
    next_new: u64,
    buffered: usize,
    lost: BTreeSet<u64>,
    /// Scoreboard: sequence numbers at or above `snd_una` selectively acknowledged.
    sacked: Ranges,
    /// Transmission order -> sequence number (entries go stale lazily).
    txmap: BTreeMap<u64, u64>,
    largest_acked_tx: Option<u64>,
    /// Below this, the receiver's reports are complete (see `on_ack`).
    known: u64,
    /// When `detect_losses` should run again (a candidate was too young).
    loss_time: Option<Instant>,
    /// When the retransmission timer was last (re)started.
    rto_base: Option<Instant>,
    /// Transmit order number at the last timeout: a datagram resent after
    /// it whose original is acked proves the timeout spurious.
    rto_tx: Option<u64>,
    /// After a timeout, one retransmission may go out whatever the window.
    probe: bool,
    /// Pacing: the next datagram may leave at this instant (a virtual clock
    /// that runs [`PACE_BURST`] datagrams' worth behind `now` at most).
    pace_next: Option<Instant>,
    /// Next transmit order number (monotonic, never reused).
    next_tx: u64,
    in_flight: usize,
    cc: Box<dyn Controller>,
    srtt: Option<Duration>,
    rttvar: Duration,
    min_rtt: Option<Duration>,
    /// Extra reordering window, grown when a retransmission proves spurious.
    reo_wnd: Duration,
    rto: Duration,
    backoff: u32,
    // Receive side.
    rcv_next: u64,
    ooo: BTreeMap<u64, Vec<u8>>,
    /// Bytes held in `ooo` (bounded by [`Endpoint::ooo_budget`]).
    ooo_bytes: usize,
    /// The sequence numbers in `ooo`, as ranges (for building acks cheaply).
    ooo_ranges: Ranges,
    /// One past the highest sequence number received.
    rcv_max: u64,
    /// The newest out-of-order arrival (its range is reported first).
    rcv_last: u64,
    /// In-order datagrams received since the last ack sent.
    unacked_rx: u32,
    asm: Vec<u8>,
    asm_len: Option<u32>,
    /// Something to acknowledge: immediately (`ack_now`: a gap, a duplicate,
    /// [`ACK_EVERY`] datagrams) or by `ack_due` (a lone in-order datagram waits a
    /// little for a reply to carry the ack, saving a datagram per request).
    ack_now: bool,
    ack_due: Option<Instant>,
    /// Released ([`Endpoint::release`]): its send side is gone and its
    /// receive side stays until it has been quiet [`Endpoint::release_grace`]
    /// since this instant (the last datagram from it).
    departed: Option<Instant>,
}

impl<A> Peer<A> {
    fn new(cfg: &Config) -> Self {
        Peer {
            addr: None,
            hs: Hs::Idle,
            accepted: None,
            verified: false,
            confirmed: false,
            failed: None,
            snd_una: 0,
            pkts: VecDeque::new(),
            next_new: 0,
            buffered: 0,
            lost: BTreeSet::new(),
            sacked: Ranges::default(),
            txmap: BTreeMap::new(),
            largest_acked_tx: None,
            known: 0,
            loss_time: None,
            rto_base: None,
            rto_tx: None,
            probe: false,
            pace_next: None,
            next_tx: 0,
            in_flight: 0,
            cc: Box::new(Aimd::new(cfg.mss(), cfg.initial_cwnd, cfg.depth as usize)),
            srtt: None,
            rttvar: Duration::ZERO,
            min_rtt: None,
            reo_wnd: Duration::ZERO,
            rto: cfg.initial_rto,
            backoff: 0,
            rcv_next: 0,
            ooo: BTreeMap::new(),
            ooo_bytes: 0,
            ooo_ranges: Ranges::default(),
            rcv_max: 0,
            rcv_last: 0,
            unacked_rx: 0,
            asm: Vec::new(),
            asm_len: None,
            ack_now: false,
            ack_due: None,
            departed: None,
        }
    }

    fn established(&self) -> bool {
        self.verified && self.confirmed && self.failed.is_none()
    }

    fn end_seq(&self) -> u64 {
        self.snd_una + self.pkts.len() as u64
    }

    fn pkt(&mut self, seq: u64) -> Option<&mut Sent> {
        let i = seq.checked_sub(self.snd_una)?;
        self.pkts.get_mut(usize::try_from(i).ok()?)
    }

    /// The oldest transmission still in flight (drops stale map entries).
    fn oldest_in_flight(&mut self) -> Option<u64> {
        while let Some((&tx, &seq)) = self.txmap.first_key_value() {
            match self.pkt(seq) {
                Some(p) if p.tx == tx && p.in_flight && !p.acked => return Some(seq),
                _ => {
                    self.txmap.pop_first();
                }
            }
        }
        None
    }

    /// The next datagram to send (a lost one first, then new data within the
    /// sequence window) and its payload length, if the congestion window
    /// has room for it (or it is a timeout's probe).
    fn sendable(&mut self, depth: u64) -> Option<(u64, usize, bool)> {
        let seq = if let Some(&seq) = self.lost.first() {
            seq
        } else if self.next_new < self.end_seq() && self.next_new < self.snd_una + depth {
            self.next_new
        } else {
            return None;
        };
        let window = self.cc.window();
        let len = self.pkt(seq)?.body.len() - 8;
        let probe = self.probe && self.lost.first() == Some(&seq);
        if self.in_flight > 0 && self.in_flight + len > window && !probe {
            return None;
        }
        Some((seq, len, probe))
    }

    /// Pacing rate in bytes per second: the window per smoothed round trip
    /// times the controller's gain (none before the first RTT sample).
    fn pace_rate(&self) -> Option<f64> {
        let srtt = self.srtt?.as_secs_f64();
        (srtt > 0.0).then(|| self.cc.window() as f64 * self.cc.pacing_gain() / srtt)
    }

    /// Records that `len` bytes left at `now`: the pacer's clock advances by
    /// their serialisation time at the pacing rate.
    fn paced(&mut self, now: Instant, len: usize, mss: usize) {
        let Some(rate) = self.pace_rate() else {
            return;
        };
        let gap = |bytes: usize| Duration::from_secs_f64((bytes as f64 / rate).min(1.0));
        let floor = now.checked_sub(gap(PACE_BURST * mss)).unwrap_or(now);
        let base = self.pace_next.map_or(floor, |t| t.max(floor));
        self.pace_next = Some(base + gap(len));
    }

    /// The retransmission timer (RFC 6298 5.1-5.3): runs while data is in
    /// flight, restarted by every ack of new data and by its own expiry, not
    /// measured from the oldest transmission — on a long fat pipe the oldest
    /// datagram's ack may legitimately take longer than one RTO when a queue
    /// grows, and a spurious timeout is expensive.
    fn rto_deadline(&mut self, cfg: &Config) -> Option<Instant> {
        if self.in_flight == 0 {
            return None;
        }
        Some(self.rto_base? + backoff(self.rto, self.backoff, cfg.max_rto))
    }

    /// Fast loss detection by transmission order, with a time threshold
    /// (RACK's): a datagram is lost when one transmitted
    /// [`REORDER_THRESHOLD`] transmission(s) after it was acknowledged, it lies
    /// below what the receiver reported completely, and it is older than an
    /// RTT plus a reordering window (so jitter that reorders a few datagrams
    /// does not cause retransmissions). When only the age is missing, a loss
    /// timer is set: without it the last datagrams before a pause (a full
    /// send buffer behind a hole) would wait for the retransmission timeout.
    fn detect_losses(&mut self, now: Instant, cfg: &Config) {
        self.loss_time = None;
        let Some(largest) = self.largest_acked_tx else {
            return;
        };
        let srtt = self.srtt.unwrap_or(cfg.initial_rto);
        let age = srtt + (srtt / 4).max(self.reo_wnd);
        while let Some((&tx, &seq)) = self.txmap.first_key_value() {
            if tx + REORDER_THRESHOLD > largest || seq >= self.known {
                break;
            }
            let Some(s) = self.pkt(seq) else {
                self.txmap.pop_first();
                continue;
            };
            if s.tx != tx || s.acked || !s.in_flight {
                self.txmap.pop_first();
                continue;
            }
            if now.saturating_duration_since(s.sent_at) < age {
                self.loss_time = Some(s.sent_at + age);
                break; // later transmissions are younger still
            }
            s.in_flight = false;
            let (len, sent_at) = (s.body.len() - 8, s.sent_at);
            self.txmap.pop_first();
            self.in_flight -= len.min(self.in_flight);
            self.lost.insert(seq);
            self.cc.on_loss(now, sent_at);
        }
    }

    fn rtt_sample(&mut self, r: Duration, cfg: &Config) {
        self.min_rtt = Some(self.min_rtt.map_or(r, |m| m.min(r)));
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2;
            }
            Some(s) => {
                let diff = s.abs_diff(r);
                self.rttvar = (self.rttvar * 3 + diff) / 4;
                self.srtt = Some((s * 7 + r) / 8);
            }
        }
        let s = self.srtt.unwrap_or(r);
        // RFC 6298's srtt + 4 rttvar, but never less than srtt + srtt/2: on a
        // steady link rttvar decays to ~0 and a timer that tight fires
        // spuriously whenever a queue grows, resetting the window each time.
        self.rto = (s + (self.rttvar * 4).max(s / 2).max(Duration::from_micros(500)))
            .clamp(cfg.min_rto, cfg.max_rto);
    }
}

fn backoff(base: Duration, n: u32, max: Duration) -> Duration {
    base.saturating_mul(1u32 << n.min(20)).min(max)
}

fn header(buf: &mut Vec<u8>, ty: u8, src: u32, dst: u32) {
    buf.clear();
    buf.extend_from_slice(&MAGIC);
    buf.push(VERSION);
    buf.push(ty);
    buf.extend_from_slice(&src.to_le_bytes());
    buf.extend_from_slice(&dst.to_le_bytes());
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

fn nonce_at(b: &[u8], at: usize) -> Option<[u8; NONCE_LEN]> {
    b.get(at..at + NONCE_LEN)?.try_into().ok()
}

/// One context's protocol state for all its peers. `A` is the transport
/// address (a `SocketAddr` in the method, a number in the simulator).
pub struct Endpoint<A> {
    cfg: Config,
    peers: HashMap<u32, Peer<A>>,
    /// Peer ids in round-robin order for transmission fairness.
    order: Vec<u32>,
    cursor: usize,
    /// Handshake datagrams waiting to go out.
    ctl: VecDeque<(A, Vec<u8>)>,
    events: VecDeque<Event>,
    pub counters: Counters,
    /// Key of the challenge cookies (see [`Endpoint::cookie`]).
    cookie_key: [u8; 32],
    /// Origin of cookie stamps: the first handshake's time.
    cookie_t0: Option<Instant>,
    /// The latest stamp issued (strictly increasing, microseconds from `cookie_t0`).
    last_stamp: u64,
    /// How long a challenge can be answered: the connector's whole retry schedule.
    cookie_lifetime: Duration,
    /// Peers that left the job (ids are never reused): nothing from them
    /// creates state again once theirs is dropped.
    released: HashSet<u32>,
}

impl<A: Copy + Eq + Hash + Debug> Endpoint<A> {
    pub fn new(mut cfg: Config) -> Self {
        cfg.dgram = cfg.dgram.clamp(MIN_DGRAM, 65507);
        cfg.depth = cfg.depth.max(4);
        let mut cookie_key = [0u8; 32];
        cookie_key[..NONCE_LEN].copy_from_slice(&auth::nonce());
        cookie_key[NONCE_LEN..].copy_from_slice(&auth::nonce());
        // A connector resends its PROOF on this schedule (and its HELLO on
        // the same one before): a cookie must outlive all of it.
        let cookie_lifetime = (0..=cfg.retries.saturating_add(1))
            .map(|i| backoff(cfg.initial_rto, i, cfg.max_rto))
            .fold(Duration::ZERO, Duration::saturating_add)
            .saturating_mul(2);
        Endpoint {
            cfg,
            peers: HashMap::new(),
            order: Vec::new(),
            cursor: 0,
            ctl: VecDeque::new(),
            events: VecDeque::new(),
            counters: Counters::default(),
            cookie_key,
            cookie_t0: None,
            last_stamp: 0,
            cookie_lifetime,
            released: HashSet::new(),
        }
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Whether this endpoint has never had a peer (nothing to send, receive or time).
    pub fn is_unused(&self) -> bool {
        self.peers.is_empty() && self.ctl.is_empty() && self.events.is_empty()
    }

    fn peer_mut(&mut self, id: u32) -> &mut Peer<A> {
        if !self.peers.contains_key(&id) {
            self.peers.insert(id, Peer::new(&self.cfg));
            self.order.push(id);
        }
        self.peers.get_mut(&id).expect("inserted above")
    }

    /// Makes `peer` reachable at `addr` and starts authenticating it (if not done).
    pub fn connect(&mut self, peer: u32, addr: A, now: Instant) {
        let (me, rto) = (self.cfg.me, self.cfg.initial_rto);
        if self.released.contains(&peer) {
            return;
        }
        let p = self.peer_mut(peer);
        if p.failed.is_some() || p.verified {
            return;
        }
        p.addr = Some(addr);
        if matches!(p.hs, Hs::Idle) {
            let nonce = auth::nonce();
            p.hs = Hs::Hello {
                nonce,
                next: now + rto,
                tries: 0,
            };
            self.push_ctl((addr, hello_dgram(me, peer, &nonce)));
        }
    }

    fn push_ctl(&mut self, d: (A, Vec<u8>)) {
        if self.ctl.len() >= CTL_MAX {
            self.counters.ctl_overflow += 1;
            return;
        }
        self.ctl.push_back(d);
    }

    /// Bytes a peer's out-of-order datagrams may hold: a full window of
    /// datagrams of our size.
    fn ooo_budget(&self) -> usize {
        (self.cfg.depth as usize).saturating_mul(self.cfg.dgram)
    }

    /// Sizes of the state a peer's datagrams can make grow (the fuzz
    /// harness checks them against [`StateSizes::check`]).
    #[doc(hidden)]
    pub fn state_sizes(&self) -> StateSizes {
        let mut z = StateSizes {
            peers: self.peers.len(),
            ctl: self.ctl.len(),
            events: self.events.len(),
            ..StateSizes::default()
        };
        for p in self.peers.values() {
            z.ooo_dgrams = z.ooo_dgrams.max(p.ooo.len());
            z.ooo_bytes = z.ooo_bytes.max(p.ooo_bytes);
            z.ooo_ranges = z.ooo_ranges.max(p.ooo_ranges.0.len());
            z.sacked_ranges = z.sacked_ranges.max(p.sacked.0.len());
            z.lost = z.lost.max(p.lost.len());
            z.unacked = z.unacked.max(p.pkts.len());
            z.asm_capacity = z.asm_capacity.max(p.asm.capacity());
            z.asm_len = z.asm_len.max(p.asm.len());
        }
        z
    }

    /// Why sends to `peer` fail, if they do.
    pub fn failure(&self, peer: u32) -> Option<&str> {
        self.peers.get(&peer).and_then(|p| p.failed.as_deref())
    }

    /// Queues one message (the concatenation of `iov`) for `peer`. Fails only
    /// if the peer has been declared failed or the message is too long.
    pub fn send(&mut self, peer: u32, iov: &[IoSlice<'_>], now: Instant) -> Result<(), String> {
        let mss = self.cfg.mss();
        let total: usize = iov.iter().map(|s| s.len()).sum();
        let msg_len = u32::try_from(total)
            .map_err(|_| format!("message of {total} bytes exceeds the 4 GiB limit of udp"))?;
        let Some(p) = self.peers.get_mut(&peer) else {
            return Err(format!("no udp link to rank {peer} (connect first)"));
        };
        if let Some(why) = &p.failed {
            return Err(why.clone());
        }
        if p.departed.is_some() {
            return Err(format!("rank {peer} left the job"));
        }
        let mut parts = iov.iter().map(|s| &s[..]).filter(|s| !s.is_empty());
        let mut cur: &[u8] = parts.next().unwrap_or(&[]);
        let mut off = 0usize;
        loop {
            let n = (total - off).min(mss);
            let mut body = Vec::with_capacity(8 + n);
            body.extend_from_slice(&msg_len.to_le_bytes());
            body.extend_from_slice(&(off as u32).to_le_bytes());
            let mut need = n;
            while need > 0 {
                if cur.is_empty() {
                    cur = parts.next().unwrap_or(&[]);
                    if cur.is_empty() {
                        break; // cannot happen: `total` counted these slices
                    }
                }
                let k = need.min(cur.len());
                body.extend_from_slice(&cur[..k]);
                cur = &cur[k..];
                need -= k;
            }
            p.buffered += n;
            p.pkts.push_back(Sent {
                body,
                acked: false,
                in_flight: false,
                retransmitted: false,
                tx: 0,
                sent_at: now,
            });
            off += n;
            if off >= total {
                break;
            }
        }
        Ok(())
    }

    /// Congestion state towards each peer with data in flight or queued
    /// (diagnostics: the `GW_VERBOSE=3` trace).
    pub fn peer_states(&self) -> Vec<PeerState> {
        let mut v: Vec<PeerState> = self
            .peers
            .iter()
            .filter(|(_, p)| p.failed.is_none() && !p.pkts.is_empty())
            .map(|(&id, p)| PeerState {
                peer: id,
                window: p.cc.window(),
                in_flight: p.in_flight,
                buffered: p.buffered,
                srtt: p.srtt,
                min_rtt: p.min_rtt,
                lost: p.lost.len(),
            })
            .collect();
        v.sort_by_key(|s| s.peer);
        v
    }

    /// Bytes queued or unacknowledged for `peer` (for the sender's memory bound).
    /// The smoothed round-trip time to `peer`, once measured.
    pub fn srtt(&self, peer: u32) -> Option<Duration> {
        self.peers.get(&peer).and_then(|p| p.srtt)
    }

    pub fn buffered(&self, peer: u32) -> usize {
        self.peers.get(&peer).map_or(0, |p| p.buffered)
    }

    /// Acknowledges at once what waits for a delayed acknowledgement. At
    /// shutdown nothing will carry it later, and a peer left without it
    /// retransmits its last datagram until it gives up on the link (about
    /// 16 s with the default timeouts): its `finalize` waited that long.
    pub fn ack_pending_now(&mut self) {
        for p in self.peers.values_mut() {
            if p.failed.is_none() && (p.ack_due.is_some() || p.unacked_rx > 0) {
                p.ack_now = true;
            }
        }
    }

    /// Whether an acknowledgement is still to be sent to a live peer.
    pub fn acks_pending(&self) -> bool {
        self.peers
            .values()
            .any(|p| p.failed.is_none() && p.verified && (p.ack_now || p.ack_due.is_some()))
    }

    /// Whether any data is not yet acknowledged by a live peer.
    pub fn has_unacked(&self) -> bool {
        self.peers
            .values()
            .any(|p| p.failed.is_none() && !p.pkts.is_empty())
    }

    /// `peer` left the job or died: what we were sending it is dropped at
    /// once (sends to it fail), and its state goes entirely once it has been
    /// quiet for [`release_grace`](Self::release_grace). Until then its last
    /// data — the notice of its departure may come another way, ahead of
    /// them, or they may still need a retransmission — is delivered and
    /// acknowledged as before. A peer that failed or never authenticated
    /// goes at once. Nothing from it creates state again.
    pub fn release(&mut self, peer: u32, now: Instant) {
        self.released.insert(peer);
        let Some(p) = self.peers.get_mut(&peer) else {
            return;
        };
        if p.failed.is_some() || !p.verified {
            self.drop_peer(peer);
            return;
        }
        p.departed = Some(now);
        p.hs = Hs::Done;
        p.pkts = VecDeque::new();
        p.lost = BTreeSet::new();
        p.sacked = Ranges::default();
        p.txmap = BTreeMap::new();
        p.in_flight = 0;
        p.buffered = 0;
        p.loss_time = None;
        p.rto_base = None;
        p.probe = false;
        p.pace_next = None;
    }

    /// How long a released peer must be quiet before its state goes: two
    /// of its longest retransmission intervals, so that a last datagram it
    /// is still resending is not dropped.
    pub fn release_grace(&self) -> Duration {
        self.cfg.max_rto.saturating_mul(2)
    }

    /// Peers we hold state for (tests, counters).
    pub fn peer_count(&self) -> usize {
        self.peers.len()
    }

    fn drop_peer(&mut self, id: u32) {
        if self.peers.remove(&id).is_some() {
            self.order.retain(|&x| x != id);
            self.cursor = if self.order.is_empty() {
                0
            } else {
                self.cursor % self.order.len()
            };
        }
    }

    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    fn fail(&mut self, peer: u32, reason: String) {
        if let Some(p) = self.peers.get_mut(&peer) {
            if p.failed.is_some() {
                return;
            }
            p.failed = Some(reason.clone());
            p.pkts.clear();
            p.lost.clear();
            p.txmap.clear();
            p.ooo.clear();
            p.ooo_bytes = 0;
            p.ooo_ranges = Ranges::default();
            p.sacked = Ranges::default();
            p.asm = Vec::new();
            p.in_flight = 0;
            p.buffered = 0;
            self.events.push_back(Event::Failed { peer, reason });
        }
    }

    /// Processes one received datagram. Never panics on any input.
    pub fn handle(&mut self, now: Instant, from: A, d: &[u8]) {
        self.counters.dgrams_received += 1;
        if d.len() < HDR || d[..2] != MAGIC || d[2] != VERSION {
            self.counters.garbage += 1;
            return;
        }
        let ty = d[3];
        let (Some(src), Some(dst)) = (u32_at(d, 4), u32_at(d, 8)) else {
            self.counters.garbage += 1;
            return;
        };
        if dst != self.cfg.me || src >= self.cfg.size {
            self.counters.garbage += 1;
            return;
        }
        if self.released.contains(&src) {
            // A departed peer: only its last data (and acks of it) still
            // count, while its state is kept; nothing opens a link again.
            let kept = self.peers.contains_key(&src);
            if ty != T_DATA || !kept {
                self.counters.from_departed += 1;
                return;
            }
        }
        match ty {
            T_HELLO => self.on_hello(now, from, src, d),
            T_CHALLENGE => self.on_challenge(now, from, src, d),
            T_PROOF => self.on_proof(now, from, src, d),
            T_DATA | T_ACK => {
                let ok = self
                    .peers
                    .get(&src)
                    .is_some_and(|p| p.verified && p.failed.is_none() && p.addr == Some(from));
                if !ok {
                    self.counters.unauthenticated += 1;
                    return;
                }
                let r = if ty == T_DATA {
                    self.on_data(now, src, d)
                } else {
                    self.on_ack_dgram(now, src, d)
                };
                if let Err(why) = r {
                    self.fail(src, format!("protocol error from rank {src}: {why}"));
                }
            }
            _ => self.counters.garbage += 1,
        }
    }

    /// After `handle` panicked on datagram `d` (a bug): fails the link of
    /// the authenticated peer that sent it, whose state may be inconsistent
    /// now, or counts it as garbage when no such peer sent it.
    #[doc(hidden)]
    pub fn fail_after_panic(&mut self, from: A, d: &[u8]) {
        let src = u32_at(d, 4).filter(|src| {
            self.peers
                .get(src)
                .is_some_and(|p| p.addr == Some(from) && p.verified)
        });
        match src {
            Some(src) => self.fail(
                src,
                format!("internal error while processing a datagram from rank {src} (a bug in the udp method; the link is closed)"),
            ),
            None => self.counters.garbage += 1,
        }
    }

    /// `(rcv_next, snd_una, next_new)` towards `peer`: where valid sequence
    /// numbers are (the fuzz harness builds near-valid datagrams from them).
    #[doc(hidden)]
    pub fn seq_hints(&self, peer: u32) -> Option<(u64, u64, u64)> {
        self.peers
            .get(&peer)
            .map(|p| (p.rcv_next, p.snd_una, p.next_new))
    }

    /// The address `peer` is bound to (tests, diagnostics).
    #[doc(hidden)]
    pub fn peer_addr(&self, peer: u32) -> Option<A> {
        self.peers.get(&peer).and_then(|p| p.addr)
    }
}
