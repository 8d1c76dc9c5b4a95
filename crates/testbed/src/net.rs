//! The network: one bridge per site (in the site's edge namespace), each
//! site's edge joined to a router namespace through its own gw-linkemu arm,
//! and `login` joined to the router by an arm of its own.
//!
//! ```text
//!  s0h0 eth0 --+                                              +-- eth0 s1h0
//!              br0 [edge s0] wan0 ~~linkemu~~ wan0 [router] wan1 ~~linkemu~~ wan1 [edge s1] br0
//!  s0h1 eth0 --+                                 wanlogin                     +-- eth0 s1h1
//!                                                   ~~linkemu~~ wanlogin [login]
//! ```
//!
//! Each arm delays by half of `--wan-delay`, so any two hosts of different
//! sites (login counts as a site) are `--wan-delay` apart one way. Nothing
//! is created in the machine's own network namespace: veth pairs are made
//! inside an edge with their peer moved straight into the host, and the TUN
//! devices of gw-linkemu live in the namespaces it joins. There is no
//! default route anywhere: hosts route 10.0.0.0/8 and nothing else.

use crate::plan::{site_name, Plan};
use crate::sys::{self, Result};
use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub const ROUTER: &str = "router";
pub const LOGIN_DEV: &str = "wanlogin";

fn add_netns(plan: &Plan, what: &str) -> Result<()> {
    sys::run(Command::new("ip").args(["netns", "add", &plan.netns(what)]))?;
    sys::ip_batch(&plan.netns_path(what), "link set lo up\n")?;
    sys::net_sysctl(&plan.netns_path(what), "net.ipv4.ip_forward", "1")
}

/// `--tcp-tuning`: the route to the other sites (and login) starts a
/// connection with 64 segments in flight and advertises as much, instead of
/// the stock 10, so a 64 KiB message crosses in one round trip; with
/// `net.ipv4.tcp_slow_start_after_idle=0` (set beside it) a connection idle
/// for longer than its retransmission timeout keeps its window. Both are the
/// per-host tuning docs/benchmarks.md describes for WAN links; the LAN
/// (the site's /24, a route of its own) is left as it is.
const TUNED_ROUTE: &str = " initcwnd 64 initrwnd 64";

fn tbf(netns: &str, dev: &str, mbit: f64) -> Result<()> {
    let bytes_per_s = mbit * 1e6 / 8.0;
    // 10 ms worth of the rate, at least ten full-size frames.
    let burst = (bytes_per_s / 100.0).max(15_140.0) as u64;
    let mut cmd = sys::in_netns(netns, "tc")?;
    cmd.args(["qdisc", "add", "dev", dev, "root", "tbf", "rate"])
        .arg(format!("{}kbit", (mbit * 1000.0).round() as u64))
        .args(["burst", &burst.to_string(), "latency", "50ms"]);
    sys::run(&mut cmd).map(|_| ())
}

fn init_of(inits: &BTreeMap<String, i32>, host: &str) -> Result<i32> {
    inits
        .get(host)
        .copied()
        .ok_or_else(|| format!("host {host} has no init"))
}

/// Builds everything between the hosts, whose inits (PID 1s) are `inits`.
pub fn build(plan: &Plan, inits: &BTreeMap<String, i32>, linkemu: &str) -> Result<()> {
    let o = &plan.opts;
    add_netns(plan, ROUTER)?;
    for site in 0..o.sites {
        let edge = site_name(site);
        add_netns(plan, &edge)?;
        let edge_path = plan.netns_path(&edge);
        let mut script = format!(
            "link add br0 type bridge\naddr add 10.1.{site}.254/24 dev br0\nlink set br0 up\n"
        );
        for h in plan.hosts.iter().filter(|h| h.site == Some(site)) {
            let pid = init_of(inits, &h.name)?;
            script.push_str(&format!(
                "link add p{i} type veth peer name eth0 netns {pid}\nlink set p{i} master br0\nlink set p{i} up\n",
                i = h.index
            ));
        }
        sys::ip_batch(&edge_path, &script)?;
        for h in plan.hosts.iter().filter(|h| h.site == Some(site)) {
            let host_ns = format!("/proc/{}/ns/net", init_of(inits, &h.name)?);
            sys::ip_batch(
                &host_ns,
                &format!(
                    "link set lo up\naddr add {}/24 dev eth0\nlink set eth0 up\nroute add 10.0.0.0/8 via 10.1.{site}.254{}\n",
                    h.addr,
                    if o.tcp_tuning { TUNED_ROUTE } else { "" }
                ),
            )?;
            if o.tcp_tuning {
                sys::net_sysctl(&host_ns, "net.ipv4.tcp_slow_start_after_idle", "0")?;
            }
            if o.lan_rate_mbit > 0.0 {
                tbf(&host_ns, "eth0", o.lan_rate_mbit)?;
                tbf(&edge_path, &format!("p{}", h.index), o.lan_rate_mbit)?;
            }
        }
        if plan.firewalled(site) {
            firewall(plan, site)?;
        }
    }
    // login's network namespace gets a name: gw-linkemu joins namespaces by name.
    sys::run(Command::new("ip").args([
        "netns",
        "attach",
        &plan.netns("login"),
        &init_of(inits, "login")?.to_string(),
    ]))?;
    sys::ip_batch(&plan.netns_path("login"), "link set lo up\n")?;

    let mut arms = Vec::new();
    for site in 0..o.sites {
        arms.push(Arm {
            name: site_name(site),
            ns_b: site_name(site),
            addr_a: format!("10.255.{site}.1/30"),
            addr_b: format!("10.255.{site}.2/30"),
            dev: format!("wan{site}"),
        });
    }
    arms.push(Arm {
        name: "login".into(),
        ns_b: "login".into(),
        addr_a: "10.0.0.254/24".into(),
        addr_b: "10.0.0.1/24".into(),
        dev: LOGIN_DEV.into(),
    });
    sys::mkdir(&plan.dir().join("linkemu").to_string_lossy(), 0o755)?;
    for arm in &arms {
        start_arm(plan, arm, linkemu)?;
    }
    for arm in &arms {
        wait_arm(plan, arm)?;
    }
    let mut router = String::new();
    for site in 0..o.sites {
        router.push_str(&format!("route add 10.1.{site}.0/24 dev wan{site}\n"));
        sys::ip_batch(
            &plan.netns_path(&site_name(site)),
            &format!("route add 10.0.0.0/8 dev wan{site}\n"),
        )?;
    }
    sys::ip_batch(&plan.netns_path(ROUTER), &router)?;
    sys::ip_batch(
        &plan.netns_path("login"),
        &format!("route add 10.0.0.0/8 dev {LOGIN_DEV}\n"),
    )?;
    Ok(())
}

struct Arm {
    name: String,
    ns_b: String,
    addr_a: String,
    addr_b: String,
    dev: String,
}

fn arm_log(plan: &Plan, arm: &Arm) -> std::path::PathBuf {
    plan.dir().join("linkemu").join(format!("{}.log", arm.name))
}

fn start_arm(plan: &Plan, arm: &Arm, linkemu: &str) -> Result<()> {
    let (delay, loss) = plan.arm_impairments();
    let log = std::fs::File::create(arm_log(plan, arm))
        .map_err(|e| format!("create {}: {e}", arm_log(plan, arm).display()))?;
    let log2 = log.try_clone().map_err(|e| e.to_string())?;
    let mut cmd = Command::new(linkemu);
    cmd.args([
        "--ns-a",
        &plan.netns(ROUTER),
        "--ns-b",
        &plan.netns(&arm.ns_b),
    ])
    .args(["--addr-a", &arm.addr_a, "--addr-b", &arm.addr_b])
    .args(["--dev", &arm.dev])
    .arg("--delay")
    .arg(format!("{delay}ms"))
    .arg("--loss")
    .arg(format!("{loss}"))
    .arg("--rate")
    .arg(format!(
        "{}bit",
        (plan.opts.wan_rate_mbit * 1e6).round() as u64
    ))
    .stdin(Stdio::null())
    .stdout(log)
    .stderr(log2);
    // SAFETY: setsid is async-signal-safe; the emulator outlives `up` and
    // must not get the terminal's Ctrl-C.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {linkemu}: {e}"))?;
    sys::write_file(
        &plan.dir().join("linkemu").join(format!("{}.pid", arm.name)),
        &format!("{}\n", child.id()),
        0o644,
    )
}

fn wait_arm(plan: &Plan, arm: &Arm) -> Result<()> {
    let path = arm_log(plan, arm);
    let pid: i32 =
        std::fs::read_to_string(plan.dir().join("linkemu").join(format!("{}.pid", arm.name)))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0);
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        if text.lines().any(|l| l.starts_with("READY")) {
            return Ok(());
        }
        if !sys::alive(pid) || Instant::now() > deadline {
            return Err(format!(
                "WAN arm {} (gw-linkemu) did not come up: {}",
                arm.name,
                text.trim()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Only the site's first host (the gateway) can be reached from outside;
/// the site's hosts reach out freely (replies come back as established).
fn firewall(plan: &Plan, site: u32) -> Result<()> {
    let gw = plan
        .host(&plan.gateway(site))
        .map(|h| h.addr.clone())
        .unwrap_or_default();
    let rules = format!(
        "table inet gwtestbed {{\n  chain forward {{\n    type filter hook forward priority filter; policy accept;\n    iifname \"wan{site}\" ct state established,related accept\n    iifname \"wan{site}\" ip daddr {gw} accept\n    iifname \"wan{site}\" drop\n  }}\n}}\n"
    );
    let mut cmd = sys::in_netns(&plan.netns_path(&site_name(site)), "nft")?;
    cmd.args(["-f", "-"]);
    sys::run_with_input(&mut cmd, &rules)
}

const PARTITION_TABLE: &str = "gwtestbed_partition";

/// Partitions `host` (or heals it): every packet to or from it is dropped
/// on its way — at its site's bridge (nftables, bridge family, in the edge)
/// or, for login, at the router — and nothing is reported to anyone: no
/// reset, no ICMP, no link change, and the host's own sends still succeed
/// locally, as when a cable or a switch fails. Peers notice by timeouts and
/// heartbeats only.
pub fn partition(plan: &Plan, host: &str, cut: bool) -> Result<()> {
    let h = plan
        .host(host)
        .ok_or_else(|| format!("no host {host:?} in instance {}", plan.id))?;
    // A bridge sees a port's packets in three hooks: forward (to another
    // host of the site), input (to be routed out of the site), output
    // (routed in from outside). The router forwards login's.
    let (netns, family, hooks, port) = match h.site {
        Some(site) => (
            site_name(site),
            "bridge",
            &["forward", "input", "output"][..],
            format!("p{}", h.index),
        ),
        None => (
            ROUTER.to_string(),
            "inet",
            &["forward"][..],
            LOGIN_DEV.to_string(),
        ),
    };
    let table = format!("{PARTITION_TABLE}_{}", h.name);
    let mut cmd = sys::in_netns(&plan.netns_path(&netns), "nft")?;
    cmd.args(["-f", "-"]);
    // Declaring the table first makes both commands work whatever the state.
    let mut rules = format!("table {family} {table} {{}}\ndelete table {family} {table}\n");
    if cut {
        rules.push_str(&format!("table {family} {table} {{\n"));
        for hook in hooks {
            rules.push_str(&format!(
                "  chain {hook} {{\n    type filter hook {hook} priority -300; policy accept;\n    iifname \"{port}\" drop\n    oifname \"{port}\" drop\n  }}\n"
            ));
        }
        rules.push_str("}\n");
    }
    sys::run_with_input(&mut cmd, &rules)
}
