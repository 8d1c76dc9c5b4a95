//! Reading a connection and handing its bytes to the parser.

use super::*;

impl TcpMethod {
    /// Reads what is available on `conn` and delivers complete frames.
    pub(super) fn readable(&self, conn: &Arc<Conn>, sink: &mut dyn Sink) -> usize {
        // Another thread reading this connection delivers what is there.
        let Some(mut inp) = conn.inp.try_lock() else {
            return 0;
        };
        if matches!(inp.state, HsState::Connecting) {
            // `advance_connects` completes it (and reports a failure).
            return 0;
        }
        let mut delivered = 0;
        // Bound the work per poll so one busy connection cannot starve others.
        let mut budget = 8usize << 20;
        loop {
            // Make room for what the current frame still needs, grown only
            // as its bytes arrive (see `framing`).
            let framed = matches!(inp.state, HsState::Ready);
            let want = inp.rx.room_wanted(framed, self.max_msg);
            inp.rx.reserve(want);
            let fd = conn.fd.as_raw_fd();
            let end = inp.rx.end;
            let spare = &mut inp.rx.buf[end..];
            let spare_len = spare.len();
            // recv rather than read: a socket call skips the VFS layers
            // (rw_verify_area, security_file_permission, fdget_pos), and
            // while idle this call is the whole spin loop, so its cost is
            // the detection delay of the next message.
            // SAFETY: `spare` is a live, writable slice; recv writes at most its length.
            let n = unsafe {
                libc::recv(
                    fd,
                    spare.as_mut_ptr() as *mut libc::c_void,
                    spare.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if n < 0 {
                // The common case, an empty socket, without building an io::Error.
                // SAFETY: errno is this thread's, set by the failed recv just above.
                let errno = unsafe { *libc::__errno_location() };
                if errno == libc::EAGAIN && delivered == 0 && inp.rx.end == end {
                    let idle = conn.idle_reads.load(Ordering::Relaxed);
                    conn.idle_reads
                        .store(idle.saturating_add(1), Ordering::Relaxed);
                    break;
                }
                let e = io::Error::from_raw_os_error(errno);
                match e.kind() {
                    io::ErrorKind::WouldBlock => {
                        if delivered == 0 && inp.rx.end == end {
                            let idle = conn.idle_reads.load(Ordering::Relaxed);
                            conn.idle_reads
                                .store(idle.saturating_add(1), Ordering::Relaxed);
                        }
                        break;
                    }
                    io::ErrorKind::Interrupted => continue,
                    _ => {
                        // A connection that never authenticated to us (a
                        // reset, say) tells us nothing about the rank it
                        // claimed to be: its real link must not fail.
                        let unproven =
                            matches!(inp.state, HsState::AwaitHello | HsState::AwaitProof { .. });
                        drop(inp);
                        if unproven {
                            self.close(conn);
                            return delivered;
                        }
                        self.broken(conn, sink, format!("read from {}: {e}", conn.peer_name()));
                        return delivered;
                    }
                }
            }
            if n == 0 {
                let clean = inp.rx.end == inp.rx.start && matches!(inp.state, HsState::Ready);
                // An acceptor closes on us during our handshake when it refuses
                // our proof (or does not know the secret itself).
                let refused_us = matches!(inp.state, HsState::AwaitChallenge { .. });
                let authed = matches!(inp.state, HsState::Ready);
                let inp_was_proof = matches!(inp.state, HsState::AwaitProof { .. });
                drop(inp);
                if refused_us {
                    self.fail(
                        conn,
                        sink,
                        format!("{} closed the connection during authentication (wrong job secret, or it \
                             had too many connections authenticating)", conn.peer_name()),
                    );
                } else if !authed && inp_was_proof {
                    // The connector saw our proof and left: it does not share our secret.
                    let n = self.refused.fetch_add(1, Ordering::Relaxed) + 1;
                    self.unauthenticated_notice.say(self.me, || {
                        format!(
                            "refused TCP connection (claims to be {}): it closed during \
                             authentication; nothing delivered; {n} refused so far",
                            conn.peer_name()
                        )
                    });
                    self.close(conn);
                } else if clean || !authed {
                    if self.verbose >= 2 {
                        crate::say!(
                            "gw[{}]: tcp: connection from {} closed",
                            self.me,
                            conn.peer_name()
                        );
                    }
                    self.close(conn);
                } else {
                    self.broken(
                        conn,
                        sink,
                        format!(
                            "{} closed the connection in the middle of a message",
                            conn.peer_name()
                        ),
                    );
                }
                return delivered;
            }
            let short = (n as usize) < spare_len;
            conn.idle_reads.store(0, Ordering::Relaxed);
            inp.rx.filled(n as usize);
            budget = budget.saturating_sub(n as usize);
            match self.process(conn, &mut inp, sink) {
                Ok(d) => delivered += d,
                Err(why) => {
                    // A connection that never authenticated to us tells us
                    // nothing about the context it claimed to be: drop it
                    // without touching that context's real link.
                    let unproven =
                        matches!(inp.state, HsState::AwaitHello | HsState::AwaitProof { .. });
                    drop(inp);
                    if unproven {
                        self.close(conn);
                    } else {
                        self.fail(conn, sink, why);
                    }
                    return delivered;
                }
            }
            // A short read drained the socket: skip the read that would only
            // say EAGAIN (level-triggered epoll reports any later data).
            if budget == 0 || short {
                break;
            }
        }
        delivered
    }
}
