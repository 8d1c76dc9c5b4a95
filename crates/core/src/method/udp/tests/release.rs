//! A peer that left the job (`Method::release_peer`): what we were sending
//! it goes at once, its last data still arrives, and its whole state goes
//! once it has been quiet; nothing from it creates state again.

use super::*;

#[test]
fn a_released_peer_delivers_its_last_data_then_its_state_goes() {
    let clean = Impair {
        loss: 0.0,
        dup: 0.0,
        reorder: 0.0,
        rate: 0,
        ..LOSSY
    };
    let mut sim = Sim::new(pair([7; 32]), clean, 5);
    let mut s = [stream(0, 1, 10, 1), stream(1, 0, 10, 2)];
    run_streams(&mut sim, &mut s, Duration::from_secs(60));
    assert_eq!(sim.eps[0].peer_count(), 1);

    // 1's last messages are on the wire when 0 hears (another way) that
    // it left; 0 also had a message for 1 queued.
    let now = sim.now;
    for m in [&b"last-1"[..], b"last-2"] {
        sim.eps[1].send(0, &[IoSlice::new(m)], now).unwrap();
    }
    sim.eps[0].send(1, &[IoSlice::new(b"never")], now).unwrap();
    sim.transmit_all();
    sim.eps[0].release(1, now);
    let err = sim.eps[0]
        .send(1, &[IoSlice::new(b"x")], now)
        .expect_err("a send to a released peer");
    assert!(err.contains("left the job"), "{err}");
    assert!(!sim.eps[0].has_unacked(), "what 0 was sending 1 is dropped");

    let mut got = Vec::new();
    let released_at = sim.now;
    while sim.eps[0].peer_count() > 0 {
        assert!(sim.step(), "nothing scheduled while 1's state is held");
        while let Some(e) = sim.eps[0].poll_event() {
            match e {
                Event::Message { src, data } => got.push((src, data)),
                Event::Failed { peer, reason } => panic!("peer {peer} failed: {reason}"),
            }
        }
        assert!(
            sim.now - released_at < Duration::from_secs(10),
            "1's state was never dropped"
        );
    }
    assert_eq!(got, vec![(1, b"last-1".to_vec()), (1, b"last-2".to_vec())]);
    // 0 acknowledged them before dropping 1's state.
    assert!(!sim.eps[1].has_unacked(), "1's last data was acknowledged");
    let waited = sim.now - released_at;
    assert!(
        waited >= sim.eps[0].release_grace(),
        "dropped after only {waited:?}"
    );

    // Datagrams and handshakes from 1 afterwards create nothing.
    let now = sim.now;
    sim.eps[1].send(0, &[IoSlice::new(b"late")], now).unwrap();
    let before = sim.eps[0].counters.from_departed;
    for _ in 0..50 {
        if !sim.step() {
            break;
        }
    }
    assert!(sim.eps[0].counters.from_departed > before);
    sim.eps[0].connect(1, 1, sim.now);
    assert_eq!(sim.eps[0].peer_count(), 0, "state came back");
    assert!(sim.eps[0].poll_event().is_none(), "late data was delivered");
}

/// Through real sockets: the method's `release_peer` frees the peer's state
/// once the grace has passed, woken by its own timer.
#[test]
fn socket_release_peer_frees_the_peers_state() {
    let opts = [("GW_UDP_MAX_TIMEOUT", "50")];
    let a = method(0, [5; 32], &opts);
    let b = method(1, [5; 32], &opts);
    let ab = a.connect(1, &b.descriptor()).unwrap();
    let ba = b.connect(0, &a.descriptor()).unwrap();
    let (mut sa, mut sb) = (Collect(vec![], vec![]), Collect(vec![], vec![]));
    ab.send(&[IoSlice::new(b"hi")], &NoWait).unwrap();
    ba.send(&[IoSlice::new(b"hi")], &NoWait).unwrap();
    let end = Instant::now() + Duration::from_secs(20);
    while sa.0.is_empty() || sb.0.is_empty() || a.has_pending_output() || b.has_pending_output() {
        assert!(Instant::now() < end, "handshake");
        a.poll(&mut sa).unwrap();
        b.poll(&mut sb).unwrap();
    }
    assert_eq!(counter(&a, "peers_held"), 1);
    ba.send(&[IoSlice::new(b"bye")], &NoWait).unwrap();
    a.release_peer(1);
    assert!(ab.send(&[IoSlice::new(b"x")], &NoWait).is_err());
    let t = Instant::now();
    while counter(&a, "peers_held") > 0 {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the state of a released peer is still held"
        );
        let fd = a.wait_fd().expect("udp has a wait descriptor");
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one live pollfd, count 1.
        unsafe { libc::poll(&mut pfd, 1, 100) };
        a.poll(&mut sa).unwrap();
        b.poll(&mut sb).unwrap();
    }
    assert_eq!(sa.0.last().map(|m| &m.1[..]), Some(&b"bye"[..]));
    assert!(sa.1.is_empty(), "links failed: {:?}", sa.1);
    a.shutdown();
    b.shutdown();
}
