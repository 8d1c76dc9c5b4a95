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
#[derive(Debug, Clone)]
pub enum DtRef {
    Static(&'static Datatype),
    Shared(Arc<Datatype>),
}

impl Deref for DtRef {
    type Target = Datatype;
    #[inline]
    fn deref(&self) -> &Datatype {
        match self {
            DtRef::Static(d) => d,
            DtRef::Shared(d) => d,
        }
    }
}

impl From<Arc<Datatype>> for DtRef {
    fn from(d: Arc<Datatype>) -> DtRef {
        DtRef::Shared(d)
    }
}

impl From<&'static Datatype> for DtRef {
    fn from(d: &'static Datatype) -> DtRef {
        DtRef::Static(d)
    }
}

/// A user buffer of a pending operation: `count` elements of `dt` at address `addr`.
#[derive(Debug, Clone)]
pub struct Buf {
    addr: usize,
    pub count: usize,
    pub dt: DtRef,
}

impl Buf {
    /// # Safety
    /// The memory that `count` elements of `dt` at `addr` cover must stay
    /// valid — readable for a send, writable for a receive — until the
    /// operation using this buffer completes (the MPI rule for buffers).
    pub unsafe fn new(addr: usize, count: usize, dt: impl Into<DtRef>) -> Buf {
        Buf {
            addr,
            count,
            dt: dt.into(),
        }
    }

    /// A buffer over a Rust byte slice owned by the caller (collectives' temporaries).
    pub fn bytes_of(s: &[u8], byte: &Arc<Datatype>) -> Buf {
        Buf {
            addr: s.as_ptr() as usize,
            count: s.len(),
            dt: DtRef::Shared(byte.clone()),
        }
    }

    /// The same buffer with another element count (the caller's call says that many are valid).
    pub fn with_count(&self, count: usize) -> Buf {
        Buf {
            addr: self.addr,
            count,
            dt: self.dt.clone(),
        }
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

    /// Writes packed `data` (at most `bytes()` long) into the buffer.
    pub fn unpack(&self, data: &[u8]) {
        // SAFETY: `Buf::new`'s contract.
        unsafe { self.dt.unpack(self.addr, self.count, data) }
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

    /// The status, and the request emptied for reuse, under one lock.
    pub fn take_status_and_reset(&self) -> Status {
        let mut d = self.d.lock();
        let s = d.status;
        *d = ReqData::default();
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
        *self.d.lock() = ReqData::default();
    }

    pub fn status(&self) -> Status {
        self.d.lock().status
    }
}
