//! Benchmarks of the transforms (`bench/wan.sh`).
//!
//! * `wan_bench aead`: single-core seal rate of the encrypt transform at
//!   32 KiB and 4 MiB (`aead SIZE MB/s CIPHER`), and the zstd -1 ratio of
//!   the `text` data (`ratio R`). No launcher.
//! * `wan_bench net DATA SECS SIZE…` under `gwrun -n 2`: rank 0 measures
//!   the 8 B ping-pong one-way latency (`lat 8 us`) and, per SIZE, the
//!   streaming bandwidth for about SECS seconds (`bw SIZE MB/s`, MB = 10^6
//!   bytes of payload, windows of messages acknowledged by rank 1), then
//!   prints the method (`method encrypt+tcp`). DATA: `random`
//!   (incompressible) or `text` (words from a small vocabulary; zstd -1
//!   ratio printed by `aead`).

use gridwire_core::method::transform::compress::Compress;
use gridwire_core::method::transform::encrypt::{Cipher, Encrypt, Limits};
use gridwire_core::method::transform::Transform;
use gridwire_core::{Context, Request};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const H_PING: u32 = 1;
const H_PONG: u32 = 2;
const H_STREAM: u32 = 3;
const H_ACK: u32 = 4;

fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

fn data(kind: &str, n: usize) -> Vec<u8> {
    let mut x = 0x9e3779b97f4a7c15u64;
    if kind == "random" {
        return (0..n).map(|_| (xorshift(&mut x) >> 24) as u8).collect();
    }
    const WORDS: [&str; 24] = [
        "grid", "wire", "message", "rank", "site", "host", "link", "send", "receive", "buffer",
        "tcp", "udp", "encrypt", "compress", "window", "packet", "nexus", "globus", "mpi",
        "barrier", "reduce", "gather", "scatter", "status",
    ];
    let mut out = Vec::with_capacity(n + 16);
    while out.len() < n {
        let r = xorshift(&mut x);
        out.extend_from_slice(WORDS[(r % 24) as usize].as_bytes());
        out.push(if r.is_multiple_of(11) { b'\n' } else { b' ' });
        if r.is_multiple_of(7) {
            out.extend_from_slice((r % 1000).to_string().as_bytes());
            out.push(b' ');
        }
    }
    out.truncate(n);
    out
}

fn aead() {
    for cipher in [Cipher::auto(), Cipher::ChaCha20Poly1305] {
        let limits = Limits {
            epoch_bits: 24,
            bytes_per_key: 1 << 36,
        };
        let a = Encrypt::new(0, [1; 32], cipher, limits).unwrap();
        let b = Encrypt::new(1, [1; 32], cipher, limits).unwrap();
        a.connect(1, &b.descriptor()).unwrap();
        for size in [32usize << 10, 4 << 20] {
            let src = vec![7u8; size];
            let mut buf = Vec::with_capacity(size + 64);
            let mut scratch = Vec::new();
            let t0 = Instant::now();
            let mut bytes = 0usize;
            while t0.elapsed() < Duration::from_millis(400) {
                buf.clear();
                buf.extend_from_slice(&src);
                a.seal(1, &mut buf, &mut scratch).unwrap();
                bytes += size;
            }
            let mbs = bytes as f64 / t0.elapsed().as_secs_f64() / 1e6;
            println!("aead {size} {mbs:.0} {}", cipher.name());
        }
    }
    let text = data("text", 4 << 20);
    let c = Compress::new(64, 1).unwrap();
    let mut f = text.clone();
    c.seal(0, &mut f, &mut Vec::new()).unwrap();
    println!("ratio {:.2}", text.len() as f64 / f.len() as f64);
}

fn net(kind: &str, secs: f64, sizes: &[usize]) {
    let ctx = Context::init().unwrap_or_else(|e| {
        eprintln!("wan_bench: {e}");
        std::process::exit(2)
    });
    let pongs = Arc::new(AtomicU64::new(0));
    let streamed = Arc::new(AtomicU64::new(0));
    let acks = Arc::new(AtomicU64::new(0));
    ctx.register_handler(H_PING, |ctx, req: Request| {
        ctx.rsr(&ctx.startpoint(req.src).unwrap(), H_PONG, req.payload)
            .unwrap();
    })
    .unwrap();
    let p = pongs.clone();
    ctx.register_handler(H_PONG, move |_, _| {
        p.fetch_add(1, Ordering::Release);
    })
    .unwrap();
    let s = streamed.clone();
    ctx.register_handler(H_STREAM, move |_, req: Request| {
        // A zero-length message is the end of a size's stream.
        let v = if req.payload.is_empty() { 1 << 40 } else { 1 };
        s.fetch_add(v, Ordering::Release);
    })
    .unwrap();
    let a = acks.clone();
    ctx.register_handler(H_ACK, move |_, _| {
        a.fetch_add(1, Ordering::Release);
    })
    .unwrap();
    ctx.bootstrap_barrier().unwrap();
    let rank = ctx.rank();
    let peer = ctx.startpoint(1 - rank).unwrap();
    // Latency: 8 B ping-pong for about a third of SECS.
    ctx.barrier().unwrap();
    if rank == 0 {
        let payload = [1u8; 8];
        let (mut i, mut t0) = (0u64, Instant::now());
        let mut timed = 0u64;
        loop {
            if i == 200 {
                t0 = Instant::now();
            }
            ctx.rsr(&peer, H_PING, &payload).unwrap();
            ctx.wait(|| pongs.load(Ordering::Acquire) == i + 1);
            i += 1;
            if i > 200 {
                timed += 1;
                if timed.is_multiple_of(100) && t0.elapsed().as_secs_f64() > secs / 3.0 {
                    break;
                }
            }
        }
        let us = t0.elapsed().as_secs_f64() * 1e6 / (2.0 * timed as f64);
        println!("lat 8 {us:.2}");
    }
    let buf = data(kind, sizes.iter().copied().max().unwrap_or(0));
    for &n in sizes {
        // Windows of about 8 MiB (2..64 messages) per acknowledgement.
        let window = ((8usize << 20) / n).clamp(2, 64) as u64;
        ctx.barrier().unwrap();
        streamed.store(0, Ordering::Release);
        acks.store(0, Ordering::Release);
        ctx.barrier().unwrap();
        if rank == 0 {
            let t0 = Instant::now();
            let mut w = 0u64;
            while w < 2 || t0.elapsed().as_secs_f64() < secs {
                for _ in 0..window {
                    ctx.rsr(&peer, H_STREAM, &buf[..n]).unwrap();
                }
                w += 1;
                ctx.wait(|| acks.load(Ordering::Acquire) == w);
            }
            let mbs = (n as u64 * window * w) as f64 / t0.elapsed().as_secs_f64() / 1e6;
            ctx.rsr(&peer, H_STREAM, &[]).unwrap();
            println!("bw {n} {mbs:.1}");
        } else {
            let mut w = 0u64;
            loop {
                ctx.wait(|| {
                    let s = streamed.load(Ordering::Acquire);
                    s >= 1 << 40 || s >= (w + 1) * window
                });
                if streamed.load(Ordering::Acquire) >= 1 << 40 {
                    break;
                }
                w += 1;
                ctx.rsr(&peer, H_ACK, &[]).unwrap();
            }
        }
    }
    if rank == 0 {
        println!("method {}", ctx.method_to(1).unwrap_or("?"));
    }
    ctx.barrier().unwrap();
    ctx.finalize().unwrap();
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("aead") => aead(),
        Some("net") if args.len() >= 4 => {
            let secs: f64 = args[2].parse().expect("SECS");
            let sizes: Vec<usize> = args[3..].iter().map(|s| s.parse().expect("SIZE")).collect();
            net(&args[1], secs, &sizes)
        }
        _ => {
            eprintln!("usage: wan_bench aead | wan_bench net random|text SECS SIZE...");
            std::process::exit(2)
        }
    }
}
