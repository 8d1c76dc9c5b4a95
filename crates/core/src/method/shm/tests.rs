//! In-process tests of the method: two contexts of one job on one host.

use super::*;
use crate::method::Waiter;
use crate::params::Params;
use std::cell::RefCell;
use std::io::IoSlice;
use std::sync::atomic::AtomicU32;

static COUNTER: AtomicU32 = AtomicU32::new(0);

fn job(ctx: u32, id: &str) -> JobInfo {
    JobInfo {
        ctx_id: ctx,
        size: 2,
        job_id: id.to_string(),
        host_id: "h1".into(),
        secret: [7; 32],
        verbose: 0,
    }
}

fn params(pairs: &[(&str, &str)]) -> Params {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Params::from_lookup(|k| map.get(k).cloned()).unwrap()
}

/// Two contexts (0 = a, 1 = b) of a fresh job; also returns the job id.
fn pair(pairs: &[(&str, &str)]) -> (Shm, Shm, String) {
    let id = format!(
        "t{}x{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    let p = params(pairs);
    let a = Shm::new(&job(0, &id), &p).unwrap().unwrap();
    let b = Shm::new(&job(1, &id), &p).unwrap().unwrap();
    (a, b, id)
}

fn leftovers(id: &str) -> Vec<String> {
    let prefix = format!("gw-{id}");
    std::fs::read_dir("/dev/shm")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with(&prefix) && n[prefix.len()..].starts_with('-'))
        .collect()
}

fn digest(b: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ b.len() as u64;
    let mut it = b.chunks_exact(8);
    for w in &mut it {
        h = (h ^ u64::from_le_bytes(w.try_into().unwrap()))
            .wrapping_mul(0x1000_0000_01b3)
            .rotate_left(5);
    }
    for &x in it.remainder() {
        h = (h ^ x as u64).wrapping_mul(0x1000_0000_01b3);
    }
    h
}

fn payload(seed: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    let mut x = seed | 1;
    for w in v.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        w.copy_from_slice(&x.to_le_bytes()[..w.len()]);
    }
    v
}

#[derive(Default)]
struct Collect {
    got: Vec<(u32, usize, u64)>,
    failed: Vec<(u32, String)>,
}

impl Sink for Collect {
    fn deliver(&mut self, src: u32, msg: &[u8]) {
        self.got.push((src, msg.len(), digest(msg)));
    }
    fn link_failed(&mut self, src: u32, reason: String) {
        self.failed.push((src, reason));
    }
}

/// Drives the receiver `b` (the only progress an in-process sender needs), or
/// refuses to (`can_wait == false`, like a handler).
struct PollPeer<'a, S: Sink = Collect> {
    b: &'a Shm,
    sink: &'a RefCell<S>,
    can_wait: bool,
}

impl<S: Sink> Waiter for PollPeer<'_, S> {
    fn progress(&self) -> bool {
        if self.can_wait {
            self.b.poll(&mut *self.sink.borrow_mut()).unwrap();
        }
        self.can_wait
    }
}

/// Includes sizes on both sides of every threshold, and a large message after
/// the largest (reuses the process-wide spare buffer, not empty at that point).
const SIZES: &[usize] = &[
    0,
    1,
    8,
    100,
    4096,
    16 << 10,
    (16 << 10) + 1,
    64 << 10,
    (64 << 10) + 1,
    100_000,
    1 << 20,
    3,
    5 << 20,
    64 << 20,
    6 << 20,
    17,
];

/// Sends every size in `SIZES` a→b as two iovecs, checks order and content.
fn roundtrip(a: &Shm, b: &Shm) {
    let link = a.connect(1, &b.descriptor()).unwrap();
    let sink = RefCell::new(Collect::default());
    let w = PollPeer {
        b,
        sink: &sink,
        can_wait: true,
    };
    let mut want = Vec::new();
    for (i, &len) in SIZES.iter().enumerate() {
        let data = payload(i as u64 + 1, len);
        let cut = len / 3;
        link.send(
            &[IoSlice::new(&data[..cut]), IoSlice::new(&data[cut..])],
            &w,
        )
        .unwrap();
        want.push((0u32, len, digest(&data)));
    }
    for _ in 0..1000 {
        if sink.borrow().got.len() == want.len() {
            break;
        }
        b.poll_thorough(&mut *sink.borrow_mut()).unwrap();
    }
    let s = sink.borrow();
    assert!(s.failed.is_empty(), "{:?}", s.failed);
    assert_eq!(s.got, want);
    assert!(!a.has_pending_output());
}

fn cma_state(b: &Shm) -> u32 {
    let inc = b.incoming.lock();
    inc.rings[0].rx().cma.load(Ordering::Acquire)
}

fn finish(a: Shm, b: Shm, id: &str) {
    a.shutdown();
    b.shutdown();
    drop((a, b));
    assert_eq!(leftovers(id), Vec::<String>::new());
}

#[test]
fn init_through_registry_row() {
    let id = format!(
        "t{}x{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    let p = params(&[]);
    let m = (INFO.init)(&MethodEnv {
        job: &job(0, &id),
        params: &p,
    })
    .unwrap()
    .expect("shm available");
    let d = m.descriptor();
    assert!(m.reachable(&d));
    let s = m.describe(&d);
    assert!(s.starts_with("host=h1 pid="), "{s}");
    let mut other = job(0, &id);
    other.host_id = "h2".into();
    let p2 = params(&[]);
    // A second job on the same process: different job id, not reachable.
    let id2 = format!("{id}b");
    let m2 = (INFO.init)(&MethodEnv {
        job: &job(0, &id2),
        params: &p2,
    })
    .unwrap()
    .unwrap();
    assert!(!m.reachable(&m2.descriptor()));
    assert!(!m.reachable(b"garbage"));
    assert_eq!(m.poll_class(), PollClass::EveryIteration);
    m.shutdown();
    m2.shutdown();
    drop(m2);
    assert_eq!(leftovers(&id), Vec::<String>::new());
    assert_eq!(leftovers(&id2), Vec::<String>::new());
    let _ = other;
}

/// A job whose id repeats (a launcher reusing ids, or a killed run's
/// leftovers) starts anyway: nothing is named after the job id alone (it
/// used to fail at init with EEXIST on the control segment). Both instances
/// work side by side, and neither leaves anything in /dev/shm.
#[test]
fn two_jobs_with_the_same_id_both_start() {
    let id = format!(
        "t{}x{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    let p = params(&[]);
    let first = (
        Shm::new(&job(0, &id), &p).unwrap().unwrap(),
        Shm::new(&job(1, &id), &p).unwrap().unwrap(),
    );
    let second = (
        Shm::new(&job(0, &id), &p).unwrap().unwrap(),
        Shm::new(&job(1, &id), &p).unwrap().unwrap(),
    );
    for (a, b) in [&first, &second] {
        let link = a.connect(1, &b.descriptor()).unwrap();
        let sink = RefCell::new(Collect::default());
        let w = PollPeer {
            b,
            sink: &sink,
            can_wait: true,
        };
        link.send(&[IoSlice::new(b"hello")], &w).unwrap();
        for _ in 0..5000 {
            if !sink.borrow().got.is_empty() {
                break;
            }
            b.poll_thorough(&mut *sink.borrow_mut()).unwrap();
        }
        assert_eq!(sink.borrow().got, vec![(0, 5, digest(b"hello"))]);
    }
    finish(first.0, first.1, &id);
    finish(second.0, second.1, &id);
}

#[test]
fn messages_in_order_with_cma() {
    let (a, b, id) = pair(&[("GW_SHM_CMA_MIN", "20k")]);
    roundtrip(&a, &b);
    if cma::probe_self() {
        assert_eq!(
            cma_state(&b),
            CMA_OK,
            "this host permits CMA, the pair should use it"
        );
    }
    finish(a, b, &id);
}

#[test]
fn messages_in_order_chunked() {
    let (a, b, id) = pair(&[("GW_SHM_CMA", "off"), ("GW_SHM_RING_SIZE", "64k")]);
    roundtrip(&a, &b);
    assert_eq!(cma_state(&b), CMA_NO);
    finish(a, b, &id);
}

/// A sender that may never wait (inside a handler) with a tiny ring: every
/// message goes to the backlog, flushed by `poll`, still in order.
fn backlog(cma: &str) {
    let (a, b, id) = pair(&[
        ("GW_SHM_CMA", cma),
        ("GW_SHM_RING_SIZE", "4k"),
        ("GW_SHM_CMA_MIN", "40k"),
    ]);
    let link = a.connect(1, &b.descriptor()).unwrap();
    let sink = RefCell::new(Collect::default());
    // Let b attach first, so the CMA state of the pair is known.
    b.poll_thorough(&mut *sink.borrow_mut()).unwrap();
    let w = PollPeer {
        b: &b,
        sink: &sink,
        can_wait: false,
    };
    let mut want = Vec::new();
    for i in 0..300u64 {
        let len = match i % 7 {
            0 => 3000,
            1 => 50_000,
            2 => 0,
            _ => (i * 37 % 900) as usize,
        };
        let data = payload(i + 100, len);
        link.send(&[IoSlice::new(&data)], &w).unwrap();
        drop(data); // the caller may reuse its buffer at once
        want.push((0u32, len, digest(&payload(i + 100, len))));
    }
    assert!(a.has_pending_output());
    let mut rounds = 0;
    while sink.borrow().got.len() < want.len() || a.has_pending_output() {
        a.poll(&mut Collect::default()).unwrap();
        b.poll_thorough(&mut *sink.borrow_mut()).unwrap();
        rounds += 1;
        assert!(rounds < 1_000_000, "backlog never drained");
    }
    assert!(sink.borrow().failed.is_empty());
    assert_eq!(sink.borrow().got, want);
    finish(a, b, &id);
}

#[test]
fn backlog_when_sender_may_not_wait() {
    backlog("auto");
}

#[test]
fn backlog_when_sender_may_not_wait_chunked() {
    backlog("off");
}

/// A full ring with a sender that may wait (but a receiver only the main
/// thread drives), several sender threads on one link: each thread's
/// messages arrive in its order.
#[test]
fn concurrent_senders_keep_per_thread_order() {
    let (a, b, id) = pair(&[("GW_SHM_RING_SIZE", "8k")]);
    let a = Arc::new(a);
    let link = a.connect(1, &b.descriptor()).unwrap();
    struct Spin;
    impl Waiter for Spin {
        fn progress(&self) -> bool {
            std::thread::yield_now();
            true
        }
    }
    const PER: u32 = 2000;
    let threads: Vec<_> = (0..3u32)
        .map(|t| {
            let link = link.clone();
            std::thread::spawn(move || {
                for i in 0..PER {
                    let len = if i % 100 == 99 {
                        40_000
                    } else {
                        8 + (i as usize % 300)
                    };
                    let mut m = vec![t as u8; len];
                    m[..4].copy_from_slice(&i.to_le_bytes());
                    link.send(&[IoSlice::new(&m)], &Spin).unwrap();
                }
            })
        })
        .collect();
    struct Order {
        next: [u32; 3],
        n: u32,
    }
    impl Sink for Order {
        fn deliver(&mut self, _src: u32, msg: &[u8]) {
            let t = msg[msg.len() - 1] as usize;
            let i = u32::from_le_bytes(msg[..4].try_into().unwrap());
            assert_eq!(i, self.next[t], "thread {t} out of order");
            assert!(msg[4..].iter().all(|&x| x as usize == t));
            self.next[t] += 1;
            self.n += 1;
        }
        fn link_failed(&mut self, src: u32, reason: String) {
            panic!("link from {src} failed: {reason}");
        }
    }
    let mut o = Order { next: [0; 3], n: 0 };
    let t0 = std::time::Instant::now();
    while o.n < 3 * PER {
        b.poll(&mut o).unwrap();
        assert!(t0.elapsed().as_secs() < 60, "stuck");
    }
    for t in threads {
        t.join().unwrap();
    }
    let a = Arc::into_inner(a).unwrap();
    finish(a, b, &id);
}

#[test]
fn closed_receiver_is_an_error_not_a_hang() {
    let (a, b, id) = pair(&[]);
    let link = a.connect(1, &b.descriptor()).unwrap();
    let sink = RefCell::new(Collect::default());
    b.poll_thorough(&mut *sink.borrow_mut()).unwrap();
    b.shutdown();
    let w = PollPeer {
        b: &b,
        sink: &sink,
        can_wait: true,
    };
    let big = vec![1u8; 1 << 20];
    assert!(link.send(&[IoSlice::new(&big)], &w).is_err());
    assert!(link.send(&[IoSlice::new(b"x")], &w).is_err());
    finish(a, b, &id);
}

#[test]
fn corrupt_ring_reports_link_failure() {
    let (a, b, id) = pair(&[]);
    let link = a.connect(1, &b.descriptor()).unwrap();
    let sink = RefCell::new(Collect::default());
    let w = PollPeer {
        b: &b,
        sink: &sink,
        can_wait: true,
    };
    link.send(&[IoSlice::new(b"fine")], &w).unwrap();
    b.poll_thorough(&mut *sink.borrow_mut()).unwrap();
    {
        let inc = b.incoming.lock();
        let g = &inc.rings[0];
        // Scribble a bogus length over the next record (the first took 16 + 4, padded to one alignment unit).
        link.send(&[IoSlice::new(b"soon garbage")], &w)
            .unwrap_or(());
        // SAFETY: test only; the record at the consumer's position is not in use by anyone else.
        unsafe {
            std::ptr::write(
                g.seg
                    .as_ptr()
                    .add(PAIR_DATA_OFF + super::ring::ALIGN as usize + 8)
                    as *mut u64,
                0x7fff_0000,
            )
        };
    }
    b.poll_thorough(&mut *sink.borrow_mut()).unwrap();
    let s = sink.borrow();
    assert_eq!(s.got.len(), 1);
    assert_eq!(s.failed.len(), 1, "{:?}", s.failed);
    drop(s);
    // the sender learns it too
    assert!(link.send(&[IoSlice::new(b"more")], &w).is_err());
    // and connecting again gives a fresh, working pair
    let link2 = a.connect(1, &b.descriptor()).unwrap();
    link2.send(&[IoSlice::new(b"again")], &w).unwrap();
    b.poll_thorough(&mut *sink.borrow_mut()).unwrap();
    assert_eq!(sink.borrow().got.len(), 2);
    assert_eq!(sink.borrow().got[1], (0, 5, digest(b"again")));
    finish(a, b, &id);
}

/// Sends `records` raw through a fresh a→b pair and polls b; returns what b saw.
fn hostile_records(records: &[(u32, Vec<u8>)]) -> Collect {
    let (a, b, id) = pair(&[("GW_SHM_MAX_MSG", "64m")]);
    a.connect(1, &b.descriptor()).unwrap();
    let link = a.links.lock().unwrap().get(&1).unwrap().clone();
    for (tag, rec) in records {
        assert!(link.push_raw(*tag, rec));
    }
    let mut sink = Collect::default();
    b.poll_thorough(&mut sink).unwrap();
    drop(link);
    finish(a, b, &id);
    sink
}

fn words(w: &[u64]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A rendezvous record announcing 1 TiB (lengths adding up) is refused
/// against GW_SHM_MAX_MSG; it used to `reserve` the whole TiB and abort.
#[test]
fn huge_rendezvous_is_refused() {
    let s = hostile_records(&[(TAG_RNDV, words(&[1, 1 << 40, 1, 4096, 1 << 40]))]);
    assert!(s.got.is_empty());
    assert_eq!(s.failed.len(), 1, "{:?}", s.failed);
    assert!(s.failed[0].1.contains("GW_SHM_MAX_MSG"), "{:?}", s.failed);
    // lengths that overflow u64 when summed
    let s = hostile_records(&[(TAG_RNDV, words(&[1, 0, 2, 1, u64::MAX, 1, 1]))]);
    assert_eq!(s.failed.len(), 1, "{:?}", s.failed);
}

/// A first fragment announcing more than GW_SHM_MAX_MSG fails the link at
/// once instead of reserving memory and waiting for the rest.
#[test]
fn huge_fragmented_message_is_refused() {
    let s = hostile_records(&[(TAG_FIRST, words(&[1 << 50, 7]))]);
    assert_eq!(s.failed.len(), 1, "{:?}", s.failed);
    assert!(s.failed[0].1.contains("GW_SHM_MAX_MSG"), "{:?}", s.failed);
    assert!(s.failed[0].1.contains("rank 0"), "{:?}", s.failed);
}

/// Records that break the protocol: each fails the link with a reason,
/// delivers nothing broken, and never panics.
#[test]
fn protocol_violations_fail_the_link() {
    let cases: Vec<Vec<(u32, Vec<u8>)>> = vec![
        vec![(TAG_MORE, vec![1, 2, 3])],
        vec![(TAG_FIRST, vec![1, 2])],
        vec![(TAG_FIRST, words(&[4])), (TAG_EAGER, b"xx".to_vec())],
        vec![(TAG_FIRST, words(&[4])), (TAG_MORE, vec![0; 9])],
        vec![(TAG_RNDV, vec![0; 23])],
        vec![(TAG_RNDV, words(&[1, 8, 65]))],
        vec![(99, vec![])],
    ];
    for recs in cases {
        let s = hostile_records(&recs);
        assert!(s.got.is_empty(), "{recs:?}: {:?}", s.got);
        assert_eq!(s.failed.len(), 1, "{recs:?}: {:?}", s.failed);
    }
    // and a well-formed fragmented message of two pieces still arrives
    let mut first = words(&[5]);
    first.extend_from_slice(b"ab");
    let s = hostile_records(&[(TAG_FIRST, first), (TAG_MORE, b"cde".to_vec())]);
    assert_eq!(s.got, vec![(0, 5, digest(b"abcde"))]);
}

/// A receiver (hostile) that publishes a ring position ahead of what was
/// written makes the sender's next send fail with a clear error, instead of
/// underflowing its free-space arithmetic and overwriting unread records.
#[test]
fn impossible_tail_fails_the_sender() {
    let (a, b, id) = pair(&[("GW_SHM_RING_SIZE", "4k")]);
    let link = a.connect(1, &b.descriptor()).unwrap();
    struct NoWait;
    impl Waiter for NoWait {
        fn progress(&self) -> bool {
            true
        }
    }
    link.send(&[IoSlice::new(&[1u8; 1500])], &NoWait).unwrap();
    {
        let l = a.links.lock().unwrap().get(&1).unwrap().clone();
        // SAFETY: test only; the ring header's tail word is atomic.
        unsafe { &*(l.ring_tail_for_test()) }.store(1 << 40, Ordering::Release);
    }
    let err = loop {
        if let Err(e) = link.send(&[IoSlice::new(&[1u8; 1500])], &NoWait) {
            break e;
        }
    };
    assert!(err.to_string().contains("rank 1"), "{err}");
    assert!(err.to_string().contains("position"), "{err}");
    a.shutdown();
    b.shutdown();
    drop((a, b));
    assert_eq!(leftovers(&id), Vec::<String>::new());
}

/// A peer that offers a segment it could still truncate (no seals), or a
/// malformed hello, is refused before anything is mapped: a later
/// `ftruncate` by that peer can never make us fault (SIGBUS). A well-formed
/// offer from the same rank afterwards still works.
#[test]
fn unsealed_or_malformed_offers_are_refused() {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    let (a, b, id) = pair(&[]);
    let d = Desc::parse(&b.descriptor()).unwrap();
    let hello = |magic: u64, src: u32, dst: u32| {
        let mut h = [0u8; handoff::HELLO_LEN];
        h[..8].copy_from_slice(&magic.to_le_bytes());
        h[8..12].copy_from_slice(&src.to_le_bytes());
        h[12..].copy_from_slice(&dst.to_le_bytes());
        h
    };
    let unsealed = || {
        let c = std::ffi::CString::new("hostile").unwrap();
        // SAFETY: valid C string.
        let fd = unsafe { libc::memfd_create(c.as_ptr(), libc::MFD_CLOEXEC) };
        assert!(fd >= 0);
        // SAFETY: a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: fd is open.
        assert_eq!(unsafe { libc::ftruncate(fd.as_raw_fd(), 4096 + 4096) }, 0);
        fd
    };
    let mut conns = Vec::new();
    let mut sink = Collect::default();
    for h in [
        hello(PAIR_MAGIC, 0, 1), // unsealed: refused, names rank 0
        hello(0x1234, 0, 1),     // not a hello
        hello(PAIR_MAGIC, 7, 1), // no such rank
        hello(PAIR_MAGIC, 0, 0), // not for us
    ] {
        let fd = unsealed();
        conns.push(handoff::offer(&id, 1, d.nonce, &h, &fd).unwrap());
        for _ in 0..3 {
            b.poll_thorough(&mut sink).unwrap();
        }
    }
    assert!(
        b.incoming.lock().rings.is_empty(),
        "a bad offer was attached"
    );
    assert_eq!(sink.failed.len(), 1, "{:?}", sink.failed);
    assert_eq!(sink.failed[0].0, 0);
    assert!(sink.failed[0].1.contains("sealed"), "{:?}", sink.failed);
    // the real rank 0 connects afterwards and is served
    let link = a.connect(1, &b.descriptor()).unwrap();
    let sink = RefCell::new(sink);
    let w = PollPeer {
        b: &b,
        sink: &sink,
        can_wait: true,
    };
    link.send(&[IoSlice::new(b"real")], &w).unwrap();
    for _ in 0..5000 {
        if !sink.borrow().got.is_empty() {
            break;
        }
        b.poll_thorough(&mut *sink.borrow_mut()).unwrap();
    }
    assert_eq!(sink.borrow().got, vec![(0, 4, digest(b"real"))]);
    drop(conns);
    finish(a, b, &id);
}

/// The fuzz seeds do what their names say: valid scripts deliver and keep
/// the link, hostile ones fail it (or are refused at attach).
#[test]
fn fuzz_seeds_mean_what_they_say() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus/shm_ring_consumer");
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let got = hostile::run(&std::fs::read(&path).unwrap());
        if name.starts_with("valid") {
            assert!(matches!(got, Some((n, false)) if n > 0), "{name}: {got:?}");
        } else {
            assert!(matches!(got, None | Some((_, true))), "{name}: {got:?}");
        }
    }
}

/// Output queued for a receiver that shut down does not stay pending for ever.
#[test]
fn queued_output_to_a_closed_receiver_is_dropped() {
    let (a, b, id) = pair(&[("GW_SHM_RING_SIZE", "4k")]);
    let link = a.connect(1, &b.descriptor()).unwrap();
    let sink = RefCell::new(Collect::default());
    let w = PollPeer {
        b: &b,
        sink: &sink,
        can_wait: false,
    };
    for _ in 0..20 {
        link.send(&[IoSlice::new(&[1u8; 1000])], &w).unwrap();
    }
    assert!(a.has_pending_output());
    b.poll_thorough(&mut *sink.borrow_mut()).unwrap();
    b.shutdown();
    a.poll(&mut Collect::default()).unwrap();
    assert!(!a.has_pending_output());
    finish(a, b, &id);
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// The sending half of `across_processes`, run only by it (ignored: not a
/// test on its own, and never a pass that did nothing).
#[test]
#[ignore = "helper process of across_processes_*"]
fn child_sender_process() {
    let spec = std::env::var("GW_SHM_TEST_CHILD").expect("started by across_processes");
    let (id, desc) = spec.split_once(':').unwrap();
    let cma = std::env::var("GW_SHM_CMA").unwrap_or("auto".into());
    let a = Shm::new(&job(0, id), &params(&[("GW_SHM_CMA", &cma)]))
        .unwrap()
        .unwrap();
    let link = a.connect(1, &unhex(desc)).unwrap();
    struct Spin;
    impl Waiter for Spin {
        fn progress(&self) -> bool {
            std::hint::spin_loop();
            true
        }
    }
    for (i, &len) in SIZES.iter().enumerate() {
        let data = payload(i as u64 + 1, len);
        link.send(&[IoSlice::new(&data)], &Spin).unwrap();
    }
    a.shutdown();
}

/// A real second process sends to us: the pair's CMA probe crosses processes,
/// and messages left in the ring survive the sender's exit.
fn across_processes(cma: &str) {
    let id = format!(
        "t{}x{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    let b = Shm::new(&job(1, &id), &params(&[("GW_SHM_CMA", cma)]))
        .unwrap()
        .unwrap();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "method::shm::tests::child_sender_process",
            "--test-threads=1",
            "--nocapture",
            "--ignored",
        ])
        .env(
            "GW_SHM_TEST_CHILD",
            format!("{id}:{}", hex(&b.descriptor())),
        )
        .env("GW_SHM_CMA", cma)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut sink = Collect::default();
    let t0 = std::time::Instant::now();
    while sink.got.len() < SIZES.len() && sink.failed.is_empty() {
        b.poll_thorough(&mut sink).unwrap();
        if t0.elapsed().as_secs() > 60 {
            let _ = child.kill();
            panic!(
                "timed out with {} of {} messages",
                sink.got.len(),
                SIZES.len()
            );
        }
    }
    assert!(child.wait().unwrap().success());
    assert!(sink.failed.is_empty(), "{:?}", sink.failed);
    let want: Vec<_> = SIZES
        .iter()
        .enumerate()
        .map(|(i, &len)| (0u32, len, digest(&payload(i as u64 + 1, len))))
        .collect();
    assert_eq!(sink.got, want);
    if cma == "auto" && cma::probe_self() {
        // A parent may read its child even under Yama ptrace_scope=1.
        assert_eq!(cma_state(&b), CMA_OK);
    }
    b.shutdown();
    drop(b);
    assert_eq!(leftovers(&id), Vec::<String>::new());
}

#[test]
fn across_processes_cma() {
    across_processes("auto");
}

#[test]
fn across_processes_chunked() {
    across_processes("off");
}

/// Rough numbers for `Method::cost` and the benchmark notes:
/// `cargo test --release -p gridwire-core shm::tests::bench -- --ignored --nocapture`
#[test]
#[ignore]
fn bench() {
    struct Spin;
    impl Waiter for Spin {
        fn progress(&self) -> bool {
            true
        }
    }
    struct Count(usize, usize);
    impl Sink for Count {
        fn deliver(&mut self, _src: u32, msg: &[u8]) {
            self.0 += 1;
            self.1 += msg.len();
        }
        fn link_failed(&mut self, src: u32, reason: String) {
            panic!("{src}: {reason}");
        }
    }
    let src = vec![5u8; 4 << 20];
    let mut dst = vec![0u8; 4 << 20];
    let t0 = std::time::Instant::now();
    for _ in 0..200 {
        dst.copy_from_slice(std::hint::black_box(&src));
        std::hint::black_box(&mut dst);
    }
    eprintln!(
        "memcpy 4 MiB: {:.0} MB/s",
        200.0 * src.len() as f64 / t0.elapsed().as_secs_f64() / 1e6
    );
    for cma in ["auto", "off"] {
        let (a, b, id) = pair(&[("GW_SHM_CMA", cma)]);
        let (a, b) = (Arc::new(a), Arc::new(b));
        let ab = a.connect(1, &b.descriptor()).unwrap();
        let ba = b.connect(0, &a.descriptor()).unwrap();
        // ping-pong, 8 bytes
        const ROUNDS: usize = 200_000;
        let b2 = b.clone();
        let echo = std::thread::spawn(move || {
            let mut c = Count(0, 0);
            while c.0 < ROUNDS {
                let before = c.0;
                b2.poll(&mut c).unwrap();
                for _ in before..c.0 {
                    ba.send(&[IoSlice::new(&[0u8; 8])], &Spin).unwrap();
                }
            }
        });
        let mut c = Count(0, 0);
        let t0 = std::time::Instant::now();
        for i in 0..ROUNDS {
            ab.send(&[IoSlice::new(&[1u8; 8])], &Spin).unwrap();
            while c.0 <= i {
                a.poll(&mut c).unwrap();
            }
        }
        let lat = t0.elapsed().as_nanos() as f64 / ROUNDS as f64 / 2.0;
        echo.join().unwrap();
        // streaming 4 MiB messages
        const N: usize = 200;
        let msg = vec![3u8; 4 << 20];
        let b2 = b.clone();
        let rx = std::thread::spawn(move || {
            let mut c = Count(0, 0);
            while c.0 < N {
                b2.poll(&mut c).unwrap();
            }
        });
        let t0 = std::time::Instant::now();
        for _ in 0..N {
            ab.send(&[IoSlice::new(&msg)], &Spin).unwrap();
        }
        rx.join().unwrap();
        let bw = (N * msg.len()) as f64 / t0.elapsed().as_secs_f64() / 1e6;
        eprintln!(
            "shm cma={cma}: 8-byte one-way latency {lat:.0} ns, 4 MiB streaming {bw:.0} MB/s"
        );
        drop(ab);
        let (a, b) = (Arc::into_inner(a).unwrap(), Arc::into_inner(b).unwrap());
        finish(a, b, &id);
    }
}

#[test]
#[ignore]
fn bench_cma_single_thread() {
    struct N(usize);
    impl Sink for N {
        fn deliver(&mut self, _: u32, _: &[u8]) {
            self.0 += 1;
        }
        fn link_failed(&mut self, _: u32, r: String) {
            panic!("{r}");
        }
    }
    for size in [64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20] {
        let mut line = format!("{size:>9}");
        for cma in ["auto", "off"] {
            let (a, b, id) = pair(&[("GW_SHM_CMA", cma)]);
            let link = a.connect(1, &b.descriptor()).unwrap();
            let sink = RefCell::new(N(0));
            let w = PollPeer {
                b: &b,
                sink: &sink,
                can_wait: true,
            };
            let msg = vec![3u8; size];
            link.send(&[IoSlice::new(&msg)], &w).unwrap();
            let n = (1usize << 30) / size;
            let t0 = std::time::Instant::now();
            for _ in 0..n {
                link.send(&[IoSlice::new(&msg)], &w).unwrap();
            }
            while sink.borrow().0 < n + 1 {
                b.poll_thorough(&mut *sink.borrow_mut()).unwrap();
            }
            line += &format!(
                "  cma={cma}: {:6.0} MB/s",
                n as f64 * size as f64 / t0.elapsed().as_secs_f64() / 1e6
            );
            finish(a, b, &id);
        }
        eprintln!("{line}");
    }
}

/// The receiving half of `dead_receiver_is_detected`, run only by it
/// (ignored: not a test on its own).
#[test]
#[ignore = "helper process of dead_receiver_is_detected"]
fn child_receiver_process() {
    let id = std::env::var("GW_SHM_TEST_RX").expect("started by dead_receiver_is_detected");
    let b = Shm::new(&job(1, &id), &params(&[])).unwrap().unwrap();
    println!("DESC {}", hex(&b.descriptor()));
    // Consume (so the sender's pair is attached when we are killed), for a bounded time.
    let mut sink = Collect::default();
    let t0 = std::time::Instant::now();
    while t0.elapsed().as_secs() < 60 {
        b.poll_thorough(&mut sink).unwrap();
        sink.got.clear();
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
}

/// A receiver killed without shutdown: a sender blocked on its full ring gets
/// an error instead of spinning forever.
#[test]
fn dead_receiver_is_detected() {
    dead_receiver(None, false);
}

/// The same after pid reuse: the receiver's descriptor names a pid that is
/// alive (ours, standing for whatever process got the dead one's pid). The
/// old `kill(pid, 0)` probe found it alive and waited for ever.
#[test]
fn dead_receiver_is_detected_after_pid_reuse() {
    dead_receiver(None, true);
}

/// The same with the receiver in another pid namespace (`unshare --pid`,
/// root only), where its pid means nothing to us: the old probe was skipped
/// and the sender spun for ever.
#[test]
fn dead_receiver_is_detected_in_another_pid_namespace() {
    if !gridwire_testkit::is_root() {
        return gridwire_testkit::skip("unshare --pid needs root");
    }
    if which_unshare().is_none() {
        return gridwire_testkit::skip("unshare (util-linux) not installed");
    }
    dead_receiver(Some(&["unshare", "--pid", "--kill-child"]), false);
}

fn which_unshare() -> Option<std::path::PathBuf> {
    ["/usr/bin/unshare", "/bin/unshare"]
        .iter()
        .map(std::path::PathBuf::from)
        .find(|p| p.exists())
}

fn dead_receiver(wrapper: Option<&[&str]>, claim_live_pid: bool) {
    use std::io::BufRead;
    let id = format!(
        "t{}x{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    let exe = std::env::current_exe().unwrap();
    let exe = exe.to_str().unwrap();
    let mut argv: Vec<&str> = wrapper.unwrap_or(&[]).to_vec();
    argv.extend_from_slice(&[
        exe,
        "--exact",
        "method::shm::tests::child_receiver_process",
        "--test-threads=1",
        "--nocapture",
        "--ignored",
    ]);
    let mut child = std::process::Command::new(argv[0])
        .args(&argv[1..])
        .env("GW_SHM_TEST_RX", &id)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    // The harness prints "test <name> ... " on the same line before ours.
    while !line.contains("DESC ") {
        line.clear();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "child ended without a descriptor"
        );
    }
    let mut desc = unhex(line.split("DESC ").nth(1).unwrap().trim());
    if claim_live_pid {
        desc[2..6].copy_from_slice(&std::process::id().to_le_bytes());
    }
    let a = Shm::new(&job(0, &id), &params(&[("GW_SHM_RING_SIZE", "4k")]))
        .unwrap()
        .unwrap();
    let link = a.connect(1, &desc).unwrap();
    struct Spin;
    impl Waiter for Spin {
        fn progress(&self) -> bool {
            true
        }
    }
    // Let the receiver attach and consume a little before it dies.
    link.send(&[IoSlice::new(b"hello")], &Spin).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    child.kill().unwrap();
    child.wait().unwrap(); // reaped, as a launcher does
    let t0 = std::time::Instant::now();
    let msg = [9u8; 1000];
    let err = loop {
        if let Err(e) = link.send(&[IoSlice::new(&msg)], &Spin) {
            break e;
        }
        assert!(
            t0.elapsed().as_secs() < 20,
            "send to a dead receiver never failed"
        );
    };
    assert!(err.to_string().contains("exited"), "{err}");
    a.shutdown();
    drop(a);
    // The killed receiver left nothing behind, without any sweep.
    assert_eq!(leftovers(&id), Vec::<String>::new());
}

/// A waiter that may not wait (as inside a handler): a send queues what
/// does not fit.
struct MayNotWait;

impl Waiter for MayNotWait {
    fn progress(&self) -> bool {
        false
    }
}

/// `a` -> `b` connected, `first` sent and delivered (the ring attached).
fn attached_pair(first: &[u8]) -> (Shm, Shm, String, Arc<dyn Link>, RefCell<Collect>) {
    let (a, b, id) = pair(&[]);
    let link = a.connect(1, &b.descriptor()).unwrap();
    let sink = RefCell::new(Collect::default());
    link.send(
        &[IoSlice::new(first)],
        &PollPeer {
            b: &b,
            sink: &sink,
            can_wait: true,
        },
    )
    .unwrap();
    for _ in 0..100 {
        b.poll_thorough(&mut *sink.borrow_mut()).unwrap();
    }
    assert_eq!(sink.borrow().got.len(), 1);
    (a, b, id, link, sink)
}

/// Sleeps as a context does (`before_block`, poll on `wait_fd` for up to
/// `ms`, `after_block`); returns how long it slept.
fn sleep_like_a_context(b: &Shm, ms: i32) -> std::time::Duration {
    let t0 = std::time::Instant::now();
    b.before_block();
    let mut fd = libc::pollfd {
        fd: b.wait_fd().unwrap(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one live pollfd.
    unsafe { libc::poll(&mut fd, 1, ms) };
    b.after_block();
    t0.elapsed()
}

/// A receiver asleep on its wait descriptor is woken by a sender's record
/// at once (the doorbell), not at the end of its sleep; one that is awake
/// is not rung (no byte, no system call); a record that came in before the
/// sleep makes the sleep return at once; a sender that goes away does not
/// leave the descriptor readable for ever.
#[test]
fn doorbell_wakes_a_sleeping_receiver() {
    let (a, b, id, link, sink) = attached_pair(b"hello");
    let w = PollPeer {
        b: &b,
        sink: &sink,
        can_wait: true,
    };
    // The listener was readable once (the connect); a sleep now drains that.
    sleep_like_a_context(&b, 0);

    // Awake: no bell.
    link.send(&[IoSlice::new(b"awake")], &w).unwrap();
    assert_eq!(
        b.incoming.lock().rings[0]
            .rx()
            .sleeping
            .load(Ordering::Relaxed),
        0
    );
    // A record waiting before the sleep: the sleep returns at once.
    let slept = sleep_like_a_context(&b, 5000);
    assert!(
        slept.as_millis() < 2000,
        "slept {slept:?} over a waiting record"
    );
    b.poll_thorough(&mut *sink.borrow_mut()).unwrap();
    assert_eq!(sink.borrow().got.len(), 2);

    // Asleep: a sender thread's record 100 ms later rings it.
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(std::time::Duration::from_millis(100));
            link.send(&[IoSlice::new(b"ring")], &MayNotWait).unwrap();
        });
        let slept = sleep_like_a_context(&b, 10_000);
        assert!(
            slept.as_millis() < 5000,
            "a sleeping receiver woke only after {slept:?}"
        );
    });
    for _ in 0..100 {
        b.poll_thorough(&mut *sink.borrow_mut()).unwrap();
    }
    assert_eq!(sink.borrow().got.len(), 3);
    // The bell was drained: the next sleep lasts its time.
    let slept = sleep_like_a_context(&b, 300);
    assert!(
        slept.as_millis() >= 250,
        "woke after {slept:?} with nothing to do"
    );

    // The sender goes: its connection reads end-of-file once, then leaves the set.
    drop(link);
    a.shutdown();
    sleep_like_a_context(&b, 300);
    let slept = sleep_like_a_context(&b, 300);
    assert!(
        slept.as_millis() >= 250,
        "a gone sender keeps waking it ({slept:?})"
    );
    b.shutdown();
    drop((a, b));
    assert_eq!(leftovers(&id), Vec::<String>::new());
}

/// A departed peer's rings go at once: the sender's link and queued output,
/// the receiver's ring and its connection; also when the notice comes
/// while the receiver polls.
#[test]
fn release_peer_drops_both_rings() {
    let (a, b, id, link, sink) = attached_pair(b"first");
    assert_eq!(b.incoming.lock().rings.len(), 1);
    // Output the receiver never takes: queued, keeping the context polling.
    let big = vec![7u8; 4 << 20];
    link.send(&[IoSlice::new(&big)], &MayNotWait).unwrap();
    assert!(a.has_pending_output());
    a.release_peer(1);
    assert!(!a.has_pending_output(), "queued output to a departed peer");
    assert!(a.links.lock().unwrap().is_empty());
    drop(link);
    // The receiver hears of it while it polls (the ring is locked): the
    // ring goes at the end of that poll.
    {
        let _polling = b.incoming.lock();
        b.release_peer(0);
    }
    assert_eq!(b.incoming.lock().rings.len(), 1, "dropped under a poll");
    b.poll(&mut *sink.borrow_mut()).unwrap();
    assert_eq!(
        b.incoming.lock().rings.len(),
        0,
        "kept a departed peer's ring"
    );
    finish(a, b, &id);

    // A peer's last messages, sent before it left, are still delivered:
    // its ring goes once drained.
    let (a, b, id, link, sink) = attached_pair(b"first");
    link.send(&[IoSlice::new(b"last words")], &MayNotWait)
        .unwrap();
    b.release_peer(0);
    assert_eq!(b.incoming.lock().rings.len(), 1, "dropped unread messages");
    b.poll(&mut *sink.borrow_mut()).unwrap();
    assert_eq!(sink.borrow().got.len(), 2, "the last message was lost");
    assert_eq!(b.incoming.lock().rings.len(), 0, "kept a drained ring");
    drop(link);
    finish(a, b, &id);
}

mod place;
