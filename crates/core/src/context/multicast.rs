//! Multicast startpoints (Nexus' multicast links): one remote service
//! request delivered to a group of endpoints, by a tree over the links the
//! selection already chose.
//!
//! The issuing context builds the whole tree once per request from the
//! members' placements (site, then host): it sends one message to the first
//! member of each *other* site, that member one to the first member of each
//! other host of its site, and that one to every other member of its host
//! (in subtrees of at most [`FANOUT`] below it when a host has many). So a
//! request crosses each wide-area link to a remote site once, and each host
//! boundary once.
//!
//! Wire (payload of the runtime's `H_MULTICAST` request, little-endian):
//! `origin u32, handler u32, count u32`, then `count` entries of `ctx u32,
//! endpoint u32, subtree u32` in preorder — the receiver's own subtree, its
//! own entry first — then the user's payload. A receiver checks the entries
//! (its own id first, subtree sizes that add up, ids inside the job), sends
//! each child's slice on, then runs `handler` on its endpoint with `origin`
//! as the source. Anything malformed is counted and dropped, never trusted:
//! an entry list is the sender's word.

use super::*;
use progress::Dispatch;

/// The runtime's handler for multicast requests.
pub(super) const H_MULTICAST: u32 = FIRST_INTERNAL_HANDLER + 3;

/// Most children a member serves directly among the members of its own host.
pub const FANOUT: usize = 4;

/// Bytes of one tree entry.
const ENTRY: usize = 12;
/// Bytes before the entries.
const HEAD: usize = 12;

/// A group of endpoints addressed as one (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MulticastStartpoint {
    pub members: Vec<Startpoint>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    ctx: u32,
    endpoint: u32,
    subtree: u32,
}

/// Appends the preorder encoding of a tree rooted at `root` (placed at
/// `key` = (site, host) indices) over `rest`, which is sorted by key.
fn build(
    root: Startpoint,
    key: (usize, usize),
    rest: &[(Startpoint, (usize, usize))],
    out: &mut Vec<Entry>,
) {
    let at = out.len();
    out.push(Entry {
        ctx: root.ctx,
        endpoint: root.endpoint,
        subtree: 1,
    });
    // One child per other site (its first member leads the rest of it),
    // then one per other host of the root's site, then the root's own host
    // in at most FANOUT subtrees.
    let other_site: Vec<_> = rest.iter().filter(|(_, k)| k.0 != key.0).copied().collect();
    let own_site: Vec<_> = rest.iter().filter(|(_, k)| k.0 == key.0).copied().collect();
    let other_host: Vec<_> = own_site
        .iter()
        .filter(|(_, k)| *k != key)
        .copied()
        .collect();
    let own_host: Vec<_> = own_site
        .iter()
        .filter(|(_, k)| *k == key)
        .copied()
        .collect();
    for (group, same) in [
        (
            &other_site,
            (|a: (usize, usize), b: (usize, usize)| a.0 == b.0) as fn(_, _) -> bool,
        ),
        (&other_host, |a: (usize, usize), b: (usize, usize)| a == b),
    ] {
        let mut i = 0;
        while i < group.len() {
            let lead = group[i];
            let mut j = i + 1;
            while j < group.len() && same(group[j].1, lead.1) {
                j += 1;
            }
            build(lead.0, lead.1, &group[i + 1..j], out);
            i = j;
        }
    }
    let per = own_host.len().div_ceil(FANOUT).max(1);
    let mut i = 0;
    while i < own_host.len() {
        let j = (i + per).min(own_host.len());
        build(own_host[i].0, key, &own_host[i + 1..j], out);
        i = j;
    }
    out[at].subtree = (out.len() - at) as u32;
}

/// Checks a received entry list: sizes in range and consistent, ids inside
/// the job. Returns why not.
fn check(entries: &[Entry], me: u32, size: u32) -> std::result::Result<(), String> {
    let Some(first) = entries.first() else {
        return Err("no entries".into());
    };
    if first.ctx != me {
        return Err(format!(
            "the tree's root is {}, not this context",
            first.ctx
        ));
    }
    if first.subtree as usize != entries.len() {
        return Err("the root's subtree size is not the entry count".into());
    }
    for (i, e) in entries.iter().enumerate() {
        if e.ctx >= size {
            return Err(format!("member {} is outside the job", e.ctx));
        }
        if e.subtree == 0 || i + e.subtree as usize > entries.len() {
            return Err(format!(
                "entry {i}: subtree size {} out of range",
                e.subtree
            ));
        }
    }
    Ok(())
}

/// The children of the subtree's root: (index, subtree) pairs.
fn children(entries: &[Entry]) -> impl Iterator<Item = &[Entry]> {
    let mut i = 1;
    std::iter::from_fn(move || {
        if i >= entries.len() {
            return None;
        }
        let n = entries[i].subtree as usize; // checked: ≥ 1 and in range
        let s = &entries[i..i + n];
        i += n;
        Some(s)
    })
}

fn encode(origin: u32, handler: u32, entries: &[Entry]) -> Vec<u8> {
    let mut v = Vec::with_capacity(HEAD + ENTRY * entries.len());
    v.extend_from_slice(&origin.to_le_bytes());
    v.extend_from_slice(&handler.to_le_bytes());
    v.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    for e in entries {
        v.extend_from_slice(&e.ctx.to_le_bytes());
        v.extend_from_slice(&e.endpoint.to_le_bytes());
        v.extend_from_slice(&e.subtree.to_le_bytes());
    }
    v
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

/// Parses a received request: (origin, handler, entries, user payload).
fn decode(b: &[u8]) -> Option<(u32, u32, Vec<Entry>, &[u8])> {
    if b.len() < HEAD {
        return None;
    }
    let (origin, handler, count) = (u32_at(b, 0), u32_at(b, 4), u32_at(b, 8) as usize);
    // Bounded by what was received: no allocation the peer did not pay for.
    let end = count.checked_mul(ENTRY)?.checked_add(HEAD)?;
    if end > b.len() {
        return None;
    }
    let entries = (0..count)
        .map(|k| {
            let at = HEAD + k * ENTRY;
            Entry {
                ctx: u32_at(b, at),
                endpoint: u32_at(b, at + 4),
                subtree: u32_at(b, at + 8),
            }
        })
        .collect();
    Some((origin, handler, entries, &b[end..]))
}

impl Context {
    /// Runs `handler` with `payload` on every endpoint of `group` (this
    /// context's own endpoints in it included), by a tree that crosses each
    /// site and host boundary once (see the module documentation). Returns
    /// when `payload` may be reused. Each member sees the request with this
    /// context as its source; requests from one issuer reach each member in
    /// the order they were issued. Fails if a member is outside the job or
    /// its placement cannot be read.
    pub fn rsr_multicast(
        &self,
        group: &MulticastStartpoint,
        handler: u32,
        payload: &[u8],
    ) -> Result<()> {
        if handler >= FIRST_INTERNAL_HANDLER {
            return Err(Error::BadStartpoint(format!(
                "handler {handler:#x} belongs to the runtime"
            )));
        }
        let me = self.rank();
        let own = self.placement_of(me)?;
        let mut keyed = Vec::with_capacity(group.members.len());
        let (mut sites, mut hosts): (Vec<String>, Vec<(String, [u8; 32])>) =
            (vec![own.site.clone()], vec![(own.site.clone(), own.host)]);
        for sp in &group.members {
            let p = self.placement_of(sp.ctx)?;
            let s = sites.iter().position(|x| *x == p.site).unwrap_or_else(|| {
                sites.push(p.site.clone());
                sites.len() - 1
            });
            let hk = (p.site.clone(), p.host);
            let h = hosts.iter().position(|x| *x == hk).unwrap_or_else(|| {
                hosts.push(hk);
                hosts.len() - 1
            });
            keyed.push((*sp, (s, h)));
        }
        // Grouped by site, then host (this context's own first), members in
        // the order given within a host.
        keyed.sort_by_key(|&(_, k)| k);
        // The tree's root is this context; its own endpoints in the group
        // are members like the others (delivered through the self link).
        let root = Startpoint {
            ctx: me,
            endpoint: u32::MAX,
        };
        let mut entries = Vec::with_capacity(keyed.len() + 1);
        build(root, (0, 0), &keyed, &mut entries);
        for child in children(&entries) {
            let head = encode(me, handler, child);
            self.rsr_v(
                &Startpoint {
                    ctx: child[0].ctx,
                    endpoint: child[0].endpoint,
                },
                H_MULTICAST,
                &[IoSlice::new(&head), IoSlice::new(payload)],
            )?;
        }
        Ok(())
    }
}

impl Dispatch<'_> {
    /// A multicast request reached this context: pass it on, then deliver.
    pub(super) fn multicast(&mut self, src: u32, endpoint: u32, msg: &[u8]) {
        let ctx = self.ctx;
        let refuse = |why: &str| {
            ctx.inner.dropped.fetch_add(1, Ordering::Relaxed);
            crate::say!(
                "gw[{}]: dropped a multicast request from rank {src}: {why}",
                ctx.rank()
            );
        };
        let Some((origin, handler, entries, payload)) = decode(msg) else {
            return refuse("truncated");
        };
        if let Err(why) = check(&entries, ctx.rank(), ctx.capacity()) {
            return refuse(&why);
        }
        if handler >= FIRST_INTERNAL_HANDLER || origin >= ctx.capacity() {
            return refuse("bad handler or origin");
        }
        for child in children(&entries) {
            let head = encode(origin, handler, child);
            let to = Startpoint {
                ctx: child[0].ctx,
                endpoint: child[0].endpoint,
            };
            // From inside progress: a send that cannot complete is queued by
            // its link. A failed child loses its subtree's copies; say so.
            if let Err(e) = ctx.rsr_v(
                &to,
                H_MULTICAST,
                &[IoSlice::new(&head), IoSlice::new(payload)],
            ) {
                crate::say!(
                    "gw[{}]: multicast from rank {origin}: could not pass it on to rank {}: {e}",
                    ctx.rank(),
                    to.ctx
                );
            }
        }
        // The root's placeholder entry (endpoint u32::MAX) is never sent to.
        self.deliver_to_handler(origin, handler, endpoint, payload);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sp(ctx: u32) -> Startpoint {
        Startpoint { ctx, endpoint: 0 }
    }

    #[test]
    fn one_message_per_remote_site_and_per_other_host() {
        // Root 0 at (site 0, host 0); members: 1 on its host, 2-3 on host 1
        // of site 0, 4-5 on host 2 of site 1, 6 on host 3 of site 1.
        let keyed = vec![
            (sp(1), (0, 0)),
            (sp(2), (0, 1)),
            (sp(3), (0, 1)),
            (sp(4), (1, 2)),
            (sp(5), (1, 2)),
            (sp(6), (1, 3)),
        ];
        let mut e = Vec::new();
        build(sp(0), (0, 0), &keyed, &mut e);
        assert_eq!(e.len(), 7);
        check(&e, 0, 7).unwrap();
        // The root's children: site 1's leader, host 1's leader, its host's 1.
        let kids: Vec<u32> = children(&e).map(|c| c[0].ctx).collect();
        assert_eq!(kids, vec![4, 2, 1]);
        // Site 1's leader: one message to its other host (6), one to its own host's 5.
        let site1 = children(&e).next().unwrap();
        let kids: Vec<u32> = children(site1).map(|c| c[0].ctx).collect();
        assert_eq!(kids, vec![6, 5]);
        // Host 1's leader serves the rest of its host.
        let host1 = children(&e).nth(1).unwrap();
        let kids: Vec<u32> = children(host1).map(|c| c[0].ctx).collect();
        assert_eq!(kids, vec![3]);
        // Every edge that crosses a site or host boundary is one of these three.
    }

    #[test]
    fn a_big_host_gets_a_bounded_fanout() {
        let keyed: Vec<_> = (1..=40).map(|r| (sp(r), (0, 0))).collect();
        let mut e = Vec::new();
        build(sp(0), (0, 0), &keyed, &mut e);
        assert_eq!(children(&e).count(), FANOUT);
        fn reach(e: &[Entry], out: &mut Vec<u32>) {
            out.push(e[0].ctx);
            for c in children(e) {
                assert!(children(c).count() <= FANOUT);
                reach(c, out);
            }
        }
        let mut all = Vec::new();
        reach(&e, &mut all);
        all.sort();
        assert_eq!(
            all,
            (0..=40).collect::<Vec<_>>(),
            "every member exactly once"
        );
    }

    #[test]
    fn hostile_entry_lists_are_refused() {
        let mut e = Vec::new();
        build(sp(3), (0, 0), &[(sp(1), (0, 0)), (sp(2), (0, 0))], &mut e);
        assert!(check(&e, 3, 4).is_ok());
        assert!(check(&e, 1, 4).is_err(), "not rooted here");
        assert!(check(&e, 3, 3).is_err(), "member outside the job");
        let mut bad = e.clone();
        bad[1].subtree = 7;
        assert!(check(&bad, 3, 4).is_err());
        bad[1].subtree = 0;
        assert!(check(&bad, 3, 4).is_err());
        let mut bad = e.clone();
        bad[0].subtree = 2;
        assert!(check(&bad, 3, 4).is_err());
        assert!(check(&[], 3, 4).is_err());
        // Truncated or absurd counts never allocate or panic.
        let mut b = encode(0, 5, &e);
        assert!(decode(&b).is_some());
        b[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode(&b).is_none());
        assert!(decode(&b[..5]).is_none());
        for cut in 0..b.len() {
            let _ = decode(&b[..cut]);
        }
    }
}
