//! Buffers for buffered sends (`MPI_Bsend`): the process's
//! (`MPI_Buffer_attach` / `detach`) and, MPI 4.1, a communicator's
//! (`MPI_Comm_attach_buffer` and the rest).

use super::*;
mpi_fn!(fn MPI_Buffer_attach / PMPI_Buffer_attach(b: *mut Void, size: c_int) -> c_int {
    run("MPI_Buffer_attach", MPI_COMM_WORLD, || {
        if size < 0 {
            return Err(err(class::ARG, format!("buffer size {size} is negative")));
        }
        mpi()?.buffer_attach(None, b as usize, size as usize)
    })
});

mpi_fn!(fn MPI_Buffer_detach / PMPI_Buffer_detach(addr: *mut Void, size: *mut c_int) -> c_int {
    run("MPI_Buffer_detach", MPI_COMM_WORLD, || {
        let (a, s) = mpi()?.buffer_detach(None)?;
        // SAFETY: `addr` is really a `void **` (the standard's signature quirk); `size` an output.
        unsafe {
            put(addr as *mut usize, a);
            put(size, s as c_int);
        }
        Ok(())
    })
});

mpi_fn!(fn MPI_Comm_attach_buffer / PMPI_Comm_attach_buffer(c: MPI_Comm, b: *mut Void, size: c_int) -> c_int {
    run("MPI_Comm_attach_buffer", c, || {
        if size < 0 {
            return Err(err(class::ARG, format!("buffer size {size} is negative")));
        }
        let cm = comm_ref(c)?;
        mpi()?.buffer_attach(Some(&cm), b as usize, size as usize)
    })
});
mpi_fn!(fn MPI_Comm_attach_buffer_c / PMPI_Comm_attach_buffer_c(c: MPI_Comm, b: *mut Void, size: MPI_Count) -> c_int {
    run("MPI_Comm_attach_buffer_c", c, || {
        if size < 0 {
            return Err(err(class::ARG, format!("buffer size {size} is negative")));
        }
        let cm = comm_ref(c)?;
        mpi()?.buffer_attach(Some(&cm), b as usize, size as usize)
    })
});
mpi_fn!(fn MPI_Comm_detach_buffer / PMPI_Comm_detach_buffer(c: MPI_Comm, addr: *mut Void, size: *mut c_int) -> c_int {
    run("MPI_Comm_detach_buffer", c, || {
        let cm = comm_ref(c)?;
        let (a, s) = mpi()?.buffer_detach(Some(&cm))?;
        // SAFETY: `addr` is really a `void **` (the standard's signature quirk); `size` an output.
        unsafe {
            put(addr as *mut usize, a);
            put(size, s.min(c_int::MAX as usize) as c_int);
        }
        Ok(())
    })
});
mpi_fn!(fn MPI_Comm_detach_buffer_c / PMPI_Comm_detach_buffer_c(c: MPI_Comm, addr: *mut Void, size: *mut MPI_Count) -> c_int {
    run("MPI_Comm_detach_buffer_c", c, || {
        let cm = comm_ref(c)?;
        let (a, s) = mpi()?.buffer_detach(Some(&cm))?;
        // SAFETY: `addr` is really a `void **`; `size` an output.
        unsafe {
            put(addr as *mut usize, a);
            put(size, s as MPI_Count);
        }
        Ok(())
    })
});
mpi_fn!(fn MPI_Comm_flush_buffer / PMPI_Comm_flush_buffer(c: MPI_Comm) -> c_int {
    run("MPI_Comm_flush_buffer", c, || {
        let cm = comm_ref(c)?;
        mpi()?.buffer_flush(Some(&cm));
        Ok(())
    })
});
mpi_fn!(fn MPI_Comm_iflush_buffer / PMPI_Comm_iflush_buffer(c: MPI_Comm, req: *mut MPI_Request) -> c_int {
    run("MPI_Comm_iflush_buffer", c, || {
        let cm = comm_ref(c)?;
        // Flushed at once (as MPI_Buffer_iflush): the request is already complete.
        mpi()?.buffer_flush(Some(&cm));
        // SAFETY: output argument.
        unsafe { put(req, REQUEST_DONE_SEND) };
        Ok(())
    })
});
