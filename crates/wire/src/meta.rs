//! Canonical, binary format metadata: the bytes that are hashed into a
//! [`FormatId`] and sent once per (link, format) so a receiver can learn a
//! format it has not seen.
//!
//! Layout (all integers little-endian):
//! ```text
//! "GWFM" version:u8 body
//! body  = name size:u32 align:u32 order:u8(0=little,1=big) ptr:u8 nfields:u16 field*
//! name  = len:u8 utf8-bytes
//! field = name offset:u32 type
//! type  = 1 size:u8 signed:u8 | 2 size:u8 | 3 (char) | 4 (bool)
//!       | 5 count:u32 type | 6 body (nested, inline) | 7 (string) | 8 type (var array)
//! ```
//! Fields are in offset order. Defaults are not included: they are receiver
//! policy, not layout, so they must not change the id. A parser accepts only
//! canonical bytes (it re-serialises and compares), so `hash(bytes) == id`
//! holds for anything it accepts.

use std::sync::Arc;

use sha2::{Digest, Sha256};

use crate::error::{Result, WireError};
use crate::format::{ByteOrder, Field, FieldType, Format, FormatId};
use crate::limits;

const MAGIC: &[u8; 4] = b"GWFM";
const VERSION: u8 = 1;

/// Serialise a format's canonical metadata.
pub fn serialize(f: &Format) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + f.fields.len() * 16);
    out.extend_from_slice(MAGIC);
    out.push(VERSION);
    write_body(f, &mut out);
    out
}

/// The id of a format: first 8 bytes of SHA-256 over its canonical metadata.
pub fn compute_id(f: &Format) -> FormatId {
    id_of_bytes(&serialize(f))
}

pub(crate) fn id_of_bytes(b: &[u8]) -> FormatId {
    let h = Sha256::digest(b);
    let mut id = [0u8; 8];
    id.copy_from_slice(&h[..8]);
    FormatId(u64::from_be_bytes(id))
}

fn write_name(s: &str, out: &mut Vec<u8>) {
    // Names are validated to <= 255 bytes before a Format exists.
    out.push(s.len() as u8);
    out.extend_from_slice(s.as_bytes());
}

fn write_body(f: &Format, out: &mut Vec<u8>) {
    write_name(&f.name, out);
    out.extend_from_slice(&f.size.to_le_bytes());
    out.extend_from_slice(&f.align.to_le_bytes());
    out.push(match f.byte_order {
        ByteOrder::Little => 0,
        ByteOrder::Big => 1,
    });
    out.push(f.pointer_size);
    out.extend_from_slice(&(f.fields.len() as u16).to_le_bytes());
    for fld in &f.fields {
        write_name(&fld.name, out);
        out.extend_from_slice(&fld.offset.to_le_bytes());
        write_type(&fld.ty, out);
    }
}

fn write_type(t: &FieldType, out: &mut Vec<u8>) {
    match t {
        FieldType::Int { size, signed } => out.extend_from_slice(&[1, *size, *signed as u8]),
        FieldType::Float { size } => out.extend_from_slice(&[2, *size]),
        FieldType::Char => out.push(3),
        FieldType::Bool => out.push(4),
        FieldType::Array { elem, count } => {
            out.push(5);
            out.extend_from_slice(&count.to_le_bytes());
            write_type(elem, out);
        }
        FieldType::Nested(f) => {
            out.push(6);
            write_body(f, out);
        }
        FieldType::VarString => out.push(7),
        FieldType::VarArray(elem) => {
            out.push(8);
            write_type(elem, out);
        }
    }
}

/// Parse metadata bytes into a validated format. Rejects non-canonical input,
/// trailing bytes, and anything beyond the [`limits`].
pub fn parse(bytes: &[u8]) -> Result<Arc<Format>> {
    if bytes.len() > limits::MAX_META {
        return Err(WireError::Limit {
            what: "metadata size",
            value: bytes.len() as u64,
            limit: limits::MAX_META as u64,
        });
    }
    let mut r = Reader { b: bytes, pos: 0 };
    if r.take(4)? != MAGIC || r.u8()? != VERSION {
        return Err(WireError::BadMagic {
            what: "format metadata",
        });
    }
    let f = read_body(&mut r, 0)?;
    if r.pos != bytes.len() {
        return Err(WireError::NotCanonical);
    }
    if serialize(&f) != bytes {
        return Err(WireError::NotCanonical);
    }
    Ok(Arc::new(f))
}

pub(crate) struct Reader<'a> {
    pub b: &'a [u8],
    pub pos: usize,
}

impl<'a> Reader<'a> {
    pub fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.b.len())
            .ok_or(WireError::Truncated {
                at: self.pos,
                needed: n,
                have: self.b.len().saturating_sub(self.pos),
            })?;
        let s = &self.b[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    pub fn u16(&mut self) -> Result<u16> {
        let s = self.take(2)?;
        Ok(u16::from_le_bytes([s[0], s[1]]))
    }
    pub fn u32(&mut self) -> Result<u32> {
        let s = self.take(4)?;
        Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }
    fn name(&mut self) -> Result<String> {
        let n = self.u8()? as usize;
        let s = self.take(n)?;
        String::from_utf8(s.to_vec()).map_err(|_| WireError::InvalidFormat {
            format: "?".into(),
            reason: "name is not UTF-8".into(),
        })
    }
}

fn depth_err(depth: u32) -> WireError {
    WireError::Limit {
        what: "metadata type depth",
        value: depth as u64,
        limit: limits::MAX_TYPE_DEPTH as u64,
    }
}

fn read_body(r: &mut Reader<'_>, depth: u32) -> Result<Format> {
    if depth > limits::MAX_TYPE_DEPTH {
        return Err(depth_err(depth));
    }
    let name = r.name()?;
    let size = r.u32()?;
    let align = r.u32()?;
    let order = match r.u8()? {
        0 => ByteOrder::Little,
        1 => ByteOrder::Big,
        _ => {
            return Err(WireError::InvalidFormat {
                format: name,
                reason: "bad byte order".into(),
            })
        }
    };
    let ptr = r.u8()?;
    let n = r.u16()? as usize;
    if n > limits::MAX_FIELDS {
        return Err(WireError::Limit {
            what: "field count",
            value: n as u64,
            limit: limits::MAX_FIELDS as u64,
        });
    }
    // Each field needs at least 6 bytes, so a lying count is caught before we reserve.
    if n.saturating_mul(6) > r.b.len() - r.pos {
        return Err(WireError::Truncated {
            at: r.pos,
            needed: n * 6,
            have: r.b.len() - r.pos,
        });
    }
    let mut fields = Vec::with_capacity(n);
    for _ in 0..n {
        let fname = r.name()?;
        let offset = r.u32()?;
        let ty = read_type(r, depth + 1)?;
        fields.push(Field {
            name: fname,
            ty,
            offset,
            default: None,
        });
    }
    Format::finish(name, size, align, order, ptr, fields)
}

fn read_type(r: &mut Reader<'_>, depth: u32) -> Result<FieldType> {
    if depth > limits::MAX_TYPE_DEPTH {
        return Err(depth_err(depth));
    }
    let bad = |reason: &str| WireError::InvalidFormat {
        format: "?".into(),
        reason: reason.into(),
    };
    Ok(match r.u8()? {
        1 => {
            let size = r.u8()?;
            let signed = match r.u8()? {
                0 => false,
                1 => true,
                _ => return Err(bad("bad signedness byte")),
            };
            FieldType::Int { size, signed }
        }
        2 => FieldType::Float { size: r.u8()? },
        3 => FieldType::Char,
        4 => FieldType::Bool,
        5 => {
            let count = r.u32()?;
            FieldType::Array {
                elem: Box::new(read_type(r, depth + 1)?),
                count,
            }
        }
        6 => FieldType::Nested(Arc::new(read_body(r, depth + 1)?)),
        7 => FieldType::VarString,
        8 => FieldType::VarArray(Box::new(read_type(r, depth + 1)?)),
        _ => return Err(bad("unknown type tag")),
    })
}
