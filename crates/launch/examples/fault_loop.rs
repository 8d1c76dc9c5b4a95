//! A job that keeps exchanging messages until it is killed: the rank
//! program of the fault-injection test (crates/launch/tests/fault_kills.rs).
//!
//! Every rank sends one request per round to the next rank of a ring and
//! waits for the previous rank's; sizes alternate between small (eager)
//! and 128 KiB (large transfers), so a kill lands in the middle of either.
//! After the first round each rank prints `READY <rank> pid <pid> job <id>`.
//! When a link breaks, the rank aborts the job naming the peer, as an MPI
//! program would. Without a kill the job ends by itself after
//! `FAULT_LOOP_SECS` seconds (default 60), so it can never run forever.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gridwire_core::Context;

const H_RING: u32 = 1;
const LARGE: usize = 128 * 1024;

fn main() {
    let ctx = match Context::init() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("fault_loop: init: {e}");
            std::process::exit(2);
        }
    };
    let secs: u64 = std::env::var("FAULT_LOOP_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let got = Arc::new(AtomicU64::new(0));
    let g = got.clone();
    ctx.register_handler(H_RING, move |_, _| {
        g.fetch_add(1, Ordering::Relaxed);
    })
    .expect("handler");
    if let Err(e) = ctx.bootstrap_barrier() {
        eprintln!("fault_loop[{}]: barrier: {e}", ctx.rank());
        std::process::exit(3);
    }
    let (rank, size) = (ctx.rank(), ctx.size());
    let next = (rank + 1) % size;
    let prev = (rank + size - 1) % size;
    let sp = ctx.startpoint(next).expect("startpoint");
    let large_len = std::env::var("FAULT_LOOP_LARGE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(LARGE);
    let large = vec![0x5au8; large_len];
    let end = Instant::now() + Duration::from_secs(secs);
    let mut round: u64 = 0;
    while Instant::now() < end {
        let payload: &[u8] = if round % 2 == 1 { &large } else { b"ring" };
        if let Err(e) = ctx.rsr(&sp, H_RING, payload) {
            ctx.abort(1, &format!("send to rank {next}: {e}"));
        }
        round += 1;
        loop {
            if ctx.wait_timeout(Duration::from_millis(100), || {
                got.load(Ordering::Relaxed) >= round
            }) {
                break;
            }
            for peer in [prev, next] {
                if let Some(e) = ctx.link_error(peer) {
                    ctx.abort(1, &format!("link to rank {peer} failed: {e}"));
                }
            }
            if Instant::now() >= end {
                break;
            }
        }
        if round == 1 {
            println!(
                "READY {rank} pid {} job {}",
                std::process::id(),
                std::env::var("GW_JOB_ID").unwrap_or_else(|_| "-".into())
            );
        }
    }
    if let Err(e) = ctx.finalize() {
        eprintln!("fault_loop[{rank}]: finalize: {e}");
        std::process::exit(1);
    }
}
