//! The front end ↔ proxy protocol, free of I/O.
//!
//! A channel is a byte stream (an ssh session's stdin/stdout, a pipe pair
//! for a local proxy). On it travel frames: a 4-byte little-endian length
//! (of what follows), one kind byte, then the payload. Control messages are
//! JSON (small, rare, easy to extend and to read in a trace); the bulk
//! kinds — rank output, staged file data, stdin — are binary so that
//! neither side copies or escapes them.
//!
//! Everything here is parsed as hostile: lengths are bounded before any
//! byte is buffered beyond what arrived, JSON is checked after parsing
//! ([`Plan::check`]), and errors are values, never panics.

use serde::{Deserialize, Serialize};

/// Bumped whenever a message changes meaning; a proxy refuses a front
/// end of another version (and says which two).
pub const VERSION: u32 = 3;
/// The largest frame accepted: a fence of a big job carries the whole
/// key-value space of the hosts below (bounded by the PMI server at
/// 256 MiB; ours are far smaller in practice).
pub const MAX_FRAME: usize = 64 << 20;
/// Staged files travel in chunks of this size (keeps heartbeats and
/// output flowing between chunks).
pub const FILE_CHUNK: usize = 256 << 10;
/// Largest job and tree the plan may describe.
pub const MAX_RANKS: usize = 100_000;
pub const MAX_HOSTS: usize = 100_000;

const KIND_MSG: u8 = 1;
const KIND_OUTPUT: u8 = 2;
const KIND_FILE: u8 = 3;
const KIND_STDIN: u8 = 4;

/// One unit on a channel.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    Msg(Msg),
    /// Complete lines of one rank's stdout (1) or stderr (2).
    Output {
        rank: u32,
        stream: u8,
        data: Vec<u8>,
    },
    /// The next bytes of a staged file (files are sent whole, in order).
    FileData {
        hash: String,
        data: Vec<u8>,
    },
    /// Bytes for rank 0's stdin.
    Stdin(Vec<u8>),
}

/// Control messages. Down = towards the proxies, up = towards the front end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub enum Msg {
    /// Down, first message on a channel: who the proxy is and the job.
    Hello(Box<Hello>),
    /// Up, the answer to Hello: the proxy speaks our version.
    Ready { version: u32, host: usize },
    /// Up: the staged files (by hash) a host lacks and needs sent.
    Need { host: usize, hashes: Vec<String> },
    /// Up: the host's ranks run, with their pids.
    Started {
        host: usize,
        pids: Vec<(usize, i32)>,
    },
    /// Up: `ranks` ranks (below this channel) entered fence `epoch`,
    /// having put these pairs since the previous one. `local`: every rank
    /// of the job is below this channel and its leader has already
    /// completed the fence (a job inside one site does not wait a WAN
    /// round trip per fence); the front end only records the pairs and
    /// sends no `Kvs`.
    /// `world`: 0 for the first world; each spawned world fences on its
    /// own (through the front end, never `local`).
    Fence {
        epoch: u64,
        ranks: usize,
        pairs: Vec<(String, String)>,
        #[serde(default)]
        local: bool,
        #[serde(default)]
        world: usize,
    },
    /// Down: fence `epoch` of `world` is complete; the pairs the other
    /// hosts put.
    Kvs {
        epoch: u64,
        pairs: Vec<(String, String)>,
        #[serde(default)]
        world: usize,
    },
    /// Up: rank `rank` asked to spawn these programs (`MPI_Comm_spawn`,
    /// PMI spawn); `preput` are the pairs its library put for the
    /// children (`gw_parent`). The front end places them (`World`) or
    /// refuses (`SpawnRefused`).
    SpawnRequest {
        rank: usize,
        programs: Vec<SpawnProgram>,
        preput: Vec<(String, String)>,
    },
    /// Down, to every proxy: rank `rank`'s spawn is refused.
    SpawnRefused { rank: usize, msg: String },
    /// Down, to every proxy: a spawned world joins the job. Every proxy
    /// adds it to its PMI server; the hosts it names start its processes.
    World(Box<WorldPlan>),
    /// Up: a process of spawned world `world` cannot start on `host`.
    WorldTrouble {
        world: usize,
        host: usize,
        msg: String,
    },
    /// Up: `host` holds the pairs of spawned world `world`'s first fence.
    WorldKnown { world: usize, host: usize },
    /// Down, to every proxy: every host holds them (so any process finds
    /// the new ones): the parent's spawn is answered.
    WorldReady { world: usize },
    /// Down, to every proxy: the spawn of `world` failed (`msg`): its
    /// processes are killed, its parent is answered with the failure.
    WorldFailed { world: usize, msg: String },
    /// Up: a rank exited (`signal` when killed by one).
    Exit {
        rank: usize,
        code: Option<i32>,
        signal: Option<i32>,
        inited: bool,
        finalized: bool,
    },
    /// Up: a rank called PMI abort.
    Abort { rank: usize, code: i32, msg: String },
    /// Up: something went wrong on a host that is not a rank's exit
    /// (cannot execute, staging failed, a child proxy was lost…).
    Trouble {
        host: usize,
        msg: String,
        /// 126/127 when the program cannot be run there, else 1.
        code: i32,
    },
    /// Down: signal the ranks (SIGTERM first, SIGKILL when asked again).
    Kill { signal: i32 },
    /// Down: rank 0's stdin ended.
    StdinEof,
    /// Up: this many bytes of stdin were written to rank 0 (or dropped
    /// because it is gone): the front end's credit for reading more.
    StdinAck { bytes: u64 },
    /// Up: every rank of this host has exited and the host is clean; the
    /// proxy exits next. `stats`: the ranks' `gw.stats.*` records put
    /// after the last fence (for `--stats`).
    Done {
        host: usize,
        stats: Vec<(String, String)>,
    },
    /// Both ways, when nothing else was sent for a while.
    Ping,
}

/// One program of a spawn, as the parent's library named it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpawnProgram {
    pub command: String,
    pub args: Vec<String>,
    pub maxprocs: u32,
    /// Info keys (`wdir`, `path`, `host`; others are ignored).
    pub info: Vec<(String, String)>,
}

/// A spawned world as the front end placed it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorldPlan {
    /// Its number (1 for the first spawn; 0 is the first world).
    pub world: usize,
    /// The rank whose spawn this is (answered when the world's first
    /// fence completes).
    pub parent: usize,
    /// Its ids: `first..first + procs.len()`, in order.
    pub first: usize,
    pub programs: Vec<SpawnProgram>,
    /// Per process (id `first + i`): its host (index into the plan's
    /// hosts) and its program (index into `programs`, its `MPI_APPNUM`).
    pub procs: Vec<(usize, usize)>,
    /// `GW_PARENT` for the processes (how they reach their parents).
    pub parent_info: String,
}

impl WorldPlan {
    /// Checks what a proxy relies on against the plan.
    pub fn check(&self, plan: &Plan) -> Result<(), ProtocolError> {
        let end = self.first.checked_add(self.procs.len());
        if self.world == 0
            || self.procs.is_empty()
            || end.is_none_or(|e| e > plan.capacity.max(plan.n))
        {
            return Err(bad(format!(
                "spawned world {} of {} processes from id {} does not fit the job",
                self.world,
                self.procs.len(),
                self.first
            )));
        }
        if self
            .procs
            .iter()
            .any(|&(h, p)| h >= plan.hosts.len() || p >= self.programs.len())
        {
            return Err(bad("a spawned process on an unknown host or program"));
        }
        if self.programs.iter().any(|p| p.command.is_empty()) {
            return Err(bad("a spawned program without a name"));
        }
        Ok(())
    }
}

/// The first message on a channel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    pub version: u32,
    /// The job secret (64 hex): handed to the ranks, which authenticate
    /// every rank↔rank connection with it.
    pub secret: String,
    /// Which host of `plan.hosts` the receiver is.
    pub host: usize,
    pub plan: Plan,
}

/// The whole job, as every proxy needs to know it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub job_id: String,
    pub n: usize,
    pub program: String,
    pub args: Vec<String>,
    pub wdir: Option<String>,
    /// Variables set in every rank's environment (`-env`, `-genv`, and
    /// what is propagated from the front end's environment).
    pub env: Vec<(String, String)>,
    pub kvsname: String,
    pub process_mapping: String,
    pub heartbeat_ms: u64,
    /// `--tag-output` is applied by the front end; the proxy needs only
    /// to keep lines whole.
    pub sites: Vec<PlanSite>,
    pub hosts: Vec<PlanHost>,
    /// Files that may have to be staged (the program first).
    pub stage: Vec<StageEntry>,
    /// `--stage`: stage even where the program exists.
    pub force_stage: bool,
    /// The proxy binary (what a leader sends on to its hosts).
    pub proxy_hash: String,
    pub proxy_size: u64,
    /// `--iface`/`GW_IFACE` for the ranks.
    pub iface: Option<String>,
    /// The front end forwards its stdin to rank 0 (it is a file or a
    /// pipe, not a terminal): rank 0 gets a pipe, the others /dev/null.
    pub stdin: bool,
    /// Context ids run up to this: the first world plus room for spawned
    /// processes (`GW_UNIVERSE_SIZE`); 0 = no room.
    #[serde(default)]
    pub capacity: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanSite {
    pub name: String,
    /// The host (index into `hosts`) the front end reaches; it starts the
    /// site's other hosts.
    pub leader: usize,
    /// The start method: `ssh`, `slurm` or `local`.
    pub method: String,
    /// How a host of the site is reached: the command before the host's
    /// name (`ssh -o … -l user`, `srun --overlap …`); empty for `local`.
    pub reach: Vec<String>,
    /// An installed gridwire on the site's hosts (`prefix=`).
    pub prefix: Option<String>,
    /// Environment of the site's ranks on top of the job's (the transform
    /// policy from `encrypt=` / `compress=`, see `grid::transforms`).
    #[serde(default)]
    pub env: Vec<(String, String)>,
    /// A firewalled site (`gateway=`) in a job of several sites: its
    /// leader runs a relay for its other hosts (`grid::relay`).
    #[serde(default)]
    pub relay: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanHost {
    pub name: String,
    pub site: usize,
    pub ranks: Vec<usize>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageEntry {
    pub name: String,
    pub hash: String,
    pub size: u64,
    pub mode: u32,
}

/// Something wrong with the bytes on a channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError(pub String);

impl std::fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn bad(s: impl Into<String>) -> ProtocolError {
    ProtocolError(s.into())
}

/// True for a content hash as used in the plan and on the wire.
pub fn is_hash(h: &str) -> bool {
    h.len() == 64
        && h.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// True for a file name that is safe to create inside a job directory.
pub fn is_file_name(n: &str) -> bool {
    !n.is_empty() && n.len() <= 255 && n != "." && n != ".." && !n.contains(['/', '\0'])
}

impl Plan {
    /// Checks what a proxy relies on: sizes, indices and names are in
    /// range, every rank is on exactly one host.
    pub fn check(&self) -> Result<(), ProtocolError> {
        if self.n == 0 || self.n > MAX_RANKS {
            return Err(bad(format!("job size {} out of range", self.n)));
        }
        if self.hosts.is_empty() || self.hosts.len() > MAX_HOSTS {
            return Err(bad(format!("{} hosts out of range", self.hosts.len())));
        }
        if self.sites.is_empty() || self.sites.len() > self.hosts.len() {
            return Err(bad(format!("{} sites out of range", self.sites.len())));
        }
        let mut seen = vec![false; self.n];
        for h in &self.hosts {
            if h.site >= self.sites.len() {
                return Err(bad(format!("host {} names site {}", h.name, h.site)));
            }
            for &r in &h.ranks {
                match seen.get_mut(r) {
                    Some(s) if !*s => *s = true,
                    _ => {
                        return Err(bad(format!(
                            "rank {r} on host {} is out of range or placed twice",
                            h.name
                        )))
                    }
                }
            }
        }
        if let Some(r) = seen.iter().position(|s| !s) {
            return Err(bad(format!("rank {r} is on no host")));
        }
        for s in &self.sites {
            if self.hosts.get(s.leader).map(|h| &self.sites[h.site]) != Some(s) {
                return Err(bad(format!(
                    "site {}'s leader is not one of its hosts",
                    s.name
                )));
            }
        }
        for e in &self.stage {
            if !is_hash(&e.hash) || !is_file_name(&e.name) {
                return Err(bad(format!("bad staged file entry {:?}", e.name)));
            }
        }
        if !is_hash(&self.proxy_hash) {
            return Err(bad("bad proxy hash"));
        }
        if !self.job_id.bytes().all(|b| b.is_ascii_alphanumeric())
            || self.job_id.is_empty()
            || self.job_id.len() > 64
        {
            return Err(bad("bad job id"));
        }
        if self.program.is_empty() {
            return Err(bad("no program"));
        }
        if self.capacity != 0 && self.capacity < self.n
            || self.capacity > gridwire_core::context::MAX_CAPACITY as usize
        {
            return Err(bad(format!("capacity {} out of range", self.capacity)));
        }
        Ok(())
    }

    /// The hosts of site `s` other than its leader: the leader's children.
    pub fn children_of(&self, leader: usize) -> Vec<usize> {
        let Some(h) = self.hosts.get(leader) else {
            return Vec::new();
        };
        if self.sites.get(h.site).map(|s| s.leader) != Some(leader) {
            return Vec::new();
        }
        (0..self.hosts.len())
            .filter(|&i| i != leader && self.hosts[i].site == h.site)
            .collect()
    }
}

/// Appends one frame to `out`.
pub fn encode(frame: &Frame, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    match frame {
        Frame::Msg(m) => {
            out.push(KIND_MSG);
            // Serializing our own enum to a Vec cannot fail.
            serde_json::to_writer(&mut *out, m).unwrap_or(());
        }
        Frame::Output { rank, stream, data } => {
            out.push(KIND_OUTPUT);
            out.extend_from_slice(&rank.to_le_bytes());
            out.push(*stream);
            out.extend_from_slice(data);
        }
        Frame::FileData { hash, data } => {
            out.push(KIND_FILE);
            out.extend_from_slice(hash.as_bytes());
            out.extend_from_slice(data);
        }
        Frame::Stdin(data) => {
            out.push(KIND_STDIN);
            out.extend_from_slice(data);
        }
    }
    let len = (out.len() - start - 4) as u32;
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
}

/// Reassembles frames from a byte stream.
#[derive(Debug, Default)]
pub struct FrameReader {
    buf: Vec<u8>,
    /// Bytes of `buf` already consumed (compacted lazily).
    pos: usize,
}

impl FrameReader {
    pub fn new() -> Self {
        Self::default()
    }

    /// Bytes received but not yet returned as frames.
    pub fn pending(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Adds received bytes. The buffer grows only by what arrived, and
    /// [`FrameReader::next_frame`] refuses a declared length beyond
    /// [`MAX_FRAME`] before more than a header is kept.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.pos > 0 && self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        } else if self.pos > (1 << 20) && self.pos * 2 > self.buf.len() {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The next complete frame, if any.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, ProtocolError> {
        let avail = &self.buf[self.pos..];
        if avail.len() < 4 {
            return Ok(None);
        }
        let len = u32::from_le_bytes([avail[0], avail[1], avail[2], avail[3]]) as usize;
        if len == 0 || len > MAX_FRAME {
            return Err(bad(format!("frame of {len} bytes (limit {MAX_FRAME})")));
        }
        if avail.len() - 4 < len {
            return Ok(None);
        }
        let body = &avail[4..4 + len];
        let frame = decode_body(body)?;
        self.pos += 4 + len;
        Ok(Some(frame))
    }
}

fn decode_body(body: &[u8]) -> Result<Frame, ProtocolError> {
    let (&kind, rest) = body.split_first().ok_or_else(|| bad("empty frame"))?;
    match kind {
        KIND_MSG => serde_json::from_slice::<Msg>(rest)
            .map(Frame::Msg)
            .map_err(|e| bad(format!("bad control message: {e}"))),
        KIND_OUTPUT => {
            if rest.len() < 5 {
                return Err(bad("short output frame"));
            }
            let rank = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]);
            let stream = rest[4];
            if stream != 1 && stream != 2 {
                return Err(bad(format!("output frame for stream {stream}")));
            }
            Ok(Frame::Output {
                rank,
                stream,
                data: rest[5..].to_vec(),
            })
        }
        KIND_FILE => {
            if rest.len() < 64 {
                return Err(bad("short file frame"));
            }
            let hash = std::str::from_utf8(&rest[..64])
                .ok()
                .filter(|h| is_hash(h))
                .ok_or_else(|| bad("file frame with a bad hash"))?;
            Ok(Frame::FileData {
                hash: hash.to_string(),
                data: rest[64..].to_vec(),
            })
        }
        KIND_STDIN => Ok(Frame::Stdin(rest.to_vec())),
        k => Err(bad(format!("unknown frame kind {k}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    pub(crate) fn sample_plan() -> Plan {
        Plan {
            job_id: "12x34".into(),
            n: 3,
            program: "/bin/true".into(),
            args: vec!["a b".into()],
            wdir: None,
            env: vec![("X".into(), "1".into())],
            kvsname: "kvs_1".into(),
            process_mapping: "(vector,(0,2,1),(1,1,1))".into(),
            heartbeat_ms: 10_000,
            sites: vec![PlanSite {
                name: "s0".into(),
                leader: 0,
                method: "local".into(),
                reach: vec![],
                prefix: None,
                env: vec![("GW_ENCRYPT".into(), "sites".into())],
                relay: false,
            }],
            hosts: vec![
                PlanHost {
                    name: "a".into(),
                    site: 0,
                    ranks: vec![0, 1],
                },
                PlanHost {
                    name: "b".into(),
                    site: 0,
                    ranks: vec![2],
                },
            ],
            stage: vec![],
            force_stage: false,
            proxy_hash: "0".repeat(64),
            proxy_size: 1,
            iface: None,
            stdin: false,
            capacity: 10,
        }
    }

    fn roundtrip(frames: &[Frame]) -> Vec<Frame> {
        let mut bytes = Vec::new();
        for f in frames {
            encode(f, &mut bytes);
        }
        let mut r = FrameReader::new();
        let mut out = Vec::new();
        // Byte by byte: a frame is only returned once whole.
        for b in bytes {
            r.push(&[b]);
            while let Some(f) = r.next_frame().unwrap() {
                out.push(f);
            }
        }
        assert_eq!(r.pending(), 0);
        out
    }

    #[test]
    fn frames_roundtrip() {
        let frames = vec![
            Frame::Msg(Msg::Hello(Box::new(Hello {
                version: VERSION,
                secret: "ab".repeat(32),
                host: 1,
                plan: sample_plan(),
            }))),
            Frame::Msg(Msg::Ping),
            Frame::Output {
                rank: 7,
                stream: 2,
                data: b"line\n".to_vec(),
            },
            Frame::FileData {
                hash: "f".repeat(64),
                data: vec![0, 1, 2],
            },
            Frame::Stdin(vec![]),
            Frame::Msg(Msg::Fence {
                epoch: 3,
                ranks: 2,
                pairs: vec![("k".into(), "v=1 2".into())],
                local: true,
                world: 2,
            }),
            Frame::Msg(Msg::World(Box::new(WorldPlan {
                world: 1,
                parent: 0,
                first: 3,
                programs: vec![SpawnProgram {
                    command: "p".into(),
                    args: vec!["x y".into()],
                    maxprocs: 2,
                    info: vec![("host".into(), "b".into())],
                }],
                procs: vec![(0, 0), (1, 0)],
                parent_info: "4:0,1".into(),
            }))),
        ];
        assert_eq!(roundtrip(&frames), frames);
    }

    #[test]
    fn plan_checks() {
        let p = sample_plan();
        p.check().unwrap();
        assert_eq!(p.children_of(0), vec![1]);
        assert!(p.children_of(1).is_empty());
        let mut q = p.clone();
        q.hosts[1].ranks = vec![1];
        assert!(q.check().is_err(), "rank placed twice");
        let mut q = p.clone();
        q.hosts[1].ranks = vec![];
        assert!(q.check().is_err(), "rank 2 nowhere");
        let mut q = p.clone();
        q.hosts[1].site = 5;
        assert!(q.check().is_err());
        let mut q = p.clone();
        q.sites[0].leader = 9;
        assert!(q.check().is_err());
        let mut q = p.clone();
        q.stage.push(StageEntry {
            name: "../x".into(),
            hash: "a".repeat(64),
            size: 1,
            mode: 0o755,
        });
        assert!(q.check().is_err());
        let mut q = p;
        q.job_id = "../x".into();
        assert!(q.check().is_err());
    }

    #[test]
    fn world_plans_are_checked() {
        let p = sample_plan();
        let w = WorldPlan {
            world: 1,
            parent: 0,
            first: 3,
            programs: vec![SpawnProgram {
                command: "p".into(),
                args: vec![],
                maxprocs: 2,
                info: vec![],
            }],
            procs: vec![(0, 0), (1, 0)],
            parent_info: String::new(),
        };
        w.check(&p).unwrap();
        let mut q = w.clone();
        q.first = 9;
        assert!(q.check(&p).is_err(), "beyond the capacity");
        let mut q = w.clone();
        q.procs[1].0 = 2;
        assert!(q.check(&p).is_err(), "unknown host");
        let mut q = w.clone();
        q.procs[0].1 = 1;
        assert!(q.check(&p).is_err(), "unknown program");
        let mut q = w;
        q.world = 0;
        assert!(q.check(&p).is_err(), "world 0 is the first");
    }

    #[test]
    fn bad_frames_are_errors() {
        let mut r = FrameReader::new();
        r.push(&u32::MAX.to_le_bytes());
        assert!(r.next_frame().is_err());
        for body in [
            &[9u8][..],
            &[KIND_MSG, b'{'],
            &[KIND_OUTPUT, 1],
            &[KIND_FILE, b'x'],
        ] {
            let mut r = FrameReader::new();
            r.push(&(body.len() as u32).to_le_bytes());
            r.push(body);
            assert!(r.next_frame().is_err(), "{body:?}");
        }
        let mut r = FrameReader::new();
        r.push(&0u32.to_le_bytes());
        assert!(r.next_frame().is_err());
    }

    proptest! {
        /// Random bytes never panic and never make the reader hold more
        /// than what was pushed.
        #[test]
        fn random_bytes_are_safe(chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 0..16)) {
            let mut r = FrameReader::new();
            let mut total = 0;
            for c in chunks {
                total += c.len();
                r.push(&c);
                while let Ok(Some(_)) = r.next_frame() {}
                prop_assert!(r.pending() <= total);
            }
        }
    }
}
