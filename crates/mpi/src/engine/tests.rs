use super::*;

fn env(kind: u8) -> Env {
    Env {
        kind,
        ctx: 7 | 3 << 32,
        src: 5,
        tag: 99,
        seq: 12345,
        size: 8,
        sreq: 77,
        addr: 0xdead_beef,
        pid: 4242,
    }
}

#[test]
fn eager_envelope_is_short_and_round_trips() {
    let e = env(EAGER);
    let mut wire = e.encode_eager().to_vec();
    wire.extend_from_slice(&[1u8; 8]);
    let (d, n) = Env::decode(&wire).expect("valid envelope");
    assert_eq!(n, EAGER_ENV_LEN);
    assert_eq!(
        (d.kind, d.ctx, d.src, d.tag, d.seq),
        (EAGER, e.ctx, 5, 99, 12345)
    );
    // The size is what follows the envelope; rendezvous fields are empty.
    assert_eq!((d.size, d.sreq, d.addr, d.pid), (8, 0, 0, 0));
}

#[test]
fn rendezvous_envelope_round_trips() {
    let e = env(RTS);
    let (d, n) = Env::decode(&e.encode()).expect("valid envelope");
    assert_eq!(n, ENV_LEN);
    assert_eq!(
        (d.kind, d.ctx, d.src, d.tag, d.seq, d.size, d.sreq, d.addr, d.pid),
        (RTS, e.ctx, 5, 99, 12345, 8, 77, 0xdead_beef, 4242)
    );
}

#[test]
fn a_finished_receive_is_reused_by_the_next_one() {
    use crate::datatype::{Basic, Datatype};
    let e = crate::fuzzing::engine_of_job(2);
    let g = crate::group::Group::new(vec![0, 1]);
    let byte = Datatype::predefined(Basic::U8, "MPI_BYTE");
    let mut into = [0u8; 8];
    // SAFETY: `into` outlives both receives (each completes or is dropped below).
    let b = unsafe { Buf::bytes_of_mut(&mut into, &byte) };
    let r = e.recv(0, &g, 1, 5, b.clone()).expect("posted");
    let first = Arc::as_ptr(&r);
    let mut wire = Env {
        seq: 0,
        tag: 5,
        src: 1,
        ctx: 0,
        ..env(EAGER)
    }
    .encode_eager()
    .to_vec();
    wire.extend_from_slice(&[9u8; 8]);
    e.handle_msg(1, &wire);
    assert!(r.done());
    let mut spare = Vec::new();
    let s = e.finish_into(r, &mut spare);
    assert_eq!((s.source, s.tag, s.bytes, s.error), (1, 5, 8, 0));
    assert_eq!(spare.len(), 1, "the sole holder recycles it");
    e.give_back(&mut spare);
    assert!(spare.is_empty());
    // The next receive takes that very request, reset.
    let r2 = e.recv(0, &g, 1, 5, b).expect("posted");
    assert_eq!(Arc::as_ptr(&r2), first);
    assert!(!r2.done());
    assert_eq!(r2.status(), Status::default());
    assert!(e.cancel_recv(&r2));
    assert_eq!(into, [9u8; 8]);
}

#[test]
fn malformed_envelopes_are_refused() {
    assert!(Env::decode(&[]).is_none());
    assert!(Env::decode(&[EAGER; EAGER_ENV_LEN - 1]).is_none());
    // An RTS needs the full envelope, and unknown kinds are refused.
    assert!(Env::decode(&env(RTS).encode()[..ENV_LEN - 1]).is_none());
    let mut bad = env(RTS).encode();
    bad[0] = 9;
    assert!(Env::decode(&bad).is_none());
}
