//! Multi-process checks of the `udp` method, run under `gwrun` with
//! `GW_METHODS=udp` by `crates/launch/tests/udp_*.rs` and by `bench/udp.sh`.
//! Each mode prints lines starting with an upper-case key the tests parse,
//! and exits non-zero on a failed check.
//!
//! Modes:
//! * `stream N` — every rank sends N checksummed messages of mixed sizes
//!   (1 B..1 MiB, mostly small) to the next rank in a ring and checks that
//!   the previous rank's arrive exactly once, in order, intact; then an
//!   all-to-all sum (a collective) and a barrier.
//! * `freeze` — rank 1 stops itself (SIGSTOP: dead to the network, alive to
//!   the launcher) while rank 0 streams to it; rank 0 reports how long until
//!   its sends failed, then kills rank 1.
//! * `garbage` — rank 0 fires garbage and forged datagrams at rank 1's
//!   socket during a stream; rank 1 still gets exactly its messages.
//! * `pingpong BYTES ITERS` / `bandwidth BYTES ITERS` — ranks 0 and 1
//!   measure latency and bandwidth (the benchmark script's workload).

use gridwire_core::{Context, Request};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const H_DATA: u32 = 1;
const H_SUM: u32 = 2;
const H_INFO: u32 = 3;
const H_PING: u32 = 4;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mode = args.first().map(String::as_str).unwrap_or("");
    let num = |i: usize, d: u64| args.get(i).and_then(|s| s.parse().ok()).unwrap_or(d);
    let ctx = match Context::init() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("udp_check: init: {e}");
            std::process::exit(2);
        }
    };
    let r = match mode {
        "stream" => stream(&ctx, num(1, 1000), None),
        "garbage" => garbage(&ctx, num(1, 2000)),
        "freeze" => freeze(&ctx),
        "pingpong" => pingpong(&ctx, num(1, 8) as usize, num(2, 10_000)),
        "bandwidth" => bandwidth(&ctx, num(1, 1 << 20) as usize, num(2, 200)),
        _ => Err(format!("unknown mode {mode:?}")),
    };
    if let Err(e) = r {
        eprintln!("udp_check[{}]: FAILED: {e}", ctx.rank());
        std::process::exit(1);
    }
    if let Err(e) = ctx.finalize() {
        eprintln!("udp_check[{}]: finalize: {e}", ctx.rank());
        std::process::exit(1);
    }
}

/// SplitMix64, shared by sender and receiver to agree on sizes and bytes.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
    /// 1 B..1 MiB, mostly small (averages about 15 KiB).
    fn size(&mut self) -> usize {
        let u = self.next() % 100;
        (if u < 60 {
            self.range(1, 256)
        } else if u < 90 {
            self.range(257, 16 << 10)
        } else if u < 99 {
            self.range(16 << 10, 128 << 10)
        } else {
            self.range(128 << 10, 1 << 20)
        }) as usize
    }
}

/// FNV-1a, the checksum carried in each message's first 8 bytes.
fn fnv(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &x| {
        (h ^ x as u64).wrapping_mul(0x100_0000_01b3)
    })
}

/// Message `i` from `src`: `[i: u64][fnv(payload): u64][payload]`, shortened
/// to `len` (down to 1 byte, where only the length and first byte are checked).
fn message(src: u32, i: u64, len: usize) -> Vec<u8> {
    let body_len = len.saturating_sub(16);
    let mut r = Rng((src as u64) << 40 ^ i);
    let body: Vec<u8> = (0..body_len).map(|_| r.next() as u8).collect();
    let mut m = Vec::with_capacity(len.max(16));
    m.extend_from_slice(&i.to_le_bytes());
    m.extend_from_slice(&fnv(&body).to_le_bytes());
    m.extend_from_slice(&body);
    m.truncate(len);
    m
}

struct Rx {
    expect: u64,
    sizes: Rng,
    bytes: u64,
    error: Option<String>,
}

fn stream(ctx: &Context, n: u64, during: Option<&dyn Fn(u64)>) -> Result<(), String> {
    let size = ctx.size();
    let me = ctx.rank();
    let to = (me + 1) % size;
    let from = (me + size - 1) % size;
    let rx = Arc::new(Mutex::new(Rx {
        expect: 0,
        sizes: Rng(from as u64 + 1),
        bytes: 0,
        error: None,
    }));
    let r2 = rx.clone();
    ctx.register_handler(H_DATA, move |_, req: Request| {
        let mut rx = r2.lock().unwrap();
        if rx.error.is_some() {
            return;
        }
        let len = rx.sizes.size();
        let want = message(req.src, rx.expect, len);
        let got = req.payload;
        if req.src != from || got.len() != len || got != &want[..] {
            rx.error = Some(format!(
                "message {} from {}: got {} bytes (want {len}){}",
                rx.expect,
                req.src,
                got.len(),
                if got.len() >= 16 {
                    format!(
                        ", index {}",
                        u64::from_le_bytes(got[..8].try_into().unwrap())
                    )
                } else {
                    String::new()
                }
            ));
            return;
        }
        if got.len() >= 16 && fnv(&got[16..]) != u64::from_le_bytes(got[8..16].try_into().unwrap())
        {
            rx.error = Some(format!("message {}: checksum mismatch", rx.expect));
            return;
        }
        rx.expect += 1;
        rx.bytes += len as u64;
    })
    .map_err(|e| e.to_string())?;
    let sums = Arc::new(Mutex::new(Vec::new()));
    let s2 = sums.clone();
    ctx.register_handler(H_SUM, move |_, req: Request| {
        if let Ok(b) = req.payload.try_into() {
            s2.lock().unwrap().push(u64::from_le_bytes(b));
        }
    })
    .map_err(|e| e.to_string())?;
    ctx.barrier().map_err(|e| e.to_string())?;
    let start = Instant::now();
    let mut sizes = Rng(me as u64 + 1);
    let dest = ctx.startpoint(to).map_err(|e| e.to_string())?;
    for i in 0..n {
        let m = message(me, i, sizes.size());
        ctx.rsr(&dest, H_DATA, &m)
            .map_err(|e| format!("send {i}: {e}"))?;
        if let Some(f) = during {
            f(i);
        }
        ctx.progress();
    }
    let ok = ctx.wait_timeout(Duration::from_secs(600), || {
        let rx = rx.lock().unwrap();
        rx.expect == n || rx.error.is_some() || ctx.link_error(from).is_some()
    });
    let rx_state = rx.lock().unwrap();
    if let Some(e) = &rx_state.error {
        return Err(e.clone());
    }
    if let Some(e) = ctx.link_error(from) {
        return Err(format!("link from {from} failed: {e}"));
    }
    if !ok {
        return Err(format!(
            "timed out with {} of {n} messages",
            rx_state.expect
        ));
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "STREAM {me} got={} bytes={} secs={secs:.2} method={}",
        rx_state.expect,
        rx_state.bytes,
        ctx.method_to(to).unwrap_or("none")
    );
    drop(rx_state);
    // A collective: everyone's (rank + 1) * n summed at every rank.
    let mine = (me as u64 + 1) * n;
    for p in 0..size {
        ctx.rsr(&ctx.startpoint(p).unwrap(), H_SUM, &mine.to_le_bytes())
            .map_err(|e| e.to_string())?;
    }
    if !ctx.wait_timeout(Duration::from_secs(120), || {
        sums.lock().unwrap().len() == size as usize
    }) {
        return Err("all-to-all sum timed out".into());
    }
    let total: u64 = sums.lock().unwrap().iter().sum();
    let want = n * (size as u64) * (size as u64 + 1) / 2;
    println!("ALLREDUCE {me} sum={total} want={want}");
    if total != want {
        return Err(format!("sum {total} != {want}"));
    }
    ctx.barrier().map_err(|e| e.to_string())
}

/// Rank 1 tells rank 0 its udp address; rank 0 attacks it during the stream.
fn garbage(ctx: &Context, n: u64) -> Result<(), String> {
    let addr = Arc::new(Mutex::new(None::<String>));
    let a2 = addr.clone();
    ctx.register_handler(H_INFO, move |_, req: Request| {
        *a2.lock().unwrap() = Some(String::from_utf8_lossy(req.payload).into_owned());
    })
    .map_err(|e| e.to_string())?;
    ctx.barrier().map_err(|e| e.to_string())?;
    if ctx.rank() == 1 {
        let mine = ctx
            .table()
            .entries
            .iter()
            .find(|e| e.method == "udp")
            .map(|e| e.descriptor.clone())
            .ok_or("no udp entry")?;
        ctx.rsr(&ctx.startpoint(0).unwrap(), H_INFO, &mine)
            .map_err(|e| e.to_string())?;
    }
    if ctx.rank() != 0 {
        return stream(ctx, n, None);
    }
    if !ctx.wait_timeout(Duration::from_secs(30), || addr.lock().unwrap().is_some()) {
        return Err("no address from rank 1".into());
    }
    // The descriptor is `ip:port` (an explicit GW_UDP_ADDR) or the
    // `gw2 <netns> <port> <addresses>` form; rank 1 is on this host, so its
    // port on loopback reaches it either way.
    let desc = addr.lock().unwrap().clone().unwrap();
    let target: std::net::SocketAddr = match desc.parse() {
        Ok(a) => a,
        Err(_) => {
            let port: u16 = desc
                .split_whitespace()
                .nth(2)
                .and_then(|p| p.parse().ok())
                .ok_or_else(|| format!("unparsable udp descriptor {desc:?}"))?;
            std::net::SocketAddr::from(([127, 0, 0, 1], port))
        }
    };
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let sent = AtomicU64::new(0);
    let attack = |i: u64| {
        let mut r = Rng(i);
        for k in 0..5u64 {
            let len = r.range(0, 200) as usize;
            let mut d: Vec<u8> = (0..len).map(|_| r.next() as u8).collect();
            if k % 2 == 1 && d.len() >= 40 {
                // Well-formed header claiming to come from rank 0 (data, hello, proof ...).
                d[..4].copy_from_slice(&[b'G', b'U', 1, r.range(1, 5) as u8]);
                d[4..8].copy_from_slice(&0u32.to_le_bytes());
                d[8..12].copy_from_slice(&1u32.to_le_bytes());
            }
            if sock.send_to(&d, target).is_ok() {
                sent.fetch_add(1, Ordering::Relaxed);
            }
        }
    };
    let r = stream(ctx, n, Some(&attack));
    println!("GARBAGE sent={}", sent.load(Ordering::Relaxed));
    r
}

fn freeze(ctx: &Context) -> Result<(), String> {
    if ctx.size() != 2 {
        return Err("freeze needs exactly 2 ranks".into());
    }
    let pid = Arc::new(AtomicU64::new(0));
    let p2 = pid.clone();
    let count = Arc::new(AtomicU64::new(0));
    let c2 = count.clone();
    ctx.register_handler(H_INFO, move |_, req: Request| {
        if let Ok(b) = req.payload.try_into() {
            p2.store(u64::from_le_bytes(b), Ordering::Release);
        }
    })
    .map_err(|e| e.to_string())?;
    ctx.register_handler(H_DATA, move |_, _| {
        c2.fetch_add(1, Ordering::Relaxed);
    })
    .map_err(|e| e.to_string())?;
    ctx.barrier().map_err(|e| e.to_string())?;
    if ctx.rank() == 1 {
        let me = std::process::id() as u64;
        ctx.rsr(&ctx.startpoint(0).unwrap(), H_INFO, &me.to_le_bytes())
            .map_err(|e| e.to_string())?;
        ctx.wait_timeout(Duration::from_secs(30), || {
            count.load(Ordering::Relaxed) >= 100
        });
        println!("FROZEN 1");
        // SAFETY: raise takes a signal number only.
        unsafe { libc::raise(libc::SIGSTOP) };
        return Ok(());
    }
    if !ctx.wait_timeout(Duration::from_secs(30), || pid.load(Ordering::Acquire) != 0) {
        return Err("no pid from rank 1".into());
    }
    let dest = ctx.startpoint(1).unwrap();
    let payload = vec![7u8; 20_000];
    let mut first_unacked: Option<Instant> = None;
    let mut sent = 0u64;
    let stop = AtomicBool::new(false);
    let t0 = Instant::now();
    let err = loop {
        if t0.elapsed() > Duration::from_secs(120) {
            break None;
        }
        match ctx.rsr(&dest, H_DATA, &payload) {
            Ok(()) => sent += 1,
            Err(e) => break Some(e.to_string()),
        }
        if sent == 100 {
            first_unacked = Some(Instant::now());
        }
        if sent > 100 {
            // Slow down once the peer has frozen: the point is the detection time.
            ctx.wait_timeout(Duration::from_millis(20), || stop.load(Ordering::Relaxed));
            if let Some(e) = ctx.link_error(1) {
                break Some(e);
            }
        }
    };
    let ms = first_unacked.map_or(0, |t| t.elapsed().as_millis());
    println!(
        "PEER_ERROR ms={ms} sent={sent} error={}",
        err.clone().unwrap_or_else(|| "none".into())
    );
    // SAFETY: kill takes a pid and a signal number only.
    unsafe { libc::kill(pid.load(Ordering::Acquire) as libc::pid_t, libc::SIGKILL) };
    if err.is_none() {
        return Err("no error after 120 s".into());
    }
    std::process::exit(0);
}

fn pingpong(ctx: &Context, bytes: usize, iters: u64) -> Result<(), String> {
    let got = Arc::new(AtomicU64::new(0));
    let g2 = got.clone();
    ctx.register_handler(H_PING, move |_, _| {
        g2.fetch_add(1, Ordering::Release);
    })
    .map_err(|e| e.to_string())?;
    ctx.barrier().map_err(|e| e.to_string())?;
    let me = ctx.rank();
    if me > 1 {
        return ctx.barrier().map_err(|e| e.to_string());
    }
    let peer = ctx.startpoint(1 - me).unwrap();
    let msg = vec![1u8; bytes];
    let warm = iters / 10;
    let mut t = Instant::now();
    for i in 0..iters + warm {
        if i == warm {
            t = Instant::now();
        }
        if me == 0 {
            ctx.rsr(&peer, H_PING, &msg).map_err(|e| e.to_string())?;
            ctx.wait(|| got.load(Ordering::Acquire) > i);
        } else {
            ctx.wait(|| got.load(Ordering::Acquire) > i);
            ctx.rsr(&peer, H_PING, &msg).map_err(|e| e.to_string())?;
        }
    }
    if me == 0 {
        let us = t.elapsed().as_secs_f64() * 1e6 / iters as f64 / 2.0;
        println!(
            "LATENCY bytes={bytes} half_rtt_us={us:.2} method={}",
            ctx.method_to(1).unwrap_or("none")
        );
    }
    ctx.barrier().map_err(|e| e.to_string())
}

fn bandwidth(ctx: &Context, bytes: usize, iters: u64) -> Result<(), String> {
    let got = Arc::new(AtomicU64::new(0));
    let g2 = got.clone();
    ctx.register_handler(H_PING, move |_, _| {
        g2.fetch_add(1, Ordering::Release);
    })
    .map_err(|e| e.to_string())?;
    ctx.barrier().map_err(|e| e.to_string())?;
    let me = ctx.rank();
    if me == 0 {
        let peer = ctx.startpoint(1).unwrap();
        let msg = vec![3u8; bytes];
        let t = Instant::now();
        for _ in 0..iters {
            ctx.rsr(&peer, H_PING, &msg).map_err(|e| e.to_string())?;
        }
        // Rank 1 answers once everything arrived.
        ctx.wait(|| got.load(Ordering::Acquire) >= 1);
        let secs = t.elapsed().as_secs_f64();
        println!(
            "BANDWIDTH bytes={bytes} iters={iters} MB_s={:.1} method={}",
            (bytes as u64 * iters) as f64 / secs / 1e6,
            ctx.method_to(1).unwrap_or("none")
        );
    } else if me == 1 {
        ctx.wait(|| got.load(Ordering::Acquire) >= iters);
        ctx.rsr(&ctx.startpoint(0).unwrap(), H_PING, b"done")
            .map_err(|e| e.to_string())?;
    }
    ctx.barrier().map_err(|e| e.to_string())
}
