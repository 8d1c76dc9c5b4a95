//! `pvm_catchout`: the output of tasks spawned afterwards (on this host)
//! goes to a stream of the parent instead of the virtual machine's log,
//! framed as PVM frames it: `[t40003] BEGIN`, one `[t40003] line` per line,
//! `[t40003] EOF`. Each spawned task's stdout and stderr are one pipe,
//! read by a thread of the parent; `pvm_exit` waits for those threads (the
//! tasks' ends), as PVM's does. Tasks on remote hosts still write to the
//! log (their output travels over the agent's ssh session).

use std::io::{BufRead, BufReader};
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::Mutex;
use std::thread::JoinHandle;

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

/// Copies task `tid`'s output from `read` to the catching stream, framed.
pub fn watch(tid: i32, read: OwnedFd) {
    let Some(ff) = *TARGET.lock().unwrap_or_else(|e| e.into_inner()) else {
        return;
    };
    let h = std::thread::Builder::new()
        .name("gwpvm-catchout".into())
        .spawn(move || {
            put(ff, &format!("[t{tid:x}] BEGIN\n"));
            let mut r = BufReader::new(std::fs::File::from(read));
            let mut line = Vec::new();
            while r.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
                let text = String::from_utf8_lossy(&line);
                put(ff, &format!("[t{tid:x}] {}\n", text.trim_end_matches('\n')));
                line.clear();
            }
            put(ff, &format!("[t{tid:x}] EOF\n"));
        });
    if let Ok(h) = h {
        READERS.lock().unwrap_or_else(|e| e.into_inner()).push(h);
    }
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
