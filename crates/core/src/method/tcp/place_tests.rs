//! Large frames read straight to where the sink placed them (`Sink::place`).

use super::tests::{authenticated_raw, tcp_method, Record};
use super::*;
use crate::method::Destination;
use std::io::Write;
use std::sync::atomic::AtomicUsize;

/// Counts placements given back unfinished (dropped before delivery).
struct Guard {
    finished: bool,
    abandoned: Arc<AtomicUsize>,
}
impl Drop for Guard {
    fn drop(&mut self) {
        if !self.finished {
            self.abandoned.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// A sink that places every large frame's bytes from `at` on into `dest`
/// (or, with `cover_end` false, all but its last byte: a wrong placement).
struct Placing {
    inner: Record,
    at: usize,
    cover_end: bool,
    dest: Vec<u8>,
    offered: Vec<(u32, Vec<u8>, usize)>,
    placed: Vec<(u32, Vec<u8>, usize)>,
    abandoned: Arc<AtomicUsize>,
}

impl Placing {
    fn new(at: usize, room: usize, cover_end: bool) -> Placing {
        Placing {
            inner: Record::default(),
            at,
            cover_end,
            dest: vec![0; room],
            offered: Vec::new(),
            placed: Vec::new(),
            abandoned: Arc::new(AtomicUsize::new(0)),
        }
    }
}

impl Sink for Placing {
    fn deliver(&mut self, src: u32, msg: &[u8]) {
        self.inner.deliver(src, msg);
    }
    fn link_failed(&mut self, src: u32, reason: String) {
        self.inner.link_failed(src, reason);
    }
    fn place(&mut self, src: u32, head: &[u8], len: usize) -> Option<Destination> {
        self.offered.push((src, head.to_vec(), len));
        let n = len - self.at - usize::from(!self.cover_end);
        assert!(n <= self.dest.len());
        Some(Destination {
            at: self.at,
            dst: self.dest.as_mut_ptr() as usize,
            len: n,
            guard: Box::new(Guard {
                finished: false,
                abandoned: self.abandoned.clone(),
            }),
        })
    }
    fn deliver_placed(&mut self, src: u32, head: &[u8], dest: Destination) {
        let mut g = dest.guard.downcast::<Guard>().expect("our guard");
        g.finished = true;
        self.placed.push((src, head.to_vec(), dest.len));
    }
}

fn poll_placing(m: &TcpMethod, sink: &mut Placing, ms: u64) {
    let end = Instant::now() + Duration::from_millis(ms);
    while Instant::now() < end {
        m.poll_thorough(sink).unwrap();
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
}

#[test]
fn a_large_frame_is_read_straight_to_its_placement_and_framing_goes_on() {
    let secret = [21; 32];
    let server = tcp_method(0, secret, &[]);
    let mut rec = Record::default();
    let mut s = authenticated_raw(&server, 3, secret, &mut rec);
    let body = pattern(1 << 20);
    let len = body.len();
    let mut sink = Placing::new(40, len, true);
    // The header and a little of the body first: the frame is incomplete
    // when it is offered, and the rest comes in later reads.
    s.write_all(&(len as u32).to_le_bytes()).unwrap();
    s.write_all(&body[..1000]).unwrap();
    poll_placing(&server, &mut sink, 30);
    assert_eq!(sink.offered.len(), 1, "offered once");
    assert_eq!(sink.offered[0].0, 3);
    assert_eq!(sink.offered[0].1, body[..PLACE_HEAD].to_vec());
    assert_eq!(sink.offered[0].2, len);
    assert!(sink.placed.is_empty());
    s.write_all(&body[1000..]).unwrap();
    // A small frame behind it goes the usual way.
    s.write_all(&5u32.to_le_bytes()).unwrap();
    s.write_all(b"after").unwrap();
    poll_placing(&server, &mut sink, 100);
    assert_eq!(sink.placed.len(), 1, "delivered placed once");
    assert_eq!(sink.placed[0], (3, body[..40].to_vec(), len - 40));
    assert!(sink.dest[..len - 40] == body[40..], "the placed bytes");
    assert_eq!(sink.inner.got, vec![(3, b"after".to_vec())]);
    assert_eq!(sink.abandoned.load(Ordering::Relaxed), 0);
    assert!(sink.inner.failed.is_empty(), "{:?}", sink.inner.failed);
    server.shutdown();
}

#[test]
fn a_placement_is_given_back_when_the_peer_closes_mid_frame() {
    let secret = [22; 32];
    let server = tcp_method(0, secret, &[]);
    let mut rec = Record::default();
    let mut s = authenticated_raw(&server, 2, secret, &mut rec);
    let body = pattern(256 << 10);
    let mut sink = Placing::new(24, body.len(), true);
    s.write_all(&(body.len() as u32).to_le_bytes()).unwrap();
    s.write_all(&body[..100 << 10]).unwrap();
    poll_placing(&server, &mut sink, 30);
    assert_eq!(sink.offered.len(), 1);
    drop(s);
    poll_placing(&server, &mut sink, 50);
    assert!(sink.placed.is_empty() && sink.inner.got.is_empty());
    assert_eq!(sink.abandoned.load(Ordering::Relaxed), 1, "given back once");
    assert_eq!(sink.inner.failed.len(), 1, "{:?}", sink.inner.failed);
    assert!(sink.inner.failed[0].1.contains("rank 2"));
    server.shutdown();
}

#[test]
fn a_placement_short_of_the_frame_end_is_given_back_and_the_frame_delivered_whole() {
    let secret = [23; 32];
    let server = tcp_method(0, secret, &[]);
    let mut rec = Record::default();
    let mut s = authenticated_raw(&server, 1, secret, &mut rec);
    let body = pattern(PLACE_MIN * 2);
    let mut sink = Placing::new(16, body.len(), false);
    s.write_all(&(body.len() as u32).to_le_bytes()).unwrap();
    s.write_all(&body[..PLACE_HEAD]).unwrap();
    poll_placing(&server, &mut sink, 20);
    s.write_all(&body[PLACE_HEAD..]).unwrap();
    poll_placing(&server, &mut sink, 50);
    assert!(!sink.offered.is_empty());
    assert!(sink.placed.is_empty());
    assert_eq!(
        sink.abandoned.load(Ordering::Relaxed),
        sink.offered.len(),
        "every wrong placement given back"
    );
    assert_eq!(sink.inner.got, vec![(1, body)]);
    server.shutdown();
}
