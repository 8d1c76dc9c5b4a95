//! Message buffers: what `pvm_pk*` writes and `pvm_upk*` reads.
//!
//! PVM's `PvmDataDefault` promises that any sender can talk to any receiver
//! architecture. PVM keeps it by encoding everything in XDR (big-endian),
//! which costs a conversion on both ends between two little-endian hosts.
//! We keep it the way gridwire's record layer does: the sender packs in its
//! natural representation, one small header per packed run naming the type,
//! the byte order and the element size, and the receiver converts only when
//! its own representation differs (a byte swap per element; an element
//! size it cannot take is refused with `PvmBadMsg`, never guessed).
//!
//! Run header, 8 bytes: `kind u8, order u8 (0 little, 1 big), unit u8
//! (the size of the swapped scalar), 0, count u32 little-endian`. Complex
//! numbers are two scalars per element. Strings are byte runs that keep
//! their terminating NUL.
//!
//! Everything read here comes from a peer: lengths are checked against the
//! buffer before any copy.

use crate::consts::*;

/// The PVM data types (`PVM_STR` … `PVM_ULONG`), which are also run kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    Str = 0,
    Byte = 1,
    Short = 2,
    Int = 3,
    Float = 4,
    Cplx = 5,
    Double = 6,
    Dcplx = 7,
    Long = 8,
    Ushort = 9,
    Uint = 10,
    Ulong = 11,
}

impl Kind {
    pub fn from_code(c: i32) -> Option<Kind> {
        use Kind::*;
        Some(match c {
            0 => Str,
            1 => Byte,
            2 => Short,
            3 => Int,
            4 => Float,
            5 => Cplx,
            6 => Double,
            7 => Dcplx,
            8 => Long,
            9 => Ushort,
            10 => Uint,
            11 => Ulong,
            _ => return None,
        })
    }

    /// Size of the scalar a byte swap works on, in this process.
    pub fn unit(self) -> usize {
        use Kind::*;
        match self {
            Str | Byte => 1,
            Short | Ushort => 2,
            Int | Uint | Float | Cplx => 4,
            Double | Dcplx => 8,
            Long | Ulong => std::mem::size_of::<libc::c_long>(),
        }
    }

    /// Scalars per element (complex numbers have two).
    pub fn scalars(self) -> usize {
        match self {
            Kind::Cplx | Kind::Dcplx => 2,
            _ => 1,
        }
    }

    pub fn elem_size(self) -> usize {
        self.unit() * self.scalars()
    }

    /// Kinds whose runs unpack into each other unchanged (PVM lets a
    /// program pack `int` and unpack `unsigned int`, as XDR does).
    fn family(self) -> u8 {
        use Kind::*;
        match self {
            Str => 0,
            Byte => 1,
            Short | Ushort => 2,
            Int | Uint => 3,
            Long | Ulong => 4,
            Float => 5,
            Double => 6,
            Cplx => 7,
            Dcplx => 8,
        }
    }
}

/// Byte order of packed data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    Little = 0,
    Big = 1,
}

impl Order {
    pub const NATIVE: Order = if cfg!(target_endian = "big") {
        Order::Big
    } else {
        Order::Little
    };
}

pub const RUN_HEADER: usize = 8;

/// A part of an outgoing message: bytes in the buffer, or (`PvmDataInPlace`)
/// the user's own memory, read only when the message is sent.
#[derive(Debug, Clone, Copy)]
pub enum Part {
    Copied { start: usize, end: usize },
    InPlace { ptr: *const u8, len: usize },
}

/// One message buffer, being packed or being read.
#[derive(Debug)]
pub struct Buffer {
    pub encoding: i32,
    /// Order to pack in: native, except in tests that play a foreign sender.
    pub order: Order,
    pub data: Vec<u8>,
    /// Where the message starts in `data` (a received buffer may be the
    /// runtime's reassembly buffer, headers in front); 0 otherwise.
    base: usize,
    /// Only for `PvmDataInPlace`: the message is these parts in order.
    pub parts: Vec<Part>,
    /// Where reading continues, and what is left of the current run.
    pos: usize,
    run: Option<RunState>,
    /// For received buffers: who sent it, with which tag and context.
    pub src: i32,
    pub tag: i32,
    pub ctx: i32,
    /// The wait id (`pvm_setmwid`), carried with the message; 0 = none.
    pub wid: i32,
    /// The destination (`pvm_getminfo`): this task for a received
    /// message, the last destination for one sent, or what
    /// `pvm_setminfo` set.
    pub dst: i32,
}

// SAFETY: the only pointers in a buffer are `Part::InPlace` ones, which the
// packing thread records and only `Task::send` reads, under the buffer
// table's lock; received buffers (the ones handlers move between threads)
// hold none.
unsafe impl Send for Buffer {}

#[derive(Debug, Clone, Copy)]
struct RunState {
    kind: u8,
    order: Order,
    unit: usize,
    left: usize,
}

impl Buffer {
    pub fn new(encoding: i32) -> Buffer {
        Buffer {
            encoding,
            order: Order::NATIVE,
            data: Vec::new(),
            base: 0,
            parts: Vec::new(),
            pos: 0,
            run: None,
            src: -1,
            tag: -1,
            ctx: 0,
            wid: 0,
            dst: -1,
        }
    }

    /// A received message body, ready to unpack.
    pub fn received(data: Vec<u8>, src: i32, tag: i32, ctx: i32, encoding: i32) -> Buffer {
        Buffer::received_at(data, 0, src, tag, ctx, encoding)
    }

    /// A received message body that is `data[base..]` (clamped to `data`).
    pub fn received_at(
        data: Vec<u8>,
        base: usize,
        src: i32,
        tag: i32,
        ctx: i32,
        encoding: i32,
    ) -> Buffer {
        let base = base.min(data.len());
        Buffer {
            data,
            base,
            pos: base,
            src,
            tag,
            ctx,
            ..Buffer::new(encoding)
        }
    }

    /// The message's bytes when it has no in-place parts (the parts say
    /// what to send otherwise).
    pub fn body(&self) -> &[u8] {
        &self.data[self.base..]
    }

    /// Bytes the message occupies when sent.
    pub fn len(&self) -> usize {
        if self.parts.is_empty() {
            self.data.len() - self.base
        } else {
            self.parts
                .iter()
                .map(|p| match *p {
                    Part::Copied { start, end } => end - start,
                    Part::InPlace { len, .. } => len,
                })
                .sum()
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn in_place(&self) -> bool {
        self.encoding == PVM_DATA_IN_PLACE
    }

    fn header(&mut self, kind: Kind, unit: usize, count: usize) {
        let start = self.data.len();
        self.data.push(kind as u8);
        self.data.push(self.order as u8);
        self.data.push(unit as u8);
        self.data.push(0);
        self.data.extend_from_slice(&(count as u32).to_le_bytes());
        if self.in_place() {
            self.copied(start);
        }
    }

    /// Records bytes appended from `start` as a copied part (in place mode).
    fn copied(&mut self, start: usize) {
        let end = self.data.len();
        if let Some(Part::Copied { end: e, .. }) = self.parts.last_mut() {
            if *e == start {
                *e = end;
                return;
            }
        }
        self.parts.push(Part::Copied { start, end });
    }

    /// Packs `count` elements of `kind` from `src`, every `stride`-th one.
    ///
    /// # Safety
    /// `src` must point to `(count - 1) * stride + 1` readable elements of
    /// `kind`; in place mode they must stay valid and unchanged until the
    /// message is sent.
    pub unsafe fn pack(&mut self, kind: Kind, src: *const u8, count: i32, stride: i32) -> i32 {
        if count < 0 || stride < 1 || (count > 0 && src.is_null()) {
            return PVM_BAD_PARAM;
        }
        let (n, es) = (count as usize, kind.elem_size());
        if n > (u32::MAX as usize) || n.checked_mul(es * stride as usize).is_none() {
            return PVM_OVERFLOW;
        }
        self.header(kind, kind.unit(), n);
        if n == 0 {
            return PVM_OK;
        }
        if stride == 1 && self.in_place() && self.order == Order::NATIVE {
            self.parts.push(Part::InPlace {
                ptr: src,
                len: n * es,
            });
            return PVM_OK;
        }
        let start = self.data.len();
        if stride == 1 {
            // SAFETY: the caller guarantees n * es readable bytes at src.
            self.data
                .extend_from_slice(unsafe { std::slice::from_raw_parts(src, n * es) });
        } else {
            for i in 0..n {
                // SAFETY: element i * stride is within what the caller guarantees.
                let e =
                    unsafe { std::slice::from_raw_parts(src.add(i * stride as usize * es), es) };
                self.data.extend_from_slice(e);
            }
        }
        if self.order != Order::NATIVE {
            swap_units(&mut self.data[start..], kind.unit());
        }
        if self.in_place() {
            self.copied(start);
        }
        PVM_OK
    }

    /// Packs a NUL-terminated string (its NUL included).
    pub fn pack_str(&mut self, s: &[u8]) -> i32 {
        self.header(Kind::Str, 1, s.len() + 1);
        let start = self.data.len();
        self.data.extend_from_slice(s);
        self.data.push(0);
        if self.in_place() {
            self.copied(start);
        }
        PVM_OK
    }

    fn next_run(&mut self) -> Result<RunState, i32> {
        let h = self
            .data
            .get(self.pos..self.pos + RUN_HEADER)
            .ok_or(PVM_NO_DATA)?;
        let order = match h[1] {
            0 => Order::Little,
            1 => Order::Big,
            _ => return Err(PVM_BAD_MSG),
        };
        let unit = h[2] as usize;
        let count = u32::from_le_bytes(h[4..8].try_into().unwrap()) as usize;
        let kind = Kind::from_code(h[0] as i32).ok_or(PVM_BAD_MSG)?;
        if !matches!(unit, 1 | 2 | 4 | 8) {
            return Err(PVM_BAD_MSG);
        }
        let bytes = count
            .checked_mul(unit * kind.scalars())
            .ok_or(PVM_BAD_MSG)?;
        if self.data.len() - (self.pos + RUN_HEADER) < bytes {
            return Err(PVM_BAD_MSG);
        }
        self.pos += RUN_HEADER;
        Ok(RunState {
            kind: h[0],
            order,
            unit,
            left: count,
        })
    }

    /// Unpacks `count` elements of `kind` into `dst`, every `stride`-th
    /// slot; they may span several packed runs of a compatible kind.
    ///
    /// # Safety
    /// `dst` must point to `(count - 1) * stride + 1` writable elements of `kind`.
    pub unsafe fn unpack(&mut self, kind: Kind, dst: *mut u8, count: i32, stride: i32) -> i32 {
        if count < 0 || stride < 1 || (count > 0 && dst.is_null()) {
            return PVM_BAD_PARAM;
        }
        let (n, es, unit) = (count as usize, kind.elem_size(), kind.unit());
        let mut done = 0;
        while done < n {
            let run = match self.run.filter(|r| r.left > 0) {
                Some(r) => r,
                None => match self.next_run() {
                    Ok(r) => r,
                    Err(e) => return e,
                },
            };
            let run_kind = Kind::from_code(run.kind as i32).expect("checked in next_run");
            if run_kind == Kind::Str || run_kind.family() != kind.family() || run.unit != unit {
                self.run = Some(run);
                return PVM_BAD_MSG;
            }
            let take = run.left.min(n - done);
            let src = &self.data[self.pos..self.pos + take * es];
            if stride == 1 && run.order == Order::NATIVE {
                // The common case in one copy.
                // SAFETY: slots done..done + take are within what the caller guarantees.
                unsafe {
                    std::ptr::copy_nonoverlapping(src.as_ptr(), dst.add(done * es), take * es)
                };
                self.pos += take * es;
                done += take;
                self.run = Some(RunState {
                    left: run.left - take,
                    ..run
                });
                continue;
            }
            for i in 0..take {
                let e = &src[i * es..(i + 1) * es];
                // SAFETY: slot done + i is within what the caller guarantees.
                let out = unsafe {
                    std::slice::from_raw_parts_mut(dst.add((done + i) * stride as usize * es), es)
                };
                out.copy_from_slice(e);
                if run.order != Order::NATIVE {
                    swap_units(out, unit);
                }
            }
            self.pos += take * es;
            done += take;
            self.run = Some(RunState {
                left: run.left - take,
                ..run
            });
        }
        PVM_OK
    }

    /// Unpacks a string packed by `pack_str` into `dst` (NUL included).
    ///
    /// # Safety
    /// `dst` must have room for the string (PVM's contract: the caller knows).
    pub unsafe fn unpack_str(&mut self, dst: *mut u8) -> i32 {
        if dst.is_null() {
            return PVM_BAD_PARAM;
        }
        if self.run.is_some_and(|r| r.left > 0) {
            return PVM_BAD_MSG;
        }
        let run = match self.next_run() {
            Ok(r) => r,
            Err(e) => return e,
        };
        if run.kind != Kind::Str as u8 || run.left == 0 {
            self.pos -= RUN_HEADER;
            return PVM_BAD_MSG;
        }
        let s = &self.data[self.pos..self.pos + run.left];
        // A hostile sender may leave out the NUL: always terminate.
        let body = s.split(|&b| b == 0).next().unwrap_or(&[]);
        // SAFETY: the caller guarantees room for the packed string.
        unsafe {
            std::ptr::copy_nonoverlapping(body.as_ptr(), dst, body.len());
            *dst.add(body.len()) = 0;
        }
        self.pos += run.left;
        self.run = None;
        PVM_OK
    }

    /// Elements in the first packed run (what `pvm_precv` reports).
    pub fn first_run_len(&self) -> usize {
        self.data
            .get(self.base + 4..self.base + 8)
            .map_or(0, |c| u32::from_le_bytes(c.try_into().unwrap()) as usize)
    }

    /// Packs `bytes` as one byte run, copied even in place mode (the
    /// caller's slice does not outlive the call).
    pub fn append_body(&mut self, bytes: &[u8]) -> i32 {
        if bytes.len() > u32::MAX as usize {
            return PVM_OVERFLOW;
        }
        self.header(Kind::Byte, 1, bytes.len());
        self.append_runs(bytes);
        PVM_OK
    }

    /// Appends packed runs (another message's body, `pvm_pkmesgbody`):
    /// they describe themselves, so they unpack like runs packed here.
    pub fn append_runs(&mut self, runs: &[u8]) {
        let start = self.data.len();
        self.data.extend_from_slice(runs);
        if self.in_place() {
            self.copied(start);
        }
    }

    /// Bytes not read yet (an upper bound for what a run may announce).
    pub fn unread(&self) -> usize {
        self.data.len() - self.pos
    }

    /// Rewinds reading to the start (a buffer received again by `setrbuf`).
    pub fn rewind(&mut self) {
        self.pos = self.base;
        self.run = None;
    }
}

fn swap_units(b: &mut [u8], unit: usize) {
    if unit > 1 {
        for c in b.chunks_exact_mut(unit) {
            c.reverse();
        }
    }
}

#[cfg(test)]
mod tests;
