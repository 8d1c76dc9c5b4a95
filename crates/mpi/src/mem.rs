//! The one place that touches user memory by address.
//!
//! MPI hands us buffers as addresses that stay valid until the operation
//! completes (a nonblocking receive is written long after `MPI_Irecv`
//! returned). Rust cannot express that lifetime, so the library keeps the
//! addresses as integers and goes through these two functions, whose callers
//! promise the MPI rule: the range is the user's buffer of a pending operation.

/// Copies `out.len()` bytes from address `src`.
///
/// # Safety
/// `src .. src + out.len()` must be readable memory of the user's buffer.
#[inline]
pub unsafe fn read(src: usize, out: &mut [u8]) {
    if !out.is_empty() {
        // SAFETY: the caller guarantees the source range is readable; `out` is
        // a distinct Rust buffer, so the ranges do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(src as *const u8, out.as_mut_ptr(), out.len()) }
    }
}

/// Copies `data` to address `dst`.
///
/// # Safety
/// `dst .. dst + data.len()` must be writable memory of the user's buffer.
#[inline]
pub unsafe fn write(dst: usize, data: &[u8]) {
    if !data.is_empty() {
        // SAFETY: the caller guarantees the destination range is writable; the
        // user's receive buffer cannot alias our `data` (MPI forbids it).
        unsafe { std::ptr::copy(data.as_ptr(), dst as *mut u8, data.len()) }
    }
}

/// A view of `len` bytes at `addr`.
///
/// # Safety
/// The range must be readable and stay unchanged while the slice is used.
#[inline]
pub unsafe fn slice<'a>(addr: usize, len: usize) -> &'a [u8] {
    if len == 0 {
        return &[];
    }
    // SAFETY: guaranteed by the caller as documented.
    unsafe { std::slice::from_raw_parts(addr as *const u8, len) }
}

/// A mutable view of `len` bytes at `addr`.
///
/// # Safety
/// The range must be writable and not otherwise accessed while the slice is used.
#[inline]
pub unsafe fn slice_mut<'a>(addr: usize, len: usize) -> &'a mut [u8] {
    if len == 0 {
        return &mut [];
    }
    // SAFETY: guaranteed by the caller as documented.
    unsafe { std::slice::from_raw_parts_mut(addr as *mut u8, len) }
}
