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
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::channel::{Channel, HIGH_WATER};
use super::link::Link;
use super::protocol::{Frame, Hello, Msg, Plan, VERSION};
use super::stagein::StageIn;
use super::start::{self, ProxyImage};
use crate::server::{Notice, PmiStream, Server};
use crate::sys::{self, Exit};

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
    // by that hash): no need to hash ourselves again.
    let image = match std::env::current_exe() {
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
    let server = Server::new_partial(
        plan.n,
        plan.kvsname.clone(),
        plan.process_mapping.clone(),
        &me.ranks,
    );
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
        hello,
    };
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
            let hello = Hello {
                host: c,
                ..self.hello.clone()
            };
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
        let mut pids = Vec::new();
        for (local, &r) in ranks.iter().enumerate() {
            match self.spawn(r, local, ranks.len(), &program) {
                Ok(pid) => pids.push((r, pid)),
                Err((code, msg)) => {
                    self.up.send_msg(Msg::Trouble { host, msg, code });
                    return;
                }
            }
        }
        self.up.send_msg(Msg::Started { host, pids });
    }

    fn spawn(
        &mut self,
        r: usize,
        local: usize,
        nlocal: usize,
        program: &PathBuf,
    ) -> Result<i32, (i32, String)> {
        let plan = &self.hello.plan;
        let host = &plan.hosts[self.hello.host].name;
        let (ours, theirs) =
            sys::socketpair().map_err(|e| (1, format!("socketpair for rank {r}: {e}")))?;
        let child_fd = theirs.as_raw_fd();
        let mut cmd = Command::new(program);
        cmd.args(&plan.args);
        for v in [
            "PMI_ID",
            "PMI_PORT",
            "PMI_HOSTNAME",
            "PMI_SPAWNED",
            "HYDI_CONTROL_FD",
            "GW_HOST_ID",
        ] {
            cmd.env_remove(v);
        }
        for (k, v) in &plan.env {
            cmd.env(k, v);
        }
        if let Some(dir) = self.stage.library_dir() {
            let old = std::env::var("LD_LIBRARY_PATH").unwrap_or_default();
            let v = if old.is_empty() {
                dir.display().to_string()
            } else {
                format!("{}:{old}", dir.display())
            };
            cmd.env("LD_LIBRARY_PATH", v);
        }
        if let Some(i) = &plan.iface {
            cmd.env("GW_IFACE", i);
        }
        cmd.env("PMI_FD", child_fd.to_string())
            .env("PMI_RANK", r.to_string())
            .env("PMI_SIZE", plan.n.to_string())
            .env("MPI_LOCALRANKID", local.to_string())
            .env("MPI_LOCALNRANKS", nlocal.to_string())
            .env("GW_JOB_SECRET", &self.hello.secret)
            .env("GW_JOB_ID", &plan.job_id)
            // Where the rank runs, as the machines file names it (`gwinfo -f`).
            .env("GW_HOST_NAME", host)
            .env(
                "GW_SITE",
                plan.sites
                    .get(plan.hosts[self.hello.host].site)
                    .map_or("?", |s| s.name.as_str()),
            );
        // The front end's directory if this host has it (a shared file
        // system), else the home directory, as Open MPI does.
        let wdir = plan
            .wdir
            .as_deref()
            .filter(|d| std::path::Path::new(d).is_dir())
            .map(str::to_string)
            .or_else(|| std::env::var("HOME").ok())
            .unwrap_or_else(|| "/".into());
        cmd.current_dir(&wdir);
        // Rank 0 reads the front end's stdin (when it is not a terminal),
        // the others /dev/null.
        cmd.stdin(if r == 0 && plan.stdin {
            Stdio::piped()
        } else {
            Stdio::null()
        });
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        cmd.process_group(0);
        let parent = std::process::id() as libc::pid_t;
        // SAFETY: between fork and exec only async-signal-safe calls:
        // fcntl(2) to let the PMI socket survive exec, prctl(2)/getppid(2)
        // so the rank dies with its proxy.
        unsafe {
            cmd.pre_exec(move || {
                if libc::fcntl(child_fd, libc::F_SETFD, 0) != 0 {
                    return Err(io::Error::last_os_error());
                }
                sys::die_with_parent(parent)
            });
        }
        let mut child = cmd.spawn().map_err(|e| {
            let code = if e.kind() == io::ErrorKind::NotFound {
                127
            } else {
                126
            };
            (
                code,
                format!(
                    "cannot execute '{}' on host {host}: {}",
                    program.display(),
                    sys::os_message(&e)
                ),
            )
        })?;
        drop(theirs);
        let pid = child.id() as i32;
        if let Some(pipe) = child.stdin.take().map(OwnedFd::from) {
            let _ = sys::set_nonblocking(pipe.as_raw_fd());
            self.stdin.pipe = Some(pipe);
            self.write_stdin();
        }
        let out = child.stdout.take().map(OwnedFd::from);
        let err = child.stderr.take().map(OwnedFd::from);
        drop(child);
        for fd in [&out, &err].into_iter().flatten() {
            let _ = sys::set_nonblocking(fd.as_raw_fd());
        }
        let _ = sys::set_nonblocking(ours.as_raw_fd());
        self.ranks.push(LocalRank {
            rank: r,
            pid,
            pmi: Some(ours),
            pmi_in: PmiStream::new(),
            pmi_out: Vec::new(),
            streams: [(out, Vec::new()), (err, Vec::new())],
            exit: None,
            inited: false,
            finalized: false,
        });
        Ok(pid)
    }

    fn running(&self) -> usize {
        self.ranks.iter().filter(|r| r.exit.is_none()).count()
    }

    fn all_finished(&self) -> bool {
        let ranks_over = if self.started {
            self.running() == 0
        } else {
            // Never started: over once there is nothing to wait for.
            self.term_sent.is_some() || self.orphaned.is_some()
        };
        ranks_over && self.children.iter().all(|c| c.finished())
    }

    fn signal_ranks(&mut self, sig: libc::c_int) {
        for r in &self.ranks {
            sys::kill_group(r.pid, sig);
        }
        if sig == libc::SIGKILL {
            self.kill_sent = true;
        } else if self.term_sent.is_none() {
            self.term_sent = Some(Instant::now());
        }
    }

    /// Tears the host down: ranks and child proxies.
    fn kill(&mut self, sig: libc::c_int) {
        self.signal_ranks(sig);
        if self.term_sent.is_none() {
            self.term_sent = Some(Instant::now());
        }
        for c in &mut self.children {
            c.channel.send_msg(Msg::Kill { signal: sig });
        }
    }

    fn orphan(&mut self, why: String) {
        if self.orphaned.is_some() {
            return;
        }
        eprintln!(
            "gwrun proxy on {}: lost the front end ({why}); killing this host's ranks",
            self.host_name(self.hello.host)
        );
        self.orphaned = Some(why);
        self.kill(libc::SIGTERM);
        // Children see their channel close and do the same.
        for c in &mut self.children {
            c.channel.flush();
            c.channel.close();
        }
    }

    fn event_loop(&mut self, sigfd: RawFd) {
        let mut buf = vec![0u8; 64 * 1024];
        let ping_every = self.heartbeat / 4;
        loop {
            let now = Instant::now();
            if self.all_finished() {
                break;
            }
            // fds: 0 signals, then up read, up write, children r/w, PMI, streams.
            let mut fds: Vec<libc::pollfd> = Vec::new();
            let mut what: Vec<Slot> = Vec::new();
            let mut add = |fd: Option<RawFd>, ev: i16, s: Slot, fds: &mut Vec<libc::pollfd>| {
                if let Some(fd) = fd {
                    fds.push(libc::pollfd {
                        fd,
                        events: ev,
                        revents: 0,
                    });
                    what.push(s);
                }
            };
            add(Some(sigfd), libc::POLLIN, Slot::Signals, &mut fds);
            if self.orphaned.is_none() {
                add(self.up.read_fd(), libc::POLLIN, Slot::UpRead, &mut fds);
                if self.up.wants_write() {
                    add(self.up.write_fd(), libc::POLLOUT, Slot::UpWrite, &mut fds);
                }
            }
            if !self.stdin.pending.is_empty() {
                add(
                    self.stdin.pipe.as_ref().map(|f| f.as_raw_fd()),
                    libc::POLLOUT,
                    Slot::StdinWrite,
                    &mut fds,
                );
            }
            let up_full = self.up.queued() > HIGH_WATER;
            for (i, c) in self.children.iter().enumerate() {
                if !up_full {
                    add(
                        c.channel.read_fd(),
                        libc::POLLIN,
                        Slot::ChildRead(i),
                        &mut fds,
                    );
                }
                if c.channel.wants_write() {
                    add(
                        c.channel.write_fd(),
                        libc::POLLOUT,
                        Slot::ChildWrite(i),
                        &mut fds,
                    );
                }
            }
            for (i, r) in self.ranks.iter().enumerate() {
                if let Some(fd) = &r.pmi {
                    let mut ev = if r.pmi_out.len() < MAX_QUEUED_REPLY {
                        libc::POLLIN
                    } else {
                        0
                    };
                    if !r.pmi_out.is_empty() {
                        ev |= libc::POLLOUT;
                    }
                    add(Some(fd.as_raw_fd()), ev, Slot::Pmi(i), &mut fds);
                }
                if !up_full {
                    for (k, s) in r.streams.iter().enumerate() {
                        add(
                            s.0.as_ref().map(|f| f.as_raw_fd()),
                            libc::POLLIN,
                            Slot::Stream(i, k),
                            &mut fds,
                        );
                    }
                }
            }
            let mut wait = ping_every.min(Duration::from_millis(250));
            if let Some(t) = self.term_sent.filter(|_| !self.kill_sent) {
                wait = wait.min((t + KILL_GRACE).saturating_duration_since(now));
            }
            let _ = sys::poll(&mut fds, wait.as_millis() as i32 + 1);

            for (pfd, slot) in fds.iter().zip(what) {
                if pfd.revents == 0 {
                    continue;
                }
                match slot {
                    Slot::Signals => {
                        for sig in sys::read_signals(sigfd) {
                            if sig != libc::SIGCHLD {
                                // A signal to the proxy itself (ssh hang-up,
                                // an operator): end this host's part.
                                self.orphan(format!("received {}", sys::signal_name(sig)));
                            }
                        }
                    }
                    Slot::UpRead => {
                        self.up.read_some(&mut buf);
                        self.handle_up();
                    }
                    Slot::UpWrite => self.up.flush(),
                    Slot::ChildRead(i) => {
                        self.children[i].channel.read_some(&mut buf);
                        let image = self.image.clone();
                        self.children[i].after_read(&image);
                        self.handle_child(i);
                    }
                    Slot::ChildWrite(i) => {
                        self.children[i].channel.flush();
                        // Room again: the rest of a staged file.
                        self.serve_children_files();
                    }
                    Slot::Pmi(i) => {
                        if pfd.revents & libc::POLLOUT != 0 {
                            self.flush_pmi(i);
                        }
                        if pfd.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 {
                            self.read_pmi(i, &mut buf);
                        }
                    }
                    Slot::Stream(i, k) => self.read_stream(i, k, &mut buf),
                    Slot::StdinWrite => self.write_stdin(),
                }
            }
            self.reap();
            self.check_children();
            let now = Instant::now();
            if self.orphaned.is_none() {
                if let Some(why) = self.up.broken.clone() {
                    self.orphan(why);
                } else if self.up.silent_for(now) > self.heartbeat {
                    self.orphan(format!(
                        "no word for {} s (GW_HEARTBEAT_TIMEOUT)",
                        self.heartbeat.as_secs()
                    ));
                } else {
                    self.up.keep_alive(now, ping_every);
                }
            }
            for c in &mut self.children {
                if !c.finished() {
                    c.channel.keep_alive(now, ping_every);
                }
            }
            if let Some(t) = self.term_sent {
                if !self.kill_sent && now.duration_since(t) >= KILL_GRACE {
                    self.signal_ranks(libc::SIGKILL);
                    for c in &mut self.children {
                        c.channel.send_msg(Msg::Kill {
                            signal: libc::SIGKILL,
                        });
                    }
                }
            }
        }
    }

    /// Frames from the parent.
    fn handle_up(&mut self) {
        loop {
            let f = match self.up.next_frame() {
                Ok(Some(f)) => f,
                Ok(None) => return,
                Err(e) => {
                    self.orphan(format!("protocol error: {e}"));
                    return;
                }
            };
            match f {
                Frame::Msg(Msg::Ping) => {}
                Frame::Msg(Msg::Kill { signal }) => {
                    let sig = if signal == libc::SIGKILL || self.term_sent.is_some() {
                        libc::SIGKILL
                    } else if matches!(
                        signal,
                        libc::SIGINT
                            | libc::SIGTERM
                            | libc::SIGHUP
                            | libc::SIGQUIT
                            | libc::SIGUSR1
                            | libc::SIGUSR2
                    ) {
                        signal
                    } else {
                        libc::SIGTERM
                    };
                    self.kill(sig);
                }
                Frame::Msg(Msg::Kvs { epoch, pairs }) => {
                    if epoch != self.epoch {
                        self.orphan(format!(
                            "fence {epoch} answered during fence {}",
                            self.epoch
                        ));
                        return;
                    }
                    for c in &mut self.children {
                        c.channel.send_msg(Msg::Kvs {
                            epoch,
                            pairs: pairs.clone(),
                        });
                    }
                    if let Err(e) = self.server.insert_remote(pairs) {
                        self.up.send_msg(Msg::Trouble {
                            host: self.hello.host,
                            msg: e,
                            code: 1,
                        });
                        self.kill(libc::SIGTERM);
                        return;
                    }
                    self.epoch += 1;
                    self.own_fence = None;
                    self.fence_sent = false;
                    self.below_fence = (0, Vec::new());
                    let out = self.server.release_barrier();
                    self.deliver(out.replies);
                }
                Frame::FileData { hash, data } => {
                    // For us and our children: the leader keeps every
                    // staged file in its cache and serves its hosts.
                    if let Err(e) = self.stage.receive(&hash, &data) {
                        self.up.send_msg(Msg::Trouble {
                            host: self.hello.host,
                            msg: e,
                            code: 1,
                        });
                        self.kill(libc::SIGTERM);
                        return;
                    }
                    self.serve_children_files();
                    self.stage_or_start();
                }
                Frame::Stdin(data) => {
                    if let Some(c) = self.child_with_rank0() {
                        self.children[c].channel.send(&Frame::Stdin(data));
                    } else if self.stdin.pending.len().saturating_add(data.len()) > STDIN_LIMIT {
                        // The front end keeps within its credit: more is a
                        // protocol error.
                        self.orphan("more stdin than the credit allows".into());
                        return;
                    } else {
                        self.stdin.pending.extend_from_slice(&data);
                        self.write_stdin();
                    }
                }
                Frame::Msg(Msg::StdinEof) => {
                    if let Some(c) = self.child_with_rank0() {
                        self.children[c].channel.send_msg(Msg::StdinEof);
                    } else {
                        self.stdin.eof = true;
                        self.write_stdin();
                    }
                }
                Frame::Msg(other) => {
                    self.orphan(format!("unexpected message from the parent: {other:?}"));
                    return;
                }
                Frame::Output { .. } => {
                    self.orphan("unexpected output frame from the parent".into());
                    return;
                }
            }
        }
    }

    /// Frames from child proxy `i`: passed up, except what the leader
    /// answers itself (Ready, Need, Fence, Ping).
    fn handle_child(&mut self, i: usize) {
        loop {
            let f = match self.children[i].channel.next_frame() {
                Ok(Some(f)) => f,
                Ok(None) => return,
                Err(e) => {
                    self.children[i].lose(format!("protocol error: {e}"));
                    return;
                }
            };
            let child_host = self.children[i].host;
            match f {
                Frame::Msg(Msg::Ping) => {}
                Frame::Msg(Msg::Ready { version, .. }) => {
                    if version != VERSION {
                        self.children[i]
                            .lose(format!("speaks protocol version {version}, we {VERSION}"));
                        return;
                    }
                    self.children[i].ready = true;
                }
                Frame::Msg(Msg::Need { hashes, .. }) => {
                    self.stage.child_needs(i, hashes);
                    let mine = self.stage.take_requests();
                    if !mine.is_empty() {
                        self.up.send_msg(Msg::Need {
                            host: self.hello.host,
                            hashes: mine,
                        });
                    }
                    self.serve_children_files();
                }
                Frame::Msg(Msg::Fence {
                    epoch,
                    ranks,
                    pairs,
                }) => {
                    if epoch != self.epoch {
                        self.children[i].lose(format!("fence {epoch} during fence {}", self.epoch));
                        return;
                    }
                    self.below_fence.0 += ranks;
                    self.below_fence.1.extend(pairs);
                    self.maybe_fence_up();
                }
                Frame::Msg(Msg::Done { host, stats }) => {
                    if host == child_host {
                        self.children[i].done = true;
                    }
                    self.up.send_msg(Msg::Done { host, stats });
                }
                Frame::Msg(
                    m @ (Msg::Started { .. }
                    | Msg::Exit { .. }
                    | Msg::Abort { .. }
                    | Msg::Trouble { .. }
                    | Msg::StdinAck { .. }),
                ) => self.up.send_msg(m),
                Frame::Output { .. } => self.up.send(&f),
                other => {
                    self.children[i].lose(format!("unexpected frame {other:?}"));
                    return;
                }
            }
        }
    }

    /// Children whose channel broke before Done: reported up once.
    fn check_children(&mut self) {
        let now = Instant::now();
        for c in &mut self.children {
            if !c.finished()
                && c.channel.silent_for(now)
                    > self.heartbeat
                        + if c.ready {
                            Duration::ZERO
                        } else {
                            Duration::from_secs(30)
                        }
            {
                c.lose(format!(
                    "no word for {} s (GW_HEARTBEAT_TIMEOUT)",
                    self.heartbeat.as_secs()
                ));
            }
            if !c.done && !c.reported {
                let why = c.lost.clone().or_else(|| c.channel.broken.clone());
                if let Some(why) = why {
                    c.reported = true;
                    let name = self.hello.plan.hosts[c.host].name.clone();
                    if self.orphaned.is_none() {
                        self.up.send_msg(Msg::Trouble {
                            host: c.host,
                            msg: format!("lost the proxy on host {name}: {why}"),
                            code: 1,
                        });
                    }
                }
            }
        }
    }

    fn serve_children_files(&mut self) {
        for (i, c) in self.children.iter_mut().enumerate() {
            while c.channel.queued() < HIGH_WATER {
                match self.stage.next_chunk_for(i) {
                    Some(frame) => c.channel.send(&frame),
                    None => break,
                }
            }
        }
    }

    /// Sends the fence up when this host and every host below are in it.
    fn maybe_fence_up(&mut self) {
        let Some(own) = &self.own_fence else {
            return;
        };
        if self.fence_sent {
            return;
        }
        if self.below_fence.0 < self.ranks_below {
            return;
        }
        let mut pairs = own.clone();
        pairs.extend(std::mem::take(&mut self.below_fence.1));
        let ranks = self.plan().hosts[self.hello.host].ranks.len() + self.below_fence.0;
        self.up.send_msg(Msg::Fence {
            epoch: self.epoch,
            ranks,
            pairs,
        });
        self.fence_sent = true;
    }

    fn deliver(&mut self, replies: Vec<(usize, String)>) {
        for (to, line) in replies {
            if let Some(i) = self.ranks.iter().position(|r| r.rank == to) {
                self.ranks[i].pmi_out.extend_from_slice(line.as_bytes());
                self.flush_pmi(i);
            }
        }
    }

    /// The child proxy whose host runs rank 0, if not this host.
    fn child_with_rank0(&self) -> Option<usize> {
        self.children
            .iter()
            .position(|c| self.hello.plan.hosts[c.host].ranks.contains(&0))
    }

    /// Writes pending stdin into rank 0's pipe; acks what went (or was
    /// dropped because rank 0 is gone) so the front end may read on.
    fn write_stdin(&mut self) {
        let st = &mut self.stdin;
        if let Some(fd) = st.pipe.as_ref().map(|f| f.as_raw_fd()) {
            while !st.pending.is_empty() {
                match sys::write(fd, &st.pending) {
                    Ok(n) => {
                        st.pending.drain(..n);
                        st.unacked += n as u64;
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(_) => {
                        // Rank 0 closed its stdin or exited.
                        st.pipe = None;
                        break;
                    }
                }
            }
        }
        if st.pipe.is_none() && self.started {
            st.unacked += st.pending.len() as u64;
            st.pending.clear();
        }
        if st.eof && st.pending.is_empty() {
            st.pipe = None;
        }
        if st.unacked > 0 {
            let bytes = std::mem::take(&mut st.unacked);
            self.up.send_msg(Msg::StdinAck { bytes });
        }
    }

    fn read_pmi(&mut self, i: usize, buf: &mut [u8]) {
        let Some(fd) = self.ranks[i].pmi.as_ref().map(|f| f.as_raw_fd()) else {
            return;
        };
        match sys::read(fd, buf) {
            Ok(0) => self.ranks[i].pmi = None,
            Ok(n) => self.ranks[i].pmi_in.push(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) => {}
            Err(_) => self.ranks[i].pmi = None,
        }
        while self.ranks[i].pmi_out.len() < MAX_QUEUED_REPLY {
            let Some(cmd) = self.ranks[i].pmi_in.next_request() else {
                break;
            };
            let r = self.ranks[i].rank;
            let out = self.server.handle_request(r, cmd);
            self.deliver(out.replies);
            for n in out.notices {
                match n {
                    Notice::Initialized(_) => self.ranks[i].inited = true,
                    Notice::Finalized(_) => self.ranks[i].finalized = true,
                    Notice::Abort { rank, code, msg } => {
                        self.up.send_msg(Msg::Abort { rank, code, msg })
                    }
                    Notice::Protocol { rank, what } => {
                        eprintln!("gwrun: rank {rank}: PMI protocol error: {what}")
                    }
                    Notice::Close { rank, what } => {
                        self.flush_pmi(i);
                        self.ranks[i].pmi = None;
                        eprintln!("gwrun: rank {rank} broke the PMI protocol ({what}); its PMI connection is closed");
                    }
                    Notice::BarrierReady => {
                        self.own_fence = Some(self.server.take_fresh());
                        self.maybe_fence_up();
                    }
                }
            }
        }
    }

    fn flush_pmi(&mut self, i: usize) {
        let rk = &mut self.ranks[i];
        let Some(fd) = rk.pmi.as_ref().map(|f| f.as_raw_fd()) else {
            rk.pmi_out.clear();
            return;
        };
        while !rk.pmi_out.is_empty() {
            match sys::write(fd, &rk.pmi_out) {
                Ok(n) => {
                    rk.pmi_out.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(_) => {
                    rk.pmi_out.clear();
                    rk.pmi = None;
                    return;
                }
            }
        }
    }

    fn read_stream(&mut self, i: usize, k: usize, buf: &mut [u8]) {
        let rank = self.ranks[i].rank as u32;
        let (fd_slot, pending) = &mut self.ranks[i].streams[k];
        let Some(fd) = fd_slot.as_ref().map(|f| f.as_raw_fd()) else {
            return;
        };
        let eof = match sys::read(fd, buf) {
            Ok(0) => true,
            Ok(n) => {
                pending.extend_from_slice(&buf[..n]);
                false
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) =>
            {
                false
            }
            Err(_) => true,
        };
        if eof {
            *fd_slot = None;
        }
        if let Some(data) = take_lines(pending, eof) {
            self.up.send(&Frame::Output {
                rank,
                stream: k as u8 + 1,
                data,
            });
        }
    }

    fn reap(&mut self) {
        while let Some((pid, exit)) = sys::reap_one() {
            let Some(i) = self.ranks.iter().position(|x| x.pid == pid) else {
                continue; // a child proxy's ssh, or an orphaned grandchild
            };
            // Output still in the pipes goes first (the front end prints
            // it before it reports the exit).
            let mut buf = vec![0u8; 64 * 1024];
            for k in 0..2 {
                for _ in 0..64 {
                    if self.ranks[i].streams[k].0.is_none() {
                        break;
                    }
                    self.read_stream(i, k, &mut buf);
                }
            }
            let rk = &mut self.ranks[i];
            rk.exit = Some(exit);
            let (code, signal) = match exit {
                Exit::Code(c) => (Some(c), None),
                Exit::Signal(s) => (None, Some(s)),
            };
            let m = Msg::Exit {
                rank: rk.rank,
                code,
                signal,
                inited: rk.inited,
                finalized: rk.finalized,
            };
            self.up.send_msg(m);
        }
    }

    fn finish(&mut self) -> i32 {
        self.signal_ranks(libc::SIGKILL);
        sys::kill_orphans();
        sys::remove_shm(&self.hello.plan.job_id);
        self.stage.cleanup();
        if self.orphaned.is_none() {
            let stats = self
                .server
                .take_fresh()
                .into_iter()
                .filter(|(k, _)| k.starts_with("gw.stats."))
                .collect();
            self.up.send_msg(Msg::Done {
                host: self.hello.host,
                stats,
            });
            flush_blocking(&mut self.up);
        }
        // Child proxies' ssh processes: they end with their channel.
        for c in &mut self.children {
            c.channel.close();
        }
        let until = Instant::now() + Duration::from_millis(500);
        while Instant::now() < until {
            // SAFETY: waitpid with WNOHANG on any child; status discarded.
            let pid = unsafe { libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) };
            if pid < 0 {
                break;
            }
            if pid == 0 {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        for c in &self.children {
            sys::kill_group(c.pid, libc::SIGKILL);
        }
        if self.orphaned.is_some() {
            1
        } else {
            0
        }
    }
}

#[derive(Clone, Copy)]
enum Slot {
    Signals,
    UpRead,
    UpWrite,
    ChildRead(usize),
    ChildWrite(usize),
    Pmi(usize),
    Stream(usize, usize),
    StdinWrite,
}

/// Complete lines of `pending` (and an over-long or final partial line,
/// ending in `\n`), removed from it.
pub fn take_lines(pending: &mut Vec<u8>, at_eof: bool) -> Option<Vec<u8>> {
    let cut = match pending.iter().rposition(|&b| b == b'\n') {
        Some(nl) => nl + 1,
        None => 0,
    };
    let mut out: Vec<u8> = pending.drain(..cut).collect();
    if !pending.is_empty() && (at_eof || pending.len() > MAX_PARTIAL_LINE) {
        out.append(pending);
        out.push(b'\n');
    }
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_kept_whole() {
        let mut p = b"a\nb\nc".to_vec();
        assert_eq!(take_lines(&mut p, false), Some(b"a\nb\n".to_vec()));
        assert_eq!(p, b"c");
        assert_eq!(take_lines(&mut p, false), None);
        assert_eq!(take_lines(&mut p, true), Some(b"c\n".to_vec()));
        let mut long = vec![b'x'; MAX_PARTIAL_LINE + 1];
        assert_eq!(
            take_lines(&mut long, false).map(|v| v.len()),
            Some(MAX_PARTIAL_LINE + 2)
        );
    }
}
