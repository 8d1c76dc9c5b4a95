//! Failover to a relay: a testbed of 2 sites x 2 hosts, no firewall, one
//! rank per host. In a job of several sites every site's gateway runs a
//! relay (`GW_RELAYS=all`, the default), which hosts of other sites use
//! only when every direct stack to a host behind it broke. The rank on
//! s0h1 streams 100 000 numbered messages to the rank on s1h1; at a
//! random point the test drops *every* packet between s0h1 and s1h1
//! (tcp and udp, both ways, nftables in s0h1's namespace), so neither
//! `encrypt+tcp` nor `encrypt+udp` works any more, while both hosts still
//! reach the other site's gateway.
//!
//! Asserted: the link fails over to `encrypt+relay(s1h0)+tcp`, the job
//! passes, the receiver got every number exactly once and in order and
//! nothing more, and `--stats`' row of the sender names the relay for
//! that pair.
//!
//! Needs root: skipped by the project's rule otherwise (a failure under CI=true).

use gridwire_testbed::harness::{self, Testbed};
use std::path::PathBuf;

mod common;
use common::failover::{build_c, run_and_cut, Cut, CutPlan, STREAM_C};

#[test]
fn a_pair_cut_everywhere_but_through_the_gateways_goes_on_over_the_relay() {
    if !gridwire_testkit::is_root() {
        gridwire_testkit::skip("gw-testbed needs root (namespaces, mounts, bridges, nftables)");
        return;
    }
    if let Err(why) = harness::ready() {
        gridwire_testkit::skip(&why);
        return;
    }
    let gwrun = common::build_bin("gridwire-launch", "gwrun");
    let dir = PathBuf::from(format!(
        "{}/wan-relay-failover-{}",
        env!("CARGO_TARGET_TMPDIR"),
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let stream = build_c(&dir, "stream_check", STREAM_C);
    let tb = Testbed::up(&["--sites", "2", "--hosts", "2"]).unwrap_or_else(|e| panic!("{e}"));
    let gwrun = gwrun.display().to_string();
    let stream = stream.display().to_string();
    let cut_at = (20_000 + (std::process::id() * 7919) % 60_000).to_string();
    eprintln!("cutting at message {cut_at}");
    let plan = CutPlan {
        host: "s0h1",
        peer: "s1h1",
        how: Cut::AllDrop,
    };
    // udp gives up after 4 unanswered timeouts (about 1.5 s) instead of 12.
    let o = run_and_cut(
        &tb,
        &gwrun,
        4,
        &["GW_LINK_TIMEOUT=2", "GW_UDP_RETRIES=4"],
        &[&stream, &cut_at, "s0h1", "s1h1"],
        &plan,
    );
    let all = o.all();
    // What failed over, for the log.
    for l in all
        .lines()
        .filter(|l| l.contains("failing over") || l.contains("now over"))
    {
        eprintln!("{l}");
    }
    assert!(o.cut, "the sender never reached the cut point:\n{all}");
    assert!(o.ok, "the job failed after the cut:\n{all}");
    assert!(
        o.stdout
            .contains("RECEIVED 100000 BAD 0 FIRST_BAD -1 EXTRA 0"),
        "every number once, in order, nothing more:\n{all}"
    );
    assert!(
        all.contains("failing over") && all.contains("now over encrypt+relay(s1h0)+tcp"),
        "the link was replaced by the relay on s1h0:\n{all}"
    );
    // The sender's row of `--stats` (`gwrun: RANK cells...`) names the relay.
    let sender_row = o.stderr.lines().find(|l| {
        let w: Vec<&str> = l.split_whitespace().collect();
        l.starts_with("gwrun: ") && w.len() > 2 && l.contains("relay(s1h0)")
    });
    assert!(
        sender_row.is_some(),
        "no row of --stats names the relay on s1h0:\n{all}"
    );
    drop(tb);
}
