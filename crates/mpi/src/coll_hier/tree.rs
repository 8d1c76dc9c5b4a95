//! The building blocks of the hierarchical collectives: trees and exchanges
//! over a list of a communicator's ranks (one level of a [`super::Plan`]),
//! on the communicator's collective context. The first rank of a list is
//! the tree's root. Data is packed bytes.

use crate::error::Result;
use crate::request::DtRef;
use crate::{Comm, Mpi, Op, Req};
use std::sync::Arc;

/// Where `me` is in `list` (None: not a member of this level).
pub(super) fn index_of(list: &[u32], me: u32) -> Option<usize> {
    list.iter().position(|&r| r == me)
}

impl Mpi {
    /// Binomial-tree broadcast of `data` from `list[0]` to the others.
    pub(super) fn list_bcast(&self, comm: &Comm, list: &[u32], data: &mut [u8]) -> Result<()> {
        let mut sends = Vec::new();
        // SAFETY: the sends are waited for below, while `data` is borrowed.
        let res = unsafe { self.list_bcast_start(comm, list, data, &mut sends) };
        let waited = self.wait_all_internal(sends);
        res.and(waited)
    }

    /// [`Mpi::list_bcast`] that leaves its sends in flight: receives `data`
    /// (unless this rank is `list[0]`), starts the sends to its children and
    /// adds them to `sends`.
    ///
    /// # Safety
    /// The requests in `sends` read `data` until they complete: the caller
    /// must keep it alive and unchanged until it has waited for them.
    pub(super) unsafe fn list_bcast_start(
        &self,
        comm: &Comm,
        list: &[u32],
        data: &mut [u8],
        sends: &mut Vec<Arc<Req>>,
    ) -> Result<()> {
        let n = list.len();
        let Some(vr) = index_of(list, comm.rank) else {
            return Ok(());
        };
        if n < 2 {
            return Ok(());
        }
        let mut mask = 1;
        while mask < n {
            if vr & mask != 0 {
                self.c_recv(comm, data, list[vr - mask])?;
                break;
            }
            mask <<= 1;
        }
        mask >>= 1;
        while mask > 0 {
            if vr + mask < n {
                // SAFETY: forwarded from this function's contract.
                if let Some(r) = unsafe { self.c_isend(comm, data, list[vr + mask]) }? {
                    sends.push(r);
                }
            }
            mask >>= 1;
        }
        Ok(())
    }

    /// Binomial-tree reduction of `acc` into `list[0]`'s `acc` (a
    /// commutative `op`: partial results combine in tree order). `tmp` is
    /// scratch of `acc`'s length.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn list_reduce(
        &self,
        comm: &Comm,
        list: &[u32],
        dt: &DtRef,
        count: usize,
        op: &Op,
        acc: &mut [u8],
        tmp: &mut [u8],
    ) -> Result<()> {
        let n = list.len();
        let Some(vr) = index_of(list, comm.rank) else {
            return Ok(());
        };
        let mut mask = 1;
        while mask < n {
            if vr & mask == 0 {
                let child = vr | mask;
                if child < n {
                    self.c_recv(comm, tmp, list[child])?;
                    op.apply(dt, count, tmp, acc);
                }
            } else {
                return self.c_send(comm, acc, list[vr & !mask]);
            }
            mask <<= 1;
        }
        Ok(())
    }

    /// Allreduce of `acc` among the members of `list` by recursive doubling
    /// (members beyond the largest power of two fold into a partner first).
    /// Both sides of each exchange combine lower-index data op higher-index
    /// data, so every member ends with the same bits.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn list_allreduce(
        &self,
        comm: &Comm,
        list: &[u32],
        dt: &DtRef,
        count: usize,
        op: &Op,
        acc: &mut [u8],
        tmp: &mut [u8],
    ) -> Result<()> {
        let n = list.len();
        let Some(me) = index_of(list, comm.rank) else {
            return Ok(());
        };
        let mut pof2 = 1;
        while pof2 * 2 <= n {
            pof2 *= 2;
        }
        let rem = n - pof2;
        let newrank = if me < 2 * rem {
            if me % 2 == 0 {
                self.c_send(comm, acc, list[me + 1])?;
                None
            } else {
                self.c_recv(comm, tmp, list[me - 1])?;
                op.apply(dt, count, tmp, acc);
                Some(me / 2)
            }
        } else {
            Some(me - rem)
        };
        if let Some(nr) = newrank {
            let mut mask = 1;
            while mask < pof2 {
                let nd = nr ^ mask;
                let dst = if nd < rem { nd * 2 + 1 } else { nd + rem };
                self.c_sendrecv(comm, acc, list[dst], tmp, list[dst])?;
                if dst < me {
                    op.apply(dt, count, tmp, acc);
                } else {
                    op.apply(dt, count, acc, tmp);
                    acc.copy_from_slice(tmp);
                }
                mask <<= 1;
            }
        }
        if me < 2 * rem {
            if me % 2 == 1 {
                self.c_send(comm, acc, list[me - 1])?;
            } else {
                self.c_recv(comm, acc, list[me + 1])?;
            }
        }
        Ok(())
    }

    /// Fan-in of empty messages to `list[0]` (binomial): returns once every
    /// member below this one in the tree has arrived.
    pub(super) fn list_fan_in(&self, comm: &Comm, list: &[u32]) -> Result<()> {
        let n = list.len();
        let Some(vr) = index_of(list, comm.rank) else {
            return Ok(());
        };
        let mut mask = 1;
        while mask < n {
            if vr & mask == 0 {
                if vr | mask < n {
                    self.c_recv(comm, &mut [], list[vr | mask])?;
                }
            } else {
                return self.c_send(comm, &[], list[vr & !mask]);
            }
            mask <<= 1;
        }
        Ok(())
    }
}
