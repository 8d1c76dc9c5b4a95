//! Accepting connections on the listening socket, and keeping what
//! unauthenticated clients can hold bounded: at most
//! `GW_TCP_MAX_UNAUTHENTICATED` accepted connections authenticate at once
//! (more are closed at once), and none for longer than
//! `GW_TCP_HANDSHAKE_TIMEOUT`. Anyone who can reach the port can open
//! connections; without these bounds a silent or slow client holds a
//! descriptor and a buffer for ever, and enough of them exhaust the process.

use super::*;

/// A message printed at most once per `NOTICE_PERIOD`, with a count of
/// what it stood for since: a flood of connections (or a listener that
/// keeps failing) must not turn into a flood of lines on stderr.
#[derive(Default)]
pub(super) struct Notice {
    last: Mutex<Option<Instant>>,
    suppressed: AtomicU64,
    /// Messages printed (for tests).
    printed: AtomicU64,
}

/// See [`Notice`].
pub(super) const NOTICE_PERIOD: Duration = Duration::from_secs(1);

impl Notice {
    /// Prints `what()` unless a message was printed less than a period ago.
    /// Returns whether it printed.
    pub(super) fn say(&self, me: u32, what: impl FnOnce() -> String) -> bool {
        let now = Instant::now();
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if last.is_some_and(|t| now.duration_since(t) < NOTICE_PERIOD) {
            self.suppressed.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        *last = Some(now);
        self.printed.fetch_add(1, Ordering::Relaxed);
        let more = self.suppressed.swap(0, Ordering::Relaxed);
        if more > 0 {
            crate::say!(
                "gw[{me}]: tcp: {} (and {more} similar events in the last {} s)",
                what(),
                NOTICE_PERIOD.as_secs()
            );
        } else {
            crate::say!("gw[{me}]: tcp: {}", what());
        }
        true
    }

    /// Messages printed so far.
    #[cfg(test)]
    pub(super) fn printed(&self) -> u64 {
        self.printed.load(Ordering::Relaxed)
    }
}

/// How long the listener stays out of the epoll set after an accept failed
/// for lack of descriptors or memory. Level-triggered epoll reports a
/// listener with a pending connection on every poll; accepting again at
/// once only fails again (and printed a line per poll), while the job's
/// own links keep working without new connections. A peer that connects
/// meanwhile waits in the backlog and is accepted when descriptors are
/// free, or fails its link at its handshake timeout with a message naming
/// this rank.
pub(super) const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// Accept errors that say the process (or system) is out of a resource:
/// retrying at once cannot succeed.
fn out_of_resources(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    )
}

impl TcpMethod {
    fn accept_one(&self) -> io::Result<(TcpStream, SocketAddr)> {
        #[cfg(test)]
        {
            let fault = self.accept_fault.load(Ordering::Relaxed);
            if fault != 0 {
                return Err(io::Error::from_raw_os_error(fault));
            }
        }
        self.listener.accept()
    }

    pub(super) fn accept_all(&self, sink: &mut dyn Sink) {
        loop {
            match self.accept_one() {
                Ok((s, from)) => {
                    if self.unauthenticated.load(Ordering::Relaxed) >= self.max_unauthenticated {
                        // Slots held past their time are free to take.
                        self.expire_handshakes(sink);
                    }
                    if self.unauthenticated.load(Ordering::Relaxed) >= self.max_unauthenticated {
                        drop(s);
                        let n = self.unauthenticated_dropped.fetch_add(1, Ordering::Relaxed) + 1;
                        self.unauthenticated_notice.say(self.me, || {
                            format!(
                                "closed a connection from {from} at once: {} connections are \
                                 already authenticating (GW_TCP_MAX_UNAUTHENTICATED); {n} closed \
                                 so far",
                                self.max_unauthenticated
                            )
                        });
                        continue;
                    }
                    if let Err(e) = self.register(s, HsState::AwaitHello, u32::MAX) {
                        crate::say!(
                            "gw[{}]: tcp: cannot register accepted connection: {e}",
                            self.me
                        );
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.raw_os_error() == Some(libc::ECONNABORTED) => continue,
                Err(e) => {
                    let n = self.accept_failures.fetch_add(1, Ordering::Relaxed) + 1;
                    let pause = out_of_resources(&e);
                    if pause {
                        self.pause_accept();
                    }
                    self.accept_notice.say(self.me, || {
                        if pause {
                            format!(
                                "cannot accept new connections: {e} (at the open-file limit? \
                                 see `ulimit -n`); existing links continue, new peers wait; \
                                 retrying every {} ms; {n} failed accepts so far",
                                ACCEPT_PAUSE.as_millis()
                            )
                        } else {
                            format!("accept: {e}; {n} failed accepts so far")
                        }
                    });
                    return;
                }
            }
        }
    }

    /// Takes the listener out of the epoll set for `ACCEPT_PAUSE`.
    fn pause_accept(&self) {
        let mut until = self
            .accept_paused_until
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if until.is_none() {
            // SAFETY: removing a registered fd; a null event pointer is allowed for DEL.
            unsafe {
                libc::epoll_ctl(
                    self.epoll.as_raw_fd(),
                    libc::EPOLL_CTL_DEL,
                    self.listener.as_raw_fd(),
                    std::ptr::null_mut(),
                )
            };
        }
        *until = Some(Instant::now() + ACCEPT_PAUSE);
        self.accept_paused.store(true, Ordering::Relaxed);
    }

    /// Puts the listener back in the epoll set once its pause is over.
    pub(super) fn resume_accept(&self) {
        if !self.accept_paused.load(Ordering::Relaxed) {
            return;
        }
        let mut until = self
            .accept_paused_until
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if until.is_some_and(|t| Instant::now() >= t) {
            match epoll_add(
                self.epoll.as_raw_fd(),
                self.listener.as_raw_fd(),
                LISTENER_TOKEN,
            ) {
                Ok(()) => {
                    *until = None;
                    self.accept_paused.store(false, Ordering::Relaxed);
                }
                // Out of memory for the registration too: try again later.
                Err(_) => *until = Some(Instant::now() + ACCEPT_PAUSE),
            }
        }
    }

    /// Marks `conn` as no longer authenticating (authenticated or closed).
    pub(super) fn handshake_over(&self, conn: &Conn) {
        if conn.in_handshake.swap(false, Ordering::Relaxed) {
            self.handshaking.fetch_sub(1, Ordering::Relaxed);
            if !conn.outgoing {
                self.unauthenticated.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }

    /// Closes connections that did not authenticate within
    /// `GW_TCP_HANDSHAKE_TIMEOUT`: an accepted one silently (counted), one
    /// we made by failing its link (the peer rank accepted but never
    /// proved itself).
    pub(super) fn expire_handshakes(&self, sink: &mut dyn Sink) {
        if self.handshaking.load(Ordering::Relaxed) == 0 {
            return;
        }
        let now = Instant::now();
        let expired: Vec<Arc<Conn>> = self
            .conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .filter(|c| {
                c.in_handshake.load(Ordering::Relaxed)
                    && c.established
                        .get()
                        .is_some_and(|&t| now.duration_since(t) >= self.handshake_timeout)
            })
            .cloned()
            .collect();
        for c in expired {
            if !c.in_handshake.load(Ordering::Relaxed) {
                continue;
            }
            let n = self.handshake_timeouts.fetch_add(1, Ordering::Relaxed) + 1;
            let secs = self.handshake_timeout.as_secs();
            if c.outgoing {
                let peer = c.peer.load(Ordering::Relaxed);
                self.broken(
                    &c,
                    sink,
                    format!(
                        "rank {peer} accepted the tcp connection but did not authenticate \
                         within {secs} s (GW_TCP_HANDSHAKE_TIMEOUT)"
                    ),
                );
            } else {
                self.close(&c);
                self.unauthenticated_notice.say(self.me, || {
                    format!(
                        "closed a connection (claims to be {}) that did not \
                         authenticate within {secs} s (GW_TCP_HANDSHAKE_TIMEOUT); {n} so far; \
                         nothing delivered",
                        c.peer_name()
                    )
                });
            }
        }
    }
}
