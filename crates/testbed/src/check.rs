//! `check`: names every missing tool, package or kernel feature the
//! testbed needs, by trying each kernel feature in a throwaway network
//! namespace (unshared by the child, never named, gone when it exits).

use crate::plan::Options;
use crate::sys::{self, Result};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

/// Tools `up` needs for `opts`, each with the Debian package that has it.
pub fn missing_tools(opts: &Options) -> Vec<String> {
    let mut need = vec![
        ("/usr/sbin/sshd", "openssh-server"),
        ("ssh-keygen", "openssh-client"),
        ("ip", "iproute2"),
    ];
    if opts.lan_rate_mbit > 0.0 {
        need.push(("tc", "iproute2"));
    }
    if !opts.firewall.is_empty() {
        need.push(("nft", "nftables"));
    }
    need.into_iter()
        .filter(|(tool, _)| sys::which(tool).is_none())
        .map(|(tool, pkg)| format!("{tool} (Debian package {pkg})"))
        .collect()
}

/// Runs `sh -c script` in a fresh network namespace; the error is its stderr.
fn probe(script: &str) -> Result<()> {
    let mut cmd = Command::new("sh");
    cmd.args(["-c", script]).stdin(Stdio::null());
    // SAFETY: unshare is an async-signal-safe system call.
    unsafe {
        cmd.pre_exec(|| {
            if libc::unshare(libc::CLONE_NEWNET) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    sys::run(&mut cmd).map(|_| ())
}

pub fn check() -> Result<()> {
    let mut missing = Vec::new();
    if !sys::is_root() {
        missing.push(
            "root (gw-testbed makes namespaces, mounts, bridges and nftables rules)".to_string(),
        );
    }
    let all = Options {
        sites: 1,
        hosts: 1,
        wan_delay_ms: 0.0,
        wan_loss_pct: 0.0,
        wan_rate_mbit: 0.0,
        lan_rate_mbit: 1.0,
        firewall: vec![0],
        shared_fs: false,
        user: None,
        mask: Vec::new(),
        tcp_tuning: false,
    };
    missing.extend(missing_tools(&all));
    for (tool, pkg) in [("ssh", "openssh-client"), ("ping", "iputils-ping")] {
        if sys::which(tool).is_none() {
            missing.push(format!("{tool} (Debian package {pkg}; used by tests)"));
        }
    }
    if sys::find_program("gw-linkemu", "GW_LINKEMU").is_none() {
        missing.push(
            "gw-linkemu (cargo build -p gridwire-linkemu, next to gw-testbed, or GW_LINKEMU)"
                .into(),
        );
    }
    for ns in ["net", "mnt", "uts", "ipc", "pid"] {
        if !std::path::Path::new(&format!("/proc/self/ns/{ns}")).exists() {
            missing.push(format!("kernel: {ns} namespaces"));
        }
    }
    if !std::path::Path::new("/dev/net/tun").exists() {
        missing.push("kernel: /dev/net/tun (TUN devices, for gw-linkemu)".into());
    }
    if sys::is_root() && missing.is_empty() {
        let probes = [
            ("bridges", "ip link add gwtbprobe type bridge"),
            ("veth pairs", "ip link add gwtbp0 type veth peer name gwtbp1"),
            (
                "the tbf qdisc",
                "ip link add gwtbp0 type veth peer name gwtbp1 && tc qdisc add dev gwtbp0 root tbf rate 10mbit burst 16kb latency 50ms",
            ),
            (
                "nftables with connection tracking",
                "printf 'table inet p {\\n chain f {\\n type filter hook forward priority 0; policy accept;\\n ct state established accept\\n }\\n}\\n' | nft -f -",
            ),
        ];
        for (what, script) in probes {
            if let Err(e) = probe(script) {
                missing.push(format!("kernel: {what} ({e})"));
            }
        }
    }
    if missing.is_empty() {
        println!("gw-testbed: everything needed is there");
        Ok(())
    } else {
        Err(format!("missing:\n  {}", missing.join("\n  ")))
    }
}
