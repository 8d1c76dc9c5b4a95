//! The main job (`make demo`): remote service requests over several methods.
//!
//! Run it under the launcher on two emulated hosts:
//!
//! ```text
//! gwrun -n 4 --emulate-hosts 2 --stats target/release/examples/demo
//! ```
//!
//! 1. A token travels around the ring 0 → 1 → … → N-1 → 0 several times;
//!    each hop is a request whose handler forwards the token.
//! 2. Startpoint migration: rank 0 creates an endpoint and gives its
//!    startpoint to rank 1, which forwards it to rank 2 on the other emulated
//!    host. Rank 2 then calls rank 0 directly: the runtime connects on demand
//!    with the descriptor table that travelled with the startpoint, and picks
//!    TCP for that pair by itself, while ranks 0 and 1 talk over shared memory.
//! 3. Ping-pong from rank 0 to every other rank, printing the method the
//!    runtime selected and the one-way latency.

use gridwire_core::{Context, Request, TableSource};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const H_TOKEN: u32 = 1;
const H_PING: u32 = 2;
const H_PONG: u32 = 3;
const H_STARTPOINT: u32 = 4;
const H_HELLO: u32 = 5;
const LAPS: u32 = 10;
const PINGS: u32 = 2000;
const PING_TIME: Duration = Duration::from_millis(300);

fn main() {
    if let Err(e) = run() {
        eprintln!("demo: {e}");
        std::process::exit(1);
    }
}

fn run() -> gridwire_core::Result<()> {
    let ctx = Context::init()?;
    let (rank, size) = (ctx.rank(), ctx.size());
    let laps_done = Arc::new(AtomicU32::new(0));
    let pongs = Arc::new(AtomicU32::new(0));
    let hello_from = Arc::new(AtomicU64::new(u64::MAX));
    let forwarded = Arc::new(Mutex::new(None));

    // Ring: forward the token; rank 0 counts laps and starts the next one.
    {
        let laps = laps_done.clone();
        ctx.register_handler(H_TOKEN, move |ctx, req: Request| {
            let lap = u32::from_le_bytes(req.payload.try_into().expect("4-byte token"));
            let next = (ctx.rank() + 1) % ctx.size();
            if ctx.rank() == 0 {
                laps.store(lap + 1, Ordering::Release);
                if lap + 1 < LAPS {
                    ctx.rsr(
                        &ctx.startpoint(next).unwrap(),
                        H_TOKEN,
                        &(lap + 1).to_le_bytes(),
                    )
                    .unwrap();
                }
            } else {
                ctx.rsr(&ctx.startpoint(next).unwrap(), H_TOKEN, req.payload)
                    .unwrap();
            }
        })
        .expect("valid handler id");
    }
    ctx.register_handler(H_PING, |ctx, req: Request| {
        ctx.rsr(&ctx.startpoint(req.src).unwrap(), H_PONG, req.payload)
            .unwrap();
    })
    .expect("valid handler id");
    {
        let p = pongs.clone();
        ctx.register_handler(H_PONG, move |_, _| {
            p.fetch_add(1, Ordering::Release);
        })
        .expect("valid handler id");
    }
    // Startpoint migration: rank 1 forwards what it gets to rank 2; rank 2 keeps it.
    {
        let f = forwarded.clone();
        ctx.register_handler(H_STARTPOINT, move |ctx, req: Request| {
            let (sp, _) = ctx.unpack_startpoint(req.payload).expect("a valid startpoint");
            if ctx.rank() == 1 && ctx.size() > 2 {
                let packed = ctx.pack_startpoint(&sp, 2).unwrap();
                ctx.rsr(&ctx.startpoint(2).unwrap(), H_STARTPOINT, &packed).unwrap();
                println!("rank 1: received a startpoint to endpoint {} of rank {} and forwarded it to rank 2", sp.endpoint, sp.ctx);
            } else {
                *f.lock().unwrap() = Some(sp);
            }
        }).expect("valid handler id");
    }
    {
        let h = hello_from.clone();
        ctx.register_handler(H_HELLO, move |_, req: Request| {
            println!(
                "rank 0: endpoint {} received \"{}\" directly from rank {}",
                req.endpoint,
                String::from_utf8_lossy(req.payload),
                req.src
            );
            h.store(req.src as u64, Ordering::Release);
        })
        .expect("valid handler id");
    }
    // Nobody sends before every rank has its handlers.
    ctx.bootstrap_barrier()?;
    if rank == 0 {
        println!(
            "gridwire demo: {size} ranks; rank 0 offers methods [{}] on host {}",
            ctx.method_names().join(", "),
            ctx.host_id()
        );
    }

    // 1. Ring.
    if size > 1 {
        let t = Instant::now();
        if rank == 0 {
            ctx.rsr(&ctx.startpoint(1)?, H_TOKEN, &0u32.to_le_bytes())?;
            ctx.wait(|| laps_done.load(Ordering::Acquire) == LAPS);
            println!(
                "ring: {LAPS} laps of {size} hops in {:.1} ms ({:.1} us per hop)",
                t.elapsed().as_secs_f64() * 1e3,
                t.elapsed().as_secs_f64() * 1e6 / f64::from(LAPS * size)
            );
        }
    }

    // 2. Startpoint migration (no barrier before it: a barrier would make
    //    rank 2 talk to rank 0 first, and the point is that it has not).
    if size >= 3 {
        if rank == 0 {
            let ep = ctx.create_endpoint();
            let packed = ctx.pack_startpoint(&ep, 1)?;
            println!(
                "rank 0: created endpoint {} and sent its startpoint to rank 1",
                ep.endpoint
            );
            ctx.rsr(&ctx.startpoint(1)?, H_STARTPOINT, &packed)?;
            let ok = ctx.wait_timeout(Duration::from_secs(30), || {
                hello_from.load(Ordering::Acquire) == 2
            });
            if !ok {
                return Err(gridwire_core::Error::Bootstrap(
                    "rank 2 never called back".into(),
                ));
            }
        } else if rank == 2 {
            ctx.wait(|| forwarded.lock().unwrap().is_some());
            let sp = forwarded.lock().unwrap().expect("set");
            let src = match ctx.table_source(sp.ctx) {
                TableSource::Startpoint => "attached to the startpoint",
                TableSource::Bootstrap => "looked up in the bootstrap",
                TableSource::Given => "handed over at run time",
                TableSource::Unknown => "unknown",
            };
            ctx.rsr(&sp, H_HELLO, b"hello from the other host")?;
            println!(
                "rank 2: got rank 0's startpoint through rank 1 (descriptor table {src}); \
                 called rank 0 directly; the runtime selected {} for 2 -> 0 by itself",
                ctx.method_to(0).unwrap_or("?")
            );
        }
    }
    ctx.barrier()?;
    // 3. Ping-pong from rank 0 to each peer.
    if rank == 0 {
        for peer in 1..size {
            let sp = ctx.startpoint(peer)?;
            let start = pongs.load(Ordering::Acquire);
            let t = Instant::now();
            // At most PINGS round trips or PING_TIME, whichever ends first
            // (across a WAN a round trip takes milliseconds).
            let mut trips = 0;
            while trips < PINGS && (trips < 10 || t.elapsed() < PING_TIME) {
                ctx.rsr(&sp, H_PING, &[0u8; 8])?;
                ctx.wait(|| pongs.load(Ordering::Acquire) == start + trips + 1);
                trips += 1;
            }
            let one_way = t.elapsed().as_secs_f64() * 1e6 / f64::from(2 * trips);
            println!(
                "ping-pong 0 <-> {peer}: method {:<4} one-way latency {one_way:8.2} us (8-byte payload, {trips} round trips)",
                ctx.method_to(peer).unwrap_or("?")
            );
        }
    }
    ctx.barrier()?;

    if rank == 0 && size >= 2 {
        println!(
            "rank 0: methods selected by rank 0: {}",
            (1..size)
                .map(|p| format!("0->{p} {}", ctx.method_to(p).unwrap_or("-")))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    ctx.finalize()?;
    Ok(())
}
