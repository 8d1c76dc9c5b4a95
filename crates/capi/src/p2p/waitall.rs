//! `MPI_Waitall` of plain requests (nonblocking sends and receives): the
//! message-rate loop's completion call (`osu_mbw_mr`: 64 `MPI_Isend` or
//! `MPI_Irecv`, then one `MPI_Waitall`), kept apart from the general
//! `wait_many` so that it allocates nothing and takes no reference count per
//! request.
//!
//! - Completed eager sends and null handles carry no table slot: an array of
//!   only those (the sender's window) finishes without any lock.
//! - The requests of table handles are *moved* out of the handle table under
//!   one lock (`Table::take_each_if`) instead of cloned and removed later:
//!   a clone and its drop are two locked instructions per request. The
//!   handles are the program's to give to this one call until it returns
//!   (using a request in another thread meanwhile is erroneous), so taking
//!   them at the start is invisible to a correct program.
//! - Up to [`ON_STACK`] requests live in an array on the stack; finished
//!   requests nobody else holds go back to the engine's spares in one batch.
//!
//! Persistent and generalized requests (and invalid handles, for the error
//! message) take the general path.

use super::*;
use gridwire_mpi::Mpi;

/// Requests held on the stack (a window of osu's rate and bandwidth loops).
const ON_STACK: usize = 64;

/// What a table handle of the array is (not null, not a completed send).
#[inline]
fn in_table(h: MPI_Request) -> bool {
    h != MPI_REQUEST_NULL && h != REQUEST_DONE_SEND && !handles::is_eager_sent(h)
}

/// `MPI_Waitall`, when every request of `hs` is plain (or null, or a
/// completed send). `None`: not applicable, nothing was done (the caller
/// takes the general path).
///
/// # Safety
/// `statuses` is `MPI_STATUSES_IGNORE` or holds `hs.len()` statuses.
pub(super) unsafe fn wait_all_plain(
    m: &'static Mpi,
    hs: &mut [MPI_Request],
    statuses: *mut MPI_Status,
    on: &mut MPI_Comm,
) -> Option<Result<()>> {
    let set_status = |i: usize, s: &Status| {
        if !statuses.is_null() {
            // SAFETY: a non-ignored statuses array has `hs.len()` entries.
            unsafe { put_status_with_error(statuses.add(i), s) };
        }
    };
    if !hs.iter().any(|&h| in_table(h)) {
        // Null handles and completed sends: both report the empty status.
        for (i, h) in hs.iter_mut().enumerate() {
            *h = MPI_REQUEST_NULL;
            set_status(i, &Status::empty());
        }
        return Some(Ok(()));
    }
    if hs.len() <= ON_STACK {
        let mut reqs: [Option<Arc<Req>>; ON_STACK] = [const { None }; ON_STACK];
        // SAFETY: forwarded contract.
        unsafe { wait_taken(m, hs, &mut reqs[..hs.len()], set_status, on) }
    } else {
        let mut reqs: Vec<Option<Arc<Req>>> = Vec::new();
        reqs.resize_with(hs.len(), || None);
        // SAFETY: forwarded contract.
        unsafe { wait_taken(m, hs, &mut reqs, set_status, on) }
    }
}

/// [`wait_all_plain`] with room for the requests (`reqs`, all None, as
/// long as `hs`).
unsafe fn wait_taken(
    m: &'static Mpi,
    hs: &mut [MPI_Request],
    reqs: &mut [Option<Arc<Req>>],
    set_status: impl Fn(usize, &Status),
    on: &mut MPI_Comm,
) -> Option<Result<()>> {
    let taken = REQS.take_each_if(
        hs,
        |i| in_table(hs[i]),
        |o| matches!(o, ReqObj::Plain(_)),
        |i, o| {
            if let ReqObj::Plain(r) = o {
                reqs[i] = Some(r);
            }
        },
    );
    if taken.is_err() {
        // A persistent or generalized request, or an invalid handle:
        // nothing was taken; the general path handles (or reports) it.
        return None;
    }
    // Every handle is finished from here on, whatever happens below.
    for h in hs.iter_mut() {
        *h = MPI_REQUEST_NULL;
    }
    // Requests complete mostly in order: a cursor, not a scan from the start
    // on every round of progress.
    let mut first_pending = 0usize;
    let mut all_done = || {
        while first_pending < reqs.len() {
            match &reqs[first_pending] {
                Some(r) if !r.done() => return false,
                _ => first_pending += 1,
            }
        }
        true
    };
    if !all_done() {
        // The taken requests hold the only references of pending receives
        // that their queue entries borrow (`Engine::recv_kept`): should the
        // wait unwind (a bug, which `no_unwind` reports), those not done are
        // handed to the engine before the array drops them.
        let waited =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| m.engine.wait_for(all_done)));
        if let Err(p) = waited {
            for r in reqs.iter_mut().filter_map(Option::take) {
                m.engine.release_recv(r);
            }
            std::panic::resume_unwind(p);
        }
    }
    let mut first_err = false;
    for (i, slot) in reqs.iter_mut().enumerate() {
        let s = match slot {
            None => Status::empty(),
            Some(r) => match r.take_status_and_reset_sole() {
                // Ours alone, reset: kept in `reqs` for the engine's spares.
                Some(s) => s,
                None => {
                    let s = r.status();
                    *slot = None;
                    s
                }
            },
        };
        if s.error != 0 && !first_err {
            // Reported on the first failed request's communicator.
            first_err = true;
            *on = handles::comm_of_status(&s);
        }
        set_status(i, &s);
    }
    m.engine.give_back_slots(reqs);
    if first_err {
        return Some(Err(err(
            class::IN_STATUS,
            "a request failed; see the MPI_ERROR fields of the statuses",
        )));
    }
    Some(Ok(()))
}
