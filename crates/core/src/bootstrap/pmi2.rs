//! PMI-2 client: the start-up protocol of Slurm's `srun --mpi=pmi2` and of
//! MPICH's Hydra when a client asks for version 2 (the wire format is in
//! [`super::pmi2_wire`]).
//!
//! The launcher passes a connected socket in `PMI_FD` (claimed once per
//! process, as for PMI-1) and `PMI_RANK` / `PMI_SIZE`; Slurm adds
//! `PMI_JOBID`, which its plugin *requires* back in `fullinit` (as
//! `pmijobid`, together with `pmirank` and `threaded`), while Hydra ignores
//! it. The session is: the PMI-1 style `init` line asking for 2.0,
//! `fullinit` (rank, size, appnum come back), `job-getid` (the key-value
//! space's name), then `kvs-put` / `kvs-fence` / `kvs-get`,
//! `info-getjobattr`, and `finalize` or `abort`.
//!
//! Differences from PMI-1 that the runtime need not know about: `kvs-fence`
//! both publishes this process's puts and waits for everyone (so
//! [`Pmi2::commit`] is a no-op and [`Pmi2::barrier`] fences), and a missing
//! key is `found=FALSE`, not an error code.
//!
//! Every reply is hostile: lengths are bounded before anything is
//! buffered, every field is checked, each wait ends after the reply timeout
//! (`GW_PMI_TIMEOUT`, as for PMI-1), and any failure is a clear error.

use std::fs::File;
use std::io::{self, Write};
use std::time::{Duration, Instant};

use super::pmi::{env_u32, read_some, reply_timeout_from_env};
use super::pmi2_wire::{encode, is_v2_key, is_v2_value, Frames, Wire2Error};
use super::pmi_wire::Command;
use crate::error::{Error, Result};

/// Longest key the client sends: MPICH's PMI-2 library refuses keys over
/// 64 bytes (`PMI2_MAX_KEYLEN`), one byte is kept for C's NUL as PMI-1's
/// limits do.
pub const MAX_KEY_LEN: usize = 63;

/// Longest value the client sends: MPICH's `PMI2_MAX_VALLEN` is 1024; as
/// for keys, one byte less. Longer data is split by the caller (the
/// descriptor table is, by [`Pmi2::max_value_len`]).
pub const MAX_VALUE_LEN: usize = 1023;

/// Longest abort message sent: the same bound as a value.
const MAX_ABORT_MSG: usize = MAX_VALUE_LEN;

fn boot(msg: impl Into<String>) -> Error {
    Error::Bootstrap(msg.into())
}

/// What the client tells the server about itself in `fullinit`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Start {
    /// `PMI_RANK`: sent as `pmirank` and checked against the reply.
    pub rank: Option<u32>,
    /// `PMI_ID` when there is no `PMI_RANK` (Hydra's other start-up).
    pub pmiid: Option<String>,
    /// `PMI_JOBID` (Slurm), sent back as `pmijobid`.
    pub jobid: Option<String>,
}

impl Start {
    fn from_env() -> Result<Start> {
        let text = |name: &str| -> Result<Option<String>> {
            match std::env::var(name) {
                Ok(v) => {
                    let v = v.trim().to_string();
                    if !is_v2_value(&v) || v.len() > MAX_VALUE_LEN {
                        return Err(Error::BadParam {
                            var: name.into(),
                            value: v,
                            reason: "cannot be sent over PMI-2".into(),
                        });
                    }
                    Ok(Some(v))
                }
                Err(_) => Ok(None),
            }
        };
        let rank = env_u32("PMI_RANK")?;
        let pmiid = if rank.is_none() {
            text("PMI_ID")?
        } else {
            None
        };
        Ok(Start {
            rank,
            pmiid,
            jobid: text("PMI_JOBID")?,
        })
    }
}

/// A PMI-2 client connected to its launcher.
#[derive(Debug)]
pub struct Pmi2 {
    rank: u32,
    size: u32,
    appnum: i32,
    jobid: String,
    /// `spawner-jobid` of `fullinit`: the job that spawned this one (Slurm).
    spawner: Option<String>,
    /// Spawns given up on before their answer came: that many late
    /// `spawn-response` frames are skipped.
    stale_spawns: u32,
    finalized: bool,
    file: File,
    frames: Frames,
    reply_timeout: Duration,
}

impl Pmi2 {
    /// The PMI-2 handshake over the claimed `PMI_FD` connection, with the
    /// rank and job id the environment gives.
    pub(crate) fn over(file: File) -> Result<Pmi2> {
        let start = Start::from_env()?;
        let mut p = Pmi2::unconnected(file);
        p.reply_timeout = reply_timeout_from_env();
        p.handshake(&start)?;
        if let Some(size) = env_u32("PMI_SIZE")? {
            if size != p.size {
                return Err(boot(format!(
                    "the launcher says size {} in fullinit but PMI_SIZE={size}",
                    p.size
                )));
            }
        }
        Ok(p)
    }

    fn unconnected(file: File) -> Pmi2 {
        Pmi2 {
            rank: 0,
            size: 0,
            appnum: 0,
            jobid: String::new(),
            spawner: None,
            stale_spawns: 0,
            finalized: false,
            file,
            frames: Frames::new(),
            reply_timeout: super::pmi::DEFAULT_REPLY_TIMEOUT,
        }
    }

    fn handshake(&mut self, start: &Start) -> Result<()> {
        // The version is asked for in PMI-1 syntax; the reply is one line.
        self.send_raw(b"cmd=init pmi_version=2 pmi_subversion=0\n", "init")?;
        let r = self.recv_init_line()?;
        if r.name != "response_to_init" {
            return Err(boot(format!(
                "expected cmd=response_to_init from the launcher, got cmd={}",
                r.name
            )));
        }
        if r.rc() != 0 || r.get("pmi_version").is_some_and(|v| v != "2") {
            return Err(boot(format!(
                "the launcher refused PMI version 2.0 (rc={}, it offers {}.{}); \
                 set GW_PMI=pmi1 to use PMI-1",
                r.rc(),
                r.get("pmi_version").unwrap_or("?"),
                r.get("pmi_subversion").unwrap_or("?")
            )));
        }

        let mut init = Command::new("fullinit");
        if let Some(j) = &start.jobid {
            init = init.arg("pmijobid", j);
        }
        if let Some(rank) = start.rank {
            init = init.arg("pmirank", rank);
        } else if let Some(id) = &start.pmiid {
            init = init.arg("pmiid", id);
        }
        init = init.arg("threaded", "FALSE");
        let r = self.call(&init, "fullinit-response")?;
        self.check_rc(&r, "fullinit")?;
        let int = |k: &str| -> Result<i64> { r.require_int(k).map_err(boot) };
        if let Some(v) = r.get("pmi-version") {
            if v != "2" {
                return Err(boot(format!(
                    "the launcher answered fullinit with pmi-version={v}, not 2"
                )));
            }
        }
        let rank = int("rank")?;
        let size = int("size")?;
        let (Ok(rank), Ok(size)) = (u32::try_from(rank), u32::try_from(size)) else {
            return Err(boot(format!(
                "unusable rank {rank} or size {size} from the launcher's fullinit"
            )));
        };
        if size == 0 || rank >= size {
            return Err(boot(format!(
                "inconsistent rank {rank} and size {size} from the launcher"
            )));
        }
        if let Some(want) = start.rank {
            if want != rank {
                return Err(boot(format!(
                    "the launcher gave rank {rank} in fullinit but PMI_RANK={want}"
                )));
            }
        }
        self.rank = rank;
        self.size = size;
        // Slurm answers appnum=-1 ("not known"); anything unusable means 0.
        self.appnum = r
            .get("appnum")
            .and_then(|v| v.parse::<i32>().ok())
            .filter(|&v| v >= 0)
            .unwrap_or(0);

        // Slurm names the spawning job to a job started by PMI-2 spawn.
        self.spawner = r
            .get("spawner-jobid")
            .filter(|j| !j.is_empty() && j.len() <= 255)
            .map(str::to_string);

        let r = self.call(&Command::new("job-getid"), "job-getid-response")?;
        self.check_rc(&r, "job-getid")?;
        let jobid = r.require("jobid").map_err(boot)?;
        if jobid.is_empty() || jobid.len() > 255 {
            return Err(boot(format!(
                "unusable job id ({} bytes) from the launcher's job-getid",
                jobid.len()
            )));
        }
        self.jobid = jobid.to_string();
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

    /// The job id (`job-getid`): the name of the job's key-value space.
    pub fn kvsname(&self) -> &str {
        &self.jobid
    }

    /// The job that spawned this one, when the launcher says (`fullinit`'s
    /// `spawner-jobid`, Slurm).
    pub fn spawner(&self) -> Option<&str> {
        self.spawner.as_deref()
    }

    /// Application number (MPMD); 0 when the launcher does not say.
    pub fn appnum(&self) -> i32 {
        self.appnum
    }

    /// Longest key [`Pmi2::put`]/[`Pmi2::get`] accept, in bytes.
    pub fn max_key_len(&self) -> usize {
        MAX_KEY_LEN
    }

    /// Longest value [`Pmi2::put`] accepts, in bytes.
    pub fn max_value_len(&self) -> usize {
        MAX_VALUE_LEN
    }

    fn check_live(&self, what: &str) -> Result<()> {
        if self.finalized {
            return Err(boot(format!("PMI {what} after finalize")));
        }
        Ok(())
    }

    fn check_key(&self, key: &str) -> Result<()> {
        if !is_v2_key(key) {
            return Err(boot(format!(
                "PMI-2 key {key:?} is empty or contains '=', ';' or a control character"
            )));
        }
        if key.len() > MAX_KEY_LEN {
            return Err(boot(format!(
                "PMI-2 key {key:?} is {} bytes, at most {MAX_KEY_LEN} are allowed",
                key.len()
            )));
        }
        Ok(())
    }

    fn check_rc(&self, r: &Command, what: &str) -> Result<()> {
        let rc = match r.get("rc") {
            None => 0,
            Some(v) => v.parse::<i64>().map_err(|_| {
                boot(format!(
                    "the launcher's reply to {what} has rc={v:?}, not a number"
                ))
            })?,
        };
        if rc != 0 {
            return Err(boot(format!(
                "the launcher failed PMI-2 {what} (rc={rc}): {}",
                r.get("errmsg").unwrap_or("no reason given")
            )));
        }
        Ok(())
    }

    /// Publishes `key=value`; others see it after the next [`Pmi2::barrier`].
    pub fn put(&mut self, key: &str, value: &str) -> Result<()> {
        self.check_live("put")?;
        self.check_key(key)?;
        if !is_v2_value(value) {
            return Err(boot(format!(
                "PMI-2 value for key {key:?} contains ';' or a control character"
            )));
        }
        if value.len() > MAX_VALUE_LEN {
            return Err(boot(format!(
                "PMI-2 value for key {key:?} is {} bytes, at most {MAX_VALUE_LEN} are allowed",
                value.len()
            )));
        }
        let cmd = Command::new("kvs-put").arg("key", key).arg("value", value);
        let r = self.call(&cmd, "kvs-put-response")?;
        self.check_rc(&r, &format!("kvs-put of {key:?}"))
    }

    /// A no-op: `kvs-fence` ([`Pmi2::barrier`]) publishes the puts.
    pub fn commit(&mut self) -> Result<()> {
        self.check_live("commit")
    }

    /// `kvs-fence`: publishes this process's puts and waits for every
    /// process of the job to do the same.
    pub fn barrier(&mut self) -> Result<()> {
        self.check_live("barrier")?;
        let r = self.call(&Command::new("kvs-fence"), "kvs-fence-response")?;
        self.check_rc(&r, "kvs-fence")
    }

    /// Looks `key` up in the job's key-value space; `None` if nobody put it.
    pub fn get(&mut self, key: &str) -> Result<Option<String>> {
        self.check_live("get")?;
        self.check_key(key)?;
        let r = self.call(&Command::new("kvs-get").arg("key", key), "kvs-get-response")?;
        self.check_rc(&r, &format!("kvs-get of {key:?}"))?;
        found_value(&r, &format!("kvs-get of {key:?}"))
    }

    /// A job attribute (`info-getjobattr`), e.g. `PMI_process_mapping`;
    /// `None` if the launcher has none by that name.
    pub fn job_attr(&mut self, key: &str) -> Result<Option<String>> {
        self.check_live("info-getjobattr")?;
        self.check_key(key)?;
        let r = self.call(
            &Command::new("info-getjobattr").arg("key", key),
            "info-getjobattr-response",
        )?;
        self.check_rc(&r, &format!("info-getjobattr of {key:?}"))?;
        found_value(&r, &format!("info-getjobattr of {key:?}"))
    }

    /// Asks the launcher to start `apps` (PMI-2 `spawn`, Slurm's pmi2
    /// plugin and Hydra serve it), with `preput` put into the new
    /// processes' key-value space before they start. `Ok(Ok(reply))` once
    /// the launcher answers `spawn-response` with rc 0 and no failed
    /// process; `Ok(Err(why))` when it refused (or the request cannot be
    /// sent over PMI-2), or gave no answer within `limit`: Slurm 22.05
    /// never answers a spawn whose program cannot start, so the caller
    /// bounds the wait; a late answer is skipped when it comes.
    pub fn spawn(
        &mut self,
        apps: &[super::spawn_wire::SpawnApp],
        preput: &[(String, String)],
        limit: Option<Duration>,
    ) -> Result<std::result::Result<Command, String>> {
        self.check_live("spawn")?;
        let cmd = match super::spawn_wire::encode_pmi2_spawn(apps, preput) {
            Ok(c) => c,
            Err(why) => return Ok(Err(why)),
        };
        let frame = match encode(&cmd) {
            Ok(f) => f,
            Err(e) => return Ok(Err(format!("the spawn cannot be sent over PMI-2: {e}"))),
        };
        self.send_raw(&frame, "spawn")?;
        let full = self.reply_timeout;
        let wait = limit.map_or(full, |l| l.min(full));
        let started = Instant::now();
        self.reply_timeout = wait;
        let r = self.recv_reply("spawn-response");
        self.reply_timeout = full;
        let r = match r {
            Ok(r) => r,
            Err(_) if limit.is_some() && started.elapsed() >= wait => {
                self.stale_spawns += 1;
                return Ok(Err(format!(
                    "the launcher did not answer the spawn within {} s (Slurm's pmi2 plugin \
                     never answers when it cannot start the program; GW_MPI_CONNECT_TIMEOUT)",
                    wait.as_secs()
                )));
            }
            Err(e) => return Err(e),
        };
        let rc = r.get("rc").unwrap_or("0");
        // Slurm lists the failed processes' codes (and a failing rc first).
        let failed = r.get("errcodes").is_some_and(|c| {
            c.split(',')
                .filter(|x| !x.trim().is_empty())
                .any(|x| x.trim().parse::<i64>() != Ok(0))
        });
        if rc.trim() != "0" || failed {
            return Ok(Err(format!(
                "the launcher refused the spawn (PMI-2 rc={rc}{}): {}",
                r.get("errcodes")
                    .map(|c| format!(", errcodes={c}"))
                    .unwrap_or_default(),
                r.get("errmsg").unwrap_or("no reason given")
            )));
        }
        Ok(Ok(r))
    }

    /// Tells the launcher this process is done with PMI. Further calls
    /// (other than `finalize`) are errors.
    pub fn finalize(&mut self) -> Result<()> {
        if self.finalized {
            return Ok(());
        }
        let r = self.call(&Command::new("finalize"), "finalize-response")?;
        self.finalized = true;
        self.check_rc(&r, "finalize")
    }

    /// Asks the launcher to kill the whole job, showing `msg`. No reply
    /// comes; the caller exits right after. PMI-2 carries no exit code
    /// (`isworld=TRUE` is what makes Slurm cancel the step), so `code` is
    /// only put in the message.
    pub fn abort(&mut self, code: i32, msg: &str) -> Result<()> {
        // Characters the wire cannot carry become spaces; the length is
        // bounded on a character boundary.
        let mut text: String = format!("exit code {code}: {msg}")
            .chars()
            .map(|c| if c == ';' || c.is_control() { ' ' } else { c })
            .collect();
        while text.len() > MAX_ABORT_MSG {
            text.pop();
        }
        let cmd = Command::new("abort")
            .arg("isworld", "TRUE")
            .arg("msg", text);
        let frame = encode(&cmd)?;
        self.send_raw(&frame, "abort")
    }

    fn send_raw(&mut self, bytes: &[u8], what: &str) -> Result<()> {
        loop {
            match self.file.write_all(bytes) {
                Ok(()) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Err(Error::io(
                        format!("writing PMI-2 command {what:?} to the launcher"),
                        e,
                    ))
                }
            }
        }
    }

    /// Reads until `next` yields an item, bounded by the reply timeout.
    fn recv_with(
        &mut self,
        next: fn(&mut Frames) -> Option<std::result::Result<Command, Wire2Error>>,
    ) -> Result<Command> {
        let timeout = self.reply_timeout;
        let deadline = Instant::now() + timeout;
        let mut chunk = [0u8; 4096];
        loop {
            if let Some(r) = next(&mut self.frames) {
                return r.map_err(|e| boot(format!("unusable PMI-2 reply from the launcher: {e}")));
            }
            match read_some(&mut self.file, &mut chunk, deadline, timeout)? {
                0 => {
                    return Err(boot(
                        "the launcher closed the PMI connection (it ended, or refused what this process sent)",
                    ))
                }
                n => self.frames.push(&chunk[..n]),
            }
        }
    }

    fn recv_init_line(&mut self) -> Result<Command> {
        self.recv_with(Frames::next_init_line)
    }

    fn call(&mut self, cmd: &Command, reply: &str) -> Result<Command> {
        let frame = encode(cmd)?;
        self.send_raw(&frame, &cmd.name)?;
        self.recv_reply(reply)
    }

    /// The next reply, which must be `reply` (late answers to spawns given
    /// up on are skipped).
    fn recv_reply(&mut self, reply: &str) -> Result<Command> {
        let mut r = self.recv_with(Frames::next_frame)?;
        while r.name == "spawn-response" && reply != "spawn-response" && self.stale_spawns > 0 {
            self.stale_spawns -= 1;
            r = self.recv_with(Frames::next_frame)?;
        }
        if r.name != reply {
            return Err(boot(format!(
                "expected cmd={reply} from the launcher, got cmd={}",
                r.name
            )));
        }
        Ok(r)
    }
}

/// `found=TRUE;value=…` → the value, `found=FALSE` → `None`; anything else
/// is an error (a missing `found` must not read as "absent").
fn found_value(r: &Command, what: &str) -> Result<Option<String>> {
    match r.get("found") {
        Some(f) if f.eq_ignore_ascii_case("TRUE") => {
            let v = r.require("value").map_err(boot)?;
            if v.len() > MAX_VALUE_LEN {
                return Err(boot(format!(
                    "the launcher's {what} returned {} bytes, more than the {MAX_VALUE_LEN} allowed",
                    v.len()
                )));
            }
            Ok(Some(v.to_string()))
        }
        Some(f) if f.eq_ignore_ascii_case("FALSE") => Ok(None),
        Some(f) => Err(boot(format!(
            "the launcher's reply to {what} has found={f:?}, not TRUE or FALSE"
        ))),
        None => Err(boot(format!("the launcher's reply to {what} lacks found="))),
    }
}

/// Longest input [`fuzz_replies`] uses: what fits in a socket buffer, so
/// the scripted replies can be written before the client runs.
pub(crate) const FUZZ_MAX_INPUT: usize = 64 * 1024;

/// Runs a whole client session (handshake, put, fence, get, job attribute,
/// finalize) against a launcher whose every reply is `data`, then EOF. A
/// first byte 0x01 makes the client start with `PMI_ID` instead of a rank
/// and job id. Every outcome must be `Ok` or a clear `Err`: the fuzz target
/// [`crate::fuzzing::pmi2_client`].
pub(crate) fn fuzz_replies(data: &[u8]) {
    use std::os::unix::net::UnixStream;
    let data = &data[..data.len().min(FUZZ_MAX_INPUT)];
    let (start, data) = match data.split_first() {
        Some((1, rest)) => (
            Start {
                pmiid: Some("0".into()),
                ..Start::default()
            },
            rest,
        ),
        _ => (
            Start {
                rank: Some(0),
                jobid: Some("7.0".into()),
                ..Start::default()
            },
            data,
        ),
    };
    let Ok((client, mut server)) = UnixStream::pair() else {
        return;
    };
    if server.write_all(data).is_err() {
        return;
    }
    let _ = server.shutdown(std::net::Shutdown::Write);
    let mut p = Pmi2::unconnected(File::from(std::os::fd::OwnedFd::from(client)));
    p.reply_timeout = Duration::from_millis(100);
    if p.handshake(&start).is_err() {
        return;
    }
    let _ = p.put("gw.k", "v");
    let _ = p.barrier();
    let _ = p.get("gw.k");
    let _ = p.job_attr("PMI_process_mapping");
    let _ = p.finalize();
    drop(server);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::unix::net::UnixStream;

    fn frame(body: &str) -> Vec<u8> {
        let mut v = format!("{:>6}", body.len()).into_bytes();
        v.extend_from_slice(body.as_bytes());
        v
    }

    fn wired(client: UnixStream) -> Pmi2 {
        Pmi2::unconnected(File::from(std::os::fd::OwnedFd::from(client)))
    }

    /// Reads one request frame (the server side of a test).
    fn read_frame(s: &mut UnixStream) -> String {
        let mut len = [0u8; 6];
        s.read_exact(&mut len).unwrap();
        let n = super::super::pmi2_wire::parse_length(&len).unwrap();
        let mut body = vec![0u8; n];
        s.read_exact(&mut body).unwrap();
        String::from_utf8(body).unwrap()
    }

    fn read_line(s: &mut UnixStream) -> String {
        let mut out = Vec::new();
        let mut b = [0u8; 1];
        while s.read(&mut b).unwrap() == 1 {
            out.push(b[0]);
            if b[0] == b'\n' {
                break;
            }
        }
        String::from_utf8(out).unwrap()
    }

    /// The whole session against a scripted server replying as Hydra 4.0.2
    /// did when probed by hand (right-aligned lengths, rc last).
    #[test]
    fn session_against_scripted_hydra() {
        let (client, mut server) = UnixStream::pair().unwrap();
        let t = std::thread::spawn(move || {
            assert_eq!(
                read_line(&mut server),
                "cmd=init pmi_version=2 pmi_subversion=0\n"
            );
            server
                .write_all(b"cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0\n")
                .unwrap();
            let script = [
                (
                    "cmd=fullinit;pmijobid=12.0;pmirank=1;threaded=FALSE;",
                    "cmd=fullinit-response;pmi-version=2;pmi-subversion=0;rank=1;size=3;appnum=0;debugged=FALSE;pmiverbose=FALSE;rc=0;",
                ),
                (
                    "cmd=job-getid;",
                    "cmd=job-getid-response;jobid=kvs_1_0;rc=0;",
                ),
                (
                    "cmd=kvs-put;key=gw.a;value=v=1;",
                    "cmd=kvs-put-response;rc=0;",
                ),
                ("cmd=kvs-fence;", "cmd=kvs-fence-response;rc=0;"),
                (
                    "cmd=kvs-get;key=gw.a;",
                    "cmd=kvs-get-response;found=TRUE;value=v=1;rc=0;",
                ),
                (
                    "cmd=kvs-get;key=gw.z;",
                    "cmd=kvs-get-response;found=FALSE;rc=0;",
                ),
                (
                    "cmd=info-getjobattr;key=PMI_process_mapping;",
                    "cmd=info-getjobattr-response;found=TRUE;value=(vector,(0,1,3));rc=0;",
                ),
                ("cmd=finalize;", "cmd=finalize-response;rc=0;"),
            ];
            for (want, reply) in script {
                assert_eq!(read_frame(&mut server), want);
                server.write_all(&frame(reply)).unwrap();
            }
            // abort: no reply.
            assert_eq!(
                read_frame(&mut server),
                "cmd=abort;isworld=TRUE;msg=exit code 3: bad  news;"
            );
        });
        let mut p = wired(client);
        p.handshake(&Start {
            rank: Some(1),
            pmiid: None,
            jobid: Some("12.0".into()),
        })
        .unwrap();
        assert_eq!((p.rank(), p.size(), p.appnum()), (1, 3, 0));
        assert_eq!(p.kvsname(), "kvs_1_0");
        assert!(p.put("gw.a", "x;y").is_err(), "';' is never sent");
        assert!(p.put("gw.a", &"x".repeat(MAX_VALUE_LEN + 1)).is_err());
        assert!(p.put(&"k".repeat(MAX_KEY_LEN + 1), "v").is_err());
        p.put("gw.a", "v=1").unwrap();
        p.commit().unwrap();
        p.barrier().unwrap();
        assert_eq!(p.get("gw.a").unwrap().as_deref(), Some("v=1"));
        assert_eq!(p.get("gw.z").unwrap(), None);
        assert_eq!(
            p.job_attr("PMI_process_mapping").unwrap().as_deref(),
            Some("(vector,(0,1,3))")
        );
        p.finalize().unwrap();
        p.finalize().unwrap();
        assert!(p.put("gw.a", "1").is_err());
        assert!(p.barrier().is_err());
        p.abort(3, "bad;\nnews").unwrap();
        t.join().unwrap();
    }

    /// Slurm's replies: left-aligned lengths, rc first, appnum=-1, and the
    /// `pmiid` start-up when there is no rank.
    #[test]
    fn slurm_style_replies_and_pmiid_start() {
        let (client, mut server) = UnixStream::pair().unwrap();
        let t = std::thread::spawn(move || {
            read_line(&mut server);
            server
                .write_all(b"cmd=response_to_init rc=0 pmi_version=2 pmi_subversion=0\n")
                .unwrap();
            assert_eq!(
                read_frame(&mut server),
                "cmd=fullinit;pmiid=4;threaded=FALSE;"
            );
            let body = "cmd=fullinit-response;rc=0;pmi-version=2;pmi-subversion=0;rank=4;size=8;appnum=-1;debugged=FALSE;pmiverbose=FALSE;";
            let mut f = format!("{:<6}", body.len()).into_bytes();
            f.extend_from_slice(body.as_bytes());
            server.write_all(&f).unwrap();
            read_frame(&mut server);
            let body = "cmd=job-getid-response;rc=0;jobid=77.0;";
            let mut f = format!("{:<6}", body.len()).into_bytes();
            f.extend_from_slice(body.as_bytes());
            server.write_all(&f).unwrap();
        });
        let mut p = wired(client);
        p.handshake(&Start {
            rank: None,
            pmiid: Some("4".into()),
            jobid: None,
        })
        .unwrap();
        t.join().unwrap();
        assert_eq!((p.rank(), p.size(), p.appnum()), (4, 8, 0));
        assert_eq!(p.kvsname(), "77.0");
    }

    /// A spawned job's start-up as Slurm answers it (`spawner-jobid`), then
    /// a spawn: the request in Slurm's order, an accepted and a refused
    /// answer.
    #[test]
    fn spawned_start_and_spawn_requests() {
        let (client, mut server) = UnixStream::pair().unwrap();
        let t = std::thread::spawn(move || {
            read_line(&mut server);
            server
                .write_all(b"cmd=response_to_init rc=0 pmi_version=2 pmi_subversion=0\n")
                .unwrap();
            read_frame(&mut server);
            server
                .write_all(&frame(
                    "cmd=fullinit-response;rc=0;rank=0;size=2;appnum=-1;spawner-jobid=9.0;",
                ))
                .unwrap();
            read_frame(&mut server);
            server
                .write_all(&frame("cmd=job-getid-response;rc=0;jobid=9.0-1;"))
                .unwrap();
            assert_eq!(
                read_frame(&mut server),
                "cmd=spawn;ncmds=1;preputcount=1;ppkey0=gw_parent_port;ppval0=gwport:x;\
                 subcmd=/bin/kid;maxprocs=2;argc=1;argv0=child;infokeycount=0;"
            );
            server
                .write_all(&frame("cmd=spawn-response;rc=0;jobid=9.0-2;"))
                .unwrap();
            read_frame(&mut server);
            server
                .write_all(&frame(
                    "cmd=spawn-response;rc=-1;errmsg=spawn failed;errcodes=-1,0;",
                ))
                .unwrap();
            // A spawn answered too late, then a get.
            read_frame(&mut server);
            assert_eq!(read_frame(&mut server), "cmd=kvs-get;key=k;");
            server
                .write_all(&frame("cmd=spawn-response;rc=0;jobid=late;"))
                .unwrap();
            server
                .write_all(&frame("cmd=kvs-get-response;rc=0;found=TRUE;value=v;"))
                .unwrap();
        });
        let mut p = wired(client);
        p.handshake(&Start {
            rank: Some(0),
            pmiid: None,
            jobid: None,
        })
        .unwrap();
        assert_eq!(p.spawner(), Some("9.0"));
        let apps = [super::super::spawn_wire::SpawnApp {
            command: "/bin/kid".into(),
            args: vec!["child".into()],
            maxprocs: 2,
            info: vec![],
        }];
        let pre = [("gw_parent_port".to_string(), "gwport:x".to_string())];
        let ok = p.spawn(&apps, &pre, None).unwrap().unwrap();
        assert_eq!(ok.get("jobid"), Some("9.0-2"));
        let why = p.spawn(&apps, &pre, None).unwrap().unwrap_err();
        assert!(
            why.contains("rc=-1") && why.contains("spawn failed"),
            "{why}"
        );
        // A value the wire cannot carry is refused before anything is sent.
        let bad = [("k".to_string(), "a;b".to_string())];
        assert!(p.spawn(&apps, &bad, None).unwrap().is_err());
        // No answer within the limit (Slurm, a program it cannot start):
        // refused, and the late answer is skipped before the next reply.
        let why = p
            .spawn(&apps, &pre, Some(Duration::from_millis(300)))
            .unwrap()
            .unwrap_err();
        assert!(why.contains("did not answer the spawn"), "{why}");
        assert_eq!(p.get("k").unwrap().as_deref(), Some("v"));
        t.join().unwrap();
    }

    /// Replies a hostile or broken launcher might send during start-up: each
    /// must be a clear error.
    #[test]
    fn hostile_handshakes_are_clear_errors() {
        let init_ok = b"cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0\n".to_vec();
        let with = |frames: &[&str]| {
            let mut v = init_ok.clone();
            for f in frames {
                v.extend_from_slice(&frame(f));
            }
            v
        };
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (
                b"cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=-1\n".to_vec(),
                "refused PMI version 2.0",
            ),
            (b"cmd=maxes\n".to_vec(), "expected cmd=response_to_init"),
            (vec![b'x'; 5000], "no newline within"),
            (
                {
                    let mut v = init_ok.clone();
                    v.extend_from_slice(b"999999");
                    v
                },
                "announces 999999 bytes",
            ),
            (
                {
                    let mut v = init_ok.clone();
                    v.extend_from_slice(b"12ab  cmd=x;");
                    v
                },
                "not a decimal number",
            ),
            (
                {
                    let mut v = init_ok.clone();
                    v.extend_from_slice(b"    40cmd=fullinit-response;");
                    v
                },
                "closed the PMI connection",
            ),
            (with(&["cmd=fullinit-response;rank=0;rc=0;"]), "lacks size="),
            (
                with(&["cmd=fullinit-response;rank=5;size=2;rc=0;"]),
                "inconsistent rank 5 and size 2",
            ),
            (
                with(&["cmd=fullinit-response;rank=-1;size=2;rc=0;"]),
                "unusable rank -1",
            ),
            (
                with(&["cmd=fullinit-response;rank=0;size=99999999999;rc=0;"]),
                "unusable rank 0 or size",
            ),
            (
                with(&["cmd=fullinit-response;rc=14;errmsg=no such rank;"]),
                "no such rank",
            ),
            (
                with(&["cmd=fullinit-response;rank=1;size=2;rc=0;"]),
                "PMI_RANK=0",
            ),
            (
                with(&["cmd=fullinit-response;rank=0;size=2;rc=x;"]),
                "not a number",
            ),
            (
                with(&[
                    "cmd=fullinit-response;rank=0;size=2;rc=0;",
                    "cmd=job-getid-response;rc=0;",
                ]),
                "lacks jobid=",
            ),
            (
                with(&[
                    "cmd=fullinit-response;rank=0;size=2;rc=0;",
                    "cmd=kvs-put-response;rc=0;",
                ]),
                "expected cmd=job-getid-response",
            ),
            (with(&["rank=0;size=2;"]), "does not start with cmd="),
        ];
        for (script, want) in cases {
            let (client, mut server) = UnixStream::pair().unwrap();
            server.write_all(&script).unwrap();
            server.shutdown(std::net::Shutdown::Write).unwrap();
            let mut p = wired(client);
            p.reply_timeout = Duration::from_secs(5);
            let e = p
                .handshake(&Start {
                    rank: Some(0),
                    pmiid: None,
                    jobid: None,
                })
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "want {want:?}, got {e:?}");
        }
    }

    /// Replies after start-up: missing `found`, an overlong value, a failed
    /// fence.
    #[test]
    fn hostile_kvs_replies_are_clear_errors() {
        for (reply, want) in [
            ("cmd=kvs-get-response;rc=0;", "lacks found="),
            (
                "cmd=kvs-get-response;found=maybe;rc=0;",
                "not TRUE or FALSE",
            ),
            ("cmd=kvs-get-response;found=TRUE;rc=0;", "lacks value="),
            (
                &*format!(
                    "cmd=kvs-get-response;found=TRUE;value={};",
                    "v".repeat(2000)
                ),
                "more than the 1023 allowed",
            ),
            ("cmd=kvs-get-response;rc=-1;errmsg=kvs gone;", "kvs gone"),
        ] {
            let (client, mut server) = UnixStream::pair().unwrap();
            server.write_all(&frame(reply)).unwrap();
            let mut p = wired(client);
            let e = p.get("gw.k").unwrap_err().to_string();
            assert!(e.contains(want), "want {want:?}, got {e:?}");
        }
        let (client, mut server) = UnixStream::pair().unwrap();
        server
            .write_all(&frame(
                "cmd=kvs-fence-response;rc=5;errmsg=failed to send temp kvs;",
            ))
            .unwrap();
        let e = wired(client).barrier().unwrap_err().to_string();
        assert!(e.contains("failed to send temp kvs"), "{e}");
    }

    /// A launcher that never answers: an error after the reply timeout.
    #[test]
    fn silent_launcher_times_out() {
        let (client, _server) = UnixStream::pair().unwrap();
        let mut p = wired(client);
        p.reply_timeout = Duration::from_millis(200);
        let t = Instant::now();
        let e = p.barrier().unwrap_err().to_string();
        assert!(e.contains("no PMI reply within"), "{e}");
        assert!(t.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn fuzz_harness_survives_its_seeds() {
        fuzz_replies(b"");
        fuzz_replies(b"\x01");
        fuzz_replies(&[0xff; 70_000]);
        let mut ok = b"cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0\n".to_vec();
        ok.extend_from_slice(&frame("cmd=fullinit-response;rank=0;size=2;appnum=0;rc=0;"));
        ok.extend_from_slice(&frame("cmd=job-getid-response;jobid=j;rc=0;"));
        fuzz_replies(&ok);
    }
}
