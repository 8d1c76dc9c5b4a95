//! The PMI server state machine of `gwrun`, free of I/O: it takes one
//! parsed command from one rank and returns the bytes to send and what the
//! launcher must know (finalize, abort). The event loop in `job` (or the
//! proxy's, `grid::proxy`) owns the sockets.
//!
//! One key-value space and one barrier serve both protocols: PMI-1 here,
//! PMI-2 in [`pmi2`]. Each rank's connection speaks one of them, which
//! [`PmiStream`] detects from its first bytes; a job may mix them (a
//! PMI-1 `barrier_in` and a PMI-2 `kvs-fence` are the same barrier).

use std::collections::HashMap;

use gridwire_core::bootstrap::pmi_wire::{
    escape_value, is_wire_value, unescape_value, Command, WireError,
};

mod pmi2;
mod spawn;
mod stream;

pub use spawn::{job_capacity, resolve_program, DEFAULT_SPAWN_ROOM};
pub use stream::{PmiStream, Request};

/// Limits `gwrun` advertises. `vallen_max` is large so the runtime can
/// publish whole descriptor tables and `--stats` records in one value.
pub const KVSNAME_MAX: usize = 256;
pub const KEYLEN_MAX: usize = 256;
pub const VALLEN_MAX: usize = 65536;

/// Bounds of the key-value space, so that no rank (or all of them
/// together) can make `gwrun` hold unbounded memory. A key counts against
/// the rank that put it last; bytes are key plus value. The runtime needs a
/// handful of keys per rank (its descriptor table, `--stats`), far below.
pub const KVS_MAX_KEYS_PER_RANK: usize = 4096;
pub const KVS_MAX_BYTES_PER_RANK: usize = 16 << 20;
pub const KVS_MAX_KEYS_TOTAL: usize = 1 << 20;
pub const KVS_MAX_BYTES_TOTAL: usize = 256 << 20;

/// Something the launcher must act on besides sending replies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// The rank completed `cmd=init` (PMI-1) or `fullinit` (PMI-2).
    Initialized(usize),
    /// The rank sent `cmd=finalize`: its exit will be orderly.
    Finalized(usize),
    /// The rank asked to kill the job.
    Abort { rank: usize, code: i32, msg: String },
    /// The rank sent something the server cannot use (logged, not fatal;
    /// the rank got an error reply).
    Protocol { rank: usize, what: String },
    /// The rank's stream can no longer be trusted (a line beyond the
    /// length limit): after the queued error reply, close its connection.
    Close { rank: usize, what: String },
    /// (Partial servers only) every rank of world `world` served here
    /// entered the barrier: the proxy passes that world's fresh puts up the
    /// tree ([`Server::take_fresh_of`]) and calls
    /// [`Server::release_world_barrier`] once the world's puts came back.
    /// World 0 is the first world; spawned worlds are numbered on.
    BarrierReady { world: usize },
    /// The rank asked to spawn `apps` (PMI-1 `mcmd=spawn`, every block in):
    /// the launcher starts them ([`Server::add_world`]) or refuses
    /// ([`Server::spawn_refused`]).
    Spawn {
        rank: usize,
        apps: Vec<gridwire_core::bootstrap::spawn_wire::SpawnApp>,
        preput: Vec<(String, String)>,
    },
}

/// Output of [`Server::handle`].
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Output {
    /// What to send, by rank: PMI-1 lines (newline included) or PMI-2
    /// frames (length field included), each in the rank's protocol.
    pub replies: Vec<(usize, String)>,
    pub notices: Vec<Notice>,
}

/// One job's PMI state (both protocols): the key-value space and the barrier.
#[derive(Debug)]
pub struct Server {
    size: usize,
    kvsname: String,
    kvs: HashMap<String, KvsEntry>,
    /// Keys and bytes (key + value) each rank has in the space.
    usage: Vec<(usize, usize)>,
    total_bytes: usize,
    in_barrier: Vec<bool>,
    process_mapping: String,
    /// Which ranks this server serves: all of them under a single-host
    /// `gwrun`; one host's under a proxy, whose barrier completes only
    /// when the front end has heard from every host.
    served: Vec<bool>,
    partial: bool,
    /// Puts since the last barrier (partial servers only), in order, with
    /// the rank that put each (its world's fence carries it).
    fresh: Vec<(usize, String, String)>,
    /// Bytes in `fresh`, bounded like the space itself.
    fresh_bytes: usize,
    /// The protocol each rank's connection speaks (for the barrier's
    /// release, which answers every waiting rank in its own protocol).
    proto: Vec<Proto>,
    /// PMI-2 node attributes (`info-putnodeattr`): shared by the ranks
    /// this server serves, which are one node's under a proxy.
    node_attrs: HashMap<String, String>,
    node_attr_bytes: usize,
    /// Ranks blocked in `info-getnodeattr` with `wait=TRUE`, by key.
    node_attr_waiters: Vec<(usize, String)>,
    /// The first world and the ones spawned into the job since.
    worlds: spawn::Worlds,
    /// `MPI_Publish_name` and friends (this job's table or GW_NAMESERVER's).
    names: crate::names::NameService,
}

/// Which PMI a rank speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Proto {
    V1,
    V2,
}

/// Owner recorded for keys that came from other hosts: they count against
/// the job's totals only.
const REMOTE_OWNER: usize = usize::MAX;

#[derive(Debug)]
struct KvsEntry {
    value: String,
    owner: usize,
}

fn line(c: Command) -> String {
    // Everything we format comes from validated or generated text; an
    // unencodable reply would be a bug, answered with a generic failure.
    c.encode()
        .unwrap_or_else(|_| "cmd=error rc=-1 msg=internal_error\n".to_string())
}

impl Server {
    pub fn new(size: usize, kvsname: String, process_mapping: String) -> Self {
        Server {
            size,
            kvsname,
            kvs: HashMap::new(),
            usage: vec![(0, 0); size],
            total_bytes: 0,
            in_barrier: vec![false; size],
            process_mapping,
            served: vec![true; size],
            partial: false,
            fresh: Vec::new(),
            fresh_bytes: 0,
            proto: vec![Proto::V1; size],
            node_attrs: HashMap::new(),
            node_attr_bytes: 0,
            node_attr_waiters: Vec::new(),
            worlds: spawn::Worlds::new(size),
            names: crate::names::NameService::from_env(),
        }
    }

    /// Handles one request from rank `rank`'s connection, in whichever
    /// protocol [`PmiStream`] found it speaks.
    pub fn handle_request(&mut self, rank: usize, req: Request) -> Output {
        match req {
            Request::V1(cmd) => self.handle(rank, cmd),
            Request::V2Init(cmd) => self.handle_pmi2_init(rank, &cmd),
            Request::V2(cmd) => self.handle_pmi2(rank, cmd),
        }
    }

    /// What ends the barrier for `rank`, in its protocol.
    fn barrier_release(&self, rank: usize) -> String {
        match self.proto.get(rank) {
            Some(Proto::V2) => pmi2::frame(Command::new("kvs-fence-response").arg("rc", 0)),
            _ => line(Command::new("barrier_out").arg("rc", 0)),
        }
    }

    /// `rank` enters the barrier (PMI-1 `barrier_in`, PMI-2 `kvs-fence`):
    /// the release when every rank is in (whole servers), or
    /// [`Notice::BarrierReady`] when every rank served here is (partial).
    fn enter_barrier(&mut self, rank: usize, out: &mut Output) {
        if let Some(b) = self.in_barrier.get_mut(rank) {
            *b = true;
        }
        if self.partial {
            // Each world fences on its own (spawned worlds, spawn.rs).
            let world = self.worlds.world_range(rank);
            let all_in = world.clone().all(|r| !self.served[r] || self.in_barrier[r]);
            if all_in {
                out.notices.push(Notice::BarrierReady {
                    world: self.world_of(rank),
                });
            }
        } else {
            // Each world has a barrier of its own (spawned worlds, spawn.rs).
            let world = self.worlds.world_range(rank);
            if world.clone().all(|r| self.in_barrier[r]) {
                for r in world {
                    out.replies.push((r, self.barrier_release(r)));
                    self.in_barrier[r] = false;
                }
                self.world_ready(rank, out);
            }
        }
    }

    /// A server for the ranks of one host (`ranks`, each `< size`) under a
    /// proxy: its barrier is the host's part of a job-wide fence.
    pub fn new_partial(
        size: usize,
        kvsname: String,
        process_mapping: String,
        ranks: &[usize],
    ) -> Self {
        let mut s = Server::new(size, kvsname, process_mapping);
        s.partial = true;
        s.served = vec![false; size];
        for &r in ranks {
            if let Some(x) = s.served.get_mut(r) {
                *x = true;
            }
        }
        s
    }

    /// The puts made here since the last call (partial servers).
    pub fn take_fresh(&mut self) -> Vec<(String, String)> {
        self.fresh_bytes = 0;
        std::mem::take(&mut self.fresh)
            .into_iter()
            .map(|(_, k, v)| (k, v))
            .collect()
    }

    /// The puts the ranks of world `world` made here since the last call
    /// (partial servers): what that world's fence carries.
    pub fn take_fresh_of(&mut self, world: usize) -> Vec<(String, String)> {
        let (mine, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut self.fresh)
            .into_iter()
            .partition(|(r, _, _)| self.world_of(*r) == world);
        self.fresh = rest;
        self.fresh_bytes = self.fresh.iter().map(|(_, k, v)| k.len() + v.len()).sum();
        mine.into_iter().map(|(_, k, v)| (k, v)).collect()
    }

    /// Adds the key-value pairs other hosts put (they arrive from the
    /// network: each is checked against the same limits as a local put).
    pub fn insert_remote(&mut self, pairs: Vec<(String, String)>) -> Result<(), String> {
        for (key, value) in pairs {
            if key.is_empty() || key.len() >= KEYLEN_MAX || value.len() >= VALLEN_MAX {
                return Err(format!(
                    "a key-value pair from another host breaks the limits (key of {} bytes, value of {} bytes)",
                    key.len(),
                    value.len()
                ));
            }
            let bytes = key.len() + value.len();
            let old = self
                .kvs
                .get(&key)
                .map(|e| (e.owner, key.len() + e.value.len()));
            let mut total = self.total_bytes;
            if let Some((owner, b)) = old {
                total -= b;
                if owner != REMOTE_OWNER {
                    if let Some(u) = self.usage.get_mut(owner) {
                        u.0 -= 1;
                        u.1 -= b;
                    }
                }
            } else if self.kvs.len() + 1 > KVS_MAX_KEYS_TOTAL {
                return Err(format!(
                    "the job's key-value space is full ({KVS_MAX_KEYS_TOTAL} keys)"
                ));
            }
            if total + bytes > KVS_MAX_BYTES_TOTAL {
                return Err(format!(
                    "the job's key-value space is full ({KVS_MAX_BYTES_TOTAL} bytes)"
                ));
            }
            self.total_bytes = total + bytes;
            self.kvs.insert(
                key,
                KvsEntry {
                    value,
                    owner: REMOTE_OWNER,
                },
            );
        }
        Ok(())
    }

    /// Ends the first world's barrier of a partial server: `barrier_out`
    /// to every rank of it served here.
    pub fn release_barrier(&mut self) -> Output {
        self.release_world_barrier(0)
    }

    /// Keys put so far (for `--stats` at the end of a grid job).
    pub fn entries(&self) -> impl Iterator<Item = (&str, &str)> {
        self.kvs.iter().map(|(k, e)| (k.as_str(), e.value.as_str()))
    }

    /// How many ranks are waiting in the current PMI barrier.
    pub fn waiting_in_barrier(&self) -> usize {
        self.in_barrier.iter().filter(|&&b| b).count()
    }

    /// A value put by some rank (used for `--stats` at exit).
    pub fn lookup(&self, key: &str) -> Option<&str> {
        self.kvs.get(key).map(|e| e.value.as_str())
    }

    /// Handles one PMI-1 command (or parse error) from `rank`.
    pub fn handle(&mut self, rank: usize, cmd: Result<Command, WireError>) -> Output {
        let mut out = Output::default();
        let cmd = match cmd {
            Ok(c) => c,
            Err(WireError::SpawnUnsupported) => {
                out.replies.push((
                    rank,
                    line(
                        Command::new("spawn_result")
                            .arg("rc", -1)
                            .arg("errmsg", "malformed_spawn_request"),
                    ),
                ));
                out.notices.push(Notice::Protocol {
                    rank,
                    what: "malformed PMI spawn request".into(),
                });
                return out;
            }
            Err(e) => {
                // PMI-1 has no reply for a line that is not a command; the
                // client waits for *some* line, so it gets `cmd=error`
                // (which no request expects: the client fails clearly
                // instead of hanging).
                out.replies.push((
                    rank,
                    line(
                        Command::new("error")
                            .arg("rc", -1)
                            .arg("msg", escape_value(&e.to_string())),
                    ),
                ));
                out.notices.push(if matches!(e, WireError::TooLong(_)) {
                    Notice::Close {
                        rank,
                        what: e.to_string(),
                    }
                } else {
                    Notice::Protocol {
                        rank,
                        what: e.to_string(),
                    }
                });
                return out;
            }
        };
        let reply = |out: &mut Output, c: Command| out.replies.push((rank, line(c)));
        match cmd.name.as_str() {
            "initack" => {
                reply(&mut out, Command::new("initack"));
                reply(&mut out, Command::new("set").arg("size", self.size));
                reply(&mut out, Command::new("set").arg("rank", rank));
                reply(&mut out, Command::new("set").arg("debug", 0));
            }
            "init" => {
                let v = cmd.get("pmi_version").unwrap_or("1");
                let rc = if v == "1" { 0 } else { -1 };
                reply(
                    &mut out,
                    Command::new("response_to_init")
                        .arg("pmi_version", 1)
                        .arg("pmi_subversion", 1)
                        .arg("rc", rc),
                );
                if rc == 0 {
                    out.notices.push(Notice::Initialized(rank));
                }
            }
            "get_maxes" => reply(
                &mut out,
                Command::new("maxes")
                    .arg("kvsname_max", KVSNAME_MAX)
                    .arg("keylen_max", KEYLEN_MAX)
                    .arg("vallen_max", VALLEN_MAX)
                    .arg("rc", 0),
            ),
            "get_appnum" => reply(
                &mut out,
                Command::new("appnum").arg("appnum", 0).arg("rc", 0),
            ),
            "get_universe_size" => reply(
                &mut out,
                Command::new("universe_size")
                    .arg("size", self.worlds.capacity)
                    .arg("rc", 0),
            ),
            "get_my_kvsname" => reply(
                &mut out,
                Command::new("my_kvsname")
                    .arg("kvsname", &self.kvsname)
                    .arg("rc", 0),
            ),
            "put" => {
                let r = self.put(rank, &cmd);
                let c = match r {
                    Ok(()) => Command::new("put_result")
                        .arg("rc", 0)
                        .arg("msg", "success"),
                    Err(msg) => Command::new("put_result").arg("rc", -1).arg("msg", msg),
                };
                reply(&mut out, c);
            }
            "get" => {
                let c = match self.get(&cmd) {
                    Ok(v) => Command::new("get_result")
                        .arg("rc", 0)
                        .arg("msg", "success")
                        .arg("value", v),
                    Err(msg) => Command::new("get_result")
                        .arg("rc", -1)
                        .arg("msg", msg)
                        .arg("value", "unknown"),
                };
                reply(&mut out, c);
            }
            "barrier_in" => self.enter_barrier(rank, &mut out),
            "spawn" => self.spawn_block(rank, &cmd, &mut out),
            op @ ("publish_name" | "unpublish_name" | "lookup_name") => {
                let service = cmd.get("service").map(unescape_value).unwrap_or_default();
                let port = cmd.get("port").map(unescape_value).unwrap_or_default();
                let name = op.replace("_name", "_result");
                let c = match self.names.apply(op, &service, &port) {
                    Ok(p) if op == "lookup_name" => Command::new(&name)
                        .arg("rc", 0)
                        .arg("port", escape_value(&p))
                        .arg("info", "ok"),
                    Ok(_) => Command::new(&name).arg("rc", 0).arg("info", "ok"),
                    Err(why) => Command::new(&name)
                        .arg("rc", 1)
                        .arg("info", escape_value(&why)),
                };
                reply(&mut out, c);
            }
            "finalize" => {
                reply(&mut out, Command::new("finalize_ack").arg("rc", 0));
                out.notices.push(Notice::Finalized(rank));
            }
            "abort" => {
                let code = cmd
                    .get("exitcode")
                    .and_then(|v| v.parse::<i32>().ok())
                    .unwrap_or(1);
                let msg = cmd
                    .get("error_msg")
                    .or_else(|| cmd.get("message"))
                    .map(unescape_value)
                    .unwrap_or_default();
                out.notices.push(Notice::Abort { rank, code, msg });
            }
            other => {
                out.notices.push(Notice::Protocol {
                    rank,
                    what: format!("unsupported PMI command {other:?}"),
                });
                reply(
                    &mut out,
                    Command::new(&format!("{other}_result"))
                        .arg("rc", -1)
                        .arg("msg", "unsupported_command"),
                );
            }
        }
        out
    }

    fn check_kvsname(&self, cmd: &Command) -> Result<(), String> {
        match cmd.get("kvsname") {
            Some(k) if k == self.kvsname => Ok(()),
            Some(_) => Err("unknown_kvsname".into()),
            None => Err("missing_kvsname".into()),
        }
    }

    fn put(&mut self, rank: usize, cmd: &Command) -> Result<(), String> {
        self.check_kvsname(cmd)?;
        let key = cmd
            .get("key")
            .filter(|k| !k.is_empty())
            .ok_or("missing_key")?;
        let value = cmd.get("value").ok_or("missing_value")?;
        self.put_kv(rank, key, value)
    }

    /// Puts `key=value` for `rank` within the limits (both protocols).
    fn put_kv(&mut self, rank: usize, key: &str, value: &str) -> Result<(), String> {
        if key.len() >= KEYLEN_MAX {
            return Err("key_too_long".into());
        }
        if value.len() >= VALLEN_MAX {
            return Err("value_too_long".into());
        }
        if rank >= self.usage.len() {
            return Err("unknown_rank".into());
        }
        let bytes = key.len() + value.len();
        // What the put frees: the key's current entry, whoever put it.
        let old = self
            .kvs
            .get(key)
            .map(|e| (e.owner, key.len() + e.value.len()));
        let (mut keys, mut mine) = self.usage[rank];
        let mut total = self.total_bytes;
        let mut total_keys = self.kvs.len();
        if let Some((owner, b)) = old {
            total -= b;
            total_keys -= 1;
            if owner == rank {
                keys -= 1;
                mine -= b;
            }
        }
        if keys + 1 > KVS_MAX_KEYS_PER_RANK {
            return Err(format!(
                "kvs_full:rank_limit_of_{KVS_MAX_KEYS_PER_RANK}_keys"
            ));
        }
        if mine + bytes > KVS_MAX_BYTES_PER_RANK {
            return Err(format!(
                "kvs_full:rank_limit_of_{KVS_MAX_BYTES_PER_RANK}_bytes"
            ));
        }
        if total_keys + 1 > KVS_MAX_KEYS_TOTAL {
            return Err(format!("kvs_full:job_limit_of_{KVS_MAX_KEYS_TOTAL}_keys"));
        }
        if total + bytes > KVS_MAX_BYTES_TOTAL {
            return Err(format!("kvs_full:job_limit_of_{KVS_MAX_BYTES_TOTAL}_bytes"));
        }
        if let Some((owner, b)) = old {
            if owner != rank {
                if let Some(u) = self.usage.get_mut(owner) {
                    u.0 -= 1;
                    u.1 -= b;
                }
            }
        }
        self.usage[rank] = (keys + 1, mine + bytes);
        self.total_bytes = total + bytes;
        if self.partial {
            // Bounded with the space: the fresh list holds each put once
            // per barrier, so at most the job's byte limit plus a put.
            if self.fresh_bytes + bytes > KVS_MAX_BYTES_TOTAL {
                return Err(format!("kvs_full:job_limit_of_{KVS_MAX_BYTES_TOTAL}_bytes"));
            }
            self.fresh_bytes += bytes;
            self.fresh.push((rank, key.to_string(), value.to_string()));
        }
        self.kvs.insert(
            key.to_string(),
            KvsEntry {
                value: value.to_string(),
                owner: rank,
            },
        );
        Ok(())
    }

    fn get(&self, cmd: &Command) -> Result<String, String> {
        self.check_kvsname(cmd)?;
        let key = cmd
            .get("key")
            .filter(|k| !k.is_empty())
            .ok_or("missing_key")?;
        let Some(v) = self.get_kv(key) else {
            return Err(format!("key_{key}_not_found"));
        };
        // A value a PMI-2 rank put may hold what a PMI-1 line cannot
        // carry (a space): a clear refusal, not a garbled line.
        if !is_wire_value(&v) {
            return Err(format!("value_of_key_{key}_cannot_be_sent_over_PMI-1"));
        }
        Ok(v)
    }

    /// The value of `key` in the space; `PMI_process_mapping` is there
    /// unless a rank replaced it (as Hydra keeps it in the space).
    fn get_kv(&self, key: &str) -> Option<String> {
        if let Some(e) = self.kvs.get(key) {
            return Some(e.value.clone());
        }
        (key == "PMI_process_mapping").then(|| self.process_mapping.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gridwire_core::bootstrap::pmi_wire::parse_line;

    /// A line the server cannot parse gets an error reply (the client
    /// waits for one and would hang otherwise); an over-long line also
    /// closes the connection.
    #[test]
    fn parse_errors_get_an_error_reply() {
        let mut s = Server::new(1, "k".into(), String::new());
        for bad in ["garbage", "cmd=put novalue", "cmd=x =y"] {
            let o = h(&mut s, 0, bad);
            assert_eq!(o.replies.len(), 1, "{bad}");
            assert!(
                o.replies[0].1.starts_with("cmd=error rc=-1 msg="),
                "{}",
                o.replies[0].1
            );
            assert!(parse_line(o.replies[0].1.as_bytes()).is_ok());
        }
        let o = s.handle(0, Err(WireError::TooLong(10)));
        assert!(o.replies[0].1.starts_with("cmd=error rc=-1"));
        assert!(matches!(o.notices[0], Notice::Close { rank: 0, .. }));
    }

    /// Keys and bytes per rank and in total are bounded, with a clear
    /// error; replacing a key frees what it held.
    #[test]
    fn kvs_is_bounded() {
        let mut s = Server::new(2, "k".into(), String::new());
        let put = |s: &mut Server, r: usize, k: &str, v: &str| {
            h(s, r, &format!("cmd=put kvsname=k key={k} value={v}")).replies[0]
                .1
                .clone()
        };
        for i in 0..KVS_MAX_KEYS_PER_RANK {
            assert!(put(&mut s, 0, &format!("k{i}"), "v").contains("rc=0"));
        }
        let e = put(&mut s, 0, "one_more", "v");
        assert!(e.contains("rc=-1") && e.contains("kvs_full"), "{e}");
        // Replacing one's own key is not a new key.
        assert!(put(&mut s, 0, "k0", "w").contains("rc=0"));
        // Another rank has its own budget.
        assert!(put(&mut s, 1, "one_more", "v").contains("rc=0"));
        // Bytes: 16 MiB per rank in 64 KiB values.
        let big = "x".repeat(VALLEN_MAX - 1);
        let mut s = Server::new(1, "k".into(), String::new());
        let mut refused = None;
        for i in 0..1000 {
            let r = put(&mut s, 0, &format!("b{i}"), &big);
            if r.contains("rc=-1") {
                refused = Some((i, r));
                break;
            }
        }
        let (i, r) = refused.expect("the byte limit was never reached");
        assert!(r.contains("bytes"), "{r}");
        assert!(i * VALLEN_MAX <= KVS_MAX_BYTES_PER_RANK + VALLEN_MAX, "{i}");
        assert!(s.total_bytes <= KVS_MAX_BYTES_PER_RANK);
    }

    fn h(s: &mut Server, rank: usize, l: &str) -> Output {
        s.handle(rank, parse_line(l.as_bytes()))
    }

    #[test]
    fn handshake_and_kvs() {
        let mut s = Server::new(2, "kvs_x".into(), "(vector,(0,1,2))".into());
        let o = h(&mut s, 0, "cmd=init pmi_version=1 pmi_subversion=1");
        assert_eq!(
            o.replies[0].1,
            "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n"
        );
        assert_eq!(o.notices, vec![Notice::Initialized(0)]);
        let o = h(&mut s, 1, "cmd=get_maxes");
        assert_eq!(
            o.replies,
            vec![(
                1,
                "cmd=maxes kvsname_max=256 keylen_max=256 vallen_max=65536 rc=0\n".into()
            )]
        );
        assert_eq!(
            h(&mut s, 0, "cmd=put kvsname=kvs_x key=a value=1=2").replies[0].1,
            "cmd=put_result rc=0 msg=success\n"
        );
        assert!(
            h(&mut s, 0, "cmd=put kvsname=other key=a value=1").replies[0]
                .1
                .contains("rc=-1")
        );
        assert_eq!(
            h(&mut s, 1, "cmd=get kvsname=kvs_x key=a").replies[0].1,
            "cmd=get_result rc=0 msg=success value=1=2\n"
        );
        assert!(h(&mut s, 1, "cmd=get kvsname=kvs_x key=b").replies[0]
            .1
            .starts_with("cmd=get_result rc=-1 msg=key_b_not_found"));
        assert!(
            h(&mut s, 1, "cmd=get kvsname=kvs_x key=PMI_process_mapping").replies[0]
                .1
                .contains("(vector,(0,1,2))")
        );
        assert_eq!(s.lookup("a"), Some("1=2"));
    }

    #[test]
    fn barrier_releases_everyone_once() {
        let mut s = Server::new(3, "k".into(), String::new());
        assert!(h(&mut s, 0, "cmd=barrier_in").replies.is_empty());
        assert!(h(&mut s, 0, "cmd=barrier_in").replies.is_empty()); // duplicate is idempotent
        assert!(h(&mut s, 2, "cmd=barrier_in").replies.is_empty());
        let o = h(&mut s, 1, "cmd=barrier_in");
        assert_eq!(
            o.replies.iter().map(|r| r.0).collect::<Vec<_>>(),
            vec![0, 1, 2]
        );
        // A second barrier starts from scratch.
        assert!(h(&mut s, 1, "cmd=barrier_in").replies.is_empty());
    }

    #[test]
    fn abort_finalize_and_junk() {
        let mut s = Server::new(1, "k".into(), String::new());
        let o = h(&mut s, 0, "cmd=abort exitcode=7 error_msg=oh%20no");
        assert_eq!(
            o.notices,
            vec![Notice::Abort {
                rank: 0,
                code: 7,
                msg: "oh no".into()
            }]
        );
        assert!(o.replies.is_empty());
        let o = h(&mut s, 0, "cmd=finalize");
        assert_eq!(o.notices, vec![Notice::Finalized(0)]);
        let o = h(&mut s, 0, "cmd=frobnicate");
        assert!(matches!(o.notices[0], Notice::Protocol { .. }));
        let o = s.handle(0, Err(WireError::SpawnUnsupported));
        assert!(o.replies[0].1.starts_with("cmd=spawn_result rc=-1"));
        let o = h(&mut s, 0, "garbage");
        assert!(matches!(o.notices[0], Notice::Protocol { .. }));
        let o = h(&mut s, 0, "cmd=initack pmiid=0");
        assert_eq!(o.replies.len(), 4);
    }
}
