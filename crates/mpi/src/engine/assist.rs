//! The assisted single copy: a large rendezvous within a host copied by
//! both processes at once.
//!
//! The single copy (`Engine::pull`) leaves the copy to the receiver: one
//! core moves every byte with `process_vm_readv` while the sender, which
//! usually waits for its send to complete (`MPI_Send`, `MPI_Waitall` of a
//! window of sends), spins idle. MPICH's two copies through shared cells
//! keep both cores busy and were ahead of that single copy at 64 KiB–4 MiB
//! (docs/benchmarks.md, issue 18). Here the receiver of a matched `RTS` of
//! at least `GW_MPI_CMA_ASSIST_MIN` bytes asks the sender to copy the back
//! part of the message itself, with `process_vm_writev` into the receive
//! buffer (`H_ASSIST`), and copies the front part meanwhile: one copy per
//! byte still, by two cores.
//!
//! Protocol (receiver R, sender S; all on the communicator's route):
//! - R → S `H_ASSIST` (44 bytes): S's request id, R's request id, offset
//!   and length of S's part, R's address of that part and R's pid.
//! - S copies its part (outside handlers, in its wait loop) and answers
//!   `H_ASSISTED` (16 bytes): R's request id and 1 (copied) or 0 (not
//!   copied: R then copies that part itself and asks S no more).
//! - R completes its receive and answers `FIN` once both parts are in,
//!   never before: S writes into the receive buffer only between
//!   `H_ASSIST` and its `H_ASSISTED`, and reads its own buffer only before
//!   the `FIN` that completes its send. A sender that fails meanwhile fails
//!   the receive (`MPI_ERR_PROC_ABORTED`, `peer_failure.rs`: the receive
//!   waits in the rendezvous slab for that peer).
//!
//! When it is tried: a contiguous receive that takes the whole message (a
//! truncated or noncontiguous one copies alone, as before), from a peer
//! whose memory a whole single copy has read before (the pair's
//! permission is proven, see `Engine::pull`), and not after that peer
//! answered 0 once. The cost: the receive completes only when the sender
//! has made its part, so a sender that computes after `MPI_Isend` delays
//! it until its next MPI call (the copy through the runtime, `CTS`, has
//! the same dependence); `GW_MPI_CMA_ASSIST_MIN=1g` turns it off.
//!
//! Trust: `H_ASSIST` makes us write into another process. Its pid must be
//! the one the peer named before (`Engine::peer_pid`, pinned by the first
//! that names one), its range must lie within the send it names, and that
//! send must wait for that very peer; otherwise it is dropped and reported.

use super::matching::Slot;
use super::*;

pub const H_ASSIST: u32 = 0x0004_d506;
pub const H_ASSISTED: u32 = 0x0004_d507;

/// `H_ASSIST`: sender request id, receiver request id, offset, length,
/// address (5 × u64), pid (u32).
const ASSIST_LEN: usize = 44;

/// [`Engine::assist_from`]: a peer not yet read from whole.
pub(super) const ASSIST_UNPROVEN: usize = 0;
/// [`Engine::assist_from`]: a peer that will not help (answered 0), or assisting off.
pub(super) const ASSIST_NEVER: usize = usize::MAX;

/// A receive copied in two parts: ours (`..split`) and the sender's
/// (`split..n`). Kept with its rendezvous slot.
#[derive(Debug, Clone, Copy)]
pub(super) struct AssistRecv {
    /// The sender's request (named by the `FIN`) and the message's context (its route).
    sreq: u64,
    ctx: u64,
    /// The sender's pid and the address of its data.
    pid: u32,
    remote: u64,
    /// The receive buffer (contiguous, at least `n` bytes).
    dst: usize,
    split: usize,
    n: usize,
    own_done: bool,
    theirs_done: bool,
    /// A part could not be copied (the receive completes with `MPI_ERR_OTHER`).
    failed: bool,
}

/// A part a sender was asked to copy (queued by the handler, copied by a
/// waiting thread): (send request, receiver, receiver request id, offset,
/// length, receiver address, receiver pid).
pub(super) struct AssistOut {
    req: Arc<Req>,
    to: u32,
    rreq: u64,
    off: usize,
    len: usize,
    addr: u64,
    pid: u32,
}

/// Where a receive of `n` bytes at `dst` is split: about the middle, at a
/// page boundary of the receive buffer where the message spans pages (the
/// two copies then pin disjoint pages), else at a cache line.
pub(super) fn split_point(dst: usize, n: usize) -> usize {
    let half = n / 2;
    let page = 4096;
    let at = (dst + half) & !(page - 1);
    if n >= 4 * page && at > dst {
        return at - dst;
    }
    let at = (dst + half) & !63;
    if at > dst {
        at - dst
    } else {
        half
    }
}

/// Which part of an assisted receive is in.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Part {
    Own,
    Theirs,
}

impl Engine {
    /// From what size the receiver asks peer `from` to copy a part
    /// ([`ASSIST_UNPROVEN`], [`ASSIST_NEVER`], or a size).
    #[inline]
    pub(super) fn assist_from(&self, from: u32) -> usize {
        self.assist[from as usize].load(Ordering::Relaxed)
    }

    /// Whether a message of `n` bytes from `from` is to be copied with its
    /// help: the pair is proven, `n` reaches the threshold, and no
    /// rendezvous send of ours to `from` is unfinished. In that last case
    /// `from` has our message to copy (both directions at once, as
    /// osu_bibw), its core is busy, and asking it for help only adds the
    /// other direction's part to it (bibw at 64–256 KiB was 0.61–0.80× the
    /// better peer with the help there, 0.83–0.92× without).
    pub(super) fn assist_wanted(&self, from: u32, n: usize) -> bool {
        let min = self.assist_from(from);
        min != ASSIST_UNPROVEN && n >= min && !self.lock().rndv_send.waits_on(from)
    }

    /// After a whole single copy from `from` worked: from now on its large
    /// messages may be copied with its help (`GW_MPI_CMA_ASSIST_MIN`,
    /// read here, once per peer).
    pub(super) fn assist_proven(&self, from: u32) {
        let slot = &self.assist[from as usize];
        if slot.load(Ordering::Relaxed) == ASSIST_UNPROVEN {
            let min = usize::try_from(crate::params::num("MPI_CMA_ASSIST_MIN"))
                .unwrap_or(ASSIST_NEVER)
                .max(1);
            let _ =
                slot.compare_exchange(ASSIST_UNPROVEN, min, Ordering::Relaxed, Ordering::Relaxed);
        }
    }

    /// Starts an assisted single copy of the `n` bytes of `env` (the whole
    /// message, `n >= 2`) from `from` into `dst`: asks the sender for the
    /// back part, copies the front part, and leaves completion to whichever
    /// part comes in last. Returns false (nothing done) if the request
    /// could not be sent: the caller then copies the whole.
    pub(super) fn pull_assisted(
        &self,
        req: &Arc<Req>,
        from: u32,
        env: &Env,
        dst: usize,
        n: usize,
    ) -> bool {
        let rreq = self.begin_assisted(req, from, env, dst, n);
        if !self.ask_assist(from, rreq) {
            // Not asked: nobody writes into the buffer; copy alone.
            self.lock().rndv_recv.remove(rreq, from);
            return false;
        }
        self.say_first_assist(from, n);
        self.copy_own_part(rreq, from);
        true
    }

    /// With `GW_MPI_DEBUG`, says so at the first two-part copy of the process.
    fn say_first_assist(&self, from: u32, n: usize) {
        static LOOKED: AtomicBool = AtomicBool::new(false);
        if !LOOKED.load(Ordering::Relaxed)
            && !LOOKED.swap(true, Ordering::Relaxed)
            && crate::params::flag("MPI_DEBUG")
        {
            gridwire_core::say!(
                "gridwire mpi: rank {}: a single copy of {n} bytes from {from} made with the sender's help (from {} bytes)",
                self.ctx.rank(),
                self.assist_from(from)
            );
        }
    }

    /// Registers an assisted receive (its rendezvous slot, which a failure
    /// of `from` fails): returns its request id.
    pub(super) fn begin_assisted(
        &self,
        req: &Arc<Req>,
        from: u32,
        env: &Env,
        dst: usize,
        n: usize,
    ) -> u64 {
        let a = AssistRecv {
            sreq: env.sreq,
            ctx: env.ctx,
            pid: env.pid,
            remote: env.addr,
            dst,
            split: split_point(dst, n),
            n,
            own_done: false,
            theirs_done: false,
            failed: false,
        };
        self.lock()
            .rndv_recv
            .insert_assisted(req.clone(), from, env.size, a)
    }

    /// Sends `H_ASSIST` for assisted receive `rreq` from `from`; false if
    /// it could not be sent (or the receive is gone).
    pub(super) fn ask_assist(&self, from: u32, rreq: u64) -> bool {
        let Some(a) = self.lock().rndv_recv.assisted_mut(rreq, from).copied() else {
            return false;
        };
        let mut m = [0u8; ASSIST_LEN];
        m[..8].copy_from_slice(&a.sreq.to_le_bytes());
        m[8..16].copy_from_slice(&rreq.to_le_bytes());
        m[16..24].copy_from_slice(&(a.split as u64).to_le_bytes());
        m[24..32].copy_from_slice(&((a.n - a.split) as u64).to_le_bytes());
        m[32..40].copy_from_slice(&((a.dst + a.split) as u64).to_le_bytes());
        m[40..44].copy_from_slice(&crate::cma::my_pid().to_le_bytes());
        let sp = Startpoint {
            ctx: from,
            endpoint: 0,
        };
        let key = crate::comm_links::traffic_key(a.ctx);
        self.ctx.rsr_keyed(&sp, H_ASSIST, &m, key).is_ok()
    }

    /// Copies our (front) part of assisted receive `rreq` from `from`.
    pub(super) fn copy_own_part(&self, rreq: u64, from: u32) {
        let Some(a) = self.lock().rndv_recv.assisted_mut(rreq, from).copied() else {
            return;
        };
        // SAFETY: `dst .. dst + split` lies in the receive buffer of the
        // pending request (`n <= cap`; still in its slot, so not
        // completed); the kernel checks the remote range.
        let ok = unsafe { crate::cma::read(a.pid, a.remote, a.dst, a.split) }.is_ok();
        self.assist_part_in(rreq, from, Part::Own, ok);
    }

    /// Part `part` of assisted receive `rreq` from `from` is in (`ok`) or
    /// could not be copied. The last one ends the slot, completes the
    /// receive and answers `FIN`. Nothing if the slot is gone (the peer
    /// failed: the receive failed with it).
    pub(super) fn assist_part_in(&self, rreq: u64, from: u32, part: Part, ok: bool) {
        let done = {
            let mut st = self.lock();
            let Some(a) = st.rndv_recv.assisted_mut(rreq, from) else {
                return;
            };
            match part {
                Part::Own => a.own_done = true,
                Part::Theirs => a.theirs_done = true,
            }
            a.failed |= !ok;
            if a.own_done && a.theirs_done {
                let a = *a;
                st.rndv_recv.remove(rreq, from).map(|r| (r, a))
            } else {
                None
            }
        };
        let Some((req, a)) = done else { return };
        {
            let mut d = req.d.lock();
            d.status.bytes = a.n;
            if a.failed {
                d.status.error = class::OTHER;
            }
        }
        req.complete();
        self.send_fin(from, a.sreq, a.ctx);
    }

    /// `FIN` of a single copy to `to` (on the communicator's route, like the
    /// message it completes).
    pub(super) fn send_fin(&self, to: u32, sreq: u64, ctx: u64) {
        if let Err(e) = self.ctx.rsr_keyed(
            &Startpoint {
                ctx: to,
                endpoint: 0,
            },
            H_FIN,
            &sreq.to_le_bytes(),
            crate::comm_links::traffic_key(ctx),
        ) {
            gridwire_core::say!(
                "gridwire mpi: rank {}: rendezvous completion to {to} failed: {e}",
                self.ctx.rank()
            );
        }
    }

    pub(super) fn on_assist(&self, _ctx: &Context, r: Request<'_>) {
        self.handle_assist(r.src, r.payload);
    }

    /// `H_ASSIST` from `from`: the receiver of a send of ours asks us to
    /// copy part of it into its buffer (see the module documentation for
    /// what is checked). Queued for a waiting thread: a copy does not run
    /// inside a handler.
    pub(crate) fn handle_assist(&self, from: u32, p: &[u8]) {
        let w = |i: usize| u64::from_le_bytes(p[i..i + 8].try_into().expect("8 bytes"));
        if p.len() != ASSIST_LEN || !self.is_rank(from) {
            return self.reject(
                from,
                "copy request",
                format_args!("it is not {ASSIST_LEN} bytes"),
            );
        }
        let (sreq, rreq, off, len, addr) = (w(0), w(8), w(16), w(24), w(32));
        let pid = u32::from_le_bytes(p[40..44].try_into().expect("4 bytes"));
        if pid == 0 || from == self.ctx.rank() {
            return self.reject(from, "copy request", format_args!("it names process {pid}"));
        }
        let pinned = match self.peer_pid[from as usize].compare_exchange(
            0,
            pid,
            Ordering::Relaxed,
            Ordering::Relaxed,
        ) {
            Ok(_) => pid,
            Err(p) => p,
        };
        if pinned != pid {
            return self.reject(
                from,
                "copy request",
                format_args!("it names process {pid}, earlier messages process {pinned}"),
            );
        }
        let mut st = self.lock();
        let Some(Slot { req, size, .. }) = st.rndv_send.get(sreq, from) else {
            drop(st);
            return self.reject(
                from,
                "copy request",
                format_args!("no send of ours to that rank waits under id {sreq}"),
            );
        };
        let (req, size) = (req.clone(), *size);
        let within = off.checked_add(len).is_some_and(|e| e <= size) && len > 0;
        let (Some(off), Some(len), true) =
            (usize::try_from(off).ok(), usize::try_from(len).ok(), within)
        else {
            drop(st);
            return self.reject(
                from,
                "copy request",
                format_args!("bytes {off}..+{len} do not lie within the {size} of the send"),
            );
        };
        st.assists_out.push_back(AssistOut {
            req,
            to: from,
            rreq,
            off,
            len,
            addr,
            pid,
        });
        self.ready_len.fetch_add(1, Ordering::AcqRel);
    }

    /// Copies a part a receiver asked for ([`Engine::handle_assist`]) and
    /// answers. Runs in a waiting thread (`push_ready_now`).
    pub(super) fn copy_assist(&self, a: AssistOut) {
        let ok = if !self.cma_ok(a.to) {
            // Not permitted with this peer (refused before, not on this host).
            false
        } else {
            // The send's lock is held for the copy: a `FIN` (which a
            // misbehaving receiver could send early) drops the data only
            // after it, so no freed memory is read.
            let d = a.req.d.lock();
            let src = match &d.send {
                SendData::User(b) => b.contig_addr().filter(|_| b.bytes() >= a.off + a.len),
                SendData::Owned(v) => (v.len() >= a.off + a.len).then_some(v.as_ptr() as usize),
                SendData::None => None,
            };
            match src {
                // SAFETY: `src + off .. + len` lies in the send's data (checked
                // just above), kept until the receiver's `FIN`, which waits for
                // the lock we hold; the kernel checks the remote range.
                Some(s) => unsafe { crate::cma::write(a.pid, a.addr, s + a.off, a.len) }.is_ok(),
                None => false,
            }
        };
        let key = crate::comm_links::traffic_key(a.req.d.lock().ctx);
        let mut m = [0u8; 16];
        m[..8].copy_from_slice(&a.rreq.to_le_bytes());
        m[8..].copy_from_slice(&u64::from(ok).to_le_bytes());
        let sp = Startpoint {
            ctx: a.to,
            endpoint: 0,
        };
        if let Err(e) = self.ctx.rsr_keyed(&sp, H_ASSISTED, &m, key) {
            gridwire_core::say!(
                "gridwire mpi: rank {}: answer to a copy request of {} failed: {e}",
                self.ctx.rank(),
                a.to
            );
        }
    }

    pub(super) fn on_assisted(&self, _ctx: &Context, r: Request<'_>) {
        self.handle_assisted(r.src, r.payload);
    }

    /// `H_ASSISTED` from `from`: its part of an assisted receive of ours is
    /// in (1), or it did not copy it (0): then we copy it ourselves, and ask
    /// that peer no more.
    pub(crate) fn handle_assisted(&self, from: u32, p: &[u8]) {
        if p.len() != 16 || !self.is_rank(from) {
            return self.reject(from, "copy answer", format_args!("it is not 16 bytes"));
        }
        let rreq = u64::from_le_bytes(p[..8].try_into().expect("8 bytes"));
        let ok = u64::from_le_bytes(p[8..].try_into().expect("8 bytes"));
        let waiting = {
            let mut st = self.lock();
            match st.rndv_recv.assisted_mut(rreq, from) {
                Some(a) if !a.theirs_done => {
                    if ok != 1 {
                        st.assist_rest.push_back((rreq, from));
                        self.ready_len.fetch_add(1, Ordering::AcqRel);
                    }
                    true
                }
                _ => false,
            }
        };
        if !waiting {
            return self.reject(
                from,
                "copy answer",
                format_args!("no receive of ours from that rank waits for a copy under id {rreq}"),
            );
        }
        if ok == 1 {
            self.assist_part_in(rreq, from, Part::Theirs, true);
        } else {
            self.assist[from as usize].store(ASSIST_NEVER, Ordering::Relaxed);
        }
    }

    /// Copies the sender's part of assisted receive `rreq` ourselves (it
    /// answered 0). Runs in a waiting thread.
    pub(super) fn copy_rest(&self, rreq: u64, from: u32) {
        let a = match self.lock().rndv_recv.assisted_mut(rreq, from) {
            Some(a) => *a,
            None => return,
        };
        // SAFETY: `dst + split .. dst + n` lies in the receive buffer of the
        // pending request (still in its slot, so not completed); the kernel
        // checks the remote range.
        let ok = unsafe {
            crate::cma::read(
                a.pid,
                a.remote + a.split as u64,
                a.dst + a.split,
                a.n - a.split,
            )
        }
        .is_ok();
        self.assist_part_in(rreq, from, Part::Theirs, ok);
    }
}
