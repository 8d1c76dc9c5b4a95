//! `MPI_Pack_external`, `MPI_Unpack_external`, `MPI_Pack_external_size`
//! and their `_c` forms (over [`gridwire_mpi::external32`]).

use crate::abi::*;
use crate::dtype::{pack_at, unpack_at};
use crate::errors::run;
use crate::handles::dtype;
use crate::{cstr, put, Void};
use gridwire_mpi::external32::{self, Direction};
use gridwire_mpi::{class, err, Result};
use std::ffi::{c_char, c_int};

fn datarep(p: *const c_char) -> Result<()> {
    if p.is_null() {
        return Err(err(class::ARG, "datarep is NULL"));
    }
    // SAFETY: a non-null NUL-terminated string (the MPI contract).
    external32::check_datarep(&unsafe { cstr(p) })
}

/// Packs like `MPI_Pack`, then converts what was written to external32.
///
/// # Safety
/// As `MPI_Pack_external`: `inb` holds `n` elements of `t`, `outb` `outsize` bytes.
unsafe fn pack_external(
    name: &str,
    rep: *const c_char,
    inb: *const Void,
    n: i64,
    t: MPI_Datatype,
    outb: *mut Void,
    outsize: i64,
    pos: *mut i64,
) -> Result<()> {
    datarep(rep)?;
    if pos.is_null() {
        return Err(err(class::ARG, "position is NULL"));
    }
    // SAFETY: checked non-null in/out argument.
    let p = unsafe { *pos };
    // SAFETY: forwarded buffer contract; pack_at checks the room.
    let end = unsafe { pack_at(name, inb, n, t, outb, outsize, p) }?;
    if end > p {
        // SAFETY: pack_at wrote outb[p..end], inside the outsize bytes.
        let out = unsafe {
            std::slice::from_raw_parts_mut((outb as *mut u8).add(p as usize), (end - p) as usize)
        };
        external32::convert(&*dtype(t)?, n as usize, out, Direction::ToExternal)?;
    }
    // SAFETY: checked in/out argument.
    unsafe { *pos = end };
    Ok(())
}

/// Converts a copy of the input from external32, then unpacks it like `MPI_Unpack`.
///
/// # Safety
/// As `MPI_Unpack_external`: `inb` holds `insize` bytes, `outb` `n` elements of `t`.
unsafe fn unpack_external(
    name: &str,
    rep: *const c_char,
    inb: *const Void,
    insize: i64,
    pos: *mut i64,
    outb: *mut Void,
    n: i64,
    t: MPI_Datatype,
) -> Result<()> {
    datarep(rep)?;
    if pos.is_null() {
        return Err(err(class::ARG, "position is NULL"));
    }
    if n < 0 {
        return Err(err(class::COUNT, format!("count {n} is negative")));
    }
    // SAFETY: checked non-null in/out argument.
    let p = unsafe { *pos };
    let dt = dtype(t)?;
    let need = external32::packed_size(&dt, n as usize)
        .and_then(|b| i64::try_from(b).ok())
        .ok_or_else(|| {
            err(
                class::COUNT,
                format!("{n} elements of {} bytes are too many", dt.size),
            )
        })?;
    if p < 0 || p.checked_add(need).is_none_or(|e| e > insize) {
        return Err(err(
            class::TRUNCATE,
            format!("{name}: {need} bytes at position {p} exceed the input of {insize}"),
        ));
    }
    let mut native = if need > 0 {
        // SAFETY: `inb` holds insize >= p + need bytes (checked above).
        unsafe { std::slice::from_raw_parts((inb as *const u8).add(p as usize), need as usize) }
            .to_vec()
    } else {
        Vec::new()
    };
    external32::convert(&dt, n as usize, &mut native, Direction::FromExternal)?;
    // SAFETY: `native` holds `need` bytes; forwarded output buffer contract.
    unsafe { unpack_at(name, native.as_ptr() as *const Void, need, 0, outb, n, t) }?;
    // SAFETY: checked in/out argument.
    unsafe { *pos = p + need };
    Ok(())
}

fn size_external(rep: *const c_char, n: i64, t: MPI_Datatype) -> Result<i64> {
    datarep(rep)?;
    if n < 0 {
        return Err(err(class::COUNT, format!("count {n} is negative")));
    }
    let dt = dtype(t)?;
    external32::packed_size(&dt, n as usize)
        .and_then(|b| i64::try_from(b).ok())
        .ok_or_else(|| {
            err(
                class::COUNT,
                format!("{n} elements of {} bytes are too many", dt.size),
            )
        })
}

mpi_fn!(fn MPI_Pack_external / PMPI_Pack_external(rep: *const c_char, inb: *const Void, n: c_int, t: MPI_Datatype, outb: *mut Void, outsize: MPI_Aint, pos: *mut MPI_Aint) -> c_int {
    run("MPI_Pack_external", MPI_COMM_WORLD, || {
        // SAFETY: forwarded argument contract (MPI_Aint is 64-bit here, as MPI_Count).
        unsafe { pack_external("MPI_Pack_external", rep, inb, n as i64, t, outb, outsize as i64, pos as *mut i64) }
    })
});

mpi_fn!(fn MPI_Pack_external_c / PMPI_Pack_external_c(rep: *const c_char, inb: *const Void, n: MPI_Count, t: MPI_Datatype, outb: *mut Void, outsize: MPI_Count, pos: *mut MPI_Count) -> c_int {
    run("MPI_Pack_external_c", MPI_COMM_WORLD, || {
        // SAFETY: forwarded argument contract.
        unsafe { pack_external("MPI_Pack_external_c", rep, inb, n, t, outb, outsize, pos) }
    })
});

mpi_fn!(fn MPI_Unpack_external / PMPI_Unpack_external(rep: *const c_char, inb: *const Void, insize: MPI_Aint, pos: *mut MPI_Aint, outb: *mut Void, n: c_int, t: MPI_Datatype) -> c_int {
    run("MPI_Unpack_external", MPI_COMM_WORLD, || {
        // SAFETY: forwarded argument contract (MPI_Aint is 64-bit here).
        unsafe { unpack_external("MPI_Unpack_external", rep, inb, insize as i64, pos as *mut i64, outb, n as i64, t) }
    })
});

mpi_fn!(fn MPI_Unpack_external_c / PMPI_Unpack_external_c(rep: *const c_char, inb: *const Void, insize: MPI_Count, pos: *mut MPI_Count, outb: *mut Void, n: MPI_Count, t: MPI_Datatype) -> c_int {
    run("MPI_Unpack_external_c", MPI_COMM_WORLD, || {
        // SAFETY: forwarded argument contract.
        unsafe { unpack_external("MPI_Unpack_external_c", rep, inb, insize, pos, outb, n, t) }
    })
});

mpi_fn!(fn MPI_Pack_external_size / PMPI_Pack_external_size(rep: *const c_char, n: c_int, t: MPI_Datatype, size: *mut MPI_Aint) -> c_int {
    run("MPI_Pack_external_size", MPI_COMM_WORLD, || {
        let s = size_external(rep, n as i64, t)?;
        // SAFETY: output argument.
        unsafe { put(size, s as MPI_Aint) };
        Ok(())
    })
});

mpi_fn!(fn MPI_Pack_external_size_c / PMPI_Pack_external_size_c(rep: *const c_char, n: MPI_Count, t: MPI_Datatype, size: *mut MPI_Count) -> c_int {
    run("MPI_Pack_external_size_c", MPI_COMM_WORLD, || {
        let s = size_external(rep, n, t)?;
        // SAFETY: output argument.
        unsafe { put(size, s) };
        Ok(())
    })
});
