//! Progress: polling the methods, dispatching what arrives to handlers,
//! and waiting (spinning, then sleeping on the methods' descriptors).

use super::*;

/// A `sched_yield` that took this long gave the core to another process's
/// time slice, not just to a peer that answered (a few µs): the machine is
/// oversubscribed.
const SLOW_YIELD: std::time::Duration = std::time::Duration::from_micros(200);
/// After a slow yield, waits sleep on the methods' descriptors instead of
/// yielding for this long (then yielding is tried again).
const SLOW_YIELD_HOLD: std::time::Duration = std::time::Duration::from_millis(100);
/// Until when (ns after [`clock_base`]) yields are known to be slow. One
/// for the process: contention is the machine's, not a context's.
static SLOW_YIELD_UNTIL: AtomicU64 = AtomicU64::new(0);

fn clock_base() -> std::time::Instant {
    static BASE: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    *BASE.get_or_init(std::time::Instant::now)
}

fn since_base(t: std::time::Instant) -> u64 {
    t.saturating_duration_since(clock_base()).as_nanos() as u64
}

/// Whether yields were seen slow lately (see [`SLOW_YIELD`]).
fn yields_slow(now: std::time::Instant) -> bool {
    since_base(now) < SLOW_YIELD_UNTIL.load(Ordering::Relaxed)
}

/// How often idle rounds look for links silent beyond `GW_LINK_TIMEOUT`.
const SILENCE_CHECK_GAP: std::time::Duration = std::time::Duration::from_millis(50);

impl Context {
    /// One round of progress. Returns the number of messages delivered, or 0
    /// if another thread is progressing right now.
    pub fn progress(&self) -> usize {
        let Some(mut guard) = self.inner.progress.try_lock() else {
            return 0;
        };
        let st = &mut *guard;
        st.iter += 1;
        // A plain store by the only thread that holds the lock: no locked
        // instruction on the message path.
        self.inner.rounds.store(st.iter, Ordering::Relaxed);
        let mut sink = Dispatch {
            ctx: self,
            handlers: &st.handlers,
            placers: &st.placers,
            round_ends: &st.round_ends,
            sequenced: false,
            method: 0,
            was_in_handler: None,
        };
        let mut n = 0;
        // A thorough round (after a sleep, or now and then while yielding:
        // see `wait`) is thorough for the cheap methods too. shm looks at its
        // listener for new senders only every `ACCEPT_EVERY` rounds
        // otherwise, and a rank that sleeps or yields makes few rounds: a new
        // sender's first message waited for dozens of 1 ms sleeps (the
        // demo's ring: 3 ms a hop instead of 0.1).
        let thorough_cheap = std::mem::take(&mut st.thorough_cheap);
        for &i in &self.inner.cheap {
            let got = self.poll_method_as(i, &mut sink, thorough_cheap);
            if got > 0 && !st.shared_used && self.inner.methods[i].name() != "self" {
                st.shared_used = true;
            }
            n += got;
        }
        if st.iter >= st.next_expensive && !self.inner.expensive.is_empty() {
            let mut got = 0;
            let thorough = std::mem::take(&mut st.thorough);
            for &i in &self.inner.expensive {
                got += self.poll_method_as(i, &mut sink, thorough);
            }
            n += got;
            // Adaptive skip_poll: sockets quiet -> poll them less often (up to
            // every 64 iterations); socket traffic -> every iteration again.
            // With no cheap method besides `self`, or none that has ever
            // delivered (every peer on another host: shared memory is idle),
            // there is nothing to save the iterations for: poll the sockets
            // every time. (Skipping cost an MPI ping-pong between two hosts
            // 10-15% of its latency: a message waited for the next poll.)
            // Until a socket method has delivered anything at all (e.g. every
            // peer is on this host), poll them only every 1024 iterations:
            // each poll is a system call or two, and only a first connection
            // can be waiting (it then waits ~1024 cheap polls, once).
            if got > 0 {
                st.sockets_used = true;
            }
            if self.inner.skip_param == 0 {
                let cap = match (
                    self.inner.cheap.len() > 1 && st.shared_used,
                    st.sockets_used,
                ) {
                    (false, _) => 1,
                    (true, true) => 64,
                    (true, false) => 1024,
                };
                // Only socket traffic brings the sockets back to every
                // iteration: shm traffic says nothing about them, and a
                // socket poll after each shm message would put a system
                // call or two on the shm latency path.
                st.skip = if got > 0 { 1 } else { (st.skip * 2).min(cap) };
            }
            st.next_expensive = st.iter + st.skip;
        }
        // Handlers are done for this round (the housekeeping below sends):
        // dropping the sink puts `IN_HANDLER` back.
        drop(sink);
        // Acks, broken links, silence (failover.rs): only when there is
        // something to do, and the silence check every 1024 rounds — and,
        // in idle rounds, every `SILENCE_CHECK_GAP`: a blocked wait sleeps
        // about 1 ms per round, and 1024 of those put a second on top of
        // `GW_LINK_TIMEOUT` before a silent link was noticed. (The clock is
        // read every 64th idle round only.)
        let mut check_silence = st.iter & 1023 == 0;
        if !check_silence && n == 0 && st.iter & 63 == 0 && self.inner.seq_peers_any() {
            let now = std::time::Instant::now();
            if now.saturating_duration_since(st.last_silence_check) >= SILENCE_CHECK_GAP {
                st.last_silence_check = now;
                check_silence = true;
            }
        }
        let check_silence = check_silence && !self.inner.expensive.is_empty();
        if self.inner.seq_work.load(Ordering::Relaxed)
            || (n == 0 && self.inner.seq_idle_acks.load(Ordering::Relaxed))
            || (check_silence && self.inner.seq_peers_any())
        {
            self.sequenced_housekeeping(n == 0, check_silence);
        }
        n
    }

    /// One round of progress that polls every method thoroughly: for a
    /// thread that slept (a nap, a sleep on the sockets), whose polls are far
    /// apart, so the hot path's economies (sockets every 64 rounds, idle
    /// connections every 64 socket polls) would delay a message by as many
    /// sleeps.
    pub fn progress_thorough(&self) -> usize {
        if let Some(mut st) = self.inner.progress.try_lock() {
            st.next_expensive = 0;
            st.thorough = true;
            st.thorough_cheap = true;
        }
        self.progress()
    }

    /// Inlined into the progress loop, which calls it for every method on
    /// every round; the failure report is out of line.
    #[inline]
    pub(super) fn poll_method_as(
        &self,
        i: usize,
        sink: &mut Dispatch<'_>,
        thorough: bool,
    ) -> usize {
        let m = &self.inner.methods[i];
        sink.sequenced = self.inner.sequenced[i];
        sink.method = i;
        match if thorough {
            m.poll_thorough(sink)
        } else {
            m.poll(sink)
        } {
            Ok(n) => n,
            Err(e) => {
                self.report_poll_failure(i, e);
                0
            }
        }
    }

    #[cold]
    #[inline(never)]
    pub(super) fn report_poll_failure(&self, i: usize, e: Error) {
        crate::say!(
            "gw[{}]: {} poll failed: {e}",
            self.rank(),
            self.inner.methods[i].name()
        );
    }

    /// Drives progress until `done()` holds. Spins for `GW_SPIN_ITERS` idle
    /// iterations, then yields for up to `GW_YIELD_US`, then sleeps on the
    /// sockets in short slices, so oversubscribed jobs do not burn the cores
    /// their peers need.
    pub fn wait(&self, mut done: impl FnMut() -> bool) {
        let mut idle: u64 = 0;
        // When every rank has a core, keep it for up to `spin` of idleness
        // (as other MPIs do): latency then does not depend on the scheduler.
        let mut idle_start: Option<std::time::Instant> = None;
        // Not while spins are held (a spin found itself descheduled lately:
        // see `spin_guard`).
        let mut spinning = !self.inner.spin.is_zero() && !super::spin_guard::held();
        let mut spin_read: Option<std::time::Instant> = None;
        let mut yield_start: Option<std::time::Instant> = None;
        let mut yielding = true;
        let mut checked = false;
        while !done() {
            // Cannot recurse into progress from a handler: the caller asked
            // to block where blocking is forbidden. Checked once, not per
            // round: a handler this thread runs inside the loop has returned
            // before the next round, and the check is a call into the TLS
            // resolver in a shared library, on the path that notices the
            // next message. (Not before the loop: `done` may consume what it
            // finds, so it is called exactly as often as before.)
            if !checked {
                checked = true;
                if IN_HANDLER.with(|c| c.get()) {
                    panic!("Context::wait called from inside a handler (handlers must not block)");
                }
            }
            if self.progress() > 0 {
                idle = 0;
                idle_start = None;
                spin_read = None;
                yield_start = None;
                yielding = true;
                continue;
            }
            idle += 1;
            if spinning {
                // Reading the clock costs more than a poll: only now and then.
                if idle.is_multiple_of(256) {
                    let now = std::time::Instant::now();
                    let start = *idle_start.get_or_insert(now);
                    if super::spin_guard::descheduled(spin_read, now)
                        || now.saturating_duration_since(start) >= self.inner.spin
                    {
                        spinning = false;
                        idle = 0;
                    }
                    spin_read = Some(now);
                }
                // No pause instruction here: this branch runs only while every
                // rank has a core (nobody to yield the pipeline to), and a
                // pause (tens of cycles on current x86) is added to the time
                // to notice the next message.
            } else if idle < self.inner.spin_iters {
                std::hint::spin_loop();
            } else {
                // Yield for up to `GW_YIELD_US` of idleness, then sleep.
                // Yielding, not sleeping: a peer rank that shares this core
                // runs at once and its answer is seen microseconds later,
                // where a sleep in `block_briefly` costs up to a slice
                // (1 ms) per message. The clock is read every 64 yields.
                let start = match yield_start {
                    Some(t) => t,
                    None => {
                        // Entering the yield phase: not at all while yields are slow.
                        let now = std::time::Instant::now();
                        yielding = !yields_slow(now);
                        *yield_start.insert(now)
                    }
                };
                if idle.is_multiple_of(64) {
                    let now = std::time::Instant::now();
                    yielding = now.saturating_duration_since(start) < self.inner.yield_for
                        && !yields_slow(now);
                    if let Some(mut st) = self.inner.progress.try_lock() {
                        st.thorough_cheap = true;
                    }
                }
                if yielding {
                    // On a loaded machine a yield hands the core to another
                    // process for its whole slice (milliseconds), where a
                    // sleep on the descriptors is woken by the kernel as
                    // soon as data comes: after one slow yield, sleep.
                    let t0 = std::time::Instant::now();
                    std::thread::yield_now();
                    let t1 = std::time::Instant::now();
                    if t1.saturating_duration_since(t0) >= SLOW_YIELD {
                        SLOW_YIELD_UNTIL.store(since_base(t1 + SLOW_YIELD_HOLD), Ordering::Relaxed);
                        yielding = false;
                    }
                } else {
                    self.block_briefly();
                }
            }
        }
    }

    /// Like [`wait`](Self::wait) with a deadline; returns false on timeout.
    pub fn wait_timeout(&self, timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
        let end = std::time::Instant::now() + timeout;
        let mut timed_out = false;
        self.wait(|| {
            if done() {
                return true;
            }
            timed_out = std::time::Instant::now() >= end;
            timed_out
        });
        !timed_out
    }

    /// Rounds of progress made so far by any thread (see
    /// [`sleep_until_work`](Self::sleep_until_work)): a background thread
    /// that sees it move without its own rounds knows the program is polling.
    pub fn progress_rounds(&self) -> u64 {
        self.inner.rounds.load(Ordering::Relaxed)
    }

    /// Sleeps until a socket is readable or a short slice (1–20 ms) passes,
    /// without polling: for a library's own background thread (the MPI
    /// layer's one-sided progress thread) that runs [`progress`](Self::progress)
    /// when it wakes. Shared memory has no file descriptor, so the slice
    /// bounds how late such a thread notices a message over it.
    pub fn sleep_until_work(&self) {
        self.block_briefly();
    }

    /// Sleeps until a socket is readable or a short slice passes (shared
    /// memory has no file descriptor, so the slice bounds its extra latency).
    pub(super) fn block_briefly(&self) {
        let mut fds: Vec<libc::pollfd> = self
            .inner
            .wait_fds
            .iter()
            .map(|&fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        let slice_ms = if self.inner.cheap.len() > 1 { 1 } else { 20 };
        for m in &self.inner.methods {
            m.before_block();
        }
        // SAFETY: `fds` is a live array of pollfd of the length passed.
        unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, slice_ms) };
        for m in &self.inner.methods {
            m.after_block();
        }
        // A readable socket must be polled at once, whatever skip_poll says,
        // idle connections included.
        if let Some(mut st) = self.inner.progress.try_lock() {
            st.next_expensive = 0;
            st.thorough = true;
            st.thorough_cheap = true;
        }
    }
}

/// A request's payload as a method handed it over: borrowed, or the
/// method's whole reassembly buffer (RSR header included), which an
/// owning handler may keep.
enum Body<'m> {
    Slice(&'m [u8]),
    Buffer(&'m mut Vec<u8>),
}

/// Delivers polled messages to handlers.
pub(super) struct Dispatch<'a> {
    pub(super) ctx: &'a Context,
    pub(super) handlers: &'a [Option<Registered>],
    pub(super) placers: &'a [(u32, Arc<dyn Placer>)],
    /// Hooks run after the round's last handler ([`Context::register_round_end`]).
    pub(super) round_ends: &'a [(u32, RoundEnd)],
    /// The method being polled sequences its messages (failover.rs).
    pub(super) sequenced: bool,
    /// Index of the method being polled.
    pub(super) method: usize,
    /// `IN_HANDLER` as it was before this round's first handler set it
    /// (None: no handler ran yet). Set once per round, not per message:
    /// the thread-local is a call into the TLS resolver in a shared
    /// library, twice per message when set and restored around each
    /// handler. Between the handlers of a round the thread only polls the
    /// methods, under the progress lock: a link that would block there
    /// queues instead (what it does inside a handler), which is as right.
    pub(super) was_in_handler: Option<bool>,
}

impl Dispatch<'_> {
    /// Marks this thread as running handlers, once per round.
    #[inline]
    fn begin_handler(&mut self) {
        if self.was_in_handler.is_none() {
            self.was_in_handler = Some(IN_HANDLER.with(|c| c.replace(true)));
        }
    }

    /// Ends the round's handlers: runs the round-end hooks (still as a
    /// handler) and puts `IN_HANDLER` back as it was before the round's
    /// first handler. Nothing when no handler ran.
    pub(super) fn end_handlers(&mut self) {
        if let Some(was) = self.was_in_handler.take() {
            for (_, hook) in self.round_ends {
                hook(self.ctx);
            }
            IN_HANDLER.with(|c| c.set(was));
        }
    }
}

impl Drop for Dispatch<'_> {
    fn drop(&mut self) {
        self.end_handlers();
    }
}

impl Sink for Dispatch<'_> {
    fn deliver(&mut self, src: u32, msg: &[u8]) {
        // A process of another job (an alias id beyond the capacity,
        // `foreign.rs`) talks over an adopted link without sequencing.
        if self.sequenced && src < self.ctx.capacity() {
            if let Some((m, held)) = self.receive_sequenced(src, msg) {
                self.deliver_message(src, m);
                // What arrived early on another link and is next now.
                if held {
                    self.deliver_held(src);
                }
            }
            return;
        }
        self.deliver_message(src, msg);
    }

    fn deliver_buf(&mut self, src: u32, buf: &mut Vec<u8>) {
        if self.sequenced && src < self.ctx.capacity() {
            // The sequencing may hold the message back: it copies.
            self.deliver(src, buf);
            return;
        }
        if let Some((handler, endpoint)) = self.route(src, buf) {
            self.deliver_body(src, handler, endpoint, Body::Buffer(buf));
        }
    }

    fn link_failed(&mut self, src: u32, reason: String) {
        self.record_failure(src, reason);
    }

    fn place(&mut self, src: u32, head: &[u8], len: usize) -> Option<method::Destination> {
        self.place_request(src, head, len, false)
    }

    fn place_whole(&mut self, src: u32, head: &[u8], len: usize) -> Option<method::Destination> {
        self.place_request(src, head, len, true)
    }

    fn deliver_placed(&mut self, src: u32, head: &[u8], dest: method::Destination) {
        self.deliver_placed_request(src, head, dest);
    }

    fn link_broken(&mut self, src: u32, reason: String) {
        self.report_broken(src, reason);
    }
}

impl Dispatch<'_> {
    /// Counts and dispatches one message of `src` (the sequencing, if any,
    /// already done).
    #[inline]
    pub(super) fn deliver_message(&mut self, src: u32, msg: &[u8]) {
        if let Some((handler, endpoint)) = self.route(src, msg) {
            self.deliver_to_handler(src, handler, endpoint, &msg[RSR_HEADER..]);
        }
    }

    /// Counts a message of `src`, runs it if it is for the runtime's own
    /// handlers, and otherwise returns the program's (handler, endpoint)
    /// it is for; `None` when it was dropped or handled here.
    /// Always inlined, as is `deliver_body`: each message of a drained ring
    /// crosses both, and out of line their register saves and restores
    /// were a fifth of the runtime's part of a message.
    #[inline(always)]
    fn route(&mut self, src: u32, msg: &[u8]) -> Option<(u32, u32)> {
        let inner = &self.ctx.inner;
        let Some(peer) = inner.peers.get(src as usize) else {
            inner.dropped.fetch_add(1, Ordering::Relaxed);
            return None;
        };
        // Only the thread that owns progress delivers, so plain load+store
        // suffices (no locked read-modify-write on the hot path).
        peer.recv_msgs.store(
            peer.recv_msgs.load(Ordering::Relaxed) + 1,
            Ordering::Relaxed,
        );
        peer.recv_bytes.store(
            peer.recv_bytes.load(Ordering::Relaxed) + msg.len() as u64,
            Ordering::Relaxed,
        );
        if msg.len() < RSR_HEADER {
            inner.dropped.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        let handler = u32::from_le_bytes(msg[..4].try_into().unwrap());
        let endpoint = u32::from_le_bytes(msg[4..8].try_into().unwrap());
        if handler >= FIRST_INTERNAL_HANDLER {
            // A process of another job (`attach_foreign`) takes part in none
            // of this job's own protocols (barriers, leaving, multicast).
            if src >= self.ctx.capacity() {
                inner.dropped.fetch_add(1, Ordering::Relaxed);
                return None;
            }
            if handler == super::multicast::H_MULTICAST {
                self.multicast(src, endpoint, &msg[RSR_HEADER..]);
            } else {
                self.internal(src, handler, &msg[RSR_HEADER..]);
            }
            return None;
        }
        Some((handler, endpoint))
    }

    /// Runs the program's handler `handler` on `endpoint`, or counts the
    /// request as dropped when either is not registered.
    #[inline]
    pub(super) fn deliver_to_handler(
        &mut self,
        src: u32,
        handler: u32,
        endpoint: u32,
        payload: &[u8],
    ) {
        self.deliver_body(src, handler, endpoint, Body::Slice(payload));
    }

    #[inline(always)]
    fn deliver_body(&mut self, src: u32, handler: u32, endpoint: u32, body: Body<'_>) {
        let inner = &self.ctx.inner;
        let known = endpoint == DEFAULT_ENDPOINT
            || inner
                .endpoints
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .contains(&endpoint);
        // The table is borrowed from the progress state we hold: no lock and
        // no reference count per message. Registering from inside a handler
        // is refused (it would need the progress lock this thread holds).
        match self.handlers.get(handler as usize).and_then(|h| h.as_ref()) {
            Some(h) if known => {
                // The thread-local once per round, not per message.
                self.begin_handler();
                match h {
                    Registered::Borrowing(h) => h(
                        self.ctx,
                        Request {
                            src,
                            endpoint,
                            payload: match body {
                                Body::Slice(p) => p,
                                Body::Buffer(b) => &b[RSR_HEADER..],
                            },
                        },
                    ),
                    Registered::Owning(h) => h(
                        self.ctx,
                        OwnedRequest {
                            src,
                            endpoint,
                            payload: match body {
                                Body::Slice(p) => Payload::Borrowed(p),
                                Body::Buffer(b) => Payload::Owned {
                                    buf: std::mem::take(b),
                                    start: RSR_HEADER,
                                },
                            },
                        },
                    ),
                }
            }
            _ => {
                inner.dropped.fetch_add(1, Ordering::Relaxed);
                if inner.job.verbose >= 1 {
                    crate::say!(
                        "gw[{}]: dropped request from {src} for handler {handler} on endpoint {endpoint} (not registered)",
                        self.ctx.rank()
                    );
                }
            }
        }
    }

    /// Requests for the runtime's own handlers.
    fn internal(&mut self, src: u32, handler: u32, payload: &[u8]) {
        let inner = &self.ctx.inner;
        match (handler, payload.len()) {
            (H_BARRIER, 12) => {
                let epoch = u64::from_le_bytes(payload[..8].try_into().unwrap());
                let round = u32::from_le_bytes(payload[8..].try_into().unwrap());
                *inner
                    .barrier_seen
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .entry((epoch, round))
                    .or_insert(0) += 1;
                inner.barrier_arrivals.fetch_add(1, Ordering::Release);
            }
            (H_LEAVE, 4) if u32::from_le_bytes(payload.try_into().unwrap()) == src => {
                self.ctx.mark_departed(
                    src,
                    MembershipKind::Left,
                    format!("context {src} left the job"),
                );
            }
            _ => {
                inner.dropped.fetch_add(1, Ordering::Relaxed);
                crate::say!(
                    "gw[{}]: malformed runtime request {handler:#x} from {src}",
                    self.ctx.rank()
                );
            }
        }
    }

    pub(super) fn record_failure(&mut self, src: u32, reason: String) {
        let inner = &self.ctx.inner;
        if let Some(peer) = inner.peers.get(src as usize) {
            if peer.failed.set(reason.clone()).is_ok() {
                self.ctx.tell_members(&MembershipEvent {
                    kind: MembershipKind::Died,
                    peer: src,
                    reason: reason.clone(),
                });
                crate::events::emit(crate::events::LinkEvent {
                    kind: crate::events::LinkEventKind::Failed,
                    rank: self.ctx.rank(),
                    peer: src,
                    method: self.ctx.method_to(src).unwrap_or(""),
                    reason: &reason,
                });
            }
        }
        if !inner.finalized.load(Ordering::Relaxed) {
            crate::say!(
                "gw[{}]: link from rank {src} failed: {reason}",
                self.ctx.rank()
            );
        }
    }
}

/// Lets a blocked link drive progress, except inside handlers.
pub(super) struct ProgressWaiter<'a> {
    pub(super) ctx: &'a Context,
}

impl Waiter for ProgressWaiter<'_> {
    fn progress(&self) -> bool {
        if IN_HANDLER.with(|c| c.get()) {
            return false;
        }
        if self.ctx.progress() == 0 {
            std::thread::yield_now();
        }
        true
    }
}
