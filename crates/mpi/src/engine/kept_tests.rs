//! Receives whose request the matching queue borrows (`Engine::recv_kept`,
//! `matching::Posted`): posted, cancelled, released (`MPI_Request_free`)
//! and recycled by several threads while another delivers arrivals. Every
//! message must land exactly once, in matching order, and never in a
//! cancelled receive.

use super::*;
use crate::datatype::{Basic, Datatype};
use std::collections::VecDeque;

/// Receiving threads, each on its own tag.
const POSTERS: usize = 3;
/// Receives each posts (as many messages come for its tag).
const PER: usize = 3000;
/// A receive buffer nothing was written to.
const UNTOUCHED: u64 = u64::MAX;

/// What a poster did with one receive (by slot: poster * PER + k).
#[derive(Clone, Copy, PartialEq, Debug)]
enum Fate {
    /// Completed with a message while the poster kept it.
    Received,
    /// `cancel_recv` took it back before a message matched it.
    Cancelled,
    /// Handed to the engine (`release_recv`) at some point.
    Released,
    /// Still pending when the poster stopped: cancelled at the end.
    Leftover,
}

/// xorshift: the test needs a mix of choices, not quality.
fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

fn eager_wire(tag: i32, seq: u32, value: u64) -> Vec<u8> {
    let mut w = Env {
        kind: EAGER,
        ctx: 0,
        src: 1,
        tag,
        seq,
        size: 8,
        sreq: 0,
        addr: 0,
        pid: 0,
    }
    .encode_eager()
    .to_vec();
    w.extend_from_slice(&value.to_le_bytes());
    w
}

#[test]
fn kept_receives_survive_arrivals_cancels_and_releases_from_many_threads() {
    let e = crate::fuzzing::engine_of_job(2);
    let g = crate::group::Group::new(vec![0, 1]);
    let byte = Datatype::predefined(Basic::U8, "MPI_BYTE");
    let total = POSTERS * PER;
    // One 8-byte buffer per receive, alive until the end of the test.
    let mut mem = vec![UNTOUCHED; total];
    let base = mem.as_mut_ptr() as usize;
    let arrivals = {
        let e = e.clone();
        std::thread::spawn(move || {
            // Message i has tag i % POSTERS and carries i: per tag (one
            // sender, one context) they must be received in this order.
            for i in 0..total {
                e.handle_msg(1, &eager_wire((i % POSTERS) as i32, i as u32, i as u64));
                if i.is_multiple_of(7) {
                    std::thread::yield_now();
                }
            }
        })
    };
    let posters: Vec<_> = (0..POSTERS)
        .map(|p| {
            let (e, g, byte) = (e.clone(), g.clone(), byte.clone());
            std::thread::spawn(move || {
                let mut rng = 0x9e37_79b9_7f4a_7c15u64 ^ (p as u64 + 1);
                let mut fates = vec![Fate::Leftover; PER];
                let mut statuses = vec![None; PER];
                let mut live: VecDeque<(usize, Arc<Req>)> = VecDeque::new();
                for k in 0..PER {
                    let slot = p * PER + k;
                    // SAFETY: `mem` outlives every receive (the threads are
                    // joined before it is read or dropped).
                    let buf = unsafe { Buf::new(base + slot * 8, 8, byte.clone()) };
                    // SAFETY: the reference is kept in `live` until done, or
                    // given to `release_recv`, or the receive is cancelled.
                    let r = unsafe { e.recv_kept(0, &g, 1, p as i32, buf) }.expect("posted");
                    match next(&mut rng) % 8 {
                        0 => {
                            if e.cancel_recv(&r) {
                                fates[k] = Fate::Cancelled;
                                assert!(r.done() && r.status().cancelled);
                            } else {
                                live.push_back((k, r));
                            }
                        }
                        1 => {
                            fates[k] = Fate::Released;
                            e.release_recv(r);
                        }
                        _ => live.push_back((k, r)),
                    }
                    // Finish (and recycle) what completed, in order, now
                    // and then releasing a pending one instead.
                    while let Some((k, r)) = live.pop_front() {
                        if r.done() {
                            fates[k] = Fate::Received;
                            statuses[k] = Some(e.finish(r));
                        } else if next(&mut rng).is_multiple_of(16) {
                            fates[k] = Fate::Released;
                            e.release_recv(r);
                        } else {
                            live.push_front((k, r));
                            break;
                        }
                    }
                }
                (fates, statuses, live)
            })
        })
        .collect();
    arrivals.join().expect("arrivals");
    let mut results = Vec::new();
    for t in posters {
        results.push(t.join().expect("poster"));
    }
    // Every arrival has been handled: what is still pending can only be
    // cancelled now, and what arrived unmatched is taken by new receives.
    let mut seen = vec![0u32; total];
    for (p, (mut fates, mut statuses, live)) in results.into_iter().enumerate() {
        for (k, r) in live {
            if r.done() {
                fates[k] = Fate::Received;
                statuses[k] = Some(e.finish(r));
            } else {
                assert!(e.cancel_recv(&r), "a pending receive with no arrival left");
                fates[k] = Fate::Leftover;
            }
        }
        let mut last = None;
        for k in 0..PER {
            let got = mem[p * PER + k];
            match fates[k] {
                Fate::Cancelled | Fate::Leftover => {
                    assert_eq!(got, UNTOUCHED, "a message landed in a cancelled receive")
                }
                Fate::Received => {
                    let s = statuses[k].expect("finished");
                    assert_eq!((s.source, s.tag, s.bytes, s.error), (1, p as i32, 8, 0));
                    assert!(!s.cancelled);
                    assert_ne!(got, UNTOUCHED, "completed without its data");
                }
                // Matched or not: a released receive goes on without a handle.
                Fate::Released => {}
            }
            if got == UNTOUCHED {
                continue;
            }
            assert_eq!(got as usize % POSTERS, p, "a message of another tag");
            assert!(
                last.is_none_or(|l| got > l),
                "tag {p}: {got} after {last:?}"
            );
            last = Some(got);
            seen[got as usize] += 1;
        }
        // Messages of this tag that arrived with no receive posted: taken
        // now, and all later than any a posted receive took.
        let mut drained = [0u64; 1];
        loop {
            drained[0] = UNTOUCHED;
            // SAFETY: `drained` outlives the receive, which completes at once.
            let buf = unsafe { Buf::new(drained.as_mut_ptr() as usize, 8, byte.clone()) };
            if e.probe(0, &g, 1, p as i32, false).is_none() {
                break;
            }
            let r = e.recv(0, &g, 1, p as i32, buf).expect("posted");
            assert!(r.done(), "an unexpected message matches at once");
            let got = drained[0];
            assert!(
                last.is_none_or(|l| got > l),
                "tag {p}: {got} after {last:?}"
            );
            last = Some(got);
            seen[got as usize] += 1;
        }
    }
    let wrong: Vec<_> = (0..total).filter(|&i| seen[i] != 1).collect();
    assert!(
        wrong.is_empty(),
        "messages not received exactly once: {:?}",
        &wrong[..wrong.len().min(10)]
    );
    drop(e);
    drop(mem);
}
