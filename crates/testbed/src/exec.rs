//! `exec HOST cmd...`: enters every namespace of the host's init with
//! setns (not `ip netns exec`, which makes a fresh mount namespace and would
//! not see the host's mounts), then starts the command as a child — a
//! process only enters the PID namespace by being created in it — waits for
//! it and exits with its status.

use crate::plan::Plan;
use crate::sys::{self, Result};
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicI32, Ordering};

pub fn init_pid(plan: &Plan, host: &str) -> Result<i32> {
    let path = plan.host_dir(host).join("init.pid");
    let pid: i32 = std::fs::read_to_string(&path)
        .map_err(|e| format!("{}: {e}", path.display()))?
        .trim()
        .parse()
        .map_err(|_| format!("{}: not a pid", path.display()))?;
    // A pid file can outlive its process and the pid be reused: the init's
    // command line names the instance and the host.
    let args = sys::cmdline(pid);
    let ours = args.iter().any(|a| a == "__init")
        && args.windows(2).any(|w| w[0] == "--id" && w[1] == plan.id)
        && args.windows(2).any(|w| w[0] == "--host" && w[1] == host);
    if !ours || !sys::alive(pid) {
        return Err(format!(
            "host {host} of instance {} is down (its init {pid} is gone)",
            plan.id
        ));
    }
    Ok(pid)
}

static FORWARD: AtomicI32 = AtomicI32::new(0);

extern "C" fn note_signal(sig: libc::c_int) {
    FORWARD.store(sig, Ordering::Relaxed);
}

pub fn exec(plan: &Plan, host: &str, cmd: &[String]) -> Result<()> {
    let h = plan.host(host).ok_or_else(|| {
        let names: Vec<&str> = plan.hosts.iter().map(|h| h.name.as_str()).collect();
        format!(
            "no host {host:?} in instance {} (hosts: {})",
            plan.id,
            names.join(" ")
        )
    })?;
    let pid = init_pid(plan, host)?;
    let cwd = std::env::current_dir().ok();
    // Open them all first: after entering the mount namespace, /proc is the host's.
    let kinds = [
        ("ipc", libc::CLONE_NEWIPC),
        ("uts", libc::CLONE_NEWUTS),
        ("net", libc::CLONE_NEWNET),
        ("pid", libc::CLONE_NEWPID),
        ("mnt", libc::CLONE_NEWNS),
    ];
    let mut fds = Vec::new();
    for (name, kind) in kinds {
        fds.push((
            sys::open(&format!("/proc/{pid}/ns/{name}"), libc::O_RDONLY)?,
            kind,
            name,
        ));
    }
    for (fd, kind, name) in &fds {
        sys::setns(
            fd.as_raw_fd(),
            *kind,
            &format!("{name} namespace of {host}"),
        )?;
    }
    drop(fds);
    // login sees the machine's files: stay where the caller is. A compute
    // host starts in its home, as after an ssh login.
    let home = if sys::is_root() { "/root" } else { "/" };
    let dir = match (&cwd, h.is_login()) {
        (Some(c), true) if c.is_dir() => c.clone(),
        _ if std::path::Path::new(home).is_dir() => home.into(),
        _ => "/".into(),
    };
    // Handlers, not SIG_IGN (which the command would inherit), and without
    // SA_RESTART so that waitpid returns to forward the signal.
    // SAFETY: installs handlers that only store to an atomic; `sa` is a
    // live, zero-initialised sigaction.
    unsafe {
        for s in [libc::SIGINT, libc::SIGQUIT, libc::SIGTERM, libc::SIGHUP] {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = note_signal as *const () as libc::sighandler_t;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(s, &sa, std::ptr::null_mut());
        }
    }
    let mut command = Command::new(&cmd[0]);
    command.args(&cmd[1..]).current_dir(&dir);
    if !h.is_login() {
        command.env("HOME", home);
    }
    let child = command
        .spawn()
        .map_err(|e| format!("{host}: cannot run {}: {e}", cmd[0]))?;
    let child_pid = child.id() as i32;
    let mut status = 0;
    loop {
        // SAFETY: waits for our own child, writing the status into a live int.
        let r = unsafe { libc::waitpid(child_pid, &mut status, 0) };
        if r == child_pid {
            break;
        }
        let sig = FORWARD.swap(0, Ordering::Relaxed);
        // The terminal sends SIGINT and SIGQUIT to the child itself.
        if sig == libc::SIGTERM || sig == libc::SIGHUP {
            sys::kill(child_pid, sig);
        }
        if r < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return Err(format!("waitpid: {}", std::io::Error::last_os_error()));
        }
    }
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else if libc::WIFSIGNALED(status) {
        128 + libc::WTERMSIG(status)
    } else {
        1
    };
    std::process::exit(code)
}
