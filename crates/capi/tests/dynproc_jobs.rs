//! `MPI_Comm_accept`/`connect` between two separately started `gwrun` jobs
//! (`tests/mpi/dynproc_jobs.c`): the accepting job publishes its port
//! through `gw-nameserver`, the connecting job finds it there, is refused
//! with a wrong token, then connects; checksummed traffic both ways,
//! `Intercomm_merge` and collectives over both jobs, disconnect. Run on one
//! host and on two emulated hosts per job, with groups of different sizes.
//! And `MPI_Comm_join` between two jobs (`tests/mpi/join_jobs.c`): one
//! listens on a TCP socket, the other connects, both join, exchange
//! checksummed messages, merge, allreduce, disconnect, and use their socket
//! again.

mod common;

use common::{compile_mpi_test, gwrun, have_cc, launcher_bin, profile_dir};
use gridwire_testkit::skip;
use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn compile(name: &str) -> std::path::PathBuf {
    compile_mpi_test("mpi-tests", name)
}

fn job(exe: &std::path::Path, ns: &str, n: u32, hosts: u32, args: &[&str]) -> Child {
    let mut c = Command::new(gwrun());
    c.env("GW_NAMESERVER", ns)
        .args(["--timeout", "60", "-n", &n.to_string()]);
    if hosts > 1 {
        c.args(["--emulate-hosts", &hosts.to_string()]);
    }
    c.arg(exe)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("gwrun starts")
}

/// Waits for `c` (at most `limit`, then kills it): success and its output.
fn finish(mut c: Child, limit: Duration) -> (bool, String) {
    let end = Instant::now() + limit;
    let status = loop {
        if let Some(s) = c.try_wait().unwrap() {
            break Some(s);
        }
        if Instant::now() > end {
            let _ = c.kill();
            let _ = c.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut out = String::new();
    let _ = c.stdout.take().unwrap().read_to_string(&mut out);
    let _ = c.stderr.take().unwrap().read_to_string(&mut out);
    (status.is_some_and(|s| s.success()), out)
}

#[test]
fn accept_connect_between_two_jobs() {
    if !have_cc() {
        skip("dynproc_jobs: no C compiler (cc or GWCC_CC)");
        return;
    }
    let exe = compile("dynproc_jobs");
    let mut server = Command::new(launcher_bin("gw-nameserver"))
        .arg("127.0.0.1:0")
        .stdout(Stdio::piped())
        .spawn()
        .expect("gw-nameserver starts");
    let mut first = [0u8; 128];
    let n = server.stdout.as_mut().unwrap().read(&mut first).unwrap();
    let line = String::from_utf8_lossy(&first[..n]).into_owned();
    let ns = line.trim().rsplit(' ').next().unwrap().to_string();
    let mut failures = Vec::new();
    // (accepting ranks, connecting ranks, emulated hosts of each job)
    for (i, (a, b, hosts)) in [(2, 3, 1), (3, 1, 2), (1, 2, 2)].into_iter().enumerate() {
        let svc = format!("gw-two-jobs-{i}");
        let acc = job(&exe, &ns, a, hosts, &["server", &svc]);
        let con = job(&exe, &ns, b, hosts, &["client", &svc]);
        let (cok, cout) = finish(con, Duration::from_secs(90));
        let (aok, aout) = finish(acc, Duration::from_secs(30));
        if !(cok
            && cout.contains("PASS dynproc-jobs-client")
            && cout.contains("wrong token refused"))
        {
            failures.push(format!(
                "{a}+{b} ranks, {hosts} hosts: connecting job:\n{cout}"
            ));
        }
        if !(aok && aout.contains("PASS dynproc-jobs-server")) {
            failures.push(format!(
                "{a}+{b} ranks, {hosts} hosts: accepting job:\n{aout}"
            ));
        }
    }
    let _ = server.kill();
    let _ = server.wait();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn join_between_two_jobs() {
    if !have_cc() {
        skip("join_jobs: no C compiler (cc or GWCC_CC)");
        return;
    }
    let exe = compile("join_jobs");
    let file = profile_dir().join(format!("join-jobs-port-{}", std::process::id()));
    let _ = std::fs::remove_file(&file);
    let f = file.to_str().unwrap();
    // No name server: the port travels through the file.
    let listener = job(&exe, "127.0.0.1:1", 2, 1, &["listen", f]);
    let connector = job(&exe, "127.0.0.1:1", 2, 1, &["connect", f]);
    let (cok, cout) = finish(connector, Duration::from_secs(90));
    let (lok, lout) = finish(listener, Duration::from_secs(30));
    let _ = std::fs::remove_file(&file);
    assert!(
        cok && cout.contains("PASS join-jobs-connect"),
        "connecting job:\n{cout}"
    );
    assert!(
        lok && lout.contains("PASS join-jobs-listen"),
        "listening job:\n{lout}"
    );
}
