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
            let fd = conn.fd.as_raw_fd();
            // Where this read goes: the rest of a placed message straight
            // to its placement, else the receive buffer.
            let placing = inp
                .placing
                .as_ref()
                .map(|p| (p.placement.dst + p.got, p.placement.len - p.got));
            let (to, spare_len) = match placing {
                Some(rest) => rest,
                None => {
                    // Make room for what the current frame still needs, grown only
                    // as its bytes arrive (see `framing`).
                    let framed = matches!(inp.state, HsState::Ready);
                    let want = inp.rx.room_wanted(framed, self.max_msg);
                    inp.rx.reserve(want);
                    // (After `reserve`: it may move the unparsed bytes.)
                    let end = inp.rx.end;
                    let short_read = inp.after_placed;
                    let spare = &mut inp.rx.buf[end..];
                    let len = if short_read {
                        spare.len().min(FIRST_READ_AFTER_PLACED)
                    } else {
                        spare.len()
                    };
                    (spare.as_mut_ptr() as usize, len)
                }
            };
            // Where the buffered bytes end (a read into a placement leaves it).
            let end = inp.rx.end;
            // recv rather than read: a socket call skips the VFS layers
            // (rw_verify_area, security_file_permission, fdget_pos), and
            // while idle this call is the whole spin loop, so its cost is
            // the detection delay of the next message.
            // SAFETY: `to..to + spare_len` is writable and ours: the spare
            // room of the receive buffer, or the unwritten rest of a
            // placement (its maker's contract, see `Destination`); recv
            // writes at most `spare_len` bytes.
            let n =
                unsafe { libc::recv(fd, to as *mut libc::c_void, spare_len, libc::MSG_DONTWAIT) };
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
                let clean = inp.rx.end == inp.rx.start
                    && inp.placing.is_none()
                    && matches!(inp.state, HsState::Ready);
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
            budget = budget.saturating_sub(n as usize);
            if placing.is_some() {
                let finished = {
                    let p = inp.placing.as_mut().expect("placing just checked");
                    p.got += n as usize;
                    p.got == p.placement.len
                };
                if finished {
                    inp.after_placed = true;
                    let p = inp.placing.take().expect("placing just checked");
                    let peer = conn.peer.load(Ordering::Relaxed);
                    sink.deliver_placed(peer, &p.head[..p.placement.at], p.placement);
                    delivered += 1;
                }
                if budget == 0 || short {
                    break;
                }
                continue;
            }
            inp.rx.filled(n as usize);
            let res = self.process(conn, &mut inp, sink);
            // Short reads only while large frames follow each other (or
            // too little of the next frame came to tell).
            inp.after_placed = inp.placing.is_some()
                || (inp.after_placed && inp.rx.pending().len() < framing::HEADER + PLACE_HEAD);
            match res {
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

impl TcpMethod {
    /// A large frame whose start is buffered but not its end: asks the
    /// sink where the rest goes (`Sink::place`). On an answer, the part
    /// already buffered is moved there and the frame leaves the buffer;
    /// `readable` then reads the rest straight to the placement. Returns
    /// whether the frame is now being placed.
    pub(super) fn try_place(&self, peer: u32, inp: &mut In, sink: &mut dyn Sink) -> bool {
        let Some(len) = inp.rx.header() else {
            return false;
        };
        let have = inp.rx.pending().len() - framing::HEADER;
        if len < PLACE_MIN || len > self.max_msg || have >= len || have < PLACE_HEAD {
            return false;
        }
        let at = inp.rx.start + framing::HEADER;
        let Some(p) = sink.place(peer, &inp.rx.buf[at..at + PLACE_HEAD], len) else {
            return false;
        };
        // A placement that does not cover the frame's end exactly (a sink's
        // mistake) is given back (dropped: abandoned) and the frame is
        // delivered whole.
        if p.at > PLACE_HEAD || p.at.checked_add(p.len) != Some(len) {
            return false;
        }
        let mut head = [0u8; PLACE_HEAD];
        head[..p.at].copy_from_slice(&inp.rx.buf[at..at + p.at]);
        // `p.at <= PLACE_HEAD <= have < len`: the buffered rest of the frame
        // is shorter than the placed part.
        let body = &inp.rx.buf[at + p.at..inp.rx.end];
        // SAFETY: `p.dst..p.dst + p.len` is writable and ours (the
        // placement's contract) and `body.len() < p.len`; the receive
        // buffer is not part of it.
        unsafe { std::ptr::copy_nonoverlapping(body.as_ptr(), p.dst as *mut u8, body.len()) };
        let got = body.len();
        inp.rx.start = inp.rx.end;
        inp.rx.compact();
        inp.placing = Some(conn::Placing {
            head,
            placement: p,
            got,
        });
        true
    }
}
