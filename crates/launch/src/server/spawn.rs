//! Spawning into a running job (PMI-1 `mcmd=spawn`): the server's part.
//!
//! The job's context ids run up to a capacity fixed at start (`gwrun`
//! reserves room beyond the first world, `GW_UNIVERSE_SIZE`). A spawn
//! request (one block per program) becomes [`Notice::Spawn`]; the launcher
//! checks and starts the programs as a new *world* ([`Server::add_world`]:
//! the next free ids), whose processes connect like any rank, share the
//! job's key-value space, and pass the bootstrap barrier among themselves.
//! The parent's `spawn_result` is sent when that first barrier completes,
//! so it returns only once every new process is ready to receive; a world
//! member that exits first, or a program that cannot start, answers it
//! with an error instead ([`Server::spawn_failed`]).

use super::*;
use gridwire_core::bootstrap::spawn_wire::{parse_spawn, SpawnApp, SpawnBlock};

/// The worlds of a job: who belongs to which, and spawns in progress.
#[derive(Debug, Default)]
pub(super) struct Worlds {
    /// (first rank, count) of each world; world 0 started with the job.
    ranges: Vec<(usize, usize)>,
    /// World of each rank.
    of: Vec<usize>,
    /// Blocks of a multi-program spawn received so far, by requesting rank.
    blocks: HashMap<usize, Vec<SpawnBlock>>,
    /// Spawned worlds not yet through their first barrier: their parent.
    pending: HashMap<usize, usize>,
    /// Room for ranks: ids run up to `capacity - 1`.
    pub(super) capacity: usize,
}

impl Worlds {
    pub(super) fn new(size: usize) -> Self {
        Worlds {
            ranges: vec![(0, size)],
            of: vec![0; size],
            capacity: size,
            ..Default::default()
        }
    }

    /// The ranks of `rank`'s world.
    pub(super) fn world_range(&self, rank: usize) -> std::ops::Range<usize> {
        let w = self.of.get(rank).copied().unwrap_or(0);
        let (first, count) = self.ranges[w];
        first..first + count
    }
}

impl Server {
    /// Lets spawned worlds use ids up to `capacity - 1` (at least the size).
    pub fn set_capacity(&mut self, capacity: usize) {
        self.worlds.capacity = capacity.max(self.size);
    }

    /// Ids still free for spawned processes.
    pub fn room(&self) -> usize {
        self.worlds.capacity - self.size
    }

    /// One `mcmd=spawn` block from `rank`: the complete request (the last
    /// block) becomes [`Notice::Spawn`]; a malformed one is answered with
    /// an error at once.
    pub(super) fn spawn_block(&mut self, rank: usize, cmd: &Command, out: &mut Output) {
        let block = match parse_spawn(cmd) {
            Ok(b) => b,
            Err(why) => {
                self.worlds.blocks.remove(&rank);
                out.replies.push((rank, spawn_error(&why)));
                return;
            }
        };
        let (index, total) = (block.index, block.total);
        let blocks = self.worlds.blocks.entry(rank).or_default();
        if index != blocks.len() + 1 || blocks.first().is_some_and(|b| b.total != total) {
            self.worlds.blocks.remove(&rank);
            out.replies.push((
                rank,
                spawn_error(&format!("spawn block {index} of {total} came out of order")),
            ));
            return;
        }
        blocks.push(block);
        if index < total {
            return;
        }
        let blocks = self.worlds.blocks.remove(&rank).unwrap_or_default();
        let preput = blocks.last().map(|b| b.preput.clone()).unwrap_or_default();
        let apps: Vec<SpawnApp> = blocks.into_iter().map(|b| b.app).collect();
        out.notices.push(Notice::Spawn { rank, apps, preput });
    }

    /// Adds a world of `count` ranks (the next free ids) spawned by
    /// `parent`, which gets its `spawn_result` when the world's first
    /// barrier completes. Returns the first id, or why there is no room.
    pub fn add_world(&mut self, parent: usize, count: usize) -> Result<usize, String> {
        if count == 0 || count > self.room() {
            return Err(format!(
                "cannot spawn {count} processes: room for {} more in this job (set GW_UNIVERSE_SIZE \
                 for gwrun to reserve more)",
                self.room()
            ));
        }
        let first = self.size;
        let w = self.worlds.ranges.len();
        self.worlds.ranges.push((first, count));
        self.size += count;
        self.worlds.of.resize(self.size, w);
        self.usage.resize(self.size, (0, 0));
        self.in_barrier.resize(self.size, false);
        self.served.resize(self.size, true);
        self.proto.resize(self.size, Proto::V1);
        self.worlds.pending.insert(w, parent);
        Ok(first)
    }

    /// The spawn of `parent` failed before any process of it started.
    pub fn spawn_refused(&mut self, parent: usize, why: &str) -> Output {
        let mut out = Output::default();
        out.replies.push((parent, spawn_error(why)));
        out
    }

    /// A process of a spawned world that has not completed its first
    /// barrier is gone (it exited, or the launcher could not start one of
    /// its programs): its parent's spawn fails with `why`.
    pub fn spawn_failed(&mut self, rank: usize, why: &str) -> Output {
        let mut out = Output::default();
        let w = self.worlds.of.get(rank).copied().unwrap_or(0);
        if let Some(parent) = self.worlds.pending.remove(&w) {
            out.replies.push((parent, spawn_error(why)));
        }
        out
    }

    /// The world of `rank` completed a barrier: a pending spawn is answered.
    pub(super) fn world_ready(&mut self, rank: usize, out: &mut Output) {
        let w = self.worlds.of.get(rank).copied().unwrap_or(0);
        if let Some(parent) = self.worlds.pending.remove(&w) {
            let (first, count) = self.worlds.ranges[w];
            out.replies.push((
                parent,
                line(
                    Command::new("spawn_result")
                        .arg("rc", 0)
                        .arg("gw_base", first)
                        .arg("gw_size", count),
                ),
            ));
        }
    }
}

fn spawn_error(why: &str) -> String {
    line(
        Command::new("spawn_result")
            .arg("rc", -1)
            .arg("errmsg", escape_value(why)),
    )
}
