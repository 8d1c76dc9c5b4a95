//! `gwrun -f` across real hosts and sites: a testbed of 2 sites x 2 hosts
//! with a 5 ms WAN, no shared file system (the hosts have no gridwire, no
//! program and no libmpi.so: gwrun stages its proxy, the program and the
//! library), started from `login` by one `gwrun -f` with the machines file
//! the testbed wrote (ssh to each site's first host, which starts the
//! other host of its site).
//!
//! Asserted: a C MPI program (ring with checked data, allreduce) runs on
//! the 4 hosts in file order with `[rank@host]` tags; a second run finds
//! everything cached; kill -9 of a rank on a remote host, and of a remote
//! proxy, end the job within 2 s naming rank, host and site, leaving no
//! process on any host (also when the front end itself is killed); a silently partitioned host is detected by
//! heartbeat within GW_HEARTBEAT_TIMEOUT + 5 s and its ranks die too; a bad
//! machines file names its line; a non-root user runs the same job. Needs root and sshd: skipped by the
//! project's rule otherwise (a failure under CI=true).

use gridwire_testbed::harness::{self, run_with_timeout, Testbed};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;

fn ready() -> bool {
    common::testbed_ready()
}

const HOSTS: [&str; 4] = ["s0h0", "s0h1", "s1h0", "s1h1"];
/// The non-root user the testbed lets log in everywhere.
const USER: &str = "gwgriduser";

/// A directory for the program, seen by `login` only.
struct ProgDir(PathBuf);

impl Drop for ProgDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn gwrun_on_login(tb: &Testbed, gwrun: &Path, env: &[&str], args: &[&str]) -> Command {
    let mut v: Vec<&str> = vec!["env"];
    v.extend_from_slice(env);
    v.push(gwrun.to_str().unwrap());
    v.extend_from_slice(args);
    tb.command("login", &v)
}

/// Processes named `name` on `host`.
fn count_on(tb: &Testbed, host: &str, name: &str) -> usize {
    let out = tb.exec(host, &["pgrep", "-c", "-x", name]).unwrap();
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0)
}

fn wait_for(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let until = Instant::now() + limit;
    while !f() {
        assert!(Instant::now() < until, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits for a background gwrun; its exit code, stderr and when it ended.
fn finish(child: Child, limit: Duration) -> (Option<i32>, String, Instant) {
    let until = Instant::now() + limit;
    let mut child = child;
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            let ended = Instant::now();
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                use std::io::Read;
                let _ = e.read_to_string(&mut err);
            }
            return (st.code(), err, ended);
        }
        if Instant::now() > until {
            let _ = child.kill();
            panic!("gwrun did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Starts `sleep 300` on the 4 hosts through gwrun in the background and
/// waits until every host runs its rank.
fn start_sleepers(tb: &Testbed, gwrun: &Path, machines: &str, env: &[&str]) -> Child {
    let child = gwrun_on_login(
        tb,
        gwrun,
        env,
        &[
            "-f",
            machines,
            "-n",
            "4",
            "--timeout",
            "100",
            "sleep",
            "300",
        ],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    wait_for(
        "a sleeping rank on every host",
        Duration::from_secs(30),
        || HOSTS.iter().all(|h| count_on(tb, h, "sleep") == 1),
    );
    child
}

fn assert_nothing_left(tb: &Testbed, what: &str) {
    wait_for(
        &format!("no rank or proxy left after {what}"),
        Duration::from_secs(5),
        || {
            HOSTS.iter().all(|h| {
                count_on(tb, h, "sleep") == 0
                    && tb
                        .exec(h, &["pgrep", "-f", "--", "--proxy"])
                        .map(|o| o.stdout.is_empty())
                        .unwrap_or(false)
            })
        },
    );
}

#[test]
fn gwrun_f_runs_stages_and_tears_down_across_sites() {
    if !ready() {
        return;
    }
    let gwrun = common::build_bin("gridwire-launch", "gwrun");
    let dir = ProgDir(PathBuf::from(format!(
        "{}/gwrun-grid-{}",
        env!("CARGO_TARGET_TMPDIR"),
        std::process::id()
    )));
    std::fs::create_dir_all(&dir.0).unwrap();
    let prog = common::stage_program(&dir.0);
    let mut tb = Testbed::up(&[
        "--sites",
        "2",
        "--hosts",
        "2",
        "--wan-delay",
        "5",
        "--user",
        USER,
    ])
    .unwrap_or_else(|e| panic!("{e}"));
    let tbdir = tb.dir();
    let machines = tbdir.join("machines").display().to_string();
    let prog_s = prog.display().to_string();

    // 1. The ring across both sites, staged; then again, from the caches.
    for run in 0..2 {
        let started = Instant::now();
        let out = run_with_timeout(
            &mut gwrun_on_login(
                &tb,
                &gwrun,
                &[],
                &[
                    "-f",
                    &machines,
                    "-n",
                    "4",
                    "--tag-output",
                    "--timeout",
                    "60",
                    &prog_s,
                ],
            ),
            Duration::from_secs(90),
        )
        .unwrap();
        let took = started.elapsed();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        eprintln!("run {run}: {took:?}");
        assert!(out.status.success(), "gwrun -f failed:\n{stdout}\n{stderr}");
        for (r, h) in HOSTS.iter().enumerate() {
            let want = format!("[{r}@{h}] RANK {r} SIZE 4 HOST {h} RING ok ALLREDUCE ok");
            assert!(
                stdout.lines().any(|l| l == want),
                "no {want:?} in:\n{stdout}\n{stderr}"
            );
        }
        // The job directory is gone; the cache keeps program and library.
        for h in HOSTS {
            let tmp = tb.exec_ok(h, &["ls", "-A", "/tmp"]).unwrap();
            assert!(!tmp.contains("gw-job-"), "{h}: job directory left: {tmp}");
            let cached = tb
                .exec_ok(h, &["sh", "-c", "ls $HOME/.cache/gridwire/stage | wc -l"])
                .unwrap();
            assert!(
                cached.trim().parse::<u32>().unwrap_or(0) >= 2,
                "{h}: cache holds {cached}"
            );
        }
    }
    // The program was never on a compute host outside the cache.
    assert!(
        tb.exec(HOSTS[3], &["test", "-e", &prog_s])
            .unwrap()
            .status
            .code()
            == Some(1)
    );

    // 2. kill -9 of a rank on a remote host.
    let child = start_sleepers(&tb, &gwrun, &machines, &[]);
    let killed = Instant::now();
    tb.exec_ok("s1h1", &["pkill", "-9", "-x", "sleep"]).unwrap();
    let (code, err, ended) = finish(child, Duration::from_secs(30));
    let took = ended - killed;
    eprintln!("teardown after a killed rank: {took:?}");
    assert_eq!(code, Some(137), "{err}");
    assert!(
        err.contains("rank 3") && err.contains("host s1h1 (site s1)") && err.contains("SIGKILL"),
        "{err}"
    );
    assert!(took < Duration::from_secs(2), "teardown took {took:?}");
    assert_nothing_left(&tb, "a killed rank");

    // 3. kill -9 of the proxy of a host that is not its site's leader.
    let child = start_sleepers(&tb, &gwrun, &machines, &[]);
    let killed = Instant::now();
    tb.exec_ok("s0h1", &["pkill", "-9", "-f", "--", "--proxy"])
        .unwrap();
    let (code, err, ended) = finish(child, Duration::from_secs(30));
    let took = ended - killed;
    eprintln!("teardown after a killed proxy: {took:?}");
    assert_ne!(code, Some(0), "{err}");
    assert!(err.contains("lost the proxy on host s0h1"), "{err}");
    assert!(took < Duration::from_secs(2), "teardown took {took:?}");
    assert_nothing_left(&tb, "a killed proxy");

    // 3b. The front end killed with SIGKILL: its ssh clients die with it,
    // every proxy loses its channel and kills its ranks.
    let child = start_sleepers(&tb, &gwrun, &machines, &[]);
    tb.exec_ok("login", &["pkill", "-9", "-x", "gwrun"])
        .unwrap();
    let _ = finish(child, Duration::from_secs(30));
    assert_nothing_left(&tb, "a killed front end");

    // 4. A host cut off silently: the heartbeat finds it.
    let child = start_sleepers(&tb, &gwrun, &machines, &["GW_HEARTBEAT_TIMEOUT=2"]);
    let cut = Instant::now();
    tb.partition("s1h1").unwrap();
    let (code, err, ended) = finish(child, Duration::from_secs(30));
    let took = ended - cut;
    eprintln!("partition detected after {took:?}");
    assert_ne!(code, Some(0), "{err}");
    assert!(
        err.contains("s1h1") && err.contains("GW_HEARTBEAT_TIMEOUT"),
        "{err}"
    );
    assert!(took < Duration::from_secs(2 + 5), "detection took {took:?}");
    // The cut-off host's proxy lost its parent too and killed its rank.
    wait_for(
        "the partitioned host's rank to die",
        Duration::from_secs(10),
        || count_on(&tb, "s1h1", "sleep") == 0,
    );
    tb.heal("s1h1").unwrap();
    assert_nothing_left(&tb, "a partition");

    // 5. A bad machines file names its line.
    let bad = tbdir.join("bad-machines");
    std::fs::write(&bad, "s0h0\n[site x] start=bogus\ns1h0\n").unwrap();
    let out = run_with_timeout(
        &mut gwrun_on_login(
            &tb,
            &gwrun,
            &[],
            &["-f", bad.to_str().unwrap(), "-n", "1", "true"],
        ),
        Duration::from_secs(20),
    )
    .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("line 2") && err.contains("bogus"), "{err}");
    assert!(out.stdout.is_empty(), "gwrun printed on stdout");

    // 6. The same job as a non-root user (its own caches on every host):
    // gwrun and the program from a directory that user can read.
    let shared = ProgDir(PathBuf::from(format!(
        "/var/tmp/gw-grid-user-{}",
        std::process::id()
    )));
    std::fs::create_dir_all(&shared.0).unwrap();
    let user_prog = common::stage_program(&shared.0);
    let user_gwrun = shared.0.join("gwrun");
    std::fs::copy(&gwrun, &user_gwrun).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&shared.0, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let out = run_with_timeout(
        &mut tb.command(
            "login",
            &[
                "/usr/sbin/runuser",
                "-u",
                USER,
                "--",
                "env",
                "-C",
                "/",
                user_gwrun.to_str().unwrap(),
                "-f",
                &machines,
                "-n",
                "4",
                "--timeout",
                "60",
                user_prog.to_str().unwrap(),
            ],
        ),
        Duration::from_secs(90),
    )
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "non-root gwrun -f failed:\n{stdout}\n{stderr}"
    );
    assert_eq!(
        stdout.matches("RING ok ALLREDUCE ok").count(),
        4,
        "{stdout}\n{stderr}"
    );
    let owner = tb
        .exec_ok(
            "s1h1",
            &[
                "sh",
                "-c",
                &format!("stat -c %U ~{USER}/.cache/gridwire/stage"),
            ],
        )
        .unwrap();
    assert_eq!(owner.trim(), USER, "the user's stage cache on s1h1");

    let pids = tb.pids();
    tb.down().unwrap_or_else(|e| panic!("{e}"));
    harness::reap(&pids);
    assert!(!tbdir.exists(), "{} is left", tbdir.display());
}
