//! How soon traffic flows again after a link between hosts breaks
//! (`bench/failover.sh`), under `gwrun -n 2` on two hosts.
//!
//! `failover_bench CUT_AT PAUSE_S`: rank 0 streams 64-byte messages to
//! rank 1, each carrying its number and the wall-clock time it was handed
//! to the runtime. Before message CUT_AT it prints `CUT-NOW`, sleeps
//! PAUSE_S seconds (the script cuts the pair's traffic meanwhile) and goes
//! on. Rank 1 prints `resume_ms X`: from the send of message CUT_AT (the
//! first after the cut, whose send meets the break, or after which the
//! link goes silent) to its delivery over the replacement link, then
//! `failovers N` (links replaced, summed over rank 1's peers) and the
//! method in use. Both hosts are namespaces of one machine: one clock.

use gridwire_core::{Context, Request};
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const H_STREAM: u32 = 1;
const H_ACK: u32 = 2;
/// Messages after the cut (enough for the ring to be resent and traffic to go on).
const AFTER: u64 = 2000;
/// An acknowledgement per this many messages (bounds what is in flight).
const WINDOW: u64 = 200;

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(cut_at), Some(pause)) = (
        args.first().and_then(|s| s.parse::<u64>().ok()),
        args.get(1).and_then(|s| s.parse::<f64>().ok()),
    ) else {
        eprintln!("usage: failover_bench CUT_AT PAUSE_S (under gwrun -n 2)");
        std::process::exit(2)
    };
    let ctx = Context::init().unwrap_or_else(|e| {
        eprintln!("failover_bench: {e}");
        std::process::exit(2)
    });
    let got = Arc::new(AtomicU64::new(0));
    let resume_ns = Arc::new(AtomicU64::new(0));
    let acks = Arc::new(AtomicU64::new(0));
    let (g, r) = (got.clone(), resume_ns.clone());
    ctx.register_handler(H_STREAM, move |_, req: Request| {
        let at = now_ns();
        if req.payload.len() < 16 {
            return;
        }
        let n = u64::from_le_bytes(req.payload[..8].try_into().unwrap());
        let sent = u64::from_le_bytes(req.payload[8..16].try_into().unwrap());
        if n == cut_at {
            r.store(at.saturating_sub(sent), Ordering::Relaxed);
        }
        g.fetch_add(1, Ordering::Release);
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
    let total = cut_at + AFTER;
    if rank == 0 {
        let mut msg = [0u8; 64];
        for i in 0..total {
            if i == cut_at {
                println!("CUT-NOW {i}");
                let _ = std::io::stdout().flush();
                std::thread::sleep(Duration::from_secs_f64(pause));
            }
            msg[..8].copy_from_slice(&i.to_le_bytes());
            msg[8..16].copy_from_slice(&now_ns().to_le_bytes());
            ctx.rsr(&peer, H_STREAM, &msg).unwrap();
            if (i + 1) % WINDOW == 0 {
                let w = (i + 1) / WINDOW;
                ctx.wait(|| acks.load(Ordering::Acquire) >= w);
            }
        }
    } else {
        for w in 1..=total / WINDOW {
            ctx.wait(|| got.load(Ordering::Acquire) >= w * WINDOW);
            ctx.rsr(&peer, H_ACK, &[]).unwrap();
        }
        ctx.wait(|| got.load(Ordering::Acquire) >= total);
        println!(
            "resume_ms {:.1}",
            resume_ns.load(Ordering::Relaxed) as f64 / 1e6
        );
        println!("failovers {}", ctx.failover_counters().0);
        println!("method {}", ctx.method_to(0).unwrap_or("?"));
    }
    ctx.barrier().unwrap();
    ctx.finalize().unwrap();
}
