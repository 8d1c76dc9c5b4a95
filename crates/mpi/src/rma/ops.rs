//! The origin's side of the communication calls: checks, then one request
//! to the target, answered when the target applied it.

use super::window::{Flavor, Win};
use super::wire::{self, Header, Layout};
use super::H_RMA;
use crate::datatype::Datatype;
use crate::error::{class, err, Result};
use crate::op::Op;
use crate::request::{Buf, Req, Status};
use crate::{Mpi, PROC_NULL};
use std::io::IoSlice;
use std::sync::Arc;

/// What one call asks of the target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Put,
    Get,
    Accumulate,
    GetAccumulate,
    CompareAndSwap,
}

/// The target side of a call: rank, displacement, count and datatype.
pub struct Target<'a> {
    pub rank: i32,
    pub disp: i64,
    pub count: usize,
    pub dt: &'a Datatype,
}

/// The origin side: the data to send (puts, accumulates), the value to
/// compare (compare-and-swap) and where the answer goes (gets).
#[derive(Default)]
pub struct Origin<'a> {
    pub data: Option<&'a Buf>,
    pub compare: Option<&'a Buf>,
    pub result: Option<Buf>,
    pub op: Option<&'a Op>,
}

impl Mpi {
    /// Issues one-sided operation `kind`. With `want_req` (`MPI_Rput` and
    /// the like) returns a request completed when the origin's buffers may
    /// be used again (for gets: when the data arrived).
    pub fn rma_op(
        &self,
        w: &Arc<Win>,
        kind: Kind,
        o: Origin<'_>,
        t: Target<'_>,
        want_req: bool,
    ) -> Result<Option<Arc<Req>>> {
        let done = || want_req.then(|| Req::new_done(Status::empty()));
        if t.rank == PROC_NULL {
            return Ok(done());
        }
        if t.rank < 0 || t.rank as u32 >= w.comm.size {
            return Err(err(
                class::RANK,
                format!(
                    "target rank {} is not in the window (size {})",
                    t.rank, w.comm.size
                ),
            ));
        }
        let rank = t.rank as u32;
        // A put held for a start epoch's complete goes before this one.
        self.send_held_put(w, rank, false)?;
        // The lock-free mirror of the epoch (see `super::access`).
        if !w.access.may_access(rank) {
            return Err(err(
                class::RMA_SYNC,
                format!("no access epoch is open to rank {rank} (call MPI_Win_fence, MPI_Win_start or MPI_Win_lock first)"),
            ));
        }
        if want_req && !w.access.passive(rank) {
            return Err(err(
                class::RMA_SYNC,
                "request-based operations need a passive-target epoch (MPI_Win_lock or MPI_Win_lock_all)",
            ));
        }
        if !t.dt.is_committed() {
            return Err(err(class::TYPE, "the target datatype is not committed"));
        }
        for b in [o.data, o.compare]
            .into_iter()
            .flatten()
            .chain(o.result.as_ref())
        {
            self.check_buf(b, "origin buffer")?;
        }
        if t.disp < 0 && w.flavor != Flavor::Dynamic {
            return Err(err(
                class::DISP,
                format!("target displacement {} is negative", t.disp),
            ));
        }
        let tbytes = t.count * t.dt.size;
        let op_code = match kind {
            Kind::Accumulate | Kind::GetAccumulate => {
                let op = o.op.ok_or_else(|| err(class::OP, "no operation"))?;
                let code = wire::op_code(op)?;
                // An empty access applies nothing: its types are not checked against the op.
                if tbytes > 0 {
                    op.check(t.dt)?;
                }
                if !matches!(op, Op::NoOp) && tbytes > 0 {
                    let ob = o.data.map(|b| b.dt.basic);
                    if ob != Some(t.dt.basic) {
                        return Err(err(
                            class::TYPE,
                            "origin and target datatypes of an accumulate must be made of the same predefined type",
                        ));
                    }
                }
                code
            }
            _ => 0,
        };
        let sent_bytes = match (kind, o.op) {
            (Kind::Get, _) | (Kind::GetAccumulate, Some(Op::NoOp)) => None,
            _ => o.data.map(|b| b.bytes()),
        };
        if let Some(n) = sent_bytes {
            if n != tbytes {
                return Err(err(
                    class::TYPE,
                    format!("the origin has {n} bytes and the target access {tbytes}: the type signatures differ"),
                ));
            }
        }
        if let Some(r) = &o.result {
            if r.bytes() < tbytes || !r.writable() {
                return Err(err(
                    class::TYPE,
                    format!(
                        "the result buffer holds {} bytes, the target access {tbytes}",
                        r.bytes()
                    ),
                ));
            }
        }
        if w.flavor != Flavor::Dynamic && t.count > 0 {
            check_range(w, rank, t.disp, t.count, t.dt)?;
        }
        if tbytes == 0 {
            return Ok(done());
        }
        if super::direct::applies(w, kind, rank) {
            if matches!(kind, Kind::Put | Kind::Get) {
                super::direct::put_or_get(w, kind, &o, &t);
            } else {
                super::direct::accumulate(w, kind, &o, &t);
            }
            return Ok(done());
        }
        // Puts and gets by single copies wait for the next synchronization
        // (`super::batch`), except request-based ones, complete at the call.
        let mut o = o;
        if !want_req
            && matches!(kind, Kind::Put | Kind::Get)
            && self.rma_defer(w, kind, &mut o, &t)?
        {
            return Ok(done());
        }
        // Anything else to this target comes after what is deferred to it.
        self.rma_issue_deferred(w, Some(rank), false)?;
        let by_single_copy = if matches!(kind, Kind::Put | Kind::Get) {
            super::single_copy::put_or_get(w, kind, &o, &t)
        } else {
            super::single_copy::accumulate(w, kind, &o, &t)
        };
        if by_single_copy {
            return Ok(done());
        }
        // A contiguous target type is one piece: its layout is built on
        // the stack (the same bytes `Layout::encode` gives).
        let (one_piece, general_layout);
        let layout: &[u8] = if t.dt.contig {
            one_piece = wire::encode_one_piece(t.disp, t.dt.true_lb, tbytes);
            &one_piece
        } else {
            general_layout = Layout::of(t.disp, t.count, t.dt).encode();
            &general_layout
        };
        // Contiguous origin data goes from the user's buffer itself.
        let mut packed = (Vec::new(), Vec::new());
        let data = super::direct::operand(o.data.filter(|_| sent_bytes.is_some()), &mut packed.0);
        let compare = super::direct::operand(o.compare, &mut packed.1);
        let wire_kind = match kind {
            Kind::Put => wire::PUT,
            Kind::Get => wire::GET,
            Kind::Accumulate => wire::ACC,
            Kind::GetAccumulate => wire::GET_ACC,
            Kind::CompareAndSwap => wire::CAS,
        };
        let fetches = o.result.is_some();
        let req = (want_req && fetches).then(|| Arc::new(Req::default()));
        let id = self.rma.expect_answer(w, rank, o.result, req.clone());
        let h = Header {
            kind: wire_kind,
            op: op_code,
            basic: t.dt.basic.map_or(0, wire::basic_code),
            arg: 0,
            win: w.id,
            op_id: id,
        }
        .encode();
        let parts = [
            IoSlice::new(&h),
            IoSlice::new(layout),
            IoSlice::new(data),
            IoSlice::new(compare),
        ];
        // No empty part (a get has no data, only a compare-and-swap a compare).
        let n_parts = if !compare.is_empty() {
            4
        } else if !data.is_empty() {
            3
        } else {
            2
        };
        if let Err(e) = self.rma_send(w, rank, &parts[..n_parts]) {
            self.rma.forget(id);
            return Err(e);
        }
        Ok(if fetches { req } else { done() })
    }

    /// Sends one request to window rank `rank`.
    pub(crate) fn rma_send(&self, w: &Win, rank: u32, parts: &[IoSlice<'_>]) -> Result<()> {
        let ctx = self.ctx();
        let sp = ctx.startpoint(w.comm.world_of(rank))?;
        // On the window's communicator's route (its `gw_methods`).
        let key = crate::comm_links::traffic_key(w.comm.ctx as u64);
        ctx.rsr_v_keyed(&sp, H_RMA, parts, key)?;
        Ok(())
    }
}

impl Mpi {
    /// [`Mpi::rma_send`] lending the last part to the runtime
    /// (`Context::rsr_v_lent`): `Some(ticket)` when it keeps the part's
    /// address (a peer on another host), to be settled before the part's
    /// memory changes; a failed send settled everything lent to the peer.
    ///
    /// # Safety
    /// The last part's bytes stay valid and unchanged until the ticket is
    /// released or settled.
    pub(crate) unsafe fn rma_send_lent(
        &self,
        w: &Win,
        rank: u32,
        parts: &[IoSlice<'_>],
    ) -> Result<Option<gridwire_core::LentTicket>> {
        let ctx = self.ctx();
        let world = w.comm.world_of(rank);
        let sp = ctx.startpoint(world)?;
        let key = crate::comm_links::traffic_key(w.comm.ctx as u64);
        // SAFETY: the caller's contract.
        match unsafe { ctx.rsr_v_lent(&sp, H_RMA, parts, key, false) } {
            Ok(t) => Ok(t),
            Err(e) => {
                ctx.settle_lent(&gridwire_core::LentTicket::all(world));
                Err(e.into())
            }
        }
    }
}

/// The origin's own check that the access lies in the target's window (the
/// target checks again: this one gives the error at the call).
fn check_range(w: &Win, rank: u32, disp: i64, count: usize, dt: &Datatype) -> Result<()> {
    let r = w.remote[rank as usize];
    let start = disp as i128 * r.disp_unit as i128;
    let last = start + (count as i128 - 1) * dt.extent as i128;
    let lo = start.min(last) + dt.true_lb as i128;
    let hi = start.max(last) + dt.true_lb as i128 + dt.true_extent as i128;
    if lo < 0 || hi > r.size as i128 {
        return Err(err(
            class::RMA_RANGE,
            format!(
                "the access (bytes {lo}..{hi}) lies outside rank {rank}'s window of {} bytes",
                r.size
            ),
        ));
    }
    Ok(())
}
