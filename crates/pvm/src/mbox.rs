//! The message mailbox (`pvm_putinfo`, `pvm_recvinfo`, `pvm_delinfo`,
//! `pvm_getmboxinfo`): named classes of stored messages, kept by the
//! coordinator. Entries go when their owner does, unless put
//! `PvmMboxPersistent`.

use crate::capi::guard;
use crate::consts::*;
use crate::coord::{hex, unhex};
use crate::pack::Buffer;
use crate::task::{bufs, flatten, task};
use std::ffi::{c_char, c_int, CStr};
use std::sync::Mutex;

fn class_name(p: *const c_char) -> Result<String, c_int> {
    if p.is_null() {
        return Err(PVM_BAD_PARAM);
    }
    // SAFETY: PVM's contract: a NUL-terminated class name.
    Ok(hex(unsafe { CStr::from_ptr(p) }.to_bytes()))
}

/// This task and the class name every mailbox call starts with.
fn task_and_class(name: *const c_char) -> Result<(&'static crate::task::Task, String), c_int> {
    Ok((task()?, class_name(name)?))
}

/// Stores the message in buffer `bufid` under `name`; returns its index.
#[no_mangle]
pub unsafe extern "C" fn pvm_putinfo(name: *mut c_char, bufid: c_int, flags: c_int) -> c_int {
    guard(|| {
        let (t, name) = match task_and_class(name) {
            Ok(x) => x,
            Err(e) => return e,
        };
        let data = match bufs().as_ref().expect("init").map.get(&bufid) {
            Some(b) => hex(&flatten(b)),
            None => return PVM_NO_SUCH_BUF,
        };
        match t.coord.request(&format!("PUTINFO {name} {flags} {data}")) {
            Ok(i) => i.parse().unwrap_or(PVM_SYS_ERR),
            Err(e) => e,
        }
    })
}

/// Reads entry `index` of `name` into a new buffer (whose id it returns).
#[no_mangle]
pub unsafe extern "C" fn pvm_recvinfo(name: *mut c_char, index: c_int, flags: c_int) -> c_int {
    guard(|| {
        let (t, name) = match task_and_class(name) {
            Ok(x) => x,
            Err(e) => return e,
        };
        let reply = match t.coord.request(&format!("RECVINFO {name} {index} {flags}")) {
            Ok(r) => r,
            Err(e) => return e,
        };
        let mut w = reply.split(' ');
        let owner: c_int = w.next().and_then(|o| o.parse().ok()).unwrap_or(0);
        let Some(data) = unhex(w.next().unwrap_or("")) else {
            return PVM_BAD_MSG;
        };
        let b = Buffer::received(data, owner, 0, 0, PVM_DATA_DEFAULT);
        bufs().as_mut().expect("init").add(b)
    })
}

#[no_mangle]
pub unsafe extern "C" fn pvm_delinfo(name: *mut c_char, index: c_int, _flags: c_int) -> c_int {
    guard(|| {
        let t = match task() {
            Ok(t) => t,
            Err(e) => return e,
        };
        match class_name(name) {
            Ok(n) => t
                .coord
                .request(&format!("DELINFO {n} {index}"))
                .map_or_else(|e| e, |_| PVM_OK),
            Err(e) => e,
        }
    })
}

/// `struct pvmmboxinfo`.
#[repr(C)]
pub struct MboxInfo {
    mi_name: *mut c_char,
    mi_nentries: c_int,
    mi_indices: *mut c_int,
    mi_owners: *mut c_int,
    mi_flags: *mut c_int,
}

/// What the last `pvm_getmboxinfo` handed out (kept until the next call).
struct Kept {
    infos: Vec<MboxInfo>,
    names: Vec<std::ffi::CString>,
    ints: Vec<Vec<c_int>>,
}
// SAFETY: the pointers in `infos` point into `names` and `ints`, which live
// beside them; they are only handed to C.
unsafe impl Send for Kept {}
static KEPT: Mutex<Kept> = Mutex::new(Kept {
    infos: Vec::new(),
    names: Vec::new(),
    ints: Vec::new(),
});

#[no_mangle]
pub unsafe extern "C" fn pvm_getmboxinfo(
    pattern: *mut c_char,
    nclasses: *mut c_int,
    classes: *mut *mut MboxInfo,
) -> c_int {
    guard(|| {
        let t = match task() {
            Ok(t) => t,
            Err(e) => return e,
        };
        let pat = class_name(pattern).unwrap_or_default();
        let rows = match t.coord.request(&format!("MBOXINFO {pat}")) {
            Ok(r) => r,
            Err(e) => return e,
        };
        let mut k = KEPT.lock().unwrap_or_else(|e| e.into_inner());
        let k = &mut *k;
        k.infos.clear();
        k.names.clear();
        k.ints.clear();
        for row in rows.split(';').filter(|r| !r.is_empty()) {
            let Some((name, entries)) = row.split_once(':') else {
                continue;
            };
            let name = std::ffi::CString::new(unhex(name).unwrap_or_default()).unwrap_or_default();
            let (mut idx, mut own, mut fl) = (Vec::new(), Vec::new(), Vec::new());
            for e in entries.split(',').filter(|e| !e.is_empty()) {
                let f: Vec<c_int> = e.split('/').filter_map(|x| x.parse().ok()).collect();
                if let [i, o, g] = f[..] {
                    idx.push(i);
                    own.push(o);
                    fl.push(g);
                }
            }
            let n = idx.len() as c_int;
            k.names.push(name);
            for v in [idx, own, fl] {
                k.ints.push(v);
            }
            let m = k.ints.len();
            k.infos.push(MboxInfo {
                mi_name: k.names.last().expect("pushed").as_ptr() as *mut c_char,
                mi_nentries: n,
                mi_indices: k.ints[m - 3].as_mut_ptr(),
                mi_owners: k.ints[m - 2].as_mut_ptr(),
                mi_flags: k.ints[m - 1].as_mut_ptr(),
            });
        }
        // SAFETY: out-pointers are null or writable (PVM's contract).
        unsafe {
            if !nclasses.is_null() {
                *nclasses = k.infos.len() as c_int;
            }
            if !classes.is_null() {
                *classes = k.infos.as_mut_ptr();
            }
        }
        PVM_OK
    })
}

/// A one-int message body, as `pvm_insert` stores it.
fn int_body(v: c_int) -> Vec<u8> {
    let mut b = Buffer::new(PVM_DATA_DEFAULT);
    // SAFETY: packs one live c_int.
    unsafe {
        b.pack(
            crate::pack::Kind::Int,
            &v as *const c_int as *const u8,
            1,
            1,
        )
    };
    flatten(&b)
}

/// PVM 3.3's name service (`pvm_insert`, `pvm_lookup`, `pvm_delete`),
/// which PVM 3.4 keeps over its mailbox: integers under (class, index).
///
/// # Safety
/// `name` is null or a NUL-terminated string (PVM's contract).
#[no_mangle]
pub unsafe extern "C" fn pvm_insert(name: *mut c_char, index: c_int, data: c_int) -> c_int {
    guard(|| {
        let (t, name) = match task_and_class(name) {
            Ok(x) => x,
            Err(e) => return e,
        };
        // -1: the first free index; otherwise exactly this one.
        let at = match index {
            -1 => String::new(),
            i if i >= 0 => format!(" at={i}"),
            _ => return PVM_BAD_PARAM,
        };
        let req = format!(
            "PUTINFO {name} {} {}{at}",
            MBOX_MULTI_INSTANCE,
            hex(&int_body(data))
        );
        match t.coord.request(&req) {
            Ok(i) => i.parse().unwrap_or(PVM_SYS_ERR),
            Err(e) => e,
        }
    })
}

const MBOX_MULTI_INSTANCE: c_int = 2;
const MBOX_FIRST_AVAIL: c_int = 8;

/// Finds the integer at `index` of class `name` (-1: the first there);
/// returns its index.
///
/// # Safety
/// `name` is null or a NUL-terminated string; `data` null or writable.
#[no_mangle]
pub unsafe extern "C" fn pvm_lookup(name: *mut c_char, index: c_int, data: *mut c_int) -> c_int {
    guard(|| {
        let (t, name) = match task_and_class(name) {
            Ok(x) => x,
            Err(e) => return e,
        };
        let (from, flags) = match index {
            -1 => (0, MBOX_FIRST_AVAIL),
            i if i >= 0 => (i, 0),
            _ => return PVM_BAD_PARAM,
        };
        let reply = match t.coord.request(&format!("RECVINFO {name} {from} {flags}")) {
            Ok(r) => r,
            Err(e) => return e,
        };
        let mut w = reply.split(' ');
        let _owner = w.next();
        let body = w.next().and_then(unhex);
        let at: Option<c_int> = w.next().and_then(|i| i.parse().ok());
        let (Some(body), Some(at)) = (body, at) else {
            return PVM_BAD_MSG;
        };
        let mut b = Buffer::received(body, 0, 0, 0, PVM_DATA_DEFAULT);
        let mut v: c_int = 0;
        // SAFETY: room for one c_int.
        let rc = unsafe {
            b.unpack(
                crate::pack::Kind::Int,
                &mut v as *mut c_int as *mut u8,
                1,
                1,
            )
        };
        if rc < 0 {
            return rc;
        }
        if !data.is_null() {
            // SAFETY: checked not null; writable by the caller's contract.
            unsafe { *data = v };
        }
        at
    })
}

/// Deletes the entry at `index` of class `name`; returns the index.
///
/// # Safety
/// `name` is null or a NUL-terminated string (PVM's contract).
#[no_mangle]
pub unsafe extern "C" fn pvm_delete(name: *mut c_char, index: c_int) -> c_int {
    guard(|| {
        if index < 0 {
            return PVM_BAD_PARAM;
        }
        // SAFETY: our caller's contract.
        match unsafe { pvm_delinfo(name, index, 0) } {
            PVM_OK => index,
            e => e,
        }
    })
}
