//! `MPI_Comm_accept`/`connect` between two separately started jobs.
//!
//! The two jobs share neither context ids nor a job secret, and nothing of
//! either secret crosses: the port's 16-byte token is the only shared
//! secret. A port name carries, after the token, the addresses where the
//! opener listens (`gwport:JOB:ID:SERIAL:TOKEN:IP:PORT+IP:PORT...`).
//!
//! 1. *Roots.* The connecting root opens a socket to the port and both run
//!    a challenge-response with the token as key (each proves it knows the
//!    token over both fresh nonces, without sending it). A wrong token is
//!    refused (one byte 0, the socket closed) and the accept goes on
//!    waiting; the connecting side gets `MPI_ERR_PORT`. Both derive a
//!    session key from the token and the nonces.
//! 2. *Exchange.* The connecting root sends its group's context-id proposal
//!    and size; the accepting group (told by its root) opens one listening
//!    socket per member and the root answers with the agreed context id and
//!    those addresses. Each root broadcasts the outcome and the key.
//! 3. *Mesh.* Every connecting process opens a socket to every accepting
//!    one and both prove they know the session key, binding both ranks.
//!    The socket becomes the runtime's tcp link to the other process under
//!    a local *alias* id above the job's ids (`Context::attach_foreign`;
//!    each group agrees on a first alias, the largest next free alias of
//!    its members, so all members name the others alike).
//!
//! `MPI_Comm_disconnect` departs the aliases (closing their sockets);
//! when a job ends its sockets close with it.
//!
//! `MPI_Comm_join` between two jobs ([`Mpi::join_foreign`]) takes the
//! same path with the program's socket as the shared secret's channel:
//! the process of the smaller (job, id) listens and sends its address and
//! a fresh 32-byte key over the joined socket, the other connects and both
//! prove the key as in step 3; the new socket becomes the link (the
//! program's socket stays the program's, quiescent, as the standard asks).

use crate::comm::Comm;
use crate::datatype::{Basic, Datatype};
use crate::error::{class, err, Result};
use crate::group::Group;
use crate::intercomm::INTER_CTX_IDS;
use crate::{Buf, Mpi};
use gridwire_core::auth::{self, Role, NONCE_LEN, PROOF_LEN};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Words of one member's record in the gather: [next alias, length, bytes].
const RECORD_WORDS: usize = 64;
/// Most members a group of another job may have.
const MAX_FOREIGN_MEMBERS: u32 = 4096;
const ROOT_HELLO: &[u8; 4] = b"GWJ1";
const MESH_HELLO: &[u8; 4] = b"GWM1";

/// The next alias id this process may give a process of another job.
static NEXT_ALIAS: AtomicU32 = AtomicU32::new(0);

/// The session key both roots derive; what the mesh proves.
pub(crate) type Key = [u8; 32];

fn token_key(token: &str) -> Key {
    let mut k = [0u8; 32];
    for (i, c) in token.as_bytes().chunks(2).enumerate().take(16) {
        k[i] = u8::from_str_radix(std::str::from_utf8(c).unwrap_or("0"), 16).unwrap_or(0);
    }
    k
}

fn session_key(token: &Key, acceptor_nonce: &[u8; 16], connector_nonce: &[u8; 16]) -> Key {
    // Ids no handshake proof uses: a proof is never a key.
    auth::proof(
        token,
        Role::Acceptor,
        acceptor_nonce,
        connector_nonce,
        u32::MAX,
        u32::MAX,
    )
}

pub(crate) fn timeout() -> Duration {
    Duration::from_secs(
        std::env::var("GW_MPI_CONNECT_TIMEOUT")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(60),
    )
}

fn io_err(what: &str) -> impl Fn(std::io::Error) -> crate::error::MpiError + '_ {
    move |e| err(class::PORT, format!("{what}: {e}"))
}

/// The IPv4 addresses of this host, others than loopback first.
pub(crate) fn host_addrs() -> Vec<Ipv4Addr> {
    let mut v = Vec::new();
    let mut ifs: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `ifs` with a list we walk read-only and free
    // with freeifaddrs; `ifa_addr` of family AF_INET points at a sockaddr_in.
    unsafe {
        if libc::getifaddrs(&mut ifs) == 0 {
            let mut p = ifs;
            while !p.is_null() {
                let a = (*p).ifa_addr;
                if !a.is_null() && (*a).sa_family as i32 == libc::AF_INET {
                    let sin = &*(a as *const libc::sockaddr_in);
                    let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
                    if !ip.is_loopback() && !v.contains(&ip) {
                        v.push(ip);
                    }
                }
                p = (*p).ifa_next;
            }
            libc::freeifaddrs(ifs);
        }
    }
    v.push(Ipv4Addr::LOCALHOST);
    v
}

/// A listening socket on every address and the `IP:PORT+IP:PORT` naming it.
pub(crate) fn listen() -> Result<(TcpListener, String)> {
    let l = TcpListener::bind((Ipv4Addr::UNSPECIFIED, 0)).map_err(io_err("cannot listen"))?;
    let port = l.local_addr().map_err(io_err("cannot listen"))?.port();
    let names: Vec<String> = host_addrs()
        .iter()
        .map(|ip| format!("{ip}:{port}"))
        .collect();
    Ok((l, names.join("+")))
}

/// Connects to the first address of `addrs` (`IP:PORT+...`) that answers.
fn dial(addrs: &str, deadline: Instant) -> Result<TcpStream> {
    let mut why = String::from("no address");
    for a in addrs.split('+') {
        let Ok(sa) = a.parse::<SocketAddr>() else {
            why = format!("{a:?} is not an address");
            continue;
        };
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        match TcpStream::connect_timeout(&sa, left.min(Duration::from_secs(5))) {
            Ok(s) => {
                let _ = s.set_read_timeout(Some(left.max(Duration::from_millis(100))));
                let _ = s.set_write_timeout(Some(left.max(Duration::from_millis(100))));
                let _ = s.set_nodelay(true);
                return Ok(s);
            }
            Err(e) => why = format!("{sa}: {e}"),
        }
    }
    Err(err(class::PORT, format!("cannot reach {addrs:?}: {why}")))
}

fn read_array<const N: usize>(s: &mut TcpStream) -> std::io::Result<[u8; N]> {
    let mut b = [0u8; N];
    s.read_exact(&mut b)?;
    Ok(b)
}

fn read_u32(s: &mut TcpStream) -> std::io::Result<u32> {
    Ok(u32::from_le_bytes(read_array::<4>(s)?))
}

/// The accepting root's side of step 1 on a fresh connection: the session
/// key and the connecting group's (proposal, size), or why it was refused.
pub(crate) fn root_accept(
    s: &mut TcpStream,
    token: &str,
) -> std::result::Result<(Key, u32, u32), String> {
    let deadline = Duration::from_secs(10);
    let _ = s.set_read_timeout(Some(deadline));
    let _ = s.set_write_timeout(Some(deadline));
    let _ = s.set_nodelay(true);
    let io = |e: std::io::Error| e.to_string();
    let hello = read_array::<4>(s).map_err(io)?;
    if &hello != ROOT_HELLO {
        return Err("not a gridwire connect".into());
    }
    let theirs = read_array::<NONCE_LEN>(s).map_err(io)?;
    let key = token_key(token);
    let mine = auth::try_nonce().map_err(io)?;
    let proof = auth::proof(&key, Role::Acceptor, &mine, &theirs, 0, 1);
    s.write_all(&[&mine[..], &proof[..]].concat()).map_err(io)?;
    let their_proof = read_array::<PROOF_LEN>(s).map_err(io)?;
    if !auth::verify(&key, Role::Connector, &theirs, &mine, 1, 0, &their_proof) {
        let _ = s.write_all(&[0]);
        return Err("wrong token".into());
    }
    s.write_all(&[1]).map_err(io)?;
    let proposal = read_u32(s).map_err(io)?;
    let n = read_u32(s).map_err(io)?;
    if n == 0 || n > MAX_FOREIGN_MEMBERS {
        return Err(format!("a group of {n} processes"));
    }
    Ok((session_key(&key, &mine, &theirs), proposal, n))
}

/// The connecting root's steps 1 and 2: the agreed context id, the key and
/// the accepting members' addresses.
fn root_connect(
    addrs: &str,
    token: &str,
    proposal: u32,
    size: u32,
    deadline: Instant,
) -> Result<(u32, Key, Vec<String>)> {
    let mut s = dial(addrs, deadline)?;
    let io = io_err("the connection to the accepting job failed");
    let key = token_key(token);
    let mine = auth::try_nonce().map_err(&io)?;
    s.write_all(&[&ROOT_HELLO[..], &mine[..]].concat())
        .map_err(&io)?;
    let theirs = read_array::<NONCE_LEN>(&mut s).map_err(&io)?;
    let their_proof = read_array::<PROOF_LEN>(&mut s).map_err(&io)?;
    if !auth::verify(&key, Role::Acceptor, &theirs, &mine, 0, 1, &their_proof) {
        return Err(err(
            class::PORT,
            "the process at the port does not know its token (not the port's opener)",
        ));
    }
    let proof = auth::proof(&key, Role::Connector, &mine, &theirs, 1, 0);
    s.write_all(&proof).map_err(&io)?;
    let verdict = read_array::<1>(&mut s).map_err(|_| {
        err(
            class::PORT,
            "the accepting job refused the connection (wrong token)",
        )
    })?;
    if verdict[0] != 1 {
        return Err(err(
            class::PORT,
            "the accepting job refused the connection (wrong token)",
        ));
    }
    s.write_all(&[proposal.to_le_bytes(), size.to_le_bytes()].concat())
        .map_err(&io)?;
    let ctx = read_u32(&mut s).map_err(&io)?;
    let n = read_u32(&mut s).map_err(&io)?;
    if n == 0 || n > MAX_FOREIGN_MEMBERS {
        return Err(err(class::PORT, "the accepting job's answer is malformed"));
    }
    let mut members = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let len = read_u32(&mut s).map_err(&io)? as usize;
        if len > RECORD_WORDS * 4 {
            return Err(err(class::PORT, "the accepting job's answer is malformed"));
        }
        let mut b = vec![0u8; len];
        s.read_exact(&mut b).map_err(&io)?;
        members.push(String::from_utf8_lossy(&b).into_owned());
    }
    Ok((ctx, session_key(&key, &theirs, &mine), members))
}

/// The accepting root's answer of step 2.
pub(crate) fn root_answer(s: &mut TcpStream, ctx: u32, members: &[String]) -> std::io::Result<()> {
    let mut out = Vec::new();
    out.extend_from_slice(&ctx.to_le_bytes());
    out.extend_from_slice(&(members.len() as u32).to_le_bytes());
    for m in members {
        out.extend_from_slice(&(m.len() as u32).to_le_bytes());
        out.extend_from_slice(m.as_bytes());
    }
    s.write_all(&out)
}

fn u32_buf(v: &mut [u32], count: usize) -> Buf {
    let t = Datatype::predefined(Basic::U32, "u32");
    // SAFETY: callers keep `v` alive until the (blocking) operation returns.
    unsafe { Buf::new(v.as_mut_ptr() as usize, count, t) }
}

fn key_words(k: &Key) -> [u32; 8] {
    let mut w = [0u32; 8];
    for (i, c) in k.chunks(4).enumerate() {
        w[i] = u32::from_le_bytes(c.try_into().unwrap_or([0; 4]));
    }
    w
}

fn words_key(w: &[u32]) -> Key {
    let mut k = [0u8; 32];
    for (i, x) in w.iter().take(8).enumerate() {
        k[i * 4..i * 4 + 4].copy_from_slice(&x.to_le_bytes());
    }
    k
}

fn pack_str(s: &str, rec: &mut [u32]) {
    let b = s.as_bytes();
    let n = b.len().min((rec.len() - 1) * 4);
    rec[0] = n as u32;
    for (i, c) in b[..n].chunks(4).enumerate() {
        let mut w = [0u8; 4];
        w[..c.len()].copy_from_slice(c);
        rec[1 + i] = u32::from_le_bytes(w);
    }
}

fn unpack_str(rec: &[u32]) -> String {
    let n = (rec[0] as usize).min((rec.len() - 1) * 4);
    let b: Vec<u8> = rec[1..]
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .take(n)
        .collect();
    String::from_utf8_lossy(&b).into_owned()
}

/// What an accepting root hands its group after step 1.
pub(crate) struct Pending {
    pub stream: TcpStream,
    pub key: Key,
    pub proposal: u32,
    pub size: u32,
}

impl Mpi {
    fn next_alias(&self) -> u32 {
        NEXT_ALIAS
            .fetch_max(self.ctx().capacity(), Ordering::AcqRel)
            .max(self.ctx().capacity())
    }

    /// Whether `id` names a process of another job.
    pub fn is_foreign(&self, id: u32) -> bool {
        id >= self.ctx().capacity()
    }

    /// `MPI_Comm_disconnect`'s last step: the sockets to processes of other
    /// jobs in `comm` close.
    pub fn release_foreign(&self, comm: &Comm) {
        for &m in comm.peers.members.iter().chain(comm.group.members.iter()) {
            if self.is_foreign(m) {
                let _ = self.ctx().peer_departed(m, "disconnected");
            }
        }
    }

    /// Step 2 and 3 at every member of the accepting group; `pending` is
    /// the root's (None elsewhere; the root's failures are broadcast).
    pub(crate) fn accept_foreign(
        &self,
        comm: &Comm,
        root: i32,
        proposal: u32,
        pending: Option<Pending>,
    ) -> Result<Arc<Comm>> {
        let (listener, addrs) = listen()?;
        let mut rec = [0u32; RECORD_WORDS];
        rec[0] = self.next_alias();
        pack_str(&addrs, &mut rec[1..]);
        let at_root = comm.rank == root as u32;
        let mut all = vec![
            0u32;
            if at_root {
                RECORD_WORDS * comm.size as usize
            } else {
                0
            }
        ];
        self.gather(
            comm,
            Some(&u32_buf(&mut rec, RECORD_WORDS)),
            &u32_buf(&mut all, RECORD_WORDS),
            root,
        )?;
        // [ok or error class, ctx, first alias, remote size, key x8]
        let mut head = [0u32; 12];
        let mut why = None;
        if let Some(mut p) = pending {
            let base = all.chunks(RECORD_WORDS).map(|r| r[0]).max().unwrap_or(0);
            let members: Vec<String> = all
                .chunks(RECORD_WORDS)
                .map(|r| unpack_str(&r[1..]))
                .collect();
            let outcome = Self::agree_ctx(proposal, p.proposal).and_then(|ctx| {
                if base
                    .checked_add(p.size)
                    .is_none_or(|e| e > self.ctx().foreign_end())
                {
                    return Err(err(
                        class::NO_MEM,
                        "no room for more processes of other jobs (GW_FOREIGN_PEERS)",
                    ));
                }
                root_answer(&mut p.stream, ctx, &members)
                    .map_err(io_err("the connecting job went away"))?;
                Ok(ctx)
            });
            head = match outcome {
                Ok(ctx) => {
                    let mut h = [1, ctx, base, p.size, 0, 0, 0, 0, 0, 0, 0, 0];
                    h[4..].copy_from_slice(&key_words(&p.key));
                    h
                }
                Err(e) => {
                    let h = [0, e.class as u32, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
                    why = Some(e);
                    h
                }
            };
        }
        self.bcast(comm, &u32_buf(&mut head, 12), root)?;
        if head[0] != 1 {
            if let Some(e) = why {
                return Err(e);
            }
            return Err(err(
                head[1] as i32,
                "the connection between the jobs failed at the root",
            ));
        }
        let (ctx, base, n, key) = (head[1], head[2], head[3], words_key(&head[4..]));
        NEXT_ALIAS.fetch_max(base + n, Ordering::AcqRel);
        self.mesh_accept(&listener, comm.rank, base, n, &key)?;
        self.reserve_ctx(ctx, INTER_CTX_IDS);
        let remote = Group::new((base..base + n).collect());
        Ok(self.new_inter_from(ctx, comm.group.clone(), remote, comm.rank))
    }

    /// Accepts the `n` processes of the connecting group on `listener`.
    fn mesh_accept(
        &self,
        listener: &TcpListener,
        me: u32,
        base: u32,
        n: u32,
        key: &Key,
    ) -> Result<()> {
        let deadline = Instant::now() + timeout();
        listener.set_nonblocking(true).map_err(io_err("listen"))?;
        let mut seen = vec![false; n as usize];
        let mut left = n;
        while left > 0 {
            if Instant::now() > deadline {
                return Err(err(
                    class::PORT,
                    format!("{left} processes of the connecting job did not connect in time"),
                ));
            }
            let mut s = match listener.accept() {
                Ok((s, _)) => s,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(1));
                    continue;
                }
                Err(e) => return Err(io_err("accept")(e)),
            };
            let _ = s.set_nonblocking(false);
            let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
            let _ = s.set_nodelay(true);
            // A connection that fails the handshake is dropped; the
            // members of the group may still come.
            let Ok(j) = mesh_server(&mut s, me, n, key) else {
                continue;
            };
            if std::mem::replace(&mut seen[j as usize], true) {
                continue;
            }
            let _ = s.set_read_timeout(None);
            self.ctx()
                .attach_foreign(base + j, s, alias_host(base + j))
                .map_err(|e| err(class::PORT, e.to_string()))?;
            left -= 1;
        }
        Ok(())
    }

    /// Steps 1-3 at every member of the connecting group (the port name
    /// and its parse are the root's).
    pub(crate) fn connect_foreign(
        &self,
        comm: &Comm,
        root: i32,
        proposal: u32,
        port: Option<(&str, &str)>,
    ) -> Result<Arc<Comm>> {
        let mut mine = [self.next_alias()];
        let at_root = comm.rank == root as u32;
        let mut all = vec![0u32; if at_root { comm.size as usize } else { 0 }];
        self.gather(
            comm,
            Some(&u32_buf(&mut mine, 1)),
            &u32_buf(&mut all, 1),
            root,
        )?;
        let deadline = Instant::now() + timeout();
        let mut head = [0u32; 12];
        let mut records = Vec::new();
        let mut why = None;
        if let Some((addrs, token)) = port {
            let base = all.iter().copied().max().unwrap_or(0);
            match root_connect(addrs, token, proposal, comm.size, deadline) {
                Ok((ctx, key, members)) => {
                    head = [1, ctx, base, members.len() as u32, 0, 0, 0, 0, 0, 0, 0, 0];
                    head[4..].copy_from_slice(&key_words(&key));
                    records = vec![0u32; members.len() * RECORD_WORDS];
                    for (m, r) in members.iter().zip(records.chunks_mut(RECORD_WORDS)) {
                        pack_str(m, r);
                    }
                    if base
                        .checked_add(members.len() as u32)
                        .is_none_or(|e| e > self.ctx().foreign_end())
                    {
                        head = [0, class::NO_MEM as u32, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
                    }
                }
                Err(e) => {
                    head = [0, e.class as u32, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
                    why = Some(e);
                }
            }
        }
        self.bcast(comm, &u32_buf(&mut head, 12), root)?;
        if head[0] != 1 {
            if let Some(e) = why {
                return Err(e);
            }
            return Err(err(
                head[1] as i32,
                "connecting to the other job failed at the root (a wrong token, or no one at the port)",
            ));
        }
        let (ctx, base, n, key) = (head[1], head[2], head[3], words_key(&head[4..]));
        records.resize(n as usize * RECORD_WORDS, 0);
        self.bcast(
            comm,
            &u32_buf(&mut records, n as usize * RECORD_WORDS),
            root,
        )?;
        NEXT_ALIAS.fetch_max(base + n, Ordering::AcqRel);
        for (i, r) in records.chunks(RECORD_WORDS).enumerate() {
            let mut s = dial(&unpack_str(r), deadline)?;
            mesh_client(&mut s, comm.rank, i as u32, &key)?;
            let _ = s.set_read_timeout(None);
            let _ = s.set_write_timeout(None);
            self.ctx()
                .attach_foreign(base + i as u32, s, alias_host(base + i as u32))
                .map_err(|e| err(class::PORT, e.to_string()))?;
        }
        self.reserve_ctx(ctx, INTER_CTX_IDS);
        let remote = Group::new((base..base + n).collect());
        Ok(self.new_inter_from(ctx, comm.group.clone(), remote, comm.rank))
    }
}

impl Mpi {
    /// `MPI_Comm_join` with a process of another job, after the `gwjoin`
    /// lines were swapped on `fd`: `accepts` says which side listens,
    /// `ctx` is the agreed context id.
    pub(crate) fn join_foreign(&self, fd: i32, accepts: bool, ctx: u32) -> Result<Arc<Comm>> {
        let alias = self.next_alias();
        if alias >= self.ctx().foreign_end() {
            return Err(err(
                class::NO_MEM,
                "no room for more processes of other jobs (GW_FOREIGN_PEERS)",
            ));
        }
        let join_err =
            |e: crate::error::MpiError| err(class::ARG, format!("MPI_Comm_join: {}", e.msg));
        if accepts {
            let (listener, addrs) = listen().map_err(join_err)?;
            let mut key = [0u8; 32];
            for half in key.chunks_mut(NONCE_LEN) {
                half.copy_from_slice(
                    &auth::try_nonce()
                        .map_err(io_err("random key"))
                        .map_err(join_err)?,
                );
            }
            let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
            super::ports::swap_line(fd, &format!("gwjoinx {addrs} {hex}\n"))?;
            NEXT_ALIAS.fetch_max(alias + 1, Ordering::AcqRel);
            self.mesh_accept(&listener, 0, alias, 1, &key)
                .map_err(join_err)?;
        } else {
            let theirs = super::ports::swap_line(fd, "gwjoinx - -\n")?;
            let v: Vec<&str> = theirs.split_whitespace().collect();
            let bad = || {
                err(
                    class::ARG,
                    "MPI_Comm_join: the other job's answer is malformed",
                )
            };
            let [tag, addrs, hex] = v[..] else {
                return Err(bad());
            };
            if tag != "gwjoinx" || hex.len() != 64 {
                return Err(bad());
            }
            let mut key = [0u8; 32];
            for (i, k) in key.iter_mut().enumerate() {
                *k = u8::from_str_radix(hex.get(i * 2..i * 2 + 2).ok_or_else(bad)?, 16)
                    .map_err(|_| bad())?;
            }
            let deadline = Instant::now() + timeout();
            let mut s = dial(addrs, deadline).map_err(join_err)?;
            mesh_client(&mut s, 0, 0, &key).map_err(join_err)?;
            let _ = s.set_read_timeout(None);
            let _ = s.set_write_timeout(None);
            NEXT_ALIAS.fetch_max(alias + 1, Ordering::AcqRel);
            self.ctx()
                .attach_foreign(alias, s, alias_host(alias))
                .map_err(|e| err(class::ARG, format!("MPI_Comm_join: {e}")))?;
        }
        self.reserve_ctx(ctx, INTER_CTX_IDS);
        Ok(self.new_inter_from(ctx, Group::new(vec![self.me()]), Group::new(vec![alias]), 0))
    }
}

/// A host digest of its own for each process of another job: none counts
/// as on this host (no shared memory or single copy is tried with them).
fn alias_host(alias: u32) -> [u8; 32] {
    let mut h = [0xa5u8; 32];
    h[..4].copy_from_slice(&alias.to_le_bytes());
    h
}

/// The accepting member `me`'s mesh handshake: the connecting rank.
fn mesh_server(s: &mut TcpStream, me: u32, n: u32, key: &Key) -> std::io::Result<u32> {
    let bad = || std::io::Error::other("refused");
    if &read_array::<4>(s)? != MESH_HELLO {
        return Err(bad());
    }
    let j = read_u32(s)?;
    let theirs = read_array::<NONCE_LEN>(s)?;
    if j >= n {
        return Err(bad());
    }
    let mine = auth::try_nonce()?;
    let proof = auth::proof(key, Role::Acceptor, &mine, &theirs, me, j);
    s.write_all(&[&me.to_le_bytes()[..], &mine[..], &proof[..]].concat())?;
    let their_proof = read_array::<PROOF_LEN>(s)?;
    if !auth::verify(key, Role::Connector, &theirs, &mine, j, me, &their_proof) {
        return Err(bad());
    }
    Ok(j)
}

/// The connecting member `me`'s mesh handshake with accepting rank `them`.
fn mesh_client(s: &mut TcpStream, me: u32, them: u32, key: &Key) -> Result<()> {
    let io = io_err("the handshake with the other job failed");
    let mine = auth::try_nonce().map_err(&io)?;
    s.write_all(&[&MESH_HELLO[..], &me.to_le_bytes()[..], &mine[..]].concat())
        .map_err(&io)?;
    let who = read_u32(s).map_err(&io)?;
    let theirs = read_array::<NONCE_LEN>(s).map_err(&io)?;
    let proof = read_array::<PROOF_LEN>(s).map_err(&io)?;
    if who != them || !auth::verify(key, Role::Acceptor, &theirs, &mine, them, me, &proof) {
        return Err(err(
            class::PORT,
            format!("the process at rank {them}'s address of the other job failed the handshake"),
        ));
    }
    let proof = auth::proof(key, Role::Connector, &mine, &theirs, me, them);
    s.write_all(&proof).map_err(&io)?;
    Ok(())
}
