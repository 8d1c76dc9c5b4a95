//! Collectives on intercommunicators, with the standard's semantics: rooted
//! ones move data from the root (which passes `MPI_ROOT`; the rest of its
//! group passes `MPI_PROC_NULL`) to or from the whole other group (which
//! passes the root's rank in it); the others move data between the groups
//! both ways (each group receives what the other contributed).
//!
//! Algorithms are plain and correct rather than fast: data between the
//! groups goes straight from sender to receiver on the intercommunicator's
//! collective context (gather, scatter, allgather, alltoall, broadcast);
//! reductions reduce within a group on its hidden local communicator, the
//! two leaders swap the results, and the leader broadcasts or scatters.

use crate::coll::{at, block};
use crate::error::{class, err, Result};
use crate::request::Req;
use crate::{Buf, Comm, Mpi, Op, PROC_NULL, ROOT};
use std::sync::Arc;

/// What a process does in a rooted collective on an intercommunicator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// The root (`MPI_ROOT`).
    Root,
    /// In the root's group but not the root (`MPI_PROC_NULL`): nothing to do.
    Idle,
    /// In the other group; the root is rank `.0` of the remote group.
    Remote(u32),
}

pub(crate) fn role(remote_size: u32, root: i32) -> Result<Role> {
    match root {
        ROOT => Ok(Role::Root),
        PROC_NULL => Ok(Role::Idle),
        r if r >= 0 && (r as u32) < remote_size => Ok(Role::Remote(r as u32)),
        r => Err(err(
            class::ROOT,
            format!(
                "root {r} is invalid on an intercommunicator whose remote group has {remote_size} processes (MPI_ROOT at the root, MPI_PROC_NULL in its group)"
            ),
        )),
    }
}

fn no_in_place(send: Option<&Buf>) -> Result<&Buf> {
    send.ok_or_else(|| {
        err(
            class::BUFFER,
            "MPI_IN_PLACE is not allowed in collectives on an intercommunicator",
        )
    })
}

/// A temporary laid out like `count` elements of `like`'s datatype.
/// The vector holds the memory the buffer points into.
fn temp_like(like: &Buf, count: usize) -> (Vec<u8>, Buf) {
    let dt = &like.dt;
    if count == 0 || dt.size == 0 {
        let v = Vec::new();
        // SAFETY: no element: nothing is read or written.
        let b = unsafe { Buf::new(v.as_ptr() as usize, 0, dt.clone()) };
        return (v, b);
    }
    let last = (count as isize - 1) * dt.extent;
    let lo = dt.true_lb.min(dt.true_lb + last);
    let hi = (dt.true_lb + dt.true_extent).max(dt.true_lb + dt.true_extent + last);
    let v = vec![0u8; (hi - lo) as usize];
    let addr = (v.as_ptr() as usize).wrapping_add_signed(-lo);
    // SAFETY: `count` elements at `addr` span exactly `v`, which the caller
    // keeps (it is returned with the buffer) until it is done with both.
    let b = unsafe { Buf::new(addr, count, dt.clone()) };
    (v, b)
}

fn local(ic: &Comm) -> &Arc<Comm> {
    ic.local_comm().expect("called on an intercommunicator")
}

impl Mpi {
    fn post(&self, reqs: &mut Vec<Arc<Req>>, r: Option<Arc<Req>>) {
        if let Some(r) = r {
            reqs.push(r);
        }
    }

    pub(crate) fn inter_barrier(&self, ic: &Comm) -> Result<()> {
        let l = local(ic);
        // Everyone here has entered; the leaders learn that the other group
        // has too; the second local barrier passes that on.
        self.barrier(l)?;
        if l.rank == 0 {
            self.c_sendrecv(ic, &[], 0, &mut [], 0)?;
        }
        self.barrier(l)
    }

    pub(crate) fn inter_bcast(&self, ic: &Comm, buf: &Buf, root: i32) -> Result<()> {
        match role(ic.peer_size, root)? {
            Role::Idle => Ok(()),
            Role::Root => {
                self.check_buf(buf, "broadcast buffer")?;
                let mut reqs = Vec::new();
                for r in 0..ic.peer_size {
                    let q = self.c_isend_buf(ic, buf, r)?;
                    self.post(&mut reqs, q);
                }
                self.wait_all_internal(reqs)
            }
            Role::Remote(r) => {
                self.check_buf(buf, "broadcast buffer")?;
                let q = self.c_irecv_buf(ic, buf.clone(), r)?;
                self.wait_all_internal(vec![q])
            }
        }
    }

    pub(crate) fn inter_reduce(
        &self,
        ic: &Comm,
        send: Option<&Buf>,
        recv: &Buf,
        op: &Op,
        root: i32,
    ) -> Result<()> {
        match role(ic.peer_size, root)? {
            Role::Idle => Ok(()),
            Role::Root => {
                self.check_buf(recv, "receive buffer")?;
                let q = self.c_irecv_buf(ic, recv.clone(), 0)?;
                self.wait_all_internal(vec![q])
            }
            Role::Remote(r) => {
                let send = no_in_place(send)?;
                let l = local(ic);
                let (_mem, tmp) = temp_like(send, send.count);
                self.reduce(l, Some(send), &tmp, op, 0)?;
                if l.rank == 0 {
                    let q = self.c_isend_buf(ic, &tmp, r)?;
                    self.wait_all_internal(q)?;
                }
                Ok(())
            }
        }
    }

    pub(crate) fn inter_allreduce(
        &self,
        ic: &Comm,
        send: Option<&Buf>,
        recv: &Buf,
        op: &Op,
    ) -> Result<()> {
        let send = no_in_place(send)?;
        self.check_buf(recv, "receive buffer")?;
        let l = local(ic);
        let (_mem, tmp) = temp_like(send, send.count);
        self.reduce(l, Some(send), &tmp, op, 0)?;
        if l.rank == 0 {
            let mut reqs = vec![self.c_irecv_buf(ic, recv.clone(), 0)?];
            let q = self.c_isend_buf(ic, &tmp, 0)?;
            self.post(&mut reqs, q);
            self.wait_all_internal(reqs)?;
        }
        self.bcast(l, recv, 0)
    }

    /// `MPI_Gather(v)`: `counts` None = `recv.count` elements from each.
    pub(crate) fn inter_gatherv(
        &self,
        ic: &Comm,
        send: Option<&Buf>,
        recv: &Buf,
        counts: Option<(&[i64], &[i64])>,
        root: i32,
    ) -> Result<()> {
        match role(ic.peer_size, root)? {
            Role::Idle => Ok(()),
            Role::Root => {
                self.check_buf(recv, "receive buffer")?;
                let mut reqs = Vec::new();
                for i in 0..ic.peer_size as usize {
                    let b = match counts {
                        None => block(recv, i, recv.count),
                        Some((c, d)) => at(recv, d[i], c[i] as usize),
                    };
                    reqs.push(self.c_irecv_buf(ic, b, i as u32)?);
                }
                self.wait_all_internal(reqs)
            }
            Role::Remote(r) => {
                let send = no_in_place(send)?;
                self.check_buf(send, "send buffer")?;
                let q = self.c_isend_buf(ic, send, r)?;
                self.wait_all_internal(q)
            }
        }
    }

    /// `MPI_Scatter(v)`: `counts` None = `send.count` elements to each.
    pub(crate) fn inter_scatterv(
        &self,
        ic: &Comm,
        send: &Buf,
        counts: Option<(&[i64], &[i64])>,
        recv: Option<&Buf>,
        root: i32,
    ) -> Result<()> {
        match role(ic.peer_size, root)? {
            Role::Idle => Ok(()),
            Role::Root => {
                self.check_buf(send, "send buffer")?;
                let mut reqs = Vec::new();
                for i in 0..ic.peer_size as usize {
                    let b = match counts {
                        None => block(send, i, send.count),
                        Some((c, d)) => at(send, d[i], c[i] as usize),
                    };
                    let q = self.c_isend_buf(ic, &b, i as u32)?;
                    self.post(&mut reqs, q);
                }
                self.wait_all_internal(reqs)
            }
            Role::Remote(r) => {
                let recv = no_in_place(recv)?;
                self.check_buf(recv, "receive buffer")?;
                let q = self.c_irecv_buf(ic, recv.clone(), r)?;
                self.wait_all_internal(vec![q])
            }
        }
    }

    /// `MPI_Allgather(v)`: every process sends its buffer to each process of
    /// the other group and receives one block from each.
    pub(crate) fn inter_allgatherv(
        &self,
        ic: &Comm,
        send: Option<&Buf>,
        recv: &Buf,
        counts: Option<(&[i64], &[i64])>,
    ) -> Result<()> {
        let send = no_in_place(send)?;
        self.check_buf(send, "send buffer")?;
        self.check_buf(recv, "receive buffer")?;
        let mut reqs = Vec::new();
        for i in 0..ic.peer_size as usize {
            let b = match counts {
                None => block(recv, i, recv.count),
                Some((c, d)) => at(recv, d[i], c[i] as usize),
            };
            reqs.push(self.c_irecv_buf(ic, b, i as u32)?);
        }
        for i in 0..ic.peer_size {
            let q = self.c_isend_buf(ic, send, i)?;
            self.post(&mut reqs, q);
        }
        self.wait_all_internal(reqs)
    }

    /// `MPI_Alltoall(v/w)`: block `i` goes to remote rank `i`, and block `i`
    /// of the result comes from it.
    pub(crate) fn inter_alltoallw(
        &self,
        ic: &Comm,
        sends: Option<Vec<Buf>>,
        recvs: Vec<Buf>,
    ) -> Result<()> {
        let sends = sends.ok_or_else(|| no_in_place(None).unwrap_err())?;
        let n = ic.peer_size as usize;
        if sends.len() < n || recvs.len() < n {
            return Err(err(class::ARG, "fewer buffers than remote processes"));
        }
        let mut reqs = Vec::new();
        for (i, b) in recvs.into_iter().take(n).enumerate() {
            self.check_buf(&b, "receive buffer")?;
            reqs.push(self.c_irecv_buf(ic, b, i as u32)?);
        }
        for (i, b) in sends.iter().take(n).enumerate() {
            self.check_buf(b, "send buffer")?;
            let q = self.c_isend_buf(ic, b, i as u32)?;
            self.post(&mut reqs, q);
        }
        self.wait_all_internal(reqs)
    }

    /// `MPI_Reduce_scatter(_block)`: the reduction of the other group's
    /// vectors, scattered in this group by `counts` (one per local process).
    pub(crate) fn inter_reduce_scatter(
        &self,
        ic: &Comm,
        send: Option<&Buf>,
        recv: &Buf,
        counts: &[i64],
        op: &Op,
    ) -> Result<()> {
        let send = no_in_place(send)?;
        let l = local(ic);
        let total: i64 = counts.iter().sum();
        if send.count as i64 != total {
            return Err(err(
                class::COUNT,
                format!(
                    "the send buffer holds {} elements, the counts add up to {total}",
                    send.count
                ),
            ));
        }
        let (_mine, tmp) = temp_like(send, send.count);
        self.reduce(l, Some(send), &tmp, op, 0)?;
        let (_theirs, other) = temp_like(send, if l.rank == 0 { send.count } else { 0 });
        if l.rank == 0 {
            let mut reqs = vec![self.c_irecv_buf(ic, other.clone(), 0)?];
            let q = self.c_isend_buf(ic, &tmp, 0)?;
            self.post(&mut reqs, q);
            self.wait_all_internal(reqs)?;
        }
        let displs: Vec<i64> = counts
            .iter()
            .scan(0, |acc, &c| {
                let d = *acc;
                *acc += c;
                Some(d)
            })
            .collect();
        self.scatterv(l, &other, Some((counts, &displs)), Some(recv), 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_follow_the_root_argument() {
        assert_eq!(role(3, ROOT).unwrap(), Role::Root);
        assert_eq!(role(3, PROC_NULL).unwrap(), Role::Idle);
        assert_eq!(role(3, 2).unwrap(), Role::Remote(2));
        assert_eq!(role(3, 3).unwrap_err().class, class::ROOT);
        assert_eq!(role(3, -7).unwrap_err().class, class::ROOT);
    }
}
