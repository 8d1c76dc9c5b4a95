//! Which IP addresses tcp and udp publish, and which of a peer's they use.
//!
//! Across real hosts a single published address does not do: `127.0.0.1`
//! reaches only the same network namespace, and a host may have several
//! interfaces of which only some are reachable from a given peer. So a
//! socket method listens on every address (the wildcard) and publishes a
//! *set* ([`Published`]): the port, every usable IPv4 interface address
//! with its prefix length, loopback, and a key of its network namespace
//! (boot id + namespace inode). A connector then orders the peer's addresses
//! ([`Published::candidates`]):
//!
//! * same network namespace (same kernel, same `/proc/self/ns/net`): only
//!   loopback — the single-host case stays what it was;
//! * otherwise loopback is never used (it would reach *our* host), and the
//!   peer's addresses in a subnet we are on come first, the others after, in
//!   the peer's order; an address that is also one of ours (the same bridge
//!   or VPN address on every host) is left out, as it would reach ourselves.
//!   tcp tries them in turn until one connects.
//!
//! `GW_IFACE` chooses interfaces by name: `eth0,eth1` only those, `^docker0`
//! all but that one; a trailing `*` matches a prefix (`^veth*`).
//!
//! An explicit `GW_TCP_ADDR`/`GW_UDP_ADDR` keeps the old form, a single
//! `ip:port`, which is still accepted from peers.

use crate::error::{Error, Result};
use crate::params::Params;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// At most this many addresses are published, and read from a peer.
pub const MAX_ADDRS: usize = 16;
/// Descriptors longer than this are not parsed (hostile input).
const MAX_DESC: usize = 1024;
/// Tag of the multi-address form.
const TAG: &str = "gw2";

/// One interface address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IfAddr {
    pub ip: Ipv4Addr,
    pub prefix: u8,
}

impl IfAddr {
    /// Whether `other` is in this address's subnet.
    pub fn same_subnet(&self, other: Ipv4Addr) -> bool {
        let mask = if self.prefix == 0 {
            0
        } else {
            u32::MAX << (32 - u32::from(self.prefix.min(32)))
        };
        u32::from(self.ip) & mask == u32::from(other) & mask
    }
}

/// `GW_IFACE`, parsed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IfaceFilter {
    include: Vec<String>,
    exclude: Vec<String>,
}

impl IfaceFilter {
    pub fn parse(spec: &str) -> std::result::Result<IfaceFilter, String> {
        let mut f = IfaceFilter::default();
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (list, name) = match item.strip_prefix('^') {
                Some(n) => (&mut f.exclude, n),
                None => (&mut f.include, item),
            };
            let base = name.strip_suffix('*').unwrap_or(name);
            if base.len() > 15
                || base.contains('*')
                || !base
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.@:".contains(c))
                || name.is_empty()
            {
                return Err(format!(
                    "{item:?} is not an interface name (use e.g. eth0, ^docker0, ^veth*)"
                ));
            }
            list.push(name.to_string());
        }
        Ok(f)
    }

    pub fn from_params(params: &Params) -> Result<IfaceFilter> {
        let spec = params.text("IFACE");
        IfaceFilter::parse(spec).map_err(|reason| Error::BadParam {
            var: "GW_IFACE".into(),
            value: spec.into(),
            reason,
        })
    }

    fn matches(pattern: &str, name: &str) -> bool {
        match pattern.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => pattern == name,
        }
    }

    pub fn allows(&self, name: &str) -> bool {
        (self.include.is_empty() || self.include.iter().any(|p| Self::matches(p, name)))
            && !self.exclude.iter().any(|p| Self::matches(p, name))
    }
}

/// The IPv4 addresses of this network namespace's interfaces that are up,
/// not loopback, and allowed by `filter`, in the kernel's order.
pub fn local_addrs(filter: &IfaceFilter) -> Vec<IfAddr> {
    let mut out = Vec::new();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list we free below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return out;
    }
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned, alive
        // until freeifaddrs; its pointers are null or valid for it.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        let up = ifa.ifa_flags & libc::IFF_UP as libc::c_uint != 0;
        let lo = ifa.ifa_flags & libc::IFF_LOOPBACK as libc::c_uint != 0;
        if !up || lo || ifa.ifa_addr.is_null() || ifa.ifa_name.is_null() {
            continue;
        }
        // SAFETY: ifa_addr is non-null and points at a sockaddr.
        if i32::from(unsafe { (*ifa.ifa_addr).sa_family }) != libc::AF_INET {
            continue;
        }
        // SAFETY: ifa_name is a NUL-terminated string owned by the list.
        let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) }.to_string_lossy();
        if !filter.allows(&name) {
            continue;
        }
        // SAFETY: the family is AF_INET, so the address is a sockaddr_in.
        let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
        let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
        let prefix = if ifa.ifa_netmask.is_null() {
            32
        } else {
            // SAFETY: a non-null netmask of an AF_INET address is a sockaddr_in.
            let m = unsafe { &*(ifa.ifa_netmask as *const libc::sockaddr_in) };
            u32::from_be(m.sin_addr.s_addr).count_ones() as u8
        };
        if ip.is_unspecified() || ip.is_loopback() || out.len() >= MAX_ADDRS {
            continue;
        }
        let a = IfAddr { ip, prefix };
        if !out.contains(&a) {
            out.push(a);
        }
    }
    // SAFETY: `head` came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    out
}

/// This process's network namespace on this kernel: boot id and the inode
/// of `/proc/self/ns/net`, hashed to 16 hex digits. Loopback reaches a peer
/// exactly when this is equal.
pub fn netns_key() -> String {
    use sha2::{Digest, Sha256};
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    let ns = std::fs::read_link("/proc/self/ns/net")
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    let h = Sha256::digest(format!("{}|{ns}", boot.trim()).as_bytes());
    h[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// A peer's (or our own) published addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    /// `None` for the old single-address form: its one address is used as is.
    pub netns: Option<String>,
    pub port: u16,
    pub addrs: Vec<IfAddr>,
    /// The old form's address (any family).
    pub legacy: Option<IpAddr>,
}

impl Published {
    /// Our own: every usable interface address and loopback.
    pub fn local(port: u16, addrs: Vec<IfAddr>) -> Published {
        Published {
            netns: Some(netns_key()),
            port,
            addrs,
            legacy: None,
        }
    }

    /// `gw2 <netns> <port> <ip>/<prefix>,…` (loopback is implied).
    pub fn encode(&self) -> Vec<u8> {
        if let Some(ip) = self.legacy {
            return SocketAddr::new(ip, self.port).to_string().into_bytes();
        }
        let list: Vec<String> = self
            .addrs
            .iter()
            .map(|a| format!("{}/{}", a.ip, a.prefix))
            .collect();
        format!(
            "{TAG} {} {} {}",
            self.netns.as_deref().unwrap_or("-"),
            self.port,
            list.join(",")
        )
        .trim_end()
        .as_bytes()
        .to_vec()
    }

    /// Parses either form; `None` for anything malformed. Bounded: at most
    /// `MAX_ADDRS` addresses, `MAX_DESC` bytes.
    pub fn parse(d: &[u8]) -> Option<Published> {
        if d.len() > MAX_DESC {
            return None;
        }
        let s = std::str::from_utf8(d).ok()?;
        let Some(rest) = s.strip_prefix(TAG).and_then(|r| r.strip_prefix(' ')) else {
            let a: SocketAddr = s.parse().ok()?;
            return Some(Published {
                netns: None,
                port: a.port(),
                addrs: Vec::new(),
                legacy: Some(a.ip()),
            });
        };
        let mut it = rest.split(' ');
        let netns = it.next()?;
        if netns.is_empty() || netns.len() > 64 || !netns.chars().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        let port: u16 = it.next()?.parse().ok()?;
        let mut addrs = Vec::new();
        if let Some(list) = it.next() {
            for item in list.split(',') {
                if addrs.len() >= MAX_ADDRS {
                    return None;
                }
                let (ip, prefix) = item.split_once('/')?;
                let prefix: u8 = prefix.parse().ok()?;
                if prefix > 32 {
                    return None;
                }
                addrs.push(IfAddr {
                    ip: ip.parse().ok()?,
                    prefix,
                });
            }
        }
        if it.next().is_some() || port == 0 {
            return None;
        }
        Some(Published {
            netns: Some(netns.to_string()),
            port,
            addrs,
            legacy: None,
        })
    }

    /// The addresses to try, best first, from a process in network
    /// namespace `my_netns` with interface addresses `mine` (see the module
    /// doc). Empty: nothing of the peer is reachable from here.
    pub fn candidates(&self, my_netns: &str, mine: &[IfAddr]) -> Vec<SocketAddr> {
        if let Some(ip) = self.legacy {
            return vec![SocketAddr::new(ip, self.port)];
        }
        if self.netns.as_deref() == Some(my_netns) {
            return vec![SocketAddr::new(Ipv4Addr::LOCALHOST.into(), self.port)];
        }
        // An address that is also one of ours (a bridge or VPN address that
        // every host has, say) would reach ourselves, not the peer.
        let usable = self.addrs.iter().filter(|a| {
            !a.ip.is_loopback()
                && !a.ip.is_unspecified()
                && !a.ip.is_broadcast()
                && !mine.iter().any(|m| m.ip == a.ip)
        });
        let (near, far): (Vec<&IfAddr>, Vec<&IfAddr>) =
            usable.partition(|a| mine.iter().any(|m| m.same_subnet(a.ip)));
        near.into_iter()
            .chain(far)
            .map(|a| SocketAddr::new(a.ip.into(), self.port))
            .collect()
    }

    /// For `gwinfo` and messages.
    pub fn describe(&self) -> String {
        if let Some(ip) = self.legacy {
            return SocketAddr::new(ip, self.port).to_string();
        }
        let list: Vec<String> = self.addrs.iter().map(|a| a.ip.to_string()).collect();
        format!("port {} on lo,{}", self.port, list.join(","))
    }
}

/// How a socket method binds and publishes: the explicit address of
/// `GW_<M>_ADDR` (old behaviour), or the wildcard and every interface.
pub enum Binding {
    Explicit(IpAddr),
    Auto(Vec<IfAddr>),
}

impl Binding {
    /// From `GW_<var>` (`TCP_ADDR`/`UDP_ADDR`: empty or `auto` = every
    /// interface) and `GW_IFACE`.
    pub fn from_params(params: &Params, var: &str) -> Result<Binding> {
        let text = params.text(var);
        if text.is_empty() || text == "auto" {
            let filter = IfaceFilter::from_params(params)?;
            return Ok(Binding::Auto(local_addrs(&filter)));
        }
        text.parse()
            .map(Binding::Explicit)
            .map_err(|_| Error::BadParam {
                var: format!("GW_{var}"),
                value: text.into(),
                reason: "expected an IP address, or `auto` (every interface, see GW_IFACE)".into(),
            })
    }

    /// The address to bind.
    pub fn bind_ip(&self) -> IpAddr {
        match self {
            Binding::Explicit(ip) => *ip,
            Binding::Auto(_) => Ipv4Addr::UNSPECIFIED.into(),
        }
    }

    /// What to publish for a socket bound at `port`.
    pub fn publish(&self, port: u16) -> Published {
        match self {
            Binding::Explicit(ip) => Published {
                netns: None,
                port,
                addrs: Vec::new(),
                legacy: Some(*ip),
            },
            Binding::Auto(addrs) => Published::local(port, addrs.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> IfAddr {
        let (ip, p) = s.split_once('/').unwrap();
        IfAddr {
            ip: ip.parse().unwrap(),
            prefix: p.parse().unwrap(),
        }
    }

    #[test]
    fn iface_filter_includes_excludes_and_rejects_garbage() {
        let f = IfaceFilter::parse("").unwrap();
        assert!(f.allows("eth0") && f.allows("docker0"));
        let f = IfaceFilter::parse("eth0").unwrap();
        assert!(f.allows("eth0") && !f.allows("eth1"));
        let f = IfaceFilter::parse("^docker0, ^veth*").unwrap();
        assert!(f.allows("eth0") && !f.allows("docker0") && !f.allows("veth12ab"));
        let f = IfaceFilter::parse("eth*,^eth1").unwrap();
        assert!(f.allows("eth0") && !f.allows("eth1") && !f.allows("ib0"));
        for bad in ["^", "e*th", "a b", "verylonginterfacename0", "eth0;rm"] {
            assert!(IfaceFilter::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn gw_iface_is_a_parameter_and_a_bad_value_names_it() {
        let p = Params::from_lookup(|k| (k == "GW_IFACE").then(|| "^".to_string()));
        let e = p.and_then(|p| IfaceFilter::from_params(&p).map(|_| ()));
        let e = e.unwrap_err().to_string();
        assert!(e.contains("GW_IFACE"), "{e}");
    }

    #[test]
    fn descriptor_round_trips_and_hostile_ones_are_refused() {
        let p = Published {
            netns: Some("00ff00ff00ff00ff".into()),
            port: 4242,
            addrs: vec![a("10.1.0.1/24"), a("192.168.5.7/16")],
            legacy: None,
        };
        let enc = p.encode();
        assert_eq!(enc, b"gw2 00ff00ff00ff00ff 4242 10.1.0.1/24,192.168.5.7/16");
        assert_eq!(Published::parse(&enc), Some(p));
        // No interface but loopback.
        let lo = Published::parse(b"gw2 ab 7").unwrap();
        assert!(lo.addrs.is_empty());
        assert_eq!(Published::parse(&lo.encode()), Some(lo));
        // The old form.
        let old = Published::parse(b"127.0.0.1:5000").unwrap();
        assert_eq!(
            old.candidates("x", &[]),
            ["127.0.0.1:5000".parse().unwrap()]
        );
        let many = format!("gw2 ab 7 {}", vec!["10.0.0.1/8"; MAX_ADDRS + 1].join(","));
        for bad in [
            &b"gw2"[..],
            b"gw2 ab",
            b"gw2 ab 0",
            b"gw2 ab 70000",
            b"gw2 zz 7",
            b"gw2 ab 7 10.0.0.1",
            b"gw2 ab 7 10.0.0.1/33",
            b"gw2 ab 7 10.0.0.1/8 extra",
            b"gw2 ab 7 10.0.0.1/8,",
            b"\xff\xfe",
            many.as_bytes(),
        ] {
            assert_eq!(
                Published::parse(bad),
                None,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        assert_eq!(Published::parse(&vec![b'1'; 5000]), None);
    }

    #[test]
    fn loopback_only_in_one_netns_and_same_subnet_first() {
        let peer = Published {
            netns: Some("aa".into()),
            port: 9,
            addrs: vec![a("192.168.1.5/24"), a("10.1.1.1/24"), a("10.2.0.9/16")],
            legacy: None,
        };
        // Same network namespace: loopback, nothing else (the fast path).
        assert_eq!(
            peer.candidates("aa", &[a("10.1.1.2/24")]),
            ["127.0.0.1:9".parse().unwrap()]
        );
        // Another host on 10.1.1.0/24: that subnet first, then the others in order.
        let got = peer.candidates("bb", &[a("10.1.1.2/24")]);
        let want: Vec<SocketAddr> = ["10.1.1.1:9", "192.168.1.5:9", "10.2.0.9:9"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        assert_eq!(got, want);
        // An address the peer shares with us (the same bridge address on
        // every host) is never tried: it would reach ourselves.
        let got = peer.candidates("bb", &[a("10.1.1.2/24"), a("192.168.1.5/24")]);
        let want: Vec<SocketAddr> = ["10.1.1.1:9", "10.2.0.9:9"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        assert_eq!(got, want);
        // A peer in another namespace that publishes only loopback cannot be reached.
        let lo_only = Published::parse(b"gw2 aa 9").unwrap();
        assert!(lo_only.candidates("bb", &[a("10.1.1.2/24")]).is_empty());
    }

    #[test]
    fn subnet_masks() {
        assert!(a("10.1.0.1/24").same_subnet("10.1.0.200".parse().unwrap()));
        assert!(!a("10.1.0.1/24").same_subnet("10.1.1.1".parse().unwrap()));
        assert!(a("10.1.0.1/0").same_subnet("1.2.3.4".parse().unwrap()));
        assert!(!a("10.1.0.1/32").same_subnet("10.1.0.2".parse().unwrap()));
    }

    #[test]
    fn this_machine_publishes_its_interfaces_but_not_loopback() {
        let addrs = local_addrs(&IfaceFilter::default());
        assert!(addrs.iter().all(|a| !a.ip.is_loopback()), "{addrs:?}");
        let none = local_addrs(&IfaceFilter::parse("nosuchif0").unwrap());
        assert!(none.is_empty(), "{none:?}");
        assert_eq!(netns_key().len(), 16);
        assert_eq!(netns_key(), netns_key());
    }
}
