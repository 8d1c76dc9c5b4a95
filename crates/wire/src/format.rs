//! The format model: a named list of typed fields at byte offsets inside a
//! fixed-size record, plus the byte order and pointer size of the writer.
//!
//! A format describes memory as the *writer* laid it out (natural data
//! representation), so the same model describes the sender's layout and the
//! receiver's wanted layout; conversion is matching the two by field name.

use std::fmt;
use std::sync::Arc;

use crate::error::{Result, WireError};
use crate::limits;

/// Byte order of the scalars of a format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ByteOrder {
    Little,
    Big,
}

impl ByteOrder {
    /// The byte order of the machine this code runs on.
    pub const NATIVE: ByteOrder = if cfg!(target_endian = "little") {
        ByteOrder::Little
    } else {
        ByteOrder::Big
    };
    pub fn name(self) -> &'static str {
        match self {
            ByteOrder::Little => "little",
            ByteOrder::Big => "big",
        }
    }
}

/// Content-hash identifier of a format: the first 8 bytes (big-endian) of the
/// SHA-256 of its canonical metadata. Two processes that describe the same
/// layout get the same id without talking to a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FormatId(pub u64);

impl fmt::Display for FormatId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// The type of one field.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum FieldType {
    /// Two's-complement integer of 1, 2, 4 or 8 bytes.
    Int { size: u8, signed: bool },
    /// IEEE-754 float of 4 or 8 bytes.
    Float { size: u8 },
    /// One byte of character data (C `char`).
    Char,
    /// One byte, 0 = false, anything else = true.
    Bool,
    /// A fixed number of elements laid out back to back (stride = element size).
    Array { elem: Box<FieldType>, count: u32 },
    /// Another format embedded in place.
    Nested(Arc<Format>),
    /// Variable-length UTF-8 string. The slot is `[offset, len]`, each
    /// `pointer_size` bytes in the format's byte order; the offset is relative to
    /// the start of the record's fixed part and points into the variable tail.
    VarString,
    /// Variable-length array; slot as for [`FieldType::VarString`], len counts
    /// elements. Elements must not themselves contain variable-length fields.
    VarArray(Box<FieldType>),
}

impl FieldType {
    pub const I8: FieldType = FieldType::Int {
        size: 1,
        signed: true,
    };
    pub const I16: FieldType = FieldType::Int {
        size: 2,
        signed: true,
    };
    pub const I32: FieldType = FieldType::Int {
        size: 4,
        signed: true,
    };
    pub const I64: FieldType = FieldType::Int {
        size: 8,
        signed: true,
    };
    pub const U8: FieldType = FieldType::Int {
        size: 1,
        signed: false,
    };
    pub const U16: FieldType = FieldType::Int {
        size: 2,
        signed: false,
    };
    pub const U32: FieldType = FieldType::Int {
        size: 4,
        signed: false,
    };
    pub const U64: FieldType = FieldType::Int {
        size: 8,
        signed: false,
    };
    pub const F32: FieldType = FieldType::Float { size: 4 };
    pub const F64: FieldType = FieldType::Float { size: 8 };

    /// Fixed array of `count` elements.
    pub fn array(elem: FieldType, count: u32) -> FieldType {
        FieldType::Array {
            elem: Box::new(elem),
            count,
        }
    }
    /// Variable-length array.
    pub fn var_array(elem: FieldType) -> FieldType {
        FieldType::VarArray(Box::new(elem))
    }

    /// Size in bytes of this field inside the fixed part, given the format's
    /// pointer size. Saturates instead of overflowing; validation rejects the
    /// result if it exceeds the limits.
    pub fn size(&self, pointer_size: u8) -> u64 {
        match self {
            FieldType::Int { size, .. } | FieldType::Float { size } => *size as u64,
            FieldType::Char | FieldType::Bool => 1,
            FieldType::Array { elem, count } => {
                elem.size(pointer_size).saturating_mul(*count as u64)
            }
            FieldType::Nested(f) => f.size as u64,
            FieldType::VarString | FieldType::VarArray(_) => 2 * pointer_size as u64,
        }
    }

    /// Natural alignment used when laying out the variable tail of this type.
    pub(crate) fn tail_align(&self) -> usize {
        match self {
            FieldType::Int { size, .. } | FieldType::Float { size } => *size as usize,
            FieldType::Char | FieldType::Bool | FieldType::VarString => 1,
            FieldType::Array { elem, .. } | FieldType::VarArray(elem) => elem.tail_align(),
            FieldType::Nested(f) => f.align as usize,
        }
    }

    /// Whether this type (recursively) contains a variable-length part.
    pub fn has_var(&self) -> bool {
        match self {
            FieldType::VarString | FieldType::VarArray(_) => true,
            FieldType::Array { elem, .. } => elem.has_var(),
            FieldType::Nested(f) => f.has_var(),
            _ => false,
        }
    }

    /// Stable, human-readable type name used in JSON dumps (and by the Python reader).
    pub fn type_name(&self) -> String {
        match self {
            FieldType::Int { size, signed } => {
                format!("{}{}", if *signed { "i" } else { "u" }, *size as u32 * 8)
            }
            FieldType::Float { size } => format!("f{}", *size as u32 * 8),
            FieldType::Char => "char".into(),
            FieldType::Bool => "bool".into(),
            FieldType::Array { elem, count } => format!("{}[{}]", elem.type_name(), count),
            FieldType::Nested(f) => format!("struct {}", f.name),
            FieldType::VarString => "string".into(),
            FieldType::VarArray(elem) => format!("{}[]", elem.type_name()),
        }
    }
}

/// One named field.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub name: String,
    pub ty: FieldType,
    /// Byte offset inside the record's fixed part.
    pub offset: u32,
    /// Receiver-side default used when the sender has no field of this name.
    /// Not part of the format's identity (it is local policy, not layout).
    pub default: Option<f64>,
}

/// A complete, validated record format. Build with [`FormatBuilder`] or parse
/// from metadata with [`crate::meta::parse`].
#[derive(Debug, Clone)]
pub struct Format {
    pub(crate) name: String,
    pub(crate) size: u32,
    pub(crate) align: u32,
    pub(crate) byte_order: ByteOrder,
    pub(crate) pointer_size: u8,
    /// Sorted by offset (canonical order).
    pub(crate) fields: Vec<Field>,
    pub(crate) id: FormatId,
    pub(crate) has_var: bool,
    pub(crate) depth: u32,
}

impl PartialEq for Format {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}
impl Eq for Format {}
impl std::hash::Hash for Format {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.id.hash(state)
    }
}

impl Format {
    pub fn name(&self) -> &str {
        &self.name
    }
    /// Size of the fixed part (the record stride).
    pub fn size(&self) -> u32 {
        self.size
    }
    pub fn align(&self) -> u32 {
        self.align
    }
    pub fn byte_order(&self) -> ByteOrder {
        self.byte_order
    }
    pub fn pointer_size(&self) -> u8 {
        self.pointer_size
    }
    /// Fields in canonical (offset) order.
    pub fn fields(&self) -> &[Field] {
        &self.fields
    }
    pub fn id(&self) -> FormatId {
        self.id
    }
    pub fn has_var(&self) -> bool {
        self.has_var
    }
    /// Nesting depth (1 for a format without nested formats).
    pub fn depth(&self) -> u32 {
        self.depth
    }
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// Validate and finish a format: sort fields, check sizes, overlaps and
    /// limits, compute the content-hash id.
    pub(crate) fn finish(
        name: String,
        size: u32,
        align: u32,
        byte_order: ByteOrder,
        pointer_size: u8,
        mut fields: Vec<Field>,
    ) -> Result<Format> {
        let bad = |reason: String| WireError::InvalidFormat {
            format: name.clone(),
            reason,
        };
        if name.is_empty() || name.len() > limits::MAX_NAME {
            return Err(bad("format name empty or too long".into()));
        }
        if !(align.is_power_of_two() && align <= 64) {
            return Err(bad(format!(
                "alignment {align} is not a power of two <= 64"
            )));
        }
        if pointer_size != 4 && pointer_size != 8 {
            return Err(bad(format!("pointer size {pointer_size} is not 4 or 8")));
        }
        if size as u64 > limits::MAX_RECORD_FIXED {
            return Err(WireError::Limit {
                what: "record size",
                value: size as u64,
                limit: limits::MAX_RECORD_FIXED,
            });
        }
        if fields.len() > limits::MAX_FIELDS {
            return Err(WireError::Limit {
                what: "field count",
                value: fields.len() as u64,
                limit: limits::MAX_FIELDS as u64,
            });
        }
        fields.sort_by(|a, b| a.offset.cmp(&b.offset).then_with(|| a.name.cmp(&b.name)));
        let mut depth = 1;
        let mut has_var = false;
        let mut end_prev: u64 = 0;
        for (i, f) in fields.iter().enumerate() {
            if f.name.is_empty() || f.name.len() > limits::MAX_NAME {
                return Err(bad("field name empty or too long".into()));
            }
            if fields[..i].iter().any(|g| g.name == f.name) {
                return Err(bad(format!("duplicate field `{}`", f.name)));
            }
            check_type(&f.ty, &name, &f.name)?;
            if let Some(d) = field_depth(&f.ty) {
                depth = depth.max(d + 1);
            }
            if depth > limits::MAX_DEPTH {
                return Err(WireError::Limit {
                    what: "nesting depth",
                    value: depth as u64,
                    limit: limits::MAX_DEPTH as u64,
                });
            }
            if let FieldType::Nested(n) = strip_array(&f.ty) {
                if n.pointer_size != pointer_size {
                    return Err(bad(format!(
                        "nested field `{}` has a different pointer size",
                        f.name
                    )));
                }
            }
            has_var |= f.ty.has_var();
            let fsize = f.ty.size(pointer_size);
            // The size saturates at u64::MAX for absurd arrays: the end must
            // not wrap past it (found by fuzzing the record decoder).
            let end = (f.offset as u64).saturating_add(fsize);
            if end > size as u64 {
                return Err(bad(format!(
                    "field `{}` ends at {} beyond record size {}",
                    f.name, end, size
                )));
            }
            if (f.offset as u64) < end_prev {
                return Err(bad(format!(
                    "field `{}` overlaps the previous field",
                    f.name
                )));
            }
            end_prev = end;
        }
        let mut fmt = Format {
            name,
            size,
            align,
            byte_order,
            pointer_size,
            fields,
            id: FormatId(0),
            has_var,
            depth,
        };
        // Nested formats are serialised inline, so a format that reuses a nested
        // format many times at many levels could have exponentially large
        // metadata; refusing it here keeps every accepted format sendable.
        let meta = crate::meta::serialize(&fmt);
        if meta.len() > limits::MAX_META {
            return Err(WireError::Limit {
                what: "metadata size",
                value: meta.len() as u64,
                limit: limits::MAX_META as u64,
            });
        }
        fmt.id = crate::meta::id_of_bytes(&meta);
        Ok(fmt)
    }
}

fn strip_array(t: &FieldType) -> &FieldType {
    match t {
        FieldType::Array { elem, .. } | FieldType::VarArray(elem) => strip_array(elem),
        other => other,
    }
}

fn field_depth(t: &FieldType) -> Option<u32> {
    match strip_array(t) {
        FieldType::Nested(f) => Some(f.depth),
        _ => None,
    }
}

fn check_type(t: &FieldType, fmt: &str, field: &str) -> Result<()> {
    let bad = |reason: &str| WireError::InvalidFormat {
        format: fmt.to_string(),
        reason: format!("field `{field}`: {reason}"),
    };
    match t {
        FieldType::Int { size, .. } if !matches!(size, 1 | 2 | 4 | 8) => {
            Err(bad("integer size must be 1, 2, 4 or 8"))
        }
        FieldType::Float { size } if !matches!(size, 4 | 8) => {
            Err(bad("float size must be 4 or 8"))
        }
        FieldType::Array { elem, count } => {
            if *count == 0 {
                return Err(bad("array count must be >= 1"));
            }
            if matches!(**elem, FieldType::VarString | FieldType::VarArray(_)) {
                // Allowed would be fine for the format, but keeping var slots out of
                // fixed arrays bounds the number of var parts by the field count.
                return Err(bad("arrays of variable-length elements are not supported"));
            }
            check_type(elem, fmt, field)
        }
        FieldType::VarArray(elem) => {
            if elem.has_var() {
                return Err(bad("variable-length array elements must be fixed-size"));
            }
            check_type(elem, fmt, field)
        }
        _ => Ok(()),
    }
}

/// C scalar types, laid out according to an [`Arch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CType {
    Char,
    SChar,
    UChar,
    Bool,
    Short,
    UShort,
    Int,
    UInt,
    Long,
    ULong,
    LongLong,
    ULongLong,
    Float,
    Double,
}

/// An ABI description: byte order, sizes and alignments of C types. Used to lay
/// out formats as a given architecture's C compiler would, which is how the
/// foreign-architecture writer produces test vectors on a little-endian host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arch {
    pub name: &'static str,
    pub byte_order: ByteOrder,
    pub long_size: u8,
    pub pointer_size: u8,
    /// Alignment of 8-byte scalars (double, long long) inside structs.
    pub align8: u8,
}

impl Arch {
    /// x86-64 / aarch64 Linux (LP64, little-endian, natural alignment).
    pub const X86_64: Arch = Arch {
        name: "x86_64",
        byte_order: ByteOrder::Little,
        long_size: 8,
        pointer_size: 8,
        align8: 8,
    };
    /// i386 System V: ILP32, little-endian, 8-byte scalars 4-aligned in structs.
    pub const I386: Arch = Arch {
        name: "i386",
        byte_order: ByteOrder::Little,
        long_size: 4,
        pointer_size: 4,
        align8: 4,
    };
    /// A 32-bit big-endian machine with 4-byte `long` and 4-byte double
    /// alignment (m68k-/old-SPARC-like).
    pub const BE32: Arch = Arch {
        name: "be32",
        byte_order: ByteOrder::Big,
        long_size: 4,
        pointer_size: 4,
        align8: 4,
    };
    /// 64-bit big-endian (ppc64/s390x-like), natural alignment.
    pub const BE64: Arch = Arch {
        name: "be64",
        byte_order: ByteOrder::Big,
        long_size: 8,
        pointer_size: 8,
        align8: 8,
    };
    /// The architecture this code was compiled for (LP64 assumed on 64-bit).
    pub const NATIVE: Arch = Arch {
        name: "native",
        byte_order: ByteOrder::NATIVE,
        long_size: std::mem::size_of::<std::ffi::c_long>() as u8,
        pointer_size: std::mem::size_of::<usize>() as u8,
        align8: std::mem::align_of::<f64>() as u8,
    };

    /// (field type, size, alignment) of a C type on this architecture.
    pub fn c_type(&self, t: CType) -> (FieldType, u32) {
        let int = |size: u8, signed: bool| FieldType::Int { size, signed };
        let ty = match t {
            CType::Char => FieldType::Char,
            CType::Bool => FieldType::Bool,
            CType::SChar => int(1, true),
            CType::UChar => int(1, false),
            CType::Short => int(2, true),
            CType::UShort => int(2, false),
            CType::Int => int(4, true),
            CType::UInt => int(4, false),
            CType::Long => int(self.long_size, true),
            CType::ULong => int(self.long_size, false),
            CType::LongLong => int(8, true),
            CType::ULongLong => int(8, false),
            CType::Float => FieldType::F32,
            CType::Double => FieldType::F64,
        };
        let align = self.align_of(&ty);
        (ty, align)
    }

    fn align_of(&self, t: &FieldType) -> u32 {
        match t {
            FieldType::Int { size: 8, .. } | FieldType::Float { size: 8 } => self.align8 as u32,
            FieldType::Int { size, .. } | FieldType::Float { size } => *size as u32,
            FieldType::Char | FieldType::Bool => 1,
            FieldType::Array { elem, .. } => self.align_of(elem),
            FieldType::Nested(f) => f.align,
            FieldType::VarString | FieldType::VarArray(_) => self.pointer_size as u32,
        }
    }
}

/// Builds a [`Format`]. Two styles, which can be mixed:
/// * explicit: [`FormatBuilder::field_at`] with offsets and [`FormatBuilder::size`]
///   (what a C field list or the derive macro gives: the compiler already laid it out);
/// * laid out: [`FormatBuilder::field`] / [`FormatBuilder::c_field`] append at the
///   next offset aligned by the builder's [`Arch`] rules, like a C compiler would.
#[derive(Debug, Clone)]
pub struct FormatBuilder {
    name: String,
    arch: Arch,
    fields: Vec<Field>,
    next: u64,
    align: u32,
    size: Option<u32>,
    explicit_align: Option<u32>,
}

impl FormatBuilder {
    pub fn new(name: impl Into<String>) -> Self {
        Self::with_arch(name, Arch::NATIVE)
    }
    pub fn with_arch(name: impl Into<String>, arch: Arch) -> Self {
        FormatBuilder {
            name: name.into(),
            arch,
            fields: Vec::new(),
            next: 0,
            align: 1,
            size: None,
            explicit_align: None,
        }
    }
    /// Append a field at the next offset aligned for its type on the builder's arch.
    pub fn field(mut self, name: impl Into<String>, ty: FieldType) -> Self {
        let a = self.arch.align_of(&ty) as u64;
        let off = self.next.div_ceil(a).saturating_mul(a);
        self.align = self.align.max(a as u32);
        self.next = off.saturating_add(ty.size(self.arch.pointer_size));
        self.fields.push(Field {
            name: name.into(),
            ty,
            offset: off.min(u32::MAX as u64) as u32,
            default: None,
        });
        self
    }
    /// Append a C scalar (its size depends on the arch, e.g. `long`).
    pub fn c_field(self, name: impl Into<String>, t: CType) -> Self {
        let (ty, _) = self.arch.c_type(t);
        self.field(name, ty)
    }
    /// Append a fixed array of a C scalar.
    pub fn c_array(self, name: impl Into<String>, t: CType, count: u32) -> Self {
        let (ty, _) = self.arch.c_type(t);
        self.field(name, FieldType::array(ty, count))
    }
    /// Place a field at an explicit offset (the caller laid the record out).
    pub fn field_at(mut self, name: impl Into<String>, ty: FieldType, offset: u32) -> Self {
        let a = self.arch.align_of(&ty);
        self.align = self.align.max(a);
        self.next = self
            .next
            .max((offset as u64).saturating_add(ty.size(self.arch.pointer_size)));
        self.fields.push(Field {
            name: name.into(),
            ty,
            offset,
            default: None,
        });
        self
    }
    /// Declare a default for the most recently added field (used by a receiver
    /// when the sender's format lacks the field).
    pub fn default(mut self, value: f64) -> Self {
        if let Some(f) = self.fields.last_mut() {
            f.default = Some(value);
        }
        self
    }
    /// Fix the record size (otherwise: end of last field rounded up to alignment).
    pub fn size(mut self, size: u32) -> Self {
        self.size = Some(size);
        self
    }
    /// Fix the record alignment (otherwise: largest field alignment).
    pub fn align(mut self, align: u32) -> Self {
        self.explicit_align = Some(align);
        self
    }
    pub fn build(self) -> Result<Arc<Format>> {
        let align = self.explicit_align.unwrap_or(self.align);
        let size = match self.size {
            Some(s) => s as u64,
            None => {
                let a = align.max(1) as u64;
                self.next.div_ceil(a).saturating_mul(a)
            }
        };
        if size > u32::MAX as u64 {
            return Err(WireError::Limit {
                what: "record size",
                value: size,
                limit: limits::MAX_RECORD_FIXED,
            });
        }
        Format::finish(
            self.name,
            size as u32,
            align,
            self.arch.byte_order,
            self.arch.pointer_size,
            self.fields,
        )
        .map(Arc::new)
    }
}
