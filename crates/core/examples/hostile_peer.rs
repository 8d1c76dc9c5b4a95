//! A hostile but authenticated tcp peer, for `make reliability`
//! (tests/reliability/hostile-peer.sh): it knows the job secret, passes the
//! handshake of a rank's tcp listener as a rank of the job, and then sends
//! random frames. The receiver must fail that link with a clear error that
//! names the peer, and never crash.
//!
//!   hostile_peer ADDR:PORT --to CONTEXT --as CONTEXT [--secret HEX]
//!                [--frames N] [--seed S] [--max-len BYTES]
//!
//! The secret defaults to `GW_JOB_SECRET` (the script reads it from a rank's
//! environment). Frames are `[u32 length][bytes]` like the tcp method's: some
//! short, some of plausible MPI-envelope size, some announcing more than the
//! receiver accepts, and a few truncated at the end. Exit 0 when the whole
//! handshake passed (what the receiver then does is judged by the script),
//! 1 when it did not, 2 on usage errors.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use gridwire_core::auth::{self, Role, NONCE_LEN, PROOF_LEN};

/// Must match the tcp method's handshake (crates/core/src/method/tcp.rs).
const MAGIC: &[u8; 4] = b"GWT2";
const CHALLENGE_LEN: usize = NONCE_LEN + PROOF_LEN + 1;

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

struct Args {
    addr: String,
    to: u32,
    me: u32,
    secret: [u8; 32],
    frames: u32,
    seed: u64,
    max_len: u32,
}

fn usage(why: &str) -> ! {
    eprintln!("hostile_peer: {why}");
    eprintln!(
        "usage: hostile_peer ADDR:PORT --to CONTEXT --as CONTEXT [--secret HEX] [--frames N] [--seed S] [--max-len BYTES]"
    );
    std::process::exit(2)
}

fn parse_args() -> Args {
    let mut it = std::env::args().skip(1);
    let mut addr = None;
    let (mut to, mut me) = (None, None);
    let mut secret = std::env::var("GW_JOB_SECRET").ok();
    let (mut frames, mut seed, mut max_len) = (1000u32, 19u64, 4096u32);
    while let Some(a) = it.next() {
        let mut val = |name: &str| {
            it.next()
                .unwrap_or_else(|| usage(&format!("{name} needs a value")))
        };
        match a.as_str() {
            "--to" => to = val("--to").parse().ok(),
            "--as" => me = val("--as").parse().ok(),
            "--secret" => secret = Some(val("--secret")),
            "--frames" => {
                frames = val("--frames")
                    .parse()
                    .unwrap_or_else(|_| usage("bad --frames"))
            }
            "--seed" => {
                seed = val("--seed")
                    .parse()
                    .unwrap_or_else(|_| usage("bad --seed"))
            }
            "--max-len" => {
                max_len = val("--max-len")
                    .parse()
                    .unwrap_or_else(|_| usage("bad --max-len"))
            }
            s if !s.starts_with('-') && addr.is_none() => addr = Some(s.to_string()),
            s => usage(&format!("unknown argument {s}")),
        }
    }
    let secret = secret.unwrap_or_else(|| usage("no --secret and no GW_JOB_SECRET"));
    Args {
        addr: addr.unwrap_or_else(|| usage("no address")),
        to: to.unwrap_or_else(|| usage("no --to")),
        me: me.unwrap_or_else(|| usage("no --as")),
        secret: auth::parse_secret(&secret)
            .unwrap_or_else(|| usage("the secret is not 64 hex digits")),
        frames,
        seed: seed | 1,
        max_len,
    }
}

fn handshake(s: &mut TcpStream, a: &Args) -> std::io::Result<()> {
    let mine = auth::nonce();
    let mut hello = Vec::with_capacity(12 + NONCE_LEN);
    hello.extend_from_slice(MAGIC);
    hello.extend_from_slice(&a.me.to_le_bytes());
    hello.extend_from_slice(&a.to.to_le_bytes());
    hello.extend_from_slice(&mine);
    s.write_all(&hello)?;
    let mut ch = [0u8; CHALLENGE_LEN];
    s.read_exact(&mut ch)?;
    let theirs: [u8; NONCE_LEN] = ch[..NONCE_LEN].try_into().expect("slice of NONCE_LEN");
    if !auth::verify(
        &a.secret,
        Role::Acceptor,
        &theirs,
        &mine,
        a.to,
        a.me,
        &ch[NONCE_LEN..NONCE_LEN + PROOF_LEN],
    ) {
        return Err(std::io::Error::other(
            "the listener's proof does not verify (wrong secret?)",
        ));
    }
    let proof = auth::proof(&a.secret, Role::Connector, &mine, &theirs, a.me, a.to);
    s.write_all(&proof)
}

fn main() {
    let a = parse_args();
    let mut s = TcpStream::connect(&a.addr).unwrap_or_else(|e| {
        eprintln!("hostile_peer: connect {}: {e}", a.addr);
        std::process::exit(1)
    });
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    if let Err(e) = handshake(&mut s, &a) {
        eprintln!(
            "hostile_peer: handshake with context {} at {}: {e}",
            a.to, a.addr
        );
        std::process::exit(1);
    }
    eprintln!(
        "hostile_peer: authenticated to context {} as context {}",
        a.to, a.me
    );
    let mut rng = XorShift(a.seed);
    let (mut sent, mut bytes) = (0u32, 0u64);
    for i in 0..a.frames {
        // Mostly plausible lengths (envelopes are a few dozen bytes), some
        // empty, and every 50th one announcing far more than it sends.
        let len = match rng.below(10) {
            0 => 0,
            1..=6 => rng.below(64) as u32,
            _ => rng.below(u64::from(a.max_len) + 1) as u32,
        };
        let announced = if i % 50 == 49 {
            u32::MAX - rng.below(1 << 20) as u32
        } else {
            len
        };
        let mut frame = Vec::with_capacity(4 + len as usize);
        frame.extend_from_slice(&announced.to_le_bytes());
        frame.extend((0..len).map(|_| rng.next() as u8));
        if s.write_all(&frame).is_err() {
            // The receiver closed the link: what we came to see.
            break;
        }
        sent += 1;
        bytes += frame.len() as u64;
    }
    // Hold the connection briefly so the receiver reads what it was sent.
    let mut sink = [0u8; 256];
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let closed = matches!(s.read(&mut sink), Ok(0) | Err(_));
    eprintln!(
        "hostile_peer: sent {sent} frames ({bytes} bytes); receiver {}",
        if closed {
            "closed the link"
        } else {
            "kept the link open"
        }
    );
}
