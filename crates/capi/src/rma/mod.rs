//! One-sided communication: window handles, their attributes, names,
//! info and error handlers, and the synchronization calls. The
//! communication calls (`MPI_Put` and the like) are in [`ops`].

mod cache;
mod fast;
mod ops;

pub(crate) use cache::with_win;

use crate::abi::*;
use crate::errors::fail;
use crate::handles::{self, mpi, Errh, Table};
use crate::{cstr, put, put_str, Void};
use gridwire_mpi::attr::AttrSet;
use gridwire_mpi::rma::Win;
use gridwire_mpi::{class, err, MpiError, Result};
use std::ffi::{c_char, c_int};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

/// A window handle's object: the window and what its C attributes point to.
pub struct WinObj {
    pub win: Arc<Win>,
    /// `MPI_WIN_SIZE`, `MPI_WIN_DISP_UNIT`, `MPI_WIN_CREATE_FLAVOR`,
    /// `MPI_WIN_MODEL`: the attribute value is a pointer to these.
    size: MPI_Aint,
    disp_unit: c_int,
    flavor: c_int,
    model: c_int,
    attrs: Mutex<AttrSet>,
}

pub static WINS: Table<Arc<WinObj>> = Table::new();

// The ABI's values for windows (kept here, beside their only users).
pub type MPI_Win = Handle;
pub const MPI_WIN_NULL: Handle = 272;
const MPI_WIN_BASE: c_int = 601;
const MPI_WIN_DISP_UNIT: c_int = 602;
const MPI_WIN_SIZE: c_int = 603;
const MPI_WIN_CREATE_FLAVOR: c_int = 604;
const MPI_WIN_MODEL: c_int = 605;
const MPI_WIN_UNIFIED: c_int = 321;

fn win_obj(h: MPI_Win) -> Result<Arc<WinObj>> {
    if h == MPI_WIN_NULL {
        return Err(err(class::WIN, "the window is MPI_WIN_NULL"));
    }
    WINS.get(h).ok_or_else(|| {
        err(
            class::WIN,
            format!("invalid window handle {h:#x} (freed or never created)"),
        )
    })
}

pub(crate) fn win(h: MPI_Win) -> Result<Arc<Win>> {
    win_obj(h).map(|o| o.win.clone())
}

/// Reports an error of `name` on window `w`: its error handler decides
/// (fatal by default, as the standard says for windows). An unusable
/// handle is reported on `MPI_COMM_WORLD`.
fn fail_win(name: &str, w: MPI_Win, e: MpiError) -> c_int {
    let Some(o) = WINS.get(w) else {
        return fail(name, MPI_COMM_WORLD, e);
    };
    let eh = match o.win.errhandler.load(Ordering::Relaxed) {
        0 => Errh::Fatal,
        h => handles::errh(h).unwrap_or(Errh::Fatal),
    };
    let code = e.class;
    match eh {
        Errh::Return => code,
        Errh::User(f) => {
            let (mut h, mut c) = (w, code);
            // SAFETY: a function the program registered with
            // MPI_Win_create_errhandler, called with (MPI_Win *, int *).
            unsafe { f(&mut h, &mut c) };
            code
        }
        Errh::Fatal | Errh::Abort => {
            let m = mpi();
            let msg = format!(
                "gridwire MPI: rank {}: {name}: {} ({}): {}",
                m.as_ref().map_or("?".into(), |m| m.world.rank.to_string()),
                class::name(code),
                class::describe(code),
                e.msg
            );
            gridwire_core::say!("{msg}");
            match m {
                Ok(m) => m.ctx().abort(code.max(1), &msg),
                Err(_) => std::process::exit(code.max(1)),
            }
        }
    }
}

/// Runs a window call's body; an error goes to the window's error handler.
pub(crate) fn run_win(name: &str, w: MPI_Win, f: impl FnOnce() -> Result<()>) -> c_int {
    match f() {
        Ok(()) => MPI_SUCCESS,
        Err(e) => fail_win(name, w, e),
    }
}

/// Gives a new window a handle and stores it in `out`.
///
/// # Safety
/// `out` is NULL or a valid `MPI_Win*`.
unsafe fn out_win(out: *mut MPI_Win, w: Arc<Win>) -> Result<()> {
    if out.is_null() {
        return Err(err(class::ARG, "the output window pointer is NULL"));
    }
    let obj = Arc::new(WinObj {
        size: w.size as MPI_Aint,
        disp_unit: w.disp_unit as c_int,
        flavor: w.flavor as c_int,
        model: MPI_WIN_UNIFIED,
        attrs: Mutex::new(AttrSet::default()),
        win: w,
    });
    // SAFETY: checked non-null output argument.
    unsafe { *out = WINS.insert(obj) };
    Ok(())
}

/// Stores the window's base address through `baseptr` (a `void **`).
///
/// # Safety
/// `baseptr` is NULL or valid for a pointer-sized write.
unsafe fn out_base(baseptr: *mut Void, addr: usize) {
    // SAFETY: forwarded contract.
    unsafe { put(baseptr as *mut usize, addr) };
}

mpi_fn!(fn MPI_Win_create / PMPI_Win_create(base: *mut Void, size: MPI_Aint, disp_unit: c_int, _info: MPI_Info, comm: MPI_Comm, win: *mut MPI_Win) -> c_int {
    crate::errors::run("MPI_Win_create", comm, || {
        let c = handles::comm(comm)?;
        let w = mpi()?.win_create(&c, base as usize, size as i64, disp_unit as i64)?;
        // SAFETY: output argument.
        unsafe { out_win(win, w) }
    })
});

mpi_fn!(fn MPI_Win_create_c / PMPI_Win_create_c(base: *mut Void, size: MPI_Aint, disp_unit: MPI_Aint, _info: MPI_Info, comm: MPI_Comm, win: *mut MPI_Win) -> c_int {
    crate::errors::run("MPI_Win_create_c", comm, || {
        let c = handles::comm(comm)?;
        let w = mpi()?.win_create(&c, base as usize, size as i64, disp_unit as i64)?;
        // SAFETY: output argument.
        unsafe { out_win(win, w) }
    })
});

fn allocate(
    name: &str,
    size: MPI_Aint,
    disp_unit: i64,
    comm: MPI_Comm,
    baseptr: *mut Void,
    win: *mut MPI_Win,
    shared: bool,
) -> c_int {
    crate::errors::run(name, comm, || {
        let c = handles::comm(comm)?;
        let m = mpi()?;
        let w = if shared {
            m.win_allocate_shared(&c, size as i64, disp_unit)?
        } else {
            m.win_allocate(&c, size as i64, disp_unit)?
        };
        // SAFETY: output arguments.
        unsafe {
            out_base(baseptr, w.base);
            out_win(win, w)
        }
    })
}

mpi_fn!(fn MPI_Win_allocate / PMPI_Win_allocate(size: MPI_Aint, disp_unit: c_int, _info: MPI_Info, comm: MPI_Comm, baseptr: *mut Void, win: *mut MPI_Win) -> c_int {
    allocate("MPI_Win_allocate", size, disp_unit as i64, comm, baseptr, win, false)
});
mpi_fn!(fn MPI_Win_allocate_c / PMPI_Win_allocate_c(size: MPI_Aint, disp_unit: MPI_Aint, _info: MPI_Info, comm: MPI_Comm, baseptr: *mut Void, win: *mut MPI_Win) -> c_int {
    allocate("MPI_Win_allocate_c", size, disp_unit as i64, comm, baseptr, win, false)
});
mpi_fn!(fn MPI_Win_allocate_shared / PMPI_Win_allocate_shared(size: MPI_Aint, disp_unit: c_int, _info: MPI_Info, comm: MPI_Comm, baseptr: *mut Void, win: *mut MPI_Win) -> c_int {
    allocate("MPI_Win_allocate_shared", size, disp_unit as i64, comm, baseptr, win, true)
});
mpi_fn!(fn MPI_Win_allocate_shared_c / PMPI_Win_allocate_shared_c(size: MPI_Aint, disp_unit: MPI_Aint, _info: MPI_Info, comm: MPI_Comm, baseptr: *mut Void, win: *mut MPI_Win) -> c_int {
    allocate("MPI_Win_allocate_shared_c", size, disp_unit as i64, comm, baseptr, win, true)
});

fn shared_query(name: &str, w: MPI_Win, rank: c_int) -> Result<(usize, usize, usize)> {
    let _ = name;
    mpi()?.win_shared_query(&*win(w)?, rank)
}

mpi_fn!(fn MPI_Win_shared_query / PMPI_Win_shared_query(w: MPI_Win, rank: c_int, size: *mut MPI_Aint, disp_unit: *mut c_int, baseptr: *mut Void) -> c_int {
    run_win("MPI_Win_shared_query", w, || {
        let (s, d, b) = shared_query("MPI_Win_shared_query", w, rank)?;
        // SAFETY: output arguments.
        unsafe {
            put(size, s as MPI_Aint);
            put(disp_unit, d as c_int);
            out_base(baseptr, b);
        }
        Ok(())
    })
});

mpi_fn!(fn MPI_Win_shared_query_c / PMPI_Win_shared_query_c(w: MPI_Win, rank: c_int, size: *mut MPI_Aint, disp_unit: *mut MPI_Aint, baseptr: *mut Void) -> c_int {
    run_win("MPI_Win_shared_query_c", w, || {
        let (s, d, b) = shared_query("MPI_Win_shared_query_c", w, rank)?;
        // SAFETY: output arguments.
        unsafe {
            put(size, s as MPI_Aint);
            put(disp_unit, d as MPI_Aint);
            out_base(baseptr, b);
        }
        Ok(())
    })
});

mpi_fn!(fn MPI_Win_create_dynamic / PMPI_Win_create_dynamic(_info: MPI_Info, comm: MPI_Comm, win: *mut MPI_Win) -> c_int {
    crate::errors::run("MPI_Win_create_dynamic", comm, || {
        let c = handles::comm(comm)?;
        let w = mpi()?.win_create_dynamic(&c)?;
        // SAFETY: output argument.
        unsafe { out_win(win, w) }
    })
});

mpi_fn!(fn MPI_Win_attach / PMPI_Win_attach(w: MPI_Win, base: *mut Void, size: MPI_Aint) -> c_int {
    run_win("MPI_Win_attach", w, || mpi()?.win_attach(&*win(w)?, base as usize, size as i64))
});

mpi_fn!(fn MPI_Win_detach / PMPI_Win_detach(w: MPI_Win, base: *const Void) -> c_int {
    run_win("MPI_Win_detach", w, || mpi()?.win_detach(&*win(w)?, base as usize))
});

mpi_fn!(fn MPI_Win_free / PMPI_Win_free(w: *mut MPI_Win) -> c_int {
    if w.is_null() {
        return fail("MPI_Win_free", MPI_COMM_WORLD, err(class::ARG, "the window pointer is NULL"));
    }
    // SAFETY: checked non-null in/out argument.
    let h = unsafe { *w };
    let rc = run_win("MPI_Win_free", h, || {
        let o = win_obj(h)?;
        mpi()?.win_free(&o.win)?;
        // Deleted last set first, as for communicators and datatypes.
        let attrs = o.attrs.lock().unwrap().take_last_set_first();
        for (k, v) in attrs {
            crate::attr::call_delete(h, k, v)?;
        }
        Ok(())
    });
    if rc == MPI_SUCCESS {
        WINS.remove(h);
        cache::forget_freed();
        // SAFETY: as above.
        unsafe { *w = MPI_WIN_NULL };
    }
    rc
});

mpi_fn!(fn MPI_Win_get_group / PMPI_Win_get_group(w: MPI_Win, group: *mut MPI_Group) -> c_int {
    run_win("MPI_Win_get_group", w, || {
        let g = win(w)?.group();
        if group.is_null() {
            return Err(err(class::ARG, "the output group pointer is NULL"));
        }
        // SAFETY: checked output argument.
        unsafe { *group = handles::GROUPS.insert(g) };
        Ok(())
    })
});

mpi_fn!(fn MPI_Win_set_name / PMPI_Win_set_name(w: MPI_Win, name: *const c_char) -> c_int {
    run_win("MPI_Win_set_name", w, || {
        let o = win(w)?;
        // SAFETY: NUL-terminated argument.
        let mut n = unsafe { cstr(name) };
        n.truncate(MPI_MAX_OBJECT_NAME - 1);
        *o.name.lock().unwrap() = n;
        Ok(())
    })
});

mpi_fn!(fn MPI_Win_get_name / PMPI_Win_get_name(w: MPI_Win, name: *mut c_char, len: *mut c_int) -> c_int {
    run_win("MPI_Win_get_name", w, || {
        let n = if w == MPI_WIN_NULL {
            "MPI_WIN_NULL".to_string()
        } else {
            win(w)?.name.lock().unwrap().clone()
        };
        // SAFETY: the output holds MPI_MAX_OBJECT_NAME bytes by the standard.
        unsafe { put_str(&n, name, MPI_MAX_OBJECT_NAME, len) };
        Ok(())
    })
});

mpi_fn!(fn MPI_Win_set_info / PMPI_Win_set_info(w: MPI_Win, info: MPI_Info) -> c_int {
    run_win("MPI_Win_set_info", w, || {
        let o = win(w)?;
        let i = if info == MPI_INFO_NULL { Default::default() } else { handles::info(info)?.lock().unwrap().clone() };
        *o.info.lock().unwrap() = i;
        Ok(())
    })
});

mpi_fn!(fn MPI_Win_get_info / PMPI_Win_get_info(w: MPI_Win, info: *mut MPI_Info) -> c_int {
    run_win("MPI_Win_get_info", w, || {
        let o = win(w)?;
        let i = o.info.lock().unwrap().clone();
        // SAFETY: output argument.
        unsafe { put(info, handles::INFOS.insert(Arc::new(Mutex::new(i)))) };
        Ok(())
    })
});

// ---- attributes --------------------------------------------------------------------

mpi_fn!(fn MPI_Win_create_keyval / PMPI_Win_create_keyval(copy: usize, delete: usize, keyval: *mut c_int, extra: usize) -> c_int {
    // SAFETY: same contract (one keyval space for all object kinds; windows are never copied).
    unsafe { crate::attr::PMPI_Comm_create_keyval(copy, delete, keyval, extra) }
});

mpi_fn!(fn MPI_Win_free_keyval / PMPI_Win_free_keyval(keyval: *mut c_int) -> c_int {
    // SAFETY: same contract.
    unsafe { crate::attr::PMPI_Comm_free_keyval(keyval) }
});

mpi_fn!(fn MPI_Win_set_attr / PMPI_Win_set_attr(w: MPI_Win, k: c_int, v: usize) -> c_int {
    run_win("MPI_Win_set_attr", w, || {
        let o = win_obj(w)?;
        if (MPI_WIN_BASE..=MPI_WIN_MODEL).contains(&k) {
            return Err(err(class::KEYVAL, "predefined window attributes cannot be set"));
        }
        crate::attr::keyval(k)?;
        let old = o.attrs.lock().unwrap().set(k, v);
        if let Some(old) = old {
            crate::attr::call_delete(w, k, old)?;
        }
        Ok(())
    })
});

mpi_fn!(fn MPI_Win_get_attr / PMPI_Win_get_attr(w: MPI_Win, k: c_int, v: *mut usize, flag: *mut c_int) -> c_int {
    run_win("MPI_Win_get_attr", w, || {
        let o = win_obj(w)?;
        let got = match k {
            // The base is the attribute value itself; the others point to it.
            MPI_WIN_BASE => Some(o.win.base),
            MPI_WIN_SIZE => Some(&o.size as *const MPI_Aint as usize),
            MPI_WIN_DISP_UNIT => Some(&o.disp_unit as *const c_int as usize),
            MPI_WIN_CREATE_FLAVOR => Some(&o.flavor as *const c_int as usize),
            MPI_WIN_MODEL => Some(&o.model as *const c_int as usize),
            _ => {
                crate::attr::keyval(k)?;
                o.attrs.lock().unwrap().get(k)
            }
        };
        // SAFETY: output arguments (`v` is really a `void **`).
        unsafe {
            put(flag, got.is_some() as c_int);
            if let Some(x) = got {
                put(v, x);
            }
        }
        Ok(())
    })
});

mpi_fn!(fn MPI_Win_delete_attr / PMPI_Win_delete_attr(w: MPI_Win, k: c_int) -> c_int {
    run_win("MPI_Win_delete_attr", w, || {
        let o = win_obj(w)?;
        crate::attr::keyval(k)?;
        let old = o.attrs.lock().unwrap().remove(k);
        match old {
            Some(old) => crate::attr::call_delete(w, k, old),
            None => Err(err(class::KEYVAL, format!("keyval {k} has no attribute on this window"))),
        }
    })
});

// ---- error handlers ----------------------------------------------------------------

mpi_fn!(fn MPI_Win_create_errhandler / PMPI_Win_create_errhandler(f: Option<unsafe extern "C" fn(*mut Handle, *mut c_int, ...)>, eh: *mut MPI_Errhandler) -> c_int {
    crate::errors::run("MPI_Win_create_errhandler", MPI_COMM_WORLD, || {
        let f = f.ok_or_else(|| err(class::ARG, "the error handler function is NULL"))?;
        // SAFETY: output argument.
        unsafe { put(eh, handles::ERRHS.insert(Errh::User(f))) };
        Ok(())
    })
});

mpi_fn!(fn MPI_Win_set_errhandler / PMPI_Win_set_errhandler(w: MPI_Win, eh: MPI_Errhandler) -> c_int {
    run_win("MPI_Win_set_errhandler", w, || {
        let o = win(w)?;
        handles::errh(eh)?;
        o.errhandler.store(eh, Ordering::Relaxed);
        Ok(())
    })
});

mpi_fn!(fn MPI_Win_get_errhandler / PMPI_Win_get_errhandler(w: MPI_Win, eh: *mut MPI_Errhandler) -> c_int {
    run_win("MPI_Win_get_errhandler", w, || {
        let o = win(w)?;
        let h = match o.errhandler.load(Ordering::Relaxed) {
            0 => MPI_ERRORS_ARE_FATAL,
            h => h,
        };
        // SAFETY: output argument.
        unsafe { put(eh, h) };
        Ok(())
    })
});

mpi_fn!(fn MPI_Win_call_errhandler / PMPI_Win_call_errhandler(w: MPI_Win, code: c_int) -> c_int {
    if let Err(e) = win(w) {
        return fail("MPI_Win_call_errhandler", MPI_COMM_WORLD, e);
    }
    let _ = fail_win("MPI_Win_call_errhandler", w, MpiError::new(code, "called by the program"));
    MPI_SUCCESS
});

// ---- synchronization ---------------------------------------------------------------

mpi_fn!(fn MPI_Win_fence / PMPI_Win_fence(assert: c_int, w: MPI_Win) -> c_int {
    run_win("MPI_Win_fence", w, || mpi()?.win_fence(&win(w)?, assert))
});

mpi_fn!(fn MPI_Win_lock / PMPI_Win_lock(lock_type: c_int, rank: c_int, assert: c_int, w: MPI_Win) -> c_int {
    run_win("MPI_Win_lock", w, || mpi()?.win_lock(&win(w)?, lock_type, rank, assert))
});

mpi_fn!(fn MPI_Win_unlock / PMPI_Win_unlock(rank: c_int, w: MPI_Win) -> c_int {
    run_win("MPI_Win_unlock", w, || mpi()?.win_unlock(&win(w)?, rank))
});

mpi_fn!(fn MPI_Win_lock_all / PMPI_Win_lock_all(assert: c_int, w: MPI_Win) -> c_int {
    run_win("MPI_Win_lock_all", w, || mpi()?.win_lock_all(&win(w)?, assert))
});

mpi_fn!(fn MPI_Win_unlock_all / PMPI_Win_unlock_all(w: MPI_Win) -> c_int {
    run_win("MPI_Win_unlock_all", w, || mpi()?.win_unlock_all(&win(w)?))
});

mpi_fn!(fn MPI_Win_flush / PMPI_Win_flush(rank: c_int, w: MPI_Win) -> c_int {
    if fast::flush(rank, w) {
        return MPI_SUCCESS;
    }
    run_win("MPI_Win_flush", w, || {
        let m = mpi()?;
        with_win(w, |o| m.win_flush(&o.win, Some(rank)))
    })
});

mpi_fn!(fn MPI_Win_flush_local / PMPI_Win_flush_local(rank: c_int, w: MPI_Win) -> c_int {
    if fast::flush(rank, w) {
        return MPI_SUCCESS;
    }
    run_win("MPI_Win_flush_local", w, || {
        let m = mpi()?;
        with_win(w, |o| m.win_flush(&o.win, Some(rank)))
    })
});

mpi_fn!(fn MPI_Win_flush_all / PMPI_Win_flush_all(w: MPI_Win) -> c_int {
    if fast::flush_all(w) {
        return MPI_SUCCESS;
    }
    run_win("MPI_Win_flush_all", w, || {
        let m = mpi()?;
        with_win(w, |o| m.win_flush(&o.win, None))
    })
});

mpi_fn!(fn MPI_Win_flush_local_all / PMPI_Win_flush_local_all(w: MPI_Win) -> c_int {
    if fast::flush_all(w) {
        return MPI_SUCCESS;
    }
    run_win("MPI_Win_flush_local_all", w, || {
        let m = mpi()?;
        with_win(w, |o| m.win_flush(&o.win, None))
    })
});

mpi_fn!(fn MPI_Win_sync / PMPI_Win_sync(w: MPI_Win) -> c_int {
    run_win("MPI_Win_sync", w, || mpi()?.win_sync(&win(w)?))
});

mpi_fn!(fn MPI_Win_post / PMPI_Win_post(g: MPI_Group, assert: c_int, w: MPI_Win) -> c_int {
    run_win("MPI_Win_post", w, || mpi()?.win_post(&win(w)?, &*handles::group(g)?, assert))
});

mpi_fn!(fn MPI_Win_start / PMPI_Win_start(g: MPI_Group, assert: c_int, w: MPI_Win) -> c_int {
    run_win("MPI_Win_start", w, || mpi()?.win_start(&win(w)?, &*handles::group(g)?, assert))
});

mpi_fn!(fn MPI_Win_complete / PMPI_Win_complete(w: MPI_Win) -> c_int {
    run_win("MPI_Win_complete", w, || mpi()?.win_complete(&win(w)?))
});

mpi_fn!(fn MPI_Win_wait / PMPI_Win_wait(w: MPI_Win) -> c_int {
    run_win("MPI_Win_wait", w, || mpi()?.win_wait(&win(w)?, true).map(|_| ()))
});

mpi_fn!(fn MPI_Win_test / PMPI_Win_test(w: MPI_Win, flag: *mut c_int) -> c_int {
    run_win("MPI_Win_test", w, || {
        let done = mpi()?.win_wait(&win(w)?, false)?;
        // SAFETY: output argument.
        unsafe { put(flag, done as c_int) };
        Ok(())
    })
});
