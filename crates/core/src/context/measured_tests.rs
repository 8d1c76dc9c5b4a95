//! Unit tests of the measured selection (`measured.rs`), on a virtual
//! clock: no I/O, no sleeping; acks arrive when the test says.

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

/// A virtual clock: `at(us)` is `us` microseconds after a fixed start.
struct Clock(Instant);
impl Clock {
    fn new() -> Clock {
        Clock(Instant::now())
    }
    fn at(&self, us: u64) -> Instant {
        self.0 + Duration::from_micros(us)
    }
}

/// Two links whose one-way time per size is given (ns), with the acks
/// the receivers send at once: a probe of `len` sent at `t_us` on slot
/// `k` is acknowledged after `one_way(len) + one_way(0)`.
struct Wire {
    seq: u64,
    one_way: [fn(u64) -> f64; 2],
}

impl Wire {
    fn new(tcp: fn(u64) -> f64, udp: fn(u64) -> f64) -> Wire {
        Wire {
            seq: 0,
            one_way: [tcp, udp],
        }
    }

    /// Sends a lone message of `len` at `t_us` the way the context does:
    /// pick, send, and (a probe) its ack at once. The slot taken, and
    /// whether it was a probe.
    fn send(&mut self, s: &mut Selector, len: usize, t_us: f64, clock: &Clock) -> (usize, bool) {
        self.seq += 1;
        let t = clock.0 + Duration::from_nanos((t_us * 1e3) as u64);
        let (k, probe) = s.pick(len, t, true);
        s.sent(k, self.seq, len, t, probe);
        let back = self.one_way[k](len as u64) + self.one_way[k](0);
        s.acked(self.seq, t + Duration::from_nanos(back as u64));
        (k, probe)
    }
}

/// Loopback between emulated hosts, as bench/select.sh saw it: tcp 4.0
/// us + 1/4000 MB/s, udp 3.8 us flat up to a datagram and 1/400 MB/s
/// beyond.
fn tcp_loopback(len: u64) -> f64 {
    4_000.0 + len as f64 * 0.25
}
fn udp_loopback(len: u64) -> f64 {
    if len <= 1400 {
        3_800.0 + len as f64 * 0.4
    } else {
        4_300.0 + len as f64 * 2.5
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
    let t = Instant::now();
    assert_eq!(s.pick(8, t, true), (1, false));
    assert_eq!(s.pick(9_999, t, true), (1, false));
    assert_eq!(s.pick(10_000, t, true), (0, false));
    assert_eq!(s.pick(4 << 20, t, true), (0, false));
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
fn size_classes_are_powers_of_four() {
    assert_eq!(class_of(0), 0);
    assert_eq!(class_of(255), 0);
    assert_eq!(class_of(256), 1);
    assert_eq!(class_of(1023), 1);
    assert_eq!(class_of(4 << 10), 3);
    // An MPI rendezvous piece: 256 KiB and its header.
    assert_eq!(class_of((256 << 10) + 40), 6);
    assert_eq!(class_of(4 << 20), NCLASSES - 1);
    assert_eq!(class_of(u64::MAX), NCLASSES - 1);
}

#[test]
fn small_messages_open_every_slot_and_probes_time_the_round_trip() {
    let c = Clock::new();
    let mut s = Selector::new(&[(1, "tcp"), (2, "udp")], None);
    // Nothing known: small messages open each slot in turn; the first is
    // a probe, the second not (at most one probe per PROBE_GAP).
    assert_eq!(s.pick(8, c.at(0), true), (0, true));
    s.sent(0, 1, 8, c.at(0), true);
    assert!(s.probing());
    assert_eq!(s.pick(8, c.at(1), true), (1, false));
    s.sent(1, 2, 8, c.at(1), false);
    // Its ack at once: tcp's round trip is 20 us.
    s.acked(1, c.at(20));
    assert!(!s.probing());
    assert_eq!(s.slots[0].est.rtt_ns, Some(20_000.0));
    assert_eq!(s.slots[0].measured_ns(0), Some(10_000.0));
    // The transport's own figure is ignored once a probe timed one; it
    // seeds udp's, which has none.
    s.rtt_sample(0, Duration::from_millis(9));
    assert_eq!(s.slots[0].est.rtt_ns, Some(20_000.0));
    s.rtt_sample(1, Duration::from_millis(7));
    assert_eq!(s.slots[1].est.rtt_ns, Some(7e6));
    // The message that was no probe times nothing, however its ack comes.
    s.acked(2, c.at(15_000));
    assert_eq!(s.slots[1].measured_ns(0), None);
    // Past the gap, the class never measured on udp is probed: 12 us.
    let after_gap = 1 + PROBE_GAP.as_micros() as u64;
    assert_eq!(s.pick(8, c.at(after_gap), true), (1, true));
    assert_eq!(
        s.pick(8, c.at(after_gap), false),
        (0, false),
        "only a message sent alone probes"
    );
    s.sent(1, 3, 8, c.at(after_gap), true);
    s.acked(3, c.at(after_gap + 12));
    assert_eq!(s.slots[1].est.rtt_ns, Some(12_000.0));
    // udp is now cheaper for small messages.
    assert_eq!(s.pick(100, c.at(after_gap + 13), false), (1, false));
    // Late acks do not move a round trip while one of the last RECENT
    // samples was lower; RECENT of them in a row do (a lasting change).
    let t = after_gap + 100_000;
    let mut seq = 3;
    for i in 0..RECENT as u64 {
        seq += 1;
        s.sent(1, seq, 8, c.at(t + i * 2_000), true);
        s.acked(seq, c.at(t + i * 2_000 + 412));
        let want = if i + 1 < RECENT as u64 {
            12_000.0
        } else {
            412_000.0
        };
        assert_eq!(
            s.slots[1].est.rtt_ns,
            Some(want),
            "after {} late acks",
            i + 1
        );
    }
    // A fast one brings it down at once.
    seq += 1;
    s.sent(1, seq, 8, c.at(t + 20_000), true);
    s.acked(seq, c.at(t + 20_012));
    assert_eq!(s.slots[1].est.rtt_ns, Some(12_000.0));
    // Counters: every message sent is counted on its slot.
    assert_eq!((s.slots[0].msgs, s.slots[1].msgs), (1, 3 + RECENT as u64));
}

#[test]
fn each_class_goes_where_its_probes_were_fastest() {
    // Loopback as the bench measured it: udp faster up to 1 KiB (flat
    // up to a datagram), tcp from there on and ten times udp's bandwidth.
    // One line per stack would put 1 KiB on tcp (udp's 400 MB/s slope);
    // the classes put it where it is faster.
    let c = Clock::new();
    let mut s = Selector::new(&[(1, "tcp"), (2, "udp")], None);
    let mut w = Wire::new(tcp_loopback, udp_loopback);
    let sizes = [8usize, 64, 1000, 8 << 10, 64 << 10, (256 << 10) + 40];
    // A warm-up: lone messages of every size, 2 ms apart (past the gap).
    let mut t = 0.0;
    for _ in 0..4 {
        for &len in &sizes {
            w.send(&mut s, len, t, &c);
            t += 2_000.0;
        }
    }
    for (len, want) in [
        (8usize, "udp"),
        (64, "udp"),
        (1000, "udp"),
        (8 << 10, "tcp"),
        (64 << 10, "tcp"),
        ((256 << 10) + 40, "tcp"),
        (4 << 20, "tcp"),
    ] {
        let (k, _) = s.pick(len, c.at(t as u64), false);
        assert_eq!(s.slots[k].stack, want, "{len} B: {}", s.describe());
    }
    // Every class was measured on both stacks.
    for (k, slot) in s.slots.iter().enumerate() {
        for &len in &sizes {
            let cl = class_of(len as u64);
            assert!(slot.measured_ns(cl).is_some(), "slot {k} class {cl}");
        }
    }
    // Bandwidth from the bulk probes: tcp ~4000 MB/s, udp ~400 (the
    // piece's copy and the ack's way back are in the round trip that is
    // subtracted: within 15 %).
    let bw = |k: usize| s.slots[k].est.bytes_per_s.unwrap() / 1e6;
    assert!((3400.0..4600.0).contains(&bw(0)), "tcp {} MB/s", bw(0));
    assert!((340.0..460.0).contains(&bw(1)), "udp {} MB/s", bw(1));
    // The bands say it: udp below 1 KiB (its class bound: 1-4 KiB was not
    // measured, and udp's line puts it on tcp), tcp from there.
    assert!(
        s.describe()
            .starts_with("udp below 1024 B, tcp from 1024 B"),
        "{}",
        s.describe()
    );
}

#[test]
fn lazy_acks_time_nothing() {
    // The estimator this replaced timed a bulk message sent alone to the
    // ack that covered it; acks are lazy (every 1 MiB, or riding the
    // peer's reply), so a 256 KiB piece was timed to an ack four pieces
    // later: tcp read 270 MB/s against 4000. Only probes are timed now,
    // and their ack comes at once.
    let c = Clock::new();
    let mut s = Selector::new(&[(1, "tcp"), (2, "udp")], None);
    let piece = (256 << 10) + 40;
    // Opened, round trips known.
    for (k, seq) in [(0usize, 1u64), (1, 2)] {
        s.sent(k, seq, 8, c.at(seq * 2_000), true);
        s.acked(seq, c.at(seq * 2_000 + 10));
    }
    // A piece sent alone without a probe flag, acked 1 ms later with the
    // next three: no sample.
    s.sent(0, 3, piece, c.at(10_000), false);
    s.acked(6, c.at(11_000));
    assert_eq!(s.slots[0].est.bytes_per_s, None);
    assert_eq!(s.slots[0].measured_ns(class_of(piece as u64)), None);
    // As a probe, acked at once: 10 us round trip + 65.5 us transfer.
    let (k, probe) = s.pick(piece, c.at(20_000), true);
    assert_eq!((k, probe), (0, true));
    s.sent(0, 7, piece, c.at(20_000), true);
    s.acked(7, c.at(20_000 + 10 + 66));
    let bw = s.slots[0].est.bytes_per_s.unwrap() / 1e6;
    assert!((3800.0..4200.0).contains(&bw), "{bw} MB/s");
}

#[test]
fn probes_are_rationed() {
    // Once every class is measured, a stream of lone 8-byte messages
    // (one every 10 us for 3 s) probes its class on the chosen slot
    // every REFRESH_CHOSEN and on the other every REFRESH_OTHER.
    let c = Clock::new();
    let mut s = Selector::new(&[(1, "tcp"), (2, "udp")], None);
    let mut w = Wire::new(tcp_loopback, udp_loopback);
    let mut t = 0.0;
    for _ in 0..4 {
        w.send(&mut s, 8, t, &c);
        t += 2_000.0;
    }
    let start = t;
    let (mut probes, mut on) = (0u32, [0u32; 2]);
    while t < start + 3e6 {
        let (k, probe) = w.send(&mut s, 8, t, &c);
        if probe {
            probes += 1;
        }
        on[k] += 1;
        t += 10.0;
    }
    // udp is chosen; tcp gets its re-probes only.
    let chosen_refresh = (3e6 / REFRESH_CHOSEN.as_micros() as f64) as u32;
    let other_refresh = (3e6 / REFRESH_OTHER.as_micros() as f64) as u32;
    assert!(
        (other_refresh - 1..=other_refresh + 1).contains(&on[0]),
        "tcp carried {} of {}",
        on[0],
        on[0] + on[1]
    );
    assert!(
        (chosen_refresh + other_refresh - 2..=chosen_refresh + other_refresh + 2).contains(&probes),
        "{probes} probes in 3 s"
    );
}

#[test]
fn bulk_on_the_slower_stack_is_reprobed_rarely_and_never_whole() {
    let c = Clock::new();
    let mut s = Selector::new(&[(1, "tcp"), (2, "udp")], None);
    let mut w = Wire::new(tcp_loopback, udp_loopback);
    let piece = (256 << 10) + 40;
    let mut t = 0.0;
    for _ in 0..4 {
        for len in [8, piece] {
            w.send(&mut s, len, t, &c);
            t += 2_000.0;
        }
    }
    let udp_before = s.slots[1].msgs;
    // 4 MiB messages are never sent on udp to measure it ...
    let mut whole_on_udp = 0;
    for i in 0..100 {
        let (k, _) = w.send(&mut s, 4 << 20, t + i as f64 * 50_000.0, &c);
        if k == 1 {
            whole_on_udp += 1;
        }
    }
    assert_eq!(whole_on_udp, 0);
    t += 100.0 * 50_000.0;
    // ... pieces once per REFRESH_OTHER_BULK: 21 s of pieces every 1 ms.
    let mut pieces_on_udp = 0;
    let end = t + 21e6;
    while t < end {
        if w.send(&mut s, piece, t, &c).0 == 1 {
            pieces_on_udp += 1;
        }
        t += 1_000.0;
    }
    assert!(
        (1..=3).contains(&pieces_on_udp),
        "{pieces_on_udp} pieces on udp in 21 s"
    );
    assert_eq!(s.slots[1].msgs, udp_before + pieces_on_udp);
}

#[test]
fn a_stack_that_slows_down_loses_its_classes() {
    let c = Clock::new();
    let mut s = Selector::new(&[(1, "tcp"), (2, "udp")], None);
    let mut w = Wire::new(tcp_loopback, udp_loopback);
    let mut t = 0.0;
    for _ in 0..4 {
        w.send(&mut s, 8 << 10, t, &c);
        t += 2_000.0;
    }
    assert_eq!(s.pick(8 << 10, c.at(t as u64), false).0, 0, "tcp first");
    // tcp now takes 20 times as long (a lossy path): its probes see it,
    // every REFRESH_CHOSEN, and within a few seconds 8 KiB moves to udp.
    w.one_way[0] = |len| 20.0 * tcp_loopback(len);
    let until = t + 3e6;
    while t < until {
        w.send(&mut s, 8 << 10, t, &c);
        t += 20.0;
    }
    assert_eq!(
        s.pick(8 << 10, c.at(t as u64), false).0,
        1,
        "{}",
        s.describe()
    );
}

#[test]
fn a_failover_forgets_the_probes_in_flight() {
    let c = Clock::new();
    let mut s = Selector::new(&[(1, "tcp"), (2, "udp")], None);
    s.sent(0, 1, 8, c.at(0), true);
    assert!(s.probing());
    s.forget_probes();
    assert!(!s.probing());
    // Its ack, seconds later on the replacement, times nothing.
    s.acked(1, c.at(3_000_000));
    assert_eq!(s.slots[0].est.rtt_ns, None);
    assert_eq!(s.slots[0].measured_ns(0), None);
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
    // Forced estimates are not measured over, and nothing is probed.
    let mut s = Selector::new(
        &[(1, "tcp"), (2, "udp")],
        Some(&[est(200.0, 2000.0), est(5.0, 50.0)]),
    );
    s.rtt_sample(0, Duration::from_micros(1));
    assert_eq!(s.pick(8, Instant::now(), true), (1, false));
    s.sent(0, 1, 1 << 20, Instant::now(), true);
    assert!(!s.probing());
    assert_eq!(s.bands()[0].upto, 10_000);
}
