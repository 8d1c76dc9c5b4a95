//! Dynamic membership: contexts that join a running job, learn each other's
//! descriptor tables on demand, leave or die, with the others told.
//!
//! Several contexts live in this one process (each with its own methods and
//! a thread driving its progress), which is enough to exercise the real
//! tcp and shm links between them.

use gridwire_core::descriptor::DescriptorTable;
use gridwire_core::params::Params;
use gridwire_core::{Context, Error, JoinSpec, MembershipKind, Startpoint, TableSource};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

type Directory = Arc<Mutex<HashMap<u32, DescriptorTable>>>;
type Inbox = Arc<Mutex<Vec<(u32, Vec<u8>)>>>;
type Events = Arc<Mutex<Vec<(MembershipKind, u32, String)>>>;

struct Member {
    ctx: Context,
    inbox: Inbox,
    events: Events,
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

/// Joins job `job` as `id`, registers in the shared directory (what a
/// membership service would keep) and resolves peers from it on demand.
fn join(job: &str, secret: [u8; 32], id: u32, methods: &str, dir: &Directory) -> Member {
    let methods = methods.to_string();
    let params = Params::from_lookup(|k| match k {
        "GW_METHODS" => Some(methods.clone()),
        _ => None,
    })
    .unwrap();
    let ctx = Context::join(
        params,
        JoinSpec {
            job_id: job.into(),
            secret,
            ctx_id: id,
            capacity: 16,
        },
    )
    .unwrap();
    assert!(ctx.is_dynamic());
    dir.lock().unwrap().insert(id, ctx.table().clone());
    let d = dir.clone();
    ctx.set_table_resolver(move |r| d.lock().unwrap().get(&r).cloned());
    let inbox: Inbox = Default::default();
    let ib = inbox.clone();
    ctx.register_handler(7, move |_, req| {
        ib.lock().unwrap().push((req.src, req.payload.to_vec()))
    })
    .unwrap();
    let events: Events = Default::default();
    let ev = events.clone();
    ctx.subscribe_membership(move |_, e| {
        ev.lock().unwrap().push((e.kind, e.peer, e.reason.clone()))
    });
    let stop = Arc::new(AtomicBool::new(false));
    let (c, s) = (ctx.clone(), stop.clone());
    let pump = std::thread::spawn(move || {
        while !s.load(Ordering::Relaxed) {
            // After an idle pause, a thorough round (as `Context::wait`
            // does): shm looks for new senders only then, or now and then.
            if c.progress() == 0 {
                std::thread::sleep(Duration::from_micros(200));
                c.progress_thorough();
            }
        }
    });
    Member {
        ctx,
        inbox,
        events,
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

fn sp(ctx: u32) -> Startpoint {
    Startpoint {
        ctx,
        endpoint: gridwire_core::DEFAULT_ENDPOINT,
    }
}

fn secret(b: u8) -> [u8; 32] {
    [b; 32]
}

fn job(name: &str) -> String {
    format!("memb{}{name}", std::process::id())
}

fn join_send_leave(methods: &str) {
    let dir: Directory = Default::default();
    let j = job(&methods.replace(',', ""));
    let a = join(&j, secret(1), 0, methods, &dir);
    let b = join(&j, secret(1), 1, methods, &dir);
    b.ctx.rsr(&sp(0), 7, b"hello from 1").unwrap();
    eventually("a's message", || !a.inbox.lock().unwrap().is_empty());
    assert_eq!(a.inbox.lock().unwrap()[0], (1, b"hello from 1".to_vec()));
    // A context that joins later: nobody was told its table beforehand.
    let c = join(&j, secret(1), 5, methods, &dir);
    c.ctx.rsr(&sp(1), 7, b"late").unwrap();
    eventually("b's message", || !b.inbox.lock().unwrap().is_empty());
    b.ctx.rsr(&sp(5), 7, b"welcome").unwrap();
    eventually("c's message", || !c.inbox.lock().unwrap().is_empty());
    // b learns c's table on demand: over shm always, and over tcp too
    // while failover sequences tcp links (`context/failover.rs`), whose
    // link is opened by the first send rather than taken over from the
    // connection c opened (`Method::existing_link`, unsequenced only).
    assert_eq!(b.ctx.table_source(5), TableSource::Given);
    assert_eq!(c.ctx.table_source(1), TableSource::Given);
    // An id nobody holds: a clear error, not a hang.
    match a.ctx.rsr(&sp(9), 7, b"x") {
        Err(Error::BadStartpoint(m)) => assert!(m.contains("not a member"), "{m}"),
        other => panic!("send to an unknown id: {other:?}"),
    }
    // c leaves: those it has links to hear it, and sends to it fail.
    c.ctx.leave().unwrap();
    eventually("b hears c leave", || {
        b.events
            .lock()
            .unwrap()
            .iter()
            .any(|e| e.0 == MembershipKind::Left && e.1 == 5)
    });
    assert!(b.ctx.has_departed(5));
    match b.ctx.rsr(&sp(5), 7, b"anyone?") {
        Err(Error::LinkFailed {
            peer: 5, reason, ..
        }) => {
            assert!(reason.contains("left"), "{reason}")
        }
        other => panic!("send to a departed peer: {other:?}"),
    }
    // An upper layer reports a death (its coordinator saw b's process go).
    a.ctx.peer_departed(1, "task 1 was killed").unwrap();
    let evs = a.events.lock().unwrap().clone();
    assert!(
        evs.contains(&(MembershipKind::Died, 1, "task 1 was killed".into())),
        "{evs:?}"
    );
    assert!(matches!(
        a.ctx.rsr(&sp(1), 7, b"x"),
        Err(Error::LinkFailed { peer: 1, .. })
    ));
    // Told twice: one event only; and the departed id cannot come back.
    a.ctx.peer_departed(1, "again").unwrap();
    assert_eq!(
        a.events.lock().unwrap().iter().filter(|e| e.1 == 1).count(),
        1
    );
    let t = dir.lock().unwrap()[&1].clone();
    assert!(a.ctx.add_peer(1, t).is_err());
}

#[test]
fn joined_contexts_talk_and_leave_over_tcp() {
    join_send_leave("self,tcp");
}

#[test]
fn joined_contexts_talk_and_leave_over_shm() {
    join_send_leave("self,shm");
}

#[test]
fn a_context_without_the_job_secret_cannot_deliver() {
    let dir: Directory = Default::default();
    let j = job("secret");
    let a = join(&j, secret(3), 0, "self,tcp", &dir);
    let intruder = join(&j, secret(4), 1, "self,tcp", &dir);
    // The send may fail at once or the link may break after the handshake;
    // either way nothing reaches a's handler.
    let _ = intruder.ctx.rsr(&sp(0), 7, b"let me in");
    std::thread::sleep(Duration::from_millis(500));
    assert!(a.inbox.lock().unwrap().is_empty());
    let honest = join(&j, secret(3), 2, "self,tcp", &dir);
    honest.ctx.rsr(&sp(0), 7, b"hi").unwrap();
    eventually("the honest message", || !a.inbox.lock().unwrap().is_empty());
    assert!(a.inbox.lock().unwrap().iter().all(|m| m.0 == 2));
}

#[test]
fn join_checks_its_arguments() {
    let p = || Params::from_lookup(|_| None).unwrap();
    let spec = |id, cap, job: &str| JoinSpec {
        job_id: job.into(),
        secret: secret(1),
        ctx_id: id,
        capacity: cap,
    };
    assert!(Context::join(p(), spec(4, 4, "j")).is_err());
    assert!(Context::join(p(), spec(0, 0, "j")).is_err());
    assert!(Context::join(p(), spec(0, 1 << 20, "j")).is_err());
    assert!(Context::join(p(), spec(0, 4, "../etc")).is_err());
    assert!(Context::join(p(), spec(0, 4, "")).is_err());
}

/// An owning handler keeps the buffer shm reassembled a large message in
/// (no copy), gets small ones too, and a borrowing handler on the same
/// context still sees every byte of either.
#[test]
fn an_owning_handler_keeps_what_shm_reassembled() {
    type Kept = Arc<Mutex<Vec<(bool, Vec<u8>)>>>;
    let dir: Directory = Default::default();
    let j = job("owning");
    let a = join(&j, secret(3), 0, "self,shm", &dir);
    let b = join(&j, secret(3), 1, "self,shm", &dir);
    let kept: Kept = Default::default();
    let k = kept.clone();
    a.ctx
        .register_owning_handler(8, move |_, req| {
            let owned = matches!(req.payload, gridwire_core::Payload::Owned { .. });
            let (buf, start) = req.payload.into_buffer();
            k.lock().unwrap().push((owned, buf[start..].to_vec()));
        })
        .unwrap();
    // 1 MiB: beyond the eager limit, so it comes in fragments.
    let big: Vec<u8> = (0..1 << 20).map(|i: u32| (i * 7 + i / 251) as u8).collect();
    b.ctx.rsr(&sp(0), 8, b"small").unwrap();
    b.ctx.rsr(&sp(0), 8, &big).unwrap();
    b.ctx.rsr(&sp(0), 7, &big).unwrap();
    eventually("both messages of the owning handler", || {
        kept.lock().unwrap().len() == 2
    });
    eventually("the borrowing handler's message", || {
        !a.inbox.lock().unwrap().is_empty()
    });
    let got = kept.lock().unwrap();
    assert_eq!(got[0].1, b"small");
    assert!(
        got[1].0,
        "a reassembled message reaches an owning handler as its buffer"
    );
    assert!(got[1].1 == big, "the kept buffer holds the message");
    assert!(a.inbox.lock().unwrap()[0] == (1, big.clone()));
    drop(got);
    // To itself (the self method), the payload is lent, and still right.
    a.ctx.rsr(&sp(0), 8, b"to me").unwrap();
    eventually("the message to itself", || kept.lock().unwrap().len() == 3);
    let got = kept.lock().unwrap();
    assert!(!got[2].0, "the self method lends its payload");
    assert_eq!(got[2].1, b"to me");
}
