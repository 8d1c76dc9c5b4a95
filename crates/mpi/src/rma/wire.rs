//! The wire format of one-sided messages (all little-endian).
//!
//! Every message starts with a 16-byte header: kind, three argument bytes
//! (operation, basic type, lock type or answer status), the window id and
//! the origin's operation id. Data operations follow it with the target
//! layout: displacement (in the target's units), element count, extent of
//! the target datatype, its number of blocks, then the blocks (offset,
//! length) of one element; then the packed data, if the operation carries any.
//! The origin never sends an address to write at: the target computes every
//! address from its own base, displacement unit and attached regions.

use crate::datatype::{Basic, Block, Datatype};
use crate::error::{class, err, Result};
use crate::op::Op;

pub const PUT: u8 = 1;
pub const GET: u8 = 2;
pub const ACC: u8 = 3;
pub const GET_ACC: u8 = 4;
pub const CAS: u8 = 5;
pub const LOCK: u8 = 6;
pub const UNLOCK: u8 = 7;
pub const POST: u8 = 8;
pub const COMPLETE: u8 = 9;
pub const ANSWER: u8 = 10;
/// A `PUT`'s or `GET`'s `arg` when the sender's `MPI_Win_complete` rides
/// on it: the target applies (and answers) it, then counts the complete
/// (`fast_request::HeldPut`).
pub const THEN_COMPLETE: u8 = 1;

pub const HEADER: usize = 16;
const LAYOUT_FIXED: usize = 32;

/// Most blocks one target datatype element may have on the wire, and most
/// (element, block) pieces one operation may touch: bounds on the work a
/// peer's message can cost the target.
pub const MAX_BLOCKS: usize = 1 << 20;
pub const MAX_PIECES: u64 = 1 << 26;
/// Most bytes one get may ask for (its answer is built in memory).
pub const MAX_GET_BYTES: u64 = 1 << 30;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub kind: u8,
    pub op: u8,
    pub basic: u8,
    /// Lock type (1 = exclusive) for `LOCK`, error class (0 = success) for `ANSWER`.
    pub arg: u8,
    pub win: u32,
    pub op_id: u64,
}

impl Header {
    /// The header of the `ANSWER` to operation `self`, with error class
    /// `status` (0: success).
    pub fn answer(&self, status: u8) -> Header {
        Header {
            kind: ANSWER,
            op: 0,
            basic: 0,
            arg: status,
            win: self.win,
            op_id: self.op_id,
        }
    }

    pub fn encode(&self) -> [u8; HEADER] {
        let mut b = [0u8; HEADER];
        b[0] = self.kind;
        b[1] = self.op;
        b[2] = self.basic;
        b[3] = self.arg;
        b[4..8].copy_from_slice(&self.win.to_le_bytes());
        b[8..16].copy_from_slice(&self.op_id.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8]) -> Option<(Header, &[u8])> {
        if b.len() < HEADER {
            return None;
        }
        Some((
            Header {
                kind: b[0],
                op: b[1],
                basic: b[2],
                arg: b[3],
                win: u32::from_le_bytes(b[4..8].try_into().ok()?),
                op_id: u64::from_le_bytes(b[8..16].try_into().ok()?),
            },
            &b[HEADER..],
        ))
    }
}

/// Where an operation lands at the target, as the origin described it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub disp: i64,
    pub count: u64,
    pub extent: i64,
    pub blocks: Vec<Block>,
}

impl Layout {
    /// A contiguous access is one piece, whatever the count.
    pub fn of(disp: i64, count: usize, dt: &Datatype) -> Layout {
        if dt.contig {
            let len = count * dt.size;
            return Layout {
                disp,
                count: 1,
                extent: len as i64,
                blocks: vec![Block {
                    off: dt.true_lb,
                    len,
                }],
            };
        }
        Layout {
            disp,
            count: count as u64,
            extent: dt.extent as i64,
            blocks: dt.blocks.clone(),
        }
    }

    /// Packed bytes of the whole access.
    pub fn bytes(&self) -> Option<u64> {
        let per: u64 = self.blocks.iter().map(|b| b.len as u64).sum();
        per.checked_mul(self.count)
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(LAYOUT_FIXED + 16 * self.blocks.len());
        v.extend_from_slice(&self.disp.to_le_bytes());
        v.extend_from_slice(&self.count.to_le_bytes());
        v.extend_from_slice(&self.extent.to_le_bytes());
        v.extend_from_slice(&(self.blocks.len() as u64).to_le_bytes());
        for b in &self.blocks {
            v.extend_from_slice(&(b.off as i64).to_le_bytes());
            v.extend_from_slice(&(b.len as u64).to_le_bytes());
        }
        v
    }

    /// The layout at the start of `b` and the rest (the data). Every field
    /// is the peer's word: the block count is bounded before anything is
    /// allocated, and lengths must fit the address space.
    pub fn decode(b: &[u8]) -> std::result::Result<(Layout, &[u8]), String> {
        let u64_at = |i: usize| -> std::result::Result<u64, String> {
            b.get(i..i + 8)
                .map(|s| u64::from_le_bytes(s.try_into().unwrap()))
                .ok_or_else(|| "the layout is cut short".to_string())
        };
        let disp = u64_at(0)? as i64;
        let count = u64_at(8)?;
        let extent = u64_at(16)? as i64;
        let n = u64_at(24)?;
        if n > MAX_BLOCKS as u64 {
            return Err(format!("{n} blocks per element (at most {MAX_BLOCKS})"));
        }
        let n = n as usize;
        let end = LAYOUT_FIXED + 16 * n;
        if b.len() < end {
            return Err("the layout's blocks are cut short".into());
        }
        let mut blocks = Vec::with_capacity(n);
        for i in 0..n {
            let off = u64_at(LAYOUT_FIXED + 16 * i)? as i64;
            let len = u64_at(LAYOUT_FIXED + 16 * i + 8)?;
            let (Ok(off), Ok(len)) = (isize::try_from(off), isize::try_from(len)) else {
                return Err("a block does not fit the address space".into());
            };
            blocks.push(Block {
                off,
                len: len as usize,
            });
        }
        if count.checked_mul(n as u64).is_none_or(|p| p > MAX_PIECES) {
            return Err(format!(
                "{count} elements of {n} blocks (at most {MAX_PIECES} pieces)"
            ));
        }
        Ok((
            Layout {
                disp,
                count,
                extent,
                blocks,
            },
            &b[end..],
        ))
    }
}

/// Bytes of the layout of one piece ([`encode_one_piece`]).
pub const ONE_PIECE: usize = LAYOUT_FIXED + 16;

/// The layout of an access that is one piece (`len` bytes at block offset
/// `off` of the element at `disp`): what [`Layout::of`] encodes for every
/// contiguous target datatype, byte for byte, built on the stack.
pub fn encode_one_piece(disp: i64, off: isize, len: usize) -> [u8; ONE_PIECE] {
    let mut v = [0u8; ONE_PIECE];
    v[..8].copy_from_slice(&disp.to_le_bytes());
    v[8..16].copy_from_slice(&1u64.to_le_bytes());
    v[16..24].copy_from_slice(&(len as i64).to_le_bytes());
    v[24..32].copy_from_slice(&1u64.to_le_bytes());
    v[32..40].copy_from_slice(&(off as i64).to_le_bytes());
    v[40..48].copy_from_slice(&(len as u64).to_le_bytes());
    v
}

/// A layout of one element of one block, read without allocating:
/// (displacement, block offset, block length, the rest of the message).
/// None for any other layout (and for one that is cut short or does not
/// fit the address space): [`Layout::decode`] reads and judges those.
pub fn decode_one_piece(b: &[u8]) -> Option<(i64, isize, usize, &[u8])> {
    let u64_at =
        |i: usize| -> Option<u64> { Some(u64::from_le_bytes(b.get(i..i + 8)?.try_into().ok()?)) };
    if u64_at(8)? != 1 || u64_at(24)? != 1 {
        return None;
    }
    let off = isize::try_from(u64_at(32)? as i64).ok()?;
    let len = isize::try_from(u64_at(40)?).ok()? as usize;
    Some((u64_at(0)? as i64, off, len, b.get(ONE_PIECE..)?))
}

const OPS: [Op; 14] = [
    Op::Sum,
    Op::Min,
    Op::Max,
    Op::Prod,
    Op::Band,
    Op::Bor,
    Op::Bxor,
    Op::Land,
    Op::Lor,
    Op::Lxor,
    Op::MinLoc,
    Op::MaxLoc,
    Op::Replace,
    Op::NoOp,
];

/// The wire code of a predefined operation (user operations are not allowed in one-sided calls).
pub fn op_code(op: &Op) -> Result<u8> {
    OPS.iter()
        .position(|o| std::mem::discriminant(o) == std::mem::discriminant(op))
        .filter(|_| !matches!(op, Op::User { .. }))
        .map(|i| i as u8 + 1)
        .ok_or_else(|| {
            err(
                class::OP,
                "one-sided accumulate operations take predefined operations only",
            )
        })
}

pub fn op_of(code: u8) -> Option<Op> {
    OPS.get((code as usize).checked_sub(1)?).cloned()
}

const BASICS: [Basic; 27] = [
    Basic::I8,
    Basic::I16,
    Basic::I32,
    Basic::I64,
    Basic::U8,
    Basic::U16,
    Basic::U32,
    Basic::U64,
    Basic::F32,
    Basic::F64,
    Basic::LongDouble,
    Basic::C32,
    Basic::C64,
    Basic::CLongDouble,
    Basic::Bool,
    Basic::Byte,
    Basic::Char,
    Basic::Packed,
    Basic::FloatInt,
    Basic::DoubleInt,
    Basic::LongInt,
    Basic::TwoInt,
    Basic::ShortInt,
    Basic::LongDoubleInt,
    Basic::TwoF32,
    Basic::TwoF64,
    Basic::TwoI32,
];

/// The wire code of a basic type: its index in `BASICS` plus one, or
/// 100 + n / 150 + n for the sized opaque floats and logicals.
pub fn basic_code(b: Basic) -> u8 {
    match b {
        Basic::OpaqueFloat(n) => 100u8.saturating_add(n.min(40)),
        Basic::Logical(n) => 150u8.saturating_add(n.min(40)),
        _ => BASICS
            .iter()
            .position(|x| *x == b)
            .map_or(0, |i| i as u8 + 1),
    }
}

pub fn basic_of(code: u8) -> Option<Basic> {
    match code {
        0 => None,
        101..=132 => Some(Basic::OpaqueFloat(code - 100)),
        151..=182 => Some(Basic::Logical(code - 150)),
        c => BASICS.get(c as usize - 1).copied(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for b in BASICS
            .iter()
            .copied()
            .chain([Basic::OpaqueFloat(2), Basic::Logical(4)])
        {
            assert_eq!(basic_of(basic_code(b)), Some(b));
        }
        for o in OPS.iter() {
            assert_eq!(
                std::mem::discriminant(&op_of(op_code(o).unwrap()).unwrap()),
                std::mem::discriminant(o)
            );
        }
        assert_eq!(op_of(0).map(|_| ()), None);
        assert_eq!(basic_of(200), None);
    }

    #[test]
    fn one_piece_layouts_are_the_general_encoding() {
        for (disp, off, len) in [(0i64, 0isize, 8usize), (-5, 3, 4096), (i64::MAX, -8, 1)] {
            let general = Layout {
                disp,
                count: 1,
                extent: len as i64,
                blocks: vec![Block { off, len }],
            };
            let mut w = encode_one_piece(disp, off, len).to_vec();
            assert_eq!(w, general.encode());
            w.extend_from_slice(b"xy");
            assert_eq!(decode_one_piece(&w), Some((disp, off, len, &b"xy"[..])));
            let (back, rest) = Layout::decode(&w).unwrap();
            assert_eq!((back, rest), (general, &b"xy"[..]));
        }
        // Two blocks, two elements, or cut short: not one piece.
        let two = Layout {
            disp: 0,
            count: 1,
            extent: 16,
            blocks: vec![Block { off: 0, len: 4 }, Block { off: 8, len: 4 }],
        };
        assert_eq!(decode_one_piece(&two.encode()), None);
        let mut many = encode_one_piece(0, 0, 8);
        many[8..16].copy_from_slice(&2u64.to_le_bytes());
        assert_eq!(decode_one_piece(&many), None);
        assert_eq!(decode_one_piece(&encode_one_piece(0, 0, 8)[..40]), None);
        let mut huge = encode_one_piece(0, 0, 8);
        huge[40..48].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(decode_one_piece(&huge), None);
    }

    #[test]
    fn layout_round_trips_and_bounds_blocks() {
        let l = Layout {
            disp: 3,
            count: 2,
            extent: 16,
            blocks: vec![Block { off: 0, len: 4 }, Block { off: 8, len: 4 }],
        };
        let mut w = l.encode();
        w.extend_from_slice(b"data");
        let (back, rest) = Layout::decode(&w).unwrap();
        assert_eq!(back, l);
        assert_eq!(rest, b"data");
        let mut huge = l.encode();
        huge[24..32].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(Layout::decode(&huge).is_err());
        assert!(Layout::decode(&w[..40]).is_err());
    }
}
