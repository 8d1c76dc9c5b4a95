//! Cancelling a send (`MPI_Cancel` of a send request): a request/answer
//! exchange with the receiver, who withdraws the message if no receive has
//! taken it yet.
//!
//! - `H_CANCEL` — sender → receiver: context key, sequence number, token.
//!   The sequence number names the message among those of this sender on
//!   that context; the receiver looks for it only in the unexpected queue
//!   (an envelope that arrived, was not matched and was not taken by
//!   `MPI_Mprobe`) and only among the messages that came from the sender
//!   (the transport's word, not the envelope's), so a peer can withdraw
//!   nothing but its own messages. Found: removed (its sequence number was
//!   already consumed when it arrived, so the order of later messages is
//!   untouched).
//! - `H_CANCEL_ACK` — receiver → sender: token, withdrawn or not. A token is
//!   taken only from the peer it was sent to, once.
//!
//! Withdrawn rendezvous sends lose their slot (no `CTS` can come for an
//! envelope the receiver dropped) and complete cancelled. Not withdrawn:
//! the send completes as it would have. `MPI_Cancel` waits for the answer,
//! which the receiver's handlers give in any of its MPI calls.
//!
//! Rendezvous sends (large, synchronous) are named by their request, which
//! keeps the context, sequence number and receiver. An eager send is
//! complete when `MPI_Isend` returns and has no request object (that would
//! cost every small message an allocation): its handle itself carries the
//! context, receiver and sequence number (see [`crate::isend`]), and a
//! withdrawn one is given a completed, cancelled request then.

use super::{Engine, H_CANCEL, H_CANCEL_ACK};
use crate::request::{Req, SendData};
use gridwire_core::{Context, Request, Startpoint};
use std::sync::Arc;

const CANCEL_LEN: usize = 24;
const ACK_LEN: usize = 16;

fn u64_at(b: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"))
}

impl Engine {
    /// Tries to cancel a rendezvous send of ours in flight; waits for the
    /// receiver's answer. Returns whether the send was withdrawn (its
    /// request is then complete with the cancelled flag).
    pub fn cancel_send(&self, req: &Arc<Req>) -> bool {
        let (ctx, key) = {
            let d = req.d.lock();
            (d.ctx, d.rndv_send)
        };
        let Some((sreq, seq, world)) = key else {
            return false;
        };
        if req.done() || !self.withdraw(ctx, world, seq) {
            return false;
        }
        // The receiver dropped the envelope: nothing will ask for the data.
        let slot = self.lock().rndv_send.remove(sreq, world);
        match slot {
            Some(r) => {
                {
                    let mut d = r.d.lock();
                    d.send = SendData::None;
                    d.status.cancelled = true;
                }
                r.complete();
                true
            }
            None => false,
        }
    }

    /// Asks world rank `world` to withdraw our message `seq` on context
    /// `ctx` and waits for the answer: whether it was withdrawn.
    pub fn withdraw(&self, ctx: u64, world: u32, seq: u32) -> bool {
        let token = {
            let mut st = self.lock();
            let t = st.next_cancel;
            st.next_cancel += 1;
            st.cancels.insert(t, (world, None));
            t
        };
        let mut b = [0u8; CANCEL_LEN];
        b[..8].copy_from_slice(&ctx.to_le_bytes());
        b[8..12].copy_from_slice(&seq.to_le_bytes());
        b[16..24].copy_from_slice(&token.to_le_bytes());
        let sp = Startpoint {
            ctx: world,
            endpoint: 0,
        };
        if self.ctx.rsr(&sp, H_CANCEL, &b).is_err() {
            self.lock().cancels.remove(&token);
            return false;
        }
        let mut answer = None;
        self.wait_for(|| {
            answer = self
                .st
                .try_lock()
                .and_then(|st| st.cancels.get(&token).and_then(|c| c.1));
            answer.is_some()
        });
        self.lock().cancels.remove(&token);
        answer == Some(true)
    }

    pub(super) fn on_cancel(&self, _ctx: &Context, r: Request<'_>) {
        self.handle_cancel(r.src, r.payload);
    }

    /// `H_CANCEL` from `from`: withdraws its message if it waits unmatched, and answers.
    pub(crate) fn handle_cancel(&self, from: u32, payload: &[u8]) {
        if payload.len() != CANCEL_LEN || !self.is_rank(from) {
            return self.reject(
                from,
                "cancel",
                format_args!("it is not {CANCEL_LEN} bytes from a rank of the job"),
            );
        }
        let ctx = u64_at(payload, 0);
        let seq = u32::from_le_bytes(payload[8..12].try_into().expect("4 bytes"));
        let token = u64_at(payload, 16);
        let withdrawn = {
            let mut st = self.lock();
            // Only queues that exist: a peer's cancel creates nothing.
            if st.has_queues(ctx) {
                let q = st.queues(ctx);
                match q
                    .unexpected
                    .iter()
                    .position(|u| u.from == from && u.env.seq == seq)
                {
                    Some(i) => {
                        let u = q.unexpected.remove(i).expect("index from position");
                        st.held = st
                            .held
                            .saturating_sub(super::matching::held_cost(u.data.len()));
                        st.give_buf(u.data);
                        true
                    }
                    None => false,
                }
            } else {
                false
            }
        };
        let mut b = [0u8; ACK_LEN];
        b[..8].copy_from_slice(&token.to_le_bytes());
        b[8] = withdrawn as u8;
        let sp = Startpoint {
            ctx: from,
            endpoint: 0,
        };
        // A failed answer means the link to the asker failed: the runtime
        // reports that (and ends the job); saying it here too would let a
        // peer's stream of cancels fill the log.
        let _ = self.ctx.rsr(&sp, H_CANCEL_ACK, &b);
    }

    pub(super) fn on_cancel_ack(&self, _ctx: &Context, r: Request<'_>) {
        self.handle_cancel_ack(r.src, r.payload);
    }

    /// `H_CANCEL_ACK` from `from`: the answer to a cancel we sent it, once.
    pub(crate) fn handle_cancel_ack(&self, from: u32, payload: &[u8]) {
        if payload.len() != ACK_LEN || payload[8] > 1 {
            return self.reject(
                from,
                "cancel answer",
                format_args!("it is not {ACK_LEN} bytes with a 0/1 flag"),
            );
        }
        let token = u64_at(payload, 0);
        let mut st = self.lock();
        match st.cancels.get_mut(&token) {
            Some((peer, answer @ None)) if *peer == from => *answer = Some(payload[8] == 1),
            _ => {
                drop(st);
                self.reject(
                    from,
                    "cancel answer",
                    format_args!("no cancel of ours to that rank waits under token {token}"),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datatype::{Basic, Datatype};
    use crate::fuzzing::engine_of_job;
    use crate::group::Group;
    use crate::request::Buf;

    fn eager(ctx: u64, src: i32, seq: u32, data: &[u8]) -> Vec<u8> {
        let mut v = vec![0u8; 24];
        v[4..8].copy_from_slice(&(ctx as u32).to_le_bytes());
        v[8..12].copy_from_slice(&src.to_le_bytes());
        v[16..20].copy_from_slice(&seq.to_le_bytes());
        v.extend_from_slice(data);
        v
    }

    fn cancel(ctx: u64, seq: u32, token: u64) -> Vec<u8> {
        let mut b = vec![0u8; CANCEL_LEN];
        b[..8].copy_from_slice(&ctx.to_le_bytes());
        b[8..12].copy_from_slice(&seq.to_le_bytes());
        b[16..24].copy_from_slice(&token.to_le_bytes());
        b
    }

    #[test]
    fn a_cancel_withdraws_only_the_senders_own_unmatched_message() {
        let e = engine_of_job(3);
        let g = Group::new(vec![0, 1, 2]);
        // Rank 1's message 0 and rank 2's message 0, both unexpected.
        e.handle_msg(1, &eager(4, 1, 0, b"one"));
        e.handle_msg(2, &eager(4, 2, 0, b"two"));
        assert_eq!(e.unexpected_count(4), 2);
        // Rank 2 asks to cancel "message 0" naming nothing of rank 1's: only its own goes.
        e.handle_cancel(2, &cancel(4, 0, 9));
        assert_eq!(e.unexpected_count(4), 1);
        // The one left is rank 1's.
        let mut out = [0u8; 3];
        let byte = Datatype::predefined(Basic::U8, "MPI_BYTE");
        // SAFETY: `out` outlives the request, which completes at once.
        let b = unsafe { Buf::new(out.as_mut_ptr() as usize, 3, byte) };
        let r = e.recv(4, &g, crate::ANY_SOURCE, crate::ANY_TAG, b).unwrap();
        assert!(r.done());
        assert_eq!(&out, b"one");
        // A cancel on an unknown context creates no queues; a short one is rejected.
        let before = e.rejected();
        e.handle_cancel(1, &cancel(77, 0, 1));
        e.handle_cancel(1, &[0u8; 5]);
        assert_eq!(e.rejected(), before + 1);
    }

    #[test]
    fn answers_are_taken_only_from_the_asked_peer_once() {
        let e = engine_of_job(3);
        e.lock().cancels.insert(5, (1, None));
        let mut ack = [0u8; ACK_LEN];
        ack[..8].copy_from_slice(&5u64.to_le_bytes());
        ack[8] = 1;
        let before = e.rejected();
        e.handle_cancel_ack(2, &ack);
        assert_eq!(e.lock().cancels.get(&5).unwrap().1, None);
        e.handle_cancel_ack(1, &ack);
        assert_eq!(e.lock().cancels.get(&5).unwrap().1, Some(true));
        e.handle_cancel_ack(1, &ack);
        ack[8] = 7;
        e.handle_cancel_ack(1, &ack);
        assert_eq!(e.rejected(), before + 3);
    }
}
