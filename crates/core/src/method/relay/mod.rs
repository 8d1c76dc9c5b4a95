//! Relays: reaching a rank that cannot be reached directly.
//!
//! A host of a firewalled site (`gateway=` in the machines file) accepts no
//! connection from outside its site but its gateway's. Its gateway proxy
//! runs a relay (`gwrun --relay`, [`service`]): a process reachable from
//! everywhere that, on an authenticated request, opens a connection into
//! its site and splices the two byte streams. The rank behind the firewall
//! publishes, next to its direct methods, an `encrypt+relay+tcp` entry: its
//! own tcp listener plus its relay's addresses and host name. A sender on
//! another site connects to the relay instead of the rank, writes the
//! request, then speaks plain gridwire tcp *through* it: the tcp handshake
//! (challenge-response with the job secret) and the encrypt transform's
//! frames run end to end, so the relay sees only ciphertext and proofs.
//!
//! **Keys.** The relay holds only `relay key = HKDF-SHA256(salt = "gridwire
//! relay", ikm = job secret, info = "gridwire relay v1")`, which a rank
//! derives too. It authenticates requests (an HMAC under the relay key:
//! the relay is not an open proxy for whoever finds its port). Link keys and
//! handshake proofs are other PRF outputs under the job secret (other
//! labels, other salts): knowing the relay key gives none of them, so the
//! relay can neither read nor forge payload, nor pass a handshake itself.
//! That is why a relayed link is always encrypted, whatever `GW_ENCRYPT`
//! says: [`stack_sets`] adds `encrypt` to every relay stack.
//!
//! The method is named `relay+tcp` in descriptor tables; a link through it
//! is named after the gateway, `relay(s1h0)+tcp` (`encrypt+relay(s1h0)+tcp`
//! in a stack), in `--stats`, `--report` and `gwinfo`.

use super::tcp::TcpMethod;
use super::transform::TransformMethod;
use super::{Cost, Link, Method, MethodEnv, PollClass, Sink};
use crate::error::{Error, Result};
use crate::method::netaddr::Published;
use crate::params::{Kind, ParamDecl};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::io::IoSlice;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::os::fd::RawFd;
use std::sync::{Arc, Mutex};

pub mod service;

#[cfg(test)]
mod tests;

pub const PARAMS: &[ParamDecl] = &[
    ParamDecl {
        name: "RELAY",
        default: "",
        kind: Kind::Text,
        help: "`HOST:HEX`: this rank is behind a firewall and is reached from other sites \
               through the relay on its gateway HOST, published as HEX. Set by `gwrun -f` on \
               the hosts of a site with `gateway=` other than the gateway.",
    },
    ParamDecl {
        name: "RELAYED_SITES",
        default: "",
        kind: Kind::Text,
        help: "Comma-separated sites whose hosts may sit behind a relay (set by `gwrun -f`): \
               every rank then builds the `encrypt+relay+tcp` stack to reach them.",
    },
    ParamDecl {
        name: "RELAY_FALLBACK_SITES",
        default: "",
        kind: Kind::Text,
        help: "Comma-separated sites reachable directly whose gateway also runs a relay (set by \
               `gwrun -f`, `GW_RELAYS=all`): their hosts are reached directly first and through \
               the relay only when every direct stack broke (failover).",
    },
];

/// Whether `site` is one whose relay is only a fallback
/// (`GW_RELAY_FALLBACK_SITES`): its hosts are reached directly first.
pub fn is_fallback_site(params: &crate::params::Params, site: &str) -> bool {
    params
        .text("RELAY_FALLBACK_SITES")
        .split(',')
        .any(|s| s.trim() == site)
}

/// The method's name in descriptor tables.
pub const NAME: &str = "relay+tcp";

/// Addresses a request names (the target's candidates, best first).
pub const MAX_TARGETS: usize = 4;
const MAGIC: &[u8; 4] = b"GWRQ";
const VERSION: u8 = 1;
const ADDR_LEN: usize = 1 + 16 + 2;
const NONCE_LEN: usize = 16;
const MAC_LEN: usize = 32;
const BODY_LEN: usize = 4 + 1 + 1 + MAX_TARGETS * ADDR_LEN + NONCE_LEN;
/// Length of a relay request (fixed: the relay reads exactly this much
/// before splicing).
pub const REQUEST_LEN: usize = BODY_LEN + MAC_LEN;
const REQUEST_LABEL: &[u8] = b"gridwire relay request v1";

type HmacSha256 = Hmac<Sha256>;

/// The key a relay holds, derived from the job secret with the relay's own
/// salt and label (see the module doc for why no link key follows from it).
pub fn relay_key(secret: &[u8; 32]) -> [u8; 32] {
    use aws_lc_rs::hkdf;
    struct Len32;
    impl hkdf::KeyType for Len32 {
        fn len(&self) -> usize {
            32
        }
    }
    let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, b"gridwire relay").extract(secret);
    let mut out = [0u8; 32];
    prk.expand(&[b"gridwire relay v1"], Len32)
        .and_then(|okm| okm.fill(&mut out))
        .expect("HKDF-SHA256 can always produce 32 bytes");
    out
}

fn request_mac(key: &[u8; 32], body: &[u8]) -> HmacSha256 {
    let mut mac = <HmacSha256 as Mac>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(REQUEST_LABEL);
    mac.update(body);
    mac
}

/// A request asking a relay to connect to the first of `targets` that
/// answers, authenticated under `key`.
pub fn encode_request(key: &[u8; 32], targets: &[SocketAddr]) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(REQUEST_LEN);
    out.extend_from_slice(MAGIC);
    out.push(VERSION);
    let n = targets.len().min(MAX_TARGETS);
    out.push(n as u8);
    for i in 0..MAX_TARGETS {
        let mut a = [0u8; ADDR_LEN];
        if let Some(t) = targets.get(i).filter(|_| i < n) {
            let (fam, ip) = match t.ip() {
                IpAddr::V4(v4) => (4, v4.to_ipv6_mapped()),
                IpAddr::V6(v6) => (6, v6),
            };
            a[0] = fam;
            a[1..17].copy_from_slice(&ip.octets());
            a[17..].copy_from_slice(&t.port().to_le_bytes());
        }
        out.extend_from_slice(&a);
    }
    let nonce = crate::auth::try_nonce().map_err(|e| Error::io("relay: request nonce", e))?;
    out.extend_from_slice(&nonce);
    let tag = request_mac(key, &out).finalize().into_bytes();
    out.extend_from_slice(&tag);
    Ok(out)
}

/// Checks a request (constant-time MAC comparison) and returns its targets.
pub fn decode_request(
    key: &[u8; 32],
    req: &[u8],
) -> std::result::Result<Vec<SocketAddr>, &'static str> {
    if req.len() != REQUEST_LEN {
        return Err("wrong request length");
    }
    if &req[..4] != MAGIC {
        return Err("not a relay request");
    }
    let (body, tag) = req.split_at(BODY_LEN);
    request_mac(key, body)
        .verify_slice(tag)
        .map_err(|_| "request not authenticated by this job's relay key")?;
    if body[4] != VERSION {
        return Err("unknown relay request version");
    }
    let n = body[5] as usize;
    if n == 0 || n > MAX_TARGETS {
        return Err("bad target count");
    }
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let a = &body[6 + i * ADDR_LEN..6 + (i + 1) * ADDR_LEN];
        let ip = Ipv6Addr::from(<[u8; 16]>::try_from(&a[1..17]).expect("16 bytes"));
        let port = u16::from_le_bytes([a[17], a[18]]);
        let ip = match a[0] {
            4 => IpAddr::V4(ip.to_ipv4_mapped().ok_or("bad IPv4 target")?),
            6 => IpAddr::V6(ip),
            _ => return Err("bad address family"),
        };
        out.push(SocketAddr::new(ip, port));
    }
    Ok(out)
}

/// `GW_RELAY` as `(gateway host, relay's published addresses)`.
pub fn parse_relay_param(v: &str) -> Option<(String, Vec<u8>)> {
    let (host, hex) = v.rsplit_once(':')?;
    if host.is_empty() || host.len() > 255 || !hex.len().is_multiple_of(2) {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect();
    let bytes = bytes?;
    Published::parse(&bytes)?;
    Some((host.to_string(), bytes))
}

/// Whether a method or link name goes through a relay.
pub fn is_relayed(name: &str) -> bool {
    name.split('+')
        .any(|p| p == "relay" || p.starts_with("relay("))
}

/// Interns a link name (names are `&'static str` everywhere; there are few:
/// one per gateway and stack).
pub fn intern(name: String) -> &'static str {
    static NAMES: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(n) = names.iter().find(|n| **n == name) {
        return n;
    }
    let leaked: &'static str = Box::leak(name.into_boxed_str());
    names.push(leaked);
    leaked
}

/// Where a descriptor's rank is reached through: its gateway's name and
/// its relay's published addresses, or `None` (not behind a relay).
struct Behind<'a> {
    gateway: &'a str,
    relay: &'a [u8],
}

/// Splits a relay descriptor: `[1][u8 len][gateway][u16 len][relay
/// published]` or `[0]`, then the rank's own tcp descriptor.
fn split(d: &[u8]) -> Option<(Option<Behind<'_>>, &[u8])> {
    match *d.first()? {
        0 => Some((None, &d[1..])),
        1 => {
            let n = *d.get(1)? as usize;
            let gateway = std::str::from_utf8(d.get(2..2 + n)?).ok()?;
            let at = 2 + n;
            let m = u16::from_le_bytes([*d.get(at)?, *d.get(at + 1)?]) as usize;
            let relay = d.get(at + 2..at + 2 + m)?;
            Some((Some(Behind { gateway, relay }), &d[at + 2 + m..]))
        }
        _ => None,
    }
}

/// tcp through a relay: its own tcp instance (its own listener, where
/// relayed connections arrive), plus, when this rank is behind a firewall,
/// its relay's address in the descriptor.
pub struct RelayMethod {
    tcp: Arc<TcpMethod>,
    /// `GW_RELAY`: this rank's gateway and relay, if it is behind one.
    own: Option<(String, Vec<u8>)>,
    key: [u8; 32],
}

impl RelayMethod {
    pub fn new(env: &MethodEnv) -> Result<RelayMethod> {
        let v = env.params.text("RELAY");
        let own = if v.is_empty() {
            None
        } else {
            Some(parse_relay_param(v).ok_or_else(|| Error::BadParam {
                var: "GW_RELAY".into(),
                value: v.into(),
                reason: "expected HOST:HEX (a relay's published addresses)".into(),
            })?)
        };
        Ok(RelayMethod {
            tcp: TcpMethod::instance(env)?,
            own,
            key: relay_key(&env.job.secret),
        })
    }
}

impl Method for RelayMethod {
    fn name(&self) -> &'static str {
        NAME
    }

    fn descriptor(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match &self.own {
            Some((gw, relay)) => {
                out.push(1);
                out.push(gw.len() as u8);
                out.extend_from_slice(gw.as_bytes());
                out.extend_from_slice(&(relay.len() as u16).to_le_bytes());
                out.extend_from_slice(relay);
            }
            None => out.push(0),
        }
        out.extend_from_slice(&self.tcp.descriptor());
        out
    }

    fn describe(&self, d: &[u8]) -> String {
        match split(d) {
            Some((Some(b), tcp)) => format!(
                "{} through the relay on {} at {}",
                self.tcp.describe(tcp),
                b.gateway,
                self.tcp.describe(b.relay)
            ),
            Some((None, _)) => "not behind a relay".into(),
            None => "malformed relay descriptor".into(),
        }
    }

    /// Only ranks behind a relay are reached this way, and only when their
    /// relay is reachable from here.
    fn reachable(&self, remote: &[u8]) -> bool {
        match split(remote) {
            Some((Some(b), tcp)) => {
                !self.tcp.addresses_in(b.relay).is_empty() && !self.tcp.addresses_in(tcp).is_empty()
            }
            _ => false,
        }
    }

    fn link_name(&self, remote: &[u8]) -> &'static str {
        match split(remote) {
            Some((Some(b), _)) => intern(format!("relay({})+tcp", b.gateway)),
            _ => NAME,
        }
    }

    fn connect(&self, peer: u32, remote: &[u8]) -> Result<Arc<dyn Link>> {
        let bad = |what: &str| Error::BadStartpoint(format!("relay+tcp to rank {peer}: {what}"));
        let (behind, tcp) = split(remote).ok_or_else(|| bad("malformed descriptor"))?;
        let b = behind.ok_or_else(|| bad("the rank is not behind a relay"))?;
        let targets = self.tcp.addresses_in(tcp);
        let relay = self.tcp.addresses_in(b.relay);
        if targets.is_empty() || relay.is_empty() {
            return Err(bad("no usable address"));
        }
        let request = encode_request(&self.key, &targets)?;
        let inner = self.tcp.connect_via_relay(peer, relay, request)?;
        Ok(Arc::new(RelayLink {
            name: intern(format!("relay({})+tcp", b.gateway)),
            inner,
        }))
    }

    fn poll(&self, sink: &mut dyn Sink) -> Result<usize> {
        self.tcp.poll(sink)
    }
    fn poll_thorough(&self, sink: &mut dyn Sink) -> Result<usize> {
        self.tcp.poll_thorough(sink)
    }
    fn poll_class(&self) -> PollClass {
        self.tcp.poll_class()
    }
    fn wait_fd(&self) -> Option<RawFd> {
        self.tcp.wait_fd()
    }
    fn before_block(&self) {
        self.tcp.before_block()
    }
    fn after_block(&self) {
        self.tcp.after_block()
    }
    fn has_pending_output(&self) -> bool {
        self.tcp.has_pending_output()
    }
    fn cost(&self) -> Cost {
        self.tcp.cost()
    }
    fn counters(&self) -> Vec<(&'static str, u64)> {
        self.tcp.counters()
    }
    fn shutdown(&self) {
        self.tcp.shutdown()
    }
}

/// A tcp link through a relay, named after the gateway.
struct RelayLink {
    name: &'static str,
    inner: Arc<dyn Link>,
}

impl Link for RelayLink {
    fn method(&self) -> &'static str {
        self.name
    }
    fn send(&self, iov: &[IoSlice<'_>], waiter: &dyn super::Waiter) -> Result<()> {
        self.inner.send(iov, waiter)
    }
    fn counts_sends(&self) -> bool {
        self.inner.counts_sends()
    }
    fn sent(&self) -> (u64, u64) {
        self.inner.sent()
    }
    fn rtt(&self) -> Option<std::time::Duration> {
        self.inner.rtt()
    }
    fn stalled(&self, for_at_least: std::time::Duration) -> bool {
        self.inner.stalled(for_at_least)
    }
}

/// The transform sets relay stacks are built with: what this process's
/// policy and the job's offer send between sites, each with `encrypt`
/// added (a relayed link is always encrypted).
pub fn stack_sets(policy: &super::transform::policy::Policy) -> Vec<Vec<&'static str>> {
    let mut sets: Vec<Vec<&'static str>> = vec![vec!["encrypt"]];
    let mut from: Vec<Vec<&'static str>> = vec![policy.wanted(false)];
    from.extend(policy.offer.iter().cloned());
    for mut s in from {
        if !s.contains(&"encrypt") {
            s.push("encrypt");
        }
        // Registry order: compress before encrypt.
        s.sort_by_key(|t| {
            super::transform::registry()
                .iter()
                .position(|r| r.name == *t)
        });
        if !sets.contains(&s) {
            sets.push(s);
        }
    }
    sets
}

/// The relay stacks of this process (`encrypt+relay+tcp`, …): only in a job
/// that has relays (`GW_RELAYED_SITES`, `GW_RELAY_FALLBACK_SITES`).
pub fn build_stacks(
    env: &MethodEnv,
    policy: &super::transform::policy::Policy,
) -> Result<Vec<Arc<dyn Method>>> {
    if env.params.text("RELAYED_SITES").trim().is_empty()
        && env.params.text("RELAY_FALLBACK_SITES").trim().is_empty()
        && env.params.text("RELAY").is_empty()
    {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for set in stack_sets(policy) {
        let mut stack = Vec::new();
        for t in set {
            let info = super::transform::registry()
                .iter()
                .find(|r| r.name == t)
                .expect("stack_sets names registered transforms");
            stack.push((info.init)(env)?);
        }
        let inner: Arc<dyn Method> = Arc::new(RelayMethod::new(env)?);
        out.push(Arc::new(TransformMethod::new(inner, stack)) as Arc<dyn Method>);
    }
    Ok(out)
}
