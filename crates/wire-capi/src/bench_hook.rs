//! Feature `bench` only: the Rust API driven from the C benchmark
//! (`crates/wire-capi/bench/capi_bench.c`), so the C API and the Rust API
//! are timed on the same records, in the same process, taking turns.
//! Not part of `gridwire.h`.

use std::ffi::{c_int, c_void};
use std::hint::black_box;
use std::sync::Arc;

use gridwire_wire::{Format, RecordRef, Registry};

use crate::{fmt_ref, GwFormat};

/// What a Rust receiver keeps: its own registry and a reused buffer.
pub struct GwBenchRust {
    reg: Registry,
    native: Arc<Format>,
    size: usize,
    align: usize,
    out: Vec<u8>,
}

/// A Rust receiver of `wire` records into `native` (NULL on bad input).
#[no_mangle]
pub unsafe extern "C" fn gw_bench_rust_new(
    wire: *const GwFormat,
    native: *const GwFormat,
) -> *mut GwBenchRust {
    let (Ok(w), Ok(n)) = (fmt_ref(wire), fmt_ref(native)) else {
        return std::ptr::null_mut();
    };
    let mut reg = Registry::new();
    reg.register(w.fmt.clone());
    reg.register(n.fmt.clone());
    Box::into_raw(Box::new(GwBenchRust {
        reg,
        native: n.fmt.clone(),
        size: n.fmt.size() as usize,
        align: (n.fmt.align() as usize).max(1),
        out: Vec::new(),
    }))
}

#[no_mangle]
pub unsafe extern "C" fn gw_bench_rust_free(b: *mut GwBenchRust) {
    if !b.is_null() {
        // SAFETY: from Box::into_raw in gw_bench_rust_new, freed once.
        drop(unsafe { Box::from_raw(b) });
    }
}

/// Decode the record at `buf` `iters` times as a Rust program would:
/// `Registry::decode_into` into a reused Vec (`in_place` = 0), or
/// `Registry::decode_in_place` plus a typed view's checks (`in_place` = 1).
/// Returns 0, or -1 if a decode failed.
#[no_mangle]
pub unsafe extern "C" fn gw_bench_rust_run(
    b: *mut GwBenchRust,
    buf: *const c_void,
    len: usize,
    iters: u64,
    in_place: c_int,
) -> c_int {
    // SAFETY: `b` from gw_bench_rust_new; `buf` has `len` readable bytes.
    let (b, buf) = unsafe {
        let Some(b) = b.as_mut() else { return -1 };
        (b, std::slice::from_raw_parts(buf as *const u8, len))
    };
    // Checked once, then the loop is written as crates/wire/benches/wire.rs
    // times the Rust API (unwrap on a record known to decode): written with
    // early returns, rustc stored the parsed record to the stack and
    // reloaded it with wider loads, a store-forwarding stall per record
    // that the Rust API does not have in a Rust program.
    let native = b.native.clone();
    match RecordRef::parse(buf) {
        Ok((r, _)) if in_place != 0 => {
            if b.reg.decode_in_place(&r, &native).is_err() {
                return -1;
            }
        }
        Ok((r, _)) => {
            if b.reg.decode_into(&r, &native, &mut b.out).is_err() {
                return -1;
            }
        }
        Err(_) => return -1,
    }
    if in_place != 0 {
        for _ in 0..iters {
            let (r, _) = RecordRef::parse(black_box(buf)).unwrap();
            let d = b.reg.decode_in_place(&r, &native).unwrap();
            // The length and alignment checks of a typed view (`view_bytes`).
            assert!(d.len() >= b.size && (d.as_ptr() as usize).is_multiple_of(b.align));
            black_box(d);
        }
    } else {
        for _ in 0..iters {
            let (r, _) = RecordRef::parse(black_box(buf)).unwrap();
            b.reg.decode_into(&r, &native, &mut b.out).unwrap();
            black_box(&b.out);
        }
    }
    0
}
