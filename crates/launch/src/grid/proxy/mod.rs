//! Proxy mode (`gwrun --proxy`): one per host of a grid job.
//!
//! Its stdin/stdout are the channel to its parent (the front end, or the
//! leader of its site). It reads the plan, starts the proxies of its site
//! when it is the leader, puts staged files in place, forks the host's
//! ranks, serves them PMI-1 and PMI-2, and then only reports: output lines, exits,
//! aborts, its part of each fence. It decides nothing about the job but
//! one thing: when its parent goes away (EOF, or silence beyond the
//! heartbeat timeout) it kills its ranks — nothing runs on unsupervised.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::channel::{Channel, HIGH_WATER};
use super::link::Link;
use super::protocol::{Frame, Hello, Msg, Plan, VERSION};
use super::stagein::StageIn;
use super::start::{self, ProxyImage};
use crate::server::{Notice, PmiStream, Server};
use crate::sys::{self, Exit};

mod events;
mod ranks;
mod spawn;

pub use ranks::take_lines;

/// Between SIGTERM and SIGKILL of the ranks.
const KILL_GRACE: Duration = Duration::from_millis(1000);
/// How long the proxy waits for the first message.
const HELLO_TIMEOUT: Duration = Duration::from_secs(60);
/// PMI replies queued for one rank beyond which its input is not read.
const MAX_QUEUED_REPLY: usize = 256 * 1024;
/// Partial output lines longer than this are sent without waiting for `\n`.
const MAX_PARTIAL_LINE: usize = 64 * 1024;
/// Stdin bytes the front end may have in flight towards rank 0 (its
/// credit; see `frontend::STDIN_CREDIT`).
const STDIN_LIMIT: usize = super::frontend::STDIN_CREDIT as usize;

struct LocalRank {
    rank: usize,
    pid: i32,
    pmi: Option<OwnedFd>,
    /// PMI-1 or PMI-2, told by the first bytes (server::stream).
    pmi_in: PmiStream,
    pmi_out: Vec<u8>,
    /// stdout, stderr: the pipe and the partial line.
    streams: [(Option<OwnedFd>, Vec<u8>); 2],
    exit: Option<Exit>,
    inited: bool,
    finalized: bool,
}

struct Proxy {
    hello: Hello,
    up: Channel,
    image: ProxyImage,
    children: Vec<Link>,
    /// Ranks of the hosts below this one (leader), for the fence count.
    ranks_below: usize,
    ranks: Vec<LocalRank>,
    server: Server,
    epoch: u64,
    /// The local part of the current fence: puts, once every local rank
    /// is in the barrier.
    own_fence: Option<Vec<(String, String)>>,
    below_fence: (usize, Vec<(String, String)>),
    /// This epoch's fence went up; waiting for Kvs.
    fence_sent: bool,
    stage: StageIn,
    started: bool,
    term_sent: Option<Instant>,
    kill_sent: bool,
    /// The parent is gone: tear down and leave.
    orphaned: Option<String>,
    heartbeat: Duration,
    /// Rank 0's stdin (on its host): the pipe, bytes not yet written, and
    /// whether the front end's stdin ended.
    stdin: Stdin,
    /// The relay this gateway runs for its site (`grid::relay`).
    relay: Option<super::relay::Running>,
    /// The first world's program here (staged or found): a spawn of the
    /// same program runs it.
    program: Option<PathBuf>,
    /// Spawned worlds of the job: their fences (proxy/spawn.rs).
    spawned: std::collections::HashMap<usize, spawn::WorldFence>,
}

#[derive(Default)]
struct Stdin {
    pipe: Option<OwnedFd>,
    pending: Vec<u8>,
    eof: bool,
    /// Bytes written (or dropped) since the last ack.
    unacked: u64,
}

/// `gwrun --proxy`. Returns the process exit status.
pub fn run() -> i32 {
    // SAFETY: descriptors 0 and 1 are the channel our parent gave us; we
    // take ownership of them for the rest of the process's life.
    let (rfd, wfd) = unsafe { (OwnedFd::from_raw_fd(0), OwnedFd::from_raw_fd(1)) };
    let mut up = Channel::new(rfd, wfd, false);
    let sigfd = match sys::signal_pipe() {
        Ok(fd) => fd,
        Err(e) => {
            eprintln!("gwrun proxy: cannot install signal handlers: {e}");
            return 1;
        }
    };
    sys::become_subreaper();
    sys::raise_fd_limit();
    let hello = match read_hello(&mut up) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("gwrun proxy: {e}");
            return 1;
        }
    };
    let plan = &hello.plan;
    let host = hello.host;
    let me = &plan.hosts[host];
    // The binary we run is the one the plan names (the parent started it
    // by that hash): no need to hash ourselves again. We name it by
    // `/proc/self/exe`, not by its path: hosts that share a cache
    // directory may each store the same version on their first job, and
    // the last `mv` unlinks the file an earlier proxy runs from — its
    // path then names nothing, while the magic link still opens and
    // execs the running image (for the relay and for staging children).
    let own = Path::new("/proc/self/exe");
    let image = match own
        .metadata()
        .map(|_| own.to_path_buf())
        .or_else(|_| std::env::current_exe())
    {
        Ok(path) => ProxyImage {
            path,
            hash: plan.proxy_hash.clone(),
            size: plan.proxy_size,
        },
        Err(e) => {
            up.send_msg(Msg::Trouble {
                host,
                msg: format!("cannot find my own binary: {e}"),
                code: 1,
            });
            flush_blocking(&mut up);
            return 1;
        }
    };
    up.send_msg(Msg::Ready {
        version: VERSION,
        host,
    });
    let mut server = Server::new_partial(
        plan.n,
        plan.kvsname.clone(),
        plan.process_mapping.clone(),
        &me.ranks,
    );
    server.set_capacity(plan.capacity);
    let heartbeat = Duration::from_millis(plan.heartbeat_ms.clamp(500, 3_600_000));
    let stage = StageIn::new(plan, host);
    let mut p = Proxy {
        up,
        image,
        children: Vec::new(),
        ranks_below: 0,
        ranks: Vec::new(),
        server,
        epoch: 0,
        own_fence: None,
        below_fence: (0, Vec::new()),
        fence_sent: false,
        stage,
        started: false,
        term_sent: None,
        kill_sent: false,
        orphaned: None,
        heartbeat,
        stdin: Stdin::default(),
        relay: None,
        program: None,
        spawned: Default::default(),
        hello,
    };
    p.start_relay();
    p.start_children();
    p.stage_or_start();
    p.event_loop(sigfd.as_raw_fd());
    p.finish()
}

/// Blocks (in poll) until the Hello frame, bounded by [`HELLO_TIMEOUT`].
fn read_hello(up: &mut Channel) -> Result<Hello, String> {
    let until = Instant::now() + HELLO_TIMEOUT;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match up.next_frame() {
            Ok(Some(Frame::Msg(Msg::Hello(h)))) => {
                if h.version != VERSION {
                    let msg = format!(
                        "this proxy speaks protocol version {VERSION}, the front end {} (install the same gridwire on every host, or let gwrun stage itself: no prefix=)",
                        h.version
                    );
                    up.send_msg(Msg::Trouble {
                        host: h.host,
                        msg: msg.clone(),
                        code: 1,
                    });
                    flush_blocking(up);
                    return Err(msg);
                }
                h.plan
                    .check()
                    .map_err(|e| format!("bad job plan from the front end: {e}"))?;
                if h.host >= h.plan.hosts.len() {
                    return Err("bad host index from the front end".into());
                }
                if !h.secret.bytes().all(|b| b.is_ascii_hexdigit()) || h.secret.len() < 32 {
                    return Err("bad job secret from the front end".into());
                }
                return Ok(*h);
            }
            Ok(Some(_)) => return Err("the front end sent something before Hello".into()),
            Ok(None) => {}
            Err(e) => return Err(format!("protocol error from the front end: {e}")),
        }
        if let Some(why) = &up.broken {
            return Err(format!(
                "the front end went away before the job started ({why})"
            ));
        }
        let now = Instant::now();
        if now >= until {
            return Err("no job from the front end within 60 s".into());
        }
        let mut fds = [libc::pollfd {
            fd: up.read_fd().unwrap_or(-1),
            events: libc::POLLIN,
            revents: 0,
        }];
        let _ = sys::poll(&mut fds, 1000);
        if fds[0].revents != 0 {
            up.read_some(&mut buf);
        }
    }
}

/// Sends what is queued, waiting up to 2 s (at exit).
fn flush_blocking(c: &mut Channel) {
    let until = Instant::now() + Duration::from_secs(2);
    while c.wants_write() && Instant::now() < until {
        let mut fds = [libc::pollfd {
            fd: c.write_fd().unwrap_or(-1),
            events: libc::POLLOUT,
            revents: 0,
        }];
        let _ = sys::poll(&mut fds, 100);
        c.flush();
    }
}

impl Proxy {
    fn plan(&self) -> &Plan {
        &self.hello.plan
    }

    fn host_name(&self, h: usize) -> &str {
        self.plan().hosts.get(h).map_or("?", |x| x.name.as_str())
    }

    /// The leader of a relayed site starts its relay, before the hosts
    /// whose ranks it serves (they get its address in their plan).
    fn start_relay(&mut self) {
        let host = self.hello.host;
        let plan = self.plan();
        let site = &plan.sites[plan.hosts[host].site];
        if !site.relay || site.leader != host || plan.children_of(host).is_empty() {
            return;
        }
        let flip = plan
            .env
            .iter()
            .rev()
            .find(|(k, _)| k == "GW_RELAY_TEST_FLIP")
            .map(|(_, v)| v.clone());
        match super::relay::start(
            &self.image.path,
            &plan.hosts[host].name,
            &self.hello.secret,
            plan.iface.as_deref(),
            flip.as_deref(),
        ) {
            Ok(r) => self.relay = Some(r),
            Err(e) => self.up.send_msg(Msg::Trouble {
                host,
                msg: format!("relay for site {}: {e}", site.name),
                code: 1,
            }),
        }
    }

    /// A leader starts the other hosts of its site.
    fn start_children(&mut self) {
        let children = self.plan().children_of(self.hello.host);
        if children.is_empty() {
            return;
        }
        let site = &self.plan().sites[self.plan().hosts[self.hello.host].site];
        let method = start::for_site(site);
        let prefix = site.prefix.clone();
        for c in children {
            self.ranks_below += self.plan().hosts[c].ranks.len();
            let mut hello = Hello {
                host: c,
                ..self.hello.clone()
            };
            if let Some(r) = &self.relay {
                // Only the hosts behind the gateway are reached through it.
                let s = hello.plan.hosts[c].site;
                hello.plan.sites[s]
                    .env
                    .push(("GW_RELAY".into(), r.param.clone()));
            }
            let name = self.plan().hosts[c].name.clone();
            match Link::start(
                method.as_ref(),
                &name,
                &self.image,
                prefix.as_deref(),
                hello,
            ) {
                Ok(l) => self.children.push(l),
                Err(e) => {
                    self.up.send_msg(Msg::Trouble {
                        host: c,
                        msg: e.to_string(),
                        code: 1,
                    });
                }
            }
        }
    }

    /// Starts the ranks when no file is missing, else asks for them.
    fn stage_or_start(&mut self) {
        if self.started || self.orphaned.is_some() || self.term_sent.is_some() {
            return;
        }
        let host = self.hello.host;
        match self.stage.poll_ready() {
            Ok(None) => {
                let need = self.stage.take_requests();
                if !need.is_empty() {
                    self.up.send_msg(Msg::Need { host, hashes: need });
                }
            }
            Ok(Some(program)) => {
                self.started = true;
                self.spawn_ranks(program);
            }
            Err((code, msg)) => {
                self.started = true;
                self.up.send_msg(Msg::Trouble { host, msg, code });
            }
        }
    }

    fn spawn_ranks(&mut self, program: PathBuf) {
        let host = self.hello.host;
        let ranks = self.plan().hosts[host].ranks.clone();
        let (n, args) = (self.plan().n, self.plan().args.clone());
        let mut pids = Vec::new();
        self.program = Some(program.clone());
        for (local, &r) in ranks.iter().enumerate() {
            let p = ranks::ProcSpec {
                rank: r,
                local,
                nlocal: ranks.len(),
                program: &program,
                args: &args,
                world: (0, n),
                extra_env: Vec::new(),
                wdir: None,
            };
            match self.spawn(p) {
                Ok(pid) => pids.push((r, pid)),
                Err((code, msg)) => {
                    self.up.send_msg(Msg::Trouble { host, msg, code });
                    return;
                }
            }
        }
        self.up.send_msg(Msg::Started { host, pids });
    }
}
