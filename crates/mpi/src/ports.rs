//! Ports: `MPI_Open_port`/`Close_port`, `MPI_Comm_accept`/`connect`, and
//! `MPI_Comm_join` — between processes of one job (its first world and
//! the worlds spawned into it), which reach each other by context id.
//!
//! A port name is `gwport:JOB:ID:SERIAL:TOKEN`: the job, the context id of
//! the process that opened it, its number there, and 16 random bytes. The
//! connecting group's root sends its request (the token, its group's
//! context id proposal and members) to that process on the *job
//! communicator* (every context of the job, on a context id no other
//! communicator takes), with a tag of the port; the accepting root checks
//! the token — a wrong one is refused with `MPI_ERR_PORT` and the accept
//! goes on waiting — and answers with the agreed context id (the larger
//! proposal, free at every member of both groups) and its members. Each
//! root broadcasts the outcome to its group.
//!
//! A port also listens on a socket whose addresses end its name: processes
//! of a separately started job connect there (`ports_jobs.rs`).

use crate::comm::Comm;
use crate::datatype::{Basic, Datatype};
use crate::error::{class, err, Result};
use crate::group::Group;
use crate::intercomm::INTER_CTX_IDS;
use crate::{Buf, Mode, Mpi};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The job communicator's context id: above every id `agree_ctx` allows.
const JOB_CTX: u32 = u32::MAX - 15;
/// Tags on the job communicator: requests to port `s` use `REQUEST_TAG + s`
/// (below the tag bound), replies `REPLY_TAG`.
const REQUEST_TAG: i32 = 1 << 20;
const REPLY_TAG: i32 = 17;
/// Most ports one process may have open (each takes a tag).
const MAX_PORTS: u32 = 1 << 16;
/// Most members a request or reply may name (it comes from a peer).
const MAX_MEMBERS: usize = 1 << 16;
/// How long `MPI_Comm_connect` waits for the accepting side
/// (`GW_MPI_CONNECT_TIMEOUT`, seconds), after which it fails with
/// `MPI_ERR_PORT` as the standard allows.
const CONNECT_TIMEOUT_S: u64 = 60;

struct Port {
    token: String,
    /// Where processes of other jobs connect (`ports_jobs.rs`).
    listener: Arc<std::net::TcpListener>,
}

#[derive(Default)]
struct Ports {
    next: u32,
    open: HashMap<u32, Port>,
}

static PORTS: OnceLock<Mutex<Ports>> = OnceLock::new();

fn ports() -> std::sync::MutexGuard<'static, Ports> {
    PORTS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// A parsed port name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortName {
    pub job: String,
    pub ctx: u32,
    pub serial: u32,
    pub token: String,
    /// `IP:PORT+IP:PORT...` where the opener listens for other jobs.
    pub addrs: Option<String>,
}

impl PortName {
    pub fn parse(s: &str) -> Result<PortName> {
        let bad = || {
            err(
                class::PORT,
                format!("{s:?} is not a port name of gridwire (gwport:JOB:ID:SERIAL:TOKEN)"),
            )
        };
        let v: Vec<&str> = s.trim_end_matches('\0').splitn(6, ':').collect();
        let (tag, job, ctx, serial, token, addrs) = match v[..] {
            [tag, job, ctx, serial, token] => (tag, job, ctx, serial, token, None),
            [tag, job, ctx, serial, token, addrs] if !addrs.is_empty() => {
                (tag, job, ctx, serial, token, Some(addrs.to_string()))
            }
            _ => return Err(bad()),
        };
        if tag != "gwport" || token.len() != 32 || !token.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad());
        }
        Ok(PortName {
            job: job.into(),
            ctx: ctx.parse().map_err(|_| bad())?,
            serial: serial
                .parse()
                .ok()
                .filter(|&s| s < MAX_PORTS)
                .ok_or_else(bad)?,
            token: token.into(),
            addrs,
        })
    }
}

fn u32_buf(v: &mut [u32]) -> Buf {
    let t = Datatype::predefined(Basic::U32, "u32");
    // SAFETY: callers keep `v` alive until the operation using the buffer
    // completed (blocking calls, or a wait before `v` goes away).
    unsafe { Buf::new(v.as_mut_ptr() as usize, v.len(), t) }
}

fn token_words(token: &str) -> [u32; 4] {
    let mut w = [0u32; 4];
    for (i, c) in token.as_bytes().chunks(8).enumerate().take(4) {
        w[i] = u32::from_str_radix(std::str::from_utf8(c).unwrap_or("0"), 16).unwrap_or(0);
    }
    w
}

impl Mpi {
    /// The job communicator: every context id of the job, rank = id.
    fn job_comm(&self) -> &Arc<Comm> {
        static JOB: OnceLock<Arc<Comm>> = OnceLock::new();
        JOB.get_or_init(|| {
            let all = Group::new((0..self.ctx().capacity()).collect());
            Comm::new(JOB_CTX, all, self.me(), "")
        })
    }

    /// `MPI_Open_port`: a fresh port of this process.
    pub fn open_port(&self) -> Result<String> {
        let mut b = [0u8; 16];
        getrandom::getrandom(&mut b).map_err(|e| {
            err(
                class::INTERN,
                format!("no random bytes for a port token: {e}"),
            )
        })?;
        let token: String = b.iter().map(|x| format!("{x:02x}")).collect();
        let (listener, addrs) = crate::ports_jobs::listen()?;
        listener
            .set_nonblocking(true)
            .map_err(|e| err(class::PORT, format!("cannot listen: {e}")))?;
        let mut p = ports();
        if p.open.len() as u32 >= MAX_PORTS {
            return Err(err(class::PORT, "too many open ports"));
        }
        let serial = loop {
            let s = p.next % MAX_PORTS;
            p.next = p.next.wrapping_add(1);
            if !p.open.contains_key(&s) {
                break s;
            }
        };
        p.open.insert(
            serial,
            Port {
                token: token.clone(),
                listener: Arc::new(listener),
            },
        );
        Ok(format!(
            "gwport:{}:{}:{serial}:{token}:{addrs}",
            self.ctx().job_id(),
            self.me()
        ))
    }

    /// `MPI_Close_port`.
    pub fn close_port(&self, name: &str) -> Result<()> {
        let p = PortName::parse(name)?;
        let mut ports = ports();
        match ports.open.get(&p.serial) {
            Some(o) if o.token == p.token && p.ctx == self.me() => {
                ports.open.remove(&p.serial);
                Ok(())
            }
            _ => Err(err(
                class::PORT,
                format!("{name:?} is not a port open here"),
            )),
        }
    }

    /// The root's outcome, broadcast over `comm`: (context id, remote members).
    fn share(
        &self,
        comm: &Comm,
        root: i32,
        mine: Option<Result<(u32, Vec<u32>)>>,
    ) -> Result<(u32, Vec<u32>)> {
        let (mut head, mut members, why) = match mine {
            Some(Ok((ctx, m))) => ([1, ctx, m.len() as u32], m, None),
            Some(Err(e)) => ([0, e.class as u32, 0], Vec::new(), Some(e)),
            None => ([0; 3], Vec::new(), None),
        };
        self.bcast(comm, &u32_buf(&mut head), root)?;
        if head[0] != 1 {
            return Err(why.unwrap_or_else(|| {
                err(
                    head[1] as i32,
                    "the root could not connect the groups (it says why)",
                )
            }));
        }
        members.resize(head[2] as usize, 0);
        self.bcast(comm, &u32_buf(&mut members), root)?;
        Ok((head[1], members))
    }

    fn check_root(comm: &Comm, root: i32) -> Result<bool> {
        if comm.is_inter() {
            return Err(err(class::COMM, "accept/connect need an intracommunicator"));
        }
        if root < 0 || root as u32 >= comm.size {
            return Err(err(class::ROOT, format!("root {root} is invalid")));
        }
        Ok(comm.rank == root as u32)
    }

    fn finish_connection(&self, comm: &Comm, ctx: u32, remote: Vec<u32>) -> Result<Arc<Comm>> {
        let cap = self.ctx().capacity();
        let mut seen = std::collections::HashSet::new();
        if remote.is_empty()
            || remote.len() > MAX_MEMBERS
            || !remote
                .iter()
                .all(|&m| m < cap && seen.insert(m) && comm.group.rank_of(m).is_none())
            || !ctx.is_multiple_of(2)
            || ctx > u32::MAX - 16
        {
            return Err(err(class::INTERN, "the other group's answer is malformed"));
        }
        self.reserve_ctx(ctx, INTER_CTX_IDS);
        Ok(self.new_inter_from(ctx, comm.group.clone(), Group::new(remote), comm.rank))
    }

    /// `MPI_Comm_accept` on the port `name` (meaningful at `root`).
    pub fn accept(&self, name: &str, root: i32, comm: &Comm) -> Result<Arc<Comm>> {
        self.accept_until(name, root, comm, None)
    }

    /// [`Mpi::accept`], giving up at `deadline` (at the root) with
    /// `MPI_ERR_PORT` (a spawn under Hydra whose children never come).
    pub(crate) fn accept_until(
        &self,
        name: &str,
        root: i32,
        comm: &Comm,
        deadline: Option<Instant>,
    ) -> Result<Arc<Comm>> {
        let at_root = Self::check_root(comm, root)?;
        let proposal = self.ctx_proposal(comm)?;
        let mut pending = None;
        let mine = at_root.then(|| self.accept_root(name, comm, proposal, &mut pending, deadline));
        // Whether a process of another job came: [1] or [0].
        let mut kind = [u32::from(pending.is_some())];
        self.bcast(comm, &u32_buf(&mut kind), root)?;
        if kind[0] == 1 {
            return self.accept_foreign(comm, root, proposal, pending);
        }
        let (ctx, remote) = self.share(comm, root, mine)?;
        self.finish_connection(comm, ctx, remote)
    }

    /// Waits for a request of this job on the job communicator or a
    /// connection of another job on the port's socket; the latter, once
    /// authenticated, is left in `foreign` (and the result is unused).
    fn accept_root(
        &self,
        name: &str,
        comm: &Comm,
        proposal: u32,
        foreign: &mut Option<crate::ports_jobs::Pending>,
        deadline: Option<Instant>,
    ) -> Result<(u32, Vec<u32>)> {
        let p = PortName::parse(name)?;
        let (token, listener) = match ports().open.get(&p.serial) {
            Some(o) if o.token == p.token && p.ctx == self.me() => {
                (token_words(&o.token), o.listener.clone())
            }
            _ => {
                return Err(err(
                    class::PORT,
                    format!("{name:?} is not a port open here"),
                ))
            }
        };
        let jc = self.job_comm().clone();
        let tag = REQUEST_TAG + p.serial as i32;
        loop {
            // A request: [token x4, proposal, n, members...].
            let mut got = None;
            self.engine.wait_for(|| {
                if let Ok((mut s, _)) = listener.accept() {
                    let _ = s.set_nonblocking(false);
                    match crate::ports_jobs::root_accept(&mut s, &p.token) {
                        Ok((key, proposal, size)) => {
                            *foreign = Some(crate::ports_jobs::Pending {
                                stream: s,
                                key,
                                proposal,
                                size,
                            });
                            return true;
                        }
                        Err(why) => {
                            if crate::params::flag("MPI_DEBUG") {
                                gridwire_core::say!("gridwire mpi: port {name:?}: refused a connection of another job: {why}");
                            }
                        }
                    }
                }
                got = self.iprobe(&jc, crate::ANY_SOURCE, tag).ok().flatten();
                got.is_some() || deadline.is_some_and(|d| Instant::now() >= d)
            });
            let Some(st) = got else {
                if foreign.is_none() && deadline.is_some_and(|d| Instant::now() >= d) {
                    return Err(err(
                        class::PORT,
                        format!("nobody connected to port {name:?} in time"),
                    ));
                }
                return Ok((0, Vec::new()));
            };
            let words = (st.bytes / 4).min(6 + MAX_MEMBERS);
            let mut req = vec![0u32; words.max(6)];
            let st = self.recv(&jc, u32_buf(&mut req), st.source, tag)?;
            let from = st.source;
            let n = req[5] as usize;
            let ok_shape = st.bytes == (6 + n) * 4 && (1..=MAX_MEMBERS).contains(&n);
            let mut reply = if !ok_shape || req[..4] != token {
                vec![0, class::PORT as u32, 0]
            } else {
                match Self::agree_ctx(proposal, req[4]) {
                    Ok(ctx) => {
                        let mut r = vec![1, ctx, comm.size];
                        r.extend_from_slice(&comm.group.members);
                        r
                    }
                    Err(_) => vec![0, class::INTERN as u32, 0],
                }
            };
            let s = self.isend(&jc, &u32_buf(&mut reply), from, REPLY_TAG, Mode::Standard)?;
            self.wait(&s);
            if reply[0] == 1 {
                return Ok((reply[1], req[6..6 + n].to_vec()));
            }
            // A wrong token or a malformed request: refused, keep waiting.
        }
    }

    /// `MPI_Comm_connect` to the port `name` (meaningful at `root`).
    pub fn connect(&self, name: &str, root: i32, comm: &Comm) -> Result<Arc<Comm>> {
        let at_root = Self::check_root(comm, root)?;
        let proposal = self.ctx_proposal(comm)?;
        // A port of another job (with its addresses) is reached through
        // them: [1]; anything else goes the way within the job: [0].
        let parsed = at_root.then(|| PortName::parse(name));
        let other_job = match &parsed {
            Some(Ok(p)) if p.job != self.ctx().job_id() => {
                p.addrs.clone().map(|a| (a, p.token.clone()))
            }
            _ => None,
        };
        let mut kind = [u32::from(other_job.is_some())];
        self.bcast(comm, &u32_buf(&mut kind), root)?;
        if kind[0] == 1 {
            let port = other_job.as_ref().map(|(a, t)| (a.as_str(), t.as_str()));
            return self.connect_foreign(comm, root, proposal, port);
        }
        let mine = at_root.then(|| self.connect_root(name, comm, proposal));
        let (ctx, remote) = self.share(comm, root, mine)?;
        self.finish_connection(comm, ctx, remote)
    }

    fn connect_root(&self, name: &str, comm: &Comm, proposal: u32) -> Result<(u32, Vec<u32>)> {
        let p = PortName::parse(name)?;
        if p.job != self.ctx().job_id() {
            return Err(err(
                class::PORT,
                format!("port {name:?} belongs to another job and names no address to reach it"),
            ));
        }
        if p.ctx >= self.ctx().capacity() {
            return Err(err(
                class::PORT,
                format!("port {name:?} names no process of this job"),
            ));
        }
        let jc = self.job_comm().clone();
        let mut req = token_words(&p.token).to_vec();
        req.push(proposal);
        req.push(comm.size);
        req.extend_from_slice(&comm.group.members);
        let s = self.isend(
            &jc,
            &u32_buf(&mut req),
            p.ctx as i32,
            REQUEST_TAG + p.serial as i32,
            Mode::Standard,
        )?;
        let timeout = std::env::var("GW_MPI_CONNECT_TIMEOUT")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(CONNECT_TIMEOUT_S);
        let deadline = Instant::now() + Duration::from_secs(timeout);
        let mut got = None;
        let mut broken = None;
        self.engine.wait_for(|| {
            if let Some(why) = self.ctx().link_error(p.ctx) {
                broken = Some(why);
                return true;
            }
            got = self.iprobe(&jc, p.ctx as i32, REPLY_TAG).ok().flatten();
            got.is_some() || Instant::now() >= deadline
        });
        if let Some(why) = broken {
            return Err(err(
                class::PORT,
                format!("the process of port {name:?} is gone: {why}"),
            ));
        }
        let Some(st) = got else {
            self.cancel(&s);
            return Err(err(
                class::PORT,
                format!(
                    "nobody accepted on port {name:?} within {timeout} s (GW_MPI_CONNECT_TIMEOUT)"
                ),
            ));
        };
        self.wait(&s);
        let mut reply = vec![0u32; (st.bytes / 4).clamp(3, 3 + MAX_MEMBERS)];
        let st = self.recv(&jc, u32_buf(&mut reply), p.ctx as i32, REPLY_TAG)?;
        if reply[0] != 1 {
            return Err(err(
                if reply[1] as i32 == class::PORT {
                    class::PORT
                } else {
                    class::INTERN
                },
                format!("the accepting side refused the connection to {name:?} (wrong token?)"),
            ));
        }
        let n = reply[2] as usize;
        if st.bytes != (3 + n) * 4 {
            return Err(err(
                class::INTERN,
                "the accepting side's answer is malformed",
            ));
        }
        Ok((reply[1], reply[3..3 + n].to_vec()))
    }

    /// `MPI_Comm_join` over a connected stream socket: both sides swap
    /// their job, context id and context id proposal and make an
    /// intercommunicator of the two.
    pub fn comm_join(&self, fd: i32) -> Result<Arc<Comm>> {
        let me = format!(
            "gwjoin {} {} {} {}\n",
            self.ctx().job_id(),
            self.ctx().secret_fingerprint(),
            self.me(),
            self.next_ctx.load(std::sync::atomic::Ordering::Acquire)
        );
        let theirs = swap_line(fd, &me)?;
        let v: Vec<&str> = theirs.split_whitespace().collect();
        let bad = || {
            err(
                class::ARG,
                "MPI_Comm_join: the other side did not answer as gridwire does",
            )
        };
        let [tag, job, fp, id, proposal] = v[..] else {
            return Err(bad());
        };
        if tag != "gwjoin" {
            return Err(bad());
        }
        let id: u32 = id.parse().map_err(|_| bad())?;
        let proposal: u32 = proposal.parse().map_err(|_| bad())?;
        let mine = self.next_ctx.load(std::sync::atomic::Ordering::Acquire);
        let ctx = Self::agree_ctx(mine, proposal)?;
        if job != self.ctx().job_id() || fp != self.ctx().secret_fingerprint() {
            // Another job (ports_jobs.rs): the smaller (job, id) listens.
            let mine = (self.ctx().job_id(), self.me());
            if mine == (job, id) {
                return Err(bad());
            }
            return self.join_foreign(fd, mine < (job, id), ctx);
        }
        if id == self.me() || id >= self.ctx().capacity() {
            return Err(bad());
        }
        self.reserve_ctx(ctx, INTER_CTX_IDS);
        Ok(self.new_inter_from(ctx, Group::new(vec![self.me()]), Group::new(vec![id]), 0))
    }
}

/// Writes `line` to the socket `fd` and reads the other side's line
/// (at most 4096 bytes, 60 s).
pub(crate) fn swap_line(fd: i32, line: &str) -> Result<String> {
    use std::io::{Read, Write};
    use std::os::fd::FromRawFd;
    if fd < 0 {
        return Err(err(
            class::ARG,
            format!("MPI_Comm_join: invalid descriptor {fd}"),
        ));
    }
    // SAFETY: the program lends us its socket for the call; ManuallyDrop
    // keeps it open (it stays the program's).
    let mut f = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(fd) });
    let io = |e: std::io::Error| err(class::ARG, format!("MPI_Comm_join: the socket failed: {e}"));
    f.write_all(line.as_bytes()).map_err(io)?;
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut b = [0u8; 1];
    while !got.ends_with(b"\n") {
        if got.len() > 4096 || Instant::now() > deadline {
            return Err(err(
                class::ARG,
                "MPI_Comm_join: the other side sent no answer line",
            ));
        }
        match f.read(&mut b) {
            Ok(0) => {
                return Err(err(
                    class::ARG,
                    "MPI_Comm_join: the other side closed the socket",
                ))
            }
            Ok(_) => got.push(b[0]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io(e)),
        }
    }
    Ok(String::from_utf8_lossy(&got).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_names_parse() {
        let t = "0123456789abcdef0123456789abcdef";
        let p = PortName::parse(&format!("gwport:12x34:3:7:{t}")).unwrap();
        assert_eq!((p.job.as_str(), p.ctx, p.serial), ("12x34", 3, 7));
        assert_eq!(token_words(t)[0], 0x01234567);
        for bad in [
            "",
            "gwport:a:1:2",
            "tcp:a:1:2:x",
            &format!("gwport:a:x:2:{t}"),
            "gwport:a:1:2:zz",
        ] {
            assert_eq!(
                PortName::parse(bad).unwrap_err().class,
                class::PORT,
                "{bad}"
            );
        }
        assert!(PortName::parse(&format!("gwport:a:1:{}:{t}", MAX_PORTS)).is_err());
        // With the addresses for other jobs (they may hold colons).
        let p = PortName::parse(&format!("gwport:j:3:7:{t}:10.0.0.1:5000+127.0.0.1:5000")).unwrap();
        assert_eq!(p.addrs.as_deref(), Some("10.0.0.1:5000+127.0.0.1:5000"));
        assert!(PortName::parse(&format!("gwport:j:3:7:{t}:")).is_err());
    }
}
