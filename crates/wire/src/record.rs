//! Record framing and encoding.
//!
//! A record on the wire is a 24-byte header followed by the payload: the
//! fixed part exactly as the sender holds it in memory (natural data
//! representation) and then the variable tail.
//!
//! ```text
//! 0  "GWR\x01"        magic + version
//! 4  flags:u32        reserved, must be 0
//! 8  format id:u64    little-endian
//! 16 fixed_len:u32    little-endian, equals the format's size
//! 20 var_len:u32      little-endian, bytes of variable tail
//! 24 payload          fixed_len + var_len bytes
//! ```
//! The header is 24 bytes so that a payload following an 8-aligned header
//! is itself 8-aligned, which is what makes the in-place view possible.
//!
//! Variable-length fields occupy a slot `[offset, len]` in the fixed part
//! (each `pointer_size` bytes, format byte order). On the sender the slot
//! would hold a pointer; the encoder writes the offset of the data inside the
//! payload instead, and gathers the data itself as separate iovecs.

use std::io::IoSlice;
use std::sync::Arc;

use crate::error::{Result, WireError};
use crate::format::{ByteOrder, FieldType, Format, FormatId};
use crate::limits;

pub const HEADER_LEN: usize = 24;
const MAGIC: &[u8; 4] = b"GWR\x01";
/// Most variable-length slots one format may have (fixed arrays of nested
/// formats with strings are unrolled, so this bounds that expansion).
pub const MAX_VAR_SLOTS: usize = 1 << 16;
static ZEROS: [u8; 64] = [0; 64];

/// A variable-length slot inside the fixed part, with its absolute offset.
#[derive(Debug, Clone)]
pub struct VarSlot {
    /// Dotted path of the field, e.g. `items[3].name`.
    pub path: String,
    /// Byte offset of the slot in the fixed part.
    pub offset: usize,
    /// `None` for a string, else the element type of a variable array.
    pub elem: Option<FieldType>,
    /// Byte order and pointer size of the format that owns the slot.
    pub order: ByteOrder,
    pub pointer_size: u8,
}

impl VarSlot {
    /// Size in bytes of one element (1 for strings).
    pub fn elem_size(&self) -> usize {
        self.elem
            .as_ref()
            .map(|e| e.size(self.pointer_size) as usize)
            .unwrap_or(1)
    }
    pub(crate) fn elem_align(&self) -> usize {
        self.elem
            .as_ref()
            .map(|e| e.tail_align().clamp(1, 8))
            .unwrap_or(1)
    }
    /// Read (offset, len) from a fixed part.
    pub fn read(&self, fixed: &[u8]) -> Result<(u64, u64)> {
        let p = self.pointer_size as usize;
        let s =
            fixed
                .get(self.offset..self.offset + 2 * p)
                .ok_or_else(|| WireError::BadVarField {
                    field: self.path.clone(),
                    reason: "slot outside fixed part".into(),
                })?;
        Ok((
            read_uint(&s[..p], self.order),
            read_uint(&s[p..], self.order),
        ))
    }
    pub(crate) fn write(&self, fixed: &mut [u8], off: u64, len: u64) -> Result<()> {
        let p = self.pointer_size as usize;
        if p == 4 && (off > u32::MAX as u64 || len > u32::MAX as u64) {
            return Err(WireError::Limit {
                what: "32-bit var slot",
                value: off.max(len),
                limit: u32::MAX as u64,
            });
        }
        let s = fixed
            .get_mut(self.offset..self.offset + 2 * p)
            .ok_or_else(|| WireError::BadVarField {
                field: self.path.clone(),
                reason: "slot outside fixed part".into(),
            })?;
        write_uint(&mut s[..p], off, self.order);
        write_uint(&mut s[p..], len, self.order);
        Ok(())
    }
}

pub(crate) fn read_uint(b: &[u8], order: ByteOrder) -> u64 {
    let mut v = 0u64;
    match order {
        ByteOrder::Big => b.iter().for_each(|&x| v = (v << 8) | x as u64),
        ByteOrder::Little => b.iter().rev().for_each(|&x| v = (v << 8) | x as u64),
    }
    v
}

pub(crate) fn write_uint(b: &mut [u8], mut v: u64, order: ByteOrder) {
    let n = b.len();
    for i in 0..n {
        let idx = match order {
            ByteOrder::Little => i,
            ByteOrder::Big => n - 1 - i,
        };
        b[idx] = v as u8;
        v >>= 8;
    }
}

/// All variable-length slots of a format in canonical (offset) order, nested
/// formats and fixed arrays of them expanded.
pub fn var_slots(f: &Format) -> Result<Vec<VarSlot>> {
    let mut out = Vec::new();
    collect_slots(f, 0, "", &mut out)?;
    Ok(out)
}

fn collect_slots(f: &Format, base: usize, prefix: &str, out: &mut Vec<VarSlot>) -> Result<()> {
    if !f.has_var() {
        return Ok(());
    }
    for fld in f.fields() {
        let path = if prefix.is_empty() {
            fld.name.clone()
        } else {
            format!("{prefix}.{}", fld.name)
        };
        collect_type(f, &fld.ty, base + fld.offset as usize, &path, out)?;
    }
    Ok(())
}

fn collect_type(
    f: &Format,
    t: &FieldType,
    off: usize,
    path: &str,
    out: &mut Vec<VarSlot>,
) -> Result<()> {
    match t {
        FieldType::VarString | FieldType::VarArray(_) => {
            if out.len() >= MAX_VAR_SLOTS {
                return Err(WireError::Limit {
                    what: "variable slots",
                    value: out.len() as u64 + 1,
                    limit: MAX_VAR_SLOTS as u64,
                });
            }
            out.push(VarSlot {
                path: path.to_string(),
                offset: off,
                elem: match t {
                    FieldType::VarArray(e) => Some((**e).clone()),
                    _ => None,
                },
                order: f.byte_order(),
                pointer_size: f.pointer_size(),
            });
        }
        FieldType::Nested(n) => collect_slots(n, off, path, out)?,
        FieldType::Array { elem, count } if elem.has_var() => {
            let es = elem.size(f.pointer_size()) as usize;
            for i in 0..*count as usize {
                collect_type(f, elem, off + i * es, &format!("{path}[{i}]"), out)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// Encodes records of one format. Reuse it: it owns the header and, for
/// formats with variable-length fields, a scratch copy of the fixed part.
pub struct Encoder {
    fmt: Arc<Format>,
    slots: Vec<VarSlot>,
    header: [u8; HEADER_LEN],
    scratch: Vec<u8>,
}

impl Encoder {
    pub fn new(fmt: Arc<Format>) -> Result<Self> {
        let slots = var_slots(&fmt)?;
        let mut header = [0u8; HEADER_LEN];
        header[..4].copy_from_slice(MAGIC);
        header[8..16].copy_from_slice(&fmt.id().0.to_le_bytes());
        header[16..20].copy_from_slice(&fmt.size().to_le_bytes());
        Ok(Encoder {
            fmt,
            slots,
            header,
            scratch: Vec::new(),
        })
    }
    pub fn format(&self) -> &Arc<Format> {
        &self.fmt
    }
    /// The slots whose data `encode` expects in `var`, in this order.
    pub fn var_slots(&self) -> &[VarSlot] {
        &self.slots
    }

    /// Encode one record as a gather list: header, the fixed part (borrowed
    /// as is when the format has no variable-length fields), then each
    /// variable part (borrowed) with alignment padding. Nothing is copied per
    /// field; the only copy is of the fixed part when slots must be rewritten.
    ///
    /// `var[i]` holds the raw elements (in this format's layout) for
    /// `var_slots()[i]`; whatever the slots in `fixed` contain is ignored.
    pub fn encode<'a>(&'a mut self, fixed: &'a [u8], var: &[&'a [u8]]) -> Result<Vec<IoSlice<'a>>> {
        let size = self.fmt.size() as usize;
        if fixed.len() != size {
            return Err(WireError::Usage(format!(
                "fixed part is {} bytes, format `{}` is {size}",
                fixed.len(),
                self.fmt.name()
            )));
        }
        if var.len() != self.slots.len() {
            return Err(WireError::Usage(format!(
                "{} variable parts given, format has {} slots",
                var.len(),
                self.slots.len()
            )));
        }
        if self.slots.is_empty() {
            self.header[20..24].copy_from_slice(&0u32.to_le_bytes());
            return Ok(vec![IoSlice::new(&self.header), IoSlice::new(fixed)]);
        }
        self.scratch.clear();
        self.scratch.extend_from_slice(fixed);
        // Lay out the tail: offsets are relative to the payload start.
        let mut pos = size as u64;
        let mut pads = Vec::with_capacity(var.len());
        for (slot, data) in self.slots.iter().zip(var) {
            let es = slot.elem_size();
            if es == 0 || data.len() % es != 0 {
                return Err(WireError::Usage(format!(
                    "variable part `{}` is not a whole number of elements",
                    slot.path
                )));
            }
            let a = slot.elem_align() as u64;
            let aligned = pos.div_ceil(a) * a;
            pads.push((aligned - pos) as usize);
            slot.write(
                &mut self.scratch,
                if data.is_empty() { 0 } else { aligned },
                (data.len() / es) as u64,
            )?;
            pos = aligned + data.len() as u64;
        }
        let var_len = pos - size as u64;
        if var_len > limits::MAX_VAR_TAIL.min(u32::MAX as u64) {
            return Err(WireError::Limit {
                what: "variable tail",
                value: var_len,
                limit: limits::MAX_VAR_TAIL,
            });
        }
        self.header[20..24].copy_from_slice(&(var_len as u32).to_le_bytes());
        let mut iov = Vec::with_capacity(2 + 2 * var.len());
        iov.push(IoSlice::new(&self.header));
        iov.push(IoSlice::new(&self.scratch));
        for (pad, data) in pads.into_iter().zip(var) {
            if pad > 0 {
                iov.push(IoSlice::new(&ZEROS[..pad]));
            }
            if !data.is_empty() {
                iov.push(IoSlice::new(data));
            }
        }
        Ok(iov)
    }

    /// Encode into one contiguous buffer (convenience; copies).
    pub fn encode_to_vec(&mut self, fixed: &[u8], var: &[&[u8]]) -> Result<Vec<u8>> {
        let iov = self.encode(fixed, var)?;
        let mut out = Vec::with_capacity(iov.iter().map(|s| s.len()).sum());
        for s in &iov {
            out.extend_from_slice(s);
        }
        Ok(out)
    }
}

/// Frame an already-built payload (fixed part + tail, slots holding offsets).
pub fn frame(fmt: &Format, payload: &[u8]) -> Result<Vec<u8>> {
    let fixed = fmt.size() as usize;
    if payload.len() < fixed || (payload.len() - fixed) as u64 > u32::MAX as u64 {
        return Err(WireError::Usage(
            "payload shorter than the format or tail too long".into(),
        ));
    }
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&fmt.id().0.to_le_bytes());
    out.extend_from_slice(&fmt.size().to_le_bytes());
    out.extend_from_slice(&((payload.len() - fixed) as u32).to_le_bytes());
    out.extend_from_slice(payload);
    Ok(out)
}

/// A parsed, not yet interpreted record: header fields plus borrowed payload.
#[derive(Debug, Clone, Copy)]
pub struct RecordRef<'a> {
    pub id: FormatId,
    /// Widened from the header's u32: a 4-byte field here made the
    /// compiler move it with an 8-byte load right after a 4-byte store, a
    /// store-forwarding stall on every parsed record (measured).
    pub fixed_len: u64,
    /// Fixed part followed by the variable tail.
    pub payload: &'a [u8],
}

impl<'a> RecordRef<'a> {
    /// Parse a header and borrow the payload. Returns the record and the
    /// number of bytes it occupies in `buf`.
    // Always inlined (the error cases are out of line): returning the
    // result through memory made the caller reload it with wider loads than
    // the stores that wrote it, a store-forwarding stall per record that
    // cost more than a small converting decode (measured).
    #[inline(always)]
    pub fn parse(buf: &'a [u8]) -> Result<(RecordRef<'a>, usize)> {
        if buf.len() < HEADER_LEN {
            return Err(Self::parse_error(buf));
        }
        let u32_at = |i: usize| u32::from_le_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]);
        let fixed_len = u32_at(16);
        let var_len = u32_at(20);
        let total = fixed_len as usize + var_len as usize;
        if buf[..4] != *MAGIC
            || u32_at(4) != 0
            || fixed_len as u64 > limits::MAX_RECORD_FIXED
            || var_len as u64 > limits::MAX_VAR_TAIL
            || total > buf.len() - HEADER_LEN
        {
            return Err(Self::parse_error(buf));
        }
        let mut id = [0u8; 8];
        id.copy_from_slice(&buf[8..16]);
        Ok((
            RecordRef {
                id: FormatId(u64::from_le_bytes(id)),
                fixed_len: fixed_len as u64,
                payload: &buf[HEADER_LEN..HEADER_LEN + total],
            },
            HEADER_LEN + total,
        ))
    }

    /// Why `parse` refused `buf` (the checks in order).
    #[cold]
    #[inline(never)]
    fn parse_error(buf: &[u8]) -> WireError {
        if buf.len() < HEADER_LEN {
            return WireError::Truncated {
                at: 0,
                needed: HEADER_LEN,
                have: buf.len(),
            };
        }
        if &buf[..4] != MAGIC {
            return WireError::BadMagic { what: "record" };
        }
        let u32_at = |i: usize| u32::from_le_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]);
        if u32_at(4) != 0 {
            return WireError::BadHeader("unknown flags".into());
        }
        let fixed_len = u32_at(16);
        let var_len = u32_at(20);
        if fixed_len as u64 > limits::MAX_RECORD_FIXED || var_len as u64 > limits::MAX_VAR_TAIL {
            return WireError::Limit {
                what: "record length",
                value: fixed_len.max(var_len) as u64,
                limit: limits::MAX_RECORD_FIXED,
            };
        }
        WireError::Truncated {
            at: HEADER_LEN,
            needed: fixed_len as usize + var_len as usize,
            have: buf.len() - HEADER_LEN,
        }
    }

    /// Check that the header agrees with the format it names.
    #[inline(always)]
    pub fn check_format(&self, f: &Format) -> Result<()> {
        if self.id == f.id() && self.fixed_len == f.size() as u64 {
            return Ok(());
        }
        Err(self.format_mismatch(f))
    }

    #[cold]
    #[inline(never)]
    fn format_mismatch(&self, f: &Format) -> WireError {
        if self.id != f.id() {
            return WireError::BadHeader(format!(
                "record has id {}, format `{}` is {}",
                self.id,
                f.name(),
                f.id()
            ));
        }
        WireError::BadHeader(format!(
            "fixed length {} but format `{}` has size {}",
            self.fixed_len,
            f.name(),
            f.size()
        ))
    }
}

/// Validate a variable slot against a payload; returns the byte range of its data.
pub fn slot_range(
    slot: &VarSlot,
    payload: &[u8],
    fixed_len: usize,
) -> Result<std::ops::Range<usize>> {
    let (off, len) = slot.read(payload)?;
    let bad = |reason: String| WireError::BadVarField {
        field: slot.path.clone(),
        reason,
    };
    if len == 0 {
        return Ok(0..0);
    }
    let es = slot.elem_size() as u64;
    let bytes = len
        .checked_mul(es.max(1))
        .ok_or_else(|| bad("length overflows".into()))?;
    let end = off
        .checked_add(bytes)
        .ok_or_else(|| bad("offset overflows".into()))?;
    if off < fixed_len as u64 || end > payload.len() as u64 {
        return Err(bad(format!(
            "data {off}..{end} outside the tail {fixed_len}..{}",
            payload.len()
        )));
    }
    if off % slot.elem_align() as u64 != 0 {
        return Err(bad(format!("offset {off} misaligned")));
    }
    Ok(off as usize..end as usize)
}
