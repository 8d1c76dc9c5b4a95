//! libmpi.so: the MPI C interface with the MPI 5.0 standard ABI, over `gridwire-mpi`.
//!
//! Every function is exported twice, as `PMPI_x` (the implementation) and
//! `MPI_x` (calling it), so profiling tools can interpose on `MPI_x`.
//! Handles are pointer-sized: predefined ones are the ABI's small numbers,
//! user ones are table slots with a generation counter (see [`handles`]), so
//! a freed or forged handle is reported, never dereferenced.
//!
//! This crate is the FFI boundary: it is where raw pointers from C are read
//! and written. Each such access has a SAFETY comment stating what the MPI
//! standard promises about the argument.
// MPI signatures are fixed by the standard, hence the argument counts.
#![allow(
    non_snake_case,
    non_camel_case_types,
    clippy::missing_safety_doc,
    clippy::too_many_arguments
)]

use std::ffi::{c_char, c_int, c_void};

/// Exports `PMPI_x` with the body and `MPI_x` forwarding to it. The body
/// runs under [`errors::no_unwind`]: a panic (a bug: no input may cause
/// one) becomes `MPI_ERR_INTERN` through the error handler instead of
/// unwinding into C.
macro_rules! mpi_fn {
    (fn $name:ident / $pname:ident ($($a:ident : $t:ty),* $(,)?) -> $r:ty $body:block) => {
        #[no_mangle]
        pub unsafe extern "C" fn $pname($($a: $t),*) -> $r {
            $crate::errors::no_unwind(stringify!($name), move || -> $r { $body })
        }
        #[no_mangle]
        pub unsafe extern "C" fn $name($($a: $t),*) -> $r {
            // SAFETY: same contract as the function it forwards to.
            unsafe { $pname($($a),*) }
        }
    };
}

/// A declared-but-unsupported function: fails with MPI_ERR_UNSUPPORTED_OPERATION.
macro_rules! stub {
    ($name:ident, $pname:ident) => {
        #[no_mangle]
        pub extern "C" fn $pname() -> std::ffi::c_int {
            unsupported(stringify!($name))
        }
        #[no_mangle]
        pub extern "C" fn $name() -> std::ffi::c_int {
            unsupported(stringify!($name))
        }
    };
}

pub mod abi;
pub mod errors;
pub mod handles;

mod attr;
mod coll;
mod comm;
mod darray;
mod dtype;
mod env;
mod external;
mod fortran;
mod graph;
mod grequest;
mod info;
mod legacy;
mod misc;
mod mpi_t;
mod neighbor;
mod p2p;
mod persistent;
mod ports;
mod rma;
mod spawn;
mod stubs;
mod topo;
mod topology_attrs;

pub use abi::*;
#[allow(unused_imports)]
use errors::unsupported;

/// Reads a C string argument (lossy UTF-8).
///
/// # Safety
/// `p` is NULL or a NUL-terminated string (the MPI argument contract).
pub(crate) unsafe fn cstr(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: the caller passes a NUL-terminated string as MPI requires.
    unsafe { std::ffi::CStr::from_ptr(p) }
        .to_string_lossy()
        .into_owned()
}

/// Writes `s` into a C buffer of `cap` bytes (NUL-terminated, truncated) and stores its length.
///
/// # Safety
/// `out` must hold `cap` bytes; `len` is NULL or a valid `int*`.
pub(crate) unsafe fn put_str(s: &str, out: *mut c_char, cap: usize, len: *mut c_int) {
    let n = s.len().min(cap.saturating_sub(1));
    if !out.is_null() && cap > 0 {
        // SAFETY: `out` holds at least `cap` > n bytes by the caller's contract.
        unsafe {
            std::ptr::copy_nonoverlapping(s.as_ptr(), out as *mut u8, n);
            *out.add(n) = 0;
        }
    }
    if !len.is_null() {
        // SAFETY: `len` is a valid int pointer by the caller's contract.
        unsafe { *len = n as c_int };
    }
}

/// Stores `v` through an output pointer if it is not NULL.
///
/// # Safety
/// `p` is NULL or valid for a write of `T` (the MPI argument contract).
#[inline]
pub(crate) unsafe fn put<T>(p: *mut T, v: T) {
    if !p.is_null() {
        // SAFETY: non-null output arguments point to valid storage by the MPI contract.
        unsafe { p.write(v) }
    }
}

/// Views `n` elements at `p` (an array argument) as a slice; empty if n <= 0.
///
/// # Safety
/// `p` must point to `n` initialised elements when n > 0.
pub(crate) unsafe fn arr<'a, T>(p: *const T, n: c_int) -> &'a [T] {
    if n <= 0 || p.is_null() {
        return &[];
    }
    // SAFETY: MPI array arguments hold `n` elements by the caller's contract.
    unsafe { std::slice::from_raw_parts(p, n as usize) }
}

/// Mutable view of an array output argument.
///
/// # Safety
/// `p` must point to `n` writable elements when n > 0.
pub(crate) unsafe fn arr_mut<'a, T>(p: *mut T, n: c_int) -> &'a mut [T] {
    if n <= 0 || p.is_null() {
        return &mut [];
    }
    // SAFETY: MPI output arrays hold `n` elements by the caller's contract.
    unsafe { std::slice::from_raw_parts_mut(p, n as usize) }
}

pub(crate) type Void = c_void;
