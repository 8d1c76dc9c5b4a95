//! Method selection: which of our methods to use to reach a remote context.
//!
//! Kept in one place, behind a trait, so size-aware, measured or failover
//! policies can replace the default without touching the send path.

use crate::descriptor::DescriptorTable;
use crate::method::Method;
use std::sync::Arc;

/// Chooses a method for a remote table. Returns (index into `local`, index
/// into `remote.entries`), or `None` when nothing applies.
pub trait SelectionPolicy: Send + Sync {
    fn select(&self, local: &[Arc<dyn Method>], remote: &DescriptorTable) -> Option<(usize, usize)>;
}

/// The Nexus rule: the first entry of the remote's table (ordered fastest
/// first) that one of our methods can reach.
pub struct FirstApplicable;

impl SelectionPolicy for FirstApplicable {
    fn select(&self, local: &[Arc<dyn Method>], remote: &DescriptorTable) -> Option<(usize, usize)> {
        remote.entries.iter().enumerate().find_map(|(ei, e)| {
            let mi = local.iter().position(|m| m.name() == e.method)?;
            local[mi].reachable(&e.descriptor).then_some((mi, ei))
        })
    }
}
