//! The "external32" data representation (`MPI_Pack_external`): the
//! standard's portable format, big-endian, with fixed sizes per type.
//!
//! On the platform gridwire runs on (x86-64 Linux, LP64) every predefined
//! type but C `long` already has its external32 size (`long double` is 16
//! bytes in both; `long` is 8 here and 4 in external32, see [`Long`]), so an
//! external32 stream is the native packed stream with each element
//! converted: integers and IEEE floats byte-reversed, complex numbers and
//! the MINLOC/MAXLOC pairs part by part, `long double` (x87 80-bit extended
//! in 16 bytes) rewritten as IEEE binary128, `long` cut to its low 4 bytes
//! (sign- or zero-extended coming back). Packing packs as `MPI_Pack` does
//! and converts into the output; unpacking converts into a native stream
//! and unpacks that.
//!
//! The conversion walks the type signature, not the memory layout: a type
//! made of one element type throughout (`Datatype::basic`) is converted in
//! one pass; structs of mixed types are walked member by member.

use crate::datatype::{Basic, Combiner, Datatype};
use crate::error::{class, err, Result};

/// Which way the bytes go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    ToExternal,
    FromExternal,
}

/// The one data representation besides "native" that this library knows.
pub fn check_datarep(name: &str) -> Result<()> {
    if name == "external32" {
        Ok(())
    } else {
        Err(err(
            class::UNSUPPORTED_DATAREP,
            format!("data representation {name:?} is not supported (only \"external32\")"),
        ))
    }
}

/// One part of an element: bytes kept, bytes reversed, or an x87 `long double`.
#[derive(Clone, Copy)]
enum Part {
    Keep(usize),
    Rev(usize),
    X87,
}

fn parts(b: Basic) -> &'static [Part] {
    use Basic::*;
    use Part::*;
    match b {
        I8 | U8 | Byte | Char | Packed | Bool => &[Keep(1)],
        I16 | U16 => &[Rev(2)],
        I32 | U32 | F32 => &[Rev(4)],
        I64 | U64 | F64 => &[Rev(8)],
        C32 | TwoInt | TwoF32 | TwoI32 => &[Rev(4), Rev(4)],
        C64 | TwoF64 => &[Rev(8), Rev(8)],
        LongDouble => &[X87],
        CLongDouble => &[X87, X87],
        FloatInt => &[Rev(4), Rev(4)],
        DoubleInt | LongInt => &[Rev(8), Rev(4)],
        ShortInt => &[Rev(2), Rev(4)],
        LongDoubleInt => &[X87, Rev(4)],
        // MPI_COMPLEX4 and MPI_COMPLEX32: two halves.
        OpaqueFloat(4) => &[Rev(2), Rev(2)],
        OpaqueFloat(32) => &[Rev(16), Rev(16)],
        OpaqueFloat(2) | Logical(2) => &[Rev(2)],
        OpaqueFloat(16) | Logical(16) => &[Rev(16)],
        Logical(4) => &[Rev(4)],
        Logical(8) => &[Rev(8)],
        OpaqueFloat(_) | Logical(_) => &[Keep(1)],
    }
}

/// x87 extended (16 bytes, little-endian) to IEEE binary128 big-endian.
fn x87_to_quad(b: &mut [u8]) {
    let mant = u64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
    let se = u16::from_le_bytes([b[8], b[9]]) as u128;
    // The exponent has the same width and bias; the integer bit is implicit in binary128.
    let frac = ((mant & !(1u64 << 63)) as u128) << 49;
    let q = (se << 112) | frac;
    b.copy_from_slice(&q.to_be_bytes());
}

/// IEEE binary128 big-endian to x87 extended (16 bytes, little-endian).
fn quad_to_x87(b: &mut [u8]) {
    let q = u128::from_be_bytes(b[..16].try_into().expect("16 bytes"));
    let se = (q >> 112) as u16;
    let frac = q & ((1u128 << 112) - 1);
    let exp = se & 0x7fff;
    let mut mant = (frac >> 49) as u64;
    if exp != 0 {
        mant |= 1 << 63;
    }
    if exp == 0x7fff && frac != 0 && mant & !(1u64 << 63) == 0 {
        // A NaN whose payload was all in the dropped bits stays a NaN.
        mant |= 1 << 62;
    }
    b[..8].copy_from_slice(&mant.to_le_bytes());
    b[8..10].copy_from_slice(&se.to_le_bytes());
    b[10..16].fill(0);
}

/// Converts `n` elements of basic type `b` at the start of `data`.
fn convert_basic(b: Basic, n: usize, data: &mut [u8], dir: Direction) {
    let ps = parts(b);
    let mut at = 0;
    for _ in 0..n {
        for p in ps {
            match *p {
                Part::Keep(k) => at += k,
                Part::Rev(k) => {
                    data[at..at + k].reverse();
                    at += k;
                }
                Part::X87 => {
                    match dir {
                        Direction::ToExternal => x87_to_quad(&mut data[at..at + 16]),
                        Direction::FromExternal => quad_to_x87(&mut data[at..at + 16]),
                    }
                    at += 16;
                }
            }
        }
    }
}

/// The predefined types that are C `long`s: 8 bytes here, 4 in external32
/// (the standard's table). The datatype cannot tell (`MPI_LONG` and
/// `MPI_LONG_LONG` are both 8-byte integers to it); the C layer, which knows
/// the handles, can.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Long {
    /// `MPI_LONG`
    Signed,
    /// `MPI_UNSIGNED_LONG`
    Unsigned,
    /// `MPI_LONG_INT` (a `long` and an `int`)
    WithInt,
}

/// Says which predefined types are `long`s (see [`Long`]).
pub type Longs<'a> = &'a dyn Fn(&Datatype) -> Option<Long>;

/// The one type a non-struct constructor repeats.
fn repeated(dt: &Datatype) -> Option<&Datatype> {
    match &dt.combiner {
        Combiner::Named | Combiner::F90 { .. } | Combiner::Struct { .. } => None,
        Combiner::Dup(old)
        | Combiner::Contiguous { old, .. }
        | Combiner::Vector { old, .. }
        | Combiner::Hvector { old, .. }
        | Combiner::Indexed { old, .. }
        | Combiner::Hindexed { old, .. }
        | Combiner::IndexedBlock { old, .. }
        | Combiner::HindexedBlock { old, .. }
        | Combiner::Subarray { old, .. }
        | Combiner::Resized { old, .. }
        | Combiner::Darray { old, .. } => Some(old),
    }
}

/// Whether `dt` is or contains a `long`.
fn has_long(dt: &Datatype, longs: Longs<'_>) -> bool {
    match &dt.combiner {
        Combiner::Named => longs(dt).is_some(),
        Combiner::Struct { types, .. } => types.iter().any(|t| has_long(t, longs)),
        _ => repeated(dt).is_some_and(|o| has_long(o, longs)),
    }
}

/// Bytes of one element of `dt` in external32.
fn ext_size(dt: &Datatype, longs: Longs<'_>) -> Option<usize> {
    if !has_long(dt, longs) {
        return Some(dt.size);
    }
    match &dt.combiner {
        Combiner::Named => Some(match longs(dt) {
            Some(Long::Signed | Long::Unsigned) => 4,
            Some(Long::WithInt) => 8,
            None => dt.size,
        }),
        Combiner::Struct {
            blocklens, types, ..
        } => types
            .iter()
            .zip(blocklens)
            .try_fold(0usize, |acc, (t, &k)| {
                acc.checked_add(ext_size(t, longs)?.checked_mul(k.max(0) as usize)?)
            }),
        _ => {
            let old = repeated(dt)?;
            ext_size(old, longs)?.checked_mul(dt.size / old.size.max(1))
        }
    }
}

/// Bytes of `count` elements of `dt` in external32.
pub fn packed_size(dt: &Datatype, count: usize, longs: Longs<'_>) -> Option<usize> {
    ext_size(dt, longs)?.checked_mul(count)
}

/// Converts the natively packed bytes of `count` elements of `dt` into
/// external32 (`out` is exactly [`packed_size`] long).
pub fn to_external(
    dt: &Datatype,
    count: usize,
    native: &[u8],
    out: &mut [u8],
    longs: Longs<'_>,
) -> Result<()> {
    convert(dt, count, native, out, Direction::ToExternal, longs)
}

/// Converts external32 bytes of `count` elements of `dt` back into the
/// natively packed form (`native` is exactly `dt.size * count` long).
pub fn from_external(
    dt: &Datatype,
    count: usize,
    ext: &[u8],
    native: &mut [u8],
    longs: Longs<'_>,
) -> Result<()> {
    convert(dt, count, ext, native, Direction::FromExternal, longs)
}

fn convert(
    dt: &Datatype,
    count: usize,
    src: &[u8],
    dst: &mut [u8],
    dir: Direction,
    longs: Longs<'_>,
) -> Result<()> {
    let native = dt.size.checked_mul(count);
    let ext = packed_size(dt, count, longs);
    let (want_src, want_dst) = match dir {
        Direction::ToExternal => (native, ext),
        Direction::FromExternal => (ext, native),
    };
    if want_src != Some(src.len()) || want_dst != Some(dst.len()) {
        return Err(wrong_length());
    }
    let mut c = Cursor {
        src,
        dst,
        sp: 0,
        dp: 0,
        dir,
        longs,
    };
    c.walk(dt, count)?;
    if c.sp != src.len() || c.dp != c.dst.len() {
        return Err(wrong_length());
    }
    Ok(())
}

#[cold]
fn wrong_length() -> crate::error::MpiError {
    err(
        class::INTERN,
        "external32: the packed data has the wrong length",
    )
}

/// Reading from `src` and writing to `dst`, in type-signature order.
struct Cursor<'a, 'b> {
    src: &'a [u8],
    dst: &'a mut [u8],
    sp: usize,
    dp: usize,
    dir: Direction,
    longs: Longs<'b>,
}

impl Cursor<'_, '_> {
    /// The next `n` source bytes and `m` destination bytes.
    fn take(&mut self, n: usize, m: usize) -> Result<(&[u8], &mut [u8])> {
        let (sp, dp) = (self.sp, self.dp);
        if sp.checked_add(n).is_none_or(|e| e > self.src.len())
            || dp.checked_add(m).is_none_or(|e| e > self.dst.len())
        {
            return Err(wrong_length());
        }
        self.sp += n;
        self.dp += m;
        Ok((&self.src[sp..sp + n], &mut self.dst[dp..dp + m]))
    }

    fn walk(&mut self, dt: &Datatype, count: usize) -> Result<()> {
        if count == 0 || dt.size == 0 {
            return Ok(());
        }
        if let (Combiner::Named, Some(kind)) = (&dt.combiner, (self.longs)(dt)) {
            for _ in 0..count {
                self.long(matches!(kind, Long::Unsigned))?;
                if kind == Long::WithInt {
                    let (s, d) = self.take(4, 4)?;
                    d.copy_from_slice(s);
                    d.reverse();
                }
            }
            return Ok(());
        }
        if let Some(b) = dt.basic.filter(|_| !has_long(dt, self.longs)) {
            // A type of one element type: its signature is that type repeated.
            let n = dt.size.checked_mul(count).ok_or_else(wrong_length)?;
            let dir = self.dir;
            let (s, d) = self.take(n, n)?;
            d.copy_from_slice(s);
            convert_basic(b, n / b_size(b), d, dir);
            return Ok(());
        }
        if let Combiner::Struct {
            blocklens, types, ..
        } = &dt.combiner
        {
            for _ in 0..count {
                for (t, &k) in types.iter().zip(blocklens) {
                    self.walk(t, k.max(0) as usize)?;
                }
            }
            return Ok(());
        }
        match repeated(dt) {
            // Its signature is the repeated type's, size / old.size times per element.
            Some(old) if old.size > 0 => self.walk(old, count * (dt.size / old.size)),
            _ => {
                let n = dt.size.checked_mul(count).ok_or_else(wrong_length)?;
                let (s, d) = self.take(n, n)?;
                d.copy_from_slice(s);
                Ok(())
            }
        }
    }

    /// One C `long`: 8 bytes little-endian here, 4 big-endian in external32
    /// (truncated going out, sign- or zero-extended coming back).
    fn long(&mut self, unsigned: bool) -> Result<()> {
        match self.dir {
            Direction::ToExternal => {
                let (s, d) = self.take(8, 4)?;
                let v = u64::from_le_bytes(s.try_into().expect("8 bytes")) as u32;
                d.copy_from_slice(&v.to_be_bytes());
            }
            Direction::FromExternal => {
                let (s, d) = self.take(4, 8)?;
                let v = u32::from_be_bytes(s.try_into().expect("4 bytes"));
                let w = if unsigned {
                    v as u64
                } else {
                    v as i32 as i64 as u64
                };
                d.copy_from_slice(&w.to_le_bytes());
            }
        }
        Ok(())
    }
}

fn b_size(b: Basic) -> usize {
    parts(b)
        .iter()
        .map(|p| match *p {
            Part::Keep(k) | Part::Rev(k) => k,
            Part::X87 => 16,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn pre(b: Basic) -> Arc<Datatype> {
        Datatype::predefined(b, "t")
    }

    /// Types named "MPI_LONG..." are the longs in these tests.
    fn longs(t: &Datatype) -> Option<Long> {
        match t.name.lock().unwrap().as_str() {
            "MPI_LONG" => Some(Long::Signed),
            "MPI_UNSIGNED_LONG" => Some(Long::Unsigned),
            "MPI_LONG_INT" => Some(Long::WithInt),
            _ => None,
        }
    }

    fn out(t: &Datatype, n: usize, native: &[u8]) -> Vec<u8> {
        let mut v = vec![0u8; packed_size(t, n, &longs).unwrap()];
        to_external(t, n, native, &mut v, &longs).unwrap();
        let mut back = vec![0u8; native.len()];
        from_external(t, n, &v, &mut back, &longs).unwrap();
        assert_eq!(back, native, "round trip");
        v
    }

    #[test]
    fn every_basic_type_has_its_external32_size() {
        for b in [
            Basic::I8,
            Basic::I16,
            Basic::I32,
            Basic::I64,
            Basic::F32,
            Basic::F64,
            Basic::C32,
            Basic::C64,
            Basic::LongDouble,
            Basic::CLongDouble,
            Basic::DoubleInt,
            Basic::ShortInt,
            Basic::LongDoubleInt,
            Basic::TwoF64,
            Basic::Bool,
        ] {
            assert_eq!(b_size(b), pre(b).size, "{b:?}");
        }
    }

    #[test]
    fn ints_and_doubles_become_big_endian() {
        assert_eq!(
            out(&pre(Basic::I32), 1, &0x0102_0304i32.to_le_bytes()),
            [1, 2, 3, 4]
        );
        assert_eq!(
            out(&pre(Basic::F64), 1, &1.5f64.to_le_bytes()),
            1.5f64.to_be_bytes()
        );
    }

    #[test]
    fn a_long_is_four_bytes() {
        let long = Datatype::predefined(Basic::I64, "MPI_LONG");
        let v = out(
            &long,
            2,
            &[(-2i64).to_le_bytes(), 7i64.to_le_bytes()].concat(),
        );
        assert_eq!(v, [0xff, 0xff, 0xff, 0xfe, 0, 0, 0, 7]);
        let ulong = Datatype::predefined(Basic::U64, "MPI_UNSIGNED_LONG");
        assert_eq!(
            out(&ulong, 1, &0xfffe_0001u64.to_le_bytes()),
            [0xff, 0xfe, 0, 1]
        );
        // A vector of longs, and MPI_LONG_INT: 8 bytes each.
        let vec = Datatype::vector(2, 1, 2, &long).unwrap();
        assert_eq!(packed_size(&vec, 3, &longs), Some(24));
        let li = Datatype::predefined(Basic::LongInt, "MPI_LONG_INT");
        let native = [5i64.to_le_bytes().as_slice(), &9i32.to_le_bytes()].concat();
        assert_eq!(out(&li, 1, &native), [0, 0, 0, 5, 0, 0, 0, 9]);
        // MPI_LONG_LONG stays 8.
        assert_eq!(packed_size(&pre(Basic::I64), 1, &longs), Some(8));
    }

    #[test]
    fn long_double_goes_to_binary128_and_back() {
        // 1.0 in x87: mantissa 1 << 63, exponent 16383.
        let mut d = [0u8; 16];
        d[..8].copy_from_slice(&(1u64 << 63).to_le_bytes());
        d[8..10].copy_from_slice(&16383u16.to_le_bytes());
        let v = out(&pre(Basic::LongDouble), 1, &d);
        // binary128 1.0 = 0x3fff followed by zeros.
        assert_eq!(&v[..2], &[0x3f, 0xff]);
        assert!(v[2..].iter().all(|&x| x == 0));
    }

    #[test]
    fn a_struct_is_converted_member_by_member() {
        // { int; long } x 2, packed: 12 bytes each here, 8 in external32.
        let long = Datatype::predefined(Basic::I64, "MPI_LONG");
        let t = Datatype::create_struct(&[1, 1], &[0, 8], &[pre(Basic::I32), long]).unwrap();
        let mut native = Vec::new();
        for (i, x) in [(7i32, 2i64), (-1, 3)] {
            native.extend(i.to_le_bytes());
            native.extend(x.to_le_bytes());
        }
        let v = out(&t, 2, &native);
        assert_eq!(
            v,
            [0, 0, 0, 7, 0, 0, 0, 2, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 3]
        );
        let mut short = vec![0u8; 15];
        assert_eq!(
            to_external(&t, 2, &native, &mut short, &longs)
                .unwrap_err()
                .class,
            class::INTERN
        );
    }

    #[test]
    fn only_external32_is_known() {
        assert!(check_datarep("external32").is_ok());
        assert_eq!(
            check_datarep("native").unwrap_err().class,
            class::UNSUPPORTED_DATAREP
        );
    }
}
