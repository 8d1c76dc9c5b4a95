//! One process sends requests to itself through a chosen method and
//! delivers them: the instructions per message of the send + poll + dispatch
//! path, without a second process. For `valgrind --tool=callgrind`:
//! `GW_METHODS=shm valgrind --tool=callgrind target/release/examples/rsr_loop 100000`.

use gridwire_core::Context;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let ctx = Context::init().expect("init");
    let got = Arc::new(AtomicU64::new(0));
    let g = got.clone();
    ctx.register_handler(1, move |_, _| {
        g.fetch_add(1, Ordering::Relaxed);
    })
    .expect("handler");
    let sp = ctx.startpoint(0).expect("self");
    let t = std::time::Instant::now();
    for i in 0..n {
        ctx.rsr(&sp, 1, &i.to_le_bytes()).expect("rsr");
        ctx.wait(|| got.load(Ordering::Relaxed) == i + 1);
    }
    println!(
        "{n} requests to self over {}: {:.1} ns each (send + poll + dispatch)",
        ctx.method_to(0).unwrap_or("?"),
        t.elapsed().as_nanos() as f64 / n as f64
    );
    ctx.finalize().expect("finalize");
}
