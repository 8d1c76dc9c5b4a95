//! Synchronization: fence, post/start/complete/wait, locks and flushes.
//!
//! Completion is counting: every operation is answered by its target once
//! applied, so waiting for the unanswered count of a target to reach zero
//! is a flush to it. A fence is a flush to everyone and a barrier; a lock
//! is a request the target answers when it grants it.

use super::check_assert;
use super::window::{Win, LOCKED_NOCHECK};
use super::wire::{self, Header};
use super::{LOCK_EXCLUSIVE, LOCK_SHARED, MODE_NOCHECK, MODE_NOSUCCEED};
use crate::error::{class, err, Result};
use crate::group::Group;
use crate::Mpi;
use std::io::IoSlice;
use std::sync::atomic::Ordering;
use std::sync::Arc;

fn sync_err(msg: impl Into<String>) -> crate::error::MpiError {
    err(class::RMA_SYNC, msg)
}

impl Mpi {
    /// Drives progress until every operation to `rank` (or to everyone) is answered.
    pub(crate) fn wait_answers(&self, w: &Win, rank: Option<u32>) {
        let zero = |r: usize| w.outstanding[r].load(Ordering::Acquire) == 0;
        match rank {
            Some(r) => self.engine.wait_for(|| zero(r as usize)),
            None => self.engine.wait_for(|| (0..w.outstanding.len()).all(zero)),
        }
    }

    /// Before a synchronization message to window rank `r` that ends an
    /// epoch (complete, unlock) and is sent right behind the epoch's
    /// operations: waits for `r`'s answers only while large gets are
    /// unanswered there. Those paced by this origin (`paced_gets`) may
    /// not be sent yet, or be sent at any moment by another thread (the
    /// one that took the previous one's answer), so the message could
    /// pass them; and the target may answer any get of 64 KiB or more
    /// from its window's memory, lent to the runtime
    /// (`Rma::answer_from_window`), which must have sent it whole before
    /// the target's epoch ends and the program may change that memory. A
    /// round trip is small beside such gets.
    fn answers_before_sync(&self, w: &Win, r: u32) {
        let world = w.comm.world_of(r);
        if self.rma.paced_gets_pending(world) || self.rma.large_gets_unanswered(world) {
            // A get held to carry the complete (`fast_request::HeldPut`)
            // is among the answers waited for: it goes now, alone (a
            // failed send is noted on the window and forgotten).
            let _ = self.send_held_put(w, r, false);
            self.wait_answers(w, Some(r));
        }
    }

    fn control(&self, w: &Arc<Win>, rank: u32, kind: u8, arg: u8, answered: bool) -> Result<()> {
        let op_id = if answered {
            self.rma.expect_answer(w, rank, None, None)
        } else {
            0
        };
        let h = Header {
            kind,
            op: 0,
            basic: 0,
            arg,
            win: w.id,
            op_id,
        }
        .encode();
        let r = self.rma_send(w, rank, &[IoSlice::new(&h)]);
        if r.is_err() && answered {
            self.rma.forget(op_id);
        }
        r
    }

    fn check_rank(w: &Win, rank: i32) -> Result<()> {
        if rank < 0 || rank as u32 >= w.comm.size {
            return Err(err(
                class::RANK,
                format!("rank {rank} is not in the window (size {})", w.comm.size),
            ));
        }
        Ok(())
    }

    /// Window ranks of the members of `g` (world ranks), all of which must be in the window.
    fn win_ranks(w: &Win, g: &Group) -> Result<Vec<u32>> {
        g.members
            .iter()
            .map(|&m| {
                w.comm.group.rank_of(m).ok_or_else(|| {
                    err(
                        class::GROUP,
                        format!("process {m} of the group is not in the window"),
                    )
                })
            })
            .collect()
    }

    pub fn win_fence(&self, w: &Arc<Win>, assert: i32) -> Result<()> {
        check_assert(assert)?;
        {
            let e = w.epoch.lock().unwrap_or_else(|e| e.into_inner());
            if e.lock_all
                || e.locked.iter().any(|&l| l != 0)
                || e.started.is_some()
                || e.posted.is_some()
            {
                return Err(sync_err("MPI_Win_fence inside a lock or post/start epoch"));
            }
        }
        let issued = self.rma_issue_deferred(w, None, true);
        self.wait_answers(w, None);
        // Every member takes part in the barrier whatever happened here.
        let barrier = self.barrier(&w.comm);
        issued?;
        barrier?;
        {
            let mut e = w.epoch.lock().unwrap_or_else(|e| e.into_inner());
            e.fence = assert & MODE_NOSUCCEED == 0;
            w.access.mirror(&e);
        }
        w.take_error()
    }

    pub fn win_lock(&self, w: &Arc<Win>, lock_type: i32, rank: i32, assert: i32) -> Result<()> {
        check_assert(assert)?;
        let exclusive = match lock_type {
            LOCK_EXCLUSIVE => true,
            LOCK_SHARED => false,
            t => {
                return Err(err(
                    class::LOCKTYPE,
                    format!("lock type {t} is neither MPI_LOCK_SHARED nor MPI_LOCK_EXCLUSIVE"),
                ))
            }
        };
        if rank == crate::PROC_NULL {
            return Ok(());
        }
        Self::check_rank(w, rank)?;
        {
            let e = w.epoch.lock().unwrap_or_else(|e| e.into_inner());
            if e.lock_all || e.locked[rank as usize] != 0 {
                return Err(sync_err(format!(
                    "rank {rank} of the window is already locked by this process"
                )));
            }
            // After a fence is fine (a fence epoch with no operation is no
            // epoch; MPICH and mpi4py's tests do this), inside a start epoch is not.
            if e.started.is_some() {
                return Err(sync_err("MPI_Win_lock inside a start epoch"));
            }
        }
        // MPI_MODE_NOCHECK: the program promises no conflicting lock, so
        // none is taken (as MPICH does); the epoch still orders completion.
        if assert & MODE_NOCHECK == 0 {
            self.control(w, rank as u32, wire::LOCK, exclusive as u8, true)?;
            self.wait_answers(w, Some(rank as u32));
            w.take_error()?;
        }
        let mut e = w.epoch.lock().unwrap_or_else(|e| e.into_inner());
        e.locked[rank as usize] = if assert & MODE_NOCHECK != 0 {
            LOCKED_NOCHECK
        } else {
            1 + exclusive as u8
        };
        w.access.mirror_rank(&e, rank as usize);
        Ok(())
    }

    pub fn win_unlock(&self, w: &Arc<Win>, rank: i32) -> Result<()> {
        if rank == crate::PROC_NULL {
            return Ok(());
        }
        Self::check_rank(w, rank)?;
        if w.epoch.lock().unwrap_or_else(|e| e.into_inner()).locked[rank as usize] == 0 {
            return Err(sync_err(format!(
                "rank {rank} of the window is not locked by this process"
            )));
        }
        let r = rank as u32;
        let issued = self.rma_issue_deferred(w, Some(r), true);
        let nocheck = w.epoch.lock().unwrap_or_else(|e| e.into_inner()).locked[rank as usize]
            == LOCKED_NOCHECK;
        // The unlock goes right behind the epoch's operations, as
        // `win_complete`'s message does (see there); its answer comes
        // after every operation was applied.
        self.answers_before_sync(w, r);
        let sent = if nocheck {
            Ok(())
        } else {
            self.control(w, r, wire::UNLOCK, 0, true)
        };
        self.wait_answers(w, Some(r));
        {
            let mut e = w.epoch.lock().unwrap_or_else(|e| e.into_inner());
            e.locked[rank as usize] = 0;
            w.access.mirror_rank(&e, rank as usize);
        }
        issued?;
        sent?;
        w.take_error()
    }

    pub fn win_lock_all(&self, w: &Arc<Win>, assert: i32) -> Result<()> {
        check_assert(assert)?;
        {
            let e = w.epoch.lock().unwrap_or_else(|e| e.into_inner());
            if e.lock_all || e.locked.iter().any(|&l| l != 0) || e.started.is_some() {
                return Err(sync_err("MPI_Win_lock_all inside another access epoch"));
            }
        }
        let nocheck = assert & MODE_NOCHECK != 0;
        let mut res = Ok(());
        if !nocheck {
            for r in 0..w.comm.size {
                res = res.and(self.control(w, r, wire::LOCK, 0, true));
            }
            self.wait_answers(w, None);
        }
        res?;
        w.take_error()?;
        let mut e = w.epoch.lock().unwrap_or_else(|e| e.into_inner());
        e.lock_all = true;
        e.lock_all_nocheck = nocheck;
        w.access.mirror(&e);
        Ok(())
    }

    pub fn win_unlock_all(&self, w: &Arc<Win>) -> Result<()> {
        if !w.epoch.lock().unwrap_or_else(|e| e.into_inner()).lock_all {
            return Err(sync_err("MPI_Win_unlock_all without MPI_Win_lock_all"));
        }
        let mut res = self.rma_issue_deferred(w, None, true);
        if !w
            .epoch
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .lock_all_nocheck
        {
            // Right behind the operations, as in `win_unlock`.
            for r in 0..w.comm.size {
                self.answers_before_sync(w, r);
                res = res.and(self.control(w, r, wire::UNLOCK, 0, true));
            }
        }
        self.wait_answers(w, None);
        {
            let mut e = w.epoch.lock().unwrap_or_else(|e| e.into_inner());
            e.lock_all = false;
            w.access.mirror(&e);
        }
        res?;
        w.take_error()
    }

    /// `MPI_Win_flush` and `MPI_Win_flush_local` (`rank`), or their `_all`
    /// forms (None). Local completion is not cheaper here: data is copied
    /// out of the origin buffer when the call returns, so both wait for the target.
    pub fn win_flush(&self, w: &Win, rank: Option<i32>) -> Result<()> {
        match rank {
            Some(crate::PROC_NULL) => return Ok(()),
            Some(r) => {
                Self::check_rank(w, r)?;
                // The lock-free mirror of the epoch: a flush on one host is
                // otherwise a few loads (see `super::access`).
                if !w.access.passive(r as u32) {
                    return Err(sync_err(format!(
                        "MPI_Win_flush outside a passive-target epoch to rank {r}"
                    )));
                }
                // Deferred single copies are done here (windows without
                // single copies skip even the call).
                let issued = if w.single_copy.defers() {
                    self.rma_issue_deferred(w, Some(r as u32), true)
                } else {
                    Ok(())
                };
                // Nothing unanswered (every operation was a load or store,
                // or all were answered): no progress to drive.
                if w.outstanding[r as usize].load(Ordering::Acquire) != 0 {
                    self.wait_answers(w, Some(r as u32));
                }
                issued?;
            }
            None => {
                let e = w.epoch.lock().unwrap_or_else(|e| e.into_inner());
                if !e.lock_all && e.locked.iter().all(|&l| l == 0) {
                    return Err(sync_err("MPI_Win_flush_all outside a passive-target epoch"));
                }
                drop(e);
                let issued = self.rma_issue_deferred(w, None, true);
                self.wait_answers(w, None);
                issued?;
            }
        }
        w.take_error()
    }

    /// `MPI_Win_sync`: the memory of the window and of this process agree
    /// (one memory model: a full fence suffices).
    pub fn win_sync(&self, _w: &Arc<Win>) -> Result<()> {
        std::sync::atomic::fence(Ordering::SeqCst);
        self.poke();
        Ok(())
    }

    pub fn win_post(&self, w: &Arc<Win>, g: &Group, assert: i32) -> Result<()> {
        check_assert(assert)?;
        let ranks = Self::win_ranks(w, g)?;
        {
            let mut e = w.epoch.lock().unwrap_or_else(|e| e.into_inner());
            if e.posted.is_some() {
                return Err(sync_err(
                    "MPI_Win_post inside an exposure epoch (call MPI_Win_wait first)",
                ));
            }
            e.posted = Some(ranks.clone());
        }
        for r in ranks {
            self.control(w, r, wire::POST, 0, false)?;
        }
        Ok(())
    }

    pub fn win_start(&self, w: &Arc<Win>, g: &Group, assert: i32) -> Result<()> {
        check_assert(assert)?;
        let ranks = Self::win_ranks(w, g)?;
        {
            let e = w.epoch.lock().unwrap_or_else(|e| e.into_inner());
            if e.started.is_some() || e.lock_all || e.locked.iter().any(|&l| l != 0) {
                return Err(sync_err("MPI_Win_start inside another access epoch"));
            }
        }
        // Every target must have posted (its post message consumed once).
        self.engine.wait_for(|| {
            ranks
                .iter()
                .all(|&r| w.posts[r as usize].load(Ordering::Acquire) > 0)
        });
        for &r in &ranks {
            w.posts[r as usize].fetch_sub(1, Ordering::AcqRel);
        }
        let mut e = w.epoch.lock().unwrap_or_else(|e| e.into_inner());
        e.started = Some(ranks);
        w.access.mirror(&e);
        Ok(())
    }

    pub fn win_complete(&self, w: &Arc<Win>) -> Result<()> {
        let started = {
            let mut e = w.epoch.lock().unwrap_or_else(|e| e.into_inner());
            let s = e.started.take();
            w.access.mirror(&e);
            s
        };
        let Some(ranks) = started else {
            return Err(sync_err("MPI_Win_complete without MPI_Win_start"));
        };
        // COMPLETE goes right behind the epoch's operations, before their
        // answers are in: the target applies each operation in its
        // handler as it arrives, in the order sent on the window's route
        // (one ordered stream per pair, across links too), so by the time
        // it counts the COMPLETE every put and accumulate is in its
        // memory and every get answered. Waiting for the answers first
        // put a round trip more on each epoch (PSCW over tcp was
        // 1.4-2.8x the better peer), except behind paced gets
        // (`answers_before_sync`). The answers are still waited for
        // before returning (local completion: results in, lent buffers
        // settled, errors noted).
        let mut res = Ok(());
        for &r in &ranks {
            res = res.and(self.rma_issue_deferred(w, Some(r), true));
            self.answers_before_sync(w, r);
            // A put held for this complete carries it (one message).
            match self.send_held_put(w, r, true) {
                Ok(true) => {}
                Ok(false) => res = res.and(self.control(w, r, wire::COMPLETE, 0, false)),
                // Noted on the window; the complete still goes.
                Err(e) => {
                    res = res.and(Err(e));
                    let _ = self.control(w, r, wire::COMPLETE, 0, false);
                }
            }
        }
        for &r in &ranks {
            self.wait_answers(w, Some(r));
        }
        res?;
        w.take_error()
    }

    /// `MPI_Win_wait` (`block`) or `MPI_Win_test`: whether the exposure epoch ended.
    pub fn win_wait(&self, w: &Arc<Win>, block: bool) -> Result<bool> {
        let Some(ranks) = w
            .epoch
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .posted
            .clone()
        else {
            return Err(sync_err(
                "MPI_Win_wait or MPI_Win_test without MPI_Win_post",
            ));
        };
        let all = || {
            ranks
                .iter()
                .all(|&r| w.completes[r as usize].load(Ordering::Acquire) > 0)
        };
        if block {
            self.engine.wait_for(all);
        } else {
            self.poke();
            if !all() {
                return Ok(false);
            }
        }
        for &r in &ranks {
            w.completes[r as usize].fetch_sub(1, Ordering::AcqRel);
        }
        w.epoch.lock().unwrap_or_else(|e| e.into_inner()).posted = None;
        Ok(true)
    }
}
