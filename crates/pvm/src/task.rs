//! This process as a PVM task: its gridwire context (joined to the virtual
//! machine's job at the first `pvm_mytid`), its inbox, its message buffers
//! and its notify requests.
//!
//! A message is one remote service request to the PVM handler of the
//! destination's context: `tag i32, context i32, encoding i32` (native
//! order: the body's runs carry their own order) and the packed body. The
//! handler only appends to the inbox; `pvm_recv` and friends match there.

use crate::client::Coord;
use crate::consts::*;
use crate::coord::{self, hex, unhex, CAPACITY};
use crate::pack::{Buffer, Kind, Part};
use gridwire_core::descriptor::DescriptorTable;
use gridwire_core::params::Params;
use gridwire_core::{Context, Error, JoinSpec, MembershipKind, Startpoint, DEFAULT_ENDPOINT};
use std::collections::{HashMap, VecDeque};
use std::io::IoSlice;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

/// The handler id PVM messages use on every task's context.
pub const PVM_HANDLER: u32 = 0x5056;
/// tag, message context, encoding, wait id (`i32`s, little-endian, so that
/// hosts of either byte order read them alike).
const MSG_HEADER: usize = 16;
/// The source task id of messages "from the daemon" (notifies), as in PVM.
pub const PVMD_TID: i32 = i32::MIN;

pub struct Task {
    pub ctx: Context,
    pub tid: i32,
    pub parent: i32,
    pub siblings: Vec<i32>,
    pub coord: Coord,
    pub inbox: Arc<Mutex<VecDeque<Buffer>>>,
    /// (watched task, tag, context) of each pending task-exit notify.
    notifies: Arc<Mutex<Vec<(i32, i32, i32)>>>,
    pub host_notifies: Arc<Mutex<Vec<HostNotify>>>,
}

/// The message buffers of the process (`pvm_mkbuf` ids), the active send
/// and receive buffers and the current message context.
pub struct Bufs {
    pub map: HashMap<i32, Buffer>,
    next: i32,
    pub sbuf: i32,
    pub rbuf: i32,
    pub ctx: i32,
}

impl Bufs {
    pub fn add(&mut self, b: Buffer) -> i32 {
        self.next += 1;
        self.map.insert(self.next, b);
        self.next
    }
}

static TASK: OnceLock<Task> = OnceLock::new();
static ENROLLING: Mutex<()> = Mutex::new(());
static EXITED: AtomicBool = AtomicBool::new(false);
/// Calls of the program's threads that drive progress themselves (sends and
/// receives): the progress thread stays out of their way meanwhile.
static DRIVING: AtomicU32 = AtomicU32::new(0);

/// Marks a call that drives progress for as long as it lives.
struct Driving;
impl Driving {
    fn new() -> Driving {
        DRIVING.fetch_add(1, Ordering::AcqRel);
        Driving
    }
}
impl Drop for Driving {
    fn drop(&mut self) {
        DRIVING.fetch_sub(1, Ordering::AcqRel);
    }
}
static BUFS: Mutex<Option<Bufs>> = Mutex::new(None);

/// The descriptor `pvm_getfds` gives the program (an eventfd, made at its
/// first call): readable while the inbox holds a message, so a program can
/// wait in `select` for PVM messages and its own input at once.
static DOORBELL: OnceLock<std::os::fd::OwnedFd> = OnceLock::new();

/// The doorbell's descriptor, made on first use.
pub fn doorbell() -> std::io::Result<i32> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    if let Some(fd) = DOORBELL.get() {
        return Ok(fd.as_raw_fd());
    }
    // SAFETY: eventfd returns a new descriptor or -1.
    let raw = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if raw < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `raw` is a fresh descriptor nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // Another thread may have made one first: theirs is kept, ours closed.
    let fd = DOORBELL.get_or_init(|| fd).as_raw_fd();
    // Messages already waiting ring it at once.
    if let Some(t) = TASK.get() {
        settle_doorbell(&t.inbox.lock().unwrap_or_else(|e| e.into_inner()));
    }
    Ok(fd)
}

/// Makes the doorbell (if the program asked for one) readable exactly
/// while `inbox` is not empty; called with the inbox locked after every
/// change, so the two agree.
pub fn settle_doorbell(inbox: &VecDeque<Buffer>) {
    use std::os::fd::AsRawFd;
    let Some(fd) = DOORBELL.get() else { return };
    let mut count = 0u64;
    // SAFETY: 8-byte reads and writes of a u64 on our own eventfd; a
    // non-blocking eventfd fails with EAGAIN instead of waiting.
    unsafe {
        if inbox.is_empty() {
            libc::read(fd.as_raw_fd(), (&mut count as *mut u64).cast(), 8);
        } else {
            // Reset, then one: a counter that grows with every message
            // could in the end refuse writes.
            libc::read(fd.as_raw_fd(), (&mut count as *mut u64).cast(), 8);
            count = 1;
            libc::write(fd.as_raw_fd(), (&count as *const u64).cast(), 8);
        }
    }
}

pub fn bufs() -> MutexGuard<'static, Option<Bufs>> {
    let mut g = BUFS.lock().unwrap_or_else(|e| e.into_inner());
    if g.is_none() {
        *g = Some(Bufs {
            map: HashMap::new(),
            next: 0,
            sbuf: 0,
            rbuf: 0,
            // A spawned task starts in the context its parent was in.
            ctx: std::env::var("GWPVM_CONTEXT")
                .ok()
                .and_then(|c| c.parse().ok())
                .unwrap_or(0),
        });
    }
    g
}

/// This task, enrolling it first if needed.
pub fn task() -> Result<&'static Task, i32> {
    if EXITED.load(Ordering::Acquire) {
        return Err(PVM_SYS_ERR);
    }
    if let Some(t) = TASK.get() {
        return Ok(t);
    }
    let _g = ENROLLING.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(t) = TASK.get() {
        return Ok(t);
    }
    match enroll() {
        Ok(t) => Ok(TASK.get_or_init(|| t)),
        Err(e) => {
            eprintln!("libpvm [pid{}]: cannot enroll: {e}", std::process::id());
            Err(PVM_SYS_ERR)
        }
    }
}

pub fn exited() -> bool {
    EXITED.load(Ordering::Acquire)
}

fn program_name() -> String {
    std::env::args()
        .next()
        .map(|a| a.rsplit('/').next().unwrap_or("").to_string())
        .unwrap_or_default()
}

fn enroll() -> Result<Task, String> {
    let (sock, info) = coord::connect_or_start().map_err(|e| e.to_string())?;
    let ctx_cell: Arc<OnceLock<Context>> = Arc::new(OnceLock::new());
    let cell = ctx_cell.clone();
    let host_notifies: Arc<Mutex<Vec<HostNotify>>> = Default::default();
    let inbox: Arc<Mutex<VecDeque<Buffer>>> = Default::default();
    let (hn, hib) = (host_notifies.clone(), inbox.clone());
    let coord = Coord::new(sock, move |ev, v| match ev {
        "EXIT" => {
            if let (Some(ctx), Some(c)) = (cell.get(), ctx_of(v)) {
                let _ = ctx.peer_departed(c, &format!("task t{v:x} exited"));
            }
        }
        "HOSTADD" => fire_host_notifies(&hn, &hib, PVM_HOST_ADD, v),
        "HOSTDEL" => fire_host_notifies(&hn, &hib, PVM_HOST_DELETE, v),
        _ => {}
    })
    .map_err(|e| e.to_string())?;
    let pid = std::process::id();
    let env = |k: &str| std::env::var(k).ok();
    // A task this virtual machine spawned: its id was reserved by the parent.
    let spawned = env("GWPVM_TID")
        .and_then(|t| t.parse::<i32>().ok())
        .filter(|_| env("GWPVM_JOB").as_deref() == Some(info.job_id.as_str()));
    let (tid, parent, siblings) = match spawned {
        Some(tid) => {
            coord
                .request(&format!("ENROLL {tid} {pid}"))
                .map_err(|c| format!("the coordinator refused task t{tid:x}: {}", error_text(c)))?;
            let parent = env("GWPVM_PARENT")
                .and_then(|p| p.parse().ok())
                .unwrap_or(PVM_NO_PARENT);
            let sib: Vec<i32> = env("GWPVM_SIBLINGS")
                .unwrap_or_default()
                .split(',')
                .filter_map(|s| s.parse().ok())
                .collect();
            (tid, parent, sib)
        }
        None => {
            let r = coord
                .request(&format!(
                    "NEW {pid} {}{}",
                    hex(program_name().as_bytes()),
                    // A program started by hand on a remote host is its task.
                    info.host.map_or(String::new(), |h| format!(" {h}"))
                ))
                .map_err(|c| format!("the coordinator refused a new task: {}", error_text(c)))?;
            let tid: i32 = r.parse().map_err(|_| "bad reply from the coordinator")?;
            (tid, PVM_NO_PARENT, vec![tid])
        }
    };
    drop(bufs()); // reads GWPVM_CONTEXT before it goes
    for k in [
        "GWPVM_TID",
        "GWPVM_PARENT",
        "GWPVM_SIBLINGS",
        "GWPVM_JOB",
        "GWPVM_CONTEXT",
    ] {
        std::env::remove_var(k);
    }
    let params = Params::from_env().map_err(|e| e.to_string())?;
    let ctx = Context::join(
        params,
        JoinSpec {
            job_id: info.job_id.clone(),
            secret: info.secret,
            ctx_id: ctx_of(tid).ok_or("task id out of range")?,
            capacity: CAPACITY,
        },
    )
    .map_err(|e| e.to_string())?;
    let ib = inbox.clone();
    // An owning handler: a large message reassembled by the method is
    // filed as that very buffer (no copy of a megabyte per message).
    ctx.register_owning_handler(PVM_HANDLER, move |_, req| {
        let Some(h) = req.payload.as_slice().get(..MSG_HEADER) else {
            return;
        };
        // Little-endian on the wire whatever the hosts' order (the body's
        // encoding is said by `encoding`; the header must read the same on
        // every host of a mixed virtual machine).
        let word = |i: usize| i32::from_le_bytes(h[i * 4..i * 4 + 4].try_into().unwrap());
        let (tag, mctx, encoding, wid) = (word(0), word(1), word(2), word(3));
        let (data, start) = match req.payload {
            // Small messages: only the body is copied out of the ring.
            gridwire_core::Payload::Borrowed(p) => (p[MSG_HEADER..].to_vec(), 0),
            owned => {
                let (buf, start) = owned.into_buffer();
                (buf, start + MSG_HEADER)
            }
        };
        let mut b = Buffer::received_at(data, start, tid_of(req.src), tag, mctx, encoding);
        b.wid = wid;
        b.dst = tid;
        let mut q = ib.lock().unwrap_or_else(|e| e.into_inner());
        q.push_back(b);
        settle_doorbell(&q);
    })
    .map_err(|e| e.to_string())?;
    let notifies: Arc<Mutex<Vec<(i32, i32, i32)>>> = Default::default();
    let (nf, ib) = (notifies.clone(), inbox.clone());
    ctx.subscribe_membership(move |_, ev| {
        if matches!(ev.kind, MembershipKind::Left | MembershipKind::Died) {
            fire_notifies(&nf, &ib, tid_of(ev.peer));
        }
    });
    ctx.set_table_resolver(|rank| {
        let t = TASK.get()?;
        let r = t.coord.request(&format!("LOOKUP {}", tid_of(rank))).ok()?;
        DescriptorTable::decode(&unhex(&r)?).ok().map(|(t, _)| t)
    });
    let _ = ctx_cell.set(ctx.clone());
    // A task runs the program's code between PVM calls, and PVM promises
    // that a sent message arrives even if its sender then computes or
    // sleeps (pvmd carries it). Here a thread keeps the context's progress
    // going meanwhile: it finishes queued sends and connection handshakes
    // and files arriving messages in the inbox. It polls every millisecond
    // and only while no send or receive of the program drives progress
    // itself (on a loaded machine, a preempted progress thread holding the
    // progress lock would stall the program's own wait).
    let pc = ctx.clone();
    std::thread::Builder::new()
        .name("gwpvm-progress".into())
        .spawn(move || {
            while !EXITED.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(1));
                if DRIVING.load(Ordering::Acquire) == 0 {
                    pc.progress_thorough();
                }
            }
        })
        .map_err(|e| e.to_string())?;
    coord
        .request(&format!("TABLE {}", hex(&ctx.table().encode())))
        .map_err(|c| format!("cannot publish the descriptor table: {}", error_text(c)))?;
    Ok(Task {
        ctx,
        tid,
        parent,
        siblings,
        coord,
        inbox,
        notifies,
        host_notifies,
    })
}

/// A host notify request: (kind, host or -1 for any, tag, context, how
/// many more times: -1 = always).
pub type HostNotify = (i32, i32, i32, i32, i32);

fn fire_host_notifies(
    hn: &Mutex<Vec<HostNotify>>,
    ib: &Mutex<VecDeque<Buffer>>,
    kind: i32,
    dtid: i32,
) {
    let mut n = hn.lock().unwrap_or_else(|e| e.into_inner());
    let mut q = ib.lock().unwrap_or_else(|e| e.into_inner());
    for r in n.iter_mut() {
        if r.0 != kind || (r.1 != -1 && r.1 != dtid) || r.4 == 0 {
            continue;
        }
        let mut b = Buffer::new(PVM_DATA_DEFAULT);
        // As PVM's: a host-add notify carries the count, then the hosts.
        let body: Vec<i32> = if kind == PVM_HOST_ADD {
            vec![1, dtid]
        } else {
            vec![dtid]
        };
        // SAFETY: packs a live Vec of i32.
        unsafe { b.pack(Kind::Int, body.as_ptr() as *const u8, body.len() as i32, 1) };
        q.push_back(Buffer::received(
            b.data,
            PVMD_TID,
            r.2,
            r.3,
            PVM_DATA_DEFAULT,
        ));
        if r.4 > 0 {
            r.4 -= 1;
        }
    }
    n.retain(|r| r.4 != 0);
    settle_doorbell(&q);
}

/// Queues one notify message per request watching `tid` (one-shot, as PVM's).
fn fire_notifies(nf: &Mutex<Vec<(i32, i32, i32)>>, ib: &Mutex<VecDeque<Buffer>>, tid: i32) {
    let mut n = nf.lock().unwrap_or_else(|e| e.into_inner());
    let mut q = ib.lock().unwrap_or_else(|e| e.into_inner());
    n.retain(|&(watched, tag, ctx)| {
        if watched != tid {
            return true;
        }
        let mut b = Buffer::new(PVM_DATA_DEFAULT);
        // SAFETY: packs one live i32.
        unsafe { b.pack(Kind::Int, &tid as *const i32 as *const u8, 1, 1) };
        q.push_back(Buffer::received(
            b.data,
            PVMD_TID,
            tag,
            ctx,
            PVM_DATA_DEFAULT,
        ));
        false
    });
    settle_doorbell(&q);
}

impl Task {
    /// Registers a task-exit notify; fires at once for a task already gone.
    pub fn notify_exit(&self, watched: i32, tag: i32, ctx: i32) {
        self.notifies
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((watched, tag, ctx));
        let gone = match ctx_of(watched) {
            Some(c) if self.ctx.has_departed(c) => true,
            Some(_) => self.coord.request(&format!("STATUS {watched}")).as_deref() != Ok("alive"),
            None => true,
        };
        if gone {
            fire_notifies(&self.notifies, &self.inbox, watched);
        }
    }

    pub fn cancel_notify(&self, watched: i32, tag: i32) {
        self.notifies
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|&(w, t, _)| !(w == watched && t == tag));
    }

    /// Sends buffer `b` to `tid` with `tag` in message context `mctx`.
    pub fn send(&self, b: &Buffer, tid: i32, tag: i32, mctx: i32) -> i32 {
        if tag < 0 {
            return PVM_BAD_PARAM;
        }
        let mut hdr = [0u8; MSG_HEADER];
        for (i, w) in [tag, mctx, b.encoding, b.wid].iter().enumerate() {
            hdr[i * 4..i * 4 + 4].copy_from_slice(&w.to_le_bytes());
        }
        if tid == self.tid {
            let mut got = Buffer::received(flatten(b), self.tid, tag, mctx, b.encoding);
            got.wid = b.wid;
            got.dst = self.tid;
            let mut q = self.inbox.lock().unwrap_or_else(|e| e.into_inner());
            q.push_back(got);
            settle_doorbell(&q);
            return PVM_OK;
        }
        let Some(c) = ctx_of(tid) else {
            return PVM_BAD_PARAM;
        };
        let mut iov = vec![IoSlice::new(&hdr)];
        if b.parts.is_empty() {
            iov.push(IoSlice::new(b.body()));
        } else {
            for p in &b.parts {
                iov.push(IoSlice::new(match *p {
                    Part::Copied { start, end } => &b.data[start..end],
                    // SAFETY: PvmDataInPlace: the program promised the
                    // packed memory stays valid until it is sent (now).
                    Part::InPlace { ptr, len } => unsafe { std::slice::from_raw_parts(ptr, len) },
                }));
            }
        }
        let sp = Startpoint {
            ctx: c,
            endpoint: DEFAULT_ENDPOINT,
        };
        let _driving = Driving::new();
        match self.ctx.rsr_v(&sp, PVM_HANDLER, &iov) {
            Ok(()) => PVM_OK,
            Err(Error::LinkFailed { .. } | Error::BadStartpoint(_)) => PVM_NO_TASK,
            Err(_) => PVM_SYS_ERR,
        }
    }

    /// Takes the first message matching (`tid`, `tag`, `mctx`) from the inbox.
    pub fn take(&self, tid: i32, tag: i32, mctx: i32) -> Option<Buffer> {
        let mut q = self.inbox.lock().unwrap_or_else(|e| e.into_inner());
        let i = q.iter().position(|b| matches(b, tid, tag, mctx))?;
        let got = q.remove(i);
        settle_doorbell(&q);
        got
    }

    /// Whether a matching message is there; (bytes, tag, src) of the first.
    pub fn peek(&self, tid: i32, tag: i32, mctx: i32) -> Option<(usize, i32, i32)> {
        let q = self.inbox.lock().unwrap_or_else(|e| e.into_inner());
        q.iter()
            .find(|b| matches(b, tid, tag, mctx))
            .map(|b| (b.len(), b.tag, b.src))
    }

    /// Drives progress until `look` holds or `timeout` passes (`None` =
    /// forever, zero = one round of progress).
    pub fn wait_for(&self, timeout: Option<Duration>, mut look: impl FnMut() -> bool) {
        if look() {
            return;
        }
        let _driving = Driving::new();
        match timeout {
            None => self.ctx.wait(look),
            Some(d) if d.is_zero() => {
                self.ctx.progress();
                look();
            }
            Some(d) => {
                self.ctx.wait_timeout(d, look);
            }
        }
    }

    /// Waits for a matching message (`None` timeout = forever).
    pub fn receive(
        &self,
        tid: i32,
        tag: i32,
        mctx: i32,
        timeout: Option<Duration>,
    ) -> Option<Buffer> {
        let mut got = None;
        self.wait_for(timeout, || {
            got = self.take(tid, tag, mctx);
            got.is_some()
        });
        if let Some(b) = &got {
            self.link_back(b.src);
        }
        got
    }

    /// Opens the link to a task whose first message was just received, if
    /// none is open yet: PVM's direct route is one socket both ways, so a
    /// task's answer to a task it heard from goes at once. Over tcp the
    /// connection the sender opened serves (`Method::existing_link`); over
    /// shm, where each direction has its own ring, the ring back is made now
    /// and the receiver maps it while the program prepares its answer,
    /// instead of during the answer's first round trip.
    pub(crate) fn link_back(&self, src: i32) {
        if src == self.tid || src == PVMD_TID {
            return;
        }
        let Some(c) = ctx_of(src) else { return };
        if self.ctx.method_to(c).is_some() || self.ctx.has_departed(c) {
            return;
        }
        let _driving = Driving::new();
        let _ = self.ctx.open_link(c);
    }

    /// Leaves the virtual machine: the context tells its peers, the
    /// coordinator tells everyone else.
    pub fn exit(&self) {
        EXITED.store(true, Ordering::Release);
        // The coordinator drops our mailbox entries before any peer can
        // hear that we left (see `LEAVING`).
        let _ = self.coord.request("LEAVING");
        let _ = self.ctx.leave();
        self.coord.close();
    }
}

fn matches(b: &Buffer, tid: i32, tag: i32, mctx: i32) -> bool {
    (tid == -1 || b.src == tid) && (tag == -1 || b.tag == tag) && b.ctx == mctx
}

/// The bytes of an outgoing buffer in one piece.
pub fn flatten(b: &Buffer) -> Vec<u8> {
    if b.parts.is_empty() {
        return b.body().to_vec();
    }
    let mut out = Vec::with_capacity(b.len());
    for p in &b.parts {
        match *p {
            Part::Copied { start, end } => out.extend_from_slice(&b.data[start..end]),
            // SAFETY: see `Task::send`.
            Part::InPlace { ptr, len } => {
                out.extend_from_slice(unsafe { std::slice::from_raw_parts(ptr, len) })
            }
        }
    }
    out
}
