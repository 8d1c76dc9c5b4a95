//! The one-sided progress thread: while a process has windows, a thread of
//! the library drives the runtime's progress, so a passive-target epoch
//! (lock, put, unlock from another rank) completes while this process
//! computes without calling MPI.
//!
//! The thread never spins: it runs one round of progress, and when that
//! found nothing it sleeps in [`Context::sleep_until_work`] (woken by a
//! readable socket, or after a slice of 1–20 ms, which bounds how late it
//! notices a request over shared memory). A thread of the program that is
//! inside MPI keeps polling as before; the runtime lets whichever thread
//! holds the progress lock deliver, so the two never deliver at once.
//!
//! Started by the first window (`GW_MPI_RMA_PROGRESS=thread`, the default;
//! `none` gives MPICH's default behaviour: a target applies operations only
//! when it enters the library), stopped and joined when the last window is
//! freed and at `MPI_Finalize`.

use gridwire_core::Context;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

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
            .spawn(move || {
                while !flag.load(Ordering::Acquire) {
                    if thread_ctx.progress() == 0 {
                        thread_ctx.sleep_until_work();
                    }
                }
            });
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
