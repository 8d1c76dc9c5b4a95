//! The testbed on the real machine: 2 sites x 2 hosts with a 20 ms WAN and
//! a firewalled site, checked from inside the hosts, then removed, and
//! checked that nothing is left. Needs root, sshd, ping, nft and TUN: when
//! any is missing the test is skipped by the project's rule (a failure under
//! CI=true). Bounded: every command has a timeout, and a guard removes the
//! instance whatever happens.

use gridwire_testbed::harness::{self, Testbed};
use std::path::Path;
use std::time::{Duration, Instant};

fn ok(tb: &Testbed, host: &str, args: &[&str]) -> String {
    tb.exec_ok(host, args).unwrap_or_else(|e| panic!("{e}"))
}

/// Smallest round-trip time of a few pings from `from` to `to`, in ms.
fn min_rtt(tb: &Testbed, from: &str, to: &str) -> f64 {
    let out = ok(
        tb,
        from,
        &["ping", "-n", "-q", "-c", "4", "-i", "0.2", "-W", "2", to],
    );
    // rtt min/avg/max/mdev = 40.556/40.699/40.957/0.182 ms
    let line = out
        .lines()
        .find(|l| l.contains("min/avg/max"))
        .unwrap_or_else(|| panic!("no rtt line in ping {from} -> {to}: {out}"));
    let nums = line.split('=').nth(1).expect("rtt values").trim();
    nums.split('/').next().unwrap().parse().expect("min rtt")
}

/// Whether `from` can open a TCP connection to `to`'s sshd within 1 s.
fn tcp_open(tb: &Testbed, from: &str, to: &str) -> bool {
    let probe = format!("echo > /dev/tcp/{to}/22");
    tb.exec(from, &["timeout", "1", "bash", "-c", &probe])
        .unwrap_or_else(|e| panic!("{e}"))
        .status
        .success()
}

fn ns_link(pid: i32, kind: &str) -> Option<String> {
    std::fs::read_link(format!("/proc/{pid}/ns/{kind}"))
        .ok()
        .map(|p| p.to_string_lossy().into_owned())
}

fn ready() -> bool {
    if !gridwire_testkit::is_root() {
        gridwire_testkit::skip("gw-testbed needs root (namespaces, mounts, bridges, nftables)");
        return false;
    }
    for (path, pkg) in [
        ("/usr/bin/ping", "iputils-ping"),
        ("/usr/sbin/nft", "nftables"),
        ("/usr/bin/bash", "bash"),
        ("/usr/bin/mpiexec.mpich", "mpich"),
    ] {
        if !Path::new(path).exists() {
            gridwire_testkit::skip(&format!(
                "{path} is missing (Debian package {pkg}; scripts/install-deps.sh installs it)"
            ));
            return false;
        }
    }
    if let Err(why) = harness::ready() {
        gridwire_testkit::skip(&why);
        return false;
    }
    true
}

#[test]
fn two_sites_with_wan_delay_firewall_ssh_and_clean_down() {
    if !ready() {
        return;
    }
    let started = Instant::now();
    let mut tb = Testbed::up(&[
        "--sites",
        "2",
        "--hosts",
        "2",
        "--wan-delay",
        "20",
        "--firewall",
        "s1",
        "--user",
        "gwtbuser",
        "--mask",
        "/usr/bin/ssh-keyscan",
    ])
    .unwrap_or_else(|e| panic!("{e}"));
    let id = tb.id.clone();
    let config = tb.ssh_config.to_string_lossy().into_owned();
    let hosts = ["login", "s0h0", "s0h1", "s1h0", "s1h1"];
    assert_eq!(tb.hosts, hosts);
    let m = std::fs::read_to_string(&tb.machines).expect("machines file");
    let opts = format!("ssh_options=\"-F {config}\"");
    assert!(
        m.contains(&format!("[site s0] start=ssh {opts}\ns0h0\ns0h1\n")),
        "{m}"
    );
    assert!(
        m.contains(&format!(
            "[site s1] start=ssh gateway=s1h0 {opts}\ns1h0\ns1h1\n"
        )),
        "{m}"
    );

    // Each host: its own hostname, and its init is PID 1 of its own PID namespace.
    let dir = tb.dir();
    let mut init_pids = Vec::new();
    for h in hosts {
        assert_eq!(ok(&tb, h, &["hostname"]), h);
        let seen = ok(&tb, h, &["sh", "-c", "cat /proc/1/comm; echo $$"]);
        let mut lines = seen.lines();
        assert_eq!(lines.next(), Some("gw-testbed"), "PID 1 of {h}");
        let shell_pid: u32 = lines.next().unwrap().parse().unwrap();
        assert!(
            shell_pid < 100,
            "{h}: a shell's pid {shell_pid} is not small"
        );
        let pid: i32 = std::fs::read_to_string(dir.join("hosts").join(h).join("init.pid"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        for kind in ["pid", "net", "mnt", "uts", "ipc"] {
            assert_ne!(
                ns_link(pid, kind),
                ns_link(std::process::id() as i32, kind),
                "{h} shares the machine's {kind} namespace"
            );
        }
        init_pids.push(pid);
    }
    let mut emu_pids = Vec::new();
    for e in std::fs::read_dir(dir.join("linkemu")).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.ends_with(".pid") {
            emu_pids.push(
                std::fs::read_to_string(e.path())
                    .unwrap()
                    .trim()
                    .parse::<i32>()
                    .unwrap(),
            );
        }
    }
    assert_eq!(emu_pids.len(), 3, "one WAN arm per site and one for login");
    let mut namespaces: Vec<String> = init_pids
        .iter()
        .flat_map(|&p| ["net", "mnt", "pid", "uts", "ipc"].map(|k| ns_link(p, k).unwrap()))
        .collect();
    for n in ["router", "s0", "s1"] {
        let path = format!("/run/netns/gwtb-{id}-{n}");
        let ino = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&path).unwrap());
        namespaces.push(format!("net:[{ino}]"));
    }

    // A compute host does not see the project tree nor root's home; login does.
    let manifest = format!("{}/Cargo.toml", env!("CARGO_MANIFEST_DIR"));
    assert!(
        !tb.exec("s0h0", &["test", "-e", &manifest])
            .unwrap()
            .status
            .success(),
        "s0h0 sees {manifest}"
    );
    assert!(tb
        .exec("login", &["test", "-e", &manifest])
        .unwrap()
        .status
        .success());
    assert_eq!(ok(&tb, "s1h1", &["ls", "-A", "/root"]), ".ssh");
    assert_eq!(ok(&tb, "s0h1", &["ls", "-A", "/usr/local"]), "");
    let keyscan = ["test", "-x", "/usr/bin/ssh-keyscan"];
    assert!(
        !tb.exec("s0h1", &keyscan).unwrap().status.success(),
        "--mask"
    );
    assert!(tb.exec("login", &keyscan).unwrap().status.success());
    let top = Path::new(env!("CARGO_MANIFEST_DIR"))
        .components()
        .nth(1)
        .map(|c| format!("/{}", c.as_os_str().to_string_lossy()))
        .unwrap();
    // Compute hosts get an empty /var with only their own /var/tmp (a
    // clone under /var/tmp, as a fresh clone may be, must still be hidden).
    let expected = if top == "/var" { "tmp" } else { "" };
    assert_eq!(
        ok(&tb, "s1h1", &["ls", "-A", &top]),
        expected,
        "s1h1 sees files in {top}"
    );
    let tree = env!("CARGO_MANIFEST_DIR");
    assert!(
        !tb.exec("s1h1", &["test", "-e", tree])
            .unwrap()
            .status
            .success(),
        "s1h1 sees the project tree {tree}"
    );

    // ssh from login to every host (s1h1 through its site's gateway).
    for h in hosts {
        let out = ok(
            &tb,
            "login",
            &["ssh", "-F", &config, "-o", "BatchMode=yes", h, "hostname"],
        );
        assert_eq!(out, h, "ssh -F {config} {h}");
    }

    // A non-root user (known to the hosts only) logs in with the same config,
    // also through the gateway, and from host to host.
    let who = ok(
        &tb,
        "login",
        &[
            "/usr/sbin/runuser",
            "-u",
            "gwtbuser",
            "--",
            "ssh",
            "-F",
            &config,
            "s1h1",
            "id -un; hostname; ssh s1h0 id -un",
        ],
    );
    assert_eq!(who, "gwtbuser\ns1h1\ngwtbuser", "non-root ssh");

    // A launcher that runs a plain `ssh` (MPICH's Hydra) starts on every
    // compute host, firewalled ones included, through the ssh wrappers.
    let bin = tb.dir().join("ssh/bin");
    let hostfile = tb.dir().join("hostfile");
    let path = format!("PATH={}:/usr/bin:/bin", bin.display());
    let out = ok(
        &tb,
        "login",
        &[
            "env",
            &path,
            "mpiexec.mpich",
            "-launcher",
            "ssh",
            "-f",
            hostfile.to_str().unwrap(),
            "-wdir",
            "/tmp",
            "-n",
            "4",
            "hostname",
        ],
    );
    let mut seen: Vec<&str> = out.lines().collect();
    seen.sort();
    assert_eq!(
        seen,
        ["s0h0", "s0h1", "s1h0", "s1h1"],
        "Hydra across the testbed"
    );

    // The WAN: 20 ms one way between sites (and between login and a site);
    // within a site, a bridge.
    let wan = min_rtt(&tb, "s0h0", "s1h0");
    assert!(wan >= 40.0, "RTT s0h0 -> s1h0 is {wan} ms, below 2 x 20 ms");
    let login_wan = min_rtt(&tb, "login", "s0h1");
    assert!(login_wan >= 40.0, "RTT login -> s0h1 is {login_wan} ms");
    let lan = min_rtt(&tb, "s0h0", "s0h1");
    assert!(lan < 5.0, "RTT within site s0 is {lan} ms");

    // The firewall of s1: only its gateway s1h0 is reachable from outside.
    assert!(tcp_open(&tb, "login", "s1h0"));
    assert!(tcp_open(&tb, "s0h0", "s1h0"));
    assert!(!tcp_open(&tb, "login", "s1h1"), "login reaches s1h1");
    assert!(!tcp_open(&tb, "s0h0", "s1h1"), "s0h0 reaches s1h1");
    assert!(tcp_open(&tb, "s1h0", "s1h1"), "inside s1");
    assert!(tcp_open(&tb, "s1h1", "s0h1"), "out of s1");

    // A partitioned host is cut off from its site and from other sites,
    // until healed.
    tb.partition("s0h1").unwrap_or_else(|e| panic!("{e}"));
    assert!(!tcp_open(&tb, "s0h0", "s0h1"), "partitioned, same site");
    assert!(!tcp_open(&tb, "s1h0", "s0h1"), "partitioned, other site");
    tb.heal("s0h1").unwrap_or_else(|e| panic!("{e}"));
    assert!(tcp_open(&tb, "s1h0", "s0h1"), "healed");

    // A second instance, up while the first one is down-ed: its hosts'
    // mount namespaces, copied from the machine's, hold copies of the first
    // one's namespace files (router, edges, login), which must not keep
    // those namespaces alive (unlinking the files detaches the copies).
    let mut tb2 = Testbed::up(&["--sites", "1", "--hosts", "1"]).unwrap_or_else(|e| panic!("{e}"));

    // down leaves nothing: no state, no named namespace, no process, no
    // namespace still in use or mounted anywhere, no mount.
    let pids = tb.pids();
    tb.down().unwrap_or_else(|e| panic!("{e}"));
    harness::reap(&pids);
    assert!(!dir.exists(), "{} is left", dir.display());
    let left: Vec<String> = std::fs::read_dir("/run/netns")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&format!("gwtb-{id}-")))
                .collect()
        })
        .unwrap_or_default();
    assert!(left.is_empty(), "namespaces left: {left:?}");
    for &p in init_pids.iter().chain(&emu_pids) {
        let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
        assert!(stat.is_empty(), "process {p} is left: {stat}");
    }
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        assert!(
            !cmdline.contains(&format!("gwtb-{id}-")) && !cmdline.contains(&format!("--id {id} ")),
            "process {pid} of the instance is left: {cmdline}"
        );
        for kind in ["net", "mnt", "pid", "uts", "ipc"] {
            if let Some(l) = ns_link(pid, kind) {
                assert!(
                    !namespaces.contains(&l),
                    "process {pid} ({cmdline}) is in {l}"
                );
            }
        }
    }
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let info = std::fs::read_to_string(e.path().join("mountinfo")).unwrap_or_default();
        for n in &namespaces {
            assert!(
                !info.contains(&format!(" {n} ")),
                "{n} is still mounted in the mount namespace of process {:?}",
                e.file_name()
            );
        }
    }
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(
        !mounts.contains(&format!("gwtb-{id}-")) && !mounts.contains(&format!("gw-testbed/{id}")),
        "mounts left:\n{mounts}"
    );

    // After a crash that lost the state directory, down still finds the
    // instance's processes (by command line) and namespaces (by name).
    let crashed = tb2.id.clone();
    let pids = tb2.pids();
    let host_pid: i32 = std::fs::read_to_string(tb2.dir().join("hosts/s0h0/init.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    std::fs::remove_dir_all(tb2.dir()).unwrap();
    tb2.down().unwrap_or_else(|e| panic!("{e}"));
    harness::reap(&pids);
    assert!(
        !Path::new(&format!("/proc/{host_pid}")).exists(),
        "the init of the crashed instance is left"
    );
    assert!(
        !std::fs::read_dir("/run/netns")
            .map(|d| d.flatten().any(|e| e
                .file_name()
                .to_string_lossy()
                .starts_with(&format!("gwtb-{crashed}-"))))
            .unwrap_or(false),
        "namespaces of the crashed instance are left"
    );

    assert!(
        started.elapsed() < Duration::from_secs(60),
        "the testbed test took {:?}",
        started.elapsed()
    );
}
