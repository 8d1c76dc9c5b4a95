//! The `udp` method over real impaired links between two network namespaces
//! that each test creates and removes itself (root only; elsewhere the
//! shared skip rule of `gridwire_testkit::skip`: SKIPPED outside CI, a
//! failure under `CI=true`):
//!
//! * a veth pair with kernel random drops from nftables (`numgen random`),
//!   when `nft` is installed;
//! * the TUN link emulator `gw-linkemu` (delay, jitter, reordering, loss,
//!   duplication) — the kernel here has no `netem`.
//!
//! Rank r runs in namespace r through `ip netns exec` under one `gwrun`
//! (the PMI socket is a file descriptor, so it crosses namespaces). Traffic
//! stays inside the namespaces the test created. Namespaces are deleted by
//! a guard's `Drop`, so also when an assertion fails; a run that was killed
//! (no `Drop`) leaves them behind, so each test first sweeps namespaces of
//! this exact naming pattern whose test process is gone.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const GWRUN: &str = env!("CARGO_BIN_EXE_gwrun");

fn bin_dir() -> PathBuf {
    PathBuf::from(GWRUN).parent().unwrap().to_path_buf()
}

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
        || Command::new(tool)
            .arg("help")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok()
}

/// Why the test cannot run here, if it cannot.
fn skip_reason(tools: &[&str]) -> Option<String> {
    // SAFETY: geteuid has no arguments and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root".into());
    }
    for t in tools {
        if !have(t) {
            return Some(format!("`{t}` is not installed"));
        }
    }
    None
}

fn ip(args: &[&str]) {
    let o = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        o.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Owns the namespaces (and a link emulator) of one test; removes them on drop.
struct Netns {
    names: [String; 2],
    emu: Option<Child>,
}

/// The test process id in a namespace name this file makes:
/// `gwu<PID><tag><0|1>`, tag one lowercase ASCII letter. Anything else
/// (another tool's namespace, a testbed's `gwtb-…`) is `None`, so the sweep
/// never touches a namespace it did not make.
fn owner_pid(ns_name: &str) -> Option<u32> {
    let rest = ns_name.strip_prefix("gwu")?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let (pid, tail) = rest.split_at(digits);
    let tail = tail.as_bytes();
    // Leading zero: `process::id()` never formats one, so it is not ours.
    if pid.is_empty() || pid.starts_with('0') || tail.len() != 2 {
        return None;
    }
    if !tail[0].is_ascii_lowercase() || !matches!(tail[1], b'0' | b'1') {
        return None;
    }
    pid.parse().ok()
}

/// Removes namespaces left by earlier runs of these tests that were killed
/// before their guard's `Drop` ran: `gwu<PID>…` whose process no longer
/// exists. Namespaces of this process (other tests run in parallel threads)
/// and of any live process (a concurrent run) are left alone. A recycled pid
/// only delays the sweep of that run's namespaces to a later run.
fn sweep_stale_namespaces() {
    let Ok(dir) = std::fs::read_dir("/run/netns") else {
        return; // no named namespace exists at all
    };
    let own = std::process::id();
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(pid) = owner_pid(name) else { continue };
        if pid == own || std::path::Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let ok = Command::new("ip")
            .args(["netns", "del", name])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        println!(
            "swept stale namespace {name} of gone test process {pid}{}",
            if ok { "" } else { " (ip netns del failed)" }
        );
    }
}

#[test]
fn stale_namespace_names_are_parsed_strictly() {
    assert_eq!(owner_pid("gwu1234v0"), Some(1234));
    assert_eq!(owner_pid("gwu7t1"), Some(7));
    assert_eq!(owner_pid(&Netns::names("v")[1]), Some(std::process::id()));
    for other in [
        "gwu",
        "gwuv0",
        "gwu12v",
        "gwu12v2",
        "gwu12V0",
        "gwu12vv0",
        "gwu12v0x",
        "gwu012v0",
        "gwu12-0",
        "xgwu12v0",
        "gwtb-3-1",
        "gwu99999999999v0",
        "gwu12v0\n",
        "",
    ] {
        assert_eq!(owner_pid(other), None, "{other:?}");
    }
}

impl Netns {
    fn names(tag: &str) -> [String; 2] {
        let p = std::process::id();
        [format!("gwu{p}{tag}0"), format!("gwu{p}{tag}1")]
    }

    fn create(tag: &str) -> Netns {
        // Once per process: tests run in parallel threads and would race
        // over the same stale names.
        static SWEEP: std::sync::Once = std::sync::Once::new();
        SWEEP.call_once(sweep_stale_namespaces);
        let n = Netns {
            names: Self::names(tag),
            emu: None,
        };
        for ns in &n.names {
            ip(&["netns", "add", ns]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        n
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        if let Some(mut c) = self.emu.take() {
            // SAFETY: signals the emulator child we started, by its pid.
            unsafe { libc::kill(c.id() as libc::pid_t, libc::SIGTERM) };
            let end = Instant::now() + Duration::from_secs(5);
            while Instant::now() < end && matches!(c.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        for ns in &self.names {
            let _ = Command::new("ip")
                .args(["netns", "del", ns])
                .stderr(Stdio::null())
                .status();
        }
    }
}

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Runs `udp_check args` as 2 ranks, rank r in `ns[r]` bound to `addrs[r]`.
fn gwrun_across(ns: &[String; 2], addrs: [&str; 2], args: &str, envs: &[(&str, &str)]) -> Out {
    let prog = bin_dir().join("examples").join("udp_check");
    assert!(
        prog.exists(),
        "{} missing: build the workspace examples first",
        prog.display()
    );
    let script = format!(
        "if [ \"$PMI_RANK\" = 0 ]; then NS={}; A={}; else NS={}; A={}; fi; exec ip netns exec $NS env GW_UDP_ADDR=$A {} {args}",
        ns[0],
        addrs[0],
        ns[1],
        addrs[1],
        prog.display()
    );
    let mut cmd = Command::new(GWRUN);
    cmd.args(["--timeout", "150", "-n", "2", "sh", "-c", &script]);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("GW_")) {
        cmd.env_remove(k);
    }
    cmd.env_remove("MPIEXEC_TIMEOUT").env("GW_METHODS", "udp");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let start = Instant::now();
    let mut child = cmd.spawn().expect("spawn gwrun");
    let (mut so, mut se) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
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
        if start.elapsed() > Duration::from_secs(180) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("gwrun did not finish within 180 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Out {
        code: status.code().unwrap_or(-1),
        stdout: t1.join().unwrap(),
        stderr: t2.join().unwrap(),
    }
}

fn check_stream(o: &Out, n: u64) {
    assert_eq!(
        o.code, 0,
        "job failed\nstdout:\n{}\nstderr:\n{}",
        o.stdout, o.stderr
    );
    let lines: Vec<&str> = o
        .stdout
        .lines()
        .filter(|l| l.starts_with("STREAM"))
        .collect();
    assert_eq!(lines.len(), 2, "{}", o.stdout);
    for l in lines {
        assert!(
            l.contains(&format!("got={n} ")) && l.ends_with("method=udp"),
            "{l}"
        );
    }
    assert_eq!(
        o.stdout
            .lines()
            .filter(|l| l.starts_with("ALLREDUCE"))
            .count(),
        2
    );
}

fn messages() -> u64 {
    if cfg!(debug_assertions) {
        1500
    } else {
        10_000
    }
}

#[test]
fn udp_over_veth_with_nftables_random_drop() {
    if let Some(why) = skip_reason(&["ip", "nft"]) {
        return gridwire_testkit::skip(&why);
    }
    let ns = Netns::create("v");
    let (a, b) = (
        format!("gwv{}a", std::process::id() % 100_000),
        format!("gwv{}b", std::process::id() % 100_000),
    );
    ip(&[
        "link",
        "add",
        &a,
        "netns",
        &ns.names[0],
        "type",
        "veth",
        "peer",
        "name",
        &b,
        "netns",
        &ns.names[1],
    ]);
    ip(&["-n", &ns.names[0], "addr", "add", "10.78.0.1/24", "dev", &a]);
    ip(&["-n", &ns.names[1], "addr", "add", "10.78.0.2/24", "dev", &b]);
    ip(&["-n", &ns.names[0], "link", "set", &a, "up"]);
    ip(&["-n", &ns.names[1], "link", "set", &b, "up"]);
    // 5% of incoming UDP dropped by the kernel in both namespaces.
    for n in &ns.names {
        let rules = "table inet gwtest {\n  chain input {\n    type filter hook input priority 0;\n    meta l4proto udp numgen random mod 100 < 5 counter drop\n  }\n}\n";
        let mut c = Command::new("ip")
            .args(["netns", "exec", n, "nft", "-f", "-"])
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("nft");
        std::io::Write::write_all(&mut c.stdin.take().unwrap(), rules.as_bytes()).unwrap();
        let o = c.wait_with_output().unwrap();
        assert!(
            o.status.success(),
            "nft: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let n = messages();
    let o = gwrun_across(
        &ns.names,
        ["10.78.0.1", "10.78.0.2"],
        &format!("stream {n}"),
        &[("GW_UDP_DGRAM", "1472")],
    );
    check_stream(&o, n);
    // The kernel really dropped datagrams on the way.
    let l = Command::new("ip")
        .args(["netns", "exec", &ns.names[1], "nft", "list", "ruleset"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&l.stdout).into_owned();
    let dropped: u64 = text
        .split("packets ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    println!("nftables dropped {dropped} datagrams in {}", ns.names[1]);
    assert!(dropped > 10, "{text}");
}

#[test]
fn udp_over_tun_link_emulator_with_delay_reordering_loss() {
    if let Some(why) = skip_reason(&["ip"]) {
        return gridwire_testkit::skip(&why);
    }
    let emu = bin_dir().join("gw-linkemu");
    if !emu.exists() {
        return gridwire_testkit::skip(&format!(
            "{} not built (cargo build --workspace)",
            emu.display()
        ));
    }
    let mut ns = Netns::create("t");
    let mut child = Command::new(&emu)
        .args([
            "--ns-a",
            &ns.names[0],
            "--ns-b",
            &ns.names[1],
            "--addr-a",
            "10.79.0.1/24",
            "--addr-b",
            "10.79.0.2/24",
        ])
        .args([
            "--delay",
            "2ms",
            "--jitter",
            "500us",
            "--reorder",
            "10",
            "--loss",
            "2",
            "--dup",
            "1",
            "--rate",
            "200mbit",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn gw-linkemu");
    let mut out = child.stdout.take().unwrap();
    ns.emu = Some(child);
    // Wait for READY (the emulator prints it once both devices are up).
    let mut first = [0u8; 5];
    out.read_exact(&mut first)
        .expect("gw-linkemu exited before READY");
    assert_eq!(&first, b"READY");
    let n = messages();
    let o = gwrun_across(
        &ns.names,
        ["10.79.0.1", "10.79.0.2"],
        &format!("stream {n}"),
        &[("GW_UDP_DGRAM", "1472")],
    );
    check_stream(&o, n);
}
