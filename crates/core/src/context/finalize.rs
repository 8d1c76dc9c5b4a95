//! The runtime's own collectives: the barrier over remote service
//! requests, the bootstrap barrier, and the collective shutdown.

use super::*;

impl Context {
    /// Waits until every context of the job has called `barrier`, driving
    /// progress meanwhile (a dissemination barrier over remote service
    /// requests: ceil(log2 n) rounds). Use it after registering handlers, so
    /// no request can reach a context before its handlers exist.
    pub fn barrier(&self) -> Result<()> {
        // Over this context's world (ids `first..first + n`).
        let n = self.size();
        let first = self.world_first();
        let me = self.rank() - first;
        let epoch = self.inner.barrier_epoch.fetch_add(1, Ordering::Relaxed);
        let mut dist = 1u32;
        let mut round = 0u32;
        while dist < n {
            let to = first + (me + dist) % n;
            let mut msg = [0u8; 12];
            msg[..8].copy_from_slice(&epoch.to_le_bytes());
            msg[8..].copy_from_slice(&round.to_le_bytes());
            self.send_internal(to, H_BARRIER, &msg)?;
            let key = (epoch, round);
            let from = first + (me + n - dist) % n;
            let mut broken = None;
            let mut arrivals_seen = u64::MAX;
            self.wait(|| {
                // A peer whose link broke will never answer: fail instead of hanging.
                for p in [to, from] {
                    if let Some(why) = self.link_error(p) {
                        broken = Some((p, why));
                        return true;
                    }
                }
                let arrivals = self.inner.barrier_arrivals.load(Ordering::Acquire);
                if arrivals == arrivals_seen {
                    return false;
                }
                arrivals_seen = arrivals;
                let mut seen = self
                    .inner
                    .barrier_seen
                    .lock()
                    .unwrap_or_else(|e| e.into_inner());
                match seen.get_mut(&key) {
                    Some(c) => {
                        *c -= 1;
                        if *c == 0 {
                            seen.remove(&key);
                        }
                        true
                    }
                    None => false,
                }
            });
            if let Some((p, why)) = broken {
                return Err(Error::LinkFailed {
                    peer: p,
                    method: self.method_to(p).unwrap_or("none"),
                    reason: why,
                });
            }
            dist *= 2;
            round += 1;
        }
        Ok(())
    }

    /// A barrier through the bootstrap (PMI). It does not drive progress, so
    /// use it only when no requests are in flight — typically once, right
    /// after registering handlers, before any rank sends. Unlike
    /// [`barrier`](Self::barrier) it opens no links.
    pub fn bootstrap_barrier(&self) -> Result<()> {
        self.wait(|| !self.inner.methods.iter().any(|m| m.has_pending_output()));
        self.inner
            .pmi
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .barrier()
    }

    pub(super) fn send_internal(&self, to: u32, handler: u32, payload: &[u8]) -> Result<()> {
        self.rsr(
            &Startpoint {
                ctx: to,
                endpoint: DEFAULT_ENDPOINT,
            },
            handler,
            payload,
        )
    }

    /// Names of the methods that still report pending output (diagnostics).
    pub(super) fn methods_with_pending_output(&self) -> String {
        let v: Vec<&str> = self
            .inner
            .methods
            .iter()
            .filter(|m| m.has_pending_output())
            .map(|m| m.name())
            .collect();
        v.join(",")
    }

    /// Collective shutdown: flushes queued output, waits for every rank (a
    /// barrier with progress running), publishes this context's statistics
    /// to the launcher, and releases the methods.
    pub fn finalize(&self) -> Result<()> {
        if self.inner.finalized.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let ok = self.wait_timeout(Duration::from_secs(60), || {
            !self.inner.methods.iter().any(|m| m.has_pending_output())
        });
        if !ok {
            crate::say!(
                "gw[{}]: finalize: output still queued after 60 s (methods: {}); giving up on it",
                self.rank(),
                self.methods_with_pending_output()
            );
        }
        // Every rank's sends complete before anyone leaves, with progress
        // running. A broken link must not keep the others from finishing: say
        // so and go on to the bootstrap barrier, which needs no link.
        if let Err(e) = self.barrier() {
            crate::say!("gw[{}]: finalize: {e}; continuing without it", self.rank());
        }
        // The barrier's own last messages may still be queued: behind the
        // handshake of a connection opened for the barrier (two ranks that
        // connect to each other at once: this rank may have finished on the
        // peer's connection while its own still authenticates), or held for
        // the pair's connection. Shutting down now would drop them, and the
        // peer would wait for them forever. A peer that needs them is still
        // in its barrier, driving progress, so this ends.
        let ok = self.wait_timeout(Duration::from_secs(60), || {
            !self.inner.methods.iter().any(|m| m.has_pending_output())
        });
        if !ok {
            crate::say!(
                "gw[{}]: finalize: barrier output still queued after 60 s (methods: {}); giving up on it",
                self.rank(),
                self.methods_with_pending_output()
            );
        }
        let stats = self.stats_json();
        let mut pmi = self.inner.pmi.lock().unwrap_or_else(|e| e.into_inner());
        // Statistics are a courtesy to the launcher; a launcher that refuses
        // the value (e.g. a small vallen_max) must not fail the job.
        let _ = pmi.put(&format!("gw.stats.{}", self.rank()), &stats);
        let _ = pmi.commit();
        // No bootstrap barrier here: it would stop progress while a peer may
        // still need ours (e.g. to finish a handshake); the barrier above
        // already synchronised every rank whose links work.
        pmi.finalize()?;
        drop(pmi);
        for m in &self.inner.methods {
            m.shutdown();
        }
        Ok(())
    }
}
