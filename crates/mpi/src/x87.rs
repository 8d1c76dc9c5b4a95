//! Arithmetic on C `long double` (x87 80-bit extended precision, stored in 16
//! bytes on x86-64), which Rust has no type for: done by the FPU itself.

#[cfg(target_arch = "x86_64")]
mod imp {
    use std::arch::asm;

    /// `b = a + b`, `b = a * b` or `b = a - b` (op 0, 1, 2) on 10-byte values.
    pub fn arith(op: u8, a: &[u8], b: &mut [u8]) {
        assert!(a.len() >= 10 && b.len() >= 10);
        let (pa, pb) = (a.as_ptr(), b.as_mut_ptr());
        // SAFETY: both pointers address at least 10 valid bytes (asserted);
        // the x87 stack is used only here and left as found (two loads, one
        // arithmetic pop, one store pop), and its registers are declared clobbered.
        unsafe {
            match op {
                0 => {
                    asm!("fld tbyte ptr [{a}]", "fld tbyte ptr [{b}]", "faddp st(1), st", "fstp tbyte ptr [{b}]",
                          a = in(reg) pa, b = in(reg) pb, out("st(0)") _, out("st(1)") _, options(nostack))
                }
                1 => {
                    asm!("fld tbyte ptr [{a}]", "fld tbyte ptr [{b}]", "fmulp st(1), st", "fstp tbyte ptr [{b}]",
                          a = in(reg) pa, b = in(reg) pb, out("st(0)") _, out("st(1)") _, options(nostack))
                }
                // st1 = a, st0 = b: fsubp computes st1 - st0 = a - b
                _ => {
                    asm!("fld tbyte ptr [{a}]", "fld tbyte ptr [{b}]", "fsubp st(1), st", "fstp tbyte ptr [{b}]",
                          a = in(reg) pa, b = in(reg) pb, out("st(0)") _, out("st(1)") _, options(nostack))
                }
            }
        }
    }

    /// Whether `a < b` (false if unordered).
    pub fn less(a: &[u8], b: &[u8]) -> bool {
        assert!(a.len() >= 10 && b.len() >= 10);
        let lt: u8;
        // SAFETY: as in `arith`; fucomip pops one value and fstp the other.
        unsafe {
            asm!("fld tbyte ptr [{b}]", "fld tbyte ptr [{a}]", "fucomip st, st(1)", "fstp st(0)",
                 "setb {lt}", "setp {p}", "and {lt}, 1", "xor {p}, 1", "and {lt}, {p}",
                 a = in(reg) a.as_ptr(), b = in(reg) b.as_ptr(), lt = out(reg_byte) lt, p = out(reg_byte) _,
                 out("st(0)") _, out("st(1)") _, options(nostack));
        }
        lt != 0
    }

    pub const SUPPORTED: bool = true;
}

#[cfg(not(target_arch = "x86_64"))]
mod imp {
    pub fn arith(_op: u8, _a: &[u8], _b: &mut [u8]) {}
    pub fn less(_a: &[u8], _b: &[u8]) -> bool {
        false
    }
    pub const SUPPORTED: bool = false;
}

pub use imp::{arith, less, SUPPORTED};

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    /// 80-bit encodings of small integers (exponent bias 16383, explicit integer bit).
    fn ld(v: u64) -> [u8; 16] {
        let mut b = [0u8; 16];
        if v != 0 {
            let lz = v.leading_zeros();
            let mant = v << lz;
            let exp = 16383 + 63 - lz as u16;
            b[..8].copy_from_slice(&mant.to_le_bytes());
            b[8..10].copy_from_slice(&exp.to_le_bytes());
        }
        b
    }

    #[test]
    fn add_mul_sub_compare() {
        let mut b = ld(5);
        arith(0, &ld(3), &mut b);
        assert_eq!(b[..10], ld(8)[..10]);
        arith(1, &ld(3), &mut b);
        assert_eq!(b[..10], ld(24)[..10]);
        arith(2, &ld(30), &mut b);
        assert_eq!(b[..10], ld(6)[..10]);
        assert!(less(&ld(2), &ld(3)));
        assert!(!less(&ld(3), &ld(3)));
        assert!(!less(&ld(4), &ld(3)));
    }
}
