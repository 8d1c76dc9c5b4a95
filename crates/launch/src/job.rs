//! Running one job: spawn the ranks, serve PMI, forward output, watch for
//! failures, and clean up — all in one single-threaded `poll(2)` loop, so
//! there are no locks and every event (output, PMI, a child exiting, a
//! signal to `gwrun`, a timer) is handled in one place and in order.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::placement::Placement;
use gridwire_launch::server::{Notice, PmiStream, Server};
use gridwire_launch::stats;
use gridwire_launch::sys::kill_orphans;
use gridwire_launch::sys::{self, Exit};
pub use gridwire_launch::sys::{remove_shm, say};

mod spawn;

/// Exit status of `gwrun` when `--timeout` expires (as `timeout(1)`).
pub const EXIT_TIMEOUT: i32 = 124;
/// How long ranks get between SIGTERM and SIGKILL during a teardown.
const KILL_GRACE: Duration = Duration::from_millis(1000);
/// How long a rank that exited 0 without PMI finalize is given before it
/// counts as failed (others may just be exiting at the same moment).
const FINALIZE_GRACE: Duration = Duration::from_millis(500);
/// How long to wait for output after every rank exited (a grandchild may
/// hold a pipe open).
const DRAIN_GRACE: Duration = Duration::from_millis(1000);
/// Partial lines longer than this are forwarded without waiting for `\n`.
const MAX_PARTIAL_LINE: usize = 64 * 1024;
/// PMI replies queued for one rank beyond which gwrun stops reading that
/// rank's requests (back-pressure; see `Job::takes_pmi_input`).
const MAX_QUEUED_REPLY: usize = 256 * 1024;
/// How long after the first failure gwrun keeps collecting the others
/// before it says which one caused the end: a killed rank's peers often
/// notice the broken link (and PMI-abort) before gwrun reaps the rank
/// itself, and reporting the first event seen would blame a bystander.
const REPORT_GRACE: Duration = Duration::from_millis(250);
/// Consequences listed under the first cause, at most.
const MAX_CONSEQUENCES: usize = 8;

/// Everything the command line decided.
#[derive(Debug, Clone)]
pub struct JobSpec {
    pub n: usize,
    pub program: String,
    pub args: Vec<String>,
    pub placement: Placement,
    pub real_host_id: String,
    pub tag_output: bool,
    pub timeout: Option<Duration>,
    pub stats: bool,
    /// `--report FILE`: the matrix as SVG or HTML at exit.
    pub report: Option<std::path::PathBuf>,
    pub binding: crate::binding::Binding,
}

/// A fresh job secret: 32 random bytes as 64 hex characters.
fn job_secret() -> io::Result<String> {
    let mut b = [0u8; 32];
    getrandom::getrandom(&mut b).map_err(|e| io::Error::other(e.to_string()))?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// A job id unique on this host and safe in file names: `<pid>x<8 hex>`.
fn job_id() -> io::Result<String> {
    let mut b = [0u8; 4];
    getrandom::getrandom(&mut b).map_err(|e| io::Error::other(e.to_string()))?;
    Ok(format!(
        "{}x{}",
        std::process::id(),
        b.iter().map(|x| format!("{x:02x}")).collect::<String>()
    ))
}

/// How a rank failed, in the order in which a cause is preferred over
/// the others seen within [`REPORT_GRACE`]: a rank killed by a signal
/// explains its peers' exits and aborts, an exit explains aborts, and an
/// abort is most often a peer's reaction to a link that broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum FailKind {
    Signal,
    Exit,
    Abort,
}

/// One rank's failure, kept until the report.
struct Failure {
    rank: usize,
    kind: FailKind,
    code: i32,
    why: String,
    at: Instant,
    /// Seen before gwrun started tearing the job down (or a death by a
    /// signal gwrun did not send): it may be the cause, not a consequence.
    independent: bool,
}

struct Rank {
    pid: i32,
    pmi: Option<OwnedFd>,
    /// PMI-1 or PMI-2, told by the first bytes (server::stream).
    pmi_in: PmiStream,
    pmi_out: Vec<u8>,
    exit: Option<Exit>,
    inited: bool,
    finalized: bool,
    /// Killed by gwrun because its spawned world could not start whole:
    /// its end is no failure of the job.
    abandoned: bool,
}

impl Rank {
    /// A rank of a spawned world that never started (no process).
    fn placeholder() -> Rank {
        Rank {
            pid: 0,
            pmi: None,
            pmi_in: PmiStream::new(),
            pmi_out: Vec::new(),
            exit: Some(Exit::Code(0)),
            inited: false,
            finalized: true,
            abandoned: true,
        }
    }
}

struct Stream {
    rank: usize,
    fd: Option<OwnedFd>,
    /// 1 = stdout, 2 = stderr: where the lines go.
    to: RawFd,
    buf: Vec<u8>,
}

impl Stream {
    /// Forwards every complete line (and an over-long partial one) as one
    /// write, so lines of different ranks never interleave.
    fn emit(&mut self, tag: bool, at_eof: bool) {
        let mut out = Vec::new();
        let prefix = format!("[{}] ", self.rank);
        while let Some(nl) = self.buf.iter().position(|&b| b == b'\n') {
            if tag {
                out.extend_from_slice(prefix.as_bytes());
            }
            out.extend(self.buf.drain(..=nl));
        }
        if !self.buf.is_empty() && (at_eof || self.buf.len() > MAX_PARTIAL_LINE) {
            if tag {
                out.extend_from_slice(prefix.as_bytes());
            }
            out.append(&mut self.buf);
            // A rank's last, unterminated line (it was killed mid-write)
            // gets its newline: gwrun's own messages start on a line of
            // their own.
            if tag || at_eof {
                out.push(b'\n');
            }
        }
        if !out.is_empty() {
            sys::write_all_blocking(self.to, &out);
        }
    }
}

/// The job while it runs.
struct Job {
    spec: JobSpec,
    job_id: String,
    ranks: Vec<Rank>,
    streams: Vec<Stream>,
    server: Server,
    /// The exit status decided by the first event that ended the job.
    outcome: Option<i32>,
    term_sent: Option<Instant>,
    kill_sent: bool,
    suspects: Vec<(usize, Instant)>,
    /// Failures seen since the first one, reported together once
    /// `report_due` passes or every rank has exited.
    failures: Vec<Failure>,
    report_due: Option<Instant>,
    /// Whether other ranks still ran at the first failure.
    others_running: bool,
    secret: String,
    /// Context ids run up to this (the first world plus room for spawned
    /// ones: `GW_UNIVERSE_SIZE`).
    capacity: usize,
    /// Ranks of spawned worlds: (first, count) of the world of each rank
    /// at or beyond `spec.n`, for their `GW_WORLD`.
    spawned_world: Vec<(usize, usize)>,
}

/// Runs the job to the end; returns `gwrun`'s exit status.
pub fn run(spec: JobSpec) -> i32 {
    let (job_id, secret) = match (job_id(), job_secret()) {
        (Ok(j), Ok(s)) => (j, s),
        (Err(e), _) | (_, Err(e)) => {
            say(&format!("cannot get random bytes for the job secret: {e}"));
            return 1;
        }
    };
    let sigfd = match sys::signal_pipe() {
        Ok(fd) => fd,
        Err(e) => {
            say(&format!("cannot install signal handlers: {e}"));
            return 1;
        }
    };
    sys::become_subreaper();
    sys::raise_fd_limit();
    let capacity = match spawn::capacity(spec.n) {
        Ok(c) => c,
        Err(e) => {
            say(&e);
            return 1;
        }
    };
    let kvsname = format!("kvs_{job_id}");
    let mut server = Server::new(spec.n, kvsname, spec.placement.process_mapping());
    server.set_capacity(capacity);
    let mut job = Job {
        spec,
        job_id,
        ranks: Vec::new(),
        streams: Vec::new(),
        server,
        outcome: None,
        term_sent: None,
        kill_sent: false,
        suspects: Vec::new(),
        failures: Vec::new(),
        report_due: None,
        others_running: false,
        secret,
        capacity,
        spawned_world: Vec::new(),
    };
    for r in 0..job.spec.n {
        let (program, args) = (job.spec.program.clone(), job.spec.args.clone());
        if let Err((code, msg)) = job.spawn(r, &program, &args, &[], None) {
            say(&msg);
            job.outcome = Some(code);
            job.teardown(libc::SIGTERM);
            break;
        }
    }
    job.event_loop(sigfd.as_raw_fd());
    job.finish()
}

impl Job {
    /// Starts rank `r` running `program` (the command line's, or a spawned
    /// one's, with `extra_env` from the spawn).
    pub(crate) fn spawn(
        &mut self,
        r: usize,
        program: &str,
        args: &[String],
        extra_env: &[(String, String)],
        wdir: Option<&std::path::Path>,
    ) -> Result<(), (i32, String)> {
        let spec = &self.spec;
        let secret = self.secret.as_str();
        let (ours, theirs) =
            sys::socketpair().map_err(|e| (1, format!("socketpair for rank {r}: {e}")))?;
        let child_fd = theirs.as_raw_fd();
        let mut cmd = Command::new(program);
        cmd.args(args);
        if let Some(d) = wdir {
            cmd.current_dir(d);
        }
        // Forget what an outer launcher may have told *us*.
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
        let (local, nlocal) = spec.placement.local_rank(r);
        let (first, count) = if r < spec.n {
            (0, spec.n)
        } else {
            self.spawned_world
                .get(r - spec.n)
                .copied()
                .unwrap_or((r, 1))
        };
        cmd.env("PMI_FD", child_fd.to_string())
            .env("PMI_RANK", r.to_string())
            .env("PMI_SIZE", (first + count).to_string())
            .env("GW_WORLD", format!("{first}:{count}:{}", self.capacity))
            .envs(extra_env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env("MPI_LOCALRANKID", local.to_string())
            .env("MPI_LOCALNRANKS", nlocal.to_string())
            .env("GW_JOB_SECRET", secret)
            .env("GW_JOB_ID", &self.job_id);
        if let Some(h) = spec.placement.host_id(&spec.real_host_id, r) {
            cmd.env("GW_HOST_ID", h);
        }
        // MPICH-ABI programs (mpi4py's wheel) find the shim: crates/launch/src/mpich_abi.rs.
        crate::mpich_abi::apply(&mut cmd);
        // Rank 0 gets gwrun's stdin when it is a file or pipe; a terminal is
        // not passed on because a rank in its own process group reading
        // from the terminal would be stopped (SIGTTIN).
        // SAFETY: isatty only inspects descriptor 0.
        let stdin_is_tty = unsafe { libc::isatty(0) } == 1;
        cmd.stdin(if r == 0 && !stdin_is_tty {
            Stdio::inherit()
        } else {
            Stdio::null()
        });
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        // Own process group: a teardown signal reaches the rank's children too.
        cmd.process_group(0);
        let cpu = spec.binding.cpu_of(r);
        let parent = std::process::id() as libc::pid_t;
        // SAFETY: runs in the child between fork and exec and only makes
        // async-signal-safe system calls: fcntl(2) to make the PMI socket
        // inheritable across exec, prctl(2) and getppid(2) (sys::die_with_parent) so that the rank is killed
        // if gwrun itself dies abruptly (e.g. SIGKILL) instead of running on
        // unsupervised, and sched_setaffinity(2) for --bind-to.
        unsafe {
            cmd.pre_exec(move || {
                if libc::fcntl(child_fd, libc::F_SETFD, 0) != 0 {
                    return Err(io::Error::last_os_error());
                }
                sys::die_with_parent(parent)?;
                if let Some(c) = cpu {
                    crate::binding::pin_self(c)?;
                }
                Ok(())
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
                format!("cannot execute '{}': {}", program, sys::os_message(&e)),
            )
        })?;
        drop(theirs);
        let pid = child.id() as i32;
        for (fd, to) in [
            (child.stdout.take().map(OwnedFd::from), 1),
            (child.stderr.take().map(OwnedFd::from), 2),
        ] {
            if let Some(fd) = fd {
                let _ = sys::set_nonblocking(fd.as_raw_fd());
                self.streams.push(Stream {
                    rank: r,
                    fd: Some(fd),
                    to,
                    buf: Vec::new(),
                });
            }
        }
        // The child is reaped by waitpid(-1) in the loop, not through `child`.
        drop(child);
        let _ = sys::set_nonblocking(ours.as_raw_fd());
        self.ranks.push(Rank {
            pid,
            pmi: Some(ours),
            pmi_in: PmiStream::new(),
            pmi_out: Vec::new(),
            exit: None,
            inited: false,
            finalized: false,
            abandoned: false,
        });
        Ok(())
    }

    /// Sends `sig` to every rank's process group (exited ranks too: their
    /// children may still run in the group).
    fn teardown(&mut self, sig: libc::c_int) {
        for r in &self.ranks {
            sys::kill_group(r.pid, sig);
        }
        if sig == libc::SIGKILL {
            self.kill_sent = true;
        } else if self.term_sent.is_none() {
            self.term_sent = Some(Instant::now());
        }
    }

    /// Records a rank's failure. The first one starts the teardown at once;
    /// the report waits for [`REPORT_GRACE`] (see [`Job::report`]).
    fn fail(&mut self, rank: usize, kind: FailKind, code: i32, why: &str) {
        if self.outcome.is_some() && self.report_due.is_none() && self.failures.is_empty() {
            return; // the job already ends for another reason (timeout, signal)
        }
        if self.failures.iter().any(|f| f.rank == rank) {
            return; // a rank's first failure says it best
        }
        let independent = self.term_sent.is_none() || kind == FailKind::Signal;
        let now = Instant::now();
        self.failures.push(Failure {
            rank,
            kind,
            code,
            why: why.to_string(),
            at: now,
            independent,
        });
        if self.failures.len() == 1 && self.outcome.is_none() {
            self.others_running = self
                .ranks
                .iter()
                .enumerate()
                .any(|(i, r)| i != rank && r.exit.is_none());
            self.outcome = Some(if code == 0 { 1 } else { code });
            self.report_due = Some(now + REPORT_GRACE);
            self.teardown(libc::SIGTERM);
        }
    }

    /// Says which rank ended the job and how, then the failures that
    /// followed from it; sets gwrun's exit status from the cause.
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
        let pid = |r: usize| self.ranks.get(r).map_or(0, |x| x.pid);
        let c = &self.failures[ci];
        let tail = if self.others_running {
            "; terminating the job"
        } else {
            ""
        };
        let mut msg = format!("rank {} (pid {}) {}{tail}", c.rank, pid(c.rank), c.why);
        let (mut listed, mut more) = (0, 0);
        for (i, f) in self.failures.iter().enumerate() {
            if i == ci {
                continue;
            }
            if listed == MAX_CONSEQUENCES {
                more += 1;
                continue;
            }
            listed += 1;
            msg.push_str(&format!(
                "\nrank {} (pid {}) {} (a consequence of rank {}'s failure above)",
                f.rank,
                pid(f.rank),
                f.why,
                c.rank
            ));
        }
        if more > 0 {
            msg.push_str(&format!(
                "\n{more} more rank(s) failed after rank {}",
                c.rank
            ));
        }
        self.outcome = Some(if c.code == 0 { 1 } else { c.code });
        say(&msg);
    }

    fn running(&self) -> usize {
        self.ranks.iter().filter(|r| r.exit.is_none()).count()
    }

    fn event_loop(&mut self, sigfd: RawFd) {
        let start = Instant::now();
        let deadline = self.spec.timeout.map(|t| start + t);
        let mut all_exited_at: Option<Instant> = None;
        let mut pmi_index: HashMap<RawFd, usize> = HashMap::new();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let now = Instant::now();
            if self.running() == 0 {
                self.report();
                let t = *all_exited_at.get_or_insert_with(|| {
                    // Nothing of the job may outlive it.
                    self.teardown(libc::SIGKILL);
                    now
                });
                let open_streams = self.streams.iter().any(|s| s.fd.is_some());
                if !open_streams || now.duration_since(t) >= DRAIN_GRACE {
                    break;
                }
            }

            // Build the poll set: signals, PMI sockets, output pipes.
            let mut fds = vec![libc::pollfd {
                fd: sigfd,
                events: libc::POLLIN,
                revents: 0,
            }];
            pmi_index.clear();
            for (i, r) in self.ranks.iter().enumerate() {
                if let Some(fd) = &r.pmi {
                    // Without POLLIN while its replies pile up: back-pressure.
                    let mut ev = if r.pmi_out.len() < MAX_QUEUED_REPLY {
                        libc::POLLIN
                    } else {
                        0
                    };
                    if !r.pmi_out.is_empty() {
                        ev |= libc::POLLOUT;
                    }
                    pmi_index.insert(fd.as_raw_fd(), i);
                    fds.push(libc::pollfd {
                        fd: fd.as_raw_fd(),
                        events: ev,
                        revents: 0,
                    });
                }
            }
            let first_stream = fds.len();
            let mut stream_of = Vec::new();
            for (i, s) in self.streams.iter().enumerate() {
                if let Some(fd) = &s.fd {
                    fds.push(libc::pollfd {
                        fd: fd.as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    });
                    stream_of.push(i);
                }
            }
            let mut wait = Duration::from_millis(200);
            let mut timers: Vec<Instant> = self.suspects.iter().map(|s| s.1).collect();
            timers.extend(self.report_due);
            timers.extend(deadline.filter(|_| self.outcome.is_none()));
            timers.extend(
                self.term_sent
                    .filter(|_| !self.kill_sent)
                    .map(|t| t + KILL_GRACE),
            );
            for t in timers {
                wait = wait.min(t.saturating_duration_since(now));
            }
            if let Err(e) = sys::poll(&mut fds, wait.as_millis().min(1000) as i32 + 1) {
                say(&format!("poll failed: {e}; terminating the job"));
                self.outcome.get_or_insert(1);
                self.teardown(libc::SIGKILL);
                std::thread::sleep(Duration::from_millis(50));
            }

            // Signals to gwrun itself.
            if fds[0].revents != 0 {
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
                        self.teardown(sig);
                    } else if !self.kill_sent {
                        // A second request: stop waiting politely.
                        self.teardown(libc::SIGKILL);
                    }
                }
            }

            // PMI traffic.
            for pfd in &fds[1..first_stream] {
                if pfd.revents == 0 {
                    continue;
                }
                let Some(&r) = pmi_index.get(&pfd.fd) else {
                    continue;
                };
                if pfd.revents & libc::POLLOUT != 0 {
                    self.flush_pmi(r);
                    // Room again: lines held back by a full queue.
                    self.handle_pmi(r);
                }
                if pfd.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 {
                    if self.takes_pmi_input(r) {
                        self.read_pmi(r, &mut buf);
                    } else if pfd.revents & (libc::POLLHUP | libc::POLLERR) != 0 {
                        // It hung up without reading its replies.
                        self.ranks[r].pmi = None;
                        self.ranks[r].pmi_out.clear();
                    }
                }
            }

            // Output of the ranks.
            for (k, pfd) in fds[first_stream..].iter().enumerate() {
                if pfd.revents == 0 {
                    continue;
                }
                let s = &mut self.streams[stream_of[k]];
                let Some(fd) = s.fd.as_ref().map(|f| f.as_raw_fd()) else {
                    continue;
                };
                match sys::read(fd, &mut buf) {
                    Ok(0) => {
                        s.emit(self.spec.tag_output, true);
                        s.fd = None;
                    }
                    Ok(n) => {
                        s.buf.extend_from_slice(&buf[..n]);
                        s.emit(self.spec.tag_output, false);
                    }
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                        ) => {}
                    Err(_) => {
                        s.emit(self.spec.tag_output, true);
                        s.fd = None;
                    }
                }
            }

            // Children that exited.
            self.reap();

            // A rank that exited without finalize while others wait in a
            // barrier it will never enter: the job can only hang.
            if self.outcome.is_none() && self.server.waiting_in_barrier() > 0 {
                let gone = self
                    .ranks
                    .iter()
                    .position(|r| matches!(r.exit, Some(Exit::Code(0))) && !r.finalized);
                if let Some(r) = gone {
                    let w = self.server.waiting_in_barrier();
                    self.fail(r, FailKind::Exit, 1, &format!("exited with status 0 without PMI finalize while {w} rank(s) wait for it in a PMI barrier"));
                }
            }

            // Timers.
            let now = Instant::now();
            let due: Vec<usize> = self
                .suspects
                .iter()
                .filter(|s| s.1 <= now)
                .map(|s| s.0)
                .collect();
            self.suspects.retain(|s| s.1 > now);
            for r in due {
                if self.running() > 0 {
                    self.fail(r, FailKind::Exit, 1, "exited with status 0 without calling PMI finalize while other ranks were still running");
                }
            }
            if self.report_due.is_some_and(|t| now >= t) {
                self.report();
            }
            if let Some(d) = deadline {
                if now >= d && self.outcome.is_none() {
                    let secs = self.spec.timeout.map_or(0.0, |t| t.as_secs_f64());
                    say(&format!(
                        "job timed out after {secs} s; terminating the job"
                    ));
                    self.outcome = Some(EXIT_TIMEOUT);
                    self.teardown(libc::SIGTERM);
                }
            }
            if let Some(t) = self.term_sent {
                if !self.kill_sent && now.duration_since(t) >= KILL_GRACE && self.running() > 0 {
                    self.teardown(libc::SIGKILL);
                }
            }
        }
    }

    fn reap(&mut self) {
        while let Some((pid, exit)) = sys::reap_one() {
            let Some(r) = self.ranks.iter().position(|x| x.pid == pid) else {
                continue; // an orphaned grandchild (we are its subreaper)
            };
            self.ranks[r].exit = Some(exit);
            // A spawned process gone before its world was ready: the
            // parent's spawn fails (and the job, if it failed, below).
            if r >= self.spec.n {
                let out = self.server.spawn_failed(
                    r,
                    &format!("spawned process {r} ended before it initialised"),
                );
                self.deliver(out);
            }
            if self.ranks[r].abandoned {
                continue;
            }
            match exit {
                // A death by the signal gwrun's teardown sent is no failure.
                Exit::Signal(s)
                    if (s == libc::SIGTERM && self.term_sent.is_some())
                        || (s == libc::SIGKILL && self.kill_sent) => {}
                Exit::Signal(s) => self.fail(
                    r,
                    FailKind::Signal,
                    128 + s,
                    &format!("killed by signal {s} ({})", sys::signal_name(s)),
                ),
                Exit::Code(c) if c != 0 => {
                    self.fail(r, FailKind::Exit, c, &format!("exited with status {c}"))
                }
                Exit::Code(_) => {
                    let rk = &self.ranks[r];
                    if rk.inited && !rk.finalized && self.outcome.is_none() {
                        self.suspects.push((r, Instant::now() + FINALIZE_GRACE));
                    }
                }
            }
        }
    }

    /// True while `gwrun` takes more PMI input from rank `r`: replies
    /// queued for a rank that does not read them stop its input (and so
    /// its output), which bounds the queue at [`MAX_QUEUED_REPLY`] plus
    /// the replies of one command.
    fn takes_pmi_input(&self, r: usize) -> bool {
        self.ranks[r].pmi_out.len() < MAX_QUEUED_REPLY
    }

    /// Reads at most one buffer (64 KiB) from rank `r`'s PMI socket per
    /// poll round, so one rank flooding its socket cannot starve the
    /// others or the event loop, then handles what is complete.
    fn read_pmi(&mut self, r: usize, buf: &mut [u8]) {
        let Some(fd) = self.ranks[r].pmi.as_ref().map(|f| f.as_raw_fd()) else {
            return;
        };
        if !self.takes_pmi_input(r) {
            return;
        }
        loop {
            match sys::read(fd, buf) {
                Ok(0) => {
                    self.ranks[r].pmi = None;
                }
                Ok(n) => self.ranks[r].pmi_in.push(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => {
                    self.ranks[r].pmi = None;
                }
            }
            break;
        }
        self.handle_pmi(r);
    }

    /// Handles rank `r`'s complete PMI lines while its reply queue has room.
    fn handle_pmi(&mut self, r: usize) {
        loop {
            let held_back = self.handle_pmi_lines(r);
            for i in 0..self.ranks.len() {
                if !self.ranks[i].pmi_out.is_empty() {
                    self.flush_pmi(i);
                }
            }
            // Lines held back by a full queue that the flush just emptied
            // would otherwise wait for input that may never come.
            if !(held_back && self.takes_pmi_input(r)) {
                break;
            }
        }
    }

    /// Handles lines until none is complete (false) or the reply queue is
    /// full (true).
    fn handle_pmi_lines(&mut self, r: usize) -> bool {
        loop {
            if !self.takes_pmi_input(r) {
                return true;
            }
            let Some(cmd) = self.ranks[r].pmi_in.next_request() else {
                return false;
            };
            let out = self.server.handle_request(r, cmd);
            for (to, line) in out.replies {
                if let Some(rk) = self.ranks.get_mut(to) {
                    rk.pmi_out.extend_from_slice(line.as_bytes());
                }
            }
            for n in out.notices {
                match n {
                    Notice::Initialized(x) => self.ranks[x].inited = true,
                    // Only partial (proxy) servers wait for other hosts.
                    Notice::BarrierReady { .. } => {}
                    Notice::Finalized(x) => self.ranks[x].finalized = true,
                    Notice::Abort { rank, code, msg } => {
                        let m = if msg.is_empty() {
                            String::new()
                        } else {
                            format!(": {msg}")
                        };
                        self.fail(
                            rank,
                            FailKind::Abort,
                            code,
                            &format!("called PMI abort with exit code {code}{m}"),
                        );
                    }
                    Notice::Protocol { rank, what } => {
                        say(&format!("rank {rank}: PMI protocol error: {what}"))
                    }
                    Notice::Spawn { rank, apps, preput } => self.spawn_world(rank, apps, preput),
                    Notice::Close { rank, what } => {
                        // The error reply is already queued: send what we
                        // can now, then hang up (the rank sees EOF).
                        self.flush_pmi(rank);
                        if let Some(rk) = self.ranks.get_mut(rank) {
                            rk.pmi = None;
                            rk.pmi_out.clear();
                            rk.pmi_in = PmiStream::new();
                        }
                        // Not a failure of the job by itself: the rank gets
                        // EOF and says so, its exit is then reported.
                        let pid = self.ranks.get(rank).map_or(0, |r| r.pid);
                        say(&format!("rank {rank} (pid {pid}) broke the PMI protocol ({what}); gwrun closed its PMI connection"));
                    }
                }
            }
        }
    }

    fn flush_pmi(&mut self, r: usize) {
        let rk = &mut self.ranks[r];
        let Some(fd) = rk.pmi.as_ref().map(|f| f.as_raw_fd()) else {
            rk.pmi_out.clear();
            return;
        };
        while !rk.pmi_out.is_empty() {
            match sys::write(fd, &rk.pmi_out) {
                Ok(n) if n == rk.pmi_out.len() => rk.pmi_out.clear(),
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

    /// After the loop: kill stragglers, remove shared memory, print stats.
    fn finish(&mut self) -> i32 {
        self.report();
        self.teardown(libc::SIGKILL);
        kill_orphans();
        let until = Instant::now() + Duration::from_millis(500);
        while Instant::now() < until {
            // SAFETY: waitpid with WNOHANG on any child; status discarded.
            let pid = unsafe { libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) };
            if pid < 0 {
                break; // ECHILD: nobody left
            }
            if pid == 0 {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        remove_shm(&self.job_id);
        if self.spec.stats || self.spec.report.is_some() {
            let records: Vec<Option<String>> = (0..self.spec.n)
                .map(|r| {
                    self.server
                        .lookup(&format!("gw.stats.{r}"))
                        .map(str::to_string)
                })
                .collect();
            let m = stats::build(&records);
            if self.spec.stats {
                say(&stats::render(&m, &self.spec.placement.describe()).join("\n"));
            }
            if let Some(path) = &self.spec.report {
                if let Err(e) = gridwire_launch::report::write(path, &m, &self.places()) {
                    say(&e);
                }
            }
        }
        self.outcome.unwrap_or(0)
    }
}

impl Job {
    /// Where each rank ran, for `--report`: the (emulated) host gwrun placed
    /// it on, and the site it published at start-up (`gw.place.<rank>` =
    /// `<host digest>/<site>`; `GW_SITE`, or `default`).
    fn places(&self) -> Vec<gridwire_launch::report::RankPlace> {
        (0..self.spec.n)
            .map(|r| {
                let p = &self.spec.placement;
                let host = p
                    .rank_host
                    .get(r)
                    .and_then(|&h| p.hosts.get(h))
                    .cloned()
                    .unwrap_or_else(|| "?".into());
                let site = self
                    .server
                    .lookup(&format!("gw.place.{r}"))
                    .and_then(|v| v.split_once('/').map(|(_, s)| s.to_string()))
                    .unwrap_or_else(|| "default".into());
                gridwire_launch::report::RankPlace { host, site }
            })
            .collect()
    }
}
