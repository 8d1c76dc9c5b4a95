//! Shaping the compiled operations: nested loops flattened, zero-length
//! ones dropped, runs of plain moves and same-width swaps merged, and a
//! whole record scaled to a counted operation where it can be.

use super::*;

/// Unroll short loops (at most `FLAT` operations in all, bodies without
/// loops) into operations at absolute offsets: the interpreter then pays no
/// call per element, and moves of neighbouring elements can merge.
pub(super) fn flatten(ops: Vec<Op>) -> Vec<Op> {
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
pub(super) fn shifted(op: &Op, s: usize, d: usize) -> Op {
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
pub(super) fn push_loop(
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
pub(super) fn drop_zeros(mut ops: Vec<Op>) -> Vec<Op> {
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
pub(super) fn merge(ops: Vec<Op>) -> Vec<Op> {
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

/// A one-element scalar body scaled to `n` elements, so a variable array of
/// scalars runs as one counted operation instead of `n` interpreted ones.
pub(super) fn scaled(ops: &[Op], n: usize) -> Option<Op> {
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
