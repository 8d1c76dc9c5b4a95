//! Decoding from C: `gw_decode` (registry), the `gw_decoder` handle and
//! the in-place (zero-copy) `gw_decode_in_place`.
//!
//! The cost a C caller pays per record is the point here. The first record
//! of a (wire format, native format) pair looks both formats up, builds or
//! fetches the plan and remembers all of it in a [`Hot`] entry (in the
//! registry for `gw_decode`, in the decoder for the handle's calls). Every
//! later record of that pair is: parse the 24-byte header, compare the id,
//! the native format and the registry's generation, check the fixed length,
//! and run the plan straight into the caller's struct — no hash look-up, no
//! allocation, no reference count, no error string (the thread's message is
//! only written when a call fails).

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use gridwire_wire::record::{slot_range, VarSlot};
use gridwire_wire::{Format, FormatId, Plan, RecordRef, WireError};

use crate::{
    bytes, guard, native_slices, put, reg_mut, usage, CErr, CResult, GwFormat, GwRegistry, GwSlice,
    GW_ERR_INTERNAL, GW_ERR_SPACE, GW_OK,
};

/// How records of one (wire, native) pair become the native struct.
#[derive(Clone)]
enum Way {
    /// Same layout, no variable-length fields: one copy of the fixed part.
    Copy,
    /// A conversion with no variable-length parts: straight into the
    /// caller's struct ([`Plan::run_fixed_into`]).
    Fixed(Arc<Plan>),
    /// Variable-length parts: converted into scratch, then the tail laid
    /// out in the caller's buffer and the slots turned into `gw_slice`s.
    General(Arc<Plan>),
}

/// Everything a decode of the remembered pair needs, looked up once.
#[derive(Clone)]
pub(crate) struct Hot {
    wire: FormatId,
    native: *const GwFormat,
    /// The registry's generation when this was built (a policy change
    /// rebuilds the plans).
    generation: u64,
    /// The wire format's size: the header's fixed length must equal it.
    src_size: u64,
    dst_size: usize,
    way: Way,
    /// `Plan::compiled_entry` of a `Way::Fixed` plan (the plan, held in
    /// `way`, keeps it alive).
    code: Option<CompiledFn>,
}

/// A plan's machine code: `uint32_t f(const uint8_t *payload, uint8_t *out)`.
pub(crate) type CompiledFn = unsafe extern "C" fn(*const u8, *mut u8) -> u32;

/// Build the [`Hot`] entry for records of `wire` decoded into `native`.
/// This is the only place of the decode path that looks anything up.
#[cold]
#[inline(never)]
fn lookup(r: &mut GwRegistry, wire: FormatId, native: *const GwFormat) -> CResult<Hot> {
    let nf = r.format(native)?;
    let nfmt = nf.fmt.clone();
    let wfmt = r
        .reg
        .get(wire)
        .cloned()
        .ok_or(WireError::UnknownFormat(wire))?;
    if nfmt.has_var() && !native_slices(&nfmt) {
        return Err(usage(
            "variable-length fields can only be decoded into this machine's layout",
        ));
    }
    let way = if wire == nfmt.id() && !nfmt.has_var() {
        Way::Copy
    } else {
        let plan = r.reg.plan(&wfmt, &nfmt)?;
        if plan.is_fixed_only() {
            Way::Fixed(plan)
        } else {
            Way::General(plan)
        }
    };
    let code = match &way {
        Way::Fixed(p) => p.compiled_entry(),
        _ => None,
    };
    Ok(Hot {
        wire,
        native,
        generation: r.generation,
        src_size: wfmt.size() as u64,
        dst_size: nfmt.size() as usize,
        way,
        code,
    })
}

#[cold]
#[inline(never)]
fn fixed_len_error(id: FormatId, fixed_len: u64, size: u64) -> CErr {
    WireError::BadHeader(format!(
        "fixed length {fixed_len} but format {id} has size {size}"
    ))
    .into()
}

#[cold]
#[inline(never)]
fn out_error(out_size: usize, size: usize, null: bool) -> CErr {
    if null {
        return usage("out is NULL");
    }
    CErr(
        GW_ERR_SPACE,
        format!("out has {out_size} bytes, format needs {size}"),
    )
}

/// The caller's output buffers for one decode.
pub(crate) struct Out {
    pub out: *mut c_void,
    pub out_size: usize,
    pub tail: *mut c_void,
    pub tail_cap: usize,
    pub tail_used: *mut usize,
}

/// Decode the record at the start of `input` into `o`, through `hot` (kept
/// up to date for the pair of this record). Returns the record's length.
///
/// # Safety
/// `o.out` writable for `o.out_size` bytes, `o.tail` for `o.tail_cap`,
/// `o.tail_used` NULL or writable (C contract); `native` a format pointer
/// (checked against the registry on a cache miss).
#[inline(always)]
pub(crate) unsafe fn decode_with(
    r: &mut GwRegistry,
    hot: &mut Option<Hot>,
    scratch: &mut Vec<u8>,
    native: *const GwFormat,
    input: &[u8],
    o: &Out,
) -> CResult<usize> {
    let (rec, used) = RecordRef::parse(input)?;
    let h = match hot {
        Some(h) if h.wire == rec.id && h.native == native && h.generation == r.generation => h,
        _ => hot.insert(lookup(r, rec.id, native)?),
    };
    if rec.fixed_len != h.src_size {
        return Err(fixed_len_error(rec.id, rec.fixed_len, h.src_size));
    }
    if o.out_size < h.dst_size || o.out.is_null() {
        return Err(out_error(o.out_size, h.dst_size, o.out.is_null()));
    }
    match &h.way {
        Way::Copy => {
            // SAFETY: the payload holds at least fixed_len == dst_size bytes
            // (parse checked the header against the buffer); `out` has
            // out_size >= dst_size writable bytes. `copy` (memmove) because
            // nothing forbids a caller to decode over its own buffer.
            unsafe { std::ptr::copy(rec.payload.as_ptr(), o.out as *mut u8, h.dst_size) };
            // SAFETY: NULL or writable (C contract).
            unsafe { put(o.tail_used, 0) };
        }
        Way::Fixed(plan) => {
            let (p, n) = (rec.payload.as_ptr() as usize, rec.payload.len());
            let q = o.out as usize;
            if q < p + n && p < q + h.dst_size {
                return Err(usage("out overlaps the record"));
            }
            // SAFETY: `out` has dst_size writable bytes (checked above) and
            // does not overlap the payload (checked just now), so this
            // mutable slice aliases nothing else.
            let dst = unsafe { std::slice::from_raw_parts_mut(o.out as *mut u8, h.dst_size) };
            plan.run_fixed_into(rec.payload, dst)?;
            // SAFETY: NULL or writable (C contract).
            unsafe { put(o.tail_used, 0) };
        }
        Way::General(plan) => {
            let plan = plan.clone();
            // SAFETY: `h.native` was checked to belong to the registry when
            // `h` was built; formats live as long as the registry.
            let slots = unsafe { &(*h.native).slots };
            plan.run(rec.payload, scratch)?;
            // SAFETY: forwarded caller contract on `o`.
            unsafe { lay_out_tail(scratch, slots, h.dst_size, o)? };
        }
    }
    Ok(used)
}

/// Copy a converted record (native fixed part + tail, slots holding
/// offsets, in `scratch`) to the caller: the tail data to `o.tail` at
/// addresses aligned for each element type, the fixed part to `o.out` with
/// each slot rewritten as a `gw_slice` into the tail. No allocation: the
/// positions are computed twice (sizing, then copying).
///
/// # Safety
/// As for [`decode_with`].
unsafe fn lay_out_tail(scratch: &[u8], slots: &[VarSlot], size: usize, o: &Out) -> CResult<()> {
    let base = o.tail as usize;
    let place = |pos: usize, s: &VarSlot| -> (usize, usize, usize, usize) {
        let (off, n) = read_slot(s, scratch);
        let nbytes = n.saturating_mul(s.elem_size());
        let a = elem_align(s);
        let start = (base + pos).div_ceil(a) * a - base;
        (off, n, nbytes, start)
    };
    let mut pos = 0usize;
    for s in slots {
        let (_, _, nbytes, start) = place(pos, s);
        pos = start.saturating_add(nbytes);
    }
    // SAFETY: C contract: NULL or writable.
    unsafe { put(o.tail_used, pos) };
    if pos > o.tail_cap {
        return Err(CErr(GW_ERR_SPACE, format!("tail needs {pos} bytes")));
    }
    if pos > 0 && o.tail.is_null() {
        return Err(usage("tail is NULL"));
    }
    let fixed = scratch.get(..size).ok_or_else(|| {
        CErr(
            GW_ERR_INTERNAL,
            "decoded record shorter than its format".into(),
        )
    })?;
    // SAFETY: `out` has out_size >= size writable bytes (checked by the
    // caller); `scratch` is our own buffer, so they cannot overlap.
    unsafe { std::ptr::copy_nonoverlapping(fixed.as_ptr(), o.out as *mut u8, size) };
    let mut pos = 0usize;
    for s in slots {
        let (off, n, nbytes, start) = place(pos, s);
        pos = start + nbytes;
        let data = scratch
            .get(off..off.saturating_add(nbytes))
            .ok_or_else(|| CErr(GW_ERR_INTERNAL, "decoded slot out of range".into()))?;
        let ptr = if n == 0 {
            std::ptr::null()
        } else {
            // SAFETY: `tail` has tail_cap >= pos >= start + nbytes bytes.
            unsafe {
                let p = (o.tail as *mut u8).add(start);
                std::ptr::copy_nonoverlapping(data.as_ptr(), p, nbytes);
                p as *const c_void
            }
        };
        // SAFETY: the slot lies inside the fixed part (var_slots of the
        // native format, whose size is `size`), which `out` holds;
        // unaligned write because nothing promises `out` is aligned.
        unsafe {
            ((o.out as *mut u8).add(s.offset) as *mut GwSlice)
                .write_unaligned(GwSlice { ptr, len: n })
        };
    }
    Ok(())
}

/// (offset, count) of a slot in a decoded (native) record.
fn read_slot(s: &VarSlot, b: &[u8]) -> (usize, usize) {
    let w = s.pointer_size as usize;
    let word = |at: usize| -> usize {
        let mut v = [0u8; 8];
        if let Some(src) = b.get(at..at + w) {
            v[..w].copy_from_slice(src);
        }
        u64::from_ne_bytes(v) as usize
    };
    (word(s.offset), word(s.offset + w))
}

fn elem_align(s: &VarSlot) -> usize {
    match &s.elem {
        None => 1,
        Some(t) => scalar_align(t).clamp(1, 16),
    }
}

fn scalar_align(t: &gridwire_wire::FieldType) -> usize {
    use gridwire_wire::FieldType;
    match t {
        FieldType::Int { size, .. } | FieldType::Float { size } => *size as usize,
        FieldType::Array { elem, .. } | FieldType::VarArray(elem) => scalar_align(elem),
        FieldType::Nested(f) => f.align() as usize,
        _ => 1,
    }
}

/// The hot path of a decode: the record at `buf` belongs to the pair in
/// `hot` and converts without variable-length parts. Nothing can be
/// reported from here — anything unusual (including a failed conversion)
/// returns false and the caller takes the checked path, which reports it
/// — so it builds no message and needs no unwinding guard (it cannot
/// panic: the slices it makes are checked, the plan's code is checked at
/// compile time).
///
/// # Safety
/// As the C contract of gw_decode: `buf` readable for `len` bytes, `out`
/// writable for `out_size`, `tail_used`/`consumed` NULL or writable.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn fast_decode(
    hot: &Option<Hot>,
    generation: u64,
    native: *const GwFormat,
    buf: *const c_void,
    len: usize,
    out: *mut c_void,
    out_size: usize,
    tail_used: *mut usize,
    consumed: *mut usize,
) -> bool {
    let Some(h) = hot else { return false };
    if buf.is_null()
        || out.is_null()
        || h.native != native
        || h.generation != generation
        || out_size < h.dst_size
    {
        return false;
    }
    // SAFETY: non-null, `len` readable bytes (C contract).
    let input = unsafe { std::slice::from_raw_parts(buf as *const u8, len) };
    let Ok((rec, used)) = RecordRef::parse(input) else {
        return false;
    };
    if rec.id != h.wire || rec.fixed_len != h.src_size {
        return false;
    }
    match &h.way {
        // SAFETY: as in `decode_with` (Way::Copy).
        Way::Copy => unsafe { std::ptr::copy(rec.payload.as_ptr(), out as *mut u8, h.dst_size) },
        Way::Fixed(plan) => {
            let (p, n) = (rec.payload.as_ptr() as usize, rec.payload.len());
            let q = out as usize;
            if q < p + n && p < q + h.dst_size {
                return false;
            }
            if let Some(code) = h.code {
                // SAFETY: the payload has fixed_len == src_size bytes at
                // least (parse), `out` dst_size writable bytes, no overlap
                // (checked); `code` belongs to `plan`, alive in `h`.
                unsafe { code(rec.payload.as_ptr(), out as *mut u8) };
            } else {
                // SAFETY: as in `decode_with` (Way::Fixed): `out` has
                // dst_size writable bytes and does not overlap the payload.
                let dst = unsafe { std::slice::from_raw_parts_mut(out as *mut u8, h.dst_size) };
                if plan.run_fixed_into(rec.payload, dst).is_err() {
                    return false;
                }
            }
        }
        Way::General(_) => return false,
    }
    // SAFETY: NULL or writable (C contract).
    unsafe {
        put(tail_used, 0);
        put(consumed, used);
    }
    true
}

#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn gw_decode(
    reg: *mut GwRegistry,
    buf: *const c_void,
    len: usize,
    native: *const GwFormat,
    out: *mut c_void,
    out_size: usize,
    tail: *mut c_void,
    tail_cap: usize,
    tail_used: *mut usize,
    consumed: *mut usize,
) -> c_int {
    // SAFETY: a non-null registry is live (C contract); forwarded contract.
    if let Some(r) = unsafe { reg.as_ref() } {
        let (h, g) = (&r.hot, r.generation);
        // SAFETY: forwarded C contract.
        if unsafe { fast_decode(h, g, native, buf, len, out, out_size, tail_used, consumed) } {
            return GW_OK;
        }
    }
    // SAFETY: forwarded C contract.
    unsafe {
        decode_checked(
            reg, buf, len, native, out, out_size, tail, tail_cap, tail_used, consumed,
        )
    }
}

/// `gw_decode` with every check and message: the first record of a pair,
/// variable-length fields, and every error.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
unsafe fn decode_checked(
    reg: *mut GwRegistry,
    buf: *const c_void,
    len: usize,
    native: *const GwFormat,
    out: *mut c_void,
    out_size: usize,
    tail: *mut c_void,
    tail_cap: usize,
    tail_used: *mut usize,
    consumed: *mut usize,
) -> c_int {
    guard(|| {
        let r = reg_mut(reg)?;
        // SAFETY: C contract: `buf` has `len` readable bytes.
        let input = unsafe { bytes(buf, len) }?;
        let o = Out {
            out,
            out_size,
            tail,
            tail_cap,
            tail_used,
        };
        // Taken out for the call (moves, no allocation) so the registry can
        // be borrowed mutably beside them.
        let mut hot = r.hot.take();
        let mut scratch = std::mem::take(&mut r.scratch);
        // SAFETY: forwarded C contract on the output buffers.
        let res = unsafe { decode_with(r, &mut hot, &mut scratch, native, input, &o) };
        r.hot = hot;
        r.scratch = scratch;
        // SAFETY: NULL or writable.
        unsafe { put(consumed, res?) };
        Ok(())
    })
}

/// `struct gw_decoder_head` of gridwire.h: what the header's inline fast
/// paths read (never write). Field for field the C declaration.
#[repr(C)]
pub struct GwDecoderHead {
    /// The remembered pair: the sender's format id and size (the header's
    /// fixed length must equal it), valid when `ready` is 1.
    wire_id: u64,
    fixed_len: u64,
    /// The native format: id, size, and the alignment mask its payload
    /// must satisfy to be used in place.
    native_id: u64,
    native_size: u64,
    align_mask: u64,
    /// The registry's plan generation, and the one the pair was built in.
    generation: *const u64,
    seen_generation: u64,
    /// The pair's compiled conversion (NULL: take the exported call).
    code: Option<CompiledFn>,
    /// The native format has no variable-length fields.
    plain: u32,
    ready: u32,
}

impl GwDecoder {
    /// Mirror `hot` into the head the inline paths read.
    fn refresh_head(&mut self) {
        match &self.hot {
            Some(h) => {
                self.head.wire_id = h.wire.0;
                self.head.fixed_len = h.src_size;
                self.head.seen_generation = h.generation;
                self.head.code = h.code;
                self.head.ready = 1;
            }
            None => {
                self.head.code = None;
                self.head.ready = 0;
            }
        }
    }
}

/// `gw_decoder`: decodes records into one native format, remembering the
/// last pair's plan. Holds its registry by pointer (C contract: freed before
/// the registry, not used by two threads at once).
#[repr(C)]
pub struct GwDecoder {
    /// Read by the inline fast paths in gridwire.h (`struct gw_decoder_head`).
    head: GwDecoderHead,
    reg: *mut GwRegistry,
    native: *const GwFormat,
    native_fmt: Arc<Format>,
    /// Copied out of the native format for the in-place hot path: its id
    /// and size, and whether it has no variable-length fields.
    native_id: FormatId,
    size: u64,
    plain: bool,
    /// Byte alignment a payload must have to be used in place (a power
    /// of two: tested with a mask, a division cost more than the rest of
    /// the in-place decode).
    align: usize,
    hot: Option<Hot>,
    scratch: Vec<u8>,
    /// Converted records handed out by `gw_decode_in_place` (8-aligned).
    converted: Vec<u64>,
}

#[no_mangle]
pub unsafe extern "C" fn gw_decoder_new(
    reg: *mut GwRegistry,
    native: *const GwFormat,
    out: *mut *mut GwDecoder,
) -> c_int {
    guard(|| {
        let r = reg_mut(reg)?;
        let nf = r.format(native)?;
        if out.is_null() {
            return Err(usage("out is NULL"));
        }
        let f = nf.fmt.clone();
        let mut align = (f.align() as usize).max(1).next_power_of_two();
        if f.has_var() {
            align = align.max(std::mem::align_of::<GwSlice>());
        }
        let d = Box::new(GwDecoder {
            head: GwDecoderHead {
                wire_id: 0,
                fixed_len: 0,
                native_id: f.id().0,
                native_size: f.size() as u64,
                align_mask: align as u64 - 1,
                generation: &r.generation as *const u64,
                seen_generation: 0,
                code: None,
                plain: u32::from(!f.has_var()),
                ready: 0,
            },
            reg,
            native,
            native_id: f.id(),
            size: f.size() as u64,
            plain: !f.has_var(),
            native_fmt: f,
            align,
            hot: None,
            scratch: Vec::new(),
            converted: Vec::new(),
        });
        // SAFETY: `out` is non-null and writable (C contract).
        unsafe { out.write(Box::into_raw(d)) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn gw_decoder_free(dec: *mut GwDecoder) {
    if !dec.is_null() {
        // SAFETY: created by Box::into_raw in gw_decoder_new and, per the C
        // contract, freed once.
        drop(unsafe { Box::from_raw(dec) });
    }
}

/// The decoder and its registry, as two disjoint mutable borrows.
fn decoder<'a>(dec: *mut GwDecoder) -> CResult<(&'a mut GwDecoder, &'a mut GwRegistry)> {
    // SAFETY: a non-null decoder comes from gw_decoder_new and is not yet
    // freed nor shared between threads (C contract).
    let d = unsafe { dec.as_mut() }.ok_or_else(|| usage("decoder is NULL"))?;
    // The registry is a separate allocation, so this borrow does not alias `d`.
    let r = reg_mut(d.reg)?;
    Ok((d, r))
}

#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn gw_decoder_decode(
    dec: *mut GwDecoder,
    buf: *const c_void,
    len: usize,
    out: *mut c_void,
    out_size: usize,
    tail: *mut c_void,
    tail_cap: usize,
    tail_used: *mut usize,
    consumed: *mut usize,
) -> c_int {
    // SAFETY: non-null decoder and registry pointers are live (C contract).
    if let Some(d) = unsafe { dec.as_ref() } {
        if let Some(r) = unsafe { d.reg.as_ref() } {
            let (h, g, n) = (&d.hot, r.generation, d.native);
            // SAFETY: forwarded C contract.
            if unsafe { fast_decode(h, g, n, buf, len, out, out_size, tail_used, consumed) } {
                return GW_OK;
            }
        }
    }
    // SAFETY: forwarded C contract.
    unsafe {
        decoder_decode_checked(
            dec, buf, len, out, out_size, tail, tail_cap, tail_used, consumed,
        )
    }
}

/// `gw_decoder_decode` with every check and message (see `decode_checked`).
#[inline(never)]
#[allow(clippy::too_many_arguments)]
unsafe fn decoder_decode_checked(
    dec: *mut GwDecoder,
    buf: *const c_void,
    len: usize,
    out: *mut c_void,
    out_size: usize,
    tail: *mut c_void,
    tail_cap: usize,
    tail_used: *mut usize,
    consumed: *mut usize,
) -> c_int {
    guard(|| {
        let (d, r) = decoder(dec)?;
        // SAFETY: C contract: `buf` has `len` readable bytes.
        let input = unsafe { bytes(buf, len) }?;
        let o = Out {
            out,
            out_size,
            tail,
            tail_cap,
            tail_used,
        };
        // SAFETY: forwarded C contract on the output buffers.
        let used = unsafe { decode_with(r, &mut d.hot, &mut d.scratch, d.native, input, &o) };
        d.refresh_head();
        let used = used?;
        // SAFETY: NULL or writable.
        unsafe { put(consumed, used) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn gw_decode_in_place(
    dec: *mut GwDecoder,
    buf: *mut c_void,
    len: usize,
    rec_out: *mut *mut c_void,
    consumed: *mut usize,
) -> c_int {
    // The hot path (same layout, no variable fields): header checks and a
    // pointer; anything else takes the checked path (see `fast_decode`).
    // SAFETY: a non-null decoder is live and used by one thread (C contract).
    if let Some(d) = unsafe { dec.as_mut() } {
        if d.plain && !buf.is_null() && !rec_out.is_null() {
            // SAFETY: non-null, `len` readable bytes (C contract).
            let input = unsafe { std::slice::from_raw_parts(buf as *const u8, len) };
            if let Ok((rec, used)) = RecordRef::parse(input) {
                let p = rec.payload.as_ptr();
                if rec.id == d.native_id
                    && rec.fixed_len == d.size
                    && (p as usize) & (d.align - 1) == 0
                {
                    // SAFETY: `rec_out` non-null and writable, `consumed`
                    // NULL or writable (C contract).
                    unsafe {
                        rec_out.write(p as *mut c_void);
                        put(consumed, used);
                    }
                    return GW_OK;
                }
                // Another layout, the remembered pair, compiled: convert
                // into the decoder's buffer without the checked path.
                // SAFETY: the decoder's registry is live (C contract).
                let generation = unsafe { d.reg.as_ref() }.map(|r| r.generation);
                if let Some(h) = &d.hot {
                    if let (Some(code), true) = (
                        h.code,
                        h.wire == rec.id
                            && Some(h.generation) == generation
                            && rec.fixed_len == h.src_size
                            && d.converted.len() * 8 >= h.dst_size,
                    ) {
                        let q = d.converted.as_mut_ptr() as *mut u8;
                        // SAFETY: the payload has src_size bytes (parse,
                        // fixed length checked), `converted` at least
                        // dst_size (checked) and is the decoder's own
                        // memory (borrowed mutably); `code` belongs to the
                        // plan held in `h`.
                        unsafe {
                            code(p, q);
                            rec_out.write(q as *mut c_void);
                            put(consumed, used);
                        }
                        return GW_OK;
                    }
                }
            }
        }
    }
    // SAFETY: forwarded C contract.
    unsafe { in_place_checked(dec, buf, len, rec_out, consumed) }
}

/// `gw_decode_in_place` with every check and message.
#[inline(never)]
unsafe fn in_place_checked(
    dec: *mut GwDecoder,
    buf: *mut c_void,
    len: usize,
    rec_out: *mut *mut c_void,
    consumed: *mut usize,
) -> c_int {
    guard(|| {
        let (d, r) = decoder(dec)?;
        if rec_out.is_null() {
            return Err(usage("rec is NULL"));
        }
        // SAFETY: C contract: `buf` has `len` readable (and writable) bytes.
        let input = unsafe { bytes(buf, len) }?;
        let (rec, used) = RecordRef::parse(input)?;
        let p = if rec.id == d.native_fmt.id() {
            // SAFETY: `buf` is writable for `len` bytes (C contract) and
            // the record lies inside it.
            unsafe { in_place(d, rec) }?
        } else {
            let p = convert(d, r, rec);
            d.refresh_head();
            p?
        };
        // SAFETY: `rec_out` is non-null and writable; `consumed` NULL or writable.
        unsafe {
            rec_out.write(p);
            put(consumed, used);
        }
        Ok(())
    })
}

/// The record is in the decoder's own layout: check it and hand out its
/// payload, with variable slots (offsets into the payload) rewritten in
/// place as `gw_slice` pointers. Nothing is copied.
///
/// # Safety
/// `rec.payload` must lie in memory the caller lets us write.
// Inlined, the record by value: passed by reference it went through the
// stack, the pattern that costs a store-forwarding stall per record.
#[inline(always)]
unsafe fn in_place(d: &GwDecoder, rec: RecordRef<'_>) -> CResult<*mut c_void> {
    let f = &d.native_fmt;
    rec.check_format(f)?;
    let base = rec.payload.as_ptr() as *mut u8;
    if !(base as usize).is_multiple_of(d.align) {
        return Err(usage(format!(
            "record payload at {base:p} is not {}-byte aligned (put the record at an \
             8-byte aligned address, or use gw_decoder_decode)",
            d.align
        )));
    }
    // SAFETY: `d.native` belongs to the decoder's registry (checked by
    // gw_decoder_new) and lives as long as it.
    let slots = unsafe { &(*d.native).slots };
    if slots.is_empty() {
        return Ok(base as *mut c_void);
    }
    if !native_slices(f) {
        return Err(usage(
            "variable-length fields can only be used in place in this machine's layout",
        ));
    }
    // Every slot is checked before any is rewritten, so a record refused
    // is left as it was.
    let size = f.size() as usize;
    for s in slots {
        slot_range(s, rec.payload, size)?;
    }
    for s in slots {
        let (off, n) = s.read(rec.payload)?;
        let ptr = if n == 0 {
            std::ptr::null()
        } else {
            // SAFETY: slot_range proved off..off+n*elem inside the payload.
            unsafe { base.add(off as usize) as *const c_void }
        };
        // SAFETY: the slot lies in the fixed part (read() just succeeded on
        // it), which is writable caller memory; the payload is aligned for
        // gw_slice (checked above) but the write does not rely on it.
        unsafe {
            (base.add(s.offset) as *mut GwSlice).write_unaligned(GwSlice {
                ptr,
                len: n as usize,
            })
        };
    }
    Ok(base as *mut c_void)
}

/// Another layout: convert into the decoder's buffer (valid until the next
/// call on the decoder) and hand out a pointer to it.
#[inline(never)]
fn convert(d: &mut GwDecoder, r: &mut GwRegistry, rec: RecordRef<'_>) -> CResult<*mut c_void> {
    let h = match &mut d.hot {
        Some(h) if h.wire == rec.id && h.generation == r.generation => h,
        hot => hot.insert(lookup(r, rec.id, d.native)?),
    };
    if rec.fixed_len != h.src_size {
        return Err(fixed_len_error(rec.id, rec.fixed_len, h.src_size));
    }
    let words = h.dst_size.div_ceil(8);
    match &h.way {
        Way::Copy => {
            // Same id handled by in_place; unreachable unless ids collide.
            Err(CErr(GW_ERR_INTERNAL, "copy plan for another format".into()))
        }
        Way::Fixed(plan) => {
            if d.converted.len() < words {
                d.converted.resize(words, 0);
            }
            // SAFETY: u64 words reinterpreted as their bytes (any bit
            // pattern is a valid u8); the length stays within the Vec.
            let dst = unsafe {
                std::slice::from_raw_parts_mut(d.converted.as_mut_ptr() as *mut u8, h.dst_size)
            };
            plan.run_fixed_into(rec.payload, dst)?;
            Ok(d.converted.as_mut_ptr() as *mut c_void)
        }
        Way::General(plan) => {
            let plan = plan.clone();
            plan.run(rec.payload, &mut d.scratch)?;
            // Rewrite the slots (offsets into the converted record) as
            // pointers; copy to 8-aligned memory first so the tail's
            // elements sit at aligned addresses (Vec<u8> promises no
            // alignment).
            let total = d.scratch.len();
            let need = total.div_ceil(8);
            if d.converted.len() < need {
                d.converted.resize(need, 0);
            }
            let base = d.converted.as_mut_ptr() as *mut u8;
            // SAFETY: `converted` has >= total bytes; distinct allocations.
            unsafe { std::ptr::copy_nonoverlapping(d.scratch.as_ptr(), base, total) };
            // SAFETY: `d.native` belongs to the registry (gw_decoder_new).
            let slots = unsafe { &(*d.native).slots };
            for s in slots {
                let (off, n) = read_slot(s, &d.scratch);
                let nbytes = n.saturating_mul(s.elem_size());
                if off.saturating_add(nbytes) > total {
                    return Err(CErr(GW_ERR_INTERNAL, "decoded slot out of range".into()));
                }
                let ptr = if n == 0 {
                    std::ptr::null()
                } else {
                    // SAFETY: off + nbytes <= total, inside `converted`.
                    unsafe { base.add(off) as *const c_void }
                };
                // SAFETY: the slot lies inside the native fixed part, the
                // start of the converted record.
                unsafe {
                    (base.add(s.offset) as *mut GwSlice).write_unaligned(GwSlice { ptr, len: n })
                };
            }
            Ok(base as *mut c_void)
        }
    }
}
