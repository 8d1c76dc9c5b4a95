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
        let more = self.suppressed.swap(0, Ordering::Relaxed);
        if more > 0 {
            eprintln!(
                "gw[{me}]: tcp: {} (and {more} similar events in the last {} s)",
                what(),
                NOTICE_PERIOD.as_secs()
            );
        } else {
            eprintln!("gw[{me}]: tcp: {}", what());
        }
        true
    }
}

impl TcpMethod {
    pub(super) fn accept_all(&self, sink: &mut dyn Sink) {
        loop {
            match self.listener.accept() {
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
                        eprintln!(
                            "gw[{}]: tcp: cannot register accepted connection: {e}",
                            self.me
                        );
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    eprintln!("gw[{}]: tcp: accept: {e}", self.me);
                    return;
                }
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
                    && now.duration_since(c.opened) >= self.handshake_timeout
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
                self.fail(
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
                        "closed a connection (claims to be context {}) that did not \
                         authenticate within {secs} s (GW_TCP_HANDSHAKE_TIMEOUT); {n} so far; \
                         nothing delivered",
                        c.peer_name()
                    )
                });
            }
        }
    }
}
