//! Spawned worlds on a proxy (`MPI_Comm_spawn` in a `gwrun -f` job).
//!
//! A rank's spawn request goes up the tree; the front end places the new
//! processes and sends the world down to every proxy. Each proxy adds it
//! to its PMI server (ids, which of them it serves, the parent to answer),
//! the hosts it names fork their processes — the staged program of the
//! first world when the spawn names that program, else the program found
//! on the host — and the world fences on its own, always through the
//! front end, so its puts reach every host. Once every host holds the
//! pairs of the world's first fence, the parent is answered (its proxy's
//! server sends `spawn_result`); a world
//! that fails (a program that cannot start, a process that dies before its
//! first fence) is killed on every host and its parent told.

use super::ranks::ProcSpec;
use super::*;
use crate::grid::protocol::{SpawnProgram, WorldPlan};
use gridwire_core::bootstrap::spawn_wire::SpawnApp;

/// One spawned world's fence on this proxy.
pub(super) struct WorldFence {
    first: usize,
    epoch: u64,
    /// The world's ranks on this host.
    here: Vec<usize>,
    /// How many of its ranks run on the hosts below (a site leader).
    below: usize,
    /// This host's part of the current fence, once all of `here` are in.
    own: Option<Vec<(String, String)>>,
    below_in: (usize, Vec<(String, String)>),
    sent: bool,
}

fn info<'a>(p: &'a SpawnProgram, key: &str) -> Option<&'a str> {
    p.info
        .iter()
        .rev()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

impl Proxy {
    /// A rank's spawn: to the front end, which places it.
    pub(super) fn request_spawn(
        &mut self,
        rank: usize,
        apps: Vec<SpawnApp>,
        preput: Vec<(String, String)>,
    ) {
        let programs = apps
            .into_iter()
            .map(|a| SpawnProgram {
                command: a.command,
                args: a.args,
                maxprocs: a.maxprocs,
                info: a.info,
            })
            .collect();
        self.up.send_msg(Msg::SpawnRequest {
            rank,
            programs,
            preput,
        });
    }

    /// Down messages about spawns go on to every host below first.
    fn pass_down(&mut self, m: &Msg) {
        for c in &mut self.children {
            c.channel.send_msg(m.clone());
        }
    }

    /// The front end refused `rank`'s spawn: its proxy answers it.
    pub(super) fn spawn_refused(&mut self, rank: usize, msg: String) {
        self.pass_down(&Msg::SpawnRefused {
            rank,
            msg: msg.clone(),
        });
        if self.ranks.iter().any(|r| r.rank == rank) {
            let out = self.server.spawn_refused(rank, &msg);
            self.deliver(out.replies);
        }
    }

    /// A spawned world joins the job: add it, start this host's processes.
    pub(super) fn add_spawned_world(&mut self, w: WorldPlan) {
        self.pass_down(&Msg::World(Box::new(w.clone())));
        if let Err(e) = w.check(self.plan()) {
            self.orphan(format!("bad spawned world from the parent: {e}"));
            return;
        }
        let host = self.hello.host;
        let below_hosts: Vec<usize> = self.children.iter().map(|c| c.host).collect();
        let ids = w.first..w.first + w.procs.len();
        let here: Vec<usize> = ids
            .clone()
            .filter(|&r| w.procs[r - w.first].0 == host)
            .collect();
        let below = w
            .procs
            .iter()
            .filter(|(h, _)| below_hosts.contains(h))
            .count();
        match self
            .server
            .add_world_partial(w.parent, w.first, w.procs.len(), &here)
        {
            Ok(idx) if idx == w.world => {}
            Ok(idx) => {
                self.orphan(format!("spawned world {} arrived as world {idx}", w.world));
                return;
            }
            Err(e) => {
                self.orphan(format!("spawned world {}: {e}", w.world));
                return;
            }
        }
        self.spawned.insert(
            w.world,
            WorldFence {
                first: w.first,
                epoch: 0,
                here: here.clone(),
                below,
                own: None,
                below_in: (0, Vec::new()),
                sent: false,
            },
        );
        if here.is_empty() {
            return;
        }
        if self.term_sent.is_some() || self.orphaned.is_some() {
            self.up.send_msg(Msg::WorldTrouble {
                world: w.world,
                host,
                msg: "the host is ending its part of the job".into(),
            });
            return;
        }
        let mut pids = Vec::new();
        for (local, &r) in here.iter().enumerate() {
            let appnum = w.procs[r - w.first].1;
            let prog = &w.programs[appnum];
            let started = self.program_for(prog).and_then(|(program, wdir)| {
                let mut env = vec![
                    ("PMI_SPAWNED".to_string(), "1".to_string()),
                    ("GW_APPNUM".to_string(), appnum.to_string()),
                ];
                if !w.parent_info.is_empty() {
                    env.push(("GW_PARENT".into(), w.parent_info.clone()));
                }
                let p = ProcSpec {
                    rank: r,
                    local,
                    nlocal: here.len(),
                    program: &program,
                    args: &prog.args,
                    world: (w.first, w.procs.len()),
                    extra_env: env,
                    wdir: wdir.as_deref(),
                };
                self.spawn(p).map_err(|(_, msg)| msg)
            });
            match started {
                Ok(pid) => pids.push((r, pid)),
                Err(msg) => {
                    // The front end fails the world everywhere (and kills
                    // what started here with it).
                    self.up.send_msg(Msg::WorldTrouble {
                        world: w.world,
                        host,
                        msg,
                    });
                    break;
                }
            }
        }
        if !pids.is_empty() {
            self.up.send_msg(Msg::Started { host, pids });
        }
    }

    /// The program to run for `p` on this host, and its working directory:
    /// the first world's (staged) program when `p` names it, else what the
    /// `path` key, then `PATH`, find here (`wdir` first for a relative name).
    fn program_for(&self, p: &SpawnProgram) -> Result<(PathBuf, Option<String>), String> {
        let host = self.host_name(self.hello.host).to_string();
        let wdir = match info(p, "wdir") {
            Some(d) if !std::path::Path::new(d).is_dir() => {
                return Err(format!("wdir '{d}' is not a directory on host {host}"))
            }
            d => d.map(str::to_string),
        };
        if let Some(mine) = &self.program {
            if p.command == self.plan().program || std::path::Path::new(&p.command) == mine {
                return Ok((mine.clone(), wdir));
            }
        }
        let found = crate::server::resolve_program(
            &p.command,
            wdir.as_deref().map(std::path::Path::new),
            info(p, "path"),
        )
        .ok_or_else(|| {
            format!(
                "cannot execute '{}' on host {host}: no such executable file (PATH searched)",
                p.command
            )
        })?;
        Ok((found, wdir))
    }

    /// The spawn of `world` failed: kill its processes here, answer its
    /// parent if it is here.
    pub(super) fn spawned_world_failed(&mut self, world: usize, msg: String) {
        self.pass_down(&Msg::WorldFailed {
            world,
            msg: msg.clone(),
        });
        let Some(wf) = self.spawned.remove(&world) else {
            return;
        };
        for r in &self.ranks {
            if wf.here.contains(&r.rank) && r.exit.is_none() {
                sys::kill_group(r.pid, libc::SIGKILL);
            }
        }
        let out = self.server.spawn_failed(wf.first, &msg);
        self.deliver(out.replies);
    }

    /// Every rank of `world` here entered its barrier.
    pub(super) fn world_barrier_ready(&mut self, world: usize) {
        let pairs = self.server.take_fresh_of(world);
        if let Some(wf) = self.spawned.get_mut(&world) {
            wf.own = Some(pairs);
            self.maybe_world_fence_up(world);
        }
    }

    /// A child proxy's part of `world`'s fence.
    pub(super) fn child_world_fence(
        &mut self,
        i: usize,
        world: usize,
        epoch: u64,
        ranks: usize,
        pairs: Vec<(String, String)>,
    ) {
        let ok = match self.spawned.get_mut(&world) {
            Some(wf) if wf.epoch == epoch && wf.below_in.0 + ranks <= wf.below => {
                wf.below_in.0 += ranks;
                wf.below_in.1.extend(pairs);
                true
            }
            // A world that failed meanwhile: its fence is moot.
            None => return,
            Some(_) => false,
        };
        if !ok {
            self.children[i].lose(format!("bad fence {epoch} of spawned world {world}"));
            return;
        }
        self.maybe_world_fence_up(world);
    }

    fn maybe_world_fence_up(&mut self, world: usize) {
        let Some(wf) = self.spawned.get_mut(&world) else {
            return;
        };
        if wf.sent || wf.below_in.0 < wf.below || (wf.here.is_empty() && wf.below == 0) {
            return;
        }
        let own = match (&mut wf.own, wf.here.is_empty()) {
            (Some(p), _) => std::mem::take(p),
            (None, true) => Vec::new(),
            (None, false) => return,
        };
        let mut pairs = own;
        pairs.extend(std::mem::take(&mut wf.below_in.1));
        wf.sent = true;
        let m = Msg::Fence {
            epoch: wf.epoch,
            ranks: wf.here.len() + wf.below_in.0,
            pairs,
            local: false,
            world,
        };
        self.up.send_msg(m);
    }

    /// The front end completed fence `epoch` of `world`.
    pub(super) fn complete_world_fence(
        &mut self,
        world: usize,
        epoch: u64,
        pairs: Vec<(String, String)>,
    ) {
        self.pass_down(&Msg::Kvs {
            epoch,
            pairs: pairs.clone(),
            world,
        });
        if let Err(e) = self.server.insert_remote(pairs) {
            self.up.send_msg(Msg::Trouble {
                host: self.hello.host,
                msg: e,
                code: 1,
            });
            self.kill(libc::SIGTERM);
            return;
        }
        let Some(wf) = self.spawned.get_mut(&world) else {
            return;
        };
        if wf.epoch != epoch {
            let now = wf.epoch;
            self.orphan(format!(
                "fence {epoch} of spawned world {world} answered during fence {now}"
            ));
            return;
        }
        wf.epoch += 1;
        wf.own = None;
        wf.sent = false;
        wf.below_in = (0, Vec::new());
        let out = self.server.release_world_barrier(world);
        self.deliver(out.replies);
        if epoch == 0 {
            // The parents learn of the new processes through their root,
            // not through PMI: they may look them up only once every host
            // holds their descriptors (the front end counts these).
            self.up.send_msg(Msg::WorldKnown {
                world,
                host: self.hello.host,
            });
        }
    }

    /// Every host holds `world`'s descriptors: answer its parent here.
    pub(super) fn spawned_world_ready(&mut self, world: usize) {
        self.pass_down(&Msg::WorldReady { world });
        let out = self.server.spawned_world_ready(world);
        self.deliver(out.replies);
    }
}
