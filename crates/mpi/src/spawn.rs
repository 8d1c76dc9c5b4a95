//! Dynamic processes: `MPI_Comm_spawn(_multiple)` and the parent
//! intercommunicator of a spawned process (`MPI_Comm_get_parent`).
//!
//! The launcher starts the new processes as a new world of the running job
//! (`gridwire_core::context`'s world module; gwrun's server spawn module):
//! they get the next free context ids, so any process reaches any other by
//! its id as within one world. The parents agree on a context id for the
//! intercommunicator before the root asks the launcher; the root passes it
//! and the parents' ids to the children (`GW_PARENT=CTX:ID,ID,…`), and the
//! launcher answers the root only once every child has initialised (and so
//! has its parent intercommunicator and its handlers), with the children's
//! first id, which the root broadcasts to the other parents.

use crate::comm::Comm;
use crate::datatype::{Basic, Datatype};
use crate::error::{class, err, Result};
use crate::group::Group;
use crate::intercomm::INTER_CTX_IDS;
use crate::Buf;
use crate::Mpi;
use gridwire_core::bootstrap::spawn_wire::SpawnApp;
use std::sync::Arc;

/// Most parents named in `GW_PARENT` (bounded: it comes from outside).
const MAX_PARENTS: usize = 1 << 16;

/// Reads `GW_PARENT` (`CTX:ID,ID,…`): the intercommunicator's context id
/// and the parents' context ids.
pub fn parse_parent(text: &str, capacity: u32) -> Result<(u32, Vec<u32>)> {
    let bad = || {
        err(
            class::INTERN,
            format!("GW_PARENT={text:?} from the launcher is malformed"),
        )
    };
    let (ctx, members) = text.split_once(':').ok_or_else(bad)?;
    let ctx: u32 = ctx.parse().map_err(|_| bad())?;
    if !ctx.is_multiple_of(2) || !(4..=u32::MAX - 16).contains(&ctx) {
        return Err(bad());
    }
    let members: Vec<u32> = members
        .split(',')
        .take(MAX_PARENTS + 1)
        .map(|m| m.parse::<u32>().ok().filter(|&m| m < capacity))
        .collect::<Option<_>>()
        .ok_or_else(bad)?;
    let mut seen = std::collections::HashSet::new();
    if members.is_empty() || members.len() > MAX_PARENTS || !members.iter().all(|m| seen.insert(*m))
    {
        return Err(bad());
    }
    Ok((ctx, members))
}

/// The key-value pair (put by the launcher for the children) naming the
/// port the parents accept on, under a launcher other than gwrun (Hydra,
/// Slurm's pmi2 plugin; under PMIx the environment variable
/// `GW_PARENT_PORT`).
const PARENT_PORT_KEY: &str = "gw_parent_port";

/// Whether this process was started by a launcher other than gwrun (which
/// always says `GW_WORLD`): the spawn of Hydra, Slurm and Open MPI's
/// mpirun starts a job of its own.
fn under_foreign_launcher() -> bool {
    std::env::var_os("GW_WORLD").is_none()
}

impl Mpi {
    /// The root's side of a spawn under another launcher (Hydra, Slurm,
    /// Open MPI's mpirun): a port
    /// for the children, whose name the launcher puts into their key-value
    /// space, and the PMI-1 spawn. The port's name, or why not.
    fn spawn_foreign_root(&self, apps: &[SpawnApp]) -> std::result::Result<String, String> {
        let port = self.open_port().map_err(|e| e.msg)?;
        let preput = vec![(PARENT_PORT_KEY.to_string(), port.clone())];
        let limit = crate::ports_jobs::timeout();
        let outcome = match self.ctx().spawn_foreign(apps, &preput, limit) {
            Ok(Ok(())) => return Ok(port),
            Ok(Err(e)) => e,
            Err(e) => e.to_string(),
        };
        let _ = self.close_port(&port);
        Err(outcome)
    }

    /// At start-up: the parent intercommunicator of a spawned process
    /// (`None` elsewhere). Its context id is reserved before anything else.
    /// Under another launcher (Hydra), a spawned job finds its parents'
    /// port in its key-value space and connects to it.
    pub(crate) fn parent_from_env(&self) -> Result<Option<Arc<Comm>>> {
        let Ok(text) = std::env::var("GW_PARENT") else {
            if !under_foreign_launcher() {
                return Ok(None);
            }
            // PMIx (Open MPI's mpirun): the pair rides in the environment.
            let env_name = gridwire_core::bootstrap::pmix::preput_env_name(PARENT_PORT_KEY);
            let port = match std::env::var(&env_name) {
                Ok(p) if !p.is_empty() => Some(p),
                // Hydra (PMI_SPAWNED) and Slurm's pmi2 plugin
                // (spawner-jobid) put it into the key-value space.
                _ if self.ctx().spawned_by_launcher() => self
                    .ctx()
                    .kvs_get(PARENT_PORT_KEY)
                    .map_err(|e| err(class::INTERN, format!("reading the parents' port: {e}")))?,
                _ => None,
            };
            let Some(port) = port else {
                return Ok(None);
            };
            return self.connect(&port, 0, &self.world).map(Some);
        };
        let (ctx, parents) = parse_parent(&text, self.ctx().capacity())?;
        if parents
            .iter()
            .any(|p| self.world.group.rank_of(*p).is_some())
        {
            return Err(err(
                class::INTERN,
                "GW_PARENT names a process of this world as a parent",
            ));
        }
        self.reserve_ctx(ctx, INTER_CTX_IDS);
        let ic = self.new_inter_from(
            ctx,
            self.world.group.clone(),
            Group::new(parents),
            self.world.rank,
        );
        Ok(Some(ic))
    }

    /// `MPI_Comm_spawn_multiple` over `comm` (collective; `apps` matter at
    /// `root` only). The intercommunicator to the new processes, or an
    /// `MPI_ERR_SPAWN` error at every member with the launcher's reason.
    ///
    /// Also returns how many processes were asked for (known at every
    /// member after the call, for the error codes), 0 if the call failed
    /// before the root said.
    pub fn spawn(&self, comm: &Comm, root: i32, apps: &[SpawnApp]) -> (u32, Result<Arc<Comm>>) {
        let mut asked = 0;
        let r = self.spawn_inner(comm, root, apps, &mut asked);
        (asked, r)
    }

    fn spawn_inner(
        &self,
        comm: &Comm,
        root: i32,
        apps: &[SpawnApp],
        asked: &mut u32,
    ) -> Result<Arc<Comm>> {
        if comm.is_inter() {
            return Err(err(
                class::COMM,
                "MPI_Comm_spawn needs an intracommunicator",
            ));
        }
        if root < 0 || root as u32 >= comm.size {
            return Err(err(
                class::ROOT,
                format!(
                    "root {root} is invalid in a communicator of size {}",
                    comm.size
                ),
            ));
        }
        let ctx = self.ctx_proposal(comm)?;
        self.reserve_ctx(ctx, INTER_CTX_IDS);
        // [ok, first id, count]; on failure the count asked for. ok = 2:
        // a launcher other than gwrun started them as a job of their own,
        // which connects to `port` (spawn_foreign below).
        let mut result = [0u32; 3];
        let mut why = String::new();
        let mut port = None;
        if comm.rank == root as u32 && under_foreign_launcher() {
            result[2] = apps
                .iter()
                .map(|a| a.maxprocs)
                .fold(0u32, u32::saturating_add);
            match self.spawn_foreign_root(apps) {
                Ok(p) => {
                    result[0] = 2;
                    port = Some(p);
                }
                Err(e) => why = e,
            }
        } else if comm.rank == root as u32 {
            result[2] = apps
                .iter()
                .map(|a| a.maxprocs)
                .fold(0u32, u32::saturating_add);
            let members: Vec<String> = comm.group.members.iter().map(u32::to_string).collect();
            let preput = vec![(
                "gw_parent".to_string(),
                format!("{ctx}:{}", members.join(",")),
            )];
            match self.ctx().spawn(apps, &preput) {
                Ok(Ok((first, n))) => result = [1, first, n],
                Ok(Err(e)) => why = e,
                Err(e) => why = e.to_string(),
            }
        }
        let u32t = Datatype::predefined(Basic::U32, "u32");
        // SAFETY: `result` lives across the blocking broadcast.
        let b = unsafe { Buf::new(result.as_mut_ptr() as usize, 3, u32t) };
        self.bcast(comm, &b, root)?;
        *asked = result[2];
        if result[0] == 2 {
            let name = port.clone().unwrap_or_default();
            // Hydra says "started" before the children run; a program
            // that cannot start never connects.
            let deadline = std::time::Instant::now() + crate::ports_jobs::timeout();
            let ic = self.accept_until(&name, root, comm, Some(deadline));
            if let Some(p) = port {
                let _ = self.close_port(&p);
            }
            return ic.map_err(|e| {
                err(
                    class::SPAWN,
                    format!("the spawned job did not connect: {}", e.msg),
                )
            });
        }
        if result[0] != 1 {
            let msg = if comm.rank == root as u32 {
                why
            } else {
                "the launcher could not spawn the processes (the root says why)".into()
            };
            return Err(err(class::SPAWN, msg));
        }
        let (first, n) = (result[1], result[2]);
        if n == 0
            || first
                .checked_add(n)
                .is_none_or(|e| e > self.ctx().capacity())
        {
            return Err(err(
                class::INTERN,
                format!("the spawn's root announced context ids {first}+{n}"),
            ));
        }
        Ok(self.new_inter_from(
            ctx,
            comm.group.clone(),
            Group::new((first..first + n).collect()),
            comm.rank,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parent_lists_are_checked() {
        assert_eq!(parse_parent("8:0,1,2", 64).unwrap(), (8, vec![0, 1, 2]));
        for bad in [
            "", "8", "7:0", "8:", "8:0,0", "8:0,99", "x:1", "8:1,a", "2:0",
        ] {
            assert!(parse_parent(bad, 64).is_err(), "{bad}");
        }
    }
}
