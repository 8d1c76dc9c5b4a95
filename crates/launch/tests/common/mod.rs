//! Shared by the multi-process test files: locate binaries built by the
//! workspace and run a command with a hard deadline, capturing its output.
#![allow(dead_code)] // each test file uses a different subset

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub const GWRUN: &str = env!("CARGO_BIN_EXE_gwrun");

/// Path of an example program of the workspace (built next to gwrun).
pub fn example(name: &str) -> String {
    let p = PathBuf::from(GWRUN)
        .parent()
        .unwrap()
        .join("examples")
        .join(name);
    assert!(
        p.exists(),
        "{} missing: build the workspace examples first (make build-debug)",
        p.display()
    );
    p.to_string_lossy().into_owned()
}

pub struct Out {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

/// Runs `program args` with every inherited `GW_*` variable and
/// `MPIEXEC_TIMEOUT` removed, then `envs` set; kills it and fails the test
/// after `limit`.
pub fn run(program: &str, args: &[&str], envs: &[(&str, &str)], limit: Duration) -> Out {
    let start = Instant::now();
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd.env_remove("MPIEXEC_TIMEOUT");
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("GW_")) {
        cmd.env_remove(k);
    }
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawn");
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let t1 = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = so.read_to_string(&mut s);
        s
    });
    let t2 = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = se.read_to_string(&mut s);
        s
    });
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{program} {args:?} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let elapsed = start.elapsed();
    Out {
        code: status.code().unwrap_or(-1),
        stdout: t1.join().unwrap(),
        stderr: t2.join().unwrap(),
        elapsed,
    }
}
