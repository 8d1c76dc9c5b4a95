//! Failover: links between hosts that survive a network break.
//!
//! Every message to a peer on another host goes through [`Sequenced`]: it
//! gets the pair's next sequence number and a copy in the bounded
//! retransmit ring ([`crate::reliable`]) before the link sends it (a lent
//! one, `lent.rs`, only its address, its sender waiting for the ack). When the
//! link breaks — a send fails, a method reports the connection reset or
//! closed mid-message, a connect fails, or the link is silent beyond
//! `GW_LINK_TIMEOUT` while its transport also sees no acknowledgement —
//! the link is replaced by the next applicable method stack (a relay
//! included), everything not yet acknowledged is sent again on it, and
//! the receiver drops what it already delivered. Only when no method is
//! left does the pair fail, with an error naming both ranks and every
//! method tried. Shared memory and `self` are never sequenced.
//!
//! A pair may have several live links at once (a route per traffic
//! class, `routes.rs`: e.g. an MPI communicator with `gw_methods=udp`
//! beside the pair's default tcp). They all carry the pair's one sequence;
//! the receiver's reorder buffer delivers what arrives ahead of its turn
//! once the messages before it came, so the order is the sender's.
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

/// One live link of a pair: the default one, or a route's (`routes.rs`).
#[derive(Default)]
pub(super) struct RouteLink {
    pub(super) link: Option<Arc<dyn Link>>,
    /// Index of the link's method in the context's methods.
    method: Option<usize>,
}

/// Messages and bytes one method carried for a pair (first transmissions
/// only: what failover resends is not counted again).
#[derive(Default)]
pub(super) struct MethodTraffic {
    pub(super) sent_msgs: AtomicU64,
    pub(super) sent_bytes: AtomicU64,
    pub(super) recv_msgs: AtomicU64,
    pub(super) recv_bytes: AtomicU64,
}

/// The sequence header's flag for a frame sent on a route's link rather
/// than the pair's default: the receiver then does not take the frame's
/// method as where the peer failed over to (it is a second link, not a
/// replacement). Sequence numbers never come near it.
pub(super) const SIDE_LINK: u64 = 1 << 63;

/// The sequence header's flag for "acknowledge this at once" (at the end
/// of the receiver's progress round that delivered it, on the link it came
/// by; the usual acks are lazy: every 64 messages or 1 MiB, or riding the
/// peer's next message). Two users: the last piece of a lent send, whose
/// sender waits for the ack before it may complete (`lent.rs`), and a
/// probe of the measured selection (`measured.rs`), whose send-to-ack time
/// is then its transfer and one small message back.
pub(super) const ACK_NOW: u64 = 1 << 62;

/// The sequence number in a header's first word (without the flags).
#[inline]
pub(super) fn seq_of(raw: u64) -> u64 {
    raw & !(SIDE_LINK | ACK_NOW)
}

fn side_flag(route: usize) -> u64 {
    if route == 0 {
        0
    } else {
        SIDE_LINK
    }
}

/// A link's sending state for one peer on another host.
pub(super) struct SendSide {
    sender: Sender,
    /// The live links by route: `links[0]` is the pair's default, the
    /// others those routes in use opened (all carry the one sequence).
    pub(super) links: Vec<RouteLink>,
    /// By route: the pair's choice on a measured route (`select.rs`).
    pub(super) selectors: Vec<Option<super::select::PairSelect>>,
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
    /// Traffic by method (index into the context's methods).
    pub(super) traffic: Box<[MethodTraffic]>,
    /// Messages that arrived ahead of their turn on another link and were
    /// held (the reorder buffer, `reliable/reorder.rs`).
    pub(super) reordered: AtomicU64,
    /// A measured route's probe waits for its ack: the progress owner
    /// times it when the ack comes (`select.rs`).
    probing: AtomicBool,
    /// The method a probe (`ACK_NOW`) of the peer came by: the next ack
    /// goes back on our link of that method (`usize::MAX`: none owed).
    ack_via: AtomicUsize,
    /// The method the peer's latest message came by, on any of its links
    /// (`usize::MAX`: none yet): acks go back that way when we have a
    /// link of it (see `send_ack`).
    data_via: AtomicUsize,
}

impl Sequenced {
    fn new(methods: usize) -> Sequenced {
        Sequenced {
            send: Mutex::new(SendSide {
                sender: Sender::new(reliable::MAX_FRAMES, reliable::MAX_BYTES),
                links: vec![RouteLink::default()],
                selectors: Vec::new(),
                broke: Vec::new(),
                tried: Vec::new(),
            }),
            recv: TryLock::new(Receiver::with_window(
                reliable::REORDER_FRAMES,
                reliable::REORDER_BYTES,
            )),
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
            traffic: (0..methods).map(|_| MethodTraffic::default()).collect(),
            reordered: AtomicU64::new(0),
            probing: AtomicBool::new(false),
            ack_via: AtomicUsize::new(usize::MAX),
            data_via: AtomicUsize::new(usize::MAX),
        }
    }

    /// The sequence number the receiving half delivers next (None while
    /// the progress owner has it).
    pub(super) fn next_expected(&self) -> Option<u64> {
        self.recv.try_lock()?.delivered().checked_add(1)
    }

    pub(super) fn routed(&self) -> bool {
        self.routed.load(Ordering::Acquire)
    }

    pub(super) fn set_routed(&self) {
        self.routed.store(true, Ordering::Release);
    }

    /// The pair's default link now (else any live one), if any.
    pub(super) fn link(&self) -> Option<Arc<dyn Link>> {
        let g = self.send.lock().unwrap_or_else(|e| e.into_inner());
        g.links.iter().find_map(|l| l.link.clone())
    }

    /// Methods that carried traffic of this pair, with their counters.
    pub(super) fn traffic_by_method(&self) -> impl Iterator<Item = (usize, &MethodTraffic)> {
        self.traffic.iter().enumerate().filter(|(_, t)| {
            t.sent_msgs.load(Ordering::Relaxed) + t.recv_msgs.load(Ordering::Relaxed) > 0
        })
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

impl SendSide {
    /// The name of `route`'s link now ("none" without one).
    fn link_name(&self, route: usize) -> &'static str {
        self.links
            .get(route)
            .and_then(|l| l.link.as_ref())
            .map_or("none", |l| l.method())
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
            Sequenced::new(self.inner.methods.len())
        }))
    }

    /// Sends one message (`iov`, the request header included) to `rank`
    /// over its sequenced link of `route` (0 = the pair's default, see
    /// `routes.rs`), opening or replacing the link as needed.
    ///
    /// With `lend` (`Some(ack_now)`), the ring keeps the address of
    /// `iov`'s last part instead of a copy (see
    /// [`reliable::Sender::push_lent`]): the caller then owes that
    /// function's contract (`Context::rsr_v_lent`); `ack_now` asks the
    /// receiver to acknowledge it at once ([`ACK_NOW`]). Returns the
    /// message's sequence number.
    pub(super) fn send_sequenced(
        &self,
        rank: u32,
        s: &Sequenced,
        iov: &[IoSlice<'_>],
        waiter: &dyn Waiter,
        route: usize,
        lend: Option<bool>,
    ) -> Result<u64> {
        let len = method::iov_len(iov);
        let peer = self.peer(rank)?;
        let measured = self.inner.routes.is_measured(route);
        if route != 0 && !measured {
            self.check_route(rank, s, route)?;
        }
        let mut now;
        let mut g = loop {
            let mut g = s.send.lock().unwrap_or_else(|e| e.into_inner());
            now = Instant::now();
            match g.sender.ack(s.peer_acked.load(Ordering::Acquire), now) {
                Err(why) => {
                    let name = g.link_name(0);
                    drop(g);
                    let why = format!("rank {rank} sent a bad acknowledgement: {why}");
                    self.fail_peer(rank, name, why.clone());
                    return Err(self.failed_error(rank, name, why));
                }
                Ok(freed) if freed > 0 && s.probing.load(Ordering::Relaxed) => {
                    let acked = g.sender.acked();
                    let still = g.selectors_acked(acked, now);
                    s.probing.store(still, Ordering::Relaxed);
                }
                Ok(_) => {}
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
            let name = g.link_name(route);
            return Err(self.failed_error(rank, name, why.clone()));
        }
        // A measured route: the sub-route of the stack cheapest for `len`
        // (or one to measure: a probe, sent alone and acknowledged at once).
        let (asked, mut slot) = (route, None);
        let route = if measured {
            let alone = g.sender.unacked_len() == 0;
            let (sub, k) = self.pick_route(rank, &mut g, route, len, now, alone)?;
            slot = k;
            sub
        } else {
            route
        };
        // The clock read above serves both (one read per message, not two).
        let seq = match iov.split_last() {
            // SAFETY: the caller owes `push_lent`'s contract when it lends (above).
            Some((last, rest)) if lend.is_some() => unsafe { g.sender.push_lent(rest, last, now) },
            _ => g.sender.push(iov, now),
        };
        if g.links.len() <= route {
            g.links.resize_with(route + 1, RouteLink::default);
        }
        // A probe only where the link is open: a connect sends the ring
        // without the flag (its ack would come lazily and time nothing).
        let mut probe = slot.is_some_and(|(_, p)| p) && g.links[route].link.is_some();
        // The link is borrowed from the guard, not cloned: an `Arc` clone
        // and its drop are two locked instructions per message.
        let sent = g.links[route].link.as_deref().map(|link| {
            let ack = s.delivered.load(Ordering::Relaxed);
            // At once: a probe (timed by its ack) and the last piece of
            // a lent send (its lender waits for the ack).
            let now_flag = if probe || lend == Some(true) {
                ACK_NOW
            } else {
                0
            };
            let hdr = reliable::header(seq | side_flag(route) | now_flag, ack);
            send_frame(link, &hdr, iov).map(|()| ack)
        });
        let res = match sent {
            // First message on this route, or a replacement that failed
            // earlier and left the ring to the next send: connect (this
            // also sends this message).
            None => self.replace_link(rank, s, &mut g, route, None),
            Some(Ok(ack)) => {
                s.ack_sent.store(ack, Ordering::Relaxed);
                Ok(())
            }
            Some(Err(e)) => {
                // Resent on the replacement without the flag.
                probe = false;
                self.replace_link(rank, s, &mut g, route, Some(e.to_string()))
            }
        };
        if res.is_ok() {
            // Every sender to this peer holds its send lock here: plain
            // loads and stores (a locked add each cost 20-40 cycles on the
            // small-message path, four per message).
            let add =
                |c: &AtomicU64, n: u64| c.store(c.load(Ordering::Relaxed) + n, Ordering::Relaxed);
            if let Some(t) = g.links[route].method.and_then(|mi| s.traffic.get(mi)) {
                add(&t.sent_msgs, 1);
                add(&t.sent_bytes, len as u64);
            }
            add(&peer.sent_msgs, 1);
            add(&peer.sent_bytes, len as u64);
            if let Some((k, _)) = slot.take() {
                if g.selector_sent(asked, k, seq, len, now, probe) {
                    s.probing.store(true, Ordering::Relaxed);
                }
            }
        }
        res.map(|()| seq)
    }

    /// Whether the peer acknowledged message `seq` of a lent send (see
    /// `Context::rsr_v_lent`) and the ring let go of it: only then may the
    /// lender take its memory back. `false` while the ring is busy (asked
    /// again later).
    pub(super) fn lent_released_seq(&self, s: &Sequenced, seq: u64) -> bool {
        if s.peer_acked.load(Ordering::Acquire) < seq {
            return false;
        }
        let Ok(mut g) = s.send.try_lock() else {
            return false;
        };
        if g.sender.acked() < seq
            && g.sender
                .ack(s.peer_acked.load(Ordering::Acquire), Instant::now())
                .is_err()
        {
            // A bad ack (the link fails with it at the next send): keep
            // copies instead of addresses.
            g.sender.settle(u64::MAX);
            return true;
        }
        g.sender.acked() >= seq
    }

    /// Copies whatever is still lent up to message `seq` (see
    /// `Context::rsr_v_lent`). What the peer acknowledged already is let go
    /// of first, not copied: a lender that settles as soon as its message
    /// was answered (whose answer carried the ack) copies nothing.
    pub(super) fn settle_lent_seq(&self, s: &Sequenced, seq: u64) {
        let mut g = s.send.lock().unwrap_or_else(|e| e.into_inner());
        // A bad ack is the next send's to report (it fails the link).
        let _ = g
            .sender
            .ack(s.peer_acked.load(Ordering::Acquire), Instant::now());
        g.sender.settle(seq);
    }

    /// A route with no link to `rank` yet must have a candidate for it:
    /// else this send fails (naming what the route asks for) before it
    /// takes a sequence number, and the pair stays as it is.
    #[cold]
    fn check_route(&self, rank: u32, s: &Sequenced, route: usize) -> Result<()> {
        let open = {
            let g = s.send.lock().unwrap_or_else(|e| e.into_inner());
            g.links.get(route).is_some_and(|l| l.link.is_some())
        };
        if open {
            return Ok(());
        }
        let table = self.table_of(rank)?;
        if self.route_candidates(rank, &table, route)?.is_empty() {
            return Err(self.no_route_error(rank, &table, route));
        }
        Ok(())
    }

    /// The link of `route` to `rank` broke (`why`), or there is none yet
    /// (`None`): puts the route's next applicable method's link in place
    /// and sends on it what it must carry: after a break every message not
    /// yet acknowledged; when a route other than the default opens, only
    /// the message just queued (the others went on the links they took).
    /// Fails the pair when nothing is left.
    fn replace_link(
        &self,
        rank: u32,
        s: &Sequenced,
        g: &mut SendSide,
        route: usize,
        why: Option<String>,
    ) -> Result<()> {
        if g.links.len() <= route {
            g.links.resize_with(route + 1, RouteLink::default);
        }
        let mut last = g.link_name(route);
        // A link opening beside others (a route's, or the default one
        // after a measured route's side links) carries only the message
        // just queued: the others went on the links they took.
        let opening =
            why.is_none() && (route != 0 || g.links.iter().skip(1).any(|l| l.link.is_some()));
        if why.is_some() && !g.selectors.is_empty() {
            // Probes in flight would time the failover, not the link.
            g.selectors_forget_probes();
            s.probing.store(false, Ordering::Relaxed);
        }
        if let (Some(why), Some(mi)) = (&why, g.links[route].method.take()) {
            let name = g.link_name(route);
            g.links[route].link = None;
            // Two routes on one method break together: say it once.
            if !g.broke.contains(&mi) {
                g.tried.push(format!("{name} ({why})"));
                g.broke.push(mi);
                self.inner.methods[mi].release_peer(rank);
                if !self.inner.finalized.load(Ordering::Relaxed) {
                    crate::say!(
                        "gw[{}]: link to rank {rank} over {name} broke ({why}); failing over",
                        self.rank()
                    );
                }
            }
        }
        let table = self.table_of(rank)?;
        let candidates = self
            .route_candidates(rank, &table, route)
            .unwrap_or_default();
        let ack = s.delivered.load(Ordering::Relaxed);
        let flag = side_flag(route);
        for (mi, ei) in candidates {
            if g.broke.contains(&mi) || !self.is_sequenced(mi) {
                continue;
            }
            let m = &self.inner.methods[mi];
            let desc = &table.entries[ei].descriptor;
            // A live link of this method on another route of the pair is
            // taken as it is: a second connect would open a second session
            // to the peer (encrypt's hello gives it new keys), and the
            // frames of the first link would then be refused there — the
            // pair hung when a measured route's tcp failed over to the udp
            // its udp slot already used.
            let open = g
                .links
                .iter()
                .enumerate()
                .find(|(r, l)| *r != route && l.method == Some(mi))
                .and_then(|(_, l)| l.link.clone());
            let link = match open.map_or_else(|| m.connect(rank, desc), Ok) {
                Ok(l) => l,
                Err(e) => {
                    g.tried.push(format!("{} ({e})", m.link_name(desc)));
                    g.broke.push(mi);
                    continue;
                }
            };
            let mut resent = Ok(());
            let newest = g.sender.last_seq();
            for (seq, data, lent) in g.sender.unacked() {
                if opening && seq != newest {
                    continue;
                }
                resent = send_frame(
                    &*link,
                    &reliable::header(seq | flag, ack),
                    &[IoSlice::new(data), IoSlice::new(lent)],
                );
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
            let replaced = why.is_some() || (route == 0 && !g.tried.is_empty());
            g.links[route] = RouteLink {
                link: Some(link.clone()),
                method: Some(mi),
            };
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
                    "gw[{}]: rank {rank} reached by {} ({}){}",
                    self.rank(),
                    m.name(),
                    m.describe(desc),
                    if route == 0 {
                        String::new()
                    } else {
                        format!(" for route {route}")
                    }
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
                // A report about a link already replaced changes nothing;
                // every route on the method that broke is replaced.
                if !finalized {
                    for route in 0..g.links.len() {
                        if g.links[route].method == Some(mi)
                            && self
                                .replace_link(rank, s, &mut g, route, Some(why.clone()))
                                .is_err()
                        {
                            break;
                        }
                    }
                }
            }
            if s.peer_moved.swap(false, Ordering::Relaxed) && !finalized {
                let moved_to = s.recv_method.load(Ordering::Relaxed);
                let mut g = s.send.lock().unwrap_or_else(|e| e.into_inner());
                // Only the default links follow each other: a route's link
                // is a second link, not a replacement (`SIDE_LINK`).
                if g.links[0].method.is_some_and(|m| m != moved_to) {
                    let why = format!(
                        "rank {rank} failed over to {}",
                        self.inner.methods[moved_to].name()
                    );
                    let _ = self.replace_link(rank, s, &mut g, 0, Some(why));
                }
            }
            if check_silence && !finalized {
                let mut g = s.send.lock().unwrap_or_else(|e| e.into_inner());
                if !g.selectors.is_empty() {
                    g.refresh_rtts();
                }
                let timeout = self.inner.link_timeout;
                // Silence first: asking the transport is a system call.
                // Then each live link whose transport stalled is replaced.
                if g.sender.silent(now, timeout) {
                    for route in 0..g.links.len() {
                        let stalled = g.links[route]
                            .link
                            .as_ref()
                            .is_some_and(|l| l.stalled(timeout));
                        if !stalled {
                            continue;
                        }
                        let why = format!(
                            "nothing acknowledged for {} s (GW_LINK_TIMEOUT)",
                            timeout.as_secs()
                        );
                        if self
                            .replace_link(rank, s, &mut g, route, Some(why))
                            .is_err()
                        {
                            break;
                        }
                    }
                } else if g.sender.unacked_len() == 0
                    && s.ack_sent.load(Ordering::Relaxed) > 0
                    && g.links[0].link.as_ref().is_some_and(|l| l.stalled(timeout))
                {
                    // We only receive from this peer and ack on our default
                    // link, and its transport has had our acks unacknowledged
                    // for the timeout: the way back is cut. The peer, whose
                    // data comes by another link (a measured route's udp),
                    // sees its own links healthy and cannot tell; only we
                    // can. Replace the link: the peer follows (`peer_moved`).
                    let why = format!(
                        "our acks unacknowledged for {} s (GW_LINK_TIMEOUT)",
                        timeout.as_secs()
                    );
                    let _ = self.replace_link(rank, s, &mut g, 0, Some(why));
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
        // The ack a probe asked for goes back by the probe's method, so its
        // round trip is that link's; other acks by the method the peer's
        // latest message came by: that way works, where the default link
        // may be cut while the peer sends on another (a measured route's
        // udp, say) and would never notice that our acks are lost on it.
        // Flagged as a side link's when it is not the default one, so the
        // peer does not take it for a failover.
        let via = match s.ack_via.swap(usize::MAX, Ordering::Relaxed) {
            usize::MAX => s.data_via.load(Ordering::Relaxed),
            probe => probe,
        };
        if via != usize::MAX {
            let back = g
                .links
                .iter()
                .enumerate()
                .find(|(_, l)| l.method == Some(via) && l.link.is_some())
                .and_then(|(r, l)| Some((side_flag(r), l.link.clone()?)));
            if let Some((flag, link)) = back {
                if send_frame(&*link, &reliable::header(flag, delivered), &[]).is_ok() {
                    s.ack_sent.store(delivered, Ordering::Relaxed);
                    s.ack_owed.store(false, Ordering::Relaxed);
                    return;
                }
            }
        }
        // Acks go on the pair's default link; while it is not open but a
        // route's is (a measured route put everything there), on that one,
        // flagged so the peer does not take it for a failover.
        let side = g.links.iter().skip(1).find_map(|l| l.link.clone());
        let flag = match (&g.links[0].link, &side) {
            (None, Some(_)) => SIDE_LINK,
            _ => 0,
        };
        if g.links[0].link.is_none() && side.is_none() {
            // A peer that only receives from us still acks: the sender's
            // ring would fill and wait forever otherwise. Open the link.
            s.set_routed();
            if self.replace_link(rank, s, &mut g, 0, None).is_err() {
                return;
            }
        }
        let Some(link) = g.links[0].link.clone().or(side) else {
            return;
        };
        if send_frame(&*link, &reliable::header(flag, delivered), &[]).is_ok() {
            s.ack_sent.store(delivered, Ordering::Relaxed);
            s.ack_owed.store(false, Ordering::Relaxed);
        }
    }
}

impl<'a> Dispatch<'a> {
    /// A message from `src` over a sequenced method: applies its ack,
    /// drops it if it was delivered before, holds it if it came ahead of
    /// its turn on another link, and returns the message to deliver now
    /// (without the sequencing header), and whether messages are held
    /// (then, after delivering it, the caller delivers what became next:
    /// [`Dispatch::deliver_held`]; without, that would only take the lock
    /// again to find nothing).
    pub(super) fn receive_sequenced<'m>(
        &mut self,
        src: u32,
        msg: &'m [u8],
    ) -> Option<(&'m [u8], bool)> {
        let Some((raw_seq, ack, body)) = reliable::parse(msg) else {
            self.record_failure(
                src,
                format!("rank {src} sent a message too short for its sequence header"),
            );
            return None;
        };
        let seq = seq_of(raw_seq);
        let ctx = self.ctx;
        let s = self.note_header(src, raw_seq, ack)?;
        let mut r = s.recv.lock();
        r.acked_up_to(s.ack_sent.load(Ordering::Relaxed));
        let verdict = r.accept(seq, body.len());
        if matches!(verdict, Verdict::Deliver | Verdict::Early) {
            self.count_received(s, body.len());
        }
        match verdict {
            Verdict::Deliver => {
                delivered_now(ctx, s, &r);
                Some((body, r.held().0 > 0))
            }
            Verdict::Early => {
                r.hold(seq, body);
                s.reordered.fetch_add(1, Ordering::Relaxed);
                None
            }
            other => {
                drop(r);
                self.not_delivered(src, s, other);
                None
            }
        }
    }

    /// [`receive_sequenced`](Self::receive_sequenced) for a message whose
    /// payload was placed (`context/placed.rs`): `head` holds its sequence
    /// header, `len` is its length. Whether to hand it to its placer now.
    /// Only the message whose turn it was is placed, so it is delivered
    /// now unless a copy of it overtook it on another link (a duplicate).
    pub(super) fn receive_sequenced_placed(&mut self, src: u32, head: &[u8], len: usize) -> bool {
        let Some((raw_seq, ack, _)) = reliable::parse(head) else {
            return false;
        };
        let ctx = self.ctx;
        let Some(s) = self.note_header(src, raw_seq, ack) else {
            return false;
        };
        let body_len = len.saturating_sub(reliable::HEADER);
        let mut r = s.recv.lock();
        r.acked_up_to(s.ack_sent.load(Ordering::Relaxed));
        match r.accept(seq_of(raw_seq), body_len) {
            Verdict::Deliver => {
                self.count_received(s, body_len);
                delivered_now(ctx, s, &r);
                true
            }
            // Only the next one is placed, and the next only moves on: not
            // reached (and then harmless: the message is dropped, its
            // destination given back).
            Verdict::Early => false,
            other => {
                drop(r);
                self.not_delivered(src, s, other);
                false
            }
        }
    }

    /// Traffic of the method being polled (only the progress owner writes
    /// these: plain load and store).
    #[inline]
    fn count_received(&self, s: &Sequenced, len: usize) {
        // Where the peer's data comes by: our acks go back that way.
        if s.data_via.load(Ordering::Relaxed) != self.method {
            s.data_via.store(self.method, Ordering::Relaxed);
        }
        if let Some(t) = s.traffic.get(self.method) {
            t.recv_msgs
                .store(t.recv_msgs.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
            t.recv_bytes.store(
                t.recv_bytes.load(Ordering::Relaxed) + len as u64,
                Ordering::Relaxed,
            );
        }
    }

    /// What a sequence header says besides its number: the peer's ack, and
    /// which method the peer's default link runs on now.
    #[inline]
    fn note_header(&mut self, src: u32, raw_seq: u64, ack: u64) -> Option<&'a Sequenced> {
        let ctx: &'a Context = self.ctx;
        let s = ctx.sequenced(src)?;
        // Only the progress owner writes it: a plain load and store.
        if ack > s.peer_acked.load(Ordering::Relaxed) {
            s.peer_acked.store(ack, Ordering::Release);
            if s.probing.load(Ordering::Relaxed) {
                // A bandwidth probe is timed by its ack: now, not at the
                // next send (a sender busy elsewhere would stretch it).
                if let Ok(mut g) = s.send.try_lock() {
                    let still = g.selectors_acked(ack, Instant::now());
                    s.probing.store(still, Ordering::Relaxed);
                }
            }
        }
        if raw_seq & ACK_NOW != 0 {
            // Sent at the end of this round, after the message is
            // delivered, on the link it came by (a probe of the peer's
            // measured selection is timed by it).
            s.ack_via.store(self.method, Ordering::Relaxed);
            s.ack_owed.store(true, Ordering::Relaxed);
            ctx.inner.seq_work.store(true, Ordering::Relaxed);
        }
        // Where the peer's default link runs (a route's link, flagged, is
        // a second link and says nothing about that).
        if raw_seq & SIDE_LINK == 0 {
            let was = s.recv_method.load(Ordering::Relaxed);
            if was != self.method {
                s.recv_method.store(self.method, Ordering::Relaxed);
                if was != usize::MAX {
                    s.peer_moved.store(true, Ordering::Relaxed);
                    ctx.inner.seq_work.store(true, Ordering::Relaxed);
                }
            }
        }
        Some(s)
    }

    /// A message the sequencing did not deliver: a duplicate (acked again)
    /// or an ack alone, else a broken peer (the link fails).
    #[cold]
    fn not_delivered(&mut self, src: u32, s: &Sequenced, verdict: Verdict) {
        let ctx = self.ctx;
        match verdict {
            Verdict::Deliver | Verdict::Early => {}
            Verdict::Duplicate => {
                // The peer resent: it has not seen our ack (it went down
                // with the old link). Ack again, on our link as it is now.
                s.duplicates.fetch_add(1, Ordering::Relaxed);
                s.ack_owed.store(true, Ordering::Relaxed);
                ctx.inner.seq_work.store(true, Ordering::Relaxed);
            }
            Verdict::AckOnly => {}
            Verdict::Gap { expected, got } => {
                self.record_failure(
                    src,
                    format!(
                        "rank {src} sent message {got} where {expected} was next (beyond the \
                         reorder window of {} messages: a gap in its sequence)",
                        reliable::REORDER_FRAMES
                    ),
                );
            }
            Verdict::Overflow { held_bytes, len } => {
                self.record_failure(
                    src,
                    format!(
                        "rank {src} sent more early messages than the reorder buffer holds \
                         ({held_bytes} bytes held, {len} more, at most {})",
                        reliable::REORDER_BYTES
                    ),
                );
            }
        }
    }

    /// Delivers the messages of `src` held in the reorder buffer whose
    /// turn came (after a delivery from `src`).
    pub(super) fn deliver_held(&mut self, src: u32) {
        let ctx = self.ctx;
        let Some(s) = ctx.inner.peers.get(src as usize).and_then(|p| p.seq.get()) else {
            return;
        };
        loop {
            let next = {
                let mut r = s.recv.lock();
                let m = r.take_next();
                if m.is_some() {
                    delivered_now(ctx, s, &r);
                }
                m
            };
            let Some(m) = next else { return };
            self.deliver_message(src, &m);
            s.recv.lock().recycle(m);
            if ctx.inner.peers[src as usize].failed.get().is_some() {
                return;
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

/// Book-keeping after the receiver delivered (up to) a sequence: what we
/// acknowledge next, and whether an ack is due now.
fn delivered_now(ctx: &Context, s: &Sequenced, r: &Receiver) {
    s.delivered.store(r.delivered(), Ordering::Relaxed);
    if r.ack_due() {
        s.ack_owed.store(true, Ordering::Relaxed);
        ctx.inner.seq_work.store(true, Ordering::Relaxed);
    } else {
        ctx.inner.seq_idle_acks.store(true, Ordering::Relaxed);
    }
}
