//! `start=slurm`: inside an allocation (`salloc -N K gwrun -f …`), each
//! proxy is a job step of one task on its host, `srun --overlap -N1 -n1 -w
//! HOST`, whose stdin/stdout carry first the bootstrap (the proxy binary
//! when the host lacks it), then the protocol — as over ssh. `-u`: srun
//! must forward the frames as they come, not line by line; `--overlap`:
//! the proxies' steps share the allocation's CPUs with each other and with
//! the leader's own step; `--mpi=none`: the proxy needs no PMI from Slurm.

use std::process::Command;

use super::{ProxyImage, StartMethod};
use crate::grid::bootstrap::script_argv;

pub struct Slurm {
    /// `srun` and its options; `-w HOST` and the command follow.
    pub argv: Vec<String>,
}

/// The srun command line for a site.
pub fn site_argv() -> Vec<String> {
    let srun = std::env::var("GW_SRUN").unwrap_or_else(|_| "srun".to_string());
    [
        srun.as_str(),
        "--overlap",
        "--quiet",
        "-u",
        "--mpi=none",
        "--input=all",
        "-N1",
        "-n1",
        "--kill-on-bad-exit=1",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

impl StartMethod for Slurm {
    fn name(&self) -> &'static str {
        "slurm"
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
        c.arg("-w").arg(host);
        // Steps start in the caller's directory, which a host may lack.
        c.arg("--chdir=/");
        c.args(script_argv(&proxy.hash, proxy.size, skip, prefix));
        c
    }

    fn bootstraps(&self) -> bool {
        true
    }
}
