//! Graph and distributed-graph topologies (`MPI_Graph_create`,
//! `MPI_Dist_graph_create(_adjacent)`). Cartesian ones are [`crate::comm::Cart`].
//!
//! A graph topology is known whole to every member (the standard's
//! `index`/`edges` arrays); a distributed graph only as each process's own
//! adjacency (its sources and destinations, with weights). Neither reorders
//! ranks: `reorder` is allowed to be ignored, and keeping the ranks keeps
//! every process where the program placed it.

use crate::comm::Comm;
use crate::error::{class, err, Result};
use crate::{Mpi, UNDEFINED};
use std::sync::Arc;

/// `MPI_Graph_create`'s graph: node `i`'s neighbours are
/// `edges[index[i-1]..index[i]]` (`index[-1]` = 0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Graph {
    pub index: Vec<i32>,
    pub edges: Vec<i32>,
}

impl Graph {
    /// Checks the standard's arrays: `index` non-decreasing from 0 and at
    /// most `edges.len()`; every edge names a node.
    pub fn new(index: &[i32], edges: &[i32]) -> Result<Graph> {
        let nnodes = index.len();
        let mut prev = 0;
        for (i, &x) in index.iter().enumerate() {
            if x < prev {
                return Err(err(
                    class::ARG,
                    format!("index[{i}] = {x} is less than the entry before it ({prev})"),
                ));
            }
            prev = x;
        }
        if prev as usize != edges.len() {
            return Err(err(
                class::ARG,
                format!(
                    "index[nnodes-1] = {prev} but {} edges were given",
                    edges.len()
                ),
            ));
        }
        if let Some((i, &e)) = edges
            .iter()
            .enumerate()
            .find(|(_, &e)| e < 0 || e as usize >= nnodes)
        {
            return Err(err(
                class::ARG,
                format!("edges[{i}] = {e} is not a node of a graph of {nnodes} nodes"),
            ));
        }
        Ok(Graph {
            index: index.to_vec(),
            edges: edges.to_vec(),
        })
    }

    pub fn nnodes(&self) -> usize {
        self.index.len()
    }

    /// The neighbours of `node`, None if it is not a node.
    pub fn neighbors(&self, node: i32) -> Option<&[i32]> {
        let i = usize::try_from(node).ok().filter(|&i| i < self.nnodes())?;
        let start = if i == 0 {
            0
        } else {
            self.index[i - 1] as usize
        };
        Some(&self.edges[start..self.index[i] as usize])
    }
}

/// One process's view of a distributed graph: the ranks it receives from
/// and sends to, in the order the neighbourhood collectives use.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DistGraph {
    pub sources: Vec<i32>,
    pub source_weights: Vec<i32>,
    pub destinations: Vec<i32>,
    pub dest_weights: Vec<i32>,
    /// False when the program passed `MPI_UNWEIGHTED`.
    pub weighted: bool,
}

/// A communicator's graph-kind topology.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Topology {
    Graph(Graph),
    DistGraph(DistGraph),
}

/// Topologies are for intracommunicators only (the standard's rule).
fn no_inter(comm: &Comm) -> Result<()> {
    if comm.is_inter() {
        return Err(err(
            class::COMM,
            "a topology cannot be attached to an intercommunicator",
        ));
    }
    Ok(())
}

fn check_ranks(what: &str, ranks: &[i32], size: u32) -> Result<()> {
    match ranks.iter().find(|&&r| r < 0 || r as u32 >= size) {
        Some(r) => Err(err(
            class::RANK,
            format!("{what} names rank {r}, outside a communicator of {size}"),
        )),
        None => Ok(()),
    }
}

impl DistGraph {
    /// `MPI_Dist_graph_create_adjacent`'s arguments, checked. `None`
    /// weights: unweighted (every weight is 1).
    pub fn adjacent(
        sources: &[i32],
        source_weights: Option<&[i32]>,
        destinations: &[i32],
        dest_weights: Option<&[i32]>,
        size: u32,
    ) -> Result<DistGraph> {
        check_ranks("sources", sources, size)?;
        check_ranks("destinations", destinations, size)?;
        let weights = |w: Option<&[i32]>, n: usize| -> Result<Vec<i32>> {
            match w {
                None => Ok(vec![1; n]),
                Some(w) if w.len() == n => match w.iter().find(|&&x| x < 0) {
                    Some(x) => Err(err(class::ARG, format!("weight {x} is negative"))),
                    None => Ok(w.to_vec()),
                },
                Some(_) => Err(err(class::ARG, "the weights do not match the degree")),
            }
        };
        Ok(DistGraph {
            sources: sources.to_vec(),
            source_weights: weights(source_weights, sources.len())?,
            destinations: destinations.to_vec(),
            dest_weights: weights(dest_weights, destinations.len())?,
            weighted: source_weights.is_some() || dest_weights.is_some(),
        })
    }

    /// This process's adjacency from every process's edge list (`all[p]` =
    /// the (source, destination, weight) edges process `p` gave to
    /// `MPI_Dist_graph_create`), in process order and then each process's order.
    pub fn from_edges(all: &[Vec<(i32, i32, i32)>], me: i32, weighted: bool) -> DistGraph {
        let mut g = DistGraph {
            weighted,
            ..DistGraph::default()
        };
        for &(s, d, w) in all.iter().flatten() {
            if d == me {
                g.sources.push(s);
                g.source_weights.push(w);
            }
            if s == me {
                g.destinations.push(d);
                g.dest_weights.push(w);
            }
        }
        g
    }
}

impl Mpi {
    /// `MPI_Graph_create` (no reordering): the first `nnodes` ranks get the graph.
    pub fn graph_create(&self, comm: &Comm, g: Graph) -> Result<Option<Arc<Comm>>> {
        no_inter(comm)?;
        if g.nnodes() > comm.size as usize {
            return Err(err(
                class::ARG,
                format!(
                    "a graph of {} nodes does not fit in {} processes",
                    g.nnodes(),
                    comm.size
                ),
            ));
        }
        let color = if (comm.rank as usize) < g.nnodes() {
            0
        } else {
            UNDEFINED
        };
        let c = self.comm_split(comm, color, comm.rank as i32)?;
        if let Some(c) = &c {
            *c.graph.lock().unwrap() = Some(Topology::Graph(g));
        }
        Ok(c)
    }

    /// `MPI_Dist_graph_create_adjacent`: a duplicate of `comm` with the adjacency.
    pub fn dist_graph_create_adjacent(&self, comm: &Comm, g: DistGraph) -> Result<Arc<Comm>> {
        no_inter(comm)?;
        let c = self.comm_dup(comm)?;
        *c.cart.lock().unwrap() = None;
        *c.graph.lock().unwrap() = Some(Topology::DistGraph(g));
        Ok(c)
    }

    /// `MPI_Dist_graph_create`: `edges` are this process's (source,
    /// destination, weight) triples; every process learns its own in- and
    /// out-edges from everyone's (an allgather of the edge lists: two
    /// collectives, the second as long as the longest list).
    pub fn dist_graph_create(
        &self,
        comm: &Comm,
        edges: &[(i32, i32, i32)],
        weighted: bool,
    ) -> Result<Arc<Comm>> {
        no_inter(comm)?;
        for &(s, d, w) in edges {
            check_ranks("the edges", &[s, d], comm.size)?;
            if w < 0 {
                return Err(err(class::ARG, format!("weight {w} is negative")));
            }
        }
        let n = comm.size as usize;
        // Lengths first, then the lists padded to the longest.
        let mine = (edges.len() as u64).to_le_bytes();
        let mut lens = vec![0u8; 8 * n];
        self.allgather_bytes(comm, &mine, &mut lens)?;
        let lens: Vec<usize> = lens
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")) as usize)
            .collect();
        // A count is the peer's word: an honest one fits an int (the C
        // interface's degrees do), and the lists of all must fit in memory.
        let longest = lens.iter().copied().max().unwrap_or(0);
        if longest > i32::MAX as usize || longest.checked_mul(12 * n).is_none() {
            return Err(err(
                class::OTHER,
                format!("a process announced {longest} edges, more than an int"),
            ));
        }
        let mut packed = vec![0u8; longest * 12];
        for (i, &(s, d, w)) in edges.iter().enumerate() {
            for (k, v) in [s, d, w].into_iter().enumerate() {
                packed[i * 12 + k * 4..i * 12 + k * 4 + 4].copy_from_slice(&v.to_le_bytes());
            }
        }
        let mut all = vec![0u8; longest * 12 * n];
        if longest > 0 {
            self.allgather_bytes(comm, &packed, &mut all)?;
        }
        let word = |b: &[u8], at: usize| i32::from_le_bytes(b[at..at + 4].try_into().expect("4"));
        let lists: Vec<Vec<(i32, i32, i32)>> = (0..n)
            .map(|p| {
                let part = &all[p * longest * 12..(p + 1) * longest * 12];
                // A peer's count is believed only up to the space it filled.
                (0..lens[p].min(longest))
                    .map(|i| {
                        (
                            word(part, i * 12),
                            word(part, i * 12 + 4),
                            word(part, i * 12 + 8),
                        )
                    })
                    .collect()
            })
            .collect();
        let g = DistGraph::from_edges(&lists, comm.rank as i32, weighted);
        self.dist_graph_create_adjacent(comm, g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_graph_gives_each_nodes_neighbours() {
        // The standard's example: 0-{1,3}, 1-{0}, 2-{3}, 3-{0,2}.
        let g = Graph::new(&[2, 3, 4, 6], &[1, 3, 0, 3, 0, 2]).unwrap();
        assert_eq!(g.neighbors(0), Some(&[1, 3][..]));
        assert_eq!(g.neighbors(1), Some(&[0][..]));
        assert_eq!(g.neighbors(3), Some(&[0, 2][..]));
        assert_eq!(g.neighbors(4), None);
        assert_eq!(g.neighbors(-1), None);
    }

    #[test]
    fn bad_graph_arrays_are_refused() {
        assert_eq!(Graph::new(&[2, 1], &[1, 0]).unwrap_err().class, class::ARG);
        assert_eq!(Graph::new(&[1, 2], &[1, 2]).unwrap_err().class, class::ARG);
        assert_eq!(Graph::new(&[1, 3], &[1, 0]).unwrap_err().class, class::ARG);
        assert_eq!(Graph::new(&[1], &[-1]).unwrap_err().class, class::ARG);
        assert!(Graph::new(&[], &[]).is_ok());
    }

    #[test]
    fn a_dist_graph_collects_in_and_out_edges_in_process_order() {
        let all = vec![
            vec![(0, 1, 5), (0, 2, 6)],
            vec![(2, 1, 7)],
            vec![(1, 0, 8), (1, 2, 9)],
        ];
        let g = DistGraph::from_edges(&all, 1, true);
        assert_eq!(g.sources, vec![0, 2]);
        assert_eq!(g.source_weights, vec![5, 7]);
        assert_eq!(g.destinations, vec![0, 2]);
        assert_eq!(g.dest_weights, vec![8, 9]);
    }

    #[test]
    fn adjacent_checks_ranks_and_weights() {
        assert_eq!(
            DistGraph::adjacent(&[3], None, &[], None, 3)
                .unwrap_err()
                .class,
            class::RANK
        );
        assert_eq!(
            DistGraph::adjacent(&[1], Some(&[-2]), &[], None, 3)
                .unwrap_err()
                .class,
            class::ARG
        );
        let g = DistGraph::adjacent(&[1, 2], None, &[0], None, 3).unwrap();
        assert!(!g.weighted);
        assert_eq!(g.source_weights, vec![1, 1]);
    }
}
