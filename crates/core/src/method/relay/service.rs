//! The relay service (`gwrun --relay`, run by a firewalled site's gateway
//! proxy): accepts connections from ranks of other sites, checks each
//! one's request under the relay key, connects to the target inside the
//! site and copies bytes both ways until either side closes.
//!
//! It never parses what it copies: the tcp handshake and the encrypt
//! transform's frames pass end to end, so MPI's ordering and exactly-once
//! delivery are those of the one TCP stream each way (a relay that fails
//! closes both sides, which fails the link; it never drops or repeats
//! bytes in between). A thread per direction, blocking I/O: a relayed
//! link costs two context switches per message, not a poll loop over all.
//!
//! `GW_RELAY_TEST_FLIP=OFFSET` (tests only) flips one bit of the byte at
//! OFFSET of every relayed stream, sender to target, to show that the
//! receiver rejects what the relay altered.

use super::{decode_request, REQUEST_LEN};
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How long a new connection may take to send its request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How long connecting to a target may take, per address.
const TARGET_TIMEOUT: Duration = Duration::from_secs(5);
/// Copy buffer per direction.
const BUF: usize = 256 * 1024;

/// What the relay did (printed at exit with `GW_VERBOSE`).
#[derive(Default)]
pub struct Counters {
    pub relayed: AtomicU64,
    pub refused: AtomicU64,
    pub target_failed: AtomicU64,
    pub bytes: AtomicU64,
}

/// A relay's settings.
pub struct Relay {
    key: [u8; 32],
    /// Test hook: flip a bit at this offset of each stream towards a target.
    flip_at: Option<u64>,
    verbose: bool,
    pub counters: Counters,
}

impl Relay {
    pub fn new(key: [u8; 32], flip_at: Option<u64>, verbose: bool) -> Arc<Relay> {
        Arc::new(Relay {
            key,
            flip_at,
            verbose,
            counters: Counters::default(),
        })
    }

    /// Accepts and serves connections until the listener fails.
    pub fn serve(self: &Arc<Self>, listener: TcpListener) -> io::Result<()> {
        loop {
            let (sock, from) = match listener.accept() {
                Ok(x) => x,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
                    ) =>
                {
                    // Out of descriptors or memory: back off, do not spin.
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
                Err(e) => return Err(e),
            };
            let me = self.clone();
            let spawned = std::thread::Builder::new()
                .name("gw-relay".into())
                .spawn(move || me.handle(sock, from));
            if let Err(e) = spawned {
                eprintln!("gwrun relay: cannot start a thread for {from}: {e}");
            }
        }
    }

    fn handle(&self, mut client: TcpStream, from: SocketAddr) {
        let mut req = [0u8; REQUEST_LEN];
        let _ = client.set_read_timeout(Some(REQUEST_TIMEOUT));
        if let Err(e) = client.read_exact(&mut req) {
            self.counters.refused.fetch_add(1, Ordering::Relaxed);
            if self.verbose {
                eprintln!("gwrun relay: no request from {from}: {e}");
            }
            return;
        }
        let targets = match decode_request(&self.key, &req) {
            Ok(t) => t,
            Err(why) => {
                self.counters.refused.fetch_add(1, Ordering::Relaxed);
                eprintln!("gwrun relay: refused a connection from {from}: {why}");
                return;
            }
        };
        let mut target = None;
        let mut failures = Vec::new();
        for t in &targets {
            match TcpStream::connect_timeout(t, TARGET_TIMEOUT) {
                Ok(s) => {
                    target = Some(s);
                    break;
                }
                Err(e) => failures.push(format!("{t}: {e}")),
            }
        }
        let Some(target) = target else {
            self.counters.target_failed.fetch_add(1, Ordering::Relaxed);
            eprintln!(
                "gwrun relay: cannot reach the target of {from}: {}",
                failures.join("; ")
            );
            return;
        };
        let _ = client.set_read_timeout(None);
        for s in [&client, &target] {
            let _ = s.set_nodelay(true);
        }
        self.counters.relayed.fetch_add(1, Ordering::Relaxed);
        let (c2, t2) = match (client.try_clone(), target.try_clone()) {
            (Ok(c), Ok(t)) => (c, t),
            _ => return,
        };
        let flip = self.flip_at;
        let back = std::thread::Builder::new()
            .name("gw-relay-back".into())
            .spawn(move || copy(t2, c2, None));
        let n = copy(client, target, flip);
        let m = back.ok().and_then(|h| h.join().ok()).unwrap_or(0);
        self.counters.bytes.fetch_add(n + m, Ordering::Relaxed);
    }
}

/// Copies `from` to `to` until end of stream or an error; then closes the
/// writing side (end of stream passes on) or, on an error, both sockets
/// (the other direction ends too). Returns the bytes copied.
fn copy(mut from: TcpStream, mut to: TcpStream, flip_at: Option<u64>) -> u64 {
    let mut buf = vec![0u8; BUF];
    let mut done: u64 = 0;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => {
                let _ = to.shutdown(Shutdown::Write);
                return done;
            }
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        if let Some(at) = flip_at {
            if at >= done && at < done + n as u64 {
                buf[(at - done) as usize] ^= 0x01;
            }
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
        done += n as u64;
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
    done
}
