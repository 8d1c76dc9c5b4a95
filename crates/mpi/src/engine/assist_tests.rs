//! The assisted single copy (`assist.rs`) driven directly: both parts
//! copied for real with `process_vm_readv`/`process_vm_writev` within this
//! process (the engine plays the sender and the receiver of a pair with
//! rank 1 as the mirror), a part declined, a peer failing mid-copy, and
//! every hostile field of the two messages.

use super::assist::{split_point, ASSIST_NEVER, ASSIST_UNPROVEN};
use super::*;
use crate::datatype::{Basic, Datatype};
use gridwire_core::params::Params;
use gridwire_core::JoinSpec;

/// Rank 0 of a job of 3 with only the `self` method; rank 1 counts as a
/// peer on this host (single copy allowed), so that its messages can be
/// played here.
fn engine() -> Option<Arc<Engine>> {
    let word = 0x5eed_u64;
    let mut got = 0u64;
    // SAFETY: reads our own 8-byte local into another.
    let probe = unsafe {
        crate::cma::read(
            crate::cma::my_pid(),
            &word as *const u64 as u64,
            &mut got as *mut u64 as usize,
            8,
        )
    };
    if let Err(e) = probe {
        gridwire_testkit::skip(&format!("process_vm_readv not permitted here: {e}"));
        return None;
    }
    assert_eq!(got, word);
    static N: AtomicU32 = AtomicU32::new(0);
    let params = Params::from_lookup(|k| (k == "GW_METHODS").then(|| "self".into()))
        .expect("fixed parameters are valid");
    let job = format!(
        "assist{}x{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    );
    let ctx = Context::join(
        params,
        JoinSpec {
            job_id: job,
            secret: [7; 32],
            ctx_id: 0,
            capacity: 3,
        },
    )
    .expect("a self-only context joins");
    let e = Engine::with_job_size(ctx, 3);
    e.same_host[1].store(1, Ordering::Relaxed);
    Some(e)
}

fn byte() -> Arc<Datatype> {
    Datatype::predefined(Basic::U8, "MPI_BYTE")
}

/// A pattern that differs at every offset of a few MiB and between seeds.
fn pattern(n: usize, seed: u32) -> Vec<u8> {
    (0..n)
        .map(|i| ((i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) >> 13) as u8)
        .collect()
}

/// A receive request into `out[at..at + n]` (not queued: it stands for one
/// that matched a rendezvous).
fn matched_recv(e: &Engine, out: &mut [u8], at: usize, n: usize) -> Arc<Req> {
    let req = e.new_req();
    let mut d = req.d.lock();
    // SAFETY: the tests keep `out` alive and untouched while the request lives.
    d.recv = Some(unsafe { Buf::new(out.as_mut_ptr() as usize + at, n, byte()) });
    d.is_recv = true;
    drop(d);
    req
}

/// The envelope of a rendezvous from rank 1 whose data is `src`.
fn rts_of(src: &[u8], sreq: u64) -> Env {
    Env {
        kind: RTS,
        ctx: 0,
        src: 1,
        tag: 3,
        seq: 0,
        size: src.len() as u64,
        sreq,
        addr: src.as_ptr() as u64,
        pid: crate::cma::my_pid(),
    }
}

fn assist_msg(sreq: u64, rreq: u64, off: u64, len: u64, addr: u64, pid: u32) -> Vec<u8> {
    let mut m = Vec::new();
    for w in [sreq, rreq, off, len, addr] {
        m.extend_from_slice(&w.to_le_bytes());
    }
    m.extend_from_slice(&pid.to_le_bytes());
    m
}

fn answer(rreq: u64, ok: u64) -> Vec<u8> {
    let mut m = rreq.to_le_bytes().to_vec();
    m.extend_from_slice(&ok.to_le_bytes());
    m
}

#[test]
fn the_split_is_inside_near_the_middle_and_page_aligned_when_large() {
    for dst in [0x10000usize, 0x10001, 0x10fff, 0x7ff3] {
        for n in [
            2usize,
            3,
            64,
            65,
            100,
            4095,
            16384,
            65535,
            65536,
            1 << 20,
            (4 << 20) + 3,
        ] {
            let k = split_point(dst, n);
            assert!(0 < k && k < n, "dst {dst:#x} n {n}: split {k}");
            assert!(k.abs_diff(n / 2) <= 4096, "dst {dst:#x} n {n}: split {k}");
            if n >= 16384 {
                assert_eq!((dst + k) % 4096, 0, "dst {dst:#x} n {n}: split {k}");
            }
        }
    }
}

/// Both parts for real: our front part by `process_vm_readv`, the
/// "sender's" back part by this engine answering `H_ASSIST` as rank 1's
/// sender with `process_vm_writev`; every byte checked, nothing written
/// outside the receive, at misaligned addresses and odd sizes.
#[test]
fn both_parts_are_copied_byte_exact_and_complete_once() {
    let Some(e) = engine() else { return };
    for (n, at, src_at) in [
        (65536usize, 0usize, 0usize),
        (65537, 1, 3),
        (100_003, 7, 5),
        (1 << 20, 64, 1),
        ((4 << 20) + 3, 3, 0),
    ] {
        let data = pattern(n + src_at, n as u32);
        let src = &data[src_at..];
        // The send of ours "to rank 1" whose data is `src`.
        // SAFETY: `data` outlives the send request (done below).
        let (send, sreq) = e.stage_send(1, unsafe { Buf::bytes_of(src, &byte()) });
        let mut out = vec![0xeeu8; n + at + 64];
        let recv = matched_recv(&e, &mut out, at, n);
        let env = rts_of(src, sreq);
        let dst = out.as_ptr() as usize + at;
        let rreq = e.begin_assisted(&recv, 1, &env, dst, n);
        let split = split_point(dst, n);
        e.copy_own_part(rreq, 1);
        assert!(!recv.done(), "n {n}: done with one part in");
        // Rank 1 (the receiver's side of this pair) asks for the back part.
        e.handle_assist(
            1,
            &assist_msg(
                sreq,
                rreq,
                split as u64,
                (n - split) as u64,
                (dst + split) as u64,
                crate::cma::my_pid(),
            ),
        );
        e.poke(); // the waiting thread's round copies it
        assert!(!recv.done(), "n {n}: done before the answer");
        e.handle_assisted(1, &answer(rreq, 1));
        assert!(recv.done(), "n {n}");
        let s = recv.status();
        assert_eq!((s.bytes, s.error), (n, 0), "n {n}");
        assert!(out[at..at + n] == *src, "n {n}: content differs");
        assert!(out[..at].iter().all(|&b| b == 0xee), "n {n}: before");
        assert!(out[at + n..].iter().all(|&b| b == 0xee), "n {n}: after");
        // The same answer again names nothing.
        let before = e.rejected();
        e.handle_assisted(1, &answer(rreq, 1));
        assert_eq!(e.rejected(), before + 1);
        // The send completes with the receiver's FIN, as before.
        e.handle_fin(1, &sreq.to_le_bytes());
        assert!(send.done());
    }
    assert_eq!(e.rejected(), 5);
}

/// Help is asked of a proven peer for a message from the threshold on,
/// but not while a rendezvous send of ours to that peer is unfinished
/// (both directions at once: that peer is busy copying ours).
#[test]
fn help_is_not_asked_of_a_peer_copying_our_send() {
    let Some(e) = engine() else { return };
    let min = e.assist_from(1);
    assert_eq!(min, ASSIST_UNPROVEN);
    assert!(
        !e.assist_wanted(1, 1 << 20),
        "asked before the pair is proven"
    );
    e.assist_proven(1);
    let min = e.assist_from(1);
    assert!(e.assist_wanted(1, min));
    assert!(!e.assist_wanted(1, min - 1));
    let data = pattern(min, 3);
    // SAFETY: `data` outlives the send request (finished below).
    let (send, sreq) = e.stage_send(1, unsafe { Buf::bytes_of(&data, &byte()) });
    assert!(
        !e.assist_wanted(1, min),
        "asked while our send to 1 is open"
    );
    // SAFETY: as above.
    let (other, oreq) = e.stage_send(2, unsafe { Buf::bytes_of(&data, &byte()) });
    e.handle_fin(1, &sreq.to_le_bytes());
    assert!(send.done());
    assert!(
        e.assist_wanted(1, min),
        "an open send to another peer stopped it"
    );
    e.handle_fin(2, &oreq.to_le_bytes());
    assert!(other.done());
}

/// A sender that declines (answers 0): the receiver copies that part
/// itself, the content is whole, and that peer is asked no more.
#[test]
fn a_declined_part_is_copied_by_the_receiver() {
    let Some(e) = engine() else { return };
    e.assist_proven(1);
    assert_ne!(e.assist_from(1), ASSIST_UNPROVEN);
    let n = 300_001;
    let src = pattern(n, 9);
    let mut out = vec![0u8; n];
    let recv = matched_recv(&e, &mut out, 0, n);
    let dst = out.as_ptr() as usize;
    let rreq = e.begin_assisted(&recv, 1, &rts_of(&src, 42), dst, n);
    e.handle_assisted(1, &answer(rreq, 0));
    assert!(!recv.done(), "done before either part was copied");
    e.poke();
    assert!(!recv.done(), "done with the declined part only");
    e.copy_own_part(rreq, 1);
    assert!(recv.done());
    assert_eq!(recv.status().error, 0);
    assert!(out == src);
    assert_eq!(e.assist_from(1), ASSIST_NEVER);
    assert_eq!(e.rejected(), 0);
}

/// The sender fails while its part is outstanding: the receive fails with
/// `MPI_ERR_PROC_ABORTED` at the next round instead of waiting forever,
/// and a late answer changes nothing.
#[test]
fn a_sender_failing_mid_copy_fails_the_receive() {
    let Some(e) = engine() else { return };
    let n = 1 << 20;
    let src = pattern(n, 1);
    let mut out = vec![0u8; n];
    let recv = matched_recv(&e, &mut out, 0, n);
    // Rank 2 (the failure reasons are process-wide: the peer failure
    // tests expect their own for rank 1, and the same one for rank 2).
    let rreq = e.begin_assisted(&recv, 2, &rts_of(&src, 7), out.as_ptr() as usize, n);
    e.copy_own_part(rreq, 2);
    e.poke();
    assert!(!recv.done(), "done without the sender's part");
    e.ctx
        .peer_departed(2, "rank 2 died")
        .expect("rank 2 is a peer");
    e.poke();
    assert!(recv.done(), "the receive still waits for a failed sender");
    assert_eq!(recv.status().error, class::PROC_ABORTED);
    e.handle_assisted(2, &answer(rreq, 1));
    assert_eq!(recv.status().error, class::PROC_ABORTED);
    assert_eq!(e.rejected(), 1);
}

/// What `H_ASSIST` may not make us do: write for a send that does not
/// wait for that peer, beyond the send's data, into a process other than
/// the one the peer named before; malformed messages are dropped. Nothing
/// is written in any of these cases.
#[test]
fn hostile_copy_requests_write_nothing() {
    let Some(e) = engine() else { return };
    let data = pattern(10_000, 3);
    // SAFETY: `data` outlives the send request.
    let (_send, sreq) = e.stage_send(1, unsafe { Buf::bytes_of(&data, &byte()) });
    let mut out = vec![0u8; 20_000];
    let dst = out.as_mut_ptr() as u64;
    let me = crate::cma::my_pid();
    let cases: [(u32, Vec<u8>); 7] = [
        (1, assist_msg(sreq, 0, 0, 100, dst, me)[..43].to_vec()),
        (2, assist_msg(sreq, 0, 0, 100, dst, me)), // the send is to rank 1
        (1, assist_msg(sreq + 1, 0, 0, 100, dst, me)), // no such send
        (1, assist_msg(sreq, 0, 9_990, 11, dst, me)), // past its end
        (1, assist_msg(sreq, 0, u64::MAX, 2, dst, me)), // overflows
        (1, assist_msg(sreq, 0, 0, 0, dst, me)),   // empty
        (7, assist_msg(sreq, 0, 0, 100, dst, me)), // not a rank of the job
    ];
    let n = cases.len() as u64;
    for (from, m) in cases {
        e.handle_assist(from, &m);
    }
    // Pins rank 1's pid (a valid request)...
    e.handle_assist(1, &assist_msg(sreq, 0, 0, 10, dst, me));
    e.poke();
    assert!(out[..10] == data[..10]);
    // ...so that another process is refused.
    e.handle_assist(1, &assist_msg(sreq, 0, 0, 100, dst + 50, me + 1));
    e.handle_assist(1, &assist_msg(sreq, 0, 0, 100, dst + 50, 0));
    e.poke();
    assert!(out[10..].iter().all(|&b| b == 0), "a refused request wrote");
    assert_eq!(e.rejected(), n + 2);
}

/// Answers and data that do not belong to an assisted receive are
/// dropped: an answer for a receive copied the usual way or of another
/// peer, and `H_DATA` pieces aimed at an assisted receive (which takes
/// none: only the two copies write its buffer).
#[test]
fn hostile_answers_and_pieces_are_refused() {
    let Some(e) = engine() else { return };
    let n = 100_000;
    let src = pattern(n, 5);
    let mut out = vec![0u8; n];
    let recv = matched_recv(&e, &mut out, 0, n);
    let rreq = e.begin_assisted(&recv, 1, &rts_of(&src, 1), out.as_ptr() as usize, n);
    let mut other = [0u8; 16];
    let plain = matched_recv(&e, &mut other, 0, 16);
    let plain_id = e.lock().rndv_recv.insert(plain.clone(), 1, 16);
    e.handle_assisted(1, &answer(plain_id, 1));
    e.handle_assisted(2, &answer(rreq, 1));
    e.handle_assisted(1, &answer(rreq, 1)[..15]);
    let mut piece = Vec::new();
    for w in [rreq, 0, n as u64] {
        piece.extend_from_slice(&w.to_le_bytes());
    }
    piece.extend_from_slice(&[0x55u8; 64]);
    e.handle_data(1, &piece);
    assert_eq!(e.rejected(), 4);
    assert!(out.iter().all(|&b| b == 0), "a refused piece wrote");
    assert!(!recv.done() && !plain.done());
    // The real parts still complete it.
    e.copy_own_part(rreq, 1);
    e.handle_assisted(1, &answer(rreq, 0));
    e.poke();
    assert!(recv.done() && out == src);
    assert_eq!(recv.status().error, 0);
    assert!(e.lock().rndv_recv.remove(plain_id, 1).is_some());
}

#[test]
fn assisting_starts_only_after_a_whole_single_copy() {
    let Some(e) = engine() else { return };
    assert_eq!(e.assist_from(1), ASSIST_UNPROVEN);
    assert_eq!(e.assist_from(2), ASSIST_UNPROVEN);
    e.assist_proven(1);
    let min = e.assist_from(1);
    assert!(min != ASSIST_UNPROVEN && min >= 1);
    assert_eq!(e.assist_from(2), ASSIST_UNPROVEN);
    // A peer that declined stays declined.
    e.assist[1].store(ASSIST_NEVER, Ordering::Relaxed);
    e.assist_proven(1);
    assert_eq!(e.assist_from(1), ASSIST_NEVER);
}
