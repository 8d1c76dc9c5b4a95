//! Failover: links between hosts that survive a network break.
//!
//! Every message to a peer on another host goes through [`Sequenced`]: it
//! gets the pair's next sequence number and a copy in the bounded
//! retransmit ring ([`crate::reliable`]) before the link sends it. When the
//! link breaks — a send fails, a method reports the connection reset or
//! closed mid-message, a connect fails, or the link is silent beyond
//! `GW_LINK_TIMEOUT` while its transport also sees no acknowledgement —
//! the link is replaced by the next applicable method stack (a relay
//! included), everything not yet acknowledged is sent again on it, and
//! the receiver drops what it already delivered. Only when no method is
//! left does the pair fail, with an error naming both ranks and every
//! method tried. Shared memory and `self` are never sequenced.
//!
//! Locks: `Sequenced::send` is held while a message is copied and handed
//! to the link, never while waiting for progress (the link is given a
//! waiter that never waits, and queues), so the progress owner may take it
//! to send acks or replace the link without deadlock.

use super::progress::Dispatch;
use super::*;
use crate::reliable::{self, Receiver, Sender, Verdict};
use std::sync::atomic::AtomicUsize;
use std::time::Instant;

/// A link's sending state for one peer on another host.
pub(super) struct SendSide {
    sender: Sender,
    link: Option<Arc<dyn Link>>,
    /// Index of the link's method in the context's methods.
    method: Option<usize>,
    /// Methods that broke or failed to connect to this peer (not tried again).
    broke: Vec<usize>,
    /// What was tried and why it failed, for the final error.
    tried: Vec<String>,
}

/// Sequencing state of one pair (both directions).
pub(super) struct Sequenced {
    pub(super) send: Mutex<SendSide>,
    /// The receiving half: only the thread that owns progress touches it.
    recv: TryLock<Receiver>,
    /// Highest sequence the peer acknowledged (written by the progress owner).
    peer_acked: AtomicU64,
    /// What we delivered from the peer (a copy of the receiver's, for
    /// senders to piggyback).
    delivered: AtomicU64,
    /// The last ack we sent (alone or piggybacked).
    ack_sent: AtomicU64,
    /// An ack is due (many messages since the last one).
    ack_owed: AtomicBool,
    /// A method reported this pair's link broken: (method index, reason).
    broken: Mutex<Option<(usize, String)>>,
    /// Duplicates dropped (resent across a replacement).
    pub(super) duplicates: AtomicU64,
    /// Times the link was replaced.
    pub(super) failovers: AtomicU64,
    /// Sends to the peer go through here (set by the first connect).
    routed: AtomicBool,
    /// The method the peer's messages last came by (`usize::MAX`: none yet).
    recv_method: AtomicUsize,
    /// The peer's messages moved to another method: the peer failed over,
    /// so the path back is likely broken too (our acks would be lost on
    /// it while we have no data of our own to notice): follow it.
    peer_moved: AtomicBool,
}

impl Sequenced {
    fn new() -> Sequenced {
        Sequenced {
            send: Mutex::new(SendSide {
                sender: Sender::new(reliable::MAX_FRAMES, reliable::MAX_BYTES),
                link: None,
                method: None,
                broke: Vec::new(),
                tried: Vec::new(),
            }),
            recv: TryLock::new(Receiver::default()),
            peer_acked: AtomicU64::new(0),
            delivered: AtomicU64::new(0),
            ack_sent: AtomicU64::new(0),
            ack_owed: AtomicBool::new(false),
            broken: Mutex::new(None),
            duplicates: AtomicU64::new(0),
            failovers: AtomicU64::new(0),
            routed: AtomicBool::new(false),
            recv_method: AtomicUsize::new(usize::MAX),
            peer_moved: AtomicBool::new(false),
        }
    }

    pub(super) fn routed(&self) -> bool {
        self.routed.load(Ordering::Acquire)
    }

    pub(super) fn set_routed(&self) {
        self.routed.store(true, Ordering::Release);
    }

    /// The link in use now, if any.
    pub(super) fn link(&self) -> Option<Arc<dyn Link>> {
        self.send
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .link
            .clone()
    }
}

/// A waiter that never waits: the link queues what it cannot send now.
struct NoWait;
impl Waiter for NoWait {
    fn progress(&self) -> bool {
        false
    }
}

/// Sends `frame` (header + message parts) on `link` without waiting.
fn send_frame(link: &dyn Link, hdr: &[u8], parts: &[IoSlice<'_>]) -> Result<()> {
    if parts.len() < 8 {
        let mut iov = [IoSlice::new(&[]); 9];
        iov[0] = IoSlice::new(hdr);
        iov[1..=parts.len()].copy_from_slice(parts);
        link.send(&iov[..=parts.len()], &NoWait)
    } else {
        let mut iov = Vec::with_capacity(parts.len() + 1);
        iov.push(IoSlice::new(hdr));
        iov.extend_from_slice(parts);
        link.send(&iov, &NoWait)
    }
}

impl Context {
    /// Whether links of method `mi` are sequenced (between hosts, failover on).
    pub(super) fn is_sequenced(&self, mi: usize) -> bool {
        self.inner.sequenced.get(mi).copied().unwrap_or(false)
    }

    /// The pair's sequencing state, created on first use (a send or a
    /// message from the peer).
    pub(super) fn sequenced(&self, rank: u32) -> Option<&Sequenced> {
        let peer = self.inner.peers.get(rank as usize)?;
        Some(peer.seq.get_or_init(|| {
            self.inner
                .seq_peers
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(rank);
            Sequenced::new()
        }))
    }

    /// Sends one message (`iov`, the request header included) to `rank`
    /// over its sequenced link, opening or replacing the link as needed.
    pub(super) fn send_sequenced(
        &self,
        rank: u32,
        s: &Sequenced,
        iov: &[IoSlice<'_>],
        waiter: &dyn Waiter,
    ) -> Result<()> {
        let len = method::iov_len(iov);
        let peer = self.peer(rank)?;
        let mut now;
        let mut g = loop {
            let mut g = s.send.lock().unwrap_or_else(|e| e.into_inner());
            now = Instant::now();
            if let Err(why) = g.sender.ack(s.peer_acked.load(Ordering::Acquire), now) {
                let name = g.link.as_ref().map_or("none", |l| l.method());
                drop(g);
                let why = format!("rank {rank} sent a bad acknowledgement: {why}");
                self.fail_peer(rank, name, why.clone());
                return Err(self.failed_error(rank, name, why));
            }
            if g.sender.has_room(len) {
                break g;
            }
            // The ring is full: wait (driving progress) for acks, unless we
            // must not wait (inside a handler): then take it over the bound.
            drop(g);
            if !waiter.progress() {
                let g = s.send.lock().unwrap_or_else(|e| e.into_inner());
                now = Instant::now();
                break g;
            }
            if let Some(why) = peer.failed.get() {
                return Err(self.failed_error(rank, "none", why.clone()));
            }
        };
        if let Some(why) = peer.failed.get() {
            let name = g.link.as_ref().map_or("none", |l| l.method());
            return Err(self.failed_error(rank, name, why.clone()));
        }
        // The clock read above serves both (one read per message, not two).
        let seq = g.sender.push(iov, now);
        if g.link.is_none() {
            // First message to the peer, or a replacement that failed earlier
            // and left the ring to the next send: connect (this also sends
            // the ring, this message included).
            return self.replace_link(rank, s, &mut g, None);
        }
        let ack = s.delivered.load(Ordering::Relaxed);
        let hdr = reliable::header(seq, ack);
        let link = g.link.clone().expect("checked");
        match send_frame(&*link, &hdr, iov) {
            Ok(()) => {
                s.ack_sent.store(ack, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => self.replace_link(rank, s, &mut g, Some(e.to_string())),
        }
    }

    /// The link of `rank` broke (`why`), or there is none yet (`None`):
    /// puts the next applicable method's link in place and sends it every
    /// message not yet acknowledged. Fails the pair when none is left.
    fn replace_link(
        &self,
        rank: u32,
        s: &Sequenced,
        g: &mut SendSide,
        why: Option<String>,
    ) -> Result<()> {
        let mut last = g.link.as_ref().map_or("none", |l| l.method());
        if let (Some(why), Some(mi)) = (&why, g.method.take()) {
            let name = g.link.as_ref().map_or("?", |l| l.method());
            g.tried.push(format!("{name} ({why})"));
            g.broke.push(mi);
            g.link = None;
            self.inner.methods[mi].release_peer(rank);
            if !self.inner.finalized.load(Ordering::Relaxed) {
                crate::say!(
                    "gw[{}]: link to rank {rank} over {name} broke ({why}); failing over",
                    self.rank()
                );
            }
        }
        let table = self.table_of(rank)?;
        let candidates = self.candidates_for(rank, &table).unwrap_or_default();
        let ack = s.delivered.load(Ordering::Relaxed);
        for (mi, ei) in candidates {
            if g.broke.contains(&mi) || !self.is_sequenced(mi) {
                continue;
            }
            let m = &self.inner.methods[mi];
            let desc = &table.entries[ei].descriptor;
            let link = match m.connect(rank, desc) {
                Ok(l) => l,
                Err(e) => {
                    g.tried.push(format!("{} ({e})", m.link_name(desc)));
                    g.broke.push(mi);
                    continue;
                }
            };
            let mut resent = Ok(());
            for (seq, data) in g.sender.unacked() {
                resent = send_frame(&*link, &reliable::header(seq, ack), &[IoSlice::new(data)]);
                if resent.is_err() {
                    break;
                }
            }
            if let Err(e) = resent {
                last = link.method();
                g.tried.push(format!("{} ({e})", link.method()));
                g.broke.push(mi);
                m.release_peer(rank);
                continue;
            }
            s.ack_sent.store(ack, Ordering::Relaxed);
            // Acks sent on the old link may be lost: send one on the new.
            s.ack_owed.store(true, Ordering::Relaxed);
            self.inner.seq_work.store(true, Ordering::Relaxed);
            g.sender.restart_clock(Instant::now());
            let replaced = !g.tried.is_empty();
            g.link = Some(link.clone());
            g.method = Some(mi);
            if replaced {
                s.failovers.fetch_add(1, Ordering::Relaxed);
                crate::say!(
                    "gw[{}]: link to rank {rank} now over {} ({} message(s) resent)",
                    self.rank(),
                    link.method(),
                    g.sender.unacked_len()
                );
            } else if self.inner.job.verbose >= 1 {
                crate::say!(
                    "gw[{}]: rank {rank} reached by {} ({})",
                    self.rank(),
                    m.name(),
                    m.describe(desc)
                );
            }
            crate::events::emit(crate::events::LinkEvent {
                kind: crate::events::LinkEventKind::Selected,
                rank: self.rank(),
                peer: rank,
                method: link.method(),
                reason: "",
            });
            return Ok(());
        }
        let why = if g.tried.is_empty() {
            format!(
                "link rank {} -> rank {rank}: no method applies (rank {rank} offers {})",
                self.rank(),
                table.names()
            )
        } else {
            format!(
                "link rank {} -> rank {rank}: every applicable method failed: {}",
                self.rank(),
                g.tried.join("; ")
            )
        };
        self.fail_peer(rank, last, why.clone());
        Err(self.failed_error(rank, last, why))
    }

    /// `method`: given by the caller, which may hold `Sequenced::send`
    /// (looking it up would take that lock again).
    fn failed_error(&self, rank: u32, method: &'static str, reason: String) -> Error {
        Error::LinkFailed {
            peer: rank,
            method,
            reason,
        }
    }

    /// Marks the pair failed for good (sends and waits on it fail with `why`).
    pub(super) fn fail_peer(&self, rank: u32, method: &'static str, why: String) {
        let peer = match self.peer(rank) {
            Ok(p) => p,
            Err(_) => return,
        };
        if peer.failed.set(why.clone()).is_ok() {
            self.tell_members(&MembershipEvent {
                kind: MembershipKind::Died,
                peer: rank,
                reason: why.clone(),
            });
            crate::events::emit(crate::events::LinkEvent {
                kind: crate::events::LinkEventKind::Failed,
                rank: self.rank(),
                peer: rank,
                method,
                reason: &why,
            });
            if !self.inner.finalized.load(Ordering::Relaxed) {
                crate::say!("gw[{}]: {why}", self.rank());
            }
        }
    }

    /// After a round of polls: sends the acks that are due (all of them
    /// when the round was idle), replaces links reported broken, and (when
    /// `check_silence`) those silent beyond `GW_LINK_TIMEOUT`.
    pub(super) fn sequenced_housekeeping(&self, idle: bool, check_silence: bool) {
        self.inner.seq_work.store(false, Ordering::Relaxed);
        if idle {
            self.inner.seq_idle_acks.store(false, Ordering::Relaxed);
        }
        let ranks = self
            .inner
            .seq_peers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let finalized = self.inner.finalized.load(Ordering::Relaxed);
        let now = Instant::now();
        for rank in ranks {
            let Some(s) = self.inner.peers[rank as usize].seq.get() else {
                continue;
            };
            if self.inner.peers[rank as usize].failed.get().is_some() {
                continue;
            }
            let report = s.broken.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let Some((mi, why)) = report {
                let mut g = s.send.lock().unwrap_or_else(|e| e.into_inner());
                // A report about a link already replaced changes nothing.
                if g.method == Some(mi) && !finalized {
                    let _ = self.replace_link(rank, s, &mut g, Some(why));
                }
            }
            if s.peer_moved.swap(false, Ordering::Relaxed) && !finalized {
                let moved_to = s.recv_method.load(Ordering::Relaxed);
                let mut g = s.send.lock().unwrap_or_else(|e| e.into_inner());
                if g.method.is_some_and(|m| m != moved_to) {
                    let why = format!(
                        "rank {rank} failed over to {}",
                        self.inner.methods[moved_to].name()
                    );
                    let _ = self.replace_link(rank, s, &mut g, Some(why));
                }
            }
            if check_silence && !finalized {
                let mut g = s.send.lock().unwrap_or_else(|e| e.into_inner());
                let timeout = self.inner.link_timeout;
                // Silence first: asking the transport is a system call.
                let silent = g.sender.silent(now, timeout)
                    && g.link.as_ref().is_some_and(|l| l.stalled(timeout));
                if silent {
                    let why = format!(
                        "nothing acknowledged for {} s (GW_LINK_TIMEOUT)",
                        timeout.as_secs()
                    );
                    let _ = self.replace_link(rank, s, &mut g, Some(why));
                }
            }
            let delivered = s.delivered.load(Ordering::Relaxed);
            let owed = s.ack_owed.load(Ordering::Relaxed)
                || (idle && delivered > s.ack_sent.load(Ordering::Relaxed));
            if owed {
                self.send_ack(rank, s, delivered);
            }
        }
    }

    /// Sends an ack-only frame (if the link is free now; else the next round does).
    fn send_ack(&self, rank: u32, s: &Sequenced, delivered: u64) {
        let Ok(mut g) = s.send.try_lock() else {
            self.inner.seq_work.store(true, Ordering::Relaxed);
            return;
        };
        if g.link.is_none() {
            // A peer that only receives from us still acks: the sender's
            // ring would fill and wait forever otherwise. Open the link.
            s.set_routed();
            if self.replace_link(rank, s, &mut g, None).is_err() {
                return;
            }
        }
        let Some(link) = g.link.clone() else {
            return;
        };
        if send_frame(&*link, &reliable::header(0, delivered), &[]).is_ok() {
            s.ack_sent.store(delivered, Ordering::Relaxed);
            s.ack_owed.store(false, Ordering::Relaxed);
        }
    }
}

impl Dispatch<'_> {
    /// A message from `src` over a sequenced method: applies its ack,
    /// drops it if it was delivered before, and returns the message to
    /// deliver (without the sequencing header).
    pub(super) fn receive_sequenced<'m>(&mut self, src: u32, msg: &'m [u8]) -> Option<&'m [u8]> {
        let Some((seq, ack, body)) = reliable::parse(msg) else {
            self.record_failure(
                src,
                format!("rank {src} sent a message too short for its sequence header"),
            );
            return None;
        };
        let ctx = self.ctx;
        let s = ctx.sequenced(src)?;
        // Only the progress owner writes it: a plain load and store.
        if ack > s.peer_acked.load(Ordering::Relaxed) {
            s.peer_acked.store(ack, Ordering::Release);
        }
        let was = s.recv_method.load(Ordering::Relaxed);
        if was != self.method {
            s.recv_method.store(self.method, Ordering::Relaxed);
            if was != usize::MAX {
                s.peer_moved.store(true, Ordering::Relaxed);
                ctx.inner.seq_work.store(true, Ordering::Relaxed);
            }
        }
        let mut r = s.recv.lock();
        r.acked_up_to(s.ack_sent.load(Ordering::Relaxed));
        match r.accept(seq, body.len()) {
            Verdict::Deliver => {
                s.delivered.store(r.delivered(), Ordering::Relaxed);
                if r.ack_due() {
                    s.ack_owed.store(true, Ordering::Relaxed);
                    ctx.inner.seq_work.store(true, Ordering::Relaxed);
                } else {
                    ctx.inner.seq_idle_acks.store(true, Ordering::Relaxed);
                }
                Some(body)
            }
            Verdict::Duplicate => {
                // The peer resent: it has not seen our ack (it went down
                // with the old link). Ack again, on our link as it is now.
                s.duplicates.fetch_add(1, Ordering::Relaxed);
                s.ack_owed.store(true, Ordering::Relaxed);
                ctx.inner.seq_work.store(true, Ordering::Relaxed);
                None
            }
            Verdict::AckOnly => None,
            Verdict::Gap { expected, got } => {
                drop(r);
                self.record_failure(
                    src,
                    format!("rank {src} sent message {got} where {expected} was next (a gap in its sequence)"),
                );
                None
            }
        }
    }

    /// A sequenced method reports the link with `src` broken by the
    /// network: replaced after this round of polls.
    pub(super) fn report_broken(&mut self, src: u32, reason: String) {
        let ctx = self.ctx;
        if !self.sequenced || ctx.inner.finalized.load(Ordering::Relaxed) {
            self.record_failure(src, reason);
            return;
        }
        let Some(s) = ctx.sequenced(src) else {
            return;
        };
        *s.broken.lock().unwrap_or_else(|e| e.into_inner()) = Some((self.method, reason));
        ctx.inner.seq_work.store(true, Ordering::Relaxed);
    }
}
