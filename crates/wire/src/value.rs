//! Reflection: read any record without an expected type into a [`Value`]
//! tree, write a `Value` in any format (this is the foreign-architecture
//! writer: lay a format out for another [`crate::Arch`] and write values into
//! it), and print values as JSON.

use crate::error::{Result, WireError};
use crate::format::{ByteOrder, FieldType, Format};
use crate::record::{read_uint, slot_range, write_uint, VarSlot};

/// A dynamically typed field value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    I(i64),
    U(u64),
    F(f64),
    Char(u8),
    Bool(bool),
    Str(String),
    Array(Vec<Value>),
    Struct(Vec<(String, Value)>),
}

impl Value {
    pub fn get(&self, name: &str) -> Option<&Value> {
        match self {
            Value::Struct(fs) => fs.iter().find(|(n, _)| n == name).map(|(_, v)| v),
            _ => None,
        }
    }
    fn as_i128(&self) -> Option<i128> {
        match self {
            Value::I(v) => Some(*v as i128),
            Value::U(v) => Some(*v as i128),
            Value::Char(c) => Some(*c as i128),
            Value::Bool(b) => Some(*b as i128),
            Value::F(f) if f.fract() == 0.0 => Some(*f as i128),
            _ => None,
        }
    }
}

/// Read a record payload (fixed part + tail) of format `f`.
pub fn read_value(f: &Format, payload: &[u8]) -> Result<Value> {
    if payload.len() < f.size() as usize {
        return Err(WireError::Truncated {
            at: 0,
            needed: f.size() as usize,
            have: payload.len(),
        });
    }
    read_struct(f, payload, 0, f.size() as usize)
}

fn read_struct(f: &Format, p: &[u8], base: usize, fixed_len: usize) -> Result<Value> {
    let mut out = Vec::with_capacity(f.fields().len());
    for fld in f.fields() {
        let v = read_type(
            f,
            &fld.ty,
            p,
            base + fld.offset as usize,
            fixed_len,
            &fld.name,
        )?;
        out.push((fld.name.clone(), v));
    }
    Ok(Value::Struct(out))
}

fn scalar(f: &Format, t: &FieldType, b: &[u8]) -> Value {
    let order = f.byte_order();
    match t {
        FieldType::Int { size, signed: true } => {
            let raw = read_uint(b, order);
            let shift = 64 - 8 * *size as u32;
            Value::I(((raw << shift) as i64) >> shift)
        }
        FieldType::Int { .. } => Value::U(read_uint(b, order)),
        FieldType::Float { size: 4 } => Value::F(f32::from_bits(read_uint(b, order) as u32) as f64),
        FieldType::Float { .. } => Value::F(f64::from_bits(read_uint(b, order))),
        FieldType::Char => Value::Char(b[0]),
        _ => Value::Bool(b[0] != 0),
    }
}

fn read_type(
    f: &Format,
    t: &FieldType,
    p: &[u8],
    off: usize,
    fixed_len: usize,
    path: &str,
) -> Result<Value> {
    let size = t.size(f.pointer_size()) as usize;
    let b = p.get(off..off + size).ok_or(WireError::Truncated {
        at: off,
        needed: size,
        have: p.len().saturating_sub(off),
    })?;
    Ok(match t {
        FieldType::Array { elem, count } => {
            let es = elem.size(f.pointer_size()) as usize;
            let mut v = Vec::with_capacity(*count as usize);
            for i in 0..*count as usize {
                v.push(read_type(f, elem, p, off + i * es, fixed_len, path)?);
            }
            Value::Array(v)
        }
        FieldType::Nested(n) => read_struct(n, p, off, fixed_len)?,
        FieldType::VarString | FieldType::VarArray(_) => {
            let slot = VarSlot {
                path: path.to_string(),
                offset: off,
                elem: match t {
                    FieldType::VarArray(e) => Some((**e).clone()),
                    _ => None,
                },
                order: f.byte_order(),
                pointer_size: f.pointer_size(),
            };
            let r = slot_range(&slot, p, fixed_len)?;
            match t {
                FieldType::VarArray(e) => {
                    let es = e.size(f.pointer_size()) as usize;
                    let n = (r.end - r.start).checked_div(es).unwrap_or(0);
                    let mut v = Vec::with_capacity(n);
                    for i in 0..n {
                        v.push(read_type(f, e, p, r.start + i * es, fixed_len, path)?);
                    }
                    Value::Array(v)
                }
                _ => Value::Str(String::from_utf8_lossy(&p[r]).into_owned()),
            }
        }
        _ => scalar(f, t, b),
    })
}

/// Write `v` as a payload of format `f` (fixed part + tail, slots holding
/// offsets), in `f`'s byte order, pointer size and layout. Missing fields are
/// zero. Integer values out of range are an error.
pub fn write_value(f: &Format, v: &Value) -> Result<Vec<u8>> {
    let mut out = vec![0u8; f.size() as usize];
    write_struct(f, v, 0, &mut out)?;
    Ok(out)
}

fn write_struct(f: &Format, v: &Value, base: usize, out: &mut Vec<u8>) -> Result<()> {
    let Value::Struct(_) = v else {
        return Err(WireError::Usage(format!(
            "value for format `{}` is not a struct",
            f.name()
        )));
    };
    for fld in f.fields() {
        if let Some(fv) = v.get(&fld.name) {
            write_type(f, &fld.ty, fv, base + fld.offset as usize, out, &fld.name)?;
        }
    }
    Ok(())
}

fn put(out: &mut [u8], off: usize, bytes: &[u8]) {
    out[off..off + bytes.len()].copy_from_slice(bytes);
}

fn write_type(
    f: &Format,
    t: &FieldType,
    v: &Value,
    off: usize,
    out: &mut Vec<u8>,
    path: &str,
) -> Result<()> {
    let order = f.byte_order();
    let bad = || {
        WireError::Usage(format!(
            "field `{path}`: value {v:?} does not fit {}",
            t.type_name()
        ))
    };
    match t {
        FieldType::Int { size, signed } => {
            let x = v.as_i128().ok_or_else(bad)?;
            let bits = 8 * *size as u32;
            let (lo, hi) = if *signed {
                (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
            } else {
                (0, (1i128 << bits) - 1)
            };
            if x < lo || x > hi {
                return Err(bad());
            }
            write_uint(&mut out[off..off + *size as usize], x as u64, order);
        }
        FieldType::Float { size } => {
            let x = match v {
                Value::F(x) => *x,
                other => other.as_i128().ok_or_else(bad)? as f64,
            };
            if *size == 4 {
                write_uint(&mut out[off..off + 4], (x as f32).to_bits() as u64, order);
            } else {
                write_uint(&mut out[off..off + 8], x.to_bits(), order);
            }
        }
        FieldType::Char | FieldType::Bool => {
            let x = v
                .as_i128()
                .filter(|x| (0..256).contains(x))
                .ok_or_else(bad)?;
            out[off] = x as u8;
        }
        FieldType::Array { elem, count } => {
            let es = elem.size(f.pointer_size()) as usize;
            match (v, &**elem) {
                (Value::Str(s), FieldType::Char) => {
                    let b = s.as_bytes();
                    if b.len() > *count as usize {
                        return Err(bad());
                    }
                    put(out, off, b);
                }
                (Value::Array(items), _) if items.len() <= *count as usize => {
                    for (i, it) in items.iter().enumerate() {
                        write_type(f, elem, it, off + i * es, out, path)?;
                    }
                }
                _ => return Err(bad()),
            }
        }
        FieldType::Nested(n) => write_struct(n, v, off, out)?,
        FieldType::VarString | FieldType::VarArray(_) => {
            let p = f.pointer_size() as usize;
            let (start, n) = match (t, v) {
                (FieldType::VarString, Value::Str(s)) => {
                    let start = out.len();
                    out.extend_from_slice(s.as_bytes());
                    (start, s.len())
                }
                (FieldType::VarArray(e), Value::Array(items)) => {
                    let es = e.size(f.pointer_size()) as usize;
                    let a = e.tail_align().clamp(1, 8);
                    let start = out.len().div_ceil(a) * a;
                    out.resize(start + es * items.len(), 0);
                    for (i, it) in items.iter().enumerate() {
                        write_type(f, e, it, start + i * es, out, path)?;
                    }
                    (start, items.len())
                }
                _ => return Err(bad()),
            };
            let start = if n == 0 { 0 } else { start };
            if p == 4 && (start > u32::MAX as usize || n > u32::MAX as usize) {
                return Err(bad());
            }
            write_uint(&mut out[off..off + p], start as u64, order);
            write_uint(&mut out[off + p..off + 2 * p], n as u64, order);
        }
    }
    Ok(())
}

/// JSON text of a value. Arrays of `char` print as a string cut at the first
/// NUL (C string semantics); non-finite floats print as the strings "NaN",
/// "Infinity", "-Infinity" because JSON has no such numbers.
pub fn to_json(v: &Value) -> String {
    let mut s = String::new();
    json_into(v, &mut s);
    s
}

pub(crate) fn json_str(x: &str, s: &mut String) {
    s.push('"');
    for c in x.chars() {
        match c {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            '\n' => s.push_str("\\n"),
            '\r' => s.push_str("\\r"),
            '\t' => s.push_str("\\t"),
            c if (c as u32) < 0x20 => s.push_str(&format!("\\u{:04x}", c as u32)),
            c => s.push(c),
        }
    }
    s.push('"');
}

fn json_float(x: f64, s: &mut String) {
    if x.is_nan() {
        s.push_str("\"NaN\"");
    } else if x.is_infinite() {
        s.push_str(if x > 0.0 {
            "\"Infinity\""
        } else {
            "\"-Infinity\""
        });
    } else if x == x.trunc() && x.abs() < 1e16 {
        // Keep a ".0" so readers see a float, as Python's repr does.
        s.push_str(&format!("{x:.1}"));
    } else if x == x.trunc() {
        s.push_str(&format!("{x:e}"));
    } else {
        // Display prints the shortest digits that round-trip.
        s.push_str(&format!("{x}"));
    }
}

fn json_into(v: &Value, s: &mut String) {
    match v {
        Value::I(x) => s.push_str(&x.to_string()),
        Value::U(x) => s.push_str(&x.to_string()),
        Value::F(x) => json_float(*x, s),
        Value::Char(c) => json_str(&String::from_utf8_lossy(&[*c]), s),
        Value::Bool(b) => s.push_str(if *b { "true" } else { "false" }),
        Value::Str(x) => json_str(x, s),
        Value::Array(items)
            if !items.is_empty() && items.iter().all(|i| matches!(i, Value::Char(_))) =>
        {
            let bytes: Vec<u8> = items
                .iter()
                .map(|i| if let Value::Char(c) = i { *c } else { 0 })
                .take_while(|&c| c != 0)
                .collect();
            json_str(&String::from_utf8_lossy(&bytes), s);
        }
        Value::Array(items) => {
            s.push('[');
            for (i, it) in items.iter().enumerate() {
                if i > 0 {
                    s.push_str(", ");
                }
                json_into(it, s);
            }
            s.push(']');
        }
        Value::Struct(fs) => {
            s.push('{');
            for (i, (n, it)) in fs.iter().enumerate() {
                if i > 0 {
                    s.push_str(", ");
                }
                json_str(n, s);
                s.push_str(": ");
                json_into(it, s);
            }
            s.push('}');
        }
    }
}

/// JSON description of a format (used by `gwrecord dump`).
pub fn format_json(f: &Format) -> String {
    let mut s = String::new();
    s.push_str("{\"name\": ");
    json_str(f.name(), &mut s);
    s.push_str(&format!(
        ", \"id\": \"{}\", \"size\": {}, \"align\": {}, \"byte_order\": \"{}\", \"pointer_size\": {}, \"fields\": [",
        f.id(),
        f.size(),
        f.align(),
        match f.byte_order() {
            ByteOrder::Little => "little",
            ByteOrder::Big => "big",
        },
        f.pointer_size()
    ));
    for (i, fld) in f.fields().iter().enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        s.push_str("{\"name\": ");
        json_str(&fld.name, &mut s);
        s.push_str(", \"type\": ");
        json_str(&fld.ty.type_name(), &mut s);
        s.push_str(&format!(", \"offset\": {}", fld.offset));
        if let Some(n) = nested_of(&fld.ty) {
            s.push_str(", \"format\": ");
            s.push_str(&format_json(n));
        }
        s.push('}');
    }
    s.push_str("]}");
    s
}

fn nested_of(t: &FieldType) -> Option<&Format> {
    match t {
        FieldType::Nested(n) => Some(n),
        FieldType::Array { elem, .. } | FieldType::VarArray(elem) => nested_of(elem),
        _ => None,
    }
}
