//! Spawned worlds at the front end of a `gwrun -f` job.
//!
//! A rank's spawn request comes up the proxy tree. The front end places
//! the new processes — all of a program's on the host its `host` info key
//! names (a host of the job), else on the job's hosts with free slots (the
//! machines file's, less the processes running there) in file order, then
//! round-robin — gives them the next free ids (up to the job's capacity),
//! and sends the world to every proxy. It completes the world's fences
//! (each world fences on its own) and sends their puts to every host, so
//! any process finds any other's descriptors. Once every host reports it
//! holds the pairs of the first one, the parent is answered (its proxy's
//! PMI server does): the parents learn of the children through their
//! root, not through PMI, so their proxies must know them first. A process that cannot start, or
//! exits before that first fence, fails the spawn: every proxy kills the
//! world's processes and the parent gets the refusal (`MPI_ERR_SPAWN`);
//! the job goes on.

use super::*;
use crate::grid::protocol::{SpawnProgram, WorldPlan};

pub(super) struct Spawns {
    /// Slots of each plan host (the machines file's).
    slots: Vec<usize>,
    /// Spawned worlds; world `w` is `worlds[w - 1]`.
    worlds: Vec<WorldState>,
    /// Next host for round-robin placement once every slot is taken.
    next_rr: usize,
}

struct WorldState {
    first: usize,
    count: usize,
    /// Not yet through its first fence.
    pending: bool,
    failed: bool,
    fence: (usize, Vec<(String, String)>),
    epoch: u64,
    /// After its first fence: the hosts that hold its pairs.
    known: Option<Vec<bool>>,
}

impl Spawns {
    pub(super) fn new(plan: &Plan, machines: &crate::machines::Machines) -> Self {
        let slots = plan
            .hosts
            .iter()
            .map(|h| {
                machines
                    .hosts
                    .iter()
                    .find(|m| m.name.eq_ignore_ascii_case(&h.name))
                    .map_or(1, |m| m.effective_slots())
            })
            .collect();
        Spawns {
            slots,
            worlds: Vec::new(),
            next_rr: 0,
        }
    }
}

impl FrontEnd {
    fn broadcast(&mut self, m: Msg) {
        for l in &mut self.links {
            l.channel.send_msg(m.clone());
        }
    }

    fn world_of_rank(&self, rank: usize) -> Option<usize> {
        self.spawns
            .worlds
            .iter()
            .position(|w| (w.first..w.first + w.count).contains(&rank))
            .map(|i| i + 1)
    }

    /// Whether every process of the job has exited; those of a failed
    /// spawn may never have started and count as gone.
    pub(super) fn all_exited(&self) -> bool {
        if self.exited == self.ranks.len() {
            return true;
        }
        self.ranks.iter().enumerate().all(|(r, st)| {
            st.exited
                || self
                    .world_of_rank(r)
                    .is_some_and(|w| self.spawns.worlds[w - 1].failed)
        })
    }

    /// Rank `rank` (reported by link `i`) asks to spawn `programs`.
    pub(super) fn spawn_request(
        &mut self,
        i: usize,
        rank: usize,
        programs: Vec<SpawnProgram>,
        preput: Vec<(String, String)>,
    ) {
        if !self.speaks_for(i, rank) {
            self.links[i].lose(format!("asked to spawn for rank {rank}, not in its site"));
            return;
        }
        match self.place_world(rank, programs, &preput) {
            Ok(w) => {
                let count = w.procs.len();
                for &(h, _) in &w.procs {
                    self.rank_host.push(h);
                    self.ranks.push(RankState::default());
                }
                self.spawns.worlds.push(WorldState {
                    first: w.first,
                    count,
                    pending: true,
                    failed: false,
                    fence: (0, Vec::new()),
                    epoch: 0,
                    known: None,
                });
                self.broadcast(Msg::World(Box::new(w)));
            }
            Err(msg) => self.broadcast(Msg::SpawnRefused { rank, msg }),
        }
    }

    /// Where the processes of a spawn run, or why they cannot.
    fn place_world(
        &mut self,
        parent: usize,
        programs: Vec<SpawnProgram>,
        preput: &[(String, String)],
    ) -> Result<WorldPlan, String> {
        if self.outcome.is_some() || self.term_sent.is_some() {
            return Err("the job is ending".into());
        }
        let total: u64 = programs.iter().map(|p| p.maxprocs as u64).sum();
        let first = self.ranks.len();
        let room = self.plan.capacity.max(self.plan.n) - first;
        if programs.is_empty() || total == 0 || total > room as u64 {
            return Err(format!(
                "cannot spawn {total} processes: room for {room} more in this job (set \
                 GW_UNIVERSE_SIZE for gwrun to reserve more)"
            ));
        }
        let nhosts = self.plan.hosts.len();
        // Hosts whose proxy still runs, and the processes running there.
        let usable: Vec<usize> = (0..nhosts).filter(|&h| !self.host_done[h]).collect();
        if usable.is_empty() {
            return Err("no host of the job is running".into());
        }
        let mut live = vec![0usize; nhosts];
        for (r, st) in self.ranks.iter().enumerate() {
            if !st.exited {
                live[self.host_of_rank(r)] += 1;
            }
        }
        let mut procs = Vec::new();
        for (pi, p) in programs.iter().enumerate() {
            let named = p
                .info
                .iter()
                .rev()
                .find(|(k, _)| k == "host")
                .map(|(_, v)| v.as_str());
            let fixed = match named {
                Some(name) => Some(
                    usable
                        .iter()
                        .copied()
                        .find(|&h| self.plan.hosts[h].name.eq_ignore_ascii_case(name))
                        .ok_or_else(|| {
                            let names: Vec<&str> = usable
                                .iter()
                                .map(|&h| self.plan.hosts[h].name.as_str())
                                .collect();
                            format!(
                                "host '{name}' is not a running host of this job (hosts: {})",
                                names.join(", ")
                            )
                        })?,
                ),
                None => None,
            };
            for _ in 0..p.maxprocs {
                let h = fixed.unwrap_or_else(|| {
                    let free = usable
                        .iter()
                        .copied()
                        .find(|&h| live[h] < self.spawns.slots[h]);
                    free.unwrap_or_else(|| {
                        let h = usable[self.spawns.next_rr % usable.len()];
                        self.spawns.next_rr += 1;
                        h
                    })
                });
                live[h] += 1;
                procs.push((h, pi));
            }
        }
        let parent_info = preput
            .iter()
            .rev()
            .find(|(k, _)| k == "gw_parent")
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        let w = WorldPlan {
            world: self.spawns.worlds.len() + 1,
            parent,
            first,
            programs,
            procs,
            parent_info,
        };
        w.check(&self.plan).map_err(|e| e.to_string())?;
        Ok(w)
    }

    /// `host` holds the pairs of `world`'s first fence.
    pub(super) fn world_known(&mut self, i: usize, world: usize, host: usize) {
        let same_site = self.plan.hosts.get(host).map(|h| h.site)
            == self.plan.hosts.get(self.links[i].host).map(|h| h.site);
        let Some(ws) = world
            .checked_sub(1)
            .and_then(|w| self.spawns.worlds.get_mut(w))
        else {
            self.links[i].lose(format!("news of unknown spawned world {world}"));
            return;
        };
        if !same_site {
            self.links[i].lose(format!("spoke for host {host}, not in its site"));
            return;
        }
        if let Some(k) = ws.known.as_mut().and_then(|k| k.get_mut(host)) {
            *k = true;
        }
        self.check_worlds_known();
    }

    /// Spawned worlds whose first fence every running host now holds:
    /// their parents are answered, and from now on their failures are
    /// the job's.
    pub(super) fn check_worlds_known(&mut self) {
        let mut ready = Vec::new();
        for (w, ws) in self.spawns.worlds.iter_mut().enumerate() {
            let Some(known) = &ws.known else { continue };
            if !ws.pending || ws.failed {
                continue;
            }
            if known.iter().zip(&self.host_done).all(|(k, d)| *k || *d) {
                ws.pending = false;
                ws.known = None;
                ready.push(w + 1);
            }
        }
        for world in ready {
            self.broadcast(Msg::WorldReady { world });
        }
    }

    /// A host could not start a process of `world`.
    pub(super) fn world_trouble(&mut self, i: usize, world: usize, host: usize, msg: String) {
        let same_site = self.plan.hosts.get(host).map(|h| h.site)
            == self.plan.hosts.get(self.links[i].host).map(|h| h.site);
        if !same_site {
            self.links[i].lose(format!("reported trouble on host {host}, not in its site"));
            return;
        }
        let label = self.host_label(host);
        self.fail_world(world, format!("{label}: {msg}"));
    }

    /// The spawn of `world` failed: every proxy kills its processes and
    /// the parent is answered. After its first fence, a world's failures
    /// are the job's.
    fn fail_world(&mut self, world: usize, msg: String) {
        let Some(ws) = world
            .checked_sub(1)
            .and_then(|w| self.spawns.worlds.get_mut(w))
        else {
            return;
        };
        if ws.failed {
            return;
        }
        if !ws.pending {
            self.fail(msg, FailKind::Lost, 1);
            return;
        }
        ws.failed = true;
        ws.pending = false;
        self.broadcast(Msg::WorldFailed { world, msg });
    }

    /// A spawned process exited: true when that is its world's business
    /// (it failed, or fails now because the process left before its
    /// first fence), false when it counts like any rank's exit.
    pub(super) fn spawned_exit(
        &mut self,
        rank: usize,
        code: Option<i32>,
        signal: Option<i32>,
    ) -> bool {
        let Some(w) = self.world_of_rank(rank) else {
            return false;
        };
        let ws = &self.spawns.worlds[w - 1];
        if ws.failed {
            return true;
        }
        // Past its first fence (even before every host said it knows the
        // world) a process may well have finished: its exit counts as any.
        if !ws.pending || ws.known.is_some() {
            return false;
        }
        let how = match (code, signal) {
            (_, Some(s)) => format!("was killed by signal {s} ({})", sys::signal_name(s)),
            (Some(c), None) => format!("exited with status {c}"),
            (None, None) => "exited".into(),
        };
        let label = self.rank_label(rank);
        self.fail_world(w, format!("spawned {label} {how} before it initialised"));
        true
    }

    /// A site's part of fence `epoch` of spawned world `world`.
    pub(super) fn world_fence(
        &mut self,
        i: usize,
        world: usize,
        epoch: u64,
        ranks: usize,
        pairs: Vec<(String, String)>,
    ) {
        let Some(ws) = world
            .checked_sub(1)
            .and_then(|w| self.spawns.worlds.get_mut(w))
        else {
            self.links[i].lose(format!("fence of unknown spawned world {world}"));
            return;
        };
        if ws.failed {
            return;
        }
        if epoch != ws.epoch || ws.fence.0.saturating_add(ranks) > ws.count {
            self.links[i].lose(format!(
                "bad fence {epoch} of spawned world {world} with {ranks} ranks"
            ));
            return;
        }
        ws.fence.0 += ranks;
        ws.fence.1.extend(pairs);
        if ws.fence.0 < ws.count {
            return;
        }
        let pairs = std::mem::take(&mut ws.fence.1);
        ws.fence.0 = 0;
        ws.epoch += 1;
        if epoch == 0 {
            ws.known = Some(vec![false; self.plan.hosts.len()]);
        }
        for (k, v) in &pairs {
            self.kvs.insert(k.clone(), v.clone());
        }
        self.broadcast(Msg::Kvs {
            epoch,
            pairs,
            world,
        });
    }
}
