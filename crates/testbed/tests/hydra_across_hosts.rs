//! A gridwire program across real hosts, started by MPICH's Hydra over ssh:
//! 2 sites x 2 hosts with a 5 ms WAN (`gw-testbed up --shared-fs`, the
//! program copied to /var/tmp, which every host then sees; staging by the
//! launcher is still to come), `mpiexec.mpich -launcher ssh` from
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
use std::time::{Duration, Instant};

mod common;

fn ready() -> bool {
    if !common::testbed_ready() {
        return false;
    }
    if !Path::new("/usr/bin/mpiexec.mpich").exists() {
        gridwire_testkit::skip(
            "/usr/bin/mpiexec.mpich is missing (Debian package mpich; scripts/install-deps.sh installs it)",
        );
        return false;
    }
    true
}

fn build_rsr_check() -> PathBuf {
    common::build_example("gridwire-core", "rsr_check")
}

#[test]
fn hydra_starts_a_gridwire_job_across_hosts_tcp_between_shm_within() {
    if !ready() {
        return;
    }
    // Compute hosts have a /tmp, /root and /run of their own even with
    // --shared-fs, and the repository may be cloned under one of them (CI's
    // fresh clone, say): put the program where every host sees it.
    let staged = StagedDir::new();
    let prog = staged.0.join("rsr_check");
    std::fs::copy(build_rsr_check(), &prog)
        .unwrap_or_else(|e| panic!("copy rsr_check to {}: {e}", prog.display()));
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
    // Every compute host also gets the same address on a second interface
    // (as a docker0 or VPN bridge would): a peer's copy of it would reach
    // ourselves, so it is never tried.
    for h in ["s0h0", "s0h1", "s1h0", "s1h1"] {
        for cmd in [
            "ip link add gwsame0 type veth peer name gwsame1",
            "ip addr add 172.31.255.1/24 dev gwsame0",
            "ip link set gwsame1 up",
            "ip link set gwsame0 up",
        ] {
            let args: Vec<&str> = cmd.split(' ').collect();
            tb.exec_ok(h, &args).unwrap_or_else(|e| panic!("{e}"));
        }
    }
    // tcp between hosts (the default order), then udp (tcp left out).
    run_job(&tb, &prog, &hostfile, &[], "tcp");
    run_job(&tb, &prog, &hostfile, &["GW_METHODS=self,shm,udp"], "udp");
    // Every rank claims the same host: the namespaces in the host identity
    // still keep shm (and CMA) within a real host; no shm connect is even
    // tried across hosts (run_job checks that nothing fell back).
    run_job(&tb, &prog, &hostfile, &["GW_HOST_ID=onehost"], "tcp");
    // Only eth0's addresses published and used.
    let said = run_job(
        &tb,
        &prog,
        &hostfile,
        &["GW_IFACE=eth0", "GW_VERBOSE=1"],
        "tcp",
    );
    assert!(said.contains("reached by tcp (port "), "{said}");
    assert!(
        !said.contains("172.31.255.1"),
        "GW_IFACE=eth0 published gwsame0:\n{said}"
    );
    let _ = std::fs::remove_file(&hostfile);

    // The testbed goes away completely.
    let pids = tb.pids();
    tb.down().unwrap_or_else(|e| panic!("{e}"));
    harness::reap(&pids);
    assert!(!dir.exists(), "{} is left", dir.display());
}

/// Runs `rsr_check select` on 4 ranks with Hydra from login and checks the
/// method of every pair: self, shm within a host, `between` across hosts.
/// Returns the job's stderr.
fn run_job(tb: &Testbed, prog: &Path, hostfile: &Path, env: &[&str], between: &str) -> String {
    let bin = tb.dir().join("ssh/bin");
    let path = format!("PATH={}:/usr/bin:/bin", bin.display());
    let launcher = bin.join("ssh");
    let mut args: Vec<&str> = vec!["env", &path];
    args.extend_from_slice(env);
    args.extend([
        "mpiexec.mpich",
        "-launcher",
        "ssh",
        "-launcher-exec",
        launcher.to_str().unwrap(),
        "-f",
        hostfile.to_str().unwrap(),
        "-wdir",
        "/tmp",
        "-n",
        "4",
        prog.to_str().unwrap(),
        "select",
    ]);
    let started = Instant::now();
    let out = run_with_timeout(&mut tb.command("login", &args), Duration::from_secs(90))
        .unwrap_or_else(|e| panic!("the job ({env:?}) did not end by itself: {e}"));
    let took = started.elapsed();
    eprintln!("job {env:?}: {took:?}");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "mpiexec.mpich ({env:?}) failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    assert!(
        took < Duration::from_secs(60),
        "the job ({env:?}) took {took:?}"
    );
    assert!(
        !stderr.contains("trying the next method"),
        "a method was selected that could not connect ({env:?}):\n{stderr}"
    );
    // Hydra fills the hostfile's slots in order.
    let host_of: HashMap<u32, &str> = [(0, "s0h0"), (1, "s0h0"), (2, "s0h1"), (3, "s1h0")]
        .into_iter()
        .collect();
    let mut id_of: HashMap<u32, String> = HashMap::new();
    let mut method: HashMap<(u32, u32), String> = HashMap::new();
    for line in stdout.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        match f.as_slice() {
            ["HOST", r, id] => {
                id_of.insert(r.parse().unwrap(), id.to_string());
            }
            ["SELECT", r, p, m] => {
                method.insert((r.parse().unwrap(), p.parse().unwrap()), m.to_string());
            }
            _ => {}
        }
    }
    assert_eq!(
        id_of.len(),
        4,
        "one HOST line per rank:\n{stdout}\n{stderr}"
    );
    if env.is_empty() {
        // The host identity starts with the hostname: the placement is Hydra's.
        for (r, h) in &host_of {
            assert!(
                id_of[r].starts_with(&format!("{h}:")),
                "rank {r}: {}",
                id_of[r]
            );
        }
    }
    assert_eq!(method.len(), 16, "one SELECT per pair:\n{stdout}\n{stderr}");
    for ((r, p), m) in &method {
        let same_host = host_of[r] == host_of[p];
        assert_eq!(
            id_of[r] == id_of[p],
            same_host,
            "{env:?}: host identities of ranks {r} and {p}: {} / {}",
            id_of[r],
            id_of[p]
        );
        let want = if r == p {
            "self"
        } else if same_host {
            "shm"
        } else {
            between
        };
        assert_eq!(
            m, want,
            "{env:?}: rank {r} ({}) -> rank {p} ({}):\n{stdout}\n{stderr}",
            host_of[r], host_of[p]
        );
    }
    stderr
}

/// A directory under /var/tmp (shared with the testbed's hosts under
/// `--shared-fs`), removed when the test ends, also when it fails.
struct StagedDir(std::path::PathBuf);

impl StagedDir {
    fn new() -> StagedDir {
        let dir =
            std::path::PathBuf::from(format!("/var/tmp/gw-hydra-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        StagedDir(dir)
    }
}

impl Drop for StagedDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
