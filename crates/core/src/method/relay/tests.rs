//! Relay requests, and links through a real relay service on loopback:
//! in-order delivery through it, tampering seen end to end, requests under
//! another key refused.

use super::service::Relay;
use super::*;
use crate::method::{JobInfo, Waiter};
use crate::params::Params;
use std::net::TcpListener;
use std::time::{Duration, Instant};

const SECRET: [u8; 32] = [9; 32];

#[test]
fn requests_round_trip_and_every_flipped_bit_is_refused() {
    let key = relay_key(&SECRET);
    let targets: Vec<SocketAddr> = vec![
        "10.1.1.2:4000".parse().unwrap(),
        "[fd00::7]:5".parse().unwrap(),
    ];
    let req = encode_request(&key, &targets).unwrap();
    assert_eq!(req.len(), REQUEST_LEN);
    assert_eq!(decode_request(&key, &req).unwrap(), targets);
    for i in 0..req.len() {
        let mut t = req.clone();
        t[i] ^= 0x04;
        assert!(decode_request(&key, &t).is_err(), "flip at {i} accepted");
    }
    assert!(decode_request(&relay_key(&[8; 32]), &req).is_err());
    assert!(decode_request(&key, &req[..REQUEST_LEN - 1]).is_err());
    // Two requests for the same target differ (fresh nonce).
    assert_ne!(req, encode_request(&key, &targets).unwrap());
}

#[test]
fn the_relay_key_is_neither_the_secret_nor_another_jobs() {
    let k = relay_key(&SECRET);
    assert_eq!(k, relay_key(&SECRET));
    assert_ne!(k, SECRET);
    assert_ne!(k, relay_key(&[10; 32]));
}

#[test]
fn relay_param_and_names() {
    let p = Published::local(7000, vec![]).encode();
    let hex: String = p.iter().map(|b| format!("{b:02x}")).collect();
    let (host, bytes) = parse_relay_param(&format!("s1h0:{hex}")).unwrap();
    assert_eq!((host.as_str(), bytes), ("s1h0", p));
    assert!(parse_relay_param("s1h0").is_none());
    assert!(parse_relay_param("s1h0:zz").is_none());
    assert!(parse_relay_param(":00").is_none());
    assert!(is_relayed("encrypt+relay(s1h0)+tcp"));
    assert!(is_relayed("encrypt+relay+tcp"));
    assert!(!is_relayed("encrypt+tcp"));
    assert_eq!(
        crate::method::transform::transforms_of("compress+encrypt+relay(gw)+tcp"),
        ["compress", "encrypt"]
    );
}

struct Collect(Vec<(u32, Vec<u8>)>, Vec<(u32, String)>);
impl Sink for Collect {
    fn deliver(&mut self, src: u32, msg: &[u8]) {
        self.0.push((src, msg.to_vec()));
    }
    fn link_failed(&mut self, src: u32, why: String) {
        self.1.push((src, why));
    }
}
struct NoWait;
impl Waiter for NoWait {
    fn progress(&self) -> bool {
        false
    }
}

/// A relay on loopback (flipping at `flip_at`), and its `GW_RELAY` value.
fn start_relay(key: [u8; 32], flip_at: Option<u64>) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let relay = Relay::new(key, flip_at, false);
    std::thread::spawn(move || relay.serve(l));
    let hex: String = Published::local(port, vec![])
        .encode()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("gwhost:{hex}")
}

/// The `encrypt+relay+tcp` stack of rank `id` (behind the relay if `relay`).
fn stack(id: u32, secret: [u8; 32], relay: &str) -> Arc<dyn Method> {
    let job = JobInfo {
        ctx_id: id,
        size: 2,
        job_id: "relaytest".into(),
        host_id: "h".into(),
        secret,
        verbose: 0,
    };
    let params = Params::from_lookup(|k| match k {
        "GW_RELAY" if !relay.is_empty() => Some(relay.to_string()),
        "GW_RELAYED_SITES" => Some("s1".into()),
        _ => None,
    })
    .unwrap();
    let env = MethodEnv {
        job: &job,
        params: &params,
    };
    let policy = crate::method::transform::policy::Policy::from_params(&params).unwrap();
    build_stacks(&env, &policy).unwrap().remove(0)
}

fn pump(a: &Arc<dyn Method>, b: &Arc<dyn Method>, sb: &mut Collect, want: usize) {
    let mut sa = Collect(Vec::new(), Vec::new());
    let end = Instant::now() + Duration::from_secs(20);
    while sb.0.len() < want && sb.1.is_empty() && Instant::now() < end {
        a.poll(&mut sa).unwrap();
        b.poll(sb).unwrap();
        std::thread::sleep(Duration::from_micros(200));
    }
}

#[test]
fn messages_pass_through_a_relay_in_order_and_named_after_the_gateway() {
    let behind = start_relay(relay_key(&SECRET), None);
    let a = stack(0, SECRET, "");
    let b = stack(1, SECRET, &behind);
    assert_eq!(a.name(), "encrypt+relay+tcp");
    // A rank not behind a relay is never reached through one.
    assert!(!b.reachable(&a.descriptor()));
    assert!(a.reachable(&b.descriptor()));
    assert_eq!(a.link_name(&b.descriptor()), "encrypt+relay(gwhost)+tcp");
    let link = a.connect(1, &b.descriptor()).unwrap();
    assert_eq!(link.method(), "encrypt+relay(gwhost)+tcp");
    let pattern = b"RELAY-PLAINTEXT-".repeat(4096);
    for i in 0..200u32 {
        link.send(
            &[IoSlice::new(&i.to_le_bytes()), IoSlice::new(&pattern)],
            &NoWait,
        )
        .unwrap();
    }
    let mut sb = Collect(Vec::new(), Vec::new());
    pump(&a, &b, &mut sb, 200);
    assert!(sb.1.is_empty(), "{:?}", sb.1);
    assert_eq!(sb.0.len(), 200);
    for (i, (src, m)) in sb.0.iter().enumerate() {
        assert_eq!(*src, 0);
        assert_eq!(&m[..4], &(i as u32).to_le_bytes());
        assert_eq!(&m[4..], &pattern[..]);
    }
    a.shutdown();
    b.shutdown();
}

#[test]
fn a_byte_flipped_by_the_relay_is_rejected_and_fails_the_link() {
    let behind = start_relay(relay_key(&SECRET), Some(200_000));
    let a = stack(0, SECRET, "");
    let b = stack(1, SECRET, &behind);
    let link = a.connect(1, &b.descriptor()).unwrap();
    for _ in 0..10 {
        link.send(&[IoSlice::new(&[5u8; 100_000])], &NoWait)
            .unwrap();
    }
    let mut sb = Collect(Vec::new(), Vec::new());
    pump(&a, &b, &mut sb, 10);
    // The frame holding byte 200 000 of the stream and all after it are
    // never delivered; the link fails naming the transform.
    assert!(sb.0.len() < 10, "a tampered frame was delivered");
    assert!(sb.0.iter().all(|(_, m)| m == &vec![5u8; 100_000]));
    assert_eq!(sb.1.len(), 1, "{:?}", sb.1);
    assert!(sb.1[0].1.contains("encrypt rejected a frame"), "{:?}", sb.1);
    let forged = b
        .counters()
        .into_iter()
        .find(|(k, _)| *k == "encrypt_rejected_forged")
        .unwrap()
        .1;
    assert_eq!(forged, 1);
    a.shutdown();
    b.shutdown();
}

#[test]
fn a_relay_of_another_job_refuses_the_request() {
    let behind = start_relay(relay_key(&[1; 32]), None);
    let a = stack(0, SECRET, "");
    let b = stack(1, SECRET, &behind);
    let link = a.connect(1, &b.descriptor()).unwrap();
    link.send(&[IoSlice::new(b"hello")], &NoWait).unwrap();
    let mut sb = Collect(Vec::new(), Vec::new());
    let mut sa = Collect(Vec::new(), Vec::new());
    let end = Instant::now() + Duration::from_secs(20);
    while sa.1.is_empty() && Instant::now() < end {
        a.poll(&mut sa).unwrap();
        b.poll(&mut sb).unwrap();
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(sb.0.is_empty());
    assert_eq!(sa.1.len(), 1, "the link did not fail: {:?}", sa.1);
    a.shutdown();
    b.shutdown();
}
