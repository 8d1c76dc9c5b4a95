//! Worlds within one job: the contexts that started together, and the
//! processes spawned into the job later (`MPI_Comm_spawn`).
//!
//! A launcher that can spawn (gwrun) reserves room: the job's context ids
//! run up to a *capacity* larger than the first world, every method sizes
//! its tables for the capacity, and a spawned group of processes gets the
//! next free ids as a world of its own (`GW_WORLD=FIRST:COUNT:CAPACITY`).
//! The spawned contexts publish their descriptor tables in the job's
//! key-value space and pass a bootstrap barrier among themselves, so a
//! context of any world finds a peer of any other world the way it finds
//! one of its own: the table is looked up on first use. Ids are never
//! reused; spawned processes that exited stay departed.

use super::*;

/// Which contexts form this context's world (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct World {
    pub(super) first: u32,
    pub(super) size: u32,
    pub(super) capacity: u32,
}

/// Reads `GW_WORLD` (`FIRST:COUNT:CAPACITY`); empty = the PMI rank and
/// size, no room for spawned processes. The PMI rank is this context's id
/// and must lie in the world.
pub(super) fn world_layout(text: &str, rank: u32, pmi_size: u32) -> Result<World> {
    let bad = |reason: &str| Error::BadParam {
        var: "GW_WORLD".into(),
        value: text.into(),
        reason: reason.into(),
    };
    if text.trim().is_empty() {
        return Ok(World {
            first: 0,
            size: pmi_size,
            capacity: pmi_size,
        });
    }
    let v: Vec<u32> = text
        .trim()
        .split(':')
        .map(|x| x.parse::<u32>())
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| bad("expected FIRST:COUNT:CAPACITY, three unsigned integers"))?;
    let [first, size, capacity] = v[..] else {
        return Err(bad("expected FIRST:COUNT:CAPACITY"));
    };
    let end = first
        .checked_add(size)
        .ok_or_else(|| bad("the world overflows"))?;
    if size == 0 || end > capacity || capacity > super::membership::MAX_CAPACITY {
        return Err(bad(&format!(
            "the world must be non-empty and lie within the capacity, at most {}",
            super::membership::MAX_CAPACITY
        )));
    }
    if rank < first || rank >= end {
        return Err(bad(&format!(
            "this process's PMI rank {rank} is outside its world"
        )));
    }
    Ok(World {
        first,
        size,
        capacity,
    })
}

impl Context {
    /// Asks the launcher to start `apps` as a new world of this job (PMI-1
    /// spawn, see [`crate::bootstrap::Pmi::spawn`]). On success, the first
    /// context id of the new world and its size; `Ok(Err(why))` when the
    /// launcher refused. Blocks without driving progress until the new
    /// processes have initialised.
    pub fn spawn(
        &self,
        apps: &[crate::bootstrap::spawn_wire::SpawnApp],
        preput: &[(String, String)],
    ) -> Result<std::result::Result<(u32, u32), String>> {
        let reply = self
            .inner
            .pmi
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .spawn(apps, preput, None)?;
        let reply = match reply {
            Ok(r) => r,
            Err(why) => return Ok(Err(why)),
        };
        let num = |k: &str| reply.get(k).and_then(|v| v.parse::<u32>().ok());
        match (num("gw_base"), num("gw_size")) {
            (Some(base), Some(n)) if base.checked_add(n).is_some_and(|e| e <= self.capacity()) => {
                Ok(Ok((base, n)))
            }
            _ => Ok(Err(
                "the launcher started the processes but did not say which context ids they have \
                 (a launcher other than gwrun)"
                    .into(),
            )),
        }
    }

    /// Asks a launcher other than gwrun (Hydra, Slurm, Open MPI's mpirun)
    /// to start `apps` as a job of their own (its spawn request):
    /// `Ok(Ok(()))` once it says it started them, `Ok(Err(why))` when it
    /// refused or (where the protocol allows giving up) did not answer
    /// within `limit`. They share no context ids with this job; the
    /// parents reach them through a port whose name rides in `preput`
    /// (gridwire-mpi's spawn).
    pub fn spawn_foreign(
        &self,
        apps: &[crate::bootstrap::spawn_wire::SpawnApp],
        preput: &[(String, String)],
        limit: std::time::Duration,
    ) -> Result<std::result::Result<(), String>> {
        let reply = self
            .inner
            .pmi
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .spawn(apps, preput, Some(limit))?;
        Ok(reply.map(|_| ()))
    }

    /// Whether the launcher says another job spawned this process
    /// ([`crate::bootstrap::Pmi::spawned`]).
    pub fn spawned_by_launcher(&self) -> bool {
        self.inner
            .pmi
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .spawned()
    }

    /// The launcher's name service (`MPI_Publish_name` and friends): `op`
    /// is `publish_name`, `unpublish_name` or `lookup_name`.
    pub fn name_service(
        &self,
        op: &str,
        service: &str,
        port: &str,
    ) -> Result<std::result::Result<String, String>> {
        self.inner
            .pmi
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .name_service(op, service, port)
    }

    /// The job's id (the launcher's; names shared-memory resources): ports
    /// and `MPI_Comm_join` check that both sides are of one job.
    pub fn job_id(&self) -> &str {
        &self.inner.job.job_id
    }

    /// A value of the job's key-value space (what a launcher put for this
    /// process before it started, e.g.); `None` if absent.
    pub fn kvs_get(&self, key: &str) -> Result<Option<String>> {
        self.inner
            .pmi
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn world_layouts() {
        let w = world_layout("", 3, 4).unwrap();
        assert_eq!((w.first, w.size, w.capacity), (0, 4, 4));
        let w = world_layout("4:2:64", 5, 64).unwrap();
        assert_eq!((w.first, w.size, w.capacity), (4, 2, 64));
        for bad in [
            "4:2",
            "a:b:c",
            "4:0:64",
            "60:8:64",
            "0:2:4294967295",
            "4294967295:2:9",
        ] {
            assert!(world_layout(bad, 0, 1).is_err(), "{bad}");
        }
        assert!(world_layout("4:2:64", 3, 64).is_err(), "rank outside");
    }
}
