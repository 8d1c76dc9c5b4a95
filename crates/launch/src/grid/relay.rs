//! Relays for firewalled sites (see gridwire-core's `method::relay`).
//!
//! A site with `gateway=` in a job of several sites is *relayed*: its
//! leader proxy (the gateway) starts `gwrun --relay` before the site's
//! other hosts, and gives those hosts' ranks `GW_RELAY=GATEWAY:HEX` (the
//! relay's addresses), so they publish an `encrypt+relay+tcp` entry that
//! ranks of other sites reach them by. Every rank gets
//! `GW_RELAYED_SITES`, so it builds that stack to send through relays.
//!
//! The relay is its own process, not a thread of the proxy: the proxy
//! holds the job secret, the relay only the relay key derived from it,
//! which it reads from its stdin. Its stdin is also its lifeline: when the
//! proxy goes away (exit, crash, SIGKILL) the pipe closes and the relay
//! exits.

use super::protocol::PlanSite;
use crate::machines::Machines;
use gridwire_core::method::netaddr::{local_addrs, IfaceFilter, Published};
use gridwire_core::method::relay::service::Relay;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::Duration;

/// The line a relay prints once it listens.
const READY: &str = "GWRELAY1 ";

/// Marks the sites of the plan whose gateway runs a relay and tells every
/// rank which: in a job of more than one site, a site with `gateway=`
/// (firewalled) is *relayed* (`GW_RELAYED_SITES`: its other hosts are
/// reached from other sites through the relay first); with `GW_RELAYS=all`
/// (the default) every other site's first host runs one too, as a
/// *fallback* (`GW_RELAY_FALLBACK_SITES`: reached directly first, through
/// the relay when every direct stack broke). `GW_RELAYS=firewalled`
/// keeps only the first kind, `off` neither.
pub fn apply(m: &Machines, sites: &mut [PlanSite], env: &mut Vec<(String, String)>) {
    let mode = env
        .iter()
        .rev()
        .find(|(k, _)| k == "GW_RELAYS")
        .map_or("all", |(_, v)| v.as_str())
        .to_string();
    let mut names: Vec<&str> = sites.iter().map(|s| s.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    if mode == "off" || names.len() < 2 {
        return;
    }
    let mut relayed = Vec::new();
    let mut fallback = Vec::new();
    for ps in sites.iter_mut() {
        let gateway = m
            .site_index(&ps.name)
            .and_then(|i| m.sites[i].gateway.as_ref());
        if gateway.is_some() {
            ps.relay = true;
            relayed.push(ps.name.clone());
        } else if mode != "firewalled" {
            ps.relay = true;
            fallback.push(ps.name.clone());
        }
    }
    if !relayed.is_empty() {
        env.push(("GW_RELAYED_SITES".into(), relayed.join(",")));
    }
    if !fallback.is_empty() {
        env.push(("GW_RELAY_FALLBACK_SITES".into(), fallback.join(",")));
    }
}

/// A running relay: the child, and its `GW_RELAY` value for the ranks
/// behind it.
pub struct Running {
    pub child: Child,
    pub param: String,
}

/// Starts `exe --relay` for a job with `secret` (hex), on gateway `host`.
/// `iface` filters the addresses it publishes (`--iface`); `flip` is the
/// test hook's offset (`GW_RELAY_TEST_FLIP` of the job's environment).
pub fn start(
    exe: &Path,
    host: &str,
    secret_hex: &str,
    iface: Option<&str>,
    flip: Option<&str>,
) -> Result<Running, String> {
    let secret = gridwire_core::auth::parse_secret(secret_hex)
        .ok_or("the job secret is not 32 bytes of hex")?;
    let key = gridwire_core::method::relay::relay_key(&secret);
    let mut cmd = Command::new(exe);
    cmd.arg("--relay")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .env_remove("GW_JOB_SECRET")
        .env_remove("GW_IFACE")
        .env_remove("GW_RELAY_TEST_FLIP");
    if let Some(i) = iface {
        cmd.env("GW_IFACE", i);
    }
    if let Some(f) = flip {
        cmd.env("GW_RELAY_TEST_FLIP", f);
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start the relay: {e}"))?;
    let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
    let wrote = child
        .stdin
        .as_mut()
        .map(|s| s.write_all(format!("{hex}\n").as_bytes()));
    let line = match wrote {
        Some(Ok(())) => read_ready(&mut child),
        _ => Err("cannot give the relay its key".to_string()),
    };
    match line {
        Ok(published) => Ok(Running {
            child,
            param: format!("{host}:{published}"),
        }),
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            Err(e)
        }
    }
}

/// Reads the relay's ready line (bounded: 10 s).
fn read_ready(child: &mut Child) -> Result<String, String> {
    let out = child.stdout.as_ref().ok_or("no relay stdout")?;
    let mut fds = [libc::pollfd {
        fd: out.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    }];
    let mut line = Vec::new();
    let until = std::time::Instant::now() + Duration::from_secs(10);
    let mut out = child.stdout.take().ok_or("no relay stdout")?;
    while !line.ends_with(b"\n") {
        let left = until.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err("the relay did not start within 10 s".into());
        }
        let _ = crate::sys::poll(&mut fds, left.as_millis().min(1000) as i32);
        if fds[0].revents == 0 {
            continue;
        }
        let mut b = [0u8; 1];
        match out.read(&mut b) {
            Ok(1) => line.push(b[0]),
            _ => return Err("the relay exited before it was ready".into()),
        }
        if line.len() > 4096 {
            return Err("the relay's ready line is too long".into());
        }
    }
    let text = String::from_utf8_lossy(&line);
    text.trim_end()
        .strip_prefix(READY)
        .map(str::to_string)
        .ok_or_else(|| format!("unexpected relay output: {}", text.trim_end()))
}

/// `gwrun --relay`: reads the relay key (hex) from stdin, listens on every
/// interface, prints `GWRELAY1 <published addresses, hex>`, serves until
/// stdin closes.
pub fn run() -> i32 {
    let mut stdin = BufReader::new(std::io::stdin());
    let mut line = String::new();
    if stdin.read_line(&mut line).is_err() {
        eprintln!("gwrun relay: no key on stdin");
        return 1;
    }
    let Some(key) = gridwire_core::auth::parse_secret(line.trim()) else {
        eprintln!("gwrun relay: the key on stdin is not 32 bytes of hex");
        return 1;
    };
    line.clear();
    let filter = match IfaceFilter::parse(&std::env::var("GW_IFACE").unwrap_or_default()) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("gwrun relay: GW_IFACE: {e}");
            return 1;
        }
    };
    let flip = std::env::var("GW_RELAY_TEST_FLIP")
        .ok()
        .and_then(|v| v.parse::<u64>().ok());
    let listener = match TcpListener::bind(("0.0.0.0", 0)) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("gwrun relay: cannot listen: {e}");
            return 1;
        }
    };
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    let published = Published::local(port, local_addrs(&filter)).encode();
    let hex: String = published.iter().map(|b| format!("{b:02x}")).collect();
    println!("{READY}{hex}");
    let _ = std::io::stdout().flush();
    let verbose = std::env::var("GW_VERBOSE").is_ok_and(|v| v != "0" && !v.is_empty());
    let relay = Relay::new(key, flip, verbose);
    // The lifeline: the proxy holds our stdin; end of it, end of us.
    let watched = relay.clone();
    std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = stdin.read_to_end(&mut sink);
        if verbose {
            let c = &watched.counters;
            eprintln!(
                "gwrun relay: {} connection(s) relayed, {} refused, {} target(s) unreachable, {} bytes",
                c.relayed.load(Ordering::Relaxed),
                c.refused.load(Ordering::Relaxed),
                c.target_failed.load(Ordering::Relaxed),
                c.bytes.load(Ordering::Relaxed)
            );
        }
        std::process::exit(0);
    });
    match relay.serve(listener) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("gwrun relay: {e}");
            1
        }
    }
}
