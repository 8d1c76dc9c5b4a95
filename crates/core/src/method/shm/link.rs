//! The sending side of a pair: one [`ShmLink`] per (this context, peer).
//!
//! Three ways a message goes, chosen by size:
//! - up to `eager_max`: one ring record, gathered straight from the caller's iovecs;
//! - from `cma_min` on, when the receiver proved it can read us (`RxState::cma == CMA_OK`):
//!   a rendezvous record `{token, total, n, (addr, len)×n}`; the receiver copies
//!   with `process_vm_readv` and publishes `done = token`; we wait for that
//!   before returning, because the caller may reuse its buffers;
//! - otherwise: fragments through the ring (`FIRST {total, data}`, `MORE {data}`…),
//!   reassembled by the receiver.
//!
//! When the ring is full we drive progress and retry; when we may not wait
//! (`Waiter::progress` returned false: inside a handler), we copy the message
//! into a per-link FIFO backlog that the method's `poll` flushes. Once a
//! backlog exists every later message goes behind it, so order per link holds.
//! A multi-record (fragmented) message owns the producer (`busy`) from its first
//! fragment to its last, so nothing interleaves with it.

use super::handoff;
use super::layout::{pair_done, pair_ring, pair_rx, RxState, CMA_OK, CMA_UNKNOWN, PAIR_DATA_OFF};
use super::ring::{Corrupt, Producer};
use super::segment::Segment;
use super::{Shared, MAX_RNDV_IOV, TAG_EAGER, TAG_FIRST, TAG_MORE, TAG_RNDV};
use crate::error::{Error, Result};
use crate::method::{iov_len, Link, Waiter};
use crate::sync::{TryLock, TryLockGuard};
use std::collections::VecDeque;
use std::io::IoSlice;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A message we had to copy because we could not wait.
struct Pending {
    data: Vec<u8>,
    /// Bytes of `data` already sent as fragments.
    off: usize,
    /// The `FIRST` fragment is out (the rest continues as `MORE`).
    cont: bool,
}

struct Out {
    prod: Producer,
    backlog: VecDeque<Pending>,
    /// A fragmented message is being written by a thread that released the lock to wait.
    busy: bool,
    next_token: u64,
    /// Owned buffers of rendezvous the receiver has not copied yet.
    inflight: VecDeque<(u64, Vec<u8>)>,
    /// Counted in `Shared::pending_links`.
    listed: bool,
    /// Flushes with output still queued, to check the peer now and then.
    stalled: u32,
    /// Eager messages and their bytes (counted under the lock, see `Link::counts_sends`).
    eager_msgs: u64,
    eager_bytes: u64,
}

pub struct ShmLink {
    peer: u32,
    /// Our connection to the receiver's socket: reads EOF once it is gone.
    conn: OwnedFd,
    shared: Arc<Shared>,
    /// A try-lock, not a mutex: released with a plain store (see `crate::sync`).
    out: TryLock<Out>,
    /// Messages above `eager_max` and their bytes (rare: atomics are fine).
    large_msgs: AtomicU64,
    large_bytes: AtomicU64,
    // Last: the mapping outlives the producer's pointers into it.
    seg: Segment,
}

enum Plan {
    Cma,
    Chunked,
    Queue,
}

impl ShmLink {
    /// # Safety
    /// `seg` must be a freshly created pair segment with an initialised ring
    /// of `cap` bytes at `PAIR_DATA_OFF`, and no other producer for it.
    pub(super) unsafe fn new(
        peer: u32,
        conn: OwnedFd,
        shared: Arc<Shared>,
        seg: Segment,
        cap: usize,
    ) -> Self {
        let base = seg.as_ptr();
        // SAFETY: per the contract: the header and data are inside the mapping,
        // which the link keeps alive as long as the producer.
        let prod = unsafe { Producer::new(pair_ring(base), base.add(PAIR_DATA_OFF), cap) };
        ShmLink {
            peer,
            conn,
            shared,
            out: TryLock::new(Out {
                prod,
                backlog: VecDeque::new(),
                busy: false,
                next_token: 0,
                inflight: VecDeque::new(),
                listed: false,
                stalled: 0,
                eager_msgs: 0,
                eager_bytes: 0,
            }),
            large_msgs: AtomicU64::new(0),
            large_bytes: AtomicU64::new(0),
            seg,
        }
    }

    /// What the receiver writes (atomics only).
    fn rx(&self) -> &RxState {
        // SAFETY: the segment is a pair segment mapped for our lifetime.
        unsafe { pair_rx(self.seg.as_ptr()) }
    }

    fn done(&self) -> &AtomicU64 {
        // SAFETY: as in `rx`.
        unsafe { pair_done(self.seg.as_ptr()) }
    }

    /// The receiver published an impossible ring position: the link is unusable.
    #[cold]
    fn corrupt(&self, e: Corrupt) -> Error {
        self.fail(format!(
            "rank {} wrote bad data to our ring: {e}",
            self.peer
        ))
    }

    /// Whether the receiver is known to be gone (closed the pair or exited).
    pub(super) fn is_broken(&self) -> bool {
        self.check_alive().is_err()
    }

    /// Drops queued output that can never be delivered (the link is broken).
    pub(super) fn abandon(&self) {
        let mut g = self.lock();
        g.backlog.clear();
        g.inflight.clear();
        self.relist(&mut g);
    }

    fn lock(&self) -> TryLockGuard<'_, Out> {
        self.out.lock()
    }

    fn fail(&self, reason: impl Into<String>) -> Error {
        Error::LinkFailed {
            peer: self.peer,
            method: "shm",
            reason: reason.into(),
        }
    }

    /// Cheap state checks (two loads).
    fn check(&self) -> Result<()> {
        if self.shared.closed.load(Ordering::Relaxed) {
            return Err(Error::Shutdown);
        }
        if self.rx().closed.load(Ordering::Relaxed) != 0 {
            return Err(self.fail("the receiver has shut down or dropped the link"));
        }
        Ok(())
    }

    /// The expensive check, every few hundred waits (one system call): is
    /// the receiver still alive? Its end of our connection closes when its
    /// process ends, in whatever pid namespace, whatever pid comes next.
    fn check_alive(&self) -> Result<()> {
        self.check()?;
        if handoff::peer_gone(&self.conn) {
            return Err(self.fail(format!(
                "rank {} has exited or dropped the link (its end of the shm connection closed)",
                self.peer
            )));
        }
        Ok(())
    }

    /// Wakes the receiver if it sleeps (after a record was published).
    #[inline]
    fn wake(&self) {
        super::doorbell::wake(self.rx(), self.conn.as_raw_fd());
    }

    /// One wait step: drives progress; every 256 steps checks the peer.
    /// (Rings the receiver first: what we wait for may be its answer to
    /// records we published.)
    fn step(&self, n: &mut u32, waiter: &dyn Waiter) -> Result<bool> {
        self.wake();
        *n = n.wrapping_add(1);
        if *n & 255 == 0 {
            self.check_alive()?;
        }
        Ok(waiter.progress())
    }

    /// A message of up to `eager_max` bytes: one ring record. The first try
    /// is inline (the ring almost always has room); waiting for room is not.
    #[inline]
    fn send_eager(&self, iov: &[IoSlice<'_>], total: usize, waiter: &dyn Waiter) -> Result<()> {
        if self.try_eager(iov, total)? {
            return Ok(());
        }
        self.send_eager_wait(iov, total, waiter)
    }

    #[inline(always)]
    fn try_eager(&self, iov: &[IoSlice<'_>], total: usize) -> Result<bool> {
        let mut g = self.lock();
        if !g.busy && g.backlog.is_empty() {
            match g.prod.try_push_len(TAG_EAGER, iov, total) {
                Ok(true) => {
                    g.eager_msgs += 1;
                    g.eager_bytes += total as u64;
                    drop(g);
                    self.wake();
                    return Ok(true);
                }
                Ok(false) => {}
                Err(e) => return Err(self.corrupt(e)),
            }
        }
        Ok(false)
    }

    #[inline(never)]
    fn send_eager_wait(
        &self,
        iov: &[IoSlice<'_>],
        total: usize,
        waiter: &dyn Waiter,
    ) -> Result<()> {
        let mut n = 0;
        loop {
            if self.try_eager(iov, total)? {
                return Ok(());
            }
            if !self.step(&mut n, waiter)? {
                self.enqueue(concat(iov, 0));
                let mut g = self.lock();
                g.eager_msgs += 1;
                g.eager_bytes += total as u64;
                return Ok(());
            }
        }
    }

    /// A medium message (`pipe_min..=eager_max` bytes) as a few fragments
    /// (`FIRST`, `MORE`…) pushed one after another without letting go of
    /// the producer, so the receiver copies each (straight into a matched
    /// receive: `Sink::place_whole`) while we write the next: the two
    /// copies overlap instead of following each other. `Ok(false)`, nothing
    /// sent: not now (another message owns the producer, a backlog, the
    /// ring has no room for all of it, or too many iovecs); the caller
    /// sends it as one record. No allocation.
    fn try_pipelined(&self, iov: &[IoSlice<'_>], total: usize) -> Result<bool> {
        if iov.len() > PIPE_IOV {
            return Ok(false);
        }
        let frag = pipe_fragment(total);
        let hdr = (total as u64).to_le_bytes();
        let lens = (0..total.div_ceil(frag))
            .map(|i| (total - i * frag).min(frag) + if i == 0 { hdr.len() } else { 0 });
        let mut g = self.lock();
        if g.busy || !g.backlog.is_empty() {
            return Ok(false);
        }
        match g.prod.has_room_for(lens.clone()) {
            Ok(true) => {}
            Ok(false) => return Ok(false),
            Err(e) => return Err(self.corrupt(e)),
        }
        let mut parts = [IoSlice::new(&[]); PIPE_IOV + 1];
        let mut off = 0;
        while off < total {
            let len = frag.min(total - off);
            let first = off == 0;
            let mut k = 0;
            if first {
                parts[0] = IoSlice::new(&hdr);
                k = 1;
            }
            k += sub_iov_into(iov, off, len, &mut parts[k..]);
            let tag = if first { TAG_FIRST } else { TAG_MORE };
            match g.prod.try_push(tag, &parts[..k]) {
                Ok(true) => {}
                // Room for all was checked, and only we produce.
                Ok(false) => return Err(self.fail("the ring lost room it had")),
                Err(e) => return Err(self.corrupt(e)),
            }
            if first {
                // A receiver asleep starts on the first fragment.
                self.wake();
            }
            off += len;
        }
        g.eager_msgs += 1;
        g.eager_bytes += total as u64;
        drop(g);
        self.wake();
        Ok(true)
    }

    /// Decides how a large message goes. May drive progress once (to learn
    /// whether we may wait, before exposing the caller's buffer to the peer).
    fn plan(&self, iov: &[IoSlice<'_>], waiter: &dyn Waiter) -> Result<Plan> {
        if !self.shared.cfg.cma
            || iov_len(iov) < self.shared.cfg.cma_min
            || iov.len() > MAX_RNDV_IOV
        {
            return Ok(Plan::Chunked);
        }
        let mut n = 0;
        loop {
            match self.rx().cma.load(Ordering::Acquire) {
                CMA_OK => {
                    return Ok(if self.step(&mut n, waiter)? {
                        Plan::Cma
                    } else {
                        Plan::Queue
                    });
                }
                CMA_UNKNOWN => {
                    // The receiver has not attached yet; it will on its next
                    // poll, which it needs anyway to take this message.
                    if !self.step(&mut n, waiter)? {
                        return Ok(Plan::Queue);
                    }
                }
                _ => return Ok(Plan::Chunked),
            }
        }
    }

    fn send_cma(&self, iov: &[IoSlice<'_>], total: usize, waiter: &dyn Waiter) -> Result<()> {
        let mut rec = rndv_record(
            0,
            total,
            iov.iter().map(|s| (s.as_ptr() as u64, s.len() as u64)),
        );
        let mut n = 0;
        let token = loop {
            {
                let mut g = self.lock();
                if !g.busy && g.backlog.is_empty() {
                    let token = g.next_token + 1;
                    rec[..8].copy_from_slice(&token.to_le_bytes());
                    if g.prod
                        .try_push(TAG_RNDV, &[IoSlice::new(&rec)])
                        .map_err(|e| self.corrupt(e))?
                    {
                        g.next_token = token;
                        break token;
                    }
                }
            }
            if !self.step(&mut n, waiter)? {
                self.enqueue(concat(iov, 0));
                return Ok(());
            }
        };
        // The receiver may be reading the caller's buffers now: we must not
        // return before it is done, even if progress says we should not wait.
        let done = self.done();
        let mut spins = 0u32;
        while done.load(Ordering::Acquire) < token {
            if !self.step(&mut n, waiter)? {
                spins += 1;
                if spins & 63 == 0 {
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
            }
        }
        Ok(())
    }

    fn send_chunked(&self, iov: &[IoSlice<'_>], total: usize, waiter: &dyn Waiter) -> Result<()> {
        let chunk = self.shared.cfg.chunk;
        let mut n = 0;
        let mut g = loop {
            let g = self.lock();
            if !g.busy && g.backlog.is_empty() {
                break g;
            }
            drop(g);
            if !self.step(&mut n, waiter)? {
                self.enqueue(concat(iov, 0));
                return Ok(());
            }
        };
        g.busy = true;
        let hdr = (total as u64).to_le_bytes();
        let mut parts: Vec<IoSlice<'_>> = Vec::with_capacity(iov.len() + 1);
        let (mut off, mut first) = (0usize, true);
        loop {
            while off < total {
                let len = chunk.min(total - off);
                parts.clear();
                if first {
                    parts.push(IoSlice::new(&hdr));
                }
                sub_iov(iov, off, len, &mut parts);
                match g
                    .prod
                    .try_push(if first { TAG_FIRST } else { TAG_MORE }, &parts)
                {
                    Ok(true) => {}
                    Ok(false) => break,
                    Err(e) => {
                        g.busy = false;
                        return Err(self.corrupt(e));
                    }
                }
                off += len;
                first = false;
            }
            if off == total {
                g.busy = false;
                self.flush_locked(&mut g);
                return Ok(());
            }
            drop(g);
            let r = self.step(&mut n, waiter);
            g = self.lock();
            match r {
                Ok(true) => {}
                Ok(false) => {
                    // Goes before anything queued meanwhile: those were sent after us.
                    g.backlog.push_front(Pending {
                        data: concat(iov, off),
                        off: 0,
                        cont: !first,
                    });
                    g.busy = false;
                    self.flush_locked(&mut g);
                    return Ok(());
                }
                Err(e) => {
                    g.busy = false;
                    return Err(e);
                }
            }
        }
    }

    fn enqueue(&self, data: Vec<u8>) {
        let mut g = self.lock();
        g.backlog.push_back(Pending {
            data,
            off: 0,
            cont: false,
        });
        self.flush_locked(&mut g);
    }

    /// Flushes what it can of the backlog (called by `poll` too); frees
    /// rendezvous buffers the receiver has copied.
    pub(super) fn flush(&self) {
        if let Some(mut g) = self.out.try_lock() {
            self.flush_locked(&mut g);
        }
    }

    fn flush_locked(&self, g: &mut Out) {
        if g.listed {
            // Output queued for a receiver that is gone would keep the context
            // polling (and `finalize` waiting) for ever: look now and then.
            g.stalled = g.stalled.wrapping_add(1);
            if (g.stalled & 1023 == 0 || self.check().is_err()) && self.check_alive().is_err() {
                g.backlog.clear();
                g.inflight.clear();
                self.relist(g);
                return;
            }
        }
        let cfg = &self.shared.cfg;
        while !g.busy {
            let Out {
                prod,
                backlog,
                next_token,
                inflight,
                ..
            } = &mut *g;
            let Some(p) = backlog.front_mut() else { break };
            let sent = if !p.cont && p.data.len() <= cfg.eager_max {
                prod.try_push(TAG_EAGER, &[IoSlice::new(&p.data)])
            } else if !p.cont
                && cfg.cma
                && p.data.len() >= cfg.cma_min
                && self.rx().cma.load(Ordering::Acquire) == CMA_OK
            {
                let token = *next_token + 1;
                let rec = rndv_record(
                    token,
                    p.data.len(),
                    [(p.data.as_ptr() as u64, p.data.len() as u64)].into_iter(),
                );
                let r = prod.try_push(TAG_RNDV, &[IoSlice::new(&rec)]);
                if r == Ok(true) {
                    *next_token = token;
                    // The Vec's heap buffer does not move with the Vec.
                    inflight.push_back((token, std::mem::take(&mut p.data)));
                }
                r
            } else {
                let total = p.data.len();
                let hdr = (total as u64).to_le_bytes();
                loop {
                    if p.off == total && p.cont {
                        break Ok(true);
                    }
                    let len = cfg.chunk.min(total - p.off);
                    let piece = IoSlice::new(&p.data[p.off..p.off + len]);
                    let r = if p.cont {
                        prod.try_push(TAG_MORE, &[piece])
                    } else {
                        prod.try_push(TAG_FIRST, &[IoSlice::new(&hdr), piece])
                    };
                    if r != Ok(true) {
                        break r;
                    }
                    p.off += len;
                    p.cont = true;
                }
            };
            match sent {
                Ok(true) => {}
                Ok(false) => break,
                Err(_) => {
                    // Never deliverable; later sends report the error (the
                    // producer stays failed).
                    g.backlog.clear();
                    g.inflight.clear();
                    self.relist(g);
                    return;
                }
            }
            backlog.pop_front();
        }
        self.wake();
        let done = self.done().load(Ordering::Acquire);
        while g.inflight.front().is_some_and(|(t, _)| *t <= done) {
            g.inflight.pop_front();
        }
        self.relist(g);
    }

    /// Forgets queued output (the receiver departed): nothing keeps the
    /// context polling for it.
    pub(super) fn discard(&self) {
        let mut g = self.lock();
        g.backlog.clear();
        g.inflight.clear();
        self.relist(&mut g);
    }

    /// Keeps `Shared::pending_links` in step with this link's queues.
    fn relist(&self, g: &mut Out) {
        let want = !g.backlog.is_empty() || !g.inflight.is_empty();
        if want != g.listed {
            g.listed = want;
            if want {
                self.shared.pending_links.fetch_add(1, Ordering::AcqRel);
            } else {
                self.shared.pending_links.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }
}

#[cfg(test)]
impl ShmLink {
    /// Writes one record as it is, as a hostile sender could.
    pub(super) fn push_raw(&self, tag: u32, rec: &[u8]) -> bool {
        self.lock()
            .prod
            .try_push(tag, &[IoSlice::new(rec)])
            .unwrap_or(false)
    }

    /// The receiver-written `tail` word of our ring.
    pub(super) fn ring_tail_for_test(&self) -> *const AtomicU64 {
        // SAFETY: a pair segment mapped for our lifetime.
        unsafe { super::ring::tail_word(pair_ring(self.seg.as_ptr())) }
    }
}

impl Link for ShmLink {
    fn method(&self) -> &'static str {
        "shm"
    }

    fn send(&self, iov: &[IoSlice<'_>], waiter: &dyn Waiter) -> Result<()> {
        self.check()?;
        let total = iov_len(iov);
        if total <= self.shared.cfg.eager_max {
            if total >= self.shared.cfg.pipe_min && self.try_pipelined(iov, total)? {
                return Ok(());
            }
            return self.send_eager(iov, total, waiter);
        }
        match self.plan(iov, waiter)? {
            Plan::Cma => self.send_cma(iov, total, waiter)?,
            Plan::Chunked => self.send_chunked(iov, total, waiter)?,
            Plan::Queue => self.enqueue(concat(iov, 0)),
        }
        self.large_msgs.fetch_add(1, Ordering::Relaxed);
        self.large_bytes.fetch_add(total as u64, Ordering::Relaxed);
        Ok(())
    }

    fn counts_sends(&self) -> bool {
        true
    }

    fn sent(&self) -> (u64, u64) {
        let g = self.lock();
        (
            g.eager_msgs + self.large_msgs.load(Ordering::Relaxed),
            g.eager_bytes + self.large_bytes.load(Ordering::Relaxed),
        )
    }
}

/// `{token, total, n, (addr, len)×n}`, little-endian u64s.
fn rndv_record(
    token: u64,
    total: usize,
    ranges: impl ExactSizeIterator<Item = (u64, u64)>,
) -> Vec<u8> {
    let mut rec = Vec::with_capacity(24 + 16 * ranges.len());
    rec.extend_from_slice(&token.to_le_bytes());
    rec.extend_from_slice(&(total as u64).to_le_bytes());
    rec.extend_from_slice(&(ranges.len() as u64).to_le_bytes());
    for (a, l) in ranges {
        rec.extend_from_slice(&a.to_le_bytes());
        rec.extend_from_slice(&l.to_le_bytes());
    }
    rec
}

/// The bytes of `iov` from offset `from` on, in one owned buffer.
fn concat(iov: &[IoSlice<'_>], from: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(iov_len(iov) - from);
    let mut skip = from;
    for s in iov {
        if skip >= s.len() {
            skip -= s.len();
            continue;
        }
        v.extend_from_slice(&s[skip..]);
        skip = 0;
    }
    v
}

/// Most iovecs of a message sent pipelined (a runtime header, an MPI
/// envelope and the data, and then some).
const PIPE_IOV: usize = 6;

/// Fragment size of a pipelined message of `total` bytes: about a quarter,
/// so that the receiver's copy of one overlaps the sender's of the next,
/// but no smaller than 4 KiB, where a record's own costs start to show.
fn pipe_fragment(total: usize) -> usize {
    (total / 4).next_multiple_of(64).max(4096)
}

/// Fills `out` with the slices covering bytes `[off, off+len)` of `iov`;
/// returns how many. `out` must have room (`iov.len()` slices always do).
fn sub_iov_into<'a>(
    iov: &'a [IoSlice<'_>],
    mut off: usize,
    mut len: usize,
    out: &mut [IoSlice<'a>],
) -> usize {
    let mut k = 0;
    for s in iov {
        if len == 0 {
            break;
        }
        if off >= s.len() {
            off -= s.len();
            continue;
        }
        let take = (s.len() - off).min(len);
        out[k] = IoSlice::new(&s[off..off + take]);
        k += 1;
        len -= take;
        off = 0;
    }
    k
}

/// Appends to `out` the slices covering bytes `[off, off+len)` of `iov`.
fn sub_iov<'a>(iov: &'a [IoSlice<'_>], mut off: usize, mut len: usize, out: &mut Vec<IoSlice<'a>>) {
    for s in iov {
        if len == 0 {
            break;
        }
        if off >= s.len() {
            off -= s.len();
            continue;
        }
        let take = (s.len() - off).min(len);
        out.push(IoSlice::new(&s[off..off + take]));
        len -= take;
        off = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iov_helpers() {
        let a = b"hello ";
        let b = b"big ";
        let c = b"world";
        let iov = [IoSlice::new(a), IoSlice::new(b), IoSlice::new(c)];
        assert_eq!(concat(&iov, 0), b"hello big world");
        assert_eq!(concat(&iov, 8), b"g world");
        let mut out = Vec::new();
        sub_iov(&iov, 4, 7, &mut out);
        let got: Vec<u8> = out.iter().flat_map(|s| s.iter().copied()).collect();
        assert_eq!(got, b"o big w");
    }
}
