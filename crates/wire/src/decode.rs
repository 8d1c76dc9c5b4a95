//! Receiving records: a registry of known formats and cached plans, the
//! in-place view for identical layouts, and conversion otherwise.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use crate::error::{Result, WireError};
use crate::format::{Format, FormatId};
use crate::plan::{FastPath, OverflowPolicy, Plan};
use crate::record::{slot_range, var_slots, RecordRef, VarSlot};

/// A Rust type whose memory is exactly a record of `format()`.
///
/// # Safety
/// Implementors must be `#[repr(C)]`, have size `format().size()`, contain
/// no references/pointers, and be valid for *every* bit pattern (integers,
/// floats, arrays and nested `WireRecord`s only; no `bool`, `char`, enums).
/// The derive macro in `gridwire-wire-derive` checks this.
pub unsafe trait WireRecord: Sized + 'static {
    fn format() -> Arc<Format>;
}

/// The result of a decode: the record in the receiver's layout (fixed part +
/// its own tail, variable slots holding offsets), borrowed from the input when
/// no conversion was needed.
#[derive(Debug, Clone)]
pub struct Decoded<'a> {
    pub format: Arc<Format>,
    pub bytes: Cow<'a, [u8]>,
}

impl<'a> Decoded<'a> {
    /// True if the record is used in place (no copy, no conversion).
    pub fn is_borrowed(&self) -> bool {
        matches!(self.bytes, Cow::Borrowed(_))
    }
    /// The bytes of a variable-length field by (dotted) path, e.g. `name` or `inner.tags`.
    pub fn var_bytes(&self, path: &str) -> Result<&[u8]> {
        let slots = var_slots(&self.format)?;
        let slot = slots
            .iter()
            .find(|s| s.path == path)
            .ok_or_else(|| WireError::Usage(format!("no variable field `{path}`")))?;
        let r = slot_range(slot, &self.bytes, self.format.size() as usize)?;
        Ok(&self.bytes[r])
    }
}

/// View `payload` in place as `T`. Fails (instead of copying) when the
/// format differs, the payload is short, or the address is misaligned.
pub fn view<'a, T: WireRecord>(rec: &RecordRef<'a>) -> Result<&'a T> {
    let f = T::format();
    if rec.id != f.id() {
        return Err(WireError::NotViewable(format!(
            "record format {} is not {} ({})",
            rec.id,
            f.id(),
            f.name()
        )));
    }
    view_bytes::<T>(rec.payload)
}

/// View raw native-layout bytes (e.g. `Decoded::bytes`) as `T`.
#[inline(always)]
pub fn view_bytes<T: WireRecord>(bytes: &[u8]) -> Result<&T> {
    if bytes.len() < std::mem::size_of::<T>() {
        return Err(not_viewable("payload shorter than the type"));
    }
    if !(bytes.as_ptr() as usize).is_multiple_of(std::mem::align_of::<T>()) {
        return Err(not_viewable("payload is misaligned for the type"));
    }
    // SAFETY: length and alignment are checked above; `WireRecord` guarantees
    // that T is repr(C), pointer-free and valid for every bit pattern, so any
    // initialised bytes of the right size are a valid T. The lifetime ties the
    // reference to the borrowed bytes.
    Ok(unsafe { &*(bytes.as_ptr() as *const T) })
}

#[cold]
#[inline(never)]
fn not_viewable(why: &str) -> WireError {
    WireError::NotViewable(why.into())
}

#[cold]
#[inline(never)]
fn not_native(rec: &RecordRef<'_>, native: &Format) -> WireError {
    WireError::NotViewable(format!(
        "record format {} is not {} ({})",
        rec.id,
        native.id(),
        native.name()
    ))
}

#[cold]
#[inline(never)]
fn fixed_len_error(id: FormatId, fixed_len: u64, p: &Plan) -> WireError {
    WireError::BadHeader(format!(
        "fixed length {} but format {} has size {}",
        fixed_len,
        id,
        p.src_size()
    ))
}

/// Format ids are already SHA-256 prefixes, so hashing them again (SipHash)
/// only costs time on the per-record look-up path.
#[derive(Default, Clone, Copy)]
pub struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ b as u64;
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = self.0.rotate_left(29) ^ v;
    }
}

type IdMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<IdHasher>>;

/// Known formats (learned from metadata or registered locally) and the plans
/// built between them. One per receiver; plans are built once per
/// (wire id, native id) pair and reused.
#[derive(Default)]
pub struct Registry {
    formats: IdMap<FormatId, Arc<Format>>,
    plans: IdMap<(FormatId, FormatId), Arc<Plan>>,
    slots: IdMap<FormatId, Arc<Vec<VarSlot>>>,
    policy: OverflowPolicy,
    /// The last (wire id, native id) pair decoded and its plan: a stream of
    /// records of one format skips the hash look-up entirely.
    /// Holding the Arc keeps the fast path's code alive.
    last: Option<Last>,
}

/// See `Registry::last`.
struct Last {
    wire: FormatId,
    /// Held so its address stays this format's: a pointer compare then
    /// proves the caller passed the same native format (no id load).
    native: Arc<Format>,
    native_id: FormatId,
    src_size: u64,
    plan: Arc<Plan>,
    fast: Option<FastPath>,
}

impl Last {
    fn new(wire: FormatId, native: &Arc<Format>, plan: Arc<Plan>) -> Last {
        Last {
            wire,
            native: native.clone(),
            native_id: native.id(),
            src_size: plan.src_size() as u64,
            fast: plan.fast_path(),
            plan,
        }
    }
}

impl Registry {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn with_policy(policy: OverflowPolicy) -> Self {
        Registry {
            policy,
            ..Default::default()
        }
    }
    /// Remember a format (and, recursively, nothing else: nested formats are inline).
    pub fn register(&mut self, f: Arc<Format>) -> FormatId {
        let id = f.id();
        self.formats.entry(id).or_insert(f);
        id
    }
    /// Parse metadata received from a peer and remember the format.
    pub fn learn(&mut self, meta: &[u8]) -> Result<Arc<Format>> {
        let f = crate::meta::parse(meta)?;
        self.register(f.clone());
        Ok(f)
    }
    pub fn get(&self, id: FormatId) -> Option<&Arc<Format>> {
        self.formats.get(&id)
    }
    /// Whether metadata must be requested before records of `id` can be read.
    pub fn knows(&self, id: FormatId) -> bool {
        self.formats.contains_key(&id)
    }

    /// The cached plan for (wire, native), building it on first use.
    pub fn plan(&mut self, wire: &Format, native: &Format) -> Result<Arc<Plan>> {
        let key = (wire.id(), native.id());
        if let Some(p) = self.plans.get(&key) {
            return Ok(p.clone());
        }
        let p = Arc::new(Plan::compile(wire, native, self.policy)?);
        self.plans.insert(key, p.clone());
        Ok(p)
    }

    /// Force the engine of the (wire, native) plan, building it if needed
    /// (benchmarks and tests compare both). False if unavailable.
    pub fn set_backend(
        &mut self,
        wire: &Format,
        native: &Format,
        b: crate::plan::Backend,
    ) -> Result<bool> {
        let mut p = (*self.plan(wire, native)?).clone();
        let ok = p.set_backend(b);
        self.plans.insert((wire.id(), native.id()), Arc::new(p));
        self.last = None;
        Ok(ok)
    }

    /// The payload of `rec` if it was written in exactly the `native`
    /// layout (checked: header and every variable slot), else
    /// `NotViewable`. Unlike [`Registry::decode`] it touches no reference
    /// counts, which is most of the cost of an in-place decode.
    // Always inlined, errors out of line: returned through memory, the
    // borrowed slice cost a store-forwarding stall per record.
    #[inline(always)]
    pub fn decode_in_place<'a>(
        &mut self,
        rec: &RecordRef<'a>,
        native: &Format,
    ) -> Result<&'a [u8]> {
        if rec.id != native.id() {
            return Err(not_native(rec, native));
        }
        rec.check_format(native)?;
        if native.has_var() {
            return self.check_slots(rec, native);
        }
        Ok(rec.payload)
    }

    /// `decode_in_place` for formats with variable fields: every slot.
    #[inline(never)]
    fn check_slots<'a>(&mut self, rec: &RecordRef<'a>, native: &Format) -> Result<&'a [u8]> {
        {
            let size = native.size() as usize;
            if let std::collections::hash_map::Entry::Vacant(e) = self.slots.entry(rec.id) {
                e.insert(Arc::new(var_slots(native)?));
            }
            if let Some(slots) = self.slots.get(&rec.id) {
                for s in slots.iter() {
                    slot_range(s, rec.payload, size)?;
                }
            }
        }
        Ok(rec.payload)
    }

    /// Decode a record into the `native` layout: in place when the record was
    /// written in exactly that format, else through the cached plan.
    pub fn decode<'a>(&mut self, rec: &RecordRef<'a>, native: &Arc<Format>) -> Result<Decoded<'a>> {
        let wire = self
            .formats
            .get(&rec.id)
            .ok_or(WireError::UnknownFormat(rec.id))?;
        rec.check_format(wire)?;
        if rec.id == native.id() {
            if wire.has_var() {
                // O(number of slots), not O(size): only the slots are checked.
                let size = wire.size() as usize;
                if let std::collections::hash_map::Entry::Vacant(e) = self.slots.entry(rec.id) {
                    e.insert(Arc::new(var_slots(wire)?));
                }
                if let Some(slots) = self.slots.get(&rec.id) {
                    for s in slots.iter() {
                        slot_range(s, rec.payload, size)?;
                    }
                }
            }
            // No Arc clone of the wire format on this path: the in-place
            // decode is a few compares, and atomic increments would dominate.
            return Ok(Decoded {
                format: native.clone(),
                bytes: Cow::Borrowed(rec.payload),
            });
        }
        let wire = wire.clone();
        let plan = self.plan(&wire, native)?;
        let mut out = Vec::new();
        plan.run(rec.payload, &mut out)?;
        Ok(Decoded {
            format: native.clone(),
            bytes: Cow::Owned(out),
        })
    }

    /// Decode into a caller-owned buffer (reused across records, no allocation
    /// after warm-up). Always copies, even for identical layouts.
    // Inlined: returning the result through memory costs a store-forwarding
    // stall per record, a third of a small converting decode (measured).
    #[inline(always)]
    pub fn decode_into(
        &mut self,
        rec: &RecordRef<'_>,
        native: &Arc<Format>,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        // Hot path: same pair as last time. The plan was built for exactly
        // this wire id, so the header check reduces to the fixed length.
        if let Some(l) = &self.last {
            if l.wire == rec.id && (Arc::ptr_eq(&l.native, native) || l.native_id == native.id()) {
                if rec.fixed_len != l.src_size {
                    return Err(fixed_len_error(rec.id, rec.fixed_len, &l.plan));
                }
                if let Some(f) = &l.fast {
                    // SAFETY: `l.plan`, which owns the code, lives in `self.last`.
                    if unsafe { f.run(rec.payload, out) } {
                        return Ok(());
                    }
                }
                return l.plan.run(rec.payload, out);
            }
        }
        // By value: the caller's record need not be stored to memory on
        // the hot path just so that this rare one can borrow it.
        self.decode_into_lookup(rec.id, rec.fixed_len, rec.payload, native, out)
    }

    /// `decode_into` for another pair than last time: plan look-up (or
    /// build), then remember the pair.
    #[inline(never)]
    fn decode_into_lookup(
        &mut self,
        id: FormatId,
        fixed_len: u64,
        payload: &[u8],
        native: &Arc<Format>,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        let rec = &RecordRef {
            id,
            fixed_len,
            payload,
        };
        if let Some(p) = self.plans.get(&(rec.id, native.id())) {
            if let Some(w) = self.formats.get(&rec.id) {
                rec.check_format(w)?;
            }
            self.last = Some(Last::new(rec.id, native, p.clone()));
            return p.run(rec.payload, out);
        }
        let wire = self
            .formats
            .get(&rec.id)
            .cloned()
            .ok_or(WireError::UnknownFormat(rec.id))?;
        rec.check_format(&wire)?;
        let plan = self.plan(&wire, native)?;
        self.last = Some(Last::new(rec.id, native, plan.clone()));
        plan.run(rec.payload, out)
    }

    /// Decode and copy into a `T` (for converting decodes of typed records).
    pub fn decode_as<T: WireRecord + Copy>(&mut self, rec: &RecordRef<'_>) -> Result<T> {
        let native = T::format();
        let d = self.decode(rec, &native)?;
        let mut out = std::mem::MaybeUninit::<T>::uninit();
        let n = std::mem::size_of::<T>();
        if d.bytes.len() < n {
            return Err(WireError::NotViewable(
                "decoded record shorter than the type".into(),
            ));
        }
        // SAFETY: `out` has room for n bytes; source has at least n bytes; T
        // is valid for any bit pattern (WireRecord contract), so after the
        // copy it is initialised.
        unsafe {
            std::ptr::copy_nonoverlapping(d.bytes.as_ptr(), out.as_mut_ptr() as *mut u8, n);
            Ok(out.assume_init())
        }
    }
}
