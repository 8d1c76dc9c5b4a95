//! The parent's side of a channel to one proxy (front end → site leader,
//! leader → host): starting it, the bootstrap, the first message, and
//! liveness.

use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::process::Stdio;

use super::bootstrap::BootLine;
use super::channel::Channel;
use super::protocol::{encode, Frame, Hello, Msg};
use super::start::{ProxyImage, StartMethod};
use crate::sys;

pub struct Link {
    /// The host (index into the plan) the proxy runs on.
    pub host: usize,
    pub channel: Channel,
    /// The local process behind the channel (ssh, or a local proxy).
    pub pid: i32,
    /// The Hello frame, kept until the bootstrap said whether it must go
    /// again after the proxy binary.
    hello: Option<Vec<u8>>,
    /// The proxy answered Hello with our version.
    pub ready: bool,
    /// The proxy said Done: its host is clean.
    pub done: bool,
    /// Why the link was lost before Done (reported once).
    pub lost: Option<String>,
    pub reported: bool,
}

impl Link {
    /// Starts the proxy for `hello.host` on `host_name` with `method`.
    pub fn start(
        method: &dyn StartMethod,
        host_name: &str,
        proxy: &ProxyImage,
        prefix: Option<&str>,
        hello: Hello,
    ) -> io::Result<Link> {
        let host = hello.host;
        let mut frame = Vec::new();
        encode(&Frame::Msg(Msg::Hello(Box::new(hello))), &mut frame);
        let mut cmd = method.command(host_name, proxy, frame.len(), prefix);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        // Own process group: a terminal's Ctrl-C reaches the front end,
        // which tears the job down in order, not ssh, which would cut the
        // channels first.
        cmd.process_group(0);
        let parent = std::process::id() as libc::pid_t;
        // SAFETY: between fork and exec only prctl(2)/getppid(2), which are
        // async-signal-safe: the ssh client (or local proxy) dies with us,
        // which closes the channel, which makes the remote proxy kill its
        // ranks — nothing outlives a killed front end.
        unsafe {
            cmd.pre_exec(move || sys::die_with_parent(parent));
        }
        let mut child = cmd.spawn().map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "cannot start the {} method for host {host_name}: {}",
                    method.name(),
                    sys::os_message(&e)
                ),
            )
        })?;
        let stdin = OwnedFd::from(
            child
                .stdin
                .take()
                .ok_or_else(|| io::Error::other("no stdin pipe"))?,
        );
        let stdout = OwnedFd::from(
            child
                .stdout
                .take()
                .ok_or_else(|| io::Error::other("no stdout pipe"))?,
        );
        let pid = child.id() as i32;
        // Reaped by the owner's waitpid(-1) loop.
        drop(child);
        let mut link = Link {
            host,
            channel: Channel::new(stdout, stdin, method.bootstraps()),
            pid,
            hello: None,
            ready: false,
            done: false,
            lost: None,
            reported: false,
        };
        // The Hello goes now, also ahead of the bootstrap's answer
        // (`super::bootstrap`: the script skips it when it must first
        // read the binary, and then it goes again).
        link.channel.send_raw(&frame);
        if method.bootstraps() {
            link.hello = Some(frame);
        }
        Ok(link)
    }

    /// After a read: finishes the bootstrap exchange (sending the proxy
    /// binary if asked). Errors mark the link lost.
    pub fn after_read(&mut self, proxy: &ProxyImage) {
        let Some(line) = self.channel.take_boot_line() else {
            return;
        };
        match line {
            Ok(BootLine::Have) => {
                self.hello = None;
                self.channel.release_held();
            }
            Ok(BootLine::Need) => match std::fs::read(&proxy.path) {
                Ok(bytes) if bytes.len() as u64 == proxy.size => {
                    self.channel.send_raw(&bytes);
                    if let Some(h) = self.hello.take() {
                        self.channel.send_raw(&h);
                    }
                    self.channel.release_held();
                }
                Ok(_) => self.lose(format!(
                    "{} changed while the job started",
                    proxy.path.display()
                )),
                Err(e) => self.lose(format!(
                    "cannot read {}: {}",
                    proxy.path.display(),
                    sys::os_message(&e)
                )),
            },
            Err(e) => self.lose(e),
        }
    }

    pub fn lose(&mut self, why: String) {
        if self.lost.is_none() && !self.done {
            self.lost = Some(why);
        }
        self.channel.close();
    }

    /// True once nothing more will come from this proxy.
    pub fn finished(&self) -> bool {
        self.done || self.lost.is_some() || !self.channel.is_open()
    }
}
