//! Point-to-point: sends, receives, probes, requests.

use crate::abi::*;
use crate::errors::{run, run_on_request};
use crate::handles::{
    self, buf, comm, comm_ref, mpi, peer_buf, PKind, Persistent, ReqObj, MSGS, REQS,
};
use crate::{arr, arr_mut, put, Void};
use gridwire_mpi::isend::Started;
use gridwire_mpi::{class, err, Mode, Req, Result, Status};
use std::ffi::c_int;
use std::sync::{Arc, Mutex};

/// Stores a status unless the program passed `MPI_STATUS_IGNORE`, leaving
/// its `MPI_ERROR` field as it was: the standard lets only the functions that
/// complete several requests (`MPI_Waitall`, `MPI_Testall`, `MPI_Waitsome`,
/// `MPI_Testsome`, `MPI_Request_get_status_all/some`) set it (MPI-4.1 §3.2.5);
/// a single completion reports its error as the return code. The empty
/// status is the exception: it is defined with error `MPI_SUCCESS`.
///
/// # Safety
/// `p` is NULL or points to an `MPI_Status`.
pub(crate) unsafe fn put_status(p: *mut MPI_Status, s: &Status) {
    if p.is_null() {
        return;
    }
    let v = handles::status_from(s);
    if *s == Status::empty() {
        // The empty status (null or inactive request) is defined whole,
        // error MPI_SUCCESS included (MPI-4.1 §3.7.3).
        // SAFETY: forwarded contract.
        unsafe { p.write(v) };
        return;
    }
    // SAFETY: `p` points to an MPI_Status (contract); each field is written
    // on its own (never read: the program may have left it uninitialised).
    unsafe {
        std::ptr::addr_of_mut!((*p).MPI_SOURCE).write(v.MPI_SOURCE);
        std::ptr::addr_of_mut!((*p).MPI_TAG).write(v.MPI_TAG);
        std::ptr::addr_of_mut!((*p).internal).write(v.internal);
    }
}

/// [`put_status`] for the functions that complete several requests: these
/// also set `MPI_ERROR`.
///
/// # Safety
/// `p` is NULL or points to an `MPI_Status`.
pub(crate) unsafe fn put_status_with_error(p: *mut MPI_Status, s: &Status) {
    // SAFETY: forwarded contract.
    unsafe { put(p, handles::status_from(s)) };
}

fn new_req_handle(r: Arc<Req>, send: bool) -> MPI_Request {
    if send && r.done() {
        // Completed inside the call (eager): no table slot needed.
        return REQUEST_DONE_SEND;
    }
    REQS.insert(ReqObj::Plain(r))
}

unsafe fn send_impl(
    name: &str,
    b: *const Void,
    count: i64,
    dt: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    c: MPI_Comm,
    mode: Mode,
) -> c_int {
    run(name, c, || {
        let cm = comm_ref(c)?;
        // SAFETY: the program's send buffer, valid during the blocking call.
        let bf = unsafe { peer_buf(b, count, dt, dest) }?;
        mpi()?.send(&cm, &bf, dest, tag, mode)
    })
}

mpi_fn!(fn MPI_Send / PMPI_Send(b: *const Void, count: c_int, dt: MPI_Datatype, dest: c_int, tag: c_int, c: MPI_Comm) -> c_int {
    // SAFETY: forwarded argument contract.
    unsafe { send_impl("MPI_Send", b, count.into(), dt, dest, tag, c, Mode::Standard) }
});
mpi_fn!(fn MPI_Ssend / PMPI_Ssend(b: *const Void, count: c_int, dt: MPI_Datatype, dest: c_int, tag: c_int, c: MPI_Comm) -> c_int {
    // SAFETY: forwarded argument contract.
    unsafe { send_impl("MPI_Ssend", b, count.into(), dt, dest, tag, c, Mode::Sync) }
});
mpi_fn!(fn MPI_Bsend / PMPI_Bsend(b: *const Void, count: c_int, dt: MPI_Datatype, dest: c_int, tag: c_int, c: MPI_Comm) -> c_int {
    // SAFETY: forwarded argument contract.
    unsafe { send_impl("MPI_Bsend", b, count.into(), dt, dest, tag, c, Mode::Buffered) }
});
mpi_fn!(fn MPI_Rsend / PMPI_Rsend(b: *const Void, count: c_int, dt: MPI_Datatype, dest: c_int, tag: c_int, c: MPI_Comm) -> c_int {
    // SAFETY: forwarded argument contract.
    unsafe { send_impl("MPI_Rsend", b, count.into(), dt, dest, tag, c, Mode::Ready) }
});

unsafe fn isend_impl(
    name: &str,
    b: *const Void,
    count: i64,
    dt: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    c: MPI_Comm,
    mode: Mode,
    req: *mut MPI_Request,
) -> c_int {
    run(name, c, || {
        if req.is_null() {
            return Err(err(class::REQUEST, "request pointer is NULL"));
        }
        let cm = comm_ref(c)?;
        // SAFETY: the program keeps the buffer until the request completes (MPI rule).
        let bf = unsafe { peer_buf(b, count, dt, dest) }?;
        let h = match mpi()?.isend_start(&cm, &bf, dest, tag, mode)? {
            Started::InFlight(r) => new_req_handle(r, true),
            // Completed inside the call (eager): no request object at all;
            // the handle says where the message went, for MPI_Cancel.
            Started::Done(sent) => handles::eager_sent_handle(sent),
        };
        // SAFETY: checked non-null output argument.
        unsafe { *req = h };
        Ok(())
    })
}

mpi_fn!(fn MPI_Isend / PMPI_Isend(b: *const Void, count: c_int, dt: MPI_Datatype, dest: c_int, tag: c_int, c: MPI_Comm, req: *mut MPI_Request) -> c_int {
    // SAFETY: forwarded argument contract.
    unsafe { isend_impl("MPI_Isend", b, count.into(), dt, dest, tag, c, Mode::Standard, req) }
});
mpi_fn!(fn MPI_Issend / PMPI_Issend(b: *const Void, count: c_int, dt: MPI_Datatype, dest: c_int, tag: c_int, c: MPI_Comm, req: *mut MPI_Request) -> c_int {
    // SAFETY: forwarded argument contract.
    unsafe { isend_impl("MPI_Issend", b, count.into(), dt, dest, tag, c, Mode::Sync, req) }
});
mpi_fn!(fn MPI_Ibsend / PMPI_Ibsend(b: *const Void, count: c_int, dt: MPI_Datatype, dest: c_int, tag: c_int, c: MPI_Comm, req: *mut MPI_Request) -> c_int {
    // SAFETY: forwarded argument contract.
    unsafe { isend_impl("MPI_Ibsend", b, count.into(), dt, dest, tag, c, Mode::Buffered, req) }
});
mpi_fn!(fn MPI_Irsend / PMPI_Irsend(b: *const Void, count: c_int, dt: MPI_Datatype, dest: c_int, tag: c_int, c: MPI_Comm, req: *mut MPI_Request) -> c_int {
    // SAFETY: forwarded argument contract.
    unsafe { isend_impl("MPI_Irsend", b, count.into(), dt, dest, tag, c, Mode::Ready, req) }
});

mpi_fn!(fn MPI_Recv / PMPI_Recv(b: *mut Void, count: c_int, dt: MPI_Datatype, src: c_int, tag: c_int, c: MPI_Comm, status: *mut MPI_Status) -> c_int {
    // SAFETY: forwarded argument contract.
    unsafe { recv_impl("MPI_Recv", b, count.into(), dt, src, tag, c, status) }
});

/// `MPI_Recv` and `MPI_Recv_c`: counts are `MPI_Count` wide here.
/// # Safety
/// The argument contract of `MPI_Recv`.
#[allow(clippy::too_many_arguments)]
unsafe fn recv_impl(
    name: &str,
    b: *mut Void,
    count: i64,
    dt: MPI_Datatype,
    src: c_int,
    tag: c_int,
    c: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    run(name, c, || {
        let cm = comm_ref(c)?;
        // SAFETY: the program's receive buffer, valid during the blocking call.
        let bf = unsafe { peer_buf(b, count, dt, src) }?;
        let m = mpi()?;
        let cap = bf.bytes();
        // SAFETY: `r` stays on this stack until the wait saw it done; an
        // unwind before hands it to the engine (`KeptRecv`).
        let r = unsafe { m.irecv_kept(&cm, bf, src, tag)? };
        let r = gridwire_mpi::engine::KeptRecv::new(&m.engine, r);
        m.wait(&r);
        let s = m.engine.finish(r.into_inner());
        // SAFETY: status output argument (or MPI_STATUS_IGNORE).
        unsafe { put_status(status, &s) };
        match gridwire_mpi::engine::status_error(&s, cap) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    })
}

mpi_fn!(fn MPI_Irecv / PMPI_Irecv(b: *mut Void, count: c_int, dt: MPI_Datatype, src: c_int, tag: c_int, c: MPI_Comm, req: *mut MPI_Request) -> c_int {
    // SAFETY: forwarded argument contract.
    unsafe { irecv_impl("MPI_Irecv", b, count.into(), dt, src, tag, c, req) }
});

/// `MPI_Irecv` and `MPI_Irecv_c`: counts are `MPI_Count` wide here.
/// # Safety
/// The argument contract of `MPI_Irecv`.
#[allow(clippy::too_many_arguments)]
unsafe fn irecv_impl(
    name: &str,
    b: *mut Void,
    count: i64,
    dt: MPI_Datatype,
    src: c_int,
    tag: c_int,
    c: MPI_Comm,
    req: *mut MPI_Request,
) -> c_int {
    run(name, c, || {
        if req.is_null() {
            return Err(err(class::REQUEST, "request pointer is NULL"));
        }
        let cm = comm_ref(c)?;
        // SAFETY: the program keeps the buffer until the request completes (MPI rule).
        let bf = unsafe { peer_buf(b, count, dt, src) }?;
        // SAFETY: the handle table keeps the request until a Wait or Test
        // saw it done, or `MPI_Request_free` hands it to the engine (the
        // only ways a plain request leaves the table).
        let r = unsafe { mpi()?.irecv_kept(&cm, bf, src, tag)? };
        // SAFETY: checked non-null output argument.
        unsafe { *req = new_req_handle(r, false) };
        Ok(())
    })
}

mpi_fn!(fn MPI_Sendrecv / PMPI_Sendrecv(sb: *const Void, sc: c_int, st: MPI_Datatype, dest: c_int, stag: c_int,
        rb: *mut Void, rc: c_int, rt: MPI_Datatype, src: c_int, rtag: c_int, c: MPI_Comm, status: *mut MPI_Status) -> c_int {
    // SAFETY: forwarded argument contract.
    unsafe { sendrecv_impl("MPI_Sendrecv", sb, sc.into(), st, dest, stag, rb, rc.into(), rt, src, rtag, c, status) }
});

/// `MPI_Sendrecv` and `MPI_Sendrecv_c`: counts are `MPI_Count` wide here.
/// # Safety
/// The argument contract of `MPI_Sendrecv`.
#[allow(clippy::too_many_arguments)]
unsafe fn sendrecv_impl(
    name: &str,
    sb: *const Void,
    sc: i64,
    st: MPI_Datatype,
    dest: c_int,
    stag: c_int,
    rb: *mut Void,
    rc: i64,
    rt: MPI_Datatype,
    src: c_int,
    rtag: c_int,
    c: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    run(name, c, || {
        let cm = comm_ref(c)?;
        // SAFETY: the program's buffers, valid during the blocking call.
        let (sbf, rbf) = unsafe { (buf(sb, sc, st)?, buf(rb, rc, rt)?) };
        let m = mpi()?;
        let cap = rbf.bytes();
        let r = m.irecv(&cm, rbf, src, rtag)?;
        let s = m.isend(&cm, &sbf, dest, stag, Mode::Standard)?;
        m.wait(&s);
        m.wait(&r);
        let st = r.status();
        m.engine.recycle(r);
        m.engine.recycle(s);
        // SAFETY: status output argument.
        unsafe { put_status(status, &st) };
        match gridwire_mpi::engine::status_error(&st, cap) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    })
}

mpi_fn!(fn MPI_Sendrecv_replace / PMPI_Sendrecv_replace(b: *mut Void, count: c_int, dt: MPI_Datatype, dest: c_int, stag: c_int,
        src: c_int, rtag: c_int, c: MPI_Comm, status: *mut MPI_Status) -> c_int {
    // SAFETY: forwarded argument contract.
    unsafe { sendrecv_replace_impl("MPI_Sendrecv_replace", b, count.into(), dt, dest, stag, src, rtag, c, status) }
});

/// `MPI_Sendrecv_replace` and `MPI_Sendrecv_replace_c`: counts are `MPI_Count` wide here.
/// # Safety
/// The argument contract of `MPI_Sendrecv_replace`.
#[allow(clippy::too_many_arguments)]
unsafe fn sendrecv_replace_impl(
    name: &str,
    b: *mut Void,
    count: i64,
    dt: MPI_Datatype,
    dest: c_int,
    stag: c_int,
    src: c_int,
    rtag: c_int,
    c: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    run(name, c, || {
        let cm = comm_ref(c)?;
        // SAFETY: the program's buffer, valid during the blocking call.
        let bf = unsafe { buf(b, count, dt) }?;
        let m = mpi()?;
        m.check_buf(&bf, "buffer")?;
        let packed = bf.pack();
        let byte = handles::dtype(583)?;
        // SAFETY: `packed` outlives the send, which is waited for below.
        let sbf = unsafe { gridwire_mpi::Buf::bytes_of(&packed, &byte) };
        let cap = bf.bytes();
        let r = m.irecv(&cm, bf, src, rtag)?;
        let s = m.isend(&cm, &sbf, dest, stag, Mode::Standard)?;
        m.wait(&s);
        m.wait(&r);
        let st = r.status();
        // SAFETY: status output argument.
        unsafe { put_status(status, &st) };
        match gridwire_mpi::engine::status_error(&st, cap) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    })
}

mpi_fn!(fn MPI_Probe / PMPI_Probe(src: c_int, tag: c_int, c: MPI_Comm, status: *mut MPI_Status) -> c_int {
    run("MPI_Probe", c, || {
        let s = mpi()?.probe(&*comm(c)?, src, tag)?;
        // SAFETY: status output argument.
        unsafe { put_status(status, &s) };
        Ok(())
    })
});

mpi_fn!(fn MPI_Iprobe / PMPI_Iprobe(src: c_int, tag: c_int, c: MPI_Comm, flag: *mut c_int, status: *mut MPI_Status) -> c_int {
    run("MPI_Iprobe", c, || {
        let s = mpi()?.iprobe(&*comm_ref(c)?, src, tag)?;
        // SAFETY: output arguments.
        unsafe {
            put(flag, s.is_some() as c_int);
            if let Some(s) = s {
                put_status(status, &s);
            }
        }
        Ok(())
    })
});

unsafe fn mprobe_impl(
    name: &str,
    src: c_int,
    tag: c_int,
    c: MPI_Comm,
    flag: *mut c_int,
    msg: *mut MPI_Message,
    status: *mut MPI_Status,
    block: bool,
) -> c_int {
    run(name, c, || {
        let got = mpi()?.improbe(&*comm_ref(c)?, src, tag, block)?;
        // SAFETY: output arguments.
        unsafe {
            put(flag, got.is_some() as c_int);
            match got {
                None => {}
                Some(None) => {
                    put(msg, MPI_MESSAGE_NO_PROC);
                    put_status(status, &Status::proc_null());
                }
                Some(Some(u)) => {
                    put_status(status, &u.status());
                    put(msg, MSGS.insert(Arc::new(Mutex::new(Some(u)))));
                }
            }
        }
        Ok(())
    })
}

mpi_fn!(fn MPI_Mprobe / PMPI_Mprobe(src: c_int, tag: c_int, c: MPI_Comm, msg: *mut MPI_Message, status: *mut MPI_Status) -> c_int {
    // SAFETY: forwarded argument contract.
    unsafe { mprobe_impl("MPI_Mprobe", src, tag, c, std::ptr::null_mut(), msg, status, true) }
});
mpi_fn!(fn MPI_Improbe / PMPI_Improbe(src: c_int, tag: c_int, c: MPI_Comm, flag: *mut c_int, msg: *mut MPI_Message, status: *mut MPI_Status) -> c_int {
    // SAFETY: forwarded argument contract.
    unsafe { mprobe_impl("MPI_Improbe", src, tag, c, flag, msg, status, false) }
});

unsafe fn take_msg(msg: *mut MPI_Message) -> Result<Option<gridwire_mpi::engine::Unexpected>> {
    if msg.is_null() {
        return Err(err(class::ARG, "message pointer is NULL"));
    }
    // SAFETY: checked non-null in/out argument.
    let h = unsafe { *msg };
    let out = match h {
        MPI_MESSAGE_NO_PROC => None,
        _ => {
            let m = MSGS.remove(h).ok_or_else(|| {
                err(
                    class::ARG,
                    format!("invalid message handle {h:#x} (already received?)"),
                )
            })?;
            let u = m.lock().unwrap().take();
            u
        }
    };
    // SAFETY: as above.
    unsafe { *msg = MPI_MESSAGE_NULL };
    Ok(out)
}

mpi_fn!(fn MPI_Mrecv / PMPI_Mrecv(b: *mut Void, count: c_int, dt: MPI_Datatype, msg: *mut MPI_Message, status: *mut MPI_Status) -> c_int {
    // SAFETY: forwarded argument contract.
    unsafe { mrecv_impl("MPI_Mrecv", b, count.into(), dt, msg, status) }
});

/// `MPI_Mrecv` and `MPI_Mrecv_c`: counts are `MPI_Count` wide here.
/// # Safety
/// The argument contract of `MPI_Mrecv`.
#[allow(clippy::too_many_arguments)]
unsafe fn mrecv_impl(
    name: &str,
    b: *mut Void,
    count: i64,
    dt: MPI_Datatype,
    msg: *mut MPI_Message,
    status: *mut MPI_Status,
) -> c_int {
    run(name, MPI_COMM_WORLD, || {
        // SAFETY: the program's receive buffer, valid during the blocking call.
        let bf = unsafe { buf(b, count, dt) }?;
        let cap = bf.bytes();
        // SAFETY: message in/out argument.
        let u = unsafe { take_msg(msg) }?;
        let m = mpi()?;
        let r = m.mrecv(u, bf)?;
        m.wait(&r);
        let s = r.status();
        // SAFETY: status output argument.
        unsafe { put_status(status, &s) };
        match gridwire_mpi::engine::status_error(&s, cap) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    })
}

mpi_fn!(fn MPI_Imrecv / PMPI_Imrecv(b: *mut Void, count: c_int, dt: MPI_Datatype, msg: *mut MPI_Message, req: *mut MPI_Request) -> c_int {
    // SAFETY: forwarded argument contract.
    unsafe { imrecv_impl("MPI_Imrecv", b, count.into(), dt, msg, req) }
});

/// `MPI_Imrecv` and `MPI_Imrecv_c`: counts are `MPI_Count` wide here.
/// # Safety
/// The argument contract of `MPI_Imrecv`.
#[allow(clippy::too_many_arguments)]
unsafe fn imrecv_impl(
    name: &str,
    b: *mut Void,
    count: i64,
    dt: MPI_Datatype,
    msg: *mut MPI_Message,
    req: *mut MPI_Request,
) -> c_int {
    run(name, MPI_COMM_WORLD, || {
        // SAFETY: the program keeps the buffer until the request completes.
        let bf = unsafe { buf(b, count, dt) }?;
        // SAFETY: message in/out argument.
        let u = unsafe { take_msg(msg) }?;
        let r = mpi()?.mrecv(u, bf)?;
        // SAFETY: output argument.
        unsafe { put(req, new_req_handle(r, false)) };
        Ok(())
    })
}

// ---- requests -----------------------------------------------------------------

enum Active {
    /// Null or inactive persistent request: completes at once with an empty status.
    Empty,
    DoneSend,
    Req(Arc<Req>),
}

fn active(h: MPI_Request) -> Result<Active> {
    active_of(h, || REQS.get(h))
}

/// [`active`] with the table look-up given (`look`: the handle's object,
/// asked only for a table handle).
fn active_of(h: MPI_Request, look: impl FnOnce() -> Option<ReqObj>) -> Result<Active> {
    match h {
        MPI_REQUEST_NULL => Ok(Active::Empty),
        REQUEST_DONE_SEND => Ok(Active::DoneSend),
        _ if handles::is_eager_sent(h) => Ok(Active::DoneSend),
        _ => match look() {
            Some(ReqObj::Plain(r)) => Ok(Active::Req(r)),
            Some(ReqObj::Persistent(p)) => Ok(p
                .lock()
                .unwrap()
                .active
                .clone()
                .map_or(Active::Empty, Active::Req)),
            Some(ReqObj::Generalized(g)) => Ok(Active::Req(g.req.clone())),
            None => Err(err(
                class::REQUEST,
                format!("invalid request handle {h:#x} (freed, or already completed)"),
            )),
        },
    }
}

/// Whether `h` is a live plain (not persistent, not generalized) request
/// that is not done, looked at without cloning it.
#[inline]
fn plain_pending(h: MPI_Request) -> bool {
    REQS.with(h, |o| matches!(o, ReqObj::Plain(r) if !r.done())) == Some(true)
}

fn is_done(a: &Active) -> bool {
    match a {
        Active::Req(r) => r.done(),
        _ => true,
    }
}

/// Finishes a completed request: its status, and the handle becomes NULL (or inactive).
fn finish(h: &mut MPI_Request, a: Active) -> Status {
    let handle = *h;
    finish_with(h, a, || REQS.remove_unless(handle, is_persistent), None)
}

fn is_persistent(o: &ReqObj) -> bool {
    matches!(o, ReqObj::Persistent(_))
}

/// [`finish`] with the table removal given (`take`: called only for an
/// active request; what `REQS.remove_unless(h, is_persistent)` returns).
///
/// `spare`: where a recyclable request goes (then given back to the engine
/// in one batch by the caller, see `Engine::give_back`); None: recycled now.
fn finish_with(
    h: &mut MPI_Request,
    a: Active,
    take: impl FnOnce() -> Option<ReqObj>,
    spare: Option<&mut Vec<Arc<Req>>>,
) -> Status {
    match a {
        Active::Empty => Status::empty(),
        Active::DoneSend => {
            *h = MPI_REQUEST_NULL;
            Status::default()
        }
        Active::Req(r) => {
            // One table look-up: a plain request's handle goes, a persistent
            // one stays (inactive).
            match take() {
                Some(ReqObj::Persistent(p)) => p.lock().unwrap().active = None,
                Some(ReqObj::Generalized(g)) => {
                    *h = MPI_REQUEST_NULL;
                    return crate::grequest::finish(&g);
                }
                _ => *h = MPI_REQUEST_NULL,
            }
            // The table's reference is gone: the status is read and the
            // request recycled (without its lock when this is the last
            // reference).
            match (mpi(), spare) {
                (Ok(m), Some(spare)) => m.engine.finish_into(r, spare),
                (Ok(m), None) => m.engine.finish(r),
                (Err(_), _) => r.status(),
            }
        }
    }
}

fn error_of(s: &Status) -> Result<()> {
    match gridwire_mpi::engine::status_error(s, 0) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// [`error_of`], and the error to be reported on the request's
/// communicator (`on`: see [`run_on_request`]).
fn error_of_request(s: &Status, on: &mut MPI_Comm) -> Result<()> {
    if s.error != 0 {
        *on = crate::handles::comm_of_status(s);
    }
    error_of(s)
}

mpi_fn!(fn MPI_Wait / PMPI_Wait(req: *mut MPI_Request, status: *mut MPI_Status) -> c_int {
    run_on_request("MPI_Wait", |on| {
        if req.is_null() {
            return Err(err(class::REQUEST, "request pointer is NULL"));
        }
        // SAFETY: checked non-null in/out argument.
        let h = unsafe { &mut *req };
        let a = active(*h)?;
        if let Active::Req(r) = &a {
            mpi()?.wait(r);
        }
        let s = finish(h, a);
        // SAFETY: status output argument.
        unsafe { put_status(status, &s) };
        error_of_request(&s, on)
    })
});

mpi_fn!(fn MPI_Test / PMPI_Test(req: *mut MPI_Request, flag: *mut c_int, status: *mut MPI_Status) -> c_int {
    run_on_request("MPI_Test", |on| {
        if req.is_null() {
            return Err(err(class::REQUEST, "request pointer is NULL"));
        }
        // SAFETY: checked non-null in/out argument.
        let h = unsafe { &mut *req };
        // A plain request still pending (the common case of a test loop):
        // look without taking a reference, poke, look again; only a
        // request found done is taken out below.
        if plain_pending(*h) {
            mpi()?.poke();
            if plain_pending(*h) {
                // SAFETY: output argument.
                unsafe { put(flag, 0) };
                return Ok(());
            }
        }
        let mut a = active(*h)?;
        if !is_done(&a) {
            mpi()?.poke();
            a = active(*h)?;
        }
        let done = is_done(&a);
        // SAFETY: output argument.
        unsafe { put(flag, done as c_int) };
        if done {
            let s = finish(h, a);
            // SAFETY: status output argument.
            unsafe { put_status(status, &s) };
            return error_of_request(&s, on);
        }
        Ok(())
    })
});

mpi_fn!(fn MPI_Request_get_status / PMPI_Request_get_status(req: MPI_Request, flag: *mut c_int, status: *mut MPI_Status) -> c_int {
    run("MPI_Request_get_status", MPI_COMM_WORLD, || {
        let mut a = active(req)?;
        if !is_done(&a) {
            mpi()?.poke();
            a = active(req)?;
        }
        let done = is_done(&a);
        // SAFETY: output arguments.
        unsafe {
            put(flag, done as c_int);
            if done {
                let s = match &a {
                    Active::Req(r) => match REQS.get(req) {
                        Some(ReqObj::Generalized(g)) => crate::grequest::peek(&g),
                        _ => r.status(),
                    },
                    Active::DoneSend => Status::default(),
                    Active::Empty => Status::empty(),
                };
                put_status(status, &s);
            }
        }
        Ok(())
    })
});

/// Completes requests of an array (`all` = every one, else the first done) and writes statuses.
unsafe fn wait_many(
    name: &str,
    n: c_int,
    reqs: *mut MPI_Request,
    statuses: *mut MPI_Status,
    mode: Many,
    block: bool,
    index: *mut c_int,
    flag: *mut c_int,
    outcount: *mut c_int,
    indices: *mut c_int,
) -> c_int {
    run_on_request(name, |on| {
        if n < 0 {
            return Err(err(class::COUNT, format!("count {n} is negative")));
        }
        // SAFETY: MPI array arguments of `n` elements.
        let hs = unsafe { arr_mut(reqs, n) };
        let m = mpi()?;
        if matches!(mode, Many::All) && block {
            // SAFETY: forwarded contract of the statuses array.
            if let Some(done) = unsafe { waitall::wait_all_plain(m, hs, statuses, on) } {
                return done;
            }
        }
        // One lock of the handle table for the whole array.
        let looked = REQS.get_each(hs);
        let mut acts: Vec<Active> = hs
            .iter()
            .zip(looked)
            .map(|(&h, o)| active_of(h, || o))
            .collect::<Result<_>>()?;
        // Null and inactive requests take no part in Any/Some.
        let live: Vec<bool> = acts.iter().map(|a| !matches!(a, Active::Empty)).collect();
        // `acts` holds the requests themselves, whose completion flags the
        // wait below sees change: no second look-up of the handles.
        // Waitall: requests complete mostly in order, so the requests found
        // done are not looked at again (a cursor, not a scan from the start
        // on every round of progress: a window of 64 receives otherwise cost
        // 64²/2 flag loads per window).
        let first_pending = std::cell::Cell::new(0usize);
        let ready = || -> bool {
            match mode {
                Many::All => {
                    let from = first_pending.get();
                    match acts[from..].iter().position(|a| !is_done(a)) {
                        Some(i) => {
                            first_pending.set(from + i);
                            false
                        }
                        None => {
                            first_pending.set(acts.len());
                            true
                        }
                    }
                }
                Many::Any | Many::Some => {
                    !live.iter().any(|&l| l)
                        || acts.iter().zip(&live).any(|(a, &l)| l && is_done(a))
                }
            }
        };
        if !ready() {
            if block {
                m.engine.wait_for(ready);
            } else {
                m.poke();
            }
        }
        if matches!(mode, Many::Some) {
            // Deliver whatever else has arrived, so "some" reports all that can complete.
            m.poke();
        }
        let mut first_err = None;
        let set_status = |i: usize, s: &Status| {
            if !statuses.is_null() {
                // SAFETY: a non-ignored statuses array has `n` entries.
                unsafe { put_status_with_error(statuses.add(i), s) };
            }
        };
        match mode {
            Many::All => {
                let all = acts.iter().all(is_done);
                // SAFETY: output argument.
                unsafe { put(flag, all as c_int) };
                if all {
                    // The handles of the active requests leave the table
                    // under one lock.
                    let taken = REQS.remove_each_unless(
                        hs,
                        |i| matches!(acts[i], Active::Req(_)),
                        is_persistent,
                    );
                    let mut spare = Vec::with_capacity(hs.len());
                    for ((i, a), t) in acts.into_iter().enumerate().zip(taken) {
                        let s = finish_with(&mut hs[i], a, || t, Some(&mut spare));
                        if s.error != 0 && first_err.is_none() {
                            first_err = Some(crate::handles::comm_of_status(&s));
                        }
                        set_status(i, &s);
                    }
                    m.engine.give_back(&mut spare);
                }
            }
            Many::Any => {
                let hit = acts.iter().zip(&live).position(|(a, &l)| l && is_done(a));
                match hit {
                    Some(i) => {
                        let a = std::mem::replace(&mut acts[i], Active::Empty);
                        let s = finish(&mut hs[i], a);
                        // SAFETY: output arguments.
                        unsafe {
                            put(index, i as c_int);
                            put(flag, 1);
                            put_status(statuses, &s);
                        }
                        error_of_request(&s, on)?;
                    }
                    None => {
                        let none_live = !live.iter().any(|&l| l);
                        // SAFETY: output arguments.
                        unsafe {
                            put(index, MPI_UNDEFINED);
                            put(flag, none_live as c_int);
                            if none_live {
                                put_status(statuses, &Status::empty());
                            }
                        }
                    }
                }
            }
            Many::Some => {
                if !live.iter().any(|&l| l) {
                    // SAFETY: output argument.
                    unsafe { put(outcount, MPI_UNDEFINED) };
                    return Ok(());
                }
                let mut k = 0;
                for i in 0..acts.len() {
                    if live[i] && is_done(&acts[i]) {
                        let a = std::mem::replace(&mut acts[i], Active::Empty);
                        let s = finish(&mut hs[i], a);
                        if s.error != 0 && first_err.is_none() {
                            first_err = Some(crate::handles::comm_of_status(&s));
                        }
                        // SAFETY: `indices` and `statuses` hold `n` entries.
                        unsafe {
                            put(indices.add(k), i as c_int);
                            if !statuses.is_null() {
                                put_status_with_error(statuses.add(k), &s);
                            }
                        }
                        k += 1;
                    }
                }
                // SAFETY: output argument.
                unsafe { put(outcount, k as c_int) };
            }
        }
        match first_err {
            None => Ok(()),
            Some(c) => {
                *on = c;
                Err(err(
                    class::IN_STATUS,
                    "a request failed; see the MPI_ERROR fields of the statuses",
                ))
            }
        }
    })
}

#[derive(Clone, Copy)]
enum Many {
    All,
    Any,
    Some,
}

mpi_fn!(fn MPI_Waitall / PMPI_Waitall(n: c_int, reqs: *mut MPI_Request, st: *mut MPI_Status) -> c_int {
    let np = std::ptr::null_mut();
    // SAFETY: forwarded argument contract.
    unsafe { wait_many("MPI_Waitall", n, reqs, st, Many::All, true, np, np, np, np) }
});
mpi_fn!(fn MPI_Testall / PMPI_Testall(n: c_int, reqs: *mut MPI_Request, flag: *mut c_int, st: *mut MPI_Status) -> c_int {
    let np = std::ptr::null_mut();
    // SAFETY: forwarded argument contract.
    unsafe { wait_many("MPI_Testall", n, reqs, st, Many::All, false, np, flag, np, np) }
});
mpi_fn!(fn MPI_Waitany / PMPI_Waitany(n: c_int, reqs: *mut MPI_Request, index: *mut c_int, st: *mut MPI_Status) -> c_int {
    let np = std::ptr::null_mut();
    // SAFETY: forwarded argument contract.
    unsafe { wait_many("MPI_Waitany", n, reqs, st, Many::Any, true, index, np, np, np) }
});
mpi_fn!(fn MPI_Testany / PMPI_Testany(n: c_int, reqs: *mut MPI_Request, index: *mut c_int, flag: *mut c_int, st: *mut MPI_Status) -> c_int {
    let np = std::ptr::null_mut();
    // SAFETY: forwarded argument contract.
    unsafe { wait_many("MPI_Testany", n, reqs, st, Many::Any, false, index, flag, np, np) }
});
mpi_fn!(fn MPI_Waitsome / PMPI_Waitsome(n: c_int, reqs: *mut MPI_Request, outcount: *mut c_int, indices: *mut c_int, st: *mut MPI_Status) -> c_int {
    let np = std::ptr::null_mut();
    // SAFETY: forwarded argument contract.
    unsafe { wait_many("MPI_Waitsome", n, reqs, st, Many::Some, true, np, np, outcount, indices) }
});
mpi_fn!(fn MPI_Testsome / PMPI_Testsome(n: c_int, reqs: *mut MPI_Request, outcount: *mut c_int, indices: *mut c_int, st: *mut MPI_Status) -> c_int {
    let np = std::ptr::null_mut();
    // SAFETY: forwarded argument contract.
    unsafe { wait_many("MPI_Testsome", n, reqs, st, Many::Some, false, np, np, outcount, indices) }
});

mpi_fn!(fn MPI_Request_free / PMPI_Request_free(req: *mut MPI_Request) -> c_int {
    run("MPI_Request_free", MPI_COMM_WORLD, || {
        if req.is_null() {
            return Err(err(class::REQUEST, "request pointer is NULL"));
        }
        // SAFETY: checked non-null in/out argument.
        let h = unsafe { &mut *req };
        match *h {
            MPI_REQUEST_NULL => return Err(err(class::REQUEST, "cannot free MPI_REQUEST_NULL")),
            REQUEST_DONE_SEND => {}
            h if handles::is_eager_sent(h) => {}
            // The operation goes on; the protocol keeps its own reference
            // (a pending receive's, which its queue entry only borrowed,
            // is handed to the engine).
            _ => {
                let o = REQS.remove(*h).ok_or_else(|| err(class::REQUEST, format!("invalid request handle {:#x}", *h)))?;
                match o {
                    ReqObj::Generalized(g) => {
                        *h = MPI_REQUEST_NULL;
                        return crate::grequest::release(&g);
                    }
                    ReqObj::Plain(r) if !r.done() => mpi()?.engine.release_recv(r),
                    _ => {}
                }
            }
        }
        *h = MPI_REQUEST_NULL;
        Ok(())
    })
});

mpi_fn!(fn MPI_Cancel / PMPI_Cancel(req: *mut MPI_Request) -> c_int {
    run("MPI_Cancel", MPI_COMM_WORLD, || {
        if req.is_null() {
            return Err(err(class::REQUEST, "request pointer is NULL"));
        }
        // SAFETY: checked non-null argument.
        let h = unsafe { *req };
        if let Some(sent) = handles::eager_sent(h) {
            if mpi()?.cancel_sent(sent) {
                // Withdrawn at the receiver: the handle becomes a completed,
                // cancelled request, which the Wait or Test that follows reports.
                let st = Status { cancelled: true, ..Status::default() };
                // SAFETY: checked non-null in/out argument.
                unsafe { *req = REQS.insert(ReqObj::Plain(Req::new_done(st))) };
            }
            return Ok(());
        }
        if let Some(ReqObj::Generalized(g)) = REQS.get(h) {
            return crate::grequest::cancel(&g);
        }
        if let Active::Req(r) = active(h)? {
            // Sends cannot be cancelled here: they complete normally (allowed by the standard).
            mpi()?.cancel(&r);
        }
        Ok(())
    })
});

// Persistent requests: `p2p/persistent.rs`; buffered-send buffers:
// `p2p/buffers.rs`; the large-count (`_c`) forms: `p2p/large_count.rs`.
mod buffers;
mod large_count;
mod persistent;
mod waitall;
