//! The C side of the Fortran bindings (docs/fortran.md): `MPI_Status` between
//! the C, `mpif.h`/`use mpi` and `mpi_f08` layouts, and the MPI 5.0 ABI's
//! Fortran information (`MPI_Abi_{get,set}_fortran_info`,
//! `MPI_Abi_{get,set}_fortran_booleans`), which libmpifort sets when a
//! Fortran program calls `MPI_Init` (a C-only program sees the defaults).

use crate::abi::*;
use crate::errors::{fail, run};
use crate::handles::{info, INFOS};
use crate::put;
use gridwire_mpi::{class, err};
use std::ffi::{c_int, c_void};
use std::sync::{Arc, Mutex};

/// `MPI_ERR_ABI` of the standard ABI: the Fortran information was already set.
const MPI_ERR_ABI: c_int = 62;

/// The three status layouts are all 8 ints (`MPI_F_STATUS_SIZE`), fields in the
/// same order, so every conversion is a copy.
unsafe fn copy_status(name: &str, from: *const c_int, to: *mut c_int) -> c_int {
    if from.is_null() || to.is_null() {
        return fail(name, MPI_COMM_WORLD, err(class::ARG, "NULL status"));
    }
    // SAFETY: both point to a status (8 ints) by the MPI contract, checked non-NULL
    // above; `copy` allows them to overlap (the same status converted in place).
    unsafe { std::ptr::copy(from, to, 8) };
    MPI_SUCCESS
}

/// `MPI_F08_status` of mpi.h: the same 8 ints as `MPI_Status`.
type F08Status = MPI_Status;

mpi_fn!(fn MPI_Status_f082c / PMPI_Status_f082c(f08: *const F08Status, c: *mut MPI_Status) -> c_int {
    // SAFETY: copy_status checks both pointers.
    unsafe { copy_status("MPI_Status_f082c", f08 as *const c_int, c as *mut c_int) }
});

mpi_fn!(fn MPI_Status_c2f08 / PMPI_Status_c2f08(c: *const MPI_Status, f08: *mut F08Status) -> c_int {
    // SAFETY: copy_status checks both pointers.
    unsafe { copy_status("MPI_Status_c2f08", c as *const c_int, f08 as *mut c_int) }
});

mpi_fn!(fn MPI_Status_f082f / PMPI_Status_f082f(f08: *const F08Status, f: *mut MPI_Fint) -> c_int {
    // SAFETY: copy_status checks both pointers.
    unsafe { copy_status("MPI_Status_f082f", f08 as *const c_int, f) }
});

mpi_fn!(fn MPI_Status_f2f08 / PMPI_Status_f2f08(f: *const MPI_Fint, f08: *mut F08Status) -> c_int {
    // SAFETY: copy_status checks both pointers.
    unsafe { copy_status("MPI_Status_f2f08", f, f08 as *mut c_int) }
});

/// `.TRUE.` and `.FALSE.` of each LOGICAL size (1, 2, 4, 8, 16 bytes) once set.
type Booleans = [Option<([u8; 16], [u8; 16])>; 5];
static BOOLEANS: Mutex<Booleans> = Mutex::new([None; 5]);
/// What the Fortran bindings said about themselves (MPI_Abi_set_fortran_info).
static FORTRAN_INFO: Mutex<Option<Vec<(String, String)>>> = Mutex::new(None);

fn size_slot(size: c_int) -> Option<usize> {
    [1, 2, 4, 8, 16].iter().position(|&s| s == size)
}

mpi_fn!(fn MPI_Abi_set_fortran_booleans / PMPI_Abi_set_fortran_booleans(
    size: c_int, t: *mut c_void, f: *mut c_void) -> c_int {
    run("MPI_Abi_set_fortran_booleans", MPI_COMM_WORLD, || {
        let slot = size_slot(size)
            .ok_or_else(|| err(class::ARG, format!("logical size {size} is not 1, 2, 4, 8 or 16")))?;
        if t.is_null() || f.is_null() {
            return Err(err(class::ARG, "NULL logical value"));
        }
        let (mut tv, mut fv) = ([0u8; 16], [0u8; 16]);
        // SAFETY: the caller passes `size` bytes at each (the ABI's contract), both non-NULL.
        unsafe {
            std::ptr::copy_nonoverlapping(t as *const u8, tv.as_mut_ptr(), size as usize);
            std::ptr::copy_nonoverlapping(f as *const u8, fv.as_mut_ptr(), size as usize);
        }
        if tv == fv {
            return Err(err(class::ARG, "the same value for .TRUE. and .FALSE."));
        }
        let mut b = BOOLEANS.lock().unwrap_or_else(|e| e.into_inner());
        match b[slot] {
            // Setting the same values again (a second Fortran library) is harmless.
            Some(old) if old != (tv, fv) => Err(err(MPI_ERR_ABI, format!("the LOGICAL({size}) values are already set"))),
            _ => {
                b[slot] = Some((tv, fv));
                Ok(())
            }
        }
    })
});

mpi_fn!(fn MPI_Abi_get_fortran_booleans / PMPI_Abi_get_fortran_booleans(
    size: c_int, t: *mut c_void, f: *mut c_void, is_set: *mut c_int) -> c_int {
    run("MPI_Abi_get_fortran_booleans", MPI_COMM_WORLD, || {
        let slot = size_slot(size)
            .ok_or_else(|| err(class::ARG, format!("logical size {size} is not 1, 2, 4, 8 or 16")))?;
        if is_set.is_null() {
            return Err(err(class::ARG, "NULL is_set"));
        }
        let b = BOOLEANS.lock().unwrap_or_else(|e| e.into_inner())[slot];
        if let Some((tv, fv)) = b {
            if t.is_null() || f.is_null() {
                return Err(err(class::ARG, "NULL logical value"));
            }
            // SAFETY: the caller provides `size` bytes at each, both non-NULL.
            unsafe {
                std::ptr::copy_nonoverlapping(tv.as_ptr(), t as *mut u8, size as usize);
                std::ptr::copy_nonoverlapping(fv.as_ptr(), f as *mut u8, size as usize);
            }
        }
        // SAFETY: output argument, checked non-NULL.
        unsafe { put(is_set, b.is_some() as c_int) };
        Ok(())
    })
});

mpi_fn!(fn MPI_Abi_set_fortran_info / PMPI_Abi_set_fortran_info(i: MPI_Info) -> c_int {
    run("MPI_Abi_set_fortran_info", MPI_COMM_WORLD, || {
        let pairs = info(i)?.lock().unwrap_or_else(|e| e.into_inner()).pairs.clone();
        let mut fi = FORTRAN_INFO.lock().unwrap_or_else(|e| e.into_inner());
        match &*fi {
            Some(old) if *old != pairs => Err(err(MPI_ERR_ABI, "the Fortran information is already set")),
            _ => {
                *fi = Some(pairs);
                Ok(())
            }
        }
    })
});

mpi_fn!(fn MPI_Abi_get_fortran_info / PMPI_Abi_get_fortran_info(out: *mut MPI_Info) -> c_int {
    run("MPI_Abi_get_fortran_info", MPI_COMM_WORLD, || {
        if out.is_null() {
            return Err(err(class::ARG, "NULL info"));
        }
        // Without a Fortran layer: the sizes of the common compilers and no bindings.
        let mut i = gridwire_mpi::info::Info::default();
        for (k, v) in [
            ("mpi_logical_size", "4"),
            ("mpi_integer_size", "4"),
            ("mpi_real_size", "4"),
            ("mpi_double_precision_size", "8"),
            ("mpi_fortran_bindings", "false"),
        ] {
            i.set(k, v)?;
        }
        // Every sized Fortran type has a predefined datatype here.
        for t in [
            "logical1", "logical2", "logical4", "logical8", "logical16", "integer1", "integer2", "integer4",
            "integer8", "integer16", "real2", "real4", "real8", "real16", "complex4", "complex8", "complex16",
            "complex32", "double_complex",
        ] {
            i.set(&format!("mpi_{t}_supported"), "true")?;
        }
        // What the Fortran bindings set overrides the defaults.
        if let Some(pairs) = &*FORTRAN_INFO.lock().unwrap_or_else(|e| e.into_inner()) {
            for (k, v) in pairs {
                i.set(k, v)?;
            }
        }
        // SAFETY: output argument, checked non-NULL.
        unsafe { put(out, INFOS.insert(Arc::new(Mutex::new(i)))) };
        Ok(())
    })
});
