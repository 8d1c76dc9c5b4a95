//! The one-sided progress thread: while a process has windows, a thread of
//! the library drives the runtime's progress, so a passive-target epoch
//! (lock, put, unlock from another rank) completes while this process
//! computes without calling MPI.
//!
//! The thread never spins. While the program polls (it is inside an MPI
//! call) the thread only naps 1 ms at a time, watching the runtime's round
//! counter; when a nap passes without a round, the program computes, and
//! the thread runs rounds of progress itself, sleeping between them in
//! [`Context::sleep_until_work`] (woken by a readable socket, or after a
//! slice of 1–20 ms, which bounds how late it notices a request over shared
//! memory), until it sees rounds it did not make. The runtime lets whichever
//! thread holds the progress lock deliver, so two never deliver at once.
//!
//! Started by the first window (`GW_MPI_RMA_PROGRESS=thread`, the default;
//! `none` gives MPICH's default behaviour: a target applies operations only
//! when it enters the library), stopped and joined when the last window is
//! freed and at `MPI_Finalize`.

use gridwire_core::Context;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// The thread's loop. It stays out of the way while the program itself
/// polls (inside any MPI call): then it only naps 1 ms at a time and looks
/// whether the runtime's round counter moved, without touching a socket
/// (waking on the same readable socket as a spinning thread, on a machine
/// with a core per rank, doubled the latency of a passive-target operation).
/// Once the counter stood still for a nap, the program is computing: the
/// thread drives progress itself, sleeping on the sockets (and shm's slice)
/// between rounds, until it sees rounds it did not make.
fn serve(ctx: &Context, stop: &AtomicBool) {
    let mut serving = false;
    while !stop.load(Ordering::Acquire) {
        if !serving {
            let before = ctx.progress_rounds();
            std::thread::sleep(std::time::Duration::from_millis(1));
            if ctx.progress_rounds() != before {
                continue; // the program polls
            }
            serving = true;
        }
        let before = ctx.progress_rounds();
        let n = ctx.progress();
        let after = ctx.progress_rounds();
        if after.wrapping_sub(before) > 1 {
            serving = false; // rounds besides ours: the program is back
            continue;
        }
        if n == 0 {
            ctx.sleep_until_work();
            if ctx.progress_rounds() != after {
                serving = false;
            }
        }
    }
}

/// The running thread, if any.
#[derive(Default)]
pub(crate) struct ProgressThread {
    running: Mutex<Option<(Arc<AtomicBool>, JoinHandle<()>)>>,
}

impl ProgressThread {
    /// Starts the thread unless it runs (or the parameter says `none`).
    pub(crate) fn ensure_started(&self, ctx: &Context) {
        if !crate::params::rma_progress_thread() {
            return;
        }
        let mut g = self.running.lock().unwrap_or_else(|e| e.into_inner());
        if g.is_some() {
            return;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let (flag, thread_ctx) = (stop.clone(), ctx.clone());
        let spawned = std::thread::Builder::new()
            .name("gw-rma-progress".into())
            .spawn(move || serve(&thread_ctx, &flag));
        match spawned {
            Ok(h) => *g = Some((stop, h)),
            // Without the thread the windows still work, as with `none`.
            Err(e) => gridwire_core::say!(
                "gridwire mpi: rank {}: no one-sided progress thread ({e}); targets progress \
                 when they call MPI",
                ctx.rank()
            ),
        }
    }

    /// Stops and joins the thread, if it runs. Returns after its last round
    /// of progress (at most one sleep slice later).
    pub(crate) fn stop(&self) {
        let taken = self
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some((stop, h)) = taken {
            stop.store(true, Ordering::Release);
            let _ = h.join();
        }
    }

    pub(crate) fn is_running(&self) -> bool {
        self.running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }
}
