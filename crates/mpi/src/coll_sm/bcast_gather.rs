//! Bcast and Allgather through the segment, in pieces of a buffer's room
//! (one piece for a small call): one segment call per piece, so a writer
//! fills one of its two buffers while the readers copy out of the other.
//! Contiguous user buffers are read and written where they lie: two
//! copies per byte, against three for an eager message (into the ring, out
//! of it into a temporary, into the user's buffer). Other layouts go
//! through a packed copy (on the stack when small).
//!
//! Every member counts the same pieces (the sizes agree), so the calls'
//! numbers stay in step. A member that finds a piece of the wrong size goes
//! on taking part in the remaining pieces (the others would wait for it
//! forever otherwise) and reports the error at the end.

use super::{fetch_raw, publish_raw, Room, SmSeg};
use crate::coll::block;
use crate::error::Result;
use crate::request::Buf;
use crate::{Comm, Mpi};

impl Mpi {
    /// `MPI_Bcast` of `buf` from `root`.
    pub(crate) fn sm_bcast(&self, comm: &Comm, seg: &SmSeg, buf: &Buf, root: u32) -> Result<()> {
        let me = comm.rank as usize;
        let root = root as usize;
        let len = buf.bytes();
        // A contiguous buffer is read or written in place; another goes
        // through a packed copy.
        let direct = buf.contig_addr().filter(|_| me == root || buf.writable());
        let mut packed = Room::new(if direct.is_some() { 0 } else { len });
        if direct.is_none() && me == root {
            buf.pack_into(packed.bytes());
        }
        let base = match direct {
            Some(a) => a,
            None => packed.bytes().as_mut_ptr() as usize,
        };
        let mut bad = None;
        let mut off = 0;
        while off < len {
            let n = seg.room().min(len - off);
            let gen = self.sm_begin(comm, seg, me)?;
            if me == root {
                // SAFETY: `n` bytes of the (packed or contiguous user)
                // buffer at `off < len`, readable for this call.
                unsafe { publish_raw(seg, me, gen, (base + off) as *const u8, n) };
            } else {
                self.sm_wait(comm, seg.ready(root, gen), gen, root)?;
                // SAFETY: `n` bytes of the (packed or contiguous writable
                // user) buffer at `off < len`, not borrowed meanwhile.
                let got = unsafe { fetch_raw(seg, root, gen, (base + off) as *mut u8, n) };
                if got != Some(n) && bad.is_none() {
                    bad = Some(got);
                }
            }
            seg.end(me, gen);
            off += n;
        }
        if let Some(got) = bad {
            return Err(super::ops::mismatch("MPI_Bcast", got, seg.room().min(len)));
        }
        if direct.is_none() && me != root {
            buf.unpack(packed.bytes());
        }
        Ok(())
    }

    /// `MPI_Allgather` into `recv` (`recv.count` elements per member) from
    /// `send`, or from this member's block (`MPI_IN_PLACE`).
    pub(crate) fn sm_allgather(
        &self,
        comm: &Comm,
        seg: &SmSeg,
        send: Option<&Buf>,
        recv: &Buf,
    ) -> Result<()> {
        let me = comm.rank as usize;
        let members = seg.members;
        let own = block(recv, me, recv.count);
        let len = own.bytes();
        // Where each member's block goes: the receive buffer's blocks when
        // its type is contiguous, else a packed copy of all of them.
        let direct = recv.writable() && recv.dt.contig;
        let mut packed = Room::new(if direct { 0 } else { members * len });
        let packed_base = packed.bytes().as_mut_ptr() as usize;
        let dst = |m: usize| match direct {
            true => block(recv, m, recv.count)
                .contig_addr()
                .expect("a contiguous type"),
            false => packed_base + m * len,
        };
        // This member's data, from the send buffer or (in place) its
        // block: where it lies if contiguous, else packed.
        let from = send.unwrap_or(&own);
        let mut mine = Room::new(if from.contig_addr().is_some() { 0 } else { len });
        let src = match from.contig_addr() {
            Some(a) => a,
            None => {
                from.pack_into(mine.bytes());
                mine.bytes().as_ptr() as usize
            }
        };
        if let Some(s) = send {
            match s.contig() {
                Some(c) => own.unpack(c),
                None => own.unpack(mine.bytes()),
            }
        }
        let mut bad = None;
        let mut off = 0;
        while off < len {
            let n = seg.room().min(len - off);
            let gen = self.sm_begin(comm, seg, me)?;
            // SAFETY: `n` bytes of this member's packed or contiguous data
            // at `off < len`, readable for this call.
            unsafe { publish_raw(seg, me, gen, (src + off) as *const u8, n) };
            for m in (0..members).filter(|&m| m != me) {
                self.sm_wait(comm, seg.ready(m, gen), gen, m)?;
                // SAFETY: `n` bytes at `off < len` of member m's block of the
                // receive buffer (contiguous, writable) or of `packed`,
                // neither borrowed meanwhile.
                let got = unsafe { fetch_raw(seg, m, gen, (dst(m) + off) as *mut u8, n) };
                if got != Some(n) && bad.is_none() {
                    bad = Some(got);
                }
            }
            seg.end(me, gen);
            off += n;
        }
        if let Some(got) = bad {
            return Err(super::ops::mismatch(
                "MPI_Allgather",
                got,
                seg.room().min(len),
            ));
        }
        if !direct {
            for m in (0..members).filter(|&m| m != me) {
                block(recv, m, recv.count).unpack(&packed.bytes()[m * len..(m + 1) * len]);
            }
        }
        Ok(())
    }
}
