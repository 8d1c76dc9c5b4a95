//! The host agent: `gwpvm --pvm-host`, started on a remote host over ssh by
//! the coordinator (see [`crate::remote`]). It is PVM's pvmd reduced to
//! what a host needs locally: a private directory whose `coord` file (0600)
//! tells the host's tasks the job, the secret and the coordinator's TCP
//! address, and the host's processes — it starts tasks (`SPAWN`), signals
//! them (`KILL`), and when its channel closes (host deleted, virtual
//! machine halted, coordinator or network gone) terminates them and
//! removes its directory (and the staged copy of itself, if any), so
//! nothing stays behind on the host.
//!
//! Channel: stdin/stdout of the ssh session; the coordinator's first line
//! is `HELLO <secret> <job> <port> <coordinator host name, hex>`, the agent
//! answers `READY`; then one request line, one reply line (`OK …` or
//! `ERR <code>`). Tasks' output goes to the agent's stderr, which ssh
//! carries to the coordinator's log — unless the parent catches it
//! (`pvm_catchout`): `SPAWN` then names where the parent listens, and a
//! thread of the agent sends the task's output there (see
//! [`crate::catchout`]).

use crate::consts::*;
use crate::coord::{hex, unhex};
use crate::spawn::find_program;
use std::io::{BufRead, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::fd::AsFd;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub fn run() -> i32 {
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    let Some(Ok(hello)) = lines.next() else {
        return 2;
    };
    let w: Vec<&str> = hello.split_whitespace().collect();
    let (secret, job, port, coord_host) = match w.as_slice() {
        ["HELLO", s, j, p, h] => (*s, *j, *p, *h),
        _ => {
            eprintln!("gwpvm agent: bad hello");
            return 2;
        }
    };
    let secret_ok = unhex(secret).is_some_and(|s| s.len() == 32);
    let job_ok = !job.is_empty() && job.bytes().all(|b| b.is_ascii_alphanumeric());
    let Some(port) = port.parse::<u16>().ok().filter(|_| secret_ok && job_ok) else {
        eprintln!("gwpvm agent: bad hello");
        return 2;
    };
    // The coordinator is where this ssh session came from, or the node
    // that ran srun (Slurm's step environment); its host name only when
    // neither says.
    let host = std::env::var("SSH_CLIENT")
        .ok()
        .and_then(|c| c.split_whitespace().next().map(String::from))
        .or_else(|| {
            std::env::var("SLURM_LAUNCH_NODE_IPADDR")
                .ok()
                .filter(|a| a.parse::<std::net::IpAddr>().is_ok())
        })
        .or_else(|| unhex(coord_host).and_then(|h| String::from_utf8(h).ok()))
        .unwrap_or_default();
    let addr = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    let (dir, made) = match choose_dir() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("gwpvm agent: {e}");
            return 1;
        }
    };
    let coord_line = format!("{} {job} {secret} tcp={addr}", std::process::id());
    let me = Agent {
        dir: &dir,
        job,
        coord_line: &coord_line,
        secret,
        coord_host: &host,
    };
    let code = match ready() {
        Ok(()) => serve(&mut lines, &me),
        Err(e) => {
            eprintln!("gwpvm agent: {e}");
            1
        }
    };
    if made {
        let _ = std::fs::remove_dir_all(&dir);
    } else {
        let _ = std::fs::remove_file(dir.join("coord"));
    }
    if let Some(staged) = std::env::var_os("GWPVM_STAGED").filter(|s| !s.is_empty()) {
        let _ = std::fs::remove_dir_all(staged);
    }
    code
}

/// The host's usual virtual machine directory (`$GWPVM_DIR`, else
/// `/tmp/gwpvm-<uid>`), so that a PVM program started by hand on this host
/// joins the machine as under PVM — unless a coordinator of another
/// machine lives there; then a fresh private one. Whether this agent made it.
fn choose_dir() -> std::io::Result<(PathBuf, bool)> {
    let d = crate::coord::dir();
    let existed = d.exists();
    if let Ok(d) = crate::coord::ensure_dir() {
        let live = crate::coord::read_info().is_some_and(|i| {
            i.remote.is_some() || std::os::unix::net::UnixStream::connect(d.join("sock")).is_ok()
        });
        if !live {
            let _ = std::fs::remove_file(d.join("coord"));
            return Ok((d, !existed));
        }
    }
    Ok((make_dir()?, true))
}

/// A fresh private directory (`mkdtemp`, mode 0700) for this host agent.
fn make_dir() -> std::io::Result<PathBuf> {
    let base = std::env::temp_dir();
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let template = base.join(format!("gwpvm-{uid}-host.XXXXXX"));
    let mut t = std::ffi::CString::new(template.to_string_lossy().as_bytes())
        .map_err(std::io::Error::other)?
        .into_bytes_with_nul();
    // SAFETY: `t` is a writable NUL-terminated template mkdtemp fills in.
    let p = unsafe { libc::mkdtemp(t.as_mut_ptr().cast()) };
    if p.is_null() {
        return Err(std::io::Error::last_os_error());
    }
    t.pop();
    Ok(PathBuf::from(String::from_utf8_lossy(&t).into_owned()))
}

/// Writes the `coord` file the host's tasks read (0600, renamed into place).
fn write_coord(dir: &std::path::Path, line: &str) -> std::io::Result<()> {
    let tmp = dir.join("coord.tmp");
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .open(&tmp)?;
    writeln!(f, "{line}")?;
    drop(f);
    std::fs::rename(&tmp, dir.join("coord"))
}

fn ready() -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "READY")?;
    out.flush()
}

/// What requests need of the agent.
struct Agent<'a> {
    dir: &'a std::path::Path,
    job: &'a str,
    /// The `coord` file's line for the host's tasks.
    coord_line: &'a str,
    /// The job secret (hex), which caught output proves to the parent.
    secret: &'a str,
    /// The coordinator's address as seen from here (no port).
    coord_host: &'a str,
}

fn serve(lines: &mut impl Iterator<Item = std::io::Result<String>>, me: &Agent) -> i32 {
    let mut children: Vec<Child> = Vec::new();
    for line in lines {
        let Ok(line) = line else { break };
        // Reap the tasks that ended on their own.
        children.retain_mut(|c| matches!(c.try_wait(), Ok(None)));
        let reply = match handle(&line, me, &mut children) {
            Ok(r) => format!("OK {r}"),
            Err(c) => format!("ERR {c}"),
        };
        let mut out = std::io::stdout().lock();
        if writeln!(out, "{reply}").and_then(|_| out.flush()).is_err() {
            break;
        }
    }
    end_tasks(&mut children);
    0
}

fn handle(line: &str, me: &Agent, children: &mut Vec<Child>) -> Result<String, i32> {
    let (dir, job, coord_line) = (me.dir, me.job, me.coord_line);
    let mut w: Vec<&str> = line.split_whitespace().collect();
    // SPAWN's optional last field: where the parent catches the output.
    let catch = match w.as_slice() {
        ["SPAWN", _, _, _, _, _, _, _, c] => {
            let c = *c;
            w.pop();
            (c != "-")
                .then(|| catch_address(c, me.coord_host))
                .transpose()?
        }
        _ => None,
    };
    match w.as_slice() {
        ["HOST", dtid] => {
            // Now in the machine: publish it to the host's tasks.
            let dtid: i32 = dtid.parse().map_err(|_| PVM_BAD_PARAM)?;
            write_coord(dir, &format!("{coord_line} host={dtid}")).map_err(|_| PVM_SYS_ERR)?;
            Ok(String::new())
        }
        ["SPAWN", tid, parent, siblings, context, name, args, here] => {
            let name =
                String::from_utf8(unhex(name).ok_or(PVM_BAD_PARAM)?).map_err(|_| PVM_BAD_PARAM)?;
            let args: Vec<String> = if *args == "-" {
                Vec::new()
            } else {
                args.split(',')
                    .map(|a| unhex(a).and_then(|b| String::from_utf8(b).ok()))
                    .collect::<Option<_>>()
                    .ok_or(PVM_BAD_PARAM)?
            };
            for n in [tid, parent, context] {
                n.parse::<i32>().map_err(|_| PVM_BAD_PARAM)?;
            }
            if !siblings.split(',').all(|s| s.parse::<i32>().is_ok()) {
                return Err(PVM_BAD_PARAM);
            }
            // Where PVM looks on this host, else the path the program has
            // on the spawning host (a shared file system).
            let here = unhex(here).and_then(|h| String::from_utf8(h).ok());
            let path = find_program(&name)
                .or_else(|| here.and_then(|h| find_program(&h)))
                .ok_or(PVM_NO_FILE)?;
            let tid_n: i32 = tid.parse().map_err(|_| PVM_BAD_PARAM)?;
            let (err, caught) = match catch {
                Some(addr) => {
                    let (r, w) = pipe().map_err(|_| PVM_SYS_ERR)?;
                    (w, Some((addr, r)))
                }
                None => (
                    std::io::stderr()
                        .as_fd()
                        .try_clone_to_owned()
                        .map_err(|_| PVM_SYS_ERR)?,
                    None,
                ),
            };
            let out = err.try_clone().map_err(|_| PVM_SYS_ERR)?;
            let mut cmd = Command::new(path);
            cmd.args(args)
                .env("GWPVM_TID", tid)
                .env("GWPVM_PARENT", parent)
                .env("GWPVM_SIBLINGS", siblings)
                .env("GWPVM_JOB", job)
                .env("GWPVM_DIR", dir)
                .env("GWPVM_CONTEXT", context)
                .env_remove("GW_HOST_ID")
                .env_remove("GWPVM_STAGED")
                .stdin(Stdio::null())
                .stdout(Stdio::from(out))
                .stderr(Stdio::from(err));
            // SAFETY: prctl with integer arguments is async-signal-safe.
            // A task dies with its agent (the agent is single-threaded, so
            // "parent" is this thread, which lives as long as the agent).
            unsafe {
                cmd.pre_exec(|| {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
                    Ok(())
                });
            }
            let child = cmd.spawn().map_err(|_| PVM_NO_FILE)?;
            // Our copies of the write end go with `cmd`: the pipe ends when
            // the task (and whatever it started) closes its output.
            drop(cmd);
            if let Some((addr, r)) = caught {
                send_output(addr, me.secret.to_string(), tid_n, r);
            }
            let pid = child.id();
            children.push(child);
            Ok(pid.to_string())
        }
        ["KILL", pid, sig] => {
            let pid: u32 = pid.parse().map_err(|_| PVM_BAD_PARAM)?;
            let sig: i32 = sig.parse().map_err(|_| PVM_BAD_PARAM)?;
            if !(1..65).contains(&sig) {
                return Err(PVM_BAD_PARAM);
            }
            // Only processes this agent started.
            let c = children.iter().find(|c| c.id() == pid).ok_or(PVM_NO_TASK)?;
            // SAFETY: signalling our own child, not yet reaped (so its pid
            // is not reused).
            unsafe { libc::kill(c.id() as i32, sig) };
            Ok(String::new())
        }
        ["PING"] => Ok(hex(b"pong")),
        ["CLOCK"] => Ok(clock_now()),
        _ => Err(PVM_BAD_PARAM),
    }
}

/// `host:port` from SPAWN's catch field (hex); an empty host is the
/// coordinator's (the parent runs where it does).
fn catch_address(field: &str, coord_host: &str) -> Result<String, i32> {
    let a = unhex(field)
        .and_then(|b| String::from_utf8(b).ok())
        .filter(|a| a.len() < 300)
        .ok_or(PVM_BAD_PARAM)?;
    let port = a.rsplit_once(':').map(|(_, p)| p).ok_or(PVM_BAD_PARAM)?;
    port.parse::<u16>().map_err(|_| PVM_BAD_PARAM)?;
    Ok(match a.strip_prefix(':') {
        Some(_) if coord_host.contains(':') => format!("[{coord_host}]{a}"),
        Some(_) => format!("{coord_host}{a}"),
        None => a,
    })
}

/// A pipe for a task's output: (read end, write end), close-on-exec (the
/// write end is dup'ed onto the task's stdout and stderr, which clears
/// the flag there only).
fn pipe() -> std::io::Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    use std::os::fd::FromRawFd;
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 fills two descriptors we then own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by nobody else.
    Ok(unsafe {
        (
            std::os::fd::OwnedFd::from_raw_fd(fds[0]),
            std::os::fd::OwnedFd::from_raw_fd(fds[1]),
        )
    })
}

/// Sends task `tid`'s output (the pipe's read end `r`) to the parent at
/// `addr`, on a thread of its own; to the log (our stderr) when the parent
/// cannot be reached. Spawning stays on the main thread (PR_SET_PDEATHSIG
/// follows the thread that forked).
fn send_output(addr: String, secret: String, tid: i32, r: std::os::fd::OwnedFd) {
    let _ = std::thread::Builder::new()
        .name("gwpvm-agent-out".into())
        .spawn(move || {
            let mut r = std::fs::File::from(r);
            let conn = addr
                .to_socket_addrs()
                .ok()
                .and_then(|mut a| a.next())
                .and_then(|a| TcpStream::connect_timeout(&a, Duration::from_secs(10)).ok());
            match conn {
                Some(mut s) => {
                    let _ = s.set_nodelay(true);
                    if write!(s, "AUTH {secret}\nTID {tid}\n").is_ok() {
                        let _ = std::io::copy(&mut r, &mut s);
                    }
                }
                None => {
                    eprintln!("gwpvm agent: cannot reach {addr} for t{tid:x}'s output");
                    let _ = std::io::copy(&mut r, &mut std::io::stderr());
                }
            }
        });
}

/// SIGTERM to every task, SIGKILL after 2 s to those still there; reaps all.
fn end_tasks(children: &mut Vec<Child>) {
    for c in children.iter() {
        // SAFETY: signalling our own unreaped children.
        unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
    }
    let end = Instant::now() + Duration::from_secs(2);
    while Instant::now() < end {
        children.retain_mut(|c| matches!(c.try_wait(), Ok(None)));
        if children.is_empty() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    for c in children.iter_mut() {
        let _ = c.kill();
        let _ = c.wait();
    }
}

/// This host's time of day as `<seconds> <microseconds>` (`pvm_hostsync`).
pub fn clock_now() -> String {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    format!("{} {}", d.as_secs(), d.subsec_micros())
}
