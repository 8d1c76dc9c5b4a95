//! Eager records placed where the sink wants them ([`Sink::place_whole`]).

use super::*;
use crate::method::Destination;

/// `SHM_PLACE_MIN`'s default.
const PLACE_WHOLE_MIN: usize = 2048;

/// Places every message whose first byte is `PLACE` into a buffer of its
/// own (the guard owns it) from byte `AT` on; declines the others. Logs
/// every message in arrival order as (placed?, length, digest), and counts
/// placements abandoned (their guard dropped without delivery).
#[derive(Default)]
struct Placing {
    log: Vec<(bool, usize, u64)>,
    asked: usize,
    abandoned: Arc<AtomicUsize>,
    failed: Vec<(u32, String)>,
}

const PLACE: u8 = 0xa5;
const AT: usize = 8;

/// A placement's destination, with a byte on either side of it (to see
/// that nothing beyond it is written).
struct Room {
    buf: Vec<u8>,
    /// Counts the drop unless delivered.
    abandoned: Option<Arc<AtomicUsize>>,
}

impl Drop for Room {
    fn drop(&mut self) {
        if let Some(c) = self.abandoned.take() {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Sink for Placing {
    fn deliver(&mut self, _src: u32, msg: &[u8]) {
        self.log.push((false, msg.len(), digest(msg)));
    }
    fn place_whole(&mut self, _src: u32, head: &[u8], len: usize) -> Option<Destination> {
        self.asked += 1;
        assert!(len >= PLACE_WHOLE_MIN, "offered a {len}-byte message");
        assert_eq!(head.len(), len.min(PLACE_HEAD));
        if head[0] != PLACE {
            return None;
        }
        let mut room = Room {
            buf: vec![0x5au8; len - AT + 2],
            abandoned: Some(self.abandoned.clone()),
        };
        let dst = room.buf.as_mut_ptr() as usize + 1;
        Some(Destination {
            at: AT,
            dst,
            len: len - AT,
            guard: Box::new(room),
        })
    }
    fn deliver_placed(&mut self, _src: u32, head: &[u8], dest: Destination) {
        assert_eq!(head.len(), AT);
        let mut room = dest.guard.downcast::<Room>().expect("our guard");
        room.abandoned = None;
        let n = room.buf.len();
        assert_eq!(
            (room.buf[0], room.buf[n - 1]),
            (0x5a, 0x5a),
            "written outside the destination"
        );
        let mut whole = head.to_vec();
        whole.extend_from_slice(&room.buf[1..n - 1]);
        self.log.push((true, whole.len(), digest(&whole)));
    }
    fn link_failed(&mut self, src: u32, reason: String) {
        self.failed.push((src, reason));
    }
}

/// Sizes around the threshold and up to the largest eager record, each
/// placed and declined in turn, and messages above the eager limit (as
/// fragments): all arrive in order, byte for byte, every one from the
/// threshold on offered once, one record or fragments alike.
fn placed_and_declined_in_order(params: &[(&str, &str)]) {
    let (a, b, id) = pair(params);
    let link = a.connect(1, &b.descriptor()).unwrap();
    let sink = RefCell::new(Placing::default());
    let w = PollPeer {
        b: &b,
        sink: &sink,
        can_wait: true,
    };
    let eager_max = b.shared.cfg.eager_max;
    let sizes = [
        1,
        PLACE_WHOLE_MIN - 1,
        PLACE_WHOLE_MIN,
        PLACE_WHOLE_MIN + 1,
        4095,
        4096,
        4097,
        8191,
        16 << 10,
        (32 << 10) + 1,
        eager_max - 1,
        eager_max,
        eager_max + 1,
        100_000,
        1 << 20,
    ];
    let mut want = Vec::new();
    let mut offered = 0;
    for (i, &len) in sizes.iter().enumerate() {
        for place in [true, false] {
            let mut data = payload(i as u64 * 2 + place as u64 + 1, len);
            data[0] = if place { PLACE } else { !PLACE };
            let cut = len / 2;
            link.send(
                &[IoSlice::new(&data[..cut]), IoSlice::new(&data[cut..])],
                &w,
            )
            .unwrap();
            let big = len >= PLACE_WHOLE_MIN;
            offered += big as usize;
            want.push((place && big, len, digest(&data)));
        }
    }
    for _ in 0..10_000 {
        if sink.borrow().log.len() == want.len() {
            break;
        }
        b.poll_thorough(&mut *sink.borrow_mut()).unwrap();
    }
    let s = sink.borrow();
    assert!(s.failed.is_empty(), "{:?}", s.failed);
    assert_eq!(s.log, want);
    assert_eq!(
        s.asked, offered,
        "every message from the threshold on is offered once"
    );
    assert_eq!(s.abandoned.load(Ordering::Relaxed), 0);
    drop(s);
    drop(link);
    finish(a, b, &id);
}

#[test]
fn eager_records_are_placed_when_the_sink_asks_and_delivered_otherwise() {
    placed_and_declined_in_order(&[("GW_SHM_CMA", "off"), ("GW_SHM_PIPELINE_MIN", "1g")]);
}

/// The same with medium messages sent as back-to-back fragments
/// (`SHM_PIPELINE_MIN`), each fragment copied where the sink said.
#[test]
fn pipelined_fragments_are_placed_when_the_sink_asks_and_delivered_otherwise() {
    placed_and_declined_in_order(&[("GW_SHM_CMA", "off"), ("GW_SHM_PIPELINE_MIN", "4k")]);
}

/// A link that fails in the middle of a placed fragmented message (the
/// sender writes another record after its first fragment) drops the
/// placement: its guard runs, nothing is delivered placed.
#[test]
fn a_placement_is_abandoned_when_the_link_fails_mid_message() {
    let (a, b, id) = pair(&[]);
    a.connect(1, &b.descriptor()).unwrap();
    let link = a.links.lock().unwrap().get(&1).unwrap().clone();
    let total = 16u64 << 10;
    let mut first = total.to_le_bytes().to_vec();
    let mut body = payload(9, 4096);
    body[0] = PLACE;
    first.extend_from_slice(&body);
    assert!(link.push_raw(TAG_FIRST, &first));
    assert!(link.push_raw(TAG_EAGER, b"not a fragment"));
    let mut sink = Placing::default();
    b.poll_thorough(&mut sink).unwrap();
    assert_eq!(sink.asked, 1);
    assert!(sink.log.is_empty(), "{:?}", sink.log);
    assert_eq!(sink.abandoned.load(Ordering::Relaxed), 1);
    assert_eq!(sink.failed.len(), 1, "{:?}", sink.failed);
    assert!(
        sink.failed[0].1.contains("inside a fragmented message"),
        "{:?}",
        sink.failed
    );
    drop(link);
    finish(a, b, &id);
}
