//! Ports and names: `MPI_Open_port`, `MPI_Close_port`, `MPI_Comm_accept`,
//! `MPI_Comm_connect`, `MPI_Comm_join`, `MPI_Publish_name`,
//! `MPI_Lookup_name`, `MPI_Unpublish_name` (gridwire-mpi's ports module,
//! and the launcher's name service through the context).

use crate::abi::*;
use crate::errors::run;
use crate::handles::{comm, mpi, new_comm};
use crate::{cstr, put_str};
use gridwire_mpi::{class, err, Result};
use std::ffi::{c_char, c_int};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The port name argument, checked for NULL.
///
/// # Safety
/// `p` is NULL or a C string.
unsafe fn port_arg(p: *const c_char) -> Result<String> {
    if p.is_null() {
        return Err(err(class::ARG, "the port name is NULL"));
    }
    // SAFETY: a C string by the caller's contract.
    Ok(unsafe { cstr(p) })
}

/// # Safety
/// `out` is the program's `MPI_Comm` output argument.
unsafe fn out_inter(
    out: *mut MPI_Comm,
    parent: &gridwire_mpi::comm::Comm,
    r: Result<Arc<gridwire_mpi::comm::Comm>>,
) -> Result<()> {
    if out.is_null() {
        return Err(err(class::ARG, "the output communicator pointer is NULL"));
    }
    match r {
        Ok(ic) => {
            ic.errhandler
                .store(parent.errhandler.load(Ordering::Relaxed), Ordering::Relaxed);
            // SAFETY: checked non-null output argument.
            unsafe { *out = new_comm(ic) };
            Ok(())
        }
        Err(e) => {
            // SAFETY: as above.
            unsafe { *out = MPI_COMM_NULL };
            Err(e)
        }
    }
}

mpi_fn!(fn MPI_Open_port / PMPI_Open_port(_info: MPI_Info, port_name: *mut c_char) -> c_int {
    run("MPI_Open_port", MPI_COMM_WORLD, || {
        if port_name.is_null() {
            return Err(err(class::ARG, "the port name buffer is NULL"));
        }
        let name = mpi()?.open_port()?;
        // SAFETY: the buffer holds MPI_MAX_PORT_NAME bytes (the standard's contract).
        unsafe { put_str(&name, port_name, MPI_MAX_PORT_NAME, std::ptr::null_mut()) };
        Ok(())
    })
});

mpi_fn!(fn MPI_Close_port / PMPI_Close_port(port_name: *const c_char) -> c_int {
    run("MPI_Close_port", MPI_COMM_WORLD, || {
        // SAFETY: a C string argument.
        let p = unsafe { port_arg(port_name)? };
        mpi()?.close_port(&p)
    })
});

mpi_fn!(fn MPI_Comm_accept / PMPI_Comm_accept(port_name: *const c_char, _info: MPI_Info, root: c_int, c: MPI_Comm, out: *mut MPI_Comm) -> c_int {
    run("MPI_Comm_accept", c, || {
        let cm = comm(c)?;
        // The port matters at the root only.
        let p = if root >= 0 && root as u32 == cm.rank {
            // SAFETY: a C string argument.
            unsafe { port_arg(port_name)? }
        } else {
            String::new()
        };
        let r = mpi()?.accept(&p, root, &cm);
        // SAFETY: output argument.
        unsafe { out_inter(out, &cm, r) }
    })
});

mpi_fn!(fn MPI_Comm_connect / PMPI_Comm_connect(port_name: *const c_char, _info: MPI_Info, root: c_int, c: MPI_Comm, out: *mut MPI_Comm) -> c_int {
    run("MPI_Comm_connect", c, || {
        let cm = comm(c)?;
        let p = if root >= 0 && root as u32 == cm.rank {
            // SAFETY: a C string argument.
            unsafe { port_arg(port_name)? }
        } else {
            String::new()
        };
        let r = mpi()?.connect(&p, root, &cm);
        // SAFETY: output argument.
        unsafe { out_inter(out, &cm, r) }
    })
});

mpi_fn!(fn MPI_Comm_join / PMPI_Comm_join(fd: c_int, out: *mut MPI_Comm) -> c_int {
    run("MPI_Comm_join", MPI_COMM_WORLD, || {
        let m = mpi()?;
        let r = m.comm_join(fd);
        // SAFETY: output argument.
        unsafe { out_inter(out, &m.self_comm, r) }
    })
});

/// One name-service request, its refusal as `fail`.
fn names(op: &str, service: &str, port: &str, fail: i32) -> Result<String> {
    mpi()?
        .ctx()
        .name_service(op, service, port)
        .map_err(|e| err(class::INTERN, e.to_string()))?
        .map_err(|why| err(fail, format!("{service:?}: {why}")))
}

mpi_fn!(fn MPI_Publish_name / PMPI_Publish_name(service: *const c_char, _info: MPI_Info, port_name: *const c_char) -> c_int {
    run("MPI_Publish_name", MPI_COMM_WORLD, || {
        if service.is_null() {
            return Err(err(class::ARG, "the service name is NULL"));
        }
        // SAFETY: C string arguments.
        let (s, p) = unsafe { (cstr(service), port_arg(port_name)?) };
        names("publish_name", &s, &p, class::SERVICE).map(|_| ())
    })
});

mpi_fn!(fn MPI_Unpublish_name / PMPI_Unpublish_name(service: *const c_char, _info: MPI_Info, _port_name: *const c_char) -> c_int {
    run("MPI_Unpublish_name", MPI_COMM_WORLD, || {
        if service.is_null() {
            return Err(err(class::ARG, "the service name is NULL"));
        }
        // SAFETY: a C string argument.
        let s = unsafe { cstr(service) };
        names("unpublish_name", &s, "", class::SERVICE).map(|_| ())
    })
});

mpi_fn!(fn MPI_Lookup_name / PMPI_Lookup_name(service: *const c_char, _info: MPI_Info, port_name: *mut c_char) -> c_int {
    run("MPI_Lookup_name", MPI_COMM_WORLD, || {
        if service.is_null() || port_name.is_null() {
            return Err(err(class::ARG, "the service name or the port buffer is NULL"));
        }
        // SAFETY: a C string argument.
        let s = unsafe { cstr(service) };
        let p = names("lookup_name", &s, "", class::NAME)?;
        // SAFETY: the buffer holds MPI_MAX_PORT_NAME bytes (the standard's contract).
        unsafe { put_str(&p, port_name, MPI_MAX_PORT_NAME, std::ptr::null_mut()) };
        Ok(())
    })
});
