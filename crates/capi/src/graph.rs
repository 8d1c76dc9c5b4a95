//! Graph and distributed-graph topologies: `MPI_Graph_*`, `MPI_Graphdims_get`,
//! `MPI_Dist_graph_*` (over [`gridwire_mpi::topology`]).

use crate::abi::*;
use crate::errors::run;
use crate::handles::{comm, mpi};
use crate::topo::out_comm;
use crate::{arr, arr_mut, put};
use gridwire_mpi::topology::{DistGraph, Graph, Topology};
use gridwire_mpi::{class, err, Comm, Result};
use std::ffi::c_int;

/// `MPI_UNWEIGHTED` and `MPI_WEIGHTS_EMPTY` of the standard ABI (sentinel addresses).
const UNWEIGHTED: usize = 10;
const WEIGHTS_EMPTY: usize = 11;

/// An output array of `n` ints: NULL is refused when something is to be written.
///
/// # Safety
/// `p` is NULL or holds `n` writable ints (the MPI contract).
unsafe fn out_ints<'a>(what: &str, p: *mut c_int, n: usize) -> Result<&'a mut [c_int]> {
    if n > 0 && p.is_null() {
        return Err(err(class::ARG, format!("{what} is NULL")));
    }
    // SAFETY: forwarded contract; `n` fits an int (it is at most a length the caller gave as one).
    Ok(unsafe { arr_mut(p, n as c_int) })
}

fn graph_of(c: &Comm) -> Result<Graph> {
    match &*c.graph.lock().unwrap() {
        Some(Topology::Graph(g)) => Ok(g.clone()),
        _ => Err(err(
            class::TOPOLOGY,
            "the communicator has no graph topology",
        )),
    }
}

fn dist_graph_of(c: &Comm) -> Result<DistGraph> {
    match &*c.graph.lock().unwrap() {
        Some(Topology::DistGraph(g)) => Ok(g.clone()),
        _ => Err(err(
            class::TOPOLOGY,
            "the communicator has no distributed graph topology",
        )),
    }
}

/// A graph's arrays from C: `index` of `nnodes` entries, then as many edges as its last entry says.
///
/// # Safety
/// `index` holds `nnodes` ints and `edges` `index[nnodes-1]` ints (the MPI contract).
unsafe fn graph_arg(nnodes: c_int, index: *const c_int, edges: *const c_int) -> Result<Graph> {
    if nnodes < 0 {
        return Err(err(class::ARG, format!("nnodes {nnodes} is negative")));
    }
    if nnodes > 0 && index.is_null() {
        return Err(err(class::ARG, "index is NULL"));
    }
    // SAFETY: `nnodes` ints by the caller's contract.
    let ix = unsafe { arr(index, nnodes) };
    let nedges = ix.last().copied().unwrap_or(0);
    if nedges < 0 || ix.iter().any(|&x| x < 0) {
        return Err(err(class::ARG, "index has a negative entry"));
    }
    if nedges > 0 && edges.is_null() {
        return Err(err(class::ARG, "edges is NULL"));
    }
    // SAFETY: `index[nnodes-1]` ints by the caller's contract.
    Graph::new(ix, unsafe { arr(edges, nedges) })
}

mpi_fn!(fn MPI_Graph_create / PMPI_Graph_create(c: MPI_Comm, nnodes: c_int, index: *const c_int, edges: *const c_int, _reorder: c_int, out: *mut MPI_Comm) -> c_int {
    run("MPI_Graph_create", c, || {
        let cm = comm(c)?;
        // SAFETY: the arrays of MPI_Graph_create.
        let g = unsafe { graph_arg(nnodes, index, edges) }?;
        let n = mpi()?.graph_create(&cm, g)?;
        // SAFETY: output argument.
        unsafe { out_comm(out, &cm, n) }
    })
});

mpi_fn!(fn MPI_Graphdims_get / PMPI_Graphdims_get(c: MPI_Comm, nnodes: *mut c_int, nedges: *mut c_int) -> c_int {
    run("MPI_Graphdims_get", c, || {
        let g = graph_of(&*comm(c)?)?;
        // SAFETY: output arguments.
        unsafe {
            put(nnodes, g.nnodes() as c_int);
            put(nedges, g.edges.len() as c_int);
        }
        Ok(())
    })
});

mpi_fn!(fn MPI_Graph_get / PMPI_Graph_get(c: MPI_Comm, maxindex: c_int, maxedges: c_int, index: *mut c_int, edges: *mut c_int) -> c_int {
    run("MPI_Graph_get", c, || {
        let g = graph_of(&*comm(c)?)?;
        if maxindex < 0 || maxedges < 0 {
            return Err(err(class::ARG, "maxindex or maxedges is negative"));
        }
        let ni = g.index.len().min(maxindex as usize);
        let ne = g.edges.len().min(maxedges as usize);
        // SAFETY: output arrays of maxindex and maxedges ints.
        unsafe {
            out_ints("index", index, ni)?.copy_from_slice(&g.index[..ni]);
            out_ints("edges", edges, ne)?.copy_from_slice(&g.edges[..ne]);
        }
        Ok(())
    })
});

fn neighbors_of(g: &Graph, rank: c_int) -> Result<&[i32]> {
    g.neighbors(rank).ok_or_else(|| {
        err(
            class::RANK,
            format!(
                "rank {rank} is not a node of a graph of {} nodes",
                g.nnodes()
            ),
        )
    })
}

mpi_fn!(fn MPI_Graph_neighbors_count / PMPI_Graph_neighbors_count(c: MPI_Comm, rank: c_int, n: *mut c_int) -> c_int {
    run("MPI_Graph_neighbors_count", c, || {
        let g = graph_of(&*comm(c)?)?;
        let k = neighbors_of(&g, rank)?.len();
        // SAFETY: output argument.
        unsafe { put(n, k as c_int) };
        Ok(())
    })
});

mpi_fn!(fn MPI_Graph_neighbors / PMPI_Graph_neighbors(c: MPI_Comm, rank: c_int, max: c_int, out: *mut c_int) -> c_int {
    run("MPI_Graph_neighbors", c, || {
        let g = graph_of(&*comm(c)?)?;
        if max < 0 {
            return Err(err(class::ARG, format!("maxneighbors {max} is negative")));
        }
        let nb = neighbors_of(&g, rank)?;
        let k = nb.len().min(max as usize);
        // SAFETY: output array of `max` ints.
        unsafe { out_ints("neighbors", out, k) }?.copy_from_slice(&nb[..k]);
        Ok(())
    })
});

mpi_fn!(fn MPI_Graph_map / PMPI_Graph_map(c: MPI_Comm, nnodes: c_int, index: *const c_int, edges: *const c_int, newrank: *mut c_int) -> c_int {
    run("MPI_Graph_map", c, || {
        let cm = comm(c)?;
        // SAFETY: the arrays of MPI_Graph_map.
        let g = unsafe { graph_arg(nnodes, index, edges) }?;
        if g.nnodes() > cm.size as usize {
            return Err(err(class::ARG, format!("a graph of {nnodes} nodes does not fit in {} processes", cm.size)));
        }
        // No reordering: each process keeps its rank if it is a node.
        let r = if (cm.rank as usize) < g.nnodes() { cm.rank as c_int } else { MPI_UNDEFINED };
        // SAFETY: output argument.
        unsafe { put(newrank, r) };
        Ok(())
    })
});

/// A weights argument of `n` entries: None for `MPI_UNWEIGHTED`.
///
/// # Safety
/// `w` is a sentinel, or holds `n` ints.
unsafe fn weights_arg<'a>(w: *const c_int, n: c_int) -> Result<Option<&'a [i32]>> {
    match w as usize {
        UNWEIGHTED => Ok(None),
        WEIGHTS_EMPTY if n == 0 => Ok(Some(&[])),
        WEIGHTS_EMPTY => Err(err(
            class::ARG,
            "MPI_WEIGHTS_EMPTY given for a nonzero degree",
        )),
        0 if n > 0 => Err(err(class::ARG, "the weights array is NULL")),
        // SAFETY: `n` ints by the caller's contract.
        _ => Ok(Some(unsafe { arr(w, n) })),
    }
}

/// An array argument of `n` ranks that must not be NULL when n > 0.
///
/// # Safety
/// `p` holds `n` ints.
unsafe fn ranks_arg<'a>(what: &str, p: *const c_int, n: c_int) -> Result<&'a [i32]> {
    if n < 0 {
        return Err(err(
            class::ARG,
            format!("the degree {n} of {what} is negative"),
        ));
    }
    if n > 0 && p.is_null() {
        return Err(err(class::ARG, format!("{what} is NULL")));
    }
    // SAFETY: `n` ints by the caller's contract.
    Ok(unsafe { arr(p, n) })
}

mpi_fn!(fn MPI_Dist_graph_create_adjacent / PMPI_Dist_graph_create_adjacent(c: MPI_Comm, indegree: c_int, sources: *const c_int, sourceweights: *const c_int,
        outdegree: c_int, destinations: *const c_int, destweights: *const c_int, _info: MPI_Info, _reorder: c_int, out: *mut MPI_Comm) -> c_int {
    run("MPI_Dist_graph_create_adjacent", c, || {
        let cm = comm(c)?;
        // SAFETY: the arrays of MPI_Dist_graph_create_adjacent, of the degrees given.
        let g = unsafe {
            DistGraph::adjacent(
                ranks_arg("sources", sources, indegree)?,
                weights_arg(sourceweights, indegree)?,
                ranks_arg("destinations", destinations, outdegree)?,
                weights_arg(destweights, outdegree)?,
                cm.size,
            )
        }?;
        let n = mpi()?.dist_graph_create_adjacent(&cm, g)?;
        // SAFETY: output argument.
        unsafe { out_comm(out, &cm, Some(n)) }
    })
});

mpi_fn!(fn MPI_Dist_graph_create / PMPI_Dist_graph_create(c: MPI_Comm, n: c_int, sources: *const c_int, degrees: *const c_int,
        destinations: *const c_int, weights: *const c_int, _info: MPI_Info, _reorder: c_int, out: *mut MPI_Comm) -> c_int {
    run("MPI_Dist_graph_create", c, || {
        let cm = comm(c)?;
        // SAFETY: `n` sources and degrees (the MPI contract).
        let (src, deg) = unsafe { (ranks_arg("sources", sources, n)?, ranks_arg("degrees", degrees, n)?) };
        if let Some(d) = deg.iter().find(|&&d| d < 0) {
            return Err(err(class::ARG, format!("degree {d} is negative")));
        }
        let total: i64 = deg.iter().map(|&d| d as i64).sum();
        let total = c_int::try_from(total).map_err(|_| err(class::ARG, "the degrees add up to more than an int"))?;
        // SAFETY: sum(degrees) destinations and weights (the MPI contract).
        let (dst, w) = unsafe { (ranks_arg("destinations", destinations, total)?, weights_arg(weights, total)?) };
        let mut edges = Vec::with_capacity(total as usize);
        let mut k = 0;
        for (&s, &d) in src.iter().zip(deg) {
            for _ in 0..d {
                edges.push((s, dst[k], w.map_or(1, |w| w[k])));
                k += 1;
            }
        }
        let g = mpi()?.dist_graph_create(&cm, &edges, w.is_some())?;
        // SAFETY: output argument.
        unsafe { out_comm(out, &cm, Some(g)) }
    })
});

mpi_fn!(fn MPI_Dist_graph_neighbors_count / PMPI_Dist_graph_neighbors_count(c: MPI_Comm, indegree: *mut c_int, outdegree: *mut c_int, weighted: *mut c_int) -> c_int {
    run("MPI_Dist_graph_neighbors_count", c, || {
        let g = dist_graph_of(&*comm(c)?)?;
        // SAFETY: output arguments.
        unsafe {
            put(indegree, g.sources.len() as c_int);
            put(outdegree, g.destinations.len() as c_int);
            put(weighted, g.weighted as c_int);
        }
        Ok(())
    })
});

mpi_fn!(fn MPI_Dist_graph_neighbors / PMPI_Dist_graph_neighbors(c: MPI_Comm, maxin: c_int, sources: *mut c_int, sourceweights: *mut c_int,
        maxout: c_int, destinations: *mut c_int, destweights: *mut c_int) -> c_int {
    run("MPI_Dist_graph_neighbors", c, || {
        let g = dist_graph_of(&*comm(c)?)?;
        if maxin < 0 || maxout < 0 {
            return Err(err(class::ARG, "maxindegree or maxoutdegree is negative"));
        }
        let ni = g.sources.len().min(maxin as usize);
        let no = g.destinations.len().min(maxout as usize);
        let real = |w: *mut c_int| !matches!(w as usize, 0 | UNWEIGHTED | WEIGHTS_EMPTY);
        // SAFETY: output arrays of maxindegree and maxoutdegree ints (weights
        // only when an array, not a sentinel, was given).
        unsafe {
            out_ints("sources", sources, ni)?.copy_from_slice(&g.sources[..ni]);
            out_ints("destinations", destinations, no)?.copy_from_slice(&g.destinations[..no]);
            if g.weighted && real(sourceweights) {
                out_ints("sourceweights", sourceweights, ni)?.copy_from_slice(&g.source_weights[..ni]);
            }
            if g.weighted && real(destweights) {
                out_ints("destweights", destweights, no)?.copy_from_slice(&g.dest_weights[..no]);
            }
        }
        Ok(())
    })
});
