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
    fn select(
        &self,
        local: &[Arc<dyn Method>],
        remote: &DescriptorTable,
    ) -> Option<(usize, usize)> {
        self.candidates(local, remote).into_iter().next()
    }

    /// Every applicable choice, best first: the context falls back to the
    /// next one when connecting with the first fails (e.g. a shared-memory
    /// segment that cannot be mapped).
    fn candidates(
        &self,
        local: &[Arc<dyn Method>],
        remote: &DescriptorTable,
    ) -> Vec<(usize, usize)>;
}

/// The Nexus rule: the first entry of the remote's table (ordered fastest
/// first) that one of our methods can reach.
pub struct FirstApplicable;

impl SelectionPolicy for FirstApplicable {
    fn candidates(
        &self,
        local: &[Arc<dyn Method>],
        remote: &DescriptorTable,
    ) -> Vec<(usize, usize)> {
        remote
            .entries
            .iter()
            .enumerate()
            .filter_map(|(ei, e)| {
                let mi = local.iter().position(|m| m.name() == e.method)?;
                local[mi].reachable(&e.descriptor).then_some((mi, ei))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::descriptor::Entry;
    use crate::error::Result;
    use crate::method::{Cost, Link, PollClass, Sink};

    /// A method that reaches descriptors starting with its `prefix`.
    struct Fake {
        name: &'static str,
        prefix: u8,
    }

    impl Method for Fake {
        fn name(&self) -> &'static str {
            self.name
        }
        fn descriptor(&self) -> Vec<u8> {
            vec![self.prefix]
        }
        fn describe(&self, _: &[u8]) -> String {
            String::new()
        }
        fn reachable(&self, remote: &[u8]) -> bool {
            remote.first() == Some(&self.prefix)
        }
        fn connect(&self, _: u32, _: &[u8]) -> Result<Arc<dyn Link>> {
            unreachable!("selection never connects")
        }
        fn poll(&self, _: &mut dyn Sink) -> Result<usize> {
            Ok(0)
        }
        fn poll_class(&self) -> PollClass {
            PollClass::EveryIteration
        }
        fn cost(&self) -> Cost {
            Cost {
                latency_ns: 0,
                bandwidth_mb_s: 0,
            }
        }
        fn shutdown(&self) {}
    }

    fn entry(m: &str, d: u8) -> Entry {
        Entry {
            method: m.into(),
            descriptor: vec![d],
        }
    }

    #[test]
    fn remote_order_first_then_reachability_then_local_availability() {
        let local: Vec<Arc<dyn Method>> = vec![
            Arc::new(Fake {
                name: "tcp",
                prefix: 1,
            }),
            Arc::new(Fake {
                name: "shm",
                prefix: 7,
            }),
        ];
        // The remote lists shm first (fastest), but on another host (prefix 8): not reachable.
        let remote = DescriptorTable {
            entries: vec![entry("shm", 8), entry("udp", 1), entry("tcp", 1)],
        };
        assert_eq!(FirstApplicable.candidates(&local, &remote), vec![(0, 2)]);
        assert_eq!(FirstApplicable.select(&local, &remote), Some((0, 2)));
        // Same host: shm first, tcp as the fallback.
        let remote = DescriptorTable {
            entries: vec![entry("shm", 7), entry("tcp", 1)],
        };
        assert_eq!(
            FirstApplicable.candidates(&local, &remote),
            vec![(1, 0), (0, 1)]
        );
        // Nothing in common.
        let remote = DescriptorTable {
            entries: vec![entry("udp", 1)],
        };
        assert_eq!(FirstApplicable.select(&local, &remote), None);
    }
}
