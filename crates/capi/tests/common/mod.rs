//! Shared by the test files that drive built programs: where the repository
//! and this build's binaries are, the launcher, and whether a C compiler is
//! there.
#![allow(dead_code)] // each test file uses a different subset

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// target/<profile>, found from this test executable (target/<profile>/deps/<test>-*).
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().and_then(|d| d.parent()).unwrap().to_path_buf()
}

/// The launcher of this build, built into the same target directory if it
/// is not there yet.
pub fn gwrun() -> PathBuf {
    launcher_bin("gwrun")
}

/// A binary of the launcher's crate (`gwrun`, `gw-nameserver`) of this
/// build, built into the same target directory if it is not there yet.
pub fn launcher_bin(name: &str) -> PathBuf {
    let dir = profile_dir();
    let p = dir.join(name);
    if !p.exists() {
        let target = dir.parent().unwrap();
        let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        c.args(["build", "-p", "gridwire-launch", "--bin", name])
            .env("CARGO_TARGET_DIR", target);
        if dir.file_name().is_some_and(|n| n == "release") {
            c.arg("--release");
        }
        let st = c.status().expect("cargo runs");
        assert!(st.success(), "building {name} failed");
    }
    p
}

/// A C compiler (`cc`, or `GWCC_CC`) answers `--version`.
pub fn have_cc() -> bool {
    let cc = std::env::var("GWCC_CC").unwrap_or_else(|_| "cc".into());
    Command::new(cc)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `tests/mpi/NAME.c` compiled with `gwcc -Wall -O1` against this build's
/// library into `target/<profile>/DIR/NAME` (a directory per test file, so
/// test files running at once never write the same executable), once per
/// test process: the tests of one file run on parallel threads, and a
/// second compile rewriting the executable while another test runs it made
/// that test fail now and then. Panics with the compiler's output when it
/// fails.
pub fn compile_mpi_test(dir: &str, name: &str) -> PathBuf {
    static BUILT: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
    let dir = profile_dir().join(dir);
    let exe = dir.join(name);
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if built.contains(&exe) {
        return exe;
    }
    std::fs::create_dir_all(&dir).unwrap();
    let out = Command::new(repo().join("scripts/gwcc"))
        .env("GW_MPI_LIBDIR", profile_dir())
        .args(["-Wall", "-O1", "-o"])
        .arg(&exe)
        .arg(repo().join(format!("tests/mpi/{name}.c")))
        .output()
        .expect("gwcc runs");
    assert!(
        out.status.success(),
        "gwcc {name}.c failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    built.push(exe.clone());
    exe
}

/// `gwrun --timeout SECS -n N [--emulate-hosts HOSTS] EXE` with `env` set
/// and stdin closed; its output (gwrun's `--timeout` ends a hung job).
pub fn gwrun_case(
    exe: &Path,
    n: u32,
    hosts: u32,
    env: &[(&str, &str)],
    timeout_secs: u32,
) -> std::process::Output {
    let mut c = Command::new(gwrun());
    c.args(["--timeout", &timeout_secs.to_string(), "-n", &n.to_string()]);
    if hosts > 1 {
        c.args(["--emulate-hosts", &hosts.to_string()]);
    }
    c.envs(env.iter().copied())
        .arg(exe)
        .stdin(Stdio::null())
        .output()
        .expect("gwrun runs")
}

/// Runs `cmd` (stdin closed, stdout and stderr captured) in a process group
/// of its own, which is killed after `backstop` if it has not ended by then
/// (a backstop to gwrun's own `--timeout`); (success, stdout, stderr).
pub fn run_with_backstop(
    mut cmd: Command,
    backstop: std::time::Duration,
) -> (bool, String, String) {
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = cmd.spawn().expect("the command starts");
    let drain = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut b = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut b);
            }
            String::from_utf8_lossy(&b).into_owned()
        })
    };
    let out = drain(
        child
            .stdout
            .take()
            .map(|r| Box::new(r) as Box<dyn Read + Send>),
    );
    let err = drain(
        child
            .stderr
            .take()
            .map(|r| Box::new(r) as Box<dyn Read + Send>),
    );
    let deadline = std::time::Instant::now() + backstop;
    let status = loop {
        match child.try_wait().expect("waiting for the command") {
            Some(st) => break st,
            None if std::time::Instant::now() >= deadline => {
                // SAFETY: kill(2) has no memory effects; the group is led by
                // our child, not reaped yet, so its id cannot be reused.
                unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL) };
                break child.wait().expect("reaping the command");
            }
            None => std::thread::sleep(std::time::Duration::from_millis(20)),
        }
    };
    (
        status.success(),
        out.join().unwrap_or_default(),
        err.join().unwrap_or_default(),
    )
}
