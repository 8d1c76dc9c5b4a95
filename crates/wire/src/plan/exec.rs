//! Running a plan: the interpreter over the operations, with the integer
//! and floating-point conversions and the copy and byte-swap kernels.

use super::*;

/// Read an unsigned scalar of `size` bytes.
///
/// # Safety
/// `p` must be valid for reads of `size` bytes.
#[inline(always)]
pub(super) unsafe fn rd(p: *const u8, size: u8, swap: bool) -> u64 {
    // SAFETY: caller guarantees `size` readable bytes; unaligned reads.
    unsafe {
        match size {
            1 => *p as u64,
            2 => {
                let v = (p as *const u16).read_unaligned();
                (if swap { v.swap_bytes() } else { v }) as u64
            }
            4 => {
                let v = (p as *const u32).read_unaligned();
                (if swap { v.swap_bytes() } else { v }) as u64
            }
            _ => {
                let v = (p as *const u64).read_unaligned();
                if swap {
                    v.swap_bytes()
                } else {
                    v
                }
            }
        }
    }
}

/// Write the low `size` bytes of `v`.
///
/// # Safety
/// `p` must be valid for writes of `size` bytes.
#[inline(always)]
pub(super) unsafe fn wr(p: *mut u8, size: u8, swap: bool, v: u64) {
    // SAFETY: caller guarantees `size` writable bytes; unaligned writes.
    unsafe {
        match size {
            1 => *p = v as u8,
            2 => (p as *mut u16).write_unaligned(if swap {
                (v as u16).swap_bytes()
            } else {
                v as u16
            }),
            4 => (p as *mut u32).write_unaligned(if swap {
                (v as u32).swap_bytes()
            } else {
                v as u32
            }),
            _ => (p as *mut u64).write_unaligned(if swap { v.swap_bytes() } else { v }),
        }
    }
}

pub(super) fn sign_extend(v: u64, size: u8) -> i128 {
    let shift = 64 - 8 * size as u32;
    (((v << shift) as i64) >> shift) as i128
}

pub(super) fn convert_int(
    raw: u64,
    from: IntT,
    to: IntT,
    policy: OverflowPolicy,
    plan: &Plan,
    field: u32,
) -> std::result::Result<u64, Box<WireError>> {
    let v: i128 = if from.signed {
        sign_extend(raw, from.size)
    } else {
        raw as i128
    };
    let bits = 8 * to.size as u32;
    let (lo, hi): (i128, i128) = if to.signed {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    } else {
        (0, (1i128 << bits) - 1)
    };
    let c = if v < lo || v > hi {
        match policy {
            OverflowPolicy::Saturate => v.clamp(lo, hi),
            OverflowPolicy::Error => {
                return Err(Box::new(WireError::Overflow {
                    field: plan.names.get(field as usize).cloned().unwrap_or_default(),
                    value: v.to_string(),
                }));
            }
        }
    } else {
        v
    };
    Ok(c as u64)
}

/// Run `ops` from `src` into `dst` (element or record bases).
///
/// # Safety
/// `src`/`dst` must be valid for the extent of `ops` (see [`extent`]), which
/// `Plan::compile` checked against the sizes the callers guarantee; the two
/// regions must not overlap.
/// Truncate toward zero; NaN or out of range follows the policy.
pub(super) fn float_to_int(
    x: f64,
    to: IntT,
    plan: &Plan,
    field: u32,
) -> std::result::Result<u64, Box<WireError>> {
    let bits = 8 * to.size as u32;
    let (lo, hi): (i128, i128) = if to.signed {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    } else {
        (0, (1i128 << bits) - 1)
    };
    // `as i128` saturates and maps NaN to 0, so the range test is exact.
    let t = x.trunc() as i128;
    if x.is_nan() || t < lo || t > hi {
        return match plan.policy {
            OverflowPolicy::Saturate => Ok(t.clamp(lo, hi) as u64),
            OverflowPolicy::Error => Err(Box::new(WireError::Overflow {
                field: plan.names.get(field as usize).cloned().unwrap_or_default(),
                value: x.to_string(),
            })),
        };
    }
    Ok(t as u64)
}

/// Errors are boxed so the result fits in a register: returning a large
/// `Result` through memory costs a store-forwarding stall per call.
pub(super) type ExecResult = std::result::Result<(), Box<WireError>>;

pub(super) unsafe fn exec(ops: &[Op], src: *const u8, dst: *mut u8, plan: &Plan) -> ExecResult {
    for op in ops {
        // SAFETY (whole match): every offset below is inside the op's extent.
        unsafe {
            match op {
                Op::Copy {
                    src: s,
                    dst: d,
                    len,
                } => copy(src.add(*s), dst.add(*d), *len),
                Op::Swap {
                    src: s,
                    dst: d,
                    size,
                    count,
                } => {
                    let (s, d) = (src.add(*s), dst.add(*d));
                    // Long runs 16 bytes at a time with SSSE3 byte shuffles
                    // (LLVM's own vectorisation for the baseline x86-64
                    // target ran at twice a scalar C loop's time); the
                    // remainder below.
                    let done = swap_run_simd(s, d, *count, *size as usize);
                    let (s, d, count) = (
                        s.add(done * *size as usize),
                        d.add(done * *size as usize),
                        &(*count - done),
                    );
                    match size {
                        2 => swap_run::<u16>(s, d, *count, u16::swap_bytes),
                        4 => swap_run::<u32>(s, d, *count, u32::swap_bytes),
                        8 => swap_run::<u64>(s, d, *count, u64::swap_bytes),
                        _ => std::ptr::copy_nonoverlapping(s, d, *size as usize * count),
                    }
                }
                Op::Int {
                    src: s,
                    dst: d,
                    from,
                    to,
                    count,
                    field,
                } => {
                    for i in 0..*count {
                        let raw = rd(src.add(s + i * from.size as usize), from.size, from.swap);
                        let v = convert_int(raw, *from, *to, plan.policy, plan, *field)?;
                        wr(dst.add(d + i * to.size as usize), to.size, to.swap, v);
                    }
                }
                Op::Float {
                    src: s,
                    dst: d,
                    from,
                    from_swap,
                    to,
                    to_swap,
                    count,
                } => {
                    for i in 0..*count {
                        let raw = rd(src.add(s + i * *from as usize), *from, *from_swap);
                        let v = if *from == 4 {
                            f32::from_bits(raw as u32) as f64
                        } else {
                            f64::from_bits(raw)
                        };
                        let o = if *to == 4 {
                            (v as f32).to_bits() as u64
                        } else {
                            v.to_bits()
                        };
                        wr(dst.add(d + i * *to as usize), *to, *to_swap, o);
                    }
                }
                Op::IntToFloat {
                    src: s,
                    dst: d,
                    from,
                    to,
                    to_swap,
                    count,
                } => {
                    for i in 0..*count {
                        let raw = rd(src.add(s + i * from.size as usize), from.size, from.swap);
                        let v = if from.signed {
                            sign_extend(raw, from.size) as f64
                        } else {
                            raw as f64
                        };
                        let o = if *to == 4 {
                            (v as f32).to_bits() as u64
                        } else {
                            v.to_bits()
                        };
                        wr(dst.add(d + i * *to as usize), *to, *to_swap, o);
                    }
                }
                Op::FloatToInt {
                    src: s,
                    dst: d,
                    from,
                    from_swap,
                    to,
                    count,
                    field,
                } => {
                    for i in 0..*count {
                        let raw = rd(src.add(s + i * *from as usize), *from, *from_swap);
                        let x = if *from == 4 {
                            f32::from_bits(raw as u32) as f64
                        } else {
                            f64::from_bits(raw)
                        };
                        let v = float_to_int(x, *to, plan, *field)?;
                        wr(dst.add(d + i * to.size as usize), to.size, to.swap, v);
                    }
                }
                Op::Fill { dst: d, bytes } => {
                    std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst.add(*d), bytes.len())
                }
                Op::Zero { dst: d, len } => std::ptr::write_bytes(dst.add(*d), 0, *len),
                Op::Repeat {
                    src: s,
                    dst: d,
                    count,
                    src_stride,
                    dst_stride,
                    body,
                } => {
                    for i in 0..*count {
                        exec(
                            body,
                            src.add(s + i * src_stride),
                            dst.add(d + i * dst_stride),
                            plan,
                        )?;
                    }
                }
            }
        }
    }
    Ok(())
}

/// Copy `n` bytes; short copies (most fields) as two overlapping unaligned
/// moves instead of a call to `memcpy`, which dominated interpreted plans
/// of reordered fields.
///
/// # Safety
/// `s` readable and `d` writable for `n` bytes, not overlapping.
#[inline(always)]
pub(super) unsafe fn copy(s: *const u8, d: *mut u8, n: usize) {
    // SAFETY: every access below is inside [0, n) of both regions.
    unsafe {
        match n {
            0 => {}
            1 => *d = *s,
            2..=3 => {
                let a = (s as *const u16).read_unaligned();
                let b = (s.add(n - 2) as *const u16).read_unaligned();
                (d as *mut u16).write_unaligned(a);
                (d.add(n - 2) as *mut u16).write_unaligned(b);
            }
            4..=7 => {
                let a = (s as *const u32).read_unaligned();
                let b = (s.add(n - 4) as *const u32).read_unaligned();
                (d as *mut u32).write_unaligned(a);
                (d.add(n - 4) as *mut u32).write_unaligned(b);
            }
            8..=16 => {
                let a = (s as *const u64).read_unaligned();
                let b = (s.add(n - 8) as *const u64).read_unaligned();
                (d as *mut u64).write_unaligned(a);
                (d.add(n - 8) as *mut u64).write_unaligned(b);
            }
            17..=32 => {
                let a = (s as *const u128).read_unaligned();
                let b = (s.add(n - 16) as *const u128).read_unaligned();
                (d as *mut u128).write_unaligned(a);
                (d.add(n - 16) as *mut u128).write_unaligned(b);
            }
            _ => std::ptr::copy_nonoverlapping(s, d, n),
        }
    }
}

/// Byte-swap `n` unaligned scalars (the compiler vectorises this loop).
///
/// # Safety
/// `s` readable and `d` writable for `n * size_of::<T>()` bytes, not overlapping.
#[inline(always)]
pub(super) unsafe fn swap_run<T: Copy>(s: *const u8, d: *mut u8, n: usize, f: fn(T) -> T) {
    for i in 0..n {
        // SAFETY: element i is inside both regions (caller contract).
        unsafe {
            let v = (s as *const T).add(i).read_unaligned();
            (d as *mut T).add(i).write_unaligned(f(v));
        }
    }
}

/// Byte-swap as many whole elements of a run as SSSE3 shuffles can (16
/// bytes per step, four steps per round); returns the number done (0
/// without SSSE3, off x86-64, or for short runs).
///
/// # Safety
/// As for [`swap_run`]: `s` readable and `d` writable for `n * width`
/// bytes, not overlapping.
#[inline(always)]
pub(super) unsafe fn swap_run_simd(s: *const u8, d: *mut u8, n: usize, width: usize) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        if n * width >= 64 && matches!(width, 2 | 4 | 8) && is_x86_feature_detected!("ssse3") {
            // SAFETY: SSSE3 is present (checked); forwarded contract.
            return unsafe { swap_run_ssse3(s, d, n, width) };
        }
    }
    let _ = (s, d, n, width);
    0
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "ssse3")]
pub(super) unsafe fn swap_run_ssse3(s: *const u8, d: *mut u8, n: usize, width: usize) -> usize {
    use std::arch::x86_64::*;
    let mut idx = [0u8; 16];
    for (i, b) in idx.iter_mut().enumerate() {
        *b = (i - i % width + (width - 1 - i % width)) as u8;
    }
    // SAFETY: loads and stores stay below n * width bytes: `bytes` rounds
    // that down to whole 64-byte rounds (caller contract for the regions).
    unsafe {
        let mask = _mm_loadu_si128(idx.as_ptr() as *const __m128i);
        let bytes = n * width / 64 * 64;
        let mut i = 0;
        while i < bytes {
            for k in 0..4 {
                let v = _mm_loadu_si128(s.add(i + 16 * k) as *const __m128i);
                _mm_storeu_si128(d.add(i + 16 * k) as *mut __m128i, _mm_shuffle_epi8(v, mask));
            }
            i += 64;
        }
        bytes / width
    }
}
