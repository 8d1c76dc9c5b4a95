//! Bootstrap through PMI: rank, size and the key-value space in which
//! processes publish their descriptor tables at start-up.
//!
//! Three clients, one interface: [`Pmi`] speaks PMI-1 ([`pmi`], whose
//! sans-IO codec [`pmi_wire`] is shared with the launcher `gwrun`), PMI-2
//! ([`pmi2`], codec [`pmi2_wire`]: Slurm's `srun --mpi=pmi2`, Hydra) or
//! PMIx through OpenPMIx's library, loaded at run time ([`pmix`]: Open
//! MPI's `mpirun`, `srun --mpi=pmix`), and nothing above this module knows
//! which. [`PmiChoice`] says how the protocol is picked (`GW_PMI`).

pub mod pmi;
pub mod pmi2;
pub mod pmi2_wire;
pub mod pmi_wire;
pub mod pmix;
pub mod spawn_wire;

use crate::error::{Error, Result};
use pmi::Pmi1;
use pmi2::Pmi2;
use pmix::Pmix;

/// Which PMI version to speak (`GW_PMI`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PmiChoice {
    /// Decided by the environment ([`PmiChoice::resolve`]).
    Auto,
    Pmi1,
    Pmi2,
    Pmix,
}

/// The values `GW_PMI` accepts, for the parameter table.
pub const PMI_CHOICES: &[&str] = &["auto", "pmi1", "pmi2", "pmix"];

impl PmiChoice {
    /// Parses a `GW_PMI` value (empty = `auto`).
    pub fn parse(s: &str) -> Result<PmiChoice> {
        // The same words the parameter table accepts, so `Pmi::from_env`
        // and `Context::init` agree on what is valid.
        match s.trim() {
            "" | "auto" => Ok(PmiChoice::Auto),
            "pmi1" => Ok(PmiChoice::Pmi1),
            "pmi2" => Ok(PmiChoice::Pmi2),
            "pmix" => Ok(PmiChoice::Pmix),
            _ => Err(Error::BadParam {
                var: "GW_PMI".into(),
                value: s.into(),
                reason: "expected auto, pmi1, pmi2 or pmix".into(),
            }),
        }
    }

    /// `Auto` decided by the environment `lookup` gives, in this order:
    ///
    /// 1. a PMI socket (`PMI_FD`: gwrun, Hydra, `srun --mpi=pmi2`) wins:
    ///    the launcher that handed it over is the nearest one, even when
    ///    PMIx variables are inherited from further out (gwrun or Hydra
    ///    started inside an `mpirun` job pass `PMIX_*` on to their ranks);
    /// 2. otherwise PMIx when a PMIx server announces itself
    ///    (`PMIX_NAMESPACE` or a `PMIX_SERVER_URI*`: Open MPI's `mpirun`,
    ///    `srun --mpi=pmix`, `prterun`);
    /// 3. otherwise, and with a socket, PMI-2 when `PMI_VERSION` is 2 (a
    ///    launcher that announces it) or Slurm's `SLURM_MPI_TYPE` names
    ///    pmi2 (`srun --mpi=pmi2` sets no PMI_VERSION; its plugin would
    ///    also answer PMI-1, but PMI-2 is what it is built for); PMI-1
    ///    otherwise, which gwrun and Hydra serve by default (and, without a
    ///    socket, the singleton).
    ///
    /// `PMI_PORT` (Hydra's socket by address) is not served by the PMI-1
    /// client, so it does not count as a PMI socket here.
    pub fn resolve(self, lookup: impl Fn(&str) -> Option<String>) -> PmiChoice {
        match self {
            PmiChoice::Auto => {
                let pmi_socket = lookup("PMI_FD").is_some_and(|v| !v.trim().is_empty());
                if !pmi_socket && pmix::offered_by(&lookup) {
                    return PmiChoice::Pmix;
                }
                let version = lookup("PMI_VERSION").map(|v| v.trim().to_string());
                let slurm = lookup("SLURM_MPI_TYPE").unwrap_or_default();
                let announced = version.as_deref() == Some("2");
                let slurm_pmi2 = version.is_none() && slurm.trim().starts_with("pmi2");
                if announced || slurm_pmi2 {
                    PmiChoice::Pmi2
                } else {
                    PmiChoice::Pmi1
                }
            }
            c => c,
        }
    }
}

/// The runtime's bootstrap: a PMI-1, PMI-2 or PMIx client, or a singleton
/// (no launcher: rank 0 of 1 with a private key-value space).
#[derive(Debug)]
pub enum Pmi {
    V1(Pmi1),
    V2(Pmi2),
    X(Pmix),
}

macro_rules! each {
    ($self:expr, $p:ident => $e:expr) => {
        match $self {
            Pmi::V1($p) => $e,
            Pmi::V2($p) => $e,
            Pmi::X($p) => $e,
        }
    };
}

impl Pmi {
    /// Connects to the launcher named by the environment with the protocol
    /// `GW_PMI` (read from the environment) picks, or becomes a singleton
    /// when the environment names no launcher.
    pub fn from_env() -> Result<Pmi> {
        let choice = PmiChoice::parse(&std::env::var("GW_PMI").unwrap_or_default())?;
        Pmi::connect(choice)
    }

    /// Like [`Pmi::from_env`] with the version choice given.
    /// `GW_PMI=pmix` without a PMIx server in the environment is an error
    /// (not a singleton): the user asked for a launcher that is not there.
    pub fn connect(choice: PmiChoice) -> Result<Pmi> {
        let resolved = choice.resolve(|k| std::env::var(k).ok());
        if resolved == PmiChoice::Pmix {
            return Ok(Pmi::X(Pmix::init()?));
        }
        let Some(file) = pmi::claim_pmi_fd()? else {
            return Ok(Pmi::singleton());
        };
        match resolved {
            PmiChoice::Pmi2 => Ok(Pmi::V2(Pmi2::over(file)?)),
            _ => Ok(Pmi::V1(Pmi1::over(file)?)),
        }
    }

    /// A PMI with no launcher: rank 0 of 1 and a private key-value space.
    pub fn singleton() -> Pmi {
        Pmi::V1(Pmi1::singleton())
    }

    /// `"PMI-1"`, `"PMI-2"`, `"PMIx"` or `"singleton"`, for messages.
    pub fn protocol(&self) -> &'static str {
        match self {
            Pmi::V1(p) if p.is_singleton() => "singleton",
            Pmi::V1(_) => "PMI-1",
            Pmi::V2(_) => "PMI-2",
            Pmi::X(_) => "PMIx",
        }
    }

    /// This process's rank in the job.
    pub fn rank(&self) -> u32 {
        each!(self, p => p.rank())
    }

    /// Number of processes in the job.
    pub fn size(&self) -> u32 {
        each!(self, p => p.size())
    }

    /// Name of the job's key-value space (PMI-2: the job id).
    pub fn kvsname(&self) -> &str {
        each!(self, p => p.kvsname())
    }

    /// Application number (MPMD: which program of the command line); 0 for SPMD.
    pub fn appnum(&self) -> i32 {
        each!(self, p => p.appnum())
    }

    /// Total slots the launcher could start, if it says (PMI-1, PMIx).
    pub fn universe_size(&self) -> Option<u32> {
        match self {
            Pmi::V1(p) => p.universe_size(),
            Pmi::V2(_) => None,
            Pmi::X(p) => p.universe_size(),
        }
    }

    /// True when running without a launcher.
    pub fn is_singleton(&self) -> bool {
        matches!(self, Pmi::V1(p) if p.is_singleton())
    }

    /// Longest key [`Pmi::put`]/[`Pmi::get`] accept, in bytes.
    pub fn max_key_len(&self) -> usize {
        each!(self, p => p.max_key_len())
    }

    /// Longest value [`Pmi::put`] accepts, in bytes. Callers with longer
    /// data must split it.
    pub fn max_value_len(&self) -> usize {
        each!(self, p => p.max_value_len())
    }

    /// Publishes `key=value`; visible to others after a [`Pmi::barrier`].
    pub fn put(&mut self, key: &str, value: &str) -> Result<()> {
        each!(self, p => p.put(key, value))
    }

    /// Makes earlier puts ready to publish (a no-op on the PMI-1 and PMI-2
    /// wires, where the barrier publishes; `PMIx_Commit` on PMIx, whose
    /// barrier commits anything still pending too).
    pub fn commit(&mut self) -> Result<()> {
        each!(self, p => p.commit())
    }

    /// Waits until every process of the job has entered the barrier, after
    /// which everyone's earlier puts are visible.
    pub fn barrier(&mut self) -> Result<()> {
        each!(self, p => p.barrier())
    }

    /// Looks `key` up in the job's key-value space; `None` if nobody put it.
    /// Under PMIx, where keys belong to the process that put them, this
    /// asks every rank in turn: callers that know who put the key use
    /// [`Pmi::get_from`].
    pub fn get(&mut self, key: &str) -> Result<Option<String>> {
        each!(self, p => p.get(key))
    }

    /// Looks up `key` as put by rank `owner`; `None` if it is not there.
    /// On PMI-1 and PMI-2 (one key space for the job) the same as
    /// [`Pmi::get`]; on PMIx one look-up in `owner`'s data.
    pub fn get_from(&mut self, owner: u32, key: &str) -> Result<Option<String>> {
        match self {
            Pmi::V1(p) => p.get(key),
            Pmi::V2(p) => p.get(key),
            Pmi::X(p) => p.get_from(owner, key),
        }
    }

    /// Asks the launcher to start new processes: PMI-1 `PMI_Spawn_multiple`
    /// ([`Pmi1::spawn`]), PMI-2 `spawn` ([`Pmi2::spawn`]: Slurm's pmi2
    /// plugin, Hydra) or `PMIx_Spawn` ([`Pmix::spawn`], where `preput`
    /// becomes environment variables). `Ok(Err(why))` when the launcher
    /// refused; a singleton has no launcher to ask.
    ///
    /// `limit` bounds the wait for the answer where the protocol allows
    /// giving up (PMI-2: Slurm never answers a spawn whose program cannot
    /// start); PMI-1 launchers answer once they started the processes,
    /// and a PMIx call cannot be abandoned (the library keeps it).
    pub fn spawn(
        &mut self,
        apps: &[spawn_wire::SpawnApp],
        preput: &[(String, String)],
        limit: Option<std::time::Duration>,
    ) -> Result<std::result::Result<pmi_wire::Command, String>> {
        match self {
            Pmi::V1(p) => p.spawn(apps, preput), // refuses as a singleton
            Pmi::V2(p) => p.spawn(apps, preput, limit),
            Pmi::X(p) => p.spawn(apps, preput),
        }
    }

    /// Whether the launcher says another job spawned this one: Hydra's
    /// `PMI_SPAWNED=1` (PMI-1 and PMI-2), Slurm's `spawner-jobid` in the
    /// PMI-2 `fullinit` answer. PMIx says it through the environment the
    /// spawning process chose ([`Pmix::spawn`]), not here.
    pub fn spawned(&self) -> bool {
        let hydra = std::env::var("PMI_SPAWNED").is_ok_and(|v| v.trim() == "1");
        match self {
            Pmi::V1(p) => hydra && !p.is_singleton(),
            Pmi::V2(p) => hydra || p.spawner().is_some(),
            Pmi::X(_) => false,
        }
    }

    /// The launcher's name service (see [`Pmi1::name_service`]); other
    /// protocols refuse (`Ok(Err)`).
    pub fn name_service(
        &mut self,
        op: &str,
        service: &str,
        port: &str,
    ) -> Result<std::result::Result<String, String>> {
        match self {
            Pmi::V1(p) => p.name_service(op, service, port),
            _ => Ok(Err(format!(
                "the name service needs the PMI-1 bootstrap (this process speaks {})",
                self.protocol()
            ))),
        }
    }

    /// Tells the launcher this process is done with PMI.
    pub fn finalize(&mut self) -> Result<()> {
        each!(self, p => p.finalize())
    }

    /// Asks the launcher to kill the whole job; the caller exits right after.
    pub fn abort(&mut self, code: i32, msg: &str) -> Result<()> {
        each!(self, p => p.abort(code, msg))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn choice_parses_and_resolves() {
        assert_eq!(PmiChoice::parse("").unwrap(), PmiChoice::Auto);
        assert_eq!(PmiChoice::parse("pmi2").unwrap(), PmiChoice::Pmi2);
        assert!(PmiChoice::parse("PMI2").is_err());
        assert_eq!(PmiChoice::parse(" pmi1 ").unwrap(), PmiChoice::Pmi1);
        assert_eq!(PmiChoice::parse("pmix").unwrap(), PmiChoice::Pmix);
        assert!(PmiChoice::parse("pmi3").is_err());
        let auto = PmiChoice::Auto;
        assert_eq!(auto.resolve(env(&[])), PmiChoice::Pmi1);
        assert_eq!(auto.resolve(env(&[("PMI_VERSION", "2")])), PmiChoice::Pmi2);
        assert_eq!(auto.resolve(env(&[("PMI_VERSION", "1")])), PmiChoice::Pmi1);
        assert_eq!(
            auto.resolve(env(&[("SLURM_MPI_TYPE", "pmi2")])),
            PmiChoice::Pmi2
        );
        assert_eq!(
            auto.resolve(env(&[("SLURM_MPI_TYPE", "pmi2"), ("PMI_VERSION", "1")])),
            PmiChoice::Pmi1
        );
        assert_eq!(
            auto.resolve(env(&[("SLURM_MPI_TYPE", "pmix")])),
            PmiChoice::Pmi1
        );
        assert_eq!(
            PmiChoice::Pmi2.resolve(env(&[("PMI_VERSION", "1")])),
            PmiChoice::Pmi2,
            "an explicit GW_PMI wins"
        );
    }

    /// The order of `auto`: a PMI socket, then PMIx, then the PMI-1/PMI-2
    /// rules.
    #[test]
    fn auto_prefers_a_pmi_socket_then_pmix() {
        let auto = PmiChoice::Auto;
        // Open MPI 4's mpirun: PMIX_* (and OMPI_*), no PMI_FD.
        let ompi = [
            ("PMIX_NAMESPACE", "1903165441"),
            ("PMIX_RANK", "0"),
            ("PMIX_SERVER_URI41", "1903165440.0;tcp4://127.0.0.1:51937"),
            ("OMPI_COMM_WORLD_RANK", "0"),
        ];
        assert_eq!(auto.resolve(env(&ompi)), PmiChoice::Pmix);
        // srun --mpi=pmix: SLURM_MPI_TYPE=pmix and the PMIx variables.
        assert_eq!(
            auto.resolve(env(&[
                ("SLURM_MPI_TYPE", "pmix"),
                ("PMIX_NAMESPACE", "slurm.pmix.7.0")
            ])),
            PmiChoice::Pmix
        );
        // A server address alone is enough.
        assert_eq!(
            auto.resolve(env(&[("PMIX_SERVER_URI2", "x;tcp4://127.0.0.1:1")])),
            PmiChoice::Pmix
        );
        // gwrun or Hydra inside an mpirun job: the PMI socket is nearer.
        assert_eq!(
            auto.resolve(env(&[("PMIX_NAMESPACE", "1"), ("PMI_FD", "5")])),
            PmiChoice::Pmi1
        );
        assert_eq!(
            auto.resolve(env(&[
                ("PMIX_NAMESPACE", "1"),
                ("PMI_FD", "5"),
                ("PMI_VERSION", "2")
            ])),
            PmiChoice::Pmi2
        );
        // Forced choices stay what they are.
        assert_eq!(PmiChoice::Pmi1.resolve(env(&ompi)), PmiChoice::Pmi1);
        assert_eq!(PmiChoice::Pmix.resolve(env(&[])), PmiChoice::Pmix);
    }

    #[test]
    fn singleton_is_pmi1_shaped() {
        let mut p = Pmi::singleton();
        assert!(p.is_singleton());
        assert_eq!(p.protocol(), "singleton");
        p.put("a", "1").unwrap();
        p.barrier().unwrap();
        assert_eq!(p.get("a").unwrap().as_deref(), Some("1"));
    }
}
