//! Handle tables: C handles <-> library objects.
//!
//! Predefined handles are the ABI's numbers below 0x1000. A user handle is
//! `generation << 32 | (slot + 0x1000)`: a freed slot bumps its generation,
//! so a stale handle is detected and reported instead of reaching a freed
//! object.

use crate::abi::*;
use gridwire_core::sync::{TryLock, TryLockGuard};
use gridwire_mpi::engine::Unexpected;
use gridwire_mpi::{class, err, Basic, Comm, Datatype, Group, MpiError, Op, Req, Result};
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

const BASE: usize = 0x1000;

struct Slot<T> {
    gen: u32,
    obj: Option<T>,
}

/// A table of user objects of one kind.
///
/// One [`TryLock`] over the slots and the free list: every operation is a
/// few instructions under one compare-exchange and a release store. (It was
/// an `RwLock` plus a `Mutex`, four to six locked instructions per request
/// handle of `MPI_Irecv` + `MPI_Wait`, a visible part of a small message.)
pub struct Table<T> {
    inner: TryLock<Slots<T>>,
    /// Set by [`Table::set_serial`]: the slots are reached without the lock.
    serial: AtomicBool,
}

/// Access to a table's slots: under its lock, or (serial mode) without it.
enum Access<'a, T> {
    Locked(TryLockGuard<'a, Slots<T>>),
    Serial(&'a mut Slots<T>),
}

impl<T> Deref for Access<'_, T> {
    type Target = Slots<T>;
    #[inline]
    fn deref(&self) -> &Slots<T> {
        match self {
            Access::Locked(g) => g,
            Access::Serial(s) => s,
        }
    }
}

impl<T> DerefMut for Access<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut Slots<T> {
        match self {
            Access::Locked(g) => &mut *g,
            Access::Serial(s) => s,
        }
    }
}

struct Slots<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
}

impl<T: Clone> Default for Table<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Clone> Table<T> {
    pub const fn new() -> Self {
        Table {
            inner: TryLock::new(Slots {
                slots: Vec::new(),
                free: Vec::new(),
            }),
            serial: AtomicBool::new(false),
        }
    }

    /// Serial mode: every operation reaches the slots without the lock's
    /// compare-exchange. Why: the request table is crossed twice per small
    /// message (`MPI_Irecv`/`MPI_Isend` insert, `MPI_Wait*` remove), one
    /// locked instruction each, a visible part of the message rate.
    ///
    /// # Safety
    /// From the call on, until `set_serial(false)`, no two threads may use
    /// the table at once, and each use must happen-after the previous one
    /// (a program below `MPI_THREAD_MULTIPLE` orders its MPI calls itself;
    /// no thread of the library itself may touch the table). Called while
    /// no other thread uses the table.
    pub unsafe fn set_serial(&self, yes: bool) {
        self.serial.store(yes, Ordering::Relaxed);
    }

    #[inline]
    fn access(&self) -> Access<'_, T> {
        if self.serial.load(Ordering::Relaxed) {
            // SAFETY: `set_serial`'s contract: only one thread uses the
            // table at a time, ordered with the previous user by the
            // program; no `Access` outlives the table operation that took
            // it and none of these operations calls back into the table.
            Access::Serial(unsafe { self.inner.get_unshared() })
        } else {
            Access::Locked(self.inner.lock())
        }
    }

    #[inline]
    pub fn insert(&self, obj: T) -> Handle {
        let mut t = self.access();
        let idx = match t.free.pop() {
            Some(i) => i as usize,
            None => {
                t.slots.push(Slot { gen: 1, obj: None });
                t.slots.len() - 1
            }
        };
        t.slots[idx].obj = Some(obj);
        ((t.slots[idx].gen as usize) << 32) | (idx + BASE)
    }

    fn index(h: Handle) -> Option<(usize, u32)> {
        let lo = h & 0xffff_ffff;
        if lo < BASE {
            return None;
        }
        Some((lo - BASE, (h >> 32) as u32))
    }

    pub fn get(&self, h: Handle) -> Option<T> {
        let (i, g) = Self::index(h)?;
        let t = self.access();
        let s = t.slots.get(i)?;
        if s.gen != g {
            return None;
        }
        s.obj.clone()
    }

    /// `look` applied to the object of a live handle, without cloning it
    /// (for a request, an `Arc` clone and drop are two locked instructions:
    /// an `MPI_Test` that finds nothing paid four). `look` runs under the
    /// table's lock (above `MPI_THREAD_SERIALIZED`): it must be short and
    /// must not use the table.
    #[inline]
    pub fn with<R>(&self, h: Handle, look: impl FnOnce(&T) -> R) -> Option<R> {
        let (i, g) = Self::index(h)?;
        let t = self.access();
        let s = t.slots.get(i)?;
        if s.gen != g {
            return None;
        }
        s.obj.as_ref().map(look)
    }

    /// Replaces the object of a live handle.
    pub fn set(&self, h: Handle, obj: T) -> bool {
        let Some((i, g)) = Self::index(h) else {
            return false;
        };
        let old = {
            let mut t = self.access();
            match t.slots.get_mut(i) {
                Some(s) if s.gen == g && s.obj.is_some() => s.obj.replace(obj),
                _ => return false,
            }
        };
        // Dropped outside the lock: a destructor may use the table.
        drop(old);
        true
    }

    /// Removes and returns the object of `h`, unless `keep` holds for it:
    /// then the handle stays live and a clone is returned.
    pub fn remove_unless(&self, h: Handle, keep: impl FnOnce(&T) -> bool) -> Option<T> {
        let (i, g) = Self::index(h)?;
        let mut t = self.access();
        let s = t.slots.get_mut(i)?;
        if s.gen != g {
            return None;
        }
        if keep(s.obj.as_ref()?) {
            return s.obj.clone();
        }
        let o = s.obj.take()?;
        s.gen = s.gen.wrapping_add(1) & 0x7fff_ffff;
        t.free.push(i as u32);
        Some(o)
    }

    /// [`Table::get`] of every handle in `hs` under one lock (a request
    /// array of `MPI_Waitall`: one compare-exchange per call instead of one
    /// per handle). Predefined handles give None, as with `get`.
    pub fn get_each(&self, hs: &[Handle]) -> Vec<Option<T>> {
        let t = self.access();
        hs.iter()
            .map(|&h| {
                let (i, g) = Self::index(h)?;
                let s = t.slots.get(i)?;
                if s.gen != g {
                    return None;
                }
                s.obj.clone()
            })
            .collect()
    }

    /// The handle of the first live object for which `pick` holds (a scan:
    /// for error paths, not for calls on the way of a message).
    pub fn find(&self, pick: impl Fn(&T) -> bool) -> Option<Handle> {
        let t = self.access();
        t.slots.iter().enumerate().find_map(|(i, s)| {
            let o = s.obj.as_ref()?;
            pick(o).then_some(((s.gen as usize) << 32) | (i + BASE))
        })
    }

    /// [`Table::remove_unless`] of the handles in `hs` for which `pick`
    /// holds, under one lock; the others give None.
    pub fn remove_each_unless(
        &self,
        hs: &[Handle],
        mut pick: impl FnMut(usize) -> bool,
        keep: impl Fn(&T) -> bool,
    ) -> Vec<Option<T>> {
        let mut t = self.access();
        let mut out = Vec::with_capacity(hs.len());
        for (k, &h) in hs.iter().enumerate() {
            let got = (|| {
                if !pick(k) {
                    return None;
                }
                let (i, g) = Self::index(h)?;
                let s = t.slots.get_mut(i)?;
                if s.gen != g {
                    return None;
                }
                if keep(s.obj.as_ref()?) {
                    return s.obj.clone();
                }
                let o = s.obj.take()?;
                s.gen = s.gen.wrapping_add(1) & 0x7fff_ffff;
                t.free.push(i as u32);
                Some(o)
            })();
            out.push(got);
        }
        out
    }

    /// For `MPI_Waitall`: under one lock, checks every handle `hs[i]` for
    /// which `pick(i)` holds — live, with an object for which `takeable`
    /// holds — and only if all pass removes those objects, handing each to
    /// `put(i, obj)` (moved out: no clone, so no reference count per
    /// request). Otherwise removes nothing and names the first handle that
    /// failed, and whether it was live. A handle given twice is handed over
    /// once (the second finds its slot freed).
    pub fn take_each_if(
        &self,
        hs: &[Handle],
        pick: impl Fn(usize) -> bool,
        takeable: impl Fn(&T) -> bool,
        mut put: impl FnMut(usize, T),
    ) -> std::result::Result<(), (usize, bool)> {
        let mut t = self.access();
        for (k, &h) in hs.iter().enumerate() {
            if !pick(k) {
                continue;
            }
            let live = Self::index(h).and_then(|(i, g)| {
                let s = t.slots.get(i)?;
                (s.gen == g).then_some(s.obj.as_ref()?)
            });
            match live {
                Some(o) if takeable(o) => {}
                Some(_) => return Err((k, true)),
                None => return Err((k, false)),
            }
        }
        for (k, &h) in hs.iter().enumerate() {
            if !pick(k) {
                continue;
            }
            let Some((i, g)) = Self::index(h) else {
                continue;
            };
            let s = &mut t.slots[i];
            if s.gen != g {
                continue;
            }
            let Some(o) = s.obj.take() else { continue };
            s.gen = s.gen.wrapping_add(1) & 0x7fff_ffff;
            t.free.push(i as u32);
            put(k, o);
        }
        Ok(())
    }

    pub fn remove(&self, h: Handle) -> Option<T> {
        let (i, g) = Self::index(h)?;
        let mut t = self.access();
        let s = t.slots.get_mut(i)?;
        if s.gen != g {
            return None;
        }
        let o = s.obj.take()?;
        s.gen = s.gen.wrapping_add(1) & 0x7fff_ffff;
        t.free.push(i as u32);
        Some(o)
    }

    /// The 32-bit form for `MPI_x_toint`/`c2f`: the slot (the generation is implied).
    pub fn to_int(h: Handle) -> i32 {
        if is_eager_sent(h) {
            // Too wide for 32 bits: the completed send it is (not cancellable through Fortran).
            return REQUEST_DONE_SEND as i32;
        }
        match Self::index(h) {
            Some((i, _)) => (i + BASE) as i32,
            None => h as i32,
        }
    }

    pub fn from_int(&self, v: i32) -> Handle {
        let v = v as u32 as usize;
        if v < BASE {
            return v;
        }
        let t = self.access();
        match t.slots.get(v - BASE) {
            Some(s) => ((s.gen as usize) << 32) | v,
            None => v,
        }
    }
}

/// A request handle's object.
#[derive(Clone)]
pub enum ReqObj {
    Plain(Arc<Req>),
    Persistent(Arc<Mutex<Persistent>>),
    /// `MPI_Grequest_start` (see [`crate::grequest`]).
    Generalized(Arc<crate::grequest::Grequest>),
}

pub enum PKind {
    Send {
        buf: gridwire_mpi::Buf,
        dest: i32,
        tag: i32,
        mode: gridwire_mpi::Mode,
    },
    Recv {
        buf: gridwire_mpi::Buf,
        src: i32,
        tag: i32,
    },
    /// A persistent collective (`MPI_Bcast_init`, ...): starts one
    /// instance of the nonblocking algorithm on the communicator.
    Coll(PersistentColl),
}

/// Starts one instance of a persistent collective.
pub type PersistentColl =
    Box<dyn Fn(&'static gridwire_mpi::Mpi, &Comm) -> gridwire_mpi::Result<Arc<Req>> + Send>;

pub struct Persistent {
    pub kind: PKind,
    pub comm: Arc<Comm>,
    pub active: Option<Arc<Req>>,
}

/// Error handlers.
#[derive(Clone, Copy)]
pub enum Errh {
    Fatal,
    Abort,
    Return,
    /// `void f(MPI_Comm *, int *, ...)`
    User(unsafe extern "C" fn(*mut Handle, *mut std::ffi::c_int, ...)),
}

pub static COMMS: Table<Arc<Comm>> = Table::new();
pub static GROUPS: Table<Arc<Group>> = Table::new();
pub static TYPES: Table<Arc<Datatype>> = Table::new();
pub static OPS: Table<Arc<Op>> = Table::new();
pub static REQS: Table<ReqObj> = Table::new();
pub static ERRHS: Table<Errh> = Table::new();
pub static INFOS: Table<Arc<Mutex<gridwire_mpi::info::Info>>> = Table::new();
pub static MSGS: Table<Arc<Mutex<Option<Unexpected>>>> = Table::new();

/// The MPI library state, once `MPI_Init` ran.
pub static MPI: OnceLock<gridwire_mpi::Mpi> = OnceLock::new();

#[inline]
pub fn mpi() -> Result<&'static gridwire_mpi::Mpi> {
    match MPI.get() {
        Some(m) => Ok(m),
        None => Err(not_initialized()),
    }
}

#[cold]
#[inline(never)]
fn not_initialized() -> MpiError {
    err(class::OTHER, "MPI is not initialized (call MPI_Init first)")
}

/// A communicator found from its handle: `MPI_COMM_WORLD` and `MPI_COMM_SELF`
/// are borrowed (they live as long as the library), so the calls most
/// programs make most often take no reference count; others are shared.
pub enum CommRef {
    Static(&'static Arc<Comm>),
    Shared(Arc<Comm>),
}

impl std::ops::Deref for CommRef {
    type Target = Arc<Comm>;
    #[inline]
    fn deref(&self) -> &Arc<Comm> {
        match self {
            CommRef::Static(c) => c,
            CommRef::Shared(c) => c,
        }
    }
}

impl CommRef {
    /// An owned handle, for objects that keep the communicator.
    pub fn arc(&self) -> Arc<Comm> {
        Arc::clone(self)
    }
}

pub fn comm(h: MPI_Comm) -> Result<Arc<Comm>> {
    match comm_ref(h)? {
        CommRef::Static(c) => Ok(c.clone()),
        CommRef::Shared(c) => Ok(c),
    }
}

/// [`comm`] without a reference count for the predefined communicators (hot
/// paths). Inlined for `MPI_COMM_WORLD`, the handle of nearly every call on
/// the latency path; the rest go out of line.
#[inline]
pub fn comm_ref(h: MPI_Comm) -> Result<CommRef> {
    if h == MPI_COMM_WORLD {
        return Ok(CommRef::Static(&mpi()?.world));
    }
    comm_ref_other(h)
}

/// Every handle but `MPI_COMM_WORLD` (handled inline by [`comm_ref`]).
#[inline(never)]
fn comm_ref_other(h: MPI_Comm) -> Result<CommRef> {
    match h {
        MPI_COMM_SELF => Ok(CommRef::Static(&mpi()?.self_comm)),
        MPI_COMM_NULL => Err(err(class::COMM, "the communicator is MPI_COMM_NULL")),
        _ => COMMS.get(h).map(CommRef::Shared).ok_or_else(|| {
            err(
                class::COMM,
                format!("invalid communicator handle {h:#x} (freed or never created)"),
            )
        }),
    }
}

/// The communicator whose handler reports the error of a completed request
/// (`Status::comm_ctx`, the request's communicator's context): the
/// standard raises an error of `MPI_Wait` and its kin on the communicator of
/// the request. `MPI_COMM_WORLD` when the status names none, or the
/// communicator has been freed since.
pub fn comm_of_status(s: &gridwire_mpi::Status) -> MPI_Comm {
    let ctx = s.comm_ctx;
    let Ok(m) = mpi() else {
        return MPI_COMM_WORLD;
    };
    if ctx == 0 || ctx == m.world.ctx {
        return MPI_COMM_WORLD;
    }
    if ctx == m.self_comm.ctx {
        return MPI_COMM_SELF;
    }
    COMMS
        .find(|c| c.ctx == ctx && c.nbc == 0)
        .unwrap_or(MPI_COMM_WORLD)
}

pub fn new_comm(c: Arc<Comm>) -> MPI_Comm {
    let h = COMMS.insert(c.clone());
    c.handle.store(h, std::sync::atomic::Ordering::Relaxed);
    h
}

pub fn group(h: MPI_Group) -> Result<Arc<Group>> {
    match h {
        MPI_GROUP_EMPTY => Ok(Group::new(Vec::new())),
        MPI_GROUP_NULL => Err(err(class::GROUP, "the group is MPI_GROUP_NULL")),
        _ => GROUPS.get(h).ok_or_else(|| {
            err(
                class::GROUP,
                format!("invalid group handle {h:#x} (freed or never created)"),
            )
        }),
    }
}

/// (handle, basic type, name) of every predefined datatype.
const PREDEF: &[(usize, Basic, &str)] = &[
    (513, Basic::I64, "MPI_AINT"),
    (514, Basic::I64, "MPI_COUNT"),
    (515, Basic::I64, "MPI_OFFSET"),
    (519, Basic::Packed, "MPI_PACKED"),
    (520, Basic::I16, "MPI_SHORT"),
    (521, Basic::I32, "MPI_INT"),
    (522, Basic::I64, "MPI_LONG"),
    (523, Basic::I64, "MPI_LONG_LONG"),
    (524, Basic::U16, "MPI_UNSIGNED_SHORT"),
    (525, Basic::U32, "MPI_UNSIGNED"),
    (526, Basic::U64, "MPI_UNSIGNED_LONG"),
    (527, Basic::U64, "MPI_UNSIGNED_LONG_LONG"),
    (528, Basic::F32, "MPI_FLOAT"),
    (530, Basic::C32, "MPI_C_FLOAT_COMPLEX"),
    (531, Basic::C32, "MPI_CXX_FLOAT_COMPLEX"),
    (532, Basic::F64, "MPI_DOUBLE"),
    (534, Basic::C64, "MPI_C_DOUBLE_COMPLEX"),
    (535, Basic::C64, "MPI_CXX_DOUBLE_COMPLEX"),
    (536, Basic::Logical(4), "MPI_LOGICAL"),
    (537, Basic::I32, "MPI_INTEGER"),
    (538, Basic::F32, "MPI_REAL"),
    (539, Basic::C32, "MPI_COMPLEX"),
    (540, Basic::F64, "MPI_DOUBLE_PRECISION"),
    (541, Basic::C64, "MPI_DOUBLE_COMPLEX"),
    (542, Basic::Char, "MPI_CHARACTER"),
    (544, Basic::LongDouble, "MPI_LONG_DOUBLE"),
    (548, Basic::CLongDouble, "MPI_C_LONG_DOUBLE_COMPLEX"),
    (549, Basic::CLongDouble, "MPI_CXX_LONG_DOUBLE_COMPLEX"),
    (552, Basic::FloatInt, "MPI_FLOAT_INT"),
    (553, Basic::DoubleInt, "MPI_DOUBLE_INT"),
    (554, Basic::LongInt, "MPI_LONG_INT"),
    (555, Basic::TwoInt, "MPI_2INT"),
    (556, Basic::ShortInt, "MPI_SHORT_INT"),
    (557, Basic::LongDoubleInt, "MPI_LONG_DOUBLE_INT"),
    (560, Basic::TwoF32, "MPI_2REAL"),
    (561, Basic::TwoF64, "MPI_2DOUBLE_PRECISION"),
    (562, Basic::TwoI32, "MPI_2INTEGER"),
    (568, Basic::Bool, "MPI_C_BOOL"),
    (569, Basic::Bool, "MPI_CXX_BOOL"),
    (572, Basic::I32, "MPI_WCHAR"),
    (576, Basic::I8, "MPI_INT8_T"),
    (577, Basic::U8, "MPI_UINT8_T"),
    (579, Basic::Char, "MPI_CHAR"),
    (580, Basic::I8, "MPI_SIGNED_CHAR"),
    (581, Basic::U8, "MPI_UNSIGNED_CHAR"),
    (583, Basic::Byte, "MPI_BYTE"),
    (584, Basic::I16, "MPI_INT16_T"),
    (585, Basic::U16, "MPI_UINT16_T"),
    (592, Basic::I32, "MPI_INT32_T"),
    (593, Basic::U32, "MPI_UINT32_T"),
    (600, Basic::I64, "MPI_INT64_T"),
    (601, Basic::U64, "MPI_UINT64_T"),
    (704, Basic::Logical(1), "MPI_LOGICAL1"),
    (705, Basic::I8, "MPI_INTEGER1"),
    (712, Basic::Logical(2), "MPI_LOGICAL2"),
    (713, Basic::I16, "MPI_INTEGER2"),
    (714, Basic::OpaqueFloat(2), "MPI_REAL2"),
    (720, Basic::Logical(4), "MPI_LOGICAL4"),
    (721, Basic::I32, "MPI_INTEGER4"),
    (722, Basic::F32, "MPI_REAL4"),
    (723, Basic::OpaqueFloat(4), "MPI_COMPLEX4"),
    (728, Basic::Logical(8), "MPI_LOGICAL8"),
    (729, Basic::I64, "MPI_INTEGER8"),
    (730, Basic::F64, "MPI_REAL8"),
    (731, Basic::C32, "MPI_COMPLEX8"),
    (736, Basic::Logical(16), "MPI_LOGICAL16"),
    (737, Basic::OpaqueFloat(16), "MPI_INTEGER16"),
    (738, Basic::OpaqueFloat(16), "MPI_REAL16"),
    (739, Basic::C64, "MPI_COMPLEX16"),
    (747, Basic::OpaqueFloat(32), "MPI_COMPLEX32"),
];

static PREDEF_TYPES: OnceLock<Vec<Option<Arc<Datatype>>>> = OnceLock::new();

fn predef_types() -> &'static Vec<Option<Arc<Datatype>>> {
    PREDEF_TYPES.get_or_init(|| {
        let mut v = vec![None; 0x300];
        for &(h, b, name) in PREDEF {
            let t = Datatype::predefined(b, name);
            t.handle.store(h, std::sync::atomic::Ordering::Relaxed);
            v[h] = Some(t);
        }
        v
    })
}

pub fn dtype(h: MPI_Datatype) -> Result<Arc<Datatype>> {
    if h < 0x300 {
        if let Some(Some(t)) = predef_types().get(h) {
            return Ok(t.clone());
        }
        return Err(err(
            class::TYPE,
            if h == MPI_DATATYPE_NULL {
                "the datatype is MPI_DATATYPE_NULL".to_string()
            } else {
                format!("invalid datatype handle {h:#x}")
            },
        ));
    }
    TYPES.get(h).ok_or_else(|| {
        err(
            class::TYPE,
            format!("invalid datatype handle {h:#x} (freed or never created)"),
        )
    })
}

/// As [`dtype`], borrowing a predefined type (no reference count: the
/// one-sided calls on one host are cheaper than that).
pub fn dtype_ref(h: MPI_Datatype) -> Result<gridwire_mpi::DtRef> {
    match predef_types().get(h) {
        Some(Some(t)) => Ok(gridwire_mpi::DtRef::borrowed(t)),
        _ => dtype(h).map(Into::into),
    }
}

/// The predefined contiguous datatype of handle `h` (not a pair type, not
/// `MPI_DATATYPE_NULL`), borrowed for the library's lifetime: what the
/// one-sided fast path (`rma::fast`) accepts.
#[inline]
pub fn predef_contig_type(h: MPI_Datatype) -> Option<&'static Datatype> {
    match predef_types().get(h) {
        Some(Some(t)) if t.contig && t.size > 0 => Some(t),
        _ => None,
    }
}

pub fn is_predefined_type(h: MPI_Datatype) -> bool {
    h < 0x300 && matches!(predef_types().get(h), Some(Some(_)))
}

pub fn new_type(t: Arc<Datatype>) -> MPI_Datatype {
    let h = TYPES.insert(t.clone());
    t.handle.store(h, std::sync::atomic::Ordering::Relaxed);
    h
}

static PREDEF_OPS: OnceLock<Vec<(usize, Arc<Op>)>> = OnceLock::new();

/// An operation found from its handle: predefined ones are borrowed (they
/// live as long as the library), user ones shared.
pub enum OpRef {
    Static(&'static Op),
    Shared(Arc<Op>),
}

impl std::ops::Deref for OpRef {
    type Target = Op;
    #[inline]
    fn deref(&self) -> &Op {
        match self {
            OpRef::Static(o) => o,
            OpRef::Shared(o) => o,
        }
    }
}

/// As [`op`], without a reference count for the predefined operations.
pub fn op_ref(h: MPI_Op) -> Result<OpRef> {
    if let Some((_, o)) = predef_ops().iter().find(|(v, _)| *v == h) {
        return Ok(OpRef::Static(o));
    }
    op(h).map(OpRef::Shared)
}

/// The predefined operation of handle `h`, borrowed (user operations: None).
#[inline]
pub fn predef_op(h: MPI_Op) -> Option<&'static Op> {
    predef_ops()
        .iter()
        .find(|(v, _)| *v == h)
        .map(|(_, o)| &**o)
}

fn predef_ops() -> &'static Vec<(usize, Arc<Op>)> {
    PREDEF_OPS.get_or_init(|| {
        vec![
            (33, Arc::new(Op::Sum)),
            (34, Arc::new(Op::Min)),
            (35, Arc::new(Op::Max)),
            (36, Arc::new(Op::Prod)),
            (40, Arc::new(Op::Band)),
            (41, Arc::new(Op::Bor)),
            (42, Arc::new(Op::Bxor)),
            (48, Arc::new(Op::Land)),
            (49, Arc::new(Op::Lor)),
            (50, Arc::new(Op::Lxor)),
            (56, Arc::new(Op::MinLoc)),
            (57, Arc::new(Op::MaxLoc)),
            (60, Arc::new(Op::Replace)),
            (61, Arc::new(Op::NoOp)),
        ]
    })
}

pub fn op(h: MPI_Op) -> Result<Arc<Op>> {
    if let Some((_, o)) = predef_ops().iter().find(|(v, _)| *v == h) {
        return Ok(o.clone());
    }
    OPS.get(h)
        .ok_or_else(|| err(class::OP, format!("invalid operation handle {h:#x}")))
}

pub fn errh(h: MPI_Errhandler) -> Result<Errh> {
    match h {
        MPI_ERRORS_ARE_FATAL => Ok(Errh::Fatal),
        MPI_ERRORS_ABORT => Ok(Errh::Abort),
        MPI_ERRORS_RETURN => Ok(Errh::Return),
        _ => ERRHS
            .get(h)
            .ok_or_else(|| err(class::ERRHANDLER, format!("invalid error handler {h:#x}"))),
    }
}

pub fn info(h: MPI_Info) -> Result<Arc<Mutex<gridwire_mpi::info::Info>>> {
    if h == MPI_INFO_ENV {
        return Ok(Arc::new(Mutex::new(crate::misc::env_info())));
    }
    INFOS.get(h).ok_or_else(|| {
        if h == MPI_INFO_NULL {
            err(class::INFO, "the info is MPI_INFO_NULL")
        } else {
            err(class::INFO, format!("invalid info handle {h:#x}"))
        }
    })
}

/// Builds a user buffer from C arguments, checking count and datatype.
///
/// # Safety
/// `addr` with `count` elements of `dt` is the user's buffer for the
/// operation, valid until it completes (the MPI rule for buffers).
#[inline(always)]
pub unsafe fn buf(
    addr: *const std::ffi::c_void,
    count: i64,
    dt: MPI_Datatype,
) -> Result<gridwire_mpi::Buf> {
    if count < 0 {
        return Err(err(class::COUNT, format!("count {count} is negative")));
    }
    // Predefined types live as long as the library: borrow them (no reference count per call).
    let t: gridwire_mpi::DtRef = match predef_types().get(dt) {
        Some(Some(t)) => gridwire_mpi::DtRef::borrowed(t),
        _ => dtype(dt)?.into(),
    };
    // `Buf::new` needs `count` elements to fit in memory: a `_c` count near
    // 2^61 of 8-byte elements wrapped `count * size` to a small number.
    // One multiply and compare on every call.
    let fits = (count as u64)
        .checked_mul(t.size as u64)
        .is_some_and(|b| b <= isize::MAX as u64);
    // A contiguous type's span is its size; only others need the extent check.
    if !fits || (!t.contig && count > 1 && span(count as u64, &t).is_none()) {
        return Err(count_too_big(count, &t));
    }
    // SAFETY: forwarded from this function's contract; the size fits (above).
    Ok(unsafe { gridwire_mpi::Buf::new(addr as usize, count as usize, t) })
}

/// [`buf`] for a point-to-point call with `peer`: a count-0 buffer to or
/// from `MPI_PROC_NULL` is accepted whatever its datatype (even
/// `MPI_DATATYPE_NULL`), as MPICH and Open MPI do and programs rely on
/// (`MPI_Irecv(NULL, 0, MPI_DATATYPE_NULL, MPI_PROC_NULL, ...)`). Only the
/// error path looks at `peer`: the hot path is [`buf`] itself.
///
/// # Safety
/// As for [`buf`].
// Always inlined: out of line, saving registers and moving the `Result<Buf>`
// cost about 20 instructions per `MPI_Isend`/`MPI_Irecv` (callgrind).
#[inline(always)]
pub unsafe fn peer_buf(
    addr: *const std::ffi::c_void,
    count: i64,
    dt: MPI_Datatype,
    peer: std::ffi::c_int,
) -> Result<gridwire_mpi::Buf> {
    // SAFETY: forwarded contract.
    match unsafe { buf(addr, count, dt) } {
        Ok(b) => Ok(b),
        Err(_) if count == 0 && peer == gridwire_mpi::PROC_NULL => {
            let byte = predef_types()[583]
                .as_ref()
                .expect("MPI_BYTE (583) is predefined");
            // SAFETY: zero elements: no byte at `addr` is ever touched.
            Ok(unsafe {
                gridwire_mpi::Buf::new(addr as usize, 0, gridwire_mpi::DtRef::borrowed(byte))
            })
        }
        Err(e) => Err(e),
    }
}

/// Bytes from the first to the last byte that `count` elements of `t` touch, if that fits.
#[inline(never)]
fn span(count: u64, t: &gridwire_mpi::Datatype) -> Option<u64> {
    let ext = t.extent.unsigned_abs() as u64;
    (count - 1)
        .checked_mul(ext)?
        .checked_add(t.true_extent.max(0) as u64)
        .filter(|&b| b <= isize::MAX as u64)
}

#[cold]
#[inline(never)]
fn count_too_big(count: i64, t: &gridwire_mpi::Datatype) -> gridwire_mpi::MpiError {
    err(
        class::COUNT,
        format!(
            "count {count} of a datatype of {} bytes (extent {}) does not fit in the address space",
            t.size, t.extent
        ),
    )
}

pub fn status_from(s: &gridwire_mpi::Status) -> MPI_Status {
    let b = s.bytes as u64;
    MPI_Status {
        MPI_SOURCE: s.source,
        MPI_TAG: s.tag,
        MPI_ERROR: s.error,
        internal: [
            b as u32 as i32,
            (b >> 32) as u32 as i32,
            s.cancelled as i32,
            0,
            0,
        ],
    }
}

/// Completed eager sends carry, in the handle itself, where the message
/// went (so `MPI_Cancel` can name it to the receiver without a request
/// object per send): bit 63 set (never in a table handle, whose generation
/// stays below 2^31, nor a predefined one), the context in bits 47-62, the
/// receiver's world rank in bits 32-46, the sequence number below. A send
/// that does not fit (context from 2^16, rank from 2^15, nonblocking-collective
/// traffic) gets the plain `REQUEST_DONE_SEND`.
const EAGER_SENT: usize = 1 << 63;

pub fn eager_sent_handle(s: Option<gridwire_mpi::isend::Sent>) -> MPI_Request {
    match s {
        Some(s) if s.ctx < 1 << 16 && s.world < 1 << 15 => {
            EAGER_SENT | (s.ctx as usize) << 47 | (s.world as usize) << 32 | s.seq as usize
        }
        _ => REQUEST_DONE_SEND,
    }
}

#[inline]
pub fn is_eager_sent(h: MPI_Request) -> bool {
    h & EAGER_SENT != 0
}

/// The message an eager-send handle names.
pub fn eager_sent(h: MPI_Request) -> Option<gridwire_mpi::isend::Sent> {
    is_eager_sent(h).then_some(gridwire_mpi::isend::Sent {
        ctx: ((h >> 47) & 0xffff) as u64,
        world: ((h >> 32) & 0x7fff) as u32,
        seq: h as u32,
    })
}

pub fn _unused(_: MpiError) {}

#[cfg(test)]
mod tests {
    use super::*;
    use gridwire_mpi::isend::Sent;

    #[test]
    fn a_serial_table_keeps_generations_and_can_go_back_to_locking() {
        let t: Table<u8> = Table::new();
        // SAFETY: this table is local to this thread.
        unsafe { t.set_serial(true) };
        let a = t.insert(1);
        assert_eq!(t.get(a), Some(1));
        assert_eq!(t.remove(a), Some(1));
        // The slot is reused under a new generation: the stale handle is refused.
        let b = t.insert(2);
        assert_ne!(a, b);
        assert_eq!(t.get(a), None);
        assert_eq!(t.remove(a), None);
        // SAFETY: as above.
        unsafe { t.set_serial(false) };
        assert_eq!(t.get(b), Some(2));
        assert!(
            t.inner.try_lock().is_some(),
            "serial use left the lock free"
        );
        assert_eq!(t.remove(b), Some(2));
        assert_eq!(t.get(b), None);
    }

    #[test]
    fn take_each_if_moves_all_or_nothing() {
        let t: Table<u8> = Table::new();
        let (a, b, c) = (t.insert(1), t.insert(2), t.insert(30));
        let small = |o: &u8| *o < 10;
        // One object fails `takeable`: nothing is taken, and it is named (live).
        let mut got = Vec::new();
        let r = t.take_each_if(&[a, c, b], |_| true, small, |i, o| got.push((i, o)));
        assert_eq!(r, Err((1, true)));
        assert!(got.is_empty());
        assert_eq!((t.get(a), t.get(b), t.get(c)), (Some(1), Some(2), Some(30)));
        // Not picked: left alone. A handle given twice is handed over once.
        let r = t.take_each_if(&[a, c, b, a], |i| i != 1, small, |i, o| got.push((i, o)));
        assert_eq!(r, Ok(()));
        assert_eq!(got, vec![(0, 1), (2, 2)]);
        assert_eq!((t.get(a), t.get(b), t.get(c)), (None, None, Some(30)));
        // A stale handle is named, not live.
        let r = t.take_each_if(&[c, b], |_| true, |_| true, |_, _| {});
        assert_eq!(r, Err((1, false)));
        assert_eq!(t.get(c), Some(30));
    }

    #[test]
    fn an_eager_send_handle_names_its_message_and_is_no_table_handle() {
        let s = Sent {
            ctx: 0xfffe,
            world: 0x7ffe,
            seq: 0xdead_beef,
        };
        let h = eager_sent_handle(Some(s));
        assert!(is_eager_sent(h));
        assert_eq!(eager_sent(h), Some(s));
        // Table handles (generation below 2^31) and predefined ones never have bit 63.
        let t: Table<u8> = Table::new();
        assert!(!is_eager_sent(t.insert(1)));
        assert!(!is_eager_sent(REQUEST_DONE_SEND) && !is_eager_sent(MPI_REQUEST_NULL));
        // What does not fit is the plain completed send.
        let wide = Sent { ctx: 1 << 16, ..s };
        assert_eq!(eager_sent_handle(Some(wide)), REQUEST_DONE_SEND);
        assert_eq!(eager_sent_handle(None), REQUEST_DONE_SEND);
        assert_eq!(Table::<u8>::to_int(h), REQUEST_DONE_SEND as i32);
    }
}
