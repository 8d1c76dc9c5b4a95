//! Communicators and groups.

use crate::abi::*;
use crate::errors::run;
use crate::handles::{self, comm, group, mpi, new_comm, COMMS, GROUPS};
use crate::{arr, arr_mut, cstr, put, put_str};
use gridwire_mpi::{class, err, Comm, Group, Result, CONGRUENT, IDENT, SIMILAR, UNEQUAL};
use std::ffi::{c_char, c_int};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Output a new communicator (or MPI_COMM_NULL), inheriting the parent's error handler.
///
/// # Safety
/// `out` is a valid `MPI_Comm*`.
unsafe fn out_comm(out: *mut MPI_Comm, parent: &Comm, c: Option<Arc<Comm>>) -> Result<()> {
    if out.is_null() {
        return Err(err(class::ARG, "the output communicator pointer is NULL"));
    }
    let h = match c {
        Some(c) => {
            c.errhandler
                .store(parent.errhandler.load(Ordering::Relaxed), Ordering::Relaxed);
            new_comm(c)
        }
        None => MPI_COMM_NULL,
    };
    // SAFETY: checked non-null output argument.
    unsafe { *out = h };
    Ok(())
}

mpi_fn!(fn MPI_Comm_size / PMPI_Comm_size(c: MPI_Comm, size: *mut c_int) -> c_int {
    run("MPI_Comm_size", c, || {
        let cm = comm(c)?;
        if size.is_null() {
            return Err(err(class::ARG, "size pointer is NULL"));
        }
        // SAFETY: checked output argument.
        unsafe { *size = cm.size as c_int };
        Ok(())
    })
});

mpi_fn!(fn MPI_Comm_rank / PMPI_Comm_rank(c: MPI_Comm, rank: *mut c_int) -> c_int {
    run("MPI_Comm_rank", c, || {
        let cm = comm(c)?;
        if rank.is_null() {
            return Err(err(class::ARG, "rank pointer is NULL"));
        }
        // SAFETY: checked output argument.
        unsafe { *rank = cm.rank as c_int };
        Ok(())
    })
});

mpi_fn!(fn MPI_Comm_dup / PMPI_Comm_dup(c: MPI_Comm, out: *mut MPI_Comm) -> c_int {
    run("MPI_Comm_dup", c, || {
        let cm = comm(c)?;
        let n = mpi()?.comm_dup(&cm)?;
        if let Err(e) = crate::attr::copy_comm_attrs(c, &cm, &n) {
            // SAFETY: output argument.
            unsafe { out_comm(out, &cm, None)? };
            return Err(e);
        }
        // SAFETY: output argument.
        unsafe { out_comm(out, &cm, Some(n)) }
    })
});

mpi_fn!(fn MPI_Comm_dup_with_info / PMPI_Comm_dup_with_info(c: MPI_Comm, info: MPI_Info, out: *mut MPI_Comm) -> c_int {
    run("MPI_Comm_dup_with_info", c, || {
        let cm = comm(c)?;
        let i = info_or_empty(info)?;
        // The link hints (`gw_*`) are checked before anything is created.
        mpi()?.link_route(&i)?;
        let n = mpi()?.comm_dup(&cm)?;
        // The hints of `info`, not those of `c` (the standard).
        mpi()?.comm_set_info(&n, &i, true)?;
        if let Err(e) = crate::attr::copy_comm_attrs(c, &cm, &n) {
            // SAFETY: output argument.
            unsafe { out_comm(out, &cm, None)? };
            return Err(e);
        }
        // SAFETY: output argument.
        unsafe { out_comm(out, &cm, Some(n)) }
    })
});

mpi_fn!(fn MPI_Comm_split / PMPI_Comm_split(c: MPI_Comm, color: c_int, key: c_int, out: *mut MPI_Comm) -> c_int {
    run("MPI_Comm_split", c, || {
        let cm = comm(c)?;
        let n = mpi()?.comm_split(&cm, color, key)?;
        // SAFETY: output argument.
        unsafe { out_comm(out, &cm, n) }
    })
});

/// An info argument where `MPI_INFO_NULL` means "no hints".
pub(crate) fn info_or_empty(h: MPI_Info) -> Result<gridwire_mpi::info::Info> {
    if h == MPI_INFO_NULL {
        return Ok(Default::default());
    }
    Ok(handles::info(h)?.lock().unwrap().clone())
}

const HW_KEY: &str = "mpi_hw_resource_type";
const HW_SHARED: &str = "mpi_shared_memory";
/// Gridwire's resource types (`docs/mpi.md`, "Topology levels").
const HW_HOST: &str = "gw:host";
const HW_SITE: &str = "gw:site";

mpi_fn!(fn MPI_Comm_split_type / PMPI_Comm_split_type(c: MPI_Comm, kind: c_int, key: c_int, info: MPI_Info, out: *mut MPI_Comm) -> c_int {
    run("MPI_Comm_split_type", c, || {
        let cm = comm(c)?;
        let m = mpi()?;
        let hints = info_or_empty(info)?;
        // The level to split by, and whether this rank joins. Ranks may pass
        // MPI_UNDEFINED (or an unknown resource type) while others split: both
        // levels run the same collectives, so everyone still agrees.
        let guided = hints.get(HW_KEY);
        // `host_in_site`: the gw:host level (a host within its site), not
        // plain shared memory.
        let mut host_in_site = false;
        let (site_level, join) = match kind {
            MPI_UNDEFINED => (false, false),
            MPI_COMM_TYPE_SHARED => (false, true),
            // Unguided: the next level below the parent: its sites if it
            // spans several, else its hosts (every member computes this alike
            // from the placements published at start-up).
            MPI_COMM_TYPE_HW_UNGUIDED => {
                host_in_site = true;
                // Members from another job (spawned, connected) have no
                // placement here: their parent is split by host, which
                // both jobs' members then decide alike.
                (!cm.is_inter() && m.spans_sites(&cm).unwrap_or(false), true)
            }
            MPI_COMM_TYPE_HW_GUIDED | MPI_COMM_TYPE_RESOURCE_GUIDED => match guided {
                Some(HW_SHARED) => (false, true),
                Some(HW_HOST) => {
                    host_in_site = true;
                    (false, true)
                }
                Some(HW_SITE) => (true, true),
                // Unknown resource types give MPI_COMM_NULL, as the standard says.
                _ => (false, false),
            },
            _ => return Err(err(class::ARG, format!("split type {kind} is not known"))),
        };
        let mut n = if site_level {
            m.comm_split_site(&cm, join, key)?
        } else if host_in_site {
            m.comm_split_host_in_site(&cm, join, key)?
        } else {
            m.comm_split_shared(&cm, join, key)?
        };
        // Unguided: a strict subset of the parent or nothing. (Every member
        // of a host or site sees the same sizes, so they agree.)
        if kind == MPI_COMM_TYPE_HW_UNGUIDED && n.as_ref().is_some_and(|n| n.size == cm.size) {
            n = None;
        }
        if let Some(n) = &n {
            // The resource type the split followed, on the new communicator
            // (and, unguided, in the caller's info, as the standard says).
            let followed = match (site_level, kind, guided) {
                (true, _, _) => HW_SITE,
                (false, MPI_COMM_TYPE_HW_GUIDED | MPI_COMM_TYPE_RESOURCE_GUIDED, Some(HW_HOST)) => HW_HOST,
                (false, MPI_COMM_TYPE_HW_UNGUIDED, _) => HW_HOST,
                _ => HW_SHARED,
            };
            n.info.lock().unwrap().set(HW_KEY, followed)?;
            if kind == MPI_COMM_TYPE_HW_UNGUIDED && info != MPI_INFO_NULL {
                handles::info(info)?.lock().unwrap().set(HW_KEY, followed)?;
            }
        }
        // SAFETY: output argument.
        unsafe { out_comm(out, &cm, n) }
    })
});

mpi_fn!(fn MPI_Comm_idup_with_info / PMPI_Comm_idup_with_info(c: MPI_Comm, info: MPI_Info, out: *mut MPI_Comm, req: *mut MPI_Request) -> c_int {
    // The hints are checked now (a bad `gw_*` value is an error of this
    // call) and applied to the new communicator when the idup makes it.
    let i = match info_or_empty(info).and_then(|i| mpi()?.link_route(&i).map(|_| i)) {
        Ok(i) => i,
        Err(e) => return crate::errors::fail("MPI_Comm_idup_with_info", c, e),
    };
    // SAFETY: same contract as MPI_Comm_idup.
    unsafe { crate::coll::comm_idup("MPI_Comm_idup_with_info", c, Some(i), out, req) }
});

mpi_fn!(fn MPI_Comm_create / PMPI_Comm_create(c: MPI_Comm, g: MPI_Group, out: *mut MPI_Comm) -> c_int {
    run("MPI_Comm_create", c, || {
        let cm = comm(c)?;
        let gr = group(g)?;
        let n = mpi()?.comm_create(&cm, &gr)?;
        // SAFETY: output argument.
        unsafe { out_comm(out, &cm, n) }
    })
});

mpi_fn!(fn MPI_Comm_create_group / PMPI_Comm_create_group(c: MPI_Comm, g: MPI_Group, tag: c_int, out: *mut MPI_Comm) -> c_int {
    run("MPI_Comm_create_group", c, || {
        let cm = comm(c)?;
        let gr = group(g)?;
        let n = mpi()?.comm_create_group(&cm, &gr, tag)?;
        // SAFETY: output argument.
        unsafe { out_comm(out, &cm, n) }
    })
});

unsafe fn free_comm(name: &str, c: *mut MPI_Comm) -> c_int {
    // SAFETY: `c` is NULL or the program's handle variable.
    let h = if c.is_null() {
        MPI_COMM_NULL
    } else {
        unsafe { *c }
    };
    run(name, h, || {
        if c.is_null() {
            return Err(err(class::ARG, "communicator pointer is NULL"));
        }
        match h {
            MPI_COMM_WORLD | MPI_COMM_SELF => {
                return Err(err(class::COMM, "predefined communicators cannot be freed"))
            }
            MPI_COMM_NULL => return Err(err(class::COMM, "the communicator is MPI_COMM_NULL")),
            _ => {}
        }
        let cm = comm(h)?;
        crate::attr::delete_comm_attrs(h, &cm)?;
        COMMS.remove(h);
        crate::spawn::forget_parent(h);
        // SAFETY: checked non-null in/out argument.
        unsafe { *c = MPI_COMM_NULL };
        Ok(())
    })
}

mpi_fn!(fn MPI_Comm_free / PMPI_Comm_free(c: *mut MPI_Comm) -> c_int {
    // SAFETY: forwarded argument contract.
    unsafe { free_comm("MPI_Comm_free", c) }
});

mpi_fn!(fn MPI_Comm_disconnect / PMPI_Comm_disconnect(c: *mut MPI_Comm) -> c_int {
    if let Ok(m) = mpi() {
        // SAFETY: `c` is the program's handle variable.
        if let Ok(cm) = comm(if c.is_null() { MPI_COMM_NULL } else { unsafe { *c } }) {
            let _ = m.barrier(&cm);
            // Processes of another job: their sockets close now.
            m.release_foreign(&cm);
        }
    }
    // SAFETY: forwarded argument contract.
    unsafe { free_comm("MPI_Comm_disconnect", c) }
});

mpi_fn!(fn MPI_Comm_compare / PMPI_Comm_compare(a: MPI_Comm, b: MPI_Comm, result: *mut c_int) -> c_int {
    run("MPI_Comm_compare", a, || {
        let (ca, cb) = (comm(a)?, comm(b)?);
        // Intercommunicators compare both groups (the weaker result wins);
        // an intercommunicator and an intracommunicator are unequal.
        let r = if Arc::ptr_eq(&ca, &cb) {
            IDENT
        } else if ca.is_inter() != cb.is_inter() {
            UNEQUAL
        } else {
            let local = Group::compare(&ca.group, &cb.group);
            let remote = Group::compare(&ca.peers, &cb.peers);
            match local.max(remote) {
                IDENT => CONGRUENT,
                SIMILAR => SIMILAR,
                _ => UNEQUAL,
            }
        };
        // SAFETY: output argument.
        unsafe { put(result, r) };
        Ok(())
    })
});

mpi_fn!(fn MPI_Comm_group / PMPI_Comm_group(c: MPI_Comm, g: *mut MPI_Group) -> c_int {
    run("MPI_Comm_group", c, || {
        let cm = comm(c)?;
        // SAFETY: output argument.
        unsafe { put(g, GROUPS.insert(cm.group.clone())) };
        Ok(())
    })
});

mpi_fn!(fn MPI_Comm_test_inter / PMPI_Comm_test_inter(c: MPI_Comm, flag: *mut c_int) -> c_int {
    run("MPI_Comm_test_inter", c, || {
        let cm = comm(c)?;
        // SAFETY: output argument.
        unsafe { put(flag, cm.is_inter() as c_int) };
        Ok(())
    })
});

/// The communicator of `c`, which must be an intercommunicator.
fn intercomm(c: MPI_Comm, what: &str) -> Result<Arc<Comm>> {
    let cm = comm(c)?;
    if !cm.is_inter() {
        return Err(err(
            class::COMM,
            format!("{what} needs an intercommunicator; this is an intracommunicator"),
        ));
    }
    Ok(cm)
}

mpi_fn!(fn MPI_Comm_remote_size / PMPI_Comm_remote_size(c: MPI_Comm, size: *mut c_int) -> c_int {
    run("MPI_Comm_remote_size", c, || {
        let cm = intercomm(c, "MPI_Comm_remote_size")?;
        if size.is_null() {
            return Err(err(class::ARG, "size pointer is NULL"));
        }
        // SAFETY: checked output argument.
        unsafe { *size = cm.peer_size as c_int };
        Ok(())
    })
});

mpi_fn!(fn MPI_Comm_remote_group / PMPI_Comm_remote_group(c: MPI_Comm, g: *mut MPI_Group) -> c_int {
    run("MPI_Comm_remote_group", c, || {
        let cm = intercomm(c, "MPI_Comm_remote_group")?;
        if g.is_null() {
            return Err(err(class::ARG, "group pointer is NULL"));
        }
        // SAFETY: checked output argument.
        unsafe { put(g, GROUPS.insert(cm.peers.clone())) };
        Ok(())
    })
});

mpi_fn!(fn MPI_Intercomm_create / PMPI_Intercomm_create(local: MPI_Comm, local_leader: c_int, peer: MPI_Comm, remote_leader: c_int, tag: c_int, out: *mut MPI_Comm) -> c_int {
    run("MPI_Intercomm_create", local, || {
        let lc = comm(local)?;
        if out.is_null() {
            return Err(err(class::ARG, "the output communicator pointer is NULL"));
        }
        // The peer communicator matters at the local leader only (others may pass MPI_COMM_NULL).
        let pc = if peer == MPI_COMM_NULL { None } else { Some(comm(peer)?) };
        let n = mpi()?.intercomm_create(&lc, local_leader, pc.as_deref(), remote_leader, tag)?;
        // SAFETY: checked output argument.
        unsafe { out_comm(out, &lc, Some(n)) }
    })
});

/// Outputs a communicator made from groups, with the error handler given.
///
/// # Safety
/// `out` is NULL or the program's `MPI_Comm` output argument.
unsafe fn out_from_groups(out: *mut MPI_Comm, c: Arc<Comm>, eh: MPI_Errhandler) -> Result<()> {
    // MPI_ERRHANDLER_NULL: the default (MPI_ERRORS_ARE_FATAL).
    let eh = if eh == MPI_ERRHANDLER_NULL { 0 } else { eh };
    c.errhandler.store(eh, Ordering::Relaxed);
    // SAFETY: checked by the caller.
    unsafe { *out = new_comm(c) };
    Ok(())
}

mpi_fn!(fn MPI_Comm_create_from_group / PMPI_Comm_create_from_group(g: MPI_Group, tag: *const c_char, info: MPI_Info, eh: MPI_Errhandler, out: *mut MPI_Comm) -> c_int {
    run("MPI_Comm_create_from_group", MPI_COMM_SELF, || {
        let gr = group(g)?;
        info_or_empty(info)?;
        if eh != MPI_ERRHANDLER_NULL {
            handles::errh(eh)?;
        }
        if out.is_null() || tag.is_null() {
            return Err(err(class::ARG, "the string tag or the output pointer is NULL"));
        }
        // SAFETY: a NUL-terminated string by the MPI contract.
        let t = unsafe { cstr(tag) };
        let n = mpi()?.comm_from_group(&gr, &t)?;
        // SAFETY: checked output argument.
        unsafe { out_from_groups(out, n, eh) }
    })
});

mpi_fn!(fn MPI_Intercomm_create_from_groups / PMPI_Intercomm_create_from_groups(lg: MPI_Group, local_leader: c_int, rg: MPI_Group, remote_leader: c_int, tag: *const c_char, info: MPI_Info, eh: MPI_Errhandler, out: *mut MPI_Comm) -> c_int {
    run("MPI_Intercomm_create_from_groups", MPI_COMM_SELF, || {
        let (l, r) = (group(lg)?, group(rg)?);
        info_or_empty(info)?;
        if eh != MPI_ERRHANDLER_NULL {
            handles::errh(eh)?;
        }
        if out.is_null() || tag.is_null() {
            return Err(err(class::ARG, "the string tag or the output pointer is NULL"));
        }
        // SAFETY: a NUL-terminated string by the MPI contract.
        let t = unsafe { cstr(tag) };
        let n = mpi()?.intercomm_from_groups(&l, local_leader, &r, remote_leader, &t)?;
        // SAFETY: checked output argument.
        unsafe { out_from_groups(out, n, eh) }
    })
});

mpi_fn!(fn MPI_Intercomm_merge / PMPI_Intercomm_merge(c: MPI_Comm, high: c_int, out: *mut MPI_Comm) -> c_int {
    run("MPI_Intercomm_merge", c, || {
        let cm = intercomm(c, "MPI_Intercomm_merge")?;
        if out.is_null() {
            return Err(err(class::ARG, "the output communicator pointer is NULL"));
        }
        let n = mpi()?.intercomm_merge(&cm, high != 0)?;
        // SAFETY: checked output argument.
        unsafe { out_comm(out, &cm, Some(n)) }
    })
});

mpi_fn!(fn MPI_Comm_set_name / PMPI_Comm_set_name(c: MPI_Comm, name: *const c_char) -> c_int {
    run("MPI_Comm_set_name", c, || {
        let cm = comm(c)?;
        // SAFETY: NUL-terminated string argument.
        let mut s = unsafe { cstr(name) };
        s.truncate(MPI_MAX_OBJECT_NAME - 1);
        *cm.name.lock().unwrap() = s;
        Ok(())
    })
});

mpi_fn!(fn MPI_Comm_get_name / PMPI_Comm_get_name(c: MPI_Comm, name: *mut c_char, len: *mut c_int) -> c_int {
    run("MPI_Comm_get_name", c, || {
        // The null handle has a name too (as in MPICH and Open MPI).
        let s = if c == MPI_COMM_NULL {
            "MPI_COMM_NULL".to_string()
        } else {
            comm(c)?.name.lock().unwrap().clone()
        };
        // SAFETY: `name` holds MPI_MAX_OBJECT_NAME bytes by the standard.
        unsafe { put_str(&s, name, MPI_MAX_OBJECT_NAME, len) };
        Ok(())
    })
});

mpi_fn!(fn MPI_Comm_set_info / PMPI_Comm_set_info(c: MPI_Comm, info: MPI_Info) -> c_int {
    run("MPI_Comm_set_info", c, || {
        let cm = comm(c)?;
        let i = info_or_empty(info)?;
        // Updates the hints given; a bad `gw_*` value changes nothing.
        mpi()?.comm_set_info(&cm, &i, false)
    })
});

mpi_fn!(fn MPI_Comm_get_info / PMPI_Comm_get_info(c: MPI_Comm, info: *mut MPI_Info) -> c_int {
    run("MPI_Comm_get_info", c, || {
        let cm = comm(c)?;
        let i = cm.info.lock().unwrap().clone();
        // SAFETY: output argument.
        unsafe { put(info, handles::INFOS.insert(Arc::new(std::sync::Mutex::new(i)))) };
        Ok(())
    })
});

// ---- groups ----------------------------------------------------------------------

unsafe fn out_group(out: *mut MPI_Group, g: Arc<Group>) -> Result<()> {
    if out.is_null() {
        return Err(err(class::ARG, "the output group pointer is NULL"));
    }
    let h = if g.size() == 0 {
        MPI_GROUP_EMPTY
    } else {
        GROUPS.insert(g)
    };
    // SAFETY: checked non-null output argument.
    unsafe { *out = h };
    Ok(())
}

mpi_fn!(fn MPI_Group_size / PMPI_Group_size(g: MPI_Group, size: *mut c_int) -> c_int {
    run("MPI_Group_size", MPI_COMM_WORLD, || {
        let gr = group(g)?;
        // SAFETY: output argument.
        unsafe { put(size, gr.size() as c_int) };
        Ok(())
    })
});

mpi_fn!(fn MPI_Group_rank / PMPI_Group_rank(g: MPI_Group, rank: *mut c_int) -> c_int {
    run("MPI_Group_rank", MPI_COMM_WORLD, || {
        let gr = group(g)?;
        let me = mpi()?.me();
        // SAFETY: output argument.
        unsafe { put(rank, gr.rank_of(me).map_or(MPI_UNDEFINED, |r| r as c_int)) };
        Ok(())
    })
});

mpi_fn!(fn MPI_Group_incl / PMPI_Group_incl(g: MPI_Group, n: c_int, ranks: *const c_int, out: *mut MPI_Group) -> c_int {
    run("MPI_Group_incl", MPI_COMM_WORLD, || {
        // SAFETY: array argument of `n` ranks; output argument.
        unsafe { out_group(out, group(g)?.incl(arr(ranks, n))?) }
    })
});

mpi_fn!(fn MPI_Group_excl / PMPI_Group_excl(g: MPI_Group, n: c_int, ranks: *const c_int, out: *mut MPI_Group) -> c_int {
    run("MPI_Group_excl", MPI_COMM_WORLD, || {
        // SAFETY: array argument of `n` ranks; output argument.
        unsafe { out_group(out, group(g)?.excl(arr(ranks, n))?) }
    })
});

mpi_fn!(fn MPI_Group_range_incl / PMPI_Group_range_incl(g: MPI_Group, n: c_int, ranges: *const [c_int; 3], out: *mut MPI_Group) -> c_int {
    run("MPI_Group_range_incl", MPI_COMM_WORLD, || {
        let gr = group(g)?;
        // SAFETY: array argument of `n` triplets.
        let r = gr.expand_ranges(unsafe { arr(ranges, n) })?;
        // SAFETY: output argument.
        unsafe { out_group(out, gr.incl(&r)?) }
    })
});

mpi_fn!(fn MPI_Group_range_excl / PMPI_Group_range_excl(g: MPI_Group, n: c_int, ranges: *const [c_int; 3], out: *mut MPI_Group) -> c_int {
    run("MPI_Group_range_excl", MPI_COMM_WORLD, || {
        let gr = group(g)?;
        // SAFETY: array argument of `n` triplets.
        let r = gr.expand_ranges(unsafe { arr(ranges, n) })?;
        // SAFETY: output argument.
        unsafe { out_group(out, gr.excl(&r)?) }
    })
});

mpi_fn!(fn MPI_Group_union / PMPI_Group_union(a: MPI_Group, b: MPI_Group, out: *mut MPI_Group) -> c_int {
    run("MPI_Group_union", MPI_COMM_WORLD, || {
        // SAFETY: output argument.
        unsafe { out_group(out, Group::union(&*group(a)?, &*group(b)?)) }
    })
});

mpi_fn!(fn MPI_Group_intersection / PMPI_Group_intersection(a: MPI_Group, b: MPI_Group, out: *mut MPI_Group) -> c_int {
    run("MPI_Group_intersection", MPI_COMM_WORLD, || {
        // SAFETY: output argument.
        unsafe { out_group(out, Group::intersection(&*group(a)?, &*group(b)?)) }
    })
});

mpi_fn!(fn MPI_Group_difference / PMPI_Group_difference(a: MPI_Group, b: MPI_Group, out: *mut MPI_Group) -> c_int {
    run("MPI_Group_difference", MPI_COMM_WORLD, || {
        // SAFETY: output argument.
        unsafe { out_group(out, Group::difference(&*group(a)?, &*group(b)?)) }
    })
});

mpi_fn!(fn MPI_Group_translate_ranks / PMPI_Group_translate_ranks(a: MPI_Group, n: c_int, r1: *const c_int, b: MPI_Group, r2: *mut c_int) -> c_int {
    run("MPI_Group_translate_ranks", MPI_COMM_WORLD, || {
        // SAFETY: input and output arrays of `n` ranks.
        let t = group(a)?.translate(unsafe { arr(r1, n) }, &*group(b)?)?;
        unsafe { arr_mut(r2, n) }.copy_from_slice(&t);
        Ok(())
    })
});

mpi_fn!(fn MPI_Group_compare / PMPI_Group_compare(a: MPI_Group, b: MPI_Group, result: *mut c_int) -> c_int {
    run("MPI_Group_compare", MPI_COMM_WORLD, || {
        let r = Group::compare(&*group(a)?, &*group(b)?);
        // SAFETY: output argument.
        unsafe { put(result, r) };
        Ok(())
    })
});

mpi_fn!(fn MPI_Group_free / PMPI_Group_free(g: *mut MPI_Group) -> c_int {
    run("MPI_Group_free", MPI_COMM_WORLD, || {
        if g.is_null() {
            return Err(err(class::ARG, "group pointer is NULL"));
        }
        // SAFETY: checked non-null in/out argument.
        let h = unsafe { *g };
        match h {
            MPI_GROUP_EMPTY => {}
            MPI_GROUP_NULL => return Err(err(class::GROUP, "the group is MPI_GROUP_NULL")),
            _ => {
                GROUPS.remove(h).ok_or_else(|| err(class::GROUP, format!("invalid group handle {h:#x} (already freed?)")))?;
            }
        }
        // SAFETY: as above.
        unsafe { *g = MPI_GROUP_NULL };
        Ok(())
    })
});
