//! Messages as data and their header fields: `pvm_pkmesg`,
//! `pvm_pkmesgbody`, `pvm_upkmesg` (a message packed into another, header
//! and all, or spliced in as its body), `pvm_getminfo`/`pvm_setminfo` and
//! `pvm_getmwid`/`pvm_setmwid` (the wait id a reply carries back).

use super::guard;
use crate::consts::*;
use crate::pack::{Buffer, Kind};
use crate::task::{bufs, flatten};
use std::ffi::c_int;

/// PVM's `struct pvmminfo` (pvm3.h), field for field.
#[repr(C)]
pub struct PvmMinfo {
    pub len: c_int,
    pub ctx: c_int,
    pub tag: c_int,
    pub wid: c_int,
    pub enc: c_int,
    pub crc: c_int,
    pub src: c_int,
    pub dst: c_int,
}

/// How many header words `pvm_pkmesg` packs in front of the body.
const PACKED_HEADER: usize = 8;

/// The header fields of `b` as `pvm_getminfo` reports them. The checksum
/// is 0: PVM 3.4 computes one only when built with its checksum option,
/// which Debian's build is not, and every byte here is checked by the
/// transport already.
fn minfo(b: &Buffer) -> PvmMinfo {
    PvmMinfo {
        len: c_int::try_from(b.len()).unwrap_or(c_int::MAX),
        ctx: b.ctx,
        tag: b.tag,
        wid: b.wid,
        enc: b.encoding,
        crc: 0,
        src: b.src,
        dst: b.dst,
    }
}

#[no_mangle]
/// # Safety
/// `mi` is null or points to a writable `struct pvmminfo` (PVM's contract).
pub unsafe extern "C" fn pvm_getminfo(bufid: c_int, mi: *mut PvmMinfo) -> c_int {
    guard(|| {
        if mi.is_null() {
            return PVM_BAD_PARAM;
        }
        let g = bufs();
        let Some(b) = g.as_ref().expect("init").map.get(&bufid) else {
            return if bufid <= 0 {
                PVM_BAD_PARAM
            } else {
                PVM_NO_SUCH_BUF
            };
        };
        // SAFETY: checked not null; writable by the caller's contract.
        unsafe { mi.write(minfo(b)) };
        PVM_OK
    })
}

#[no_mangle]
/// # Safety
/// `mi` is null or points to a readable `struct pvmminfo` (PVM's contract).
pub unsafe extern "C" fn pvm_setminfo(bufid: c_int, mi: *mut PvmMinfo) -> c_int {
    guard(|| {
        if mi.is_null() {
            return PVM_BAD_PARAM;
        }
        // SAFETY: checked not null; readable by the caller's contract.
        let m = unsafe { mi.read() };
        let mut g = bufs();
        let Some(b) = g.as_mut().expect("init").map.get_mut(&bufid) else {
            return if bufid <= 0 {
                PVM_BAD_PARAM
            } else {
                PVM_NO_SUCH_BUF
            };
        };
        // Only these may be set (pvm_getminfo(3PVM)); len, enc and crc
        // follow from the body.
        (b.ctx, b.tag, b.wid, b.src, b.dst) = (m.ctx, m.tag, m.wid, m.src, m.dst);
        PVM_OK
    })
}

#[no_mangle]
pub extern "C" fn pvm_getmwid(bufid: c_int) -> c_int {
    guard(|| match bufs().as_ref().expect("init").map.get(&bufid) {
        Some(b) => b.wid,
        None if bufid <= 0 => PVM_BAD_PARAM,
        None => PVM_NO_SUCH_BUF,
    })
}

#[no_mangle]
pub extern "C" fn pvm_setmwid(bufid: c_int, waitid: c_int) -> c_int {
    guard(
        || match bufs().as_mut().expect("init").map.get_mut(&bufid) {
            Some(b) => {
                b.wid = waitid;
                PVM_OK
            }
            None if bufid <= 0 => PVM_BAD_PARAM,
            None => PVM_NO_SUCH_BUF,
        },
    )
}

/// The body of buffer `bufid` and its header, for packing into the
/// active send buffer, which must be another buffer.
fn source_of(bufid: c_int) -> Result<(Vec<u8>, PvmMinfo), c_int> {
    let g = bufs();
    let bs = g.as_ref().expect("init");
    if bufid == bs.sbuf {
        return Err(PVM_BAD_PARAM);
    }
    match bs.map.get(&bufid) {
        Some(b) => Ok((flatten(b), minfo(b))),
        None if bufid <= 0 => Err(PVM_BAD_PARAM),
        None => Err(PVM_NO_SUCH_BUF),
    }
}

/// Runs `f` on the active send buffer.
fn with_sbuf(f: impl FnOnce(&mut Buffer) -> c_int) -> c_int {
    let mut g = bufs();
    let bs = g.as_mut().expect("init");
    let id = bs.sbuf;
    match bs.map.get_mut(&id) {
        Some(b) => f(b),
        None => PVM_NO_BUF,
    }
}

#[no_mangle]
/// Packs message `bufid`, header fields and body, into the send buffer.
pub extern "C" fn pvm_pkmesg(bufid: c_int) -> c_int {
    guard(|| {
        let (body, m) = match source_of(bufid) {
            Ok(x) => x,
            Err(e) => return e,
        };
        let Ok(len) = c_int::try_from(body.len()) else {
            return PVM_OVERFLOW;
        };
        let header = [len, m.ctx, m.tag, m.wid, m.enc, m.crc, m.src, m.dst];
        with_sbuf(|b| {
            // SAFETY: packs from live local arrays of the sizes given.
            let rc = unsafe { b.pack(Kind::Int, header.as_ptr().cast(), header.len() as i32, 1) };
            if rc < 0 {
                return rc;
            }
            // In-place buffers must not point at `body`, which goes away:
            // the body is always copied into the buffer.
            b.append_body(&body)
        })
    })
}

#[no_mangle]
/// Splices the body of message `bufid` into the send buffer.
pub extern "C" fn pvm_pkmesgbody(bufid: c_int) -> c_int {
    guard(|| {
        let (body, _) = match source_of(bufid) {
            Ok(x) => x,
            Err(e) => return e,
        };
        with_sbuf(|b| {
            b.append_runs(&body);
            PVM_OK
        })
    })
}

#[no_mangle]
/// Unpacks a message packed by `pvm_pkmesg` from the receive buffer into
/// a new buffer, whose id it returns (the active buffers do not change).
pub extern "C" fn pvm_upkmesg() -> c_int {
    guard(|| {
        let mut g = bufs();
        let bs = g.as_mut().expect("init");
        let id = bs.rbuf;
        let Some(r) = bs.map.get_mut(&id) else {
            return PVM_NO_BUF;
        };
        let mut h = [0 as c_int; PACKED_HEADER];
        // SAFETY: room for PACKED_HEADER ints.
        let rc = unsafe { r.unpack(Kind::Int, h.as_mut_ptr().cast(), h.len() as i32, 1) };
        if rc < 0 {
            return rc;
        }
        let [len, ctx, tag, wid, enc, _crc, src, dst] = h;
        // The length came from a peer: it must fit in what is left unread
        // before anything is allocated for it.
        let Some(n) = usize::try_from(len).ok().filter(|&n| n <= r.unread()) else {
            return PVM_BAD_MSG;
        };
        let mut body = vec![0u8; n];
        // SAFETY: `body` has room for n bytes.
        let rc = unsafe { r.unpack(Kind::Byte, body.as_mut_ptr(), n as i32, 1) };
        if rc < 0 {
            return rc;
        }
        let mut m = Buffer::received(body, src, tag, ctx, enc);
        (m.wid, m.dst) = (wid, dst);
        bs.add(m)
    })
}
