//! `Gatherv`/`Scatterv` over the levels of a [`Plan`]: the same trees as
//! the plain gather and scatter (`gather.rs`), but the blocks travel as
//! packets ([`super::packets`]) because only the root knows every count:
//! each host's blocks go to its representative in one message, each site's
//! to its representative, and one message per remote site crosses to (from)
//! the root, holding each byte once.

use super::packets::{decode, encode, unpack_exact};
use super::tree::index_of;
use super::{LevelKind, Plan};
use crate::coll::{at, block};
use crate::error::{class, err, Result};
use crate::request::Buf;
use crate::{Comm, Mpi};

/// The blocks a member holds, per communicator rank (None: not here).
type Held = Vec<Option<Vec<u8>>>;

/// Files the blocks of a packet from `from` into `held`; every key must be
/// one of `expected` (the ranks under `from` at that level), once.
fn file(held: &mut Held, packet: &[u8], from: u32, expected: &[u32]) -> Result<()> {
    for (k, b) in decode(packet, from)? {
        let r = u32::try_from(k).ok().filter(|r| expected.contains(r));
        let slot = r
            .and_then(|r| held.get_mut(r as usize))
            .filter(|s| s.is_none());
        let Some(slot) = slot else {
            return Err(err(
                class::INTERN,
                format!("hierarchical collective: rank {from} sent an unexpected block {k}"),
            ));
        };
        *slot = Some(b.to_vec());
    }
    Ok(())
}

/// The packet of the blocks of `ranks` that `held` has.
fn packet_of(held: &Held, ranks: &[u32]) -> Vec<u8> {
    encode(
        ranks
            .iter()
            .filter_map(|&r| held[r as usize].as_deref().map(|b| (r as u64, b))),
    )
}

impl Mpi {
    /// `MPI_Gatherv` (or the plain gather with `counts` None). `send` None
    /// = `MPI_IN_PLACE` at the root.
    pub(crate) fn hier_gatherv(
        &self,
        comm: &Comm,
        plan: &Plan,
        send: Option<&Buf>,
        recv: &Buf,
        counts: Option<(&[i64], &[i64])>,
        root: u32,
    ) -> Result<()> {
        let n = comm.size as usize;
        let me = comm.rank;
        let lv = plan.lists(root, me);
        let mut held: Held = vec![None; n];
        if let Some(s) = send {
            held[me as usize] = Some(s.pack());
        }
        let levels = [
            (LevelKind::Host, &lv.host),
            (LevelKind::Site, &lv.site),
            (LevelKind::Wan, &lv.wan),
        ];
        for (kind, list) in levels {
            match index_of(list, me) {
                None => {}
                Some(0) => {
                    let packets = self.recv_packets(comm, &list[1..])?;
                    for (p, &m) in packets.iter().zip(&list[1..]) {
                        file(&mut held, p, m, &plan.under(kind, m))?;
                    }
                }
                Some(_) => {
                    let p = packet_of(&held, &plan.under(kind, me));
                    return self.send_packet(comm, &p, list[0]);
                }
            }
        }
        // The root: every block but (in place) its own.
        for (r, b) in held.iter().enumerate() {
            let slot = match counts {
                Some((c, d)) => at(recv, d[r], c[r] as usize),
                None => block(recv, r, recv.count),
            };
            match b {
                Some(b) => unpack_exact(&slot, b, "gatherv")?,
                None if r == me as usize => {}
                None => {
                    return Err(err(
                        class::INTERN,
                        format!("gatherv: the block of rank {r} never arrived"),
                    ))
                }
            }
        }
        Ok(())
    }

    /// `MPI_Scatterv` (or the plain scatter with `counts` None). `recv`
    /// None = `MPI_IN_PLACE` at the root.
    pub(crate) fn hier_scatterv(
        &self,
        comm: &Comm,
        plan: &Plan,
        send: &Buf,
        counts: Option<(&[i64], &[i64])>,
        recv: Option<&Buf>,
        root: u32,
    ) -> Result<()> {
        let n = comm.size as usize;
        let me = comm.rank;
        let lv = plan.lists(root, me);
        let mut held: Held = vec![None; n];
        if me == root {
            for (r, h) in held.iter_mut().enumerate() {
                let slot = match counts {
                    Some((c, d)) => at(send, d[r], c[r] as usize),
                    None => block(send, r, send.count),
                };
                *h = Some(slot.pack());
            }
        }
        let levels = [
            (LevelKind::Wan, &lv.wan),
            (LevelKind::Site, &lv.site),
            (LevelKind::Host, &lv.host),
        ];
        for (kind, list) in levels {
            match index_of(list, me) {
                None => {}
                Some(0) => {
                    let out: Vec<(Vec<u8>, u32)> = list[1..]
                        .iter()
                        .map(|&m| (packet_of(&held, &plan.under(kind, m)), m))
                        .collect();
                    self.send_packets(comm, &out)?;
                }
                Some(_) => {
                    let p = self.recv_packet(comm, list[0])?;
                    file(&mut held, &p, list[0], &plan.under(kind, me))?;
                }
            }
        }
        if let Some(r) = recv {
            let mine = held[me as usize].as_deref().ok_or_else(|| {
                err(
                    class::INTERN,
                    format!("scatterv: the block of rank {me} never arrived"),
                )
            })?;
            unpack_exact(r, mine, "scatterv")?;
        }
        Ok(())
    }
}
