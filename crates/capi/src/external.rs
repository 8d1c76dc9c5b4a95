//! `MPI_Pack_external`, `MPI_Unpack_external`, `MPI_Pack_external_size`
//! and their `_c` forms (over [`gridwire_mpi::external32`]).

use crate::abi::*;
use crate::dtype::unpack_at;
use crate::errors::run;
use crate::handles::{self, dtype};
use crate::{cstr, put, Void};
use gridwire_mpi::external32::{self, Long};
use gridwire_mpi::{class, err, Datatype, Result};
use std::ffi::{c_char, c_int};
use std::sync::atomic::Ordering;

const MPI_LONG: usize = 522;
const MPI_UNSIGNED_LONG: usize = 526;
const MPI_LONG_INT: usize = 554;

fn datarep(p: *const c_char) -> Result<()> {
    if p.is_null() {
        return Err(err(class::ARG, "datarep is NULL"));
    }
    // SAFETY: a non-null NUL-terminated string (the MPI contract).
    external32::check_datarep(&unsafe { cstr(p) })
}

/// Which predefined types are C `long`s (4 bytes in external32): known by their handles.
fn longs(t: &Datatype) -> Option<Long> {
    if !t.predefined {
        return None;
    }
    match t.handle.load(Ordering::Relaxed) {
        MPI_LONG => Some(Long::Signed),
        MPI_UNSIGNED_LONG => Some(Long::Unsigned),
        MPI_LONG_INT => Some(Long::WithInt),
        _ => None,
    }
}

/// Bytes of `n` elements of `t` in external32.
fn ext_bytes(dt: &Datatype, n: i64) -> Result<i64> {
    if n < 0 {
        return Err(err(class::COUNT, format!("count {n} is negative")));
    }
    external32::packed_size(dt, n as usize, &longs)
        .and_then(|b| i64::try_from(b).ok())
        .ok_or_else(|| {
            err(
                class::COUNT,
                format!("{n} elements of {} bytes are too many", dt.size),
            )
        })
}

/// Packs natively, then writes the external32 form at the position.
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
    // SAFETY: the program's input buffer.
    let b = unsafe { handles::buf(inb, n, t) }?;
    handles::mpi()?.check_buf(&b, "input buffer")?;
    let need = ext_bytes(&b.dt, n)?;
    // Checked: a position near i64::MAX must not wrap below `outsize`.
    if p < 0 || p.checked_add(need).is_none_or(|end| end > outsize) {
        return Err(err(
            class::TRUNCATE,
            format!("{name}: {need} bytes at position {p} do not fit in {outsize}"),
        ));
    }
    if need > 0 && outb.is_null() {
        return Err(err(
            class::BUFFER,
            format!("{name}: the output buffer is NULL"),
        ));
    }
    if need > 0 {
        // SAFETY: `outb` holds outsize >= p + need bytes (checked above).
        let out = unsafe {
            std::slice::from_raw_parts_mut((outb as *mut u8).add(p as usize), need as usize)
        };
        external32::to_external(&b.dt, n as usize, &b.pack(), out, &longs)?;
    }
    // SAFETY: checked in/out argument.
    unsafe { *pos = p + need };
    Ok(())
}

/// Converts the external32 input to the native packed form, then unpacks it like `MPI_Unpack`.
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
    // SAFETY: checked non-null in/out argument.
    let p = unsafe { *pos };
    let dt = dtype(t)?;
    let need = ext_bytes(&dt, n)?;
    if p < 0 || p.checked_add(need).is_none_or(|e| e > insize) {
        return Err(err(
            class::TRUNCATE,
            format!("{name}: {need} bytes at position {p} exceed the input of {insize}"),
        ));
    }
    let native_len = dt
        .size
        .checked_mul(n as usize)
        .ok_or_else(|| err(class::COUNT, "too many elements"))?;
    let mut native = vec![0u8; native_len];
    if need > 0 && inb.is_null() {
        return Err(err(
            class::BUFFER,
            format!("{name}: the input buffer is NULL"),
        ));
    }
    if need > 0 {
        // SAFETY: `inb` holds insize >= p + need bytes (checked above).
        let ext = unsafe {
            std::slice::from_raw_parts((inb as *const u8).add(p as usize), need as usize)
        };
        external32::from_external(&dt, n as usize, ext, &mut native, &longs)?;
    }
    // SAFETY: `native` holds the packed elements; forwarded output buffer contract.
    unsafe {
        unpack_at(
            name,
            native.as_ptr() as *const Void,
            native_len as i64,
            0,
            outb,
            n,
            t,
        )
    }?;
    // SAFETY: checked in/out argument.
    unsafe { *pos = p + need };
    Ok(())
}

fn size_external(rep: *const c_char, n: i64, t: MPI_Datatype) -> Result<i64> {
    datarep(rep)?;
    ext_bytes(&*dtype(t)?, n)
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
