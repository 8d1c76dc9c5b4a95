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

fn compile_struct(
    wire: &Format,
    native: &Format,
    sbase: usize,
    dbase: usize,
    prefix: &str,
    ops: &mut Vec<Op>,
    cx: &mut Ctx<'_>,
) -> Result<()> {
    let word = wire.byte_order();
    let nord = native.byte_order();
    for nf in native.fields() {
        let path = if prefix.is_empty() {
            nf.name.clone()
        } else {
            format!("{prefix}.{}", nf.name)
        };
        let d = dbase + nf.offset as usize;
        cx.n_ops += 1;
        if cx.n_ops > limits::MAX_PLAN_OPS {
            return Err(WireError::Limit {
                what: "plan operations",
                value: cx.n_ops as u64,
                limit: limits::MAX_PLAN_OPS as u64,
            });
        }
        match wire.field(&nf.name) {
            Some(wf) => compile_field(
                &wf.ty,
                sbase + wf.offset as usize,
                word,
                &nf.ty,
                d,
                nord,
                &path,
                ops,
                cx,
            )?,
            None => {
                let size = nf.ty.size(native.pointer_size()) as usize;
                match (nf.default, as_int(&nf.ty), &nf.ty) {
                    (Some(v), Some((s, signed)), _) => {
                        let mut b = vec![0u8; s as usize];
                        let raw = if signed { v as i64 as u64 } else { v as u64 };
                        crate::record::write_uint(&mut b, raw, nord);
                        ops.push(Op::Fill {
                            dst: d,
                            bytes: b.into(),
                        });
                    }
                    (Some(v), None, FieldType::Float { size: 4 }) => {
                        ops.push(Op::Fill {
                            dst: d,
                            bytes: order_bytes(&(v as f32).to_ne_bytes(), nord),
                        });
                    }
                    (Some(v), None, FieldType::Float { .. }) => {
                        ops.push(Op::Fill {
                            dst: d,
                            bytes: order_bytes(&v.to_ne_bytes(), nord),
                        });
                    }
                    _ => ops.push(Op::Zero { dst: d, len: size }),
                }
            }
        }
    }
    Ok(())
}

fn order_bytes(ne: &[u8], order: ByteOrder) -> Box<[u8]> {
    let mut b = ne.to_vec();
    if order != ByteOrder::NATIVE {
        b.reverse();
    }
    b.into()
}

#[allow(clippy::too_many_arguments)]
fn compile_field(
    wt: &FieldType,
    s: usize,
    word: ByteOrder,
    nt: &FieldType,
    d: usize,
    nord: ByteOrder,
    path: &str,
    ops: &mut Vec<Op>,
    cx: &mut Ctx<'_>,
) -> Result<()> {
    compile_counted(wt, s, word, nt, d, nord, 1, path, ops, cx)
}

/// Compile `count` consecutive elements of scalar or composite types.
#[allow(clippy::too_many_arguments)]
fn compile_counted(
    wt: &FieldType,
    s: usize,
    word: ByteOrder,
    nt: &FieldType,
    d: usize,
    nord: ByteOrder,
    count: usize,
    path: &str,
    ops: &mut Vec<Op>,
    cx: &mut Ctx<'_>,
) -> Result<()> {
    let wswap = word != ByteOrder::NATIVE;
    let nswap = nord != ByteOrder::NATIVE;
    match (wt, nt) {
        (FieldType::Float { size: a }, FieldType::Float { size: b }) => {
            if a == b && wswap == nswap {
                ops.push(Op::Copy {
                    src: s,
                    dst: d,
                    len: *a as usize * count,
                });
            } else if a == b {
                ops.push(Op::Swap {
                    src: s,
                    dst: d,
                    size: *a,
                    count,
                });
            } else {
                ops.push(Op::Float {
                    src: s,
                    dst: d,
                    from: *a,
                    from_swap: wswap,
                    to: *b,
                    to_swap: nswap,
                    count,
                });
            }
        }
        _ if as_int(wt).is_some() && as_int(nt).is_some() => {
            let (a, sa) = as_int(wt).unwrap_or((1, false));
            let (b, sb) = as_int(nt).unwrap_or((1, false));
            // char/bool are treated as unsigned bytes; between themselves they move.
            let same_sign = sa == sb
                || (a == 1
                    && b == 1
                    && (matches!(wt, FieldType::Char | FieldType::Bool)
                        || matches!(nt, FieldType::Char | FieldType::Bool)));
            if a == b && same_sign && (a == 1 || wswap == nswap) {
                ops.push(Op::Copy {
                    src: s,
                    dst: d,
                    len: a as usize * count,
                });
            } else if a == b && same_sign {
                ops.push(Op::Swap {
                    src: s,
                    dst: d,
                    size: a,
                    count,
                });
            } else {
                let field = cx.names.len() as u32;
                cx.names.push(path.to_string());
                ops.push(Op::Int {
                    src: s,
                    dst: d,
                    from: IntT {
                        size: a,
                        signed: sa,
                        swap: wswap,
                    },
                    to: IntT {
                        size: b,
                        signed: sb,
                        swap: nswap,
                    },
                    count,
                    field,
                });
            }
        }
        (FieldType::Int { size, signed }, FieldType::Float { size: to }) => {
            ops.push(Op::IntToFloat {
                src: s,
                dst: d,
                from: IntT {
                    size: *size,
                    signed: *signed,
                    swap: wswap,
                },
                to: *to,
                to_swap: nswap,
                count,
            });
        }
        (FieldType::Float { size: from }, FieldType::Int { size, signed }) => {
            let field = cx.names.len() as u32;
            cx.names.push(path.to_string());
            ops.push(Op::FloatToInt {
                src: s,
                dst: d,
                from: *from,
                from_swap: wswap,
                to: IntT {
                    size: *size,
                    signed: *signed,
                    swap: nswap,
                },
                count,
                field,
            });
        }
        (
            FieldType::Array {
                elem: we,
                count: wc,
            },
            FieldType::Array {
                elem: ne,
                count: nc,
            },
        ) => {
            let n = (*wc).min(*nc) as usize;
            let wes = we.size(8) as usize; // composite sizes below use the nested format's own size
            let nes = ne.size(8) as usize;
            if count > 1 && wc != nc {
                // Arrays of arrays of other lengths: row by row (the rows
                // are not contiguous on both sides).
                let (wrow, nrow) = (wes * *wc as usize, nes * *nc as usize);
                if we.has_var() && ne.has_var() {
                    for r in 0..count {
                        compile_counted(
                            wt,
                            s + r * wrow,
                            word,
                            nt,
                            d + r * nrow,
                            nord,
                            1,
                            &format!("{path}[{r}]"),
                            ops,
                            cx,
                        )?;
                    }
                    return Ok(());
                }
                let mut body = Vec::new();
                compile_counted(wt, 0, word, nt, 0, nord, 1, path, &mut body, cx)?;
                push_loop(ops, s, d, count, wrow, nrow, merge(body));
                return Ok(());
            }
            // The receiver's elements past the writer's count stay zero;
            // marked (after the elements) so no merged move spans them.
            let tail = (*nc as usize > n).then(|| Op::Zero {
                dst: d + n * nes,
                len: (*nc as usize - n) * nes,
            });
            let scalar =
                |t: &FieldType| as_int(t).is_some() || matches!(t, FieldType::Float { .. });
            if scalar(we) && scalar(ne) {
                compile_counted(we, s, word, ne, d, nord, n * count, path, ops, cx)?;
            } else if we.has_var() && ne.has_var() {
                // Variable fields inside array elements: their slots are
                // known by absolute offset (`var_slots` expands arrays), so
                // the elements are compiled one by one instead of as a loop
                // body with relative offsets. Bounded by MAX_VAR_SLOTS and
                // the plan-operation limit.
                for i in 0..n * count {
                    compile_counted(
                        we,
                        s + i * wes,
                        word,
                        ne,
                        d + i * nes,
                        nord,
                        1,
                        &format!("{path}[{i}]"),
                        ops,
                        cx,
                    )?;
                }
            } else {
                let mut body = Vec::new();
                compile_counted(
                    we,
                    0,
                    word,
                    ne,
                    0,
                    nord,
                    1,
                    &format!("{path}[]"),
                    &mut body,
                    cx,
                )?;
                let body = merge(body);
                let total = n * count;
                if let [Op::Copy {
                    src: 0,
                    dst: 0,
                    len,
                }] = body.as_slice()
                {
                    if *len == wes && *len == nes {
                        ops.push(Op::Copy {
                            src: s,
                            dst: d,
                            len: len * total,
                        });
                        ops.extend(tail);
                        return Ok(());
                    }
                }
                push_loop(ops, s, d, total, wes, nes, body);
            }
            ops.extend(tail);
        }
        (FieldType::Nested(wf), FieldType::Nested(nf)) => {
            if count == 1 {
                compile_struct(wf, nf, s, d, path, ops, cx)?;
            } else {
                let mut body = Vec::new();
                compile_struct(wf, nf, 0, 0, path, &mut body, cx)?;
                let body = merge(body);
                push_loop(
                    ops,
                    s,
                    d,
                    count,
                    wf.size() as usize,
                    nf.size() as usize,
                    body,
                );
            }
        }
        (FieldType::VarString, FieldType::VarString) => {
            let (src, dst) = find_slots(cx, s, d, path)?;
            cx.var_ops.push(VarOp {
                src,
                dst,
                kind: VarKind::Str,
            });
        }
        (FieldType::VarArray(we), FieldType::VarArray(ne)) => {
            let (src, dst) = find_slots(cx, s, d, path)?;
            let mut body = Vec::new();
            compile_counted(
                we,
                0,
                word,
                ne,
                0,
                nord,
                1,
                &format!("{path}[]"),
                &mut body,
                cx,
            )?;
            let body = drop_zeros(merge(body));
            let src_elem = we.size(src.pointer_size) as usize;
            let dst_elem = ne.size(dst.pointer_size) as usize;
            let identity = matches!(body.as_slice(), [Op::Copy { src: 0, dst: 0, len }] if *len == src_elem && *len == dst_elem);
            let dst_align = dst.elem_align();
            cx.var_ops.push(VarOp {
                src,
                dst,
                kind: VarKind::Arr {
                    src_elem,
                    dst_elem,
                    dst_align,
                    ops: body,
                    identity,
                },
            });
        }
        _ => return Err(mismatch(path, wt, nt)),
    }
    Ok(())
}

fn find_slots(cx: &Ctx<'_>, s: usize, d: usize, path: &str) -> Result<(VarSlot, VarSlot)> {
    // Slots are in offset order (var_slots walks fields by offset and
    // expands arrays in order): binary search keeps 65 536 slots cheap.
    fn find(slots: &[VarSlot], o: usize) -> Option<&VarSlot> {
        slots
            .binary_search_by_key(&o, |v| v.offset)
            .ok()
            .map(|i| &slots[i])
    }
    let src = find(cx.src_slots, s);
    let dst = find(cx.dst_slots, d);
    match (src, dst) {
        (Some(a), Some(b)) => Ok((a.clone(), b.clone())),
        // Variable fields inside repeated (array) structs are addressed by a
        // loop-relative offset; they are not supported inside `Repeat` bodies.
        _ => Err(WireError::TypeMismatch {
            field: path.to_string(),
            from: "variable field inside an array of structs".into(),
            to: "(unsupported in conversion)".into(),
        }),
    }
}

/// Unroll short loops (at most `FLAT` operations in all, bodies without
/// loops) into operations at absolute offsets: the interpreter then pays no
/// call per element, and moves of neighbouring elements can merge.
fn flatten(ops: Vec<Op>) -> Vec<Op> {
    const FLAT: usize = 256;
    let mut out = Vec::with_capacity(ops.len());
    for op in ops {
        match op {
            Op::Repeat {
                src,
                dst,
                count,
                src_stride,
                dst_stride,
                body,
            } if count.saturating_mul(body.len()) <= FLAT
                && !body.iter().any(|o| matches!(o, Op::Repeat { .. })) =>
            {
                for i in 0..count {
                    for o in &body {
                        out.push(shifted(o, src + i * src_stride, dst + i * dst_stride));
                    }
                }
            }
            other => out.push(other),
        }
    }
    out
}

/// `op` with `s`/`d` added to its offsets (loop-free operations only).
fn shifted(op: &Op, s: usize, d: usize) -> Op {
    let mut o = op.clone();
    match &mut o {
        Op::Copy { src, dst, .. }
        | Op::Swap { src, dst, .. }
        | Op::Int { src, dst, .. }
        | Op::Float { src, dst, .. }
        | Op::IntToFloat { src, dst, .. }
        | Op::FloatToInt { src, dst, .. }
        | Op::Repeat { src, dst, .. } => {
            *src += s;
            *dst += d;
        }
        Op::Fill { dst, .. } | Op::Zero { dst, .. } => *dst += d,
    }
    o
}

/// `count` iterations of `body` as a loop; a body with nothing to do (no
/// field in common, or only zero fills) must not become one — a hostile
/// format could make it billions of empty iterations per record — and
/// becomes a zero mark over the whole field instead.
#[allow(clippy::too_many_arguments)]
fn push_loop(
    ops: &mut Vec<Op>,
    src: usize,
    dst: usize,
    count: usize,
    src_stride: usize,
    dst_stride: usize,
    body: Vec<Op>,
) {
    if body.iter().all(|o| matches!(o, Op::Zero { .. })) {
        if count > 0 {
            ops.push(Op::Zero {
                dst,
                len: count.saturating_mul(dst_stride),
            });
        }
        return;
    }
    ops.push(Op::Repeat {
        src,
        dst,
        count,
        src_stride,
        dst_stride,
        body,
    });
}

/// Remove the zero marks (the output's gaps are zeroed anyway), inside
/// loop bodies too.
fn drop_zeros(mut ops: Vec<Op>) -> Vec<Op> {
    ops.retain(|o| !matches!(o, Op::Zero { .. }));
    for o in &mut ops {
        if let Op::Repeat { body, .. } = o {
            *body = drop_zeros(std::mem::take(body));
        }
    }
    ops
}

/// Merge adjacent moves and swaps. Zero marks (missing fields, elements
/// past the writer's count) are kept: no move merges across them.
fn merge(ops: Vec<Op>) -> Vec<Op> {
    let mut out: Vec<Op> = Vec::with_capacity(ops.len());
    for op in ops {
        if let Some(last) = out.last_mut() {
            match (last, &op) {
                (
                    Op::Copy {
                        src: s1,
                        dst: d1,
                        len: l1,
                    },
                    Op::Copy {
                        src: s2,
                        dst: d2,
                        len: l2,
                    },
                ) => {
                    // Same displacement and only padding (at most 16 bytes) between:
                    // copying the padding too is harmless and saves an operation.
                    let e1s = *s1 + *l1;
                    let e1d = *d1 + *l1;
                    if *s2 >= e1s && *d2 >= e1d && *s2 - *s1 == *d2 - *d1 && *d2 - e1d <= 16 {
                        *l1 = *d2 + *l2 - *d1;
                        continue;
                    }
                }
                (
                    Op::Swap {
                        src: s1,
                        dst: d1,
                        size: z1,
                        count: c1,
                    },
                    Op::Swap {
                        src: s2,
                        dst: d2,
                        size: z2,
                        count: c2,
                    },
                ) if z1 == z2
                    && *s1 + *z1 as usize * *c1 == *s2
                    && *d1 + *z1 as usize * *c1 == *d2 =>
                {
                    *c1 += c2;
                    continue;
                }
                _ => {}
            }
        }
        out.push(op);
    }
    out
}

/// Read an unsigned scalar of `size` bytes.
///
/// # Safety
/// `p` must be valid for reads of `size` bytes.
#[inline(always)]
unsafe fn rd(p: *const u8, size: u8, swap: bool) -> u64 {
    // SAFETY: caller guarantees `size` readable bytes; unaligned reads.
    unsafe {
        match size {
            1 => *p as u64,
            2 => {
                let v = (p as *const u16).read_unaligned();
                (if swap { v.swap_bytes() } else { v }) as u64
            }
            4 => {
                let v = (p as *const u32).read_unaligned();
                (if swap { v.swap_bytes() } else { v }) as u64
            }
            _ => {
                let v = (p as *const u64).read_unaligned();
                if swap {
                    v.swap_bytes()
                } else {
                    v
                }
            }
        }
    }
}

/// Write the low `size` bytes of `v`.
///
/// # Safety
/// `p` must be valid for writes of `size` bytes.
#[inline(always)]
unsafe fn wr(p: *mut u8, size: u8, swap: bool, v: u64) {
    // SAFETY: caller guarantees `size` writable bytes; unaligned writes.
    unsafe {
        match size {
            1 => *p = v as u8,
            2 => (p as *mut u16).write_unaligned(if swap {
                (v as u16).swap_bytes()
            } else {
                v as u16
            }),
            4 => (p as *mut u32).write_unaligned(if swap {
                (v as u32).swap_bytes()
            } else {
                v as u32
            }),
            _ => (p as *mut u64).write_unaligned(if swap { v.swap_bytes() } else { v }),
        }
    }
}

fn sign_extend(v: u64, size: u8) -> i128 {
    let shift = 64 - 8 * size as u32;
    (((v << shift) as i64) >> shift) as i128
}

fn convert_int(
    raw: u64,
    from: IntT,
    to: IntT,
    policy: OverflowPolicy,
    plan: &Plan,
    field: u32,
) -> std::result::Result<u64, Box<WireError>> {
    let v: i128 = if from.signed {
        sign_extend(raw, from.size)
    } else {
        raw as i128
    };
    let bits = 8 * to.size as u32;
    let (lo, hi): (i128, i128) = if to.signed {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    } else {
        (0, (1i128 << bits) - 1)
    };
    let c = if v < lo || v > hi {
        match policy {
            OverflowPolicy::Saturate => v.clamp(lo, hi),
            OverflowPolicy::Error => {
                return Err(Box::new(WireError::Overflow {
                    field: plan.names.get(field as usize).cloned().unwrap_or_default(),
                    value: v.to_string(),
                }));
            }
        }
    } else {
        v
    };
    Ok(c as u64)
}

/// Run `ops` from `src` into `dst` (element or record bases).
///
/// # Safety
/// `src`/`dst` must be valid for the extent of `ops` (see [`extent`]), which
/// `Plan::compile` checked against the sizes the callers guarantee; the two
/// regions must not overlap.
/// Truncate toward zero; NaN or out of range follows the policy.
fn float_to_int(
    x: f64,
    to: IntT,
    plan: &Plan,
    field: u32,
) -> std::result::Result<u64, Box<WireError>> {
    let bits = 8 * to.size as u32;
    let (lo, hi): (i128, i128) = if to.signed {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    } else {
        (0, (1i128 << bits) - 1)
    };
    // `as i128` saturates and maps NaN to 0, so the range test is exact.
    let t = x.trunc() as i128;
    if x.is_nan() || t < lo || t > hi {
        return match plan.policy {
            OverflowPolicy::Saturate => Ok(t.clamp(lo, hi) as u64),
            OverflowPolicy::Error => Err(Box::new(WireError::Overflow {
                field: plan.names.get(field as usize).cloned().unwrap_or_default(),
                value: x.to_string(),
            })),
        };
    }
    Ok(t as u64)
}

/// Errors are boxed so the result fits in a register: returning a large
/// `Result` through memory costs a store-forwarding stall per call.
type ExecResult = std::result::Result<(), Box<WireError>>;

unsafe fn exec(ops: &[Op], src: *const u8, dst: *mut u8, plan: &Plan) -> ExecResult {
    for op in ops {
        // SAFETY (whole match): every offset below is inside the op's extent.
        unsafe {
            match op {
                Op::Copy {
                    src: s,
                    dst: d,
                    len,
                } => copy(src.add(*s), dst.add(*d), *len),
                Op::Swap {
                    src: s,
                    dst: d,
                    size,
                    count,
                } => {
                    let (s, d) = (src.add(*s), dst.add(*d));
                    // Long runs 16 bytes at a time with SSSE3 byte shuffles
                    // (LLVM's own vectorisation for the baseline x86-64
                    // target ran at twice a scalar C loop's time); the
                    // remainder below.
                    let done = swap_run_simd(s, d, *count, *size as usize);
                    let (s, d, count) = (
                        s.add(done * *size as usize),
                        d.add(done * *size as usize),
                        &(*count - done),
                    );
                    match size {
                        2 => swap_run::<u16>(s, d, *count, u16::swap_bytes),
                        4 => swap_run::<u32>(s, d, *count, u32::swap_bytes),
                        8 => swap_run::<u64>(s, d, *count, u64::swap_bytes),
                        _ => std::ptr::copy_nonoverlapping(s, d, *size as usize * count),
                    }
                }
                Op::Int {
                    src: s,
                    dst: d,
                    from,
                    to,
                    count,
                    field,
                } => {
                    for i in 0..*count {
                        let raw = rd(src.add(s + i * from.size as usize), from.size, from.swap);
                        let v = convert_int(raw, *from, *to, plan.policy, plan, *field)?;
                        wr(dst.add(d + i * to.size as usize), to.size, to.swap, v);
                    }
                }
                Op::Float {
                    src: s,
                    dst: d,
                    from,
                    from_swap,
                    to,
                    to_swap,
                    count,
                } => {
                    for i in 0..*count {
                        let raw = rd(src.add(s + i * *from as usize), *from, *from_swap);
                        let v = if *from == 4 {
                            f32::from_bits(raw as u32) as f64
                        } else {
                            f64::from_bits(raw)
                        };
                        let o = if *to == 4 {
                            (v as f32).to_bits() as u64
                        } else {
                            v.to_bits()
                        };
                        wr(dst.add(d + i * *to as usize), *to, *to_swap, o);
                    }
                }
                Op::IntToFloat {
                    src: s,
                    dst: d,
                    from,
                    to,
                    to_swap,
                    count,
                } => {
                    for i in 0..*count {
                        let raw = rd(src.add(s + i * from.size as usize), from.size, from.swap);
                        let v = if from.signed {
                            sign_extend(raw, from.size) as f64
                        } else {
                            raw as f64
                        };
                        let o = if *to == 4 {
                            (v as f32).to_bits() as u64
                        } else {
                            v.to_bits()
                        };
                        wr(dst.add(d + i * *to as usize), *to, *to_swap, o);
                    }
                }
                Op::FloatToInt {
                    src: s,
                    dst: d,
                    from,
                    from_swap,
                    to,
                    count,
                    field,
                } => {
                    for i in 0..*count {
                        let raw = rd(src.add(s + i * *from as usize), *from, *from_swap);
                        let x = if *from == 4 {
                            f32::from_bits(raw as u32) as f64
                        } else {
                            f64::from_bits(raw)
                        };
                        let v = float_to_int(x, *to, plan, *field)?;
                        wr(dst.add(d + i * to.size as usize), to.size, to.swap, v);
                    }
                }
                Op::Fill { dst: d, bytes } => {
                    std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst.add(*d), bytes.len())
                }
                Op::Zero { dst: d, len } => std::ptr::write_bytes(dst.add(*d), 0, *len),
                Op::Repeat {
                    src: s,
                    dst: d,
                    count,
                    src_stride,
                    dst_stride,
                    body,
                } => {
                    for i in 0..*count {
                        exec(
                            body,
                            src.add(s + i * src_stride),
                            dst.add(d + i * dst_stride),
                            plan,
                        )?;
                    }
                }
            }
        }
    }
    Ok(())
}

/// Copy `n` bytes; short copies (most fields) as two overlapping unaligned
/// moves instead of a call to `memcpy`, which dominated interpreted plans
/// of reordered fields.
///
/// # Safety
/// `s` readable and `d` writable for `n` bytes, not overlapping.
#[inline(always)]
unsafe fn copy(s: *const u8, d: *mut u8, n: usize) {
    // SAFETY: every access below is inside [0, n) of both regions.
    unsafe {
        match n {
            0 => {}
            1 => *d = *s,
            2..=3 => {
                let a = (s as *const u16).read_unaligned();
                let b = (s.add(n - 2) as *const u16).read_unaligned();
                (d as *mut u16).write_unaligned(a);
                (d.add(n - 2) as *mut u16).write_unaligned(b);
            }
            4..=7 => {
                let a = (s as *const u32).read_unaligned();
                let b = (s.add(n - 4) as *const u32).read_unaligned();
                (d as *mut u32).write_unaligned(a);
                (d.add(n - 4) as *mut u32).write_unaligned(b);
            }
            8..=16 => {
                let a = (s as *const u64).read_unaligned();
                let b = (s.add(n - 8) as *const u64).read_unaligned();
                (d as *mut u64).write_unaligned(a);
                (d.add(n - 8) as *mut u64).write_unaligned(b);
            }
            17..=32 => {
                let a = (s as *const u128).read_unaligned();
                let b = (s.add(n - 16) as *const u128).read_unaligned();
                (d as *mut u128).write_unaligned(a);
                (d.add(n - 16) as *mut u128).write_unaligned(b);
            }
            _ => std::ptr::copy_nonoverlapping(s, d, n),
        }
    }
}

/// Byte-swap `n` unaligned scalars (the compiler vectorises this loop).
///
/// # Safety
/// `s` readable and `d` writable for `n * size_of::<T>()` bytes, not overlapping.
#[inline(always)]
unsafe fn swap_run<T: Copy>(s: *const u8, d: *mut u8, n: usize, f: fn(T) -> T) {
    for i in 0..n {
        // SAFETY: element i is inside both regions (caller contract).
        unsafe {
            let v = (s as *const T).add(i).read_unaligned();
            (d as *mut T).add(i).write_unaligned(f(v));
        }
    }
}

/// Byte-swap as many whole elements of a run as SSSE3 shuffles can (16
/// bytes per step, four steps per round); returns the number done (0
/// without SSSE3, off x86-64, or for short runs).
///
/// # Safety
/// As for [`swap_run`]: `s` readable and `d` writable for `n * width`
/// bytes, not overlapping.
#[inline(always)]
unsafe fn swap_run_simd(s: *const u8, d: *mut u8, n: usize, width: usize) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        if n * width >= 64 && matches!(width, 2 | 4 | 8) && is_x86_feature_detected!("ssse3") {
            // SAFETY: SSSE3 is present (checked); forwarded contract.
            return unsafe { swap_run_ssse3(s, d, n, width) };
        }
    }
    let _ = (s, d, n, width);
    0
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "ssse3")]
unsafe fn swap_run_ssse3(s: *const u8, d: *mut u8, n: usize, width: usize) -> usize {
    use std::arch::x86_64::*;
    let mut idx = [0u8; 16];
    for (i, b) in idx.iter_mut().enumerate() {
        *b = (i - i % width + (width - 1 - i % width)) as u8;
    }
    // SAFETY: loads and stores stay below n * width bytes: `bytes` rounds
    // that down to whole 64-byte rounds (caller contract for the regions).
    unsafe {
        let mask = _mm_loadu_si128(idx.as_ptr() as *const __m128i);
        let bytes = n * width / 64 * 64;
        let mut i = 0;
        while i < bytes {
            for k in 0..4 {
                let v = _mm_loadu_si128(s.add(i + 16 * k) as *const __m128i);
                _mm_storeu_si128(d.add(i + 16 * k) as *mut __m128i, _mm_shuffle_epi8(v, mask));
            }
            i += 64;
        }
        bytes / width
    }
}

/// A one-element scalar body scaled to `n` elements, so a variable array of
/// scalars runs as one counted operation instead of `n` interpreted ones.
fn scaled(ops: &[Op], n: usize) -> Option<Op> {
    match ops {
        [Op::Swap {
            src: 0,
            dst: 0,
            size,
            count: 1,
        }] => Some(Op::Swap {
            src: 0,
            dst: 0,
            size: *size,
            count: n,
        }),
        [Op::Int {
            src: 0,
            dst: 0,
            from,
            to,
            count: 1,
            field,
        }] => Some(Op::Int {
            src: 0,
            dst: 0,
            from: *from,
            to: *to,
            count: n,
            field: *field,
        }),
        [Op::Float {
            src: 0,
            dst: 0,
            from,
            from_swap,
            to,
            to_swap,
            count: 1,
        }] => Some(Op::Float {
            src: 0,
            dst: 0,
            from: *from,
            from_swap: *from_swap,
            to: *to,
            to_swap: *to_swap,
            count: n,
        }),
        _ => None,
    }
}
