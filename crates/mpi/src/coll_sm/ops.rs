//! The small collectives over a communicator's segment, in one call each
//! (see `mod.rs` for the protocol; reductions are in `reduce.rs`).
//! Contiguous user buffers are copied straight to and from the segment;
//! other layouts pass through stack buffers of `N` bytes, sized by the call
//! (64, 512 or [`MAX_BYTES`]: zeroing 12 KiB of stack would cost more than
//! a small call itself).

use super::{fetch, fetch_raw, publish, publish_raw, SmSeg, MAX_BYTES};
use crate::coll::block;
use crate::error::{class, err, MpiError, Result};
use crate::request::Buf;
use crate::{Comm, Mpi};

/// Calls `$f::<N>` with the least stack buffer size `N` that holds `$len`.
macro_rules! sized {
    ($len:expr, $self:ident . $f:ident ( $($arg:expr),* )) => {
        if $len <= 64 {
            $self.$f::<64>($($arg),*)
        } else if $len <= 512 {
            $self.$f::<512>($($arg),*)
        } else {
            $self.$f::<MAX_BYTES>($($arg),*)
        }
    };
}

pub(super) fn mismatch(what: &str, got: Option<usize>, want: usize) -> MpiError {
    match got {
        Some(n) => err(
            class::TRUNCATE,
            format!("{what}: a member contributed {n} bytes where {want} were expected"),
        ),
        None => err(
            class::TRUNCATE,
            format!("{what}: a member contributed more than the {want} bytes expected"),
        ),
    }
}

/// Publishes `buf`'s packed data as member `me`'s of call `gen`: straight
/// from a contiguous buffer, else packed in `scratch` first.
fn put(seg: &SmSeg, me: usize, gen: u64, buf: &Buf, scratch: &mut [u8]) {
    let len = buf.bytes();
    match buf.contig_addr() {
        // SAFETY: the user's buffer of this call, readable for its packed
        // length from the true lower bound (`Buf::new`'s contract).
        Some(a) => unsafe { publish_raw(seg, me, gen, a as *const u8, len) },
        None => {
            buf.pack_into(&mut scratch[..len]);
            publish(seg, me, gen, &scratch[..len]);
        }
    }
}

/// Copies member `m`'s data of call `gen` into `buf` (at most its packed
/// length): straight into a contiguous writable buffer, else through
/// `scratch`. Its length, or None if it does not fit.
fn get(seg: &SmSeg, m: usize, gen: u64, buf: &Buf, scratch: &mut [u8]) -> Option<usize> {
    let len = buf.bytes();
    match buf.contig_addr().filter(|_| buf.writable()) {
        // SAFETY: the user's writable buffer of this call, `len` bytes from
        // the true lower bound (`Buf::new`'s contract), borrowed by nobody.
        Some(a) => unsafe { fetch_raw(seg, m, gen, a as *mut u8, len) },
        None => {
            let n = fetch(seg, m, gen, &mut scratch[..len])?;
            buf.unpack(&scratch[..n]);
            Some(n)
        }
    }
}

impl Mpi {
    /// `MPI_Barrier`.
    pub(crate) fn sm_barrier(&self, comm: &Comm, seg: &SmSeg) -> Result<()> {
        let me = comm.rank as usize;
        let gen = self.sm_begin(comm, seg, me)?;
        publish(seg, me, gen, &[]);
        for m in (0..seg.members).filter(|&m| m != me) {
            self.sm_wait(comm, seg.ready(m, gen), gen, m)?;
        }
        seg.end(me, gen);
        Ok(())
    }

    /// `MPI_Bcast` of `buf` from `root`.
    pub(crate) fn sm_bcast(&self, comm: &Comm, seg: &SmSeg, buf: &Buf, root: u32) -> Result<()> {
        sized!(buf.bytes(), self.sm_bcast_n(comm, seg, buf, root as usize))
    }

    fn sm_bcast_n<const N: usize>(
        &self,
        comm: &Comm,
        seg: &SmSeg,
        buf: &Buf,
        root: usize,
    ) -> Result<()> {
        let me = comm.rank as usize;
        let mut scratch = [0u8; N];
        let gen = self.sm_begin(comm, seg, me)?;
        if me == root {
            put(seg, me, gen, buf, &mut scratch);
            seg.end(me, gen);
            return Ok(());
        }
        self.sm_wait(comm, seg.ready(root, gen), gen, root)?;
        let got = get(seg, root, gen, buf, &mut scratch);
        seg.end(me, gen);
        match got {
            Some(_) => Ok(()),
            None => Err(mismatch("MPI_Bcast", None, buf.bytes())),
        }
    }

    /// `MPI_Allgather` into `recv` (`recv.count` elements per member) from
    /// `send`, or from this member's block of `recv` (`MPI_IN_PLACE`).
    pub(crate) fn sm_allgather(
        &self,
        comm: &Comm,
        seg: &SmSeg,
        send: Option<&Buf>,
        recv: &Buf,
    ) -> Result<()> {
        sized!(
            block(recv, 0, recv.count).bytes(),
            self.sm_allgather_n(comm, seg, send, recv)
        )
    }

    fn sm_allgather_n<const N: usize>(
        &self,
        comm: &Comm,
        seg: &SmSeg,
        send: Option<&Buf>,
        recv: &Buf,
    ) -> Result<()> {
        let me = comm.rank as usize;
        let own = block(recv, me, recv.count);
        let len = own.bytes();
        let mut scratch = [0u8; N];
        let gen = self.sm_begin(comm, seg, me)?;
        put(seg, me, gen, send.unwrap_or(&own), &mut scratch);
        if let Some(s) = send {
            if let Some(c) = s.contig() {
                own.unpack(c);
            } else {
                // `put` packed it into `scratch`.
                own.unpack(&scratch[..len]);
            }
        }
        let mut bad = None;
        for m in (0..seg.members).filter(|&m| m != me) {
            self.sm_wait(comm, seg.ready(m, gen), gen, m)?;
            match get(seg, m, gen, &block(recv, m, recv.count), &mut scratch) {
                Some(n) if n == len => {}
                got => {
                    bad = Some(got);
                    break;
                }
            }
        }
        seg.end(me, gen);
        match bad {
            Some(got) => Err(mismatch("MPI_Allgather", got, len)),
            None => Ok(()),
        }
    }

    /// `MPI_Alltoall` of `send` (`send.count` elements to each member) into
    /// `recv` (`recv.count` from each), of the same size per block.
    pub(crate) fn sm_alltoall(
        &self,
        comm: &Comm,
        seg: &SmSeg,
        send: &Buf,
        recv: &Buf,
    ) -> Result<()> {
        let total = block(send, 0, send.count).bytes() * seg.members;
        sized!(total, self.sm_alltoall_n(comm, seg, send, recv))
    }

    fn sm_alltoall_n<const N: usize>(
        &self,
        comm: &Comm,
        seg: &SmSeg,
        send: &Buf,
        recv: &Buf,
    ) -> Result<()> {
        let me = comm.rank as usize;
        let n = seg.members;
        let b = block(send, 0, send.count).bytes();
        let mut data = [0u8; N];
        // The n blocks, laid one after the other (the send buffer's extent
        // may differ from its packed size).
        for i in 0..n {
            block(send, i, send.count).pack_into(&mut data[i * b..(i + 1) * b]);
        }
        let gen = self.sm_begin(comm, seg, me)?;
        publish(seg, me, gen, &data[..n * b]);
        block(recv, me, recv.count).unpack(&data[me * b..(me + 1) * b]);
        let mut bad = None;
        for m in (0..n).filter(|&m| m != me) {
            self.sm_wait(comm, seg.ready(m, gen), gen, m)?;
            match fetch(seg, m, gen, &mut data[..n * b]) {
                Some(got) if got == n * b => {
                    block(recv, m, recv.count).unpack(&data[me * b..(me + 1) * b])
                }
                got => {
                    bad = Some(got);
                    break;
                }
            }
        }
        seg.end(me, gen);
        match bad {
            Some(got) => Err(mismatch("MPI_Alltoall", got, n * b)),
            None => Ok(()),
        }
    }
}
