//! Neighbourhood collectives (`MPI_Neighbor_*`): every process sends to its
//! topology's destinations and receives from its sources.
//!
//! All five collectives are one exchange here ([`Mpi::neighbor_exchange`]):
//! one buffer per destination and one per source, the C layer cutting the
//! user's buffers into those pieces. The messages go on the communicator's
//! collective context, so they never meet the program's own messages.
//!
//! Matching: with a graph or distributed graph the k-th message from a
//! process matches the k-th receive from it (MPI's order between a pair),
//! which is what the standard asks when an edge appears several times.
//! A Cartesian topology names the same process in both directions of a
//! dimension when that dimension has 1 or 2 processes (periodic), and what
//! arrives from the negative direction must be what that neighbour sent in
//! the positive one: so there each message carries the tag of the slot it
//! fills at the receiver (2d from the negative side, 2d+1 from the positive).

use crate::comm::Comm;
use crate::error::{class, err, Result};
use crate::request::Buf;
use crate::topology::Topology;
use crate::{Mode, Mpi, PROC_NULL};
use std::sync::Arc;

/// A process's neighbours in the order the neighbourhood collectives use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Neighbors {
    pub sources: Vec<i32>,
    pub destinations: Vec<i32>,
    /// Cartesian: messages carry the receiver's slot as their tag (see the module comment).
    cart: bool,
}

impl Neighbors {
    /// The neighbours of this process in `comm`'s topology.
    pub fn of(comm: &Comm) -> Result<Neighbors> {
        if let Some(t) = &*comm.graph.lock().unwrap() {
            return Ok(match t {
                Topology::Graph(g) => {
                    let nb = g.neighbors(comm.rank as i32).unwrap_or(&[]).to_vec();
                    Neighbors {
                        sources: nb.clone(),
                        destinations: nb,
                        cart: false,
                    }
                }
                Topology::DistGraph(g) => Neighbors {
                    sources: g.sources.clone(),
                    destinations: g.destinations.clone(),
                    cart: false,
                },
            });
        }
        let cart = comm.cart.lock().unwrap().clone().ok_or_else(|| {
            err(
                class::TOPOLOGY,
                "a neighbourhood collective needs a communicator with a topology",
            )
        })?;
        // Per dimension: the neighbour in the negative direction, then the positive one.
        let me = cart.coords(comm.rank as i32);
        let mut nb = Vec::with_capacity(2 * me.len());
        for d in 0..me.len() {
            for delta in [-1, 1] {
                let mut c = me.clone();
                c[d] += delta;
                nb.push(cart.rank(&c).unwrap_or(PROC_NULL));
            }
        }
        Ok(Neighbors {
            sources: nb.clone(),
            destinations: nb,
            cart: true,
        })
    }

    /// Tag of the message to destination slot `j`.
    fn send_tag(&self, j: usize) -> i32 {
        match self.cart {
            // Sent in the negative direction, it arrives from the receiver's positive side.
            true => (j ^ 1) as i32,
            false => 0,
        }
    }

    fn recv_tag(&self, k: usize) -> i32 {
        if self.cart {
            k as i32
        } else {
            0
        }
    }
}

impl Mpi {
    /// Sends `sends[j]` to destination j and receives source k's message
    /// into `recvs[k]` (`MPI_PROC_NULL` neighbours: nothing, the buffer is left alone).
    pub fn neighbor_exchange(
        &self,
        comm: &Comm,
        nb: &Neighbors,
        sends: &[Buf],
        recvs: &[Buf],
    ) -> Result<()> {
        if sends.len() != nb.destinations.len() || recvs.len() != nb.sources.len() {
            return Err(err(
                class::INTERN,
                "neighbourhood collective: buffers do not match the degrees",
            ));
        }
        for b in sends {
            self.check_buf(b, "send buffer")?;
        }
        for b in recvs {
            self.check_buf(b, "receive buffer")?;
        }
        let mut reqs: Vec<Arc<crate::Req>> = Vec::new();
        for (k, (&src, b)) in nb.sources.iter().zip(recvs).enumerate() {
            if src != PROC_NULL {
                reqs.push(self.engine.recv(
                    comm.key() + 1,
                    &comm.group,
                    src,
                    nb.recv_tag(k),
                    b.clone(),
                )?);
            }
        }
        for (j, (&dst, b)) in nb.destinations.iter().zip(sends).enumerate() {
            let r = self.send_on(comm, true, b, dst, nb.send_tag(j), Mode::Standard)?;
            reqs.extend(r);
        }
        self.wait_all_internal(reqs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comm::Cart;
    use crate::group::Group;

    fn cart_comm(rank: u32, dims: &[i32], periods: &[bool]) -> Arc<Comm> {
        let n: i32 = dims.iter().product();
        let c = Comm::new(4, Group::new((0..n as u32).collect()), rank, "");
        *c.cart.lock().unwrap() = Some(Cart {
            dims: dims.to_vec(),
            periods: periods.to_vec(),
        });
        c
    }

    #[test]
    fn cartesian_neighbours_are_negative_then_positive_per_dimension() {
        // 2 x 3, periodic in dimension 1 only; rank 1 is (0, 1).
        let nb = Neighbors::of(&cart_comm(1, &[2, 3], &[false, true])).unwrap();
        assert_eq!(nb.sources, vec![PROC_NULL, 4, 0, 2]);
        assert_eq!(nb.destinations, nb.sources);
        // What goes to the negative side fills the receiver's positive slot.
        assert_eq!((nb.send_tag(0), nb.send_tag(1), nb.send_tag(2)), (1, 0, 3));
        assert_eq!(nb.recv_tag(3), 3);
    }

    #[test]
    fn no_topology_is_an_error() {
        let c = Comm::new(4, Group::new(vec![0, 1]), 0, "");
        assert_eq!(Neighbors::of(&c).unwrap_err().class, class::TOPOLOGY);
    }
}
