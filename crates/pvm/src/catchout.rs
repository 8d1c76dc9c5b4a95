//! `pvm_catchout`: the output of tasks spawned afterwards (on this host)
//! goes to a stream of the parent instead of the virtual machine's log,
//! framed as PVM frames it: `[t40003] BEGIN`, one `[t40003] line` per line,
//! `[t40003] EOF`. Each spawned task's stdout and stderr are one pipe,
//! read by a thread of the parent; `pvm_exit` waits for those threads (the
//! tasks' ends), as PVM's does.
//!
//! A task on a remote host writes into a pipe of its host's agent, which
//! sends it to the parent over TCP (see [`remote_address`]): the parent
//! listens, the agent connects and proves the job secret (`AUTH <secret>`,
//! then `TID <tid>`), and the bytes that follow are the task's output,
//! framed here as a local task's are.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::{mpsc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long a remote task's agent may take to connect its output.
const CONNECT_LIMIT: Duration = Duration::from_secs(60);

/// The program's `FILE *` (as an address), while catching.
static TARGET: Mutex<Option<usize>> = Mutex::new(None);
static READERS: Mutex<Vec<JoinHandle<()>>> = Mutex::new(Vec::new());

/// `pvm_catchout(ff)`: catch into `ff`, or stop catching (NULL).
pub fn set(ff: *mut libc::c_void) {
    *TARGET.lock().unwrap_or_else(|e| e.into_inner()) = (!ff.is_null()).then_some(ff as usize);
}

/// A pipe for a task about to be spawned while catching: (read end, write
/// end), both close-on-exec (the write end is dup'ed onto the task's
/// stdout and stderr, which clears the flag there only).
pub fn pipe() -> Option<(OwnedFd, OwnedFd)> {
    TARGET.lock().unwrap_or_else(|e| e.into_inner()).as_ref()?;
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 fills two descriptors we then own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return None;
    }
    // SAFETY: both descriptors were just created and are owned by nobody else.
    Some(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

fn put(ff: usize, text: &str) {
    let Ok(c) = std::ffi::CString::new(text.replace('\0', "")) else {
        return;
    };
    // SAFETY: `ff` is the FILE * the program gave pvm_catchout, valid while
    // it catches (PVM's contract); glibc locks the stream per call.
    unsafe {
        libc::fputs(c.as_ptr(), ff as *mut libc::FILE);
        libc::fflush(ff as *mut libc::FILE);
    }
}

/// Copies `r` to the catching stream `ff`, framed with task `tid`'s id.
fn copy_framed(ff: usize, tid: i32, r: impl Read) {
    let mut r = BufReader::new(r);
    let mut line = Vec::new();
    while r.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
        let text = String::from_utf8_lossy(&line);
        put(ff, &format!("[t{tid:x}] {}\n", text.trim_end_matches('\n')));
        line.clear();
    }
}

/// Runs `body` on a reader thread `pvm_exit` waits for, between the
/// task's BEGIN and EOF lines.
fn reader(tid: i32, body: impl FnOnce(usize) + Send + 'static) {
    let Some(ff) = *TARGET.lock().unwrap_or_else(|e| e.into_inner()) else {
        return;
    };
    let h = std::thread::Builder::new()
        .name("gwpvm-catchout".into())
        .spawn(move || {
            put(ff, &format!("[t{tid:x}] BEGIN\n"));
            body(ff);
            put(ff, &format!("[t{tid:x}] EOF\n"));
        });
    if let Ok(h) = h {
        READERS.lock().unwrap_or_else(|e| e.into_inner()).push(h);
    }
}

/// Copies task `tid`'s output from `read` to the catching stream, framed.
pub fn watch(tid: i32, read: OwnedFd) {
    reader(tid, move |ff| {
        copy_framed(ff, tid, std::fs::File::from(read))
    });
}

/// Remote tasks whose output connection is awaited, by task id.
static AWAITED: Mutex<Option<HashMap<i32, mpsc::Sender<TcpStream>>>> = Mutex::new(None);

/// While catching, the address a remote host's agent sends a task's output
/// to, as the `SPAWN` request carries it (hex of `host:port`, or of
/// `:port` when this task runs where the coordinator does: the agent then
/// uses the address it reaches the coordinator at). None when not catching
/// or no listener can be had (the output then goes to the log).
pub fn remote_address(secret: [u8; 32], coordinator: Option<&str>) -> Option<String> {
    TARGET.lock().unwrap_or_else(|e| e.into_inner()).as_ref()?;
    let port = listener_port(secret)?;
    let host = match coordinator {
        None => String::new(),
        // This host's address on the way to the coordinator (a connected
        // UDP socket sends nothing; the kernel just picks the route).
        Some(c) => {
            let u = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
            u.connect(c).ok()?;
            u.local_addr().ok()?.ip().to_string()
        }
    };
    let addr = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    Some(crate::coord::hex(addr.as_bytes()))
}

/// The port this task listens on for remote tasks' output, from the
/// first call on (every address: the agent connects from wherever its
/// host is).
fn listener_port(secret: [u8; 32]) -> Option<u16> {
    static PORT: Mutex<Option<u16>> = Mutex::new(None);
    let mut p = PORT.lock().unwrap_or_else(|e| e.into_inner());
    if p.is_none() {
        let l = TcpListener::bind("0.0.0.0:0").ok()?;
        let port = l.local_addr().ok()?.port();
        std::thread::Builder::new()
            .name("gwpvm-catchout-listen".into())
            .spawn(move || {
                for s in l.incoming().flatten() {
                    std::thread::spawn(move || accept(s, &secret));
                }
            })
            .ok()?;
        *p = Some(port);
    }
    *p
}

/// An agent's connection: the secret, then `TID <tid>` of a task awaited.
fn accept(s: TcpStream, secret: &[u8; 32]) {
    if !crate::remote::authenticated(&s, secret) {
        return;
    }
    let Some(tid) = crate::remote::read_line(&s, 40)
        .and_then(|l| l.strip_prefix("TID ").and_then(|t| t.parse::<i32>().ok()))
    else {
        return;
    };
    let _ = s.set_read_timeout(None);
    let tx = AWAITED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_mut()
        .and_then(|m| m.remove(&tid));
    if let Some(tx) = tx {
        let _ = tx.send(s);
    }
}

/// While catching, makes ready for remote task `tid`'s output connection
/// (before the task is started, so that an early connection is kept);
/// then [`watch_remote`] once it started, or [`forget_remote`].
pub fn expect_remote(tid: i32) -> Option<mpsc::Receiver<TcpStream>> {
    TARGET.lock().unwrap_or_else(|e| e.into_inner()).as_ref()?;
    let (tx, rx) = mpsc::channel();
    AWAITED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert_with(HashMap::new)
        .insert(tid, tx);
    Some(rx)
}

/// The task was not started: its connection is not awaited any more.
pub fn forget_remote(tid: i32) {
    if let Some(m) = AWAITED.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        m.remove(&tid);
    }
}

/// Catches remote task `tid`'s output: a reader that waits for its agent
/// to connect (at most [`CONNECT_LIMIT`]) and copies what comes.
pub fn watch_remote(tid: i32, rx: mpsc::Receiver<TcpStream>) {
    reader(tid, move |ff| {
        if let Ok(s) = rx.recv_timeout(CONNECT_LIMIT) {
            copy_framed(ff, tid, s);
        }
        forget_remote(tid);
    });
}

/// Waits for every caught task's output to end (`pvm_exit`).
pub fn wait(me: i32) {
    let readers = std::mem::take(&mut *READERS.lock().unwrap_or_else(|e| e.into_inner()));
    if readers.iter().any(|h| !h.is_finished()) {
        eprintln!("libpvm [t{me:x}]: child task(s) still running.  waiting...");
    }
    for h in readers {
        let _ = h.join();
    }
}
