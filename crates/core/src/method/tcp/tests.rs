use super::*;
use crate::method::JobInfo;
use crate::params::Params;
use std::io::{Read, Write};

struct Collect(Vec<(u32, Vec<u8>)>, Vec<u32>);
impl Sink for Collect {
    fn deliver(&mut self, src: u32, msg: &[u8]) {
        self.0.push((src, msg.to_vec()));
    }
    fn link_failed(&mut self, src: u32, _: String) {
        self.1.push(src);
    }
}

fn method(id: u32, secret: [u8; 32]) -> Arc<dyn Method> {
    let job = JobInfo {
        ctx_id: id,
        size: 4,
        job_id: "tcptest".into(),
        host_id: "h".into(),
        secret,
        verbose: 0,
    };
    let params = Params::from_lookup(|_| None).unwrap();
    (INFO.init)(&MethodEnv {
        job: &job,
        params: &params,
    })
    .unwrap()
    .unwrap()
}

fn poll_for(m: &Arc<dyn Method>, sink: &mut Collect, ms: u64) {
    let end = std::time::Instant::now() + Duration::from_millis(ms);
    while std::time::Instant::now() < end {
        m.poll(sink).unwrap();
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The address a process of this network namespace connects to.
pub(super) fn loopback_of(m: &Arc<dyn Method>) -> SocketAddr {
    let p = netaddr::Published::parse(&m.descriptor()).unwrap();
    p.candidates(&netaddr::netns_key(), &[])[0]
}

struct NoWait;
impl Waiter for NoWait {
    fn progress(&self) -> bool {
        false
    }
}

#[test]
fn garbage_and_forged_handshakes_are_refused_and_never_delivered() {
    let server = method(0, [1; 32]);
    let addr = loopback_of(&server);
    let mut sink = Collect(Vec::new(), Vec::new());

    // 1. Garbage bytes.
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(&[0xde; 200]).unwrap();
    // 2. A well-formed hello, then a made-up proof and a frame behind it.
    let mut t = TcpStream::connect(addr).unwrap();
    let mut hello = Vec::from(&MAGIC[..]);
    hello.extend_from_slice(&1u32.to_le_bytes());
    hello.extend_from_slice(&0u32.to_le_bytes());
    hello.extend_from_slice(&[9; NONCE_LEN]);
    t.write_all(&hello).unwrap();
    poll_for(&server, &mut sink, 100);
    let mut challenge = [0u8; CHALLENGE_LEN];
    t.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    t.read_exact(&mut challenge).unwrap();
    t.write_all(&[7; PROOF_LEN]).unwrap();
    t.write_all(&8u32.to_le_bytes()).unwrap();
    t.write_all(b"payload!").unwrap();
    poll_for(&server, &mut sink, 200);

    assert!(sink.0.is_empty(), "nothing may be delivered: {:?}", sink.0);
    assert!(
        sink.1.is_empty(),
        "unauthenticated connections must not fail real links"
    );
    assert_eq!(server.counters()[0], ("refused_connections", 2));
    server.shutdown();
}

#[test]
fn peers_with_different_secrets_never_exchange_payload() {
    let a = method(0, [1; 32]);
    let b = method(1, [2; 32]);
    let link = b.connect(0, &a.descriptor()).unwrap();
    link.send(&[IoSlice::new(b"secret data")], &NoWait).unwrap();
    let (mut sa, mut sb) = (
        Collect(Vec::new(), Vec::new()),
        Collect(Vec::new(), Vec::new()),
    );
    for _ in 0..100 {
        a.poll(&mut sa).unwrap();
        b.poll(&mut sb).unwrap();
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(sa.0.is_empty() && sb.0.is_empty());
    assert_eq!(sb.1, vec![0], "the connector learns its link failed");
    assert!(link.send(&[IoSlice::new(b"more")], &NoWait).is_err());
    a.shutdown();
    b.shutdown();
}

#[test]
fn simultaneous_connects_end_on_one_connection_in_order() {
    // Both ends connect before either polls (as at a job's first
    // barrier), send before, during and after the tie is settled.
    let a = method(0, [5; 32]);
    let b = method(1, [5; 32]);
    let ab = a.connect(1, &b.descriptor()).unwrap();
    let ba = b.connect(0, &a.descriptor()).unwrap();
    let (mut sa, mut sb) = (
        Collect(Vec::new(), Vec::new()),
        Collect(Vec::new(), Vec::new()),
    );
    let mut next = 0u32;
    for round in 0..400 {
        if next < 300 && round % 2 == 0 {
            for _ in 0..3 {
                let m = next.to_le_bytes();
                ab.send(&[IoSlice::new(&m)], &NoWait).unwrap();
                ba.send(&[IoSlice::new(&m)], &NoWait).unwrap();
                next += 1;
            }
        }
        a.poll(&mut sa).unwrap();
        b.poll(&mut sb).unwrap();
        if sa.0.len() == 300 && sb.0.len() == 300 {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    for (name, got) in [("a", &sa.0), ("b", &sb.0)] {
        let seq: Vec<u32> = got
            .iter()
            .map(|(_, m)| u32::from_le_bytes(m[..4].try_into().unwrap()))
            .collect();
        assert_eq!(
            seq,
            (0..300).collect::<Vec<_>>(),
            "{name} got every message once, in order"
        );
    }
    assert!(sa.1.is_empty() && sb.1.is_empty(), "no link failed");
    let merged = |m: &Arc<dyn Method>| {
        m.counters()
            .iter()
            .find(|c| c.0 == "merged_connections")
            .unwrap()
            .1
    };
    // The higher context's connection gave way; the lower's carries both directions.
    assert_eq!((merged(&a), merged(&b)), (0, 1));
    a.shutdown();
    b.shutdown();
}

#[test]
fn a_forged_hello_cannot_stall_a_connection_in_progress() {
    // Context 1 connects to 0 and queues payload; before 0 answers, an
    // impostor claiming to be context 0 says hello to 1 (as if both ends
    // were connecting at once). Nothing may be decided on that hello: 1's
    // connection carries everything, in order.
    let a = method(0, [6; 32]);
    let b = method(1, [6; 32]);
    let ba = b.connect(0, &a.descriptor()).unwrap();
    for i in 0..10u32 {
        ba.send(&[IoSlice::new(&i.to_le_bytes())], &NoWait).unwrap();
    }
    let b_addr = loopback_of(&b);
    let mut imp = TcpStream::connect(b_addr).unwrap();
    let mut hello = Vec::from(&MAGIC[..]);
    hello.extend_from_slice(&0u32.to_le_bytes());
    hello.extend_from_slice(&1u32.to_le_bytes());
    hello.extend_from_slice(&[9; NONCE_LEN]);
    imp.write_all(&hello).unwrap();
    let mut sb = Collect(Vec::new(), Vec::new());
    poll_for(&b, &mut sb, 100);
    let mut challenge = [0u8; CHALLENGE_LEN];
    imp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    imp.read_exact(&mut challenge).unwrap();
    imp.write_all(&[7; PROOF_LEN]).unwrap();
    let mut sa = Collect(Vec::new(), Vec::new());
    for round in 0..500 {
        if round == 50 {
            for i in 10..20u32 {
                ba.send(&[IoSlice::new(&i.to_le_bytes())], &NoWait).unwrap();
            }
        }
        a.poll(&mut sa).unwrap();
        b.poll(&mut sb).unwrap();
        if sa.0.len() == 20 {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let seq: Vec<u32> =
        sa.0.iter()
            .map(|(_, m)| u32::from_le_bytes(m[..4].try_into().unwrap()))
            .collect();
    assert_eq!(
        seq,
        (0..20).collect::<Vec<_>>(),
        "everything arrives once, in order"
    );
    assert!(sa.0.iter().all(|(src, _)| *src == 1));
    assert!(
        sb.0.is_empty() && sb.1.is_empty(),
        "the impostor delivered nothing and failed no link"
    );
    assert_eq!(counter(&*b, "refused_connections"), 1);
    assert_eq!(counter(&*b, "merged_connections"), 0);
    a.shutdown();
    b.shutdown();
}

#[test]
fn same_secret_delivers_in_order_both_ways() {
    let a = method(0, [3; 32]);
    let b = method(1, [3; 32]);
    let ab = b.connect(0, &a.descriptor()).unwrap();
    for i in 0..50u32 {
        ab.send(
            &[IoSlice::new(&i.to_le_bytes()), IoSlice::new(&[0u8; 3000])],
            &NoWait,
        )
        .unwrap();
    }
    let (mut sa, mut sb) = (
        Collect(Vec::new(), Vec::new()),
        Collect(Vec::new(), Vec::new()),
    );
    for _ in 0..500 {
        a.poll(&mut sa).unwrap();
        b.poll(&mut sb).unwrap();
        if sa.0.len() == 50 {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(sa.0.len(), 50);
    for (i, (src, m)) in sa.0.iter().enumerate() {
        assert_eq!(*src, 1);
        assert_eq!(&m[..4], &(i as u32).to_le_bytes());
        assert_eq!(m.len(), 3004);
    }
    // The accepted connection is reused for the reply direction.
    let ba = a.connect(1, &b.descriptor()).unwrap();
    ba.send(&[IoSlice::new(b"back")], &NoWait).unwrap();
    for _ in 0..500 {
        b.poll(&mut sb).unwrap();
        if !sb.0.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(sb.0, vec![(0, b"back".to_vec())]);
    a.shutdown();
    b.shutdown();
}

/// A sink that keeps failure reasons too.
#[derive(Default)]
pub(super) struct Record {
    pub(super) got: Vec<(u32, Vec<u8>)>,
    pub(super) failed: Vec<(u32, String)>,
}
impl Sink for Record {
    fn deliver(&mut self, src: u32, msg: &[u8]) {
        self.got.push((src, msg.to_vec()));
    }
    fn link_failed(&mut self, src: u32, reason: String) {
        self.failed.push((src, reason));
    }
}

/// A method with parameters from `vars` (`GW_` names), as its concrete type.
pub(super) fn tcp_method(id: u32, secret: [u8; 32], vars: &[(&str, &str)]) -> Arc<TcpMethod> {
    let job = JobInfo {
        ctx_id: id,
        size: 4,
        job_id: "tcptest".into(),
        host_id: "h".into(),
        secret,
        verbose: 0,
    };
    let vars: Vec<(String, String)> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let params = Params::from_lookup(|k| {
        vars.iter()
            .find(|(name, _)| name == k)
            .map(|(_, v)| v.clone())
    })
    .unwrap();
    Arc::new(
        TcpMethod::new(&MethodEnv {
            job: &job,
            params: &params,
        })
        .unwrap(),
    )
}

pub(super) fn poll_record(m: &TcpMethod, sink: &mut Record, ms: u64) {
    let end = std::time::Instant::now() + Duration::from_millis(ms);
    while std::time::Instant::now() < end {
        m.poll_thorough(sink).unwrap();
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A raw socket that authenticated to `server` as context `me` (a peer
/// that knows the secret and then sends whatever the test wants).
pub(super) fn authenticated_raw(
    server: &TcpMethod,
    me: u32,
    secret: [u8; 32],
    sink: &mut Record,
) -> TcpStream {
    let mut s = TcpStream::connect(server.local).unwrap();
    let my_nonce = auth::nonce();
    let mut hello = Vec::from(&MAGIC[..]);
    hello.extend_from_slice(&me.to_le_bytes());
    hello.extend_from_slice(&server.me.to_le_bytes());
    hello.extend_from_slice(&my_nonce);
    s.write_all(&hello).unwrap();
    poll_record(server, sink, 50);
    let mut challenge = [0u8; CHALLENGE_LEN];
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.read_exact(&mut challenge).unwrap();
    let their_nonce: [u8; NONCE_LEN] = challenge[..NONCE_LEN].try_into().unwrap();
    let proof = auth::proof(
        &secret,
        Role::Connector,
        &my_nonce,
        &their_nonce,
        me,
        server.me,
    );
    s.write_all(&proof).unwrap();
    poll_record(server, sink, 20);
    s
}

/// Bytes reserved by every connection's receive buffer.
fn rx_bytes(m: &TcpMethod) -> usize {
    m.conns
        .lock()
        .unwrap()
        .values()
        .map(|c| c.inp.lock().rx.buf.len())
        .sum()
}

#[test]
fn a_frame_header_alone_commits_no_memory_for_its_announced_length() {
    let server = tcp_method(0, [4; 32], &[]);
    let mut sink = Record::default();
    let mut s = authenticated_raw(&server, 1, [4; 32], &mut sink);
    // One whole frame first (the link works), then a header announcing
    // 1.5 GiB (below the 2 GiB default GW_TCP_MAX_MSG) and 10 bytes of it.
    s.write_all(&3u32.to_le_bytes()).unwrap();
    s.write_all(b"abc").unwrap();
    s.write_all(&(3u32 << 29).to_le_bytes()).unwrap();
    s.write_all(&[7; 10]).unwrap();
    poll_record(&server, &mut sink, 100);
    assert_eq!(sink.got, vec![(1, b"abc".to_vec())]);
    assert!(sink.failed.is_empty(), "{:?}", sink.failed);
    let held = rx_bytes(&server);
    assert!(
        held <= 2 * framing::MIN_READ,
        "receive buffers hold {held} bytes for 14 bytes received"
    );
    // More payload grows the buffer only in proportion to what arrived.
    // Written by another thread: the kernel's buffers do not hold 4 MiB.
    let writer = std::thread::spawn(move || {
        let chunk = vec![9u8; 1 << 20];
        for _ in 0..4 {
            s.write_all(&chunk).unwrap();
        }
        s
    });
    let mut max_held = 0;
    while !writer.is_finished() {
        server.poll_thorough(&mut sink).unwrap();
        max_held = max_held.max(rx_bytes(&server));
    }
    let _s = writer.join().unwrap();
    poll_record(&server, &mut sink, 50);
    let held = rx_bytes(&server).max(max_held);
    assert!(
        held <= 2 * (4 << 20) + 2 * framing::MIN_READ,
        "receive buffers hold {held} bytes for 4 MiB received"
    );
    server.shutdown();
}

#[test]
fn an_authenticated_peer_sending_garbage_fails_only_its_link_naming_its_rank() {
    let server = tcp_method(0, [4; 32], &[("GW_TCP_MAX_MSG", "1m")]);
    let mut sink = Record::default();
    let mut good = authenticated_raw(&server, 2, [4; 32], &mut sink);
    let mut bad = authenticated_raw(&server, 1, [4; 32], &mut sink);
    bad.write_all(&[0xff; 64]).unwrap();
    good.write_all(&2u32.to_le_bytes()).unwrap();
    good.write_all(b"ok").unwrap();
    poll_record(&server, &mut sink, 100);
    assert_eq!(sink.got, vec![(2, b"ok".to_vec())]);
    assert_eq!(sink.failed.len(), 1, "{:?}", sink.failed);
    let (rank, why) = &sink.failed[0];
    assert_eq!(*rank, 1);
    assert!(
        why.contains("rank 1") && why.contains("GW_TCP_MAX_MSG"),
        "{why}"
    );
    server.shutdown();
}

fn counter(m: &dyn Method, name: &str) -> u64 {
    m.counters()
        .iter()
        .find(|c| c.0 == name)
        .unwrap_or_else(|| panic!("no counter {name}"))
        .1
}

#[test]
fn unauthenticated_connections_are_bounded_and_time_out() {
    let secret = [8; 32];
    let server = tcp_method(
        0,
        secret,
        &[
            ("GW_TCP_MAX_UNAUTHENTICATED", "4"),
            ("GW_TCP_HANDSHAKE_TIMEOUT", "1"),
        ],
    );
    let mut sink = Record::default();
    let started = std::time::Instant::now();
    // A slow-loris client: a byte of hello every 50 ms, never complete in time.
    let mut slow = TcpStream::connect(server.local).unwrap();
    poll_record(&server, &mut sink, 20);
    let mut silent = Vec::new();
    for _ in 0..10 {
        silent.push(TcpStream::connect(server.local).unwrap());
    }
    poll_record(&server, &mut sink, 100);
    assert!(server.conns.lock().unwrap().len() <= 4);
    assert_eq!(counter(&*server, "unauthenticated_dropped"), 7);
    let mut sent = 0;
    while started.elapsed() < Duration::from_millis(1500) {
        if sent < HELLO_LEN - 1 && slow.write_all(&MAGIC[..1]).is_ok() {
            sent += 1;
        }
        poll_record(&server, &mut sink, 50);
    }
    assert_eq!(counter(&*server, "handshake_timeouts"), 4);
    assert!(server.conns.lock().unwrap().is_empty());
    // The slots are free again: a real peer gets through.
    let peer = tcp_method(1, secret, &[]);
    let link = peer.connect(0, &server.descriptor()).unwrap();
    link.send(&[IoSlice::new(b"hi")], &NoWait).unwrap();
    let mut peer_sink = Record::default();
    for _ in 0..200 {
        server.poll_thorough(&mut sink).unwrap();
        peer.poll_thorough(&mut peer_sink).unwrap();
        if !sink.got.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(sink.got, vec![(1, b"hi".to_vec())]);
    assert!(sink.failed.is_empty() && peer_sink.failed.is_empty());
    server.shutdown();
    peer.shutdown();
}

#[test]
fn a_peer_that_accepts_but_never_authenticates_fails_the_link_in_time() {
    let mute = TcpListener::bind("127.0.0.1:0").unwrap();
    let me = tcp_method(0, [9; 32], &[("GW_TCP_HANDSHAKE_TIMEOUT", "1")]);
    let link = me
        .connect(2, mute.local_addr().unwrap().to_string().as_bytes())
        .unwrap();
    link.send(&[IoSlice::new(b"queued")], &NoWait).unwrap();
    let mut sink = Record::default();
    poll_record(&me, &mut sink, 1300);
    assert_eq!(sink.failed.len(), 1, "{:?}", sink.failed);
    assert_eq!(sink.failed[0].0, 2);
    assert!(
        sink.failed[0].1.contains("rank 2") && sink.failed[0].1.contains("did not authenticate"),
        "{}",
        sink.failed[0].1
    );
    assert!(link.send(&[IoSlice::new(b"more")], &NoWait).is_err());
    assert!(!me.has_pending_output());
    me.shutdown();
}

#[test]
fn accept_at_the_open_file_limit_backs_off_and_logs_once_per_period() {
    let server = tcp_method(0, [3; 32], &[]);
    let mut sink = Record::default();
    // The process is out of descriptors: every accept fails with EMFILE,
    // and a peer waits in the backlog (the listener stays readable).
    server.accept_fault.store(libc::EMFILE, Ordering::Relaxed);
    let _waiting = TcpStream::connect(server.local).unwrap();
    let started = std::time::Instant::now();
    let mut polls = 0;
    while started.elapsed() < Duration::from_millis(350) {
        server.poll_thorough(&mut sink).unwrap();
        polls += 1;
        std::thread::sleep(Duration::from_micros(200));
    }
    let failures = counter(&*server, "accept_failures");
    assert!(polls > 100, "{polls} polls");
    // One try per pause (100 ms) rather than one per poll.
    assert!(
        (1..=5).contains(&failures),
        "{failures} failed accepts in {polls} polls"
    );
    assert_eq!(server.accept_notice.printed(), 1, "one message per second");
    // Descriptors are free again: the waiting peer is accepted.
    server.accept_fault.store(0, Ordering::Relaxed);
    poll_record(&server, &mut sink, 200);
    assert_eq!(server.conns.lock().unwrap().len(), 1);
    assert_eq!(counter(&*server, "accept_failures"), failures);
    server.shutdown();
}

#[test]
fn output_held_for_a_lost_simultaneous_connect_is_bounded() {
    let secret = [11; 32];
    let b = tcp_method(1, secret, &[("GW_TCP_MAX_QUEUED", "64k")]);
    let mut sink = Record::default();
    // Context 0 is played by hand: it accepts 1's connection and answers
    // `USE_MINE` (its own connection to 1 is the pair's), then never makes
    // that connection, so 1 holds its output.
    let fake = TcpListener::bind("127.0.0.1:0").unwrap();
    let link = b
        .connect(0, fake.local_addr().unwrap().to_string().as_bytes())
        .unwrap();
    let (mut s, _) = fake.accept().unwrap();
    // Short reads between polls: the hello leaves once 1 sees its connect complete.
    s.set_read_timeout(Some(Duration::from_millis(10))).unwrap();
    let mut hello = [0u8; HELLO_LEN];
    let started = std::time::Instant::now();
    while s.read_exact(&mut hello).is_err() {
        assert!(started.elapsed() < Duration::from_secs(5));
        b.poll_thorough(&mut sink).unwrap();
    }
    let their_nonce: [u8; NONCE_LEN] = hello[12..].try_into().unwrap();
    let mine = auth::nonce();
    let mut challenge = Vec::from(&mine[..]);
    challenge.extend_from_slice(&auth::proof(
        &secret,
        Role::Acceptor,
        &mine,
        &their_nonce,
        0,
        1,
    ));
    challenge.push(USE_MINE);
    s.write_all(&challenge).unwrap();
    poll_record(&b, &mut sink, 50);
    assert!(b.by_peer.lock().unwrap()[&0].out.lock().hold);
    let msg = [5u8; 1000];
    let mut taken = 0;
    let err = loop {
        match link.send(&[IoSlice::new(&msg)], &NoWait) {
            Ok(()) => taken += 1,
            Err(e) => break e,
        }
        assert!(taken < 10_000, "held output is unbounded");
    };
    let held = b.by_peer.lock().unwrap()[&0].out.lock().held.len();
    assert!(held <= 64 << 10, "{held} bytes held");
    assert_eq!(taken, (64 << 10) / 1004);
    let why = err.to_string();
    assert!(
        why.contains("rank 0") && why.contains("GW_TCP_MAX_QUEUED"),
        "{why}"
    );
    assert!(sink.failed.is_empty(), "{:?}", sink.failed);
    b.shutdown();
}

/// An address whose connects hang: a listener with a backlog of 0 whose
/// accept queue is full (the kernel drops further SYNs, the connector
/// retransmits). Returns the listener and the connections that fill it.
fn black_hole() -> (OwnedFd, SocketAddr, Vec<TcpStream>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let fd = OwnedFd::from(l);
    // SAFETY: listen on a socket we own.
    assert_eq!(unsafe { libc::listen(fd.as_raw_fd(), 0) }, 0);
    let mut fill = Vec::new();
    for _ in 0..8 {
        match TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
            Ok(s) => fill.push(s),
            Err(_) => return (fd, addr, fill),
        }
    }
    panic!("the accept queue of a backlog-0 listener never filled");
}

#[test]
fn a_connect_to_a_black_hole_does_not_stall_other_links() {
    let (_hole, hole_addr, _fill) = black_hole();
    let secret = [12; 32];
    let a = tcp_method(0, secret, &[("GW_TCP_CONNECT_TIMEOUT", "1")]);
    let b = tcp_method(1, secret, &[]);
    let (mut sa, mut sb) = (Record::default(), Record::default());
    let started = std::time::Instant::now();
    let to_hole = a.connect(2, hole_addr.to_string().as_bytes()).unwrap();
    to_hole.send(&[IoSlice::new(b"waits")], &NoWait).unwrap();
    let connect_took = started.elapsed();
    assert!(
        connect_took < Duration::from_millis(200),
        "connect blocked for {connect_took:?}"
    );
    assert!(a.has_pending_output(), "the connect needs polling");
    // Meanwhile the link between 0 and 1 works both ways.
    let ab = a.connect(1, &b.descriptor()).unwrap();
    for i in 0..20u32 {
        ab.send(&[IoSlice::new(&i.to_le_bytes())], &NoWait).unwrap();
    }
    while sb.got.len() < 20 && started.elapsed() < Duration::from_millis(900) {
        a.poll_thorough(&mut sa).unwrap();
        b.poll_thorough(&mut sb).unwrap();
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(sb.got.len(), 20, "0 -> 1 flowed while the connect hung");
    assert!(sa.failed.is_empty(), "not timed out yet: {:?}", sa.failed);
    // The hung connect fails its own link at GW_TCP_CONNECT_TIMEOUT.
    while sa.failed.is_empty() && started.elapsed() < Duration::from_secs(3) {
        a.poll_thorough(&mut sa).unwrap();
        b.poll_thorough(&mut sb).unwrap();
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(sa.failed.len(), 1, "{:?}", sa.failed);
    let (rank, why) = &sa.failed[0];
    assert_eq!(*rank, 2);
    assert!(why.contains("rank 2") && why.contains("timed out"), "{why}");
    assert!(to_hole.send(&[IoSlice::new(b"x")], &NoWait).is_err());
    assert!(!a.has_pending_output());
    assert!(sb.failed.is_empty());
    a.shutdown();
    b.shutdown();
}

#[test]
fn a_hello_from_a_rank_outside_the_job_is_refused() {
    let secret = [13; 32];
    let server = tcp_method(0, secret, &[]);
    let mut sink = Record::default();
    // Knows the secret, claims rank 4 of a 4-rank job.
    let mut s = TcpStream::connect(server.local).unwrap();
    let mut hello = Vec::from(&MAGIC[..]);
    hello.extend_from_slice(&4u32.to_le_bytes());
    hello.extend_from_slice(&0u32.to_le_bytes());
    hello.extend_from_slice(&auth::nonce());
    s.write_all(&hello).unwrap();
    poll_record(&server, &mut sink, 50);
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut b = [0u8; 1];
    assert_eq!(s.read(&mut b).unwrap(), 0, "closed without a challenge");
    assert_eq!(counter(&*server, "refused_connections"), 1);
    assert!(sink.got.is_empty() && sink.failed.is_empty());
    server.shutdown();
}

#[test]
fn a_peer_closing_mid_frame_fails_its_link_naming_its_rank() {
    let secret = [14; 32];
    let server = tcp_method(0, secret, &[]);
    let mut sink = Record::default();
    let mut s = authenticated_raw(&server, 3, secret, &mut sink);
    s.write_all(&100u32.to_le_bytes()).unwrap();
    s.write_all(&[1; 40]).unwrap();
    drop(s);
    poll_record(&server, &mut sink, 50);
    assert!(sink.got.is_empty());
    assert_eq!(sink.failed.len(), 1, "{:?}", sink.failed);
    assert_eq!(sink.failed[0].0, 3);
    assert!(sink.failed[0].1.contains("rank 3"), "{}", sink.failed[0].1);
    server.shutdown();
}

/// The body of `accept_at_a_real_open_file_limit_backs_off`, run in a child
/// process (it lowers RLIMIT_NOFILE and uses up every descriptor).
fn real_open_file_limit_child() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a pointer to a live rlimit.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim), 0);
        lim.rlim_cur = lim.rlim_cur.min(256);
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &lim), 0);
    }
    let server = tcp_method(0, [15; 32], &[]);
    let mut sink = Record::default();
    let _waiting = TcpStream::connect(server.local).unwrap();
    let mut fillers = Vec::new();
    loop {
        match std::fs::File::open("/dev/null") {
            Ok(f) => fillers.push(f),
            Err(e) if e.raw_os_error() == Some(libc::EMFILE) => break,
            Err(e) => panic!("open /dev/null: {e}"),
        }
        assert!(fillers.len() < 100_000);
    }
    let started = std::time::Instant::now();
    let mut polls = 0;
    while started.elapsed() < Duration::from_millis(350) {
        server.poll_thorough(&mut sink).unwrap();
        polls += 1;
        std::thread::sleep(Duration::from_micros(200));
    }
    let failures = counter(&*server, "accept_failures");
    println!("EMFILE: {failures} failed accepts in {polls} polls over 350 ms");
    assert!(polls > 100);
    assert!(
        (1..=5).contains(&failures),
        "{failures} failed accepts in {polls} polls"
    );
    assert_eq!(server.accept_notice.printed(), 1);
    drop(fillers);
    poll_record(&server, &mut sink, 250);
    assert_eq!(
        server.conns.lock().unwrap().len(),
        1,
        "accepted once descriptors are free"
    );
    server.shutdown();
}

#[test]
fn accept_at_a_real_open_file_limit_backs_off() {
    const CHILD: &str = "GW_TEST_TCP_EMFILE_CHILD";
    if std::env::var_os(CHILD).is_some() {
        real_open_file_limit_child();
        return;
    }
    let name = "method::tcp::tests::accept_at_a_real_open_file_limit_backs_off";
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "child failed: {stdout}\n{stderr}"
    );
    assert!(stdout.contains("EMFILE: "), "{stdout}");
    // One message about the failed accepts, not one per poll.
    assert_eq!(
        stderr.matches("cannot accept new connections").count(),
        1,
        "{stderr}"
    );
}

#[test]
fn a_flood_of_refused_connections_prints_one_line_a_second() {
    let server = tcp_method(0, [16; 32], &[]);
    let mut sink = Record::default();
    for _ in 0..3 {
        let mut clients = Vec::new();
        for _ in 0..10 {
            let mut c = TcpStream::connect(server.local).unwrap();
            c.write_all(&[0xab; 64]).unwrap();
            clients.push(c);
        }
        poll_record(&server, &mut sink, 30);
    }
    assert_eq!(counter(&*server, "refused_connections"), 30);
    assert_eq!(server.unauthenticated_notice.printed(), 1);
    assert!(sink.got.is_empty() && sink.failed.is_empty());
    server.shutdown();
}

/// Context 1 connected to a hand-played context 0, which answered
/// `USE_MINE` (its own connection to 1 is the pair's). Returns 1's
/// connection as 0 sees it, with 1's proof read off it.
fn lost_tie(b: &TcpMethod, secret: [u8; 32], sink: &mut Record) -> (TcpListener, TcpStream) {
    let fake = TcpListener::bind("127.0.0.1:0").unwrap();
    b.connect(0, fake.local_addr().unwrap().to_string().as_bytes())
        .unwrap();
    let (mut s, _) = fake.accept().unwrap();
    s.set_read_timeout(Some(Duration::from_millis(10))).unwrap();
    let mut hello = [0u8; HELLO_LEN];
    let started = std::time::Instant::now();
    while s.read_exact(&mut hello).is_err() {
        assert!(started.elapsed() < Duration::from_secs(5));
        b.poll_thorough(sink).unwrap();
    }
    let their_nonce: [u8; NONCE_LEN] = hello[12..].try_into().unwrap();
    let mine = auth::nonce();
    let mut challenge = Vec::from(&mine[..]);
    challenge.extend_from_slice(&auth::proof(
        &secret,
        Role::Acceptor,
        &mine,
        &their_nonce,
        0,
        1,
    ));
    challenge.push(USE_MINE);
    s.write_all(&challenge).unwrap();
    poll_record(b, sink, 30);
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut proof = [0u8; PROOF_LEN];
    s.read_exact(&mut proof).unwrap();
    assert!(auth::verify(
        &secret,
        Role::Connector,
        &their_nonce,
        &mine,
        1,
        0,
        &proof
    ));
    (fake, s)
}

#[test]
fn output_held_for_the_pairs_connection_is_pending_and_survives_its_close() {
    let secret = [12; 32];
    let b = tcp_method(1, secret, &[]);
    let mut sink = Record::default();
    let (_fake, mut s) = lost_tie(&b, secret, &mut sink);
    assert!(b.by_peer.lock().unwrap()[&0].out.lock().hold);
    let link = b.link(b.by_peer.lock().unwrap()[&0].clone());
    for i in 0..3u32 {
        link.send(&[IoSlice::new(&i.to_le_bytes())], &NoWait)
            .unwrap();
    }
    // Finalize waits for pending output: held output is pending (it was
    // not, and a finalizing rank dropped it with the connection).
    assert!(b.has_pending_output(), "held output counts as pending");
    // Context 0's own connection (the pair's) says hello, then closes
    // before it authenticates: 1 must send its held output on its own
    // connection rather than hold it forever.
    let mut t = TcpStream::connect(b.local).unwrap();
    let mut hello = Vec::from(&MAGIC[..]);
    hello.extend_from_slice(&0u32.to_le_bytes());
    hello.extend_from_slice(&1u32.to_le_bytes());
    hello.extend_from_slice(&auth::nonce());
    t.write_all(&hello).unwrap();
    poll_record(&b, &mut sink, 30);
    assert!(
        b.has_pending_output(),
        "still held while the pair's connection authenticates"
    );
    drop(t);
    poll_record(&b, &mut sink, 30);
    let mut frames = [0u8; 3 * 8];
    s.read_exact(&mut frames).unwrap();
    for i in 0..3u32 {
        let f = &frames[i as usize * 8..][..8];
        assert_eq!(&f[..4], &4u32.to_le_bytes());
        assert_eq!(&f[4..], &i.to_le_bytes(), "in order");
    }
    assert!(!b.has_pending_output());
    assert!(!b.by_peer.lock().unwrap()[&0].out.lock().hold);
    // Later sends follow on the same connection.
    link.send(&[IoSlice::new(&9u32.to_le_bytes())], &NoWait)
        .unwrap();
    let mut f = [0u8; 8];
    s.read_exact(&mut f).unwrap();
    assert_eq!(&f[4..], &9u32.to_le_bytes());
    assert!(sink.failed.is_empty(), "{:?}", sink.failed);
    b.shutdown();
}

/// One side of `simultaneous_connects_then_finalize_lose_nothing`.
struct Side {
    m: Arc<TcpMethod>,
    peer: u32,
    sink: Record,
    done: bool,
}

impl Side {
    /// Polls as a finalizing rank does; shuts down, like finalize, once it
    /// has every message and no pending output (after checking that the
    /// link it sends on ended up authenticated).
    fn step(&mut self, polls: usize, want: usize, iter: usize, peer_done: bool) {
        if self.done {
            return;
        }
        for _ in 0..polls {
            self.m.poll_thorough(&mut self.sink).unwrap();
        }
        if self.sink.got.len() >= want && !self.m.has_pending_output() {
            let c = self.m.by_peer.lock().unwrap().get(&self.peer).cloned();
            let Some(c) = c else {
                // Its connection closed: only because the peer left.
                assert!(
                    peer_done,
                    "iteration {iter}: rank {} lost its link",
                    self.m.me
                );
                self.m.shutdown();
                self.done = true;
                return;
            };
            let c = c.redirect.get().cloned().unwrap_or(c);
            assert!(
                matches!(c.inp.lock().state, HsState::Ready),
                "iteration {iter}: rank {} sends on an unauthenticated connection",
                self.m.me
            );
            let out = c.out.lock();
            assert!(out.ready && !out.hold && out.broken.is_none());
            drop(out);
            self.m.shutdown();
            self.done = true;
        }
    }
}

#[test]
fn simultaneous_connects_then_finalize_lose_nothing() {
    // Both ends connect to each other at once and send (as in the last
    // round of finalize's barrier), then each shuts down as soon as it has
    // the other's messages and no pending output of its own. Whatever the
    // interleaving, the other must still get every message, once, in order.
    const MSGS: u32 = 5;
    for iter in 0..60usize {
        let secret = [13; 32];
        let (lo, hi) = if iter % 2 == 0 { (0, 1) } else { (2, 3) };
        let a = tcp_method(lo, secret, &[]);
        let b = tcp_method(hi, secret, &[]);
        let (da, db) = (a.descriptor(), b.descriptor());
        // Who connects and sends first, and how often each polls per step,
        // vary with the iteration.
        let (ab, ba) = if iter % 3 == 0 {
            let ab = a.connect(hi, &db).unwrap();
            (ab, b.connect(lo, &da).unwrap())
        } else {
            let ba = b.connect(lo, &da).unwrap();
            (a.connect(hi, &db).unwrap(), ba)
        };
        for i in 0..MSGS {
            let m = i.to_le_bytes();
            ab.send(&[IoSlice::new(&m)], &NoWait).unwrap();
            ba.send(&[IoSlice::new(&m)], &NoWait).unwrap();
        }
        let mut sides = [
            Side {
                m: a,
                peer: hi,
                sink: Record::default(),
                done: false,
            },
            Side {
                m: b,
                peer: lo,
                sink: Record::default(),
                done: false,
            },
        ];
        let polls = [1 + iter % 3, 1 + (iter / 3) % 3];
        let first = (iter / 9) % 2;
        let started = std::time::Instant::now();
        while !(sides[0].done && sides[1].done) {
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "iteration {iter}: stuck; got {:?} and {:?}",
                sides[0].sink.got.len(),
                sides[1].sink.got.len()
            );
            let done = sides[1 - first].done;
            sides[first].step(polls[first], MSGS as usize, iter, done);
            let done = sides[first].done;
            sides[1 - first].step(polls[1 - first], MSGS as usize, iter, done);
            std::thread::sleep(Duration::from_micros(200));
        }
        for s in &sides {
            let seq: Vec<u32> = s
                .sink
                .got
                .iter()
                .map(|(src, m)| {
                    assert_eq!(*src, s.peer);
                    u32::from_le_bytes(m[..4].try_into().unwrap())
                })
                .collect();
            assert_eq!(seq, (0..MSGS).collect::<Vec<_>>(), "iteration {iter}");
            assert!(
                s.sink.failed.is_empty(),
                "iteration {iter}: {:?}",
                s.sink.failed
            );
            assert_eq!(counter(&*s.m, "refused_connections"), 0, "iteration {iter}");
        }
    }
}

/// Keeps the reasons of failed links.
struct Reasons(Vec<(u32, Vec<u8>)>, Vec<String>);
impl Sink for Reasons {
    fn deliver(&mut self, src: u32, msg: &[u8]) {
        self.0.push((src, msg.to_vec()));
    }
    fn link_failed(&mut self, _: u32, why: String) {
        self.1.push(why);
    }
}

/// A port nothing listens on (bound and closed again).
fn closed_port() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let a = l.local_addr().unwrap();
    drop(l);
    a
}

#[test]
fn a_failed_connect_moves_on_to_the_next_address() {
    let secret = [21; 32];
    let a = tcp_method(0, secret, &[]);
    let b = tcp_method(1, secret, &[]);
    let dead = closed_port();
    let conn = b.open(0, vec![dead, a.local]).unwrap();
    // As `connect` does.
    b.by_peer.lock().unwrap().insert(0, conn.clone());
    let link = b.link(conn);
    link.send(&[IoSlice::new(b"after a refusal")], &NoWait)
        .unwrap();
    let (mut sa, mut sb) = (
        Reasons(Vec::new(), Vec::new()),
        Reasons(Vec::new(), Vec::new()),
    );
    for _ in 0..200 {
        a.poll_thorough(&mut sa).unwrap();
        b.poll_thorough(&mut sb).unwrap();
        if !sa.0.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(sa.0, vec![(1, b"after a refusal".to_vec())], "{:?}", sb.1);
    assert!(sb.1.is_empty(), "{:?}", sb.1);
    a.shutdown();
    b.shutdown();
}

#[test]
fn when_no_address_connects_the_error_names_each() {
    let b = tcp_method(1, [22; 32], &[]);
    let (d1, d2) = (closed_port(), closed_port());
    let mut sb = Reasons(Vec::new(), Vec::new());
    let why = match b.open(0, vec![d1, d2]) {
        // Refused at once (both connects failed in `open`).
        Err(e) => e.to_string(),
        Ok(conn) => {
            let link = b.link(conn);
            let _ = link.send(&[IoSlice::new(b"x")], &NoWait);
            for _ in 0..200 {
                b.poll_thorough(&mut sb).unwrap();
                if !sb.1.is_empty() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            sb.1.first().cloned().expect("the link failed")
        }
    };
    for d in [d1, d2] {
        assert!(why.contains(&d.to_string()), "{why}");
    }
    assert!(
        why.contains("rank 0") && why.contains("every address"),
        "{why}"
    );
    let none = b.open(0, Vec::new()).err().expect("no address").to_string();
    assert!(none.contains("no address reachable"), "{none}");
    b.shutdown();
}

#[test]
fn loopback_only_within_one_network_namespace() {
    let secret = [23; 32];
    let a = tcp_method(0, secret, &[]);
    let b = tcp_method(1, secret, &[]);
    // Same namespace: loopback only, whatever interfaces there are.
    assert_eq!(b.addresses_of(&a.descriptor()), vec![a.local]);
    // A peer in another namespace: never loopback, only its interface
    // addresses (a documentation address here, never contacted: this test
    // only asks which addresses would be tried); none published: unreachable.
    let mut p = netaddr::Published::parse(&a.descriptor()).unwrap();
    p.netns = Some("0123456789abcdef".into());
    p.addrs = vec![netaddr::IfAddr {
        ip: std::net::Ipv4Addr::new(192, 0, 2, 7),
        prefix: 24,
    }];
    let from_elsewhere = b.addresses_of(&p.encode());
    assert_eq!(
        from_elsewhere,
        vec![std::net::SocketAddr::from(([192, 0, 2, 7], p.port))]
    );
    assert!(b.reachable(&p.encode()));
    p.addrs.clear();
    assert!(!b.reachable(&p.encode()));
    // The old single-address form (an explicit GW_TCP_ADDR) still works.
    let old = tcp_method(2, secret, &[("GW_TCP_ADDR", "127.0.0.1")]);
    assert_eq!(old.descriptor(), old.local.to_string().into_bytes());
    assert_eq!(b.addresses_of(&old.descriptor()), vec![old.local]);
    // GW_IFACE leaves interfaces out of what is published.
    let none = tcp_method(3, secret, &[("GW_IFACE", "nosuchif0")]);
    let q = netaddr::Published::parse(&none.descriptor()).unwrap();
    assert!(q.addrs.is_empty(), "{q:?}");
    for m in [a, b, old, none] {
        m.shutdown();
    }
}

/// Across network namespaces (as between hosts), an address of the peer's
/// that is also one of ours (the same bridge address on every host) is
/// never tried: it would reach ourselves. On one machine every interface
/// address of a peer "elsewhere" is ours, so nothing is tried and the
/// connect fails with a message that says why. (Reaching a peer at its
/// interface address across real namespaces is tested on the testbed:
/// crates/testbed/tests/hydra_across_hosts.rs.)
#[test]
fn a_peer_elsewhere_is_never_tried_at_an_address_that_is_also_ours() {
    let secret = [24; 32];
    let a = tcp_method(0, secret, &[]);
    let b = tcp_method(1, secret, &[]);
    let mut p = netaddr::Published::parse(&a.descriptor()).unwrap();
    if p.addrs.is_empty() {
        gridwire_testkit::skip("this machine has no IPv4 interface but loopback");
        return;
    }
    p.netns = Some("0123456789abcdef".into());
    assert!(b.addresses_of(&p.encode()).is_empty());
    let e = match b.connect(0, &p.encode()) {
        Ok(_) => panic!("connected to an address of our own"),
        Err(e) => e.to_string(),
    };
    assert!(
        e.contains("published no address reachable from here"),
        "{e}"
    );
    a.shutdown();
    b.shutdown();
}

#[test]
fn a_connect_that_loses_the_tie_after_the_table_took_the_peers_connection_merges() {
    // The race a threaded program can hit (seen as a 60 s finalize in a
    // nonblocking-collectives test on 8 ranks): the connection context 0
    // made to 1 authenticates at 1 and takes 1's peer table entry while 1's
    // own connect to 0 is still under way (another thread's connect). That
    // connect then loses the tie (0 answers USE_MINE: its own connection
    // carried payload). It must merge into 0's connection like any loser,
    // not hold (and count as pending output) forever.
    let secret = [21; 32];
    let a = tcp_method(1, secret, &[]);
    let b = tcp_method(0, secret, &[]);
    let (da, db) = (a.descriptor(), b.descriptor());
    let (mut ra, mut rb) = (Record::default(), Record::default());
    let ba = b.connect(1, &da).unwrap();
    ba.send(&[IoSlice::new(b"first")], &NoWait).unwrap();
    for _ in 0..500 {
        b.poll_thorough(&mut rb).unwrap();
        a.poll_thorough(&mut ra).unwrap();
        if !ra.got.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(ra.got, vec![(0, b"first".to_vec())]);
    // 1's table now names the connection 0 made. The racing connect:
    let late = a.open(0, a.addresses_of(&db)).unwrap();
    assert!(late.outgoing);
    let ab = a.connect(0, &db).unwrap();
    ab.send(&[IoSlice::new(b"reply")], &NoWait).unwrap();
    let mut settled = false;
    for _ in 0..1000 {
        b.poll_thorough(&mut rb).unwrap();
        a.poll_thorough(&mut ra).unwrap();
        if late.in_handshake.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(2));
            continue;
        }
        if !a.has_pending_output() && !rb.got.is_empty() {
            settled = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(
        settled,
        "the losing connection still holds: pending output {} (holding {}), got {:?}",
        a.has_pending_output(),
        a.holding.load(Ordering::Relaxed),
        rb.got
    );
    assert_eq!(rb.got, vec![(1, b"reply".to_vec())]);
    assert!(ra.failed.is_empty() && rb.failed.is_empty());
    a.shutdown();
    b.shutdown();
}
