//! The sequencing core against a fake wire: links that are cut at random
//! points (what was in flight is lost, or part of it arrives late, after
//! the replacement's frames), acks lost with them, and a virtual clock.

use super::*;
use std::collections::VecDeque;

/// A small deterministic generator (xorshift64*), so a failing seed replays.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One direction of a link: frames in flight, in order (every link
/// delivers in order; only a cut loses frames).
#[derive(Default)]
struct Wire {
    frames: VecDeque<Vec<u8>>,
}

fn frame(seq: u64, ack: u64, payload: &[u8]) -> Vec<u8> {
    let mut f = header(seq, ack).to_vec();
    f.extend_from_slice(payload);
    f
}

/// Sends `total` numbered messages from A to B over links that break
/// `cuts` times at random points; B answers with acks (alone, as the
/// context does when they are due or it goes idle). Checks that B gets
/// every number exactly once, in order, and that A's ring empties;
/// returns how many duplicates B dropped.
fn run(seed: u64, total: u64, cuts: usize) -> usize {
    let mut rng = Rng(seed | 1);
    let t0 = Instant::now();
    let mut now = t0;
    let mut a = Sender::new(64, 1 << 20);
    let mut b = Receiver::default();
    // Every link A ever used, the current one last: a cut link keeps a
    // random prefix of what was in flight (a socket's leftovers, read late
    // and interleaved with the new link's frames), the rest is lost.
    let mut fwd: Vec<Wire> = vec![Wire::default()];
    let mut back = Wire::default();
    let mut got = Vec::with_capacity(total as usize);
    let mut next = 1u64;
    let mut cuts_left = cuts;
    let mut duplicates = 0;
    let mut steps = 0;
    while got.len() < total as usize {
        steps += 1;
        assert!(steps < 50 * total + 10_000, "seed {seed}: no progress");
        now += Duration::from_micros(10);
        // A sends while its ring has room.
        let burst = rng.below(8);
        for _ in 0..burst {
            if next > total || !a.has_room(8) {
                break;
            }
            let payload = next.to_le_bytes();
            let seq = a.push(&[IoSlice::new(&payload)], now);
            assert_eq!(seq, next);
            fwd.last_mut()
                .unwrap()
                .frames
                .push_back(frame(seq, 0, &payload));
            next += 1;
        }
        // The wire moves some frames each way.
        for _ in 0..rng.below(6) {
            let live: Vec<usize> = (0..fwd.len())
                .filter(|&i| !fwd[i].frames.is_empty())
                .collect();
            if live.is_empty() {
                break;
            }
            let from = live[rng.below(live.len() as u64) as usize];
            let f = fwd[from].frames.pop_front().expect("live");
            let (seq, _ack, payload) = parse(&f).expect("whole header");
            match b.accept(seq, payload.len()) {
                Verdict::Deliver => got.push(u64::from_le_bytes(payload.try_into().unwrap())),
                Verdict::Duplicate => duplicates += 1,
                Verdict::AckOnly => unreachable!("A sends no ack-only frames here"),
                Verdict::Gap { expected, got } => {
                    panic!("seed {seed}: gap, expected {expected} got {got}")
                }
                v @ (Verdict::Early | Verdict::Overflow { .. }) => {
                    panic!("seed {seed}: {v:?} without a reorder window")
                }
            }
            if b.ack_due() || rng.below(4) == 0 {
                back.frames.push_back(frame(0, b.delivered(), &[]));
                b.acked_up_to(b.delivered());
            }
        }
        for _ in 0..rng.below(3) {
            let Some(f) = back.frames.pop_front() else {
                break;
            };
            let (seq, ack, _) = parse(&f).unwrap();
            assert_eq!(seq, 0);
            a.ack(ack, now).expect("acks only what was sent");
        }
        // A cut at a random point: some of what was in flight is lost, a
        // random part of it still arrives after the new link's frames
        // (where a stale socket is read late); acks in flight are lost.
        if cuts_left > 0 && rng.below(200) == 0 {
            cuts_left -= 1;
            let cut = fwd.last_mut().unwrap();
            let keep = rng.below(cut.frames.len() as u64 + 1) as usize;
            cut.frames.truncate(keep);
            back.frames.clear();
            // The replacement link carries everything unacknowledged first.
            let mut new = Wire::default();
            for (seq, data, lent) in a.unacked() {
                new.frames.push_back(frame(seq, 0, &[data, lent].concat()));
            }
            fwd.push(new);
            a.restart_clock(now);
        }
    }
    let want: Vec<u64> = (1..=total).collect();
    assert_eq!(got, want, "seed {seed}: every message once, in order");
    // Drain: B acknowledges the rest, A's ring empties.
    a.ack(b.delivered(), now).unwrap();
    assert_eq!(a.unacked_len(), 0);
    assert_eq!(a.acked(), total);
    duplicates
}

#[test]
fn every_message_once_in_order_across_random_cuts() {
    let mut duplicates = 0;
    for seed in 1..=200u64 {
        duplicates += run(seed * 0x9E37_79B9, 3000, 5);
    }
    // Resending across cuts did put messages on the wire twice: the
    // receiver dropped them (the runs above saw each number once).
    assert!(duplicates > 0, "the cuts never made anything be resent");
}

#[test]
fn duplicates_are_dropped_and_gaps_refused() {
    let mut r = Receiver::default();
    assert_eq!(r.accept(1, 4), Verdict::Deliver);
    assert_eq!(r.accept(2, 4), Verdict::Deliver);
    assert_eq!(r.accept(1, 4), Verdict::Duplicate);
    assert_eq!(r.accept(2, 4), Verdict::Duplicate);
    assert_eq!(r.accept(0, 0), Verdict::AckOnly);
    assert_eq!(
        r.accept(4, 4),
        Verdict::Gap {
            expected: 3,
            got: 4
        }
    );
    assert_eq!(r.delivered(), 2, "a gap delivers nothing");
    assert_eq!(r.accept(3, 4), Verdict::Deliver);
}

#[test]
fn acks_free_the_ring_and_bound_it() {
    let now = Instant::now();
    let mut s = Sender::new(4, 100);
    for i in 0..4u8 {
        assert!(s.has_room(10));
        assert_eq!(s.push(&[IoSlice::new(&[i; 10])], now), u64::from(i) + 1);
    }
    assert!(!s.has_room(10), "four frames is the bound");
    assert!(
        s.ack(7, now).is_err(),
        "an ack beyond what was sent is refused"
    );
    assert_eq!(s.ack(2, now), Ok(2));
    assert_eq!(s.ack(1, now), Ok(0), "an older ack changes nothing");
    let left: Vec<u64> = s.unacked().map(|(q, _, _)| q).collect();
    assert_eq!(left, vec![3, 4]);
    assert_eq!(s.unacked().next().unwrap().1, &[2u8; 10][..]);
    assert!(!s.has_room(90), "bytes bound the ring too");
    assert!(s.has_room(80));
    assert_eq!(s.ack(4, now), Ok(2));
    assert!(s.has_room(1000), "one large message is accepted alone");
}

#[test]
fn a_lent_part_is_read_from_the_lender_until_settled_and_counts_in_the_bound() {
    let now = Instant::now();
    let mut s = Sender::new(16, 100);
    let mut lender = vec![7u8; 40];
    // SAFETY: `lender` outlives every use below, and is changed only by
    // this test to show where the ring reads from.
    let seq = unsafe { s.push_lent(&[IoSlice::new(b"hdr")], &lender, now) };
    assert_eq!(seq, 1);
    s.push(&[IoSlice::new(&[1; 10])], now);
    assert!(!s.has_room(50), "the lent bytes count: 53 of 100 held");
    assert!(s.has_room(47));
    let parts = |s: &Sender| -> Vec<(u64, Vec<u8>, Vec<u8>)> {
        s.unacked()
            .map(|(q, d, l)| (q, d.to_vec(), l.to_vec()))
            .collect()
    };
    assert_eq!(parts(&s)[0], (1, b"hdr".to_vec(), vec![7; 40]));
    // Not a copy: the lender's memory is what a resend reads ...
    lender[0] = 9;
    assert_eq!(parts(&s)[0].2[0], 9);
    // ... until settled: then the ring holds its own copy.
    s.settle(1);
    lender[0] = 5;
    let settled = parts(&s);
    assert_eq!(settled[0].1.len(), 43);
    assert_eq!(&settled[0].1[..4], b"hdr\x09");
    assert!(settled[0].2.is_empty());
    assert_eq!(settled[1], (2, vec![1; 10], Vec::new()), "others untouched");
    assert_eq!(s.ack(1, now), Ok(1));
    assert!(
        s.has_room(90),
        "acked bytes leave the bound: 10 of 100 held"
    );
    assert!(!s.has_room(91));
}

#[test]
fn silence_is_measured_from_the_last_ack() {
    let t0 = Instant::now();
    let timeout = Duration::from_secs(3);
    let mut s = Sender::new(16, 1 << 20);
    assert!(
        !s.silent(t0 + Duration::from_secs(60), timeout),
        "nothing waiting"
    );
    s.push(&[IoSlice::new(b"a")], t0);
    s.push(&[IoSlice::new(b"b")], t0 + Duration::from_secs(2));
    assert!(!s.silent(t0 + Duration::from_secs(3), timeout));
    assert!(s.silent(t0 + Duration::from_millis(3001), timeout));
    // An ack that moves restarts the clock.
    s.ack(1, t0 + Duration::from_secs(4)).unwrap();
    assert!(!s.silent(t0 + Duration::from_secs(6), timeout));
    assert!(s.silent(t0 + Duration::from_millis(7001), timeout));
    s.restart_clock(t0 + Duration::from_secs(8));
    assert!(!s.silent(t0 + Duration::from_secs(10), timeout));
    s.ack(2, t0 + Duration::from_secs(10)).unwrap();
    assert!(
        !s.silent(t0 + Duration::from_secs(100), timeout),
        "all acked"
    );
}

#[test]
fn header_round_trips_and_short_frames_are_refused() {
    let h = header(0x0102_0304_0506_0708, 42);
    let mut msg = h.to_vec();
    msg.extend_from_slice(b"xy");
    assert_eq!(parse(&msg), Some((0x0102_0304_0506_0708, 42, &b"xy"[..])));
    assert_eq!(parse(&msg[..15]), None);
}

#[test]
fn rendezvous_sized_buffers_are_recycled_within_the_bound() {
    let now = Instant::now();
    let mut s = Sender::new(MAX_FRAMES, MAX_BYTES);
    // An MPI rendezvous piece: 256 KiB of data plus its headers.
    let piece = vec![7u8; (256 << 10) + 40];
    let seq = s.push(&[IoSlice::new(&piece)], now);
    assert_eq!(s.ack(seq, now), Ok(1));
    assert_eq!(s.free.len(), 1, "a piece's buffer is kept for the next one");
    let kept = s.free_bytes;
    assert!(kept >= piece.len());
    // The next piece reuses it: nothing is left in the free list.
    let seq = s.push(&[IoSlice::new(&piece)], now);
    assert_eq!((s.free.len(), s.free_bytes), (0, 0));
    assert_eq!(s.ack(seq, now), Ok(1));
    // Buffers beyond the per-buffer cap are dropped, and the list never
    // holds more than FREE_MAX_BYTES.
    let huge = vec![1u8; FREE_MAX_CAP + 1];
    let seq = s.push(&[IoSlice::new(&huge)], now);
    assert_eq!(s.ack(seq, now), Ok(1));
    assert!(s.free.iter().all(|b| b.capacity() <= FREE_MAX_CAP));
    // A whole 4 MiB message's buffer is kept, and found again behind a
    // small one.
    {
        let mut s = Sender::new(MAX_FRAMES, MAX_BYTES);
        let big = vec![3u8; 4 << 20];
        s.push(&[IoSlice::new(&big)], now);
        let small = s.push(&[IoSlice::new(&[5u8; 8])], now);
        assert_eq!(s.ack(small, now), Ok(2));
        assert_eq!(s.free.len(), 2);
        assert!(s.free[1].capacity() < 4 << 20, "the small one is last");
        s.push(&[IoSlice::new(&big)], now);
        assert_eq!(s.free.len(), 1, "one buffer was reused");
        assert!(
            s.free[0].capacity() < 4 << 20,
            "the 4 MiB buffer was taken from behind the small one"
        );
    }
    // 70 pieces: more than FREE_MAX_BYTES of buffers come back at once.
    let many: Vec<u64> = (0..70)
        .map(|_| s.push(&[IoSlice::new(&piece)], now))
        .collect();
    assert_eq!(s.ack(*many.last().unwrap(), now), Ok(70));
    assert!(s.free_bytes <= FREE_MAX_BYTES);
    assert!(s.free.len() < 70, "the byte bound dropped some");
    assert_eq!(
        s.free_bytes,
        s.free.iter().map(|b| b.capacity()).sum::<usize>()
    );
}

/// Delivers what `r` says to deliver for a frame `seq` carrying `body`,
/// then everything held that became next (what the context does).
fn feed(r: &mut Receiver, seq: u64, body: &[u8], out: &mut Vec<Vec<u8>>) -> Verdict {
    let v = r.accept(seq, body.len());
    match v {
        Verdict::Deliver => {
            out.push(body.to_vec());
            while let Some(m) = r.take_next() {
                out.push(m.clone());
                r.recycle(m);
            }
        }
        Verdict::Early => r.hold(seq, body),
        _ => {}
    }
    v
}

#[test]
fn reorder_in_order_holds_nothing() {
    let mut r = Receiver::with_window(8, 1000);
    let mut out = Vec::new();
    for seq in 1..=20u64 {
        assert_eq!(
            feed(&mut r, seq, &[seq as u8; 3], &mut out),
            Verdict::Deliver
        );
        assert_eq!(r.held(), (0, 0));
    }
    assert_eq!(out.len(), 20);
    assert!(out.iter().enumerate().all(|(i, m)| m == &[i as u8 + 1; 3]));
}

#[test]
fn reorder_out_of_order_within_the_window_delivers_in_order() {
    let mut r = Receiver::with_window(8, 1000);
    let mut out = Vec::new();
    // 3, 5, 4 arrive before 1 and 2 (another link was faster).
    for seq in [3u64, 5, 4] {
        assert_eq!(feed(&mut r, seq, &[seq as u8], &mut out), Verdict::Early);
    }
    assert_eq!(r.held(), (3, 3));
    assert!(out.is_empty(), "nothing is delivered ahead of its turn");
    assert_eq!(feed(&mut r, 2, &[2], &mut out), Verdict::Early);
    assert_eq!(feed(&mut r, 1, &[1], &mut out), Verdict::Deliver);
    assert_eq!(out, vec![vec![1], vec![2], vec![3], vec![4], vec![5]]);
    assert_eq!(r.delivered(), 5);
    assert_eq!(r.held(), (0, 0));
    // Random interleavings of two in-order links: always in order, once.
    let mut rng = Rng(7);
    for _ in 0..200 {
        let mut r = Receiver::with_window(64, 1 << 20);
        let (mut a, mut b) = (VecDeque::new(), VecDeque::new());
        for seq in 1..=60u64 {
            if rng.below(2) == 0 { &mut a } else { &mut b }.push_back(seq);
        }
        let mut out = Vec::new();
        while !a.is_empty() || !b.is_empty() {
            let q = if b.is_empty() || (!a.is_empty() && rng.below(2) == 0) {
                &mut a
            } else {
                &mut b
            };
            let seq = q.pop_front().unwrap();
            let v = feed(&mut r, seq, &seq.to_le_bytes(), &mut out);
            assert!(matches!(v, Verdict::Deliver | Verdict::Early), "{v:?}");
        }
        let got: Vec<u64> = out
            .iter()
            .map(|m| u64::from_le_bytes(m[..].try_into().unwrap()))
            .collect();
        assert_eq!(got, (1..=60).collect::<Vec<_>>());
    }
}

#[test]
fn reorder_hostile_skip_beyond_the_window_is_an_error() {
    let mut r = Receiver::with_window(8, 1000);
    let mut out = Vec::new();
    assert_eq!(feed(&mut r, 1, b"a", &mut out), Verdict::Deliver);
    assert_eq!(
        feed(&mut r, 9, b"i", &mut out),
        Verdict::Early,
        "8 ahead: inside"
    );
    assert_eq!(
        feed(&mut r, 10, b"j", &mut out),
        Verdict::Gap {
            expected: 2,
            got: 10
        }
    );
    assert_eq!(
        feed(&mut r, u64::MAX, b"z", &mut out),
        Verdict::Gap {
            expected: 2,
            got: u64::MAX
        }
    );
    assert_eq!(r.held(), (1, 1), "refused frames are not held");
    // The byte bound: 1000 bytes held at most, whatever the count.
    let mut r = Receiver::with_window(8, 1000);
    assert_eq!(feed(&mut r, 2, &[0; 600], &mut out), Verdict::Early);
    assert_eq!(
        feed(&mut r, 3, &[0; 401], &mut out),
        Verdict::Overflow {
            held_bytes: 600,
            len: 401
        }
    );
    assert_eq!(feed(&mut r, 3, &[0; 400], &mut out), Verdict::Early);
    assert_eq!(r.held(), (2, 1000));
    // Without a window (the default) any skip is a gap, as before.
    let mut strict = Receiver::default();
    assert!(matches!(strict.accept(2, 1), Verdict::Gap { .. }));
}

#[test]
fn reorder_duplicates_are_dropped() {
    let mut r = Receiver::with_window(8, 1000);
    let mut out = Vec::new();
    assert_eq!(feed(&mut r, 3, b"c", &mut out), Verdict::Early);
    // The same early message again (resent on a replacement link): held once.
    assert_eq!(feed(&mut r, 3, b"c", &mut out), Verdict::Duplicate);
    assert_eq!(r.held(), (1, 1));
    assert_eq!(feed(&mut r, 1, b"a", &mut out), Verdict::Deliver);
    assert_eq!(feed(&mut r, 1, b"a", &mut out), Verdict::Duplicate);
    assert_eq!(feed(&mut r, 2, b"b", &mut out), Verdict::Deliver);
    assert_eq!(feed(&mut r, 3, b"c", &mut out), Verdict::Duplicate);
    assert_eq!(out, vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
    assert_eq!(r.held(), (0, 0));
}
