//! Persistent collectives (MPI 4.0 `MPI_X_init`, and their `_c` forms):
//! the arguments are checked once, as for the nonblocking form, and turned
//! into its closure; each `MPI_Start` starts a fresh instance of the
//! nonblocking algorithm on a copy of that closure, reading the buffers as
//! they are then.

use crate::abi::*;
use crate::coll::*;
use crate::errors::run;
use crate::handles::{self, PKind, Persistent, ReqObj, REQS};
use crate::Void;
use gridwire_mpi::{class, err, Comm, Mpi};
use std::ffi::c_int;
use std::sync::{Arc, Mutex};

/// Exports the persistent form (`MPI_X_init`) of one collective: the
/// arguments are checked once; each `MPI_Start` runs a fresh instance of
/// the nonblocking algorithm on a copy of the prepared closure.
macro_rules! coll_init {
    ($name:ident / $pname:ident, ($($a:ident : $t:ty),*), $c:ident, $prep:expr) => {
        mpi_fn!(fn $name / $pname($($a: $t,)* info: MPI_Info, req: *mut MPI_Request) -> c_int {
            run(stringify!($name), $c, || {
                if req.is_null() {
                    return Err(err(class::REQUEST, "request pointer is NULL"));
                }
                crate::comm::info_or_empty(info)?;
                // SAFETY: the arguments follow the MPI contract of this call;
                // the buffers stay valid while the persistent request exists.
                let (cm, f) = unsafe { $prep }?;
                let start: handles::PersistentColl =
                    Box::new(move |m: &'static Mpi, cm: &Comm| m.icoll(cm, f.clone()));
                let p = Persistent { kind: PKind::Coll(start), comm: cm, active: None };
                // SAFETY: checked output argument.
                unsafe { *req = REQS.insert(ReqObj::Persistent(Arc::new(Mutex::new(p)))) };
                Ok(())
            })
        });
    };
}

coll_init!(MPI_Barrier_init / PMPI_Barrier_init, (c: MPI_Comm), c, prep_barrier(c));
coll_init!(MPI_Bcast_init / PMPI_Bcast_init,
      (b: *mut Void, count: c_int, dt: MPI_Datatype, root: c_int, c: MPI_Comm), c, prep_bcast(b, i64::from(count), dt, root, c));
coll_init!(MPI_Reduce_init / PMPI_Reduce_init,
      (s: *const Void, r: *mut Void, count: c_int, dt: MPI_Datatype, o: MPI_Op, root: c_int, c: MPI_Comm), c,
      prep_reduce(s, r, i64::from(count), dt, o, root, c));
coll_init!(MPI_Allreduce_init / PMPI_Allreduce_init,
      (s: *const Void, r: *mut Void, count: c_int, dt: MPI_Datatype, o: MPI_Op, c: MPI_Comm), c,
      prep_allreduce(s, r, i64::from(count), dt, o, c));
coll_init!(MPI_Gather_init / PMPI_Gather_init,
      (s: *const Void, sc: c_int, st: MPI_Datatype, r: *mut Void, rc: c_int, rt: MPI_Datatype, root: c_int, c: MPI_Comm), c,
      prep_gather(s, i64::from(sc), st, r, i64::from(rc), rt, root, c));
coll_init!(MPI_Gatherv_init / PMPI_Gatherv_init,
      (s: *const Void, sc: c_int, st: MPI_Datatype, r: *mut Void, rcs: *const c_int, displs: *const c_int, rt: MPI_Datatype, root: c_int, c: MPI_Comm), c,
      prep_gatherv(s, i64::from(sc), st, r, VArgs::Int(rcs, displs), rt, root, c));
coll_init!(MPI_Scatter_init / PMPI_Scatter_init,
      (s: *const Void, sc: c_int, st: MPI_Datatype, r: *mut Void, rc: c_int, rt: MPI_Datatype, root: c_int, c: MPI_Comm), c,
      prep_scatter(s, i64::from(sc), st, r, i64::from(rc), rt, root, c));
coll_init!(MPI_Scatterv_init / PMPI_Scatterv_init,
      (s: *const Void, scs: *const c_int, displs: *const c_int, st: MPI_Datatype, r: *mut Void, rc: c_int, rt: MPI_Datatype, root: c_int, c: MPI_Comm), c,
      prep_scatterv(s, VArgs::Int(scs, displs), st, r, i64::from(rc), rt, root, c));
coll_init!(MPI_Allgather_init / PMPI_Allgather_init,
      (s: *const Void, sc: c_int, st: MPI_Datatype, r: *mut Void, rc: c_int, rt: MPI_Datatype, c: MPI_Comm), c,
      prep_allgather(s, i64::from(sc), st, r, i64::from(rc), rt, c));
coll_init!(MPI_Allgatherv_init / PMPI_Allgatherv_init,
      (s: *const Void, sc: c_int, st: MPI_Datatype, r: *mut Void, rcs: *const c_int, displs: *const c_int, rt: MPI_Datatype, c: MPI_Comm), c,
      prep_allgatherv(s, i64::from(sc), st, r, VArgs::Int(rcs, displs), rt, c));
coll_init!(MPI_Alltoall_init / PMPI_Alltoall_init,
      (s: *const Void, sc: c_int, st: MPI_Datatype, r: *mut Void, rc: c_int, rt: MPI_Datatype, c: MPI_Comm), c,
      prep_alltoall(s, i64::from(sc), st, r, i64::from(rc), rt, c));
coll_init!(MPI_Alltoallv_init / PMPI_Alltoallv_init,
      (s: *const Void, scs: *const c_int, sds: *const c_int, st: MPI_Datatype, r: *mut Void, rcs: *const c_int, rds: *const c_int, rt: MPI_Datatype, c: MPI_Comm), c,
      prep_alltoallv(s, VArgs::Int(scs, sds), st, r, VArgs::Int(rcs, rds), rt, c));
coll_init!(MPI_Alltoallw_init / PMPI_Alltoallw_init,
      (s: *const Void, scs: *const c_int, sds: *const c_int, sts: *const MPI_Datatype, r: *mut Void, rcs: *const c_int, rds: *const c_int, rts: *const MPI_Datatype, c: MPI_Comm), c,
      prep_alltoallw(s, VArgs::Int(scs, sds), sts, r, VArgs::Int(rcs, rds), rts, c));
coll_init!(MPI_Reduce_scatter_init / PMPI_Reduce_scatter_init,
      (s: *const Void, r: *mut Void, rcs: *const c_int, dt: MPI_Datatype, o: MPI_Op, c: MPI_Comm), c,
      prep_reduce_scatter(s, r, VArgs::Int(rcs, std::ptr::null()), dt, o, c));
coll_init!(MPI_Reduce_scatter_block_init / PMPI_Reduce_scatter_block_init,
      (s: *const Void, r: *mut Void, rc: c_int, dt: MPI_Datatype, o: MPI_Op, c: MPI_Comm), c,
      prep_reduce_scatter_block(s, r, i64::from(rc), dt, o, c));
coll_init!(MPI_Scan_init / PMPI_Scan_init,
      (s: *const Void, r: *mut Void, count: c_int, dt: MPI_Datatype, o: MPI_Op, c: MPI_Comm), c,
      prep_scan(s, r, i64::from(count), dt, o, c, false));
coll_init!(MPI_Exscan_init / PMPI_Exscan_init,
      (s: *const Void, r: *mut Void, count: c_int, dt: MPI_Datatype, o: MPI_Op, c: MPI_Comm), c,
      prep_scan(s, r, i64::from(count), dt, o, c, true));

// ---- large-count (`_c`) forms ----------------------------------------------

coll_init!(MPI_Bcast_init_c / PMPI_Bcast_init_c,
      (b: *mut Void, count: MPI_Count, dt: MPI_Datatype, root: c_int, c: MPI_Comm), c, prep_bcast(b, count, dt, root, c));
coll_init!(MPI_Reduce_init_c / PMPI_Reduce_init_c,
      (s: *const Void, r: *mut Void, count: MPI_Count, dt: MPI_Datatype, o: MPI_Op, root: c_int, c: MPI_Comm), c,
      prep_reduce(s, r, count, dt, o, root, c));
coll_init!(MPI_Allreduce_init_c / PMPI_Allreduce_init_c,
      (s: *const Void, r: *mut Void, count: MPI_Count, dt: MPI_Datatype, o: MPI_Op, c: MPI_Comm), c,
      prep_allreduce(s, r, count, dt, o, c));
coll_init!(MPI_Gather_init_c / PMPI_Gather_init_c,
      (s: *const Void, sc: MPI_Count, st: MPI_Datatype, r: *mut Void, rc: MPI_Count, rt: MPI_Datatype, root: c_int, c: MPI_Comm), c,
      prep_gather(s, sc, st, r, rc, rt, root, c));
coll_init!(MPI_Gatherv_init_c / PMPI_Gatherv_init_c,
      (s: *const Void, sc: MPI_Count, st: MPI_Datatype, r: *mut Void, rcs: *const MPI_Count, displs: *const MPI_Aint, rt: MPI_Datatype, root: c_int, c: MPI_Comm), c,
      prep_gatherv(s, sc, st, r, VArgs::Big(rcs, displs), rt, root, c));
coll_init!(MPI_Scatter_init_c / PMPI_Scatter_init_c,
      (s: *const Void, sc: MPI_Count, st: MPI_Datatype, r: *mut Void, rc: MPI_Count, rt: MPI_Datatype, root: c_int, c: MPI_Comm), c,
      prep_scatter(s, sc, st, r, rc, rt, root, c));
coll_init!(MPI_Scatterv_init_c / PMPI_Scatterv_init_c,
      (s: *const Void, scs: *const MPI_Count, displs: *const MPI_Aint, st: MPI_Datatype, r: *mut Void, rc: MPI_Count, rt: MPI_Datatype, root: c_int, c: MPI_Comm), c,
      prep_scatterv(s, VArgs::Big(scs, displs), st, r, rc, rt, root, c));
coll_init!(MPI_Allgather_init_c / PMPI_Allgather_init_c,
      (s: *const Void, sc: MPI_Count, st: MPI_Datatype, r: *mut Void, rc: MPI_Count, rt: MPI_Datatype, c: MPI_Comm), c,
      prep_allgather(s, sc, st, r, rc, rt, c));
coll_init!(MPI_Allgatherv_init_c / PMPI_Allgatherv_init_c,
      (s: *const Void, sc: MPI_Count, st: MPI_Datatype, r: *mut Void, rcs: *const MPI_Count, displs: *const MPI_Aint, rt: MPI_Datatype, c: MPI_Comm), c,
      prep_allgatherv(s, sc, st, r, VArgs::Big(rcs, displs), rt, c));
coll_init!(MPI_Alltoall_init_c / PMPI_Alltoall_init_c,
      (s: *const Void, sc: MPI_Count, st: MPI_Datatype, r: *mut Void, rc: MPI_Count, rt: MPI_Datatype, c: MPI_Comm), c,
      prep_alltoall(s, sc, st, r, rc, rt, c));
coll_init!(MPI_Alltoallv_init_c / PMPI_Alltoallv_init_c,
      (s: *const Void, scs: *const MPI_Count, sds: *const MPI_Aint, st: MPI_Datatype, r: *mut Void, rcs: *const MPI_Count, rds: *const MPI_Aint, rt: MPI_Datatype, c: MPI_Comm), c,
      prep_alltoallv(s, VArgs::Big(scs, sds), st, r, VArgs::Big(rcs, rds), rt, c));
coll_init!(MPI_Alltoallw_init_c / PMPI_Alltoallw_init_c,
      (s: *const Void, scs: *const MPI_Count, sds: *const MPI_Aint, sts: *const MPI_Datatype, r: *mut Void, rcs: *const MPI_Count, rds: *const MPI_Aint, rts: *const MPI_Datatype, c: MPI_Comm), c,
      prep_alltoallw(s, VArgs::Big(scs, sds), sts, r, VArgs::Big(rcs, rds), rts, c));
coll_init!(MPI_Reduce_scatter_init_c / PMPI_Reduce_scatter_init_c,
      (s: *const Void, r: *mut Void, rcs: *const MPI_Count, dt: MPI_Datatype, o: MPI_Op, c: MPI_Comm), c,
      prep_reduce_scatter(s, r, VArgs::Big(rcs, std::ptr::null()), dt, o, c));
coll_init!(MPI_Reduce_scatter_block_init_c / PMPI_Reduce_scatter_block_init_c,
      (s: *const Void, r: *mut Void, rc: MPI_Count, dt: MPI_Datatype, o: MPI_Op, c: MPI_Comm), c,
      prep_reduce_scatter_block(s, r, rc, dt, o, c));
coll_init!(MPI_Scan_init_c / PMPI_Scan_init_c,
      (s: *const Void, r: *mut Void, count: MPI_Count, dt: MPI_Datatype, o: MPI_Op, c: MPI_Comm), c,
      prep_scan(s, r, count, dt, o, c, false));
coll_init!(MPI_Exscan_init_c / PMPI_Exscan_init_c,
      (s: *const Void, r: *mut Void, count: MPI_Count, dt: MPI_Datatype, o: MPI_Op, c: MPI_Comm), c,
      prep_scan(s, r, count, dt, o, c, true));
