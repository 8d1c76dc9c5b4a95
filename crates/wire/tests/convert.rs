//! Format model, ids, metadata, encode/decode and conversion plans.

use std::sync::Arc;

use gridwire_wire::value::{self, read_value, write_value};
use gridwire_wire::*;

fn mixed(arch: Arch) -> Arc<Format> {
    FormatBuilder::with_arch("mixed", arch)
        .c_field("i", CType::Int)
        .c_field("l", CType::Long)
        .c_field("d", CType::Double)
        .c_field("c", CType::Char)
        .c_array("a", CType::Double, 3)
        .c_field("s", CType::Short)
        .build()
        .unwrap()
}

fn mixed_value() -> Value {
    Value::Struct(vec![
        ("i".into(), Value::I(-7)),
        ("l".into(), Value::I(-(1 << 30) - 7)),
        ("d".into(), Value::F(2.5)),
        ("c".into(), Value::Char(b'x')),
        (
            "a".into(),
            Value::Array(vec![Value::F(1.0), Value::F(-2.0), Value::F(0.125)]),
        ),
        ("s".into(), Value::I(-300)),
    ])
}

fn decode_via(
    wire: &Arc<Format>,
    native: &Arc<Format>,
    payload: &[u8],
    policy: OverflowPolicy,
) -> Result<Vec<u8>> {
    let framed = record::frame(wire, payload)?;
    let (rec, _) = RecordRef::parse(&framed)?;
    let mut reg = Registry::with_policy(policy);
    reg.learn(&meta::serialize(wire))?;
    Ok(reg.decode(&rec, native)?.bytes.into_owned())
}

#[test]
fn layout_follows_arch_rules() {
    let n = mixed(Arch::X86_64);
    assert_eq!(n.field("l").unwrap().offset, 8);
    assert_eq!(n.field("d").unwrap().offset, 16);
    assert_eq!(n.size(), 64);
    let b = mixed(Arch::BE32);
    assert_eq!(b.field("l").unwrap().offset, 4);
    assert_eq!(b.field("d").unwrap().offset, 8);
    assert_eq!(b.field("a").unwrap().offset, 20);
    assert_eq!(b.size(), 48);
    assert_eq!(b.byte_order(), ByteOrder::Big);
}

#[test]
fn ids_are_content_hashes() {
    let a = mixed(Arch::X86_64);
    let b = mixed(Arch::X86_64);
    assert_eq!(a.id(), b.id());
    assert_ne!(
        a.id(),
        mixed(Arch::BE64).id(),
        "byte order is part of the id"
    );
    assert_ne!(a.id(), mixed(Arch::I386).id());
    // Declaration order does not matter, layout does.
    let x = FormatBuilder::new("p")
        .field_at("a", FieldType::I32, 0)
        .field_at("b", FieldType::I32, 4)
        .build()
        .unwrap();
    let y = FormatBuilder::new("p")
        .field_at("b", FieldType::I32, 4)
        .field_at("a", FieldType::I32, 0)
        .build()
        .unwrap();
    assert_eq!(x.id(), y.id());
    let z = FormatBuilder::new("p")
        .field_at("a", FieldType::I32, 4)
        .field_at("b", FieldType::I32, 0)
        .build()
        .unwrap();
    assert_ne!(x.id(), z.id());
}

#[test]
fn metadata_round_trips_and_is_canonical() {
    let inner = mixed(Arch::BE32);
    let f = FormatBuilder::with_arch("outer", Arch::BE32)
        .field("n", FieldType::U16)
        .field("inner", FieldType::Nested(inner.clone()))
        .field("many", FieldType::array(FieldType::Nested(inner), 2))
        .field("name", FieldType::VarString)
        .field("xs", FieldType::var_array(FieldType::F32))
        .build()
        .unwrap();
    let m = meta::serialize(&f);
    let g = meta::parse(&m).unwrap();
    assert_eq!(g.id(), f.id());
    assert_eq!(meta::serialize(&g), m);
    let mut bad = m.clone();
    bad.push(0);
    assert_eq!(meta::parse(&bad).unwrap_err(), WireError::NotCanonical);
}

#[test]
fn invalid_formats_are_rejected() {
    let overlap = FormatBuilder::new("o")
        .field_at("a", FieldType::I32, 0)
        .field_at("b", FieldType::I32, 2)
        .build();
    assert!(
        matches!(overlap, Err(WireError::InvalidFormat { .. })),
        "{overlap:?}"
    );
    let past_end = FormatBuilder::new("o")
        .field_at("a", FieldType::I64, 0)
        .size(4)
        .build();
    assert!(matches!(past_end, Err(WireError::InvalidFormat { .. })));
    let dup = FormatBuilder::new("o")
        .field("a", FieldType::I32)
        .field("a", FieldType::I32)
        .build();
    assert!(matches!(dup, Err(WireError::InvalidFormat { .. })));
    let odd = FormatBuilder::new("o")
        .field(
            "a",
            FieldType::Int {
                size: 3,
                signed: true,
            },
        )
        .build();
    assert!(matches!(odd, Err(WireError::InvalidFormat { .. })));
}

#[test]
fn same_layout_is_borrowed_in_place() {
    let f = mixed(Arch::NATIVE);
    let payload = write_value(&f, &mixed_value()).unwrap();
    let mut enc = Encoder::new(f.clone()).unwrap();
    let framed = enc.encode_to_vec(&payload, &[]).unwrap();
    let (rec, n) = RecordRef::parse(&framed).unwrap();
    assert_eq!(n, framed.len());
    let mut reg = Registry::new();
    reg.register(f.clone());
    let d = reg.decode(&rec, &f).unwrap();
    assert!(d.is_borrowed());
    assert_eq!(d.bytes.as_ptr(), framed[HEADER_LEN..].as_ptr(), "no copy");
}

#[test]
fn gather_encode_borrows_fixed_part_and_var_parts() {
    let f = FormatBuilder::new("v")
        .field("n", FieldType::I32)
        .field("xs", FieldType::var_array(FieldType::F64))
        .field("s", FieldType::VarString)
        .build()
        .unwrap();
    let fixed = vec![0u8; f.size() as usize];
    let xs: Vec<u8> = [1.0f64, 2.0, 3.0]
        .iter()
        .flat_map(|x| x.to_ne_bytes())
        .collect();
    let s = b"hello".to_vec();
    let mut enc = Encoder::new(f.clone()).unwrap();
    let iov = enc.encode(&fixed, &[&xs, &s]).unwrap();
    // header, fixed copy (slots rewritten), xs (aligned, no pad needed), s
    assert!(
        iov.iter().any(|v| v.as_ptr() == xs.as_ptr()),
        "var data is gathered, not copied"
    );
    let bytes = enc.encode_to_vec(&fixed, &[&xs, &s]).unwrap();
    let (rec, _) = RecordRef::parse(&bytes).unwrap();
    let v = read_value(&f, rec.payload).unwrap();
    assert_eq!(
        v.get("xs"),
        Some(&Value::Array(vec![
            Value::F(1.0),
            Value::F(2.0),
            Value::F(3.0)
        ]))
    );
    assert_eq!(v.get("s"), Some(&Value::Str("hello".into())));
    // No-var formats borrow the fixed part itself.
    let g = mixed(Arch::NATIVE);
    let p = vec![0u8; g.size() as usize];
    let mut e2 = Encoder::new(g).unwrap();
    let iov = e2.encode(&p, &[]).unwrap();
    assert_eq!(iov.len(), 2);
    assert_eq!(iov[1].as_ptr(), p.as_ptr());
}

#[test]
fn foreign_writers_convert_to_native() {
    let native = mixed(Arch::NATIVE);
    for arch in [Arch::BE32, Arch::BE64, Arch::I386] {
        let wire = mixed(arch);
        let payload = write_value(&wire, &mixed_value()).unwrap();
        let out = decode_via(&wire, &native, &payload, OverflowPolicy::Error).unwrap();
        assert_eq!(
            read_value(&native, &out).unwrap(),
            read_value(&wire, &payload).unwrap(),
            "{}",
            arch.name
        );
        assert_eq!(read_value(&native, &out).unwrap(), mixed_value());
    }
}

#[test]
fn narrowing_follows_policy() {
    let wire = FormatBuilder::new("w")
        .field("x", FieldType::I64)
        .field("y", FieldType::F64)
        .build()
        .unwrap();
    let native = FormatBuilder::new("n")
        .field("x", FieldType::I16)
        .field("y", FieldType::F32)
        .build()
        .unwrap();
    let big = write_value(
        &wire,
        &Value::Struct(vec![
            ("x".into(), Value::I(100_000)),
            ("y".into(), Value::F(0.1)),
        ]),
    )
    .unwrap();
    let e = decode_via(&wire, &native, &big, OverflowPolicy::Error).unwrap_err();
    assert!(
        matches!(e, WireError::Overflow { ref field, .. } if field == "x"),
        "{e:?}"
    );
    let out = decode_via(&wire, &native, &big, OverflowPolicy::Saturate).unwrap();
    let v = read_value(&native, &out).unwrap();
    assert_eq!(v.get("x"), Some(&Value::I(i16::MAX as i64)));
    assert_eq!(v.get("y"), Some(&Value::F(0.1f32 as f64)));
    let neg = write_value(&wire, &Value::Struct(vec![("x".into(), Value::I(-5))])).unwrap();
    let unsigned = FormatBuilder::new("u")
        .field("x", FieldType::U32)
        .build()
        .unwrap();
    assert!(decode_via(&wire, &unsigned, &neg, OverflowPolicy::Error).is_err());
    let out = decode_via(&wire, &unsigned, &neg, OverflowPolicy::Saturate).unwrap();
    assert_eq!(
        read_value(&unsigned, &out).unwrap().get("x"),
        Some(&Value::U(0))
    );
}

#[test]
fn missing_fields_get_defaults_and_extra_fields_are_ignored() {
    let wire = FormatBuilder::new("w")
        .field("extra", FieldType::F64)
        .field("a", FieldType::I32)
        .build()
        .unwrap();
    let native = FormatBuilder::new("n")
        .field("a", FieldType::I64)
        .field("b", FieldType::I32)
        .default(42.0)
        .field("c", FieldType::F64)
        .default(1.5)
        .field("z", FieldType::I32)
        .build()
        .unwrap();
    let p = write_value(
        &wire,
        &Value::Struct(vec![
            ("extra".into(), Value::F(9.0)),
            ("a".into(), Value::I(-3)),
        ]),
    )
    .unwrap();
    let out = decode_via(&wire, &native, &p, OverflowPolicy::Error).unwrap();
    let v = read_value(&native, &out).unwrap();
    assert_eq!(
        v,
        Value::Struct(vec![
            ("a".into(), Value::I(-3)),
            ("b".into(), Value::I(42)),
            ("c".into(), Value::F(1.5)),
            ("z".into(), Value::I(0))
        ])
    );
}

#[test]
fn reordered_fields_nested_and_arrays_convert_by_name() {
    let pt_w = FormatBuilder::new("pt")
        .field("x", FieldType::F64)
        .field("y", FieldType::F64)
        .field("tag", FieldType::I32)
        .build()
        .unwrap();
    let pt_n = FormatBuilder::new("pt")
        .field("tag", FieldType::I64)
        .field("y", FieldType::F64)
        .field("x", FieldType::F64)
        .build()
        .unwrap();
    let wire = FormatBuilder::with_arch("poly", Arch::BE64)
        .field("n", FieldType::I32)
        .field("pts", FieldType::array(FieldType::Nested(pt_w.clone()), 3))
        .build()
        .unwrap();
    // pt_w for BE64 needs its own arch; rebuild so nested byte order matches the writer.
    let pt_wb = FormatBuilder::with_arch("pt", Arch::BE64)
        .field("x", FieldType::F64)
        .field("y", FieldType::F64)
        .field("tag", FieldType::I32)
        .build()
        .unwrap();
    let wire_b = FormatBuilder::with_arch("poly", Arch::BE64)
        .field("n", FieldType::I32)
        .field("pts", FieldType::array(FieldType::Nested(pt_wb), 3))
        .build()
        .unwrap();
    let native = FormatBuilder::new("poly")
        .field("pts", FieldType::array(FieldType::Nested(pt_n), 2))
        .field("n", FieldType::I16)
        .build()
        .unwrap();
    let pts = |k: i64| {
        Value::Struct(vec![
            ("x".into(), Value::F(k as f64)),
            ("y".into(), Value::F(-(k as f64))),
            ("tag".into(), Value::I(k * 10)),
        ])
    };
    let v = Value::Struct(vec![
        ("n".into(), Value::I(3)),
        ("pts".into(), Value::Array(vec![pts(1), pts(2), pts(3)])),
    ]);
    for w in [&wire, &wire_b] {
        let p = write_value(w, &v).unwrap();
        let out = decode_via(w, &native, &p, OverflowPolicy::Error).unwrap();
        let got = read_value(&native, &out).unwrap();
        let want_pt = |k: i64| {
            Value::Struct(vec![
                ("tag".into(), Value::I(k * 10)),
                ("y".into(), Value::F(-(k as f64))),
                ("x".into(), Value::F(k as f64)),
            ])
        };
        assert_eq!(
            got,
            Value::Struct(vec![
                ("pts".into(), Value::Array(vec![want_pt(1), want_pt(2)])),
                ("n".into(), Value::I(3))
            ])
        );
    }
}

#[test]
fn variable_fields_convert() {
    let wire = FormatBuilder::with_arch("v", Arch::BE32)
        .field("s", FieldType::VarString)
        .field("xs", FieldType::var_array(FieldType::I32))
        .build()
        .unwrap();
    let native = FormatBuilder::new("v")
        .field("xs", FieldType::var_array(FieldType::I64))
        .field("s", FieldType::VarString)
        .build()
        .unwrap();
    let v = Value::Struct(vec![
        ("s".into(), Value::Str("héllo".into())),
        (
            "xs".into(),
            Value::Array(vec![Value::I(1), Value::I(-2), Value::I(3)]),
        ),
    ]);
    let p = write_value(&wire, &v).unwrap();
    let framed = record::frame(&wire, &p).unwrap();
    let (rec, _) = RecordRef::parse(&framed).unwrap();
    let mut reg = Registry::new();
    reg.register(wire.clone());
    let d = reg.decode(&rec, &native).unwrap();
    assert_eq!(d.var_bytes("s").unwrap(), "héllo".as_bytes());
    let got = read_value(&native, &d.bytes).unwrap();
    assert_eq!(got.get("xs"), v.get("xs"));
    assert_eq!(got.get("s"), v.get("s"));
}

#[test]
fn moves_are_merged() {
    // Same layout except one trailing field's type: everything before it is one copy.
    let a = FormatBuilder::new("m")
        .field("a", FieldType::I32)
        .field("b", FieldType::F64)
        .field("c", FieldType::array(FieldType::I16, 5))
        .field("d", FieldType::I32)
        .build()
        .unwrap();
    let b = FormatBuilder::new("m")
        .field("a", FieldType::I32)
        .field("b", FieldType::F64)
        .field("c", FieldType::array(FieldType::I16, 5))
        .field("d", FieldType::I64)
        .build()
        .unwrap();
    let p = Plan::compile(&a, &b, OverflowPolicy::Error).unwrap();
    assert_eq!(p.op_count(), 2, "{p:?}");
    // Identical layouts under another name collapse to one move.
    let c = FormatBuilder::new("other")
        .field("a", FieldType::I32)
        .field("b", FieldType::F64)
        .field("c", FieldType::array(FieldType::I16, 5))
        .field("d", FieldType::I32)
        .build()
        .unwrap();
    assert!(Plan::compile(&a, &c, OverflowPolicy::Error)
        .unwrap()
        .is_single_copy());
    // All-double foreign record: one merged swap.
    let be = FormatBuilder::with_arch("s", Arch::BE64)
        .field("x", FieldType::F64)
        .field("y", FieldType::F64)
        .field("z", FieldType::array(FieldType::F64, 8))
        .build()
        .unwrap();
    let le = FormatBuilder::with_arch("s", Arch::X86_64)
        .field("x", FieldType::F64)
        .field("y", FieldType::F64)
        .field("z", FieldType::array(FieldType::F64, 8))
        .build()
        .unwrap();
    assert_eq!(
        Plan::compile(&be, &le, OverflowPolicy::Error)
            .unwrap()
            .op_count(),
        1
    );
}

#[test]
fn incompatible_types_are_an_error() {
    let a = FormatBuilder::new("m")
        .field("a", FieldType::F64)
        .build()
        .unwrap();
    let b = FormatBuilder::new("m")
        .field("a", FieldType::VarString)
        .build()
        .unwrap();
    assert!(matches!(
        Plan::compile(&a, &b, OverflowPolicy::Error),
        Err(WireError::TypeMismatch { .. })
    ));
}

#[test]
fn unknown_format_is_reported() {
    let f = mixed(Arch::NATIVE);
    let framed = record::frame(&f, &vec![0u8; f.size() as usize]).unwrap();
    let (rec, _) = RecordRef::parse(&framed).unwrap();
    let mut reg = Registry::new();
    assert_eq!(
        reg.decode(&rec, &f).unwrap_err(),
        WireError::UnknownFormat(f.id())
    );
}

/// `decode_into` reuses the caller's buffer and only clears the bytes a plan
/// does not write: a field missing from the second writer (and padding) must
/// read as zero even though the first decode left a value there.
#[test]
fn reused_output_buffer_has_missing_fields_zeroed() {
    let native = FormatBuilder::new("n")
        .field("a", FieldType::I32)
        .field("b", FieldType::F64)
        .field("c", FieldType::I16)
        .build()
        .unwrap();
    let full = FormatBuilder::with_arch("n", Arch::BE64)
        .field("c", FieldType::I16)
        .field("b", FieldType::F64)
        .field("a", FieldType::I32)
        .build()
        .unwrap();
    let partial = FormatBuilder::with_arch("n", Arch::BE64)
        .field("b", FieldType::F64)
        .build()
        .unwrap();
    let mut reg = Registry::new();
    reg.register(full.clone());
    reg.register(partial.clone());
    let mut out = vec![0xAAu8; 64];
    for _ in 0..2 {
        let v = Value::Struct(vec![
            ("a".into(), Value::I(-5)),
            ("b".into(), Value::F(2.5)),
            ("c".into(), Value::I(7)),
        ]);
        let f = record::frame(&full, &write_value(&full, &v).unwrap()).unwrap();
        let (r, _) = RecordRef::parse(&f).unwrap();
        reg.decode_into(&r, &native, &mut out).unwrap();
        assert_eq!(read_value(&native, &out).unwrap(), v);
        let f = record::frame(&partial, &write_value(&partial, &v).unwrap()).unwrap();
        let (r, _) = RecordRef::parse(&f).unwrap();
        reg.decode_into(&r, &native, &mut out).unwrap();
        assert_eq!(out.len(), native.size() as usize);
        assert_eq!(
            read_value(&native, &out).unwrap(),
            Value::Struct(vec![
                ("a".into(), Value::I(0)),
                ("b".into(), Value::F(2.5)),
                ("c".into(), Value::I(0)),
            ])
        );
        // padding between a (4 bytes) and b (8-aligned) is zero too
        assert_eq!(&out[4..8], &[0, 0, 0, 0]);
    }
}

/// Both engines must give identical bytes for every plan shape the vectors
/// and the benchmark layouts produce (byte swaps, widening, f32<->f64,
/// reordering, nested arrays, defaults). Without the `jit` feature this
/// checks that forcing the JIT is refused and the interpreter still runs.
#[test]
fn jit_and_interpreter_agree() {
    use gridwire_wire::vectors;
    let mut cases: Vec<(Arc<Format>, Arc<Format>)> = Vec::new();
    for a in [Arch::X86_64, Arch::BE32, Arch::I386, Arch::BE64] {
        cases.push((
            vectors::mixed(a).unwrap(),
            vectors::mixed(Arch::NATIVE).unwrap(),
        ));
        cases.push((
            vectors::nested(a).unwrap(),
            vectors::nested(Arch::NATIVE).unwrap(),
        ));
        cases.push((
            vectors::mixed(Arch::NATIVE).unwrap(),
            vectors::mixed(a).unwrap(),
        ));
    }
    // widening ints, f32 -> f64, a default, a long array (loops in the JIT)
    let w = FormatBuilder::with_arch("w", Arch::BE32)
        .field("a", FieldType::I16)
        .field("u", FieldType::U32)
        .field("f", FieldType::F32)
        .field("xs", FieldType::array(FieldType::F64, 300))
        .field("ys", FieldType::array(FieldType::I32, 200))
        .field("k", FieldType::array(FieldType::I32, 3))
        .field("q", FieldType::U16)
        .field("big", FieldType::U64)
        .build()
        .unwrap();
    let n = FormatBuilder::new("w")
        .field("k", FieldType::array(FieldType::F64, 3))
        .field("q", FieldType::F32)
        .field("big", FieldType::F64)
        .field("ys", FieldType::array(FieldType::I64, 200))
        .field("xs", FieldType::array(FieldType::F32, 300))
        .field("f", FieldType::F64)
        .field("u", FieldType::U64)
        .field("a", FieldType::I64)
        .field("d", FieldType::I32)
        .default(9.0)
        .build()
        .unwrap();
    cases.push((w, n));
    let mut rng = 0x2545F4914F6CDD1Du64;
    let mut jitted = 0;
    let total = cases.len();
    for (wire, native) in cases {
        let mut payload = vec![0u8; wire.size() as usize];
        for b in payload.iter_mut() {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            *b = rng as u8;
        }
        // random bytes in var slots would be refused by both; zero them
        if wire.has_var() {
            for s in record::var_slots(&wire).unwrap() {
                let n = 2 * s.pointer_size as usize;
                payload[s.offset..s.offset + n].fill(0);
            }
        }
        let mut p = Plan::compile(&wire, &native, OverflowPolicy::Saturate).unwrap();
        assert!(p.set_backend(Backend::Interpreter));
        let mut a = Vec::new();
        let ra = p.run(&payload, &mut a);
        let can = p.set_backend(Backend::Jit);
        assert_eq!(can, cfg!(feature = "jit") && p.has_jit());
        if can {
            jitted += 1;
            let mut b = vec![0xEE; 3];
            let rb = p.run(&payload, &mut b);
            assert_eq!(ra, rb, "{} -> {}", wire.name(), native.name());
            // NaN payloads may differ in quiet bits after f64->f32; compare
            // as values where the bytes differ.
            assert_eq!(a.len(), b.len());
            if a != b {
                let va = value::read_value(&native, &a).unwrap();
                let vb = value::read_value(&native, &b).unwrap();
                assert_eq!(format!("{va:?}"), format!("{vb:?}"));
            }
        }
    }
    // Only narrowing plans (native -> 4-byte long) stay interpreted.
    if cfg!(feature = "jit") {
        assert!(jitted >= total - 3, "{jitted} of {total} compiled");
    }
}

/// Integers and floats convert into each other: exactly where possible,
/// rounded int->float, truncated float->int; NaN and out-of-range values
/// follow the overflow policy.
#[test]
fn int_float_conversion() {
    let wire = FormatBuilder::with_arch("r", Arch::BE32)
        .field("a", FieldType::I32)
        .field("b", FieldType::U64)
        .field("f", FieldType::F64)
        .field("g", FieldType::F64)
        .field("h", FieldType::F32)
        .build()
        .unwrap();
    let native = FormatBuilder::new("r")
        .field("a", FieldType::F64)
        .field("b", FieldType::F32)
        .field("f", FieldType::I32)
        .field("g", FieldType::I32)
        .field("h", FieldType::I16)
        .build()
        .unwrap();
    let v = |g: f64, h: f64| {
        Value::Struct(vec![
            ("a".into(), Value::I(-7)),
            ("b".into(), Value::U(1 << 40)),
            ("f".into(), Value::F(-3.9)),
            ("g".into(), Value::F(g)),
            ("h".into(), Value::F(h)),
        ])
    };
    let ok = write_value(&wire, &v(2e9, 12.5)).unwrap();
    let out = decode_via(&wire, &native, &ok, OverflowPolicy::Error).unwrap();
    assert_eq!(
        read_value(&native, &out).unwrap(),
        Value::Struct(vec![
            ("a".into(), Value::F(-7.0)),
            ("b".into(), Value::F((1u64 << 40) as f64)),
            ("f".into(), Value::I(-3)),
            ("g".into(), Value::I(2_000_000_000)),
            ("h".into(), Value::I(12)),
        ])
    );
    let big = write_value(&wire, &v(-1e10, 1.0)).unwrap();
    let e = decode_via(&wire, &native, &big, OverflowPolicy::Error).unwrap_err();
    assert!(
        matches!(e, WireError::Overflow { ref field, .. } if field == "g"),
        "{e}"
    );
    let nan = write_value(&wire, &v(1.0, f64::NAN)).unwrap();
    let e = decode_via(&wire, &native, &nan, OverflowPolicy::Error).unwrap_err();
    assert!(
        matches!(e, WireError::Overflow { ref field, .. } if field == "h"),
        "{e}"
    );
    let out = decode_via(&wire, &native, &big, OverflowPolicy::Saturate).unwrap();
    assert_eq!(
        read_value(&native, &out).unwrap().get("g"),
        Some(&Value::I(i32::MIN as i64))
    );
    let out = decode_via(&wire, &native, &nan, OverflowPolicy::Saturate).unwrap();
    assert_eq!(
        read_value(&native, &out).unwrap().get("h"),
        Some(&Value::I(0))
    );
    // char/bool stay byte-like: no float conversion for them
    let c = FormatBuilder::new("c")
        .field("x", FieldType::Char)
        .build()
        .unwrap();
    let f = FormatBuilder::new("c")
        .field("x", FieldType::F64)
        .build()
        .unwrap();
    assert!(matches!(
        Plan::compile(&c, &f, OverflowPolicy::Error),
        Err(WireError::TypeMismatch { .. })
    ));
}

/// Variable-length fields inside elements of a fixed array of structs
/// convert (the elements are compiled one by one, slots by absolute offset).
#[test]
fn var_fields_inside_arrays_of_structs_convert() {
    let item_w = FormatBuilder::with_arch("item", Arch::BE32)
        .field("tag", FieldType::I16)
        .field("name", FieldType::VarString)
        .field("xs", FieldType::var_array(FieldType::F64))
        .build()
        .unwrap();
    let wire = FormatBuilder::with_arch("rec", Arch::BE32)
        .field("n", FieldType::U32)
        .field("items", FieldType::array(FieldType::Nested(item_w), 3))
        .build()
        .unwrap();
    let item_n = FormatBuilder::new("item")
        .field("xs", FieldType::var_array(FieldType::F32))
        .field("name", FieldType::VarString)
        .field("tag", FieldType::I64)
        .build()
        .unwrap();
    let native = FormatBuilder::new("rec")
        .field("items", FieldType::array(FieldType::Nested(item_n), 2))
        .field("n", FieldType::U64)
        .build()
        .unwrap();
    let item = |k: i64| {
        Value::Struct(vec![
            ("tag".into(), Value::I(-k)),
            ("name".into(), Value::Str(format!("item {k}"))),
            (
                "xs".into(),
                Value::Array((0..k).map(|i| Value::F(i as f64 + 0.5)).collect()),
            ),
        ])
    };
    let v = Value::Struct(vec![
        ("n".into(), Value::U(3)),
        ("items".into(), Value::Array((1..=3).map(item).collect())),
    ]);
    let p = write_value(&wire, &v).unwrap();
    let out = decode_via(&wire, &native, &p, OverflowPolicy::Error).unwrap();
    let got = read_value(&native, &out).unwrap();
    let want_item = |k: i64| {
        Value::Struct(vec![
            (
                "xs".into(),
                Value::Array((0..k).map(|i| Value::F(i as f64 + 0.5)).collect()),
            ),
            ("name".into(), Value::Str(format!("item {k}"))),
            ("tag".into(), Value::I(-k)),
        ])
    };
    assert_eq!(
        got,
        Value::Struct(vec![
            (
                "items".into(),
                Value::Array(vec![want_item(1), want_item(2)])
            ),
            ("n".into(), Value::U(3)),
        ])
    );
}

/// Random pairs of layouts (reordered, dropped and extra fields, widened
/// integers, f32<->f64, int->float, nested structs and arrays of them, four
/// writer ABIs) converted by the plan — both engines — must give what the
/// independent value layer gives (`read_value` of the writer's bytes,
/// `write_value` into the receiver's layout), and an output buffer reused
/// with stale bytes in it must come out identical to a fresh one (the
/// lowered program zeroes every gap, widened moves included).
#[test]
fn random_layouts_match_the_value_layer() {
    let mut rng = 0x9E3779B97F4A7C15u64;
    let mut next = move |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    };
    let ints = [1u8, 2, 4, 8];
    // A receiver scalar type and a writer type that converts into it without
    // failing; then a value that fits the writer's type.
    fn int(size: u8, signed: bool) -> FieldType {
        FieldType::Int { size, signed }
    }
    let archs = [Arch::X86_64, Arch::I386, Arch::BE32, Arch::BE64];
    let mut jitted = 0;
    let mut permuted = 0;
    for case in 0..400 {
        let arch = archs[next(4) as usize];
        let mut nat = Vec::new(); // (name, native type, wire type)
        let nfields = 1 + next(9) as usize;
        for i in 0..nfields {
            let scalar = |next: &mut dyn FnMut(u64) -> u64| -> (FieldType, FieldType) {
                match next(3) {
                    0 | 1 => {
                        let z = ints[next(4) as usize];
                        let signed = next(2) == 0;
                        let wz = ints[next(4) as usize].min(z);
                        let ws = if wz == z {
                            signed
                        } else {
                            signed && next(2) == 0
                        };
                        (int(z, signed), int(wz, ws))
                    }
                    _ => {
                        let z = if next(2) == 0 { 4 } else { 8 };
                        let w = match next(3) {
                            0 => FieldType::Float { size: 4 },
                            1 => FieldType::Float { size: 8 },
                            _ => int(ints[next(3) as usize], next(2) == 0),
                        };
                        (FieldType::Float { size: z }, w)
                    }
                }
            };
            let (n, w) = match next(7) {
                6 => {
                    // arrays of arrays, rows of other lengths
                    let (n, w) = scalar(&mut next);
                    let (c, r) = (1 + next(5) as u32, 1 + next(4) as u32);
                    let wc = 1 + next(c as u64) as u32;
                    (
                        FieldType::array(FieldType::array(n, c), r),
                        FieldType::array(FieldType::array(w, wc), r),
                    )
                }
                0 => {
                    let (n, w) = scalar(&mut next);
                    let c = 1 + next(20) as u32;
                    let wc = 1 + next(c as u64) as u32;
                    (FieldType::array(n, c), FieldType::array(w, wc))
                }
                1 | 2 => {
                    let k = 1 + next(4) as usize;
                    let mut nb = FormatBuilder::new(format!("in{i}"));
                    let mut wb = FormatBuilder::with_arch(format!("in{i}"), arch);
                    let mut names: Vec<usize> = (0..k).collect();
                    for j in 0..k {
                        let (n, w) = scalar(&mut next);
                        nb = nb.field(format!("f{j}"), n);
                        names.swap(j, next(k as u64) as usize);
                        let _ = w;
                    }
                    // writer: same names in another order, other types
                    for (pos, &j) in names.iter().enumerate() {
                        if pos > 0 && next(4) == 0 {
                            continue; // missing in the writer's element: zero
                        }
                        let (_, w) = scalar(&mut next);
                        let nf = nb.clone().build().unwrap();
                        let nt = &nf.field(&format!("f{j}")).unwrap().ty;
                        // keep the writer's type convertible into the receiver's
                        let w = match (nt, &w) {
                            (FieldType::Int { size, signed }, FieldType::Int { .. }) => {
                                int(*size, *signed)
                            }
                            (FieldType::Int { size, signed }, _) => int(*size, *signed),
                            _ => w,
                        };
                        wb = wb.field(format!("f{j}"), w);
                    }
                    let (nn, wn) = (
                        FieldType::Nested(nb.build().unwrap()),
                        FieldType::Nested(wb.build().unwrap()),
                    );
                    if next(2) == 0 {
                        let c = 1 + next(12) as u32;
                        let wc = 1 + next(c as u64) as u32;
                        (FieldType::array(nn, c), FieldType::array(wn, wc))
                    } else {
                        (nn, wn)
                    }
                }
                _ => scalar(&mut next),
            };
            nat.push((format!("x{i}"), n, w));
        }
        let mut nb = FormatBuilder::new("r");
        for (name, n, _) in &nat {
            nb = nb.field(name.clone(), n.clone());
        }
        let native = nb.build().unwrap();
        let mut order: Vec<usize> = (0..nat.len()).collect();
        for j in 0..order.len() {
            let k = next(order.len() as u64) as usize;
            order.swap(j, k);
        }
        let mut wb = FormatBuilder::with_arch("r", arch);
        if next(3) == 0 {
            wb = wb.field("extra", FieldType::F64);
        }
        for &j in &order {
            if next(5) != 0 {
                wb = wb.field(nat[j].0.clone(), nat[j].2.clone());
            }
        }
        let Ok(wire) = wb.build() else { continue };
        // a value for the writer: small numbers every type holds exactly
        fn val(t: &FieldType, next: &mut dyn FnMut(u64) -> u64) -> Value {
            match t {
                FieldType::Int { size, signed: true } => {
                    let m = 1i64 << (8 * *size as u32 - 1).min(40);
                    Value::I(next(2 * m as u64) as i64 - m)
                }
                FieldType::Int { size, .. } => Value::U(next(1u64 << (8 * *size as u32).min(40))),
                FieldType::Float { .. } => Value::F(next(4000) as f64 / 8.0 - 250.0),
                FieldType::Array { elem, count } => {
                    Value::Array((0..*count).map(|_| val(elem, next)).collect())
                }
                FieldType::Nested(f) => Value::Struct(
                    f.fields()
                        .iter()
                        .map(|fl| (fl.name.clone(), val(&fl.ty, next)))
                        .collect(),
                ),
                _ => unreachable!(),
            }
        }
        let v = val(&FieldType::Nested(wire.clone()), &mut next);
        let payload = write_value(&wire, &v).unwrap();
        let want = read_value(
            &native,
            &write_value(&native, &read_value(&wire, &payload).unwrap()).unwrap(),
        )
        .unwrap();
        // the interpreter with moves, with byte permutes (where the CPU
        // has them), and the JIT
        for (b, perm) in [
            (Backend::Interpreter, false),
            (Backend::Interpreter, true),
            (Backend::Jit, false),
        ] {
            let Ok(mut p) = Plan::compile(&wire, &native, OverflowPolicy::Error) else {
                panic!("case {case}: no plan for {wire:?} -> {native:?}");
            };
            if !p.set_backend(b) || !p.set_permutes(perm) {
                continue;
            }
            if perm {
                permuted += 1;
            }
            if b == Backend::Jit {
                jitted += 1;
            }
            let mut fresh = Vec::new();
            p.run(&payload, &mut fresh).unwrap();
            let mut stale = vec![0xA5u8; native.size() as usize + 7];
            p.run(&payload, &mut stale).unwrap();
            assert_eq!(fresh, stale, "case {case} {b:?}: stale bytes survive");
            assert_eq!(
                read_value(&native, &fresh).unwrap(),
                want,
                "case {case} {b:?}: {wire:?} -> {native:?}"
            );
        }
    }
    if cfg!(feature = "jit") {
        assert!(jitted > 300, "{jitted} compiled");
    }
    eprintln!("{permuted} plans run with byte permutes");
}

/// Long byte-swapped runs go through the SSSE3 shuffles in 64-byte rounds
/// and finish element by element: every width, lengths around the round
/// boundaries, values from the independent value layer, each engine.
#[test]
fn long_byte_swapped_runs_convert() {
    for (ty, w) in [(CType::Short, 2u64), (CType::Int, 4), (CType::Double, 8)] {
        for n in [1u32, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 257] {
            let build = |arch: Arch| {
                FormatBuilder::with_arch("run", arch)
                    .c_field("c", CType::Char)
                    .c_array("xs", ty, n)
                    .build()
                    .unwrap()
            };
            let (wire, native) = (build(Arch::BE64), build(Arch::NATIVE));
            let xs: Vec<Value> = (0..n as u64)
                .map(|i| {
                    let v = i.wrapping_mul(0x0102_0304_0506_0708) >> (64 - 8 * w + 1);
                    if w == 8 {
                        Value::F(v as f64 + 0.25)
                    } else {
                        Value::I(v as i64)
                    }
                })
                .collect();
            let v = Value::Struct(vec![
                ("c".into(), Value::Char(b'q')),
                ("xs".into(), Value::Array(xs)),
            ]);
            let payload = write_value(&wire, &v).unwrap();
            for b in [Backend::Interpreter, Backend::Jit] {
                let p = Plan::compile_with(&wire, &native, OverflowPolicy::Error, Some(b)).unwrap();
                let mut out = Vec::new();
                p.run(&payload, &mut out).unwrap();
                assert_eq!(read_value(&native, &out).unwrap(), v, "{ty:?}[{n}] {b:?}");
            }
        }
    }
}
