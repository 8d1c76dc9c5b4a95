//! Compiling a plan: formats matched field by field into operations with
//! absolute offsets (structs flattened, arrays counted or looped).

use super::*;

pub(super) fn compile_struct(
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

pub(super) fn order_bytes(ne: &[u8], order: ByteOrder) -> Box<[u8]> {
    let mut b = ne.to_vec();
    if order != ByteOrder::NATIVE {
        b.reverse();
    }
    b.into()
}

#[allow(clippy::too_many_arguments)]
pub(super) fn compile_field(
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
pub(super) fn compile_counted(
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

pub(super) fn find_slots(
    cx: &Ctx<'_>,
    s: usize,
    d: usize,
    path: &str,
) -> Result<(VarSlot, VarSlot)> {
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
