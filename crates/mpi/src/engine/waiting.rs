//! Waiting: how a thread blocked in MPI drives progress (spinning, napping
//! beside helper threads, the one-sided timestamps), pokes, and sending the
//! rendezvous data whose receiver became ready.

use super::*;
use gridwire_core::context::spin_guard;

impl Engine {
    /// Called at the start of a helper thread: while it runs, waits (its
    /// own and others') nap instead of spinning.
    pub fn helper(&self) -> Helper<'_> {
        self.helpers.fetch_add(1, Ordering::AcqRel);
        Helper(self)
    }

    /// Drives progress until `done()`; also sends rendezvous data whose
    /// receiver is ready (that cannot happen inside a handler).
    pub fn wait_for(&self, done: impl FnMut() -> bool) {
        if crate::rma::polling::STAMPS.any() {
            return self.wait_for_stamping(done);
        }
        self.wait_for_plain(done)
    }

    /// [`Engine::wait_for`] saying in the windows' lock segments that this
    /// process polls (`rma/polling.rs`): a stamp at the start, again every
    /// 16th round once the last one is [`REFRESH_TICKS`] old, and 0 at the end.
    #[inline(never)]
    pub(super) fn wait_for_stamping(&self, mut done: impl FnMut() -> bool) {
        use crate::rma::polling::{now, REFRESH_TICKS, STAMPS};
        let stamps = &STAMPS;
        let mut last = now();
        stamps.stamp(last);
        let mut rounds = 0u32;
        self.wait_for_plain(|| {
            rounds = rounds.wrapping_add(1);
            if rounds.is_multiple_of(16) {
                // Not on every 16th round (about every microsecond): each
                // store takes the line from the origins that read the stamp
                // on every operation, a cache miss each.
                let t = now();
                if t.wrapping_sub(last) >= REFRESH_TICKS {
                    stamps.stamp(t);
                    last = t;
                }
            }
            done()
        });
        stamps.stamp(0);
    }

    pub(super) fn wait_for_plain(&self, mut done: impl FnMut() -> bool) {
        // A counter, not a thread-local flag: reading a thread-local is a
        // function call in a shared library, on every wait.
        if self.helpers.load(Ordering::Acquire) > 0 {
            return self.wait_beside_helpers(done);
        }
        if !self.spin.is_zero() && !spin_guard::held() {
            // The clock is read only after 256 idle polls: most waits of a
            // small message end sooner, and a clock read costs more than a poll.
            let mut start: Option<Instant> = None;
            let mut read: Option<Instant> = None;
            let mut idle = 0u32;
            loop {
                self.push_ready();
                if done() {
                    return;
                }
                if self.ctx.progress() > 0 {
                    idle = 0;
                    read = None;
                    continue;
                }
                idle += 1;
                // No pause instruction: it would be added to the time to
                // notice the next message (see `Context::wait`).
                if idle.is_multiple_of(256) {
                    // A helper thread started meanwhile (by another thread):
                    // stop spinning on the core it needs.
                    if self.helpers.load(Ordering::Acquire) > 0 {
                        return self.wait_beside_helpers(done);
                    }
                    // Descheduled since the last read: the core is shared
                    // with another busy process (see `spin_guard`), and
                    // the runtime's wait yields it at once.
                    let now = Instant::now();
                    if spin_guard::descheduled(read, now)
                        || now.saturating_duration_since(*start.get_or_insert(now)) >= self.spin
                    {
                        break;
                    }
                    read = Some(now);
                }
            }
        }
        self.ctx.wait(|| {
            self.push_ready();
            done()
        });
    }

    /// One round of progress as a wait's loop makes it (no clock read, no
    /// thorough round): for waits outside the engine (the collectives'
    /// shared segment). Returns the messages delivered.
    #[inline]
    pub(crate) fn progress_round(&self) -> usize {
        self.push_ready();
        self.ctx.progress()
    }

    /// [`Engine::wait_for`] while helper threads run.
    pub(crate) fn wait_beside_helpers(&self, mut done: impl FnMut() -> bool) {
        {
            // A helper thread (nonblocking collective), or a thread waiting
            // while one runs: the messages a helper waits for are often taken
            // in by another thread's progress, which does not wake it from
            // the runtime's wait (a poll of up to 1-20 ms per round), and a
            // spinning thread would keep the helper from a core. Short naps
            // instead, growing to 1 ms: about as many wake-ups as that poll
            // when idle for long, far less latency per round.
            let start = Instant::now();
            let mut nap = Duration::from_micros(10);
            let mut napped = false;
            loop {
                self.push_ready();
                if done() {
                    return;
                }
                // After a nap, a thorough round: the rounds are far apart,
                // and the usual one looks at sockets only every 64th time
                // (and at idle connections every 64th of those): a message
                // waiting on a socket sat there for seconds of naps.
                let got = if napped {
                    self.ctx.progress_thorough()
                } else {
                    self.ctx.progress()
                };
                napped = false;
                if got > 0 {
                    nap = Duration::from_micros(10);
                    continue;
                }
                napped = true;
                std::thread::sleep(nap);
                // Up to 100 us for the first 20 ms of a wait, then up to 1 ms.
                let cap = if start.elapsed() < Duration::from_millis(20) {
                    100
                } else {
                    1000
                };
                nap = (nap * 2).min(Duration::from_micros(cap));
            }
        }
    }

    /// One round of progress (for the `Test` family and `Iprobe`): a
    /// thorough one when the last was [`POKE_GAP`] ago or more.
    pub fn poke(&self) {
        self.push_ready();
        // The clock is read on every 8th poke only: a loop that only
        // probes spent 15 % of its time reading it (HPL waiting for a
        // panel). Plain load and store: a lost count between threads only
        // moves the next look by a poke.
        let pokes = self.pokes.load(Ordering::Relaxed).wrapping_add(1);
        self.pokes.store(pokes, Ordering::Relaxed);
        if pokes.is_multiple_of(8) && self.thorough_poke_due() {
            self.ctx.progress_thorough();
        } else {
            self.ctx.progress();
        }
        self.push_ready();
    }

    #[inline(never)]
    pub(super) fn thorough_poke_due(&self) -> bool {
        let now = u64::try_from(self.born.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let last = self.last_thorough_poke.load(Ordering::Relaxed);
        if now.saturating_sub(last) < POKE_GAP.as_nanos() as u64 {
            return false;
        }
        self.last_thorough_poke.store(now, Ordering::Relaxed);
        true
    }

    /// Sends what became ready (rendezvous data, pulls). Inlined: it runs on
    /// every round of a wait loop, and there is almost never anything.
    #[inline]
    pub(super) fn push_ready(&self) {
        if self.ready_len.load(Ordering::Acquire) > 0 {
            self.push_ready_now();
        }
        if self.lent_len.load(Ordering::Relaxed) > 0 {
            self.release_lent();
        }
        if self.failures.pending.load(Ordering::Relaxed) {
            self.handle_peer_failures();
        }
    }

    #[inline(never)]
    pub(super) fn push_ready_now(&self) {
        while self.ready_len.load(Ordering::Acquire) > 0 {
            // Parts of our sends a receiver waits for come first (it copies
            // its own part meanwhile), then the parts declined to us,
            // then our single copies, then data cleared to go.
            let (item, pull, assist, rest) = {
                let mut st = self.lock();
                let assist = st.assists_out.pop_front();
                let rest = if assist.is_none() {
                    st.assist_rest.pop_front()
                } else {
                    None
                };
                let pull = if assist.is_none() && rest.is_none() {
                    st.pulls.pop_front()
                } else {
                    None
                };
                let it = if assist.is_none() && rest.is_none() && pull.is_none() {
                    st.ready.pop_front()
                } else {
                    None
                };
                if it.is_some() || pull.is_some() || assist.is_some() || rest.is_some() {
                    self.ready_len.fetch_sub(1, Ordering::AcqRel);
                }
                (it, pull, assist, rest)
            };
            if let Some(a) = assist {
                self.copy_assist(a);
                continue;
            }
            if let Some((rreq, from)) = rest {
                self.copy_rest(rreq, from);
                continue;
            }
            if let Some((req, from, env)) = pull {
                self.pull(req, from, env);
                continue;
            }
            let Some((req, to, rreq)) = item else { return };
            let (data, key) = {
                let mut d = req.d.lock();
                let key = crate::comm_links::traffic_key(d.ctx);
                (std::mem::replace(&mut d.send, SendData::None), key)
            };
            let res = match &data {
                SendData::User(b) => match b.contig() {
                    Some(s) if s.len() >= lent::LEND_MIN => {
                        match self.send_data_lent(to, rreq, s, key) {
                            // Completes when the runtime lets go of the data.
                            Ok(Some(ticket)) => {
                                self.lock().lent.push_back((req, ticket, Instant::now()));
                                self.lent_len.fetch_add(1, Ordering::Relaxed);
                                continue;
                            }
                            other => other.map(|_| ()),
                        }
                    }
                    Some(s) => self.send_data(to, rreq, s, key),
                    None => self.send_data(to, rreq, &b.pack(), key),
                },
                SendData::Owned(v) => self.send_data(to, rreq, v, key),
                SendData::None => Ok(()),
            };
            if let Err(e) = res {
                req.d.lock().status.error = MpiError::from(e).class;
            }
            req.complete();
        }
    }
}
