//! The files `up` writes before any host starts: ssh keys (one client pair,
//! one host key per host), known_hosts, the ssh client config, each host's
//! sshd_config, /etc/hosts, and the machines file.

use crate::plan::{site_name, Host, Plan};
use crate::sys::{self, Result};
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// Makes ed25519 key pairs at `keys` (path, comment) — all at once, as
/// separate processes (a site of 32 hosts needs 33 keys) — and returns
/// each public key as `type base64`.
fn keygen(keys: &[(PathBuf, String)]) -> Result<Vec<String>> {
    let mut children = Vec::new();
    for (path, comment) in keys {
        let child = Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-C", comment, "-f"])
            .arg(path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run ssh-keygen: {e}"))?;
        children.push(child);
    }
    let mut failed = None;
    for (child, (path, _)) in children.into_iter().zip(keys) {
        let out = child
            .wait_with_output()
            .map_err(|e| format!("ssh-keygen: {e}"))?;
        if !out.status.success() && failed.is_none() {
            failed = Some(format!(
                "ssh-keygen -f {} failed: {}",
                path.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
    }
    if let Some(e) = failed {
        return Err(e);
    }
    keys.iter()
        .map(|(path, _)| {
            let public = PathBuf::from(format!("{}.pub", path.display()));
            let text = std::fs::read_to_string(&public)
                .map_err(|e| format!("read {}: {e}", public.display()))?;
            Ok(text
                .split_whitespace()
                .take(2)
                .collect::<Vec<_>>()
                .join(" "))
        })
        .collect()
}

/// 128 random bits in hex, as in /etc/machine-id: hosts that share a
/// kernel (and boot id) still differ here.
fn machine_id() -> Result<String> {
    let mut b = [0u8; 16];
    std::io::Read::read_exact(
        &mut std::fs::File::open("/dev/urandom").map_err(|e| format!("/dev/urandom: {e}"))?,
        &mut b,
    )
    .map_err(|e| format!("/dev/urandom: {e}"))?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

pub fn bin_path(plan: &Plan) -> String {
    plan.ssh_dir().join("bin").to_string_lossy().into_owned()
}

pub fn config_path(plan: &Plan) -> String {
    plan.ssh_dir().join("config").to_string_lossy().into_owned()
}

pub fn hostfile_path(plan: &Plan) -> String {
    plan.dir().join("hostfile").to_string_lossy().into_owned()
}

pub fn machines_path(plan: &Plan) -> String {
    plan.dir().join("machines").to_string_lossy().into_owned()
}

pub fn prepare(plan: &Plan) -> Result<()> {
    let dir = plan.dir();
    let ssh = plan.ssh_dir();
    sys::mkdir(&ssh.to_string_lossy(), 0o755)?;
    let mut keys = vec![(ssh.join("id_ed25519"), format!("gw-testbed-{}", plan.id))];
    for h in &plan.hosts {
        let hd = plan.host_dir(&h.name);
        sys::mkdir(&hd.to_string_lossy(), 0o755)?;
        keys.push((hd.join("ssh_host_ed25519_key"), h.name.clone()));
    }
    let public = keygen(&keys)?;
    sys::write_file(
        &ssh.join("authorized_keys"),
        &format!("{} gw-testbed-{}\n", public[0], plan.id),
        0o644,
    )?;
    let mut known = String::new();
    for (h, key) in plan.hosts.iter().zip(&public[1..]) {
        let hd = plan.host_dir(&h.name);
        known.push_str(&format!("{},{} {key}\n", h.name, h.addr));
        sys::write_file(&hd.join("sshd_config"), &sshd_config(plan, h), 0o644)?;
        sys::write_file(&hd.join("hostname"), &format!("{}\n", h.name), 0o644)?;
        sys::write_file(
            &hd.join("machine-id"),
            &format!("{}\n", machine_id()?),
            0o444,
        )?;
    }
    sys::write_file(&ssh.join("known_hosts"), &known, 0o644)?;
    // Launchers that run a plain `ssh` (Hydra's -launcher ssh, Open MPI's
    // rsh agent) find the testbed's config through these wrappers when
    // this directory comes first in PATH.
    let bin = ssh.join("bin");
    sys::mkdir(&bin.to_string_lossy(), 0o755)?;
    for tool in ["ssh", "scp"] {
        sys::write_file(
            &bin.join(tool),
            &format!(
                "#!/bin/sh\n# gw-testbed instance {}: {tool} with the testbed's config\nexec /usr/bin/{tool} -F {} \"$@\"\n",
                plan.id,
                ssh.join("config").display()
            ),
            0o755,
        )?;
    }
    sys::write_file(&ssh.join("config"), &client_config(plan), 0o644)?;
    sys::write_file(&dir.join("etc-hosts"), &plan.etc_hosts(), 0o644)?;
    sys::write_file(&dir.join("machines"), &machines(plan), 0o644)?;
    // Hydra and Open MPI read host lines but not site sections.
    let plain: String = plan
        .hosts
        .iter()
        .filter(|h| !h.is_login())
        .map(|h| format!("{}\n", h.name))
        .collect();
    sys::write_file(&dir.join("hostfile"), &plain, 0o644)?;
    Ok(())
}

fn sshd_config(plan: &Plan, h: &Host) -> String {
    let hd = plan.host_dir(&h.name);
    let ssh = plan.ssh_dir();
    format!(
        "# sshd of testbed host {name} (instance {id}); started by the host's init\n\
         Port 22\n\
         AddressFamily inet\n\
         ListenAddress 0.0.0.0\n\
         HostKey {hd}/ssh_host_ed25519_key\n\
         PidFile {hd}/sshd.pid\n\
         UsePAM no\n\
         PermitRootLogin prohibit-password\n\
         PubkeyAuthentication yes\n\
         PasswordAuthentication no\n\
         KbdInteractiveAuthentication no\n\
         AuthorizedKeysFile .ssh/authorized_keys {ssh}/authorized_keys\n\
         StrictModes yes\n\
         UseDNS no\n\
         PrintMotd no\n\
         PrintLastLog no\n\
         X11Forwarding no\n\
         AllowTcpForwarding yes\n\
         AcceptEnv LANG LC_* GW_*\n\
         MaxStartups 200:30:400\n\
         MaxSessions 100\n\
         Subsystem sftp internal-sftp\n",
        name = h.name,
        id = plan.id,
        hd = hd.display(),
        ssh = ssh.display(),
    )
}

/// `ssh -F CONFIG HOST` from login or any host. Hosts behind a firewall
/// are reached through their site's gateway (ProxyJump; ssh passes -F on to
/// the jump).
fn client_config(plan: &Plan) -> String {
    let ssh = plan.ssh_dir();
    let mut s = format!(
        "# gw-testbed instance {}: ssh -F {} HOST\n",
        plan.id,
        ssh.join("config").display()
    );
    for site in 0..plan.opts.sites {
        if !plan.firewalled(site) {
            continue;
        }
        let behind: Vec<String> = plan
            .hosts
            .iter()
            .filter(|h| h.site == Some(site) && h.index > 0)
            .flat_map(|h| [h.name.clone(), h.addr.clone()])
            .collect();
        if !behind.is_empty() {
            s.push_str(&format!(
                "\nHost {}\n    ProxyJump {}\n",
                behind.join(" "),
                plan.gateway(site)
            ));
        }
    }
    let all: Vec<String> = plan
        .hosts
        .iter()
        .flat_map(|h| [h.name.clone(), h.addr.clone()])
        .collect();
    s.push_str(&format!(
        "\nHost {}\n    IdentityFile {key}\n    IdentitiesOnly yes\n    UserKnownHostsFile {kh}\n    GlobalKnownHostsFile /dev/null\n    StrictHostKeyChecking yes\n    BatchMode yes\n    ConnectTimeout 10\n    ControlMaster no\n    LogLevel ERROR\n",
        all.join(" "),
        key = ssh.join("id_ed25519").display(),
        kh = ssh.join("known_hosts").display(),
    ));
    s
}

/// Hydra-form host lines grouped in `[site NAME] start=ssh` sections.
pub fn machines(plan: &Plan) -> String {
    let o = &plan.opts;
    let mut s = format!(
        "# gw-testbed instance {}: {} site(s) x {} host(s); one-way WAN delay {} ms between sites\n\
         # reach any host with: ssh -F {} HOST\n",
        plan.id,
        o.sites,
        o.hosts,
        o.wan_delay_ms,
        config_path(plan)
    );
    for site in 0..o.sites {
        s.push('\n');
        // gwrun's proxies ssh on from a site's first host: they need the
        // testbed's config there too (it is visible on every host).
        let opts = format!("ssh_options=\"-F {}\"", config_path(plan));
        if plan.firewalled(site) {
            s.push_str(&format!(
                "# behind a firewall: only {} is reachable from outside the site\n[site {}] start=ssh gateway={} {opts}\n",
                plan.gateway(site),
                site_name(site),
                plan.gateway(site)
            ));
        } else {
            s.push_str(&format!("[site {}] start=ssh {opts}\n", site_name(site)));
        }
        for h in plan.hosts.iter().filter(|h| h.site == Some(site)) {
            s.push_str(&format!("{}\n", h.name));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Options;

    #[test]
    fn machines_file_groups_hosts_by_site_and_names_gateways() {
        let plan = Plan::new(
            "x1",
            Options {
                sites: 2,
                hosts: 2,
                wan_delay_ms: 20.0,
                wan_loss_pct: 0.0,
                wan_rate_mbit: 0.0,
                lan_rate_mbit: 0.0,
                firewall: vec![1],
                shared_fs: false,
                user: None,
                mask: Vec::new(),
                tcp_tuning: false,
            },
        )
        .unwrap();
        let m = machines(&plan);
        let lines: Vec<&str> = m
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .collect();
        assert_eq!(
            lines,
            [
                "[site s0] start=ssh ssh_options=\"-F /run/gw-testbed/x1/ssh/config\"",
                "s0h0",
                "s0h1",
                "[site s1] start=ssh gateway=s1h0 ssh_options=\"-F /run/gw-testbed/x1/ssh/config\"",
                "s1h0",
                "s1h1"
            ]
        );
        let c = client_config(&plan);
        assert!(c.contains("Host s1h1 10.1.1.2\n    ProxyJump s1h0"), "{c}");
    }
}
