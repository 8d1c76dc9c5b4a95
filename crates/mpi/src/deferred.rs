//! Background progress for nonblocking collectives.
//!
//! A nonblocking collective is a job on its request ([`Req::set_job`]). The
//! thread that waits for the request runs the job itself if nobody has
//! started it (the common `MPI_Ixxx` + `MPI_Wait`: then it costs what the
//! blocking collective costs). The job must still progress when the program
//! does not wait: it computes, or blocks in another call that needs the
//! collective to finish elsewhere first (legal MPI). So one watcher thread
//! per process looks at the jobs a grace period after they were started,
//! and hands each one still not taken to a runner thread of its own.
//!
//! Why not a thread per job at once, as before: with every core busy (two
//! ranks on two cores), each new thread preempted a rank that was polling,
//! and its wake-up another; a nonblocking barrier cost 75–120 µs (3.7 ms
//! while waiting threads still spun beside it) against MPICH's 1 µs. The
//! watcher sleeps on a condition variable while no job is outstanding and
//! wakes at most once per grace period while some are.

use crate::engine::Engine;
use crate::request::Req;
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How long a started job is left to a thread that may wait for it.
pub const GRACE: Duration = Duration::from_micros(200);

#[derive(Default)]
struct Queue {
    /// Jobs by start time (requests whose job may not have been taken yet).
    jobs: VecDeque<(Instant, Arc<Req>)>,
    /// The watcher is blocked waiting for a first job.
    idle: bool,
    started: bool,
}

/// The watcher of one process's outstanding nonblocking collectives.
#[derive(Default)]
pub struct Deferred {
    q: Arc<(Mutex<Queue>, Condvar)>,
}

impl Deferred {
    /// Registers `req` (whose job is set) for background progress.
    pub fn submit(&self, engine: &Arc<Engine>, req: Arc<Req>) -> std::io::Result<()> {
        let (m, cv) = &*self.q;
        let mut q = m.lock().unwrap_or_else(|e| e.into_inner());
        q.jobs.push_back((Instant::now(), req));
        if !q.started {
            let shared = self.q.clone();
            let engine = engine.clone();
            std::thread::Builder::new()
                .name("gw-mpi-nbc-watch".into())
                .spawn(move || watch(&shared, &engine))?;
            q.started = true;
        } else if q.idle {
            cv.notify_one();
        }
        Ok(())
    }
}

fn watch(shared: &(Mutex<Queue>, Condvar), engine: &Arc<Engine>) {
    let (m, cv) = shared;
    let mut q = m.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        // Forget the jobs a waiting thread has taken (or finished).
        while q.jobs.front().is_some_and(|(_, r)| !r.has_job()) {
            q.jobs.pop_front();
        }
        let Some((t, _)) = q.jobs.front() else {
            q.idle = true;
            q = cv.wait(q).unwrap_or_else(|e| e.into_inner());
            q.idle = false;
            continue;
        };
        let age = t.elapsed();
        if age < GRACE {
            q = cv
                .wait_timeout(q, GRACE - age)
                .unwrap_or_else(|e| e.into_inner())
                .0;
            continue;
        }
        let (_, req) = q.jobs.pop_front().expect("front exists");
        drop(q);
        if let Some(job) = req.take_job() {
            // A runner per job: a job blocks until every member has joined
            // the collective, so jobs must not wait for one another.
            let slot = Arc::new(Mutex::new(Some(job)));
            let theirs = slot.clone();
            let engine2 = engine.clone();
            let spawned = std::thread::Builder::new()
                .name("gw-mpi-nbc".into())
                .spawn(move || {
                    let job = theirs.lock().unwrap_or_else(|e| e.into_inner()).take();
                    if let Some(job) = job {
                        let _helper = engine2.helper();
                        job();
                    }
                });
            if spawned.is_err() {
                // No thread to be had: run it here (the watcher is late for
                // others meanwhile, but nothing is lost).
                let job = slot.lock().unwrap_or_else(|e| e.into_inner()).take();
                if let Some(job) = job {
                    let _helper = engine.helper();
                    job();
                }
            }
        }
        q = m.lock().unwrap_or_else(|e| e.into_inner());
    }
}
