use super::*;
use std::collections::HashMap;

fn params(pairs: &[(&str, &str)]) -> Result<Params> {
    let m: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Params::from_lookup(|k| m.get(k).cloned())
}

#[test]
fn namespace_key_takes_the_inode_numbers() {
    let links = |kind: &str| -> Option<String> {
        Some(match kind {
            "net" => "net:[4026531840]".into(),
            "ipc" => "ipc:[4026531839]".into(),
            "pid" => "pid:[4026531836]".into(),
            _ => return None,
        })
    };
    assert_eq!(namespace_key(&links), "n4026531840i4026531839p4026531836");
    // Unreadable or malformed links: a fixed placeholder, never a panic.
    let broken = |kind: &str| -> Option<String> {
        match kind {
            "net" => Some("net:[12".into()),
            "ipc" => Some("mnt:[5]".into()),
            _ => None,
        }
    };
    assert_eq!(namespace_key(&broken), "n?i?p?");
}

#[test]
fn host_identity_holds_namespaces_also_for_emulated_hosts() {
    let real = real_host_identity();
    let ns = namespace_key(&read_namespace);
    assert!(real.ends_with(&format!("/{ns}")), "{real}");
    assert!(!ns.contains('?'), "{ns}");
    let p = |id: &str| params(&[("GW_HOST_ID", id)]).unwrap();
    let a = host_identity(&p("h:b#emu0"));
    assert_eq!(a, format!("h:b#emu0/{ns}"));
    assert_eq!(a, host_identity(&p("h:b#emu0")));
    assert_ne!(a, host_identity(&p("h:b#emu1")));
    assert_eq!(host_identity(&params(&[]).unwrap()), real);
}

/// Not a test of its own: prints this process's host identity when
/// `host_identity_differs_in_other_namespaces` runs it in other namespaces.
#[test]
fn print_host_identity_for_namespace_test() {
    if std::env::var_os("GW_TEST_PRINT_HOST_ID").is_some() {
        println!("HOST_ID={}", real_host_identity());
    }
}

/// Processes in another network / IPC / PID namespace of the same kernel
/// (containers, gw-testbed hosts: same hostname possible, same boot id)
/// are another host for shm and CMA.
#[test]
fn host_identity_differs_in_other_namespaces() {
    if !gridwire_testkit::is_root() {
        gridwire_testkit::skip("unshare of network, IPC and PID namespaces needs root");
        return;
    }
    if !std::path::Path::new("/usr/bin/unshare").exists() {
        gridwire_testkit::skip("/usr/bin/unshare is missing (Debian package util-linux)");
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let run = |unshare: &[&str]| -> String {
        let out = std::process::Command::new("/usr/bin/unshare")
            .args(unshare)
            .arg(&exe)
            .args([
                "--exact",
                "context::tests::print_host_identity_for_namespace_test",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("GW_TEST_PRINT_HOST_ID", "1")
            .output()
            .expect("run unshare");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "unshare {unshare:?}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // The test harness prints the line after the test's name.
        text.lines()
            .find_map(|l| Some(l.split_once("HOST_ID=")?.1.trim()))
            .unwrap_or_else(|| panic!("no HOST_ID line: {text}"))
            .to_string()
    };
    let here = real_host_identity();
    // Same namespaces (a child that unshares nothing): same host.
    assert_eq!(run(&["--fork"]), here);
    for ns in ["--net", "--ipc", "--pid"] {
        let there = run(&["--fork", ns]);
        assert_ne!(there, here, "unshare {ns}");
        // Same kernel, same hostname: only the namespaces differ.
        let prefix = |s: &str| s.split('/').next().unwrap().to_string();
        assert_eq!(prefix(&there), prefix(&here));
    }
}

#[test]
fn gw_methods_restricts_orders_and_rejects_unknown_names() {
    let all = methods_from_params(&params(&[]).unwrap()).unwrap();
    assert_eq!(
        all.iter().map(|m| m.name).collect::<Vec<_>>(),
        ["self", "shm", "tcp", "udp"]
    );
    let p = params(&[("GW_METHODS", "tcp, shm,tcp")]).unwrap();
    let v = methods_from_params(&p).unwrap();
    assert_eq!(v.iter().map(|m| m.name).collect::<Vec<_>>(), ["tcp", "shm"]);
    let p = params(&[("GW_METHODS", "tcp,infiniband")]).unwrap();
    let e = methods_from_params(&p).err().unwrap().to_string();
    assert!(
        e.contains("infiniband") && e.contains("self, shm, tcp, udp") && e.contains("GW_METHODS"),
        "{e}"
    );
}

fn singleton(pairs: &[(&str, &str)]) -> Context {
    try_singleton(pairs).unwrap()
}

fn try_singleton(pairs: &[(&str, &str)]) -> Result<Context> {
    let mut all = vec![("GW_JOB_ID", "unit"), ("GW_JOB_SECRET", "")];
    all.extend_from_slice(pairs);
    let job_id = format!(
        "unit{}x{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    all[0].1 = Box::leak(job_id.into_boxed_str());
    Context::with(params(&all)?, Pmi::singleton())
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

fn roundtrip(ctx: &Context, expect_method: &str) {
    let got = Arc::new(Mutex::new(Vec::<(u32, u32, Vec<u8>)>::new()));
    let g = got.clone();
    ctx.register_handler(3, move |_, req| {
        g.lock()
            .unwrap()
            .push((req.src, req.endpoint, req.payload.to_vec()))
    })
    .expect("valid handler id");
    let ep = ctx.create_endpoint();
    for i in 0..100u32 {
        ctx.rsr(&ep, 3, &i.to_le_bytes()).unwrap();
    }
    let big: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    ctx.rsr(&ctx.startpoint(0).unwrap(), 3, &big).unwrap();
    assert!(ctx.wait_timeout(Duration::from_secs(20), || got.lock().unwrap().len() == 101));
    let got = got.lock().unwrap();
    for (i, (src, endpoint, payload)) in got.iter().take(100).enumerate() {
        assert_eq!((*src, *endpoint), (0, ep.endpoint));
        assert_eq!(payload.as_slice(), (i as u32).to_le_bytes(), "in order");
    }
    assert_eq!(got[100].2, big);
    assert_eq!(ctx.method_to(0), Some(expect_method));
    let st = ctx.link_stats();
    assert_eq!(st.len(), 1);
    assert_eq!((st[0].sent_msgs, st[0].recv_msgs), (101, 101));
    assert_eq!(st[0].sent_bytes, st[0].recv_bytes);
}

/// Link events seen by this test binary's listener: (kind, peer, method, reason).
type Seen = (crate::events::LinkEventKind, u32, &'static str, String);
static EVENTS_SEEN: Mutex<Vec<Seen>> = Mutex::new(Vec::new());

fn record_event(ev: &crate::events::LinkEvent<'_>) {
    EVENTS_SEEN
        .lock()
        .unwrap()
        .push((ev.kind, ev.peer, ev.method, ev.reason.to_string()));
}

#[test]
fn link_selection_and_failure_reach_the_event_listener() {
    use crate::events::LinkEventKind;
    crate::events::set_link_listener(record_event);
    let ctx = singleton(&[]);
    roundtrip(&ctx, "self");
    let seen = |k: LinkEventKind, method: &str, reason: &str| {
        EVENTS_SEEN
            .lock()
            .unwrap()
            .iter()
            .any(|e| e.0 == k && e.1 == 0 && e.2 == method && e.3.contains(reason))
    };
    assert!(seen(LinkEventKind::Selected, "self", ""));
    let mut sink = Dispatch {
        sequenced: false,
        method: 0,
        ctx: &ctx,
        handlers: &[],
        placers: &[],
        round_ends: &[],
        was_in_handler: None,
    };
    sink.link_failed(0, "unit test: the peer vanished".into());
    assert!(seen(LinkEventKind::Failed, "self", "peer vanished"));
    // Only the first failure of a link is an event (the link stays failed).
    sink.link_failed(0, "unit test: again".into());
    assert!(!seen(LinkEventKind::Failed, "self", "again"));
    ctx.finalize().unwrap();
}

#[test]
fn singleton_requests_to_self_use_the_self_method() {
    let ctx = singleton(&[]);
    roundtrip(&ctx, "self");
    ctx.finalize().unwrap();
}

#[test]
fn forced_tcp_connects_to_itself_authenticated() {
    let ctx = singleton(&[("GW_METHODS", "tcp"), ("GW_TCP_MAX_QUEUED", "64k")]);
    assert_eq!(ctx.method_names(), ["tcp"]);
    roundtrip(&ctx, "tcp");
    let counters = ctx.method_counters();
    assert!(counters.contains(&("tcp", "refused_connections", 0)));
    assert!(counters.contains(&("tcp", "merged_connections", 0)));
    ctx.finalize().unwrap();
}

#[test]
fn unknown_endpoint_and_handler_are_dropped_and_counted() {
    let ctx = singleton(&[]);
    let hits = Arc::new(AtomicU32::new(0));
    let h = hits.clone();
    ctx.register_handler(1, move |_, _| {
        h.fetch_add(1, Ordering::Relaxed);
    })
    .expect("valid handler id");
    let ep = ctx.create_endpoint();
    ctx.destroy_endpoint(&ep);
    ctx.rsr(&ep, 1, b"x").unwrap();
    ctx.rsr(&ctx.startpoint(0).unwrap(), 99, b"x").unwrap();
    ctx.rsr(&ctx.startpoint(0).unwrap(), 1, b"x").unwrap();
    assert!(ctx.wait_timeout(Duration::from_secs(5), || hits.load(Ordering::Relaxed) == 1));
    assert_eq!(ctx.dropped_requests(), 2);
    assert!(ctx.startpoint(5).is_err(), "rank out of range is an error");
}

#[test]
fn handlers_may_send_without_blocking() {
    // A handler that forwards to itself: exercises sends from inside progress.
    let ctx = singleton(&[]);
    let n = Arc::new(AtomicU32::new(0));
    let c = n.clone();
    ctx.register_handler(2, move |ctx, req| {
        let v = u32::from_le_bytes(req.payload.try_into().unwrap());
        c.store(v, Ordering::Relaxed);
        if v < 1000 {
            ctx.rsr(&ctx.startpoint(0).unwrap(), 2, &(v + 1).to_le_bytes())
                .unwrap();
        }
    })
    .expect("valid handler id");
    ctx.rsr(&ctx.startpoint(0).unwrap(), 2, &0u32.to_le_bytes())
        .unwrap();
    assert!(
        ctx.wait_timeout(Duration::from_secs(10), || n.load(Ordering::Relaxed)
            == 1000)
    );
    // Registering from a handler is an error, not a deadlock.
    let refused = Arc::new(AtomicU32::new(0));
    let r = refused.clone();
    ctx.register_handler(4, move |ctx, _| {
        if ctx.register_handler(5, |_, _| {}).is_err() {
            r.store(1, Ordering::Relaxed);
        }
    })
    .unwrap();
    ctx.rsr(&ctx.startpoint(0).unwrap(), 4, b"").unwrap();
    assert!(
        ctx.wait_timeout(Duration::from_secs(10), || refused.load(Ordering::Relaxed)
            == 1)
    );
}

#[test]
fn round_end_hooks_run_after_a_rounds_handlers_as_a_handler() {
    let ctx = singleton(&[]);
    let handled = Arc::new(AtomicU32::new(0));
    // Per hook run: the messages handled by then, and whether it ran as a handler.
    let ends = Arc::new(Mutex::new(Vec::<(u32, bool)>::new()));
    let h = handled.clone();
    ctx.register_handler(6, move |_, _| {
        assert!(IN_HANDLER.with(|c| c.get()), "a handler runs as one");
        h.fetch_add(1, Ordering::Relaxed);
    })
    .unwrap();
    let (h, e) = (handled.clone(), ends.clone());
    ctx.register_round_end(
        6,
        Arc::new(move |_: &Context| {
            let inside = IN_HANDLER.with(|c| c.get());
            e.lock().unwrap().push((h.load(Ordering::Relaxed), inside));
        }),
    )
    .unwrap();
    // A round without handlers runs no hook.
    ctx.progress();
    assert!(ends.lock().unwrap().is_empty());
    let me = ctx.startpoint(0).unwrap();
    for i in 0..5u32 {
        ctx.rsr(&me, 6, &i.to_le_bytes()).unwrap();
    }
    assert!(
        ctx.wait_timeout(Duration::from_secs(10), || handled.load(Ordering::Relaxed)
            == 5)
    );
    let seen = ends.lock().unwrap().clone();
    assert!(
        (1..=5).contains(&seen.len()),
        "one run per round with handlers: {seen:?}"
    );
    assert!(seen.iter().all(|&(_, inside)| inside), "{seen:?}");
    assert_eq!(
        seen.last().map(|s| s.0),
        Some(5),
        "after the round's last handler"
    );
    // Outside progress again, the thread is not in a handler.
    assert!(!IN_HANDLER.with(|c| c.get()));
    // Unregistering the handler removes its hook.
    ctx.unregister_handler(6).unwrap();
    ctx.register_handler(9, |_, _| {}).unwrap();
    ctx.rsr(&me, 9, b"x").unwrap();
    let runs = seen.len();
    for _ in 0..100 {
        ctx.progress();
    }
    assert_eq!(ends.lock().unwrap().len(), runs);
}

#[test]
fn long_tables_are_split_over_several_bootstrap_keys() {
    let mut pmi = Pmi::singleton();
    let hex: String = "ab".repeat(100_000);
    publish_table(&mut pmi, 3, &hex).unwrap();
    assert!(
        pmi.get("gw.desc.3.1").unwrap().is_some(),
        "split into parts"
    );
    assert_eq!(lookup_table(&mut pmi, 3).unwrap(), hex);
    publish_table(&mut pmi, 4, "0102").unwrap();
    assert_eq!(pmi.get("gw.desc.4").unwrap().unwrap(), "1:0102");
    assert_eq!(lookup_table(&mut pmi, 4).unwrap(), "0102");
    pmi.put("gw.desc.5", "garbage").unwrap();
    assert!(lookup_table(&mut pmi, 5).is_err());
    assert!(lookup_table(&mut pmi, 6).is_err());
}

#[test]
fn startpoints_carry_the_table_once() {
    let ctx = singleton(&[]);
    let ep = ctx.create_endpoint();
    // To ourselves the table is never attached (we know it).
    let packed = ctx.pack_startpoint(&ep, 0).unwrap();
    assert_eq!(packed.len(), 9);
    let (sp, used) = ctx.unpack_startpoint(&packed).unwrap();
    assert_eq!((sp, used), (ep, 9));
    for cut in 0..9 {
        assert!(ctx.unpack_startpoint(&packed[..cut]).is_err());
    }
    let mut bad = packed.clone();
    bad[8] = 7;
    assert!(ctx.unpack_startpoint(&bad).is_err());
}

#[test]
fn routes_are_checked_shared_and_bounded() {
    let ctx = singleton(&[("GW_METHODS", "self,tcp,udp")]);
    let spec = |m: &[&str], encrypt: Option<bool>, compress: Option<bool>| RouteSpec {
        methods: m.iter().map(|s| s.to_string()).collect(),
        encrypt,
        compress,
        ..RouteSpec::default()
    };
    assert_eq!(ctx.route(&RouteSpec::default()).unwrap(), RouteId::DEFAULT);
    let udp = ctx.route(&spec(&["udp"], None, None)).unwrap();
    assert_ne!(udp, RouteId::DEFAULT);
    assert_eq!(
        ctx.route(&spec(&["udp"], None, None)).unwrap(),
        udp,
        "shared"
    );
    assert_eq!(ctx.route_spec(udp), spec(&["udp"], None, None));
    let refused = |s: RouteSpec, why: &str| {
        let e = ctx.route(&s).unwrap_err().to_string();
        assert!(e.contains(why), "{s:?}: {e}");
    };
    refused(spec(&["carrier-pigeon"], None, None), "unknown method");
    refused(spec(&["shm"], None, None), "does not run in this process");
    refused(
        spec(&["encrypt+udp"], None, None),
        "offers no encrypt+udp stack",
    );
    refused(spec(&["udp+encrypt"], None, None), "is not a stack");
    refused(spec(&[], Some(true), None), "built no encrypt stack");
    refused(spec(&[], None, Some(true)), "built no compress stack");
    // Traffic keys map to routes; the default forgets them.
    assert_eq!(ctx.traffic_route(10), RouteId::DEFAULT);
    ctx.set_traffic_route(10, udp);
    assert_eq!(ctx.traffic_route(10), udp);
    assert_eq!(ctx.traffic_route(11), RouteId::DEFAULT);
    assert_eq!(ctx.traffic_route(NO_TRAFFIC_KEY), RouteId::DEFAULT);
    ctx.set_traffic_route(10, RouteId::DEFAULT);
    assert_eq!(ctx.traffic_route(10), RouteId::DEFAULT);
    // At most MAX_ROUTES distinct routes (the default and `udp` are two).
    let mut made = 2;
    let orders: [&[&str]; 4] = [&["udp"], &["tcp"], &["udp", "tcp"], &["tcp", "udp"]];
    let mut last = Ok(udp);
    'all: for m in orders {
        for e in [None, Some(false)] {
            for c in [None, Some(false)] {
                last = ctx.route(&spec(m, e, c));
                match &last {
                    Ok(_) => made = made.max(ctx.route(&spec(m, e, c)).unwrap().index() + 1),
                    Err(_) => break 'all,
                }
            }
        }
    }
    assert_eq!(made, MAX_ROUTES);
    let e = last.unwrap_err().to_string();
    assert!(e.contains("at most 16 different link choices"), "{e}");
}

#[test]
fn a_measured_route_has_a_sub_route_per_stack() {
    let ctx = singleton(&[("GW_METHODS", "self,tcp,udp")]);
    assert_eq!(ctx.job_select(), Select::Fixed);
    assert!(!ctx.inner.routes.is_measured(0));
    let spec = RouteSpec {
        select: Select::Measured,
        ..RouteSpec::default()
    };
    let m = ctx.route(&spec).unwrap();
    assert_ne!(m, RouteId::DEFAULT);
    assert!(ctx.inner.routes.is_measured(m.index()));
    let subs = ctx.inner.routes.subs_of(m.index());
    let bases: Vec<&str> = subs.iter().map(|s| s.0.as_str()).collect();
    assert_eq!(bases, ["tcp", "udp"]);
    for (base, sub) in &subs {
        let s = ctx.route_spec(RouteId(*sub));
        assert_eq!(s.prefer.as_deref(), Some(base.as_str()));
        assert_eq!(s.select, Select::Fixed);
        assert!(!ctx.inner.routes.is_measured(*sub as usize));
    }
    // Registered once: the same route, no more sub-routes.
    assert_eq!(ctx.route(&spec).unwrap(), m);
    assert_eq!(ctx.inner.routes.subs_of(m.index()), subs);
    // `gw_methods=udp` measured has one stack: one sub-route.
    let udp = ctx
        .route(&RouteSpec {
            methods: vec!["udp".into()],
            select: Select::Measured,
            ..RouteSpec::default()
        })
        .unwrap();
    assert_eq!(ctx.inner.routes.subs_of(udp.index()).len(), 1);
    // A fixed choice is a route of its own, not measured.
    let fixed = RouteSpec {
        select: Select::Fixed,
        ..RouteSpec::default()
    };
    let f = ctx.route(&fixed).unwrap();
    assert!(f != RouteId::DEFAULT && !ctx.inner.routes.is_measured(f.index()));
    // GW_SELECT=measured: the job's default route is measured.
    let job = singleton(&[("GW_METHODS", "self,tcp,udp"), ("GW_SELECT", "measured")]);
    assert_eq!(job.job_select(), Select::Measured);
    assert!(job.inner.routes.is_measured(0));
    assert_eq!(job.inner.routes.subs_of(0).len(), 2);
    // ... and a communicator may opt out.
    let out = job.route(&fixed).unwrap();
    assert!(!job.inner.routes.is_measured(out.index()));
    // Bad forced estimates are refused with the variable's name.
    let e = try_singleton(&[("GW_SELECT_ESTIMATES", "udp=fast")])
        .err()
        .expect("refused")
        .to_string();
    assert!(e.contains("GW_SELECT_ESTIMATES"), "{e}");
}
