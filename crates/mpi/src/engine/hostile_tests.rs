//! The handlers driven directly with hostile messages (regression tests of
//! the hardening issue: every field of a peer's message is checked).
use super::matching::held_cost;
use super::*;
use crate::datatype::{Basic, Datatype};
use crate::fuzzing::engine_of_job;

fn eager(ctx: u64, src: i32, tag: i32, seq: u32, data: &[u8]) -> Vec<u8> {
    let e = Env {
        kind: EAGER,
        ctx,
        src,
        tag,
        seq,
        size: 0,
        sreq: 0,
        addr: 0,
        pid: 0,
    };
    let mut v = e.encode_eager().to_vec();
    v.extend_from_slice(data);
    v
}

fn rts(ctx: u64, src: i32, seq: u32, size: u64, sreq: u64) -> Vec<u8> {
    Env {
        kind: RTS,
        ctx,
        src,
        tag: 0,
        seq,
        size,
        sreq,
        addr: 0,
        pid: 0,
    }
    .encode()
    .to_vec()
}

fn data(rreq: u64, off: u64, total: u64, bytes: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    for w in [rreq, off, total] {
        v.extend_from_slice(&w.to_le_bytes());
    }
    v.extend_from_slice(bytes);
    v
}

fn world(n: u32) -> Arc<Group> {
    Group::new((0..n).collect())
}

fn byte() -> Arc<Datatype> {
    Datatype::predefined(Basic::U8, "MPI_BYTE")
}

fn recv_into(e: &Engine, g: &Arc<Group>, src: i32, out: &mut [u8]) -> Arc<Req> {
    // SAFETY: the callers keep `out` alive and untouched until the request is done or dropped.
    let buf = unsafe { Buf::new(out.as_mut_ptr() as usize, out.len(), byte()) };
    e.recv(0, g, src, ANY_TAG, buf).expect("posted")
}

#[test]
fn an_envelope_naming_a_huge_context_or_source_allocates_nothing() {
    let e = engine_of_job(3);
    // Context 2^32-16 and source 2^31-1 sized two vectors by themselves:
    // 32 GiB of queue slots and 8 GiB of sequence numbers.
    e.handle_msg(1, &eager(0xffff_fff0, i32::MAX, 0, 0, b"x"));
    e.handle_msg(1, &eager(0, i32::MAX, 0, 0, b"x"));
    assert!(e.footprint() < 1 << 20, "{} bytes", e.footprint());
    // The rank the transport names must be one of the job.
    e.handle_msg(9, &eager(0, 0, 0, 0, b"x"));
    e.handle_msg(1, &eager(0, 1, -5, 0, b"x"));
    assert_eq!(e.rejected(), 2);
}

#[test]
fn queues_peers_create_for_unknown_contexts_are_bounded() {
    let e = engine_of_job(3);
    let n = MAX_PEER_QUEUES + 100;
    for c in 0..n as u64 {
        e.handle_msg(1, &eager(1000 + 2 * c, 1, 0, 0, b""));
    }
    assert_eq!(e.rejected(), 100);
    // Using a context here takes its queues off the peers' count.
    let g = world(3);
    let _ = e.probe(1000, &g, ANY_SOURCE, ANY_TAG, false);
    e.handle_msg(1, &eager(1_000_000, 1, 0, 0, b""));
    assert_eq!(e.rejected(), 100);
}

#[test]
fn nonblocking_collective_instances_a_peer_runs_ahead_on_are_counted_apart() {
    let e = engine_of_job(3);
    // A root 3000 instances of MPI_Ibcast ahead of this member: each
    // instance's key is the communicator's context with the instance
    // number above bit 32.
    for i in 1..=3000u64 {
        e.handle_msg(1, &eager(4 | i << 32, 1, 0, 0, b"x"));
    }
    assert_eq!(e.rejected(), 0, "an honest run-ahead lost messages");
    // They do not use up the bound of communicator contexts.
    for c in 0..MAX_PEER_QUEUES as u64 {
        e.handle_msg(1, &eager(1000 + 2 * c, 1, 0, 0, b""));
    }
    assert_eq!(e.rejected(), 0);
    e.handle_msg(1, &eager(999_999, 1, 0, 0, b""));
    assert_eq!(e.rejected(), 1);
    // A queue a peer made costs what MAX_PEER_NBC_QUEUES's bound assumes.
    assert!(std::mem::size_of::<super::matching::Queues>() <= 200);
}

#[test]
fn an_envelope_whose_source_is_not_its_sender_is_refused() {
    let e = engine_of_job(3);
    let g = world(3);
    let mut out = [0u8; 8];
    let r = recv_into(&e, &g, ANY_SOURCE, &mut out);
    // Rank 1 claims to be rank 2.
    e.handle_msg(1, &eager(0, 2, 0, 0, b"forged"));
    assert!(!r.done());
    assert_eq!(e.rejected(), 1);
    e.handle_msg(2, &eager(0, 2, 0, 0, b"real"));
    assert!(r.done());
    assert_eq!((r.status().source, &out[..4]), (2, &b"real"[..]));
}

#[test]
fn a_forged_source_queued_before_the_communicator_was_used_is_dropped() {
    let e = engine_of_job(3);
    e.handle_msg(1, &eager(0, 2, 0, 0, b"forged"));
    e.handle_msg(2, &eager(0, 2, 0, 0, b"real"));
    let g = world(3);
    let mut out = [0u8; 8];
    let r = recv_into(&e, &g, ANY_SOURCE, &mut out);
    assert!(r.done());
    assert_eq!((r.status().source, &out[..4]), (2, &b"real"[..]));
    assert_eq!(e.rejected(), 1);
    assert!(e.probe(0, &g, ANY_SOURCE, ANY_TAG, false).is_none());
}

#[test]
fn sequence_numbers_far_ahead_or_behind_are_refused() {
    let e = engine_of_job(3);
    e.handle_msg(1, &eager(0, 1, 0, MAX_EARLY, b"far"));
    e.handle_msg(1, &eager(0, 1, 0, u32::MAX, b"behind"));
    assert_eq!(e.rejected(), 2);
    // Within the window they wait for their turn, at most MAX_EARLY of them.
    for s in 1..MAX_EARLY + 5 {
        e.handle_msg(1, &eager(0, 1, 0, s % MAX_EARLY.max(1), b""));
    }
    assert!(e.footprint() < 4 << 20, "{} bytes", e.footprint());
}

#[test]
fn a_single_copy_from_another_process_than_before_is_refused() {
    let e = engine_of_job(3);
    let with_pid = |seq: u32, pid: u32| {
        let mut m = rts(0, 1, seq, 8, seq as u64);
        m[48..52].copy_from_slice(&pid.to_le_bytes());
        m
    };
    e.handle_msg(1, &with_pid(0, 4242));
    e.handle_msg(1, &with_pid(1, 4242));
    assert_eq!(e.rejected(), 0);
    e.handle_msg(1, &with_pid(2, 1));
    assert_eq!(e.rejected(), 1);
}

#[test]
fn a_rendezvous_larger_than_memory_is_refused() {
    let e = engine_of_job(3);
    e.handle_msg(1, &rts(0, 1, 0, u64::MAX, 1));
    assert_eq!(e.rejected(), 1);
    let g = world(3);
    assert!(e.probe(0, &g, ANY_SOURCE, ANY_TAG, false).is_none());
}

#[test]
fn unexpected_messages_are_held_up_to_the_limit() {
    let e = engine_of_job(3);
    let per = held_cost(1000);
    e.set_held_limit(10 * per);
    // Nobody receives: ten are held, the rest dropped, in turn or early.
    for s in 0..15 {
        e.handle_msg(1, &eager(0, 1, 0, s, &[7; 1000]));
    }
    for s in 100..105 {
        e.handle_msg(2, &eager(0, 2, 0, s, &[7; 1000]));
    }
    assert_eq!(e.rejected(), 10);
    assert_eq!(e.held_bytes(), 10 * per);
    assert_eq!(e.held_bytes_max(), 10 * per);
    assert!(e.footprint() < 12 * per + (1 << 20));
    // Receiving frees room.
    let g = world(3);
    let mut out = [0u8; 1000];
    let r = recv_into(&e, &g, 1, &mut out);
    assert!(r.done());
    e.handle_msg(2, &eager(0, 2, 0, 0, &[7; 1000]));
    assert_eq!(e.rejected(), 10);
    // The high-water mark stays where the level was highest.
    assert_eq!(e.held_bytes_max(), 10 * per);
}

#[test]
fn clear_to_send_or_fin_for_another_peers_send_is_refused() {
    let e = engine_of_job(3);
    let secret = b"for rank 2 only".to_vec();
    // SAFETY: `secret` outlives the engine's use (the request is dropped first).
    let buf = unsafe { Buf::new(secret.as_ptr() as usize, secret.len(), byte()) };
    let (req, id) = e.stage_send(2, buf);
    let mut cts = id.to_le_bytes().to_vec();
    cts.extend_from_slice(&0u64.to_le_bytes());
    e.handle_cts(1, &cts);
    e.handle_fin(1, &id.to_le_bytes());
    assert_eq!(e.ready_len.load(Ordering::Acquire), 0);
    assert!(!req.done());
    assert_eq!(e.rejected(), 2);
    e.handle_fin(2, &id.to_le_bytes());
    assert!(req.done());
    // Cut-short messages are refused, not indexed.
    e.handle_cts(2, &[1, 2, 3]);
    e.handle_fin(2, &[]);
    e.handle_data(2, &[0; 23]);
    assert_eq!(e.rejected(), 5);
}

#[test]
fn rendezvous_data_is_checked_against_its_receive() {
    let e = engine_of_job(3);
    let g = world(3);
    let mut out = [0u8; 16];
    let r = recv_into(&e, &g, 1, &mut out);
    // Rank 1 announces 8 bytes; the receive waits under id 0 (the
    // clear-to-send to the pretended rank fails, which is reported).
    e.handle_msg(1, &rts(0, 1, 0, 8, 5));
    assert!(!r.done());
    // Another peer, a total other than announced, a piece past it, an offset that wraps.
    e.handle_data(2, &data(0, 0, 8, b"intruder"));
    e.handle_data(1, &data(0, 0, 16, b"0123456789abcdef"));
    e.handle_data(1, &data(0, 4, 8, b"01234567"));
    e.handle_data(1, &data(0, u64::MAX - 2, 8, b"01234567"));
    assert_eq!(e.rejected(), 4);
    assert!(!r.done());
    assert_eq!(out, [0u8; 16]);
    e.handle_data(1, &data(0, 0, 8, b"01234567"));
    assert!(r.done());
    assert_eq!(&out[..8], b"01234567");
    assert_eq!(r.status().bytes, 8);
}
