//! Generalized requests (`MPI_Grequest_start`, `MPI_Grequest_complete`).
//!
//! A generalized request is an ordinary [`Req`] (so `MPI_Wait`, `MPI_Test`
//! and the array forms wait on it as on any other) in a request handle of
//! its own kind, [`ReqObj::Generalized`], carrying the program's three
//! callbacks. Why a kind of its own rather than a flag on `Req`: the
//! callbacks are only looked at where a request handle is already taken
//! apart (completion, `MPI_Request_free`, `MPI_Cancel`,
//! `MPI_Request_get_status`), so point-to-point requests pay nothing.
//!
//! The standard's order of calls:
//! - `query_fn` fills the status when a Wait/Test call completes the request
//!   (and for `MPI_Request_get_status` on a completed one); its return value
//!   becomes the status's error;
//! - `free_fn` runs after `query_fn` in that completing call, or, for a
//!   request freed with `MPI_Request_free`, in whichever of
//!   `MPI_Request_free` and `MPI_Grequest_complete` comes last;
//! - `cancel_fn` runs at `MPI_Cancel`, told whether `MPI_Grequest_complete`
//!   was already called.
//!
//! `MPI_Grequest_complete` takes the handle by value, and may come after
//! `MPI_Request_free` made the program's copy `MPI_REQUEST_NULL`: so the
//! live generalized requests are also kept in [`LIVE`], by handle, until
//! they are both complete and released.

use crate::abi::*;
use crate::errors::run;
use crate::handles::{ReqObj, REQS};
use crate::{put, Void};
use gridwire_mpi::{class, err, Req, Result, Status};
use std::collections::HashMap;
use std::ffi::c_int;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

pub type QueryFn = unsafe extern "C" fn(*mut Void, *mut MPI_Status) -> c_int;
pub type FreeFn = unsafe extern "C" fn(*mut Void) -> c_int;
pub type CancelFn = unsafe extern "C" fn(*mut Void, c_int) -> c_int;

/// One generalized request.
pub struct Grequest {
    /// Completion flag the wait functions look at.
    pub req: Arc<Req>,
    query: Option<QueryFn>,
    free: Option<FreeFn>,
    cancel: Option<CancelFn>,
    /// The program's `extra_state` pointer, handed back to each callback
    /// (kept as an integer: it is only ever passed back, never dereferenced).
    extra: usize,
    /// Its key in [`LIVE`] (known once the handle table gave the handle).
    handle: AtomicUsize,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// `MPI_Grequest_complete` was called.
    completed: bool,
    /// The handle was given up: by `MPI_Request_free` or a completing Wait/Test.
    released: bool,
    /// `free_fn` ran.
    freed: bool,
}

/// Live generalized requests by handle (see the module comment).
static LIVE: Mutex<Option<HashMap<MPI_Request, Arc<Grequest>>>> = Mutex::new(None);

fn live() -> std::sync::MutexGuard<'static, Option<HashMap<MPI_Request, Arc<Grequest>>>> {
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

impl Grequest {
    /// Calls `query_fn` and reads the status it filled. The returned
    /// status's error is `query_fn`'s return value (the standard: the
    /// callback does not set the error field itself).
    fn query(&self) -> Status {
        let mut st = MPI_Status {
            MPI_SOURCE: gridwire_mpi::ANY_SOURCE,
            MPI_TAG: gridwire_mpi::ANY_TAG,
            ..Default::default()
        };
        let rc = match self.query {
            // SAFETY: a function the program gave to MPI_Grequest_start, called
            // with its extra_state and a status it may write (the standard's contract).
            Some(f) => unsafe { f(self.extra as *mut Void, &mut st) },
            None => MPI_SUCCESS,
        };
        status_of(&st, rc)
    }

    /// Runs `free_fn` once, if the request is complete and released. Returns its error code.
    fn free_if_done(&self) -> c_int {
        {
            let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
            if !(s.completed && s.released) || s.freed {
                return MPI_SUCCESS;
            }
            s.freed = true;
        }
        if let Some(m) = live().as_mut() {
            m.remove(&self.handle.load(Ordering::Relaxed));
        }
        match self.free {
            // SAFETY: the program's free_fn with its extra_state (the standard's contract).
            Some(f) => unsafe { f(self.extra as *mut Void) },
            None => MPI_SUCCESS,
        }
    }
}

/// The library's status from the C one a `query_fn` filled.
fn status_of(st: &MPI_Status, rc: c_int) -> Status {
    let bytes = (st.internal[0] as u32 as u64) | ((st.internal[1] as u32 as u64) << 32);
    Status {
        source: st.MPI_SOURCE,
        tag: st.MPI_TAG,
        error: rc,
        comm_ctx: 0,
        bytes: bytes as usize,
        cancelled: st.internal[2] != 0,
    }
}

/// A Wait/Test call completed the request (its handle is already gone):
/// `query_fn`, then `free_fn`. An error of `free_fn` is reported if
/// `query_fn` reported none.
pub fn finish(g: &Grequest) -> Status {
    let mut s = g.query();
    g.state.lock().unwrap_or_else(|e| e.into_inner()).released = true;
    let rc = g.free_if_done();
    if s.error == MPI_SUCCESS {
        s.error = rc;
    }
    s
}

/// `MPI_Request_get_status` on a completed request: `query_fn` only.
pub fn peek(g: &Grequest) -> Status {
    g.query()
}

/// `MPI_Request_free`: the handle is gone; `free_fn` runs now if the request is complete.
pub fn release(g: &Grequest) -> Result<()> {
    g.state.lock().unwrap_or_else(|e| e.into_inner()).released = true;
    match g.free_if_done() {
        MPI_SUCCESS => Ok(()),
        rc => Err(err(rc, "the generalized request's free_fn failed")),
    }
}

/// `MPI_Cancel`: `cancel_fn(extra_state, complete)`.
pub fn cancel(g: &Grequest) -> Result<()> {
    let complete = g.state.lock().unwrap_or_else(|e| e.into_inner()).completed;
    let rc = match g.cancel {
        // SAFETY: the program's cancel_fn with its extra_state (the standard's contract).
        Some(f) => unsafe { f(g.extra as *mut Void, complete as c_int) },
        None => MPI_SUCCESS,
    };
    match rc {
        MPI_SUCCESS => Ok(()),
        rc => Err(err(rc, "the generalized request's cancel_fn failed")),
    }
}

mpi_fn!(fn MPI_Grequest_start / PMPI_Grequest_start(query_fn: Option<QueryFn>, free_fn: Option<FreeFn>, cancel_fn: Option<CancelFn>, extra_state: *mut Void, request: *mut MPI_Request) -> c_int {
    run("MPI_Grequest_start", MPI_COMM_WORLD, || {
        crate::handles::mpi()?;
        if request.is_null() {
            return Err(err(class::ARG, "the request pointer is NULL"));
        }
        let g = Arc::new(Grequest {
            req: Arc::new(Req::default()),
            query: query_fn,
            free: free_fn,
            cancel: cancel_fn,
            extra: extra_state as usize,
            handle: AtomicUsize::new(0),
            state: Mutex::new(State::default()),
        });
        let h = REQS.insert(ReqObj::Generalized(g.clone()));
        g.handle.store(h, Ordering::Relaxed);
        live().get_or_insert_with(HashMap::new).insert(h, g);
        // SAFETY: checked non-null output argument.
        unsafe { put(request, h) };
        Ok(())
    })
});

mpi_fn!(fn MPI_Grequest_complete / PMPI_Grequest_complete(request: MPI_Request) -> c_int {
    run("MPI_Grequest_complete", MPI_COMM_WORLD, || {
        let g = live()
            .as_ref()
            .and_then(|m| m.get(&request).cloned())
            .ok_or_else(|| err(class::REQUEST, format!("{request:#x} is not a live generalized request")))?;
        {
            let mut s = g.state.lock().unwrap_or_else(|e| e.into_inner());
            if s.completed {
                return Err(err(class::REQUEST, "MPI_Grequest_complete was already called for this request"));
            }
            s.completed = true;
        }
        g.req.complete();
        match g.free_if_done() {
            MPI_SUCCESS => Ok(()),
            rc => Err(err(rc, "the generalized request's free_fn failed")),
        }
    })
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_status_keeps_count_and_cancelled_and_takes_the_callbacks_error() {
        let mut st = MPI_Status {
            MPI_SOURCE: 3,
            MPI_TAG: 9,
            MPI_ERROR: 77,
            ..Default::default()
        };
        st.internal[0] = 5;
        st.internal[1] = 1;
        st.internal[2] = 1;
        let s = status_of(&st, 42);
        assert_eq!((s.source, s.tag, s.error), (3, 9, 42));
        assert_eq!(s.bytes, (1usize << 32) + 5);
        assert!(s.cancelled);
    }
}
