//! How a proxy is started on a host: one file per start method, each
//! filling [`StartMethod`] (as a launcher's "launcher" components do in
//! Hydra). The started command's stdin/stdout are the proxy's channel to
//! its parent; its stderr is passed through to the user.

use std::process::Command;

mod local;
pub mod ssh;

pub use local::Local;
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
    /// The command that runs a proxy on `host`.
    fn command(&self, host: &str, proxy: &ProxyImage, prefix: Option<&str>) -> Command;
    /// Whether the channel starts with the bootstrap exchange
    /// (`super::bootstrap`) before frames.
    fn bootstraps(&self) -> bool;
}

/// The method a parent uses for a site, from the plan's `reach` prefix:
/// empty = local, else the ssh command line before the host name.
pub fn for_reach(reach: &[String]) -> Box<dyn StartMethod> {
    if reach.is_empty() {
        Box::new(Local)
    } else {
        Box::new(Ssh {
            argv: reach.to_vec(),
        })
    }
}
