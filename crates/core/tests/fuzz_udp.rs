//! The `udp_authenticated` fuzz target under `cargo test`: every file of the
//! checked-in seed corpus, then property tests of random and mutated inputs.
//! A panic is a bug found (the target asserts its state bounds itself).

use gridwire_core::fuzzing::udp_authenticated;
use proptest::prelude::*;
use std::path::PathBuf;
use std::time::Instant;

fn corpus() -> Vec<(PathBuf, Vec<u8>)> {
    gridwire_testkit::fuzz_corpus("udp_authenticated")
}

#[test]
fn udp_authenticated_replays_the_seed_corpus() {
    let files = corpus();
    assert!(files.len() >= 8, "seed corpus too small: {}", files.len());
    let t = Instant::now();
    for (path, data) in &files {
        eprintln!("{}", path.display());
        udp_authenticated(data);
    }
    let s = t.elapsed().as_secs_f64();
    println!(
        "udp_authenticated: {} corpus inputs in {:.3} s ({:.0} execs/s)",
        files.len(),
        s,
        files.len() as f64 / s
    );
}

fn seeds() -> Vec<Vec<u8>> {
    corpus().into_iter().map(|(_, d)| d).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn udp_authenticated_survives_random_programs(data in proptest::collection::vec(any::<u8>(), 0..1500)) {
        udp_authenticated(&data);
    }

    #[test]
    fn udp_authenticated_survives_mutated_seeds(
        pick in any::<prop::sample::Index>(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..16),
        tail in proptest::collection::vec(any::<u8>(), 0..64),
    ) {
        let seeds = seeds();
        let mut d = seeds[pick.index(seeds.len())].clone();
        for (at, v) in edits {
            if !d.is_empty() {
                let i = at.index(d.len());
                d[i] ^= v;
            }
        }
        d.extend_from_slice(&tail);
        udp_authenticated(&d);
    }
}

/// The harness must reach past the first protocol error on most random
/// programs, or it fuzzes little beyond the parser of one datagram.
#[test]
fn udp_authenticated_random_programs_run_deep() {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let (mut ops, mut alive_ops, mut messages) = (0usize, 0usize, 0usize);
    let t = Instant::now();
    for _ in 0..50 {
        let data: Vec<u8> = (0..2000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let s = gridwire_core::fuzzing::udp::udp_authenticated_stats(&data);
        ops += s.ops;
        alive_ops += s.failed_at.unwrap_or(s.ops);
        messages += s.messages;
        if let Some(why) = &s.reason {
            println!(
                "link failed after {} operations (op {:?}): {why}",
                s.failed_at.unwrap_or(0),
                s.failed_op.map(|o| o & 0x7f)
            );
        }
    }
    println!(
        "random programs: 50 of 2000 bytes in {:.3} s ({:.0} execs/s): {ops} operations, {alive_ops} before the link failed, {messages} messages delivered",
        t.elapsed().as_secs_f64(),
        50.0 / t.elapsed().as_secs_f64()
    );
    assert!(
        alive_ops * 4 >= ops,
        "{alive_ops} of {ops} operations ran on a live link"
    );
}

/// A longer random run (not part of `cargo test`): `GW_FUZZ_SECS` seconds
/// (default 60) of random and mutated programs, printing the rate.
/// `cargo test --release -p gridwire-core --test fuzz_udp -- --ignored --nocapture`
#[test]
#[ignore]
fn udp_authenticated_long_random_run() {
    let secs: u64 = std::env::var("GW_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let seeds = seeds();
    let mut x = u64::from(std::process::id()) | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let t = Instant::now();
    let (mut runs, mut ops) = (0u64, 0u64);
    while t.elapsed().as_secs() < secs {
        let len = (next() % 4096) as usize;
        let mut d: Vec<u8> = if next() % 2 == 0 {
            (0..len).map(|_| next() as u8).collect()
        } else {
            let mut d = seeds[(next() as usize) % seeds.len()].clone();
            for _ in 0..(next() % 32) {
                if !d.is_empty() {
                    let i = (next() as usize) % d.len();
                    d[i] ^= next() as u8;
                }
            }
            d
        };
        d.truncate(4096);
        ops += gridwire_core::fuzzing::udp::udp_authenticated_stats(&d).ops as u64;
        runs += 1;
    }
    let s = t.elapsed().as_secs_f64();
    println!(
        "udp_authenticated: {runs} runs ({:.0} execs/s, {:.0} operations/s) in {s:.0} s, no panic, bounds held",
        runs as f64 / s,
        ops as f64 / s
    );
}
