//! The MPI tools interface (MPI_T): control variables (every `GW_*`
//! parameter), performance variables (the runtime's per-link and
//! per-method statistics), categories, events (link selection and failure)
//! and the one timestamp source. See docs/mpi_t.md.
//!
//! The tables and the handle bookkeeping are plain Rust (unit-tested here);
//! the `MPI_T_*` functions at the bottom of each file only check and move C
//! arguments. MPI_T functions return their error class and never call an
//! error handler (the standard's rule for the tools interface).

mod category;
mod cvar;
mod event;
mod pvar;

use crate::abi::*;
use crate::{cstr, put, Void};
use std::collections::BTreeMap;
use std::ffi::{c_char, c_int};
use std::sync::{Mutex, MutexGuard};

pub const MPI_T_ERR_NOT_ACCESSIBLE: c_int = 1002;
pub const MPI_T_ERR_NOT_INITIALIZED: c_int = 1003;
pub const MPI_T_ERR_INVALID_INDEX: c_int = 1007;
pub const MPI_T_ERR_INVALID_ITEM: c_int = 1008;
pub const MPI_T_ERR_INVALID_SESSION: c_int = 1009;
pub const MPI_T_ERR_INVALID_HANDLE: c_int = 1010;
pub const MPI_T_ERR_INVALID_NAME: c_int = 1011;
pub const MPI_T_ERR_CVAR_SET_NEVER: c_int = 1015;
pub const MPI_T_ERR_PVAR_NO_WRITE: c_int = 1016;
pub const MPI_T_ERR_PVAR_NO_STARTSTOP: c_int = 1017;
pub const MPI_T_ERR_PVAR_NO_ATOMIC: c_int = 1018;
pub const MPI_ERR_ARG: c_int = gridwire_mpi::class::ARG;

pub const MPI_INT: MPI_Datatype = 521;
pub const MPI_UNSIGNED_LONG_LONG: MPI_Datatype = 527;
pub const MPI_CHAR: MPI_Datatype = 579;

pub const VERBOSITY_USER_BASIC: c_int = 9;
pub const VERBOSITY_TUNER_BASIC: c_int = 17;
pub const VERBOSITY_TUNER_DETAIL: c_int = 18;
pub const BIND_NO_OBJECT: c_int = 1;
pub const BIND_MPI_COMM: c_int = 2;

pub const CB_REQUIRE_NONE: c_int = 0;
pub const CB_REQUIRE_MPI_RESTRICTED: c_int = 3;
pub const SOURCE_ORDERED: c_int = 1;

/// Result of an MPI_T body: `Err` carries the error class returned to C.
pub(crate) type TResult<T = ()> = std::result::Result<T, c_int>;

/// `MPI_T_init_thread` calls not yet matched by `MPI_T_finalize`.
static NESTING: Mutex<u32> = Mutex::new(0);

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Fails with `MPI_T_ERR_NOT_INITIALIZED` outside `MPI_T_init_thread` .. `MPI_T_finalize`.
pub(crate) fn initialized() -> TResult {
    if *lock(&NESTING) > 0 {
        Ok(())
    } else {
        Err(MPI_T_ERR_NOT_INITIALIZED)
    }
}

/// Runs an MPI_T body after the initialisation check; returns its class.
pub(crate) fn t_run(f: impl FnOnce() -> TResult) -> c_int {
    match initialized().and_then(|_| f()) {
        Ok(()) => MPI_SUCCESS,
        Err(c) => c,
    }
}

/// Checks an index argument against a table length.
pub(crate) fn index(i: c_int, len: usize) -> TResult<usize> {
    usize::try_from(i)
        .ok()
        .filter(|&i| i < len)
        .ok_or(MPI_T_ERR_INVALID_INDEX)
}

/// Stores a string the MPI_T way (as MPICH does): `len` holds the buffer
/// size on input; nothing is written when `buf` is NULL or `*len` is 0, and
/// `*len` then receives the size needed (with the NUL); otherwise the string
/// is truncated to fit and `*len` receives the size stored (with the NUL).
///
/// # Safety
/// `buf` is NULL or holds `*len` bytes; `len` is NULL or a valid `int*`.
pub(crate) unsafe fn put_tstr(s: &str, buf: *mut c_char, len: *mut c_int) {
    if len.is_null() {
        return;
    }
    // SAFETY: non-null `len` is a valid int pointer by the caller's contract.
    let cap = unsafe { *len };
    if buf.is_null() || cap <= 0 {
        // SAFETY: as above.
        unsafe { *len = s.len() as c_int + 1 };
        return;
    }
    // SAFETY: `buf` holds `cap` bytes by the contract; put_str writes at most that.
    unsafe { crate::put_str(s, buf, cap as usize, std::ptr::null_mut()) };
    let stored = s.len().min(cap as usize - 1);
    // SAFETY: as above.
    unsafe { *len = stored as c_int + 1 };
}

/// Objects handed to C as opaque handles: ids counting up from 16 (below
/// are the predefined NULL = 0 and `MPI_T_PVAR_ALL_HANDLES` = 1), never
/// reused, so a freed or forged handle is simply not found.
pub(crate) struct Ids<T> {
    next: usize,
    live: BTreeMap<usize, T>,
}

impl<T> Ids<T> {
    pub const fn new() -> Self {
        Ids {
            next: 16,
            live: BTreeMap::new(),
        }
    }
    pub fn insert(&mut self, v: T) -> usize {
        let id = self.next;
        self.next += 1;
        self.live.insert(id, v);
        id
    }
    pub fn get(&self, id: usize) -> Option<&T> {
        self.live.get(&id)
    }
    pub fn get_mut(&mut self, id: usize) -> Option<&mut T> {
        self.live.get_mut(&id)
    }
    pub fn remove(&mut self, id: usize) -> Option<T> {
        self.live.remove(&id)
    }
    pub fn clear(&mut self) {
        self.live.clear();
    }
    pub fn retain(&mut self, f: impl FnMut(&usize, &mut T) -> bool) {
        self.live.retain(f)
    }
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&usize, &mut T)> {
        self.live.iter_mut()
    }
    pub fn iter(&self) -> impl Iterator<Item = (&usize, &T)> {
        self.live.iter()
    }
}

/// The value sets of enumerated variables: handle = position + 1 (0 is
/// `MPI_T_ENUM_NULL`).
pub(crate) struct Enum {
    pub name: String,
    pub items: Vec<String>,
}

/// Enum 1: the methods, for the state of a link (0 = no link yet).
pub(crate) const METHOD_ENUM: usize = 1;

pub(crate) fn enums() -> &'static [Enum] {
    static E: std::sync::OnceLock<Vec<Enum>> = std::sync::OnceLock::new();
    E.get_or_init(|| {
        let mut v = vec![Enum {
            name: "gw_method".into(),
            items: std::iter::once("none".to_string())
                .chain(
                    gridwire_core::method::registry()
                        .iter()
                        .map(|m| m.name.to_string()),
                )
                .collect(),
        }];
        for d in cvar::all_decls() {
            if let gridwire_core::params::Kind::Choice(words) = d.kind {
                v.push(Enum {
                    name: d.var().to_ascii_lowercase(),
                    items: words.iter().map(|w| w.to_string()).collect(),
                });
            }
        }
        v
    })
}

/// The value of method `name` in [`METHOD_ENUM`] (0 = none or unknown).
pub(crate) fn method_value(name: &str) -> c_int {
    enums()[METHOD_ENUM - 1]
        .items
        .iter()
        .position(|m| m == name)
        .unwrap_or(0) as c_int
}

/// The enum whose name is `name`, as a handle.
pub(crate) fn enum_named(name: &str) -> usize {
    enums()
        .iter()
        .position(|e| e.name == name)
        .map_or(0, |i| i + 1)
}

fn enum_of(h: usize) -> TResult<&'static Enum> {
    h.checked_sub(1)
        .and_then(|i| enums().get(i))
        .ok_or(MPI_T_ERR_INVALID_HANDLE)
}

/// Nanoseconds of the runtime's monotonic clock (the one event source).
pub(crate) fn now_ns() -> i64 {
    static T0: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    T0.get_or_init(std::time::Instant::now).elapsed().as_nanos() as i64
}

/// A new empty info object for the `*_get_info` functions.
fn new_info() -> MPI_Info {
    crate::handles::INFOS.insert(std::sync::Arc::new(Mutex::new(
        gridwire_mpi::info::Info::default(),
    )))
}

mpi_fn!(fn MPI_T_init_thread / PMPI_T_init_thread(required: c_int, provided: *mut c_int) -> c_int {
    *lock(&NESTING) += 1;
    event::install_listener();
    // Every MPI_T function is thread-safe: grant what was asked, up to MULTIPLE.
    // SAFETY: output argument.
    unsafe { put(provided, required.clamp(MPI_THREAD_SINGLE, MPI_THREAD_MULTIPLE)) };
    MPI_SUCCESS
});

mpi_fn!(fn MPI_T_finalize / PMPI_T_finalize() -> c_int {
    let mut n = lock(&NESTING);
    if *n == 0 {
        return MPI_T_ERR_NOT_INITIALIZED;
    }
    *n -= 1;
    if *n == 0 {
        // The last finalize ends every session and handle of the interface.
        cvar::free_all();
        pvar::free_all();
        event::free_all();
    }
    MPI_SUCCESS
});

mpi_fn!(fn MPI_T_enum_get_info / PMPI_T_enum_get_info(e: usize, num: *mut c_int, name: *mut c_char, name_len: *mut c_int) -> c_int {
    t_run(|| {
        let en = enum_of(e)?;
        // SAFETY: output arguments by the MPI contract.
        unsafe {
            put(num, en.items.len() as c_int);
            put_tstr(&en.name, name, name_len);
        }
        Ok(())
    })
});

mpi_fn!(fn MPI_T_enum_get_item / PMPI_T_enum_get_item(e: usize, i: c_int, value: *mut c_int, name: *mut c_char, name_len: *mut c_int) -> c_int {
    t_run(|| {
        let en = enum_of(e)?;
        let i = index(i, en.items.len()).map_err(|_| MPI_T_ERR_INVALID_ITEM)?;
        // SAFETY: output arguments by the MPI contract.
        unsafe {
            put(value, i as c_int);
            put_tstr(&en.items[i], name, name_len);
        }
        Ok(())
    })
});

mpi_fn!(fn MPI_T_source_get_num / PMPI_T_source_get_num(n: *mut c_int) -> c_int {
    // SAFETY: output argument.
    t_run(|| { unsafe { put(n, 1) }; Ok(()) })
});

mpi_fn!(fn MPI_T_source_get_info / PMPI_T_source_get_info(i: c_int, name: *mut c_char, name_len: *mut c_int,
        desc: *mut c_char, desc_len: *mut c_int, ordering: *mut c_int, ticks: *mut MPI_Count,
        max_ticks: *mut MPI_Count, info: *mut MPI_Info) -> c_int {
    t_run(|| {
        index(i, 1)?;
        // SAFETY: output arguments by the MPI contract.
        unsafe {
            put_tstr("gw_monotonic", name, name_len);
            put_tstr("the runtime's monotonic clock, nanoseconds since the library first read it",
                desc, desc_len);
            put(ordering, SOURCE_ORDERED);
            put(ticks, 1_000_000_000);
            put(max_ticks, i64::MAX);
            if !info.is_null() {
                put(info, new_info());
            }
        }
        Ok(())
    })
});

mpi_fn!(fn MPI_T_source_get_timestamp / PMPI_T_source_get_timestamp(i: c_int, ts: *mut MPI_Count) -> c_int {
    t_run(|| {
        index(i, 1)?;
        // SAFETY: output argument.
        unsafe { put(ts, now_ns()) };
        Ok(())
    })
});

/// Looks a name argument up: NULL or unknown names are `MPI_T_ERR_INVALID_NAME`.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string.
pub(crate) unsafe fn find_name(
    name: *const c_char,
    mut by: impl FnMut(&str) -> Option<usize>,
) -> TResult<c_int> {
    if name.is_null() {
        return Err(MPI_T_ERR_INVALID_NAME);
    }
    // SAFETY: the caller passes a NUL-terminated string.
    let s = unsafe { cstr(name) };
    by(&s).map(|i| i as c_int).ok_or(MPI_T_ERR_INVALID_NAME)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_never_reused_and_skip_the_predefined_values() {
        let mut t = Ids::new();
        let a = t.insert(1);
        assert!(a >= 16);
        assert_eq!(t.remove(a), Some(1));
        let b = t.insert(2);
        assert_ne!(a, b);
        assert!(t.get(a).is_none());
        assert_eq!(t.get(0), None);
        assert_eq!(t.get(1), None);
    }

    #[test]
    fn index_checks_both_ends() {
        assert_eq!(index(-1, 3), Err(MPI_T_ERR_INVALID_INDEX));
        assert_eq!(index(3, 3), Err(MPI_T_ERR_INVALID_INDEX));
        assert_eq!(index(2, 3), Ok(2));
    }

    #[test]
    fn method_enum_starts_with_none_and_lists_every_method() {
        assert_eq!(method_value("none"), 0);
        assert!(method_value("tcp") > 0);
        assert!(method_value("shm") > 0);
        assert_eq!(method_value("carrier-pigeon"), 0);
        assert_eq!(enum_named("gw_method"), METHOD_ENUM);
        assert!(enum_named("gw_pmi") > METHOD_ENUM);
    }

    #[test]
    fn tstr_reports_the_needed_size_and_truncates() {
        let mut len: c_int = 0;
        // SAFETY: NULL buffer, valid length pointer.
        unsafe { put_tstr("abcdef", std::ptr::null_mut(), &mut len) };
        assert_eq!(len, 7);
        let mut buf = [0 as c_char; 4];
        len = 4;
        // SAFETY: buffer of 4 bytes, length says 4.
        unsafe { put_tstr("abcdef", buf.as_mut_ptr(), &mut len) };
        assert_eq!(len, 4);
        assert_eq!(buf[3], 0);
        assert_eq!(buf[0] as u8, b'a');
    }
}
