//! The per-user coordinator: one small process that keeps the virtual
//! machine's membership (task ids, descriptor tables, parents, pids) and
//! group tables. It is never on the data path: tasks ask it for a peer's
//! descriptor table once, then talk to the peer directly over whatever
//! method gridwire selects.
//!
//! It lives in a per-user directory (`$GWPVM_DIR`, else `/tmp/gwpvm-<uid>`,
//! mode 0700) holding `coord` (0600: pid, job id, job secret), the unix
//! socket `sock`, `lock` (serialises start-ups) and `log` (what spawned
//! tasks print, as pvmd's log does). A task finds the coordinator through
//! `coord`; when the socket does not answer (the coordinator died, its file
//! stayed) the files are replaced by a new coordinator, where PVM's own
//! stale `/tmp/pvmd.<uid>` would block the start.
//!
//! Protocol: one request line, one reply line (`OK ...` or `ERR <code>`),
//! over a connection each task keeps for its life; the coordinator also
//! writes `EXIT <tid>` lines to every connection when a task goes (its
//! connection closed: it exited or died). Names travel hex-encoded.

use crate::conn::Conn;
use crate::consts::*;
use crate::remote::{self, Agent};
use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Context ids per virtual machine (task ids are never reused).
pub const CAPACITY: u32 = 2048;

/// What `coord` says.
#[derive(Debug, Clone)]
pub struct Info {
    pub pid: i32,
    pub job_id: String,
    pub secret: [u8; 32],
    /// `host:port` of the coordinator when it runs on another host (this
    /// directory is then a host agent's, see `crate::agent`).
    pub remote: Option<String>,
    /// The daemon id of this host, on a remote host.
    pub host: Option<i32>,
}

pub fn dir() -> PathBuf {
    match std::env::var_os("GWPVM_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        // SAFETY: getuid cannot fail.
        _ => PathBuf::from(format!("/tmp/gwpvm-{}", unsafe { libc::getuid() })),
    }
}

/// Creates the directory (0700) or checks that an existing one is ours
/// and closed to others: the secret lives in it.
pub fn ensure_dir() -> std::io::Result<PathBuf> {
    let d = dir();
    match std::fs::DirBuilder::new().mode(0o700).create(&d) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let m = std::fs::metadata(&d)?;
    // SAFETY: getuid cannot fail.
    if !m.is_dir() || m.uid() != unsafe { libc::getuid() } || m.mode() & 0o077 != 0 {
        return Err(std::io::Error::other(format!(
            "{} must be a directory of yours that nobody else may read (mode 0700)",
            d.display()
        )));
    }
    Ok(d)
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

pub fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| s.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
        .collect()
}

pub fn read_info() -> Option<Info> {
    let text = std::fs::read_to_string(dir().join("coord")).ok()?;
    let mut w = text.split_whitespace();
    let pid = w.next()?.parse().ok()?;
    let job_id = w.next()?.to_string();
    let secret: [u8; 32] = unhex(w.next()?)?.try_into().ok()?;
    let (mut remote, mut host) = (None, None);
    for extra in w {
        if let Some(a) = extra.strip_prefix("tcp=") {
            remote = Some(a.to_string());
        } else if let Some(h) = extra.strip_prefix("host=") {
            host = h.parse().ok();
        }
    }
    Some(Info {
        pid,
        job_id,
        secret,
        remote,
        host,
    })
}

/// Connects to the running coordinator, starting one if none answers.
pub fn connect_or_start() -> std::io::Result<(Conn, Info)> {
    let d = ensure_dir()?;
    // On a remote host the host agent's file names the coordinator's TCP
    // address: connect there and prove the secret; never start one here.
    if let Some(info) = read_info().filter(|i| i.remote.is_some()) {
        let addr = info.remote.clone().unwrap_or_default();
        let mut s = std::net::TcpStream::connect(&addr)?;
        s.set_nodelay(true)?;
        writeln!(s, "AUTH {}", hex(&info.secret))?;
        return Ok((Conn::Tcp(s), info));
    }
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(d.join("lock"))?;
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a descriptor we own; released when `lock` closes.
    if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    if let (Some(info), Ok(s)) = (read_info(), UnixStream::connect(d.join("sock"))) {
        return Ok((Conn::Unix(s), info));
    }
    // Nothing answers: whatever files are there belong to a dead coordinator.
    let _ = std::fs::remove_file(d.join("coord"));
    let _ = std::fs::remove_file(d.join("sock"));
    start(lock.as_raw_fd())?;
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        if let (Some(info), Ok(s)) = (read_info(), UnixStream::connect(d.join("sock"))) {
            return Ok((Conn::Unix(s), info));
        }
        if Instant::now() > end {
            return Err(std::io::Error::other("the PVM coordinator did not start"));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Starts a coordinator as a daemon (double fork: it is nobody's child and
/// keeps none of the caller's descriptors, so a test harness waiting for a
/// program's output is not held open by it).
fn start(lock_fd: i32) -> std::io::Result<()> {
    // Prepared before forking: the child only makes system calls and runs
    // the coordinator, whose threads it starts itself.
    let devnull = std::ffi::CString::new("/dev/null").unwrap();
    let log = std::ffi::CString::new(dir().join("log").to_string_lossy().as_bytes()).unwrap();
    // SAFETY: fork in a process whose other threads (if any) we do not touch
    // in the child before exec-free daemon code; the child resets its
    // descriptors with async-signal-safe calls first.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if pid > 0 {
        let mut st = 0;
        // SAFETY: reaping the intermediate child we just forked.
        unsafe { libc::waitpid(pid, &mut st, 0) };
        return Ok(());
    }
    // SAFETY: in the child: plain system calls on descriptors it owns.
    unsafe {
        libc::setsid();
        if libc::fork() != 0 {
            libc::_exit(0);
        }
        libc::close(lock_fd);
        let null = libc::open(devnull.as_ptr(), libc::O_RDWR);
        let logfd = libc::open(
            log.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND,
            0o600,
        );
        libc::dup2(null, 0);
        libc::dup2(if logfd >= 0 { logfd } else { null }, 1);
        libc::dup2(if logfd >= 0 { logfd } else { null }, 2);
        for fd in 3..4096 {
            libc::close(fd);
        }
    }
    let code = match serve() {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("gwpvm coordinator: {e}");
            1
        }
    };
    // SAFETY: the daemon ends here without running the caller's atexit
    // handlers or flushing its stdio buffers (they belong to the program).
    unsafe { libc::_exit(code) }
}

struct TaskRec {
    ptid: i32,
    /// The daemon task id of its host (`HOST_TID` for this one).
    host: i32,
    pid: i32,
    name: String,
    table: Option<String>,
    alive: bool,
    reserved_at: Instant,
}

/// One mailbox entry: who put it, with which flags, and the message.
struct MboxEntry {
    owner: i32,
    flags: i32,
    data: String,
}

const MBOX_PERSISTENT: i32 = 1;
const MBOX_MULTI: i32 = 2;
const MBOX_OVERWRITABLE: i32 = 4;
const MBOX_FIRST_AVAIL: i32 = 8;
const MBOX_READ_DELETE: i32 = 16;
const MBOX_WAIT: i32 = 32;
/// Highest index `pvm_insert` or `PvmMboxDirectIndex` may name: a class is
/// a vector (32 bytes an index), and a task's request must not make the
/// coordinator allocate without bound.
const MBOX_MAX_INDEX: usize = 1 << 17;
/// `PvmMboxDirectIndex(i)` is `i << 10` in the flags (pvm3.h).
const MBOX_DIRECT_SHIFT: u32 = 10;

#[derive(Default)]
pub(crate) struct State {
    next_ctx: u32,
    /// Message contexts handed out so far (`pvm_newcontext`).
    contexts: i32,
    tasks: BTreeMap<i32, TaskRec>,
    /// Group name -> instance -> task id (None: a left instance, reused first).
    groups: BTreeMap<String, Vec<Option<i32>>>,
    /// Group name -> (arrivals at the current barrier, its generation).
    barriers: HashMap<String, (i32, u64)>,
    /// Message mailbox: class name -> index -> entry (None: a free index).
    mbox: BTreeMap<String, Vec<Option<MboxEntry>>>,
    conns: HashMap<u64, Arc<Mutex<Conn>>>,
    /// The agents of real remote hosts, by daemon id.
    agents: HashMap<i32, Arc<Agent>>,
    /// Hosts added with `pvm_addhosts` (emulated on this machine): slot k
    /// has daemon id `host_tid(k + 1)`; None: deleted.
    hosts: Vec<Option<String>>,
    halted: bool,
}

pub(crate) struct Shared {
    st: Mutex<State>,
    changed: Condvar,
    pub(crate) secret: [u8; 32],
    pub(crate) job: String,
}

fn serve() -> std::io::Result<()> {
    let d = dir();
    let listener = UnixListener::bind(d.join("sock"))?;
    std::fs::set_permissions(d.join("sock"), std::fs::Permissions::from_mode(0o600))?;
    let secret = gridwire_core::auth::random_secret().map_err(std::io::Error::other)?;
    // SAFETY: getpid cannot fail.
    let pid = unsafe { libc::getpid() };
    let job = format!("gwpvm{}x{}", pid, &hex(&secret[..4]));
    let tmp = d.join("coord.tmp");
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    writeln!(f, "{pid} {job} {}", hex(&secret))?;
    drop(f);
    std::fs::rename(&tmp, d.join("coord"))?;
    let shared = Arc::new(Shared {
        st: Mutex::new(State::default()),
        changed: Condvar::new(),
        secret,
        job,
    });
    start_watchdog(shared.clone());
    let mut next_conn = 0u64;
    for s in listener.incoming() {
        let Ok(s) = s else { continue };
        next_conn += 1;
        let sh = shared.clone();
        let id = next_conn;
        std::thread::spawn(move || client(sh, id, Conn::Unix(s)));
    }
    Ok(())
}

/// Tasks reserved by a spawn that never enrolled (the program could not
/// start) are given up after a minute; with `GWPVM_IDLE_EXIT=<s>` the
/// coordinator also ends after that long without tasks (tests use it as a
/// safety net; a virtual machine otherwise lives until `gwpvm halt`).
fn start_watchdog(sh: Arc<Shared>) {
    let idle_exit: Option<u64> = std::env::var("GWPVM_IDLE_EXIT")
        .ok()
        .and_then(|v| v.parse().ok());
    std::thread::spawn(move || {
        let mut idle_since = Instant::now();
        loop {
            std::thread::sleep(Duration::from_millis(500));
            let mut st = sh.st.lock().unwrap();
            let stale: Vec<i32> = st
                .tasks
                .iter()
                .filter(|(_, t)| {
                    t.alive && t.pid == 0 && t.reserved_at.elapsed() > Duration::from_secs(60)
                })
                .map(|(&tid, _)| tid)
                .collect();
            for tid in stale {
                task_gone(&mut st, tid);
            }
            if st.tasks.values().any(|t| t.alive) || !st.conns.is_empty() {
                idle_since = Instant::now();
            } else if idle_exit.is_some_and(|s| idle_since.elapsed() > Duration::from_secs(s)) {
                shutdown(&mut st);
            }
            drop(st);
            sh.changed.notify_all();
        }
    });
}

fn shutdown(st: &mut State) -> ! {
    st.halted = true;
    // Remote hosts' agents end their tasks and remove their files.
    for a in st.agents.values() {
        a.close(Duration::from_secs(5));
    }
    for t in st.tasks.values().filter(|t| t.alive && t.pid > 0) {
        // SAFETY: signalling a process of ours by pid.
        unsafe { libc::kill(t.pid, libc::SIGTERM) };
    }
    let d = dir();
    let _ = std::fs::remove_file(d.join("coord"));
    let _ = std::fs::remove_file(d.join("sock"));
    // SAFETY: ends the daemon (see `start`).
    unsafe { libc::_exit(0) }
}

/// Marks a task gone, takes it out of its groups and tells every connection.
fn task_gone(st: &mut State, tid: i32) {
    let Some(t) = st.tasks.get_mut(&tid) else {
        return;
    };
    if !t.alive {
        return;
    }
    t.alive = false;
    for g in st.groups.values_mut() {
        for slot in g.iter_mut() {
            if *slot == Some(tid) {
                *slot = None;
            }
        }
    }
    st.groups.retain(|_, g| g.iter().any(Option::is_some));
    drop_mbox_entries(st, tid);
    let line = format!("EXIT {tid}\n");
    for c in st.conns.values() {
        let _ = c.lock().unwrap().write_all(line.as_bytes());
    }
}

/// A task's mailbox entries go with it, unless it made them persistent.
fn drop_mbox_entries(st: &mut State, tid: i32) {
    for class in st.mbox.values_mut() {
        for slot in class.iter_mut() {
            if slot
                .as_ref()
                .is_some_and(|e| e.owner == tid && e.flags & MBOX_PERSISTENT == 0)
            {
                *slot = None;
            }
        }
    }
    st.mbox.retain(|_, c| c.iter().any(Option::is_some));
}

/// A remote host's agent channel ended without `DELHOST` (the host or
/// the network failed): the host leaves the machine, with its tasks.
/// Whether it was still in the machine.
pub(crate) fn host_lost(sh: &Shared, dtid: i32) -> bool {
    let mut st = sh.st.lock().unwrap();
    if st.agents.remove(&dtid).is_none() {
        return false;
    }
    if let Some(k) = host_slot(&st, dtid) {
        st.hosts[k] = None;
    }
    let gone: Vec<i32> = st
        .tasks
        .iter()
        .filter(|(_, t)| t.alive && t.host == dtid)
        .map(|(&tid, _)| tid)
        .collect();
    for tid in gone {
        task_gone(&mut st, tid);
    }
    broadcast(&st, &format!("HOSTDEL {dtid}\n"));
    drop(st);
    sh.changed.notify_all();
    true
}

/// Daemon task id of added host number `k` (1, 2, …), as PVM numbers hosts.
pub fn host_tid(k: usize) -> i32 {
    HOST_TID * (k as i32 + 1)
}

/// The slot of a live added host with daemon id `dtid`.
fn host_slot(st: &State, dtid: i32) -> Option<usize> {
    let k = usize::try_from(dtid / HOST_TID).ok()?.checked_sub(2)?;
    (dtid % HOST_TID == 0 && st.hosts.get(k).is_some_and(Option::is_some)).then_some(k)
}

fn broadcast(st: &State, line: &str) {
    for c in st.conns.values() {
        let _ = c.lock().unwrap().write_all(line.as_bytes());
    }
}

pub(crate) fn client(sh: Arc<Shared>, id: u64, s: Conn) {
    let Ok(w) = s.try_clone() else { return };
    let w = Arc::new(Mutex::new(w));
    sh.st.lock().unwrap().conns.insert(id, w.clone());
    let mut own: Option<i32> = None;
    let mut lines = BufReader::new(s).lines();
    while let Some(Ok(line)) = lines.next() {
        let reply = match handle(&sh, &mut own, &line) {
            Ok(r) => format!("OK {r}\n"),
            Err(code) => format!("ERR {code}\n"),
        };
        if w.lock().unwrap().write_all(reply.as_bytes()).is_err() {
            break;
        }
    }
    let mut st = sh.st.lock().unwrap();
    st.conns.remove(&id);
    if let Some(tid) = own {
        task_gone(&mut st, tid);
    }
    drop(st);
    sh.changed.notify_all();
}

fn name_arg(w: Option<&str>) -> Result<String, i32> {
    let b = unhex(w.ok_or(PVM_BAD_PARAM)?).ok_or(PVM_BAD_PARAM)?;
    String::from_utf8(b).map_err(|_| PVM_BAD_PARAM)
}

fn int_arg(w: Option<&str>) -> Result<i32, i32> {
    w.and_then(|v| v.parse().ok()).ok_or(PVM_BAD_PARAM)
}

fn handle(sh: &Arc<Shared>, own: &mut Option<i32>, line: &str) -> Result<String, i32> {
    let mut w = line.split_whitespace();
    let cmd = w.next().unwrap_or("");
    let mut st = sh.st.lock().unwrap();
    let me = || own.ok_or(PVM_SYS_ERR);
    let r = match cmd {
        "NEW" | "RESERVE" => {
            if st.next_ctx >= CAPACITY {
                return Err(PVM_OUT_OF_RES);
            }
            let (pid, ptid) = if cmd == "NEW" {
                (int_arg(w.next())?, PVM_NO_PARENT)
            } else {
                (0, int_arg(w.next())?)
            };
            let name = name_arg(w.next())?;
            let host = match w.next() {
                Some(h) => int_arg(Some(h))?,
                None => HOST_TID,
            };
            if host != HOST_TID && host_slot(&st, host).is_none() {
                return Err(PVM_NO_HOST);
            }
            let tid = tid_of(st.next_ctx);
            st.next_ctx += 1;
            st.tasks.insert(
                tid,
                TaskRec {
                    ptid,
                    host,
                    pid,
                    name,
                    table: None,
                    alive: true,
                    reserved_at: Instant::now(),
                },
            );
            if cmd == "NEW" {
                *own = Some(tid);
            }
            tid.to_string()
        }
        "ENROLL" => {
            let tid = int_arg(w.next())?;
            let pid = int_arg(w.next())?;
            let t = st.tasks.get_mut(&tid).ok_or(PVM_NO_TASK)?;
            if !t.alive || t.pid != 0 || own.is_some() {
                return Err(PVM_DENIED);
            }
            t.pid = pid;
            *own = Some(tid);
            sh.changed.notify_all();
            String::new()
        }
        "LEAVING" => {
            // `pvm_exit`, before the task's runtime tells its peers it
            // left: its mailbox entries go first, so a task that learns of
            // the exit (a `PvmTaskExit` notify, which may come straight
            // from the runtime) finds them gone, as under pvmd.
            let tid = me()?;
            drop_mbox_entries(&mut st, tid);
            String::new()
        }
        "FORGET" => {
            let tid = int_arg(w.next())?;
            if st.tasks.get(&tid).is_some_and(|t| t.pid == 0) {
                task_gone(&mut st, tid);
            }
            String::new()
        }
        "TABLE" => {
            let hexed = w.next().ok_or(PVM_BAD_PARAM)?;
            unhex(hexed).ok_or(PVM_BAD_PARAM)?;
            let tid = me()?;
            st.tasks.get_mut(&tid).ok_or(PVM_NO_TASK)?.table = Some(hexed.to_string());
            sh.changed.notify_all();
            String::new()
        }
        "LOOKUP" => {
            // A spawned task may still be starting: wait for its table.
            let tid = int_arg(w.next())?;
            let end = Instant::now() + Duration::from_secs(30);
            loop {
                match st.tasks.get(&tid) {
                    None => return Err(PVM_NO_TASK),
                    Some(t) if !t.alive => return Err(PVM_NO_TASK),
                    Some(t) if t.table.is_some() => break t.table.clone().unwrap(),
                    Some(_) => {}
                }
                if Instant::now() > end {
                    return Err(PVM_NO_TASK);
                }
                st = sh
                    .changed
                    .wait_timeout(st, Duration::from_millis(200))
                    .unwrap()
                    .0;
            }
        }
        "STATUS" => {
            let tid = int_arg(w.next())?;
            match st.tasks.get(&tid) {
                Some(t) if t.alive => "alive".into(),
                _ => "dead".into(),
            }
        }
        "TASKS" => {
            let which = int_arg(w.next())?;
            let rows: Vec<String> = st
                .tasks
                .iter()
                .filter(|(&tid, t)| t.alive && (which == 0 || which == t.host || which == tid))
                .map(|(tid, t)| {
                    format!(
                        "{tid},{},{},{},{}",
                        t.ptid,
                        t.pid,
                        hex(t.name.as_bytes()),
                        t.host
                    )
                })
                .collect();
            if which != 0 && which != HOST_TID && host_slot(&st, which).is_none() && rows.is_empty()
            {
                return Err(PVM_NO_TASK);
            }
            rows.join(";")
        }
        "KILL" => {
            let tid = int_arg(w.next())?;
            // pvm_sendsig names a signal; pvm_kill does not (SIGTERM).
            let sig = w.next().map_or(Ok(libc::SIGTERM), |s| int_arg(Some(s)))?;
            if !(1..65).contains(&sig) {
                return Err(PVM_BAD_PARAM);
            }
            // A task just spawned may not have enrolled yet (its pid is
            // not known): wait for it, as pvm_spawn returns under PVM only
            // once pvmd knows the task.
            let end = Instant::now() + Duration::from_secs(30);
            while st
                .tasks
                .get(&tid)
                .is_some_and(|t| t.alive && t.pid == 0 && Instant::now() < end)
            {
                st = sh
                    .changed
                    .wait_timeout(st, Duration::from_millis(200))
                    .unwrap()
                    .0;
            }
            let t = st.tasks.get(&tid).filter(|t| t.alive).ok_or(PVM_NO_TASK)?;
            if t.pid <= 0 {
                return Err(PVM_NO_TASK);
            }
            if let Some(a) = st.agents.get(&t.host) {
                // A task of a remote host: its pid is the host's; its agent signals it.
                a.request(&format!("KILL {} {sig}", t.pid))?;
            } else {
                // SAFETY: signalling a process of ours by pid.
                unsafe { libc::kill(t.pid, sig) };
            }
            String::new()
        }
        "HALT" => shutdown(&mut st),
        "GJOIN" => {
            let g = name_arg(w.next())?;
            let tid = me()?;
            let insts = st.groups.entry(g).or_default();
            if insts.contains(&Some(tid)) {
                return Err(PVM_DUP_GROUP);
            }
            let inst = match insts.iter().position(Option::is_none) {
                Some(i) => i,
                None => {
                    insts.push(None);
                    insts.len() - 1
                }
            };
            insts[inst] = Some(tid);
            sh.changed.notify_all();
            inst.to_string()
        }
        "GLEAVE" => {
            let g = name_arg(w.next())?;
            let tid = me()?;
            let insts = st.groups.get_mut(&g).ok_or(PVM_NO_GROUP)?;
            let i = insts
                .iter()
                .position(|s| *s == Some(tid))
                .ok_or(PVM_NOT_IN_GROUP)?;
            insts[i] = None;
            st.groups.retain(|_, g| g.iter().any(Option::is_some));
            sh.changed.notify_all();
            String::new()
        }
        "GSIZE" => {
            let g = name_arg(w.next())?;
            let insts = st.groups.get(&g).ok_or(PVM_NO_GROUP)?;
            insts.iter().filter(|s| s.is_some()).count().to_string()
        }
        "GINST" => {
            let g = name_arg(w.next())?;
            let tid = int_arg(w.next())?;
            let insts = st.groups.get(&g).ok_or(PVM_NO_GROUP)?;
            insts
                .iter()
                .position(|s| *s == Some(tid))
                .ok_or(PVM_NOT_IN_GROUP)?
                .to_string()
        }
        "GTID" => {
            let g = name_arg(w.next())?;
            let inst = int_arg(w.next())?;
            let insts = st.groups.get(&g).ok_or(PVM_NO_GROUP)?;
            usize::try_from(inst)
                .ok()
                .and_then(|i| insts.get(i).copied().flatten())
                .ok_or(PVM_NO_INST)?
                .to_string()
        }
        "GTIDS" => {
            let g = name_arg(w.next())?;
            let insts = st.groups.get(&g).ok_or(PVM_NO_GROUP)?;
            let v: Vec<String> = insts
                .iter()
                .map(|s| s.map_or("-".into(), |t| t.to_string()))
                .collect();
            v.join(",")
        }
        "BARRIER" => {
            let g = name_arg(w.next())?;
            let count = int_arg(w.next())?;
            let tid = me()?;
            let members = |st: &State| {
                st.groups
                    .get(&g)
                    .map_or(0, |i| i.iter().filter(|s| s.is_some()).count() as i32)
            };
            if !st.groups.get(&g).is_some_and(|i| i.contains(&Some(tid))) {
                return Err(PVM_NOT_IN_GROUP);
            }
            let need = if count < 0 { members(&st) } else { count };
            let (arrived, gen) = {
                let b = st.barriers.entry(g.clone()).or_insert((0, 0));
                b.0 += 1;
                (b.0, b.1)
            };
            if arrived >= need {
                st.barriers.insert(g.clone(), (0, gen + 1));
                sh.changed.notify_all();
            } else {
                while st.barriers.get(&g).is_some_and(|b| b.1 == gen) && !st.halted {
                    st = sh.changed.wait(st).unwrap();
                }
            }
            String::new()
        }
        "GWAIT" => {
            // pvm_freezegroup: wait until `size` tasks have joined.
            let g = name_arg(w.next())?;
            let size = int_arg(w.next())?;
            let count = |st: &State| {
                st.groups
                    .get(&g)
                    .map_or(0, |i| i.iter().filter(|s| s.is_some()).count() as i32)
            };
            while count(&st) < size && !st.halted {
                st = sh.changed.wait(st).unwrap();
            }
            String::new()
        }
        "NEWCTX" => {
            // Message contexts are global to the virtual machine, numbered
            // as PVM's daemon numbers them.
            st.contexts += 1;
            (HOST_TID + st.contexts).to_string()
        }
        "PUTINFO" => {
            let name = name_arg(w.next())?;
            let flags = int_arg(w.next())?;
            let data = w.next().unwrap_or("").to_string();
            unhex(&data).ok_or(PVM_BAD_PARAM)?;
            // `at=I` (pvm_insert): exactly index I, which must be free.
            let at = match w.next() {
                Some(a) => Some(
                    a.strip_prefix("at=")
                        .and_then(|i| i.parse::<usize>().ok())
                        .filter(|&i| i <= MBOX_MAX_INDEX)
                        .ok_or(PVM_BAD_PARAM)?,
                ),
                None => None,
            };
            let owner = me()?;
            // PvmMboxDirectIndex(d): the first free index from d on (as
            // Debian's pvmd places it, with or without PvmMboxMultiInstance).
            let direct = (flags as u32 >> MBOX_DIRECT_SHIFT) as usize;
            if direct > MBOX_MAX_INDEX {
                return Err(PVM_BAD_PARAM);
            }
            let class = st.mbox.entry(name).or_default();
            let entry = MboxEntry { owner, flags, data };
            let index = if let (None, true) = (at, direct > 0) {
                let i = (direct..=MBOX_MAX_INDEX)
                    .find(|&i| class.get(i).is_none_or(Option::is_none))
                    .ok_or(PVM_OUT_OF_RES)?;
                if class.len() <= i {
                    class.resize_with(i + 1, || None);
                }
                i
            } else if let Some(i) = at {
                if class.len() <= i {
                    class.resize_with(i + 1, || None);
                }
                if class[i].is_some() {
                    return Err(PVM_DENIED);
                }
                i
            } else if flags & MBOX_MULTI != 0 {
                match class.iter().position(Option::is_none) {
                    Some(i) => i,
                    None => {
                        class.push(None);
                        class.len() - 1
                    }
                }
            } else {
                // A single instance: replaced only by its owner or when
                // it was put overwritable.
                if class.is_empty() {
                    class.push(None);
                }
                // Overwriting makes the entry the writer's (as in PVM: it
                // then goes when the writer does).
                if let Some(e) = &class[0] {
                    if e.owner != owner && e.flags & MBOX_OVERWRITABLE == 0 {
                        return Err(PVM_DENIED);
                    }
                }
                0
            };
            class[index] = Some(entry);
            sh.changed.notify_all();
            index.to_string()
        }
        "RECVINFO" => {
            let name = name_arg(w.next())?;
            let index = usize::try_from(int_arg(w.next())?).map_err(|_| PVM_BAD_PARAM)?;
            let flags = int_arg(w.next())?;
            loop {
                let found = st.mbox.get(&name).and_then(|c| {
                    if flags & MBOX_FIRST_AVAIL != 0 {
                        (index..c.len()).find(|&i| c[i].is_some())
                    } else {
                        c.get(index).and_then(|e| e.as_ref()).map(|_| index)
                    }
                });
                if let Some(i) = found {
                    let class = st.mbox.get_mut(&name).expect("found in it");
                    let e = class[i].as_ref().expect("found");
                    let reply = format!("{} {} {i}", e.owner, e.data);
                    if flags & MBOX_READ_DELETE != 0 {
                        class[i] = None;
                        st.mbox.retain(|_, c| c.iter().any(Option::is_some));
                    }
                    break reply;
                }
                if flags & MBOX_WAIT == 0 || st.halted {
                    return Err(PVM_NOT_FOUND);
                }
                st = sh.changed.wait(st).unwrap();
            }
        }
        "DELINFO" => {
            let name = name_arg(w.next())?;
            let index = usize::try_from(int_arg(w.next())?).map_err(|_| PVM_BAD_PARAM)?;
            let tid = me()?;
            let class = st.mbox.get_mut(&name).ok_or(PVM_NOT_FOUND)?;
            let e = class
                .get(index)
                .and_then(|e| e.as_ref())
                .ok_or(PVM_NOT_FOUND)?;
            if e.owner != tid && e.flags & MBOX_OVERWRITABLE == 0 {
                return Err(PVM_DENIED);
            }
            class[index] = None;
            st.mbox.retain(|_, c| c.iter().any(Option::is_some));
            String::new()
        }
        "MBOXINFO" => {
            // Classes whose name matches the pattern ("" and "*": all; a
            // trailing "*": a prefix; otherwise the name itself).
            let pat = name_arg(w.next()).unwrap_or_default();
            let rows: Vec<String> = st
                .mbox
                .iter()
                .filter(|(n, _)| match pat.as_str() {
                    "" | "*" => true,
                    p => match p.strip_suffix('*') {
                        Some(prefix) => n.starts_with(prefix),
                        None => *n == p,
                    },
                })
                .map(|(n, c)| {
                    let entries: Vec<String> = c
                        .iter()
                        .enumerate()
                        .filter_map(|(i, e)| {
                            e.as_ref().map(|e| format!("{i}/{}/{}", e.owner, e.flags))
                        })
                        .collect();
                    format!("{}:{}", hex(n.as_bytes()), entries.join(","))
                })
                .collect();
            rows.join(";")
        }
        "ADDHOST" => {
            let name = name_arg(w.next())?;
            if name.is_empty() || name.contains(char::is_whitespace) {
                return Err(PVM_BAD_PARAM);
            }
            if st.hosts.iter().flatten().any(|h| *h == name) {
                return Err(PVM_DUP_HOST);
            }
            // A remote host of the machines file gets its agent first
            // (seconds: ssh), without holding the tables meanwhile.
            let agent = match remote::reach(&name) {
                Some(how) => {
                    drop(st);
                    let a = remote::start_agent(sh, &name, &how)?;
                    st = sh.st.lock().unwrap();
                    if st.hosts.iter().flatten().any(|h| *h == name) {
                        drop(st);
                        a.close(Duration::from_secs(5));
                        return Err(PVM_DUP_HOST);
                    }
                    Some(a)
                }
                None => None,
            };
            st.hosts.push(Some(name));
            let dtid = host_tid(st.hosts.len());
            if let Some(a) = agent {
                // The agent publishes the host to its tasks only now, with
                // the host's id (tasks started there by hand enroll as its).
                if let Err(e) = a.request(&format!("HOST {dtid}")) {
                    st.hosts.pop();
                    drop(st);
                    a.close(Duration::from_secs(5));
                    return Err(e);
                }
                a.set_dtid(dtid);
                st.agents.insert(dtid, a);
            }
            broadcast(&st, &format!("HOSTADD {dtid}\n"));
            dtid.to_string()
        }
        "DELHOST" => {
            // The host's tasks are terminated, as pvmd's are with their host.
            let name = name_arg(w.next())?;
            let k = st
                .hosts
                .iter()
                .position(|h| h.as_deref() == Some(name.as_str()))
                .ok_or(PVM_NO_HOST)?;
            let dtid = host_tid(k + 1);
            let agent = st.agents.remove(&dtid);
            if agent.is_none() {
                for t in st
                    .tasks
                    .values()
                    .filter(|t| t.alive && t.host == dtid && t.pid > 0)
                {
                    // SAFETY: signalling a process of ours by pid.
                    unsafe { libc::kill(t.pid, libc::SIGTERM) };
                }
            }
            st.hosts[k] = None;
            broadcast(&st, &format!("HOSTDEL {dtid}\n"));
            if let Some(a) = agent {
                // The agent ends the host's tasks and removes its files.
                drop(st);
                a.close(Duration::from_secs(10));
            }
            String::new()
        }
        "HOSTS" => {
            let mut rows = vec![format!(
                "{HOST_TID},{}",
                hex(crate::spawn::hostname().as_bytes())
            )];
            for (k, h) in st.hosts.iter().enumerate() {
                if let Some(h) = h {
                    rows.push(format!("{},{}", host_tid(k + 1), hex(h.as_bytes())));
                }
            }
            rows.join(";")
        }
        "HOSTOF" => {
            let tid = int_arg(w.next())?;
            if tid == HOST_TID || host_slot(&st, tid).is_some() {
                return Ok(tid.to_string());
            }
            st.tasks.get(&tid).ok_or(PVM_NO_TASK)?.host.to_string()
        }
        "CONF" => String::new(),
        "HOSTKIND" => {
            let dtid = int_arg(w.next())?;
            if st.agents.contains_key(&dtid) {
                "remote".into()
            } else if dtid == HOST_TID || host_slot(&st, dtid).is_some() {
                "local".into()
            } else {
                return Err(PVM_NO_HOST);
            }
        }
        "HOSTCLOCK" => {
            // The time of day on host <dtid>: asked of its agent when it is
            // a remote host; this machine's (and its emulated hosts') here.
            let dtid = int_arg(w.next())?;
            if let Some(a) = st.agents.get(&dtid).cloned() {
                drop(st);
                return a.request("CLOCK");
            }
            if dtid != HOST_TID && host_slot(&st, dtid).is_none() {
                return Err(PVM_NO_HOST);
            }
            crate::agent::clock_now()
        }
        "RSPAWN" => {
            // RSPAWN <dtid> <tid> <parent> <siblings> <context> <name> <args>
            // <here> [<catch>]: a reserved task started by its host's agent;
            // its pid there.
            let dtid = int_arg(w.next())?;
            let tid = int_arg(w.next())?;
            let rest: Vec<&str> = w.collect();
            if !(6..=7).contains(&rest.len()) {
                return Err(PVM_BAD_PARAM);
            }
            let a = st.agents.get(&dtid).cloned().ok_or(PVM_NO_HOST)?;
            if !st
                .tasks
                .get(&tid)
                .is_some_and(|t| t.alive && t.pid == 0 && t.host == dtid)
            {
                return Err(PVM_NO_TASK);
            }
            drop(st);
            return a.request(&format!("SPAWN {tid} {}", rest.join(" ")));
        }
        _ => return Err(PVM_BAD_PARAM),
    };
    Ok(r)
}
