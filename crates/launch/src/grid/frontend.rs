//! The front end of a grid job (`gwrun -f MACHINES`): plans the proxy
//! tree, starts one proxy per site (which starts the rest of its site),
//! sends staged files once per site, completes each fence, prints the
//! ranks' output, and ends the job on the first failure anywhere,
//! naming rank, host and site.

use std::collections::HashMap;
use std::os::fd::{AsRawFd, RawFd};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::channel::HIGH_WATER;
use super::link::Link;
use super::protocol::{Frame, Hello, Msg, Plan, PlanHost, PlanSite, StageEntry, VERSION};
use super::stagein::{find_program, FileQueue};
use super::start::{self, ssh::site_argv, ProxyImage};
use crate::hostmap::{map_ranks, MapBy};
use crate::machines::{is_this_machine, Machines, StartKind};
use crate::sys::{self, say};

mod plan;
mod spawn;
mod warm;

use plan::plan_job;

/// Exit status on `--timeout` (as `timeout(1)`).
pub const EXIT_TIMEOUT: i32 = 124;
/// After the first failure, how long the front end waits for every host
/// to report Done before it cuts the channels (the proxies then kill what
/// is left themselves).
const TEARDOWN_WAIT: Duration = Duration::from_millis(3000);
/// Second signal after this: SIGKILL.
const KILL_GRACE: Duration = Duration::from_millis(1000);
/// A rank that exited 0 without PMI finalize while others ran: failure
/// after this grace (the others may be exiting at the same moment).
const FINALIZE_GRACE: Duration = Duration::from_millis(500);
/// Failures seen within this window after the first are weighed to find
/// the cause (a killed rank's peers often abort before its proxy reports).
const REPORT_GRACE: Duration = Duration::from_millis(250);
/// How long a proxy may take to start (ssh, bootstrap) before it counts
/// as lost; heartbeats take over once it answered.
const START_TIMEOUT: Duration = Duration::from_secs(60);
const MAX_CONSEQUENCES: usize = 8;
/// Stdin bytes in flight towards rank 0 (sent, not yet written into its
/// pipe): the front end reads more only within this credit, so a rank 0
/// that does not read its stdin holds up the reading, not memory.
pub const STDIN_CREDIT: u64 = 1 << 20;

/// The poll slot of our stdin.
const STDIN_SLOT: usize = usize::MAX - 1;

/// What the command line decided for a grid job.
#[derive(Debug, Clone)]
pub struct GridSpec {
    pub n: usize,
    pub program: String,
    pub args: Vec<String>,
    pub wdir: Option<String>,
    pub env: Vec<(String, String)>,
    pub tag_output: bool,
    pub timeout: Option<Duration>,
    pub stats: bool,
    /// `--report FILE`: the matrix as SVG or HTML at exit.
    pub report: Option<std::path::PathBuf>,
    pub machines: Machines,
    pub map_by: MapBy,
    pub oversubscribe: bool,
    pub force_stage: bool,
    pub stage_files: Vec<PathBuf>,
    pub iface: Option<String>,
    pub heartbeat: Duration,
    /// `GW_LAUNCH_TREE=flat`: the front end starts every host itself
    /// instead of one leader per site.
    pub flat: bool,
    /// `GW_LAUNCH_DIRECT`: hosts of a big warm site started by the front
    /// end beside the leader (`frontend/warm.rs`); `None`: a quarter of
    /// the site's hosts, at most 8, for sites of 8 hosts or more.
    pub direct: Option<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum FailKind {
    Signal,
    Lost,
    Exit,
    Abort,
}

struct Failure {
    what: String,
    kind: FailKind,
    code: i32,
    at: Instant,
    independent: bool,
}

#[derive(Default, Clone)]
struct RankState {
    pid: i32,
    exited: bool,
    finalized: bool,
}

struct FrontEnd {
    plan: Plan,
    image: ProxyImage,
    links: Vec<Link>,
    /// Which link carries each host's reports (its site's leader link).
    host_done: Vec<bool>,
    ranks: Vec<RankState>,
    exited: usize,
    /// Fence being collected: ranks counted, pairs.
    fence: (usize, Vec<(String, String)>),
    epoch: u64,
    kvs: HashMap<String, String>,
    /// Files to send to each link, and the one being sent.
    sending: Vec<FileQueue>,
    stage_sources: HashMap<String, PathBuf>,
    tag_output: bool,
    outcome: Option<i32>,
    failures: Vec<Failure>,
    report_due: Option<Instant>,
    term_sent: Option<Instant>,
    kill_sent: bool,
    suspects: Vec<(usize, Instant)>,
    /// The plan's host of each rank (output tags, messages).
    rank_host: Vec<usize>,
    /// Forwarding our stdin to rank 0: still open, and bytes in flight.
    stdin_open: bool,
    stdin_in_flight: u64,
    /// Worlds spawned into the job (frontend/spawn.rs).
    spawns: spawn::Spawns,
    /// The warm-site marker to record at the end (`frontend/warm.rs`).
    warm_key: Option<String>,
}

/// Runs a grid job; returns gwrun's exit status.
pub fn run(spec: GridSpec) -> i32 {
    let sigfd = match sys::signal_pipe() {
        Ok(fd) => fd,
        Err(e) => {
            say(&format!("cannot install signal handlers: {e}"));
            return 1;
        }
    };
    sys::become_subreaper();
    sys::raise_fd_limit();
    let (plan, secret, image, sources, warm_key) = match plan_job(&spec) {
        Ok(x) => x,
        Err(e) => {
            say(&e);
            return 2;
        }
    };
    let mut fe = FrontEnd {
        host_done: vec![false; plan.hosts.len()],
        ranks: vec![RankState::default(); plan.n],
        exited: 0,
        fence: (0, Vec::new()),
        epoch: 0,
        kvs: HashMap::new(),
        sending: Vec::new(),
        stage_sources: sources,
        tag_output: spec.tag_output,
        outcome: None,
        failures: Vec::new(),
        report_due: None,
        term_sent: None,
        kill_sent: false,
        suspects: Vec::new(),
        stdin_open: false,
        stdin_in_flight: 0,
        spawns: spawn::Spawns::new(&plan, &spec.machines),
        rank_host: {
            let mut v = vec![0; plan.n];
            for (h, host) in plan.hosts.iter().enumerate() {
                for &r in &host.ranks {
                    v[r] = h;
                }
            }
            v
        },
        links: Vec::new(),
        image,
        plan,
        warm_key,
    };
    for s in 0..fe.plan.sites.len() {
        let site = fe.plan.sites[s].clone();
        let leader = site.leader;
        let name = fe.plan.hosts[leader].name.clone();
        let method = start::for_site(&site);
        let hello = Hello {
            version: VERSION,
            secret: secret.clone(),
            host: leader,
            plan: fe.plan.clone(),
        };
        match Link::start(
            method.as_ref(),
            &name,
            &fe.image,
            site.prefix.as_deref(),
            hello,
        ) {
            Ok(l) => {
                fe.links.push(l);
                fe.sending.push(FileQueue::default());
            }
            Err(e) => {
                say(&e.to_string());
                fe.outcome = Some(1);
                break;
            }
        }
    }
    fe.stdin_open = fe.plan.stdin;
    if fe.outcome.is_some() {
        fe.kill(libc::SIGTERM);
    }
    fe.event_loop(sigfd.as_raw_fd(), spec.timeout);
    fe.finish(spec.stats, spec.report.as_deref())
}

impl FrontEnd {
    fn host_label(&self, h: usize) -> String {
        match self.plan.hosts.get(h) {
            Some(x) => format!("host {} (site {})", x.name, self.plan.sites[x.site].name),
            None => format!("host #{h}"),
        }
    }

    fn host_of_rank(&self, r: usize) -> usize {
        self.rank_host.get(r).copied().unwrap_or(0)
    }

    fn rank_label(&self, r: usize) -> String {
        let pid = self.ranks.get(r).map_or(0, |x| x.pid);
        format!(
            "rank {r} (pid {pid}) on {}",
            self.host_label(self.host_of_rank(r))
        )
    }

    fn kill(&mut self, sig: libc::c_int) {
        for l in &mut self.links {
            l.channel.send_msg(Msg::Kill { signal: sig });
        }
        if sig == libc::SIGKILL {
            self.kill_sent = true;
        }
        if self.term_sent.is_none() {
            self.term_sent = Some(Instant::now());
        }
    }

    fn fail(&mut self, what: String, kind: FailKind, code: i32) {
        if self.outcome.is_some() && self.report_due.is_none() && self.failures.is_empty() {
            return;
        }
        let now = Instant::now();
        let independent = self.term_sent.is_none() || kind == FailKind::Signal;
        self.failures.push(Failure {
            what,
            kind,
            code,
            at: now,
            independent,
        });
        if self.failures.len() == 1 && self.outcome.is_none() {
            self.outcome = Some(if code == 0 { 1 } else { code });
            self.report_due = Some(now + REPORT_GRACE);
            self.kill(libc::SIGTERM);
        }
    }

    fn report(&mut self) {
        if self.report_due.take().is_none() {
            return;
        }
        let cause = self
            .failures
            .iter()
            .enumerate()
            .filter(|(_, f)| f.independent)
            .min_by_key(|(_, f)| (f.kind, f.at))
            .or_else(|| self.failures.iter().enumerate().min_by_key(|(_, f)| f.at))
            .map(|(i, _)| i);
        let Some(ci) = cause else { return };
        let c = &self.failures[ci];
        let tail = if !self.all_exited() {
            "; terminating the job"
        } else {
            ""
        };
        let mut msg = format!("{}{tail}", c.what);
        let mut listed = 0;
        for (i, f) in self.failures.iter().enumerate() {
            if i == ci {
                continue;
            }
            if listed == MAX_CONSEQUENCES {
                msg.push_str(&format!(
                    "\n{} more failure(s) followed",
                    self.failures.len() - 1 - listed
                ));
                break;
            }
            listed += 1;
            msg.push_str(&format!(
                "\n{} (a consequence of the failure above)",
                f.what
            ));
        }
        self.outcome = Some(if c.code == 0 { 1 } else { c.code });
        say(&msg);
    }

    fn all_over(&self) -> bool {
        self.links.iter().all(|l| l.finished())
    }

    fn event_loop(&mut self, sigfd: RawFd, timeout: Option<Duration>) {
        let start = Instant::now();
        let deadline = timeout.map(|t| start + t);
        let mut buf = vec![0u8; 64 * 1024];
        let ping_every = Duration::from_millis((self.plan.heartbeat_ms / 4).max(100));
        let heartbeat = Duration::from_millis(self.plan.heartbeat_ms.max(500));
        loop {
            if self.all_over() {
                break;
            }
            let now = Instant::now();
            if let Some(t) = self.term_sent {
                if now.duration_since(t) >= TEARDOWN_WAIT {
                    for l in &mut self.links {
                        if !l.finished() {
                            l.lose("did not finish after the teardown".into());
                        }
                    }
                    break;
                }
            }
            let mut fds = vec![libc::pollfd {
                fd: sigfd,
                events: libc::POLLIN,
                revents: 0,
            }];
            let mut slots = vec![(usize::MAX, false)];
            if self.stdin_open && self.stdin_in_flight < STDIN_CREDIT && self.outcome.is_none() {
                fds.push(libc::pollfd {
                    fd: 0,
                    events: libc::POLLIN,
                    revents: 0,
                });
                slots.push((STDIN_SLOT, false));
            }
            for (i, l) in self.links.iter().enumerate() {
                if let Some(fd) = l.channel.read_fd() {
                    fds.push(libc::pollfd {
                        fd,
                        events: libc::POLLIN,
                        revents: 0,
                    });
                    slots.push((i, false));
                }
                if l.channel.wants_write() {
                    if let Some(fd) = l.channel.write_fd() {
                        fds.push(libc::pollfd {
                            fd,
                            events: libc::POLLOUT,
                            revents: 0,
                        });
                        slots.push((i, true));
                    }
                }
            }
            let mut wait = ping_every.min(Duration::from_millis(250));
            for t in self
                .suspects
                .iter()
                .map(|s| s.1)
                .chain(self.report_due)
                .chain(deadline.filter(|_| self.outcome.is_none()))
            {
                wait = wait.min(t.saturating_duration_since(now));
            }
            let _ = sys::poll(&mut fds, wait.as_millis() as i32 + 1);
            for (pfd, &(i, write)) in fds.iter().zip(&slots) {
                if pfd.revents == 0 {
                    continue;
                }
                if i == STDIN_SLOT {
                    self.forward_stdin(&mut buf);
                } else if i == usize::MAX {
                    for sig in sys::read_signals(sigfd) {
                        if sig == libc::SIGCHLD {
                            continue;
                        }
                        if self.outcome.is_none() {
                            say(&format!(
                                "received {}; forwarding it to all ranks and terminating the job",
                                sys::signal_name(sig)
                            ));
                            self.outcome = Some(128 + sig);
                            self.kill(sig);
                        } else if !self.kill_sent {
                            self.kill(libc::SIGKILL);
                        }
                    }
                } else if write {
                    self.links[i].channel.flush();
                    self.send_files(i);
                } else {
                    self.links[i].channel.read_some(&mut buf);
                    let image = self.image.clone();
                    self.links[i].after_read(&image);
                    self.handle_link(i);
                }
            }
            // Reap ssh clients / local proxies (their channel tells more).
            while sys::reap_one().is_some() {}
            let now = Instant::now();
            for i in 0..self.links.len() {
                let l = &mut self.links[i];
                if l.finished() {
                    if !l.done && !l.reported {
                        l.reported = true;
                        let why = l
                            .lost
                            .clone()
                            .or_else(|| l.channel.broken.clone())
                            .unwrap_or_default();
                        let label = self.host_label(self.links[i].host);
                        if self.term_sent.is_none() || self.outcome.is_none() {
                            self.fail(
                                format!("lost the proxy on {label}: {why}"),
                                FailKind::Lost,
                                1,
                            );
                        }
                    }
                    continue;
                }
                let limit = if l.ready {
                    heartbeat
                } else {
                    START_TIMEOUT.max(heartbeat)
                };
                if l.channel.silent_for(now) > limit {
                    let secs = limit.as_secs();
                    l.lose(if l.ready {
                        format!("no word for {secs} s (GW_HEARTBEAT_TIMEOUT)")
                    } else {
                        format!("no answer within {secs} s of starting it")
                    });
                } else {
                    l.channel.keep_alive(now, ping_every);
                }
            }
            // Timers.
            let due: Vec<usize> = self
                .suspects
                .iter()
                .filter(|s| s.1 <= now)
                .map(|s| s.0)
                .collect();
            self.suspects.retain(|s| s.1 > now);
            for r in due {
                if !self.all_exited() {
                    let label = self.rank_label(r);
                    self.fail(format!("{label} exited with status 0 without calling PMI finalize while other ranks were still running"), FailKind::Exit, 1);
                }
            }
            if self.report_due.is_some_and(|t| now >= t) {
                self.report();
            }
            if let Some(d) = deadline {
                if now >= d && self.outcome.is_none() {
                    let secs = timeout.map_or(0.0, |t| t.as_secs_f64());
                    say(&format!(
                        "job timed out after {secs} s; terminating the job"
                    ));
                    self.outcome = Some(EXIT_TIMEOUT);
                    self.kill(libc::SIGTERM);
                }
            }
            if let Some(t) = self.term_sent {
                if !self.kill_sent && now.duration_since(t) >= KILL_GRACE {
                    self.kill(libc::SIGKILL);
                }
            }
        }
    }

    fn handle_link(&mut self, i: usize) {
        loop {
            let f = match self.links[i].channel.next_frame() {
                Ok(Some(f)) => f,
                Ok(None) => return,
                Err(e) => {
                    self.links[i].lose(format!("protocol error: {e}"));
                    return;
                }
            };
            match f {
                Frame::Msg(m) => self.handle_msg(i, m),
                Frame::Output { rank, stream, data } => self.print(rank, stream, data),
                other => {
                    self.links[i].lose(format!("unexpected frame {other:?}"));
                    return;
                }
            }
        }
    }

    /// Whether link `i` (a site's leader) may report about `rank`: only
    /// the ranks of its own site (a confused or hostile proxy must not end
    /// or describe other sites' ranks).
    fn speaks_for(&self, i: usize, rank: usize) -> bool {
        let site = |h: usize| self.plan.hosts.get(h).map(|x| x.site);
        rank < self.ranks.len() && site(self.host_of_rank(rank)) == site(self.links[i].host)
    }

    fn handle_msg(&mut self, i: usize, m: Msg) {
        let n = self.plan.n;
        let rank_of = |m: &Msg| match m {
            Msg::Exit { rank, .. } | Msg::Abort { rank, .. } => Some(*rank),
            _ => None,
        };
        if let Some(r) = rank_of(&m) {
            if !self.speaks_for(i, r) {
                self.links[i].lose(format!("reported on rank {r}, which is not in its site"));
                return;
            }
        }
        match m {
            Msg::Ping => {}
            Msg::SpawnRequest {
                rank,
                programs,
                preput,
            } => self.spawn_request(i, rank, programs, preput),
            Msg::WorldTrouble { world, host, msg } => self.world_trouble(i, world, host, msg),
            Msg::WorldKnown { world, host } => self.world_known(i, world, host),
            Msg::Fence {
                epoch,
                ranks,
                pairs,
                world,
                ..
            } if world != 0 => self.world_fence(i, world, epoch, ranks, pairs),
            Msg::StdinAck { bytes } => {
                self.stdin_in_flight = self.stdin_in_flight.saturating_sub(bytes);
            }
            Msg::Ready { version, .. } => {
                if version != VERSION {
                    self.links[i]
                        .lose(format!("the proxy speaks protocol {version}, we {VERSION}"));
                } else {
                    self.links[i].ready = true;
                }
            }
            Msg::Need { hashes, .. } => {
                for h in hashes {
                    if self.stage_sources.contains_key(&h) {
                        self.sending[i].push(h);
                    }
                }
                self.send_files(i);
            }
            Msg::Started { pids, .. } => {
                for (r, pid) in pids {
                    if let Some(x) = self.ranks.get_mut(r) {
                        x.pid = pid;
                    }
                }
            }
            Msg::Fence {
                epoch,
                ranks,
                pairs,
                local,
                ..
            } => {
                if epoch != self.epoch || self.fence.0.saturating_add(ranks) > n {
                    self.links[i].lose(format!("bad fence {epoch} with {ranks} ranks"));
                    return;
                }
                if local {
                    // The leader below has every rank and answered the
                    // fence itself; keep the pairs (stats) and the epoch.
                    if ranks != n || self.fence.0 != 0 {
                        self.links[i].lose(format!("bad local fence {epoch} with {ranks} ranks"));
                        return;
                    }
                    for (k, v) in pairs {
                        self.kvs.insert(k, v);
                    }
                    self.epoch += 1;
                    return;
                }
                self.fence.0 += ranks;
                self.fence.1.extend(pairs);
                if self.fence.0 == n {
                    let pairs = std::mem::take(&mut self.fence.1);
                    for (k, v) in &pairs {
                        self.kvs.insert(k.clone(), v.clone());
                    }
                    for l in &mut self.links {
                        l.channel.send_msg(Msg::Kvs {
                            epoch,
                            pairs: pairs.clone(),
                            world: 0,
                        });
                    }
                    self.fence.0 = 0;
                    self.epoch += 1;
                }
            }
            Msg::Exit {
                rank,
                code,
                signal,
                inited,
                finalized,
            } => {
                let Some(st) = self.ranks.get_mut(rank) else {
                    return;
                };
                if st.exited {
                    return;
                }
                st.exited = true;
                st.finalized = finalized;
                self.exited += 1;
                if rank >= n && self.spawned_exit(rank, code, signal) {
                    return;
                }
                let label = self.rank_label(rank);
                match (code, signal) {
                    (_, Some(s)) => {
                        let by_us = (s == libc::SIGTERM && self.term_sent.is_some())
                            || (s == libc::SIGKILL && self.kill_sent);
                        if !by_us {
                            self.fail(
                                format!("{label} killed by signal {s} ({})", sys::signal_name(s)),
                                FailKind::Signal,
                                128 + s,
                            );
                        }
                    }
                    (Some(c), None) if c != 0 => {
                        self.fail(format!("{label} exited with status {c}"), FailKind::Exit, c)
                    }
                    _ => {
                        if inited && !finalized && self.outcome.is_none() {
                            self.suspects.push((rank, Instant::now() + FINALIZE_GRACE));
                        }
                    }
                }
            }
            Msg::Abort { rank, code, msg } => {
                let label = self.rank_label(rank.min(self.ranks.len().saturating_sub(1)));
                let m = if msg.is_empty() {
                    String::new()
                } else {
                    format!(": {msg}")
                };
                self.fail(
                    format!("{label} called PMI abort with exit code {code}{m}"),
                    FailKind::Abort,
                    code,
                );
            }
            Msg::Trouble { host, msg, code } => {
                let label = self.host_label(host);
                self.fail(format!("{label}: {msg}"), FailKind::Lost, code);
            }
            Msg::Done { host, stats } => {
                for (k, v) in stats {
                    self.kvs.insert(k, v);
                }
                if let Some(d) = self.host_done.get_mut(host) {
                    *d = true;
                }
                self.check_worlds_known();
                if self.links[i].host == host {
                    self.links[i].done = true;
                    self.links[i].channel.close();
                }
            }
            other => self.links[i].lose(format!("unexpected message {other:?}")),
        }
    }

    /// Reads our stdin once (poll said it is readable) and sends it on to
    /// the site of rank 0; at EOF, says so.
    fn forward_stdin(&mut self, buf: &mut [u8]) {
        let site = self.plan.hosts.get(self.host_of_rank(0)).map(|h| h.site);
        let link = self
            .links
            .iter()
            .position(|l| Some(self.plan.hosts[l.host].site) == site);
        let room = (STDIN_CREDIT - self.stdin_in_flight).min(buf.len() as u64) as usize;
        let got = sys::read(0, &mut buf[..room]);
        let Some(i) = link else {
            self.stdin_open = false;
            return;
        };
        match got {
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::Interrupted | std::io::ErrorKind::WouldBlock
                ) => {}
            Ok(0) | Err(_) => {
                self.stdin_open = false;
                self.links[i].channel.send_msg(Msg::StdinEof);
            }
            Ok(n) => {
                self.stdin_in_flight += n as u64;
                self.links[i].channel.send(&Frame::Stdin(buf[..n].to_vec()));
            }
        }
    }

    /// Streams the files link `i` asked for, a chunk at a time while its
    /// queue has room.
    fn send_files(&mut self, i: usize) {
        while self.links[i].channel.queued() < HIGH_WATER && self.links[i].channel.is_open() {
            let sources = &self.stage_sources;
            let Some(frame) = self.sending[i].next_chunk(|h| sources.get(h).cloned()) else {
                return;
            };
            self.links[i].channel.send(&frame);
        }
    }

    /// Prints a rank's lines, tagged `[rank@host] ` with --tag-output.
    fn print(&mut self, rank: u32, stream: u8, data: Vec<u8>) {
        let to: RawFd = if stream == 2 { 2 } else { 1 };
        if !self.tag_output {
            sys::write_all_blocking(to, &data);
            return;
        }
        let host = self
            .plan
            .hosts
            .get(self.host_of_rank(rank as usize))
            .map_or("?", |h| h.name.as_str());
        let prefix = format!("[{rank}@{host}] ");
        let mut out = Vec::with_capacity(data.len() + 32);
        for line in data.split_inclusive(|&b| b == b'\n') {
            out.extend_from_slice(prefix.as_bytes());
            out.extend_from_slice(line);
        }
        sys::write_all_blocking(to, &out);
    }

    fn finish(&mut self, stats: bool, report: Option<&std::path::Path>) -> i32 {
        self.report();
        for l in &mut self.links {
            l.channel.close();
        }
        // ssh clients end with their channel; anything left is killed.
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
        for l in &self.links {
            sys::kill_group(l.pid, libc::SIGKILL);
        }
        sys::kill_orphans();
        if stats || report.is_some() {
            let records: Vec<Option<String>> = (0..self.plan.n)
                .map(|r| self.kvs.get(&format!("gw.stats.{r}")).cloned())
                .collect();
            let m = crate::stats::build(&records);
            if let Some(path) = report {
                let mut places = vec![
                    crate::report::RankPlace {
                        host: "?".into(),
                        site: "?".into()
                    };
                    self.plan.n
                ];
                for h in &self.plan.hosts {
                    for &r in &h.ranks {
                        if let Some(p) = places.get_mut(r) {
                            *p = crate::report::RankPlace {
                                host: h.name.clone(),
                                site: self.plan.sites[h.site].name.clone(),
                            };
                        }
                    }
                }
                if let Err(e) = crate::report::write(path, &m, &places) {
                    say(&e);
                }
            }
        }
        if stats {
            let records: Vec<Option<String>> = (0..self.plan.n)
                .map(|r| self.kvs.get(&format!("gw.stats.{r}")).cloned())
                .collect();
            let m = crate::stats::build(&records);
            let placement: Vec<String> = self
                .plan
                .hosts
                .iter()
                .map(|h| {
                    format!(
                        "{}: ranks {:?} (site {})",
                        h.name, h.ranks, self.plan.sites[h.site].name
                    )
                })
                .collect();
            say(&crate::stats::render(&m, &placement.join("; ")).join("\n"));
        }
        let all_exited = self.all_exited();
        // After a run where every rank ended well, every host of the site
        // has the proxy and the staged files in its cache.
        if let Some(key) = &self.warm_key {
            warm::record(key, all_exited && self.outcome.unwrap_or(0) == 0);
        }
        if !all_exited && self.outcome.is_none() {
            say(&format!(
                "only {} of {} ranks reported their exit",
                self.exited,
                self.ranks.len()
            ));
            return 1;
        }
        self.outcome.unwrap_or(0)
    }
}
