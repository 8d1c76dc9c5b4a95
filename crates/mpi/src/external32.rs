//! The "external32" data representation (`MPI_Pack_external`): the
//! standard's portable format, big-endian, with fixed sizes per type.
//!
//! On the platform gridwire runs on (x86-64 Linux, LP64) every predefined
//! type already has its external32 size (`long` is 8 bytes, `long double`
//! 16), so an external32 stream is the native packed stream with each
//! element's bytes converted: integers and IEEE floats reversed, complex
//! numbers and the MINLOC/MAXLOC pairs part by part, and `long double`
//! (x87 80-bit extended in 16 bytes) rewritten as IEEE binary128. Packing
//! goes through the ordinary pack and then converts in place; unpacking
//! converts a copy and then unpacks it.
//!
//! The conversion walks the type signature, not the memory layout: a type
//! made of one element type throughout (`Datatype::basic`) is converted in
//! one pass; only structs of mixed types are walked member by member.

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

/// Bytes of `count` elements of `dt` in external32 (the native packed size, see the module comment).
pub fn packed_size(dt: &Datatype, count: usize) -> Option<usize> {
    dt.size.checked_mul(count)
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

/// Converts the packed bytes of `count` elements of `dt` (exactly
/// `dt.size * count` bytes) in place.
pub fn convert(dt: &Datatype, count: usize, data: &mut [u8], dir: Direction) -> Result<()> {
    let need = dt.size.checked_mul(count);
    if need != Some(data.len()) {
        return Err(err(
            class::INTERN,
            "external32: the packed data has the wrong length",
        ));
    }
    let mut pos = 0;
    walk(dt, count, data, &mut pos, dir);
    Ok(())
}

fn walk(dt: &Datatype, count: usize, data: &mut [u8], pos: &mut usize, dir: Direction) {
    if count == 0 || dt.size == 0 {
        return;
    }
    if let Some(b) = dt.basic {
        let n = dt.size * count;
        if pos.checked_add(n).is_none_or(|end| end > data.len()) {
            // Cannot happen (`convert` checked the total length); never a panic.
            return;
        }
        // A type of one element type: its signature is that type repeated.
        let per = n / b_size(b);
        convert_basic(b, per, &mut data[*pos..*pos + n], dir);
        *pos += n;
        return;
    }
    let inner = match &dt.combiner {
        Combiner::Struct {
            blocklens, types, ..
        } => {
            for _ in 0..count {
                for (t, &k) in types.iter().zip(blocklens) {
                    walk(t, k.max(0) as usize, data, pos, dir);
                }
            }
            return;
        }
        Combiner::Named => None,
        Combiner::Dup(o) => Some(o),
        Combiner::Contiguous { old, .. }
        | Combiner::Vector { old, .. }
        | Combiner::Hvector { old, .. }
        | Combiner::Indexed { old, .. }
        | Combiner::Hindexed { old, .. }
        | Combiner::IndexedBlock { old, .. }
        | Combiner::HindexedBlock { old, .. }
        | Combiner::Subarray { old, .. }
        | Combiner::Resized { old, .. }
        | Combiner::Darray { old, .. } => Some(old),
    };
    match inner {
        // Every other constructor repeats one type: its signature is that
        // type's, size / old.size times per element.
        Some(old) if old.size > 0 => walk(old, count * (dt.size / old.size), data, pos, dir),
        _ => *pos += dt.size * count,
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
        let mut d = 0x0102_0304i32.to_le_bytes().to_vec();
        convert(&pre(Basic::I32), 1, &mut d, Direction::ToExternal).unwrap();
        assert_eq!(d, [1, 2, 3, 4]);
        let mut d = 1.5f64.to_le_bytes().to_vec();
        convert(&pre(Basic::F64), 1, &mut d, Direction::ToExternal).unwrap();
        assert_eq!(d, 1.5f64.to_be_bytes());
        convert(&pre(Basic::F64), 1, &mut d, Direction::FromExternal).unwrap();
        assert_eq!(f64::from_le_bytes(d.try_into().unwrap()), 1.5);
    }

    #[test]
    fn long_double_goes_to_binary128_and_back() {
        // 1.0 in x87: mantissa 1 << 63, exponent 16383.
        let mut d = [0u8; 16];
        d[..8].copy_from_slice(&(1u64 << 63).to_le_bytes());
        d[8..10].copy_from_slice(&16383u16.to_le_bytes());
        let orig = d;
        convert(&pre(Basic::LongDouble), 1, &mut d, Direction::ToExternal).unwrap();
        // binary128 1.0 = 0x3fff followed by zeros.
        assert_eq!(&d[..2], &[0x3f, 0xff]);
        assert!(d[2..].iter().all(|&x| x == 0));
        convert(&pre(Basic::LongDouble), 1, &mut d, Direction::FromExternal).unwrap();
        assert_eq!(d, orig);
    }

    #[test]
    fn a_struct_is_converted_member_by_member() {
        // { int; double } x 2, packed: 12 bytes each.
        let t =
            Datatype::create_struct(&[1, 1], &[0, 8], &[pre(Basic::I32), pre(Basic::F64)]).unwrap();
        let mut d = Vec::new();
        for (i, x) in [(7i32, 2.0f64), (-1, 0.25)] {
            d.extend(i.to_le_bytes());
            d.extend(x.to_le_bytes());
        }
        convert(&t, 2, &mut d, Direction::ToExternal).unwrap();
        assert_eq!(&d[..4], &7i32.to_be_bytes());
        assert_eq!(&d[4..12], &2.0f64.to_be_bytes());
        assert_eq!(&d[12..16], &(-1i32).to_be_bytes());
        assert_eq!(&d[16..24], &0.25f64.to_be_bytes());
        assert_eq!(
            convert(&t, 3, &mut d, Direction::ToExternal)
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
