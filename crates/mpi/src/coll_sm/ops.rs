//! Barrier and Alltoall over a communicator's segment, in one call each
//! (see `mod.rs` for the protocol; Bcast and Allgather are in
//! `bcast_gather.rs`, reductions in `reduce.rs`). Alltoall's blocks pass
//! through stack buffers of `N` bytes, sized by the call (64, 512 or
//! [`MAX_BYTES`]: zeroing 8 KiB of stack would cost more than a small call
//! itself).

use super::{fetch, publish, SmSeg, MAX_BYTES};
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
