//! `udp_authenticated`: the udp protocol on an authenticated path.
//!
//! The endpoint under test (rank 1, address 1) completes a real handshake
//! with rank 0 (address 0, a real endpoint sharing the secret) and exchanges
//! a few messages, all on a virtual clock. The input is then read as a
//! program of operations: datagrams of every kind from rank 0's confirmed
//! address (raw bytes, near-valid DATA/ACK built around the live sequence
//! numbers, handshake datagrams, captured datagrams replayed or mutated),
//! the same from other addresses, clock advances, application sends, and
//! rounds of real traffic with rank 0. After every operation the harness
//! runs the timers, drains transmissions and events, and checks the state
//! bounds of [`StateSizes::check`]: per peer at most `depth` out-of-order
//! datagrams within `depth × dgram` bytes, [`CTL_MAX`] queued handshake
//! datagrams, a reassembly buffer that grows only with data received.
//!
//! Memory bound of one run: the input's size plus O(`MAX_OPS` × dgram)
//! (here 4096 × 1 KiB of synthesized payload), a few MiB.
//!
//! Not deterministic across runs in one respect: nonces and the cookie key
//! come from the OS (as in production), so captured handshake bytes differ;
//! the control flow an input drives does not depend on them.

use crate::method::udp::proto::{
    Config, Endpoint, Event, StateSizes, CTL_MAX, HDR, HELLO_LEN, MAGIC, T_ACK, T_CHALLENGE,
    T_DATA, T_HELLO, T_PROOF, VERSION,
};
use std::io::IoSlice;
use std::time::{Duration, Instant};

/// Operations per input at most (each consumes at least one input byte).
const MAX_OPS: usize = 4096;
/// Captured datagrams kept for replay.
const MAX_CAPTURED: usize = 64;
/// Transmissions drained per poll at most (the endpoint stops by itself
/// long before: windows are small here).
const MAX_DRAIN: usize = 10_000;

const ME: u32 = 1;
const PEER: u32 = 0;
const SIZE: u32 = 4;

fn config(me: u32) -> Config {
    Config {
        me,
        size: SIZE,
        secret: [7; 32],
        dgram: 1024,
        depth: 64,
        initial_rto: Duration::from_millis(100),
        min_rto: Duration::from_millis(5),
        max_rto: Duration::from_millis(1000),
        retries: 8,
        initial_cwnd: 8,
        ack_delay: Duration::from_micros(500),
    }
}

/// Reads the input front to back; past the end it yields zeros (and
/// `done` ends the program).
struct Input<'a>(&'a [u8]);

impl<'a> Input<'a> {
    fn done(&self) -> bool {
        self.0.is_empty()
    }
    fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    fn u64(&mut self) -> u64 {
        u64::from(self.u32()) | u64::from(self.u32()) << 32
    }
    fn take(&mut self, n: usize) -> &'a [u8] {
        let n = n.min(self.0.len());
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        a
    }
    /// True once in `n` (by the next input byte).
    fn one_in(&mut self, n: u8) -> bool {
        self.u8().is_multiple_of(n)
    }
    /// A sequence number near `base`: mostly small offsets either way,
    /// sometimes anywhere.
    fn near(&mut self, base: u64) -> u64 {
        match self.u8() % 8 {
            0 => self.u64(),
            1 => base.wrapping_sub(u64::from(self.u8())),
            2 => base.wrapping_add(u64::from(self.u16())),
            _ => base.wrapping_add(u64::from(self.u8() % 80)),
        }
    }
    /// An acknowledgement number: mostly within what was sent
    /// (`lo..=hi`), sometimes just beyond or anywhere.
    fn ack_number(&mut self, lo: u64, hi: u64) -> u64 {
        match self.u8() % 64 {
            0 => self.u64(),
            1 => hi.wrapping_add(u64::from(self.u8() % 4)),
            2..=7 => lo.saturating_sub(u64::from(self.u8())),
            _ => lo + u64::from(self.u8()) % (hi - lo + 1),
        }
    }

    /// A 32-bit field: small, near a limit, or arbitrary.
    fn field(&mut self) -> u32 {
        match self.u8() % 4 {
            0 => u32::from(self.u8()),
            1 => u32::MAX - u32::from(self.u8()),
            2 => u32::from(self.u16()),
            _ => self.u32(),
        }
    }
}

/// What one run reached (how deep a program went before the link failed).
#[derive(Debug, Default, Clone)]
pub struct Stats {
    pub ops: usize,
    pub messages: usize,
    /// The operation after which rank 0's link failed, if it did.
    pub failed_at: Option<usize>,
    pub reason: Option<String>,
    /// The operation code that failed the link.
    pub failed_op: Option<u8>,
    last_op: u8,
}

struct Harness {
    ep: Endpoint<u32>,
    peer: Endpoint<u32>,
    now: Instant,
    /// Datagrams rank 0 sent to the endpoint under test.
    captured: Vec<Vec<u8>>,
    /// Datagrams the application queued to rank 0 (the `unacked` bound).
    queued: usize,
    stats: Stats,
    buf: Vec<u8>,
}

impl Harness {
    fn new() -> Option<Harness> {
        let mut h = Harness {
            ep: Endpoint::new(config(ME)),
            peer: Endpoint::new(config(PEER)),
            now: Instant::now(),
            captured: Vec::new(),
            queued: 0,
            stats: Stats::default(),
            buf: Vec::new(),
        };
        // Rank 0 connects (the endpoint under test is the acceptor, which
        // binds the address), then both send a little.
        h.peer.connect(ME, ME, h.now);
        h.exchange(50);
        h.ep.connect(PEER, PEER, h.now);
        h.app_send(300);
        let now = h.now;
        h.peer.send(ME, &[IoSlice::new(&[1; 2500])], now).ok()?;
        h.exchange(50);
        (h.ep.peer_addr(PEER) == Some(PEER)).then_some(h)
    }

    fn app_send(&mut self, len: usize) {
        let mss = self.ep.config().mss();
        let payload = vec![0xa5; len];
        if self
            .ep
            .send(PEER, &[IoSlice::new(&payload)], self.now)
            .is_ok()
        {
            self.queued += len.div_ceil(mss).max(1);
        }
    }

    /// Real traffic between the two endpoints for up to `rounds` rounds,
    /// with the clock moving 1 ms per round.
    fn exchange(&mut self, rounds: usize) {
        for _ in 0..rounds {
            let mut moved = false;
            for _ in 0..MAX_DRAIN {
                let Some(to) = self.peer.poll_transmit(self.now, &mut self.buf) else {
                    break;
                };
                moved = true;
                if to == ME {
                    if self.captured.len() < MAX_CAPTURED {
                        self.captured.push(self.buf.clone());
                    }
                    self.ep.handle(self.now, PEER, &self.buf);
                }
            }
            for _ in 0..MAX_DRAIN {
                let Some(to) = self.ep.poll_transmit(self.now, &mut self.buf) else {
                    break;
                };
                moved = true;
                if to == PEER {
                    self.peer.handle(self.now, ME, &self.buf);
                }
            }
            while self.peer.poll_event().is_some() {}
            self.now += Duration::from_millis(1);
            self.peer.handle_timeout(self.now);
            self.ep.handle_timeout(self.now);
            if !moved && !self.ep.has_unacked() && !self.peer.has_unacked() {
                break;
            }
        }
    }

    /// Runs the endpoint's timers, drops what it sends, drains its events,
    /// and checks its state against the bounds.
    fn settle(&mut self) {
        self.ep.handle_timeout(self.now);
        for _ in 0..MAX_DRAIN {
            if self.ep.poll_transmit(self.now, &mut self.buf).is_none() {
                break;
            }
        }
        while let Some(e) = self.ep.poll_event() {
            match e {
                Event::Message { src, .. } => {
                    assert!(src < SIZE, "a message from a context outside the job");
                    self.stats.messages += 1;
                }
                Event::Failed { reason, .. } => {
                    if self.stats.failed_at.is_none() {
                        self.stats.failed_at = Some(self.stats.ops);
                        self.stats.reason = Some(reason);
                        self.stats.failed_op = Some(self.stats.last_op);
                    }
                }
            }
        }
        let z: StateSizes = self.ep.state_sizes();
        if let Err(e) = z.check(self.ep.config(), self.queued) {
            panic!("udp state out of bounds: {e}: {z:?}");
        }
        assert!(z.ctl <= CTL_MAX);
    }

    fn header(ty: u8, src: u32) -> Vec<u8> {
        let mut d = Vec::with_capacity(HDR + 64);
        d.extend_from_slice(&MAGIC);
        d.push(VERSION);
        d.push(ty);
        d.extend_from_slice(&src.to_le_bytes());
        d.extend_from_slice(&ME.to_le_bytes());
        d
    }

    /// One operation of the program.
    fn step(&mut self, r: &mut Input<'_>) {
        let op = r.u8();
        self.stats.last_op = op;
        // Most datagrams come from the confirmed address; some from others
        // (a stranger, or a spoofed id).
        let from = if op & 0x80 != 0 {
            2 + u32::from(r.u8() % 3)
        } else {
            PEER
        };
        let (rcv_next, snd_una, next_new) = self.ep.seq_hints(PEER).unwrap_or((0, 0, 0));
        match op & 0x7f {
            0..=9 => {
                // Raw bytes, with a valid header or not.
                let len = match r.u8() % 8 {
                    0 => usize::from(r.u16() % 1600),
                    _ => usize::from(r.u8() % 64),
                };
                let mut d = if r.one_in(2) {
                    Self::header(r.u8() % 7, PEER)
                } else {
                    Vec::new()
                };
                d.extend_from_slice(r.take(len));
                self.ep.handle(self.now, from, &d);
            }
            10..=39 => {
                let mut d = Self::header(T_DATA, PEER);
                let cum = r.ack_number(snd_una, next_new.max(snd_una));
                d.extend_from_slice(&cum.to_le_bytes());
                let seq = if r.one_in(8) {
                    r.near(rcv_next)
                } else {
                    rcv_next + u64::from(r.u8() % 70)
                };
                d.extend_from_slice(&seq.to_le_bytes());
                let payload = usize::from(r.u16()) % 1100;
                // Mostly whole messages (the link survives), sometimes the
                // first fragment of a longer one, or anything.
                let msg_len = match r.u8() % 8 {
                    0 => r.field(),
                    1 | 2 => (payload as u32).saturating_add(u32::from(r.u16())),
                    _ => payload as u32,
                };
                d.extend_from_slice(&msg_len.to_le_bytes());
                let off = if r.one_in(8) { r.field() } else { 0 };
                d.extend_from_slice(&off.to_le_bytes());
                let fill = r.u8();
                d.resize(d.len() + payload, fill);
                if r.one_in(16) {
                    let cut = usize::from(r.u8()) % d.len();
                    d.truncate(cut);
                }
                self.ep.handle(self.now, from, &d);
            }
            40..=64 => {
                let mut d = Self::header(T_ACK, PEER);
                let cum = r.ack_number(snd_una, next_new.max(snd_una));
                d.extend_from_slice(&cum.to_le_bytes());
                let count = match r.u8() % 16 {
                    0 => r.u8(),
                    k => (k % 4) | (r.u8() & 0x80),
                };
                d.push(count);
                let n = usize::from(count & 0x7f);
                // Sometimes fewer or more ranges than announced.
                let n = match r.u8() % 32 {
                    0 => n.saturating_sub(1),
                    1 => n + 1,
                    _ => n,
                };
                for _ in 0..n.min(130) {
                    // Mostly within what was sent beyond `cum`.
                    let room = next_new.saturating_sub(cum).min(u64::from(u32::MAX)) as u32;
                    let off = if !r.one_in(32) {
                        u32::from(r.u8()) % room.saturating_add(1)
                    } else {
                        r.field()
                    };
                    let len = if !r.one_in(32) {
                        u32::from(r.u8()) % (room.saturating_sub(off).saturating_add(1))
                    } else {
                        r.field()
                    };
                    d.extend_from_slice(&off.to_le_bytes());
                    d.extend_from_slice(&len.to_le_bytes());
                }
                self.ep.handle(self.now, from, &d);
            }
            65..=74 => {
                // Handshake datagrams with input bytes (forged, truncated, padded).
                let ty = [T_HELLO, T_CHALLENGE, T_PROOF][usize::from(r.u8() % 3)];
                let src = if r.one_in(4) {
                    u32::from(r.u8()) % (SIZE + 2)
                } else {
                    PEER
                };
                let mut d = Self::header(ty, src);
                let len = match r.u8() % 4 {
                    0 => HELLO_LEN - HDR,
                    1 => 64,
                    _ => usize::from(r.u8() % 100),
                };
                d.extend_from_slice(r.take(len));
                self.ep.handle(self.now, from, &d);
            }
            75..=89 => {
                // A captured datagram of rank 0, replayed or mutated.
                if self.captured.is_empty() {
                    return;
                }
                let i = usize::from(r.u8()) % self.captured.len();
                let mut d = self.captured[i].clone();
                for _ in 0..r.u8() % 4 {
                    let at = usize::from(r.u16()) % d.len().max(1);
                    if let Some(b) = d.get_mut(at) {
                        *b ^= r.u8() | 1;
                    }
                }
                self.ep.handle(self.now, from, &d);
            }
            90..=99 => {
                // The clock moves: timers fire (retransmissions, the retry limit).
                let ms = match r.u8() % 4 {
                    0 => u64::from(r.u16()),
                    _ => u64::from(r.u8()),
                };
                self.now += Duration::from_millis(ms);
            }
            100..=109 => {
                let len = usize::from(r.u16()) % 4000;
                self.app_send(len);
            }
            110..=119 => {
                let rounds = usize::from(r.u8() % 16) + 1;
                self.exchange(rounds);
            }
            _ => {
                // Rank 0 sends more, so that its data and acks interleave
                // with the forged ones.
                let len = usize::from(r.u16()) % 3000;
                let now = self.now;
                let _ = self.peer.send(ME, &[IoSlice::new(&vec![2; len])], now);
            }
        }
    }
}

/// Fuzz target: see the module documentation.
pub fn udp_authenticated(data: &[u8]) {
    udp_authenticated_stats(data);
}

/// [`udp_authenticated`], returning how deep the program went (for
/// checking that the harness reaches past the first protocol error).
pub fn udp_authenticated_stats(data: &[u8]) -> Stats {
    let Some(mut h) = Harness::new() else {
        panic!("the harness's own handshake failed");
    };
    h.settle();
    let mut r = Input(data);
    for _ in 0..MAX_OPS {
        if r.done() {
            break;
        }
        h.step(&mut r);
        h.stats.ops += 1;
        h.settle();
    }
    h.stats
}
