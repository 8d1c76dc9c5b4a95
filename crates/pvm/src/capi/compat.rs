//! The rest of PVM 3.4's task-side interface that programs call:
//! `pvm_export`/`pvm_unexport` (the `PVM_EXPORT` list of environment
//! variables spawned tasks get), `pvm_getfds`, `pvm_hostsync` and
//! `pvm_start_pvmd`.

use super::{cstr, guard};
use crate::consts::*;
use std::ffi::{c_char, c_int};

/// `PVM_EXPORT`'s names (colon-separated), without empty ones.
fn exported() -> Vec<String> {
    std::env::var("PVM_EXPORT")
        .unwrap_or_default()
        .split(':')
        .filter(|n| !n.is_empty())
        .map(str::to_string)
        .collect()
}

fn set_exported(names: &[String]) {
    // PVM's own library edits the environment the same way (putenv), from
    // the program's thread; this library's threads read no variable after
    // enrolling, and Rust's environment functions take a lock.
    std::env::set_var("PVM_EXPORT", names.join(":"));
}

/// A variable name as pvm_export takes it: not empty, no `:` or `=`.
///
/// # Safety
/// `name` is null or a NUL-terminated string.
unsafe fn var_name(name: *mut c_char) -> Result<String, c_int> {
    // SAFETY: the caller's contract.
    match unsafe { cstr(name) } {
        Some(n) if !n.is_empty() && !n.contains([':', '=']) => Ok(n.to_string()),
        _ => Err(PVM_BAD_PARAM),
    }
}

#[no_mangle]
/// Adds `name` to `PVM_EXPORT` (once).
///
/// # Safety
/// `name` is null or a NUL-terminated string (PVM's contract).
pub unsafe extern "C" fn pvm_export(name: *mut c_char) -> c_int {
    guard(|| {
        // SAFETY: our caller's contract.
        let n = match unsafe { var_name(name) } {
            Ok(n) => n,
            Err(e) => return e,
        };
        let mut names = exported();
        if !names.contains(&n) {
            names.push(n);
            set_exported(&names);
        }
        PVM_OK
    })
}

#[no_mangle]
/// Removes `name` from `PVM_EXPORT` (a name not there is no error).
///
/// # Safety
/// `name` is null or a NUL-terminated string (PVM's contract).
pub unsafe extern "C" fn pvm_unexport(name: *mut c_char) -> c_int {
    guard(|| {
        // SAFETY: our caller's contract.
        let n = match unsafe { var_name(name) } {
            Ok(n) => n,
            Err(e) => return e,
        };
        let mut names = exported();
        let before = names.len();
        names.retain(|x| *x != n);
        if names.len() != before {
            set_exported(&names);
        }
        PVM_OK
    })
}

#[no_mangle]
/// Starts the virtual machine's coordinator on this host: `PvmDupHost` if
/// one runs already (as pvmd's answer), `PvmCantStart` if it cannot.
/// pvmd's arguments (a host file, debug flags) have no meaning for the
/// coordinator: hosts are added with `pvm_addhosts` or `gwpvm add`.
///
/// # Safety
/// `argv` holds `argc` strings or is null (PVM's contract; not read).
pub unsafe extern "C" fn pvm_start_pvmd(
    argc: c_int,
    _argv: *mut *mut c_char,
    _block: c_int,
) -> c_int {
    guard(|| {
        if argc < 0 {
            return PVM_BAD_PARAM;
        }
        if argc > 0 {
            eprintln!("libpvm: pvm_start_pvmd: pvmd arguments are ignored (see docs/pvm.md)");
        }
        let running = crate::coord::read_info().is_some()
            && std::os::unix::net::UnixStream::connect(crate::coord::dir().join("sock")).is_ok();
        if running {
            return PVM_DUP_HOST;
        }
        match crate::coord::connect_or_start() {
            Ok(_) => PVM_OK,
            Err(_) => PVM_CANT_START,
        }
    })
}

/// The descriptors `pvm_getfds` hands out (PVM's array is the library's).
static FDS: std::sync::Mutex<[c_int; 1]> = std::sync::Mutex::new([-1]);

#[no_mangle]
/// One descriptor to wait on with `select`/`poll`: readable while a
/// message waits in this task's inbox. PVM gives its sockets instead and
/// warns that a readable one may hold only part of a message; here a
/// message that arrives while the program sleeps is filed by the task's
/// progress thread within about a millisecond, which rings it.
///
/// # Safety
/// `fds` is null or writable (PVM's contract).
pub unsafe extern "C" fn pvm_getfds(fds: *mut *mut c_int) -> c_int {
    guard(|| {
        if let Err(e) = crate::task::task() {
            return e;
        }
        let fd = match crate::task::doorbell() {
            Ok(fd) => fd,
            Err(_) => return PVM_SYS_ERR,
        };
        let mut a = FDS.lock().unwrap_or_else(|e| e.into_inner());
        a[0] = fd;
        if !fds.is_null() {
            // SAFETY: checked not null; the array is static, so the pointer
            // stays valid after the lock is released.
            unsafe { *fds = a.as_mut_ptr() };
        }
        1
    })
}

/// Microseconds since the epoch as a `timeval`, normalised as
/// pvm_hostsync(3PVM) says: microseconds in 0..999999, the seconds' sign
/// the value's (-1 µs is -1 s + 999999 µs).
fn timeval_of(us: i128) -> libc::timeval {
    libc::timeval {
        tv_sec: us.div_euclid(1_000_000) as libc::time_t,
        tv_usec: us.rem_euclid(1_000_000) as libc::suseconds_t,
    }
}

fn now_us() -> i128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i128)
}

#[no_mangle]
/// Samples host `host`'s clock: `clk` gets its time of day, `delta` the
/// remote clock minus the mean of the local clock before and after.
///
/// # Safety
/// `clk` and `delta` are null or writable (PVM's contract).
pub unsafe extern "C" fn pvm_hostsync(
    host: c_int,
    clk: *mut libc::timeval,
    delta: *mut libc::timeval,
) -> c_int {
    guard(|| {
        let t = match crate::task::task() {
            Ok(t) => t,
            Err(e) => return e,
        };
        let before = now_us();
        let reply = match t.coord.request(&format!("HOSTCLOCK {host}")) {
            Ok(r) => r,
            Err(e) => return e,
        };
        let after = now_us();
        let mut w = reply.split(' ').map(|x| x.parse::<i128>().ok());
        let (Some(Some(sec)), Some(Some(usec))) = (w.next(), w.next()) else {
            return PVM_SYS_ERR;
        };
        if !(0..1_000_000).contains(&usec) || !(0..1 << 40).contains(&sec) {
            return PVM_SYS_ERR;
        }
        let remote = sec * 1_000_000 + usec;
        // SAFETY: each pointer is null or writable by the caller's contract.
        unsafe {
            if !clk.is_null() {
                *clk = timeval_of(remote);
            }
            if !delta.is_null() {
                *delta = timeval_of(remote - (before + after) / 2);
            }
        }
        PVM_OK
    })
}
