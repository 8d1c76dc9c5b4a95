//! Transform stacks end to end, through `gwrun` on this machine: large
//! checksummed payloads over `encrypt+tcp`, `encrypt+udp` and
//! `compress+encrypt+tcp` named in GW_METHODS; `GW_ENCRYPT=always` choosing
//! `encrypt+tcp` between emulated hosts and shm within one, shown by
//! `--stats`; bad stack names rejected with a clear error.

mod common;

use common::{example, run, Out, GWRUN};
use std::time::Duration;

fn gwrun(args: &[&str], envs: &[(&str, &str)]) -> Out {
    let mut a = vec!["--timeout", "90"];
    a.extend_from_slice(args);
    run(GWRUN, &a, envs, Duration::from_secs(120))
}

fn assert_ok(o: &Out) {
    assert_eq!(o.code, 0, "stdout:\n{}\nstderr:\n{}", o.stdout, o.stderr);
}

#[test]
fn large_payloads_intact_through_every_stack() {
    let prog = example("rsr_check");
    for stack in ["encrypt+tcp", "encrypt+udp", "compress+encrypt+tcp"] {
        let o = gwrun(
            &["-n", "3", &prog, "big", &(8usize << 20).to_string()],
            &[("GW_METHODS", stack)],
        );
        assert_ok(&o);
        let oks: Vec<&str> = o.stdout.lines().filter(|l| l.starts_with("BIG")).collect();
        assert_eq!(oks.len(), 2, "{stack}: {}", o.stdout);
        for l in oks {
            assert!(l.ends_with(&format!("via {stack}")), "{l}");
        }
    }
}

#[test]
fn encrypt_always_between_emulated_hosts_shm_within() {
    let prog = example("rsr_check");
    let o = gwrun(
        &[
            "-n",
            "4",
            "--emulate-hosts",
            "2",
            "--stats",
            &prog,
            "select",
        ],
        &[("GW_ENCRYPT", "always")],
    );
    assert_ok(&o);
    let mut n = 0;
    for l in o.stdout.lines().filter(|l| l.starts_with("SELECT ")) {
        let w: Vec<&str> = l.split_whitespace().collect();
        let (s, d): (u32, u32) = (w[1].parse().unwrap(), w[2].parse().unwrap());
        let want = if s == d {
            "self"
        } else if s / 2 == d / 2 {
            "shm"
        } else {
            "encrypt+tcp"
        };
        assert_eq!(w[3], want, "{l}");
        n += 1;
    }
    assert_eq!(n, 16, "{}", o.stdout);
    assert!(
        o.stderr
            .contains("encrypt+tcp = TCP sockets, encrypted (AEAD)"),
        "{}",
        o.stderr
    );
    // The default (`sites`) in a one-site job: no stack at all.
    let o = gwrun(&["-n", "4", "--emulate-hosts", "2", &prog, "select"], &[]);
    assert_ok(&o);
    assert!(!o.stdout.contains("encrypt"), "{}", o.stdout);
}

#[test]
fn bad_stacks_are_clear_errors() {
    let prog = example("rsr_check");
    for (stack, says) in [
        ("encrypt+compress+tcp", "in this order: compress+encrypt"),
        ("rot13+tcp", "rot13+tcp"),
        ("encrypt+shm", "transforms stack on tcp, udp"),
    ] {
        let o = gwrun(&["-n", "1", &prog, "select"], &[("GW_METHODS", stack)]);
        assert_ne!(o.code, 0, "{stack}");
        assert!(o.stderr.contains(says), "{stack}: {}", o.stderr);
    }
}
