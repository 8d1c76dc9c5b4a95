//! Peers of another job: processes of a separately started job that this
//! process reached through an `MPI_Comm_accept`/`connect` port.
//!
//! They share neither the job's context ids nor its secret, so the runtime
//! does not look them up or authenticate them: the upper layer connects and
//! authenticates a socket itself (with a key agreed through the port's
//! token) and hands it over with [`Context::attach_foreign`] under a local
//! *alias*, an id above the job's capacity (`GW_FOREIGN_PEERS` of them,
//! never reused). From then on the alias is a peer like any other for
//! remote service requests; it takes part in none of the job's own
//! protocols (its internal requests are dropped, see `progress.rs`), and
//! [`Context::peer_departed`] closes its link.

use super::{Context, Placement};
use crate::error::{Error, Result};
use crate::params::Params;
use std::net::TcpStream;
use std::sync::atomic::Ordering;

/// How many alias ids the runtime reserves beyond the capacity.
pub(super) fn slots(params: &Params) -> usize {
    params.num("FOREIGN_PEERS") as usize
}

impl Context {
    /// The alias ids for peers of other jobs: `capacity()..foreign_end()`.
    pub fn foreign_end(&self) -> u32 {
        self.inner.peers.len() as u32
    }

    /// All ids a peer may have, the job's and the aliases: per-peer tables
    /// of upper layers are this long.
    pub fn id_limit(&self) -> u32 {
        self.foreign_end()
    }

    /// Makes the authenticated stream `stream` the link to alias `alias`
    /// (a process of another job); `host` is where it runs (a digest of the
    /// caller's choice; processes with equal digests count as on one host).
    pub fn attach_foreign(&self, alias: u32, stream: TcpStream, host: [u8; 32]) -> Result<()> {
        if alias < self.capacity() || alias >= self.foreign_end() {
            return Err(Error::BadStartpoint(format!(
                "{alias} is not an id for a process of another job (they run from {} to {}; \
                 GW_FOREIGN_PEERS sets the room)",
                self.capacity(),
                self.foreign_end()
            )));
        }
        let peer = self.peer(alias)?;
        let _guard = peer.connecting.lock().unwrap_or_else(|e| e.into_inner());
        if peer.link.get().is_some() || peer.failed.get().is_some() {
            return Err(Error::BadStartpoint(format!(
                "id {alias} was used before (ids of other jobs' processes are not reused)"
            )));
        }
        let tcp = self
            .inner
            .methods
            .iter()
            .find(|m| m.name() == "tcp")
            .ok_or_else(|| Error::NoMethod {
                peer: alias,
                offered: "no tcp: reaching a process of another job needs it (GW_METHODS)".into(),
            })?;
        let link = tcp.adopt(alias, stream)?;
        let _ = peer.placement.set(Placement {
            host,
            site: String::new(),
        });
        peer.table_source.store(3, Ordering::Relaxed);
        let _ = peer.link.set(link);
        Ok(())
    }
}
