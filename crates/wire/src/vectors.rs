//! The test vectors kept in `testdata/`: record files written as a native
//! (x86-64) writer and as foreign writers (big-endian, 4-byte `long`, 4-byte
//! double alignment, 4-byte pointers) would write them. Generated here so
//! the Rust test can check the committed files are reproducible and the
//! Python reader can check it decodes them to the same JSON.

use std::sync::Arc;

use crate::error::Result;
use crate::file::FileWriter;
use crate::format::{Arch, CType, FieldType, Format, FormatBuilder};
use crate::record::frame;
use crate::value::{write_value, Value};

/// PBIO-style mixed struct: ints, doubles, chars and a fixed array.
pub fn mixed(arch: Arch) -> Result<Arc<Format>> {
    FormatBuilder::with_arch("mixed", arch)
        .c_field("id", CType::Int)
        .c_field("count", CType::Long)
        .c_field("temp", CType::Double)
        .c_field("flag", CType::Char)
        .c_array("label", CType::Char, 7)
        .c_field("small", CType::Short)
        .c_field("ok", CType::Bool)
        .c_field("ratio", CType::Float)
        .c_array("vals", CType::Double, 4)
        .c_field("big", CType::ULongLong)
        .build()
}

fn mixed_value(k: i64) -> Value {
    Value::Struct(vec![
        ("id".into(), Value::I(k * 1000 - 3)),
        ("count".into(), Value::I(-(k * 70_000))),
        ("temp".into(), Value::F(273.15 + k as f64 * 0.5)),
        ("flag".into(), Value::Char(b'a' + k as u8)),
        ("label".into(), Value::Str(format!("rec{k}"))),
        ("small".into(), Value::I(-300 + k)),
        ("ok".into(), Value::Bool(k % 2 == 0)),
        ("ratio".into(), Value::F(0.1 * k as f64)),
        (
            "vals".into(),
            Value::Array(
                (0..4)
                    .map(|i| Value::F(i as f64 * 1.25 - k as f64))
                    .collect(),
            ),
        ),
        ("big".into(), Value::U(u64::MAX - k as u64)),
    ])
}

/// A nested record with an array of structs and variable-length fields.
pub fn nested(arch: Arch) -> Result<Arc<Format>> {
    let pt = FormatBuilder::with_arch("point", arch)
        .c_field("x", CType::Double)
        .c_field("y", CType::Float)
        .c_field("tag", CType::Short)
        .build()?;
    FormatBuilder::with_arch("track", arch)
        .c_field("n", CType::UInt)
        .field("first", FieldType::Nested(pt.clone()))
        .field("pts", FieldType::array(FieldType::Nested(pt), 3))
        .field("name", FieldType::VarString)
        .field("samples", FieldType::var_array(FieldType::I32))
        .field("weights", FieldType::var_array(FieldType::F64))
        .build()
}

fn nested_value(k: i64) -> Value {
    let pt = |i: i64| {
        Value::Struct(vec![
            ("x".into(), Value::F(i as f64 / 4.0)),
            ("y".into(), Value::F(-(i as f64) * 2.0)),
            ("tag".into(), Value::I(i - 2)),
        ])
    };
    Value::Struct(vec![
        ("n".into(), Value::U(3 + k as u64)),
        ("first".into(), pt(k)),
        (
            "pts".into(),
            Value::Array((1..=3).map(|i| pt(i * 10 + k)).collect()),
        ),
        (
            "name".into(),
            Value::Str(if k == 0 {
                String::new()
            } else {
                format!("track-{k} \"ü\"")
            }),
        ),
        (
            "samples".into(),
            Value::Array((0..k * 2).map(|i| Value::I(i * i - 5)).collect()),
        ),
        (
            "weights".into(),
            Value::Array((0..k).map(|i| Value::F(1.0 / (i as f64 + 3.0))).collect()),
        ),
    ])
}

/// Version 2 of `mixed` as an evolved writer would send it: a new first field,
/// `count` widened to 8 bytes, and `ratio` removed.
pub fn evolved(arch: Arch) -> Result<Arc<Format>> {
    FormatBuilder::with_arch("mixed", arch)
        .c_field("version", CType::UShort)
        .c_field("id", CType::Int)
        .c_field("count", CType::LongLong)
        .c_field("temp", CType::Double)
        .c_field("flag", CType::Char)
        .build()
}

fn evolved_value(k: i64) -> Value {
    Value::Struct(vec![
        ("version".into(), Value::U(2)),
        ("id".into(), Value::I(k)),
        ("count".into(), Value::I(-k * 3)),
        ("temp".into(), Value::F(-1.5 * k as f64)),
        ("flag".into(), Value::Char(b'z')),
    ])
}

fn file_of(items: &[(Arc<Format>, Value)]) -> Result<Vec<u8>> {
    let mut w = FileWriter::new();
    for (f, v) in items {
        let p = write_value(f, v)?;
        w.record(f, &frame(f, &p)?)?;
    }
    Ok(w.finish())
}

/// (name, file bytes) of every vector.
pub fn all() -> Result<Vec<(&'static str, Vec<u8>)>> {
    let mut out = Vec::new();
    for (name, arch) in [
        ("mixed_x86_64", Arch::X86_64),
        ("mixed_be32", Arch::BE32),
        ("mixed_i386", Arch::I386),
        ("mixed_be64", Arch::BE64),
    ] {
        let f = mixed(arch)?;
        out.push((
            name,
            file_of(
                &(0..3)
                    .map(|k| (f.clone(), mixed_value(k)))
                    .collect::<Vec<_>>(),
            )?,
        ));
    }
    for (name, arch) in [("nested_x86_64", Arch::X86_64), ("nested_be32", Arch::BE32)] {
        let f = nested(arch)?;
        out.push((
            name,
            file_of(
                &(0..3)
                    .map(|k| (f.clone(), nested_value(k)))
                    .collect::<Vec<_>>(),
            )?,
        ));
    }
    let (v1, v2) = (mixed(Arch::BE32)?, evolved(Arch::X86_64)?);
    out.push((
        "evolution",
        file_of(&[
            (v1.clone(), mixed_value(1)),
            (v2.clone(), evolved_value(5)),
            (v1, mixed_value(2)),
            (v2, evolved_value(6)),
        ])?,
    ));
    Ok(out)
}
