//! The topology attributes of every communicator (as MPICH-G2's
//! `MPICHX_TOPOLOGY_DEPTHS`/`COLORS`): per member of the (local) group, its
//! number of levels and its colour at each level (`[site, host]`, see
//! `Mpi::level_colours`). Read-only predefined keyvals, declared in
//! `include/gridwire_mpi.h`; the arrays are computed on the first request
//! for a communicator and kept until it is freed.

use gridwire_mpi::topology_levels::LEVEL_DEPTH;
use gridwire_mpi::{Comm, Result};
use std::collections::HashMap;
use std::ffi::c_int;
use std::sync::{Arc, Mutex, Weak};

/// Keyval of the depths attribute: an `int *` with one depth per member.
#[no_mangle]
pub static GW_TOPOLOGY_DEPTHS: c_int = 611;
/// Keyval of the colours attribute: an `int **`, per member a pointer to
/// its `depth` colours (level 0 = site, level 1 = host within the site).
#[no_mangle]
pub static GW_TOPOLOGY_COLORS: c_int = 612;

/// The arrays handed out for one communicator. Boxed slices are never
/// resized, so the addresses given to the caller stay valid while the entry
/// lives.
struct Arrays {
    comm: Weak<Comm>,
    depths: Box<[c_int]>,
    /// Owns the rows `row_ptrs` points into (read only through those).
    _rows: Box<[[c_int; LEVEL_DEPTH]]>,
    /// Addresses of `rows`' elements (the `int **` value), as integers so
    /// the cache is `Send`.
    row_ptrs: Box<[usize]>,
}

/// Keyed by the communicator's address; the `Weak` tells a live entry from
/// one of a freed communicator whose address was reused.
static CACHE: Mutex<Option<HashMap<usize, Arrays>>> = Mutex::new(None);

/// The attribute value for `k` on `comm`, if `k` is a topology keyval.
pub(crate) fn topology_attr(k: c_int, comm: &Arc<Comm>) -> Option<Result<usize>> {
    if k != GW_TOPOLOGY_DEPTHS && k != GW_TOPOLOGY_COLORS {
        return None;
    }
    Some(value(k, comm))
}

fn value(k: c_int, comm: &Arc<Comm>) -> Result<usize> {
    let key = Arc::as_ptr(comm) as usize;
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    let cache = cache.get_or_insert_with(HashMap::new);
    let live = cache
        .get(&key)
        .is_some_and(|a| a.comm.upgrade().is_some_and(|c| Arc::ptr_eq(&c, comm)));
    if !live {
        // Drop what freed communicators left behind, then compute.
        cache.retain(|_, a| a.comm.strong_count() > 0);
        let colours = crate::handles::mpi()?.level_colours(comm)?;
        let rows: Box<[[c_int; LEVEL_DEPTH]]> =
            colours.iter().map(|c| c.map(|x| x as c_int)).collect();
        let row_ptrs = rows.iter().map(|r| r.as_ptr() as usize).collect();
        cache.insert(
            key,
            Arrays {
                comm: Arc::downgrade(comm),
                depths: vec![LEVEL_DEPTH as c_int; colours.len()].into_boxed_slice(),
                _rows: rows,
                row_ptrs,
            },
        );
    }
    let a = &cache[&key];
    Ok(if k == GW_TOPOLOGY_DEPTHS {
        a.depths.as_ptr() as usize
    } else {
        a.row_ptrs.as_ptr() as usize
    })
}
