//! Intercommunicators: their creation (`MPI_Intercomm_create`), the
//! communicators made from them (dup, split, create, merge), and the
//! exchange between the two groups' leaders that all of these build on.
//!
//! Context ids: a context id is free for a set of processes when it is at
//! least every member's `next_ctx` (each process's ids in use all lie
//! below it). Each group takes the maximum over its members (an allreduce
//! on its local communicator), the leaders (rank 0 of each group; for
//! `MPI_Intercomm_create` the leaders the program names) swap the two
//! maxima, and both groups take the larger. An intercommunicator takes 4
//! ids: `ctx` (point-to-point), `ctx + 1` (its collective messages between
//! the groups), `ctx + 2` and `ctx + 3` (its hidden local intracommunicator,
//! which the two groups share safely since they are disjoint).

use crate::datatype::{Basic, Datatype};
use crate::error::{class, err, Result};
use crate::{Buf, Comm, Group, Mode, Mpi, TAG_UB, UNDEFINED};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Context ids an intercommunicator reserves (see the module comment).
pub(crate) const INTER_CTX_IDS: u32 = 4;
/// The largest list of processes a leader accepts from the other group.
const MAX_REMOTE: usize = 1 << 24;

fn u32s(b: &[u8]) -> Vec<u32> {
    b.chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().expect("chunk of 4")))
        .collect()
}

fn bytes_of_u32s(v: &[u32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The members of `all` (colour, key pairs by rank, as `allgather_bytes`
/// lays them out) of colour `color`, ordered by key then rank.
pub(crate) fn split_members(all: &[u8], color: i32) -> Vec<u32> {
    let mut m: Vec<(i32, u32)> = all
        .chunks_exact(8)
        .enumerate()
        .filter_map(|(r, c)| {
            let col = i32::from_le_bytes(c[..4].try_into().expect("4 bytes"));
            let key = i32::from_le_bytes(c[4..].try_into().expect("4 bytes"));
            (col == color).then_some((key, r as u32))
        })
        .collect();
    m.sort();
    m.into_iter().map(|(_, r)| r).collect()
}

/// The order of the two groups in `MPI_Intercomm_merge`: whether the local
/// group comes first. The group that passed `high` = false comes first;
/// when both passed the same, the group whose leader has the lower world
/// rank (both sides compute the same answer).
pub(crate) fn merge_local_first(
    high: bool,
    remote_high: bool,
    leader: u32,
    remote_leader: u32,
) -> bool {
    if high != remote_high {
        !high
    } else {
        leader < remote_leader
    }
}

/// Checks a list of world ranks that came from the other group: each one a
/// rank of the job, none twice, none in `local`.
fn check_remote(members: &[u32], world_size: u32, local: &Group) -> Result<()> {
    let mut seen = std::collections::HashSet::new();
    for &w in members {
        if w >= world_size || !seen.insert(w) {
            return Err(err(
                class::INTERN,
                format!("the other group named an invalid process (world rank {w})"),
            ));
        }
        if local.rank_of(w).is_some() {
            return Err(err(
                class::ARG,
                format!(
                    "the two groups of an intercommunicator overlap (world rank {w} is in both)"
                ),
            ));
        }
    }
    Ok(())
}

/// The tag of the messages of a constructor from groups: the string tag's
/// FNV-1a hash (operations with different string tags between the same
/// processes keep apart; the same tag twice is told apart by order).
pub(crate) fn string_tag(s: &str) -> i32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in s.bytes() {
        h ^= b as u32;
        h = h.wrapping_mul(0x0100_0193);
    }
    (h & TAG_UB as u32) as i32
}

fn not_inter(what: &str) -> crate::MpiError {
    err(
        class::COMM,
        format!("{what} needs an intercommunicator; this is an intracommunicator"),
    )
}

impl Mpi {
    /// The maximum of `next_ctx` over the members of `local` (collective on it).
    pub(crate) fn ctx_proposal(&self, local: &Comm) -> Result<u32> {
        let mut v = self.next_ctx.load(Ordering::Acquire).to_le_bytes();
        self.allreduce_u32_max(local, &mut v)?;
        Ok(u32::from_le_bytes(v))
    }

    /// Takes ids `id..id + n` (every member of the new communicator calls this).
    pub(crate) fn reserve_ctx(&self, id: u32, n: u32) {
        self.next_ctx.fetch_max(id + n, Ordering::AcqRel);
    }

    /// A context id both groups agree on, from the two proposals.
    pub(crate) fn agree_ctx(mine: u32, theirs: u32) -> Result<u32> {
        let id = mine.max(theirs);
        if !id.is_multiple_of(2) || id > u32::MAX - 16 {
            return Err(err(
                class::INTERN,
                format!("the other group proposed an invalid context id {theirs}"),
            ));
        }
        Ok(id)
    }

    /// The leaders (rank 0 of each group) of intercommunicator `ic` swap
    /// `mine` over its collective context; every member of the local group
    /// gets the remote leader's bytes. Collective over both groups.
    pub(crate) fn leader_swap(&self, ic: &Comm, mine: &[u8]) -> Result<Vec<u8>> {
        let local = ic.local_comm().ok_or_else(|| not_inter("leader_swap"))?;
        let mut len = [0u8; 8];
        let mut theirs = Vec::new();
        if local.rank == 0 {
            self.c_sendrecv(ic, &(mine.len() as u64).to_le_bytes(), 0, &mut len, 0)?;
            let n = u64::from_le_bytes(len) as usize;
            if n > 4 * MAX_REMOTE {
                return Err(err(
                    class::INTERN,
                    format!("the other group's leader announced {n} bytes"),
                ));
            }
            theirs = vec![0u8; n];
            self.c_sendrecv(ic, mine, 0, &mut theirs, 0)?;
        }
        // SAFETY: `len` lives across the blocking broadcast.
        let lb = unsafe { Buf::bytes_of_mut(&mut len, &self.byte) };
        self.bcast(local, &lb, 0)?;
        theirs.resize(u64::from_le_bytes(len) as usize, 0);
        // SAFETY: `theirs` lives across the blocking broadcast.
        let tb = unsafe { Buf::bytes_of_mut(&mut theirs, &self.byte) };
        self.bcast(local, &tb, 0)?;
        Ok(theirs)
    }

    /// `MPI_Intercomm_create`: collective over `local` (an intracommunicator)
    /// and the remote group's local communicator; the leaders talk over
    /// `peer` (significant at `local_leader` only) with `tag`.
    pub fn intercomm_create(
        &self,
        local: &Comm,
        local_leader: i32,
        peer: Option<&Comm>,
        remote_leader: i32,
        tag: i32,
    ) -> Result<Arc<Comm>> {
        if local.is_inter() {
            return Err(err(
                class::COMM,
                "MPI_Intercomm_create: the local communicator is an intercommunicator",
            ));
        }
        if local_leader < 0 || local_leader as u32 >= local.size {
            return Err(err(
                class::RANK,
                format!(
                    "local leader {local_leader} is invalid in a communicator of size {}",
                    local.size
                ),
            ));
        }
        Self::check_tag(tag, false)?;
        let proposal = self.ctx_proposal(local)?;
        // What the local leader tells its group: [error class (0 = none),
        // the agreed context id, remote size], then the remote members.
        let mut head = [0u32; 3];
        let mut members = Vec::new();
        if local.rank == local_leader as u32 {
            match self.leader_handshake(local, peer, remote_leader, tag, proposal) {
                Ok((ctx, m)) => {
                    head = [0, ctx, m.len() as u32];
                    members = m;
                }
                Err(e) => head[0] = e.class as u32,
            }
        }
        let mut hb = bytes_of_u32s(&head);
        // SAFETY: `hb` lives across the blocking broadcast.
        let b = unsafe { Buf::bytes_of_mut(&mut hb, &self.byte) };
        self.bcast(local, &b, local_leader)?;
        let head = u32s(&hb);
        if head[0] != 0 {
            return Err(err(
                head[0] as i32,
                "MPI_Intercomm_create: the local leader's exchange with the remote leader failed",
            ));
        }
        let mut mb = bytes_of_u32s(&members);
        mb.resize(4 * head[2] as usize, 0);
        // SAFETY: `mb` lives across the blocking broadcast.
        let b = unsafe { Buf::bytes_of_mut(&mut mb, &self.byte) };
        self.bcast(local, &b, local_leader)?;
        let remote = u32s(&mb);
        let ctx = head[1];
        self.reserve_ctx(ctx, INTER_CTX_IDS);
        let local_comm = Comm::new(ctx + 2, local.group.clone(), local.rank, "");
        Ok(Comm::new_inter(
            ctx,
            local.group.clone(),
            Group::new(remote),
            local.rank,
            local_comm,
        ))
    }

    /// The local leader's half of `MPI_Intercomm_create`: swaps (context id
    /// proposal, members) with the remote leader over `peer`; returns the
    /// agreed context id and the remote group's world ranks.
    fn leader_handshake(
        &self,
        local: &Comm,
        peer: Option<&Comm>,
        remote_leader: i32,
        tag: i32,
        proposal: u32,
    ) -> Result<(u32, Vec<u32>)> {
        let peer = peer.ok_or_else(|| {
            err(
                class::COMM,
                "MPI_Intercomm_create: the peer communicator is MPI_COMM_NULL at the local leader",
            )
        })?;
        if remote_leader < 0 || remote_leader as u32 >= peer.peer_size {
            return Err(err(
                class::RANK,
                format!(
                    "remote leader {remote_leader} is invalid in a peer communicator of size {}",
                    peer.peer_size
                ),
            ));
        }
        if peer.world_of(remote_leader as u32) == local.group.world(local.rank) {
            return Err(err(
                class::RANK,
                "MPI_Intercomm_create: the remote leader is the local leader itself (the groups overlap)",
            ));
        }
        let u32t = Datatype::predefined(Basic::U32, "u32");
        let mine = [proposal, local.size];
        let mut theirs = [0u32; 2];
        // SAFETY: `mine` and `theirs` live until the requests complete below.
        let (sb, rb) = unsafe {
            (
                Buf::new(mine.as_ptr() as usize, 2, u32t.clone()),
                Buf::new(theirs.as_mut_ptr() as usize, 2, u32t.clone()),
            )
        };
        let s = self.isend(peer, &sb, remote_leader, tag, Mode::Standard)?;
        let r = self.recv(peer, rb, remote_leader, tag);
        self.wait(&s);
        r?;
        let n = theirs[1] as usize;
        if n == 0 || n > MAX_REMOTE {
            return Err(err(
                class::INTERN,
                format!("the remote leader announced a group of {n} processes"),
            ));
        }
        let ctx = Self::agree_ctx(proposal, theirs[0])?;
        let mine = local.group.members.clone();
        let mut remote = vec![0u32; n];
        // SAFETY: as above.
        let (sb, rb) = unsafe {
            (
                Buf::new(mine.as_ptr() as usize, mine.len(), u32t.clone()),
                Buf::new(remote.as_mut_ptr() as usize, n, u32t),
            )
        };
        let s = self.isend(peer, &sb, remote_leader, tag, Mode::Standard)?;
        let r = self.recv(peer, rb, remote_leader, tag);
        self.wait(&s);
        r?;
        check_remote(&remote, self.ctx().capacity(), &local.group)?;
        Ok((ctx, remote))
    }

    /// A context id agreed by both groups of `ic`, reserved `n` ids long;
    /// `extra` rides along to the other group, whose `extra` is returned.
    fn inter_ctx(&self, ic: &Comm, extra: &[u8], n: u32) -> Result<(u32, Vec<u8>)> {
        let local = ic.local_comm().ok_or_else(|| not_inter("this call"))?;
        let proposal = self.ctx_proposal(local)?;
        let mut mine = proposal.to_le_bytes().to_vec();
        mine.extend_from_slice(extra);
        let theirs = self.leader_swap(ic, &mine)?;
        if theirs.len() < 4 {
            return Err(err(
                class::INTERN,
                "the other group's leader sent too little",
            ));
        }
        let ctx = Self::agree_ctx(
            proposal,
            u32::from_le_bytes(theirs[..4].try_into().unwrap()),
        )?;
        self.reserve_ctx(ctx, n);
        Ok((ctx, theirs[4..].to_vec()))
    }

    pub(crate) fn new_inter_from(
        &self,
        ctx: u32,
        local: Arc<Group>,
        remote: Arc<Group>,
        rank: u32,
    ) -> Arc<Comm> {
        let local_comm = Comm::new(ctx + 2, local.clone(), rank, "");
        Comm::new_inter(ctx, local, remote, rank, local_comm)
    }

    /// `MPI_Comm_dup` of an intercommunicator.
    pub(crate) fn intercomm_dup(&self, ic: &Comm) -> Result<Arc<Comm>> {
        let (ctx, _) = self.inter_ctx(ic, &[], INTER_CTX_IDS)?;
        Ok(self.new_inter_from(ctx, ic.group.clone(), ic.peers.clone(), ic.rank))
    }

    /// `MPI_Comm_split` of an intercommunicator: an intercommunicator between
    /// the members of each colour in the two groups; None for
    /// `MPI_UNDEFINED` or where the other group has no member of that colour.
    pub(crate) fn intercomm_split(
        &self,
        ic: &Comm,
        color: i32,
        key: i32,
    ) -> Result<Option<Arc<Comm>>> {
        let local = ic.local_comm().ok_or_else(|| not_inter("split"))?;
        let mut mine = [0u8; 8];
        mine[..4].copy_from_slice(&color.to_le_bytes());
        mine[4..].copy_from_slice(&key.to_le_bytes());
        let mut all = vec![0u8; 8 * ic.size as usize];
        self.allgather_bytes(local, &mine, &mut all)?;
        let (ctx, theirs) = self.inter_ctx(ic, &all, INTER_CTX_IDS)?;
        if theirs.len() != 8 * ic.peer_size as usize {
            return Err(err(
                class::INTERN,
                "the other group's leader sent a malformed colour list",
            ));
        }
        if color == UNDEFINED {
            return Ok(None);
        }
        let lm = split_members(&all, color);
        let rm = split_members(&theirs, color);
        if rm.is_empty() {
            return Ok(None);
        }
        let rank = lm
            .iter()
            .position(|&r| r == ic.rank)
            .expect("I am in my colour") as u32;
        let lg = Group::new(lm.iter().map(|&r| ic.group.world(r)).collect());
        let rg = Group::new(rm.iter().map(|&r| ic.peers.world(r)).collect());
        Ok(Some(self.new_inter_from(ctx, lg, rg, rank)))
    }

    /// `MPI_Comm_create` of an intercommunicator: `group` is a subgroup of
    /// the local group; the result connects it to the subgroup the other
    /// group passed. None where the caller is not in `group` or the other
    /// subgroup is empty.
    pub(crate) fn intercomm_create_sub(
        &self,
        ic: &Comm,
        group: &Arc<Group>,
    ) -> Result<Option<Arc<Comm>>> {
        for &w in &group.members {
            if ic.group.rank_of(w).is_none() {
                return Err(err(
                    class::GROUP,
                    "the group is not a subset of the intercommunicator's local group",
                ));
            }
        }
        let (ctx, theirs) = self.inter_ctx(ic, &bytes_of_u32s(&group.members), INTER_CTX_IDS)?;
        let remote = u32s(&theirs);
        if remote.iter().any(|&w| ic.peers.rank_of(w).is_none()) {
            return Err(err(
                class::INTERN,
                "the other group named a process outside the remote group",
            ));
        }
        let me = ic.group.world(ic.rank);
        match group.rank_of(me) {
            Some(r) if !remote.is_empty() => Ok(Some(self.new_inter_from(
                ctx,
                group.clone(),
                Group::new(remote),
                r,
            ))),
            _ => Ok(None),
        }
    }

    /// `MPI_Intercomm_merge`: an intracommunicator over both groups, the
    /// group that passed `high` = false first (see [`merge_local_first`]).
    pub fn intercomm_merge(&self, ic: &Comm, high: bool) -> Result<Arc<Comm>> {
        if !ic.is_inter() {
            return Err(not_inter("MPI_Intercomm_merge"));
        }
        let leader = ic.group.world(0);
        let extra = bytes_of_u32s(&[high as u32, leader]);
        let (ctx, theirs) = self.inter_ctx(ic, &extra, 2)?;
        let t = u32s(&theirs);
        if t.len() != 2 {
            return Err(err(
                class::INTERN,
                "the other group's leader sent a malformed merge request",
            ));
        }
        let first = merge_local_first(high, t[0] != 0, leader, t[1]);
        let (a, b) = if first {
            (&ic.group, &ic.peers)
        } else {
            (&ic.peers, &ic.group)
        };
        let members: Vec<u32> = a.members.iter().chain(&b.members).copied().collect();
        let rank = if first {
            ic.rank
        } else {
            ic.peer_size + ic.rank
        };
        Ok(Comm::new(ctx, Group::new(members), rank, ""))
    }
}

// ---- constructors from groups (no parent communicator) -------------------------

impl Mpi {
    /// The communicator the constructors from groups talk on: every process
    /// of the job, on `MPI_COMM_WORLD`'s context id with an instance number
    /// no nonblocking collective reaches (its own queues and sequence
    /// numbers, kept for the whole run so that successive calls stay in order).
    fn bootstrap(&self) -> &Arc<Comm> {
        self.bootstrap.get_or_init(|| {
            let mut c = Comm::new(0, self.world.group.clone(), self.world.rank, "");
            Arc::get_mut(&mut c).expect("fresh").nbc = u32::MAX;
            c
        })
    }

    fn boot_send(&self, to: u32, v: &[u32], tag: i32) -> Result<Arc<crate::Req>> {
        let u32t = Datatype::predefined(Basic::U32, "u32");
        // SAFETY: the caller waits for the request before `v` goes away.
        let b = unsafe { Buf::new(v.as_ptr() as usize, v.len(), u32t) };
        self.isend(self.bootstrap(), &b, to as i32, tag, Mode::Standard)
    }

    fn boot_recv(&self, from: u32, out: &mut [u32], tag: i32) -> Result<()> {
        let u32t = Datatype::predefined(Basic::U32, "u32");
        // SAFETY: `out` lives across the blocking receive.
        let b = unsafe { Buf::new(out.as_mut_ptr() as usize, out.len(), u32t) };
        self.recv(self.bootstrap(), b, from as i32, tag).map(|_| ())
    }

    /// A context id free at every member of `group` (world ranks), agreed
    /// through its member `leader`; at the leader, `swap` trades the group's
    /// maximum for another group's (whose leader is that world rank) first.
    fn group_ctx(
        &self,
        group: &Group,
        me: u32,
        leader: u32,
        swap: Option<u32>,
        tag: i32,
    ) -> Result<u32> {
        let proposal = self.next_ctx.load(Ordering::Acquire);
        if me != leader {
            let s = self.boot_send(group.world(leader), &[proposal], tag)?;
            let mut v = [0u32];
            let r = self.boot_recv(group.world(leader), &mut v, tag);
            self.wait(&s);
            r?;
            return Ok(v[0]);
        }
        let mut best = proposal;
        for r in (0..group.size()).filter(|&r| r != leader) {
            let mut v = [0u32];
            self.boot_recv(group.world(r), &mut v, tag)?;
            best = best.max(v[0]);
        }
        if let Some(other) = swap {
            let mine = [best];
            let s = self.boot_send(other, &mine, tag)?;
            let mut v = [0u32];
            let r = self.boot_recv(other, &mut v, tag);
            self.wait(&s);
            r?;
            best = Self::agree_ctx(best, v[0])?;
        }
        let result = [best];
        let mut sends = Vec::new();
        for r in (0..group.size()).filter(|&r| r != leader) {
            sends.push(self.boot_send(group.world(r), &result, tag)?);
        }
        for s in sends {
            self.wait(&s);
        }
        Ok(best)
    }

    /// My rank in `group`, which must hold the caller.
    fn member(&self, group: &Group, what: &str) -> Result<u32> {
        group.rank_of(self.me()).ok_or_else(|| {
            err(
                class::GROUP,
                format!("{what}: the calling process is not in the group"),
            )
        })
    }

    /// `MPI_Comm_create_from_group`: collective over the members of `group`.
    pub fn comm_from_group(&self, group: &Arc<Group>, stringtag: &str) -> Result<Arc<Comm>> {
        let me = self.member(group, "MPI_Comm_create_from_group")?;
        let ctx = self.group_ctx(group, me, 0, None, string_tag(stringtag))?;
        self.reserve_ctx(ctx, 2);
        Ok(Comm::new(ctx, group.clone(), me, ""))
    }

    /// `MPI_Intercomm_create_from_groups`: collective over both groups; the
    /// leaders swap their groups' context id proposals directly.
    pub fn intercomm_from_groups(
        &self,
        local: &Arc<Group>,
        local_leader: i32,
        remote: &Arc<Group>,
        remote_leader: i32,
        stringtag: &str,
    ) -> Result<Arc<Comm>> {
        let me = self.member(local, "MPI_Intercomm_create_from_groups")?;
        for (leader, g, which) in [
            (local_leader, local, "local"),
            (remote_leader, remote, "remote"),
        ] {
            if leader < 0 || leader as u32 >= g.size() {
                return Err(err(
                    class::RANK,
                    format!(
                        "{which} leader {leader} is invalid in a group of size {}",
                        g.size()
                    ),
                ));
            }
        }
        // Both groups are known here: overlap is found before any message.
        check_remote(&remote.members, self.ctx().capacity(), local)?;
        let other = remote.world(remote_leader as u32);
        let ctx = self.group_ctx(
            local,
            me,
            local_leader as u32,
            Some(other),
            string_tag(stringtag),
        )?;
        self.reserve_ctx(ctx, INTER_CTX_IDS);
        Ok(self.new_inter_from(ctx, local.clone(), remote.clone(), me))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(v: &[(i32, i32)]) -> Vec<u8> {
        v.iter()
            .flat_map(|(c, k)| c.to_le_bytes().into_iter().chain(k.to_le_bytes()))
            .collect()
    }

    #[test]
    fn split_members_orders_by_key_then_rank() {
        let all = pairs(&[(1, 5), (0, 0), (1, 2), (1, 2), (UNDEFINED, 0)]);
        assert_eq!(split_members(&all, 1), vec![2, 3, 0]);
        assert_eq!(split_members(&all, 0), vec![1]);
        assert!(split_members(&all, 7).is_empty());
    }

    #[test]
    fn merge_order_is_the_same_on_both_sides() {
        // Different flags: the low group first, whatever the leaders.
        assert!(merge_local_first(false, true, 9, 1));
        assert!(!merge_local_first(true, false, 1, 9));
        // Same flags: the lower leader first, and exactly one side is first.
        for h in [false, true] {
            assert!(merge_local_first(h, h, 2, 5));
            assert!(!merge_local_first(h, h, 5, 2));
        }
    }

    #[test]
    fn remote_lists_are_checked() {
        let local = Group::new(vec![0, 1]);
        assert!(check_remote(&[2, 3], 4, &local).is_ok());
        assert_eq!(
            check_remote(&[1, 2], 4, &local).unwrap_err().class,
            class::ARG
        );
        assert_eq!(
            check_remote(&[2, 2], 4, &local).unwrap_err().class,
            class::INTERN
        );
        assert_eq!(
            check_remote(&[7], 4, &local).unwrap_err().class,
            class::INTERN
        );
    }

    #[test]
    fn string_tags_are_valid_tags_and_differ() {
        for s in ["", "a", "b", "mpi4py", "a much longer tag with spaces"] {
            let t = string_tag(s);
            assert!((0..=TAG_UB).contains(&t), "{s}: {t}");
        }
        assert_ne!(string_tag("a"), string_tag("b"));
        assert_eq!(string_tag("x"), string_tag("x"));
    }

    #[test]
    fn context_agreement_rejects_odd_or_huge_ids() {
        assert_eq!(Mpi::agree_ctx(4, 10).unwrap(), 10);
        assert_eq!(Mpi::agree_ctx(12, 10).unwrap(), 12);
        assert!(Mpi::agree_ctx(4, 11).is_err());
        assert!(Mpi::agree_ctx(4, u32::MAX - 1).is_err());
    }
}
