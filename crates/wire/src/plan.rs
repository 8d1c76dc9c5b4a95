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
struct IntT {
    size: u8,
    signed: bool,
    swap: bool,
}

#[derive(Debug, Clone, PartialEq)]
enum Op {
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

impl Plan {
    /// Build the plan converting records written as `wire` into `native`.
    pub fn compile(wire: &Format, native: &Format, policy: OverflowPolicy) -> Result<Plan> {
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
        let ops = merge(ops);
        let var_ops = std::mem::take(&mut cx.var_ops);
        let names = std::mem::take(&mut cx.names);
        Ok(Plan {
            ops,
            var_ops,
            src_size: wire.size() as usize,
            dst_size: native.size() as usize,
            src_slots,
            names,
            policy,
        })
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
    pub fn run(&self, payload: &[u8], out: &mut Vec<u8>) -> Result<()> {
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
        out.clear();
        out.resize(self.dst_size, 0);
        exec(&self.ops, payload, 0, out, 0, self)?;
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
                    out.resize(total, 0);
                    if *identity {
                        out[pad..].copy_from_slice(data);
                    } else if let Some(op) = scaled(ops, n) {
                        exec(std::slice::from_ref(&op), data, 0, out, pad, self)?;
                    } else {
                        for i in 0..n {
                            exec(ops, data, i * src_elem, out, pad + i * dst_elem, self)?;
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
            let scalar =
                |t: &FieldType| as_int(t).is_some() || matches!(t, FieldType::Float { .. });
            if scalar(we) && scalar(ne) {
                compile_counted(we, s, word, ne, d, nord, n * count, path, ops, cx)?;
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
                        return Ok(());
                    }
                }
                ops.push(Op::Repeat {
                    src: s,
                    dst: d,
                    count: total,
                    src_stride: wes,
                    dst_stride: nes,
                    body,
                });
            }
        }
        (FieldType::Nested(wf), FieldType::Nested(nf)) => {
            if count == 1 {
                compile_struct(wf, nf, s, d, path, ops, cx)?;
            } else {
                let mut body = Vec::new();
                compile_struct(wf, nf, 0, 0, path, &mut body, cx)?;
                ops.push(Op::Repeat {
                    src: s,
                    dst: d,
                    count,
                    src_stride: wf.size() as usize,
                    dst_stride: nf.size() as usize,
                    body: merge(body),
                });
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
            let body = merge(body);
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
    let src = cx.src_slots.iter().find(|v| v.offset == s);
    let dst = cx.dst_slots.iter().find(|v| v.offset == d);
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

/// Merge adjacent moves and swaps; drop zero fills (the output starts zeroed).
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
    out.retain(|o| !matches!(o, Op::Zero { .. }));
    out
}

#[inline]
fn rd(src: &[u8], at: usize, size: u8, swap: bool) -> Result<u64> {
    let b = src
        .get(at..at + size as usize)
        .ok_or_else(|| WireError::Truncated {
            at,
            needed: size as usize,
            have: src.len().saturating_sub(at),
        })?;
    Ok(match size {
        1 => b[0] as u64,
        2 => {
            let v = u16::from_ne_bytes([b[0], b[1]]);
            (if swap { v.swap_bytes() } else { v }) as u64
        }
        4 => {
            let v = u32::from_ne_bytes([b[0], b[1], b[2], b[3]]);
            (if swap { v.swap_bytes() } else { v }) as u64
        }
        _ => {
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            let v = u64::from_ne_bytes(a);
            if swap {
                v.swap_bytes()
            } else {
                v
            }
        }
    })
}

#[inline]
fn wr(dst: &mut [u8], at: usize, size: u8, swap: bool, v: u64) -> Result<()> {
    let have = dst.len();
    let b = dst
        .get_mut(at..at + size as usize)
        .ok_or_else(|| WireError::Truncated {
            at,
            needed: size as usize,
            have: have.saturating_sub(at),
        })?;
    match size {
        1 => b[0] = v as u8,
        2 => b.copy_from_slice(
            &(if swap {
                (v as u16).swap_bytes()
            } else {
                v as u16
            })
            .to_ne_bytes(),
        ),
        4 => b.copy_from_slice(
            &(if swap {
                (v as u32).swap_bytes()
            } else {
                v as u32
            })
            .to_ne_bytes(),
        ),
        _ => b.copy_from_slice(&(if swap { v.swap_bytes() } else { v }).to_ne_bytes()),
    }
    Ok(())
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
) -> Result<u64> {
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
                return Err(WireError::Overflow {
                    field: plan.names.get(field as usize).cloned().unwrap_or_default(),
                    value: v.to_string(),
                });
            }
        }
    } else {
        v
    };
    Ok(c as u64)
}

fn exec(ops: &[Op], src: &[u8], sb: usize, dst: &mut [u8], db: usize, plan: &Plan) -> Result<()> {
    for op in ops {
        match op {
            Op::Copy {
                src: s,
                dst: d,
                len,
            } => {
                let (s, d) = (sb + s, db + d);
                let from = src.get(s..s + len).ok_or(WireError::Truncated {
                    at: s,
                    needed: *len,
                    have: src.len(),
                })?;
                let to = dst.get_mut(d..d + len).ok_or_else(out_of_range)?;
                to.copy_from_slice(from);
            }
            Op::Swap {
                src: s,
                dst: d,
                size,
                count,
            } => {
                let z = *size as usize;
                let (s, d) = (sb + s, db + d);
                let n = z * count;
                let from = src.get(s..s + n).ok_or(WireError::Truncated {
                    at: s,
                    needed: n,
                    have: src.len(),
                })?;
                let to = dst.get_mut(d..d + n).ok_or_else(out_of_range)?;
                match z {
                    2 => swap_chunks::<2>(from, to),
                    4 => swap_chunks::<4>(from, to),
                    8 => swap_chunks::<8>(from, to),
                    _ => to.copy_from_slice(from),
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
                    let raw = rd(src, sb + s + i * from.size as usize, from.size, from.swap)?;
                    let v = convert_int(raw, *from, *to, plan.policy, plan, *field)?;
                    wr(dst, db + d + i * to.size as usize, to.size, to.swap, v)?;
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
                    let raw = rd(src, sb + s + i * *from as usize, *from, *from_swap)?;
                    let v = if *from == 4 {
                        f32::from_bits(raw as u32) as f64
                    } else {
                        f64::from_bits(raw)
                    };
                    let out = if *to == 4 {
                        (v as f32).to_bits() as u64
                    } else {
                        v.to_bits()
                    };
                    wr(dst, db + d + i * *to as usize, *to, *to_swap, out)?;
                }
            }
            Op::Fill { dst: d, bytes } => {
                let d = db + d;
                let to = dst.get_mut(d..d + bytes.len()).ok_or_else(out_of_range)?;
                to.copy_from_slice(bytes);
            }
            Op::Zero { dst: d, len } => {
                let d = db + d;
                if let Some(to) = dst.get_mut(d..d + len) {
                    to.fill(0);
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
                for i in 0..*count {
                    exec(
                        body,
                        src,
                        sb + s + i * src_stride,
                        dst,
                        db + d + i * dst_stride,
                        plan,
                    )?;
                }
            }
        }
    }
    Ok(())
}

#[cold]
fn out_of_range() -> WireError {
    WireError::Usage("plan writes outside output".into())
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

#[inline]
fn swap_chunks<const N: usize>(from: &[u8], to: &mut [u8]) {
    for (a, b) in from.chunks_exact(N).zip(to.chunks_exact_mut(N)) {
        let mut x = [0u8; N];
        x.copy_from_slice(a);
        x.reverse();
        b.copy_from_slice(&x);
    }
}
