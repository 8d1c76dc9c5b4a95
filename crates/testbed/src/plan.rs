//! What an instance is made of — hosts, sites, addresses, names, paths — as
//! a pure function of its options, so `up`, `exec`, `list` and `down` all
//! derive the same names from the small `instance` file `up` writes first.
//!
//! Addressing (private, and only inside the testbed's own namespaces):
//! - site N's LAN is 10.1.N.0/24; host H of site N is 10.1.N.(H+1); the
//!   site's edge router is 10.1.N.254 on the LAN bridge;
//! - the WAN arm of site N (edge <-> router, through gw-linkemu) is
//!   10.255.N.2 (edge) / 10.255.N.1 (router);
//! - `login` is 10.0.0.1, joined to the router (10.0.0.254) by its own arm.
//!
//! Every path between two different sites (login counts as one) crosses two
//! arms, so each arm gets half the one-way delay and the loss that makes
//! the end-to-end loss what was asked.

use crate::sys::Result;
use std::collections::BTreeMap;
use std::path::PathBuf;

pub const STATE_ROOT: &str = "/run/gw-testbed";
pub const NETNS_DIR: &str = "/run/netns";
pub const MAX_SITES: u32 = 200;
pub const MAX_HOSTS: u32 = 250;

#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    pub sites: u32,
    pub hosts: u32,
    pub wan_delay_ms: f64,
    pub wan_loss_pct: f64,
    pub wan_rate_mbit: f64,
    pub lan_rate_mbit: f64,
    /// Site indexes behind a firewall.
    pub firewall: Vec<u32>,
    pub shared_fs: bool,
    /// A non-root user who can log in to every host with the testbed key.
    pub user: Option<String>,
    /// More paths hidden on compute hosts (besides /usr/local and all of / outside the system).
    pub mask: Vec<String>,
    /// Compute hosts' TCP tuned for the WAN as an administrator would tune
    /// it (`--tcp-tuning`, see `net::tcp_tuning`); stock hosts are not.
    pub tcp_tuning: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Host {
    pub name: String,
    /// None for `login`.
    pub site: Option<u32>,
    pub index: u32,
    pub addr: String,
}

impl Host {
    pub fn is_login(&self) -> bool {
        self.site.is_none()
    }
}

pub fn site_name(n: u32) -> String {
    format!("s{n}")
}

/// Parses `--firewall` values: a site name (`s1`) or its index (`1`).
pub fn parse_site(s: &str, sites: u32) -> Result<u32> {
    let n: u32 = s.strip_prefix('s').unwrap_or(s).parse().map_err(|_| {
        format!(
            "--firewall {s:?}: not a site (s0..s{})",
            sites.saturating_sub(1)
        )
    })?;
    if n >= sites {
        return Err(format!(
            "--firewall {s:?}: there are only {sites} sites (s0..s{})",
            sites.saturating_sub(1)
        ));
    }
    Ok(n)
}

/// Instance ids go into namespace and file names: short, `[a-z0-9]`.
pub fn check_id(id: &str) -> Result<()> {
    if id.is_empty()
        || id.len() > 12
        || !id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    {
        return Err(format!(
            "instance id {id:?} must be 1..12 characters of [a-z0-9]"
        ));
    }
    Ok(())
}

pub fn fresh_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos() as u64 ^ d.as_secs())
        .unwrap_or(0);
    let mix = (nanos ^ ((std::process::id() as u64) << 20)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    format!("{:06x}", (mix >> 40) & 0xff_ffff)
}

#[derive(Debug, Clone)]
pub struct Plan {
    pub id: String,
    pub opts: Options,
    pub hosts: Vec<Host>,
}

impl Plan {
    pub fn new(id: &str, opts: Options) -> Result<Plan> {
        check_id(id)?;
        if opts.sites == 0 || opts.sites > MAX_SITES {
            return Err(format!("--sites must be 1..{MAX_SITES}"));
        }
        if opts.hosts == 0 || opts.hosts > MAX_HOSTS {
            return Err(format!("--hosts must be 1..{MAX_HOSTS} per site"));
        }
        for (what, v, max) in [
            ("--wan-delay", opts.wan_delay_ms, 10_000.0),
            ("--wan-loss", opts.wan_loss_pct, 100.0),
            ("--wan-rate", opts.wan_rate_mbit, 100_000.0),
            ("--lan-rate", opts.lan_rate_mbit, 100_000.0),
        ] {
            if !(0.0..=max).contains(&v) {
                return Err(format!("{what} {v} is out of 0..{max}"));
            }
        }
        for m in &opts.mask {
            if !m.starts_with('/') || m.contains(',') || m.contains('\n') || m == "/" {
                return Err(format!(
                    "--mask {m:?}: an absolute path other than / (without commas)"
                ));
            }
        }
        let mut hosts = vec![Host {
            name: "login".into(),
            site: None,
            index: 0,
            addr: "10.0.0.1".into(),
        }];
        for s in 0..opts.sites {
            for h in 0..opts.hosts {
                hosts.push(Host {
                    name: format!("s{s}h{h}"),
                    site: Some(s),
                    index: h,
                    addr: format!("10.1.{s}.{}", h + 1),
                });
            }
        }
        Ok(Plan {
            id: id.to_string(),
            opts,
            hosts,
        })
    }

    pub fn dir(&self) -> PathBuf {
        instance_dir(&self.id)
    }

    pub fn host_dir(&self, host: &str) -> PathBuf {
        self.dir().join("hosts").join(host)
    }

    pub fn ssh_dir(&self) -> PathBuf {
        self.dir().join("ssh")
    }

    pub fn host(&self, name: &str) -> Option<&Host> {
        self.hosts.iter().find(|h| h.name == name)
    }

    /// Named network namespace (under /run/netns) of the router, an edge, or login.
    pub fn netns(&self, what: &str) -> String {
        format!("gwtb-{}-{what}", self.id)
    }

    pub fn netns_path(&self, what: &str) -> String {
        format!("{NETNS_DIR}/{}", self.netns(what))
    }

    pub fn gateway(&self, site: u32) -> String {
        format!("s{site}h0")
    }

    pub fn firewalled(&self, site: u32) -> bool {
        self.opts.firewall.contains(&site)
    }

    /// Per-arm one-way delay in ms and loss in percent (two arms per path).
    pub fn arm_impairments(&self) -> (f64, f64) {
        let p = self.opts.wan_loss_pct / 100.0;
        let per_arm = 1.0 - (1.0 - p).sqrt();
        (self.opts.wan_delay_ms / 2.0, per_arm * 100.0)
    }

    /// The `instance` file: the options, so other commands rebuild the plan.
    pub fn to_text(&self) -> String {
        let o = &self.opts;
        let fw: Vec<String> = o.firewall.iter().map(|s| s.to_string()).collect();
        format!(
            "id={}\nsites={}\nhosts={}\nwan_delay_ms={}\nwan_loss_pct={}\nwan_rate_mbit={}\nlan_rate_mbit={}\nfirewall={}\nshared_fs={}\nuser={}\nmask={}\ntcp_tuning={}\n",
            self.id,
            o.sites,
            o.hosts,
            o.wan_delay_ms,
            o.wan_loss_pct,
            o.wan_rate_mbit,
            o.lan_rate_mbit,
            fw.join(","),
            o.shared_fs,
            o.user.as_deref().unwrap_or(""),
            o.mask.join(","),
            o.tcp_tuning
        )
    }

    pub fn from_text(text: &str) -> Result<Plan> {
        let kv: BTreeMap<&str, &str> = text
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.trim(), v.trim()))
            .collect();
        let get = |k: &str| {
            kv.get(k)
                .copied()
                .ok_or_else(|| format!("instance file lacks {k}"))
        };
        let num = |k: &str| -> Result<f64> {
            get(k)?
                .parse()
                .map_err(|_| format!("instance file: bad {k}"))
        };
        let firewall = get("firewall")?
            .split(',')
            .filter(|s| !s.is_empty())
            .map(|s| {
                s.parse()
                    .map_err(|_| "instance file: bad firewall".to_string())
            })
            .collect::<Result<Vec<u32>>>()?;
        let opts = Options {
            sites: num("sites")? as u32,
            hosts: num("hosts")? as u32,
            wan_delay_ms: num("wan_delay_ms")?,
            wan_loss_pct: num("wan_loss_pct")?,
            wan_rate_mbit: num("wan_rate_mbit")?,
            lan_rate_mbit: num("lan_rate_mbit")?,
            firewall,
            shared_fs: get("shared_fs")? == "true",
            user: kv
                .get("user")
                .filter(|u| !u.is_empty())
                .map(|u| u.to_string()),
            mask: kv
                .get("mask")
                .map(|m| {
                    m.split(',')
                        .filter(|p| !p.is_empty())
                        .map(String::from)
                        .collect()
                })
                .unwrap_or_default(),
            // Instances made before the option have no line: untuned.
            tcp_tuning: kv.get("tcp_tuning") == Some(&"true"),
        };
        Plan::new(get("id")?, opts)
    }

    pub fn load(id: &str) -> Result<Plan> {
        check_id(id)?;
        let path = instance_dir(id).join("instance");
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("no testbed instance {id:?} ({}: {e})", path.display()))?;
        Plan::from_text(&text)
    }

    /// /etc/hosts of every host: all testbed hosts by name.
    pub fn etc_hosts(&self) -> String {
        let mut s = format!(
            "# gw-testbed instance {}\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n",
            self.id
        );
        for h in &self.hosts {
            s.push_str(&format!("{}\t{}\n", h.addr, h.name));
        }
        s
    }
}

pub fn instance_dir(id: &str) -> PathBuf {
    PathBuf::from(STATE_ROOT).join(id)
}

/// Ids of instances that have a state directory.
pub fn instance_ids() -> Vec<String> {
    let mut ids: Vec<String> = std::fs::read_dir(STATE_ROOT)
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str().map(String::from))
                .filter(|n| check_id(n).is_ok())
                .collect()
        })
        .unwrap_or_default();
    ids.sort();
    ids
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> Options {
        Options {
            sites: 2,
            hosts: 3,
            wan_delay_ms: 20.0,
            wan_loss_pct: 19.0,
            wan_rate_mbit: 100.0,
            lan_rate_mbit: 0.0,
            firewall: vec![1],
            shared_fs: false,
            user: Some("alice".into()),
            mask: vec!["/usr/bin/gwrun".into(), "/opt/x".into()],
            tcp_tuning: true,
        }
    }

    #[test]
    fn instance_file_round_trips() {
        let p = Plan::new("ab12", opts()).unwrap();
        let q = Plan::from_text(&p.to_text()).unwrap();
        assert_eq!(p.opts, q.opts);
        assert_eq!(p.hosts, q.hosts);
        assert_eq!(p.hosts.len(), 7);
        assert_eq!(p.host("s1h2").unwrap().addr, "10.1.1.3");
    }

    #[test]
    fn two_arms_give_the_end_to_end_delay_and_loss() {
        let p = Plan::new("ab12", opts()).unwrap();
        let (d, l) = p.arm_impairments();
        assert_eq!(d, 10.0);
        // Two arms of 10% loss each deliver 0.81 of the packets.
        assert!((l - 10.0).abs() < 1e-9, "{l}");
    }

    #[test]
    fn bad_ids_and_sites_are_refused() {
        assert!(check_id("a-b").is_err());
        assert!(check_id("").is_err());
        assert!(check_id("UPPER").is_err());
        assert_eq!(parse_site("s1", 2), Ok(1));
        assert_eq!(parse_site("0", 2), Ok(0));
        assert!(parse_site("s2", 2).is_err());
        assert!(parse_site("x", 2).is_err());
    }
}
