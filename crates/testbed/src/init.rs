//! The init of a host: `gw-testbed __init --id ID --host NAME`.
//!
//! `up` starts it with fresh mount, network, UTS, IPC and PID namespaces
//! (unshare in the child before exec). unshare(CLONE_NEWPID) only moves the
//! *children* of the caller, so this process forks once: the child is PID 1
//! of the host, sets the host up (mounts, hostname, sshd), reports `READY`
//! and then only reaps orphans; the parent reports the child's pid (as the
//! machine sees it) and exits. When PID 1 dies the kernel kills every
//! process of the host, which is how `down` removes a host.
//!
//! Protocol on stdout, one line each: `PID <pid>` from the parent, then
//! `READY` or `ERROR <why>` from PID 1.

use crate::plan::{Host, Plan};
use crate::sys::{self, Result};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What a compute host keeps of the machine's root directory: the system
/// (programs, libraries, configuration) and the kernel's file systems.
/// Everything else — /work, /home, /root, /opt, /var, /srv, /mnt, the build
/// directories — is covered by an empty tmpfs, as on a separate machine.
const KEEP: &[&str] = &[
    "usr", "lib", "lib32", "lib64", "libx32", "bin", "sbin", "etc", "dev", "proc", "sys",
];

pub fn main(id: &str, host: &str) -> ! {
    let plan = match Plan::load(id) {
        Ok(p) => p,
        Err(e) => report_and_exit(&format!("ERROR {e}"), 1),
    };
    let Some(h) = plan.host(host).cloned() else {
        report_and_exit(&format!("ERROR no host {host} in instance {id}"), 1)
    };
    // SAFETY: this process is single-threaded (a fresh exec that has only
    // parsed its arguments), so the child may run arbitrary code after fork.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        report_and_exit(
            &format!("ERROR fork: {}", std::io::Error::last_os_error()),
            1,
        );
    }
    if pid > 0 {
        report_and_exit(&format!("PID {pid}"), 0);
    }
    // PID 1 of the host from here on.
    block_signals();
    match setup(&plan, &h) {
        Ok(()) => {}
        Err(e) => report_and_exit(&format!("ERROR {}: {e}", h.name), 1),
    }
    if let Err(e) = start_sshd(&plan, &h) {
        report_and_exit(&format!("ERROR {}: {e}", h.name), 1);
    }
    say("READY");
    // Nothing more goes to `up` (which stops reading): keep the pipe from
    // holding it open, and from raising SIGPIPE later.
    if let Ok(null) = sys::open("/dev/null", libc::O_WRONLY) {
        // SAFETY: dup2 onto stdout of two valid descriptors.
        unsafe { libc::dup2(null.as_raw_fd(), 1) };
    }
    reap_forever()
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn report_and_exit(line: &str, code: i32) -> ! {
    say(line);
    if line.starts_with("ERROR") {
        eprintln!("gw-testbed init: {line}");
    }
    std::process::exit(code)
}

extern "C" fn ignore(_: libc::c_int) {}

const SIGNALS: [libc::c_int; 4] = [libc::SIGCHLD, libc::SIGTERM, libc::SIGINT, libc::SIGHUP];

/// PID 1 of a PID namespace gets no signal from outside for which it has no
/// handler (the kernel drops them), so each one gets a handler that does
/// nothing; they stay blocked and are taken with sigwaitinfo. Blocking
/// before any child exists means no SIGCHLD is lost. Children start with an
/// empty mask (std's Command resets it).
fn block_signals() {
    // SAFETY: sigaction/sigprocmask on live, zero-initialised structures;
    // the handler does nothing, so it is async-signal-safe.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in SIGNALS {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = ignore as *const () as libc::sighandler_t;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(s, &sa, std::ptr::null_mut());
            libc::sigaddset(&mut set, s);
        }
        libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

fn reap_forever() -> ! {
    // SAFETY: as in block_signals; sigwaitinfo and waitpid write only into
    // the live structures passed.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in SIGNALS {
            libc::sigaddset(&mut set, s);
        }
        loop {
            while libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) > 0 {}
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let sig = libc::sigwaitinfo(&set, &mut info);
            if sig == libc::SIGTERM || sig == libc::SIGINT || sig == libc::SIGHUP {
                // Our exit makes the kernel kill every process of the host.
                libc::_exit(0);
            }
        }
    }
}

fn setup(plan: &Plan, h: &Host) -> Result<()> {
    // Nothing mounted from here on propagates back to the machine.
    sys::mount("none", "/", None, libc::MS_REC | libc::MS_PRIVATE, None)?;
    sys::sethostname(&h.name)?;
    // Handles on the state directories, usable after /run is covered.
    let inst = plan.dir();
    let inst_fd = sys::open(&inst.to_string_lossy(), libc::O_PATH | libc::O_DIRECTORY)?;
    let host_dir = plan.host_dir(&h.name);
    let host_fd = sys::open(
        &host_dir.to_string_lossy(),
        libc::O_PATH | libc::O_DIRECTORY,
    )?;
    let cgroup_fd = sys::open("/sys/fs/cgroup", libc::O_PATH | libc::O_DIRECTORY).ok();
    let fd_path =
        |fd: &std::os::fd::OwnedFd, rest: &str| format!("/proc/self/fd/{}{rest}", fd.as_raw_fd());

    // This host's processes, and (its network namespace's) devices in /sys.
    sys::mount(
        "proc",
        "/proc",
        Some("proc"),
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        None,
    )?;
    sys::mount(
        "sysfs",
        "/sys",
        Some("sysfs"),
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        None,
    )?;
    if let Some(fd) = &cgroup_fd {
        // Tools that read cgroups still find them (the machine's hierarchy).
        let _ = sys::bind(&fd_path(fd, ""), "/sys/fs/cgroup", false);
    }
    sys::tmpfs("/dev/shm", "1777")?;
    if std::path::Path::new("/dev/mqueue").is_dir() {
        sys::mount(
            "mqueue",
            "/dev/mqueue",
            Some("mqueue"),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            None,
        )?;
    }

    let compute = !h.is_login();
    if compute && !plan.opts.shared_fs {
        mask_root_dir()?;
        // Locally installed software is not the distribution's: a separate
        // machine would not have it (an installed gridwire, say).
        let extra = std::iter::once("/usr/local").chain(plan.opts.mask.iter().map(String::as_str));
        for path in extra {
            mask(path)?;
        }
    } else if compute {
        sys::tmpfs("/tmp", "1777")?;
    }
    // Every host has its own /run (sshd's privilege separation directory
    // lives there), holding only the testbed state it needs, at the same
    // paths as on the machine: login sees the whole instance (machines file,
    // ssh config), a compute host its own directory and the ssh client files.
    sys::tmpfs("/run", "755")?;
    sys::mkdir("/run/sshd", 0o755)?;
    sys::mkdir("/run/lock", 0o1777)?;
    let inst_s = inst.to_string_lossy().into_owned();
    if compute {
        let hd = host_dir.to_string_lossy().into_owned();
        sys::mkdir(&hd, 0o755)?;
        sys::bind(&fd_path(&host_fd, ""), &hd, false)?;
        let sd = plan.ssh_dir().to_string_lossy().into_owned();
        sys::mkdir(&sd, 0o755)?;
        sys::bind(&fd_path(&inst_fd, "/ssh"), &sd, true)?;
    } else {
        sys::mkdir(&inst_s, 0o755)?;
        sys::bind(&fd_path(&inst_fd, ""), &inst_s, false)?;
    }
    sys::bind(&fd_path(&inst_fd, "/etc-hosts"), "/etc/hosts", true)?;
    sys::bind(&fd_path(&host_fd, "/hostname"), "/etc/hostname", true)?;
    if Path::new("/etc/machine-id").exists() {
        sys::bind(&fd_path(&host_fd, "/machine-id"), "/etc/machine-id", true)?;
    }
    // --user: the hosts' own user database (see users.rs).
    for f in ["passwd", "group", "shadow"] {
        let copy = fd_path(&inst_fd, &format!("/{f}"));
        if plan.opts.user.is_some() && Path::new(&copy).exists() {
            sys::bind(&copy, &format!("/etc/{f}"), true)?;
        }
    }

    if compute && !plan.opts.shared_fs {
        make_home(plan)?;
    }
    Ok(())
}

/// Covers every directory of `/` outside [`KEEP`] with an empty tmpfs, and
/// every plain file there with /dev/null.
fn mask_root_dir() -> Result<()> {
    let entries = std::fs::read_dir("/").map_err(|e| format!("read /: {e}"))?;
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok()?.file_name().to_str().map(String::from))
        .collect();
    names.sort();
    for name in names {
        // /run gets its own tmpfs on every host (see setup).
        if KEEP.contains(&name.as_str()) || name == "run" {
            continue;
        }
        let path = format!("/{name}");
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.is_dir() {
            let mode = match name.as_str() {
                "tmp" => "1777",
                "root" => "700",
                _ => "755",
            };
            sys::tmpfs(&path, mode)?;
        } else if meta.is_file() {
            sys::bind("/dev/null", &path, true)?;
        }
        // Symbolic links (bin -> usr/bin) point into what is kept or masked.
    }
    sys::mkdir("/var/tmp", 0o1777)?;
    Ok(())
}

/// Hides `path` if it exists: an empty tmpfs over a directory, /dev/null over anything else.
fn mask(path: &str) -> Result<()> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => sys::tmpfs(path, "755"),
        Ok(_) => sys::bind("/dev/null", path, true),
        Err(_) => Ok(()),
    }
}

/// root's home on a compute host: the testbed's client key, known_hosts and
/// ssh config, so a host reaches the others with a plain `ssh HOST`.
fn make_home(plan: &Plan) -> Result<()> {
    let mut homes = vec![("/root".to_string(), None)];
    // A non-root user's home exists on this host only if it lies outside
    // the masked directories: make it, theirs, with the same ssh files.
    if let Some(name) = &plan.opts.user {
        let pw = sys::passwd(name)?;
        if !Path::new(&pw.home).exists() {
            sys::mkdir(&pw.home, 0o755)?;
            sys::chown(Path::new(&pw.home), pw.uid, pw.gid)?;
        }
        homes.push((pw.home.clone(), Some((pw.uid, pw.gid))));
    }
    let ssh = plan.ssh_dir();
    for (home, owner) in homes {
        let dot_ssh = format!("{home}/.ssh");
        sys::mkdir(&dot_ssh, 0o700)?;
        if let Some((uid, gid)) = owner {
            sys::chown(Path::new(&dot_ssh), uid, gid)?;
        }
        for (from, to, mode) in [
            ("id_ed25519", "id_ed25519", 0o600),
            ("id_ed25519.pub", "id_ed25519.pub", 0o644),
            ("id_ed25519.pub", "authorized_keys", 0o600),
            ("known_hosts", "known_hosts", 0o644),
            ("config", "config", 0o600),
        ] {
            let text = std::fs::read_to_string(ssh.join(from))
                .map_err(|e| format!("read {}: {e}", ssh.join(from).display()))?;
            let path = PathBuf::from(format!("{dot_ssh}/{to}"));
            sys::write_file(&path, &text, mode)?;
            if let Some((uid, gid)) = owner {
                sys::chown(&path, uid, gid)?;
            }
        }
    }
    Ok(())
}

fn start_sshd(plan: &Plan, h: &Host) -> Result<()> {
    let dir = plan.host_dir(&h.name);
    Command::new("/usr/sbin/sshd")
        .arg("-D")
        .arg("-f")
        .arg(dir.join("sshd_config"))
        .arg("-E")
        .arg(dir.join("sshd.log"))
        .current_dir("/")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start /usr/sbin/sshd: {e}"))?;
    Ok(())
}
