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
//! with an error instead ([`Server::spawn_failed`]). PMI-2's `spawn` is
//! served the same way, answered with `spawn-response`.

use super::*;
use gridwire_core::bootstrap::spawn_wire::{parse_spawn, SpawnApp, SpawnBlock, MAX_SPAWN_ITEMS};

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

/// Context ids a job reserves beyond its first world when
/// `GW_UNIVERSE_SIZE` does not say: room for that many spawned processes
/// over the job's life (ids are never reused). Each id costs every
/// process a peer slot (a few hundred bytes), not a connection.
pub const DEFAULT_SPAWN_ROOM: usize = 256;

/// A job's capacity (single-host gwrun and `gwrun -f` alike):
/// `GW_UNIVERSE_SIZE` (the first world plus every process spawned later,
/// as `MPI_UNIVERSE_SIZE` reports it) or the first world plus
/// [`DEFAULT_SPAWN_ROOM`].
pub fn job_capacity(n: usize) -> Result<usize, String> {
    let max = gridwire_core::context::MAX_CAPACITY as usize;
    let cap = match std::env::var("GW_UNIVERSE_SIZE") {
        Ok(v) if !v.trim().is_empty() => {
            let c: usize = v
                .trim()
                .parse()
                .map_err(|_| format!("GW_UNIVERSE_SIZE={v:?} is not a number of processes"))?;
            if c < n {
                return Err(format!(
                    "GW_UNIVERSE_SIZE={c} is smaller than the job ({n} processes)"
                ));
            }
            c
        }
        _ => n + DEFAULT_SPAWN_ROOM,
    };
    if cap > max {
        return Err(format!(
            "a job holds at most {max} processes, spawned ones included (GW_UNIVERSE_SIZE)"
        ));
    }
    Ok(cap)
}

/// Where `program` would be executed from: itself when it names a path
/// (relative to `wdir` if given), else the first executable match in
/// `path` (the `path` info key, directories separated by `:`) or `PATH`.
pub fn resolve_program(
    program: &str,
    wdir: Option<&std::path::Path>,
    path: Option<&str>,
) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let runnable = |p: &std::path::Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        let p = match wdir {
            Some(d) => d.join(program),
            None => std::path::PathBuf::from(program),
        };
        return runnable(&p).then(|| p.canonicalize().unwrap_or(p));
    }
    let search = |list: &std::ffi::OsStr| {
        std::env::split_paths(list)
            .map(|d| d.join(program))
            .find(|p| runnable(p))
    };
    if let Some(found) = path.and_then(|p| search(std::ffi::OsStr::new(p))) {
        return Some(found);
    }
    search(&std::env::var_os("PATH")?)
}

impl Server {
    /// The world `rank` belongs to (0: the first world).
    pub fn world_of(&self, rank: usize) -> usize {
        self.worlds.of.get(rank).copied().unwrap_or(0)
    }

    /// The ids of world `world` (empty for an unknown one).
    pub fn world_ids(&self, world: usize) -> std::ops::Range<usize> {
        match self.worlds.ranges.get(world) {
            Some(&(first, count)) => first..first + count,
            None => 0..0,
        }
    }

    /// How many worlds the job has had (the first one included).
    pub fn worlds(&self) -> usize {
        self.worlds.ranges.len()
    }

    /// (Partial servers, `gwrun -f`) adds the world the front end placed:
    /// ids `first..first+count`, of which this host serves `here`; its
    /// parent is answered when the world's first fence completes
    /// ([`Server::release_world_barrier`]). `first` must be the next free
    /// id here too (every proxy adds every world, in the front end's order).
    pub fn add_world_partial(
        &mut self,
        parent: usize,
        first: usize,
        count: usize,
        here: &[usize],
    ) -> Result<usize, String> {
        if first != self.size {
            return Err(format!(
                "a spawned world from id {first}, but the next free id here is {}",
                self.size
            ));
        }
        if parent >= self.size {
            return Err(format!(
                "a spawned world's parent {parent} is not a process"
            ));
        }
        self.add_world(parent, count)?;
        for r in first..first + count {
            self.served[r] = here.contains(&r);
        }
        Ok(self.worlds.ranges.len() - 1)
    }

    /// Ends world `world`'s barrier on a partial server (its fence came
    /// back from the front end): its ranks served here are released.
    pub fn release_world_barrier(&mut self, world: usize) -> Output {
        let mut out = Output::default();
        for r in self.world_ids(world) {
            if self.served[r] && self.in_barrier[r] {
                out.replies.push((r, self.barrier_release(r)));
            }
            self.in_barrier[r] = false;
        }
        out
    }

    /// (Partial servers) every host knows spawned world `world`'s
    /// descriptors: its parent's spawn is answered (once).
    pub fn spawned_world_ready(&mut self, world: usize) -> Output {
        let mut out = Output::default();
        let ids = self.world_ids(world);
        if world != 0 && !ids.is_empty() {
            self.world_ready(ids.start, &mut out);
        }
        out
    }

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
                out.replies.push((rank, self.spawn_error(rank, &why)));
                return;
            }
        };
        let (index, total) = (block.index, block.total);
        let blocks = self.worlds.blocks.entry(rank).or_default();
        if index != blocks.len() + 1 || blocks.first().is_some_and(|b| b.total != total) {
            self.worlds.blocks.remove(&rank);
            let why = format!("spawn block {index} of {total} came out of order");
            out.replies.push((rank, self.spawn_error(rank, &why)));
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
        out.replies.push((parent, self.spawn_error(parent, why)));
        out
    }

    /// A process of a spawned world that has not completed its first
    /// barrier is gone (it exited, or the launcher could not start one of
    /// its programs): its parent's spawn fails with `why`.
    pub fn spawn_failed(&mut self, rank: usize, why: &str) -> Output {
        let mut out = Output::default();
        let w = self.worlds.of.get(rank).copied().unwrap_or(0);
        if let Some(parent) = self.worlds.pending.remove(&w) {
            out.replies.push((parent, self.spawn_error(parent, why)));
        }
        out
    }

    /// The world of `rank` completed a barrier: a pending spawn is answered.
    pub(super) fn world_ready(&mut self, rank: usize, out: &mut Output) {
        let w = self.worlds.of.get(rank).copied().unwrap_or(0);
        if let Some(parent) = self.worlds.pending.remove(&w) {
            let (first, count) = self.worlds.ranges[w];
            out.replies
                .push((parent, self.spawn_ok(parent, first, count)));
        }
    }
}

impl Server {
    /// A spawn's refusal, in the protocol `parent` speaks.
    fn spawn_error(&self, parent: usize, why: &str) -> String {
        match self.proto.get(parent) {
            Some(Proto::V2) => super::pmi2::frame(
                Command::new("spawn-response")
                    .arg("rc", -1)
                    .arg("errmsg", escape_value(why)),
            ),
            _ => line(
                Command::new("spawn_result")
                    .arg("rc", -1)
                    .arg("errmsg", escape_value(why)),
            ),
        }
    }

    /// A spawn's success: gwrun's `gw_base`/`gw_size` say which context
    /// ids the new processes have.
    fn spawn_ok(&self, parent: usize, first: usize, count: usize) -> String {
        match self.proto.get(parent) {
            Some(Proto::V2) => super::pmi2::frame(
                Command::new("spawn-response")
                    .arg("rc", 0)
                    .arg("jobid", &self.kvsname)
                    .arg("nerrs", 0)
                    .arg("gw_base", first)
                    .arg("gw_size", count),
            ),
            _ => line(
                Command::new("spawn_result")
                    .arg("rc", 0)
                    .arg("gw_base", first)
                    .arg("gw_size", count),
            ),
        }
    }
}

/// Key-value pairs to put for spawned processes.
pub(super) type Preput = Vec<(String, String)>;

/// A PMI-2 `spawn` (MPICH's `PMI2_Job_Spawn`): `ncmds`, the pairs to put
/// (`preputcount`, `ppkeyI`, `ppvalI`), then per program `subcmd`,
/// `maxprocs`, `argc`, `argvI`, `infokeycount`, `infokeyI`, `infovalI`,
/// in that order (keys repeat per program, so they are read in sequence).
pub(super) fn parse_pmi2_spawn(cmd: &Command) -> Result<(Vec<SpawnApp>, Preput), String> {
    let num = |v: &str, what: &str| -> Result<usize, String> {
        v.trim()
            .parse::<usize>()
            .ok()
            .filter(|&n| n <= MAX_SPAWN_ITEMS)
            .ok_or_else(|| format!("spawn: {what}={v} is out of range"))
    };
    let ncmds = num(cmd.get("ncmds").unwrap_or("0"), "ncmds")?;
    let mut preput = Vec::new();
    let mut apps: Vec<SpawnApp> = Vec::new();
    let mut pending_key: Option<String> = None;
    for (k, v) in &cmd.args {
        match k.as_str() {
            "subcmd" => apps.push(SpawnApp {
                command: v.clone(),
                args: Vec::new(),
                maxprocs: 0,
                info: Vec::new(),
            }),
            "maxprocs" => {
                let n = v
                    .trim()
                    .parse::<u32>()
                    .map_err(|_| format!("spawn: maxprocs={v}"))?;
                apps.last_mut()
                    .ok_or("spawn: maxprocs before subcmd")?
                    .maxprocs = n;
            }
            k if k.starts_with("argv") => {
                let app = apps.last_mut().ok_or("spawn: argv before subcmd")?;
                if app.args.len() >= MAX_SPAWN_ITEMS {
                    return Err("spawn: too many arguments".into());
                }
                app.args.push(v.clone());
            }
            k if k.starts_with("ppkey") || k.starts_with("infokey") && k != "infokeycount" => {
                pending_key = Some(v.clone())
            }
            k if k.starts_with("ppval") => {
                if preput.len() >= MAX_SPAWN_ITEMS {
                    return Err("spawn: too many preput pairs".into());
                }
                preput.push((
                    pending_key.take().ok_or("spawn: ppval without ppkey")?,
                    v.clone(),
                ));
            }
            k if k.starts_with("infoval") => {
                let key = pending_key.take().ok_or("spawn: infoval without infokey")?;
                let app = apps.last_mut().ok_or("spawn: info before subcmd")?;
                if app.info.len() >= MAX_SPAWN_ITEMS {
                    return Err("spawn: too many info pairs".into());
                }
                app.info.push((key, v.clone()));
            }
            _ => {}
        }
    }
    if apps.is_empty() || apps.len() != ncmds || apps.iter().any(|a| a.command.is_empty()) {
        return Err(format!(
            "spawn: ncmds={ncmds} but {} programs named",
            apps.len()
        ));
    }
    Ok((apps, preput))
}

#[cfg(test)]
mod tests {
    use super::*;
    use gridwire_core::bootstrap::pmi_wire::LineBuffer;
    use gridwire_core::bootstrap::spawn_wire::encode_spawn;

    fn feed(s: &mut Server, rank: usize, text: &str) -> Output {
        let mut lb = LineBuffer::new();
        lb.push(text.as_bytes());
        let mut all = Output::default();
        while let Some(c) = lb.next_command() {
            let o = s.handle(rank, c);
            all.replies.extend(o.replies);
            all.notices.extend(o.notices);
        }
        all
    }

    #[test]
    fn pmi1_spawn_waits_for_the_new_world() {
        let mut s = Server::new(2, "kvs_t".into(), String::new());
        s.set_capacity(6);
        let app = SpawnApp {
            command: "prog".into(),
            args: vec!["a".into()],
            maxprocs: 3,
            info: vec![],
        };
        let text = encode_spawn(
            std::slice::from_ref(&app),
            &[("gw_parent".into(), "4:0,1".into())],
        )
        .unwrap();
        let out = feed(&mut s, 0, &text);
        assert!(out.replies.is_empty(), "no answer before the world starts");
        assert!(
            matches!(&out.notices[..], [Notice::Spawn { rank: 0, apps, .. }] if apps == &vec![app])
        );
        assert!(s.add_world(0, 5).is_err(), "beyond the capacity");
        assert_eq!(s.add_world(0, 3), Ok(2));
        // The new world's barrier is its own; it answers the parent.
        for r in 2..4 {
            assert!(feed(&mut s, r, "cmd=barrier_in\n").replies.is_empty());
        }
        let out = feed(&mut s, 4, "cmd=barrier_in\n");
        let to_parent: Vec<_> = out.replies.iter().filter(|(r, _)| *r == 0).collect();
        assert_eq!(to_parent.len(), 1);
        assert!(to_parent[0].1.contains("rc=0") && to_parent[0].1.contains("gw_base=2"));
        // The first world's barrier is unaffected.
        assert!(feed(&mut s, 0, "cmd=barrier_in\n").replies.is_empty());
        assert_eq!(feed(&mut s, 1, "cmd=barrier_in\n").replies.len(), 2);
    }

    /// A proxy's server (`gwrun -f`): a spawned world the front end
    /// placed fences on its own; its first fence answers the parent.
    #[test]
    fn partial_server_fences_a_spawned_world_apart() {
        // This host serves rank 1 of the first world and id 3 of a world
        // of ids 2..4 spawned by rank 1.
        let mut s = Server::new_partial(2, "k".into(), String::new(), &[1]);
        s.set_capacity(8);
        assert!(
            s.add_world_partial(1, 3, 2, &[3]).is_err(),
            "not the next id"
        );
        assert_eq!(s.add_world_partial(1, 2, 2, &[3]), Ok(1));
        assert_eq!(s.world_of(3), 1);
        feed(&mut s, 3, "cmd=put kvsname=k key=c value=3\n");
        feed(&mut s, 1, "cmd=put kvsname=k key=p value=1\n");
        let out = feed(&mut s, 3, "cmd=barrier_in\n");
        assert_eq!(out.notices, vec![Notice::BarrierReady { world: 1 }]);
        assert_eq!(s.take_fresh_of(1), vec![("c".to_string(), "3".to_string())]);
        // The first world's barrier is its own.
        let out = feed(&mut s, 1, "cmd=barrier_in\n");
        assert_eq!(out.notices, vec![Notice::BarrierReady { world: 0 }]);
        assert_eq!(s.take_fresh_of(0), vec![("p".to_string(), "1".to_string())]);
        let out = s.release_world_barrier(1);
        let to: Vec<usize> = out.replies.iter().map(|r| r.0).collect();
        assert_eq!(
            to,
            vec![3],
            "the child's release, not yet the parent's answer"
        );
        let out = s.spawned_world_ready(1);
        assert_eq!(out.replies.len(), 1);
        assert_eq!(out.replies[0].0, 1);
        assert!(out.replies[0].1.contains("rc=0") && out.replies[0].1.contains("gw_base=2"));
        // Rank 1 is still in the first world's barrier; the spawn is
        // answered once.
        assert!(s.release_world_barrier(1).replies.is_empty());
        assert!(s.spawned_world_ready(1).replies.is_empty());
        assert_eq!(s.release_barrier().replies.len(), 1);
    }

    #[test]
    fn pmi2_spawn_parses_and_bad_ones_are_refused() {
        let c = Command::new("spawn")
            .arg("ncmds", 2)
            .arg("preputcount", 1)
            .arg("ppkey0", "k")
            .arg("ppval0", "v")
            .arg("subcmd", "a")
            .arg("maxprocs", 1)
            .arg("argc", 1)
            .arg("argv0", "x")
            .arg("infokeycount", 1)
            .arg("infokey0", "wdir")
            .arg("infoval0", "/tmp")
            .arg("subcmd", "b")
            .arg("maxprocs", 2)
            .arg("argc", 0)
            .arg("infokeycount", 0);
        let (apps, pre) = parse_pmi2_spawn(&c).unwrap();
        assert_eq!(pre, vec![("k".to_string(), "v".to_string())]);
        assert_eq!(apps.len(), 2);
        assert_eq!(
            (apps[0].args.clone(), apps[1].maxprocs),
            (vec!["x".to_string()], 2)
        );
        assert_eq!(apps[0].info, vec![("wdir".to_string(), "/tmp".to_string())]);
        assert!(parse_pmi2_spawn(&Command::new("spawn").arg("ncmds", 1)).is_err());
        assert!(
            parse_pmi2_spawn(&Command::new("spawn").arg("ncmds", 1).arg("maxprocs", 1)).is_err()
        );
    }
}
