//! `start=local`: the proxy is this very binary, started as a child.

use std::process::Command;

use super::{ProxyImage, StartMethod};

pub struct Local;

impl StartMethod for Local {
    fn name(&self) -> &'static str {
        "local"
    }

    fn command(
        &self,
        _host: &str,
        proxy: &ProxyImage,
        _skip: usize,
        _prefix: Option<&str>,
    ) -> Command {
        let mut c = Command::new(&proxy.path);
        c.arg("--proxy");
        c
    }

    fn bootstraps(&self) -> bool {
        false
    }
}
