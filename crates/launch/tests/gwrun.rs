//! End-to-end tests of `gwrun` with the `pmi_check` example as the rank
//! program. Every test bounds itself twice: `gwrun --timeout` and a
//! test-side deadline that kills `gwrun` and fails.

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const GWRUN: &str = env!("CARGO_BIN_EXE_gwrun");

/// `cargo test` builds the examples next to the binaries' directory.
fn pmi_check() -> String {
    let p = PathBuf::from(GWRUN)
        .parent()
        .unwrap()
        .join("examples")
        .join("pmi_check");
    assert!(
        p.exists(),
        "{} missing: run `cargo test -p gridwire-launch` (it builds the examples)",
        p.display()
    );
    p.to_string_lossy().into_owned()
}

struct Out {
    status: ExitStatus,
    stdout: String,
    stderr: String,
    elapsed: Duration,
}

impl Out {
    fn code(&self) -> i32 {
        self.status.code().unwrap_or(-1)
    }
}

fn spawn_reader<R: Read + Send + 'static>(r: R) -> mpsc::Receiver<String> {
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

fn wait_bounded(child: &mut Child, limit: Duration) -> ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("gwrun did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn collect(rx: &mpsc::Receiver<String>) -> String {
    let mut s = String::new();
    while let Ok(l) = rx.recv_timeout(Duration::from_secs(5)) {
        s.push_str(&l);
        s.push('\n');
    }
    s
}

fn run_with(cmd: &mut Command, limit: Duration) -> Out {
    let start = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let out_rx = spawn_reader(child.stdout.take().unwrap());
    let err_rx = spawn_reader(child.stderr.take().unwrap());
    let status = wait_bounded(&mut child, limit);
    let elapsed = start.elapsed();
    Out {
        status,
        stdout: collect(&out_rx),
        stderr: collect(&err_rx),
        elapsed,
    }
}

fn gwrun(args: &[&str]) -> Out {
    gwrun_env(args, &[])
}

fn gwrun_env(args: &[&str], env: &[(&str, &str)]) -> Out {
    let mut c = Command::new(GWRUN);
    c.args(args);
    c.env_remove("MPIEXEC_TIMEOUT");
    c.envs(env.iter().copied());
    run_with(&mut c, Duration::from_secs(60))
}

/// The numbers after `word` in lines like `rank 1 pid 123`.
fn values(stdout: &str, word: &str) -> Vec<String> {
    stdout
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            w.iter()
                .position(|x| *x == word)
                .and_then(|i| w.get(i + 1))
                .map(|s| s.to_string())
        })
        .collect()
}

fn alive(pid: &str) -> bool {
    // A zombie would still have /proc/<pid>; gwrun reaps everything, so
    // after it exits the entry must be gone (or belong to a new process,
    // which is not a zombie of ours: check the state as well).
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => !s
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z'),
        Err(_) => false,
    }
}

fn only_rank_output(stdout: &str) {
    for l in stdout.lines() {
        assert!(
            l.starts_with("rank ") || l.starts_with('['),
            "unexpected stdout line {l:?}"
        );
        assert!(!l.contains("gwrun"), "gwrun wrote to stdout: {l:?}");
    }
}

#[test]
fn pmi_put_get_barrier_four_ranks() {
    let p = pmi_check();
    let o = gwrun(&["-n", "4", "--timeout", "30", &p]);
    assert_eq!(o.code(), 0, "stderr: {}", o.stderr);
    assert_eq!(o.stdout.matches("kvs ok").count(), 4, "{}", o.stdout);
    for r in 0..4 {
        assert!(
            o.stdout.contains(&format!("rank {r} of 4: kvs ok")),
            "{}",
            o.stdout
        );
    }
    only_rank_output(&o.stdout);
    assert!(o.stderr.is_empty(), "unexpected stderr: {}", o.stderr);
}

#[test]
fn np_alias_and_separator() {
    let p = pmi_check();
    let o = gwrun(&["-np", "2", "--timeout", "30", "--", &p]);
    assert_eq!(o.code(), 0, "stderr: {}", o.stderr);
    assert_eq!(o.stdout.matches("kvs ok").count(), 2);
}

#[test]
fn sigkilled_rank_tears_down_job_and_cleans_up() {
    let p = pmi_check();
    let o = gwrun(&[
        "-n",
        "3",
        "--timeout",
        "50",
        &p,
        "--pid",
        "--child",
        "--shm",
        "--kill",
        "1",
        "9",
        "--sleep",
        "40",
    ]);
    assert_eq!(o.code(), 128 + 9, "stderr: {}", o.stderr);
    assert!(
        o.elapsed < Duration::from_secs(10),
        "teardown took {:?}",
        o.elapsed
    );
    assert!(o.stderr.contains("gwrun: rank 1 (pid "), "{}", o.stderr);
    assert!(o.stderr.contains("SIGKILL"), "{}", o.stderr);
    let pids = values(&o.stdout, "pid");
    let children = values(&o.stdout, "child");
    assert_eq!(pids.len(), 3, "{}", o.stdout);
    assert_eq!(children.len(), 3, "{}", o.stdout);
    for pid in pids.iter().chain(&children) {
        assert!(!alive(pid), "process {pid} survived the job");
    }
    let segs = values(&o.stdout, "shm");
    assert_eq!(segs.len(), 3);
    for s in segs {
        assert!(!std::path::Path::new(&s).exists(), "{s} was not removed");
    }
    only_rank_output(&o.stdout);
}

#[test]
fn shm_removed_after_success_too() {
    let p = pmi_check();
    let o = gwrun(&["-n", "2", "--timeout", "30", &p, "--shm"]);
    assert_eq!(o.code(), 0, "{}", o.stderr);
    for s in values(&o.stdout, "shm") {
        assert!(!std::path::Path::new(&s).exists(), "{s} was not removed");
    }
}

#[test]
fn nonzero_exit_propagates() {
    let p = pmi_check();
    let o = gwrun(&[
        "-n",
        "3",
        "--timeout",
        "50",
        &p,
        "--exit",
        "2",
        "5",
        "--sleep",
        "40",
    ]);
    assert_eq!(o.code(), 5, "stderr: {}", o.stderr);
    assert!(o.elapsed < Duration::from_secs(10));
    assert!(
        o.stderr.contains("rank 2") && o.stderr.contains("status 5"),
        "{}",
        o.stderr
    );
}

#[test]
fn exit_zero_without_finalize_is_a_failure() {
    let p = pmi_check();
    let o = gwrun(&[
        "-n",
        "2",
        "--timeout",
        "50",
        &p,
        "--nofinalize",
        "0",
        "--sleep",
        "40",
    ]);
    assert_ne!(o.code(), 0);
    assert!(o.elapsed < Duration::from_secs(10));
    assert!(
        o.stderr.contains("rank 0") && o.stderr.contains("without calling PMI finalize"),
        "{}",
        o.stderr
    );
}

#[test]
fn pmi_abort_ends_job_with_message() {
    let p = pmi_check();
    let o = gwrun(&[
        "-n",
        "3",
        "--timeout",
        "50",
        &p,
        "--abort",
        "1",
        "7",
        "--sleep",
        "40",
    ]);
    assert_eq!(o.code(), 7, "stderr: {}", o.stderr);
    assert!(o.elapsed < Duration::from_secs(10));
    assert!(
        o.stderr.contains("rank 1") && o.stderr.contains("gives up on purpose"),
        "{}",
        o.stderr
    );
}

#[test]
fn timeout_kills_the_job() {
    let p = pmi_check();
    let o = gwrun(&["-n", "2", "--timeout", "1", &p, "--pid", "--sleep", "40"]);
    assert_eq!(o.code(), 124, "stderr: {}", o.stderr);
    assert!(o.elapsed < Duration::from_secs(8), "{:?}", o.elapsed);
    assert!(o.stderr.contains("timed out"), "{}", o.stderr);
    for pid in values(&o.stdout, "pid") {
        assert!(!alive(&pid));
    }
}

#[test]
fn mpiexec_timeout_env() {
    let p = pmi_check();
    let mut c = Command::new(GWRUN);
    c.args(["-n", "1", &p, "--sleep", "40"])
        .env("MPIEXEC_TIMEOUT", "1");
    let o = run_with(&mut c, Duration::from_secs(30));
    assert_eq!(o.code(), 124, "{}", o.stderr);
}

#[test]
fn tag_output_prefixes_rank() {
    let p = pmi_check();
    let o = gwrun(&["-n", "3", "--tag-output", "--timeout", "30", &p]);
    assert_eq!(o.code(), 0, "{}", o.stderr);
    assert_eq!(o.stdout.lines().count(), 3);
    for l in o.stdout.lines() {
        let (tag, rest) = l.split_once("] ").expect("tagged line");
        let r = tag.trim_start_matches('[');
        assert!(rest.starts_with(&format!("rank {r} ")), "{l:?}");
    }
}

#[test]
fn long_lines_do_not_interleave() {
    let p = pmi_check();
    let o = gwrun(&["-n", "4", "--timeout", "30", &p, "--lines", "200"]);
    assert_eq!(o.code(), 0, "{}", o.stderr);
    let mut n = 0;
    for l in o.stdout.lines() {
        if l.contains(" line ") {
            n += 1;
            assert!(
                l.ends_with(&"x".repeat(3000)) && l.matches("rank").count() == 1,
                "mangled line {}",
                &l[..80.min(l.len())]
            );
        }
    }
    assert_eq!(n, 800);
}

#[test]
fn emulated_hosts_place_ranks_in_blocks() {
    let p = pmi_check();
    let o = gwrun(&[
        "-n",
        "4",
        "--emulate-hosts",
        "2",
        "--timeout",
        "30",
        &p,
        "--env",
    ]);
    assert_eq!(o.code(), 0, "{}", o.stderr);
    let mut hosts = vec![String::new(); 4];
    for l in o.stdout.lines().filter(|l| l.contains(" host ")) {
        let w: Vec<&str> = l.split_whitespace().collect();
        hosts[w[1].parse::<usize>().unwrap()] = w[3].to_string();
    }
    assert!(
        hosts[0].ends_with("#emu0") && hosts[1].ends_with("#emu0"),
        "{hosts:?}"
    );
    assert!(
        hosts[2].ends_with("#emu1") && hosts[3].ends_with("#emu1"),
        "{hosts:?}"
    );
    let real = hosts[0].split('#').next().unwrap();
    assert!(
        real.contains(':'),
        "host id is hostname:boot_id, got {real}"
    );
    let jobs = values(&o.stdout, "job");
    assert!(jobs.iter().all(|j| j == &jobs[0]) && !jobs[0].is_empty() && jobs[0] != "-");
    assert!(values(&o.stdout, "secret_len").iter().all(|s| s == "64"));

    // Without emulation GW_HOST_ID is left to the runtime.
    let o = gwrun(&["-n", "2", "--timeout", "30", &p, "--env"]);
    assert_eq!(values(&o.stdout, "host"), vec!["-", "-"]);
}

#[test]
fn hostfile_places_ranks() {
    let p = pmi_check();
    let dir = std::env::temp_dir().join(format!("gwrun-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let hf = dir.join("hosts");
    std::fs::write(&hf, "# test\nalpha:1\nbeta slots=2\n").unwrap();
    let o = gwrun(&[
        "-n",
        "3",
        "--emulate-hostfile",
        hf.to_str().unwrap(),
        "--timeout",
        "30",
        &p,
        "--env",
    ]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(o.code(), 0, "{}", o.stderr);
    let mut hosts = vec![String::new(); 3];
    for l in o.stdout.lines().filter(|l| l.contains(" host ")) {
        let w: Vec<&str> = l.split_whitespace().collect();
        hosts[w[1].parse::<usize>().unwrap()] = w[3].to_string();
    }
    assert!(
        hosts[0].ends_with("#alpha") && hosts[1].ends_with("#beta") && hosts[2].ends_with("#beta"),
        "{hosts:?}"
    );
}

#[test]
fn stats_matrix_on_stderr() {
    let p = pmi_check();
    let o = gwrun(&[
        "-n",
        "4",
        "--emulate-hosts",
        "2",
        "--stats",
        "--timeout",
        "30",
        &p,
        "--stats",
    ]);
    assert_eq!(o.code(), 0, "{}", o.stderr);
    assert!(
        o.stderr.contains("gwrun: communication matrix"),
        "{}",
        o.stderr
    );
    assert!(
        o.stderr.contains("shm 1/8") && o.stderr.contains("tcp 3/24"),
        "{}",
        o.stderr
    );
    assert!(
        o.stderr
            .contains("placement: emu0: ranks 0-1; emu1: ranks 2-3"),
        "{}",
        o.stderr
    );
    assert!(
        o.stderr.lines().all(|l| l.starts_with("gwrun: ")),
        "{}",
        o.stderr
    );
    only_rank_output(&o.stdout);
    // Ranks that publish nothing: the matrix still prints.
    let o = gwrun(&["-n", "2", "--stats", "--timeout", "30", &p]);
    assert_eq!(o.code(), 0);
    assert!(
        o.stderr
            .contains("no (readable) statistics from rank(s) 0,1"),
        "{}",
        o.stderr
    );
}

#[test]
fn missing_program_is_a_clear_error() {
    let o = gwrun(&[
        "-n",
        "2",
        "--timeout",
        "30",
        "/nonexistent/gw-no-such-program",
    ]);
    assert_eq!(o.code(), 127);
    assert!(
        o.stderr.contains(
            "gwrun: cannot execute '/nonexistent/gw-no-such-program': No such file or directory"
        ),
        "{}",
        o.stderr
    );
    assert!(o.stdout.is_empty());
}

/// Rank 0 reads gwrun's stdin (when it is not a terminal); the others get /dev/null.
#[test]
fn stdin_goes_to_rank_zero() {
    let mut c = Command::new(GWRUN);
    c.args(["-n", "2", "--tag-output", "--timeout", "30", "cat"])
        .env_remove("MPIEXEC_TIMEOUT");
    let mut child = c
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut i = child.stdin.take().unwrap();
        i.write_all(b"to rank zero\n").unwrap();
    }
    let out = spawn_reader(child.stdout.take().unwrap());
    let status = wait_bounded(&mut child, Duration::from_secs(30));
    assert!(status.success());
    assert_eq!(collect(&out), "[0] to rank zero\n");
}

#[test]
fn plain_programs_without_pmi() {
    let o = gwrun(&["-n", "3", "--timeout", "30", "echo", "hello"]);
    assert_eq!(o.code(), 0, "{}", o.stderr);
    assert_eq!(o.stdout, "hello\nhello\nhello\n");
    let o = gwrun(&["-n", "2", "--timeout", "30", "sh", "-c", "exit 3"]);
    assert_eq!(o.code(), 3);
    let o = gwrun(&["-n", "2", "--timeout", "30", "sh", "-c", "kill -SEGV $$"]);
    assert_eq!(o.code(), 128 + 11);
    assert!(o.stderr.contains("SIGSEGV"), "{}", o.stderr);
}

#[test]
fn sigterm_to_gwrun_is_forwarded() {
    signal_to_gwrun_is_forwarded(libc::SIGTERM, "SIGTERM");
}

#[test]
fn sigint_to_gwrun_is_forwarded() {
    signal_to_gwrun_is_forwarded(libc::SIGINT, "SIGINT");
}

fn signal_to_gwrun_is_forwarded(sig: i32, name: &str) {
    let p = pmi_check();
    let mut child = Command::new(GWRUN)
        .args([
            "-n",
            "2",
            "--timeout",
            "50",
            &p,
            "--pid",
            "--child",
            "--sleep",
            "40",
        ])
        .env_remove("MPIEXEC_TIMEOUT")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = spawn_reader(child.stdout.take().unwrap());
    let err = spawn_reader(child.stderr.take().unwrap());
    // Wait until both ranks are up and past the barrier.
    let mut lines = Vec::new();
    let start = Instant::now();
    while lines
        .iter()
        .filter(|l: &&String| l.contains("kvs ok"))
        .count()
        < 2
    {
        match out.recv_timeout(Duration::from_secs(1)) {
            Ok(l) => lines.push(l),
            Err(_) if start.elapsed() > Duration::from_secs(20) => {
                let _ = child.kill();
                panic!("ranks did not start: {lines:?}");
            }
            Err(_) => {}
        }
    }
    // SAFETY (test): signal the gwrun we started.
    unsafe { libc::kill(child.id() as i32, sig) };
    let t = Instant::now();
    let status = wait_bounded(&mut child, Duration::from_secs(15));
    assert!(t.elapsed() < Duration::from_secs(5));
    assert_eq!(status.code(), Some(128 + sig));
    let stderr = collect(&err);
    assert!(stderr.contains(&format!("received {name}")), "{stderr}");
    let all = lines.join("\n") + "\n";
    for pid in values(&all, "pid").iter().chain(&values(&all, "child")) {
        assert!(!alive(pid), "process {pid} survived");
    }
}

#[test]
fn same_program_under_mpich_hydra() {
    let Ok(path) = which("mpiexec.mpich") else {
        gridwire_testkit::skip("mpiexec.mpich not installed (Debian package mpich)");
        return;
    };
    let p = pmi_check();
    let mut c = Command::new(path);
    c.args(["-n", "3", &p]).env("MPIEXEC_TIMEOUT", "30");
    let o = run_with(&mut c, Duration::from_secs(60));
    assert_eq!(o.code(), 0, "stdout {} stderr {}", o.stdout, o.stderr);
    assert_eq!(o.stdout.matches("kvs ok").count(), 3, "{}", o.stdout);
}

fn which(name: &str) -> Result<PathBuf, ()> {
    let path = std::env::var_os("PATH").ok_or(())?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.exists())
        .ok_or(())
}

/// Compatibility the other way round: a real MPICH program (its own PMI-1
/// client) runs under gwrun, including MPI_Abort.
#[test]
fn mpich_program_under_gwrun() {
    let Ok(mpicc) = which("mpicc.mpich") else {
        gridwire_testkit::skip("mpicc.mpich not installed (Debian package libmpich-dev)");
        return;
    };
    let dir = std::env::temp_dir().join(format!("gwrun-mpich-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("hello.c");
    std::fs::write(
        &src,
        r#"#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    int r, s, sum;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &s);
    MPI_Allreduce(&r, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (argc > 1 && r == atoi(argv[1])) MPI_Abort(MPI_COMM_WORLD, 9);
    printf("rank %d of %d sum %d\n", r, s, sum);
    MPI_Finalize();
    return 0;
}
"#,
    )
    .unwrap();
    let exe = dir.join("hello");
    let mut cc = Command::new(mpicc);
    cc.arg("-o").arg(&exe).arg(&src);
    let o = run_with(&mut cc, Duration::from_secs(120));
    assert_eq!(o.code(), 0, "mpicc failed: {}", o.stderr);
    let exe_s = exe.to_str().unwrap().to_string();
    // Without the MPICH-ABI shim: once another test has built it beside
    // gwrun, gwrun would load it in place of MPICH's library, and this test
    // is about MPICH's own PMI-1 client.
    let no_shim = [("GW_MPICH_ABI", "0")];
    let o = gwrun_env(&["-n", "3", "--timeout", "30", &exe_s], &no_shim);
    assert_eq!(o.code(), 0, "{}", o.stderr);
    for r in 0..3 {
        assert!(
            o.stdout.contains(&format!("rank {r} of 3 sum 3")),
            "{}",
            o.stdout
        );
    }
    let o = gwrun_env(&["-n", "3", "--timeout", "30", &exe_s, "1"], &no_shim);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(o.code(), 9, "{}", o.stderr);
    assert!(
        o.stderr.contains("gwrun: rank 1") && o.stderr.contains("PMI abort"),
        "{}",
        o.stderr
    );
}

/// One rank never speaks PMI and exits 0 while the others wait in a PMI
/// barrier for it: gwrun must see the deadlock instead of hanging.
#[test]
fn rank_leaving_without_barrier_is_detected() {
    let p = pmi_check();
    let script = format!("if [ \"$PMI_RANK\" = 1 ]; then exit 0; fi; exec {p}");
    let o = gwrun(&["-n", "3", "--timeout", "50", "sh", "-c", &script]);
    assert_ne!(o.code(), 0);
    assert!(o.elapsed < Duration::from_secs(10), "{:?}", o.elapsed);
    assert!(
        o.stderr.contains("rank 1") && o.stderr.contains("barrier"),
        "{}",
        o.stderr
    );
}

/// `--bind-to user:LIST` pins rank r to the r-th CPU of the list (cycling),
/// `core` to the r-th CPU gwrun may use; bad lists are refused before any
/// rank starts.
#[test]
fn bind_to_pins_each_rank() {
    let show = "echo \"$PMI_RANK $(awk '/Cpus_allowed_list/ {print $2}' /proc/self/status)\"";
    let cpus = {
        let o = Command::new("sh")
            .args([
                "-c",
                "awk '/Cpus_allowed_list/ {print $2}' /proc/self/status",
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    // The first and last CPU we may use (a list such as "0-1" or "0,2-3").
    let first: String = cpus.chars().take_while(|c| c.is_ascii_digit()).collect();
    let last: String = {
        let rev: String = cpus
            .chars()
            .rev()
            .take_while(|c| c.is_ascii_digit())
            .collect();
        rev.chars().rev().collect()
    };
    let list = format!("user:{last},{first}");
    let o = gwrun(&[
        "-n",
        "3",
        "--timeout",
        "20",
        "--bind-to",
        &list,
        "sh",
        "-c",
        show,
    ]);
    assert_eq!(o.code(), 0, "{}", o.stderr);
    let mut got: Vec<&str> = o.stdout.lines().collect();
    got.sort();
    assert_eq!(
        got,
        vec![
            format!("0 {last}"),
            format!("1 {first}"),
            format!("2 {last}")
        ],
        "{}",
        o.stdout
    );

    let o = gwrun(&[
        "-n",
        "1",
        "--timeout",
        "20",
        "--bind-to",
        "core",
        "sh",
        "-c",
        show,
    ]);
    assert_eq!(o.code(), 0, "{}", o.stderr);
    assert_eq!(o.stdout.trim(), format!("0 {first}"));

    let o = gwrun(&[
        "-n",
        "2",
        "--timeout",
        "20",
        "--bind-to",
        "user:100000",
        "true",
    ]);
    assert_eq!(o.code(), 2);
    assert!(
        o.stderr.contains("gwrun: CPU 100000") && o.stdout.is_empty(),
        "{}",
        o.stderr
    );
}

/// A killed rank's peer often reports the broken link (PMI abort) before
/// gwrun reaps the killed rank: gwrun must still name the killed rank as
/// the cause, with its signal, and call the abort a consequence.
#[test]
fn killed_rank_is_named_as_cause_even_when_a_peer_aborts_first() {
    let p = pmi_check();
    let o = gwrun(&[
        "-n",
        "3",
        "--timeout",
        "50",
        &p,
        "--abort-then-kill",
        "0",
        "2",
        "--sleep",
        "40",
    ]);
    assert_eq!(o.code(), 128 + 9, "stderr: {}", o.stderr);
    assert!(o.elapsed < Duration::from_secs(10), "{:?}", o.elapsed);
    let first = o
        .stderr
        .lines()
        .find(|l| l.starts_with("gwrun: rank "))
        .unwrap_or_default();
    assert!(
        first.starts_with("gwrun: rank 2 (pid ") && first.contains("signal 9 (SIGKILL)"),
        "the first report must name rank 2 killed by signal 9: {}",
        o.stderr
    );
    assert!(
        o.stderr.contains("rank 0 (pid ")
            && o.stderr.contains("PMI abort")
            && o.stderr.contains("consequence of rank 2"),
        "{}",
        o.stderr
    );
}

/// A line gwrun cannot parse gets `cmd=error rc=-1` (the client would wait
/// for a reply forever otherwise).
#[test]
fn unparsable_pmi_line_gets_an_error_reply() {
    let o = gwrun(&[
        "-n",
        "1",
        "--timeout",
        "20",
        "sh",
        "-c",
        "echo garbage >&$PMI_FD; head -n 1 <&$PMI_FD",
    ]);
    assert!(
        o.stdout.starts_with("cmd=error rc=-1 msg="),
        "stdout: {} stderr: {}",
        o.stdout,
        o.stderr
    );
    assert!(o.elapsed < Duration::from_secs(10), "{:?}", o.elapsed);
}

/// A line beyond the length limit: an error reply, then gwrun closes the
/// connection (the rank sees EOF) and says which rank broke the protocol.
#[test]
fn overlong_pmi_line_is_answered_and_closed() {
    let o = gwrun(&[
        "-n",
        "1",
        "--timeout",
        "20",
        "sh",
        "-c",
        "head -c 300000 /dev/zero | tr '\\0' a >&$PMI_FD; cat <&$PMI_FD; echo EOF",
    ]);
    assert!(
        o.stdout.starts_with("cmd=error rc=-1") && o.stdout.contains("EOF"),
        "stdout: {} stderr: {}",
        o.stdout,
        o.stderr
    );
    assert!(
        o.stderr.contains("rank 0") && o.stderr.contains("broke the PMI protocol"),
        "{}",
        o.stderr
    );
    assert!(o.elapsed < Duration::from_secs(10), "{:?}", o.elapsed);
}

/// A rank that sends requests without reading the replies: gwrun stops
/// reading it (back-pressure) instead of queueing replies without bound.
#[test]
fn pmi_replies_to_a_rank_that_does_not_read_are_bounded() {
    let mut c = Command::new(GWRUN);
    c.args([
        "-n",
        "1",
        "--timeout",
        "4",
        "sh",
        "-c",
        "exec yes cmd=get_maxes >&$PMI_FD",
    ])
    .env_remove("MPIEXEC_TIMEOUT")
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    let mut child = c.spawn().unwrap();
    let pid = child.id();
    let mut peak_kib = 0u64;
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(100));
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        if let Some(kib) = status
            .lines()
            .find(|l| l.starts_with("VmRSS:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
        {
            peak_kib = peak_kib.max(kib);
        }
        if peak_kib > 256 * 1024 {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        peak_kib < 16 * 1024,
        "gwrun grew to {peak_kib} KiB queueing replies nobody reads"
    );
}
