//! A confirmed peer (or someone spoofing its address) sending malformed,
//! out-of-window or replayed datagrams: each is dropped and counted or fails
//! that one link with a clear reason; nothing panics, nothing grows without
//! bound.

use super::*;
use crate::method::udp::proto::{T_ACK, VERSION};

/// Endpoints 0 and 1 after a short stream each way: both links established.
fn established() -> Sim {
    let mut sim = Sim::new(
        pair([7; 32]),
        Impair {
            loss: 0.0,
            dup: 0.0,
            reorder: 0.0,
            rate: 0,
            ..LOSSY
        },
        1,
    );
    let mut s = [stream(0, 1, 20, 1), stream(1, 0, 20, 2)];
    run_streams(&mut sim, &mut s, Duration::from_secs(60));
    sim
}

fn hdr(ty: u8, src: u32, dst: u32) -> Vec<u8> {
    let mut d = b"GU".to_vec();
    d.push(VERSION);
    d.push(ty);
    d.extend_from_slice(&src.to_le_bytes());
    d.extend_from_slice(&dst.to_le_bytes());
    d
}

fn ack(src: u32, dst: u32, cum: u64, count: u8, ranges: &[(u32, u32)]) -> Vec<u8> {
    let mut d = hdr(T_ACK, src, dst);
    d.extend_from_slice(&cum.to_le_bytes());
    d.push(count);
    for &(off, len) in ranges {
        d.extend_from_slice(&off.to_le_bytes());
        d.extend_from_slice(&len.to_le_bytes());
    }
    d
}

fn failures(ep: &mut Endpoint<u32>) -> Vec<(u32, String)> {
    let mut v = Vec::new();
    while let Some(e) = ep.poll_event() {
        if let Event::Failed { peer, reason } = e {
            v.push((peer, reason));
        }
    }
    v
}

/// Sends one message 1 -> 0 and runs the simulation until it arrives.
fn still_works(sim: &mut Sim) {
    let now = sim.now;
    sim.eps[1].send(0, &[IoSlice::new(b"after")], now).unwrap();
    for _ in 0..10_000 {
        sim.step();
        while let Some(e) = sim.eps[0].poll_event() {
            match e {
                Event::Message { data, .. } if data == b"after" => return,
                e => panic!("unexpected {e:?}"),
            }
        }
    }
    panic!("the link no longer delivers");
}

#[test]
fn ack_with_truncated_bit_and_no_ranges_is_harmless() {
    let mut sim = established();
    // 21 bytes: header, cum 0, count 0x80 (no ranges, "truncated").
    let d = ack(0, 1, 0, 0x80, &[]);
    assert_eq!(d.len(), 21);
    let now = sim.now;
    sim.eps[1].handle(now, 0, &d);
    assert_eq!(failures(&mut sim.eps[1]), []);
    still_works(&mut sim);
}

#[test]
fn ack_of_sequences_never_sent_fails_only_that_link_naming_the_rank() {
    let mut sim = established();
    // A selective range far beyond anything endpoint 1 sent to 0.
    let d = ack(0, 1, 0, 1, &[(1_000_000, 5)]);
    let now = sim.now;
    sim.eps[1].handle(now, 0, &d);
    let f = failures(&mut sim.eps[1]);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].0, 0);
    assert!(
        f[0].1.contains("rank 0") && f[0].1.contains("never sent"),
        "{f:?}"
    );
    // Saturating offsets: a range at the very end of the sequence space.
    let mut sim = established();
    let d = ack(0, 1, 0, 0x81, &[(u32::MAX, u32::MAX)]);
    let now = sim.now;
    sim.eps[1].handle(now, 0, &d);
    assert_eq!(failures(&mut sim.eps[1]).len(), 1);
}

/// A real data datagram from endpoint 0 to 1 (not delivered): its header
/// gives the next sequence number 1 expects from 0.
fn data_template(sim: &mut Sim) -> (u64, Vec<u8>) {
    let now = sim.now;
    sim.eps[0].send(1, &[IoSlice::new(b"t")], now).unwrap();
    let mut d = Vec::new();
    assert_eq!(sim.eps[0].poll_transmit(now, &mut d), Some(1));
    assert_eq!(d[3], T_DATA);
    let seq = u64::from_le_bytes(d[HDR + 8..HDR + 16].try_into().unwrap());
    (seq, d)
}

fn data(src: u32, dst: u32, cum: u64, seq: u64, msg_len: u32, off: u32, payload: &[u8]) -> Vec<u8> {
    let mut d = hdr(T_DATA, src, dst);
    d.extend_from_slice(&cum.to_le_bytes());
    d.extend_from_slice(&seq.to_le_bytes());
    d.extend_from_slice(&msg_len.to_le_bytes());
    d.extend_from_slice(&off.to_le_bytes());
    d.extend_from_slice(payload);
    d
}

#[test]
fn out_of_order_datagrams_longer_than_ours_are_held_within_a_byte_budget() {
    let mut sim = established();
    let (next, _) = data_template(&mut sim);
    let big = vec![0x5a; 60_000];
    let now = sim.now;
    for k in 1..512 {
        let d = data(0, 1, 0, next + k, 60_000, 0, &big);
        sim.eps[1].handle(now, 0, &d);
    }
    // Far beyond the window, and at the end of the sequence space.
    for seq in [next + 513, next + 1_000_000, u64::MAX - 1, u64::MAX] {
        let d = data(0, 1, 0, seq, 1, 0, b"x");
        sim.eps[1].handle(now, 0, &d);
    }
    let z = sim.eps[1].state_sizes();
    assert!(z.ooo_bytes <= 512 * 8192, "{z:?}");
    assert!(z.ooo_dgrams < 512, "{z:?}");
    assert!(sim.eps[1].counters.over_budget > 0);
    let cfg = sim.eps[1].config().clone();
    z.check(&cfg, z.unacked).unwrap();
}

#[test]
fn a_flood_of_hellos_between_two_polls_queues_a_bounded_number_of_answers() {
    let mut sim = established();
    let now = sim.now;
    for i in 0..10_000u32 {
        let mut nonce = [0u8; 16];
        nonce[..4].copy_from_slice(&i.to_le_bytes());
        let d = hello(2, 1, &nonce);
        sim.eps[1].handle(now, 100 + i % 50, &d);
    }
    let z = sim.eps[1].state_sizes();
    assert!(z.ctl <= crate::method::udp::proto::CTL_MAX, "{z:?}");
    assert!(z.peers <= 4, "{z:?}");
    still_works(&mut sim);
}

fn hello(src: u32, dst: u32, nonce: &[u8; 16]) -> Vec<u8> {
    let mut d = hdr(crate::method::udp::proto::T_HELLO, src, dst);
    d.extend_from_slice(nonce);
    d
}
