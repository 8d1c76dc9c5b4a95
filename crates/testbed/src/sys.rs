//! Thin, checked wrappers around the system calls the testbed needs
//! (namespaces, mounts, processes), and running the tools it drives (`ip`,
//! `tc`, `nft`, `ssh-keygen`) with a clear error naming the command.

use std::ffi::CString;
use std::fs;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

pub type Result<T> = std::result::Result<T, String>;

fn cstr(s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| format!("path {s:?} contains a NUL byte"))
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Opens `path` read-only (a namespace file, a directory as O_PATH, ...).
pub fn open(path: &str, flags: libc::c_int) -> Result<OwnedFd> {
    let c = cstr(path)?;
    // SAFETY: `c` is a valid NUL-terminated path; the result is checked.
    let fd = unsafe { libc::open(c.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(format!("open {path}: {}", io::Error::last_os_error()));
    }
    // SAFETY: `fd` is a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

pub fn setns(fd: RawFd, kind: libc::c_int, what: &str) -> Result<()> {
    // SAFETY: setns takes a descriptor and a namespace type; failure is reported.
    if unsafe { libc::setns(fd, kind) } != 0 {
        return Err(format!("setns {what}: {}", io::Error::last_os_error()));
    }
    Ok(())
}

pub fn mount(
    src: &str,
    target: &str,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> Result<()> {
    let s = cstr(src)?;
    let t = cstr(target)?;
    let f = fstype.map(cstr).transpose()?;
    let d = data.map(cstr).transpose()?;
    // SAFETY: every pointer is either null or a live NUL-terminated string.
    let r = unsafe {
        libc::mount(
            s.as_ptr(),
            t.as_ptr(),
            f.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
            flags,
            d.as_ref()
                .map_or(std::ptr::null(), |c| c.as_ptr() as *const libc::c_void),
        )
    };
    if r != 0 {
        return Err(format!(
            "mount {src} on {target} ({}): {}",
            fstype.unwrap_or("bind/propagation"),
            io::Error::last_os_error()
        ));
    }
    Ok(())
}

pub fn tmpfs(target: &str, mode: &str) -> Result<()> {
    mount(
        "tmpfs",
        target,
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NODEV,
        Some(&format!("mode={mode},size=50%")),
    )
}

pub fn bind(src: &str, target: &str, readonly: bool) -> Result<()> {
    mount(src, target, None, libc::MS_BIND | libc::MS_REC, None)?;
    if readonly {
        mount(
            "none",
            target,
            None,
            libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY,
            None,
        )?;
    }
    Ok(())
}

pub fn sethostname(name: &str) -> Result<()> {
    // SAFETY: the buffer and its length describe a live byte string.
    if unsafe { libc::sethostname(name.as_ptr() as *const libc::c_char, name.len()) } != 0 {
        return Err(format!(
            "sethostname {name}: {}",
            io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// True when `pid` names a live (not zombie) process.
pub fn alive(pid: i32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name, which may itself
        // contain spaces and parentheses: look after the last ')'.
        Ok(s) => s
            .rsplit_once(')')
            .map(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X']))
            .unwrap_or(false),
        Err(_) => false,
    }
}

/// The NUL-separated arguments of `pid`, or empty when it is gone.
pub fn cmdline(pid: i32) -> Vec<String> {
    fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            b.split(|&c| c == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

pub fn kill(pid: i32, sig: libc::c_int) {
    if pid > 1 {
        // SAFETY: kill has no memory effects; errors (gone already) are ignored.
        unsafe { libc::kill(pid, sig) };
    }
}

/// All pids currently in /proc.
pub fn pids() -> Vec<i32> {
    fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Runs a tool; an error names the command line and its stderr.
pub fn run(cmd: &mut Command) -> Result<String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {:?}: {e}", cmd.get_program()))?;
    if !out.status.success() {
        return Err(format!(
            "{} failed ({}): {}",
            describe(cmd),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs a tool with `input` on its stdin (`ip -batch -`, `nft -f -`).
pub fn run_with_input(cmd: &mut Command, input: &str) -> Result<()> {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {:?}: {e}", cmd.get_program()))?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(input.as_bytes());
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("{}: {e}", describe(cmd)))?;
    if !out.status.success() {
        return Err(format!(
            "{} failed ({}): {}\ninput was:\n{input}",
            describe(cmd),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

fn describe(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// A command that runs inside the network namespace `netns` (a path such as
/// `/proc/PID/ns/net` or `/run/netns/NAME`), entered with setns in the child.
pub fn in_netns(netns: &str, program: &str) -> Result<Command> {
    let fd = open(netns, libc::O_RDONLY)?;
    let mut cmd = Command::new(program);
    // SAFETY: the closure only calls setns (async-signal-safe) on a descriptor
    // that the parent keeps open until the child has been spawned (it moves
    // into the closure, which lives as long as `cmd`).
    unsafe {
        cmd.pre_exec(move || {
            if libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Ok(cmd)
}

/// Runs `ip -batch -` with `script` inside `netns`.
pub fn ip_batch(netns: &str, script: &str) -> Result<()> {
    let mut cmd = in_netns(netns, "ip")?;
    cmd.args(["-batch", "-"]);
    run_with_input(&mut cmd, script)
}

/// Writes a sysctl of the network namespace `netns` (/proc/sys/net is per namespace of the writer).
pub fn net_sysctl(netns: &str, key: &str, value: &str) -> Result<()> {
    let path = format!("/proc/sys/{}", key.replace('.', "/"));
    let mut cmd = in_netns(netns, "sh")?;
    cmd.args(["-c", "echo \"$1\" > \"$2\"", "sh", value, &path]);
    run(&mut cmd).map(|_| ())
}

pub fn write_file(path: &Path, text: &str, mode: u32) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(path)
        .map_err(|e| format!("write {}: {e}", path.display()))?;
    f.write_all(text.as_bytes())
        .map_err(|e| format!("write {}: {e}", path.display()))
}

/// Creates `path` (and missing parents); `path` gets exactly `mode`, which
/// the umask would otherwise cut (sticky, world-writable /var/tmp).
pub fn mkdir(path: &str, mode: u32) -> Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    fs::DirBuilder::new()
        .recursive(true)
        .mode(mode)
        .create(path)
        .map_err(|e| format!("mkdir {path}: {e}"))?;
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .map_err(|e| format!("chmod {path}: {e}"))
}

/// Finds a program: the `env` variable, next to this executable, then PATH.
pub fn find_program(name: &str, env: &str) -> Option<String> {
    if let Some(p) = std::env::var_os(env) {
        return Some(p.to_string_lossy().into_owned());
    }
    if let Ok(exe) = std::env::current_exe() {
        if let Some(dir) = exe.parent() {
            let p = dir.join(name);
            if p.is_file() {
                return Some(p.to_string_lossy().into_owned());
            }
        }
    }
    which(name)
}

pub fn which(name: &str) -> Option<String> {
    if name.contains('/') {
        return Path::new(name).is_file().then(|| name.to_string());
    }
    let path = std::env::var("PATH").unwrap_or_default();
    let found = path
        .split(':')
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"])
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
        .map(|p| p.to_string_lossy().into_owned());
    found
}

pub struct Passwd {
    pub uid: u32,
    pub gid: u32,
    pub home: String,
}

/// The passwd entry of `name`.
pub fn passwd(name: &str) -> Result<Passwd> {
    let c = cstr(name)?;
    let mut pw: libc::passwd = unsafe_zeroed_passwd();
    let mut buf = vec![0 as libc::c_char; 16384];
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: getpwnam_r writes into `pw` and `buf` (live, of the stated
    // length) and sets `result` to `&pw` or null.
    let r = unsafe {
        libc::getpwnam_r(
            c.as_ptr(),
            &mut pw,
            buf.as_mut_ptr(),
            buf.len(),
            &mut result,
        )
    };
    if r != 0 || result.is_null() {
        return Err(format!("no user {name:?} in the password database"));
    }
    // SAFETY: on success pw_dir points to a NUL-terminated string inside `buf`.
    let home = unsafe { std::ffi::CStr::from_ptr(pw.pw_dir) }
        .to_string_lossy()
        .into_owned();
    Ok(Passwd {
        uid: pw.pw_uid,
        gid: pw.pw_gid,
        home,
    })
}

fn unsafe_zeroed_passwd() -> libc::passwd {
    // SAFETY: libc::passwd is plain data (integers and pointers); all-zero is
    // a valid value that getpwnam_r overwrites.
    unsafe { std::mem::zeroed() }
}

pub fn chown(path: &Path, uid: u32, gid: u32) -> Result<()> {
    std::os::unix::fs::chown(path, Some(uid), Some(gid))
        .map_err(|e| format!("chown {}: {e}", path.display()))
}
