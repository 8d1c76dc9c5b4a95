//! Hosts of the virtual machine. This machine is the first host (daemon id
//! 0x40000); `pvm_addhosts` adds *emulated* hosts on it (0x80000, 0xc0000,
//! …, as PVM numbers hosts): tasks spawned there get their own gridwire
//! host identity (`GW_HOST_ID`), so shared memory does not reach them and
//! the runtime selects a network method to and from them, as between real
//! hosts. Hosts of the machines file `$GWPVM_MACHINES` are real remote
//! hosts, started over ssh with a host agent (see [`crate::remote`]).

use crate::capi::{cstr, guard, with_task, HostInfo};
use crate::consts::*;
use crate::coord::{hex, unhex};
use crate::spawn;
use crate::task::Task;
use std::ffi::{c_char, c_int};
use std::sync::Mutex;

/// The hosts, as (daemon id, name), this machine first.
pub fn hosts(t: &Task) -> Result<Vec<(c_int, String)>, c_int> {
    let rows = t.coord.request("HOSTS")?;
    Ok(rows
        .split(';')
        .filter_map(|r| {
            let (d, n) = r.split_once(',')?;
            Some((d.parse().ok()?, String::from_utf8(unhex(n)?).ok()?))
        })
        .collect())
}

/// The daemon id of host `name`, if it is in the machine.
pub fn host_named(t: &Task, name: &str) -> Result<c_int, c_int> {
    if name.is_empty() || name == "." || name == "localhost" {
        return Ok(HOST_TID);
    }
    hosts(t)?
        .into_iter()
        .find(|(_, n)| n == name)
        .map(|(d, _)| d)
        .ok_or(PVM_NO_HOST)
}

/// `pvm_notify(PvmHostDelete / PvmHostAdd, ...)`.
///
/// # Safety
/// `tids`, for a host-delete request, must hold `cnt` host daemon ids.
pub unsafe fn notify_host(
    t: &Task,
    kind: c_int,
    cancel: bool,
    tag: c_int,
    cnt: c_int,
    tids: *mut c_int,
) -> c_int {
    let mctx = crate::task::bufs().as_ref().map_or(0, |b| b.ctx);
    let mut n = t.host_notifies.lock().unwrap_or_else(|e| e.into_inner());
    if cancel {
        n.retain(|r| !(r.0 == kind && r.2 == tag));
        return PVM_OK;
    }
    if kind == PVM_HOST_ADD {
        // cnt: how many additions to report (-1: every one).
        n.push((kind, -1, tag, mctx, if cnt < 0 { -1 } else { cnt }));
        return PVM_OK;
    }
    if cnt < 0 || (cnt > 0 && tids.is_null()) {
        return PVM_BAD_PARAM;
    }
    // SAFETY: PVM's contract: `tids` holds cnt host daemon ids.
    let list = unsafe { std::slice::from_raw_parts(tids, cnt as usize) };
    for &d in list {
        n.push((kind, d, tag, mctx, 1));
    }
    PVM_OK
}

/// Applies `req` (ADDHOST/DELHOST) to each name; fills `infos`; returns the
/// number that succeeded.
unsafe fn each_host(names: *mut *mut c_char, count: c_int, infos: *mut c_int, req: &str) -> c_int {
    if count < 0 || (count > 0 && names.is_null()) {
        return PVM_BAD_PARAM;
    }
    with_task(|t| {
        let mut ok = 0;
        for i in 0..count as usize {
            // SAFETY: PVM's contract: `count` host names.
            let rc = match unsafe { cstr(*names.add(i)) } {
                Some(n) => match t.coord.request(&format!("{req} {}", hex(n.as_bytes()))) {
                    Ok(d) => d.parse().unwrap_or(PVM_OK),
                    Err(e) => e,
                },
                None => PVM_BAD_PARAM,
            };
            if rc >= 0 {
                ok += 1;
            }
            if !infos.is_null() {
                // SAFETY: PVM's contract: room for `count` codes.
                unsafe { *infos.add(i) = rc };
            }
        }
        ok
    })
}

/// Adds hosts (real ones from `$GWPVM_MACHINES`, else emulated);
/// `infos[i]` gets the host's daemon id or an error.
#[no_mangle]
pub unsafe extern "C" fn pvm_addhosts(
    names: *mut *mut c_char,
    count: c_int,
    infos: *mut c_int,
) -> c_int {
    // SAFETY: forwarded under the same contract.
    guard(|| unsafe { each_host(names, count, infos, "ADDHOST") })
}

/// Deletes hosts; their tasks are terminated.
#[no_mangle]
pub unsafe extern "C" fn pvm_delhosts(
    names: *mut *mut c_char,
    count: c_int,
    infos: *mut c_int,
) -> c_int {
    // SAFETY: forwarded under the same contract.
    guard(|| unsafe { each_host(names, count, infos, "DELHOST") })
}

#[no_mangle]
pub unsafe extern "C" fn pvm_tidtohost(tid: c_int) -> c_int {
    guard(|| {
        with_task(|t| match t.coord.request(&format!("HOSTOF {tid}")) {
            Ok(d) => d.parse().unwrap_or(PVM_SYS_ERR),
            Err(e) => e,
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn pvm_mstat(host: *mut c_char) -> c_int {
    guard(|| {
        // SAFETY: PVM's contract: a host name.
        match unsafe { cstr(host) } {
            Some(h) if h == spawn::hostname() => PVM_OK,
            Some(h) => with_task(|t| host_named(t, h).map_or_else(|e| e, |_| PVM_OK)),
            None => PVM_BAD_PARAM,
        }
    })
}

struct Kept {
    hosts: Vec<HostInfo>,
    strings: Vec<std::ffi::CString>,
}
// SAFETY: the pointers in `hosts` point into `strings`, which live beside
// them; they are only handed to C.
unsafe impl Send for Kept {}
static KEPT: Mutex<Kept> = Mutex::new(Kept {
    hosts: Vec::new(),
    strings: Vec::new(),
});

#[no_mangle]
pub unsafe extern "C" fn pvm_config(
    nhost: *mut c_int,
    narch: *mut c_int,
    hostp: *mut *mut HostInfo,
) -> c_int {
    guard(|| {
        with_task(|t| {
            let list = match hosts(t) {
                Ok(l) => l,
                Err(e) => return e,
            };
            let mut k = KEPT.lock().unwrap_or_else(|e| e.into_inner());
            let k = &mut *k;
            k.strings = vec![std::ffi::CString::new(spawn::arch()).unwrap_or_default()];
            for (_, n) in &list {
                k.strings
                    .push(std::ffi::CString::new(n.as_str()).unwrap_or_default());
            }
            let arch = k.strings[0].as_ptr() as *mut c_char;
            k.hosts = list
                .iter()
                .enumerate()
                .map(|(i, (d, _))| HostInfo {
                    hi_tid: *d,
                    hi_name: k.strings[i + 1].as_ptr() as *mut c_char,
                    hi_arch: arch,
                    hi_speed: 1000,
                    hi_dsig: 0x0040_8841,
                })
                .collect();
            // SAFETY: out-pointers are null or writable (PVM's contract).
            unsafe {
                if !nhost.is_null() {
                    *nhost = k.hosts.len() as c_int;
                }
                if !narch.is_null() {
                    *narch = 1;
                }
                if !hostp.is_null() {
                    *hostp = k.hosts.as_mut_ptr();
                }
            }
            PVM_OK
        })
    })
}
