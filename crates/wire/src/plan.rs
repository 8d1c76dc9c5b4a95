//! Conversion plans: built once per (wire format, native format) pair by
//! matching fields by name, then run for every record.
//!
//! Compilation flattens nested formats into absolute offsets, turns fixed
//! arrays of scalars into counted operations, loops over arrays of structs,
//! and finally merges runs of plain moves (and of same-width byte swaps) into
//! single operations, so a pair of layouts that differ only in one field
//! costs one `memcpy` plus that field.

use crate::error::{Result, WireError};
use crate::format::{ByteOrder, FieldType, Format};
use crate::limits;
use crate::record::{slot_range, var_slots, VarSlot};

mod compile;
mod exec;
mod optimize;
use compile::*;
use exec::*;
use optimize::*;

/// What to do when a narrowing integer conversion cannot represent a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OverflowPolicy {
    /// Fail the decode with [`WireError::Overflow`].
    #[default]
    Error,
    /// Clamp to the receiver type's range.
    Saturate,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct IntT {
    pub(crate) size: u8,
    pub(crate) signed: bool,
    pub(crate) swap: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Op {
    Copy {
        src: usize,
        dst: usize,
        len: usize,
    },
    /// Reverse the bytes of `count` elements of `size` bytes.
    Swap {
        src: usize,
        dst: usize,
        size: u8,
        count: usize,
    },
    Int {
        src: usize,
        dst: usize,
        from: IntT,
        to: IntT,
        count: usize,
        field: u32,
    },
    Float {
        src: usize,
        dst: usize,
        from: u8,
        from_swap: bool,
        to: u8,
        to_swap: bool,
        count: usize,
    },
    /// Integer to float: exact where the float can hold it, else rounded
    /// to nearest (as C's conversion does).
    IntToFloat {
        src: usize,
        dst: usize,
        from: IntT,
        to: u8,
        to_swap: bool,
        count: usize,
    },
    /// Float to integer: truncated toward zero (as in C); NaN and values
    /// outside the receiver's range follow the overflow policy (saturate:
    /// clamp, NaN becomes 0).
    FloatToInt {
        src: usize,
        dst: usize,
        from: u8,
        from_swap: bool,
        to: IntT,
        count: usize,
        field: u32,
    },
    /// Write constant bytes (declared defaults).
    Fill {
        dst: usize,
        bytes: Box<[u8]>,
    },
    /// Zero bytes (missing fields without default). Dropped after merging:
    /// the output starts zeroed; they exist so moves never merge across them.
    Zero {
        dst: usize,
        len: usize,
    },
    Repeat {
        src: usize,
        dst: usize,
        count: usize,
        src_stride: usize,
        dst_stride: usize,
        body: Vec<Op>,
    },
}

#[derive(Debug, Clone)]
enum VarKind {
    Str,
    Arr {
        src_elem: usize,
        dst_elem: usize,
        dst_align: usize,
        ops: Vec<Op>,
        identity: bool,
    },
}

#[derive(Debug, Clone)]
struct VarOp {
    src: VarSlot,
    dst: VarSlot,
    kind: VarKind,
}

/// A compiled conversion from one format (as written) to another (as wanted).
#[derive(Debug, Clone)]
pub struct Plan {
    ops: Vec<Op>,
    var_ops: Vec<VarOp>,
    src_size: usize,
    dst_size: usize,
    src_slots: Vec<VarSlot>,
    names: Vec<String>,
    policy: OverflowPolicy,
    /// The fixed-part operations lowered to grouped scalar moves, with the
    /// native gaps (padding, missing fields) as zero stores, so a reused
    /// `out` needs no clearing (see `prog.rs`); what both engines run.
    prog: crate::prog::Prog,
    backend: Backend,
    /// No variable-length parts on either side: `run` takes the short path.
    fixed_only: bool,
    #[cfg(feature = "jit")]
    jit: Option<std::sync::Arc<crate::jit::JitCode>>,
}

/// The hottest path, copied out of a plan: a fixed-only plan whose compiled
/// code writes every byte (gaps included), so running it is a length check,
/// a truncate and one call. Valid only while its plan (and so the code) lives.
#[derive(Clone, Copy)]
pub(crate) struct FastPath {
    src_size: usize,
    dst_size: usize,
    #[cfg(feature = "jit")]
    code: crate::jit::PlanFn,
}

impl FastPath {
    /// Convert, or return false (short payload) for the general path to report.
    ///
    /// # Safety
    /// The plan this came from must still be alive (it owns the code).
    #[inline(always)]
    pub(crate) unsafe fn run(&self, payload: &[u8], out: &mut Vec<u8>) -> bool {
        if payload.len() < self.src_size {
            return false;
        }
        // A reused buffer already has the length: no store at all.
        if out.len() != self.dst_size {
            if out.len() > self.dst_size {
                out.truncate(self.dst_size);
            } else {
                out.clear();
                out.resize(self.dst_size, 0);
            }
        }
        #[cfg(feature = "jit")]
        // SAFETY: payload has >= src_size bytes and out exactly dst_size,
        // the sizes the plan's extents were checked against; the code lives
        // as long as the plan (caller contract).
        unsafe {
            (self.code)(payload.as_ptr(), out.as_mut_ptr());
        }
        true
    }
}

/// Which engine runs a plan's fixed part. With the `jit` feature,
/// `Plan::compile` measures both on a zeroed record and keeps the faster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Interpreter,
    /// Machine code from Cranelift (cargo feature `jit`).
    Jit,
}

struct Ctx<'a> {
    names: Vec<String>,
    var_ops: Vec<VarOp>,
    src_slots: &'a [VarSlot],
    dst_slots: &'a [VarSlot],
    n_ops: usize,
}

fn mismatch(field: &str, from: &FieldType, to: &FieldType) -> WireError {
    WireError::TypeMismatch {
        field: field.to_string(),
        from: from.type_name(),
        to: to.type_name(),
    }
}

/// Integer-like view of 1-byte char/bool so they convert to and from integers.
fn as_int(t: &FieldType) -> Option<(u8, bool)> {
    match t {
        FieldType::Int { size, signed } => Some((*size, *signed)),
        FieldType::Char | FieldType::Bool => Some((1, false)),
        _ => None,
    }
}

/// Records larger than this (source plus destination bytes) are not timed
/// when picking an engine (`Plan::pick_faster`).
#[cfg(feature = "jit")]
const PICK_TIMING_LIMIT: usize = 1 << 20;

impl Plan {
    /// Build the plan converting records written as `wire` into `native`.
    /// With the `jit` feature the engine is chosen by timing both.
    pub fn compile(wire: &Format, native: &Format, policy: OverflowPolicy) -> Result<Plan> {
        Self::compile_with(wire, native, policy, None)
    }

    /// As [`Plan::compile`], but with the engine given instead of measured
    /// (for tests and fuzzing, where the timing would dominate): `Jit` falls
    /// back to the interpreter when there is no machine code; `Interpreter`
    /// generates none.
    pub fn compile_with(
        wire: &Format,
        native: &Format,
        policy: OverflowPolicy,
        backend: Option<Backend>,
    ) -> Result<Plan> {
        let src_slots = var_slots(wire)?;
        let dst_slots = var_slots(native)?;
        let mut cx = Ctx {
            names: Vec::new(),
            var_ops: Vec::new(),
            src_slots: &src_slots,
            dst_slots: &dst_slots,
            n_ops: 0,
        };
        let mut ops = Vec::new();
        compile_struct(wire, native, 0, 0, "", &mut ops, &mut cx)?;
        // Zero marks survive until after the last merge: they keep moves
        // from merging across bytes that must stay zero.
        let ops = drop_zeros(merge(flatten(merge(ops))));
        let var_ops = std::mem::take(&mut cx.var_ops);
        let names = std::mem::take(&mut cx.names);
        let (src_size, dst_size) = (wire.size() as usize, native.size() as usize);
        // The executor uses unchecked pointer accesses; this is what makes
        // them sound: every operation stays inside the fixed parts (checked
        // against the payload length once per record) or, for variable
        // arrays, inside one element.
        check_extent(&ops, src_size, dst_size)?;
        for v in &var_ops {
            if let VarKind::Arr {
                src_elem,
                dst_elem,
                ops,
                ..
            } = &v.kind
            {
                check_extent(ops, *src_elem, *dst_elem)?;
            }
        }
        let gaps = gaps(&ops, &var_ops, dst_size);
        let prog = crate::prog::lower(&ops, gaps.as_deref(), src_size, dst_size)
            .ok_or_else(|| WireError::Usage("internal: lowered plan leaves the record".into()))?;
        #[cfg(feature = "jit")]
        // The compiled code runs the same lowered program, gaps included,
        // so a reused buffer needs no separate pass (see `prepare`).
        let jit = if backend == Some(Backend::Interpreter) {
            None // asked for the interpreter: spare the Cranelift compile
        } else {
            crate::jit::compile(&prog, src_size, dst_size).map(std::sync::Arc::new)
        };
        #[allow(unused_mut)]
        let mut plan = Plan {
            ops,
            var_ops,
            src_size,
            dst_size,
            src_slots,
            names,
            policy,
            prog,
            fixed_only: false,
            backend: Backend::Interpreter,
            #[cfg(feature = "jit")]
            jit,
        };
        plan.fixed_only = plan.src_slots.is_empty() && plan.var_ops.is_empty();
        match backend {
            Some(b) => {
                plan.set_backend(b);
            }
            #[cfg(feature = "jit")]
            None => plan.pick_faster(),
            #[cfg(not(feature = "jit"))]
            None => {}
        }
        Ok(plan)
    }

    /// See [`FastPath`]; `None` unless the JIT runs a fixed-only plan whose
    /// output gaps the code zeroes.
    pub(crate) fn fast_path(&self) -> Option<FastPath> {
        #[cfg(feature = "jit")]
        if let (true, Backend::Jit, Some(j), false) =
            (self.fixed_only, self.backend, &self.jit, self.prog.zero_all)
        {
            return Some(FastPath {
                src_size: self.src_size,
                dst_size: self.dst_size,
                code: j.entry(),
            });
        }
        None
    }

    /// The machine code of a fixed-only plan run by the JIT whose code
    /// writes every output byte (gaps included), as a C function
    /// `uint32_t f(const uint8_t *payload, uint8_t *out)`: what the C API's
    /// inline fast path calls directly. `None` otherwise (no `jit`
    /// feature, interpreted plan, variable parts, or gaps left to a fill).
    ///
    /// The pointer is valid while this plan lives; call it only with a
    /// payload of at least `src_size()` readable bytes and an `out` of at
    /// least `dst_size()` writable bytes, not overlapping.
    pub fn compiled_entry(&self) -> Option<unsafe extern "C" fn(*const u8, *mut u8) -> u32> {
        #[cfg(feature = "jit")]
        if let Some(f) = self.fast_path() {
            return Some(f.code);
        }
        None
    }

    /// The engine `run` uses.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Whether machine code exists for this plan (feature `jit`, and only
    /// operations that cannot fail: narrowing checks stay interpreted).
    pub fn has_jit(&self) -> bool {
        #[cfg(feature = "jit")]
        return self.jit.is_some();
        #[cfg(not(feature = "jit"))]
        false
    }

    /// Whether the interpreter runs this plan's permutable moves as
    /// AVX-512 VBMI byte permutes (chosen at build time when the CPU has
    /// them and they are cheaper; see `prog.rs`).
    pub fn uses_permutes(&self) -> bool {
        self.prog.uses_permutes()
    }

    /// Force the interpreter's byte-permute executor on or off (tests,
    /// fuzzing, benchmarks). False if asked for it where it is unavailable
    /// (no AVX-512 VBMI, compiler older than 1.89, or a record too large).
    #[doc(hidden)]
    pub fn set_permutes(&mut self, on: bool) -> bool {
        self.prog.set_permutes(on, self.src_size, self.dst_size)
    }

    /// Force an engine (benchmarks, tests). False if `Jit` is not available.
    pub fn set_backend(&mut self, b: Backend) -> bool {
        if b == Backend::Jit && !self.has_jit() {
            return false;
        }
        self.backend = b;
        true
    }

    /// Time both engines on a zeroed record (every plan converts zeros
    /// without error) and keep the faster: tiny plans can be faster
    /// interpreted (one memcpy), long ones compiled.
    #[cfg(feature = "jit")]
    fn pick_faster(&mut self) {
        if self.jit.is_none() {
            return;
        }
        // Records over 1 MiB are not timed: a run would allocate and fill
        // megabytes (a hostile format may declare 100 MB records of no
        // operations), and at that size the copy, not the engine's
        // per-operation cost, dominates; the compiled code is kept when
        // there is more than one operation to run.
        if self.src_size.saturating_add(self.dst_size) > PICK_TIMING_LIMIT {
            self.backend = if self.op_count() > 1 {
                Backend::Jit
            } else {
                Backend::Interpreter
            };
            return;
        }
        let payload = vec![0u8; self.src_size];
        let mut out = Vec::new();
        let iters = ((1usize << 20) / (self.src_size + self.dst_size + 1)).clamp(1, 512);
        let mut best = [u128::MAX; 2];
        for _ in 0..3 {
            for (k, b) in [Backend::Interpreter, Backend::Jit].into_iter().enumerate() {
                self.backend = b;
                let t = std::time::Instant::now();
                for _ in 0..iters {
                    if self.run(std::hint::black_box(&payload), &mut out).is_err() {
                        self.backend = Backend::Interpreter;
                        return;
                    }
                }
                best[k] = best[k].min(t.elapsed().as_nanos());
            }
        }
        self.backend = if best[1] < best[0] {
            Backend::Jit
        } else {
            Backend::Interpreter
        };
    }

    /// Size of the wire format's fixed part (what `run` requires at least).
    pub fn src_size(&self) -> usize {
        self.src_size
    }
    /// Size of the native fixed part `run` produces.
    pub fn dst_size(&self) -> usize {
        self.dst_size
    }

    /// Number of top-level operations after merging (for tests and tuning).
    pub fn op_count(&self) -> usize {
        self.ops.len()
    }

    /// True when the plan is a single move of the whole fixed part.
    pub fn is_single_copy(&self) -> bool {
        matches!(self.ops.as_slice(), [Op::Copy { src: 0, dst: 0, .. }]) && self.var_ops.is_empty()
    }

    /// Convert one payload (fixed part + tail, as written) into `out`, which is
    /// cleared and receives the native fixed part followed by its own tail.
    // Inlined: returning the result through memory costs a store-forwarding
    // stall per record, a third of a small converting decode (measured).
    #[inline(always)]
    pub fn run(&self, payload: &[u8], out: &mut Vec<u8>) -> Result<()> {
        if self.fixed_only && payload.len() >= self.src_size {
            // Small-record fast path: no variable fields, so the whole
            // conversion is the fixed part; only overflow can fail.
            self.prepare(out);
            #[cfg(feature = "jit")]
            if let (Backend::Jit, Some(j)) = (self.backend, &self.jit) {
                // SAFETY: payload has >= src_size bytes, out exactly
                // dst_size; the code was generated from `self.ops`, whose
                // extent compile() checked against these sizes.
                let _ = unsafe { j.call(payload.as_ptr(), out.as_mut_ptr()) };
                return Ok(());
            }
            // SAFETY: as above, for the interpreter.
            return unsafe { self.exec_fixed(payload.as_ptr(), out.as_mut_ptr()) }.map_err(|e| *e);
        }
        self.run_general(payload, out)
    }

    /// True when neither layout has variable-length parts, so a record
    /// converts into exactly `dst_size()` bytes ([`Plan::run_fixed_into`]).
    pub fn is_fixed_only(&self) -> bool {
        self.fixed_only
    }

    /// Convert a record of a fixed-only plan straight into a caller's
    /// buffer (its first `dst_size()` bytes, gaps zeroed): what the C API's
    /// decode into the caller's struct runs, with no intermediate buffer
    /// and no second copy. `Usage` error for plans with variable parts.
    // Inlined, errors out of line: a `Result` returned through memory costs
    // a store-forwarding stall per record (see `run`).
    #[inline(always)]
    pub fn run_fixed_into(&self, payload: &[u8], out: &mut [u8]) -> Result<()> {
        if !self.fixed_only || out.len() < self.dst_size || payload.len() < self.src_size {
            return Err(self.fixed_into_error(payload.len(), out.len()));
        }
        let out = &mut out[..self.dst_size];
        if self.prog.zero_all {
            // The lowered program does not write every gap: start from zeros.
            out.fill(0);
        }
        #[cfg(feature = "jit")]
        if let (Backend::Jit, Some(j)) = (self.backend, &self.jit) {
            // SAFETY: payload has >= src_size bytes, out exactly dst_size
            // (two distinct borrows, so they do not overlap); the code was
            // generated from ops whose extent compile() checked against
            // these sizes.
            let _ = unsafe { j.call(payload.as_ptr(), out.as_mut_ptr()) };
            return Ok(());
        }
        // SAFETY: as above, for the interpreter.
        unsafe { self.exec_fixed(payload.as_ptr(), out.as_mut_ptr()) }.map_err(|e| *e)
    }

    #[cold]
    #[inline(never)]
    fn fixed_into_error(&self, have: usize, out_len: usize) -> WireError {
        if !self.fixed_only || out_len < self.dst_size {
            return WireError::Usage(
                "run_fixed_into: plan has variable parts or the output is short".into(),
            );
        }
        WireError::Truncated {
            at: 0,
            needed: self.src_size,
            have,
        }
    }

    #[inline(never)]
    fn run_general(&self, payload: &[u8], out: &mut Vec<u8>) -> Result<()> {
        if payload.len() < self.src_size {
            return Err(WireError::Truncated {
                at: 0,
                needed: self.src_size,
                have: payload.len(),
            });
        }
        // Validate every source slot before any work, so a lying slot is an
        // error no matter which fields the receiver wants.
        for s in &self.src_slots {
            slot_range(s, payload, self.src_size)?;
        }
        self.prepare(out);
        #[cfg(feature = "jit")]
        if let (Backend::Jit, Some(j)) = (self.backend, &self.jit) {
            // SAFETY: as for `exec` below; the code was generated from
            // `self.ops`, whose extent compile() checked.
            let rc = unsafe { j.call(payload.as_ptr(), out.as_mut_ptr()) };
            if rc != 0 {
                return Err(WireError::Usage("internal: compiled plan failed".into()));
            }
        } else {
            // SAFETY: see below.
            unsafe {
                self.exec_fixed(payload.as_ptr(), out.as_mut_ptr())
                    .map_err(|e| *e)?
            };
        }
        #[cfg(not(feature = "jit"))]
        // SAFETY: `payload` has at least src_size bytes (checked above) and
        // `out` exactly dst_size; compile() checked every op's extent
        // against these sizes (check_extent).
        unsafe {
            self.exec_fixed(payload.as_ptr(), out.as_mut_ptr())
                .map_err(|e| *e)?
        };
        for v in &self.var_ops {
            let r = slot_range(&v.src, payload, self.src_size)?;
            let (_, n) = v.src.read(payload)?;
            let data = &payload[r];
            match &v.kind {
                VarKind::Str => {
                    let off = out.len();
                    out.extend_from_slice(data);
                    v.dst.write(
                        out,
                        if data.is_empty() { 0 } else { off as u64 },
                        data.len() as u64,
                    )?;
                }
                VarKind::Arr {
                    src_elem,
                    dst_elem,
                    dst_align,
                    ops,
                    identity,
                } => {
                    let pad = out.len().div_ceil(*dst_align) * dst_align;
                    let n = n as usize;
                    let total = n
                        .checked_mul(*dst_elem)
                        .and_then(|b| b.checked_add(pad))
                        .filter(|&t| t as u64 <= limits::MAX_VAR_TAIL);
                    let Some(total) = total else {
                        return Err(WireError::Limit {
                            what: "converted tail",
                            value: u64::MAX,
                            limit: limits::MAX_VAR_TAIL,
                        });
                    };
                    if *identity && data.len() == total - pad {
                        // Same element layout: one copy, no zero fill first.
                        out.resize(pad, 0);
                        out.extend_from_slice(data);
                    } else if data.len() != n * src_elem {
                        return Err(WireError::BadVarField {
                            field: v.src.path.clone(),
                            reason: "length is not a whole number of elements".into(),
                        });
                    } else if let Some(op) = scaled(ops, n) {
                        out.resize(total, 0);
                        // SAFETY: the scaled op touches n elements: n*src_elem
                        // bytes of `data` (checked just above) and n*dst_elem
                        // bytes of `out` from `pad` (resized to that above).
                        unsafe {
                            exec(
                                std::slice::from_ref(&op),
                                data.as_ptr(),
                                out.as_mut_ptr().add(pad),
                                self,
                            )
                            .map_err(|e| *e)?
                        };
                    } else {
                        out.resize(total, 0);
                        for i in 0..n {
                            // SAFETY: element i lies inside `data` and inside
                            // `out[pad..]` as above; the body stays inside one
                            // element (check_extent at compile time).
                            unsafe {
                                exec(
                                    ops,
                                    data.as_ptr().add(i * src_elem),
                                    out.as_mut_ptr().add(pad + i * dst_elem),
                                    self,
                                )
                                .map_err(|e| *e)?
                            };
                        }
                    }
                    v.dst
                        .write(out, if n == 0 { 0 } else { pad as u64 }, n as u64)?;
                }
            }
        }
        Ok(())
    }
}

impl Plan {
    /// Make `out` exactly the native fixed part with every byte that no
    /// operation writes set to zero. A reused buffer of the right length only
    /// has its gaps cleared (a 100-byte record has a few bytes of padding).
    #[inline]
    fn prepare(&self, out: &mut Vec<u8>) {
        if out.len() >= self.dst_size && !self.prog.zero_all {
            // Both engines run the lowered program, which zeroes the gaps.
            if out.len() != self.dst_size {
                out.truncate(self.dst_size);
            }
        } else {
            out.clear();
            out.resize(self.dst_size, 0);
        }
    }

    /// Run the fixed part with the interpreter: the lowered moves, then
    /// the operations that were not lowered.
    ///
    /// # Safety
    /// `src` readable for `src_size` bytes, `dst` writable for `dst_size`
    /// bytes, not overlapping (the sizes `lower` and `check_extent` checked
    /// every move and operation against).
    #[inline(always)]
    unsafe fn exec_fixed(&self, src: *const u8, dst: *mut u8) -> ExecResult {
        // SAFETY: forwarded caller contract.
        unsafe { self.prog.run_moves(src, dst) };
        if self.prog.rest.is_empty() {
            return Ok(());
        }
        // SAFETY: forwarded caller contract; `rest` are operations of the
        // checked plan (or zero fills of its gaps).
        unsafe { exec(&self.prog.rest, src, dst, self) }
    }
}

/// Furthest (source, destination) byte any of `ops` touches, relative to
/// its base. Saturating: an absurd plan yields a huge extent and is refused.
fn extent(ops: &[Op]) -> (usize, usize) {
    let mut m = (0usize, 0usize);
    let mut upd = |s: usize, d: usize| {
        m.0 = m.0.max(s);
        m.1 = m.1.max(d);
    };
    for op in ops {
        match op {
            Op::Copy { src, dst, len } => upd(src.saturating_add(*len), dst.saturating_add(*len)),
            Op::Swap {
                src,
                dst,
                size,
                count,
            } => {
                let n = (*size as usize).saturating_mul(*count);
                upd(src.saturating_add(n), dst.saturating_add(n))
            }
            Op::Int {
                src,
                dst,
                from,
                to,
                count,
                ..
            } => upd(
                src.saturating_add((from.size as usize).saturating_mul(*count)),
                dst.saturating_add((to.size as usize).saturating_mul(*count)),
            ),
            Op::Float {
                src,
                dst,
                from,
                to,
                count,
                ..
            } => upd(
                src.saturating_add((*from as usize).saturating_mul(*count)),
                dst.saturating_add((*to as usize).saturating_mul(*count)),
            ),
            Op::IntToFloat {
                src,
                dst,
                from,
                to,
                count,
                ..
            } => upd(
                src.saturating_add((from.size as usize).saturating_mul(*count)),
                dst.saturating_add((*to as usize).saturating_mul(*count)),
            ),
            Op::FloatToInt {
                src,
                dst,
                from,
                to,
                count,
                ..
            } => upd(
                src.saturating_add((*from as usize).saturating_mul(*count)),
                dst.saturating_add((to.size as usize).saturating_mul(*count)),
            ),
            Op::Fill { dst, bytes } => upd(0, dst.saturating_add(bytes.len())),
            Op::Zero { dst, len } => upd(0, dst.saturating_add(*len)),
            Op::Repeat {
                src,
                dst,
                count,
                src_stride,
                dst_stride,
                body,
            } => {
                if *count > 0 {
                    let (bs, bd) = extent(body);
                    let k = count - 1;
                    upd(
                        src.saturating_add(k.saturating_mul(*src_stride))
                            .saturating_add(bs),
                        dst.saturating_add(k.saturating_mul(*dst_stride))
                            .saturating_add(bd),
                    );
                }
            }
        }
    }
    m
}

fn check_extent(ops: &[Op], src: usize, dst: usize) -> Result<()> {
    let (s, d) = extent(ops);
    if s > src || d > dst {
        return Err(WireError::Usage(format!(
            "internal: plan reaches {s}/{d} bytes beyond {src}/{dst}"
        )));
    }
    Ok(())
}

/// The native byte ranges no operation writes (see `Plan::gaps`).
fn gaps(ops: &[Op], var_ops: &[VarOp], dst_size: usize) -> Option<Vec<(u32, u32)>> {
    // Written intervals, then their complement. Intervals rather than a
    // byte map so a 100 KiB record is covered too (zeroing it all before
    // converting would double the work); arrays of scalars are one interval
    // each, loops over structs at most `LIMIT` in total.
    const LIMIT: usize = 1 << 20;
    fn mark(ops: &[Op], base: usize, iv: &mut Vec<(usize, usize)>) -> bool {
        for op in ops {
            let (d, n) = match op {
                Op::Copy { dst, len, .. } => (*dst, *len),
                Op::Swap {
                    dst, size, count, ..
                } => (*dst, *size as usize * count),
                Op::Int { dst, to, count, .. } => (*dst, to.size as usize * count),
                Op::Float { dst, to, count, .. } => (*dst, *to as usize * count),
                Op::IntToFloat { dst, to, count, .. } => (*dst, *to as usize * count),
                Op::FloatToInt { dst, to, count, .. } => (*dst, to.size as usize * count),
                Op::Fill { dst, bytes } => (*dst, bytes.len()),
                Op::Zero { .. } => continue,
                Op::Repeat {
                    dst,
                    count,
                    dst_stride,
                    body,
                    ..
                } => {
                    if count.saturating_mul(body.len()) > LIMIT - iv.len() {
                        return false;
                    }
                    for i in 0..*count {
                        if !mark(body, base + dst + i * dst_stride, iv) {
                            return false;
                        }
                    }
                    continue;
                }
            };
            if iv.len() >= LIMIT {
                return false;
            }
            iv.push((base + d, base + d + n));
        }
        true
    }
    let mut iv = Vec::new();
    if !mark(ops, 0, &mut iv) {
        return None;
    }
    for v in var_ops {
        iv.push((v.dst.offset, v.dst.offset + 2 * v.dst.pointer_size as usize));
    }
    iv.sort_unstable();
    let mut out = Vec::new();
    let mut at = 0usize;
    for (a, e) in iv {
        if a > at {
            out.push((at as u32, (a - at) as u32));
        }
        at = at.max(e);
    }
    if at < dst_size {
        out.push((at as u32, (dst_size - at) as u32));
    }
    Some(out)
}
