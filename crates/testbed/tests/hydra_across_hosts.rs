//! A gridwire program across real hosts, started by MPICH's Hydra over ssh:
//! 2 sites x 2 hosts with a 5 ms WAN (`gw-testbed up --shared-fs`, so the
//! hosts see the freshly built program), `mpiexec.mpich -launcher ssh` from
//! `login` with the testbed's ssh wrapper. The program (`rsr_check select`,
//! an example of gridwire-core) sends 10 messages to every rank, checks
//! that all arrived, and prints the method chosen per pair. Asserted: tcp
//! between hosts (never shm, though the hosts share a kernel and a boot id),
//! shm between the two ranks of one host, self to itself, every message
//! delivered, the job ends by itself in bounded time, and the testbed is
//! gone afterwards. Needs root, sshd and MPICH: skipped by the project's
//! rule otherwise (a failure under CI=true).

use gridwire_testbed::harness::{self, run_with_timeout, Testbed};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn ready() -> bool {
    if !gridwire_testkit::is_root() {
        gridwire_testkit::skip("gw-testbed needs root (namespaces, mounts, bridges, nftables)");
        return false;
    }
    if !Path::new("/usr/bin/mpiexec.mpich").exists() {
        gridwire_testkit::skip(
            "/usr/bin/mpiexec.mpich is missing (Debian package mpich; scripts/install-deps.sh installs it)",
        );
        return false;
    }
    if let Err(why) = harness::ready() {
        gridwire_testkit::skip(&why);
        return false;
    }
    true
}

/// Builds gridwire-core's `rsr_check` example into this test's target
/// directory and profile; its path.
fn build_rsr_check() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().and_then(Path::parent).unwrap().to_path_buf();
    let target_dir = profile_dir.parent().unwrap();
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.args([
        "build",
        "--quiet",
        "-p",
        "gridwire-core",
        "--example",
        "rsr_check",
    ])
    .arg("--target-dir")
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
    let out = run_with_timeout(&mut cmd, Duration::from_secs(600)).unwrap();
    assert!(
        out.status.success(),
        "building rsr_check: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    profile_dir.join("examples/rsr_check")
}

#[test]
fn hydra_starts_a_gridwire_job_across_hosts_tcp_between_shm_within() {
    if !ready() {
        return;
    }
    let prog = build_rsr_check();
    let mut tb = Testbed::up(&[
        "--sites",
        "2",
        "--hosts",
        "2",
        "--wan-delay",
        "5",
        "--shared-fs",
    ])
    .unwrap_or_else(|e| panic!("{e}"));
    let dir = tb.dir();

    // Two ranks on s0h0 (a host with shm), one on s0h1 (same site, LAN),
    // one on s1h0 (the other site, over the WAN). Hydra fills hosts in order.
    let hostfile = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("hydra-hosts-{}", tb.id));
    std::fs::write(&hostfile, "s0h0:2\ns0h1:1\ns1h0:1\n").unwrap();
    let bin = dir.join("ssh/bin");
    let path = format!("PATH={}:/usr/bin:/bin", bin.display());
    let started = Instant::now();
    let out = run_with_timeout(
        &mut tb.command(
            "login",
            &[
                "env",
                &path,
                "mpiexec.mpich",
                "-launcher",
                "ssh",
                "-launcher-exec",
                bin.join("ssh").to_str().unwrap(),
                "-f",
                hostfile.to_str().unwrap(),
                "-wdir",
                "/tmp",
                "-n",
                "4",
                prog.to_str().unwrap(),
                "select",
            ],
        ),
        Duration::from_secs(90),
    )
    .unwrap_or_else(|e| panic!("the job did not end by itself: {e}"));
    let took = started.elapsed();
    let _ = std::fs::remove_file(&hostfile);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "mpiexec.mpich failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    assert!(took < Duration::from_secs(60), "the job took {took:?}");

    // HOST <rank> <host id>: the host id starts with the hostname.
    let mut host_of: HashMap<u32, String> = HashMap::new();
    let mut method: HashMap<(u32, u32), String> = HashMap::new();
    for line in stdout.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        match f.as_slice() {
            ["HOST", r, id] => {
                let name = id.split(':').next().unwrap().to_string();
                host_of.insert(r.parse().unwrap(), name);
            }
            ["SELECT", r, p, m] => {
                method.insert((r.parse().unwrap(), p.parse().unwrap()), m.to_string());
            }
            _ => {}
        }
    }
    let want_hosts: HashMap<u32, String> = [(0, "s0h0"), (1, "s0h0"), (2, "s0h1"), (3, "s1h0")]
        .into_iter()
        .map(|(r, h)| (r, h.to_string()))
        .collect();
    assert_eq!(host_of, want_hosts, "placement:\n{stdout}\n{stderr}");
    assert_eq!(method.len(), 16, "one SELECT per pair:\n{stdout}\n{stderr}");
    for ((r, p), m) in &method {
        let want = if r == p {
            "self"
        } else if host_of[r] == host_of[p] {
            "shm"
        } else {
            "tcp"
        };
        assert_eq!(
            m, want,
            "rank {r} ({}) -> rank {p} ({}):\n{stdout}\n{stderr}",
            host_of[r], host_of[p]
        );
    }

    // The testbed goes away completely.
    let pids = tb.pids();
    tb.down().unwrap_or_else(|e| panic!("{e}"));
    harness::reap(&pids);
    assert!(!dir.exists(), "{} is left", dir.display());
}
