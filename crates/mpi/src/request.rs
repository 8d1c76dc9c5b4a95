//! Requests: the completion state of one operation, shared by the user's
//! handle and the protocol handlers that complete it.

use crate::datatype::Datatype;
use crate::mem;
use gridwire_core::sync::TryLock;
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// What a completed operation reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status {
    pub source: i32,
    pub tag: i32,
    pub error: i32,
    /// With `error` set: the point-to-point context of the request's
    /// communicator (`Comm::ctx`), so that the C layer reports the error on
    /// that communicator's handler; 0 when unknown (a send completed eagerly,
    /// a request of a nonblocking collective's private copy).
    pub comm_ctx: u32,
    pub bytes: usize,
    pub cancelled: bool,
}

/// The empty status (null or inactive requests, completed sends):
/// `MPI_ANY_SOURCE`, `MPI_ANY_TAG`, no error, nothing received.
impl Default for Status {
    fn default() -> Self {
        Status {
            source: crate::ANY_SOURCE,
            tag: crate::ANY_TAG,
            error: 0,
            comm_ctx: 0,
            bytes: 0,
            cancelled: false,
        }
    }
}

impl Status {
    /// The empty status (see `Default`).
    pub fn empty() -> Status {
        Status::default()
    }

    /// What a receive from `MPI_PROC_NULL` reports.
    pub fn proc_null() -> Status {
        Status {
            source: crate::PROC_NULL,
            ..Status::default()
        }
    }
}

/// The datatype of a buffer: borrowed for the predefined types (which live
/// as long as the library), shared otherwise. Why: a buffer is made for
/// every send and receive, and cloning and dropping an `Arc` costs two
/// locked instructions, a noticeable part of a small message's cost.
///
/// A pointer to the datatype beside what keeps it alive (nothing, or the
/// `Arc`), rather than an enum of the two: every use of the type is then one
/// load, not a branch on the variant (a small message's path dereferences
/// its buffer's datatype half a dozen times).
#[derive(Debug, Clone)]
pub struct DtRef {
    ptr: std::ptr::NonNull<Datatype>,
    /// Keeps a non-predefined type alive for as long as `ptr` is used.
    _owner: Option<Arc<Datatype>>,
}

/// The impls below rely on it.
const _: fn() = || {
    fn send_and_sync<T: Send + Sync>() {}
    send_and_sync::<Datatype>();
};

// SAFETY: a `DtRef` is a `&'static Datatype` or an `Arc<Datatype>` (and a
// pointer into it): it may move to, and be shared with, another thread
// exactly when those may.
unsafe impl Send for DtRef {}
// SAFETY: as above.
unsafe impl Sync for DtRef {}

impl DtRef {
    /// A predefined type, borrowed.
    #[inline]
    pub fn borrowed(d: &'static Datatype) -> DtRef {
        DtRef {
            ptr: std::ptr::NonNull::from(d),
            _owner: None,
        }
    }

    /// Any other type, shared.
    pub fn shared(d: Arc<Datatype>) -> DtRef {
        DtRef {
            ptr: std::ptr::NonNull::from(&*d),
            _owner: Some(d),
        }
    }
}

impl Deref for DtRef {
    type Target = Datatype;
    #[inline]
    fn deref(&self) -> &Datatype {
        // SAFETY: `ptr` points to a 'static datatype or into the `Arc` that
        // `_owner` holds for as long as `self` lives.
        unsafe { self.ptr.as_ref() }
    }
}

impl From<Arc<Datatype>> for DtRef {
    fn from(d: Arc<Datatype>) -> DtRef {
        DtRef::shared(d)
    }
}

impl From<&'static Datatype> for DtRef {
    fn from(d: &'static Datatype) -> DtRef {
        DtRef::borrowed(d)
    }
}

/// A user buffer of a pending operation: `count` elements of `dt` at address `addr`.
///
/// A `Buf` carries no lifetime (it lives in requests that outlive any Rust
/// borrow, as MPI buffers do), so every constructor is `unsafe`: its caller
/// promises the memory stays valid until the operations using the buffer
/// complete. A buffer made from a shared slice is read-only: [`Buf::unpack`]
/// never writes through it, and a receive into it is refused.
#[derive(Debug, Clone)]
pub struct Buf {
    addr: usize,
    pub count: usize,
    pub dt: DtRef,
    writable: bool,
}

impl Buf {
    /// # Safety
    /// The memory that `count` elements of `dt` at `addr` cover must stay
    /// valid — readable for a send, writable (and not otherwise borrowed)
    /// for a receive — until the operation using this buffer completes (the
    /// MPI rule for buffers). It then lies within one allocation, so its
    /// size `count * dt.size` does not overflow.
    pub unsafe fn new(addr: usize, count: usize, dt: impl Into<DtRef>) -> Buf {
        Buf {
            addr,
            count,
            dt: dt.into(),
            writable: true,
        }
    }

    /// A read-only buffer over a Rust byte slice (data to send).
    ///
    /// # Safety
    /// `s` must stay valid until every operation using the buffer (or a
    /// clone) completes; it is only read.
    pub unsafe fn bytes_of(s: &[u8], byte: &Arc<Datatype>) -> Buf {
        Buf {
            addr: s.as_ptr() as usize,
            count: s.len(),
            dt: DtRef::shared(byte.clone()),
            writable: false,
        }
    }

    /// A writable buffer over a Rust byte slice (data to receive).
    ///
    /// # Safety
    /// `s` must stay valid, and must not be read or written by anyone else,
    /// until every operation using the buffer completes (the borrow ends
    /// when this returns; the request does not).
    pub unsafe fn bytes_of_mut(s: &mut [u8], byte: &Arc<Datatype>) -> Buf {
        Buf {
            addr: s.as_mut_ptr() as usize,
            count: s.len(),
            dt: DtRef::shared(byte.clone()),
            writable: true,
        }
    }

    /// The same buffer with fewer elements (or as many), if `count` is not more.
    pub fn with_count(&self, count: usize) -> Option<Buf> {
        (count <= self.count).then(|| Buf {
            count,
            ..self.clone()
        })
    }

    /// The same buffer with any element count.
    ///
    /// # Safety
    /// As [`Buf::new`] for `count` elements: the caller's call says that
    /// many are valid (e.g. `MPI_Reduce_scatter`'s send buffer holds the sum
    /// of the counts).
    pub unsafe fn with_count_unchecked(&self, count: usize) -> Buf {
        Buf {
            count,
            ..self.clone()
        }
    }

    /// Whether the buffer may be written (a receive may go into it).
    pub fn writable(&self) -> bool {
        self.writable
    }

    pub fn addr(&self) -> usize {
        self.addr
    }

    #[inline]
    pub fn bytes(&self) -> usize {
        self.count * self.dt.size
    }

    /// The packed bytes, if they lie contiguously in memory (no packing needed).
    pub fn contig(&self) -> Option<&[u8]> {
        if self.dt.contig || self.count == 0 {
            // SAFETY: `Buf::new`'s contract: the range is the user's live buffer.
            Some(unsafe {
                mem::slice(self.addr.wrapping_add_signed(self.dt.true_lb), self.bytes())
            })
        } else {
            None
        }
    }

    /// The address where the packed bytes lie, if they lie contiguously.
    pub fn contig_addr(&self) -> Option<usize> {
        (self.dt.contig || self.count == 0).then(|| self.addr.wrapping_add_signed(self.dt.true_lb))
    }

    /// The packed bytes in a new vector.
    pub fn pack(&self) -> Vec<u8> {
        let mut v = vec![0u8; self.bytes()];
        // SAFETY: `Buf::new`'s contract.
        unsafe { self.dt.pack(self.addr, self.count, &mut v) };
        v
    }

    /// Packs the bytes into `out`, which must be `bytes()` long.
    pub fn pack_into(&self, out: &mut [u8]) {
        assert_eq!(
            out.len(),
            self.bytes(),
            "pack_into: output of the wrong length"
        );
        // SAFETY: `Buf::new`'s contract.
        unsafe { self.dt.pack(self.addr, self.count, out) };
    }

    /// Writes packed `data` (at most `bytes()` long) into the buffer; a
    /// read-only buffer is left alone (receives into one are refused before).
    /// Always inlined: on every eager receive's path (`deliver`), where the
    /// call alone was a third of its 27 instructions.
    #[inline(always)]
    pub fn unpack(&self, data: &[u8]) {
        if self.writable && self.dt.contig && data.len() <= 64 {
            // A small message into a contiguous buffer (the rate loop's
            // 1-64 bytes): copied inline, not through the datatype and memmove.
            let n = data.len().min(self.bytes());
            // SAFETY: the constructor's contract: the buffer is writable
            // (checked) for `bytes()` bytes from the true lower bound, of
            // which we write `n`.
            unsafe {
                copy_small(
                    data.as_ptr(),
                    self.addr.wrapping_add_signed(self.dt.true_lb),
                    n,
                )
            };
            return;
        }
        self.unpack_general(data);
    }

    /// [`Buf::unpack`] through the datatype (larger or noncontiguous data).
    #[inline(never)]
    fn unpack_general(&self, data: &[u8]) {
        if !self.writable {
            return;
        }
        // SAFETY: the constructor's contract: the buffer is writable.
        unsafe { self.dt.unpack(self.addr, self.count, data) }
    }
}

/// Copies `n <= 64` bytes without a call.
///
/// # Safety
/// `src` readable and `dst` writable for `n` bytes; the ranges do not overlap.
#[inline(always)]
unsafe fn copy_small(src: *const u8, dst: usize, n: usize) {
    debug_assert!(n <= 64);
    let dst = dst as *mut u8;
    // SAFETY: per the contract; the two words of each case (8, 16 or 32
    // bytes) overlap rather than overrun, and unaligned accesses need no
    // alignment.
    unsafe {
        if n > 32 {
            let a = std::ptr::read_unaligned(src as *const [u128; 2]);
            let b = std::ptr::read_unaligned(src.add(n - 32) as *const [u128; 2]);
            std::ptr::write_unaligned(dst as *mut [u128; 2], a);
            std::ptr::write_unaligned(dst.add(n - 32) as *mut [u128; 2], b);
        } else if n > 16 {
            let a = std::ptr::read_unaligned(src as *const u128);
            let b = std::ptr::read_unaligned(src.add(n - 16) as *const u128);
            std::ptr::write_unaligned(dst as *mut u128, a);
            std::ptr::write_unaligned(dst.add(n - 16) as *mut u128, b);
        } else if n >= 8 {
            let a = std::ptr::read_unaligned(src as *const u64);
            let b = std::ptr::read_unaligned(src.add(n - 8) as *const u64);
            std::ptr::write_unaligned(dst as *mut u64, a);
            std::ptr::write_unaligned(dst.add(n - 8) as *mut u64, b);
        } else {
            for i in 0..n {
                *dst.add(i) = *src.add(i);
            }
        }
    }
}

/// The data a rendezvous send still has to deliver.
#[derive(Debug)]
pub enum SendData {
    None,
    User(Buf),
    Owned(Vec<u8>),
}

#[derive(Debug)]
pub struct ReqData {
    pub status: Status,
    /// Receives: where the data goes. Rendezvous sends: what goes.
    pub recv: Option<Buf>,
    pub send: SendData,
    /// Context id of a posted receive (to find it again for `MPI_Cancel`).
    pub ctx: u64,
    pub is_recv: bool,
    /// Buffered send space to give back when this completes.
    pub bsend_bytes: usize,
    /// Rendezvous receive: data bytes arrived so far (`H_DATA` pieces).
    pub rndv_got: usize,
    /// Rendezvous receive into a noncontiguous type: the packed bytes so far.
    pub staged: Vec<u8>,
    /// Rendezvous send: (request id, sequence number, world rank of the
    /// receiver), what a cancel names the message by (`ctx` holds its context).
    pub rndv_send: Option<(u64, u32, u32)>,
    /// Rendezvous receive: `H_DATA` pieces the transport is reading
    /// straight into the receive buffer now (see `engine/placed.rs`).
    /// While any is, the request does not complete: completing is then
    /// left to the last one (`complete_when_unplaced`).
    pub placing: u32,
    pub complete_when_unplaced: bool,
}

impl Default for ReqData {
    fn default() -> Self {
        ReqData {
            status: Status::default(),
            recv: None,
            send: SendData::None,
            ctx: 0,
            is_recv: false,
            bsend_bytes: 0,
            rndv_got: 0,
            staged: Vec::new(),
            rndv_send: None,
            placing: 0,
            complete_when_unplaced: false,
        }
    }
}

impl ReqData {
    /// The status as the program sees it: an error names the request's
    /// communicator (see [`Status::comm_ctx`]). Only the error path pays for
    /// it (one branch on a value just loaded).
    #[inline]
    pub fn reported_status(&self) -> Status {
        let mut s = self.status;
        if s.error != 0 && self.ctx >> 32 == 0 {
            s.comm_ctx = self.ctx as u32;
        }
        s
    }

    /// Back to [`ReqData::default`]. A finished eager receive (the common
    /// case: a message-rate window) only set its buffer, context and
    /// status: those are reset field by field, and the rest (rendezvous and
    /// buffered-send state) only when it was used. Writing and dropping the
    /// whole struct cost about 50 instructions per request.
    #[inline]
    pub fn reset(&mut self) {
        self.status = Status::default();
        self.recv = None;
        self.ctx = 0;
        self.is_recv = false;
        if !matches!(self.send, SendData::None)
            || self.bsend_bytes != 0
            || self.rndv_got != 0
            || self.staged.capacity() != 0
            || self.rndv_send.is_some()
        {
            *self = ReqData::default();
        }
    }
}

/// One operation in flight.
///
/// `d` is a [`TryLock`], not a mutex: it is taken two or three times per
/// message (post, match, status) and never held for long, so a release store
/// to unlock beats the mutex's locked exchange.
#[derive(Default)]
pub struct Req {
    done: AtomicBool,
    pub d: TryLock<ReqData>,
    /// The work of a nonblocking collective that no thread has started yet:
    /// the helper thread takes it when it starts, or a thread that waits for
    /// the request first takes it and runs it itself (see [`Req::run_job`]).
    job: TryLock<Option<Job>>,
}

/// Deferred work that completes a request.
pub type Job = Box<dyn FnOnce() + Send>;

impl std::fmt::Debug for Req {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Req").field("done", &self.done()).finish()
    }
}

impl Req {
    pub fn done(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    pub fn new_done(status: Status) -> Arc<Req> {
        let r = Req::default();
        r.d.lock().status = status;
        r.done.store(true, Ordering::Release);
        Arc::new(r)
    }

    /// Marks the request complete; everything written to `d` before is visible to the waiter.
    pub fn complete(&self) {
        self.done.store(true, Ordering::Release);
    }

    /// Runs `f` on the data of a request that no one else holds, without
    /// the lock; None (and `f` not run) if another reference exists.
    #[inline]
    pub fn with_sole<R>(self: &Arc<Self>, f: impl FnOnce(&mut ReqData) -> R) -> Option<R> {
        if Arc::strong_count(self) != 1 {
            return None;
        }
        // Pairs with the Release decrement of the last other reference
        // dropped: what its holder wrote to `d` is visible here.
        std::sync::atomic::fence(Ordering::Acquire);
        // SAFETY: `self` is the only `Arc` of this request and no `Weak` of
        // a `Req` is ever made, so no other thread can reach `d` (nor clone
        // the `Arc`) while `f` runs; the fence above orders us after the
        // last holder's writes.
        Some(f(unsafe { self.d.get_unshared() }))
    }

    /// [`Req::take_status_and_reset`] for the sole holder (see
    /// [`Req::with_sole`]): no locked instruction. None if it is shared.
    #[inline]
    pub fn take_status_and_reset_sole(self: &Arc<Self>) -> Option<Status> {
        let s = self.with_sole(|d| {
            let s = d.reported_status();
            d.reset();
            s
        })?;
        self.done.store(false, Ordering::Relaxed);
        Some(s)
    }

    /// The status, and the request emptied for reuse, under one lock.
    pub fn take_status_and_reset(&self) -> Status {
        let mut d = self.d.lock();
        let s = d.reported_status();
        d.reset();
        drop(d);
        self.done.store(false, Ordering::Relaxed);
        s
    }

    /// Attaches work that completes this request (see the field `job`).
    pub fn set_job(&self, job: Job) {
        *self.job.lock() = Some(job);
    }

    /// Whether work is attached that no thread has taken yet.
    pub fn has_job(&self) -> bool {
        self.job.lock().is_some()
    }

    /// Takes the request's pending work, if no thread has taken it yet.
    pub fn take_job(&self) -> Option<Job> {
        self.job.lock().take()
    }

    /// Runs the request's pending work in this thread, if nobody has
    /// started it: a wait then costs what the blocking operation costs,
    /// where handing it to the helper thread cost a thread switch and naps
    /// per step. Returns whether it ran.
    pub fn run_job(&self) -> bool {
        match self.take_job() {
            Some(job) => {
                job();
                true
            }
            None => false,
        }
    }

    pub fn reset(&self) {
        self.done.store(false, Ordering::Relaxed);
        self.d.lock().reset();
    }

    pub fn status(&self) -> Status {
        self.d.lock().reported_status()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datatype::Basic;

    fn byte() -> Arc<Datatype> {
        Datatype::predefined(Basic::U8, "MPI_BYTE")
    }

    #[test]
    fn a_buffer_from_a_shared_slice_is_never_written() {
        let data = [1u8, 2, 3, 4];
        // SAFETY: `data` outlives `b`.
        let b = unsafe { Buf::bytes_of(&data, &byte()) };
        assert!(!b.writable());
        b.unpack(&[9, 9, 9, 9]);
        assert_eq!(data, [1, 2, 3, 4]);
        // A receive into it is refused.
        let e = crate::fuzzing::engine_of_job(2);
        let g = crate::group::Group::new(vec![0, 1]);
        let r = e.recv(0, &g, 1, 0, b);
        assert_eq!(r.err().map(|e| e.class), Some(crate::class::BUFFER));
    }

    #[test]
    fn with_count_does_not_reach_past_the_buffer() {
        let data = [7u8; 4];
        // SAFETY: `data` outlives `b`.
        let b = unsafe { Buf::bytes_of(&data, &byte()) };
        assert!(b.with_count(64).is_none());
        let two = b.with_count(2).expect("fewer elements");
        assert_eq!(two.contig(), Some(&data[..2]));
    }
}
