//! Nonblocking sends that say where an eager message went, so that
//! `MPI_Cancel` can name it to its receiver later (see
//! [`crate::engine::Engine::withdraw`]) without a request object per send.

use crate::comm::Comm;
use crate::error::Result;
use crate::request::{Buf, Req};
use crate::{Mode, Mpi, PROC_NULL};
use std::sync::Arc;

/// An eager message that left: its matching context, receiver (world
/// rank) and sequence number, what a cancel names it by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    pub ctx: u64,
    pub world: u32,
    pub seq: u32,
}

/// What [`Mpi::isend_start`] started.
pub enum Started {
    /// A rendezvous in flight.
    InFlight(Arc<Req>),
    /// Complete within the call; `Some` for an eager message to a peer
    /// (None: `MPI_PROC_NULL`, buffered sends).
    Done(Option<Sent>),
}

impl Mpi {
    /// [`Mpi::isend_started`] that also says where an eager message went.
    #[inline]
    pub fn isend_start(
        &self,
        comm: &Comm,
        buf: &Buf,
        dest: i32,
        tag: i32,
        mode: Mode,
    ) -> Result<Started> {
        if dest == PROC_NULL || mode == Mode::Buffered {
            return Ok(match self.isend_started(comm, buf, dest, tag, mode)? {
                Some(r) => Started::InFlight(r),
                None => Started::Done(None),
            });
        }
        self.check_buf(buf, "send buffer")?;
        Self::check_peer(comm, dest, false)?;
        Self::check_tag(tag, false)?;
        let ctx = comm.key();
        let world = comm.world_of(dest as u32);
        let (r, seq) = self.engine.send_seq(
            ctx,
            &comm.seq[dest as usize],
            comm.rank as i32,
            world,
            tag,
            buf,
            mode == Mode::Sync,
            None,
        )?;
        Ok(match r {
            Some(r) => Started::InFlight(r),
            None => Started::Done(Some(Sent { ctx, world, seq })),
        })
    }

    /// `MPI_Cancel` of an eager send: whether its receiver withdrew it.
    pub fn cancel_sent(&self, s: Sent) -> bool {
        self.engine.withdraw(s.ctx, s.world, s.seq)
    }
}
