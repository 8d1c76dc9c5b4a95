//! Whether a wait's spin pays: one process-wide verdict shared by every
//! waiting loop (the runtime's [`Context::wait`](super::Context::wait), the
//! MPI engine's spin, the collectives' shared segment).
//!
//! A spin keeps its core, which is right when every rank has one and badly
//! wrong when a rank's core is shared with another busy process: two ranks
//! that spin on one core (the scheduler placed both there, and balances only
//! every few milliseconds) hand each other the core once per time slice, and
//! a 2-rank `MPI_Allreduce` took 1-3.5 ms per call for seconds on this
//! machine under load, against 0.2-0.5 µs once the ranks had a core each.
//!
//! The sign is cheap: a spin reads the clock every few hundred polls (about
//! every 10 µs); two reads [`DESCHEDULED_GAP`] apart mean the thread did not
//! run in between. Then spins are held for [`HOLD`] (waits go straight to
//! yielding, which hands the core over at once), after which spinning is
//! tried again.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Two clock reads of a spin this far apart: the thread was descheduled.
/// Below the scheduler's time slice when two busy threads share a core
/// (EEVDF's base slice is 0.75 ms × (1 + log2 of the cores), 1.5 ms here),
/// above the short stops a quiet machine's spin meets (interrupts, a
/// hypervisor's steal): a false alarm costs 100 ms of yields, a fraction
/// of a microsecond per message.
pub const DESCHEDULED_GAP: Duration = Duration::from_millis(1);
/// How long spins are held after a spin was descheduled.
pub const HOLD: Duration = Duration::from_millis(100);

/// Until when (ns after [`base`]) spins are held; 0: never held yet.
static HELD_UNTIL: AtomicU64 = AtomicU64::new(0);

fn base() -> Instant {
    static BASE: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *BASE.get_or_init(Instant::now)
}

fn since_base(t: Instant) -> u64 {
    u64::try_from(t.saturating_duration_since(base()).as_nanos()).unwrap_or(u64::MAX)
}

/// A spin's clock read `now`, after its previous one `prev` (None when the
/// spin starts, or after it delivered a message: a handler's own time is
/// not a sign). True if the spin was descheduled in between: spins are
/// then held for [`HOLD`], and the caller should stop spinning.
pub fn descheduled(prev: Option<Instant>, now: Instant) -> bool {
    descheduled_in(&HELD_UNTIL, prev, now)
}

/// Whether waits should skip their spin now. One load while no spin was
/// ever descheduled (the usual case on a machine with a core per rank).
#[inline]
pub fn held() -> bool {
    if HELD_UNTIL.load(Ordering::Relaxed) == 0 {
        return false;
    }
    held_at(&HELD_UNTIL, Instant::now())
}

fn descheduled_in(held_until: &AtomicU64, prev: Option<Instant>, now: Instant) -> bool {
    let Some(prev) = prev else {
        return false;
    };
    if now.saturating_duration_since(prev) < DESCHEDULED_GAP {
        return false;
    }
    held_until.store(since_base(now + HOLD), Ordering::Relaxed);
    true
}

fn held_at(held_until: &AtomicU64, now: Instant) -> bool {
    let until = held_until.load(Ordering::Relaxed);
    until != 0 && since_base(now) < until
}

/// How many cores the ranks of this machine may spin on, for the rule
/// "spin when every rank has a core" (`GW_SPIN_US=auto`, the MPI engine's
/// spin): the CPUs this process may run on, except when that is exactly
/// one CPU of several: a launcher bound each rank to a core of its own
/// (`gwrun --bind-to core`, Hydra's `-bind-to core`, Open MPI's
/// `--bind-to core`), and the ranks together have the machine's online
/// CPUs. Counting only our own CPU made every bound rank of a 2-rank job
/// think the host oversubscribed and never spin: shm latency 0.42 µs
/// instead of 0.23 at 0 B, 5.8 instead of 1.8 at 8 KiB (docs/benchmarks.md).
/// Where ranks bound to one CPU really do share it (`taskset -c 0` around
/// the launcher), a spin finds itself descheduled and spins are held
/// ([`descheduled`]).
pub fn cores_for_ranks() -> u32 {
    let mine = std::thread::available_parallelism().map_or(1, |n| n.get());
    // SAFETY: sysconf takes no pointers and has no preconditions.
    let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    cores_for(mine, online)
}

fn cores_for(mine: usize, online: libc::c_long) -> u32 {
    let online = usize::try_from(online).unwrap_or(0);
    let n = if mine == 1 && online > 1 {
        online
    } else {
        mine
    };
    u32::try_from(n.max(1)).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rank_bound_to_one_cpu_counts_the_machine() {
        assert_eq!(cores_for(1, 8), 8, "bound to one CPU of 8");
        assert_eq!(cores_for(1, 1), 1, "a one-CPU machine");
        assert_eq!(cores_for(1, -1), 1, "sysconf failed");
        assert_eq!(cores_for(3, 8), 3, "a cpuset of 3 CPUs");
        assert_eq!(cores_for(8, 8), 8);
        assert!(cores_for_ranks() >= 1);
    }

    #[test]
    fn a_gap_holds_spins_for_a_while_and_a_short_one_does_not() {
        // A cell of its own: other tests' waits may hold the process's.
        let cell = AtomicU64::new(0);
        let t0 = Instant::now();
        assert!(!held_at(&cell, t0), "never held yet");
        assert!(
            !descheduled_in(&cell, None, t0),
            "the first read has nothing to compare"
        );
        assert!(!descheduled_in(
            &cell,
            Some(t0),
            t0 + Duration::from_micros(20)
        ));
        assert!(!held_at(&cell, t0));
        let t1 = t0 + DESCHEDULED_GAP;
        assert!(descheduled_in(&cell, Some(t0), t1));
        assert!(held_at(&cell, t1), "held right after");
        assert!(held_at(&cell, t1 + HOLD - Duration::from_millis(1)));
        assert!(
            !held_at(&cell, t1 + HOLD + Duration::from_millis(1)),
            "and no longer"
        );
    }
}
