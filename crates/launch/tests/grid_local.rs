//! `gwrun -f` with `start=local` sites: the whole proxy tree (front end,
//! a leader per site, the site's other hosts below it) on this machine,
//! no root or sshd needed. Asserted: placement and `[rank@host]` tags,
//! `-env`/`-wdir` reaching the ranks, stdin forwarded whole to rank 0 on a
//! host below its site's leader (and nobody else), the first failing
//! rank's status and a message naming rank, host and site, an MPI program
//! exchanging data through the tree's fences, and clear errors for bad
//! machines files and too few slots; Ctrl-C and SIGTERM forwarded to every
//! rank of the tree; each rank's stdout and stderr lines whole and in order.

mod common;

use common::{example, run, GWRUN};
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

fn machines(name: &str, text: &str) -> String {
    let p = std::env::temp_dir().join(format!("gw-grid-local-{}-{name}", std::process::id()));
    std::fs::write(&p, text).unwrap();
    p.to_string_lossy().into_owned()
}

#[test]
fn placement_tags_env_and_wdir() {
    let m = machines(
        "a",
        "[site a] start=local\nh1:2\n[site b] start=local\nh2\nh3\n",
    );
    let out = run(
        GWRUN,
        &[
            "-f",
            &m,
            "-n",
            "4",
            "--tag-output",
            "-env",
            "GW_TEST_X",
            "hello world",
            "-wdir",
            "/",
            "sh",
            "-c",
            "echo $PMI_RANK $GW_TEST_X $(pwd)",
        ],
        &[],
        Duration::from_secs(60),
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let mut lines: Vec<&str> = out.stdout.lines().collect();
    lines.sort();
    assert_eq!(
        lines,
        [
            "[0@h1] 0 hello world /",
            "[1@h1] 1 hello world /",
            "[2@h2] 2 hello world /",
            "[3@h3] 3 hello world /"
        ],
        "{}",
        out.stderr
    );
    // --map-by host: round-robin over the hosts.
    let out = run(
        GWRUN,
        &[
            "-f",
            &m,
            "-n",
            "4",
            "--map-by",
            "host",
            "--tag-output",
            "sh",
            "-c",
            "echo $PMI_RANK",
        ],
        &[],
        Duration::from_secs(60),
    );
    let mut lines: Vec<&str> = out.stdout.lines().collect();
    lines.sort();
    assert_eq!(
        lines,
        ["[0@h1] 0", "[1@h2] 1", "[2@h3] 2", "[3@h1] 3"],
        "{}",
        out.stderr
    );
    // GW_LAUNCH_TREE=flat: every host started by the front end; same job.
    let out = run(
        GWRUN,
        &[
            "-f",
            &m,
            "-n",
            "4",
            "--tag-output",
            "sh",
            "-c",
            "echo $PMI_RANK",
        ],
        &[("GW_LAUNCH_TREE", "flat")],
        Duration::from_secs(60),
    );
    let mut lines: Vec<&str> = out.stdout.lines().collect();
    lines.sort();
    assert_eq!(
        lines,
        ["[0@h1] 0", "[1@h1] 1", "[2@h2] 2", "[3@h3] 3"],
        "{}",
        out.stderr
    );
    let _ = std::fs::remove_file(&m);
}

#[test]
fn stdin_reaches_rank_0_below_its_leader() {
    // h2 leads site a; rank 0 runs on h1, below it.
    let m = machines("b", "[site a] start=local gateway=h2\nh1\nh2\n");
    let data: Vec<u8> = (0..3_000_000u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    let mut child = Command::new(GWRUN)
        .args(["-f", &m, "-n", "2", "--tag-output", "sh", "-c", "wc -c"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&data);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut lines: Vec<&str> = stdout.lines().collect();
    lines.sort();
    assert_eq!(lines, ["[0@h1] 3000000", "[1@h2] 0"]);
    let _ = std::fs::remove_file(&m);
}

#[test]
fn the_first_failure_names_rank_host_and_site() {
    let m = machines(
        "c",
        "[site a] start=local\nh1\n[site b] start=local\nh2\nh3\n",
    );
    let out = run(
        GWRUN,
        &[
            "-f",
            &m,
            "-n",
            "3",
            "sh",
            "-c",
            "if [ $PMI_RANK = 2 ]; then exit 7; fi; sleep 30",
        ],
        &[],
        Duration::from_secs(30),
    );
    assert_eq!(out.code, 7, "{}", out.stderr);
    assert!(
        out.stderr.contains("rank 2 (pid ")
            && out
                .stderr
                .contains("on host h3 (site b) exited with status 7"),
        "{}",
        out.stderr
    );
    assert!(out.elapsed < Duration::from_secs(10), "{:?}", out.elapsed);
    let _ = std::fs::remove_file(&m);
}

#[test]
fn an_mpi_program_through_the_tree() {
    mpi_program_on(
        "d",
        "[site a] start=local\nh1:2\nh2\n[site b] start=local\nh3\n",
    );
}

/// All hosts in one site: the site's leader completes the fences itself
/// (the front end is only told), and the job is the same.
#[test]
fn an_mpi_program_inside_one_site() {
    mpi_program_on("g", "[site a] start=local\nh1:2\nh2\nh3\n");
}

fn mpi_program_on(name: &str, text: &str) {
    let m = machines(name, text);
    let out = run(
        GWRUN,
        &[
            "-f",
            &m,
            "-n",
            "4",
            "--stats",
            &example("rsr_check"),
            "select",
        ],
        &[],
        Duration::from_secs(90),
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    // Every rank names a method for every peer.
    let selects = out
        .stdout
        .lines()
        .filter(|l| l.starts_with("SELECT "))
        .count();
    assert_eq!(selects, 16, "{}", out.stdout);
    assert!(
        out.stderr.contains("placement: h1: ranks [0, 1] (site a)"),
        "{}",
        out.stderr
    );
    let _ = std::fs::remove_file(&m);
}

#[test]
fn bad_machines_files_and_too_few_slots() {
    let m = machines("e", "h1\n[site a] start=nope\nh2\n");
    let out = run(
        GWRUN,
        &["-f", &m, "-n", "1", "true"],
        &[],
        Duration::from_secs(20),
    );
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("line 2") && out.stderr.contains("nope"),
        "{}",
        out.stderr
    );
    assert!(out.stdout.is_empty());
    let m2 = machines("f", "[site a] start=local\nh1:2\n");
    let out = run(
        GWRUN,
        &["-f", &m2, "-n", "3", "true"],
        &[],
        Duration::from_secs(20),
    );
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains('3') && out.stderr.contains('2'),
        "{}",
        out.stderr
    );
    let out = run(
        GWRUN,
        &["-f", &m2, "-n", "3", "--oversubscribe", "true"],
        &[],
        Duration::from_secs(30),
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let out = run(
        GWRUN,
        &["-f", "/nonexistent/machines", "-n", "1", "true"],
        &[],
        Duration::from_secs(20),
    );
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("/nonexistent/machines"),
        "{}",
        out.stderr
    );
    for f in [m, m2] {
        let _ = std::fs::remove_file(f);
    }
}

/// Ctrl-C and SIGTERM sent to the front end reach every rank, on every host
/// of the tree (the leader's own and the hosts below it), as that signal:
/// each rank's trap prints what it got. The job then ends in bounded time,
/// gwrun with 128 + the signal's number (as a shell reports a command
/// ended by that signal), naming the signal on stderr.
#[test]
fn ctrl_c_and_sigterm_reach_every_rank_through_the_tree() {
    let m = machines(
        "sig",
        "[site a] start=local\nh1\n[site b] start=local\nh2\nh3\n",
    );
    for (sig, name) in [(libc::SIGINT, "INT"), (libc::SIGTERM, "TERM")] {
        let dir =
            std::env::temp_dir().join(format!("gw-grid-local-{}-sig{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        // Each rank says it is ready by a file (stdout is forwarded by line,
        // but the test must not signal before every trap is set).
        let script = format!(
            "trap 'echo got-INT $PMI_RANK; exit 3' INT; trap 'echo got-TERM $PMI_RANK; exit 4' TERM; \
             touch {}/ready.$PMI_RANK; while :; do sleep 0.05; done",
            dir.display()
        );
        let child = Command::new(GWRUN)
            .args(["-f", &m, "-n", "3", "--timeout", "60", "sh", "-c", &script])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let start = std::time::Instant::now();
        while (0..3).any(|r| !dir.join(format!("ready.{r}")).exists()) {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "ranks did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // SAFETY: kill(2) on the pid of our own child, which has not been
        // reaped yet (wait_with_output below reaps it).
        assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
        let sent = std::time::Instant::now();
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let mut got: Vec<&str> = stdout.lines().collect();
        got.sort();
        assert_eq!(
            got,
            [
                format!("got-{name} 0"),
                format!("got-{name} 1"),
                format!("got-{name} 2")
            ],
            "stderr: {stderr}"
        );
        assert_eq!(out.status.code(), Some(128 + sig), "stderr: {stderr}");
        assert!(stderr.contains(&format!("received SIG{name}")), "{stderr}");
        assert!(
            sent.elapsed() < Duration::from_secs(5),
            "{:?}",
            sent.elapsed()
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
    let _ = std::fs::remove_file(&m);
}

/// Output through the tree keeps each rank's lines whole and in the order
/// the rank wrote them, with `--tag-output`, for stdout and stderr alike,
/// while 4 ranks on 3 hosts write at once.
#[test]
fn each_ranks_lines_arrive_whole_and_in_order() {
    let m = machines(
        "order",
        "[site a] start=local\nh1:2\n[site b] start=local\nh2\nh3\n",
    );
    const LINES: usize = 300;
    let out = run(
        GWRUN,
        &[
            "-f",
            &m,
            "-n",
            "4",
            "--tag-output",
            "sh",
            "-c",
            &format!(
                "i=0; while [ $i -lt {LINES} ]; do echo \"line $PMI_RANK $i padding-padding-padding\"; \
                 echo \"err $PMI_RANK $i\" >&2; i=$((i+1)); done"
            ),
        ],
        &[],
        Duration::from_secs(60),
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let hosts = ["h1", "h1", "h2", "h3"];
    for (stream, text, word) in [
        ("stdout", &out.stdout, "line"),
        ("stderr", &out.stderr, "err"),
    ] {
        for (r, h) in hosts.iter().enumerate() {
            let tag = format!("[{r}@{h}] {word} {r} ");
            let seq: Vec<usize> = text
                .lines()
                .filter_map(|l| l.strip_prefix(&tag))
                .map(|rest| {
                    let n = rest.split(' ').next().unwrap();
                    n.parse()
                        .unwrap_or_else(|_| panic!("{stream}: broken line {rest:?}"))
                })
                .collect();
            assert_eq!(
                seq,
                (0..LINES).collect::<Vec<_>>(),
                "{stream} of rank {r}: lost, split or reordered lines"
            );
        }
        let tagged = text.lines().filter(|l| l.starts_with('[')).count();
        assert_eq!(
            tagged,
            4 * LINES,
            "{stream}: every line tagged, none merged"
        );
    }
    let _ = std::fs::remove_file(&m);
}

/// `--report FILE.svg|.html`: the matrix as a picture, ranks grouped by the
/// machines file's sites and hosts, each link's method, bytes and the round
/// trip its transport measured (tcp here, forced by GW_METHODS).
#[test]
fn report_as_svg_and_html() {
    let m = machines(
        "r",
        "[site a] start=local\nh1:2\nh2\n[site b] start=local\nh3\n",
    );
    let dir = std::env::temp_dir();
    let svg = dir.join(format!("gw-report-{}.svg", std::process::id()));
    let html = dir.join(format!("gw-report-{}.html", std::process::id()));
    let out = run(
        GWRUN,
        &[
            "-f",
            &m,
            "-n",
            "4",
            "--report",
            svg.to_str().unwrap(),
            &example("rsr_check"),
            "select",
        ],
        &[],
        Duration::from_secs(90),
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let s = std::fs::read_to_string(&svg).expect("the report was written");
    assert!(
        s.starts_with("<svg") && s.trim_end().ends_with("</svg>"),
        "{s}"
    );
    for want in ["site a", "site b", ">h1<", ">h2<", ">h3<", "4 ranks"] {
        assert!(s.contains(want), "{want} missing from\n{s}");
    }
    // Every rank sent to every other (the rsr_check selection round).
    assert!(s.matches("<g class=\"link\">").count() >= 12, "{s}");
    let out = run(
        GWRUN,
        &[
            "-f",
            &m,
            "-n",
            "4",
            "--report",
            html.to_str().unwrap(),
            &example("rsr_check"),
            "select",
        ],
        &[("GW_METHODS", "self,tcp")],
        Duration::from_secs(90),
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let h = std::fs::read_to_string(&html).expect("the report was written");
    assert!(h.contains("<!DOCTYPE html>") && h.contains("<svg"), "{h}");
    // Rows between ranks of different hosts are tcp with a measured round trip.
    let tcp_rows: Vec<&str> = h.lines().filter(|l| l.contains(">tcp</td>")).collect();
    assert!(tcp_rows.len() >= 6, "{h}");
    assert!(
        tcp_rows.iter().all(|l| !l.ends_with("<td>–</td></tr>")),
        "a tcp link without a round trip:\n{h}"
    );
    assert!(h.contains("<td>h3</td><td>b</td>"), "{h}");
    // A name the report cannot write is refused before anything starts.
    let bad = run(
        GWRUN,
        &["-n", "1", "--report", "/tmp/x.png", "true"],
        &[],
        Duration::from_secs(30),
    );
    assert_ne!(bad.code, 0);
    assert!(bad.stderr.contains(".svg or .html"), "{}", bad.stderr);
    for f in [&svg, &html] {
        let _ = std::fs::remove_file(f);
    }
    let _ = std::fs::remove_file(&m);
}

/// A multicast startpoint (one request to every rank) crosses to each
/// remote site once and to each other host once per request, whatever the
/// group's size, and every member gets every request in order (the example
/// checks that; here the per-link message counts are summed).
#[test]
fn multicast_crosses_each_site_and_host_once() {
    let m = machines(
        "mc",
        "[site a] start=local\nh1:2\nh2\n[site b] start=local\nh3\n[site c] start=local\nh4:2\n",
    );
    let k = 40;
    let sum = |stdout: &str, col: usize| -> (usize, u64) {
        let rows: Vec<Vec<u64>> = stdout
            .lines()
            .filter_map(|l| l.strip_prefix("MCAST "))
            .map(|l| {
                l.split_whitespace()
                    .filter_map(|x| x.parse().ok())
                    .collect()
            })
            .collect();
        (rows.len(), rows.iter().map(|r| r[col]).sum())
    };
    let out = run(
        GWRUN,
        &[
            "-f",
            &m,
            "-n",
            "6",
            &example("rsr_check"),
            "multicast",
            &k.to_string(),
        ],
        &[],
        Duration::from_secs(90),
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    // Three sites: each request crosses to the two other sites once.
    assert_eq!(sum(&out.stdout, 1), (6, 2 * k), "{}", out.stdout);
    let out = run(
        GWRUN,
        &[
            "-n",
            "7",
            "--emulate-hosts",
            "4",
            &example("rsr_check"),
            "multicast",
            &k.to_string(),
        ],
        &[],
        Duration::from_secs(90),
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    // One site, four hosts: three host crossings per request.
    assert_eq!(sum(&out.stdout, 2), (7, 3 * k), "{}", out.stdout);
    assert_eq!(sum(&out.stdout, 1).1, 0);
    let _ = std::fs::remove_file(&m);
}
