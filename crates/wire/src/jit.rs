//! Cranelift back end for conversion plans (cargo feature `jit`).
//!
//! A plan's fixed-part operations become one straight-line function
//! `fn(src, dst) -> u32`: constant offsets, loads/`bswap`/stores unrolled for
//! short runs and loops for long ones, nested arrays as loops. Small records
//! pay the interpreter's dispatch per operation; the compiled function pays
//! nothing of the kind, which is where the hand-written conversion's speed
//! comes from. Operations whose checks could fail (narrowing integers) are
//! left to the interpreter: `compile` returns `None` and the plan keeps
//! interpreting, so the JIT never changes a result, only its speed.

use cranelift_codegen::ir::{
    types, AbiParam, ConstantData, Endianness, InstBuilder, MemFlags, Type, Value,
};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, Linkage, Module};

use crate::plan::{IntT, Op};
use crate::prog::{Ext, Prog, E, K};

/// Signature of compiled plans: source and destination fixed parts.
pub(crate) type PlanFn = unsafe extern "C" fn(*const u8, *mut u8) -> u32;

/// Machine code for one plan's fixed part.
pub(crate) struct JitCode {
    module: Option<JITModule>,
    f: PlanFn,
}

impl std::fmt::Debug for JitCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JitCode")
    }
}

// SAFETY: after `finalize_definitions` the module's code pages are immutable
// and only executed; the module is touched again only by Drop (with `&mut`).
unsafe impl Send for JitCode {}
// SAFETY: as above; calling the function needs no shared mutable state.
unsafe impl Sync for JitCode {}

impl Drop for JitCode {
    fn drop(&mut self) {
        if let Some(m) = self.module.take() {
            // SAFETY: the only pointer into this module's memory is `self.f`,
            // which dies with `self`.
            unsafe { m.free_memory() };
        }
    }
}

impl JitCode {
    /// The entry point, valid while `self` lives.
    pub(crate) fn entry(&self) -> PlanFn {
        self.f
    }

    /// Run the compiled conversion.
    ///
    /// # Safety
    /// Same contract as the interpreter's `exec`: `src` and `dst` valid for
    /// the plan's extent (checked by `Plan::compile`), not overlapping.
    #[inline]
    pub(crate) unsafe fn call(&self, src: *const u8, dst: *mut u8) -> u32 {
        // SAFETY: forwarded caller contract; `f` was produced for these ops.
        unsafe { (self.f)(src, dst) }
    }
}

/// Past this many emitted memory operations, loops are used instead of
/// unrolling (code size and compile time stay bounded).
const UNROLL: usize = 64;

/// Most instructions a plan may compile to. Cranelift's time grows with
/// the function; a hostile format must not make a plan take seconds to
/// build (found by the `convert` fuzz target), and beyond this size the
/// per-operation dispatch the JIT saves is small next to the data moved.
const BUDGET: usize = 1 << 14;

/// Roughly the instructions `Emit::op` produces (mirrors its choices).
fn cost(ops: &[Op]) -> usize {
    let elems = |count: usize| if count <= UNROLL { 3 * count } else { 12 };
    ops.iter()
        .map(|op| match op {
            Op::Copy { len, .. } | Op::Zero { len, .. } => {
                if *len > 8 * UNROLL {
                    4
                } else {
                    2 * (len / 8 + 4)
                }
            }
            Op::Swap { count, .. }
            | Op::Int { count, .. }
            | Op::Float { count, .. }
            | Op::IntToFloat { count, .. }
            | Op::FloatToInt { count, .. } => elems(*count),
            Op::Fill { bytes, .. } => 2 * bytes.len(),
            Op::Repeat { count, body, .. } => {
                if count.saturating_mul(body.len()) <= UNROLL {
                    count.saturating_mul(cost(body) + 2)
                } else {
                    cost(body) + 12
                }
            }
        })
        .fold(0usize, |a, b| a.saturating_add(b))
}

/// Compile a lowered program (its moves, then the operations left in
/// `rest`), or `None` if it contains something left to the interpreter or
/// would be too large to compile quickly.
pub(crate) fn compile(prog: &Prog, src_size: usize, dst_size: usize) -> Option<JitCode> {
    let ops: Vec<Op> = prog.bulk.iter().chain(&prog.rest).cloned().collect();
    let ops = &ops;
    if !ops.iter().all(supported) || cost(ops).saturating_add(2 * prog.len()) > BUDGET {
        return None;
    }
    let mut flags = settings::builder();
    flags.set("opt_level", "speed").ok()?;
    flags.set("use_colocated_libcalls", "false").ok()?;
    flags.set("is_pic", "false").ok()?;
    let isa = cranelift_native::builder()
        .ok()?
        .finish(settings::Flags::new(flags))
        .ok()?;
    let mut module = JITModule::new(JITBuilder::with_isa(isa, default_libcall_names()));
    let ptr = module.target_config().pointer_type();
    let mut ctx = module.make_context();
    ctx.func.signature.params.push(AbiParam::new(ptr));
    ctx.func.signature.params.push(AbiParam::new(ptr));
    ctx.func.signature.returns.push(AbiParam::new(types::I32));
    let mut fbc = FunctionBuilderContext::new();
    {
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fbc);
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        b.seal_block(entry);
        let src = b.block_params(entry)[0];
        let dst = b.block_params(entry)[1];
        let mut e = Emit {
            b,
            ptr,
            cfg: module.target_config(),
        };
        e.moves(prog, src, dst, src_size, dst_size)?;
        e.ops(ops, src, dst)?;
        let zero = e.b.ins().iconst(types::I32, 0);
        e.b.ins().return_(&[zero]);
        e.b.finalize();
    }
    let id = module
        .declare_function("gw_plan", Linkage::Local, &ctx.func.signature)
        .ok()?;
    module.define_function(id, &mut ctx).ok()?;
    module.clear_context(&mut ctx);
    module.finalize_definitions().ok()?;
    let code = module.get_finalized_function(id);
    // SAFETY: `code` is the finalized function declared with the PlanFn
    // signature (two pointers in, i32 out, default call convention).
    let f: PlanFn = unsafe { std::mem::transmute::<*const u8, PlanFn>(code) };
    Some(JitCode {
        module: Some(module),
        f,
    })
}

/// Integer conversions that can never fail (no range check needed).
fn int_total(from: IntT, to: IntT) -> bool {
    if to.size > from.size {
        from.signed == to.signed || !from.signed
    } else {
        to.size == from.size && from.signed == to.signed
    }
}

fn supported(op: &Op) -> bool {
    match op {
        Op::Int { from, to, .. } => int_total(*from, *to),
        // Range checks stay interpreted.
        Op::FloatToInt { .. } => false,
        Op::Repeat { body, .. } => body.iter().all(supported),
        _ => true,
    }
}

struct Emit<'a> {
    b: FunctionBuilder<'a>,
    ptr: Type,
    cfg: cranelift_codegen::isa::TargetFrontendConfig,
}

fn int_ty(size: u8) -> Type {
    match size {
        1 => types::I8,
        2 => types::I16,
        4 => types::I32,
        _ => types::I64,
    }
}

fn flags() -> MemFlags {
    // Unaligned accesses are fine on the targets Cranelift JITs for; plan
    // extents were checked, so no access traps.
    MemFlags::new().with_notrap()
}

impl Emit<'_> {
    fn off(&self, o: usize) -> Option<i32> {
        i32::try_from(o).ok()
    }

    fn load(&mut self, ty: Type, base: Value, o: usize, swap: bool) -> Option<Value> {
        let o = self.off(o)?;
        let v = self.b.ins().load(ty, flags(), base, o);
        Some(if swap && ty.bytes() > 1 {
            self.b.ins().bswap(v)
        } else {
            v
        })
    }

    fn store(&mut self, v: Value, base: Value, o: usize, swap: bool) -> Option<()> {
        let o = self.off(o)?;
        let ty = self.b.func.dfg.value_type(v);
        let v = if swap && ty.bytes() > 1 {
            self.b.ins().bswap(v)
        } else {
            v
        };
        self.b.ins().store(flags(), v, base, o);
        Some(())
    }

    /// `for i in 0..count { body(src + i*ss, dst + i*ds) }` as a loop.
    fn counted_loop(
        &mut self,
        count: usize,
        src: Value,
        dst: Value,
        ss: usize,
        ds: usize,
        body: &mut dyn FnMut(&mut Self, Value, Value) -> Option<()>,
    ) -> Option<()> {
        let header = self.b.create_block();
        let inner = self.b.create_block();
        let exit = self.b.create_block();
        self.b.append_block_param(header, self.ptr);
        self.b.append_block_param(header, self.ptr);
        self.b.append_block_param(header, self.ptr);
        let zero = self.b.ins().iconst(self.ptr, 0);
        self.b.ins().jump(header, &[zero, src, dst]);
        self.b.switch_to_block(header);
        let i = self.b.block_params(header)[0];
        let s = self.b.block_params(header)[1];
        let d = self.b.block_params(header)[2];
        let more = self.b.ins().icmp_imm(
            cranelift_codegen::ir::condcodes::IntCC::UnsignedLessThan,
            i,
            count as i64,
        );
        self.b.ins().brif(more, inner, &[], exit, &[]);
        self.b.switch_to_block(inner);
        body(self, s, d)?;
        let i2 = self.b.ins().iadd_imm(i, 1);
        let s2 = self.b.ins().iadd_imm(s, ss as i64);
        let d2 = self.b.ins().iadd_imm(d, ds as i64);
        self.b.ins().jump(header, &[i2, s2, d2]);
        self.b.seal_block(inner);
        self.b.seal_block(header);
        self.b.switch_to_block(exit);
        self.b.seal_block(exit);
        Some(())
    }

    /// `count` elements, each converted by `one(src_off, dst_off)`; unrolled
    /// when short, else a loop over pointers.
    #[allow(clippy::too_many_arguments, clippy::type_complexity)]
    fn elems(
        &mut self,
        count: usize,
        src: Value,
        dst: Value,
        s: usize,
        d: usize,
        ss: usize,
        ds: usize,
        one: &mut dyn FnMut(&mut Self, Value, Value, usize, usize) -> Option<()>,
    ) -> Option<()> {
        if count <= UNROLL {
            for i in 0..count {
                one(self, src, dst, s + i * ss, d + i * ds)?;
            }
            return Some(());
        }
        let s0 = self.b.ins().iadd_imm(src, s as i64);
        let d0 = self.b.ins().iadd_imm(dst, d as i64);
        self.counted_loop(count, s0, d0, ss, ds, &mut |e, sp, dp| one(e, sp, dp, 0, 0))
    }

    /// The lowered moves in destination order: runs of neighbouring moves
    /// whose sources fit in 16 bytes become one load, one byte shuffle
    /// (`pshufb`) and one 8- or 16-byte store (e.g. an `int` and the
    /// `long` after it from a writer with the other field order, or two
    /// byte-swapped doubles); the rest a load (swapped, extended) and a
    /// store each. Fewer stores: what the hand-written code is bound by.
    fn moves(
        &mut self,
        prog: &Prog,
        src: Value,
        dst: Value,
        src_size: usize,
        dst_size: usize,
    ) -> Option<()> {
        let mut all: Vec<(K, E)> = prog
            .moves()
            .flat_map(|(k, es)| es.iter().map(move |e| (k, *e)))
            .collect();
        all.sort_by_key(|&(_, e)| (e.d, e.s));
        let mut i = 0;
        while i < all.len() {
            if let Some((n, w, d0, width, mask)) = shuffle_block(&all[i..], src_size, dst_size) {
                let v = self.load(types::I8X16, src, w, false)?;
                let c = self
                    .b
                    .func
                    .dfg
                    .constants
                    .insert(ConstantData::from(&mask[..]));
                let m = self.b.ins().vconst(types::I8X16, c);
                // pshufb itself: mask bytes with the top bit set give zero
                // (`swizzle` would first add 0x70 to a constant mask).
                let r = self.b.ins().x86_pshufb(v, m);
                if width == 16 {
                    self.store(r, dst, d0, false)?;
                } else {
                    let lanes = MemFlags::new().with_endianness(Endianness::Little);
                    let q = self.b.ins().bitcast(types::I64X2, lanes, r);
                    let lo = self.b.ins().extractlane(q, 0);
                    self.store(lo, dst, d0, false)?;
                }
                i += n;
                continue;
            }
            let (k, e) = all[i];
            self.one_move(k, e, src, dst)?;
            i += 1;
        }
        Some(())
    }

    /// One lowered move: a load (swapped, extended) and a store.
    fn one_move(&mut self, k: K, e: E, src: Value, dst: Value) -> Option<()> {
        let (lw, sw, ext) = k.shape();
        let ty = |w: u8| if w == 16 { types::I8X16 } else { int_ty(w) };
        let (s, d) = (e.s as usize, e.d as usize);
        let v = match ext {
            Ext::Zero if sw == 16 => {
                let z = self.b.ins().iconst(types::I64, 0);
                self.store(z, dst, d, false)?;
                return self.store(z, dst, d + 8, false);
            }
            Ext::Zero => self.b.ins().iconst(int_ty(sw), 0),
            Ext::Move => self.load(ty(lw), src, s, false)?,
            Ext::Swap => self.load(ty(lw), src, s, true)?,
            Ext::ZeroExtend | Ext::SwapZeroExtend => {
                let v = self.load(int_ty(lw), src, s, ext == Ext::SwapZeroExtend)?;
                self.b.ins().uextend(int_ty(sw), v)
            }
            Ext::SignExtend => {
                let v = self.load(int_ty(lw), src, s, false)?;
                self.b.ins().sextend(int_ty(sw), v)
            }
        };
        self.store(v, dst, d, false)
    }

    fn ops(&mut self, ops: &[Op], src: Value, dst: Value) -> Option<()> {
        for op in ops {
            self.op(op, src, dst)?;
        }
        Some(())
    }

    fn op(&mut self, op: &Op, src: Value, dst: Value) -> Option<()> {
        match op {
            Op::Copy {
                src: s,
                dst: d,
                len,
            } => {
                if *len > 8 * UNROLL {
                    let sp = self.b.ins().iadd_imm(src, *s as i64);
                    let dp = self.b.ins().iadd_imm(dst, *d as i64);
                    let n = self.b.ins().iconst(self.ptr, *len as i64);
                    self.b.call_memcpy(self.cfg, dp, sp, n);
                    return Some(());
                }
                let mut at = 0;
                for w in [16usize, 8, 4, 2, 1] {
                    let ty = if w == 16 {
                        types::I8X16
                    } else {
                        int_ty(w as u8)
                    };
                    while len - at >= w {
                        let v = self.load(ty, src, s + at, false)?;
                        self.store(v, dst, d + at, false)?;
                        at += w;
                    }
                }
            }
            Op::Swap {
                src: s,
                dst: d,
                size,
                count,
            } => {
                let z = *size as usize;
                let ty = int_ty(*size);
                self.elems(*count, src, dst, *s, *d, z, z, &mut |e, sp, dp, so, dof| {
                    let v = e.load(ty, sp, so, true)?;
                    e.store(v, dp, dof, false)
                })?;
            }
            Op::Int {
                src: s,
                dst: d,
                from,
                to,
                count,
                ..
            } => {
                let (from, to) = (*from, *to);
                let (fs, ts) = (from.size as usize, to.size as usize);
                self.elems(
                    *count,
                    src,
                    dst,
                    *s,
                    *d,
                    fs,
                    ts,
                    &mut |e, sp, dp, so, dof| {
                        let v = e.load(int_ty(from.size), sp, so, from.swap)?;
                        let tt = int_ty(to.size);
                        let v = if to.size > from.size {
                            if from.signed {
                                e.b.ins().sextend(tt, v)
                            } else {
                                e.b.ins().uextend(tt, v)
                            }
                        } else {
                            v
                        };
                        e.store(v, dp, dof, to.swap)
                    },
                )?;
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
                let (from, to, fsw, tsw) = (*from, *to, *from_swap, *to_swap);
                self.elems(
                    *count,
                    src,
                    dst,
                    *s,
                    *d,
                    from as usize,
                    to as usize,
                    &mut |e, sp, dp, so, dof| {
                        let raw = e.load(int_ty(from), sp, so, fsw)?;
                        let (fty, tty) = if from == 4 {
                            (types::F32, types::F64)
                        } else {
                            (types::F64, types::F32)
                        };
                        let x = e.b.ins().bitcast(fty, MemFlags::new(), raw);
                        let y = if from == to {
                            x
                        } else if from == 4 {
                            e.b.ins().fpromote(tty, x)
                        } else {
                            e.b.ins().fdemote(tty, x)
                        };
                        let out = e.b.ins().bitcast(int_ty(to), MemFlags::new(), y);
                        e.store(out, dp, dof, tsw)
                    },
                )?;
            }
            Op::IntToFloat {
                src: s,
                dst: d,
                from,
                to,
                to_swap,
                count,
            } => {
                let (from, to, tsw) = (*from, *to, *to_swap);
                let (fs, ts) = (from.size as usize, to as usize);
                self.elems(
                    *count,
                    src,
                    dst,
                    *s,
                    *d,
                    fs,
                    ts,
                    &mut |e, sp, dp, so, dof| {
                        let v = e.load(int_ty(from.size), sp, so, from.swap)?;
                        let v = if from.size < 8 {
                            if from.signed {
                                e.b.ins().sextend(types::I64, v)
                            } else {
                                e.b.ins().uextend(types::I64, v)
                            }
                        } else {
                            v
                        };
                        let fty = if to == 4 { types::F32 } else { types::F64 };
                        let x = if from.signed {
                            e.b.ins().fcvt_from_sint(fty, v)
                        } else {
                            e.b.ins().fcvt_from_uint(fty, v)
                        };
                        let out = e.b.ins().bitcast(int_ty(to), MemFlags::new(), x);
                        e.store(out, dp, dof, tsw)
                    },
                )?;
            }
            Op::FloatToInt { .. } => return None,
            Op::Fill { dst: d, bytes } => {
                for (i, &byte) in bytes.iter().enumerate() {
                    let v = self.b.ins().iconst(types::I8, byte as i64);
                    self.store(v, dst, d + i, false)?;
                }
            }
            Op::Zero { dst: d, len } => {
                if *len > 8 * UNROLL {
                    let dp = self.b.ins().iadd_imm(dst, *d as i64);
                    let n = self.b.ins().iconst(self.ptr, *len as i64);
                    let z = self.b.ins().iconst(types::I8, 0);
                    self.b.call_memset(self.cfg, dp, z, n);
                    return Some(());
                }
                let mut at = 0;
                for w in [8usize, 4, 2, 1] {
                    if len - at < w {
                        continue;
                    }
                    let z = self.b.ins().iconst(int_ty(w as u8), 0);
                    while len - at >= w {
                        self.store(z, dst, d + at, false)?;
                        at += w;
                    }
                }
            }
            Op::Repeat {
                src: s,
                dst: d,
                count,
                src_stride,
                dst_stride,
                body,
            } => {
                let unrolled = count.saturating_mul(body.len());
                if unrolled <= UNROLL {
                    for i in 0..*count {
                        let sp = self.b.ins().iadd_imm(src, (s + i * src_stride) as i64);
                        let dp = self.b.ins().iadd_imm(dst, (d + i * dst_stride) as i64);
                        self.ops(body, sp, dp)?;
                    }
                } else {
                    let s0 = self.b.ins().iadd_imm(src, *s as i64);
                    let d0 = self.b.ins().iadd_imm(dst, *d as i64);
                    self.counted_loop(
                        *count,
                        s0,
                        d0,
                        *src_stride,
                        *dst_stride,
                        &mut |e, sp, dp| e.ops(body, sp, dp),
                    )?;
                }
            }
        }
        Some(())
    }
}

/// A run of moves starting with `moves[0]` (sorted by destination) that one
/// 16-byte load and a byte shuffle can produce: every move a byte
/// permutation (plain, swapped, zero-extended, zero), all inside 16
/// destination bytes from `moves[0]`, all sources inside 16 bytes, at
/// least two of them. Returns (moves used, source window, destination,
/// store width 8 or 16, shuffle mask; 0x80 = zero). Bytes of the store
/// past the last move's end are rewritten by the moves and operations
/// emitted after it (all later in destination order, or run later).
fn shuffle_block(
    moves: &[(K, E)],
    src_size: usize,
    dst_size: usize,
) -> Option<(usize, usize, usize, usize, [u8; 16])> {
    if src_size < 16 {
        return None;
    }
    let d0 = moves.first()?.1.d as usize;
    // per destination byte: None = not produced, Some(None) = zero,
    // Some(Some(s)) = source byte s
    let mut bytes: [Option<Option<usize>>; 16] = [None; 16];
    let (mut lo, mut hi) = (usize::MAX, 0usize);
    let (mut n, mut end) = (0usize, d0);
    for &(k, e) in moves {
        let (lw, sw, ext) = k.shape();
        let (s, d) = (e.s as usize, e.d as usize);
        if ext == Ext::SignExtend || d + sw as usize > d0 + 16 {
            break;
        }
        let (nlo, nhi) = if lw == 0 {
            (lo, hi)
        } else {
            (lo.min(s), hi.max(s + lw as usize))
        };
        if nlo != usize::MAX && nhi - nlo > 16 {
            break;
        }
        (lo, hi) = (nlo, nhi);
        for j in 0..sw as usize {
            let lw = lw as usize;
            bytes[d - d0 + j] = Some(match ext {
                Ext::Zero => None,
                _ if j >= lw => None,
                Ext::Swap | Ext::SwapZeroExtend => Some(s + lw - 1 - j),
                _ => Some(s + j),
            });
        }
        end = end.max(d + sw as usize);
        n += 1;
    }
    if n < 2 {
        return None;
    }
    let width = if end - d0 <= 8 { 8 } else { 16 };
    if d0 + width > dst_size {
        return None;
    }
    let w = if lo == usize::MAX {
        0
    } else {
        lo.min(src_size - 16)
    };
    let mut mask = [0x80u8; 16];
    for (j, b) in bytes.iter().enumerate() {
        if let Some(Some(x)) = b {
            if *x < w || *x >= w + 16 {
                return None;
            }
            mask[j] = (x - w) as u8;
        }
    }
    Some((n, w, d0, width, mask))
}
