//! Whether the compress transform's byte shuffle pays (`bench/compress.sh`):
//! for several kinds of 4 MiB messages, the wire size and the seal + open
//! time of the transform as it decides by itself (shuffled or not), against
//! plain zstd at the same level (the transform without the shuffle) and
//! against memcpy of the message (the floor of any transform). The
//! effective bandwidth over a link of `LINK_MBIT` (default 100) Mbit/s is
//! message bytes ÷ (seal + wire bytes ÷ link rate + open), the transform's
//! stages not overlapped. Markdown on stdout.
//!
//! `cargo run --release -p gridwire-core --example compress_bench [REPS]`

use gridwire_core::method::transform::compress::Compress;
use gridwire_core::method::transform::{Opened, Transform};
use std::time::Instant;

const LEN: usize = 4 << 20;

fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

fn kinds() -> Vec<(&'static str, Vec<u8>)> {
    let mut x = 0x2545F4914F6CDD1Du64;
    let smooth64: Vec<u8> = (0..LEN / 8)
        .flat_map(|i| (300.0 + (i as f64 * 0.001).sin() * 20.0).to_le_bytes())
        .collect();
    let noisy64: Vec<u8> = (0..LEN / 8)
        .flat_map(|i| {
            let noise = (xorshift(&mut x) >> 11) as f64 / (1u64 << 53) as f64;
            (1000.0 + i as f64 * 1e-3 + noise * 1e-2).to_le_bytes()
        })
        .collect();
    let smooth32: Vec<u8> = (0..LEN / 4)
        .flat_map(|i| (1.5f32 + (i as f32 * 0.0005).cos()).to_le_bytes())
        .collect();
    let ints: Vec<u8> = (0..LEN / 4)
        .flat_map(|i| ((i as u32) / 3).to_le_bytes())
        .collect();
    let text: Vec<u8> = (0..LEN)
        .map(|i| b"gridwire compress "[i % 18] ^ ((i / 4096) as u8))
        .collect();
    let random: Vec<u8> = (0..LEN).map(|_| (xorshift(&mut x) >> 24) as u8).collect();
    vec![
        ("doubles, smooth field", smooth64),
        ("doubles, noisy low bits", noisy64),
        ("floats, smooth field", smooth32),
        ("32-bit integers, slowly rising", ints),
        ("text", text),
        ("random bytes", random),
    ]
}

/// Fastest of `reps`: (seal seconds, open seconds, wire bytes, shuffled).
fn transform(msg: &[u8], reps: usize) -> (f64, f64, usize, bool) {
    let c = Compress::new(4096, 1).expect("zstd");
    let (mut best_seal, mut best_open, mut wire) = (f64::MAX, f64::MAX, 0);
    let mut s = Vec::new();
    for _ in 0..reps {
        let mut f = msg.to_vec();
        let t = Instant::now();
        c.seal(1, &mut f, &mut s).expect("seal");
        best_seal = best_seal.min(t.elapsed().as_secs_f64());
        wire = f.len();
        let t = Instant::now();
        assert_eq!(c.open(0, &mut f, &mut s), Ok(Opened::Deliver));
        best_open = best_open.min(t.elapsed().as_secs_f64());
        assert!(f == msg, "round trip");
    }
    let shuffled = c
        .counters()
        .iter()
        .any(|(k, v)| *k == "compress_shuffled" && *v > 0);
    (best_seal, best_open, wire, shuffled)
}

/// Plain zstd at level 1: (compress s, decompress s, bytes).
fn plain(msg: &[u8], reps: usize) -> (f64, f64, usize) {
    let (mut bc, mut bd, mut n) = (f64::MAX, f64::MAX, 0);
    for _ in 0..reps {
        let t = Instant::now();
        let z = zstd::bulk::compress(msg, 1).expect("zstd");
        bc = bc.min(t.elapsed().as_secs_f64());
        n = z.len();
        let t = Instant::now();
        let back = zstd::bulk::decompress(&z, msg.len()).expect("zstd");
        bd = bd.min(t.elapsed().as_secs_f64());
        assert!(back == msg);
    }
    (bc, bd, n)
}

fn memcpy(msg: &[u8], reps: usize) -> f64 {
    let mut out = vec![0u8; msg.len()];
    let mut best = f64::MAX;
    for _ in 0..reps {
        let t = Instant::now();
        out.copy_from_slice(std::hint::black_box(msg));
        std::hint::black_box(&out);
        best = best.min(t.elapsed().as_secs_f64());
    }
    best
}

fn main() {
    let reps: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(7);
    let mbit: f64 = std::env::var("LINK_MBIT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100.0);
    let link = mbit * 1e6 / 8.0;
    let mb = |bytes: usize, s: f64| bytes as f64 / s / 1e6;
    println!(
        "4 MiB messages, zstd level 1, fastest of {reps}; effective = bytes ÷ (seal + wire ÷ {mbit} Mbit/s + open)\n"
    );
    println!("| data | transform shuffled | ratio plain zstd | ratio transform | transform/plain ratio | seal MB/s | open MB/s | memcpy MB/s | effective MB/s plain zstd | effective MB/s transform | uncompressed MB/s |");
    println!("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (name, msg) in kinds() {
        let (ps, po, pn) = plain(&msg, reps);
        let (ts, to, tn, shuffled) = transform(&msg, reps);
        let cp = memcpy(&msg, reps);
        let n = msg.len();
        let eff = |s: f64, wire: usize, o: f64| n as f64 / (s + wire as f64 / link + o) / 1e6;
        let (rp, rt) = (n as f64 / pn as f64, n as f64 / tn as f64);
        // Sent as is: opening only drops the trailer byte.
        let open = if tn == n + 1 {
            "— (as is)".to_string()
        } else {
            format!("{:.0}", mb(n, to))
        };
        println!(
            "| {name} | {} | {rp:.2} | {rt:.2} | {:.2} | {:.0} | {open} | {:.0} | {:.1} | {:.1} | {:.1} |",
            if shuffled { "yes" } else { "no" },
            rt / rp,
            mb(n, ts),
            mb(n, cp),
            eff(ps, pn, po),
            eff(ts, tn, to),
            link / 1e6
        );
    }
}
