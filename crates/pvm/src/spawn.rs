//! Starting tasks (`pvm_spawn`) with the local start method: the coordinator
//! reserves the task ids, the program is found where PVM looks, and each
//! task starts detached (nobody's child: a PVM task outlives its parent),
//! its output appended to the virtual machine's log as pvmd's is.

use crate::consts::*;
use crate::coord::{self, hex};
use crate::task::Task;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// PVM's architecture name for this machine.
pub fn arch() -> String {
    if let Ok(a) = std::env::var("PVM_ARCH") {
        if !a.is_empty() {
            return a;
        }
    }
    match std::env::consts::ARCH {
        "x86_64" => "LINUX64",
        "aarch64" => "LINUXARM64",
        "x86" => "LINUX",
        _ => "LINUX64",
    }
    .into()
}

/// Where PVM looks for a program: `$PVM_ROOT/bin/$PVM_ARCH`,
/// `$HOME/pvm3/bin/$PVM_ARCH`, then the current directory. A name with a
/// slash is taken as it is.
pub fn find_program(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        let p = PathBuf::from(name);
        return is_executable(&p).then_some(p);
    }
    let arch = arch();
    let mut dirs = Vec::new();
    if let Ok(r) = std::env::var("PVM_ROOT") {
        dirs.push(PathBuf::from(r).join("bin").join(&arch));
    }
    if let Ok(h) = std::env::var("HOME") {
        dirs.push(PathBuf::from(h).join("pvm3").join("bin").join(&arch));
    }
    dirs.push(PathBuf::from("."));
    dirs.into_iter()
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}

/// PvmTaskDefault ("anywhere"): the machine's hosts in turn, starting with
/// the one after the spawning task's own, as pvmd's round robin does (with
/// two hosts, a master's first slave goes to the other host).
fn default_host(t: &Task) -> i32 {
    static PLACED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let Ok(hosts) = crate::hosts::hosts(t) else {
        return HOST_TID;
    };
    let mine = coord::read_info().and_then(|i| i.host).unwrap_or(HOST_TID);
    let at = hosts.iter().position(|(d, _)| *d == mine).unwrap_or(0);
    let n = PLACED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    hosts
        .get((at + 1 + n) % hosts.len().max(1))
        .map_or(HOST_TID, |(d, _)| *d)
}

/// Spawns `count` copies; fills `tids` with task ids or error codes and
/// returns how many started.
pub fn spawn(
    t: &Task,
    name: &str,
    args: &[String],
    flag: i32,
    place: &str,
    tids: &mut [i32],
) -> i32 {
    let host = if flag & PVM_TASK_HOST != 0 && place != hostname() {
        match crate::hosts::host_named(t, place) {
            Ok(h) => h,
            Err(e) => {
                tids.iter_mut().for_each(|x| *x = e);
                return e;
            }
        }
    } else if flag & (PVM_TASK_HOST | PVM_TASK_ARCH) == 0 {
        default_host(t)
    } else {
        HOST_TID
    };
    // A task on a remote host has no way to start processes on the first
    // host: what would go there starts on its own host, through its agent.
    let host = match coord::read_info().and_then(|i| i.host) {
        Some(mine) if host == HOST_TID => mine,
        _ => host,
    };
    // A real remote host finds the program itself, where PVM looks there.
    let remote =
        host != HOST_TID && t.coord.request(&format!("HOSTKIND {host}")).as_deref() == Ok("remote");
    let path = match find_program(name) {
        Some(p) => p,
        None if remote => PathBuf::from(name),
        None => {
            tids.iter_mut().for_each(|x| *x = PVM_NO_FILE);
            return 0;
        }
    };
    let parent = if flag & PVM_NO_SPAWN_PARENT != 0 {
        PVM_NO_PARENT
    } else {
        t.tid
    };
    let mut reserved = Vec::new();
    for slot in tids.iter_mut() {
        match t
            .coord
            .request(&format!("RESERVE {parent} {} {host}", hex(name.as_bytes())))
            .and_then(|r| r.parse::<i32>().map_err(|_| PVM_SYS_ERR))
        {
            Ok(tid) => {
                *slot = tid;
                reserved.push(tid);
            }
            Err(e) => *slot = e,
        }
    }
    let siblings: Vec<String> = reserved.iter().map(|t| t.to_string()).collect();
    let siblings = siblings.join(",");
    let Some(info) = coord::read_info() else {
        return PVM_SYS_ERR;
    };
    let log = coord::dir().join("log");
    let mctx = crate::task::bufs().as_ref().map_or(0, |b| b.ctx);
    let mut started = 0;
    for slot in tids.iter_mut() {
        let tid = *slot;
        if tid < 0 {
            continue;
        }
        if remote {
            let hexargs: Vec<String> = args.iter().map(|a| hex(a.as_bytes())).collect();
            let hexargs = if hexargs.is_empty() {
                "-".to_string()
            } else {
                hexargs.join(",")
            };
            // The path the program has here, for a host that shares the
            // file system but has no PVM search path of its own for it.
            let here = if path.is_absolute() {
                hex(path.to_string_lossy().as_bytes())
            } else {
                std::fs::canonicalize(&path)
                    .map_or("-".into(), |p| hex(p.to_string_lossy().as_bytes()))
            };
            // Caught output: the agent sends it to us (see `catchout`).
            let caught = crate::catchout::expect_remote(tid);
            let catch = caught
                .as_ref()
                .and_then(|_| crate::catchout::remote_address(info.secret, info.remote.as_deref()))
                .unwrap_or_else(|| "-".into());
            let req = format!(
                "RSPAWN {host} {tid} {parent} {siblings} {mctx} {} {hexargs} {here} {catch}",
                hex(name.as_bytes())
            );
            match t.coord.request(&req) {
                Ok(_) => {
                    started += 1;
                    if let Some(rx) = caught.filter(|_| catch != "-") {
                        crate::catchout::watch_remote(tid, rx);
                    } else {
                        crate::catchout::forget_remote(tid);
                    }
                }
                Err(e) => {
                    crate::catchout::forget_remote(tid);
                    let _ = t.coord.request(&format!("FORGET {tid}"));
                    *slot = e;
                }
            }
            continue;
        }
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log);
        let caught = crate::catchout::pipe();
        let (o, e) = match &caught {
            Some((_, w)) => match (w.try_clone(), w.try_clone()) {
                (Ok(a), Ok(b)) => (Stdio::from(a), Stdio::from(b)),
                _ => (Stdio::null(), Stdio::null()),
            },
            None => match out.and_then(|f| Ok((f.try_clone()?, f))) {
                Ok((a, b)) => (Stdio::from(a), Stdio::from(b)),
                Err(_) => (Stdio::null(), Stdio::null()),
            },
        };
        let mut cmd = Command::new(&path);
        cmd.args(args)
            .env("GWPVM_TID", tid.to_string())
            .env("GWPVM_PARENT", parent.to_string())
            .env("GWPVM_SIBLINGS", &siblings)
            .env("GWPVM_JOB", &info.job_id)
            .env("GWPVM_DIR", coord::dir())
            .env("GWPVM_CONTEXT", mctx.to_string())
            .stdin(Stdio::null())
            .stdout(o)
            .stderr(e);
        // An emulated host is a host identity of its own (shared memory
        // does not reach it); this machine's tasks get the real one.
        if host == HOST_TID {
            cmd.env_remove("GW_HOST_ID");
        } else {
            cmd.env("GW_HOST_ID", format!("gwpvm-host-{host:x}"));
        }
        // SAFETY: the closure runs between fork and exec and only calls
        // fork and _exit, which are async-signal-safe. The grandchild goes
        // on to exec the program; the intermediate child exits at once, so
        // the task is reparented and never becomes our zombie.
        unsafe {
            cmd.pre_exec(|| match libc::fork() {
                0 => Ok(()),
                -1 => Err(std::io::Error::last_os_error()),
                _ => libc::_exit(0),
            });
        }
        match cmd.spawn() {
            Ok(mut child) => {
                let _ = child.wait();
                started += 1;
                if let Some((read, _write)) = caught {
                    crate::catchout::watch(tid, read);
                }
            }
            Err(_) => {
                let _ = t.coord.request(&format!("FORGET {tid}"));
                *slot = PVM_NO_FILE;
            }
        }
    }
    started
}
