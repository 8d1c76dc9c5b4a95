//! Fault injection: SIGKILL one rank of a running job (the ring of
//! `crates/launch/examples/fault_loop.rs`) at a seeded random moment, over
//! tcp, shm and udp, on one host and on two emulated hosts, and check that
//! the job ends within 2 s of the kill, that gwrun names the killed rank and
//! signal 9, and that nothing of the job is left: no process, no
//! `/dev/shm` segment, no socket. Also under MPICH's Hydra.
//!
//! `make test` runs [`FIXED_RUNS`] kills from [`FIXED_SEED`];
//! `make reliability` (mk/reliability.mk) sets `GW_FAULT_RUNS` and a random
//! `GW_FAULT_SEED`, which the test prints so a failure can be replayed.

mod common;

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{example, GWRUN};

const FIXED_SEED: u64 = 0x6772_6964_7769_7265;
const FIXED_RUNS: usize = 30;
/// The promise under test: the job is gone this soon after a rank dies.
const END_WITHIN: Duration = Duration::from_secs(2);
/// How long a job may take to start and print READY (debug builds, 2 cores
/// shared with other tests).
const START_LIMIT: Duration = Duration::from_secs(30);

/// splitmix64: a tiny reproducible generator (no dependency needed).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One configuration of a run.
#[derive(Debug, Clone, Copy)]
struct Setup {
    methods: &'static str,
    hosts: u32,
    ranks: u32,
}

const SETUPS: [Setup; 6] = [
    Setup {
        methods: "self,tcp",
        hosts: 1,
        ranks: 3,
    },
    Setup {
        methods: "self,shm",
        hosts: 1,
        ranks: 3,
    },
    Setup {
        methods: "self,udp",
        hosts: 1,
        ranks: 3,
    },
    Setup {
        methods: "self,shm,tcp",
        hosts: 2,
        ranks: 4,
    },
    Setup {
        methods: "self,tcp",
        hosts: 2,
        ranks: 3,
    },
    Setup {
        methods: "self,shm,udp",
        hosts: 2,
        ranks: 4,
    },
];

/// What a rank process held while it ran, to check after the job that
/// none of it survived.
#[derive(Default, Debug)]
struct Holdings {
    socket_inodes: HashSet<String>,
    shm_paths: HashSet<String>,
}

fn holdings_of(pid: &str, into: &mut Holdings) {
    if let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) {
        for e in dir.flatten() {
            let Ok(target) = std::fs::read_link(e.path()) else {
                continue;
            };
            let t = target.to_string_lossy().into_owned();
            if let Some(inode) = t.strip_prefix("socket:[").and_then(|s| s.strip_suffix(']')) {
                into.socket_inodes.insert(inode.to_string());
            } else if let Some(p) = t.strip_prefix("/dev/shm/") {
                into.shm_paths
                    .insert(format!("/dev/shm/{}", p.trim_end_matches(" (deleted)")));
            }
        }
    }
    if let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) {
        for l in maps.lines() {
            if let Some(i) = l.find("/dev/shm/") {
                into.shm_paths
                    .insert(l[i..].trim_end_matches(" (deleted)").to_string());
            }
        }
    }
}

/// Socket inodes that still exist on this machine (TIME_WAIT entries have
/// inode 0 and belong to no process: they are not a leak).
fn live_socket_inodes() -> HashSet<String> {
    let mut out = HashSet::new();
    for f in ["tcp", "tcp6", "udp", "udp6", "unix", "raw", "raw6"] {
        let Ok(text) = std::fs::read_to_string(format!("/proc/net/{f}")) else {
            continue;
        };
        for l in text.lines().skip(1) {
            let w: Vec<&str> = l.split_whitespace().collect();
            // tcp/udp: inode is field 9; unix: field 6.
            let idx = if f == "unix" { 6 } else { 9 };
            if let Some(i) = w.get(idx) {
                if *i != "0" {
                    out.insert(i.to_string());
                }
            }
        }
    }
    out
}

fn alive(pid: &str, program: &str) -> bool {
    // A reused pid runs another program: only ours counts.
    std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
        .map(|c| c.contains(program))
        .unwrap_or(false)
        && std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| !s.contains(") Z "))
            .unwrap_or(false)
}

fn lines_of<R: Read + Send + 'static>(r: R) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(r).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

struct Ready {
    pids: Vec<String>,
    job: String,
}

/// Reads stdout until every rank printed READY; kills the launcher and
/// fails after [`START_LIMIT`].
fn wait_ready(child: &mut Child, out: &mpsc::Receiver<String>, ranks: u32, what: &str) -> Ready {
    let start = Instant::now();
    let mut pids = vec![String::new(); ranks as usize];
    let mut job = String::new();
    let mut seen = 0;
    let mut text = String::new();
    while seen < ranks {
        match out.recv_timeout(Duration::from_millis(100)) {
            Ok(l) => {
                text.push_str(&l);
                text.push('\n');
                let w: Vec<&str> = l.split_whitespace().collect();
                if w.len() == 6 && w[0] == "READY" {
                    let r: usize = w[1].parse().unwrap();
                    pids[r] = w[3].to_string();
                    job = w[5].to_string();
                    seen += 1;
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{what}: the job ended before every rank was ready: {text}");
            }
        }
        if start.elapsed() > START_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: not every rank was ready within {START_LIMIT:?}: {text}");
        }
    }
    Ready { pids, job }
}

/// Waits for the launcher; kills it and fails after `limit`.
fn wait_end(child: &mut Child, limit: Duration, what: &str) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: the launcher did not end within {limit:?} of the kill");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn launcher(program: &str, args: &[&str], envs: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env_remove("MPIEXEC_TIMEOUT")
        .env("FAULT_LOOP_SECS", "40");
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("GW_")) {
        cmd.env_remove(k);
    }
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd
}

/// Snapshot of the ranks' processes, segments and sockets, taken while the
/// job runs.
fn snapshot(ready: &Ready) -> Holdings {
    let mut h = Holdings::default();
    for p in &ready.pids {
        holdings_of(p, &mut h);
    }
    h
}

/// After the job: none of its processes, segments or sockets remain.
fn assert_nothing_left(ready: &Ready, held: &Holdings, program: &str, what: &str) {
    // Give the kernel a moment to release the sockets of reaped processes.
    let deadline = Instant::now() + Duration::from_millis(500);
    loop {
        let live = live_socket_inodes();
        let left_sockets: Vec<&String> = held
            .socket_inodes
            .iter()
            .filter(|i| live.contains(*i))
            .collect();
        let left_procs: Vec<&String> = ready.pids.iter().filter(|p| alive(p, program)).collect();
        let mut left_shm: Vec<String> = held
            .shm_paths
            .iter()
            .filter(|p| std::path::Path::new(p).exists())
            .cloned()
            .collect();
        if ready.job != "-" {
            let prefix = format!("gw-{}", ready.job);
            left_shm.extend(
                std::fs::read_dir("/dev/shm")
                    .unwrap()
                    .filter_map(|e| e.ok()?.file_name().into_string().ok())
                    .filter(|n| n.starts_with(&prefix))
                    .map(|n| format!("/dev/shm/{n}")),
            );
        }
        if left_sockets.is_empty() && left_procs.is_empty() && left_shm.is_empty() {
            return;
        }
        if Instant::now() >= deadline {
            // Do not litter the machine for the next runs: remove what was
            // left, then fail for it.
            for p in &left_shm {
                let _ = std::fs::remove_file(p);
            }
            panic!(
                "{what}: left behind: processes {left_procs:?}, segments {left_shm:?}, sockets (inodes) {left_sockets:?}"
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs one kill; returns how long the job took to end after it.
fn one_gwrun_kill(rng: &mut Rng, run: usize, program: &str) -> Duration {
    let setup = SETUPS[run % SETUPS.len()];
    let victim = rng.below(setup.ranks as u64) as usize;
    let delay = Duration::from_millis(rng.below(300));
    let what = format!("run {run} ({setup:?}, kill rank {victim} after {delay:?})");
    let hosts = setup.hosts.to_string();
    let ranks = setup.ranks.to_string();
    let mut args = vec!["-n", &ranks, "--timeout", "60"];
    if setup.hosts > 1 {
        args.extend(["--emulate-hosts", &hosts]);
    }
    args.push(program);
    let mut child = launcher(GWRUN, &args, &[("GW_METHODS", setup.methods)])
        .spawn()
        .expect("spawn gwrun");
    let out = lines_of(child.stdout.take().unwrap());
    let err = lines_of(child.stderr.take().unwrap());
    let ready = wait_ready(&mut child, &out, setup.ranks, &what);
    std::thread::sleep(delay);
    let held = snapshot(&ready);
    let pid: i32 = ready.pids[victim].parse().unwrap();
    // SAFETY: kill(2) of a rank process of the job this test started.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let killed = Instant::now();
    let status = wait_end(&mut child, Duration::from_secs(15), &what);
    let took = killed.elapsed();
    let stderr: Vec<String> = err.iter().collect();
    let stderr = stderr.join("\n");
    assert!(
        took <= END_WITHIN,
        "{what}: the job took {took:?} to end after the kill\n{stderr}"
    );
    assert_eq!(status.code(), Some(128 + 9), "{what}: {stderr}");
    let cause = stderr
        .lines()
        .find(|l| l.starts_with("gwrun: rank "))
        .unwrap_or_default();
    assert!(
        cause.starts_with(&format!(
            "gwrun: rank {victim} (pid {pid}) killed by signal 9"
        )),
        "{what}: gwrun must name rank {victim} and signal 9 first:\n{stderr}"
    );
    assert_nothing_left(&ready, &held, program, &what);
    took
}

fn seed_and_runs() -> (u64, usize) {
    let seed = std::env::var("GW_FAULT_SEED")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(FIXED_SEED);
    let runs = std::env::var("GW_FAULT_RUNS")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(FIXED_RUNS);
    (seed, runs)
}

#[test]
fn killed_rank_ends_the_job_within_2s_naming_it_and_leaving_nothing() {
    let program = example("fault_loop");
    let (seed, runs) = seed_and_runs();
    eprintln!("fault_kills: {runs} kills, GW_FAULT_SEED={seed}");
    let mut rng = Rng(seed);
    let start = Instant::now();
    let mut took: Vec<Duration> = (0..runs)
        .map(|run| one_gwrun_kill(&mut rng, run, &program))
        .collect();
    took.sort();
    if let (Some(median), Some(max)) = (took.get(took.len() / 2), took.last()) {
        eprintln!(
            "fault_kills: {runs} kills passed in {:.1} s; kill to end of job: median {:.0} ms, max {:.0} ms",
            start.elapsed().as_secs_f64(),
            median.as_secs_f64() * 1e3,
            max.as_secs_f64() * 1e3
        );
    }
}

fn mpiexec_mpich() -> Option<&'static str> {
    ["/usr/bin/mpiexec.mpich", "/usr/bin/mpiexec.hydra"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
}

/// Under Hydra nobody but the ranks can remove their segments: a killed
/// rank must end the job, and the survivors' segments must be gone.
#[test]
fn killed_rank_under_hydra_ends_the_job_without_segments() {
    let Some(mpiexec) = mpiexec_mpich() else {
        gridwire_testkit::skip(
            "mpiexec.mpich is not installed (scripts/install-deps.sh installs it)",
        );
        return;
    };
    let program = example("fault_loop");
    let (seed, _) = seed_and_runs();
    let mut rng = Rng(seed ^ 0x0048_7964_7261);
    for run in 0..2 {
        let victim = rng.below(3) as usize;
        let what = format!("hydra run {run} (kill rank {victim})");
        let mut child = launcher(mpiexec, &["-n", "3", &program], &[])
            .spawn()
            .expect("spawn mpiexec");
        let out = lines_of(child.stdout.take().unwrap());
        let err = lines_of(child.stderr.take().unwrap());
        let ready = wait_ready(&mut child, &out, 3, &what);
        std::thread::sleep(Duration::from_millis(rng.below(200)));
        let held = snapshot(&ready);
        let pid: i32 = ready.pids[victim].parse().unwrap();
        // SAFETY: kill(2) of a rank process of the job this test started.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        let status = wait_end(&mut child, Duration::from_secs(15), &what);
        let stderr: Vec<String> = err.iter().collect();
        assert!(!status.success(), "{what}: {}", stderr.join("\n"));
        assert_nothing_left(&ready, &held, &program, &what);
    }
}
