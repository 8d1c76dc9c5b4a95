//! PMI-1 client: how a process learns its rank and exchanges descriptor
//! tables with its peers at start-up.
//!
//! The runtime bootstraps through this client or the PMI-2 one
//! ([`super::pmi2`]; [`super::Pmi`] picks) so that the same binaries start
//! under `gwrun`, MPICH's Hydra (`mpiexec.mpich`), Slurm and any other
//! PMI-1 server. The launcher passes a connected socket as the file
//! descriptor number in `PMI_FD`, the rank and size in `PMI_RANK` /
//! `PMI_SIZE` (or, with `PMI_ID`, sends them in reply to `cmd=initack`).
//! Without `PMI_FD` the process runs as a *singleton*: rank 0 of 1 with an
//! in-memory key-value space, so a program started by hand still works.
//!
//! All calls block (PMI-1 is strictly request/response); the caller
//! serialises access (`&mut self`).

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::pmi_wire::{escape_value, is_wire_key, is_wire_value, Command, LineBuffer};
use crate::error::{Error, Result};

/// The runtime's bootstrap, whichever PMI version it speaks; kept under
/// this path for the callers that name `bootstrap::pmi::Pmi`.
pub use super::Pmi;

/// Set once the `PMI_FD` descriptor has been taken, so that a second
/// [`claim_pmi_fd`] cannot wrap (and later close) the same descriptor twice.
static FD_CLAIMED: AtomicBool = AtomicBool::new(false);

/// How long the client waits for one reply of the launcher before it gives
/// up with an error (`GW_PMI_TIMEOUT` seconds overrides it). Generous: a
/// barrier waits for the slowest rank's start-up, and a launcher that
/// never answers must end in a clear error, not a hang.
pub const DEFAULT_REPLY_TIMEOUT: Duration = Duration::from_secs(300);

pub(crate) fn reply_timeout_from_env() -> Duration {
    // Through the parameter lookup: a value written with MPI_T wins.
    crate::params::lookup_raw("GW_PMI_TIMEOUT")
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v > 0.0 && *v < 1e9)
        .map(Duration::from_secs_f64)
        .unwrap_or(DEFAULT_REPLY_TIMEOUT)
}

/// Limits advertised by the server in reply to `get_maxes`. As in MPICH,
/// they count the terminating NUL of C buffers, so the longest usable string
/// is one byte shorter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Maxes {
    pub kvsname_max: usize,
    pub keylen_max: usize,
    pub vallen_max: usize,
}

impl Maxes {
    /// The values used in singleton mode (those `gwrun` advertises).
    pub const SINGLETON: Maxes = Maxes {
        kvsname_max: 256,
        keylen_max: 256,
        vallen_max: 65536,
    };
}

/// How the client learns its rank and size.
enum Start {
    /// `PMI_ID` is set: ask with `cmd=initack`.
    PmiId(String),
    /// `PMI_RANK` / `PMI_SIZE` from the environment.
    Env { rank: u32, size: u32 },
}

#[derive(Debug)]
enum Conn {
    /// No launcher: rank 0 of 1, keys live in this map.
    Singleton(HashMap<String, String>),
    /// Connected to a PMI-1 server.
    Wire { file: File, buf: LineBuffer },
}

/// A PMI-1 client (see the module documentation). The runtime uses it
/// through [`super::Pmi`], which picks PMI-1 or PMI-2.
#[derive(Debug)]
pub struct Pmi1 {
    rank: u32,
    size: u32,
    kvsname: String,
    appnum: i32,
    universe_size: Option<u32>,
    maxes: Maxes,
    finalized: bool,
    conn: Conn,
    reply_timeout: Duration,
}

fn boot(msg: impl Into<String>) -> Error {
    Error::Bootstrap(msg.into())
}

pub(crate) fn env_u32(name: &str) -> Result<Option<u32>> {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .parse::<u32>()
            .map(Some)
            .map_err(|_| Error::BadParam {
                var: name.into(),
                value: v,
                reason: "not a non-negative integer".into(),
            }),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => Err(Error::BadParam {
            var: name.into(),
            value: "<not unicode>".into(),
            reason: "not unicode".into(),
        }),
    }
}

/// Takes the launcher's connection named by `PMI_FD`, once per process
/// (whichever PMI version then speaks over it); `None` when `PMI_FD` is
/// unset, i.e. no launcher. The descriptor is made close-on-exec.
pub(crate) fn claim_pmi_fd() -> Result<Option<File>> {
    let Some(fd) = env_u32("PMI_FD")? else {
        return Ok(None);
    };
    let fd = i32::try_from(fd).map_err(|_| boot(format!("PMI_FD={fd} is out of range")))?;
    // SAFETY: fcntl on an arbitrary integer is harmless; it only tells
    // us whether the descriptor is open.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
    if flags < 0 {
        return Err(boot(format!("PMI_FD={fd} is not an open file descriptor")));
    }
    if FD_CLAIMED.swap(true, Ordering::SeqCst) {
        return Err(boot(
            "the PMI connection (PMI_FD) is already in use by another Pmi in this process",
        ));
    }
    // Keep the PMI socket out of programs this process may exec.
    // SAFETY: setting FD_CLOEXEC on a descriptor we just checked is open.
    unsafe { libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC) };
    // SAFETY: the launcher handed this descriptor to this process for PMI
    // and FD_CLAIMED guarantees only one owner inside the process.
    Ok(Some(unsafe { File::from_raw_fd(fd) }))
}

impl Pmi1 {
    /// Connects to the launcher named by the environment, or becomes a
    /// singleton when `PMI_FD` is unset. Performs the whole handshake:
    /// (`initack` when `PMI_ID` is set), `init`, `get_maxes`,
    /// `get_my_kvsname`, `get_appnum`, `get_universe_size`.
    pub fn from_env() -> Result<Pmi1> {
        match claim_pmi_fd()? {
            None => Ok(Pmi1::singleton()),
            Some(file) => Pmi1::over(file),
        }
    }

    /// The PMI-1 handshake over an already claimed `PMI_FD` connection.
    pub(crate) fn over(file: File) -> Result<Pmi1> {
        let mut pmi = Pmi1 {
            rank: 0,
            size: 0,
            kvsname: String::new(),
            appnum: 0,
            universe_size: None,
            maxes: Maxes::SINGLETON,
            finalized: false,
            conn: Conn::Wire {
                file,
                buf: LineBuffer::new(),
            },
            reply_timeout: reply_timeout_from_env(),
        };
        let start = match std::env::var("PMI_ID") {
            Ok(id) => Start::PmiId(id.trim().to_string()),
            Err(_) => Start::Env {
                rank: env_u32("PMI_RANK")?
                    .ok_or_else(|| boot("PMI_FD is set but PMI_RANK is not"))?,
                size: env_u32("PMI_SIZE")?
                    .ok_or_else(|| boot("PMI_FD is set but PMI_SIZE is not"))?,
            },
        };
        pmi.handshake(start)?;
        Ok(pmi)
    }

    /// A PMI with no launcher: rank 0 of 1 and a private key-value space.
    pub fn singleton() -> Pmi1 {
        Pmi1 {
            rank: 0,
            size: 1,
            kvsname: format!("singleton_kvs_{}", std::process::id()),
            appnum: 0,
            universe_size: Some(1),
            maxes: Maxes::SINGLETON,
            finalized: false,
            conn: Conn::Singleton(HashMap::new()),
            reply_timeout: DEFAULT_REPLY_TIMEOUT,
        }
    }

    fn handshake(&mut self, start: Start) -> Result<()> {
        let (rank, size) = match start {
            Start::Env { rank, size } => (rank, size),
            Start::PmiId(id) => {
                // Hydra's "pmiid" start-up: rank and size arrive as `set` lines.
                self.send(&Command::new("initack").arg("pmiid", id))?;
                self.expect("initack")?;
                let (mut rank, mut size) = (None, None);
                // The server sends size, rank and debug, in that order.
                while rank.is_none() || size.is_none() {
                    let c = self.expect("set")?;
                    if let Some(v) = c.get("size") {
                        size = Some(
                            v.parse::<u32>()
                                .map_err(|_| boot(format!("bad size {v:?} from cmd=set")))?,
                        );
                    }
                    if let Some(v) = c.get("rank") {
                        rank = Some(
                            v.parse::<u32>()
                                .map_err(|_| boot(format!("bad rank {v:?} from cmd=set")))?,
                        );
                    }
                }
                // Consume the trailing `set debug=` line so the stream stays in step.
                let c = self.expect("set")?;
                if c.get("debug").is_none() {
                    return Err(boot("expected cmd=set debug=… after rank and size"));
                }
                (rank.unwrap_or(0), size.unwrap_or(0))
            }
        };
        if size == 0 || rank >= size {
            return Err(boot(format!(
                "inconsistent rank {rank} and size {size} from the launcher"
            )));
        }
        self.rank = rank;
        self.size = size;

        let r = self.call(
            &Command::new("init")
                .arg("pmi_version", 1)
                .arg("pmi_subversion", 1),
            "response_to_init",
        )?;
        if r.rc() != 0 {
            return Err(boot(format!(
                "the launcher refused PMI version 1.1 (rc={}, it offers {}.{})",
                r.rc(),
                r.get("pmi_version").unwrap_or("?"),
                r.get("pmi_subversion").unwrap_or("?")
            )));
        }

        let r = self.call(&Command::new("get_maxes"), "maxes")?;
        let max = |k: &str| -> Result<usize> {
            let v = r.require_int(k).map_err(boot)?;
            usize::try_from(v)
                .ok()
                .filter(|&v| v >= 2)
                .ok_or_else(|| boot(format!("unusable {k}={v} from the launcher")))
        };
        self.maxes = Maxes {
            kvsname_max: max("kvsname_max")?,
            keylen_max: max("keylen_max")?,
            vallen_max: max("vallen_max")?,
        };

        let r = self.call(&Command::new("get_my_kvsname"), "my_kvsname")?;
        self.kvsname = r.require("kvsname").map_err(boot)?.to_string();
        if self.kvsname.is_empty() {
            return Err(boot("the launcher sent an empty kvsname"));
        }

        let r = self.call(&Command::new("get_appnum"), "appnum")?;
        self.appnum = r.get("appnum").and_then(|v| v.parse().ok()).unwrap_or(0);

        let r = self.call(&Command::new("get_universe_size"), "universe_size")?;
        // Hydra answers size=-1 when it does not know.
        self.universe_size = r
            .get("size")
            .and_then(|v| v.parse::<i64>().ok())
            .and_then(|v| u32::try_from(v).ok())
            .filter(|&v| v > 0);
        Ok(())
    }

    /// This process's rank in the job.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// Number of processes in the job.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// Name of the job's key-value space.
    pub fn kvsname(&self) -> &str {
        &self.kvsname
    }

    /// Application number (MPMD: which program of the command line); 0 for SPMD.
    pub fn appnum(&self) -> i32 {
        self.appnum
    }

    /// Total slots the launcher could start, if it says (Hydra often does not).
    pub fn universe_size(&self) -> Option<u32> {
        self.universe_size
    }

    /// True when running without a launcher.
    pub fn is_singleton(&self) -> bool {
        matches!(self.conn, Conn::Singleton(_))
    }

    /// The raw limits advertised by the server.
    pub fn maxes(&self) -> Maxes {
        self.maxes
    }

    /// Longest key [`Pmi1::put`]/[`Pmi1::get`] accept, in bytes.
    pub fn max_key_len(&self) -> usize {
        self.maxes.keylen_max - 1
    }

    /// Longest value [`Pmi1::put`] accepts, in bytes (1023 under Hydra,
    /// 65535 under `gwrun`). Callers with longer data must split it.
    pub fn max_value_len(&self) -> usize {
        self.maxes.vallen_max - 1
    }

    fn check_key(&self, key: &str) -> Result<()> {
        if !is_wire_key(key) {
            return Err(boot(format!(
                "PMI key {key:?} is empty or contains a space, newline or '='"
            )));
        }
        if key.len() > self.max_key_len() {
            return Err(boot(format!(
                "PMI key {key:?} is {} bytes, the launcher allows {}",
                key.len(),
                self.max_key_len()
            )));
        }
        Ok(())
    }

    fn check_live(&self, what: &str) -> Result<()> {
        if self.finalized {
            return Err(boot(format!("PMI {what} after finalize")));
        }
        Ok(())
    }

    /// Publishes `key=value` in the job's key-value space. The value must
    /// not contain spaces or newlines and be at most [`Pmi1::max_value_len`]
    /// bytes; it becomes visible to others after everyone passes a
    /// [`Pmi1::barrier`].
    pub fn put(&mut self, key: &str, value: &str) -> Result<()> {
        self.check_live("put")?;
        self.check_key(key)?;
        if !is_wire_value(value) {
            return Err(boot(format!(
                "PMI value for key {key:?} contains a space, tab, newline or NUL"
            )));
        }
        if value.len() > self.max_value_len() {
            return Err(boot(format!(
                "PMI value for key {key:?} is {} bytes, the launcher allows {}",
                value.len(),
                self.max_value_len()
            )));
        }
        if let Conn::Singleton(map) = &mut self.conn {
            map.insert(key.to_string(), value.to_string());
            return Ok(());
        }
        let cmd = Command::new("put")
            .arg("kvsname", &self.kvsname)
            .arg("key", key)
            .arg("value", value);
        let r = self.call(&cmd, "put_result")?;
        if r.rc() != 0 {
            return Err(boot(format!(
                "PMI put of {key:?} failed: {}",
                r.get("msg").unwrap_or("no reason given")
            )));
        }
        Ok(())
    }

    /// Makes earlier puts visible; a no-op on the PMI-1 wire (the barrier
    /// does it), kept so callers are written for PMI-2 semantics too.
    pub fn commit(&mut self) -> Result<()> {
        self.check_live("commit")
    }

    /// Waits until every process of the job has entered the barrier.
    pub fn barrier(&mut self) -> Result<()> {
        self.check_live("barrier")?;
        if self.is_singleton() {
            return Ok(());
        }
        self.call(&Command::new("barrier_in"), "barrier_out")?;
        Ok(())
    }

    /// Looks `key` up in the job's key-value space; `None` if nobody put it.
    pub fn get(&mut self, key: &str) -> Result<Option<String>> {
        self.check_live("get")?;
        self.check_key(key)?;
        if let Conn::Singleton(map) = &self.conn {
            return Ok(map.get(key).cloned());
        }
        let cmd = Command::new("get")
            .arg("kvsname", &self.kvsname)
            .arg("key", key);
        let r = self.call(&cmd, "get_result")?;
        if r.rc() != 0 {
            // Hydra: rc=-1 msg=key_K_not_found value=unknown. Any other
            // failure (unknown kvsname, …) is an error, not an absent key.
            return match r.get("msg") {
                None => Ok(None),
                Some(m) if m.contains("not_found") || m.contains("not found") => Ok(None),
                Some(m) => Err(boot(format!("PMI get of {key:?} failed: {m}"))),
            };
        }
        Ok(Some(r.get("value").unwrap_or("").to_string()))
    }

    /// Tells the launcher this process is done with PMI, so that its exit
    /// is an orderly one. Further calls (other than `finalize`) are errors.
    pub fn finalize(&mut self) -> Result<()> {
        if self.finalized {
            return Ok(());
        }
        if !self.is_singleton() {
            self.call(&Command::new("finalize"), "finalize_ack")?;
        }
        self.finalized = true;
        Ok(())
    }

    /// Asks the launcher to kill the whole job with exit code `code`,
    /// showing `msg`. Does not wait for a reply and does not exit: the
    /// caller should exit right after (the launcher will kill it anyway).
    pub fn abort(&mut self, code: i32, msg: &str) -> Result<()> {
        if self.is_singleton() {
            return Ok(());
        }
        let cmd = Command::new("abort")
            .arg("exitcode", code)
            .arg("error_msg", escape_value(msg));
        self.send(&cmd)
    }

    /// `PMI_Spawn_multiple`: asks the launcher to start `apps`, with
    /// `preput` put for the new processes. `Ok(Err(why))` is the launcher's
    /// refusal (no such program, too many processes); `Ok(Ok(reply))` its
    /// `spawn_result`, whose extra arguments (gwrun's `gw_base`, …) the
    /// caller reads. Under gwrun the reply comes once the new processes
    /// have all initialised.
    pub fn spawn(
        &mut self,
        apps: &[super::spawn_wire::SpawnApp],
        preput: &[(String, String)],
    ) -> Result<std::result::Result<Command, String>> {
        self.check_live("spawn")?;
        if self.is_singleton() {
            return Ok(Err("no launcher to spawn processes (a singleton)".into()));
        }
        let text = super::spawn_wire::encode_spawn(apps, preput).map_err(boot)?;
        let Conn::Wire { file, .. } = &mut self.conn else {
            return Err(boot("internal: spawn on a singleton PMI"));
        };
        file.write_all(text.as_bytes())
            .map_err(|e| Error::io("writing a PMI spawn request to the launcher", e))?;
        let r = self.expect("spawn_result")?;
        if r.rc() != 0 {
            let why = r
                .get("errmsg")
                .or_else(|| r.get("msg"))
                .map(super::pmi_wire::unescape_value)
                .unwrap_or_else(|| "the launcher refused the spawn".into());
            return Ok(Err(why));
        }
        Ok(Ok(r))
    }

    /// The launcher's name service (PMI-1 `publish_name`, `unpublish_name`,
    /// `lookup_name`, as MPICH's client speaks them): `op` is one of those
    /// three; `port` matters to `publish_name`. `Ok(Ok(port))` on success
    /// (the port for a look-up, empty otherwise), `Ok(Err(why))` when the
    /// launcher says no (unknown or already published service).
    pub fn name_service(
        &mut self,
        op: &str,
        service: &str,
        port: &str,
    ) -> Result<std::result::Result<String, String>> {
        self.check_live(op)?;
        if self.is_singleton() {
            return Ok(Err("no launcher, so no name service (a singleton)".into()));
        }
        let reply = match op {
            "publish_name" => "publish_result",
            "unpublish_name" => "unpublish_result",
            "lookup_name" => "lookup_result",
            _ => {
                return Err(boot(format!(
                    "internal: unknown name-service operation {op}"
                )))
            }
        };
        let mut cmd = Command::new(op).arg("service", escape_value(service));
        if op == "publish_name" {
            cmd = cmd.arg("port", escape_value(port));
        }
        let r = self.call(&cmd, reply)?;
        if r.rc() != 0 {
            return Ok(Err(r
                .get("info")
                .or_else(|| r.get("msg"))
                .map(super::pmi_wire::unescape_value)
                .unwrap_or_else(|| "refused".into())));
        }
        Ok(Ok(r
            .get("port")
            .map(super::pmi_wire::unescape_value)
            .unwrap_or_default()))
    }

    fn send(&mut self, cmd: &Command) -> Result<()> {
        let line = cmd.encode()?;
        let Conn::Wire { file, .. } = &mut self.conn else {
            return Err(boot("internal: send on a singleton PMI"));
        };
        loop {
            match file.write_all(line.as_bytes()) {
                Ok(()) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Err(Error::io(
                        format!("writing PMI command {:?} to the launcher", cmd.name),
                        e,
                    ))
                }
            }
        }
    }

    fn recv(&mut self) -> Result<Command> {
        let timeout = self.reply_timeout;
        let Conn::Wire { file, buf } = &mut self.conn else {
            return Err(boot("internal: recv on a singleton PMI"));
        };
        let mut chunk = [0u8; 4096];
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(r) = buf.next_command() {
                let c = r.map_err(|e| boot(format!("unusable reply from the launcher: {e}")))?;
                if c.name == "error" {
                    // gwrun's answer to a line it could not use.
                    return Err(boot(format!(
                        "the launcher rejected our PMI request: {}",
                        c.get("msg")
                            .map(super::pmi_wire::unescape_value)
                            .unwrap_or_else(|| "no reason given".into())
                    )));
                }
                return Ok(c);
            }
            match read_some(file, &mut chunk, deadline, timeout)? {
                0 => {
                    return Err(boot(
                        "the launcher closed the PMI connection (it ended, or refused what this process sent)",
                    ))
                }
                n => buf.push(&chunk[..n]),
            }
        }
    }

    fn expect(&mut self, name: &str) -> Result<Command> {
        let r = self.recv()?;
        if r.name != name {
            return Err(boot(format!(
                "expected cmd={name} from the launcher, got cmd={}",
                r.name
            )));
        }
        Ok(r)
    }

    fn call(&mut self, cmd: &Command, reply: &str) -> Result<Command> {
        self.send(cmd)?;
        self.expect(reply)
    }
}

/// Waits (poll, in slices of at most a minute) until `file` is readable or
/// `deadline` passes, then reads once: the byte count, 0 at end of stream.
/// Passing the deadline is an error naming `timeout` and `GW_PMI_TIMEOUT`.
pub(crate) fn read_some(
    file: &mut File,
    chunk: &mut [u8],
    deadline: Instant,
    timeout: Duration,
) -> Result<usize> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(boot(format!(
                "the launcher sent no PMI reply within {:.0} s (GW_PMI_TIMEOUT)",
                timeout.as_secs_f64()
            )));
        }
        let mut pfd = libc::pollfd {
            fd: file.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = left.as_millis().clamp(1, 60_000) as libc::c_int;
        // SAFETY: one pollfd on a descriptor the caller owns.
        let n = unsafe { libc::poll(&mut pfd, 1, ms) };
        if n == 0 {
            continue;
        }
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(Error::io("waiting for the PMI connection", e));
        }
        match file.read(chunk) {
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Error::io("reading from the PMI connection", e)),
        }
    }
}

/// Longest input [`fuzz_replies`] uses: what fits in a socket buffer, so
/// the scripted replies can be written before the client runs.
pub(crate) const FUZZ_MAX_INPUT: usize = 64 * 1024;

/// Runs a whole client session (start-up handshake, put, barrier, get,
/// abort-free finalize) against a launcher whose every reply is `data`,
/// then EOF. A first byte 0x01 picks the `PMI_ID` start-up. Every outcome must be `Ok` or a clear `Err`: the fuzz
/// target [`crate::fuzzing::pmi_client`].
pub(crate) fn fuzz_replies(data: &[u8]) {
    use std::os::unix::net::UnixStream;
    let data = &data[..data.len().min(FUZZ_MAX_INPUT)];
    // A leading 0x01 selects Hydra's PMI_ID start-up (rank and size come
    // as replies), anything else the environment start-up.
    let (start, data) = match data.split_first() {
        Some((1, rest)) => (Start::PmiId("0".into()), rest),
        _ => (Start::Env { rank: 0, size: 2 }, data),
    };
    let Ok((client, mut server)) = UnixStream::pair() else {
        return;
    };
    // The client's requests must never block on a full buffer either: the
    // scripted side does not read them, so let them be dropped.
    let _ = server.set_nonblocking(true);
    if server.write_all(data).is_err() {
        return;
    }
    let _ = server.shutdown(std::net::Shutdown::Write);
    let mut p = Pmi1::singleton();
    p.conn = Conn::Wire {
        file: File::from(std::os::fd::OwnedFd::from(client)),
        buf: LineBuffer::new(),
    };
    p.reply_timeout = Duration::from_millis(100);
    if p.handshake(start).is_err() {
        return;
    }
    let _ = p.put("gw.k", "v");
    let _ = p.barrier();
    let _ = p.get("gw.k");
    let _ = p.finalize();
    drop(server);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn singleton_kvs() {
        let mut p = Pmi1::singleton();
        assert_eq!((p.rank(), p.size()), (0, 1));
        assert!(p.is_singleton());
        p.put("a", "1").unwrap();
        p.commit().unwrap();
        p.barrier().unwrap();
        assert_eq!(p.get("a").unwrap().as_deref(), Some("1"));
        assert_eq!(p.get("b").unwrap(), None);
        assert!(p.put("a b", "1").is_err());
        assert!(p.put("a", "1 2").is_err());
        assert!(p.put("", "1").is_err());
        assert!(p.put("k=v", "1").is_err());
        assert!(p.put("a", &"x".repeat(p.max_value_len() + 1)).is_err());
        p.put("a", &"x".repeat(p.max_value_len())).unwrap();
        p.finalize().unwrap();
        p.finalize().unwrap();
        assert!(p.put("a", "1").is_err());
        assert!(p.barrier().is_err());
    }

    /// A scripted server on a socketpair: checks the client's handshake and
    /// a put/barrier/get/finalize sequence line by line.
    #[test]
    fn wire_client_against_scripted_server() {
        use std::io::{BufRead, BufReader};
        use std::os::unix::net::UnixStream;
        let (client, server) = UnixStream::pair().unwrap();
        let script: Vec<(&str, &str)> = vec![
            (
                "cmd=init pmi_version=1 pmi_subversion=1",
                "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0",
            ),
            (
                "cmd=get_maxes",
                "cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024",
            ),
            ("cmd=get_my_kvsname", "cmd=my_kvsname kvsname=kvs_1"),
            ("cmd=get_appnum", "cmd=appnum appnum=0"),
            ("cmd=get_universe_size", "cmd=universe_size size=-1"),
            (
                "cmd=put kvsname=kvs_1 key=k value=v=1",
                "cmd=put_result rc=0 msg=success",
            ),
            ("cmd=barrier_in", "cmd=barrier_out"),
            (
                "cmd=get kvsname=kvs_1 key=k",
                "cmd=get_result rc=0 msg=success value=v=1",
            ),
            (
                "cmd=get kvsname=kvs_1 key=z",
                "cmd=get_result rc=-1 msg=key_z_not_found value=unknown",
            ),
            (
                "cmd=get kvsname=kvs_1 key=y",
                "cmd=get_result rc=-1 msg=unknown_kvsname",
            ),
            ("cmd=finalize", "cmd=finalize_ack"),
        ];
        let t = std::thread::spawn(move || {
            let mut w = server.try_clone().unwrap();
            let mut r = BufReader::new(server);
            for (want, reply) in script {
                let mut line = String::new();
                r.read_line(&mut line).unwrap();
                assert_eq!(line.trim_end(), want);
                w.write_all(format!("{reply}\n").as_bytes()).unwrap();
            }
        });
        let file = File::from(std::os::fd::OwnedFd::from(client));
        let mut p = Pmi1 {
            rank: 1,
            size: 2,
            kvsname: String::new(),
            appnum: 0,
            universe_size: None,
            maxes: Maxes::SINGLETON,
            finalized: false,
            conn: Conn::Wire {
                file,
                buf: LineBuffer::new(),
            },
            reply_timeout: DEFAULT_REPLY_TIMEOUT,
        };
        p.handshake(Start::Env { rank: 1, size: 2 }).unwrap();
        assert_eq!(p.kvsname(), "kvs_1");
        assert_eq!(p.max_value_len(), 1023);
        assert_eq!(p.universe_size(), None);
        assert!(p.put("k", &"x".repeat(1024)).is_err());
        p.put("k", "v=1").unwrap();
        p.barrier().unwrap();
        assert_eq!(p.get("k").unwrap().as_deref(), Some("v=1"));
        assert_eq!(p.get("z").unwrap(), None);
        assert!(p.get("y").is_err());
        p.finalize().unwrap();
        t.join().unwrap();
    }

    /// Hydra's `PMI_ID` start-up: rank and size come from `cmd=set` lines.
    #[test]
    fn initack_startup() {
        use std::io::{BufRead, BufReader};
        use std::os::unix::net::UnixStream;
        let (client, server) = UnixStream::pair().unwrap();
        let t = std::thread::spawn(move || {
            let mut w = server.try_clone().unwrap();
            let mut r = BufReader::new(server);
            let mut line = String::new();
            r.read_line(&mut line).unwrap();
            assert_eq!(line, "cmd=initack pmiid=5\n");
            w.write_all(b"cmd=initack\ncmd=set size=8\ncmd=set rank=5\ncmd=set debug=0\n")
                .unwrap();
            for reply in [
                "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0",
                "cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024",
                "cmd=my_kvsname kvsname=kvs_9",
                "cmd=appnum appnum=2",
                "cmd=universe_size size=16",
            ] {
                line.clear();
                r.read_line(&mut line).unwrap();
                w.write_all(format!("{reply}\n").as_bytes()).unwrap();
            }
        });
        let mut p = Pmi1::singleton();
        p.conn = Conn::Wire {
            file: File::from(std::os::fd::OwnedFd::from(client)),
            buf: LineBuffer::new(),
        };
        p.handshake(Start::PmiId("5".into())).unwrap();
        t.join().unwrap();
        assert_eq!(
            (p.rank(), p.size(), p.appnum(), p.universe_size()),
            (5, 8, 2, Some(16))
        );
        assert_eq!(p.kvsname(), "kvs_9");
    }

    /// A server that answers with the wrong command or a bad rank/size.
    #[test]
    fn bad_server_replies_are_errors() {
        use std::os::unix::net::UnixStream;
        for (start, script) in [
            (Start::Env { rank: 0, size: 1 }, "cmd=maxes kvsname_max=1\n"),
            (Start::Env { rank: 3, size: 2 }, ""),
            (Start::PmiId("1".into()), "cmd=initack\ncmd=set size=x\n"),
            (
                Start::Env { rank: 0, size: 1 },
                "cmd=response_to_init rc=-1 pmi_version=2\n",
            ),
        ] {
            let (client, mut server) = UnixStream::pair().unwrap();
            server.write_all(script.as_bytes()).unwrap();
            drop(server);
            let mut p = Pmi1::singleton();
            p.conn = Conn::Wire {
                file: File::from(std::os::fd::OwnedFd::from(client)),
                buf: LineBuffer::new(),
            };
            assert!(p.handshake(start).is_err());
        }
    }

    #[test]
    fn closed_connection_is_an_error() {
        use std::os::unix::net::UnixStream;
        let (client, server) = UnixStream::pair().unwrap();
        drop(server);
        let file = File::from(std::os::fd::OwnedFd::from(client));
        let mut p = Pmi1::singleton();
        p.conn = Conn::Wire {
            file,
            buf: LineBuffer::new(),
        };
        let e = p.barrier().unwrap_err();
        assert!(matches!(e, Error::Bootstrap(_) | Error::Io { .. }), "{e}");
    }

    fn wired(client: std::os::unix::net::UnixStream) -> Pmi1 {
        let mut p = Pmi1::singleton();
        p.conn = Conn::Wire {
            file: File::from(std::os::fd::OwnedFd::from(client)),
            buf: LineBuffer::new(),
        };
        p
    }

    /// gwrun answers a line it cannot use with `cmd=error`: the client
    /// turns it into a clear error naming the reason.
    #[test]
    fn error_reply_is_a_clear_error() {
        use std::os::unix::net::UnixStream;
        let (client, mut server) = UnixStream::pair().unwrap();
        server
            .write_all(b"cmd=error rc=-1 msg=PMI%20line%20too%20long\n")
            .unwrap();
        let mut p = wired(client);
        let e = p.barrier().unwrap_err().to_string();
        assert!(
            e.contains("rejected") && e.contains("PMI line too long"),
            "{e}"
        );
    }

    /// A launcher that never answers: an error after the reply timeout,
    /// never a hang.
    #[test]
    fn silent_launcher_times_out() {
        use std::os::unix::net::UnixStream;
        let (client, _server) = UnixStream::pair().unwrap();
        let mut p = wired(client);
        p.reply_timeout = Duration::from_millis(200);
        let start = Instant::now();
        let e = p.barrier().unwrap_err().to_string();
        assert!(e.contains("no PMI reply within"), "{e}");
        assert!(start.elapsed() < Duration::from_secs(5));
    }

    /// A reply line that is not PMI: a clear error, not a panic or a hang.
    #[test]
    fn garbage_reply_is_a_clear_error() {
        use std::os::unix::net::UnixStream;
        let (client, mut server) = UnixStream::pair().unwrap();
        server.write_all(b"\xff\xfe garbage\n").unwrap();
        let mut p = wired(client);
        let e = p.barrier().unwrap_err().to_string();
        assert!(e.contains("unusable reply from the launcher"), "{e}");
    }
}
