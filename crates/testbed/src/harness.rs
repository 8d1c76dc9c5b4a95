//! For tests (of this crate and others): bring a testbed up, run commands on
//! its hosts with a time limit, and always take it down again.
//!
//! ```ignore
//! use gridwire_testbed::harness::{self, Testbed};
//! if let Err(why) = harness::ready() { gridwire_testkit::skip(&why); return; }
//! let tb = Testbed::up(&["--sites", "2", "--hosts", "2", "--wan-delay", "20"]).unwrap();
//! let out = tb.exec("login", &["ssh", "-F", tb.ssh_config.to_str().unwrap(), "s1h0", "hostname"]);
//! // dropped: gw-testbed down
//! ```
//!
//! The binaries (gw-testbed, gw-linkemu) are built with cargo into the
//! target directory and profile of the running test, so a test of any crate
//! can use the testbed without depending on build order.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Runs `cmd` with a time limit; on timeout kills it and returns an error.
pub fn run_with_timeout(cmd: &mut Command, limit: Duration) -> Result<Output, String> {
    let what = format!("{cmd:?}");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {what}: {e}"))?;
    // Read both pipes while waiting, so a chatty command cannot block on a full pipe.
    let mut out_pipe = child.stdout.take();
    let mut err_pipe = child.stderr.take();
    let out_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        if let Some(p) = out_pipe.as_mut() {
            let _ = std::io::Read::read_to_end(p, &mut v);
        }
        v
    });
    let err_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        if let Some(p) = err_pipe.as_mut() {
            let _ = std::io::Read::read_to_end(p, &mut v);
        }
        v
    });
    let end = Instant::now() + limit;
    let status = loop {
        if let Some(s) = child.try_wait().map_err(|e| format!("{what}: {e}"))? {
            break s;
        }
        if Instant::now() > end {
            // SIGTERM first: `gw-testbed exec` forwards it to the command on
            // the host (SIGKILL would leave that running).
            // SAFETY: kill with our own child's pid and a signal number.
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
            let grace = Instant::now() + Duration::from_secs(2);
            while Instant::now() < grace && matches!(child.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = child.kill();
            let _ = child.wait();
            // What the command started may still hold the pipe: never wait
            // for its end without a limit.
            let err = join_within(err_reader, Duration::from_secs(2));
            return Err(format!(
                "{what} did not finish within {limit:?}; stderr: {}",
                String::from_utf8_lossy(&err)
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    // A daemon started by the command may hold the pipes: do not wait for EOF forever.
    let stdout = join_within(out_reader, Duration::from_secs(2));
    let stderr = join_within(err_reader, Duration::from_secs(2));
    Ok(Output {
        status,
        stdout,
        stderr,
    })
}

fn join_within(h: std::thread::JoinHandle<Vec<u8>>, limit: Duration) -> Vec<u8> {
    let end = Instant::now() + limit;
    while !h.is_finished() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(5));
    }
    if h.is_finished() {
        h.join().unwrap_or_default()
    } else {
        Vec::new()
    }
}

/// Paths of gw-testbed and gw-linkemu, built once per test process.
pub fn binaries() -> Result<(PathBuf, PathBuf), String> {
    static BUILT: OnceLock<Result<(PathBuf, PathBuf), String>> = OnceLock::new();
    BUILT.get_or_init(build_binaries).clone()
}

fn build_binaries() -> Result<(PathBuf, PathBuf), String> {
    // A test executable lives in <target>/<profile>/deps/.
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .ok_or("cannot find the target directory of this test")?
        .to_path_buf();
    let target_dir = profile_dir
        .parent()
        .ok_or("cannot find the target directory of this test")?;
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args([
        "build",
        "--quiet",
        "-p",
        "gridwire-testbed",
        "-p",
        "gridwire-linkemu",
    ])
    .args(["--bin", "gw-testbed", "--bin", "gw-linkemu", "--target-dir"])
    .arg(target_dir)
    .current_dir(&workspace);
    match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") | None => {}
        Some("release") => {
            cmd.arg("--release");
        }
        Some(other) => {
            cmd.args(["--profile", other]);
        }
    }
    let out = run_with_timeout(&mut cmd, Duration::from_secs(600))?;
    if !out.status.success() {
        return Err(format!(
            "building gw-testbed and gw-linkemu failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok((
        profile_dir.join("gw-testbed"),
        profile_dir.join("gw-linkemu"),
    ))
}

/// Ok when a testbed can be made here; else the reason (for the skip rule).
pub fn ready() -> Result<(), String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("gw-testbed needs root (namespaces, mounts, bridges, nftables)".into());
    }
    for (path, pkg) in [
        ("/usr/sbin/sshd", "openssh-server"),
        ("/usr/bin/ssh", "openssh-client"),
    ] {
        if !Path::new(path).exists() {
            return Err(format!(
                "{path} is missing (Debian package {pkg}; scripts/install-deps.sh installs it)"
            ));
        }
    }
    let (bin, linkemu) = binaries()?;
    let out = run_with_timeout(
        Command::new(&bin).arg("check").env("GW_LINKEMU", &linkemu),
        Duration::from_secs(30),
    )?;
    if !out.status.success() {
        return Err(format!(
            "gw-testbed check: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

/// An instance that is taken down when dropped (also when a test panics).
pub struct Testbed {
    pub id: String,
    /// The machines file `up` wrote.
    pub machines: PathBuf,
    /// `ssh -F` this from login or any host.
    pub ssh_config: PathBuf,
    /// login first, then s0h0, s0h1, ...
    pub hosts: Vec<String>,
    bin: PathBuf,
    linkemu: PathBuf,
    up: bool,
}

static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

impl Testbed {
    /// `gw-testbed up ARGS` with a fresh id (`t<pid>x<n>`); do not pass `--id`.
    /// First removes the instances of test processes that died without
    /// taking theirs down (killed by a timeout, say).
    pub fn up(args: &[&str]) -> Result<Testbed, String> {
        let (bin, linkemu) = binaries()?;
        // The hosts' inits and the link emulators outlive `gw-testbed up`:
        // made our children, `down` can reap exactly them (not every
        // machine's PID 1 reaps orphans).
        // SAFETY: prctl with integer arguments; affects only this process.
        unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
        remove_orphaned_instances(&bin, &linkemu);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let id = format!("t{}x{n}", std::process::id());
        let mut tb = Testbed {
            id: id.clone(),
            machines: PathBuf::new(),
            ssh_config: PathBuf::new(),
            hosts: Vec::new(),
            bin,
            linkemu,
            up: true,
        };
        let out = run_with_timeout(
            tb.cmd().args(["up", "--id", &id]).args(args),
            Duration::from_secs(120),
        )?;
        if !out.status.success() {
            return Err(format!(
                "gw-testbed up {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let Some((k, v)) = line.split_once('=') else {
                continue;
            };
            let v = v.trim_matches('"');
            match k {
                "GW_TESTBED_MACHINES" => tb.machines = v.into(),
                "GW_TESTBED_SSH_CONFIG" => tb.ssh_config = v.into(),
                "GW_TESTBED_HOSTS" => tb.hosts = v.split_whitespace().map(String::from).collect(),
                _ => {}
            }
        }
        if tb.hosts.is_empty() || tb.machines.as_os_str().is_empty() {
            return Err(format!(
                "gw-testbed up printed no paths: {}",
                String::from_utf8_lossy(&out.stdout)
            ));
        }
        Ok(tb)
    }

    /// A `gw-testbed` command for this instance.
    pub fn cmd(&self) -> Command {
        let mut c = Command::new(&self.bin);
        c.env("GW_LINKEMU", &self.linkemu)
            .env("GW_TESTBED_ID", &self.id);
        c
    }

    /// The state directory (/run/gw-testbed/ID).
    pub fn dir(&self) -> PathBuf {
        PathBuf::from("/run/gw-testbed").join(&self.id)
    }

    /// `gw-testbed exec HOST args...` as a Command, to spawn or pipe.
    pub fn command(&self, host: &str, args: &[&str]) -> Command {
        let mut c = self.cmd();
        c.args(["exec", "--id", &self.id, host]).args(args);
        c
    }

    /// Runs `args` on `host` with a 30 s limit (an error on timeout).
    pub fn exec(&self, host: &str, args: &[&str]) -> Result<Output, String> {
        run_with_timeout(&mut self.command(host, args), Duration::from_secs(30))
    }

    /// Runs `args` on `host`; its trimmed stdout, or an error naming its stderr.
    pub fn exec_ok(&self, host: &str, args: &[&str]) -> Result<String, String> {
        let out = self.exec(host, args)?;
        if !out.status.success() {
            return Err(format!(
                "on {host}: {args:?} failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    /// Cuts `host` off silently (`gw-testbed partition`) until [`Testbed::heal`].
    pub fn partition(&self, host: &str) -> Result<(), String> {
        self.tool(&["partition", "--id", &self.id, host])
    }

    /// Undoes [`Testbed::partition`].
    pub fn heal(&self, host: &str) -> Result<(), String> {
        self.tool(&["heal", "--id", &self.id, host])
    }

    fn tool(&self, args: &[&str]) -> Result<(), String> {
        let out = run_with_timeout(self.cmd().args(args), Duration::from_secs(30))?;
        if !out.status.success() {
            return Err(format!(
                "gw-testbed {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(())
    }

    /// Pids of the instance's inits and link emulators (from its state files).
    pub fn pids(&self) -> Vec<i32> {
        let mut files = Vec::new();
        for sub in ["hosts", "linkemu"] {
            if let Ok(d) = std::fs::read_dir(self.dir().join(sub)) {
                for e in d.flatten() {
                    let p = e.path();
                    if sub == "hosts" {
                        files.push(p.join("init.pid"));
                    } else if p.extension().is_some_and(|x| x == "pid") {
                        files.push(p);
                    }
                }
            }
        }
        files
            .iter()
            .filter_map(|f| std::fs::read_to_string(f).ok()?.trim().parse().ok())
            .collect()
    }

    /// `gw-testbed down`, then reaps the instance's processes.
    pub fn down(&mut self) -> Result<(), String> {
        if !self.up {
            return Ok(());
        }
        self.up = false;
        let pids = self.pids();
        let out = run_with_timeout(
            self.cmd().args(["down", "--id", &self.id]),
            Duration::from_secs(60),
        );
        reap(&pids);
        let out = out?;
        if !out.status.success() {
            return Err(format!(
                "gw-testbed down --id {}: {}",
                self.id,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(())
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        if let Err(e) = self.down() {
            eprintln!("{e}");
        }
    }
}

/// The pid of the test process that made instance `id` (`t<pid>x<n>`).
fn test_pid_of(id: &str) -> Option<i32> {
    let (pid, n) = id.strip_prefix('t')?.split_once('x')?;
    n.parse::<u32>().ok()?;
    pid.parse().ok()
}

fn remove_orphaned_instances(bin: &Path, linkemu: &Path) {
    let mut ids: Vec<String> = Vec::new();
    for (dir, prefix) in [("/run/gw-testbed", ""), ("/run/netns", "gwtb-")] {
        if let Ok(d) = std::fs::read_dir(dir) {
            for e in d.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if let Some(rest) = name.strip_prefix(prefix) {
                    ids.push(rest.split('-').next().unwrap_or("").to_string());
                }
            }
        }
    }
    ids.sort();
    ids.dedup();
    for id in ids {
        let Some(pid) = test_pid_of(&id) else {
            continue;
        };
        if Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let _ = run_with_timeout(
            Command::new(bin)
                .args(["down", "--id", &id])
                .env("GW_LINKEMU", linkemu),
            Duration::from_secs(60),
        );
    }
}

/// Reaps `pids` if they are (zombie) children of this process: waits a
/// little for each to exit, and never for any other child, so no other
/// test's child is reaped.
pub fn reap(pids: &[i32]) {
    let end = Instant::now() + Duration::from_secs(2);
    for &p in pids {
        loop {
            // SAFETY: waits only for this pid; the status is not read.
            let r = unsafe { libc::waitpid(p, std::ptr::null_mut(), libc::WNOHANG) };
            if r != 0 || Instant::now() > end {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn test_instance_ids_name_their_process() {
        assert_eq!(super::test_pid_of("t1234x0"), Some(1234));
        assert_eq!(super::test_pid_of("t1234x12"), Some(1234));
        assert_eq!(super::test_pid_of("t1234"), None);
        assert_eq!(super::test_pid_of("dev1"), None);
        assert_eq!(super::test_pid_of("tx1"), None);
    }
}
