//! The derive macro: formats come from the compiler's layout, records view in
//! place, and convert from foreign writers by field name.

use gridwire_wire::value::write_value;
use gridwire_wire::*;

#[repr(C)]
#[derive(WireRecord, Clone, Copy, Debug, PartialEq)]
pub struct Point {
    pub x: f64,
    pub y: f32,
    pub tag: i16,
}

#[repr(C)]
#[derive(WireRecord, Clone, Copy, Debug, PartialEq)]
pub struct Track {
    pub n: u32,
    pub first: Point,
    pub pts: [Point; 3],
    pub ids: [u16; 5],
}

#[test]
fn derived_format_matches_compiler_layout() {
    let f = Track::format();
    assert_eq!(f.size() as usize, std::mem::size_of::<Track>());
    assert_eq!(f.align() as usize, std::mem::align_of::<Track>());
    assert_eq!(
        f.field("first").unwrap().offset as usize,
        std::mem::offset_of!(Track, first)
    );
    assert_eq!(
        f.field("ids").unwrap().ty,
        FieldType::array(FieldType::U16, 5)
    );
    // Equal to a builder-made format laid out by the native ABI rules.
    let pt = FormatBuilder::new("Point")
        .field("x", FieldType::F64)
        .field("y", FieldType::F32)
        .field("tag", FieldType::I16)
        .build()
        .unwrap();
    assert_eq!(Point::format().id(), pt.id());
}

#[test]
fn derived_record_views_in_place_and_converts_from_foreign() {
    let t = Track {
        n: 7,
        first: Point {
            x: 1.5,
            y: -2.0,
            tag: 3,
        },
        pts: [Point {
            x: 0.5,
            y: 1.0,
            tag: -1,
        }; 3],
        ids: [1, 2, 3, 4, 65535],
    };
    // SAFETY: reading the bytes of a Copy repr(C) struct; padding is only read, never interpreted.
    let bytes = unsafe {
        std::slice::from_raw_parts(
            &t as *const Track as *const u8,
            std::mem::size_of::<Track>(),
        )
    };
    let mut enc = Encoder::new(Track::format()).unwrap();
    let framed = enc.encode_to_vec(bytes, &[]).unwrap();
    // Put it in an 8-aligned buffer, as a receive buffer would be.
    let mut buf = vec![0u64; framed.len().div_ceil(8)];
    // SAFETY: exclusive, initialised u64 storage seen as bytes.
    let b = unsafe { std::slice::from_raw_parts_mut(buf.as_mut_ptr() as *mut u8, buf.len() * 8) };
    b[..framed.len()].copy_from_slice(&framed);
    let (rec, _) = RecordRef::parse(&b[..framed.len()]).unwrap();
    let v: &Track = view(&rec).unwrap();
    assert_eq!(*v, t);

    // A big-endian 32-bit writer of the same struct, fields in another order.
    let pt_be = FormatBuilder::with_arch("Point", Arch::BE32)
        .field("tag", FieldType::I32)
        .field("y", FieldType::F64)
        .field("x", FieldType::F64)
        .build()
        .unwrap();
    let tr_be = FormatBuilder::with_arch("Track", Arch::BE32)
        .field("ids", FieldType::array(FieldType::U32, 5))
        .field("pts", FieldType::array(FieldType::Nested(pt_be.clone()), 3))
        .field("first", FieldType::Nested(pt_be))
        .field("n", FieldType::U64)
        .build()
        .unwrap();
    let p = |x: f64, y: f64, tag: i64| {
        Value::Struct(vec![
            ("x".into(), Value::F(x)),
            ("y".into(), Value::F(y)),
            ("tag".into(), Value::I(tag)),
        ])
    };
    let val = Value::Struct(vec![
        ("n".into(), Value::U(7)),
        ("first".into(), p(1.5, -2.0, 3)),
        ("pts".into(), Value::Array(vec![p(0.5, 1.0, -1); 3])),
        (
            "ids".into(),
            Value::Array(
                [1u64, 2, 3, 4, 65535]
                    .iter()
                    .map(|&x| Value::U(x))
                    .collect(),
            ),
        ),
    ]);
    let framed = record::frame(&tr_be, &write_value(&tr_be, &val).unwrap()).unwrap();
    let (rec, _) = RecordRef::parse(&framed).unwrap();
    let mut reg = Registry::new();
    reg.register(tr_be);
    let got: Track = reg.decode_as(&rec).unwrap();
    assert_eq!(got, t);
}
