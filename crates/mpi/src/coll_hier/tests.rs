use super::*;

/// 2 sites; site 0 has hosts 0 (ranks 0, 2) and 1 (rank 1); site 1 has
/// host 2 (ranks 3, 4, 5) — round-robin-ish and uneven.
fn plan() -> Plan {
    Plan::new(&[[0, 0], [0, 1], [0, 0], [1, 2], [1, 2], [1, 2]]).expect("two hosts")
}

#[test]
fn one_host_has_no_plan() {
    assert!(Plan::new(&[[0, 0], [0, 0]]).is_none());
    assert!(Plan::new(&[]).is_none());
}

#[test]
fn the_root_stands_for_its_host_and_site() {
    let p = plan();
    assert_eq!((p.sites(), p.hosts()), (2, 3));
    // Root 4 (site 1, host 2, not the lowest rank there).
    let l = p.lists(4, 4);
    assert_eq!(l.host, vec![4, 3, 5]);
    assert_eq!(l.site, vec![4]);
    assert_eq!(l.wan, vec![4, 0]);
    // Rank 0 represents site 0 and host 0; host 1's rank 1 is in the site tree.
    let l = p.lists(4, 0);
    assert_eq!(
        (l.host, l.site, l.wan),
        (vec![0, 2], vec![0, 1], vec![4, 0])
    );
    // Rank 3 is an ordinary member of the root's host.
    let l = p.lists(4, 3);
    assert_eq!((l.host, l.site, l.wan), (vec![4, 3, 5], vec![], vec![]));
    // Rank 2: a member of host 0, no other level.
    let l = p.lists(4, 2);
    assert_eq!((l.host, l.site, l.wan), (vec![0, 2], vec![], vec![]));
}

#[test]
fn every_rank_but_the_root_receives_once() {
    let p = plan();
    for root in 0..6 {
        let mut got = [0u32; 6];
        for me in 0..6u32 {
            let l = p.lists(root, me);
            for list in [&l.host, &l.site, &l.wan] {
                if list.len() > 1 && list[0] != me && list.contains(&me) {
                    got[me as usize] += 1;
                }
            }
        }
        for (r, &g) in got.iter().enumerate() {
            assert_eq!(g, u32::from(r as u32 != root), "root {root}, rank {r}");
        }
    }
}

#[test]
fn the_mode_parses() {
    assert_eq!(CollMode::parse("flat"), Some(CollMode::Flat));
    assert_eq!(CollMode::parse(" hier "), Some(CollMode::Hier));
    assert_eq!(CollMode::parse("auto"), Some(CollMode::Auto));
    assert_eq!(CollMode::parse("tree"), None);
}

#[test]
fn contiguous_only_when_hosts_and_sites_are_consecutive() {
    // Block placement: 2 sites x 2 hosts x 2 ranks.
    let block = Plan::new(&[
        [0, 0],
        [0, 0],
        [0, 1],
        [0, 1],
        [1, 2],
        [1, 2],
        [1, 3],
        [1, 3],
    ])
    .expect("four hosts");
    assert!(block.contiguous());
    // The fixture's host 0 holds ranks 0 and 2 around host 1's rank 1.
    assert!(!plan().contiguous());
    // Hosts consecutive but a site interrupted: site 0, 1, 0.
    let sites = Plan::new(&[[0, 0], [1, 1], [0, 2]]).expect("three hosts");
    assert!(!sites.contiguous());
}
