//! The C functions of `pvm3.h`: messages, buffers, tasks, notify, options.
//! (Groups are in `groups.rs`.) This is where raw pointers from C are read
//! and written; each access says what PVM's documentation promises about
//! the argument.

use crate::consts::*;
use crate::pack::{Buffer, Kind};
use crate::spawn;
use crate::task::{bufs, task, Task};
use std::ffi::{c_char, c_int, c_long, c_uint, c_ulong, c_void, CStr};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Mutex;
use std::time::Duration;

pub mod compat;
pub mod hooks;
pub mod messages;

/// `pvm_errno`: the last error a call returned, for `pvm_perror`.
#[no_mangle]
pub static pvm_errno: AtomicI32 = AtomicI32::new(0);

/// Runs a PVM call: a panic (a bug: no input may cause one) becomes
/// `PvmSysErr` instead of unwinding into C; errors are remembered.
pub fn guard(f: impl FnOnce() -> c_int) -> c_int {
    let rc = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(PVM_SYS_ERR);
    if rc < 0 {
        pvm_errno.store(rc, Ordering::Relaxed);
    }
    rc
}

macro_rules! pvm_fn {
    ($(#[$m:meta])* fn $name:ident($($a:ident : $t:ty),* $(,)?) $body:block) => {
        $(#[$m])*
        #[no_mangle]
        pub unsafe extern "C" fn $name($($a: $t),*) -> c_int {
            guard(move || -> c_int { $body })
        }
    };
}

pub(crate) fn with_task(f: impl FnOnce(&'static Task) -> c_int) -> c_int {
    match task() {
        Ok(t) => f(t),
        Err(e) => e,
    }
}

/// # Safety
/// `p`, when not null, must be a NUL-terminated string.
pub(crate) unsafe fn cstr<'a>(p: *const c_char) -> Option<&'a str> {
    if p.is_null() {
        return None;
    }
    // SAFETY: the caller's contract.
    unsafe { CStr::from_ptr(p) }.to_str().ok()
}

pvm_fn!(
    fn pvm_mytid() {
        with_task(|t| t.tid)
    }
);
pvm_fn!(
    fn pvm_parent() {
        with_task(|t| t.parent)
    }
);

pvm_fn!(
    fn pvm_exit() {
        if let Some(t) = (!crate::task::exited()).then(task).and_then(Result::ok) {
            crate::catchout::wait(t.tid);
            t.exit();
        }
        PVM_OK
    }
);

fn valid_encoding(enc: c_int) -> bool {
    (PVM_DATA_DEFAULT..=PVM_DATA_IN_PLACE).contains(&enc)
}

pvm_fn!(
    fn pvm_initsend(enc: c_int) {
        if !valid_encoding(enc) {
            return PVM_BAD_PARAM;
        }
        let mut g = bufs();
        let b = g.as_mut().expect("bufs() initialises");
        let old = b.sbuf;
        b.map.remove(&old);
        let id = b.add(Buffer::new(enc));
        b.sbuf = id;
        id
    }
);

pvm_fn!(
    fn pvm_mkbuf(enc: c_int) {
        if !valid_encoding(enc) {
            return PVM_BAD_PARAM;
        }
        bufs().as_mut().expect("init").add(Buffer::new(enc))
    }
);

pvm_fn!(
    fn pvm_freebuf(id: c_int) {
        let mut g = bufs();
        let b = g.as_mut().expect("init");
        if b.map.remove(&id).is_none() {
            return if id == 0 { PVM_OK } else { PVM_NO_SUCH_BUF };
        }
        if b.sbuf == id {
            b.sbuf = 0;
        }
        if b.rbuf == id {
            b.rbuf = 0;
        }
        PVM_OK
    }
);

pvm_fn!(
    fn pvm_getsbuf() {
        bufs().as_ref().expect("init").sbuf
    }
);
pvm_fn!(
    fn pvm_getrbuf() {
        bufs().as_ref().expect("init").rbuf
    }
);

pvm_fn!(
    fn pvm_setsbuf(id: c_int) {
        let mut g = bufs();
        let b = g.as_mut().expect("init");
        if id != 0 && !b.map.contains_key(&id) {
            return PVM_NO_SUCH_BUF;
        }
        std::mem::replace(&mut b.sbuf, id)
    }
);

pvm_fn!(
    fn pvm_setrbuf(id: c_int) {
        let mut g = bufs();
        let b = g.as_mut().expect("init");
        match b.map.get_mut(&id) {
            Some(buf) => buf.rewind(),
            None if id == 0 => {}
            None => return PVM_NO_SUCH_BUF,
        }
        std::mem::replace(&mut b.rbuf, id)
    }
);

/// Packs into the active send buffer.
fn pk(kind: Kind, p: *const c_void, n: c_int, stride: c_int) -> c_int {
    let mut g = bufs();
    let b = g.as_mut().expect("init");
    let id = b.sbuf;
    match b.map.get_mut(&id) {
        // SAFETY: PVM's contract: `p` holds n elements of the type at `stride`.
        Some(buf) => unsafe { buf.pack(kind, p as *const u8, n, stride) },
        None => PVM_NO_BUF,
    }
}

/// Unpacks from the active receive buffer.
fn upk(kind: Kind, p: *mut c_void, n: c_int, stride: c_int) -> c_int {
    let mut g = bufs();
    let b = g.as_mut().expect("init");
    let id = b.rbuf;
    match b.map.get_mut(&id) {
        // SAFETY: PVM's contract: `p` has room for n elements at `stride`.
        Some(buf) => unsafe { buf.unpack(kind, p as *mut u8, n, stride) },
        None => PVM_NO_BUF,
    }
}

macro_rules! pk_upk {
    ($pk:ident, $upk:ident, $t:ty, $kind:expr) => {
        pvm_fn!(
            fn $pk(p: *mut $t, n: c_int, stride: c_int) {
                pk($kind, p as *const c_void, n, stride)
            }
        );
        pvm_fn!(
            fn $upk(p: *mut $t, n: c_int, stride: c_int) {
                upk($kind, p as *mut c_void, n, stride)
            }
        );
    };
}

pk_upk!(pvm_pkbyte, pvm_upkbyte, c_char, Kind::Byte);
pk_upk!(pvm_pkshort, pvm_upkshort, i16, Kind::Short);
pk_upk!(pvm_pkushort, pvm_upkushort, u16, Kind::Ushort);
pk_upk!(pvm_pkint, pvm_upkint, c_int, Kind::Int);
pk_upk!(pvm_pkuint, pvm_upkuint, c_uint, Kind::Uint);
pk_upk!(pvm_pklong, pvm_upklong, c_long, Kind::Long);
pk_upk!(pvm_pkulong, pvm_upkulong, c_ulong, Kind::Ulong);
pk_upk!(pvm_pkfloat, pvm_upkfloat, f32, Kind::Float);
pk_upk!(pvm_pkdouble, pvm_upkdouble, f64, Kind::Double);
pk_upk!(pvm_pkcplx, pvm_upkcplx, f32, Kind::Cplx);
pk_upk!(pvm_pkdcplx, pvm_upkdcplx, f64, Kind::Dcplx);

pvm_fn!(
    /// Packs a NUL-terminated string.
    fn pvm_pkstr(s: *mut c_char) {
        if s.is_null() {
            return PVM_BAD_PARAM;
        }
        // SAFETY: PVM's contract: a NUL-terminated string.
        let bytes = unsafe { CStr::from_ptr(s) }.to_bytes();
        let mut g = bufs();
        let b = g.as_mut().expect("init");
        let id = b.sbuf;
        match b.map.get_mut(&id) {
            Some(buf) => buf.pack_str(bytes),
            None => PVM_NO_BUF,
        }
    }
);

pvm_fn!(
    fn pvm_upkstr(s: *mut c_char) {
        let mut g = bufs();
        let b = g.as_mut().expect("init");
        let id = b.rbuf;
        match b.map.get_mut(&id) {
            // SAFETY: PVM's contract: room for the string that was packed.
            Some(buf) => unsafe { buf.unpack_str(s as *mut u8) },
            None => PVM_NO_BUF,
        }
    }
);

pvm_fn!(
    fn pvm_send(tid: c_int, tag: c_int) {
        with_task(|t| {
            let g = bufs();
            let b = g.as_ref().expect("init");
            match b.map.get(&b.sbuf) {
                Some(buf) => t.send(buf, tid, tag, b.ctx),
                None => PVM_NO_BUF,
            }
        })
    }
);

pvm_fn!(
    fn pvm_mcast(tids: *mut c_int, n: c_int, tag: c_int) {
        if n < 0 || (n > 0 && tids.is_null()) {
            return PVM_BAD_PARAM;
        }
        with_task(|t| {
            // SAFETY: PVM's contract: `tids` holds n task ids.
            let list = unsafe { std::slice::from_raw_parts(tids, n as usize) };
            let g = bufs();
            let b = g.as_ref().expect("init");
            let Some(buf) = b.map.get(&b.sbuf) else {
                return PVM_NO_BUF;
            };
            let mut rc = PVM_OK;
            // As PVM: the caller never receives its own multicast.
            for &tid in list.iter().filter(|&&x| x != t.tid) {
                let r = t.send(buf, tid, tag, b.ctx);
                if r < 0 {
                    rc = r;
                }
            }
            rc
        })
    }
);

/// Makes `got` the active receive buffer (freeing the previous one) and returns its id.
fn install_rbuf(got: Buffer) -> c_int {
    let mut g = bufs();
    let b = g.as_mut().expect("init");
    let old = b.rbuf;
    if old != b.sbuf {
        b.map.remove(&old);
    }
    let id = b.add(got);
    b.rbuf = id;
    id
}

fn recv_with(tid: c_int, tag: c_int, timeout: Option<Duration>) -> c_int {
    with_task(|t| {
        let mctx = bufs().as_ref().expect("init").ctx;
        if !hooks::hooked() {
            return match t.receive(tid, tag, mctx, timeout) {
                Some(b) => install_rbuf(b),
                None => 0,
            };
        }
        // The program's matching function and message handlers run here,
        // on its own thread, whenever the inbox is looked at.
        let matcher = hooks::matcher();
        let mut got = Ok(None);
        t.wait_for(timeout, || {
            hooks::run_handlers(t);
            got = match matcher {
                Some(f) => hooks::pick(t, f, tid, tag, true),
                None => Ok(t.take(tid, tag, mctx)),
            };
            !matches!(got, Ok(None))
        });
        match got {
            Ok(Some(b)) => {
                t.link_back(b.src);
                install_rbuf(b)
            }
            Ok(None) => 0,
            Err(e) => e,
        }
    })
}

pvm_fn!(
    fn pvm_recv(tid: c_int, tag: c_int) {
        recv_with(tid, tag, None)
    }
);
pvm_fn!(
    fn pvm_nrecv(tid: c_int, tag: c_int) {
        recv_with(tid, tag, Some(Duration::ZERO))
    }
);
pvm_fn!(
    fn pvm_trecv(tid: c_int, tag: c_int, tmout: *mut libc::timeval) {
        let timeout = if tmout.is_null() {
            None
        } else {
            // SAFETY: PVM's contract: a timeval when not null.
            let tv = unsafe { *tmout };
            if tv.tv_sec < 0 || tv.tv_usec < 0 {
                return PVM_BAD_PARAM;
            }
            Some(Duration::from_secs(tv.tv_sec as u64) + Duration::from_micros(tv.tv_usec as u64))
        };
        recv_with(tid, tag, timeout)
    }
);

pvm_fn!(
    fn pvm_probe(tid: c_int, tag: c_int) {
        with_task(|t| {
            t.ctx.progress();
            let mctx = bufs().as_ref().expect("init").ctx;
            hooks::run_handlers(t);
            if let Some(f) = hooks::matcher() {
                return match hooks::pick(t, f, tid, tag, false) {
                    Ok(Some(d)) => bufs().as_mut().expect("init").add(d),
                    Ok(None) => 0,
                    Err(e) => e,
                };
            }
            match t.peek(tid, tag, mctx) {
                // A buffer that describes the message (for pvm_bufinfo).
                Some((len, tag, src)) => {
                    let b = Buffer::received(vec![0; len], src, tag, mctx, PVM_DATA_DEFAULT);
                    bufs().as_mut().expect("init").add(b)
                }
                None => 0,
            }
        })
    }
);

pvm_fn!(
    fn pvm_bufinfo(id: c_int, bytes: *mut c_int, tag: *mut c_int, tid: *mut c_int) {
        let g = bufs();
        let Some(b) = g.as_ref().expect("init").map.get(&id) else {
            return if id <= 0 {
                PVM_BAD_PARAM
            } else {
                PVM_NO_SUCH_BUF
            };
        };
        // SAFETY: PVM's contract: each out-pointer is null or writable.
        unsafe {
            if !bytes.is_null() {
                *bytes = b.len() as c_int;
            }
            if !tag.is_null() {
                *tag = b.tag;
            }
            if !tid.is_null() {
                *tid = b.src;
            }
        }
        PVM_OK
    }
);

pvm_fn!(
    fn pvm_psend(tid: c_int, tag: c_int, p: *mut c_void, n: c_int, datatype: c_int) {
        let Some(kind) = Kind::from_code(datatype) else {
            return PVM_BAD_PARAM;
        };
        let kind = if kind == Kind::Str { Kind::Byte } else { kind };
        with_task(|t| {
            // Packed in place: the send below reads `p` directly (the
            // message leaves before pvm_psend returns), no copy first.
            let mut b = Buffer::new(PVM_DATA_IN_PLACE);
            // SAFETY: PVM's contract: `p` holds n elements of `datatype`,
            // valid for this call, which is all an in-place part needs.
            let rc = unsafe { b.pack(kind, p as *const u8, n, 1) };
            if rc < 0 {
                return rc;
            }
            // The receiver sees the raw encoding psend always sent.
            b.encoding = PVM_DATA_RAW;
            let mctx = bufs().as_ref().expect("init").ctx;
            t.send(&b, tid, tag, mctx)
        })
    }
);

pvm_fn!(
    fn pvm_precv(
        tid: c_int,
        tag: c_int,
        p: *mut c_void,
        n: c_int,
        datatype: c_int,
        rtid: *mut c_int,
        rtag: *mut c_int,
        rcnt: *mut c_int,
    ) {
        let Some(kind) = Kind::from_code(datatype) else {
            return PVM_BAD_PARAM;
        };
        let kind = if kind == Kind::Str { Kind::Byte } else { kind };
        with_task(|t| {
            let mctx = bufs().as_ref().expect("init").ctx;
            let Some(mut b) = t.receive(tid, tag, mctx, None) else {
                return PVM_SYS_ERR;
            };
            let count = b.first_run_len().min(n.max(0) as usize) as c_int;
            // SAFETY: PVM's contract: room for n elements; we unpack at most n.
            let rc = unsafe { b.unpack(kind, p as *mut u8, count, 1) };
            // SAFETY: each out-pointer is null or writable.
            unsafe {
                if !rtid.is_null() {
                    *rtid = b.src;
                }
                if !rtag.is_null() {
                    *rtag = b.tag;
                }
                if !rcnt.is_null() {
                    *rcnt = count;
                }
            }
            rc
        })
    }
);

pvm_fn!(
    fn pvm_notify(what: c_int, tag: c_int, cnt: c_int, tids: *mut c_int) {
        with_task(|t| {
            let kind = what & !PVM_NOTIFY_CANCEL;
            let cancel = what & PVM_NOTIFY_CANCEL != 0;
            match kind {
                PVM_TASK_EXIT => {
                    if cnt < 0 || (cnt > 0 && tids.is_null()) {
                        return PVM_BAD_PARAM;
                    }
                    // SAFETY: PVM's contract: `tids` holds cnt task ids.
                    let list = unsafe { std::slice::from_raw_parts(tids, cnt as usize) };
                    let mctx = bufs().as_ref().expect("init").ctx;
                    for &w in list {
                        if cancel {
                            t.cancel_notify(w, tag);
                        } else {
                            t.notify_exit(w, tag, mctx);
                        }
                    }
                    PVM_OK
                }
                PVM_HOST_DELETE | PVM_HOST_ADD => {
                    // SAFETY: PVM's contract for pvm_notify's tids, passed on.
                    unsafe { crate::hosts::notify_host(t, kind, cancel, tag, cnt, tids) }
                }
                _ => PVM_BAD_PARAM,
            }
        })
    }
);

pvm_fn!(
    fn pvm_kill(tid: c_int) {
        with_task(|t| match t.coord.request(&format!("KILL {tid}")) {
            Ok(_) => PVM_OK,
            Err(e) => e,
        })
    }
);

pvm_fn!(
    /// Sends signal `sig` to task `tid` (the coordinator signals its process).
    fn pvm_sendsig(tid: c_int, sig: c_int) {
        with_task(|t| match t.coord.request(&format!("KILL {tid} {sig}")) {
            Ok(_) => PVM_OK,
            Err(e) => e,
        })
    }
);

pvm_fn!(
    fn pvm_spawn(
        file: *mut c_char,
        argv: *mut *mut c_char,
        flag: c_int,
        place: *mut c_char,
        count: c_int,
        tids: *mut c_int,
    ) {
        // SAFETY: PVM's contract: NUL-terminated strings (place may be null).
        let (Some(name), place) = (unsafe { cstr(file) }, unsafe { cstr(place) }.unwrap_or(""))
        else {
            return PVM_BAD_PARAM;
        };
        // More than the virtual machine can ever hold is a mistake, not a
        // reason to allocate.
        if count < 1 || count as u32 > crate::coord::CAPACITY {
            return PVM_BAD_PARAM;
        }
        let mut args = Vec::new();
        if !argv.is_null() {
            let mut i = 0;
            // SAFETY: PVM's contract: a NULL-terminated array of strings.
            while let Some(a) = unsafe { cstr(*argv.add(i)) } {
                args.push(a.to_string());
                i += 1;
            }
        }
        with_task(|t| {
            let mut out = vec![0; count as usize];
            let rc = spawn::spawn(t, name, &args, flag, place, &mut out);
            if !tids.is_null() {
                // SAFETY: PVM's contract: room for `count` task ids.
                unsafe { std::ptr::copy_nonoverlapping(out.as_ptr(), tids, out.len()) };
            }
            rc
        })
    }
);

/// Memory handed to the program by pvm_tasks/pvm_config/pvm_siblings: kept
/// until the next call of the same function, as PVM does.
struct Kept {
    tasks: Vec<TaskInfo>,
    strings: Vec<std::ffi::CString>,
    siblings: Vec<c_int>,
}
// SAFETY: the raw pointers in the kept structs point into `strings`, which
// live beside them; they are only handed to C.
unsafe impl Send for Kept {}
static KEPT: Mutex<Kept> = Mutex::new(Kept {
    tasks: Vec::new(),
    strings: Vec::new(),
    siblings: Vec::new(),
});

/// `struct pvmtaskinfo`.
#[repr(C)]
pub struct TaskInfo {
    ti_tid: c_int,
    ti_ptid: c_int,
    ti_host: c_int,
    ti_flag: c_int,
    ti_a_out: *mut c_char,
    ti_pid: c_int,
}

/// `struct pvmhostinfo`.
#[repr(C)]
pub struct HostInfo {
    pub hi_tid: c_int,
    pub hi_name: *mut c_char,
    pub hi_arch: *mut c_char,
    pub hi_speed: c_int,
    pub hi_dsig: c_int,
}

pvm_fn!(
    fn pvm_tasks(which: c_int, ntask: *mut c_int, taskp: *mut *mut TaskInfo) {
        with_task(|t| {
            let rows = match t.coord.request(&format!("TASKS {which}")) {
                Ok(r) => r,
                Err(e) => return e,
            };
            let mut k = KEPT.lock().unwrap_or_else(|e| e.into_inner());
            let k = &mut *k;
            k.tasks.clear();
            k.strings.clear();
            for row in rows.split(';').filter(|r| !r.is_empty()) {
                let f: Vec<&str> = row.split(',').collect();
                let [tid, ptid, pid, name, host] = f[..] else {
                    continue;
                };
                let name = crate::coord::unhex(name).unwrap_or_default();
                let c = std::ffi::CString::new(name).unwrap_or_default();
                k.tasks.push(TaskInfo {
                    ti_tid: tid.parse().unwrap_or(0),
                    ti_ptid: ptid.parse::<c_int>().map(|p| p.max(0)).unwrap_or(0),
                    ti_host: host.parse().unwrap_or(HOST_TID),
                    ti_flag: 4,
                    ti_a_out: c.as_ptr() as *mut c_char,
                    ti_pid: pid.parse().unwrap_or(0),
                });
                k.strings.push(c);
            }
            // SAFETY: out-pointers are null or writable.
            unsafe {
                if !ntask.is_null() {
                    *ntask = k.tasks.len() as c_int;
                }
                if !taskp.is_null() {
                    *taskp = k.tasks.as_mut_ptr();
                }
            }
            PVM_OK
        })
    }
);

pvm_fn!(
    fn pvm_siblings(tids: *mut *mut c_int) {
        with_task(|t| {
            let mut k = KEPT.lock().unwrap_or_else(|e| e.into_inner());
            k.siblings = t.siblings.clone();
            if !tids.is_null() {
                // SAFETY: out-pointer is writable.
                unsafe { *tids = k.siblings.as_mut_ptr() };
            }
            k.siblings.len() as c_int
        })
    }
);

pvm_fn!(
    fn pvm_perror(msg: *mut c_char) {
        // SAFETY: PVM's contract: a string or null.
        let m = unsafe { cstr(msg) }.unwrap_or("");
        let who = match crate::task::exited() {
            false => task()
                .map(|t| format!("t{:x}", t.tid))
                .unwrap_or_else(|_| "pvm".into()),
            true => "pvm".into(),
        };
        let code = pvm_errno.load(Ordering::Relaxed);
        eprintln!("libpvm [{who}]: {m}: {}", error_text(code));
        PVM_OK
    }
);

static OPTS: Mutex<[c_int; 32]> = Mutex::new([0; 32]);

pvm_fn!(
    /// Options are remembered and reported back; `PvmRoute` is accepted
    /// whatever its value: the runtime's selection chooses every route.
    fn pvm_setopt(what: c_int, val: c_int) {
        let mut o = OPTS.lock().unwrap_or_else(|e| e.into_inner());
        match usize::try_from(what).ok().filter(|&w| (1..32).contains(&w)) {
            Some(w) => std::mem::replace(&mut o[w], val),
            None => PVM_BAD_PARAM,
        }
    }
);

pvm_fn!(
    fn pvm_getopt(what: c_int) {
        let o = OPTS.lock().unwrap_or_else(|e| e.into_inner());
        match usize::try_from(what).ok().filter(|&w| (1..32).contains(&w)) {
            Some(w) => o[w],
            None => PVM_BAD_PARAM,
        }
    }
);

pvm_fn!(
    fn pvm_newcontext() {
        with_task(|t| match t.coord.request("NEWCTX") {
            Ok(r) => r.parse().unwrap_or(PVM_SYS_ERR),
            Err(e) => e,
        })
    }
);
pvm_fn!(
    fn pvm_setcontext(c: c_int) {
        if c < 0 {
            return PVM_BAD_PARAM;
        }
        std::mem::replace(&mut bufs().as_mut().expect("init").ctx, c)
    }
);
pvm_fn!(
    fn pvm_getcontext() {
        bufs().as_ref().expect("init").ctx
    }
);
pvm_fn!(
    fn pvm_freecontext(_c: c_int) {
        PVM_OK
    }
);

pvm_fn!(
    fn pvm_pstat(tid: c_int) {
        with_task(
            |t| match t.coord.request(&format!("STATUS {tid}")).as_deref() {
                Ok("alive") => PVM_OK,
                Ok(_) => PVM_NO_TASK,
                Err(&e) => e,
            },
        )
    }
);

pvm_fn!(
    fn pvm_halt() {
        with_task(|t| {
            let _ = t.coord.request("HALT");
            PVM_OK
        })
    }
);

pvm_fn!(
    fn pvm_catchout(f: *mut c_void) {
        crate::catchout::set(f);
        PVM_OK
    }
);
pvm_fn!(
    fn pvm_archcode(_arch: *mut c_char) {
        1
    }
);

static VERSION: &[u8] = b"3.4.6\0";

/// `pvm_version()`: the PVM version this library is compatible with.
#[no_mangle]
pub extern "C" fn pvm_version() -> *const c_char {
    VERSION.as_ptr() as *const c_char
}

/// `pvmsleep(secs)`: libpvm's portable sleep, which some examples call.
#[no_mangle]
pub extern "C" fn pvmsleep(secs: c_int) -> c_int {
    std::thread::sleep(Duration::from_secs(secs.max(0) as u64));
    0
}

/// `pvmgetclock(tv)`: libpvm's wall clock, which bwtest.c times with.
#[no_mangle]
pub unsafe extern "C" fn pvmgetclock(tv: *mut libc::timeval) -> c_int {
    if tv.is_null() {
        return PVM_BAD_PARAM;
    }
    // SAFETY: `tv` is a writable timeval (the caller's contract); a null
    // time zone is allowed.
    unsafe { libc::gettimeofday(tv, std::ptr::null_mut()) }
}
