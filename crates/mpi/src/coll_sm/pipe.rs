//! Bcast and Allgather larger than the small-call limit, up to
//! [`super::PIPE_MAX`], through the segment piece by piece: one segment call
//! per piece of `room()` bytes, so a writer fills one of its two buffers
//! while the readers copy out of the other. Two copies per byte, against
//! three for an eager message (into the ring, out of it into a temporary,
//! into the user's buffer).
//!
//! Every member counts the same pieces (the sizes agree), so the calls'
//! numbers stay in step. A member that finds a piece of the wrong size goes
//! on taking part in the remaining pieces (the others would wait for it
//! forever otherwise) and reports the error at the end.

use super::{fetch_raw, publish_raw, SmSeg};
use crate::coll::block;
use crate::error::Result;
use crate::request::Buf;
use crate::{Comm, Mpi};

impl Mpi {
    /// `MPI_Bcast` of `buf` from `root`, piece by piece.
    pub(crate) fn sm_bcast_pipe(
        &self,
        comm: &Comm,
        seg: &SmSeg,
        buf: &Buf,
        root: u32,
    ) -> Result<()> {
        let me = comm.rank as usize;
        let root = root as usize;
        let len = buf.bytes();
        // A contiguous buffer is read or written in place; another goes
        // through a packed copy.
        let direct = buf.contig_addr().filter(|_| me == root || buf.writable());
        let mut packed = Vec::new();
        let base = match direct {
            Some(a) => a,
            None => {
                packed = if me == root {
                    buf.pack()
                } else {
                    vec![0u8; len]
                };
                packed.as_mut_ptr() as usize
            }
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
            buf.unpack(&packed);
        }
        Ok(())
    }

    /// `MPI_Allgather` into `recv` (`recv.count` elements per member) from
    /// `send`, or from this member's block (`MPI_IN_PLACE`), piece by piece.
    pub(crate) fn sm_allgather_pipe(
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
        let mut packed = Vec::new();
        if !direct {
            packed = vec![0u8; members * len];
        }
        let packed_base = packed.as_mut_ptr() as usize;
        let dst = |m: usize| match direct {
            true => block(recv, m, recv.count)
                .contig_addr()
                .expect("a contiguous type"),
            false => packed_base + m * len,
        };
        // This member's data: in place, the send buffer, or packed.
        let mine_packed;
        let src = match send {
            None => match own.contig_addr() {
                Some(a) => a,
                None => {
                    mine_packed = own.pack();
                    mine_packed.as_ptr() as usize
                }
            },
            Some(s) => {
                match s.contig() {
                    Some(c) => own.unpack(c),
                    None => own.unpack(&s.pack()),
                }
                match own.contig_addr() {
                    Some(a) => a,
                    None => {
                        mine_packed = own.pack();
                        mine_packed.as_ptr() as usize
                    }
                }
            }
        };
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
                block(recv, m, recv.count).unpack(&packed[m * len..(m + 1) * len]);
            }
        }
        Ok(())
    }
}
