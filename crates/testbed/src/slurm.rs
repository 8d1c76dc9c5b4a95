//! Slurm on a testbed instance (Debian's `slurm-wlm` and `munge`), for
//! tests of programs started by `srun`:
//!
//! ```ignore
//! use gridwire_testbed::{harness::Testbed, slurm::{self, Slurm}};
//! let tb = Testbed::up(&["--sites", "1", "--hosts", "4", "--shared-fs"])?;
//! let slurm = Slurm::up(&tb, &slurm::Options::default())?;
//! slurm.wait_idle(Duration::from_secs(30))?;
//! let out = slurm.client("login", &["srun", "--mpi=pmi2", "-N", "4", "prog"]).output();
//! // dropped: every daemon stopped and its files removed
//! ```
//!
//! What runs where:
//! - one `munged` on `login`, its key (random, made here) and socket in the
//!   instance's `slurm/` directory;
//! - `slurmctld` on `login`, its state and log in the same directory;
//! - one `slurmd -N HOST` per compute host, spool, pid file and log in that
//!   host's own directory (`hosts/%n/slurm/`, which is the one part of the
//!   instance a compute host sees), with `ProctrackType=proctrack/linuxproc`,
//!   `TaskPlugin=task/none` and no cgroup.conf (Slurm's cgroup v2 support
//!   expects systemd as PID 1; here each host's PID 1 is the testbed's init),
//!   and `SlurmdParameters=config_overrides`: the nodes share the machine's
//!   few cores, so each would report fewer than the configured CPUs and be
//!   drained without it.
//!
//! One munge socket for every host: a compute host sees only its own
//! directory of the instance, so the socket (a file on the machine's file
//! system, which network namespaces do not separate) is hard-linked into
//! each host's directory, and every host — login included — gets the same
//! path [`MUNGE_SOCKET`] under its own private `/run` as a symbolic link to
//! the socket it can see. slurm.conf is shared the same way ([`CONF`]), so
//! daemons, `srun` on login and programs on compute hosts all read one file
//! at one path, naming the socket in `AuthInfo=socket=`.
//!
//! Clean-up: [`Slurm::down`] (also on drop) stops every daemon and removes
//! the files. After a crash, `gw-testbed down` suffices: every daemon is
//! started with `gw-testbed exec`, so it lives in its host's PID namespace
//! and, having daemonised, is reparented to the host's init (a subreaper
//! outside the namespace does not adopt it); killing that init, which `down`
//! does, kills it — munged on login included. The files are all inside the
//! instance directory (which `down` removes) or a host's own `/run` (a tmpfs
//! that goes with the host's mount namespace).

use crate::harness::{run_with_timeout, Testbed};
use std::io::Read;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// slurm.conf, at this path on every host (a symbolic link in the host's own /run).
pub const CONF: &str = "/run/gw-slurm/slurm.conf";
/// munged's socket, at this path on every host (likewise).
pub const MUNGE_SOCKET: &str = "/run/gw-slurm/munge.socket";
/// The directory of both links on every host.
const LINK_DIR: &str = "/run/gw-slurm";

/// The programs of the two Debian packages that are needed.
const PROGRAMS: &[(&str, &str)] = &[
    ("/usr/sbin/munged", "munge"),
    ("/usr/bin/munge", "munge"),
    ("/usr/sbin/slurmctld", "slurmctld (slurm-wlm)"),
    ("/usr/sbin/slurmd", "slurmd (slurm-wlm)"),
    ("/usr/bin/srun", "slurm-client (slurm-wlm)"),
    ("/usr/bin/salloc", "slurm-client (slurm-wlm)"),
    ("/usr/bin/sinfo", "slurm-client (slurm-wlm)"),
];

/// The processes Slurm and munge run (their `comm`), which `down` stops.
const DAEMONS: &[&str] = &[
    "munged",
    "slurmctld",
    "slurmscriptd",
    "slurmd",
    "slurmstepd",
];

/// Ok when Slurm and munge are installed; else the reason (for the skip rule).
pub fn ready() -> Result<(), String> {
    for (path, pkg) in PROGRAMS {
        if !Path::new(path).exists() {
            return Err(format!(
                "{path} is missing (Debian package {pkg}; scripts/install-deps.sh installs it)"
            ));
        }
    }
    Ok(())
}

#[derive(Debug, Clone)]
pub struct Options {
    /// Compute hosts that run a slurmd (default: all of them). Hosts of a
    /// `--firewall` site other than its gateway cannot be reached from
    /// login, where slurmctld runs: leave them out.
    pub nodes: Option<Vec<String>>,
    /// CPUs each node offers (`srun -n` places up to this many tasks per
    /// node). The nodes share the machine's cores; see config_overrides.
    pub cpus_per_node: u32,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            nodes: None,
            cpus_per_node: 4,
        }
    }
}

/// A running Slurm on one testbed instance; stopped and removed on drop.
pub struct Slurm<'tb> {
    tb: &'tb Testbed,
    /// The node (compute host) names, in the testbed's order.
    pub nodes: Vec<String>,
    /// The instance's `slurm/` directory: key, socket, slurm.conf, slurmctld's state and log.
    pub dir: PathBuf,
    /// (host, its PID namespace as /proc/PID/ns/pid reads) of login and every
    /// node, recorded at start: the daemons are found by namespace, since a
    /// pid file holds the pid as the host sees it.
    namespaces: Vec<(String, String)>,
    up: bool,
}

/// Checks a host name before it goes into a path or slurm.conf.
fn check_host_name(name: &str) -> Result<(), String> {
    if name.is_empty()
        || name.len() > 32
        || !name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    {
        return Err(format!("host name {name:?} is not of [a-z0-9]"));
    }
    Ok(())
}

/// The pid (as the machine sees it) of `host`'s init, checked against its
/// command line so that a stale pid file cannot name another process.
fn host_init(tb: &Testbed, host: &str) -> Result<i32, String> {
    let path = tb.dir().join("hosts").join(host).join("init.pid");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let pid: i32 = text
        .trim()
        .parse()
        .map_err(|_| format!("{}: not a pid: {:?}", path.display(), text.trim()))?;
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
    let ours = args.contains(&&b"__init"[..])
        && args
            .windows(2)
            .any(|w| w[0] == b"--id" && w[1] == tb.id.as_bytes())
        && args
            .windows(2)
            .any(|w| w[0] == b"--host" && w[1] == host.as_bytes());
    if !ours {
        return Err(format!(
            "host {host} of testbed {} is down (its init {pid} is gone)",
            tb.id
        ));
    }
    Ok(pid)
}

fn pid_namespace(pid: i32) -> Option<String> {
    std::fs::read_link(format!("/proc/{pid}/ns/pid"))
        .ok()
        .map(|l| l.to_string_lossy().into_owned())
}

fn write_file(path: &Path, text: &[u8], mode: u32) -> Result<(), String> {
    let _ = std::fs::remove_file(path);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(|e| format!("create {}: {e}", path.display()))?;
    std::io::Write::write_all(&mut f, text).map_err(|e| format!("write {}: {e}", path.display()))
}

fn mkdir(path: &Path, mode: u32) -> Result<(), String> {
    std::fs::create_dir_all(path).map_err(|e| format!("mkdir {}: {e}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| format!("chmod {}: {e}", path.display()))
}

/// `target` at `link` (replacing what was there).
fn hard_link(target: &Path, link: &Path) -> Result<(), String> {
    let _ = std::fs::remove_file(link);
    std::fs::hard_link(target, link)
        .map_err(|e| format!("link {} to {}: {e}", link.display(), target.display()))
}

impl<'tb> Slurm<'tb> {
    /// Brings Slurm up on `tb` (see the module's documentation). The nodes
    /// are registered but may not be idle yet: see [`Slurm::wait_idle`].
    pub fn up(tb: &'tb Testbed, opts: &Options) -> Result<Slurm<'tb>, String> {
        ready()?;
        let compute: Vec<String> = tb.hosts.iter().filter(|h| *h != "login").cloned().collect();
        let nodes = match &opts.nodes {
            None => compute.clone(),
            Some(list) => {
                for (i, n) in list.iter().enumerate() {
                    if list[..i].contains(n) {
                        return Err(format!("slurm node {n:?} is named twice"));
                    }
                    if !compute.contains(n) {
                        return Err(format!(
                            "slurm node {n:?} is not a compute host of testbed {} ({})",
                            tb.id,
                            compute.join(" ")
                        ));
                    }
                }
                list.clone()
            }
        };
        if nodes.is_empty() {
            return Err(format!("testbed {} has no compute host for slurmd", tb.id));
        }
        if opts.cpus_per_node == 0 || opts.cpus_per_node > 1024 {
            return Err(format!(
                "cpus_per_node {} is out of 1..1024",
                opts.cpus_per_node
            ));
        }
        check_host_name(&tb.id)?;
        for n in &nodes {
            check_host_name(n)?;
        }
        let dir = tb.dir().join("slurm");
        if dir.exists() {
            return Err(format!(
                "Slurm is already up on testbed {} ({} exists)",
                tb.id,
                dir.display()
            ));
        }
        let mut namespaces = Vec::new();
        for h in std::iter::once("login").chain(nodes.iter().map(String::as_str)) {
            let init = host_init(tb, h)?;
            let ns = pid_namespace(init)
                .ok_or_else(|| format!("cannot read the PID namespace of {h} (init {init})"))?;
            namespaces.push((h.to_string(), ns));
        }
        let slurm = Slurm {
            tb,
            nodes,
            dir,
            namespaces,
            up: true,
        };
        // From here on, a failure takes down what was started (on drop).
        slurm.start(opts)?;
        Ok(slurm)
    }

    fn start(&self, opts: &Options) -> Result<(), String> {
        let dir = &self.dir;
        // munged checks that the socket's directory is searchable by all
        // and that neither the key's directory nor the key is writable by
        // others; the key is readable by its owner only. All are root's and
        // munged runs as root, so it needs no --force.
        mkdir(dir, 0o755)?;
        mkdir(&dir.join("ctld"), 0o700)?;
        let mut key = [0u8; 128];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut key))
            .map_err(|e| format!("read /dev/urandom for the munge key: {e}"))?;
        let key_file = dir.join("munge.key");
        write_file(&key_file, &key, 0o400)?;
        let conf = dir.join("slurm.conf");
        write_file(&conf, self.slurm_conf(opts).as_bytes(), 0o644)?;

        let socket = dir.join("munge.socket");
        let path = |p: &Path| p.to_string_lossy().into_owned();
        self.daemon(
            "login",
            &[
                "/usr/sbin/munged",
                &format!("--socket={}", path(&socket)),
                &format!("--key-file={}", path(&key_file)),
                &format!("--log-file={}", path(&dir.join("munged.log"))),
                &format!("--pid-file={}", path(&dir.join("munged.pid"))),
                &format!("--seed-file={}", path(&dir.join("munged.seed"))),
            ],
        )?;
        // munged has created the socket before its parent exits.
        if !socket.exists() {
            return Err(format!(
                "munged did not create {}\n{}",
                socket.display(),
                self.logs()
            ));
        }

        // The shared socket and slurm.conf, seen by each host at LINK_DIR.
        self.link_into("login", &socket, &conf)?;
        for n in &self.nodes {
            let host_dir = self.tb.dir().join("hosts").join(n).join("slurm");
            mkdir(&host_dir.join("spool"), 0o755)?;
            hard_link(&socket, &host_dir.join("munge.socket"))?;
            hard_link(&conf, &host_dir.join("slurm.conf"))?;
            self.link_into(
                n,
                &host_dir.join("munge.socket"),
                &host_dir.join("slurm.conf"),
            )?;
        }

        self.daemon("login", &["/usr/sbin/slurmctld", "-f", CONF])?;
        for n in &self.nodes {
            self.daemon(n, &["/usr/sbin/slurmd", "-f", CONF, "-N", n])?;
        }
        Ok(())
    }

    /// The host's own `/run` as the machine sees it (through its init's root).
    fn host_run(&self, host: &str) -> Result<PathBuf, String> {
        Ok(PathBuf::from(format!(
            "/proc/{}/root/run",
            host_init(self.tb, host)?
        )))
    }

    /// Makes LINK_DIR on `host` with links to `socket` and `conf` (paths the host sees).
    fn link_into(&self, host: &str, socket: &Path, conf: &Path) -> Result<(), String> {
        let run = self.host_run(host)?;
        let links = run.join(LINK_DIR.trim_start_matches("/run/"));
        mkdir(&links, 0o755).map_err(|e| format!("on {host}: {e}"))?;
        for (name, target) in [("munge.socket", socket), ("slurm.conf", conf)] {
            let link = links.join(name);
            let _ = std::fs::remove_file(&link);
            std::os::unix::fs::symlink(target, &link)
                .map_err(|e| format!("on {host}: symlink {}: {e}", link.display()))?;
        }
        Ok(())
    }

    /// Runs a daemon on `host` (it forks into the background); an error
    /// names its stderr and where its log is.
    fn daemon(&self, host: &str, args: &[&str]) -> Result<(), String> {
        let mut cmd = self.tb.command(host, args);
        cmd.env("SLURM_CONF", CONF);
        let out = run_with_timeout(&mut cmd, Duration::from_secs(20))?;
        if !out.status.success() {
            return Err(format!(
                "on {host}: {} failed ({}): {}\n{}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim(),
                self.logs()
            ));
        }
        Ok(())
    }

    fn slurm_conf(&self, opts: &Options) -> String {
        let inst = self.tb.dir();
        let dir = &self.dir;
        let d = |p: &str| dir.join(p).to_string_lossy().into_owned();
        // %n is the node name: each slurmd writes in its own host's directory.
        let node_dir = inst.join("hosts/%n/slurm").to_string_lossy().into_owned();
        let login = "10.0.0.1";
        format!(
            "# gw-testbed instance {id}: made by gridwire_testbed::slurm\n\
             ClusterName=gwtb{id}\n\
             SlurmctldHost=login({login})\n\
             AuthType=auth/munge\n\
             AuthInfo=socket={MUNGE_SOCKET}\n\
             CredType=cred/munge\n\
             SlurmUser=root\n\
             SlurmdUser=root\n\
             SlurmctldPort=6817\n\
             SlurmdPort=6818\n\
             StateSaveLocation={ctld}\n\
             SlurmctldPidFile={ctld_pid}\n\
             SlurmctldLogFile={ctld_log}\n\
             SlurmdSpoolDir={node_dir}/spool\n\
             SlurmdPidFile={node_dir}/slurmd.pid\n\
             SlurmdLogFile={node_dir}/slurmd.log\n\
             SlurmdParameters=config_overrides\n\
             ProctrackType=proctrack/linuxproc\n\
             TaskPlugin=task/none\n\
             JobAcctGatherType=jobacct_gather/none\n\
             AccountingStorageType=accounting_storage/none\n\
             JobCompType=jobcomp/none\n\
             SwitchType=switch/none\n\
             MpiDefault=none\n\
             MailProg=/bin/true\n\
             SchedulerType=sched/builtin\n\
             SelectType=select/cons_tres\n\
             SelectTypeParameters=CR_CPU\n\
             ReturnToService=2\n\
             InactiveLimit=0\n\
             KillWait=2\n\
             UnkillableStepTimeout=10\n\
             MinJobAge=10\n\
             NodeName={nodes} CPUs={cpus} State=UNKNOWN\n\
             PartitionName=testbed Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n",
            id = self.tb.id,
            ctld = d("ctld"),
            ctld_pid = d("slurmctld.pid"),
            ctld_log = d("slurmctld.log"),
            nodes = self.nodes.join(","),
            cpus = opts.cpus_per_node,
        )
    }

    /// What a client (srun, salloc, sinfo, scancel) needs in its environment,
    /// on login or on any node.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![("SLURM_CONF".to_string(), CONF.to_string())]
    }

    /// `gw-testbed exec HOST args…` with [`Slurm::env`] set.
    pub fn client(&self, host: &str, args: &[&str]) -> Command {
        let mut c = self.tb.command(host, args);
        c.envs(self.env());
        c
    }

    /// Polls `sinfo` on login until every node is idle.
    pub fn wait_idle(&self, limit: Duration) -> Result<(), String> {
        let end = Instant::now() + limit;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            let out = run_with_timeout(
                &mut self.client(
                    "login",
                    &["sinfo", "--noheader", "--Node", "--format=%N %T"],
                ),
                left.clamp(Duration::from_secs(1), Duration::from_secs(10)),
            );
            let last = match out {
                Ok(o) if o.status.success() => {
                    let said = String::from_utf8_lossy(&o.stdout).into_owned();
                    if all_idle(&said, &self.nodes) {
                        return Ok(());
                    }
                    said
                }
                Ok(o) => String::from_utf8_lossy(&o.stderr).into_owned(),
                Err(e) => e,
            };
            if Instant::now() >= end {
                return Err(format!(
                    "Slurm's nodes were not all idle within {limit:?}; sinfo said:\n{}\n{}",
                    last.trim(),
                    self.logs()
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The end of every daemon's log (for an error message: `down` removes them).
    pub fn logs(&self) -> String {
        let mut files = vec![
            ("munged on login".to_string(), self.dir.join("munged.log")),
            (
                "slurmctld on login".to_string(),
                self.dir.join("slurmctld.log"),
            ),
        ];
        for n in &self.nodes {
            files.push((
                format!("slurmd on {n}"),
                self.tb.dir().join("hosts").join(n).join("slurm/slurmd.log"),
            ));
        }
        let mut s = String::new();
        for (what, path) in files {
            s.push_str(&format!("--- {what} ({}):\n", path.display()));
            s.push_str(&tail(&path, 2048));
            s.push('\n');
        }
        s
    }

    /// Slurm and munge processes still running on the instance's hosts
    /// (`pid comm on host`), found by PID namespace.
    pub fn leftovers(&self) -> Vec<String> {
        daemons_in(&self.namespaces)
            .into_iter()
            .map(|(pid, comm, host)| format!("{pid} {comm} on {host}"))
            .collect()
    }

    /// Stops every daemon (SIGTERM, then SIGKILL after 5 s) and removes
    /// Slurm's files; the error names whatever is left.
    pub fn down(&mut self) -> Result<(), String> {
        if !self.up {
            return Ok(());
        }
        self.up = false;
        let running = daemons_in(&self.namespaces);
        signal_all(&running, libc::SIGTERM);
        if !wait_gone(&running, Duration::from_secs(5)) {
            signal_all(&running, libc::SIGKILL);
            wait_gone(&running, Duration::from_secs(2));
        }
        // A job step started while the first ones stopped (or a daemon
        // that forked again): no grace for those.
        let late = daemons_in(&self.namespaces);
        signal_all(&late, libc::SIGKILL);
        wait_gone(&late, Duration::from_secs(2));

        let mut problems = Vec::new();
        for (host, _) in &self.namespaces {
            // A host that is already down took its /run along.
            if let Ok(run) = self.host_run(host) {
                let links = run.join(LINK_DIR.trim_start_matches("/run/"));
                if links.exists() {
                    if let Err(e) = std::fs::remove_dir_all(&links) {
                        problems.push(format!("on {host}: remove {LINK_DIR}: {e}"));
                    }
                }
            }
        }
        let mut dirs = vec![self.dir.clone()];
        for n in &self.nodes {
            dirs.push(self.tb.dir().join("hosts").join(n).join("slurm"));
        }
        for d in dirs {
            if d.exists() {
                if let Err(e) = std::fs::remove_dir_all(&d) {
                    problems.push(format!("remove {}: {e}", d.display()));
                }
            }
        }
        problems.extend(
            self.leftovers()
                .into_iter()
                .map(|p| format!("process {p} is still alive")),
        );
        if problems.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "Slurm on testbed {} not fully stopped:\n  {}",
                self.tb.id,
                problems.join("\n  ")
            ))
        }
    }
}

impl Drop for Slurm<'_> {
    fn drop(&mut self) {
        if let Err(e) = self.down() {
            eprintln!("{e}");
        }
    }
}

/// The last `max` bytes of a file (lossy UTF-8), or why it cannot be read.
fn tail(path: &Path, max: u64) -> String {
    use std::io::{Seek, SeekFrom};
    let mut f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) => return format!("({e})"),
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(max)));
    let mut buf = Vec::new();
    let _ = f.take(max).read_to_end(&mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

/// True when `sinfo -N -o "%N %T"` lists every one of `nodes` as idle.
fn all_idle(sinfo: &str, nodes: &[String]) -> bool {
    nodes.iter().all(|n| {
        sinfo.lines().any(|l| {
            let mut f = l.split_whitespace();
            f.next() == Some(n.as_str()) && f.next() == Some("idle")
        })
    })
}

/// (pid, comm, host) of every Slurm or munge process in the given PID namespaces.
fn daemons_in(namespaces: &[(String, String)]) -> Vec<(i32, String, String)> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Some(ns) = pid_namespace(pid) else {
            continue;
        };
        let Some((host, _)) = namespaces.iter().find(|(_, n)| *n == ns) else {
            continue;
        };
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        let comm = comm.trim();
        if DAEMONS.contains(&comm) && alive(pid) {
            found.push((pid, comm.to_string(), host.clone()));
        }
    }
    found
}

/// Alive and not a zombie.
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .map(|(_, rest)| !rest.trim_start().starts_with('Z'))
            .unwrap_or(false),
        Err(_) => false,
    }
}

fn signal_all(procs: &[(i32, String, String)], sig: libc::c_int) {
    for (pid, _, _) in procs {
        // SAFETY: kill with a pid and a signal number; a pid that has gone
        // meanwhile gives ESRCH, which is fine.
        unsafe { libc::kill(*pid, sig) };
    }
}

fn wait_gone(procs: &[(i32, String, String)], limit: Duration) -> bool {
    let end = Instant::now() + limit;
    loop {
        if procs.iter().all(|(p, _, _)| !alive(*p)) {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_means_every_node_listed_as_idle() {
        let nodes: Vec<String> = ["s0h0", "s0h1"].iter().map(|s| s.to_string()).collect();
        assert!(all_idle("s0h0 idle\ns0h1 idle\n", &nodes));
        assert!(!all_idle("s0h0 idle\ns0h1 idle*\n", &nodes));
        assert!(!all_idle("s0h0 idle\n", &nodes));
        assert!(!all_idle("s0h0 idle\ns0h1 down\n", &nodes));
        assert!(!all_idle("", &nodes));
    }

    #[test]
    fn host_names_for_paths_are_checked() {
        assert!(check_host_name("s0h12").is_ok());
        assert!(check_host_name("../x").is_err());
        assert!(check_host_name("").is_err());
        assert!(check_host_name("a b").is_err());
    }
}
