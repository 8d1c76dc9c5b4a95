//! The program's hooks into receiving: its own matching function for
//! `pvm_recv`, `pvm_nrecv`, `pvm_trecv` and `pvm_probe` (`pvm_recvf`), and
//! message handlers called for matching messages (`pvm_addmhf`,
//! `pvm_delmhf`). Both run on the program's thread, inside the PVM call
//! that looks at the inbox, never on the progress thread: the program's
//! code is not written for threads.

use super::guard;
use crate::consts::*;
use crate::pack::Buffer;
use crate::task::{bufs, Task};
use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// `int (*)(int bufid, int tid, int tag)`: PVM's matching function.
pub type MatchFn = unsafe extern "C" fn(c_int, c_int, c_int) -> c_int;
/// `int (*)(int mid)`: a message handler.
pub type HandlerFn = unsafe extern "C" fn(c_int) -> c_int;

static MATCHER: Mutex<Option<MatchFn>> = Mutex::new(None);

struct MessageHandler {
    id: c_int,
    src: c_int,
    tag: c_int,
    ctx: c_int,
    func: HandlerFn,
}

static HANDLERS: Mutex<Vec<MessageHandler>> = Mutex::new(Vec::new());
/// Whether any handler is registered: the receive path looks only at this.
static HAVE_HANDLERS: AtomicBool = AtomicBool::new(false);
/// Set while a handler runs: handlers are not called from inside one.
static IN_HANDLER: AtomicBool = AtomicBool::new(false);

/// The program's matching function, if it set one.
pub fn matcher() -> Option<MatchFn> {
    *MATCHER.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether receives must go the slow way (a matching function or handlers).
pub fn hooked() -> bool {
    HAVE_HANDLERS.load(Ordering::Relaxed) || matcher().is_some()
}

/// PVM's default matching, as a function a program can get from
/// `pvm_recvf` and set again: source and tag (-1 = any) and the current
/// message context.
unsafe extern "C" fn default_match(bufid: c_int, tid: c_int, tag: c_int) -> c_int {
    let g = bufs();
    let bs = g.as_ref().expect("init");
    match bs.map.get(&bufid) {
        Some(m) => {
            ((tid == -1 || m.src == tid) && (tag == -1 || m.tag == tag) && m.ctx == bs.ctx) as c_int
        }
        None => PVM_NO_SUCH_BUF,
    }
}

#[no_mangle]
/// Sets the matching function (null: PVM's default) and returns the old
/// one; like Debian's PVM 3.4.6 (not as its manual says), the default is
/// returned as a function, not as null.
pub extern "C" fn pvm_recvf(new: Option<MatchFn>) -> Option<MatchFn> {
    let default: MatchFn = default_match;
    // The default, given back, is the fast default again.
    let new = new.filter(|f| !std::ptr::fn_addr_eq(*f, default));
    let old = std::mem::replace(&mut *MATCHER.lock().unwrap_or_else(|e| e.into_inner()), new);
    Some(old.unwrap_or(default))
}

/// Picks a message of the inbox with the matching function `f` and the
/// receive's own (`tid`, `tag`): the first that `f` ranks 1, else the one
/// it ranks highest above 1. `Err` when `f` returned a negative code. With
/// `remove` false the message stays where it was (probe).
pub fn pick(
    t: &Task,
    f: MatchFn,
    tid: c_int,
    tag: c_int,
    remove: bool,
) -> Result<Option<Buffer>, c_int> {
    let pending: Vec<Buffer> = t
        .inbox
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .drain(..)
        .collect();
    if pending.is_empty() {
        return Ok(None);
    }
    // Each message gets a buffer id for the function (it may call
    // pvm_bufinfo or pvm_getminfo on it); no lock is held while it runs.
    let ids: Vec<c_int> = {
        let mut g = bufs();
        let bs = g.as_mut().expect("init");
        pending.into_iter().map(|m| bs.add(m)).collect()
    };
    let mut best: Option<(usize, c_int)> = None;
    let mut failed = None;
    for (i, &id) in ids.iter().enumerate() {
        // SAFETY: a function the program gave pvm_recvf, called as PVM calls it.
        let rank = unsafe { f(id, tid, tag) };
        if rank < 0 {
            failed = Some(rank);
            break;
        }
        if rank == 1 {
            best = Some((i, rank));
            break;
        }
        if rank > 1 && best.is_none_or(|(_, b)| rank > b) {
            best = Some((i, rank));
        }
    }
    let chosen = best.filter(|_| failed.is_none()).map(|(i, _)| i);
    let mut back = Vec::with_capacity(ids.len());
    let mut picked = None;
    {
        let mut g = bufs();
        let bs = g.as_mut().expect("init");
        for (i, id) in ids.iter().enumerate() {
            // A message whose buffer the function freed is gone, as in PVM.
            let Some(m) = bs.map.remove(id) else { continue };
            if Some(i) == chosen && remove {
                picked = Some(m);
            } else {
                if Some(i) == chosen {
                    picked = Some(describe(&m));
                }
                back.push(m);
            }
        }
    }
    // Back in front of whatever arrived meanwhile, in their order.
    let mut q = t.inbox.lock().unwrap_or_else(|e| e.into_inner());
    for m in back.into_iter().rev() {
        q.push_front(m);
    }
    crate::task::settle_doorbell(&q);
    match failed {
        Some(e) => Err(e),
        None => Ok(picked),
    }
}

/// A buffer that describes a message left in the inbox (for pvm_probe).
pub fn describe(m: &Buffer) -> Buffer {
    let mut d = Buffer::received(vec![0; m.len()], m.src, m.tag, m.ctx, m.encoding);
    (d.wid, d.dst) = (m.wid, m.dst);
    d
}

#[no_mangle]
/// Calls `func` for every message from `src` with `tag` (either -1 = any)
/// in message context `ctx`; returns the handler's id.
pub extern "C" fn pvm_addmhf(src: c_int, tag: c_int, ctx: c_int, func: Option<HandlerFn>) -> c_int {
    guard(|| {
        let Some(func) = func else {
            return PVM_BAD_PARAM;
        };
        let mut h = HANDLERS.lock().unwrap_or_else(|e| e.into_inner());
        if h.iter().any(|x| (x.src, x.tag, x.ctx) == (src, tag, ctx)) {
            return PVM_EXISTS;
        }
        let id = (0..).find(|i| h.iter().all(|x| x.id != *i)).unwrap_or(0);
        h.push(MessageHandler {
            id,
            src,
            tag,
            ctx,
            func,
        });
        HAVE_HANDLERS.store(true, Ordering::Relaxed);
        id
    })
}

#[no_mangle]
pub extern "C" fn pvm_delmhf(mhid: c_int) -> c_int {
    guard(|| {
        if mhid < 0 {
            return PVM_BAD_PARAM;
        }
        let mut h = HANDLERS.lock().unwrap_or_else(|e| e.into_inner());
        let Some(i) = h.iter().position(|x| x.id == mhid) else {
            return PVM_NOT_FOUND;
        };
        h.remove(i);
        HAVE_HANDLERS.store(!h.is_empty(), Ordering::Relaxed);
        PVM_OK
    })
}

/// Calls the message handlers for every inbox message one of them
/// matches, oldest first. During a call the handler's message is the
/// active receive buffer and there is no active send buffer; both are
/// restored after, and the message is freed unless the handler did.
pub fn run_handlers(t: &Task) {
    if !HAVE_HANDLERS.load(Ordering::Relaxed) || IN_HANDLER.swap(true, Ordering::Acquire) {
        return;
    }
    loop {
        let found = {
            let h = HANDLERS.lock().unwrap_or_else(|e| e.into_inner());
            let mut q = t.inbox.lock().unwrap_or_else(|e| e.into_inner());
            let found = q
                .iter()
                .enumerate()
                .find_map(|(i, m)| {
                    h.iter()
                        .find(|x| {
                            (x.src == -1 || x.src == m.src)
                                && (x.tag == -1 || x.tag == m.tag)
                                && x.ctx == m.ctx
                        })
                        .map(|x| (i, x.func))
                })
                .and_then(|(i, f)| q.remove(i).map(|m| (m, f)));
            crate::task::settle_doorbell(&q);
            found
        };
        let Some((m, func)) = found else { break };
        let (saved_s, saved_r, id) = {
            let mut g = bufs();
            let bs = g.as_mut().expect("init");
            let id = bs.add(m);
            let saved = (bs.sbuf, bs.rbuf);
            (bs.sbuf, bs.rbuf) = (0, id);
            (saved.0, saved.1, id)
        };
        // SAFETY: a function the program gave pvm_addmhf, called as PVM calls it.
        unsafe { func(id) };
        let mut g = bufs();
        let bs = g.as_mut().expect("init");
        bs.map.remove(&id);
        bs.sbuf = if bs.map.contains_key(&saved_s) {
            saved_s
        } else {
            0
        };
        bs.rbuf = if bs.map.contains_key(&saved_r) {
            saved_r
        } else {
            0
        };
    }
    IN_HANDLER.store(false, Ordering::Release);
}
