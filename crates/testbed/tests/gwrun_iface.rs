//! `gwrun -f --iface`: the interfaces a grid job's ranks use. A testbed of
//! 2 sites x 2 hosts (5 ms WAN, `--shared-fs`, `rsr_check` copied to
//! /var/tmp where every host sees it) in which every compute host also has
//! a veth `gwsame0` with the same address 172.31.255.1/24 (as a docker0 or
//! VPN bridge would): a peer's copy of that address reaches the connecting
//! host itself.
//!
//! `rsr_check select` sends to every rank, checks that everything arrived
//! and prints the method chosen per pair. Asserted, with GW_VERBOSE=2 (so
//! the ranks print what they publish and every address they connect to or
//! try):
//! * `--iface eth0`: tcp between the hosts, self to itself; no rank
//!   published, tried or connected to 172.31.255.1; no method fell back;
//! * without `--iface`: the job still works with tcp between hosts — the
//!   ranks publish 172.31.255.1 too (so the first run's assertion is not
//!   vacuous), but no rank connects to or tries a peer's address that is
//!   one of its own (the own-address rule).
//!
//! Needs root and sshd: skipped by the project's rule otherwise (a failure
//! under CI=true).

use gridwire_testbed::harness::{self, run_with_timeout, Testbed};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

mod common;

const HOSTS: [&str; 4] = ["s0h0", "s0h1", "s1h0", "s1h1"];
const SAME_ADDR: &str = "172.31.255.1";

fn ready() -> bool {
    common::testbed_ready()
}

fn build_rsr_check() -> PathBuf {
    common::build_example("gridwire-core", "rsr_check")
}

/// A directory under /var/tmp (shared with the testbed's hosts under
/// `--shared-fs`), removed when the test ends, also when it fails.
struct StagedDir(PathBuf);

impl StagedDir {
    fn new() -> StagedDir {
        let dir = PathBuf::from(format!("/var/tmp/gw-iface-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        StagedDir(dir)
    }
}

impl Drop for StagedDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn gwrun_f_iface_keeps_ranks_off_an_address_every_host_has() {
    if !ready() {
        return;
    }
    let started = Instant::now();
    let gwrun = common::build_bin("gridwire-launch", "gwrun");
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
    for h in HOSTS {
        for cmd in [
            "ip link add gwsame0 type veth peer name gwsame1",
            &format!("ip addr add {SAME_ADDR}/24 dev gwsame0"),
            "ip link set gwsame1 up",
            "ip link set gwsame0 up",
        ] {
            let args: Vec<&str> = cmd.split(' ').collect();
            tb.exec_ok(h, &args).unwrap_or_else(|e| panic!("{e}"));
        }
    }
    let machines = tb.machines.display().to_string();

    // --iface eth0: only eth0's addresses are published and used.
    let said = run_job(&tb, &gwrun, &prog, &machines, &["--iface", "eth0"]);
    let published = published_lines(&said);
    assert!(
        !said.contains(SAME_ADDR),
        "--iface eth0, yet a rank published or tried {SAME_ADDR} (gwsame0):\n{said}"
    );
    assert!(
        published.iter().all(|l| l.contains(",10.")),
        "--iface eth0: a rank published no eth0 address:\n{said}"
    );

    // Without --iface every interface is published, gwsame0's address too,
    // and still no rank tries a peer's copy of its own address.
    let said = run_job(&tb, &gwrun, &prog, &machines, &[]);
    let published = published_lines(&said);
    assert!(
        published.iter().all(|l| l.contains(SAME_ADDR)),
        "without --iface every rank publishes gwsame0's {SAME_ADDR} (else the --iface \
         run above proves nothing):\n{said}"
    );
    let mut connected = std::collections::BTreeSet::new();
    for l in said.lines() {
        if l.contains("; trying rank ") {
            assert!(
                !l.contains(&format!(" at {SAME_ADDR}:")),
                "a rank tried a peer's copy of its own address: {l}\n{said}"
            );
        }
        if let Some((me, peer, addr)) = connected_line(l) {
            assert_ne!(
                addr.split(':').next(),
                Some(SAME_ADDR),
                "a rank connected to a peer's copy of its own address: {l}\n{said}"
            );
            connected.insert((me.min(peer), me.max(peer)));
        }
    }
    assert_eq!(
        connected.len(),
        6,
        "a tcp connection between every pair of hosts (GW_VERBOSE=2 lines):\n{said}"
    );

    let pids = tb.pids();
    tb.down().unwrap_or_else(|e| panic!("{e}"));
    harness::reap(&pids);
    assert!(!dir.exists(), "{} is left", dir.display());
    let took = started.elapsed();
    eprintln!("the whole test: {took:?}");
    assert!(took < Duration::from_secs(60), "took {took:?}");
}

/// `gw[ME]: tcp: connected to rank PEER at ADDR` as (ME, PEER, ADDR).
fn connected_line(l: &str) -> Option<(u32, u32, &str)> {
    let rest = l.strip_prefix("gw[")?;
    let (me, rest) = rest.split_once("]: tcp: connected to rank ")?;
    let (peer, addr) = rest.split_once(" at ")?;
    Some((me.parse().ok()?, peer.parse().ok()?, addr.trim()))
}

/// The `tcp: listening at …, published as …` lines of the 4 ranks: one per
/// tcp instance (plain tcp, and the `encrypt+tcp` stack's own one, since
/// the hosts are at two sites), each rank at least one.
fn published_lines(stderr: &str) -> Vec<&str> {
    let v: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains(": tcp: listening at ") && l.contains(", published as "))
        .collect();
    let ranks: std::collections::BTreeSet<&str> = v
        .iter()
        .filter_map(|l| l.split_once("]:").map(|(r, _)| r))
        .collect();
    assert_eq!(
        ranks.len(),
        4,
        "a published line from every rank:\n{stderr}"
    );
    v
}

/// Runs `rsr_check select` on the 4 hosts (one rank each, file order) with
/// `gwrun -f` from login and checks the method of every pair: self to
/// itself, tcp between hosts. Returns the job's stderr.
fn run_job(tb: &Testbed, gwrun: &Path, prog: &Path, machines: &str, extra: &[&str]) -> String {
    let mut args: Vec<&str> = vec!["env", "GW_VERBOSE=2", gwrun.to_str().unwrap()];
    args.extend_from_slice(&["-f", machines, "-n", "4", "--timeout", "40"]);
    args.extend_from_slice(extra);
    args.extend_from_slice(&[prog.to_str().unwrap(), "select"]);
    let started = Instant::now();
    let out = run_with_timeout(&mut tb.command("login", &args), Duration::from_secs(50))
        .unwrap_or_else(|e| panic!("the job ({extra:?}) did not end by itself: {e}"));
    eprintln!("job {extra:?}: {:?}", started.elapsed());
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "gwrun -f {extra:?} failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    assert!(
        !stderr.contains("trying the next method"),
        "a method was selected that could not connect ({extra:?}):\n{stderr}"
    );
    let mut host_of: HashMap<u32, String> = HashMap::new();
    let mut method: HashMap<(u32, u32), String> = HashMap::new();
    for line in stdout.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        match f.as_slice() {
            ["HOST", r, id] => {
                host_of.insert(r.parse().unwrap(), id.to_string());
            }
            ["SELECT", r, p, m] => {
                method.insert((r.parse().unwrap(), p.parse().unwrap()), m.to_string());
            }
            _ => {}
        }
    }
    // The host identity starts with the hostname: one rank per host, in
    // the machines file's order.
    for (r, h) in HOSTS.iter().enumerate() {
        let id = host_of
            .get(&(r as u32))
            .unwrap_or_else(|| panic!("no HOST line of rank {r}:\n{stdout}\n{stderr}"));
        assert!(id.starts_with(&format!("{h}:")), "rank {r}: {id}");
    }
    assert_eq!(method.len(), 16, "one SELECT per pair:\n{stdout}\n{stderr}");
    for ((r, p), m) in &method {
        let want = if r == p { "self" } else { "tcp" };
        // Links between sites are encrypted by default (GW_ENCRYPT=sites):
        // the base method is what this test is about.
        let base = m.rsplit('+').next().unwrap_or("");
        assert_eq!(
            base, want,
            "{extra:?}: rank {r} -> rank {p}:\n{stdout}\n{stderr}"
        );
    }
    stderr
}
