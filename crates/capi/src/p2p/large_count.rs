//! The large-count (`_c`) point-to-point forms: `MPI_Count` counts, over the
//! same bodies as the int forms (which widen their counts to call them).

use super::persistent::{psend, recv_init_impl};
use super::*;

// ---- large-count (`_c`) forms: MPI_Count counts ---------------------------------

mpi_fn!(fn MPI_Send_c / PMPI_Send_c(b: *const Void, count: MPI_Count, dt: MPI_Datatype, dest: c_int, tag: c_int, c: MPI_Comm) -> c_int {
    // SAFETY: forwarded argument contract.
    unsafe { send_impl("MPI_Send_c", b, count, dt, dest, tag, c, Mode::Standard) }
});
mpi_fn!(fn MPI_Ssend_c / PMPI_Ssend_c(b: *const Void, count: MPI_Count, dt: MPI_Datatype, dest: c_int, tag: c_int, c: MPI_Comm) -> c_int {
    // SAFETY: forwarded argument contract.
    unsafe { send_impl("MPI_Ssend_c", b, count, dt, dest, tag, c, Mode::Sync) }
});
mpi_fn!(fn MPI_Bsend_c / PMPI_Bsend_c(b: *const Void, count: MPI_Count, dt: MPI_Datatype, dest: c_int, tag: c_int, c: MPI_Comm) -> c_int {
    // SAFETY: forwarded argument contract.
    unsafe { send_impl("MPI_Bsend_c", b, count, dt, dest, tag, c, Mode::Buffered) }
});
mpi_fn!(fn MPI_Rsend_c / PMPI_Rsend_c(b: *const Void, count: MPI_Count, dt: MPI_Datatype, dest: c_int, tag: c_int, c: MPI_Comm) -> c_int {
    // SAFETY: forwarded argument contract.
    unsafe { send_impl("MPI_Rsend_c", b, count, dt, dest, tag, c, Mode::Ready) }
});
mpi_fn!(fn MPI_Isend_c / PMPI_Isend_c(b: *const Void, count: MPI_Count, dt: MPI_Datatype, dest: c_int, tag: c_int, c: MPI_Comm, req: *mut MPI_Request) -> c_int {
    // SAFETY: forwarded argument contract.
    unsafe { isend_impl("MPI_Isend_c", b, count, dt, dest, tag, c, Mode::Standard, req) }
});
mpi_fn!(fn MPI_Issend_c / PMPI_Issend_c(b: *const Void, count: MPI_Count, dt: MPI_Datatype, dest: c_int, tag: c_int, c: MPI_Comm, req: *mut MPI_Request) -> c_int {
    // SAFETY: forwarded argument contract.
    unsafe { isend_impl("MPI_Issend_c", b, count, dt, dest, tag, c, Mode::Sync, req) }
});
mpi_fn!(fn MPI_Ibsend_c / PMPI_Ibsend_c(b: *const Void, count: MPI_Count, dt: MPI_Datatype, dest: c_int, tag: c_int, c: MPI_Comm, req: *mut MPI_Request) -> c_int {
    // SAFETY: forwarded argument contract.
    unsafe { isend_impl("MPI_Ibsend_c", b, count, dt, dest, tag, c, Mode::Buffered, req) }
});
mpi_fn!(fn MPI_Irsend_c / PMPI_Irsend_c(b: *const Void, count: MPI_Count, dt: MPI_Datatype, dest: c_int, tag: c_int, c: MPI_Comm, req: *mut MPI_Request) -> c_int {
    // SAFETY: forwarded argument contract.
    unsafe { isend_impl("MPI_Irsend_c", b, count, dt, dest, tag, c, Mode::Ready, req) }
});
mpi_fn!(fn MPI_Send_init_c / PMPI_Send_init_c(b: *const Void, count: MPI_Count, dt: MPI_Datatype, dest: c_int, tag: c_int, c: MPI_Comm, req: *mut MPI_Request) -> c_int {
    // SAFETY: forwarded argument contract.
    unsafe { psend("MPI_Send_init_c", b, count, dt, dest, tag, c, Mode::Standard, req) }
});
mpi_fn!(fn MPI_Ssend_init_c / PMPI_Ssend_init_c(b: *const Void, count: MPI_Count, dt: MPI_Datatype, dest: c_int, tag: c_int, c: MPI_Comm, req: *mut MPI_Request) -> c_int {
    // SAFETY: forwarded argument contract.
    unsafe { psend("MPI_Ssend_init_c", b, count, dt, dest, tag, c, Mode::Sync, req) }
});
mpi_fn!(fn MPI_Bsend_init_c / PMPI_Bsend_init_c(b: *const Void, count: MPI_Count, dt: MPI_Datatype, dest: c_int, tag: c_int, c: MPI_Comm, req: *mut MPI_Request) -> c_int {
    // SAFETY: forwarded argument contract.
    unsafe { psend("MPI_Bsend_init_c", b, count, dt, dest, tag, c, Mode::Buffered, req) }
});
mpi_fn!(fn MPI_Rsend_init_c / PMPI_Rsend_init_c(b: *const Void, count: MPI_Count, dt: MPI_Datatype, dest: c_int, tag: c_int, c: MPI_Comm, req: *mut MPI_Request) -> c_int {
    // SAFETY: forwarded argument contract.
    unsafe { psend("MPI_Rsend_init_c", b, count, dt, dest, tag, c, Mode::Ready, req) }
});

// `_c` receives: the shared bodies above take `MPI_Count` counts.

mpi_fn!(fn MPI_Recv_c / PMPI_Recv_c(b: *mut Void, count: MPI_Count, dt: MPI_Datatype, src: c_int, tag: c_int, c: MPI_Comm, status: *mut MPI_Status) -> c_int {
    // SAFETY: same contract as the int form.
    unsafe { recv_impl("MPI_Recv_c", b, count, dt, src, tag, c, status) }
});
mpi_fn!(fn MPI_Irecv_c / PMPI_Irecv_c(b: *mut Void, count: MPI_Count, dt: MPI_Datatype, src: c_int, tag: c_int, c: MPI_Comm, req: *mut MPI_Request) -> c_int {
    // SAFETY: same contract as the int form.
    unsafe { irecv_impl("MPI_Irecv_c", b, count, dt, src, tag, c, req) }
});
mpi_fn!(fn MPI_Recv_init_c / PMPI_Recv_init_c(b: *mut Void, count: MPI_Count, dt: MPI_Datatype, src: c_int, tag: c_int, c: MPI_Comm, req: *mut MPI_Request) -> c_int {
    // SAFETY: same contract as the int form.
    unsafe { recv_init_impl("MPI_Recv_init_c", b, count, dt, src, tag, c, req) }
});
mpi_fn!(fn MPI_Mrecv_c / PMPI_Mrecv_c(b: *mut Void, count: MPI_Count, dt: MPI_Datatype, msg: *mut MPI_Message, status: *mut MPI_Status) -> c_int {
    // SAFETY: same contract as the int form.
    unsafe { mrecv_impl("MPI_Mrecv_c", b, count, dt, msg, status) }
});
mpi_fn!(fn MPI_Imrecv_c / PMPI_Imrecv_c(b: *mut Void, count: MPI_Count, dt: MPI_Datatype, msg: *mut MPI_Message, req: *mut MPI_Request) -> c_int {
    // SAFETY: same contract as the int form.
    unsafe { imrecv_impl("MPI_Imrecv_c", b, count, dt, msg, req) }
});
mpi_fn!(fn MPI_Sendrecv_c / PMPI_Sendrecv_c(sb: *const Void, sc: MPI_Count, st: MPI_Datatype, dest: c_int, stag: c_int,
        rb: *mut Void, rc: MPI_Count, rt: MPI_Datatype, src: c_int, rtag: c_int, c: MPI_Comm, status: *mut MPI_Status) -> c_int {
    // SAFETY: same contract as the int form.
    unsafe { sendrecv_impl("MPI_Sendrecv_c", sb, sc, st, dest, stag, rb, rc, rt, src, rtag, c, status) }
});
mpi_fn!(fn MPI_Sendrecv_replace_c / PMPI_Sendrecv_replace_c(b: *mut Void, count: MPI_Count, dt: MPI_Datatype, dest: c_int, stag: c_int,
        src: c_int, rtag: c_int, c: MPI_Comm, status: *mut MPI_Status) -> c_int {
    // SAFETY: same contract as the int form.
    unsafe { sendrecv_replace_impl("MPI_Sendrecv_replace_c", b, count, dt, dest, stag, src, rtag, c, status) }
});
mpi_fn!(fn MPI_Buffer_attach_c / PMPI_Buffer_attach_c(b: *mut Void, size: MPI_Count) -> c_int {
    run("MPI_Buffer_attach_c", MPI_COMM_WORLD, || {
        if size < 0 {
            return Err(err(class::ARG, format!("buffer size {size} is negative")));
        }
        mpi()?.buffer_attach(None, b as usize, size as usize)
    })
});
mpi_fn!(fn MPI_Buffer_detach_c / PMPI_Buffer_detach_c(addr: *mut Void, size: *mut MPI_Count) -> c_int {
    run("MPI_Buffer_detach_c", MPI_COMM_WORLD, || {
        let (a, s) = mpi()?.buffer_detach(None)?;
        // SAFETY: `addr` is really a `void **`; `size` an output.
        unsafe {
            put(addr as *mut usize, a);
            put(size, s as MPI_Count);
        }
        Ok(())
    })
});
