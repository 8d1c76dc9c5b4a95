//! Dynamic groups: membership and barriers are the coordinator's tables
//! (as PVM's group server keeps them); broadcast, reduce, gather and
//! scatter are point-to-point messages between the members, over their
//! own buffers so the program's active send and receive buffers stay as
//! they were.

use crate::capi::guard;
use crate::consts::*;
use crate::coord::hex;
use crate::pack::{Buffer, Kind};
use crate::task::{bufs, task, Task};
use std::ffi::{c_char, c_int, c_void, CStr};

fn group_name(g: *const c_char) -> Result<String, c_int> {
    if g.is_null() {
        return Err(PVM_NULL_GROUP);
    }
    // SAFETY: PVM's contract: a NUL-terminated group name.
    let s = unsafe { CStr::from_ptr(g) }.to_bytes();
    if s.is_empty() {
        return Err(PVM_NULL_GROUP);
    }
    Ok(hex(s))
}

fn ask(t: &Task, line: String) -> Result<String, c_int> {
    t.coord.request(&line)
}

fn num(r: Result<String, c_int>) -> c_int {
    match r {
        Ok(s) => s.parse().unwrap_or(PVM_SYS_ERR),
        Err(e) => e,
    }
}

macro_rules! group_fn {
    (fn $name:ident($($a:ident : $t:ty),*) |$task:ident| $body:expr) => {
        #[no_mangle]
        pub unsafe extern "C" fn $name($($a: $t),*) -> c_int {
            guard(move || match task() {
                Ok($task) => $body,
                Err(e) => e,
            })
        }
    };
}

group_fn!(fn pvm_joingroup(g: *mut c_char) |t| match group_name(g) {
    Ok(g) => num(ask(t, format!("GJOIN {g}"))),
    Err(e) => e,
});
group_fn!(fn pvm_lvgroup(g: *mut c_char) |t| match group_name(g) {
    Ok(g) => ask(t, format!("GLEAVE {g}")).map_or_else(|e| e, |_| PVM_OK),
    Err(e) => e,
});
group_fn!(fn pvm_gsize(g: *mut c_char) |t| match group_name(g) {
    Ok(g) => num(ask(t, format!("GSIZE {g}"))),
    Err(e) => e,
});
group_fn!(fn pvm_getinst(g: *mut c_char, tid: c_int) |t| match group_name(g) {
    Ok(g) => num(ask(t, format!("GINST {g} {tid}"))),
    Err(e) => e,
});
group_fn!(fn pvm_gettid(g: *mut c_char, inst: c_int) |t| match group_name(g) {
    Ok(g) => num(ask(t, format!("GTID {g} {inst}"))),
    Err(e) => e,
});
group_fn!(fn pvm_barrier(g: *mut c_char, count: c_int) |t| match group_name(g) {
    Ok(g) => ask(t, format!("BARRIER {g} {count}")).map_or_else(|e| e, |_| PVM_OK),
    Err(e) => e,
});
group_fn!(fn pvm_freezegroup(g: *mut c_char, size: c_int) |t| match group_name(g) {
    // Waits until `size` members joined (a negative size: those there now).
    Ok(g) => ask(t, format!("GWAIT {g} {size}")).map_or_else(|e| e, |_| PVM_OK),
    Err(e) => e,
});

/// Members' task ids by instance (None: a vacated instance).
fn members(t: &Task, g: &str) -> Result<Vec<Option<c_int>>, c_int> {
    Ok(ask(t, format!("GTIDS {g}"))?
        .split(',')
        .map(|s| s.parse().ok())
        .collect())
}

group_fn!(fn pvm_bcast(g: *mut c_char, tag: c_int) |t| {
    let g = match group_name(g) {
        Ok(g) => g,
        Err(e) => return e,
    };
    let list = match members(t, &g) {
        Ok(l) => l,
        Err(e) => return e,
    };
    let b = bufs();
    let b = b.as_ref().expect("init");
    let Some(buf) = b.map.get(&b.sbuf) else {
        return PVM_NO_BUF;
    };
    let mut rc = PVM_OK;
    for tid in list.into_iter().flatten().filter(|&x| x != t.tid) {
        let r = t.send(buf, tid, tag, b.ctx);
        if r < 0 {
            rc = r;
        }
    }
    rc
});

type ReduceFn = unsafe extern "C" fn(*mut c_int, *mut c_void, *mut c_void, *mut c_int, *mut c_int);

fn kind_of(datatype: c_int) -> Result<Kind, c_int> {
    match Kind::from_code(datatype) {
        Some(Kind::Str) | None => Err(PVM_BAD_PARAM),
        Some(k) => Ok(k),
    }
}

/// One buffer holding `count` elements at `p`.
fn packed(
    kind: Kind,
    p: *const c_void,
    count: c_int,
    inst: Option<c_int>,
) -> Result<Buffer, c_int> {
    let mut b = Buffer::new(PVM_DATA_RAW);
    if let Some(i) = inst {
        // SAFETY: one live int.
        unsafe { b.pack(Kind::Int, &i as *const c_int as *const u8, 1, 1) };
    }
    // SAFETY: PVM's contract: `p` holds `count` elements of the type.
    match unsafe { b.pack(kind, p as *const u8, count, 1) } {
        PVM_OK => Ok(b),
        e => Err(e),
    }
}

fn root_and_me(t: &Task, g: &str, root: c_int) -> Result<(c_int, c_int), c_int> {
    let root_tid = num(ask(t, format!("GTID {g} {root}")));
    if root_tid < 0 {
        return Err(root_tid);
    }
    let me = num(ask(t, format!("GINST {g} {}", t.tid)));
    if me < 0 {
        return Err(me);
    }
    Ok((root_tid, me))
}

group_fn!(fn pvm_reduce(
    func: Option<ReduceFn>,
    data: *mut c_void,
    count: c_int,
    datatype: c_int,
    tag: c_int,
    g: *mut c_char,
    root: c_int
) |t| {
    let run = || -> Result<c_int, c_int> {
        let g = group_name(g)?;
        let kind = kind_of(datatype)?;
        let func = func.ok_or(PVM_BAD_PARAM)?;
        if count < 0 || (count > 0 && data.is_null()) {
            return Err(PVM_BAD_PARAM);
        }
        let (root_tid, _) = root_and_me(t, &g, root)?;
        let mctx = bufs().as_ref().expect("init").ctx;
        if root_tid != t.tid {
            let b = packed(kind, data, count, None)?;
            let rc = t.send(&b, root_tid, tag, mctx);
            return if rc < 0 { Err(rc) } else { Ok(PVM_OK) };
        }
        let n = members(t, &g)?.into_iter().flatten().count();
        let mut tmp = vec![0u8; count as usize * kind.elem_size()];
        for _ in 1..n {
            let mut b = t.receive(-1, tag, mctx, None).ok_or(PVM_SYS_ERR)?;
            // SAFETY: tmp has room for `count` elements.
            let rc = unsafe { b.unpack(kind, tmp.as_mut_ptr(), count, 1) };
            if rc < 0 {
                return Err(rc);
            }
            let (mut dt, mut cnt, mut info) = (datatype, count, 0);
            // SAFETY: the program's reduce function, called as PVM calls it.
            unsafe { func(&mut dt, data, tmp.as_mut_ptr() as *mut c_void, &mut cnt, &mut info) };
            if info < 0 {
                return Err(info);
            }
        }
        Ok(PVM_OK)
    };
    run().unwrap_or_else(|e| e)
});

group_fn!(fn pvm_gather(
    result: *mut c_void,
    data: *mut c_void,
    count: c_int,
    datatype: c_int,
    tag: c_int,
    g: *mut c_char,
    root: c_int
) |t| {
    let run = || -> Result<c_int, c_int> {
        let g = group_name(g)?;
        let kind = kind_of(datatype)?;
        if count < 0 {
            return Err(PVM_BAD_PARAM);
        }
        let (root_tid, me) = root_and_me(t, &g, root)?;
        let mctx = bufs().as_ref().expect("init").ctx;
        if root_tid != t.tid {
            let b = packed(kind, data, count, Some(me))?;
            let rc = t.send(&b, root_tid, tag, mctx);
            return if rc < 0 { Err(rc) } else { Ok(PVM_OK) };
        }
        if result.is_null() {
            return Err(PVM_BAD_PARAM);
        }
        let list = members(t, &g)?;
        let es = kind.elem_size() * count as usize;
        // SAFETY: PVM's contract: `result` has room for gsize * count elements.
        unsafe { std::ptr::copy_nonoverlapping(data as *const u8, (result as *mut u8).add(me as usize * es), es) };
        for _ in 1..list.iter().flatten().count() {
            let mut b = t.receive(-1, tag, mctx, None).ok_or(PVM_SYS_ERR)?;
            let mut inst: c_int = -1;
            // SAFETY: one int of room.
            unsafe { b.unpack(Kind::Int, &mut inst as *mut c_int as *mut u8, 1, 1) };
            if inst < 0 || inst as usize >= list.len() {
                return Err(PVM_BAD_MSG);
            }
            // SAFETY: slot `inst` is within result (inst < gsize checked).
            let rc = unsafe { b.unpack(kind, (result as *mut u8).add(inst as usize * es), count, 1) };
            if rc < 0 {
                return Err(rc);
            }
        }
        Ok(PVM_OK)
    };
    run().unwrap_or_else(|e| e)
});

group_fn!(fn pvm_scatter(
    result: *mut c_void,
    data: *mut c_void,
    count: c_int,
    datatype: c_int,
    tag: c_int,
    g: *mut c_char,
    root: c_int
) |t| {
    let run = || -> Result<c_int, c_int> {
        let g = group_name(g)?;
        let kind = kind_of(datatype)?;
        if count < 0 || result.is_null() {
            return Err(PVM_BAD_PARAM);
        }
        let (root_tid, me) = root_and_me(t, &g, root)?;
        let mctx = bufs().as_ref().expect("init").ctx;
        let es = kind.elem_size() * count as usize;
        if root_tid == t.tid {
            if data.is_null() {
                return Err(PVM_BAD_PARAM);
            }
            for (i, tid) in members(t, &g)?.into_iter().enumerate() {
                let Some(tid) = tid else { continue };
                // SAFETY: PVM's contract: `data` holds gsize * count elements.
                let slice = unsafe { (data as *const u8).add(i * es) };
                if tid == t.tid {
                    // SAFETY: result has room for `count` elements.
                    unsafe { std::ptr::copy_nonoverlapping(slice, result as *mut u8, es) };
                    continue;
                }
                let b = packed(kind, slice as *const c_void, count, None)?;
                let rc = t.send(&b, tid, tag, mctx);
                if rc < 0 {
                    return Err(rc);
                }
            }
            let _ = me;
            return Ok(PVM_OK);
        }
        let mut b = t.receive(root_tid, tag, mctx, None).ok_or(PVM_SYS_ERR)?;
        // SAFETY: result has room for `count` elements.
        match unsafe { b.unpack(kind, result as *mut u8, count, 1) } {
            PVM_OK => Ok(PVM_OK),
            e => Err(e),
        }
    };
    run().unwrap_or_else(|e| e)
});

/// The predefined reduce functions (`PvmSum`, `PvmMax`, `PvmMin`,
/// `PvmProduct`): x[i] = op(x[i], y[i]) for `*count` elements of `*datatype`.
macro_rules! reduce_op {
    ($name:ident, $op:expr) => {
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            datatype: *mut c_int,
            x: *mut c_void,
            y: *mut c_void,
            count: *mut c_int,
            info: *mut c_int,
        ) {
            // SAFETY: pvm_reduce passes valid pointers: x and y hold *count
            // elements of *datatype.
            unsafe {
                let n = (*count).max(0) as usize;
                let rc = match Kind::from_code(*datatype) {
                    Some(Kind::Short) => apply::<i16>(x, y, n, $op),
                    Some(Kind::Int) => apply::<c_int>(x, y, n, $op),
                    Some(Kind::Long) => apply::<std::ffi::c_long>(x, y, n, $op),
                    Some(Kind::Ushort) => apply::<u16>(x, y, n, $op),
                    Some(Kind::Uint) => apply::<u32>(x, y, n, $op),
                    Some(Kind::Ulong) => apply::<std::ffi::c_ulong>(x, y, n, $op),
                    Some(Kind::Float) => apply::<f32>(x, y, n, $op),
                    Some(Kind::Double) => apply::<f64>(x, y, n, $op),
                    _ => PVM_BAD_PARAM,
                };
                if !info.is_null() {
                    *info = rc;
                }
            }
        }
    };
}

trait Arith: Copy + PartialOrd {
    fn add(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
}
macro_rules! arith {
    ($($t:ty),*) => {$(
        impl Arith for $t {
            fn add(self, o: Self) -> Self { self.wrapping_add(o) }
            fn mul(self, o: Self) -> Self { self.wrapping_mul(o) }
        }
    )*};
}
arith!(i16, i32, i64, u16, u32, u64);
impl Arith for f32 {
    fn add(self, o: Self) -> Self {
        self + o
    }
    fn mul(self, o: Self) -> Self {
        self * o
    }
}
impl Arith for f64 {
    fn add(self, o: Self) -> Self {
        self + o
    }
    fn mul(self, o: Self) -> Self {
        self * o
    }
}

#[derive(Clone, Copy)]
enum Op {
    Sum,
    Max,
    Min,
    Product,
}

/// # Safety
/// x and y must hold n elements of T.
unsafe fn apply<T: Arith>(x: *mut c_void, y: *mut c_void, n: usize, op: Op) -> c_int {
    // SAFETY: the caller's contract.
    let (x, y) = unsafe {
        (
            std::slice::from_raw_parts_mut(x as *mut T, n),
            std::slice::from_raw_parts(y as *const T, n),
        )
    };
    for (a, &b) in x.iter_mut().zip(y) {
        *a = match op {
            Op::Sum => a.add(b),
            Op::Product => a.mul(b),
            Op::Max if b > *a => b,
            Op::Min if b < *a => b,
            _ => *a,
        };
    }
    PVM_OK
}

reduce_op!(PvmSum, Op::Sum);
reduce_op!(PvmMax, Op::Max);
reduce_op!(PvmMin, Op::Min);
reduce_op!(PvmProduct, Op::Product);
