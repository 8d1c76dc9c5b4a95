//! Smaller functions: memory, profiling control, the parent communicator,
//! the environment info, nonblocking send-receive, request status queries.

use crate::abi::*;
use crate::errors::run;
use crate::handles::{buf, comm, mpi, ReqObj, INFOS, REQS};
use crate::p2p::{put_status, put_status_with_error};
use crate::{arr, put, Void};
use gridwire_mpi::{class, err, Mode};
use std::ffi::{c_char, c_int};
use std::sync::{Arc, Mutex};

mpi_fn!(fn MPI_Alloc_mem / PMPI_Alloc_mem(size: MPI_Aint, _info: MPI_Info, base: *mut Void) -> c_int {
    run("MPI_Alloc_mem", MPI_COMM_WORLD, || {
        if size < 0 {
            return Err(err(class::SIZE, format!("size {size} is negative")));
        }
        // SAFETY: malloc has no preconditions; a zero size still returns a freeable pointer.
        let p = unsafe { libc::malloc((size as usize).max(1)) };
        if p.is_null() {
            return Err(err(class::NO_MEM, format!("cannot allocate {size} bytes")));
        }
        // SAFETY: `base` is really a `void **` (the standard's signature).
        unsafe { put(base as *mut *mut libc::c_void, p) };
        Ok(())
    })
});

mpi_fn!(fn MPI_Free_mem / PMPI_Free_mem(base: *mut Void) -> c_int {
    // SAFETY: memory from MPI_Alloc_mem (malloc), or NULL.
    unsafe { libc::free(base) };
    MPI_SUCCESS
});

mpi_fn!(fn MPI_Pcontrol / PMPI_Pcontrol(_level: c_int) -> c_int { MPI_SUCCESS });

/// The keys of `MPI_INFO_ENV` (and `MPI_Info_create_env`).
pub fn env_info() -> gridwire_mpi::info::Info {
    let mut i = gridwire_mpi::info::Info::default();
    let args: Vec<String> = std::env::args().collect();
    if let Some(cmd) = args.first() {
        let _ = i.set("command", cmd);
    }
    if args.len() > 1 {
        let _ = i.set("argv", &args[1..].join(" "));
    }
    if let Ok(m) = mpi() {
        let _ = i.set("maxprocs", &m.world.size.to_string());
        let _ = i.set("host", m.ctx().host_id());
    }
    let _ = i.set("thread_level", "MPI_THREAD_MULTIPLE");
    i
}

mpi_fn!(fn MPI_Info_create_env / PMPI_Info_create_env(_argc: c_int, _argv: *mut *mut c_char, info: *mut MPI_Info) -> c_int {
    run("MPI_Info_create_env", MPI_COMM_WORLD, || {
        // SAFETY: output argument.
        unsafe { put(info, INFOS.insert(Arc::new(Mutex::new(env_info())))) };
        Ok(())
    })
});

mpi_fn!(fn MPI_Isendrecv / PMPI_Isendrecv(sb: *const Void, sc: c_int, st: MPI_Datatype, dest: c_int, stag: c_int,
        rb: *mut Void, rc: c_int, rt: MPI_Datatype, src: c_int, rtag: c_int, c: MPI_Comm, req: *mut MPI_Request) -> c_int {
    run("MPI_Isendrecv", c, || {
        if req.is_null() {
            return Err(err(class::REQUEST, "request pointer is NULL"));
        }
        let cm = comm(c)?;
        // SAFETY: the program keeps both buffers until the request completes.
        let (sbf, rbf) = unsafe { (buf(sb, sc as i64, st)?, buf(rb, rc as i64, rt)?) };
        let m = mpi()?;
        let r = m.irecv(&cm, rbf, src, rtag)?;
        let s = m.isend(&cm, &sbf, dest, stag, Mode::Standard)?;
        let j = m.join(r, s)?;
        // SAFETY: checked output argument.
        unsafe { *req = REQS.insert(ReqObj::Plain(j)) };
        Ok(())
    })
});

mpi_fn!(fn MPI_Isendrecv_c / PMPI_Isendrecv_c(sb: *const Void, sc: MPI_Count, st: MPI_Datatype, dest: c_int, stag: c_int,
        rb: *mut Void, rc: MPI_Count, rt: MPI_Datatype, src: c_int, rtag: c_int, c: MPI_Comm, req: *mut MPI_Request) -> c_int {
    match (c_int::try_from(sc), c_int::try_from(rc)) {
        // SAFETY: same contract as the int form.
        (Ok(s), Ok(r)) => unsafe { PMPI_Isendrecv(sb, s, st, dest, stag, rb, r, rt, src, rtag, c, req) },
        _ => crate::errors::fail("MPI_Isendrecv_c", c, err(class::COUNT, "counts this large are not supported yet")),
    }
});

mpi_fn!(fn MPI_Isendrecv_replace / PMPI_Isendrecv_replace(b: *mut Void, count: c_int, dt: MPI_Datatype, dest: c_int, stag: c_int,
        src: c_int, rtag: c_int, c: MPI_Comm, req: *mut MPI_Request) -> c_int {
    run("MPI_Isendrecv_replace", c, || {
        if req.is_null() {
            return Err(err(class::REQUEST, "request pointer is NULL"));
        }
        let cm = comm(c)?;
        // SAFETY: the program keeps the buffer until the request completes.
        let bf = unsafe { buf(b, count as i64, dt) }?;
        let r = mpi()?.isendrecv_replace(&cm, bf, dest, stag, src, rtag)?;
        // SAFETY: checked output argument.
        unsafe { *req = REQS.insert(ReqObj::Plain(r)) };
        Ok(())
    })
});

mpi_fn!(fn MPI_Isendrecv_replace_c / PMPI_Isendrecv_replace_c(b: *mut Void, count: MPI_Count, dt: MPI_Datatype, dest: c_int, stag: c_int,
        src: c_int, rtag: c_int, c: MPI_Comm, req: *mut MPI_Request) -> c_int {
    match c_int::try_from(count) {
        // SAFETY: same contract as the int form.
        Ok(n) => unsafe { PMPI_Isendrecv_replace(b, n, dt, dest, stag, src, rtag, c, req) },
        Err(_) => crate::errors::fail("MPI_Isendrecv_replace_c", c, err(class::COUNT, "counts this large are not supported yet")),
    }
});

/// (done, status) of a request: the status is read only once it is done
/// (a pending receive's status is written without the request's lock by
/// the thread that matches it; `Req::done`'s Acquire orders us after).
fn peek_req(r: &gridwire_mpi::Req) -> (bool, gridwire_mpi::Status) {
    if r.done() {
        (true, r.status())
    } else {
        (false, gridwire_mpi::Status::empty())
    }
}

/// Status of one request without completing it: (done, status).
fn peek(h: MPI_Request) -> gridwire_mpi::Result<(bool, gridwire_mpi::Status)> {
    match h {
        MPI_REQUEST_NULL => Ok((true, gridwire_mpi::Status::empty())),
        REQUEST_DONE_SEND => Ok((true, gridwire_mpi::Status::default())),
        _ if crate::handles::is_eager_sent(h) => Ok((true, gridwire_mpi::Status::default())),
        _ => match REQS.get(h) {
            Some(ReqObj::Plain(r)) => Ok(peek_req(&r)),
            Some(ReqObj::Persistent(p)) => match p.lock().unwrap().active.clone() {
                Some(r) => Ok(peek_req(&r)),
                None => Ok((true, gridwire_mpi::Status::empty())),
            },
            Some(ReqObj::Generalized(g)) => Ok(match g.req.done() {
                true => (true, crate::grequest::peek(&g)),
                false => (false, gridwire_mpi::Status::empty()),
            }),
            None => Err(err(
                class::REQUEST,
                format!("invalid request handle {h:#x}"),
            )),
        },
    }
}

mpi_fn!(fn MPI_Request_get_status_all / PMPI_Request_get_status_all(n: c_int, reqs: *const MPI_Request, flag: *mut c_int, sts: *mut MPI_Status) -> c_int {
    run("MPI_Request_get_status_all", MPI_COMM_WORLD, || {
        mpi()?.poke();
        // SAFETY: array argument of `n` requests.
        let hs = unsafe { arr(reqs, n) };
        let all: Vec<_> = hs.iter().map(|&h| peek(h)).collect::<gridwire_mpi::Result<_>>()?;
        let done = all.iter().all(|(d, _)| *d);
        // SAFETY: output arguments (`sts` holds `n` statuses unless ignored).
        unsafe {
            put(flag, done as c_int);
            if done && !sts.is_null() {
                for (i, (_, s)) in all.iter().enumerate() {
                    put_status_with_error(sts.add(i), s);
                }
            }
        }
        Ok(())
    })
});

mpi_fn!(fn MPI_Request_get_status_any / PMPI_Request_get_status_any(n: c_int, reqs: *const MPI_Request, index: *mut c_int, flag: *mut c_int, st: *mut MPI_Status) -> c_int {
    run("MPI_Request_get_status_any", MPI_COMM_WORLD, || {
        mpi()?.poke();
        // SAFETY: array argument of `n` requests.
        let hs = unsafe { arr(reqs, n) };
        let mut hit = None;
        let mut active = false;
        for (i, &h) in hs.iter().enumerate() {
            if h == MPI_REQUEST_NULL {
                continue;
            }
            active = true;
            let (d, s) = peek(h)?;
            if d {
                hit = Some((i, s));
                break;
            }
        }
        // SAFETY: output arguments.
        unsafe {
            match hit {
                Some((i, s)) => {
                    put(index, i as c_int);
                    put(flag, 1);
                    put_status(st, &s);
                }
                None => {
                    put(index, MPI_UNDEFINED);
                    put(flag, !active as c_int);
                    if !active {
                        // No active request: the empty status, as MPI_Testany gives.
                        put_status(st, &gridwire_mpi::Status::empty());
                    }
                }
            }
        }
        Ok(())
    })
});

mpi_fn!(fn MPI_Request_get_status_some / PMPI_Request_get_status_some(n: c_int, reqs: *const MPI_Request, outcount: *mut c_int, indices: *mut c_int, sts: *mut MPI_Status) -> c_int {
    run("MPI_Request_get_status_some", MPI_COMM_WORLD, || {
        mpi()?.poke();
        // SAFETY: array argument of `n` requests.
        let hs = unsafe { arr(reqs, n) };
        if hs.iter().all(|&h| h == MPI_REQUEST_NULL) {
            // SAFETY: output argument.
            unsafe { put(outcount, MPI_UNDEFINED) };
            return Ok(());
        }
        let mut k = 0usize;
        for (i, &h) in hs.iter().enumerate() {
            if h == MPI_REQUEST_NULL {
                continue;
            }
            let (d, s) = peek(h)?;
            if d {
                // SAFETY: `indices`/`sts` hold `n` entries.
                unsafe {
                    put(indices.add(k), i as c_int);
                    if !sts.is_null() {
                        put_status_with_error(sts.add(k), &s);
                    }
                }
                k += 1;
            }
        }
        // SAFETY: output argument.
        unsafe { put(outcount, k as c_int) };
        Ok(())
    })
});

mpi_fn!(fn MPI_Buffer_flush / PMPI_Buffer_flush() -> c_int {
    run("MPI_Buffer_flush", MPI_COMM_WORLD, || {
        mpi()?.buffer_flush(None);
        Ok(())
    })
});

mpi_fn!(fn MPI_Buffer_iflush / PMPI_Buffer_iflush(req: *mut MPI_Request) -> c_int {
    run("MPI_Buffer_iflush", MPI_COMM_WORLD, || {
        // Flushed at once: the request is already complete.
        mpi()?.buffer_flush(None);
        // SAFETY: output argument.
        unsafe { put(req, REQUEST_DONE_SEND) };
        Ok(())
    })
});

mpi_fn!(fn MPI_Get_hw_resource_info / PMPI_Get_hw_resource_info(info: *mut MPI_Info) -> c_int {
    run("MPI_Get_hw_resource_info", MPI_COMM_WORLD, || {
        let mut i = gridwire_mpi::info::Info::default();
        i.set("mpi_hw_resource_type", "mpi_shared_memory")?;
        // SAFETY: output argument.
        unsafe { put(info, INFOS.insert(Arc::new(Mutex::new(i)))) };
        Ok(())
    })
});
