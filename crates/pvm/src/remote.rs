//! Real remote hosts, the coordinator's side. A host named in the machines
//! file `$GWPVM_MACHINES` (the grid start-up's format, parsed by the
//! launcher's [`Machines`]) is started the way `gwrun -f` starts a host:
//! by its site's start method (`start=ssh`: the launcher's ssh command line,
//! with the site's user, port and options). What runs there is a *host
//! agent* (`gwpvm --pvm-host`, see [`crate::agent`]), PVM's pvmd in
//! miniature: it starts and signals the host's tasks and removes them and
//! its files when its channel closes. The agent binary is this `gwpvm`,
//! used where it is when the host has the same file (a shared file system)
//! and staged through the ssh channel otherwise (into a private temporary
//! directory the agent removes when it ends).
//!
//! Nothing secret is on a command line: the job secret travels in the
//! first line over the ssh channel. Tasks on the remote host reach the
//! coordinator over TCP and prove the secret first (`AUTH <secret>`); from
//! then on they use the same line protocol as local tasks. Messages between
//! tasks never pass through the agent or the coordinator: the runtime
//! selects a method per pair (tcp between hosts) as for any other job.
//!
//! Hosts not in the machines file, and hosts of a `start=local` site, are
//! emulated on this machine as before (see [`crate::hosts`]).

use crate::conn::Conn;
use crate::consts::*;
use crate::coord::{self, hex, Shared};
use gridwire_launch::grid::bootstrap::{hash_file, shell_quote};
use gridwire_launch::grid::start::ssh::site_argv;
use gridwire_launch::machines::{Machines, StartKind};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a host may take to start its agent (ssh, staging, hello).
const START_LIMIT: Duration = Duration::from_secs(40);
/// How long the agent may take to answer a request.
const REQUEST_LIMIT: Duration = Duration::from_secs(30);

/// The agent of one remote host, as the coordinator holds it.
pub struct Agent {
    pub name: String,
    /// The ssh command's stdin (None once closed) and the agent's replies.
    chan: Mutex<(Option<ChildStdin>, mpsc::Receiver<String>)>,
    child: Mutex<Child>,
    /// The host's daemon id once it is in the machine (0 before).
    dtid: Arc<AtomicI32>,
}

impl Agent {
    /// One request line, one reply line (`OK …` or `ERR <code>`); a lost
    /// host answers `PvmNoHost` at once (its reader closed the channel).
    pub fn request(&self, line: &str) -> Result<String, i32> {
        let mut g = self.chan.lock().unwrap_or_else(|e| e.into_inner());
        let (w, rx) = &mut *g;
        let w = w.as_mut().ok_or(PVM_NO_HOST)?;
        writeln!(w, "{line}").map_err(|_| PVM_NO_HOST)?;
        let reply = rx.recv_timeout(REQUEST_LIMIT).map_err(|_| PVM_NO_HOST)?;
        reply_of(&reply)
    }

    /// Closes the channel (the agent then terminates the host's tasks and
    /// removes its files) and waits up to `limit` for ssh to end.
    pub fn close(&self, limit: Duration) {
        self.chan.lock().unwrap_or_else(|e| e.into_inner()).0.take();
        let mut c = self.child.lock().unwrap_or_else(|e| e.into_inner());
        let end = Instant::now() + limit;
        while Instant::now() < end {
            if !matches!(c.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = c.kill();
        let _ = c.wait();
    }
}

fn reply_of(line: &str) -> Result<String, i32> {
    if let Some(rest) = line.strip_prefix("OK") {
        return Ok(rest.trim().to_string());
    }
    Err(line
        .strip_prefix("ERR ")
        .and_then(|c| c.trim().parse().ok())
        .unwrap_or(PVM_SYS_ERR))
}

/// The machines file named by `$GWPVM_MACHINES`, read when first needed.
fn machines() -> Option<&'static Machines> {
    static M: std::sync::OnceLock<Option<Machines>> = std::sync::OnceLock::new();
    M.get_or_init(|| {
        let p = std::env::var_os("GWPVM_MACHINES").filter(|p| !p.is_empty())?;
        match Machines::load(std::path::Path::new(&p)) {
            Ok(m) => Some(m),
            Err(e) => {
                eprintln!("gwpvm coordinator: GWPVM_MACHINES: {e}");
                None
            }
        }
    })
    .as_ref()
}

/// How the coordinator reaches a remote host of the machines file: the
/// site's start method and its command line.
pub enum Reach {
    /// `ssh [options]`; `-- HOST 'script'` follow (run by the login shell).
    Ssh(Vec<String>),
    /// `srun [options]` (a job step of one task on the host, inside the
    /// allocation the virtual machine runs in: `salloc -N K …`); `-w HOST`
    /// and the script's argument vector follow (no shell in between).
    Slurm(Vec<String>),
}

/// How `name` is reached, when it is a remote host of the machines file
/// (None: an emulated host; `start=local` sites are emulated).
pub fn reach(name: &str) -> Option<Reach> {
    let m = machines()?;
    let i = m.host_index(name)?;
    let site = &m.sites[m.hosts[i].site];
    match site.start {
        StartKind::Ssh => Some(Reach::Ssh(site_argv(
            m.user_of(i).or(site.user.as_deref()),
            site.port,
            &site.ssh_options,
        ))),
        StartKind::Slurm => Some(Reach::Slurm(
            gridwire_launch::grid::start::slurm::site_argv(),
        )),
        _ => None,
    }
}

/// The `gwpvm` binary to run as the agent: `$GWPVM_BIN`, this process when
/// it is gwpvm, next to libpvm3 (`target/release`) or in `../bin` of it
/// (an installed prefix), or on `PATH`.
fn agent_binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("GWPVM_BIN").filter(|p| !p.is_empty()) {
        return Some(p.into());
    }
    let mut candidates = Vec::new();
    if let Ok(exe) = std::fs::read_link("/proc/self/exe") {
        if exe.file_name().is_some_and(|n| n == "gwpvm") {
            candidates.push(exe);
        }
    }
    if let Some(lib) = library_path() {
        if let Some(dir) = lib.parent() {
            candidates.push(dir.join("gwpvm"));
            candidates.push(dir.join("../bin/gwpvm"));
        }
    }
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path).map(|d| d.join("gwpvm")));
    }
    candidates
        .into_iter()
        .find(|p| p.is_file())
        .and_then(|p| p.canonicalize().ok())
}

/// The file this code was loaded from (libpvm3.so, or the program that
/// linked libpvm3.a).
fn library_path() -> Option<PathBuf> {
    // SAFETY: dladdr only reads the loader's tables for an address of this
    // library; `info` is plain data it fills.
    unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        if libc::dladdr(library_path as *const libc::c_void, &mut info) == 0
            || info.dli_fname.is_null()
        {
            return None;
        }
        let name = std::ffi::CStr::from_ptr(info.dli_fname);
        Some(PathBuf::from(name.to_string_lossy().into_owned()))
    }
}

/// Run by the remote login shell: the agent binary where the coordinator
/// has it, when the host has the very same file (its hash), else staged
/// through the channel into a fresh private directory (`GWBOOT1 need`,
/// then exactly SIZE bytes), as the launcher's bootstrap stages its proxy.
/// $0 = path, $1 = size, $2 = hash. No single quote inside.
const BOOT_SCRIPT: &str = concat!(
    "if [ -x \"$0\" ] && [ \"$(sha256sum < \"$0\" | cut -c1-64)\" = \"$2\" ]; ",
    "then echo GWBOOT1 have; exec \"$0\" --pvm-host; fi; ",
    "umask 077; d=$(mktemp -d \"${TMPDIR:-/tmp}/gwpvm-stage.XXXXXX\") || exit 97; ",
    "echo GWBOOT1 need; ",
    "if head -c \"$1\" > \"$d/gwpvm\" && [ \"$(sha256sum < \"$d/gwpvm\" | cut -c1-64)\" = \"$2\" ] ",
    "&& chmod 700 \"$d/gwpvm\"; then GWPVM_STAGED=\"$d\" exec \"$d/gwpvm\" --pvm-host; fi; ",
    "rm -rf \"$d\"; echo \"gwpvm: cannot stage the host agent\" >&2; exit 97"
);

/// Starts the agent of remote host `name` reached by `argv` (ssh …) and
/// waits for it to be ready. `sh` gets told when the host is lost.
pub(crate) fn start_agent(sh: &Arc<Shared>, name: &str, how: &Reach) -> Result<Arc<Agent>, i32> {
    let exe = agent_binary().ok_or_else(|| {
        eprintln!("gwpvm coordinator: no gwpvm binary to start on {name} (set GWPVM_BIN)");
        PVM_CANT_START
    })?;
    let (hash, size) = hash_file(&exe).map_err(|_| PVM_CANT_START)?;
    let script: Vec<String> = ["sh", "-c", BOOT_SCRIPT]
        .iter()
        .map(|s| s.to_string())
        .chain([exe.to_string_lossy().into_owned(), size.to_string(), hash])
        .collect();
    let mut cmd;
    match how {
        Reach::Ssh(argv) => {
            cmd = Command::new(&argv[0]);
            let quoted: Vec<String> = script.iter().map(|a| shell_quote(a)).collect();
            cmd.args(&argv[1..])
                .arg("--")
                .arg(name)
                .arg(quoted.join(" "));
        }
        Reach::Slurm(argv) => {
            cmd = Command::new(&argv[0]);
            // srun passes this environment on to the step: an SSH_CLIENT
            // of the coordinator's own login would name the wrong peer to
            // the agent (it takes Slurm's SLURM_LAUNCH_NODE_IPADDR then).
            cmd.args(&argv[1..])
                .arg("-w")
                .arg(name)
                .arg("--chdir=/")
                .args(&script)
                .env_remove("SSH_CLIENT")
                .env_remove("SSH_CONNECTION");
            // Nor does the virtual machine's own setting travel (over ssh
            // sshd drops it): a GWPVM_DIR on a shared file system would
            // make the agent take the coordinator's directory for its own.
            for (k, _) in std::env::vars_os() {
                if k.to_string_lossy().starts_with("GWPVM_") {
                    cmd.env_remove(k);
                }
            }
        }
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        // The agent's stderr carries its tasks' output: the coordinator's
        // own stderr is the virtual machine's log.
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| {
            eprintln!("gwpvm coordinator: starting {name}: {e}");
            PVM_CANT_START
        })?;
    let mut stdin = child.stdin.take().ok_or(PVM_SYS_ERR)?;
    let stdout = child.stdout.take().ok_or(PVM_SYS_ERR)?;
    let (tx, rx) = mpsc::channel();
    let dtid = Arc::new(AtomicI32::new(0));
    let (sh2, d2, host) = (sh.clone(), dtid.clone(), name.to_string());
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
        drop(tx);
        // The channel ended without a DELHOST: the host is lost.
        let k = d2.load(Ordering::Acquire);
        if k != 0 && coord::host_lost(&sh2, k) {
            eprintln!("gwpvm coordinator: lost host {host}");
        }
    });
    let fail = |child: &mut Child, why: &str| {
        eprintln!("gwpvm coordinator: starting {name}: {why}");
        let _ = child.kill();
        let _ = child.wait();
        PVM_CANT_START
    };
    let end = Instant::now() + START_LIMIT;
    let next = |rx: &mpsc::Receiver<String>| {
        rx.recv_timeout(end.saturating_duration_since(Instant::now()))
            .ok()
    };
    match next(&rx).as_deref() {
        Some("GWBOOT1 have") => eprintln!(
            "gwpvm coordinator: {name}: agent {} found there",
            exe.display()
        ),
        Some("GWBOOT1 need") => {
            eprintln!("gwpvm coordinator: {name}: agent staged ({size} bytes)");
            let sent = std::fs::File::open(&exe)
                .and_then(|mut f| std::io::copy(&mut (&mut f).take(size), &mut stdin));
            if !matches!(sent, Ok(n) if n == size) {
                return Err(fail(&mut child, "cannot send the agent binary"));
            }
        }
        other => {
            return Err(fail(
                &mut child,
                &format!("no bootstrap answer ({other:?})"),
            ))
        }
    }
    let port = listener_port(sh).map_err(|e| fail(&mut child, &e.to_string()))?;
    let hello = format!(
        "HELLO {} {} {port} {}\n",
        hex(&sh.secret),
        sh.job,
        hex(crate::spawn::hostname().as_bytes())
    );
    if stdin.write_all(hello.as_bytes()).is_err() {
        return Err(fail(&mut child, "the agent went away"));
    }
    match next(&rx) {
        Some(l) if l.starts_with("READY") => {}
        other => return Err(fail(&mut child, &format!("agent not ready ({other:?})"))),
    }
    Ok(Arc::new(Agent {
        name: name.to_string(),
        chan: Mutex::new((Some(stdin), rx)),
        child: Mutex::new(child),
        dtid,
    }))
}

impl Agent {
    /// Records the daemon id the host got in the machine.
    pub fn set_dtid(&self, dtid: i32) {
        self.dtid.store(dtid, Ordering::Release);
    }
}

/// The coordinator's TCP port for remote tasks, listening from the first
/// call on (every address: the remote host reaches this one by whichever
/// address its ssh connection came from).
fn listener_port(sh: &Arc<Shared>) -> std::io::Result<u16> {
    static PORT: Mutex<Option<u16>> = Mutex::new(None);
    let mut p = PORT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(port) = *p {
        return Ok(port);
    }
    let l = TcpListener::bind("0.0.0.0:0")?;
    let port = l.local_addr()?.port();
    let sh = sh.clone();
    std::thread::spawn(move || {
        static NEXT: AtomicU64 = AtomicU64::new(1 << 62);
        for s in l.incoming() {
            let Ok(s) = s else { continue };
            let sh = sh.clone();
            let id = NEXT.fetch_add(1, Ordering::Relaxed);
            std::thread::spawn(move || {
                if authenticated(&s, &sh.secret) {
                    let _ = s.set_read_timeout(None);
                    let _ = s.set_nodelay(true);
                    coord::client(sh, id, Conn::Tcp(s));
                }
            });
        }
    });
    *p = Some(port);
    Ok(port)
}

/// Reads one line of at most `max` bytes (byte by byte, so nothing after
/// it is consumed), within the stream's read timeout.
pub(crate) fn read_line(mut s: &std::net::TcpStream, max: usize) -> Option<String> {
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    while line.len() < max {
        match s.read(&mut b) {
            Ok(1) if b[0] == b'\n' => return String::from_utf8(line).ok(),
            Ok(1) => line.push(b[0]),
            _ => return None,
        }
    }
    None
}

/// Reads the first line (`AUTH <secret hex>`) within 10 s and compares it
/// in constant time.
pub(crate) fn authenticated(s: &std::net::TcpStream, secret: &[u8; 32]) -> bool {
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    let Some(line) = read_line(s, 80) else {
        return false;
    };
    let want = format!("AUTH {}", hex(secret));
    line.len() == want.len()
        && line
            .bytes()
            .zip(want.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}
