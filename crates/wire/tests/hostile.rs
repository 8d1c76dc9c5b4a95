//! Hostile input: every malformed byte string must produce an error, never a
//! panic, an unbounded allocation or a hang.

use std::sync::Arc;

use gridwire_wire::file::{dump_json, FileReader};
use gridwire_wire::value::{read_value, write_value};
use gridwire_wire::*;
use proptest::prelude::*;

fn nested_wire() -> Arc<Format> {
    vectors::nested(Arch::BE32).unwrap()
}

fn sample_record() -> (Arc<Format>, Vec<u8>) {
    let f = nested_wire();
    let bytes = vectors::all()
        .unwrap()
        .into_iter()
        .find(|(n, _)| *n == "nested_be32")
        .unwrap()
        .1;
    // Extract the last record's framed bytes from the file.
    let mut last = None;
    for it in FileReader::new(&bytes).unwrap() {
        if let gridwire_wire::file::Item::Record(r) = it.unwrap() {
            last = Some(record::frame(&f, r.payload).unwrap());
        }
    }
    (f, last.unwrap())
}

fn decode_all_ways(framed: &[u8]) {
    let (f, _) = sample_record();
    let native = vectors::nested(Arch::NATIVE).unwrap();
    if let Ok((rec, _)) = RecordRef::parse(framed) {
        let mut reg = Registry::new();
        reg.register(f.clone());
        let _ = reg.decode(&rec, &native);
        let _ = reg.decode(&rec, &f);
        let _ = read_value(&f, rec.payload);
        let mut sat = Registry::with_policy(OverflowPolicy::Saturate);
        sat.register(f.clone());
        let _ = sat.decode(&rec, &native);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn metadata_parser_survives_garbage(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = meta::parse(&bytes);
        let mut with_magic = b"GWFM\x01".to_vec();
        with_magic.extend_from_slice(&bytes);
        let _ = meta::parse(&with_magic);
    }

    #[test]
    fn metadata_parser_survives_mutations(pos in any::<usize>(), val in any::<u8>(), cut in any::<usize>()) {
        let m = meta::serialize(&nested_wire());
        let mut b = m.clone();
        let i = pos % b.len();
        b[i] = val;
        if let Ok(f) = meta::parse(&b) {
            // Anything accepted is canonical: its id is the hash of these bytes.
            prop_assert_eq!(meta::serialize(&f), b.clone());
        }
        let _ = meta::parse(&m[..cut % m.len()]);
    }

    #[test]
    fn record_decode_survives_mutations(flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8), cut in any::<usize>()) {
        let (_, framed) = sample_record();
        let mut b = framed.clone();
        for (p, v) in flips {
            let i = p % b.len();
            b[i] = v;
        }
        decode_all_ways(&b);
        decode_all_ways(&framed[..cut % framed.len()]);
    }

    #[test]
    fn file_reader_survives_garbage(bytes in proptest::collection::vec(any::<u8>(), 0..256), flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..6)) {
        let mut f = b"GWRECF01".to_vec();
        f.extend_from_slice(&bytes);
        let _ = dump_json(&f);
        let good = vectors::all().unwrap().remove(0).1;
        let mut m = good.clone();
        for (p, v) in flips {
            let i = p % m.len();
            m[i] = v;
        }
        let _ = dump_json(&m);
        for it in FileReader::new(&m).into_iter().flatten() { let _ = it; }
    }

    /// Random integer values through random width changes: saturate never
    /// fails, error policy fails exactly when the value does not fit.
    #[test]
    fn int_conversion_matches_reference(v in any::<i64>(), from in 0usize..8, to in 0usize..8) {
        let tys = [FieldType::I8, FieldType::I16, FieldType::I32, FieldType::I64, FieldType::U8, FieldType::U16, FieldType::U32, FieldType::U64];
        let range = |t: &FieldType| -> (i128, i128) { match t { FieldType::Int { size, signed: true } => (-(1i128 << (8 * *size as u32 - 1)), (1i128 << (8 * *size as u32 - 1)) - 1), FieldType::Int { size, .. } => (0, (1i128 << (8 * *size as u32)) - 1), _ => unreachable!() } };
        let (flo, fhi) = range(&tys[from]);
        let x = (v as i128).clamp(flo, fhi);
        let w = FormatBuilder::with_arch("r", Arch::BE64).field("x", tys[from].clone()).build().unwrap();
        let n = FormatBuilder::new("r").field("x", tys[to].clone()).build().unwrap();
        let val = Value::Struct(vec![("x".into(), if x < 0 { Value::I(x as i64) } else { Value::U(x as u64) })]);
        let p = write_value(&w, &val).unwrap();
        let (tlo, thi) = range(&tys[to]);
        for policy in [OverflowPolicy::Error, OverflowPolicy::Saturate] {
            let plan = Plan::compile(&w, &n, policy).unwrap();
            let mut out = Vec::new();
            let r = plan.run(&p, &mut out);
            let fits = x >= tlo && x <= thi;
            if policy == OverflowPolicy::Error && !fits {
                prop_assert!(r.is_err());
                continue;
            }
            prop_assert!(r.is_ok());
            let got = match read_value(&n, &out).unwrap().get("x").unwrap() { Value::I(i) => *i as i128, Value::U(u) => *u as i128, _ => unreachable!() };
            prop_assert_eq!(got, x.clamp(tlo, thi));
        }
    }
}

#[test]
fn truncated_record_is_an_error() {
    let (_, framed) = sample_record();
    for n in 0..framed.len() {
        assert!(
            RecordRef::parse(&framed[..n]).is_err(),
            "prefix {n} accepted"
        );
    }
}

#[test]
fn lying_var_length_is_an_error() {
    let (f, framed) = sample_record();
    let slots = record::var_slots(&f).unwrap();
    let samples = slots.iter().find(|s| s.path == "samples").unwrap();
    let mut b = framed.clone();
    // BE32: slot = [offset:u32][len:u32]; claim 2^30 elements.
    let at = HEADER_LEN + samples.offset + 4;
    b[at..at + 4].copy_from_slice(&(1u32 << 30).to_be_bytes());
    let (rec, _) = RecordRef::parse(&b).unwrap();
    let mut reg = Registry::new();
    reg.register(f.clone());
    let e = reg
        .decode(&rec, &vectors::nested(Arch::NATIVE).unwrap())
        .unwrap_err();
    assert!(matches!(e, WireError::BadVarField { .. }), "{e:?}");
    // Also on the in-place path (same format).
    assert!(matches!(
        reg.decode(&rec, &f),
        Err(WireError::BadVarField { .. })
    ));
    // An offset pointing back into the fixed part is rejected too.
    let mut c = framed.clone();
    let at = HEADER_LEN + samples.offset;
    c[at..at + 4].copy_from_slice(&0u32.to_be_bytes());
    let (rec, _) = RecordRef::parse(&c).unwrap();
    assert!(matches!(
        reg.decode(&rec, &f),
        Err(WireError::BadVarField { .. })
    ));
}

#[test]
fn lying_header_lengths_are_errors() {
    let (f, framed) = sample_record();
    let mut b = framed.clone();
    b[20..24].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(RecordRef::parse(&b).is_err());
    let mut c = framed.clone();
    c[16..20].copy_from_slice(&(f.size() - 4).to_le_bytes());
    let (rec, _) = RecordRef::parse(&c).unwrap();
    let mut reg = Registry::new();
    reg.register(f.clone());
    assert!(matches!(reg.decode(&rec, &f), Err(WireError::BadHeader(_))));
}

#[test]
fn deep_nesting_is_refused() {
    let mut f = FormatBuilder::new("leaf")
        .field("x", FieldType::I32)
        .build()
        .unwrap();
    let mut err = None;
    for i in 0..40 {
        match FormatBuilder::new(format!("n{i}"))
            .field("inner", FieldType::Nested(f.clone()))
            .build()
        {
            Ok(g) => f = g,
            Err(e) => {
                err = Some(e);
                break;
            }
        }
    }
    assert!(
        matches!(
            err,
            Some(WireError::Limit {
                what: "nesting depth",
                ..
            })
        ),
        "{err:?}"
    );
    // Hand-made metadata nesting deeper than any builder allows.
    let mut m = b"GWFM\x01".to_vec();
    for _ in 0..200 {
        m.extend_from_slice(&[
            1, b'a', 8, 0, 0, 0, 8, 0, 0, 0, 0, 8, 1, 0, 1, b'b', 0, 0, 0, 0, 6,
        ]);
    }
    assert!(
        matches!(meta::parse(&m), Err(WireError::Limit { .. })),
        "{:?}",
        meta::parse(&m)
    );
}

#[test]
fn exponential_metadata_is_refused() {
    // Each level holds the previous twice: 2^depth copies inline.
    let mut f = FormatBuilder::new("l")
        .field("x", FieldType::array(FieldType::I32, 1000))
        .build()
        .unwrap();
    let mut failed = false;
    for i in 0..15 {
        match FormatBuilder::new(format!("d{i}"))
            .field("a", FieldType::Nested(f.clone()))
            .field("b", FieldType::Nested(f.clone()))
            .build()
        {
            Ok(g) => f = g,
            Err(e) => {
                assert!(
                    matches!(
                        e,
                        WireError::Limit {
                            what: "metadata size",
                            ..
                        }
                    ),
                    "{e:?}"
                );
                failed = true;
                break;
            }
        }
    }
    assert!(failed);
}

#[test]
fn overlapping_or_overflowing_fields_in_metadata_are_refused() {
    // Serialise by hand: format "o", size 8, two i32 fields at offsets 0 and 2.
    let mut m = b"GWFM\x01".to_vec();
    m.extend_from_slice(&[1, b'o']);
    m.extend_from_slice(&8u32.to_le_bytes());
    m.extend_from_slice(&4u32.to_le_bytes());
    m.extend_from_slice(&[0, 8]);
    m.extend_from_slice(&2u16.to_le_bytes());
    for (name, off) in [(b'a', 0u32), (b'b', 2)] {
        m.extend_from_slice(&[1, name]);
        m.extend_from_slice(&off.to_le_bytes());
        m.extend_from_slice(&[1, 4, 1]);
    }
    assert!(matches!(
        meta::parse(&m),
        Err(WireError::InvalidFormat { .. })
    ));
    // An array whose size overflows the record.
    let big = FormatBuilder::new("b")
        .field_at("a", FieldType::array(FieldType::F64, u32::MAX), 0)
        .size(64)
        .build();
    assert!(big.is_err());
    // A lying field count with few bytes behind it.
    let mut n = b"GWFM\x01".to_vec();
    n.extend_from_slice(&[1, b'o']);
    n.extend_from_slice(&8u32.to_le_bytes());
    n.extend_from_slice(&4u32.to_le_bytes());
    n.extend_from_slice(&[0, 8]);
    n.extend_from_slice(&4000u16.to_le_bytes());
    assert!(matches!(meta::parse(&n), Err(WireError::Truncated { .. })));
}

#[test]
fn misaligned_payload_cannot_be_viewed() {
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct P {
        x: f64,
    }
    // SAFETY: repr(C), one f64 (valid for all bit patterns), size 8 = format size.
    unsafe impl WireRecord for P {
        fn format() -> Arc<Format> {
            FormatBuilder::new("P")
                .field("x", FieldType::F64)
                .build()
                .unwrap()
        }
    }
    let f = P::format();
    let framed = record::frame(&f, &2.5f64.to_ne_bytes()).unwrap();
    let mut buf = vec![0u8; framed.len() + 8];
    let base = buf.as_ptr() as usize;
    let shift = if base.is_multiple_of(8) { 1 } else { 0 };
    buf[shift..shift + framed.len()].copy_from_slice(&framed);
    let (rec, _) = RecordRef::parse(&buf[shift..shift + framed.len()]).unwrap();
    assert!(matches!(view::<P>(&rec), Err(WireError::NotViewable(_))));
    // Aligned: fine, and the value is right.
    let mut aligned: Vec<u64> = vec![0; framed.len().div_ceil(8)];
    // SAFETY: the Vec<u64>'s storage is initialised, exclusively borrowed, and
    // any byte pattern is a valid u64.
    let bytes = unsafe {
        std::slice::from_raw_parts_mut(aligned.as_mut_ptr() as *mut u8, aligned.len() * 8)
    };
    bytes[..framed.len()].copy_from_slice(&framed);
    let (rec, _) = RecordRef::parse(&bytes[..framed.len()]).unwrap();
    assert_eq!(view::<P>(&rec).unwrap().x, 2.5);
}

/// A format whose array elements share no field with the receiver's must
/// not compile to a loop of empty iterations (10^8 per record here): the
/// plan has no operations, and compiling it is quick.
#[test]
fn arrays_without_common_fields_cost_nothing() {
    use gridwire_wire::*;
    let e = FormatBuilder::new("e")
        .field("a", FieldType::U8)
        .build()
        .unwrap();
    let f = FormatBuilder::new("f")
        .field("b", FieldType::U8)
        .build()
        .unwrap();
    let n = 100_000_000;
    let wire = FormatBuilder::new("r")
        .field("xs", FieldType::array(FieldType::Nested(e), n))
        .build()
        .unwrap();
    let native = FormatBuilder::new("r")
        .field("xs", FieldType::array(FieldType::Nested(f), n))
        .build()
        .unwrap();
    let t = std::time::Instant::now();
    let p = Plan::compile(&wire, &native, OverflowPolicy::Error).unwrap();
    assert_eq!(p.op_count(), 0);
    assert!(t.elapsed().as_secs() < 5, "{:?}", t.elapsed());
}

/// Found by `make fuzz` (record_decode, cargo-afl): a field whose array size
/// saturates to u64::MAX at a non-zero offset made `offset + size` overflow
/// in `Format::finish` (a panic in debug builds, a wrapped bound in release).
#[test]
fn field_end_beyond_u64_is_an_error_not_an_overflow() {
    let crash = include_bytes!("../../../fuzz/corpus/record_decode/crash_field_end_overflow");
    assert!(dump_json(crash).is_err());
    // The same through the builder: offset 8 and an element count whose
    // size saturates.
    let big = FieldType::array(FieldType::array(FieldType::U64, u32::MAX), u32::MAX);
    let r = FormatBuilder::new("r")
        .field("a", FieldType::U64)
        .field("b", big)
        .build();
    assert!(r.is_err());
}
