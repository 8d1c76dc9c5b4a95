//! Puts and gets by single copies, deferred to the next synchronization and
//! then issued together: one `process_vm_writev` (or `process_vm_readv`)
//! with up to `IOV_MAX` pieces per target instead of one system call each.
//!
//! The standard allows it: a put or get is complete only at the
//! synchronization that follows (flush, flush_local, unlock, fence,
//! complete), and until then the origin must leave its buffer alone (MPI
//! 4.1, 12.7). So the origin records the addresses when the call returns
//! and copies them at that synchronization. A system call costs more than
//! copying a few KiB, so 64 puts of 4 KiB to one target and a flush take
//! about half the time this way (docs/benchmarks.md).
//!
//! Only while it pays: a synchronization that completed one put or get to
//! a target turns deferral to it off until one completes more
//! (a lone put and flush would pay the bookkeeping, about 50 ns, for
//! nothing); the calls are counted either way.
//!
//! What is not deferred: request-based `MPI_Rput`/`MPI_Rget` (their request
//! completes at the call, so the copy happens there), and anything not a
//! contiguous single copy (those go as before). Order: a batch holds puts or
//! gets, never both, and an operation of the other kind, an accumulate or a
//! request to the same target first issues what is pending, so every target
//! sees this origin's operations in program order (more than the standard
//! asks of puts and gets, and what accumulate ordering needs).
//!
//! A batch the kernel refuses (permissions) or stops in (a detached region
//! of a dynamic window) is finished as requests the target applies, as a
//! single put or get is: the target then reports range errors itself.

use super::ops::{Kind, Origin, Target};
use super::single_copy::{note_refusal, remote_of};
use super::window::Win;
use super::wire::{self, Header, Layout};
use crate::datatype::Block;
use crate::error::{class, err, Result};
use crate::request::Buf;
use crate::Mpi;
use std::io::IoSlice;
use std::sync::atomic::Ordering;

/// Pieces per system call (Linux's `IOV_MAX`; `process_vm_writev` refuses more).
const IOV_MAX: usize = 1024;

/// Operations held for one target before they are issued without waiting
/// for a synchronization (bounds the memory a long epoch takes).
const MAX_HELD: usize = 4 * IOV_MAX;

/// One deferred put or get.
pub(crate) struct Deferred {
    /// The origin buffer's contiguous bytes (a put's data, a get's result).
    local: usize,
    /// Where they go or come from in the target.
    remote: u64,
    len: usize,
    /// For a request if the copy fails: the call's displacement, the
    /// target type's lower bound and its basic type's wire code.
    disp: i64,
    true_lb: isize,
    basic: u8,
    /// Gets: the result buffer, for an answer to a request.
    result: Option<Buf>,
}

/// Deferred operations to one target.
#[derive(Default)]
pub(crate) struct Batch {
    /// Puts (true) or gets.
    write: bool,
    ops: Vec<Deferred>,
    /// The iovecs of one system call, kept to avoid allocating each time.
    local: IoVecs,
    remote: IoVecs,
}

/// Iovecs handed to the kernel.
#[derive(Default)]
struct IoVecs(Vec<libc::iovec>);

// SAFETY: the iovecs are plain addresses filled just before a system call
// and read only by the kernel during it; this process never dereferences
// them, so which thread owns the vector does not matter.
unsafe impl Send for IoVecs {}

impl Mpi {
    /// Records put or get `kind` to be issued at the next synchronization
    /// if it may go by single copy; false = do it now another way. The
    /// caller checked the epoch, buffers, signatures and range, as for
    /// [`super::single_copy::put_or_get`].
    pub(super) fn rma_defer(
        &self,
        w: &Win,
        kind: Kind,
        o: &mut Origin<'_>,
        t: &Target<'_>,
    ) -> Result<bool> {
        let rank = t.rank as usize;
        let sc = &w.single_copy;
        let Some(slot) = sc.batches.get(rank).filter(|_| sc.defer) else {
            return Ok(false);
        };
        // Counted with a load and a store: a count lost between threads
        // only changes whether the next ones are batched.
        let calls = &sc.calls[rank];
        calls.store(
            calls.load(Ordering::Relaxed).saturating_add(1),
            Ordering::Relaxed,
        );
        if !sc.batching[rank].load(Ordering::Relaxed) {
            return Ok(false);
        }
        let len = t.count * t.dt.size;
        let write = kind == Kind::Put;
        let local = if write {
            o.data.and_then(Buf::contig_addr)
        } else {
            o.result.as_ref().and_then(Buf::contig_addr)
        };
        let Some(local) = local else {
            return Ok(false);
        };
        let Some((_, remote)) = remote_of(w, t, len) else {
            return Ok(false);
        };
        let mut b = slot.lock().unwrap_or_else(|e| e.into_inner());
        if !b.ops.is_empty() && (b.write != write || b.ops.len() >= MAX_HELD) {
            self.issue_batch(w, rank, &mut b)?;
        }
        b.write = write;
        b.ops.push(Deferred {
            local,
            remote,
            len,
            disp: t.disp,
            true_lb: t.dt.true_lb,
            basic: t.dt.basic.map_or(0, wire::basic_code),
            result: if write { None } else { o.result.take() },
        });
        sc.held[rank].store(true, Ordering::Release);
        Ok(true)
    }

    /// Issues what is deferred to window rank `rank` (None: to every rank).
    /// One load per rank when nothing is. `sync`: called by a
    /// synchronization, which also decides whether the next puts and gets
    /// to that rank are deferred (see `SingleCopy::batching`).
    pub(crate) fn rma_issue_deferred(&self, w: &Win, rank: Option<u32>, sync: bool) -> Result<()> {
        let sc = &w.single_copy;
        let one = |r: usize| -> Result<()> {
            if sync {
                if let Some(calls) = sc.calls.get(r) {
                    // No call since the last one: nothing learnt (a fence
                    // that opens an epoch, an unlock after a flush).
                    let n = calls.load(Ordering::Relaxed);
                    if n != 0 {
                        calls.store(0, Ordering::Relaxed);
                        sc.batching[r].store(n > 1, Ordering::Relaxed);
                    }
                }
            }
            if !sc.held.get(r).is_some_and(|h| h.load(Ordering::Acquire)) {
                return Ok(());
            }
            let mut b = sc.batches[r].lock().unwrap_or_else(|e| e.into_inner());
            self.issue_batch(w, r, &mut b)
        };
        match rank {
            Some(r) => one(r as usize),
            None => (0..sc.held.len()).map(one).fold(Ok(()), Result::and),
        }
    }

    /// Issues batch `b` to window rank `rank` (its lock held, so a flush
    /// by another thread waits until the data is in place).
    fn issue_batch(&self, w: &Win, rank: usize, b: &mut Batch) -> Result<()> {
        let done = copy_batch(w, rank, b);
        let mut res = Ok(());
        let rest: Vec<Deferred> = b.ops.drain(..).skip(done).collect();
        w.single_copy.held[rank].store(false, Ordering::Release);
        for d in rest {
            res = res.and(self.deferred_as_request(w, rank as u32, b.write, d));
        }
        res
    }

    /// Sends deferred operation `d` as a request (the copy failed).
    fn deferred_as_request(&self, w: &Win, rank: u32, write: bool, d: Deferred) -> Result<()> {
        // The table holds the window while any call on it runs.
        let Some(win) = self
            .rma()
            .wins
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&w.id)
            .cloned()
        else {
            return Err(err(class::WIN, "the window was freed"));
        };
        let layout = Layout {
            disp: d.disp,
            count: 1,
            extent: d.len as i64,
            blocks: vec![Block {
                off: d.true_lb,
                len: d.len,
            }],
        }
        .encode();
        let id = self.rma.expect_answer(&win, rank, d.result, None);
        let h = Header {
            kind: if write { wire::PUT } else { wire::GET },
            op: 0,
            basic: d.basic,
            arg: 0,
            win: w.id,
            op_id: id,
        }
        .encode();
        let data: &[u8] = if write {
            // SAFETY: the put's origin buffer, `len` contiguous bytes, which
            // the program leaves alone until the operation completes (the
            // MPI rule `Buf::new` relies on); it does not complete before
            // this synchronization returns.
            unsafe { std::slice::from_raw_parts(d.local as *const u8, d.len) }
        } else {
            &[]
        };
        let parts = [IoSlice::new(&h), IoSlice::new(&layout), IoSlice::new(data)];
        let r = self.rma_send(w, rank, &parts);
        if r.is_err() {
            self.rma.forget(id);
        }
        r
    }
}

/// Copies `b`'s operations in order with as few system calls as it can;
/// returns how many were done completely (the rest go as requests).
fn copy_batch(w: &Win, rank: usize, b: &mut Batch) -> usize {
    let pid = w.single_copy.pid[rank];
    let Batch {
        write,
        ops,
        local,
        remote,
    } = b;
    let mut done = 0;
    while done < ops.len() {
        let chunk = &ops[done..ops.len().min(done + IOV_MAX)];
        local.0.clear();
        remote.0.clear();
        for d in chunk {
            local.0.push(libc::iovec {
                iov_base: d.local as *mut libc::c_void,
                iov_len: d.len,
            });
            remote.0.push(libc::iovec {
                iov_base: d.remote as usize as *mut libc::c_void,
                iov_len: d.len,
            });
        }
        let n = chunk.len() as libc::c_ulong;
        // SAFETY: every local iovec is an origin buffer the program lent
        // until this synchronization (a put's data, read; a get's result
        // buffer, writable: checked at the call); the remote ones are
        // interpreted by the kernel in the target only, which checks them.
        let moved = unsafe {
            if *write {
                libc::process_vm_writev(
                    pid as libc::pid_t,
                    local.0.as_ptr(),
                    n,
                    remote.0.as_ptr(),
                    n,
                    0,
                )
            } else {
                libc::process_vm_readv(
                    pid as libc::pid_t,
                    local.0.as_ptr(),
                    n,
                    remote.0.as_ptr(),
                    n,
                    0,
                )
            }
        };
        if moved <= 0 {
            if moved < 0 {
                note_refusal(w, rank, &std::io::Error::last_os_error());
            }
            return done;
        }
        // The kernel stops between pieces (a fault, say): count the whole
        // ones; one cut in the middle is redone whole by a request.
        let mut left = moved as usize;
        let mut whole = 0;
        for d in chunk {
            if left < d.len {
                break;
            }
            left -= d.len;
            whole += 1;
        }
        done += whole;
        if whole < chunk.len() {
            return done;
        }
    }
    done
}
