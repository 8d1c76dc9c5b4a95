//! Attributes: keyvals with copy/delete callbacks, on communicators and datatypes;
//! the predefined attributes of every communicator.

use crate::abi::*;
use crate::errors::run;
use crate::handles::{self, comm, mpi};
use crate::put;
use gridwire_mpi::{class, err, Comm, Result};
use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::sync::Mutex;

type CopyFn =
    unsafe extern "C" fn(Handle, c_int, *mut c_void, *mut c_void, *mut c_void, *mut c_int) -> c_int;
type DeleteFn = unsafe extern "C" fn(Handle, c_int, *mut c_void, *mut c_void) -> c_int;

#[derive(Clone, Copy)]
pub(crate) struct Keyval {
    /// 0 = MPI_NULL_COPY_FN, 1 = MPI_DUP_FN, else a function.
    copy: usize,
    /// 0 = MPI_NULL_DELETE_FN, else a function.
    delete: usize,
    extra: usize,
}

static KEYVALS: Mutex<Option<HashMap<c_int, Keyval>>> = Mutex::new(None);
static NEXT_KEYVAL: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(1000);

pub(crate) fn keyval(k: c_int) -> Result<Keyval> {
    KEYVALS
        .lock()
        .unwrap()
        .as_ref()
        .and_then(|m| m.get(&k).copied())
        .ok_or_else(|| {
            err(
                class::KEYVAL,
                format!("keyval {k} is invalid (freed or never created)"),
            )
        })
}

fn create_keyval(copy: usize, delete: usize, extra: usize) -> c_int {
    let k = NEXT_KEYVAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    KEYVALS
        .lock()
        .unwrap()
        .get_or_insert_with(HashMap::new)
        .insert(
            k,
            Keyval {
                copy,
                delete,
                extra,
            },
        );
    k
}

pub(crate) fn call_delete(h: Handle, k: c_int, v: usize) -> Result<()> {
    let kv = keyval(k)?;
    if kv.delete > 1 {
        // SAFETY: a delete function the program registered; called with the standard's arguments.
        let f: DeleteFn = unsafe { std::mem::transmute::<usize, DeleteFn>(kv.delete) };
        // SAFETY: as above.
        let rc = unsafe { f(h, k, v as *mut c_void, kv.extra as *mut c_void) };
        if rc != MPI_SUCCESS {
            return Err(err(rc, format!("the delete callback of keyval {k} failed")));
        }
    }
    Ok(())
}

/// Runs the copy callbacks of `old`'s attributes for a duplicate. If one
/// fails, the duplicate is undone: the attributes already copied to it are
/// deleted (their delete callbacks run, on a handle the duplicate has only
/// for them) and the callback's error is returned, so the dup fails with it
/// and gives no communicator (MPI-4.1 §7.7.2: "the call to MPI_COMM_DUP fails").
pub fn copy_comm_attrs(h: Handle, old: &Comm, new: &std::sync::Arc<Comm>) -> Result<()> {
    let copied = copy_attrs(h, &old.attrs, &new.attrs);
    if copied.is_err() && !new.attrs.lock().unwrap().in_set_order().is_empty() {
        let nh = handles::new_comm(new.clone());
        let _ = delete_comm_attrs(nh, new);
        handles::COMMS.remove(nh);
    }
    copied
}

/// Runs the copy callbacks of a datatype's attributes for `MPI_Type_dup`.
pub fn copy_type_attrs(
    h: Handle,
    old: &gridwire_mpi::Datatype,
    new: &gridwire_mpi::Datatype,
) -> Result<()> {
    copy_attrs(h, &old.attrs, &new.attrs)
}

fn copy_attrs(
    h: Handle,
    old: &Mutex<gridwire_mpi::attr::AttrSet>,
    new: &Mutex<gridwire_mpi::attr::AttrSet>,
) -> Result<()> {
    let attrs = old.lock().unwrap().in_set_order();
    for (k, v) in attrs {
        let kv = keyval(k)?;
        let out = match kv.copy {
            0 => None,
            1 => Some(v),
            f => {
                // SAFETY: a copy function the program registered; standard arguments.
                let f: CopyFn = unsafe { std::mem::transmute::<usize, CopyFn>(f) };
                let mut nv: usize = 0;
                let mut flag: c_int = 0;
                // SAFETY: as above; `nv`/`flag` are valid outputs.
                let rc = unsafe {
                    f(
                        h,
                        k,
                        kv.extra as *mut c_void,
                        v as *mut c_void,
                        &mut nv as *mut usize as *mut c_void,
                        &mut flag,
                    )
                };
                if rc != MPI_SUCCESS {
                    return Err(err(rc, format!("the copy callback of keyval {k} failed")));
                }
                (flag != 0).then_some(nv)
            }
        };
        if let Some(v) = out {
            new.lock().unwrap().set(k, v);
        }
    }
    Ok(())
}

/// Runs the delete callbacks of a communicator being freed.
pub fn delete_comm_attrs(h: Handle, c: &Comm) -> Result<()> {
    let attrs = c.attrs.lock().unwrap().take_last_set_first();
    for (k, v) in attrs {
        call_delete(h, k, v)?;
    }
    Ok(())
}

/// `MPI_Finalize` first deletes the attributes of `MPI_COMM_SELF` (a standard hook for libraries).
pub fn delete_all_on_self() {
    if let Ok(m) = mpi() {
        let _ = delete_comm_attrs(MPI_COMM_SELF, &m.self_comm);
    }
}

static TAG_UB_V: c_int = gridwire_mpi::TAG_UB;
static HOST_V: c_int = gridwire_mpi::PROC_NULL;
static WTIME_GLOBAL_V: c_int = 0;
static mut APPNUM_V: c_int = 0;
static mut IO_V: c_int = 0;
static mut UNIVERSE_V: c_int = 0;
static mut LASTCODE_V: c_int = 0;

/// The predefined attributes: a pointer to an int, as the standard says.
fn predefined_attr(k: c_int) -> Option<usize> {
    let m = mpi().ok()?;
    // SAFETY: these statics are written only here, before their address is
    // handed out, with values that are the same whenever they are written.
    unsafe {
        IO_V = m.world.rank as c_int;
        // The job's capacity: its first world plus the room gwrun reserved
        // for spawned processes (GW_UNIVERSE_SIZE, docs/mpi.md).
        UNIVERSE_V = m.ctx().capacity() as c_int;
        // Which program of a spawn_multiple (gwrun says), else 0.
        APPNUM_V = std::env::var("GW_APPNUM")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        LASTCODE_V = crate::errors::last_used_code();
    }
    Some(match k {
        MPI_TAG_UB => &TAG_UB_V as *const c_int as usize,
        MPI_HOST => &HOST_V as *const c_int as usize,
        MPI_IO => std::ptr::addr_of!(IO_V) as usize,
        MPI_WTIME_IS_GLOBAL => &WTIME_GLOBAL_V as *const c_int as usize,
        MPI_UNIVERSE_SIZE => std::ptr::addr_of!(UNIVERSE_V) as usize,
        MPI_APPNUM => std::ptr::addr_of!(APPNUM_V) as usize,
        MPI_LASTUSEDCODE => std::ptr::addr_of!(LASTCODE_V) as usize,
        _ => return None,
    })
}

mpi_fn!(fn MPI_Comm_create_keyval / PMPI_Comm_create_keyval(copy: usize, delete: usize, keyval: *mut c_int, extra: usize) -> c_int {
    run("MPI_Comm_create_keyval", MPI_COMM_WORLD, || {
        // SAFETY: output argument.
        unsafe { put(keyval, create_keyval(copy, delete, extra)) };
        Ok(())
    })
});

mpi_fn!(fn MPI_Keyval_create / PMPI_Keyval_create(copy: usize, delete: usize, keyval: *mut c_int, extra: usize) -> c_int {
    // SAFETY: same contract.
    unsafe { PMPI_Comm_create_keyval(copy, delete, keyval, extra) }
});

mpi_fn!(fn MPI_Type_create_keyval / PMPI_Type_create_keyval(copy: usize, delete: usize, keyval: *mut c_int, extra: usize) -> c_int {
    // SAFETY: same contract (one keyval space for all object kinds).
    unsafe { PMPI_Comm_create_keyval(copy, delete, keyval, extra) }
});

mpi_fn!(fn MPI_Comm_free_keyval / PMPI_Comm_free_keyval(kv: *mut c_int) -> c_int {
    run("MPI_Comm_free_keyval", MPI_COMM_WORLD, || {
        if kv.is_null() {
            return Err(err(class::ARG, "keyval pointer is NULL"));
        }
        // SAFETY: checked in/out argument.
        let k = unsafe { *kv };
        if (MPI_TAG_UB..=MPI_UNIVERSE_SIZE).contains(&k) {
            return Err(err(class::KEYVAL, "predefined keyvals cannot be freed"));
        }
        keyval(k)?;
        // Attributes already set keep working until deleted (the keyval is freed lazily).
        // SAFETY: as above.
        unsafe { *kv = MPI_KEYVAL_INVALID };
        Ok(())
    })
});

mpi_fn!(fn MPI_Keyval_free / PMPI_Keyval_free(keyval: *mut c_int) -> c_int {
    // SAFETY: same contract.
    unsafe { PMPI_Comm_free_keyval(keyval) }
});
mpi_fn!(fn MPI_Type_free_keyval / PMPI_Type_free_keyval(keyval: *mut c_int) -> c_int {
    // SAFETY: same contract.
    unsafe { PMPI_Comm_free_keyval(keyval) }
});

mpi_fn!(fn MPI_Comm_set_attr / PMPI_Comm_set_attr(c: MPI_Comm, k: c_int, v: usize) -> c_int {
    run("MPI_Comm_set_attr", c, || {
        let cm = comm(c)?;
        keyval(k)?;
        let old = cm.attrs.lock().unwrap().set(k, v);
        if let Some(o) = old {
            call_delete(c, k, o)?;
        }
        Ok(())
    })
});

mpi_fn!(fn MPI_Attr_put / PMPI_Attr_put(c: MPI_Comm, k: c_int, v: usize) -> c_int {
    // SAFETY: same contract.
    unsafe { PMPI_Comm_set_attr(c, k, v) }
});

mpi_fn!(fn MPI_Comm_get_attr / PMPI_Comm_get_attr(c: MPI_Comm, k: c_int, v: *mut usize, flag: *mut c_int) -> c_int {
    run("MPI_Comm_get_attr", c, || {
        let cm = comm(c)?;
        let got = match predefined_attr(k) {
            Some(p) => Some(p),
            None => match crate::topology_attrs::topology_attr(k, &cm) {
                Some(v) => Some(v?),
                None => {
                    keyval(k)?;
                    cm.attrs.lock().unwrap().get(k)
                }
            },
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

mpi_fn!(fn MPI_Attr_get / PMPI_Attr_get(c: MPI_Comm, k: c_int, v: *mut usize, flag: *mut c_int) -> c_int {
    // SAFETY: same contract.
    unsafe { PMPI_Comm_get_attr(c, k, v, flag) }
});

mpi_fn!(fn MPI_Comm_delete_attr / PMPI_Comm_delete_attr(c: MPI_Comm, k: c_int) -> c_int {
    run("MPI_Comm_delete_attr", c, || {
        let cm = comm(c)?;
        keyval(k)?;
        let old = cm.attrs.lock().unwrap().remove(k);
        match old {
            Some(o) => call_delete(c, k, o),
            None => Err(err(class::KEYVAL, format!("keyval {k} has no attribute on this communicator"))),
        }
    })
});

mpi_fn!(fn MPI_Attr_delete / PMPI_Attr_delete(c: MPI_Comm, k: c_int) -> c_int {
    // SAFETY: same contract.
    unsafe { PMPI_Comm_delete_attr(c, k) }
});

mpi_fn!(fn MPI_Type_set_attr / PMPI_Type_set_attr(t: MPI_Datatype, k: c_int, v: usize) -> c_int {
    run("MPI_Type_set_attr", MPI_COMM_WORLD, || {
        let dt = handles::dtype(t)?;
        keyval(k)?;
        let old = dt.attrs.lock().unwrap().set(k, v);
        if let Some(o) = old {
            call_delete(t, k, o)?;
        }
        Ok(())
    })
});

mpi_fn!(fn MPI_Type_get_attr / PMPI_Type_get_attr(t: MPI_Datatype, k: c_int, v: *mut usize, flag: *mut c_int) -> c_int {
    run("MPI_Type_get_attr", MPI_COMM_WORLD, || {
        let dt = handles::dtype(t)?;
        keyval(k)?;
        let got = dt.attrs.lock().unwrap().get(k);
        // SAFETY: output arguments.
        unsafe {
            put(flag, got.is_some() as c_int);
            if let Some(x) = got {
                put(v, x);
            }
        }
        Ok(())
    })
});

mpi_fn!(fn MPI_Type_delete_attr / PMPI_Type_delete_attr(t: MPI_Datatype, k: c_int) -> c_int {
    run("MPI_Type_delete_attr", MPI_COMM_WORLD, || {
        let dt = handles::dtype(t)?;
        let old = dt.attrs.lock().unwrap().remove(k);
        match old {
            Some(o) => call_delete(t, k, o),
            None => Err(err(class::KEYVAL, format!("keyval {k} has no attribute on this datatype"))),
        }
    })
});

/// Runs delete callbacks of a datatype being freed.
pub fn delete_type_attrs(h: Handle, t: &gridwire_mpi::Datatype) -> Result<()> {
    let attrs = t.attrs.lock().unwrap().take_last_set_first();
    for (k, v) in attrs {
        call_delete(h, k, v)?;
    }
    Ok(())
}
