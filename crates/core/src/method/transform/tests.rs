//! The transforms over a fake wire: frames are byte vectors the test
//! tampers with, replays and reorders before handing them to the receiver.

use super::compress::Compress;
use super::encrypt::{Cipher, Encrypt, Limits, OVERHEAD};
use super::{Opened, Rejected, Transform};

const SECRET: [u8; 32] = [42; 32];

fn limits() -> Limits {
    Limits {
        epoch_bits: super::encrypt::EPOCH_BITS,
        bytes_per_key: super::encrypt::BYTES_PER_KEY,
    }
}

/// Sender 1 and receiver 2, a session opened (the hello delivered).
fn session(cipher: Cipher, limits: Limits) -> (Encrypt, Encrypt) {
    let a = Encrypt::new(1, SECRET, cipher, limits).unwrap();
    let b = Encrypt::new(2, SECRET, cipher, limits).unwrap();
    let mut hello = a.connect(2, &b.descriptor()).unwrap().expect("a hello");
    assert_eq!(b.open(1, &mut hello, &mut Vec::new()), Ok(Opened::Consumed));
    (a, b)
}

fn seal(a: &Encrypt, msg: &[u8]) -> Vec<u8> {
    let mut f = msg.to_vec();
    a.seal(2, &mut f, &mut Vec::new()).unwrap();
    f
}

fn open(b: &Encrypt, frame: &[u8]) -> Result<Vec<u8>, Rejected> {
    let mut f = frame.to_vec();
    match b.open(1, &mut f, &mut Vec::new())? {
        Opened::Deliver => Ok(f),
        Opened::Consumed => panic!("data frame consumed"),
    }
}

fn counter(t: &dyn Transform, name: &str) -> u64 {
    t.counters()
        .into_iter()
        .find(|(k, _)| *k == name)
        .unwrap()
        .1
}

#[test]
fn encrypt_roundtrip_hides_the_plaintext_both_ciphers() {
    for cipher in [Cipher::Aes256Gcm, Cipher::ChaCha20Poly1305] {
        let (a, b) = session(cipher, limits());
        let msg = b"the quick brown fox jumps over the lazy dog, twice over".repeat(3);
        let f = seal(&a, &msg);
        assert_eq!(f.len(), msg.len() + OVERHEAD);
        assert!(
            !f.windows(16).any(|w| msg.windows(16).any(|m| m == w)),
            "{cipher:?}: plaintext visible on the wire"
        );
        assert_eq!(open(&b, &f).unwrap(), msg);
        assert_eq!(open(&b, &seal(&a, b"")).unwrap(), b"");
        assert_eq!(counter(&b, "encrypt_opened"), 2);
    }
}

#[test]
fn tampered_frames_are_rejected_and_counted() {
    let (a, b) = session(Cipher::Aes256Gcm, limits());
    let msg = vec![7u8; 300];
    let f = seal(&a, &msg);
    // Every single-bit flip, anywhere (ciphertext, tag, counter), fails.
    for i in 0..f.len() {
        let mut t = f.clone();
        t[i] ^= 0x10;
        assert!(open(&b, &t).is_err(), "flip at byte {i} accepted");
    }
    // Truncated and extended frames too.
    assert!(open(&b, &f[..f.len() - 1]).is_err());
    assert!(matches!(open(&b, &f[..5]), Err(Rejected::Forged(_))));
    let mut longer = f.clone();
    longer.insert(0, 0);
    assert!(matches!(open(&b, &longer), Err(Rejected::Forged(_))));
    assert!(counter(&b, "encrypt_rejected_forged") >= f.len() as u64);
    // The genuine frame still opens: rejections changed no state.
    assert_eq!(open(&b, &f).unwrap(), msg);
}

#[test]
fn replayed_frames_and_hellos_are_rejected() {
    let (a, b) = session(Cipher::Aes256Gcm, limits());
    let f1 = seal(&a, b"one");
    let f2 = seal(&a, b"two");
    assert_eq!(open(&b, &f1).unwrap(), b"one");
    assert_eq!(open(&b, &f2).unwrap(), b"two");
    assert!(matches!(open(&b, &f1), Err(Rejected::Replay(_))));
    assert!(matches!(open(&b, &f2), Err(Rejected::Replay(_))));
    assert_eq!(counter(&b, "encrypt_rejected_replay"), 2);
    // A second hello for the same direction is a replay of the session.
    let mut again = a.connect(2, &b.descriptor()).unwrap().unwrap();
    assert!(matches!(
        b.open(1, &mut again, &mut Vec::new()),
        Err(Rejected::Replay(_))
    ));
    // A frame recorded for another receiving process (another receive
    // nonce) does not open here: keys are bound to both nonces.
    let c = Encrypt::new(2, SECRET, Cipher::Aes256Gcm, limits()).unwrap();
    let mut hello = a.connect(2, &b.descriptor()).unwrap().unwrap();
    assert!(matches!(
        c.open(1, &mut hello, &mut Vec::new()),
        Err(Rejected::Forged(_))
    ));
    // Frames of a sender that never said hello.
    let stranger = Encrypt::new(3, SECRET, Cipher::Aes256Gcm, limits()).unwrap();
    let mut f = b"x".to_vec();
    stranger.connect(2, &b.descriptor()).unwrap();
    stranger.seal(2, &mut f, &mut Vec::new()).unwrap();
    assert!(matches!(
        b.open(3, &mut f, &mut Vec::new()),
        Err(Rejected::Forged(_))
    ));
}

#[test]
fn another_secret_or_direction_does_not_open() {
    let a = Encrypt::new(1, SECRET, Cipher::Aes256Gcm, limits()).unwrap();
    let b = Encrypt::new(2, [43; 32], Cipher::Aes256Gcm, limits()).unwrap();
    let mut hello = a.connect(2, &b.descriptor()).unwrap().unwrap();
    assert!(matches!(
        b.open(1, &mut hello, &mut Vec::new()),
        Err(Rejected::Forged(_))
    ));
    // A hello claimed by another source (ids are in the keys).
    let (a, b) = session(Cipher::Aes256Gcm, limits());
    let mut hello = a.connect(2, &b.descriptor()).unwrap().unwrap();
    assert!(matches!(
        b.open(5, &mut hello, &mut Vec::new()),
        Err(Rejected::Forged(_))
    ));
}

#[test]
fn reordering_inside_the_window_is_accepted() {
    let (a, b) = session(Cipher::ChaCha20Poly1305, limits());
    let frames: Vec<Vec<u8>> = (0..200u32).map(|i| seal(&a, &i.to_le_bytes())).collect();
    // Deliver in a scrambled order: reversed blocks of 17.
    let mut order: Vec<usize> = Vec::new();
    for block in (0..200).collect::<Vec<_>>().chunks(17) {
        order.extend(block.iter().rev());
    }
    for i in order {
        let m = open(&b, &frames[i]).unwrap();
        assert_eq!(m, (i as u32).to_le_bytes());
    }
    for f in &frames {
        assert!(open(&b, f).is_err(), "replay after reordering");
    }
}

#[test]
fn rekeys_by_count_and_by_bytes_and_old_epochs_stay_usable_briefly() {
    let small = Limits {
        epoch_bits: 4,
        bytes_per_key: 1000,
    };
    let (a, b) = session(Cipher::Aes256Gcm, small);
    let mut frames = Vec::new();
    for i in 0..100u32 {
        frames.push(seal(&a, &i.to_le_bytes()));
    }
    // 100 frames at 16 per epoch: 6 rekeys on the sender.
    assert_eq!(counter(&a, "encrypt_rekeys"), 6);
    // The last frame of epoch 0 arrives after the first of epoch 1.
    assert!(open(&b, &frames[15]).is_ok());
    assert!(open(&b, &frames[14]).is_ok());
    for f in &frames[..14] {
        assert!(open(&b, f).is_ok());
    }
    for f in &frames[16..] {
        assert!(open(&b, f).is_ok());
    }
    // Bytes: three 600-byte messages cannot share a 1000-byte key.
    let (a, b) = session(Cipher::Aes256Gcm, small);
    let big: Vec<Vec<u8>> = (0..3).map(|_| seal(&a, &[1u8; 600])).collect();
    assert_eq!(counter(&a, "encrypt_rekeys"), 2);
    for f in &big {
        assert_eq!(open(&b, f).unwrap(), vec![1u8; 600]);
    }
    assert_eq!(counter(&b, "encrypt_rekeys"), 2);
}

#[test]
fn forged_counter_from_a_future_epoch_does_not_retire_the_key() {
    let small = Limits {
        epoch_bits: 4,
        bytes_per_key: 1 << 30,
    };
    let (a, b) = session(Cipher::Aes256Gcm, small);
    let f = seal(&a, b"genuine");
    let mut forged = f.clone();
    let at = forged.len() - 8;
    forged[at..].copy_from_slice(&(1u64 << 40).to_le_bytes());
    assert!(matches!(open(&b, &forged), Err(Rejected::Forged(_))));
    assert_eq!(open(&b, &f).unwrap(), b"genuine");
}

fn compressible(n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| b"gridwire compress "[i % 18] ^ ((i / 4096) as u8))
        .collect()
}

fn incompressible(n: usize) -> Vec<u8> {
    let mut x: u64 = 0x2545F4914F6CDD1D;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

fn compress_roundtrip(c: &Compress, msg: &[u8]) -> usize {
    let mut f = msg.to_vec();
    let mut s = Vec::new();
    c.seal(2, &mut f, &mut s).unwrap();
    let wire = f.len();
    assert_eq!(c.open(1, &mut f, &mut s), Ok(Opened::Deliver));
    assert_eq!(f, msg);
    wire
}

#[test]
fn compress_roundtrips_compressible_and_incompressible_data() {
    let c = Compress::new(4096, 1).unwrap();
    // Below the threshold: one trailer byte, untouched.
    assert_eq!(compress_roundtrip(&c, &compressible(100)), 101);
    for n in [4096, 60_000, 1 << 20] {
        let w = compress_roundtrip(&c, &compressible(n));
        assert!(w * 4 < n, "{n} compressible bytes went out as {w}");
        let w = compress_roundtrip(&c, &incompressible(n));
        assert_eq!(w, n + 1, "incompressible data must go as is");
    }
    assert_eq!(counter(&c, "compress_msgs"), 3);
    // Skipped = judged and found incompressible (below the threshold is not judged).
    assert_eq!(counter(&c, "compress_skipped"), 3);
    assert!(counter(&c, "compress_bytes_in") > 4 * counter(&c, "compress_bytes_out"));
    assert!(counter(&c, "compress_ns") > 0);
}

#[test]
fn compress_rejects_hostile_frames() {
    let c = Compress::new(64, 1).unwrap();
    let mut s = Vec::new();
    for bad in [
        vec![],
        vec![9],
        vec![1],
        vec![0, 0, 0, 1],
        // Announces 10 bytes, holds garbage.
        vec![1, 2, 3, 10, 0, 0, 0, 1],
        // Announces 4 GiB.
        vec![0xff, 0xff, 0xff, 0xff, 1],
    ] {
        let mut f = bad.clone();
        assert!(
            matches!(c.open(1, &mut f, &mut s), Err(Rejected::Forged(_))),
            "{bad:?}"
        );
    }
    // A genuine frame whose announced length lies.
    let mut f = compressible(5000);
    c.seal(2, &mut f, &mut s).unwrap();
    let at = f.len() - 5;
    f[at..at + 4].copy_from_slice(&4999u32.to_le_bytes());
    assert!(matches!(
        c.open(1, &mut f, &mut s),
        Err(Rejected::Forged(_))
    ));
}

/// A smooth field of doubles (what simulations send): neighbouring values
/// share sign, exponent and leading mantissa bytes.
fn smooth_doubles(n: usize) -> Vec<u8> {
    (0..n / 8)
        .flat_map(|i| (300.0 + (i as f64 * 0.001).sin() * 20.0).to_le_bytes())
        .collect()
}

#[test]
fn byte_shuffle_inverts_for_every_width_and_length() {
    let data = incompressible(4096);
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for w in [4, 8] {
        for n in [0, w, 3 * w, 1000, 4096] {
            let src = &data[..n];
            super::compress::shuffle(src, w, &mut a);
            assert_eq!(a.len(), n);
            if n >= 2 * w {
                // Byte 0 of element 1 is next to byte 0 of element 0.
                assert_eq!((a[0], a[1]), (src[0], src[w]), "width {w}, {n} bytes");
            }
            super::compress::unshuffle(&a, w, &mut b);
            assert_eq!(b, src, "width {w}, {n} bytes");
        }
    }
}

#[test]
fn compress_shuffles_floating_point_arrays_when_it_pays() {
    let c = Compress::new(4096, 1).unwrap();
    let msg = smooth_doubles(1 << 20);
    let plain = zstd::bulk::compress(&msg, 1).unwrap().len();
    let wire = compress_roundtrip(&c, &msg);
    assert_eq!(counter(&c, "compress_shuffled"), 1);
    assert!(
        wire * 5 < plain * 4,
        "shuffled {wire} bytes against {plain} plain"
    );
    // Text is not shuffled, and still compressed.
    let w = compress_roundtrip(&c, &compressible(1 << 20));
    assert!(w * 4 < 1 << 20);
    assert_eq!(counter(&c, "compress_shuffled"), 1);
    // A length that is no multiple of 4 is never shuffled.
    let mut odd = smooth_doubles(1 << 20);
    odd.push(7);
    compress_roundtrip(&c, &odd);
    assert_eq!(counter(&c, "compress_shuffled"), 1);
}

#[test]
fn compress_rejects_hostile_shuffled_frames() {
    let c = Compress::new(4096, 1).unwrap();
    let mut s = Vec::new();
    let mut f = smooth_doubles(1 << 17);
    c.seal(2, &mut f, &mut s).unwrap();
    assert_eq!(f[f.len() - 2..], [8, 2]);
    for (at_end, byte) in [(2, 0u8), (2, 3), (2, 255)] {
        let mut g = f.clone();
        let i = g.len() - at_end;
        g[i] = byte;
        assert!(
            matches!(c.open(1, &mut g, &mut s), Err(Rejected::Forged(_))),
            "width {byte}"
        );
    }
    // An announced length that is no whole number of elements.
    let mut g = f.clone();
    let at = g.len() - 6;
    g[at..at + 4].copy_from_slice(&((1u32 << 17) - 3).to_le_bytes());
    assert!(matches!(
        c.open(1, &mut g, &mut s),
        Err(Rejected::Forged(_))
    ));
    assert_eq!(c.open(1, &mut f, &mut s), Ok(Opened::Deliver));
    assert_eq!(f, smooth_doubles(1 << 17));
}

#[test]
fn compress_then_encrypt_stack_roundtrips() {
    let (a, b) = session(Cipher::Aes256Gcm, limits());
    let c = Compress::new(4096, 1).unwrap();
    let msg = compressible(100_000);
    let mut f = msg.clone();
    let mut s = Vec::new();
    c.seal(2, &mut f, &mut s).unwrap();
    a.seal(2, &mut f, &mut s).unwrap();
    assert!(f.len() < msg.len() / 4);
    assert_eq!(b.open(1, &mut f, &mut s), Ok(Opened::Deliver));
    assert_eq!(c.open(1, &mut f, &mut s), Ok(Opened::Deliver));
    assert_eq!(f, msg);
}

#[test]
fn stack_names_parse_in_canonical_order_only() {
    let (t, base) = super::parse_stack("compress+encrypt+tcp").unwrap();
    assert_eq!(base, "tcp");
    assert_eq!(
        t.iter().map(|t| t.name).collect::<Vec<_>>(),
        ["compress", "encrypt"]
    );
    assert!(super::parse_stack("encrypt+compress+tcp").is_none());
    assert!(super::parse_stack("encrypt+encrypt+tcp").is_none());
    assert!(super::parse_stack("rot13+tcp").is_none());
    assert_eq!(super::transforms_of("encrypt+udp"), ["encrypt"]);
    assert!(super::transforms_of("tcp").is_empty());
}

mod hostile {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Arbitrary frames from a peer with an open session: never a panic,
        /// never delivered (no forger knows the key), always counted.
        #[test]
        fn random_frames_never_open(frame in prop::collection::vec(any::<u8>(), 0..200)) {
            let (_a, b) = session(Cipher::Aes256Gcm, limits());
            let mut f = frame.clone();
            let r = b.open(1, &mut f, &mut Vec::new());
            prop_assert!(r.is_err(), "{frame:?} opened");
            prop_assert_eq!(
                counter(&b, "encrypt_rejected_forged") + counter(&b, "encrypt_rejected_replay"),
                1
            );
        }

        /// Arbitrary compress frames: never a panic; what opens holds exactly
        /// the announced length.
        #[test]
        fn random_compress_frames_are_refused_or_exact(
            body in prop::collection::vec(any::<u8>(), 0..200),
            claimed in 0u32..100_000,
            mode in 0u8..3,
        ) {
            let c = Compress::new(64, 1).unwrap();
            let mut f = body.clone();
            f.extend_from_slice(&claimed.to_le_bytes());
            f.push(mode);
            match c.open(1, &mut f, &mut Vec::new()) {
                Ok(_) if mode == 1 => prop_assert_eq!(f.len(), claimed as usize),
                Ok(_) => prop_assert_eq!(mode, 0),
                Err(_) => {}
            }
        }
    }
}

#[test]
fn gathered_seal_equals_the_contiguous_one_and_opens() {
    use std::io::IoSlice;
    for cipher in [Cipher::Aes256Gcm, Cipher::ChaCha20Poly1305] {
        let (a, b) = session(cipher, limits());
        let (h1, h2, body) = (b"header!!", b"envelope", vec![9u8; 70_000]);
        let mut data = vec![0xAA; 3]; // stale content must not leak into the frame
        a.seal_gather(
            2,
            &[IoSlice::new(h1), IoSlice::new(h2), IoSlice::new(&body)],
            &mut data,
            &mut Vec::new(),
        )
        .unwrap();
        let mut want = h1.to_vec();
        want.extend_from_slice(h2);
        want.extend_from_slice(&body);
        assert_eq!(data.len(), want.len() + OVERHEAD);
        assert_eq!(open(&b, &data).unwrap(), want, "{cipher:?}");
        // One slice, and none at all.
        a.seal_gather(2, &[IoSlice::new(&body)], &mut data, &mut Vec::new())
            .unwrap();
        assert_eq!(open(&b, &data).unwrap(), body);
        a.seal_gather(2, &[], &mut data, &mut Vec::new()).unwrap();
        assert_eq!(open(&b, &data).unwrap(), b"");
    }
}
