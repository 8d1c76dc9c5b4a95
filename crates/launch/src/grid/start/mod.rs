//! How a proxy is started on a host: one file per start method, each
//! filling [`StartMethod`] (as a launcher's "launcher" components do in
//! Hydra): `local`, `ssh`, `slurm`. The started command's stdin/stdout are the proxy's channel to
//! its parent; its stderr is passed through to the user.

use std::process::Command;

use super::protocol::PlanSite;

mod local;
pub mod slurm;
pub mod ssh;

pub use local::Local;
pub use slurm::Slurm;
pub use ssh::Ssh;

/// The proxy binary as the parent knows it.
#[derive(Debug, Clone)]
pub struct ProxyImage {
    /// This gwrun (`/proc/self/exe`).
    pub path: std::path::PathBuf,
    pub hash: String,
    pub size: u64,
}

pub trait StartMethod {
    /// For messages: `ssh`, `local`.
    fn name(&self) -> &'static str;
    /// The command that runs a proxy on `host`. `skip`: for methods that
    /// bootstrap, the length of the first frame, sent before the answer
    /// (`super::bootstrap`).
    fn command(&self, host: &str, proxy: &ProxyImage, skip: usize, prefix: Option<&str>)
        -> Command;
    /// Whether the channel starts with the bootstrap exchange
    /// (`super::bootstrap`) before frames.
    fn bootstraps(&self) -> bool;
}

/// The method a parent uses for a site of the plan.
pub fn for_site(site: &PlanSite) -> Box<dyn StartMethod> {
    match site.method.as_str() {
        "ssh" => Box::new(Ssh {
            argv: site.reach.clone(),
        }),
        "slurm" => Box::new(Slurm {
            argv: site.reach.clone(),
        }),
        _ => Box::new(Local),
    }
}
