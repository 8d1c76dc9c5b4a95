//! Reduction operations: the predefined ones on every type they apply to, and user functions.

use crate::datatype::{Basic, Datatype};
use crate::error::{class, err, Result};
use std::sync::Arc;

/// A user function: `(in, inout, count, datatype)` on data in the datatype's layout.
pub type UserFn = Arc<dyn Fn(usize, usize, usize, &Datatype) + Send + Sync>;

#[derive(Clone)]
pub enum Op {
    Sum,
    Min,
    Max,
    Prod,
    Band,
    Bor,
    Bxor,
    Land,
    Lor,
    Lxor,
    MinLoc,
    MaxLoc,
    Replace,
    NoOp,
    User { f: UserFn, commute: bool },
}

impl std::fmt::Debug for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Op {
    pub fn name(&self) -> &'static str {
        match self {
            Op::Sum => "MPI_SUM",
            Op::Min => "MPI_MIN",
            Op::Max => "MPI_MAX",
            Op::Prod => "MPI_PROD",
            Op::Band => "MPI_BAND",
            Op::Bor => "MPI_BOR",
            Op::Bxor => "MPI_BXOR",
            Op::Land => "MPI_LAND",
            Op::Lor => "MPI_LOR",
            Op::Lxor => "MPI_LXOR",
            Op::MinLoc => "MPI_MINLOC",
            Op::MaxLoc => "MPI_MAXLOC",
            Op::Replace => "MPI_REPLACE",
            Op::NoOp => "MPI_NO_OP",
            Op::User { .. } => "user operation",
        }
    }

    pub fn commutative(&self) -> bool {
        match self {
            Op::User { commute, .. } => *commute,
            _ => true,
        }
    }

    /// Checks that the op applies to the datatype (before any data moves).
    pub fn check(&self, dt: &Datatype) -> Result<()> {
        if let Op::User { .. } = self {
            return Ok(());
        }
        let b = dt.basic.ok_or_else(|| {
            err(
                class::OP,
                format!(
                    "{} needs a datatype made of one predefined type",
                    self.name()
                ),
            )
        })?;
        if applies(self, b) {
            Ok(())
        } else {
            Err(err(
                class::OP,
                format!("{} is not defined for datatype {:?}", self.name(), b),
            ))
        }
    }

    /// `inout[i] = in[i] op inout[i]` over `count` elements packed in `inb`/`inout`.
    pub fn apply(&self, dt: &Datatype, count: usize, inb: &[u8], inout: &mut [u8]) {
        if let Op::User { f, .. } = self {
            if dt.contig {
                // Packed == memory layout: give the function the buffers themselves.
                let off = dt.true_lb;
                f(
                    (inb.as_ptr() as usize).wrapping_add_signed(-off),
                    (inout.as_mut_ptr() as usize).wrapping_add_signed(-off),
                    count,
                    dt,
                );
            } else {
                // Lay the data out as the datatype says, call, and pack the result back.
                let span = (count.max(1) as isize - 1) * dt.extent + dt.true_lb + dt.true_extent;
                let mut a = vec![0u8; span.max(0) as usize];
                let mut b = vec![0u8; span.max(0) as usize];
                // SAFETY: `a`/`b` cover the type map of `count` elements based at their start.
                unsafe {
                    dt.unpack(a.as_mut_ptr() as usize, count, inb);
                    dt.unpack(b.as_mut_ptr() as usize, count, inout);
                }
                f(a.as_ptr() as usize, b.as_mut_ptr() as usize, count, dt);
                // SAFETY: as above.
                unsafe { dt.pack(b.as_ptr() as usize, count, inout) };
            }
            return;
        }
        let Some(b) = dt.basic else { return };
        reduce(self, b, inb, inout);
    }
}

fn applies(op: &Op, b: Basic) -> bool {
    use Basic::*;
    let int = matches!(b, I8 | I16 | I32 | I64 | U8 | U16 | U32 | U64 | Char);
    let float = matches!(b, F32 | F64) || (b == LongDouble && crate::x87::SUPPORTED);
    let complex = matches!(b, C32 | C64) || (b == CLongDouble && crate::x87::SUPPORTED);
    let logical = matches!(b, Bool | Logical(_));
    let pair = matches!(
        b,
        FloatInt | DoubleInt | LongInt | TwoInt | ShortInt | TwoF32 | TwoF64 | TwoI32
    ) || (b == LongDoubleInt && crate::x87::SUPPORTED);
    match op {
        Op::Sum | Op::Prod => int || float || complex,
        Op::Min | Op::Max => int || float,
        Op::Land | Op::Lor | Op::Lxor => int || logical,
        Op::Band | Op::Bor | Op::Bxor => int || b == Byte || logical,
        Op::MinLoc | Op::MaxLoc => pair,
        Op::Replace | Op::NoOp => true,
        Op::User { .. } => true,
    }
}

macro_rules! each {
    ($t:ty, $inb:expr, $io:expr, |$a:ident, $b:ident| $e:expr) => {{
        const N: usize = std::mem::size_of::<$t>();
        for (x, y) in $inb.chunks_exact(N).zip($io.chunks_exact_mut(N)) {
            let $a = <$t>::from_ne_bytes(x.try_into().unwrap());
            let $b = <$t>::from_ne_bytes((&*y).try_into().unwrap());
            y.copy_from_slice(&($e).to_ne_bytes());
        }
    }};
}

macro_rules! int_op {
    ($t:ty, $op:expr, $inb:expr, $io:expr) => {
        match $op {
            Op::Sum => each!($t, $inb, $io, |a, b| a.wrapping_add(b)),
            Op::Prod => each!($t, $inb, $io, |a, b| a.wrapping_mul(b)),
            Op::Min => each!($t, $inb, $io, |a, b| a.min(b)),
            Op::Max => each!($t, $inb, $io, |a, b| a.max(b)),
            Op::Band => each!($t, $inb, $io, |a, b| a & b),
            Op::Bor => each!($t, $inb, $io, |a, b| a | b),
            Op::Bxor => each!($t, $inb, $io, |a, b| a ^ b),
            Op::Land => each!($t, $inb, $io, |a, b| ((a != 0) && (b != 0)) as $t),
            Op::Lor => each!($t, $inb, $io, |a, b| ((a != 0) || (b != 0)) as $t),
            Op::Lxor => each!($t, $inb, $io, |a, b| ((a != 0) != (b != 0)) as $t),
            _ => {}
        }
    };
}

macro_rules! float_op {
    ($t:ty, $op:expr, $inb:expr, $io:expr) => {
        match $op {
            Op::Sum => each!($t, $inb, $io, |a, b| a + b),
            Op::Prod => each!($t, $inb, $io, |a, b| a * b),
            Op::Min => each!($t, $inb, $io, |a, b| if a < b { a } else { b }),
            Op::Max => each!($t, $inb, $io, |a, b| if a > b { a } else { b }),
            _ => {}
        }
    };
}

macro_rules! complex_op {
    ($t:ty, $op:expr, $inb:expr, $io:expr) => {{
        const N: usize = std::mem::size_of::<$t>();
        for (x, y) in $inb.chunks_exact(2 * N).zip($io.chunks_exact_mut(2 * N)) {
            let ar = <$t>::from_ne_bytes(x[..N].try_into().unwrap());
            let ai = <$t>::from_ne_bytes(x[N..].try_into().unwrap());
            let br = <$t>::from_ne_bytes(y[..N].try_into().unwrap());
            let bi = <$t>::from_ne_bytes(y[N..].try_into().unwrap());
            let (r, i) = match $op {
                Op::Sum => (ar + br, ai + bi),
                Op::Prod => (ar * br - ai * bi, ar * bi + ai * br),
                _ => (br, bi),
            };
            y[..N].copy_from_slice(&r.to_ne_bytes());
            y[N..].copy_from_slice(&i.to_ne_bytes());
        }
    }};
}

/// MINLOC/MAXLOC on (value, index) pairs packed as value bytes then index bytes.
macro_rules! loc_op {
    ($vt:ty, $it:ty, $op:expr, $inb:expr, $io:expr) => {{
        const V: usize = std::mem::size_of::<$vt>();
        const I: usize = std::mem::size_of::<$it>();
        let min = matches!($op, Op::MinLoc);
        for (x, y) in $inb.chunks_exact(V + I).zip($io.chunks_exact_mut(V + I)) {
            let av = <$vt>::from_ne_bytes(x[..V].try_into().unwrap());
            let ai = <$it>::from_ne_bytes(x[V..].try_into().unwrap());
            let bv = <$vt>::from_ne_bytes(y[..V].try_into().unwrap());
            let bi = <$it>::from_ne_bytes(y[V..].try_into().unwrap());
            let take_a = if av == bv {
                ai < bi
            } else if min {
                av < bv
            } else {
                av > bv
            };
            if take_a {
                y[..V].copy_from_slice(&av.to_ne_bytes());
                y[V..].copy_from_slice(&ai.to_ne_bytes());
            }
        }
    }};
}

fn reduce(op: &Op, b: Basic, inb: &[u8], io: &mut [u8]) {
    use Basic::*;
    match op {
        Op::NoOp => return,
        Op::Replace => {
            io.copy_from_slice(&inb[..io.len()]);
            return;
        }
        _ => {}
    }
    match b {
        I8 | Char => int_op!(i8, op, inb, io),
        U8 | Byte | Bool | Logical(1) => int_op!(u8, op, inb, io),
        I16 => int_op!(i16, op, inb, io),
        U16 | Logical(2) => int_op!(u16, op, inb, io),
        I32 => int_op!(i32, op, inb, io),
        U32 | Logical(4) => int_op!(u32, op, inb, io),
        I64 => int_op!(i64, op, inb, io),
        U64 | Logical(8) => int_op!(u64, op, inb, io),
        F32 => float_op!(f32, op, inb, io),
        F64 => float_op!(f64, op, inb, io),
        C32 => complex_op!(f32, op, inb, io),
        C64 => complex_op!(f64, op, inb, io),
        LongDouble => long_double(op, inb, io),
        CLongDouble => complex_long_double(op, inb, io),
        FloatInt => loc_op!(f32, i32, op, inb, io),
        DoubleInt => loc_op!(f64, i32, op, inb, io),
        LongInt => loc_op!(i64, i32, op, inb, io),
        TwoInt | TwoI32 => loc_op!(i32, i32, op, inb, io),
        ShortInt => loc_op!(i16, i32, op, inb, io),
        TwoF32 => loc_op!(f32, f32, op, inb, io),
        TwoF64 => loc_op!(f64, f64, op, inb, io),
        LongDoubleInt => loc_long_double(op, inb, io),
        _ => {}
    }
}

/// `long double` (16-byte slots, 10 significant bytes) through the x87 FPU.
fn long_double(op: &Op, inb: &[u8], io: &mut [u8]) {
    use crate::x87::{arith, less};
    for (a, b) in inb.chunks_exact(16).zip(io.chunks_exact_mut(16)) {
        match op {
            Op::Sum => arith(0, a, b),
            Op::Prod => arith(1, a, b),
            Op::Min if less(a, b) => b.copy_from_slice(a),
            Op::Max if less(b, a) => b.copy_from_slice(a),
            _ => {}
        }
    }
}

/// MINLOC/MAXLOC on `MPI_LONG_DOUBLE_INT`: packed as the 16-byte `long
/// double` slot (10 significant bytes) then the 4-byte `int` (20 bytes; the
/// C struct's 12 bytes of tail padding are not part of the type map). Equal
/// values keep the smaller index, as for the other pair types.
fn loc_long_double(op: &Op, inb: &[u8], io: &mut [u8]) {
    use crate::x87::less;
    const V: usize = 16;
    let min = matches!(op, Op::MinLoc);
    for (a, b) in inb.chunks_exact(V + 4).zip(io.chunks_exact_mut(V + 4)) {
        let ai = i32::from_ne_bytes(a[V..].try_into().unwrap());
        let bi = i32::from_ne_bytes(b[V..].try_into().unwrap());
        let (a_less, b_less) = (less(&a[..V], &b[..V]), less(&b[..V], &a[..V]));
        let take_a = if !a_less && !b_less {
            ai < bi
        } else if min {
            a_less
        } else {
            b_less
        };
        if take_a {
            b.copy_from_slice(a);
        }
    }
}

/// `long double _Complex` (two 16-byte slots).
fn complex_long_double(op: &Op, inb: &[u8], io: &mut [u8]) {
    use crate::x87::arith;
    for (a, b) in inb.chunks_exact(32).zip(io.chunks_exact_mut(32)) {
        match op {
            Op::Sum => {
                arith(0, &a[..16], &mut b[..16]);
                arith(0, &a[16..], &mut b[16..]);
            }
            Op::Prod => {
                // (ar + i ai)(br + i bi) = (ar br - ai bi) + i (ar bi + ai br)
                let (ar, ai) = (&a[..16], &a[16..]);
                let (mut br, mut bi) = ([0u8; 16], [0u8; 16]);
                br.copy_from_slice(&b[..16]);
                bi.copy_from_slice(&b[16..]);
                let mut re = br;
                arith(1, ar, &mut re); // ar*br
                let mut t = bi;
                arith(1, ai, &mut t); // ai*bi
                arith(2, &re, &mut t); // ar*br - ai*bi
                let mut im = bi;
                arith(1, ar, &mut im); // ar*bi
                let mut u = br;
                arith(1, ai, &mut u); // ai*br
                arith(0, &im, &mut u); // ar*bi + ai*br
                b[..16].copy_from_slice(&t);
                b[16..].copy_from_slice(&u);
            }
            _ => {}
        }
    }
}
