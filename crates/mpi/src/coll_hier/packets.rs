//! Packets of keyed blocks for the hierarchical collectives whose block
//! sizes only some members know (`Gatherv`/`Scatterv`: the root;
//! `Alltoallv/w`: each member its own row and column). A leader that
//! forwards the blocks of other ranks cannot size a receive for them, so
//! they travel as one self-describing packet per message — a count, then
//! (key, length) per block, then the blocks — on a tag of their own
//! ([`PACKET_TAG`]), received by probing for its size first. The packet
//! comes from a peer: every length and key is checked before it is used.

use crate::error::{class, err, Result};
use crate::request::Buf;
use crate::{Comm, Mpi, Req};
use std::sync::Arc;

/// The collective-context tag of packets (the level algorithms' fixed-size
/// messages use tag 0): a probe for a packet never sees one of those.
const PACKET_TAG: i32 = 1;

const HEADER: usize = 8;
const ENTRY: usize = 16;

/// One packet holding `blocks` (key, bytes) in order.
pub(super) fn encode<'a>(blocks: impl Iterator<Item = (u64, &'a [u8])> + Clone) -> Vec<u8> {
    let n = blocks.clone().count();
    let data: usize = blocks.clone().map(|(_, b)| b.len()).sum();
    let mut v = Vec::with_capacity(HEADER + n * ENTRY + data);
    v.extend_from_slice(&(n as u64).to_le_bytes());
    for (k, b) in blocks.clone() {
        v.extend_from_slice(&k.to_le_bytes());
        v.extend_from_slice(&(b.len() as u64).to_le_bytes());
    }
    for (_, b) in blocks {
        v.extend_from_slice(b);
    }
    v
}

/// The (key, bytes) blocks of a packet from rank `from`, or an error if its
/// header does not describe exactly its contents.
pub(super) fn decode(p: &[u8], from: u32) -> Result<Vec<(u64, &[u8])>> {
    let bad = || {
        err(
            class::INTERN,
            format!("hierarchical collective: malformed packet from rank {from}"),
        )
    };
    let word = |at: usize| -> Result<u64> {
        let b = p.get(at..at + 8).ok_or_else(bad)?;
        Ok(u64::from_le_bytes(b.try_into().expect("8 bytes")))
    };
    let n = usize::try_from(word(0)?).map_err(|_| bad())?;
    let head = n
        .checked_mul(ENTRY)
        .and_then(|h| h.checked_add(HEADER))
        .filter(|&h| h <= p.len())
        .ok_or_else(bad)?;
    let mut at = head;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let key = word(HEADER + i * ENTRY)?;
        let len = usize::try_from(word(HEADER + i * ENTRY + 8)?).map_err(|_| bad())?;
        let end = at
            .checked_add(len)
            .filter(|&e| e <= p.len())
            .ok_or_else(bad)?;
        out.push((key, &p[at..end]));
        at = end;
    }
    if at != p.len() {
        return Err(bad());
    }
    Ok(out)
}

/// Unpacks `data` into `b` if it is exactly `b`'s size, else a truncation
/// error naming `what` (the sender's and the receiver's counts disagree).
pub(super) fn unpack_exact(b: &Buf, data: &[u8], what: &str) -> Result<()> {
    if data.len() != b.bytes() {
        return Err(err(
            class::TRUNCATE,
            format!(
                "{what}: {} bytes arrived for a buffer of {} bytes",
                data.len(),
                b.bytes()
            ),
        ));
    }
    b.unpack(data);
    Ok(())
}

impl Mpi {
    /// Starts sending packet `p` to `dest`.
    ///
    /// # Safety
    /// As [`Mpi::c_isend`]: `p` must stay alive and unchanged until the
    /// returned request completes.
    pub(super) unsafe fn isend_packet(
        &self,
        comm: &Comm,
        p: &[u8],
        dest: u32,
    ) -> Result<Option<Arc<Req>>> {
        // SAFETY: forwarded from this function's contract.
        let b = unsafe { Buf::bytes_of(p, &self.byte) };
        self.send_on(
            comm,
            true,
            &b,
            dest as i32,
            PACKET_TAG,
            crate::Mode::Standard,
        )
    }

    /// Sends packet `p` to `dest` and waits for the send.
    pub(super) fn send_packet(&self, comm: &Comm, p: &[u8], dest: u32) -> Result<()> {
        // SAFETY: waited for before `p`'s borrow ends.
        let r = unsafe { self.isend_packet(comm, p, dest) }?;
        self.wait_all_internal(r)
    }

    /// Sends each `(packet, dest)` and waits for all.
    pub(super) fn send_packets(&self, comm: &Comm, out: &[(Vec<u8>, u32)]) -> Result<()> {
        let mut reqs = Vec::new();
        for (p, d) in out {
            // SAFETY: `out` outlives the wait below.
            if let Some(r) = unsafe { self.isend_packet(comm, p, *d) }? {
                reqs.push(r);
            }
        }
        self.wait_all_internal(reqs)
    }

    /// Receives one packet from each of `srcs`, in the order they arrive
    /// (a slow site does not hold up the others' receives); the result is
    /// in `srcs`' order.
    pub(super) fn recv_packets(&self, comm: &Comm, srcs: &[u32]) -> Result<Vec<Vec<u8>>> {
        let key = comm.key() + 1;
        let mut got: Vec<Option<Vec<u8>>> = vec![None; srcs.len()];
        let mut left = srcs.len();
        while left > 0 {
            let mut ready = None;
            self.engine.wait_for(|| {
                ready = srcs.iter().enumerate().find_map(|(i, &s)| {
                    if got[i].is_some() {
                        return None;
                    }
                    match self
                        .engine
                        .probe(key, &comm.peers, s as i32, PACKET_TAG, false)
                    {
                        Some(Err(st)) => Some((i, st.bytes)),
                        _ => None,
                    }
                });
                ready.is_some()
            });
            let (i, len) = ready.expect("wait ended with a packet");
            let mut v = vec![0u8; len];
            // SAFETY: `v` outlives the wait below.
            let b = unsafe { Buf::bytes_of_mut(&mut v, &self.byte) };
            let r = self
                .engine
                .recv(key, &comm.peers, srcs[i] as i32, PACKET_TAG, b)?;
            self.wait(&r);
            let st = self.engine.finish(r);
            if let Some(e) = crate::engine::status_error(&st, len) {
                return Err(e);
            }
            v.truncate(st.bytes);
            got[i] = Some(v);
            left -= 1;
        }
        Ok(got.into_iter().map(|v| v.expect("all received")).collect())
    }

    /// Receives one packet from `src`.
    pub(super) fn recv_packet(&self, comm: &Comm, src: u32) -> Result<Vec<u8>> {
        Ok(self.recv_packets(comm, &[src])?.pop().expect("one packet"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_malformed() {
        let a = [1u8, 2, 3];
        let b: [u8; 0] = [];
        let p = encode([(7u64, &a[..]), (9, &b[..])].into_iter());
        let d = decode(&p, 0).unwrap();
        assert_eq!(d, vec![(7, &a[..]), (9, &b[..])]);
        // Any truncation or extra byte is refused, never a panic.
        for cut in 0..p.len() {
            assert!(decode(&p[..cut], 0).is_err(), "cut at {cut}");
        }
        let mut longer = p.clone();
        longer.push(0);
        assert!(decode(&longer, 0).is_err());
        let mut huge = p.clone();
        huge[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(decode(&huge, 0).is_err());
        let mut big_len = p;
        big_len[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(decode(&big_len, 0).is_err());
    }
}
