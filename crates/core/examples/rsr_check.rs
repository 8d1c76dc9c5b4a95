//! Multi-process checks of the runtime, run under `gwrun` (or `mpiexec.mpich`)
//! by the tests in `crates/launch/tests/runtime.rs`. Each mode prints lines
//! starting with an upper-case key that the tests parse, and exits non-zero
//! on any failed check.
//!
//! Modes: `select`, `migrate`, `big BYTES`, `threads N`, `wrong-secret`, `die-after-setup`,
//! `multicast K`.

use gridwire_core::{Context, MulticastStartpoint, Request, Startpoint, TableSource};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const H_DATA: u32 = 1;
const H_SP: u32 = 2;
const H_HELLO: u32 = 3;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mode = args.first().map(String::as_str).unwrap_or("");
    if mode == "wrong-secret" && std::env::var("PMI_RANK").as_deref() == Ok("1") {
        // This rank pretends to belong to another job: a different secret.
        std::env::set_var("GW_JOB_SECRET", "ab".repeat(32));
    }
    let ctx = match Context::init() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("rsr_check: init: {e}");
            std::process::exit(2);
        }
    };
    let r = match mode {
        "select" => select(&ctx),
        "migrate" => migrate(&ctx),
        "big" => big(
            &ctx,
            args.get(1).and_then(|s| s.parse().ok()).unwrap_or(64 << 20),
        ),
        "threads" => threads(&ctx, args.get(1).and_then(|s| s.parse().ok()).unwrap_or(4)),
        "wrong-secret" => wrong_secret(&ctx),
        "die-after-setup" => die_after_setup(&ctx),
        "multicast" => multicast(&ctx, args.get(1).and_then(|s| s.parse().ok()).unwrap_or(50)),
        _ => Err(format!("unknown mode {mode:?}")),
    };
    if let Err(e) = r {
        eprintln!("rsr_check[{}]: FAILED: {e}", ctx.rank());
        std::process::exit(1);
    }
    if let Err(e) = ctx.finalize() {
        eprintln!("rsr_check[{}]: finalize: {e}", ctx.rank());
        std::process::exit(1);
    }
}

fn counter_handler(ctx: &Context) -> Arc<Mutex<HashMap<u32, u64>>> {
    let got = Arc::new(Mutex::new(HashMap::new()));
    let g = got.clone();
    ctx.register_handler(H_DATA, move |_, req: Request| {
        *g.lock().unwrap().entry(req.src).or_insert(0) += 1;
    })
    .expect("valid handler id");
    got
}

/// Every rank sends to every rank; prints the method chosen for each pair.
fn select(ctx: &Context) -> Result<(), String> {
    let got = counter_handler(ctx);
    ctx.barrier().map_err(|e| e.to_string())?;
    for peer in 0..ctx.size() {
        for _ in 0..10 {
            ctx.rsr(&ctx.startpoint(peer).unwrap(), H_DATA, b"01234567")
                .map_err(|e| e.to_string())?;
        }
    }
    let n = ctx.size() as usize;
    let ok = ctx.wait_timeout(Duration::from_secs(30), || {
        let g = got.lock().unwrap();
        g.len() == n && g.values().all(|&c| c == 10)
    });
    if !ok {
        return Err(format!("received {:?}", got.lock().unwrap()));
    }
    for peer in 0..ctx.size() {
        println!(
            "SELECT {} {} {}",
            ctx.rank(),
            peer,
            ctx.method_to(peer).unwrap_or("none")
        );
    }
    println!("HOST {} {}", ctx.rank(), ctx.host_id());
    Ok(())
}

/// Rank 0 multicasts `k` numbered requests to every rank (itself included);
/// every rank checks it got all of them, in order, with rank 0 as the source.
/// Each rank prints `MCAST rank cross_site cross_host`: the messages it sent
/// during the multicasts to ranks at another site, and at another host.
fn multicast(ctx: &Context, k: u32) -> Result<(), String> {
    const H_MCAST: u32 = 9;
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = got.clone();
    ctx.register_handler(H_MCAST, move |_, req: Request| {
        let seq = req
            .payload
            .get(..4)
            .map(|b| u32::from_le_bytes(b.try_into().unwrap()));
        g.lock().unwrap().push((req.src, seq, req.payload.len()));
    })
    .expect("valid handler id");
    let e = |e: gridwire_core::Error| e.to_string();
    let places: Vec<_> = (0..ctx.size())
        .map(|r| ctx.placement_of(r))
        .collect::<Result<_, _>>()
        .map_err(e)?;
    ctx.barrier().map_err(e)?;
    let sent = |ctx: &Context| -> HashMap<u32, u64> {
        ctx.link_stats()
            .into_iter()
            .map(|s| (s.peer, s.sent_msgs))
            .collect()
    };
    let before = sent(ctx);
    if ctx.rank() == 0 {
        let group = MulticastStartpoint {
            members: (0..ctx.size())
                .map(|r| Startpoint {
                    ctx: r,
                    endpoint: 0,
                })
                .collect(),
        };
        let mut payload = vec![7u8; 1000];
        for seq in 0..k {
            payload[..4].copy_from_slice(&seq.to_le_bytes());
            ctx.rsr_multicast(&group, H_MCAST, &payload).map_err(e)?;
        }
    }
    let ok = ctx.wait_timeout(Duration::from_secs(30), || {
        got.lock().unwrap().len() >= k as usize
    });
    if !ok {
        return Err(format!("received {} of {k}", got.lock().unwrap().len()));
    }
    let g = got.lock().unwrap().clone();
    let want: Vec<_> = (0..k).map(|s| (0u32, Some(s), 1000usize)).collect();
    if g != want {
        return Err(format!(
            "received out of order or wrong: {:?}",
            &g[..g.len().min(8)]
        ));
    }
    // Everyone has everything: the counts below are the multicasts' own.
    let after = sent(ctx);
    ctx.barrier().map_err(e)?;
    let me = &places[ctx.rank() as usize];
    let (mut cross_site, mut cross_host) = (0, 0);
    for (peer, n) in &after {
        let d = n - before.get(peer).copied().unwrap_or(0);
        let p = &places[*peer as usize];
        if p.site != me.site {
            cross_site += d;
        } else if p.host != me.host {
            cross_host += d;
        }
    }
    println!("MCAST {} {cross_site} {cross_host}", ctx.rank());
    Ok(())
}

/// Rank 0's endpoint startpoint goes 0 -> 1 -> 2; rank 2 calls rank 0 directly.
fn migrate(ctx: &Context) -> Result<(), String> {
    if ctx.size() < 3 {
        return Err("needs at least 3 ranks".into());
    }
    let held = Arc::new(Mutex::new(None));
    let h = held.clone();
    ctx.register_handler(H_SP, move |ctx, req: Request| {
        let (sp, _) = ctx
            .unpack_startpoint(req.payload)
            .expect("valid startpoint");
        if ctx.rank() == 1 {
            let p = ctx.pack_startpoint(&sp, 2).unwrap();
            ctx.rsr(&ctx.startpoint(2).unwrap(), H_SP, &p).unwrap();
        } else {
            *h.lock().unwrap() = Some(sp);
        }
    })
    .expect("valid handler id");
    let hello = Arc::new(AtomicU64::new(u64::MAX));
    let hh = hello.clone();
    ctx.register_handler(H_HELLO, move |_, req: Request| {
        hh.store(
            ((req.src as u64) << 32) | req.endpoint as u64,
            Ordering::Release,
        );
    })
    .expect("valid handler id");
    ctx.bootstrap_barrier().map_err(|e| e.to_string())?;
    match ctx.rank() {
        0 => {
            let ep = ctx.create_endpoint();
            let p = ctx.pack_startpoint(&ep, 1).map_err(|e| e.to_string())?;
            ctx.rsr(&ctx.startpoint(1).unwrap(), H_SP, &p)
                .map_err(|e| e.to_string())?;
            if !ctx.wait_timeout(Duration::from_secs(30), || {
                hello.load(Ordering::Acquire) != u64::MAX
            }) {
                return Err("no call from rank 2".into());
            }
            let v = hello.load(Ordering::Acquire);
            println!(
                "HELLO src={} endpoint={} expected_endpoint={}",
                v >> 32,
                v & 0xffff_ffff,
                ep.endpoint
            );
        }
        2 => {
            if !ctx.wait_timeout(Duration::from_secs(30), || held.lock().unwrap().is_some()) {
                return Err("startpoint never arrived".into());
            }
            let sp = held.lock().unwrap().unwrap();
            let source = match ctx.table_source(0) {
                TableSource::Startpoint => "startpoint",
                TableSource::Bootstrap => "bootstrap",
                TableSource::Given => "given",
                TableSource::Unknown => "unknown",
            };
            ctx.rsr(&sp, H_HELLO, b"hi").map_err(|e| e.to_string())?;
            println!(
                "MIGRATE from={} endpoint={} method={} table={source}",
                sp.ctx,
                sp.endpoint,
                ctx.method_to(0).unwrap_or("none")
            );
        }
        _ => {}
    }
    ctx.barrier().map_err(|e| e.to_string())?;
    for peer in 0..ctx.size() {
        if let Some(m) = ctx.method_to(peer) {
            println!("SELECT {} {} {m}", ctx.rank(), peer);
        }
    }
    Ok(())
}

fn checksum(data: &[u8]) -> u64 {
    // FNV-1a over 8-byte words: cheap, order-sensitive.
    let mut h: u64 = 0xcbf29ce484222325;
    for c in data.chunks(8) {
        let mut w = [0u8; 8];
        w[..c.len()].copy_from_slice(c);
        h = (h ^ u64::from_le_bytes(w)).wrapping_mul(0x100000001b3);
    }
    h
}

/// Rank 0 sends `bytes` to every other rank (twice, different contents);
/// receivers check length and checksum.
fn big(ctx: &Context, bytes: usize) -> Result<(), String> {
    let ok = Arc::new(AtomicU32::new(0));
    let bad = Arc::new(Mutex::new(Vec::new()));
    let (o, b) = (ok.clone(), bad.clone());
    ctx.register_handler(H_DATA, move |_, req: Request| {
        if req.payload.len() < 8 {
            b.lock().unwrap().push("short".to_string());
            return;
        }
        let (sum, data) = req.payload.split_at(8);
        let want = u64::from_le_bytes(sum.try_into().unwrap());
        if data.len() != bytes || checksum(data) != want {
            b.lock()
                .unwrap()
                .push(format!("len {} checksum mismatch", data.len()));
        } else {
            o.fetch_add(1, Ordering::Release);
        }
    })
    .expect("valid handler id");
    ctx.barrier().map_err(|e| e.to_string())?;
    if ctx.rank() == 0 {
        for round in 0..2u64 {
            let mut data = vec![0u8; bytes];
            let mut x = 0x9e3779b97f4a7c15u64 ^ round;
            for c in data.chunks_mut(8) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let n = c.len();
                c.copy_from_slice(&x.to_le_bytes()[..n]);
            }
            let sum = checksum(&data).to_le_bytes();
            for peer in 1..ctx.size() {
                ctx.rsr_v(
                    &ctx.startpoint(peer).unwrap(),
                    H_DATA,
                    &[std::io::IoSlice::new(&sum), std::io::IoSlice::new(&data)],
                )
                .map_err(|e| e.to_string())?;
            }
        }
    } else if !ctx.wait_timeout(Duration::from_secs(60), || {
        ok.load(Ordering::Acquire) == 2 || !bad.lock().unwrap().is_empty()
    }) {
        return Err("timed out waiting for the large messages".into());
    }
    if let Some(e) = bad.lock().unwrap().first() {
        return Err(e.clone());
    }
    if ctx.rank() != 0 {
        println!(
            "BIG {} ok {} bytes via {}",
            ctx.rank(),
            bytes,
            ctx.method_to(0).unwrap_or("(received only)")
        );
    }
    ctx.barrier().map_err(|e| e.to_string())?;
    Ok(())
}

/// `n` threads per rank send numbered messages to the next rank concurrently,
/// while also driving progress; the receiver checks per-thread order.
fn threads(ctx: &Context, n: u32) -> Result<(), String> {
    const PER_THREAD: u32 = 2000;
    let next_seq: Arc<Mutex<HashMap<(u32, u32), u32>>> = Arc::new(Mutex::new(HashMap::new()));
    let errors = Arc::new(Mutex::new(Vec::<String>::new()));
    let (ns, er) = (next_seq.clone(), errors.clone());
    ctx.register_handler(H_DATA, move |_, req: Request| {
        let t = u32::from_le_bytes(req.payload[..4].try_into().unwrap());
        let s = u32::from_le_bytes(req.payload[4..8].try_into().unwrap());
        let mut m = ns.lock().unwrap();
        let e = m.entry((req.src, t)).or_insert(0);
        if *e != s {
            er.lock().unwrap().push(format!(
                "from {} thread {t}: got {s}, expected {}",
                req.src, *e
            ));
        }
        *e = s + 1;
    })
    .expect("valid handler id");
    ctx.barrier().map_err(|e| e.to_string())?;
    let to = (ctx.rank() + 1) % ctx.size();
    std::thread::scope(|s| {
        for t in 0..n {
            let ctx = ctx.clone();
            s.spawn(move || {
                let sp = ctx.startpoint(to).unwrap();
                let pad = vec![t as u8; (t as usize * 997) % 5000];
                for i in 0..PER_THREAD {
                    let mut hdr = [0u8; 8];
                    hdr[..4].copy_from_slice(&t.to_le_bytes());
                    hdr[4..].copy_from_slice(&i.to_le_bytes());
                    ctx.rsr_v(
                        &sp,
                        H_DATA,
                        &[std::io::IoSlice::new(&hdr), std::io::IoSlice::new(&pad)],
                    )
                    .unwrap();
                    if i % 64 == 0 {
                        ctx.progress();
                    }
                }
            });
        }
    });
    let from = (ctx.rank() + ctx.size() - 1) % ctx.size();
    let done = ctx.wait_timeout(Duration::from_secs(60), || {
        let m = next_seq.lock().unwrap();
        (0..n).all(|t| m.get(&(from, t)) == Some(&PER_THREAD))
    });
    if let Some(e) = errors.lock().unwrap().first() {
        return Err(e.clone());
    }
    if !done {
        return Err("timed out".into());
    }
    println!(
        "THREADS {} ok {} threads x {PER_THREAD} messages from {from}",
        ctx.rank(),
        n
    );
    ctx.barrier().map_err(|e| e.to_string())?;
    Ok(())
}

/// Rank 1 has a different secret and tries to reach rank 0 over TCP: the
/// connection must be refused and nothing delivered.
fn wrong_secret(ctx: &Context) -> Result<(), String> {
    let got = counter_handler(ctx);
    ctx.bootstrap_barrier().map_err(|e| e.to_string())?;
    if ctx.rank() == 1 {
        let sp = ctx.startpoint(0).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let mut refused = None;
        while refused.is_none() && std::time::Instant::now() < deadline {
            match ctx.rsr(&sp, H_DATA, b"intruder") {
                Ok(()) => {
                    ctx.wait_timeout(Duration::from_millis(5), || false);
                }
                Err(e) => refused = Some(e.to_string()),
            }
        }
        match refused {
            Some(e) => println!("REFUSED {e}"),
            None => return Err("sends kept succeeding with a wrong secret".into()),
        }
    } else {
        // Keep progress running while the intruder tries, then count.
        ctx.wait_timeout(Duration::from_secs(3), || false);
        let n = got.lock().unwrap().get(&1).copied().unwrap_or(0);
        println!("DELIVERED_FROM_INTRUDER {n}");
    }
    Ok(())
}

/// All ranks connect (so segments and sockets exist), then rank 1 kills
/// itself with SIGKILL while the others wait for a message that never comes.
fn die_after_setup(ctx: &Context) -> Result<(), String> {
    let got = counter_handler(ctx);
    ctx.bootstrap_barrier().map_err(|e| e.to_string())?;
    for peer in 0..ctx.size() {
        ctx.rsr(&ctx.startpoint(peer).unwrap(), H_DATA, b"x")
            .map_err(|e| e.to_string())?;
    }
    let n = ctx.size() as usize;
    ctx.wait_timeout(Duration::from_secs(10), || got.lock().unwrap().len() == n);
    println!(
        "READY {} pid {} job {}",
        ctx.rank(),
        std::process::id(),
        std::env::var("GW_JOB_ID").unwrap_or_default()
    );
    // Every rank has printed READY before rank 1 dies.
    ctx.barrier().map_err(|e| e.to_string())?;
    if ctx.rank() == 1 {
        // SAFETY: raising a signal on ourselves; SIGKILL never returns.
        unsafe { libc::raise(libc::SIGKILL) };
    }
    // Wait for something that never arrives: the launcher must end us.
    ctx.wait(|| false);
    Ok(())
}
