//! Persistent point-to-point requests (`MPI_Send_init` and its modes,
//! `MPI_Recv_init`) and `MPI_Start` / `MPI_Startall`.

use super::*;

pub(super) unsafe fn psend(
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
        let cm = comm_ref(c)?;
        // SAFETY: the program keeps the buffer while the persistent request exists.
        let bf = unsafe { buf(b, count, dt) }?;
        let m = mpi()?;
        m.check_buf(&bf, "send buffer")?;
        if dest != gridwire_mpi::PROC_NULL && (dest < 0 || dest as u32 >= cm.peer_size) {
            return Err(err(
                class::RANK,
                format!(
                    "rank {dest} is invalid in a communicator of size {}",
                    cm.peer_size
                ),
            ));
        }
        let p = Persistent {
            kind: PKind::Send {
                buf: bf,
                dest,
                tag,
                mode,
            },
            comm: cm.arc(),
            active: None,
        };
        // SAFETY: output argument.
        unsafe {
            put(
                req,
                REQS.insert(ReqObj::Persistent(Arc::new(Mutex::new(p)))),
            )
        };
        Ok(())
    })
}

mpi_fn!(fn MPI_Send_init / PMPI_Send_init(b: *const Void, count: c_int, dt: MPI_Datatype, dest: c_int, tag: c_int, c: MPI_Comm, req: *mut MPI_Request) -> c_int {
    // SAFETY: forwarded argument contract.
    unsafe { psend("MPI_Send_init", b, count.into(), dt, dest, tag, c, Mode::Standard, req) }
});
mpi_fn!(fn MPI_Ssend_init / PMPI_Ssend_init(b: *const Void, count: c_int, dt: MPI_Datatype, dest: c_int, tag: c_int, c: MPI_Comm, req: *mut MPI_Request) -> c_int {
    // SAFETY: forwarded argument contract.
    unsafe { psend("MPI_Ssend_init", b, count.into(), dt, dest, tag, c, Mode::Sync, req) }
});
mpi_fn!(fn MPI_Bsend_init / PMPI_Bsend_init(b: *const Void, count: c_int, dt: MPI_Datatype, dest: c_int, tag: c_int, c: MPI_Comm, req: *mut MPI_Request) -> c_int {
    // SAFETY: forwarded argument contract.
    unsafe { psend("MPI_Bsend_init", b, count.into(), dt, dest, tag, c, Mode::Buffered, req) }
});
mpi_fn!(fn MPI_Rsend_init / PMPI_Rsend_init(b: *const Void, count: c_int, dt: MPI_Datatype, dest: c_int, tag: c_int, c: MPI_Comm, req: *mut MPI_Request) -> c_int {
    // SAFETY: forwarded argument contract.
    unsafe { psend("MPI_Rsend_init", b, count.into(), dt, dest, tag, c, Mode::Ready, req) }
});

mpi_fn!(fn MPI_Recv_init / PMPI_Recv_init(b: *mut Void, count: c_int, dt: MPI_Datatype, src: c_int, tag: c_int, c: MPI_Comm, req: *mut MPI_Request) -> c_int {
    // SAFETY: forwarded argument contract.
    unsafe { recv_init_impl("MPI_Recv_init", b, count.into(), dt, src, tag, c, req) }
});

/// `MPI_Recv_init` and `MPI_Recv_init_c`: counts are `MPI_Count` wide here.
/// # Safety
/// The argument contract of `MPI_Recv_init`.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn recv_init_impl(
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
        let cm = comm_ref(c)?;
        // SAFETY: the program keeps the buffer while the persistent request exists.
        let bf = unsafe { buf(b, count, dt) }?;
        mpi()?.check_buf(&bf, "receive buffer")?;
        let p = Persistent {
            kind: PKind::Recv { buf: bf, src, tag },
            comm: cm.arc(),
            active: None,
        };
        // SAFETY: output argument.
        unsafe {
            put(
                req,
                REQS.insert(ReqObj::Persistent(Arc::new(Mutex::new(p)))),
            )
        };
        Ok(())
    })
}

fn start(h: MPI_Request) -> Result<()> {
    let Some(ReqObj::Persistent(p)) = REQS.get(h) else {
        return Err(err(
            class::REQUEST,
            format!("request {h:#x} is not a persistent request"),
        ));
    };
    let mut p = p.lock().unwrap();
    if p.active.is_some() {
        return Err(err(
            class::REQUEST,
            "the persistent request is already active",
        ));
    }
    let m = mpi()?;
    let r = match &p.kind {
        PKind::Send {
            buf,
            dest,
            tag,
            mode,
        } => m.isend(&p.comm, buf, *dest, *tag, *mode)?,
        PKind::Recv { buf, src, tag } => m.irecv(&p.comm, buf.clone(), *src, *tag)?,
        PKind::Coll(start) => start(m, &p.comm)?,
    };
    p.active = Some(r);
    Ok(())
}

mpi_fn!(fn MPI_Start / PMPI_Start(req: *mut MPI_Request) -> c_int {
    run("MPI_Start", MPI_COMM_WORLD, || {
        if req.is_null() {
            return Err(err(class::REQUEST, "request pointer is NULL"));
        }
        // SAFETY: checked non-null argument.
        start(unsafe { *req })
    })
});

mpi_fn!(fn MPI_Startall / PMPI_Startall(n: c_int, reqs: *mut MPI_Request) -> c_int {
    run("MPI_Startall", MPI_COMM_WORLD, || {
        // SAFETY: array argument of `n` requests.
        for &h in unsafe { arr(reqs, n) } {
            start(h)?;
        }
        Ok(())
    })
});
