//! Reduce and Allreduce through the segment, piece by piece: each piece
//! (whole elements, at most a buffer's room) is one segment call. Every
//! member combines in rank order, a0 op (a1 op (… op a(n-1))), with
//! `apply(in, inout)` computing inout = in op inout, so the result is the
//! same bits on every member and non-commutative operations keep MPI's
//! order.
//!
//! The data is read where it lies and the result built where it goes: a
//! contiguous send buffer is published straight from the user's memory and
//! a contiguous receive buffer is the accumulator, so a 2-rank Allreduce
//! copies each piece once into the segment and once out of it, then
//! combines. Other layouts go through packed copies (on the stack when
//! small). A member's data read from the segment is first copied into
//! process memory: the operation never reads memory another process can
//! write.

use super::{fetch_raw, publish_raw, Room, SmSeg};
use crate::error::{class, err, Result};
use crate::mem;
use crate::request::Buf;
use crate::{Comm, Mpi, Op};

impl Mpi {
    /// `MPI_Allreduce` (`root` None) or `MPI_Reduce` to `root` of `src`
    /// into `recv` (read at the root only for a reduce), through the
    /// segment.
    pub(crate) fn sm_reduce(
        &self,
        comm: &Comm,
        seg: &SmSeg,
        src: &Buf,
        recv: &Buf,
        op: &Op,
        root: Option<u32>,
    ) -> Result<()> {
        let me = comm.rank as usize;
        let len = src.bytes();
        let reader = root.is_none_or(|r| r as usize == me);
        if len == 0 {
            // Every member sees 0 bytes: nothing to combine, no call.
            return Ok(());
        }
        if reader && recv.bytes() < len {
            // Still take part (the others wait for this member), then fail.
            let mut sink = Room::new(len);
            let sink_addr = sink.bytes().as_mut_ptr() as usize;
            let mut packed = Room::new(len);
            src.pack_into(packed.bytes());
            let src_addr = packed.bytes().as_ptr() as usize;
            // SAFETY: both rooms are ours, `len` bytes, and not borrowed
            // while the call writes `sink` through its address.
            unsafe { self.sm_reduce_raw(comm, seg, src_addr, sink_addr, false, src, op, root)? };
            return Err(err(
                class::TRUNCATE,
                format!(
                    "reduction of {len} bytes into a receive buffer of {}",
                    recv.bytes()
                ),
            ));
        }
        let src_contig = src.contig_addr();
        let recv_contig = recv
            .contig_addr()
            .filter(|_| reader && recv.writable() && recv.bytes() == len);
        // In place: the receive buffer holds this member's data.
        let in_place = src_contig.is_some() && src_contig == recv.contig_addr();
        // A send buffer that overlaps the receive buffer otherwise (MPI
        // forbids it) is read from a packed copy.
        let overlaps = match (src_contig, recv_contig) {
            (Some(s), Some(r)) if !in_place => s < r + len && r < s + len,
            _ => false,
        };
        let mut packed_src = None;
        let src_addr = match src_contig {
            Some(a) if !overlaps => a,
            _ => {
                let mut p = Room::new(len);
                src.pack_into(p.bytes());
                packed_src.insert(p).bytes().as_ptr() as usize
            }
        };
        let in_place = in_place && packed_src.is_none() && recv_contig.is_some();
        let mut acc_room = None;
        let acc_addr = match recv_contig {
            Some(a) => a,
            None => acc_room.insert(Room::new(len)).bytes().as_mut_ptr() as usize,
        };
        // SAFETY: `src_addr` is this call's send data (the user's contiguous
        // buffer or a packed copy), `acc_addr` its writable result (the
        // user's contiguous receive buffer or a room), `len` bytes each;
        // they coincide only in place, and nothing else borrows them
        // during the call.
        unsafe { self.sm_reduce_raw(comm, seg, src_addr, acc_addr, in_place, src, op, root)? };
        if let Some(mut r) = acc_room {
            if reader {
                recv.unpack(r.bytes());
            }
        }
        Ok(())
    }

    /// The pieces of [`Mpi::sm_reduce`] over packed bytes: `src` this
    /// member's data, `acc` where the result goes (the reader's; equal to
    /// `src` in place).
    ///
    /// # Safety
    /// `src` readable and `acc` writable for `src_buf.bytes()` bytes, not
    /// otherwise accessed during the call; distinct unless `in_place`.
    #[allow(clippy::too_many_arguments)]
    unsafe fn sm_reduce_raw(
        &self,
        comm: &Comm,
        seg: &SmSeg,
        src: usize,
        acc: usize,
        in_place: bool,
        src_buf: &Buf,
        op: &Op,
        root: Option<u32>,
    ) -> Result<()> {
        let me = comm.rank as usize;
        let members = seg.members;
        let last = members - 1;
        let len = src_buf.bytes();
        let esize = src_buf.dt.size;
        let reader = root.is_none_or(|r| r as usize == me);
        let publisher = root.is_none() || !reader;
        let per = (seg.room() / esize).max(1);
        // A member's piece copied out of the segment, and (in place, when
        // this member is not the last) its own piece saved before the
        // last member's data lands on it.
        let piece = (per * esize).min(len);
        let mut theirs = Room::new(if reader && members > 1 { piece } else { 0 });
        let mut saved = Room::new(if reader && in_place && me != last {
            piece
        } else {
            0
        });
        let mut bad = None;
        let mut off = 0;
        while off < len {
            let k = per.min((len - off) / esize);
            let plen = k * esize;
            let gen = self.sm_begin(comm, seg, me)?;
            if publisher {
                // SAFETY: `plen` bytes of this member's data at `off`
                // (caller's contract).
                unsafe { publish_raw(seg, me, gen, (src + off) as *const u8, plen) };
            }
            if reader {
                // SAFETY: the caller's contract: `acc` is writable and not
                // otherwise accessed; `src` (when not in place) readable
                // and distinct from it.
                let out = unsafe { mem::slice_mut(acc + off, plen) };
                if in_place && me != last {
                    saved.bytes()[..plen].copy_from_slice(out);
                }
                for m in (0..members).rev() {
                    let mine: &[u8] = if m != me {
                        &[]
                    } else if in_place && me != last {
                        &saved.bytes()[..plen]
                    } else {
                        // SAFETY: as above; not in place, `src` is not `acc`.
                        unsafe { mem::slice(src + off, plen) }
                    };
                    if m == me {
                        if m == last {
                            if !in_place {
                                out.copy_from_slice(mine);
                            }
                        } else {
                            op.apply(&src_buf.dt, k, mine, out);
                        }
                        continue;
                    }
                    self.sm_wait(comm, seg.ready(m, gen), gen, m)?;
                    let into: &mut [u8] = if m == last {
                        &mut *out
                    } else {
                        &mut theirs.bytes()[..plen]
                    };
                    // SAFETY: a slice of our own memory, `plen` bytes.
                    let got = unsafe { fetch_raw(seg, m, gen, into.as_mut_ptr(), plen) };
                    if got != Some(plen) {
                        bad.get_or_insert(got);
                        continue;
                    }
                    if m != last {
                        op.apply(&src_buf.dt, k, &theirs.bytes()[..plen], out);
                    }
                }
            }
            seg.end(me, gen);
            off += plen;
        }
        match bad {
            Some(got) => Err(super::ops::mismatch("reduction", got, piece)),
            None => Ok(()),
        }
    }
}
