//! A departed peer's links are closed and their sockets freed at once, not
//! when the context ends: two contexts joined over tcp in this process
//! talk, then one is reported dead (`Context::peer_departed`, as the PVM
//! coordinator reports a task that died); the survivor's socket to it is
//! gone from the process (its descriptor no longer names that socket, and
//! no descriptor does), and sends to it fail with the reason.

use gridwire_core::params::Params;
use gridwire_core::{Context, Error, JoinSpec, Startpoint};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

type Directory = Arc<Mutex<HashMap<u32, gridwire_core::descriptor::DescriptorTable>>>;

struct Member {
    ctx: Context,
    got: Arc<Mutex<usize>>,
    stop: Arc<AtomicBool>,
    pump: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Member {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(p) = self.pump.take() {
            let _ = p.join();
        }
    }
}

fn join(job: &str, id: u32, dir: &Directory) -> Member {
    let params = Params::from_lookup(|k| match k {
        "GW_METHODS" => Some("tcp".to_string()),
        _ => None,
    })
    .unwrap();
    let ctx = Context::join(
        params,
        JoinSpec {
            job_id: job.into(),
            secret: [7; 32],
            ctx_id: id,
            capacity: 4,
        },
    )
    .unwrap();
    dir.lock().unwrap().insert(id, ctx.table().clone());
    let d = dir.clone();
    ctx.set_table_resolver(move |r| d.lock().unwrap().get(&r).cloned());
    let got = Arc::new(Mutex::new(0));
    let g = got.clone();
    ctx.register_handler(7, move |_, _| *g.lock().unwrap() += 1)
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let (c, s) = (ctx.clone(), stop.clone());
    let pump = std::thread::spawn(move || {
        while !s.load(Ordering::Relaxed) {
            if c.progress() == 0 {
                std::thread::sleep(Duration::from_micros(200));
                c.progress_thorough();
            }
        }
    });
    Member {
        ctx,
        got,
        stop,
        pump: Some(pump),
    }
}

fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// This process's descriptors: number -> what it names (`socket:[inode]`, a path).
fn fds() -> HashMap<u32, String> {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_str()?.parse().ok()?;
            let t = std::fs::read_link(e.path()).ok()?;
            Some((n, t.to_string_lossy().into_owned()))
        })
        .collect()
}

fn sp(ctx: u32) -> Startpoint {
    Startpoint {
        ctx,
        endpoint: gridwire_core::DEFAULT_ENDPOINT,
    }
}

#[test]
fn a_departed_peers_tcp_socket_is_freed_at_once() {
    let dir: Directory = Default::default();
    let job = format!("release{}", std::process::id());
    let a = join(&job, 0, &dir);
    let before_links = fds();
    let b = join(&job, 1, &dir);
    a.ctx.rsr(&sp(1), 7, b"to b").unwrap();
    b.ctx.rsr(&sp(0), 7, b"to a").unwrap();
    eventually("both messages", || {
        *a.got.lock().unwrap() == 1 && *b.got.lock().unwrap() == 1
    });
    // The sockets the two links opened (b's listener and both ends).
    let with_links = fds();
    let link_sockets: HashSet<String> = with_links
        .values()
        .filter(|t| t.starts_with("socket:") && !before_links.values().any(|v| v == *t))
        .cloned()
        .collect();
    assert!(
        !link_sockets.is_empty(),
        "no socket for the links: {with_links:?}"
    );

    // b dies, as far as a is told (b itself is still running).
    a.ctx.peer_departed(1, "task 1 died").unwrap();
    // a's end: the descriptor that held a's connection to b no longer
    // names a socket, and that socket is nowhere in the process.
    let after = fds();
    let freed: Vec<(&u32, &String)> = with_links
        .iter()
        .filter(|(n, t)| {
            t.starts_with("socket:")
                && before_links.get(n) != Some(t)
                && after.get(n).is_some_and(|now| now == "/dev/null")
        })
        .collect();
    assert!(
        !freed.is_empty(),
        "a's socket to b was not freed: {with_links:?} -> {after:?}"
    );
    for (_, sock) in freed {
        assert!(
            !after.values().any(|t| t == sock),
            "{sock} is still open somewhere: {after:?}"
        );
    }
    // Sends to it fail at once with the reason.
    match a.ctx.rsr(&sp(1), 7, b"late") {
        Err(Error::LinkFailed { reason, .. }) => assert!(reason.contains("died"), "{reason}"),
        other => panic!("send to a departed peer: {other:?}"),
    }
    // b's connection was closed under it: its sends to a fail, not hang.
    eventually("b's send to fail", || {
        b.ctx.rsr(&sp(0), 7, &[0u8; 4096]).is_err()
    });
}
