//! How soon traffic flows again after a link between hosts breaks
//! (`bench/failover.sh`), under `gwrun -n 2` on two hosts.
//!
//! `failover_bench CUT_AT GO_FILE`: rank 0 streams 64-byte messages to
//! rank 1, each carrying its number and the wall-clock time it was handed
//! to the runtime. Before message CUT_AT it prints `CUT-NOW` and waits
//! until GO_FILE exists (the script creates it once the pair's traffic is
//! cut; at most 60 s), then goes on. Rank 1 prints `resume_ms X`: from the send of message CUT_AT (the
//! first after the cut, whose send meets the break, or after which the
//! link goes silent) to its delivery over the replacement link, then
//! `failovers N` (links replaced, summed over rank 1's peers) and the
//! method in use. Both hosts are namespaces of one machine: one clock.

use gridwire_core::{Context, Request};
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

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

/// Sends this process's stderr through a pipe; a thread passes every
/// line on to the real stderr and stores when the first one saying
/// `failing over` came (wall-clock nanoseconds) in `detected`.
fn stamp_stderr(detected: Arc<AtomicU64>) {
    use std::io::BufRead;
    use std::os::fd::FromRawFd;
    let mut fds = [0i32; 2];
    // SAFETY: pipe(2) writes two descriptors into the array it is given.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return;
    }
    // SAFETY: plain descriptor calls on descriptors this process owns:
    // the real stderr is kept as a duplicate, then the pipe's write end
    // takes its place (fd 2) and its own number is closed.
    let real = unsafe {
        let real = libc::dup(2);
        libc::dup2(fds[1], 2);
        libc::close(fds[1]);
        real
    };
    if real < 0 {
        return;
    }
    // SAFETY: both descriptors are owned here and by nothing else.
    let (read_end, mut out) = unsafe {
        (
            std::fs::File::from_raw_fd(fds[0]),
            std::fs::File::from_raw_fd(real),
        )
    };
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(read_end)
            .lines()
            .map_while(Result::ok)
        {
            if line.contains("failing over") {
                let _ =
                    detected.compare_exchange(0, now_ns(), Ordering::Relaxed, Ordering::Relaxed);
            }
            let _ = writeln!(out, "{line}");
        }
    });
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(cut_at), Some(go)) = (
        args.first().and_then(|s| s.parse::<u64>().ok()),
        args.get(1).map(std::path::PathBuf::from),
    ) else {
        eprintln!("usage: failover_bench CUT_AT GO_FILE (under gwrun -n 2)");
        std::process::exit(2)
    };
    let detected = Arc::new(AtomicU64::new(0));
    stamp_stderr(detected.clone());
    let ctx = Context::init().unwrap_or_else(|e| {
        eprintln!("failover_bench: {e}");
        std::process::exit(2)
    });
    let got = Arc::new(AtomicU64::new(0));
    let resume_ns = Arc::new(AtomicU64::new(0));
    let acks = Arc::new(AtomicU64::new(0));
    let delivered_ns = Arc::new(AtomicU64::new(0));
    let (g, r, d) = (got.clone(), resume_ns.clone(), delivered_ns.clone());
    ctx.register_handler(H_STREAM, move |_, req: Request| {
        let at = now_ns();
        if req.payload.len() < 16 {
            return;
        }
        let n = u64::from_le_bytes(req.payload[..8].try_into().unwrap());
        let sent = u64::from_le_bytes(req.payload[8..16].try_into().unwrap());
        if n == cut_at {
            r.store(at.saturating_sub(sent), Ordering::Relaxed);
            d.store(at, Ordering::Relaxed);
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
                let until = Instant::now() + Duration::from_secs(60);
                while !go.exists() && Instant::now() < until {
                    std::thread::sleep(Duration::from_millis(1));
                }
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
        println!("delivered_ns {}", delivered_ns.load(Ordering::Relaxed));
        println!("failovers {}", ctx.failover_counters().0);
        println!("method {}", ctx.method_to(0).unwrap_or("?"));
    }
    ctx.barrier().unwrap();
    if rank == 0 {
        println!("detected_ns {}", detected.load(Ordering::Relaxed));
    }
    ctx.finalize().unwrap();
}
