//! C API of `gridwire-wire`; the contract is `crates/wire/include/gridwire.h`.
//!
//! Every exported function runs its body inside [`guard`], which turns a
//! `WireError` into a negative status plus a thread-local message and a
//! panic (a bug) into `GW_ERR_INTERNAL`, so nothing unwinds into C.
//! Formats are owned by their registry (boxed, so the `gw_format*` handed
//! to C stays put while the registry grows); a registry only accepts format
//! pointers it owns, so a stray pointer is an error rather than a crash.

#![allow(clippy::missing_safety_doc)] // the safety contract is the C header

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

#[cfg(feature = "bench")]
mod bench_hook;
mod decode;
pub use decode::{
    gw_decode, gw_decode_in_place, gw_decoder_decode, gw_decoder_free, gw_decoder_new, GwDecoder,
};

use gridwire_wire::format::{Arch, ByteOrder};
use gridwire_wire::record::{var_slots, VarSlot};
use gridwire_wire::value::{read_value, to_json, Value};
use gridwire_wire::{
    Encoder, FieldType, Format, FormatBuilder, FormatId, OverflowPolicy, RecordRef, Registry,
    WireError,
};

pub const GW_OK: c_int = 0;
pub const GW_ERR_USAGE: c_int = -1;
pub const GW_ERR_TRUNCATED: c_int = -2;
pub const GW_ERR_INVALID: c_int = -3;
pub const GW_ERR_UNKNOWN_FORMAT: c_int = -4;
pub const GW_ERR_MISMATCH: c_int = -5;
pub const GW_ERR_OVERFLOW: c_int = -6;
pub const GW_ERR_LIMIT: c_int = -7;
pub const GW_ERR_SPACE: c_int = -8;
pub const GW_ERR_INTERNAL: c_int = -9;

pub const GW_BIG_ENDIAN: c_uint = 1;
pub const GW_LITTLE_ENDIAN: c_uint = 2;
pub const GW_PTR32: c_uint = 4;

/// An error on its way to C: a status code and a message.
pub(crate) struct CErr(pub(crate) c_int, pub(crate) String);

impl From<WireError> for CErr {
    fn from(e: WireError) -> Self {
        let code = match &e {
            WireError::Truncated { .. } => GW_ERR_TRUNCATED,
            WireError::BadMagic { .. }
            | WireError::InvalidFormat { .. }
            | WireError::NotCanonical
            | WireError::BadVarField { .. }
            | WireError::BadHeader(_) => GW_ERR_INVALID,
            WireError::Limit { .. } => GW_ERR_LIMIT,
            WireError::UnknownFormat(_) => GW_ERR_UNKNOWN_FORMAT,
            WireError::TypeMismatch { .. } => GW_ERR_MISMATCH,
            WireError::Overflow { .. } => GW_ERR_OVERFLOW,
            WireError::NotViewable(_) | WireError::Usage(_) | WireError::Io(_) => GW_ERR_USAGE,
        };
        CErr(code, e.to_string())
    }
}

pub(crate) fn usage(msg: impl Into<String>) -> CErr {
    CErr(GW_ERR_USAGE, msg.into())
}

pub(crate) type CResult<T> = Result<T, CErr>;

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_error(msg: &str) {
    let c = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = c);
}

/// Run an FFI body: errors become status codes with a message, panics become
/// `GW_ERR_INTERNAL` (never unwound across the C boundary).
pub(crate) fn guard(f: impl FnOnce() -> CResult<()>) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        // Success leaves the thread's message alone: building it cost an
        // allocation per call on the decode path (header: the message of
        // the last *failed* call).
        Ok(Ok(())) => GW_OK,
        Ok(Err(CErr(code, msg))) => {
            set_error(&msg);
            code
        }
        Err(_) => {
            set_error("internal error (panic caught at the C boundary)");
            GW_ERR_INTERNAL
        }
    }
}

/// `gw_format`: a format plus the C strings its accessors hand out.
pub struct GwFormat {
    pub(crate) fmt: Arc<Format>,
    name: CString,
    /// (name, type name, element size) per field, offset order.
    fields: Vec<(CString, CString, usize)>,
    pub(crate) slots: Vec<VarSlot>,
}

/// `gw_registry`.
pub struct GwRegistry {
    pub(crate) reg: Registry,
    // Boxed so the addresses handed to C survive the Vec growing.
    #[allow(clippy::vec_box)]
    formats: Vec<Box<GwFormat>>,
    by_id: HashMap<FormatId, usize>,
    /// Addresses of the boxed formats, to refuse pointers we do not own.
    owned: HashSet<usize>,
    by_name: HashMap<String, Arc<Format>>,
    pub(crate) scratch: Vec<u8>,
    text: CString,
    /// `gw_decode`'s last (wire, native) pair and its plan.
    pub(crate) hot: Option<decode::Hot>,
    /// Bumped when the plans are rebuilt (overflow policy), so cached
    /// `Hot` entries (here and in decoders) are rebuilt too.
    pub(crate) generation: u64,
}

/// `gw_encoder`.
pub struct GwEncoder {
    enc: Encoder,
    slots: Vec<VarSlot>,
    native_slots: bool,
}

/// Type name in the C field-list syntax, and the size of one element.
fn c_type_name(t: &FieldType, ptr: u8) -> (String, usize) {
    match t {
        FieldType::Int { size, signed: true } => ("integer".into(), *size as usize),
        FieldType::Int { size, .. } => ("unsigned integer".into(), *size as usize),
        FieldType::Float { size } => ("float".into(), *size as usize),
        FieldType::Char => ("char".into(), 1),
        FieldType::Bool => ("boolean".into(), 1),
        FieldType::VarString => ("string".into(), 2 * ptr as usize),
        FieldType::Nested(f) => (f.name().to_string(), f.size() as usize),
        FieldType::Array { elem, count } => {
            let (n, s) = c_type_name(elem, ptr);
            // "T[2][3]": the outer count comes first, as in C.
            match n.find('[') {
                Some(i) => (format!("{}[{count}]{}", &n[..i], &n[i..]), s),
                None => (format!("{n}[{count}]"), s),
            }
        }
        FieldType::VarArray(elem) => {
            let (n, s) = c_type_name(elem, ptr);
            (format!("{n}[]"), s)
        }
    }
}

/// Parse a C field-list type name with its element size.
fn parse_type(
    ty: &str,
    size: usize,
    known: &HashMap<String, Arc<Format>>,
    ptr: u8,
) -> CResult<FieldType> {
    let ty = ty.trim();
    let (base, dims) = match ty.find('[') {
        Some(i) => (ty[..i].trim(), &ty[i..]),
        None => (ty, ""),
    };
    let bad = |why: &str| CErr(GW_ERR_INVALID, format!("type `{ty}`: {why}"));
    let int_size = |s: usize| -> CResult<u8> {
        match s {
            1 | 2 | 4 | 8 => Ok(s as u8),
            _ => Err(bad("integer size must be 1, 2, 4 or 8")),
        }
    };
    let mut t = match base {
        "integer" | "int" | "signed" | "signed integer" => FieldType::Int {
            size: int_size(size)?,
            signed: true,
        },
        "unsigned integer" | "unsigned" | "uint" => FieldType::Int {
            size: int_size(size)?,
            signed: false,
        },
        "float" | "double" => match (base, size) {
            (_, 4) if base == "float" => FieldType::F32,
            (_, 8) => FieldType::F64,
            _ => return Err(bad("float size must be 4 or 8 (double: 8)")),
        },
        "char" if size == 1 => FieldType::Char,
        "boolean" | "bool" if size == 1 => FieldType::Bool,
        "char" | "boolean" | "bool" => return Err(bad("size must be 1")),
        "string" => FieldType::VarString,
        name => {
            let f = known.get(name).ok_or_else(|| {
                bad("unknown type (not a basic type nor a format registered earlier)")
            })?;
            if f.size() as usize != size {
                return Err(bad(&format!(
                    "size {size} but format `{name}` has size {}",
                    f.size()
                )));
            }
            FieldType::Nested(f.clone())
        }
    };
    // Dimensions: "[2][3]" is 2 arrays of 3, so build from the innermost out.
    let mut parts = Vec::new();
    let mut rest = dims;
    while !rest.is_empty() {
        let end = rest.find(']').ok_or_else(|| bad("unclosed `[`"))?;
        if !rest.starts_with('[') {
            return Err(bad("expected `[`"));
        }
        parts.push(rest[1..end].trim());
        rest = rest[end + 1..].trim_start();
    }
    for (i, d) in parts.iter().enumerate().rev() {
        if d.is_empty() {
            if i != 0 {
                return Err(bad("only the outermost dimension may be `[]`"));
            }
            t = FieldType::var_array(t);
        } else {
            let n: u32 = d.parse().map_err(|_| bad("array count is not a number"))?;
            t = FieldType::array(t, n);
        }
    }
    let _ = ptr;
    Ok(t)
}

fn wrap_format(fmt: Arc<Format>) -> CResult<GwFormat> {
    let ptr = fmt.pointer_size();
    let mut fields = Vec::with_capacity(fmt.fields().len());
    for f in fmt.fields() {
        let (ty, size) = c_type_name(&f.ty, ptr);
        fields.push((
            CString::new(f.name.clone()).map_err(|_| usage("field name contains NUL"))?,
            CString::new(ty).map_err(|_| usage("type name contains NUL"))?,
            size,
        ));
    }
    Ok(GwFormat {
        name: CString::new(fmt.name()).map_err(|_| usage("format name contains NUL"))?,
        slots: var_slots(&fmt)?,
        fields,
        fmt,
    })
}

/// True if var slots of `f` are laid out as this process's `gw_slice`.
pub(crate) fn native_slices(f: &Format) -> bool {
    f.byte_order() == ByteOrder::NATIVE
        && f.pointer_size() as usize == std::mem::size_of::<*const c_void>()
}

impl GwRegistry {
    /// Add (or find) a format and hand out its stable pointer.
    fn adopt(&mut self, fmt: Arc<Format>) -> CResult<*const GwFormat> {
        let id = fmt.id();
        if let Some(&i) = self.by_id.get(&id) {
            return Ok(&*self.formats[i] as *const GwFormat);
        }
        let w = Box::new(wrap_format(fmt.clone())?);
        let p = &*w as *const GwFormat;
        self.reg.register(fmt.clone());
        self.by_name.insert(fmt.name().to_string(), fmt);
        self.by_id.insert(id, self.formats.len());
        self.owned.insert(p as usize);
        self.formats.push(w);
        Ok(p)
    }

    pub(crate) fn format(&self, p: *const GwFormat) -> CResult<&GwFormat> {
        if !self.owned.contains(&(p as usize)) {
            return Err(usage("format does not belong to this registry"));
        }
        // SAFETY: `p` is the address of one of our boxed formats (checked
        // above), which live as long as the registry and are never moved.
        Ok(unsafe { &*p })
    }

    fn record<'a>(&self, buf: &'a [u8]) -> CResult<(RecordRef<'a>, usize, Arc<Format>)> {
        let (rec, used) = RecordRef::parse(buf)?;
        let f = self
            .reg
            .get(rec.id)
            .cloned()
            .ok_or(WireError::UnknownFormat(rec.id))?;
        rec.check_format(&f)?;
        Ok((rec, used, f))
    }
}

/// Borrow a C buffer as a slice; NULL is allowed only for length 0.
///
/// # Safety
/// `p` must be valid for reads of `len` bytes for `'a` (C caller contract).
pub(crate) unsafe fn bytes<'a>(p: *const c_void, len: usize) -> CResult<&'a [u8]> {
    if len == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(usage("NULL buffer with non-zero length"));
    }
    // SAFETY: non-null, and the caller promises `len` readable bytes.
    Ok(unsafe { std::slice::from_raw_parts(p as *const u8, len) })
}

/// # Safety
/// `p` must be NULL or point to a NUL-terminated string.
unsafe fn cstr<'a>(p: *const c_char, what: &str) -> CResult<&'a str> {
    if p.is_null() {
        return Err(usage(format!("{what} is NULL")));
    }
    // SAFETY: non-null NUL-terminated string per the caller contract.
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .map_err(|_| usage(format!("{what} is not UTF-8")))
}

/// # Safety
/// `p` must be NULL or valid for a write of `T`.
pub(crate) unsafe fn put<T>(p: *mut T, v: T) {
    if !p.is_null() {
        // SAFETY: non-null and writable per the caller contract.
        unsafe { p.write(v) }
    }
}

pub(crate) fn reg_mut<'a>(p: *mut GwRegistry) -> CResult<&'a mut GwRegistry> {
    // SAFETY: a non-null registry pointer was created by gw_registry_new
    // and not yet freed (C caller contract); it is not shared across threads.
    unsafe { p.as_mut() }.ok_or_else(|| usage("registry is NULL"))
}

pub(crate) fn fmt_ref<'a>(p: *const GwFormat) -> CResult<&'a GwFormat> {
    // SAFETY: a non-null format pointer came from a live registry (C caller
    // contract: formats live as long as their registry).
    unsafe { p.as_ref() }.ok_or_else(|| usage("format is NULL"))
}

#[no_mangle]
pub extern "C" fn gw_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

#[no_mangle]
pub unsafe extern "C" fn gw_registry_new(out: *mut *mut GwRegistry) -> c_int {
    guard(|| {
        if out.is_null() {
            return Err(usage("out is NULL"));
        }
        let r = Box::new(GwRegistry {
            reg: Registry::new(),
            formats: Vec::new(),
            by_id: HashMap::new(),
            owned: HashSet::new(),
            by_name: HashMap::new(),
            scratch: Vec::new(),
            text: CString::default(),
            hot: None,
            generation: 0,
        });
        // SAFETY: `out` is non-null and writable (C caller contract).
        unsafe { out.write(Box::into_raw(r)) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn gw_registry_set_saturate(reg: *mut GwRegistry, saturate: c_int) -> c_int {
    guard(|| {
        let r = reg_mut(reg)?;
        // Plans are compiled with the policy, so start a fresh cache with it
        // and re-register the formats already known.
        let policy = if saturate != 0 {
            OverflowPolicy::Saturate
        } else {
            OverflowPolicy::Error
        };
        let mut fresh = Registry::with_policy(policy);
        for f in &r.formats {
            fresh.register(f.fmt.clone());
        }
        r.reg = fresh;
        r.hot = None;
        r.generation += 1;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn gw_registry_free(reg: *mut GwRegistry) {
    if !reg.is_null() {
        // SAFETY: created by Box::into_raw in gw_registry_new and, per the
        // C contract, freed once. Dropping cannot panic (plain containers).
        drop(unsafe { Box::from_raw(reg) });
    }
}

#[no_mangle]
pub unsafe extern "C" fn gw_format_register(
    reg: *mut GwRegistry,
    name: *const c_char,
    fields: *const GwField,
    nfields: usize,
    record_size: usize,
    flags: c_uint,
    out: *mut *const GwFormat,
) -> c_int {
    guard(|| {
        let r = reg_mut(reg)?;
        // SAFETY: C contract: `name` is a NUL-terminated string.
        let name = unsafe { cstr(name, "name") }?;
        if nfields > gridwire_wire::limits::MAX_FIELDS {
            return Err(usage("too many fields"));
        }
        let list: &[GwField] = if nfields == 0 {
            &[]
        } else if fields.is_null() {
            return Err(usage("fields is NULL"));
        } else {
            // SAFETY: C contract: `fields` points to `nfields` entries.
            unsafe { std::slice::from_raw_parts(fields, nfields) }
        };
        if flags & !(GW_BIG_ENDIAN | GW_LITTLE_ENDIAN | GW_PTR32) != 0
            || flags & (GW_BIG_ENDIAN | GW_LITTLE_ENDIAN) == (GW_BIG_ENDIAN | GW_LITTLE_ENDIAN)
        {
            return Err(usage("unknown or contradictory flags"));
        }
        let mut arch = Arch::NATIVE;
        if flags & GW_BIG_ENDIAN != 0 {
            arch.byte_order = ByteOrder::Big;
        }
        if flags & GW_LITTLE_ENDIAN != 0 {
            arch.byte_order = ByteOrder::Little;
        }
        if flags & GW_PTR32 != 0 {
            arch.pointer_size = 4;
        }
        let size =
            u32::try_from(record_size).map_err(|_| CErr(GW_ERR_LIMIT, "record size".into()))?;
        let mut b = FormatBuilder::with_arch(name, arch).size(size);
        for (i, f) in list.iter().enumerate() {
            // SAFETY: C contract: each entry's strings are NUL-terminated.
            let fname = unsafe { cstr(f.name, "field name") }?;
            // SAFETY: as above.
            let tname = unsafe { cstr(f.ty, "field type") }?;
            let ty = parse_type(tname, f.size, &r.by_name, arch.pointer_size)
                .map_err(|CErr(c, m)| CErr(c, format!("field {i} `{fname}`: {m}")))?;
            let off = u32::try_from(f.offset)
                .map_err(|_| CErr(GW_ERR_INVALID, format!("field `{fname}`: offset")))?;
            b = b.field_at(fname, ty, off);
        }
        let fmt = b.build()?;
        let p = r.adopt(fmt)?;
        // SAFETY: C contract: `out` is NULL or writable.
        unsafe { put(out, p) };
        Ok(())
    })
}

/// The C `gw_field` struct.
#[repr(C)]
pub struct GwField {
    pub name: *const c_char,
    pub ty: *const c_char,
    pub size: usize,
    pub offset: usize,
}

/// The C `gw_slice` struct.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct GwSlice {
    pub ptr: *const c_void,
    pub len: usize,
}

#[no_mangle]
pub unsafe extern "C" fn gw_format_metadata(
    fmt: *const GwFormat,
    buf: *mut c_void,
    cap: usize,
    len: *mut usize,
) -> c_int {
    guard(|| {
        let f = fmt_ref(fmt)?;
        let m = gridwire_wire::meta::serialize(&f.fmt);
        // SAFETY: C contract: `len` is NULL or writable.
        unsafe { put(len, m.len()) };
        if m.len() > cap {
            return Err(CErr(
                GW_ERR_SPACE,
                format!("metadata needs {} bytes", m.len()),
            ));
        }
        if buf.is_null() {
            return Err(usage("buf is NULL"));
        }
        // SAFETY: `buf` has room for `cap >= m.len()` bytes (C contract).
        unsafe { std::ptr::copy_nonoverlapping(m.as_ptr(), buf as *mut u8, m.len()) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn gw_registry_learn(
    reg: *mut GwRegistry,
    meta: *const c_void,
    len: usize,
    out: *mut *const GwFormat,
) -> c_int {
    guard(|| {
        let r = reg_mut(reg)?;
        // SAFETY: C contract: `meta` has `len` readable bytes.
        let m = unsafe { bytes(meta, len) }?;
        let f = gridwire_wire::meta::parse(m)?;
        let p = r.adopt(f)?;
        // SAFETY: `out` is NULL or writable.
        unsafe { put(out, p) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn gw_format_id(fmt: *const GwFormat) -> u64 {
    catch_unwind(|| fmt_ref(fmt).map(|f| f.fmt.id().0).unwrap_or(0)).unwrap_or(0)
}

#[no_mangle]
pub unsafe extern "C" fn gw_format_name(fmt: *const GwFormat) -> *const c_char {
    catch_unwind(|| {
        fmt_ref(fmt)
            .map(|f| f.name.as_ptr())
            .unwrap_or(std::ptr::null())
    })
    .unwrap_or(std::ptr::null())
}

#[no_mangle]
pub unsafe extern "C" fn gw_format_size(fmt: *const GwFormat) -> usize {
    catch_unwind(|| fmt_ref(fmt).map(|f| f.fmt.size() as usize).unwrap_or(0)).unwrap_or(0)
}

#[no_mangle]
pub unsafe extern "C" fn gw_format_nfields(fmt: *const GwFormat) -> usize {
    catch_unwind(|| fmt_ref(fmt).map(|f| f.fields.len()).unwrap_or(0)).unwrap_or(0)
}

#[no_mangle]
pub unsafe extern "C" fn gw_format_field(
    fmt: *const GwFormat,
    i: usize,
    out: *mut GwField,
) -> c_int {
    guard(|| {
        let f = fmt_ref(fmt)?;
        let (name, ty, size) = f
            .fields
            .get(i)
            .ok_or_else(|| usage(format!("field index {i} out of range")))?;
        if out.is_null() {
            return Err(usage("out is NULL"));
        }
        let v = GwField {
            name: name.as_ptr(),
            ty: ty.as_ptr(),
            size: *size,
            offset: f.fmt.fields()[i].offset as usize,
        };
        // SAFETY: `out` is non-null and writable (C contract).
        unsafe { out.write(v) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn gw_encoder_new(fmt: *const GwFormat, out: *mut *mut GwEncoder) -> c_int {
    guard(|| {
        let f = fmt_ref(fmt)?;
        if out.is_null() {
            return Err(usage("out is NULL"));
        }
        let e = Box::new(GwEncoder {
            enc: Encoder::new(f.fmt.clone())?,
            slots: f.slots.clone(),
            native_slots: native_slices(&f.fmt),
        });
        // SAFETY: `out` is non-null and writable (C contract).
        unsafe { out.write(Box::into_raw(e)) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn gw_encoder_free(enc: *mut GwEncoder) {
    if !enc.is_null() {
        // SAFETY: created by Box::into_raw in gw_encoder_new, freed once (C contract).
        drop(unsafe { Box::from_raw(enc) });
    }
}

/// Run the encoder on a C struct; calls `f` with the gather list.
///
/// # Safety
/// `rec` must point to `format size` readable bytes whose `gw_slice`s point
/// to readable memory of the stated lengths (C contract).
unsafe fn encode_with(
    enc: *mut GwEncoder,
    rec: *const c_void,
    f: impl FnOnce(&[std::io::IoSlice<'_>]) -> CResult<()>,
) -> CResult<()> {
    // SAFETY: non-null encoder from gw_encoder_new (C contract).
    let e = unsafe { enc.as_mut() }.ok_or_else(|| usage("encoder is NULL"))?;
    let size = e.enc.format().size() as usize;
    // SAFETY: C contract: `rec` has `size` readable bytes.
    let fixed = unsafe { bytes(rec, size) }?;
    if !e.slots.is_empty() && !e.native_slots {
        return Err(usage(
            "variable-length fields can only be encoded from this machine's layout",
        ));
    }
    let mut parts: Vec<&[u8]> = Vec::with_capacity(e.slots.len());
    for s in &e.slots {
        const N: usize = std::mem::size_of::<GwSlice>();
        let mut sl = [0u8; N];
        sl.copy_from_slice(&fixed[s.offset..s.offset + N]);
        // SAFETY: GwSlice is plain old data; `sl` holds its bytes as C wrote them.
        let v: GwSlice = unsafe { std::mem::transmute(sl) };
        let n = v
            .len
            .checked_mul(s.elem_size())
            .ok_or_else(|| usage(format!("`{}`: length overflows", s.path)))?;
        // SAFETY: C contract: the slice points to `len` readable elements.
        parts.push(unsafe { bytes(v.ptr, n) }?);
    }
    let iov = e.enc.encode(fixed, &parts)?;
    f(&iov)
}

#[no_mangle]
pub unsafe extern "C" fn gw_encode(
    enc: *mut GwEncoder,
    rec: *const c_void,
    iov: *mut libc::iovec,
    cap: usize,
    iovcnt: *mut usize,
) -> c_int {
    guard(|| {
        // SAFETY: C contract for `rec` (see encode_with).
        unsafe {
            encode_with(enc, rec, |v| {
                put(iovcnt, v.len());
                if v.len() > cap {
                    return Err(CErr(GW_ERR_SPACE, format!("{} iovecs needed", v.len())));
                }
                if iov.is_null() {
                    return Err(usage("iov is NULL"));
                }
                for (i, s) in v.iter().enumerate() {
                    // SAFETY: `iov` has room for `cap >= v.len()` entries. The
                    // slices point into the encoder or the caller's data, which
                    // outlive this call as documented in the header.
                    iov.add(i).write(libc::iovec {
                        iov_base: s.as_ptr() as *mut c_void,
                        iov_len: s.len(),
                    });
                }
                Ok(())
            })
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn gw_encode_to_buffer(
    enc: *mut GwEncoder,
    rec: *const c_void,
    buf: *mut c_void,
    cap: usize,
    len: *mut usize,
) -> c_int {
    guard(|| {
        // SAFETY: C contract for `rec` (see encode_with).
        unsafe {
            encode_with(enc, rec, |v| {
                let total: usize = v.iter().map(|s| s.len()).sum();
                put(len, total);
                if total > cap {
                    return Err(CErr(GW_ERR_SPACE, format!("{total} bytes needed")));
                }
                if buf.is_null() {
                    return Err(usage("buf is NULL"));
                }
                let mut at = 0;
                for s in v {
                    // SAFETY: `buf` has room for `cap >= total` bytes.
                    std::ptr::copy_nonoverlapping(s.as_ptr(), (buf as *mut u8).add(at), s.len());
                    at += s.len();
                }
                Ok(())
            })
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn gw_record_format(
    reg: *mut GwRegistry,
    buf: *const c_void,
    len: usize,
    out: *mut *const GwFormat,
) -> c_int {
    guard(|| {
        let r = reg_mut(reg)?;
        // SAFETY: C contract: `buf` has `len` readable bytes.
        let input = unsafe { bytes(buf, len) }?;
        let (rec, _, _) = r.record(input)?;
        let i = *r
            .by_id
            .get(&rec.id)
            .ok_or(WireError::UnknownFormat(rec.id))?;
        let p = &*r.formats[i] as *const GwFormat;
        // SAFETY: NULL or writable.
        unsafe { put(out, p) };
        Ok(())
    })
}

/// Walk "a.b[2].c" through a reflected value.
fn lookup<'v>(v: &'v Value, path: &str) -> CResult<&'v Value> {
    let mut cur = v;
    let mut rest = path;
    let miss = || usage(format!("no field `{path}`"));
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']').ok_or_else(miss)?;
            let i: usize = r[..end].parse().map_err(|_| miss())?;
            cur = match cur {
                Value::Array(xs) => xs.get(i).ok_or_else(miss)?,
                _ => return Err(miss()),
            };
            rest = &r[end + 1..];
        } else {
            let r = rest.strip_prefix('.').unwrap_or(rest);
            let end = r.find(['.', '[']).unwrap_or(r.len());
            cur = cur.get(&r[..end]).ok_or_else(miss)?;
            rest = &r[end..];
        }
    }
    Ok(cur)
}

/// The C `gw_value` struct.
#[repr(C)]
pub struct GwValue {
    pub kind: c_int,
    pub i: i64,
    pub u: u64,
    pub f: f64,
    pub str: *const c_char,
    pub str_len: usize,
    pub count: usize,
}

#[no_mangle]
pub unsafe extern "C" fn gw_record_get(
    reg: *mut GwRegistry,
    buf: *const c_void,
    len: usize,
    path: *const c_char,
    out: *mut GwValue,
) -> c_int {
    guard(|| {
        let r = reg_mut(reg)?;
        // SAFETY: C contract: `buf` has `len` readable bytes.
        let input = unsafe { bytes(buf, len) }?;
        // SAFETY: C contract: NUL-terminated.
        let path = unsafe { cstr(path, "path") }?;
        if out.is_null() {
            return Err(usage("out is NULL"));
        }
        let (rec, _, f) = r.record(input)?;
        let v = read_value(&f, rec.payload)?;
        let x = lookup(&v, path)?;
        let mut g = GwValue {
            kind: 0,
            i: 0,
            u: 0,
            f: 0.0,
            str: std::ptr::null(),
            str_len: 0,
            count: 0,
        };
        match x {
            Value::I(i) => (g.kind, g.i, g.u, g.f) = (1, *i, *i as u64, *i as f64),
            Value::U(u) => (g.kind, g.i, g.u, g.f) = (2, *u as i64, *u, *u as f64),
            Value::F(f) => (g.kind, g.f) = (3, *f),
            Value::Char(c) => (g.kind, g.i, g.u, g.f) = (4, *c as i64, *c as u64, *c as f64),
            Value::Bool(b) => (g.kind, g.i, g.u, g.f) = (5, *b as i64, *b as u64, *b as u8 as f64),
            Value::Str(s) => {
                let cut = s.split('\0').next().unwrap_or("");
                r.text = CString::new(cut).unwrap_or_default();
                (g.kind, g.str, g.str_len) = (6, r.text.as_ptr(), cut.len());
            }
            // A fixed char array reads as a C string (cut at the first NUL).
            Value::Array(xs)
                if !xs.is_empty() && xs.iter().all(|c| matches!(c, Value::Char(_))) =>
            {
                let b: Vec<u8> = xs
                    .iter()
                    .map(|c| if let Value::Char(c) = c { *c } else { 0 })
                    .take_while(|&c| c != 0)
                    .collect();
                g.str_len = b.len();
                r.text = CString::new(b).unwrap_or_default();
                (g.kind, g.str, g.count) = (6, r.text.as_ptr(), xs.len());
            }
            Value::Array(xs) => (g.kind, g.count) = (7, xs.len()),
            Value::Struct(fs) => (g.kind, g.count) = (8, fs.len()),
        }
        // SAFETY: non-null and writable (C contract).
        unsafe { out.write(g) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn gw_record_json(
    reg: *mut GwRegistry,
    buf: *const c_void,
    len: usize,
    out: *mut c_char,
    cap: usize,
    json_len: *mut usize,
) -> c_int {
    guard(|| {
        let r = reg_mut(reg)?;
        // SAFETY: C contract: `buf` has `len` readable bytes.
        let input = unsafe { bytes(buf, len) }?;
        let (rec, _, f) = r.record(input)?;
        let v = read_value(&f, rec.payload)?;
        let name = to_json(&Value::Str(f.name().to_string()));
        let s = format!(
            "{{\"format\": {name}, \"id\": \"{}\", \"value\": {}}}",
            f.id(),
            to_json(&v)
        );
        // SAFETY: NULL or writable.
        unsafe { put(json_len, s.len()) };
        if s.len() + 1 > cap {
            return Err(CErr(GW_ERR_SPACE, format!("{} bytes needed", s.len() + 1)));
        }
        if out.is_null() {
            return Err(usage("out is NULL"));
        }
        // SAFETY: `out` has room for `cap >= len + 1` bytes (C contract).
        unsafe {
            std::ptr::copy_nonoverlapping(s.as_ptr(), out as *mut u8, s.len());
            out.add(s.len()).write(0);
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_names_round_trip() {
        let known = HashMap::new();
        for (s, size) in [
            ("integer", 4),
            ("unsigned integer", 2),
            ("float", 8),
            ("char[7]", 1),
            ("integer[2][3]", 8),
            ("float[]", 4),
            ("string", 16),
        ] {
            let t = parse_type(s, size, &known, 8).unwrap_or_else(|_| panic!("{s}"));
            let (back, es) = c_type_name(&t, 8);
            let t2 = parse_type(&back, es, &known, 8).unwrap_or_else(|_| panic!("{back}"));
            assert_eq!(t, t2, "{s} -> {back}");
        }
        assert_eq!(
            parse_type("integer[2][3]", 8, &known, 8).ok(),
            Some(FieldType::array(FieldType::array(FieldType::I64, 3), 2))
        );
        for bad in [
            "integer",
            "float",
            "nosuch",
            "char[x]",
            "integer[3",
            "integer[2][]",
        ] {
            assert!(parse_type(bad, 3, &known, 8).is_err(), "{bad}");
        }
    }

    #[test]
    fn null_arguments_are_errors() {
        // SAFETY: exercising the NULL checks with NULL pointers only.
        unsafe {
            assert_eq!(gw_registry_new(std::ptr::null_mut()), GW_ERR_USAGE);
            assert_eq!(
                gw_decode(
                    std::ptr::null_mut(),
                    std::ptr::null(),
                    0,
                    std::ptr::null(),
                    std::ptr::null_mut(),
                    0,
                    std::ptr::null_mut(),
                    0,
                    std::ptr::null_mut(),
                    std::ptr::null_mut()
                ),
                GW_ERR_USAGE
            );
            let msg = CStr::from_ptr(gw_last_error()).to_str().unwrap();
            assert!(msg.contains("registry"), "{msg}");
        }
    }
}
