//! `start=ssh`: one ssh session per host, carrying first the bootstrap
//! (the proxy binary when the host lacks it), then the protocol. Nothing
//! secret is on the command line: the job secret is in the first frame.

use std::process::Command;

use super::{ProxyImage, StartMethod};
use crate::grid::bootstrap::remote_command;

pub struct Ssh {
    /// `ssh` and its options (`-l user`, `-p port`, the site's
    /// `ssh_options`); the host name and the remote command follow.
    pub argv: Vec<String>,
}

/// The ssh command line for a site: `ssh -T -o BatchMode=yes …`. BatchMode:
/// a password prompt would hang the job; the user's keys or agent must do.
pub fn site_argv(user: Option<&str>, port: Option<u16>, options: &[String]) -> Vec<String> {
    let ssh = std::env::var("GW_SSH").unwrap_or_else(|_| "ssh".to_string());
    let mut v = vec![
        ssh,
        "-T".into(),
        "-o".into(),
        "BatchMode=yes".into(),
        "-o".into(),
        "ConnectTimeout=15".into(),
        "-o".into(),
        "ServerAliveInterval=5".into(),
    ];
    if let Some(u) = user {
        v.push("-l".into());
        v.push(u.into());
    }
    if let Some(p) = port {
        v.push("-p".into());
        v.push(p.to_string());
    }
    v.extend(options.iter().cloned());
    v
}

impl StartMethod for Ssh {
    fn name(&self) -> &'static str {
        "ssh"
    }

    fn command(
        &self,
        host: &str,
        proxy: &ProxyImage,
        skip: usize,
        prefix: Option<&str>,
    ) -> Command {
        let mut c = Command::new(&self.argv[0]);
        c.args(&self.argv[1..]);
        c.arg("--").arg(host);
        c.arg(remote_command(&proxy.hash, proxy.size, skip, prefix));
        c
    }

    fn bootstraps(&self) -> bool {
        true
    }
}
