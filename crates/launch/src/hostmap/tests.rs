use super::*;
use proptest::prelude::*;

fn machines(text: &str) -> Machines {
    Machines::parse(text).unwrap_or_else(|e| panic!("{text:?}: {e}"))
}

fn map(text: &str, n: usize, by: MapBy, over: bool) -> Vec<usize> {
    match map_ranks(&machines(text), n, by, over) {
        Ok(m) => m.host_of_rank,
        Err(e) => panic!("{text:?} -n {n}: {e}"),
    }
}

#[test]
fn by_slot_fills_each_host_in_file_order() {
    assert_eq!(map("a:2\nb:2\n", 3, MapBy::Slot, false), [0, 0, 1]);
    assert_eq!(map("a:2\nb:2\n", 4, MapBy::Slot, false), [0, 0, 1, 1]);
    assert_eq!(
        map("a slots=3\nb\nc:2\n", 6, MapBy::Slot, false),
        [0, 0, 0, 1, 2, 2]
    );
    // A host without a count has 1 slot (Hydra).
    assert_eq!(map("a\nb\nc\n", 3, MapBy::Slot, false), [0, 1, 2]);
    assert_eq!(MapBy::default(), MapBy::Slot);
}

#[test]
fn by_host_goes_round_robin_skipping_full_hosts() {
    assert_eq!(
        map("a:2\nb:1\nc:3\n", 6, MapBy::Host, false),
        [0, 1, 2, 0, 2, 2]
    );
    assert_eq!(map("a:2\nb:2\n", 3, MapBy::Host, false), [0, 1, 0]);
    assert_eq!(
        map("a:4\nb:4\nc:4\n", 5, MapBy::Host, false),
        [0, 1, 2, 0, 1]
    );
}

#[test]
fn more_ranks_than_slots_needs_oversubscribe() {
    let m = machines("a:2\nb:2\n");
    let e = map_ranks(&m, 5, MapBy::Slot, false).unwrap_err();
    assert!(
        e.contains("-n 5") && e.contains("4 slots") && e.contains("--oversubscribe"),
        "{e}"
    );
    let e = map_ranks(&m, 5, MapBy::Host, false).unwrap_err();
    assert!(e.contains("-n 5") && e.contains("4 slots"), "{e}");
}

#[test]
fn oversubscribed_ranks_wrap_around_as_hydra_does() {
    // By slot: another pass in file order, each host getting its slots again.
    assert_eq!(
        map("a:2\nb:2\n", 7, MapBy::Slot, true),
        [0, 0, 1, 1, 0, 0, 1]
    );
    assert_eq!(
        map("a:2\nb:1\n", 8, MapBy::Slot, true),
        [0, 0, 1, 0, 0, 1, 0, 0]
    );
    // By host: further rounds over every host.
    assert_eq!(map("a:2\nb:1\n", 5, MapBy::Host, true), [0, 1, 0, 0, 1]);
}

#[test]
fn max_slots_caps_even_when_oversubscribing() {
    let text = "a slots=1 max_slots=2\nb slots=1 max_slots=1\nc\n";
    // c has no cap: it takes what a and b cannot.
    assert_eq!(map(text, 6, MapBy::Slot, true), [0, 1, 2, 0, 2, 2]);
    assert_eq!(map(text, 6, MapBy::Host, true), [0, 1, 2, 0, 2, 2]);
    let capped = "a slots=1 max_slots=2\nb slots=1 max_slots=1\n";
    assert_eq!(map(capped, 3, MapBy::Slot, true), [0, 1, 0]);
    let e = map_ranks(&machines(capped), 4, MapBy::Slot, true).unwrap_err();
    assert!(
        e.contains("-n 4") && e.contains("3 ranks") && e.contains("max_slots"),
        "{e}"
    );
    // Without --oversubscribe the slots, not the caps, are the limit.
    let e = map_ranks(&machines(capped), 3, MapBy::Host, false).unwrap_err();
    assert!(e.contains("2 slots"), "{e}");
}

#[test]
fn bounds_and_empty_maps() {
    let m = machines("a\n");
    let e = map_ranks(&m, MAX_RANKS + 1, MapBy::Slot, true).unwrap_err();
    assert!(e.contains("1000001"), "{e}");
    let empty = map_ranks(&m, 0, MapBy::Host, false).unwrap();
    assert!(empty.is_empty());
    assert_eq!(empty.hosts_used(), Vec::<usize>::new());
    assert_eq!(empty.local_rank(0), (0, 0));
    let none = Machines {
        sites: Vec::new(),
        hosts: Vec::new(),
    };
    assert!(map_ranks(&none, 1, MapBy::Slot, true).is_err());
    // Many ranks on one host: fine and quick.
    let big = map_ranks(&m, MAX_RANKS, MapBy::Host, true).unwrap();
    assert_eq!(big.len(), MAX_RANKS);
    assert_eq!(big.process_mapping(), format!("(vector,(0,1,{MAX_RANKS}))"));
}

#[test]
fn queries_on_a_map() {
    let m = machines("a:2\nb:1\nc:3\nunused\n");
    let rm = map_ranks(&m, 6, MapBy::Slot, false).unwrap();
    assert_eq!(rm.host_of_rank, [0, 0, 1, 2, 2, 2]);
    assert_eq!(rm.ranks_on(0), [0, 1]);
    assert_eq!(rm.ranks_on(2), [3, 4, 5]);
    assert_eq!(rm.ranks_on(3), Vec::<usize>::new());
    assert_eq!(rm.hosts_used(), [0, 1, 2], "no proxy for the unused host");
    assert_eq!(rm.local_rank(4), (1, 3));
    assert_eq!(rm.local_rank(1), (1, 2));
    assert_eq!(rm.local_rank(2), (0, 1));
    assert_eq!(rm.local_rank(99), (0, 0));
    assert_eq!(rm.describe(&m), "a: ranks 0-1; b: ranks 2; c: ranks 3-5");

    let rm = map_ranks(&m, 6, MapBy::Host, false).unwrap();
    assert_eq!(rm.host_of_rank, [0, 1, 2, 3, 0, 2]);
    assert_eq!(rm.local_rank(5), (1, 2));
    let all = rm.local_ranks();
    for (r, &lr) in all.iter().enumerate() {
        assert_eq!(lr, rm.local_rank(r), "rank {r}");
    }
    assert_eq!(
        rm.describe(&m),
        "a: ranks 0,4; b: ranks 1; c: ranks 2,5; unused: ranks 3"
    );
}

#[test]
fn process_mapping_as_mpich_reads_it() {
    let pm = |text: &str, n, by, over| {
        map_ranks(&machines(text), n, by, over)
            .unwrap()
            .process_mapping()
    };
    assert_eq!(pm("a:2\nb:2\n", 4, MapBy::Slot, false), "(vector,(0,2,2))");
    assert_eq!(
        pm("a:2\nb:1\n", 3, MapBy::Slot, false),
        "(vector,(0,1,2),(1,1,1))"
    );
    // Wrapping maps are written as one period (MPICH repeats the vector).
    assert_eq!(pm("a:2\nb:2\n", 8, MapBy::Slot, true), "(vector,(0,2,2))");
    assert_eq!(pm("a\nb\nc\n", 7, MapBy::Host, true), "(vector,(0,3,1))");
    assert_eq!(
        pm("a:2\nb:2\nc:2\n", 6, MapBy::Host, false),
        "(vector,(0,3,1))"
    );
    // An incomplete last period is still a prefix of the repetition.
    assert_eq!(pm("a:2\nb:2\n", 6, MapBy::Slot, true), "(vector,(0,2,2))");
    // Not periodic: every block.
    assert_eq!(
        pm("a:2\nb:1\nc:3\n", 6, MapBy::Host, false),
        "(vector,(0,3,1),(0,1,1),(2,1,2))"
    );
}

/// MPICH's decoder of `PMI_process_mapping`
/// (`MPIR_NODEMAP_populate_ids_from_mapping`): blocks in order, repeating
/// from the first block of node 0 until every rank has a node.
fn mpich_decode(mapping: &str, n: usize) -> Vec<usize> {
    let inner = mapping
        .strip_prefix("(vector,")
        .and_then(|s| s.strip_suffix(')'))
        .unwrap_or_else(|| panic!("{mapping}"));
    let blocks: Vec<(usize, usize, usize)> = inner
        .split("),")
        .filter(|b| !b.is_empty())
        .map(|b| {
            let nums: Vec<usize> = b
                .trim_matches(|c| c == '(' || c == ')')
                .split(',')
                .map(|x| x.parse().unwrap())
                .collect();
            (nums[0], nums[1], nums[2])
        })
        .collect();
    let mut out = Vec::new();
    if n == 0 {
        return out;
    }
    assert!(blocks.iter().any(|b| b.1 * b.2 > 0), "{mapping}");
    let mut found_wrap = false;
    loop {
        let mut b = 0;
        while found_wrap && blocks[b].0 != 0 {
            b += 1;
        }
        for &(start, nodes, ranks) in &blocks[b..] {
            if start == 0 {
                found_wrap = true;
            }
            for node in start..start + nodes {
                for _ in 0..ranks {
                    out.push(node);
                    if out.len() == n {
                        return out;
                    }
                }
            }
        }
    }
}

/// Node ids in order of first use, as process_mapping numbers them.
fn first_use_ids(host_of_rank: &[usize]) -> Vec<usize> {
    let mut ids = std::collections::HashMap::new();
    host_of_rank
        .iter()
        .map(|&h| {
            let next = ids.len();
            *ids.entry(h).or_insert(next)
        })
        .collect()
}

fn machines_of(hosts: &[(usize, Option<usize>)]) -> Machines {
    let text: String = hosts
        .iter()
        .enumerate()
        .map(|(i, (slots, cap))| match cap {
            Some(extra) => format!("h{i} slots={slots} max_slots={}\n", slots + extra),
            None => format!("h{i}:{slots}\n"),
        })
        .collect();
    machines(&text)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn maps_keep_their_promises(
        hosts in prop::collection::vec((1usize..5, prop::option::of(0usize..3)), 1..8),
        n in 0usize..50,
        by_host in any::<bool>(),
        over in any::<bool>(),
    ) {
        let m = machines_of(&hosts);
        let by = if by_host { MapBy::Host } else { MapBy::Slot };
        let slots: Vec<usize> = hosts.iter().map(|h| h.0).collect();
        let caps: Vec<usize> = hosts.iter().map(|&(s, c)| c.map_or(usize::MAX, |e| s + e)).collect();
        let total: usize = slots.iter().sum();
        let allowed = caps.iter().fold(0usize, |a, &c| a.saturating_add(c));
        let result = map_ranks(&m, n, by, over);
        let should_fit = n <= total || (over && n <= allowed);
        prop_assert_eq!(result.is_ok(), should_fit, "{:?}", result);
        let Ok(rm) = result else { return Ok(()) };

        prop_assert_eq!(rm.len(), n);
        let mut count = vec![0usize; hosts.len()];
        for &h in &rm.host_of_rank {
            count[h] += 1;
        }
        for h in 0..hosts.len() {
            prop_assert!(count[h] <= caps[h]);
            if n <= total {
                prop_assert!(count[h] <= slots[h], "within the slots while they last");
            }
        }
        if n <= total {
            match by {
                MapBy::Slot => {
                    // Blocks in file order, each host full before the next.
                    prop_assert!(rm.host_of_rank.windows(2).all(|w| w[0] <= w[1]));
                    if let Some(&last) = rm.host_of_rank.last() {
                        for h in 0..last {
                            prop_assert_eq!(count[h], slots[h]);
                        }
                    }
                }
                MapBy::Host => {
                    // A host with room left was in every round: no host is
                    // more than one rank ahead of it.
                    for h in (0..hosts.len()).filter(|&h| count[h] < slots[h]) {
                        prop_assert!(count.iter().all(|&c| c <= count[h] + 1), "{:?}", count);
                    }
                }
            }
        } else {
            // Oversubscribed: every slot is used first.
            for h in 0..hosts.len() {
                prop_assert!(count[h] >= slots[h]);
            }
        }
        // local ranks agree with a direct count.
        for (r, (idx, cnt)) in rm.local_ranks().into_iter().enumerate() {
            let h = rm.host_of_rank[r];
            prop_assert_eq!(cnt, count[h]);
            prop_assert_eq!(idx, rm.host_of_rank[..r].iter().filter(|&&x| x == h).count());
        }
        let used = rm.hosts_used();
        prop_assert_eq!(used.clone(), (0..hosts.len()).filter(|&h| count[h] > 0).collect::<Vec<_>>());
        // MPICH decodes the mapping into the same nodes.
        let mapping = rm.process_mapping();
        if n > 0 {
            prop_assert_eq!(mpich_decode(&mapping, n), first_use_ids(&rm.host_of_rank), "{}", mapping);
        }
    }
}

#[test]
fn the_message_docs_machines_md_shows_is_the_real_one() {
    let doc = include_str!("../../../../docs/machines.md");
    let e = map_ranks(&machines("a:2\nb:2\n"), 5, MapBy::Slot, false).unwrap_err();
    assert_eq!(
        e,
        "-n 5 is more than the 4 slots of the machines file's 2 host(s); \
         give the hosts more slots (host:N or slots=N) or use --oversubscribe"
    );
    assert!(
        doc.contains(&format!("gwrun: {e}\n")),
        "docs/machines.md lacks {e:?}"
    );
    let pm = map_ranks(&machines("a\nb\nc\n"), 100, MapBy::Host, true)
        .unwrap()
        .process_mapping();
    assert_eq!(pm, "(vector,(0,3,1))");
    assert!(doc.contains(&format!("`{pm}`")));
}
