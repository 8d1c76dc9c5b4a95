//! Waking a receiver that sleeps, without a system call while it does not.
//!
//! Shared memory has no file descriptor: a context that ran out of spinning
//! and sleeps in `poll` on its sockets used to notice a message over shm
//! only when its sleep slice (1–20 ms) ended. With more ranks than cores
//! (every oversubscribed job, HPL's ring broadcasts on 2 cores, a PVM task,
//! the one-sided progress thread) that slice was paid per message.
//!
//! The doorbell: before it sleeps, a receiver sets `sleeping` in every pair
//! segment it consumes (the receiver-written line, [`RxState`]), issues a
//! full fence and looks at its rings once more (a record that came in
//! meanwhile rings its own bell, an eventfd). A sender, after it published
//! a record, reads `sleeping` (one load of a line that changes only around
//! sleeps); if set, it takes it back (`swap`, so one bell per sleep and
//! sender) and writes one byte on the connection it already keeps to the
//! receiver (`handoff`). The receiver sleeps on an epoll set of its
//! listener, those connections and its eventfd, so the byte wakes it; when
//! it wakes it clears the flags and drains what rang.
//!
//! The sender does not fence between publishing and reading the flag (that
//! would cost every message a locked instruction): in the rare case where
//! its read overtakes its publication and the receiver's check, the
//! receiver sleeps to the end of its slice, as before the doorbell — late,
//! never lost.

use super::layout::RxState;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{fence, Ordering};

/// Rings the bell of a receiver that said it sleeps: one load on the send
/// path; a system call only when the receiver sleeps.
#[inline]
pub fn wake(rx: &RxState, conn: RawFd) {
    if rx.sleeping.load(Ordering::Relaxed) != 0 {
        ring(rx, conn);
    }
}

#[cold]
#[inline(never)]
fn ring(rx: &RxState, conn: RawFd) {
    if rx.sleeping.swap(0, Ordering::AcqRel) != 0 {
        // Non-blocking: a full socket buffer means bells are already waiting.
        // SAFETY: our connected socket and a 1-byte buffer.
        unsafe {
            libc::send(
                conn,
                [1u8].as_ptr() as *const libc::c_void,
                1,
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
    }
}

/// The receiver's side: what it sleeps on.
pub struct Bell {
    epoll: OwnedFd,
    /// Rung by the receiver itself when a record arrived while it got ready to sleep.
    own: OwnedFd,
    listener: RawFd,
}

impl Bell {
    /// An epoll set holding `listener` (readable when a sender connects)
    /// and an eventfd of our own.
    pub fn new(listener: RawFd) -> io::Result<Bell> {
        // SAFETY: plain integer arguments; results checked.
        let epoll = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if epoll < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor owned by nobody else.
        let epoll = unsafe { OwnedFd::from_raw_fd(epoll) };
        // SAFETY: as above.
        let own = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if own < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor owned by nobody else.
        let own = unsafe { OwnedFd::from_raw_fd(own) };
        let b = Bell {
            epoll,
            own,
            listener,
        };
        b.watch(listener)?;
        b.watch(b.own.as_raw_fd())?;
        Ok(b)
    }

    /// The descriptor a sleeping context polls.
    pub fn fd(&self) -> RawFd {
        self.epoll.as_raw_fd()
    }

    /// Adds a sender's connection (it stays until its descriptor is closed,
    /// which removes it from the set, or it reads end-of-file).
    pub fn watch(&self, fd: RawFd) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: fd as u64,
        };
        // SAFETY: valid descriptors and a live event.
        if unsafe { libc::epoll_ctl(self.epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) } != 0
        {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Before a sleep: raises `sleeping` on every ring we consume, then
    /// rings our own bell if one of them has a record already (`ready`).
    pub fn before_sleep<'a>(
        &self,
        rings: impl Iterator<Item = &'a RxState>,
        ready: impl FnOnce() -> bool,
    ) {
        for rx in rings {
            rx.sleeping.store(1, Ordering::Relaxed);
        }
        // Orders the flags before the look at the rings (the sender's side
        // is publish-then-read: see the module's comment).
        fence(Ordering::SeqCst);
        if ready() {
            let one = 1u64;
            // SAFETY: our eventfd and an 8-byte buffer.
            unsafe {
                libc::write(
                    self.own.as_raw_fd(),
                    &one as *const u64 as *const libc::c_void,
                    8,
                )
            };
        }
    }

    /// After a sleep: lowers the flags and drains every bell that rang (a
    /// connection at end-of-file, its sender gone, leaves the set).
    pub fn after_sleep<'a>(&self, rings: impl Iterator<Item = &'a RxState>) {
        for rx in rings {
            rx.sleeping.store(0, Ordering::Relaxed);
        }
        let mut evs = [libc::epoll_event { events: 0, u64: 0 }; 16];
        // SAFETY: a live array of the length passed; timeout 0.
        let n = unsafe { libc::epoll_wait(self.epoll.as_raw_fd(), evs.as_mut_ptr(), 16, 0) };
        for ev in evs.iter().take(n.max(0) as usize) {
            let fd = ev.u64 as RawFd;
            if fd == self.listener {
                // Accepted by the next thorough poll.
                continue;
            }
            let mut buf = [0u8; 64];
            if fd == self.own.as_raw_fd() {
                // SAFETY: our eventfd and a buffer of at least 8 bytes.
                unsafe { libc::read(fd, buf.as_mut_ptr() as *mut libc::c_void, 8) };
                continue;
            }
            loop {
                // SAFETY: a descriptor in our set and a live buffer.
                let r = unsafe {
                    libc::recv(
                        fd,
                        buf.as_mut_ptr() as *mut libc::c_void,
                        buf.len(),
                        libc::MSG_DONTWAIT,
                    )
                };
                if r == 0 {
                    // The sender is gone: its connection would stay readable.
                    // SAFETY: a descriptor in our set.
                    unsafe {
                        libc::epoll_ctl(
                            self.epoll.as_raw_fd(),
                            libc::EPOLL_CTL_DEL,
                            fd,
                            std::ptr::null_mut(),
                        )
                    };
                    break;
                }
                if r <= 0 {
                    break;
                }
            }
        }
    }
}
