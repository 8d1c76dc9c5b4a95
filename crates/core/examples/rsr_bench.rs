//! RSR benchmark between ranks 0 and 1 (run under `gwrun -n 2`; choose the
//! method with `GW_METHODS`). Prints lines in the same format as
//! `bench/c/mpi_pingpong.c`, so `bench/run.sh` reads both alike:
//! `lat SIZE usec` (ping-pong one-way latency) and `bw SIZE MB/s`
//! (streaming: a window of 16 requests per acknowledgement, MB = 10^6 bytes).

use gridwire_core::{Context, Request};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

const H_PING: u32 = 1;
const H_PONG: u32 = 2;
const H_STREAM: u32 = 3;
const H_ACK: u32 = 4;

fn main() {
    let ctx = Context::init().unwrap_or_else(|e| {
        eprintln!("rsr_bench: {e}");
        std::process::exit(2)
    });
    if ctx.size() < 2 {
        eprintln!("rsr_bench: needs 2 ranks");
        std::process::exit(2);
    }
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
    ctx.register_handler(H_STREAM, move |_, _| {
        s.fetch_add(1, Ordering::Release);
    })
    .unwrap();
    let a = acks.clone();
    ctx.register_handler(H_ACK, move |_, _| {
        a.fetch_add(1, Ordering::Release);
    })
    .unwrap();
    ctx.bootstrap_barrier().unwrap();
    let buf = vec![7u8; 4 << 20];
    let rank = ctx.rank();
    // `rsr_bench 8 1024`: only these latency sizes (and no bandwidth part),
    // e.g. to profile one size.
    let only: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let sizes = if only.is_empty() {
        vec![0usize, 8, 1024, 65536, 1 << 20]
    } else {
        only.clone()
    };
    for &n in &sizes {
        let iters: u64 = if n >= 65536 {
            500
        } else if only.is_empty() {
            5000
        } else {
            50000
        };
        let warm = iters / 10;
        ctx.barrier().unwrap();
        if rank == 0 {
            let sp = ctx.startpoint(1).unwrap();
            let base = pongs.load(Ordering::Acquire);
            let mut t0 = Instant::now();
            // Also the least one-way latency over batches: what a run costs
            // undisturbed on a shared machine (the C floors report the same).
            let batch = if n >= 65536 { 50 } else { 500 };
            let (mut tb, mut best) = (Instant::now(), f64::MAX);
            for i in 0..iters {
                if i == warm {
                    t0 = Instant::now();
                }
                if i >= warm && (i - warm).is_multiple_of(batch) {
                    if i > warm {
                        best = best.min(tb.elapsed().as_secs_f64() * 1e6 / (2 * batch) as f64);
                    }
                    tb = Instant::now();
                }
                ctx.rsr(&sp, H_PING, &buf[..n]).unwrap();
                ctx.wait(|| pongs.load(Ordering::Acquire) == base + i + 1);
            }
            let us = t0.elapsed().as_secs_f64() * 1e6 / (2.0 * (iters - warm) as f64);
            println!("lat {n} {us:.2}");
            println!("best {n} {best:.3}");
        }
    }
    // Streaming bandwidth: rank 0 sends windows of 16 x 4 MiB; rank 1 acks each window.
    if !only.is_empty() {
        ctx.finalize().unwrap();
        return;
    }
    let n = 4usize << 20;
    let reps = 20u64;
    ctx.barrier().unwrap();
    let t0 = Instant::now();
    if rank == 0 {
        let sp = ctx.startpoint(1).unwrap();
        for r in 0..reps {
            for _ in 0..16 {
                ctx.rsr(&sp, H_STREAM, &buf[..n]).unwrap();
            }
            ctx.wait(|| acks.load(Ordering::Acquire) == r + 1);
        }
        let mbs = (n as f64) * 16.0 * reps as f64 / t0.elapsed().as_secs_f64() / 1e6;
        println!("bw {n} {mbs:.0}");
        println!("method {}", ctx.method_to(1).unwrap_or("?"));
    } else if rank == 1 {
        let sp = ctx.startpoint(0).unwrap();
        for r in 0..reps {
            ctx.wait(|| streamed.load(Ordering::Acquire) == (r + 1) * 16);
            ctx.rsr(&sp, H_ACK, &[]).unwrap();
        }
    }
    ctx.finalize().unwrap();
}
