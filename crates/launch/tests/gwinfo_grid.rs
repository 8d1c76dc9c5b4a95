//! `gwinfo -f MACHINES`: one probe per host of a machines file, started by
//! the test's own gwrun (GW_GWRUN), on `start=local` sites.

mod common;

use common::{run, GWRUN};
use std::path::PathBuf;
use std::time::Duration;

const METHODS: [&str; 4] = ["shm", "tcp", "udp", "self"];

/// gwinfo is a binary of gridwire-core, built next to gwrun.
fn gwinfo() -> String {
    let p = PathBuf::from(GWRUN).parent().unwrap().join("gwinfo");
    assert!(
        p.exists(),
        "{} missing: build it first (cargo build -p gridwire-core --bin gwinfo, or make build-debug)",
        p.display()
    );
    p.to_string_lossy().into_owned()
}

fn machines(name: &str, text: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("gwinfo-{name}-{}.txt", std::process::id()));
    std::fs::write(&p, text).unwrap();
    p
}

const TWO_SITES: &str = "[site a] start=local\nh1\nh2\n[site b] start=local\nh3\n";

#[test]
fn table_names_every_host_site_and_pair() {
    let f = machines("table", TWO_SITES);
    let out = run(
        &gwinfo(),
        &["-f", f.to_str().unwrap()],
        &[("GW_GWRUN", GWRUN)],
        Duration::from_secs(120),
    );
    let _ = std::fs::remove_file(&f);
    let t = &out.stdout;
    assert_eq!(out.code, 0, "stdout:\n{t}\nstderr:\n{}", out.stderr);
    assert!(t.contains("3 host(s) in 2 site(s)"), "{t}");
    // Host rows: rank, site, host, cores.
    for (site, host) in [("a", "h1"), ("a", "h2"), ("b", "h3")] {
        let row = t
            .lines()
            .find(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                w.len() >= 4 && w[1] == site && w[2] == host
            })
            .unwrap_or_else(|| panic!("no row for {host} in site {site}:\n{t}"));
        let cores: u32 = row.split_whitespace().nth(3).unwrap().parse().unwrap();
        assert!(cores >= 1, "{row}");
    }
    // Site matrix: a<->b and a<->a (h1, h2) measured, with a method, a
    // round trip and a bandwidth; b has one host, so no diagonal.
    let site_a = t
        .lines()
        .find(|l| l.starts_with("  a  "))
        .unwrap_or_else(|| panic!("no site row a:\n{t}"));
    let cells: Vec<&str> = site_a.split_whitespace().collect();
    assert_eq!(cells.len(), 7, "a: method rtt bw twice: {site_a}");
    for c in [&cells[1..4], &cells[4..7]] {
        assert!(METHODS.contains(&c[0]), "{site_a}");
        assert!(c[1].ends_with("us") || c[1].ends_with("ms"), "{site_a}");
        assert!(c[2].ends_with("B/s"), "{site_a}");
    }
    // Host matrix: a method for every pair, `self` on the diagonal.
    let header = t
        .lines()
        .position(|l| l.starts_with("Method selected between hosts"))
        .unwrap_or_else(|| panic!("no host matrix:\n{t}"));
    let rows: Vec<Vec<&str>> = t
        .lines()
        .skip(header + 2)
        .take(3)
        .map(|l| l.split_whitespace().collect())
        .collect();
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r.len(), 4, "{r:?}\n{t}");
        assert_eq!(r[0], ["h1", "h2", "h3"][i]);
        for (j, m) in r[1..].iter().enumerate() {
            assert!(METHODS.contains(m), "{r:?}");
            assert_eq!(*m == "self", i == j, "{r:?}");
        }
    }
}

#[test]
fn json_has_hosts_sites_and_measurements() {
    let f = machines("json", TWO_SITES);
    let out = run(
        &gwinfo(),
        &["-f", f.to_str().unwrap(), "--json"],
        &[("GW_GWRUN", GWRUN)],
        Duration::from_secs(120),
    );
    let _ = std::fs::remove_file(&f);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let v: serde_json::Value = serde_json::from_str(out.stdout.trim())
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", out.stdout));
    let hosts = v["hosts"].as_array().unwrap();
    let names: Vec<&str> = hosts.iter().map(|h| h["host"].as_str().unwrap()).collect();
    assert_eq!(names, ["h1", "h2", "h3"]);
    assert_eq!(v["sites"], serde_json::json!(["a", "b"]));
    for h in hosts {
        assert_eq!(h["methods"].as_array().unwrap().len(), 3, "{h}");
    }
    let pairs = v["site_pairs"].as_array().unwrap();
    assert_eq!(pairs.len(), 2, "a-a and a-b: {v}");
    for p in pairs {
        let m = &p["measure"];
        assert!(METHODS.contains(&m["method"].as_str().unwrap_or("")), "{p}");
        assert!(m["rtt_us"].as_f64().unwrap_or(0.0) > 0.0, "{p}");
        assert!(
            m["bandwidth_bytes_per_s"].as_f64().unwrap_or(0.0) > 0.0,
            "{p}"
        );
    }
}

#[test]
fn unreachable_host_fails_in_bounded_time() {
    if std::process::Command::new("ssh")
        .arg("-V")
        .output()
        .is_err()
    {
        gridwire_testkit::skip("no ssh client to try an unreachable host with");
        return;
    }
    // `.invalid` never resolves (RFC 6761): ssh fails at once.
    let f = machines(
        "unreachable",
        "[site a] start=local\nh1\n[site far] start=ssh ssh_options=\"-o ConnectTimeout=3 -o BatchMode=yes\"\nnowhere.invalid\n",
    );
    let out = run(
        &gwinfo(),
        &["-f", f.to_str().unwrap()],
        &[("GW_GWRUN", GWRUN)],
        Duration::from_secs(60),
    );
    let _ = std::fs::remove_file(&f);
    assert_ne!(out.code, 0, "{}", out.stdout);
    assert!(
        out.stderr.contains("nowhere.invalid"),
        "the failure names the host:\n{}",
        out.stderr
    );
    assert!(out.elapsed < Duration::from_secs(30), "{:?}", out.elapsed);
}
