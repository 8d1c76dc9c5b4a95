use super::*;
use proptest::prelude::*;

fn parse(text: &str) -> Machines {
    match Machines::parse(text) {
        Ok(m) => m,
        Err(e) => panic!("{text:?} should parse: {e}"),
    }
}

/// The error of `text`, which must fail on line `line` with a message that
/// contains every one of `needles`.
#[track_caller]
fn fails(text: &str, line: usize, needles: &[&str]) -> MachinesError {
    let e = match Machines::parse(text) {
        Ok(m) => panic!("{text:?} should fail, parsed as {m:?}"),
        Err(e) => e,
    };
    assert_eq!(e.line, line, "{text:?}: wrong line in {e}");
    for n in needles {
        assert!(e.message.contains(n), "{text:?}: {e} lacks {n:?}");
    }
    e
}

fn names(m: &Machines) -> Vec<&str> {
    m.hosts.iter().map(|h| h.name.as_str()).collect()
}

#[test]
fn hydra_lines_go_to_the_implicit_ssh_site() {
    let m = parse("a\nb:2\n  c:16  \n");
    assert_eq!(names(&m), ["a", "b", "c"]);
    assert_eq!(m.sites.len(), 1);
    let site = &m.sites[0];
    assert_eq!(site.name, IMPLICIT_SITE);
    assert_eq!(site.start, StartKind::Ssh);
    assert_eq!(site.line, 0);
    assert_eq!(
        m.hosts.iter().map(|h| h.slots).collect::<Vec<_>>(),
        [None, Some(2), Some(16)]
    );
    assert_eq!(
        m.hosts.iter().map(|h| h.line).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    assert!(m.hosts.iter().all(|h| h.site == 0));
    assert_eq!(m.hosts[0].effective_slots(), 1);
    assert_eq!(m.total_slots(), 19);
}

#[test]
fn hydra_user_word_is_a_per_host_login_name() {
    let m = parse("a:2 user=bob\nb\n");
    assert_eq!(m.hosts[0].user.as_deref(), Some("bob"));
    assert_eq!(m.user_of(0), Some("bob"));
    assert_eq!(m.user_of(1), None);
    let m = parse("[site x] user=alice\na user=bob\nb\n");
    assert_eq!(m.user_of(0), Some("bob"), "the host's user= wins");
    assert_eq!(m.user_of(1), Some("alice"), "else the site's");
    assert_eq!(m.user_of(9), None);
}

#[test]
fn hydra_binding_word_is_refused_clearly() {
    fails(
        "a:2 binding=user:0,1\n",
        1,
        &["binding=", "--bind-to", "\"a\""],
    );
}

#[test]
fn open_mpi_lines_with_slots_and_max_slots() {
    let m = parse("a slots=4\nb slots=2 max_slots=8\nc max_slots=3\nd slots = 5\n");
    let h = &m.hosts;
    assert_eq!((h[0].slots, h[0].max_slots), (Some(4), None));
    assert_eq!((h[1].slots, h[1].max_slots), (Some(2), Some(8)));
    // Open MPI: max_slots alone sets the slots.
    assert_eq!((h[2].slots, h[2].max_slots), (Some(3), Some(3)));
    // Open MPI's lexer allows spaces around '='.
    assert_eq!(h[3].slots, Some(5));
}

#[test]
fn open_mpi_max_slots_below_slots_is_an_error() {
    fails(
        "a\nb slots=4 max_slots=2\n",
        2,
        &["max_slots=2", "4 slots", "\"b\""],
    );
}

#[test]
fn comments_blank_lines_and_line_endings() {
    let text = "# a comment\r\n\r\n   \t\na:2 # two slots\r\nb\t# tab before\n#c\n  # indented\nd slots=3#tight\n";
    let m = parse(text);
    assert_eq!(names(&m), ["a", "b", "d"]);
    assert_eq!(m.hosts[0].slots, Some(2));
    assert_eq!(m.hosts[2].slots, Some(3));
    assert_eq!(m.hosts[2].line, 8);
}

#[test]
fn the_testbeds_machines_file_parses() {
    // As crates/testbed/src/ssh.rs writes it.
    let text =
        "# gw-testbed instance x1: 2 site(s) x 2 host(s); one-way WAN delay 20 ms between sites\n\
                # reach any host with: ssh -F /x/ssh/config HOST\n\
                \n\
                [site s0] start=ssh\n\
                s0h0\n\
                s0h1\n\
                \n\
                # behind a firewall: only s1h0 is reachable from outside the site\n\
                [site s1] start=ssh gateway=s1h0\n\
                s1h0\n\
                s1h1\n";
    let m = parse(text);
    assert_eq!(
        m.sites.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        ["s0", "s1"]
    );
    assert_eq!(m.sites[1].gateway.as_deref(), Some("s1h0"));
    assert_eq!(m.sites[0].gateway, None);
    assert_eq!((m.sites[0].line, m.sites[1].line), (4, 9));
    let s1: Vec<(usize, &str)> = m.hosts_of(1).map(|(i, h)| (i, h.name.as_str())).collect();
    assert_eq!(s1, [(2, "s1h0"), (3, "s1h1")]);
    assert_eq!(m.hosts_by_site(), [vec![0, 1], vec![2, 3]]);
    assert_eq!(m.site_index("s1"), Some(1));
    assert_eq!(m.site_index("s2"), None);
    assert_eq!(m.host_index("S1H1"), Some(3));
}

#[test]
fn every_site_key() {
    let text = "[site ncsa] start=slurm user=alice port=2222 \
                ssh_options=\"-o ConnectTimeout=5 -i '/keys/my key' -oBatchMode=yes -vv -p22\" \
                gateway=gw.ncsa prefix=/opt/gridwire-1.0 encrypt=yes compress=zstd\n\
                gw.ncsa\n\
                cn001 slots=16\n\
                [site anl] start=local\n\
                anl1\n\
                [site x.y_z-1]\n\
                h\n";
    let m = parse(text);
    let s = &m.sites[0];
    assert_eq!(s.name, "ncsa");
    assert_eq!(s.start, StartKind::Slurm);
    assert_eq!(s.user.as_deref(), Some("alice"));
    assert_eq!(s.port, Some(2222));
    assert_eq!(
        s.ssh_options,
        [
            "-o",
            "ConnectTimeout=5",
            "-i",
            "/keys/my key",
            "-oBatchMode=yes",
            "-vv",
            "-p22"
        ]
    );
    assert_eq!(s.gateway.as_deref(), Some("gw.ncsa"));
    assert_eq!(s.prefix.as_deref(), Some("/opt/gridwire-1.0"));
    assert_eq!(s.encrypt.as_deref(), Some("yes"));
    assert_eq!(s.compress.as_deref(), Some("zstd"));
    assert_eq!(m.sites[1].start, StartKind::Local);
    assert_eq!(m.sites[2].start, StartKind::Ssh, "start defaults to ssh");
    assert_eq!(m.sites[2].name, "x.y_z-1");
    assert_eq!(StartKind::Slurm.to_string(), "slurm");
}

#[test]
fn quoted_values_keep_hash_signs_and_escapes() {
    let m = parse(
        "[site a] ssh_options=\"-o 'ProxyCommand=nc %h #22' -o \\\"X=y\\\"\" # real comment\nh\n",
    );
    assert_eq!(
        m.sites[0].ssh_options,
        ["-o", "ProxyCommand=nc %h #22", "-o", "\"X=y\""]
    );
}

#[test]
fn ssh_options_that_are_not_options_are_refused() {
    // A bare word would become ssh's destination host.
    fails(
        "[site a] ssh_options=\"evil.example.org\"\nh\n",
        1,
        &["evil.example.org", "not an ssh option"],
    );
    fails(
        "[site a] ssh_options=\"-o\"\nh\n",
        1,
        &["needs an argument"],
    );
    // -f backgrounds ssh, -N runs no command: the proxy would never start.
    fails(
        "[site a] ssh_options=\"-f\"\nh\n",
        1,
        &["-f", "not accepted"],
    );
    fails("[site a] ssh_options=\"-vN\"\nh\n", 1, &["-N"]);
    // The proxy's stdin carries the job secret: no -n, no tty.
    fails("[site a] ssh_options=\"-n\"\nh\n", 1, &["-n"]);
    fails("[site a] ssh_options=\"-qt\"\nh\n", 1, &["-t"]);
    fails("[site a] ssh_options=\"-\"\nh\n", 1, &["not an ssh option"]);
    fails("[site a] ssh_options=\"-o 'x\"\nh\n", 1, &["unterminated"]);
    let many = vec!["-v"; 65].join(" ");
    fails(
        &format!("[site a] ssh_options=\"{many}\"\nh\n"),
        1,
        &["more than 64"],
    );
    // With their arguments, -i and -J are fine; -Cp 22 ends on an option
    // that takes the next word.
    let m = parse("[site a] ssh_options=\"-Cp 22 -J gw\"\nh\n");
    assert_eq!(m.sites[0].ssh_options, ["-Cp", "22", "-J", "gw"]);
}

#[test]
fn repeated_hosts_add_up_their_slots_as_hydra_does() {
    let m = parse("a:2\nb\na:1\nA\n");
    assert_eq!(names(&m), ["a", "b"], "one host, at its first line's place");
    assert_eq!(m.hosts[0].slots, Some(4), "2 + 1 + 1 (no count is 1)");
    assert_eq!(m.hosts[0].line, 1);
    let m = parse("a\na\n");
    assert_eq!(m.hosts[0].slots, Some(2));
    // Caps add up while every line has one; a line without one lifts it.
    let m = parse("a slots=1 max_slots=2\na max_slots=3\n");
    assert_eq!((m.hosts[0].slots, m.hosts[0].max_slots), (Some(4), Some(5)));
    let m = parse("a slots=1 max_slots=2\na:1\n");
    assert_eq!((m.hosts[0].slots, m.hosts[0].max_slots), (Some(2), None));
    // A user= on one of the lines is the host's; two different ones clash.
    let m = parse("a\na user=u\n");
    assert_eq!(m.hosts[0].user.as_deref(), Some("u"));
    fails(
        "a user=u\nb\na user=v\n",
        3,
        &["user=\"v\"", "user=\"u\"", "line 1"],
    );
    // The sum is bounded like a single count.
    fails("a:1000000\na:1\n", 2, &["more than 1000000 slots"]);
}

#[test]
fn the_same_host_in_two_sites_is_an_error() {
    fails(
        "[site x]\na\n[site y]\nb\nA:2\n",
        5,
        &["\"A\"", "already in site \"x\"", "line 2"],
    );
    fails("a\n[site y]\na\n", 3, &["site \"default\""]);
}

#[test]
fn bad_host_lines_name_the_line_and_the_text() {
    fails(
        "ok\nnode1:x\n",
        2,
        &["bad slot count", "\"node1:x\"", "not a number"],
    );
    fails("n:0\n", 1, &["0 slots"]);
    fails("n:-1\n", 1, &["not a number"]);
    fails("n:+1\n", 1, &["not a number"]);
    fails("n:1000001\n", 1, &["more than 1000000"]);
    fails("n:99999999999999999999999\n", 1, &["more than 1000000"]);
    fails("n:\n", 1, &["not a number"]);
    fails(":2\n", 1, &["expected host or host:N"]);
    fails("n:2 slots=3\n", 1, &["slots given twice"]);
    fails("n slots=2 slots=3\n", 1, &["slots= given twice"]);
    fails("n slots=0\n", 1, &["slots=\"0\"", "0 slots"]);
    fails("n slots=many\n", 1, &["\"many\"", "not a number"]);
    fails("n cores=2\n", 1, &["unknown key \"cores\""]);
    fails("n 4\n", 1, &["expected key=value", "\"4\""]);
    fails("n slots=\n", 1, &["empty value for slots"]);
    fails("n slots=\"4\n", 1, &["unterminated"]);
    fails("n slots=4\"x\"\n", 1, &["quote the whole value"]);
    fails("n user=\"a\"b\n", 1, &["followed by a space"]);
    fails("n user=-oProxyCommand=x\n", 1, &["bad user name"]);
    fails("slots=4\n", 1, &["expected a host name first"]);
    fails("n user=\"a\\x\"\n", 1, &["escapes"]);
    fails("n user=\"a\u{7}\"\n", 1, &["control character"]);
}

#[test]
fn host_names_are_rfc_1123_names_or_ipv4_addresses() {
    let m = parse("n-1.example.org\n10.0.0.1:2\nA9\n0.0.0.0\n1a.b\n");
    assert_eq!(
        names(&m),
        ["n-1.example.org", "10.0.0.1", "A9", "0.0.0.0", "1a.b"]
    );
    for (bad, why) in [
        ("-oProxyCommand", "start or end with '-'"),
        ("a-", "start or end with '-'"),
        ("a..b", "empty label"),
        (".a", "empty label"),
        ("a.", "empty label"),
        ("a_b", "letters, digits"),
        ("h\u{e9}te", "letters, digits"),
        ("a/b", "letters, digits"),
        ("256.1.1.1", "IPv4"),
        ("01.2.3.4", "IPv4"),
        ("1.2.3", "IPv4"),
        ("1.2.3.4.5", "IPv4"),
        ("fe80::1", "IPv6"),
        ("[::1]:2", "IPv6"),
    ] {
        let e = fails(&format!("ok\n{bad}\n"), 2, &[why]);
        // The quoted name in the message is escaped (no raw control bytes).
        assert!(e.message.is_ascii() || bad.contains('\u{e9}'), "{e}");
    }
    let long_label = "a".repeat(64);
    fails(&format!("{long_label}\n"), 1, &["longer than 63"]);
    let long_name = vec!["abcdefghi"; 26].join(".");
    fails(&format!("{long_name}\n"), 1, &["longer than 253"]);
}

#[test]
fn bad_headers_name_the_line() {
    fails("[site a\nh\n", 1, &["missing ']'"]);
    fails(
        "[sites a]\nh\n",
        1,
        &["expected a section header [site NAME]", "[sites a]"],
    );
    fails("[site]\nh\n", 1, &["[site NAME]"]);
    fails("[site a b]\nh\n", 1, &["[site NAME]"]);
    fails("[site a/b]\nh\n", 1, &["bad site name \"a/b\""]);
    fails(
        &format!("[site {}]\nh\n", "s".repeat(65)),
        1,
        &["bad site name"],
    );
    fails(
        "[site a]\nh\n[site a]\ng\n",
        3,
        &["already defined on line 1"],
    );
    fails("h\n[site default]\ng\n", 2, &["implicit site"]);
    fails(
        "[site a] start=pbs\nh\n",
        1,
        &["start=\"pbs\"", "ssh, slurm or local"],
    );
    fails(
        "[site a] start=ssh start=ssh\nh\n",
        1,
        &["start= given twice"],
    );
    fails("[site a] colour=blue\nh\n", 1, &["unknown key \"colour\""]);
    fails("[site a] port=0\nh\n", 1, &["port=\"0\""]);
    fails("[site a] port=65536\nh\n", 1, &["port=\"65536\""]);
    fails("[site a] port=+22\nh\n", 1, &["port=\"+22\""]);
    fails("[site a] user=-x\nh\n", 1, &["bad user name \"-x\""]);
    fails("[site a] user=a;b\nh\n", 1, &["bad user name"]);
    fails(
        "[site a] prefix=opt/gw\nh\n",
        1,
        &["prefix=\"opt/gw\"", "absolute"],
    );
    fails("[site a] prefix=\"/opt/my gw\"\nh\n", 1, &["prefix="]);
    fails("[site a] prefix=/opt/$(reboot)\nh\n", 1, &["prefix="]);
    fails(
        "[site a] encrypt=maybe\nh\n",
        1,
        &["encrypt=\"maybe\"", "yes or no"],
    );
    fails(
        "[site a] compress=gzip\nh\n",
        1,
        &["compress=\"gzip\"", "zstd"],
    );
    fails("[site a] gateway=-evil\nh\n", 1, &["gateway=\"-evil\""]);
    fails("[site a] start\nh\n", 1, &["expected key=value"]);
}

#[test]
fn gateway_must_be_a_host_of_its_site() {
    fails(
        "[site a] gateway=gw\nh1\nh2\n",
        1,
        &["gateway=\"gw\" is not a host of the site", "h1, h2"],
    );
    // A host of another site does not count either.
    fails(
        "[site a]\ngw\n[site b] gateway=gw\nh\n",
        3,
        &["site \"b\"", "gateway=\"gw\""],
    );
    let many: String = (0..8).map(|i| format!("h{i}\n")).collect();
    fails(
        &format!("[site a] gateway=gw\n{many}"),
        1,
        &["h0, h1, h2, h3, h4, …"],
    );
    // Case does not matter.
    let m = parse("[site a] gateway=GW\ngw\n");
    assert_eq!(m.sites[0].gateway.as_deref(), Some("GW"));
}

#[test]
fn empty_sites_and_empty_files_are_errors() {
    fails("[site a]\n[site b]\nh\n", 1, &["site \"a\" has no hosts"]);
    fails("h\n[site b]\n# nothing\n", 2, &["site \"b\" has no hosts"]);
    let e = fails("# only comments\n\n", 0, &["names no hosts"]);
    assert_eq!(e.to_string(), "the machines file names no hosts");
    fails("", 0, &["names no hosts"]);
}

#[test]
fn display_names_the_line() {
    let e = Machines::parse("a\nb:x\n").unwrap_err();
    assert!(e.to_string().starts_with("line 2: bad slot count"), "{e}");
}

#[test]
fn hostile_sizes_are_bounded() {
    let long = format!("a # {}\n", "x".repeat(MAX_LINE_BYTES));
    fails(&long, 1, &["longer than 4096 bytes"]);
    // Exactly at the limit is fine.
    let edge = format!("a #{}\n", "x".repeat(MAX_LINE_BYTES - 3));
    assert_eq!(edge.len(), MAX_LINE_BYTES + 1);
    parse(&edge);

    let mut text = String::new();
    for i in 0..=MAX_HOSTS {
        text.push_str(&format!("h{i}\n"));
    }
    fails(&text, MAX_HOSTS + 1, &["more than 100000 hosts"]);

    let mut text = String::new();
    for i in 0..=MAX_SITES {
        text.push_str(&format!("[site s{i}]\nh{i}\n"));
    }
    fails(&text, 2 * MAX_SITES + 1, &["more than 10000 sites"]);

    // Many sites with many hosts stay fast (one pass in finish, not sites × hosts).
    let mut text = String::new();
    for i in 0..MAX_SITES {
        text.push_str(&format!("[site s{i}]\n"));
        for j in 0..10 {
            text.push_str(&format!("h{i}x{j}\n"));
        }
    }
    let started = std::time::Instant::now();
    let m = parse(&text);
    assert_eq!(m.hosts.len(), MAX_SITES * 10);
    assert!(started.elapsed().as_secs() < 10, "{:?}", started.elapsed());
}

#[test]
fn error_messages_escape_what_they_quote() {
    let e = fails("a\u{1b}[31m\n", 1, &["\\u{1b}"]);
    assert!(!e.message.contains('\u{1b}'), "{e}");
    let e = fails(&format!("{}:x\n", "a".repeat(200)), 1, &["…"]);
    assert!(e.message.len() < 300, "{e}");
}

#[test]
fn parse_bytes_names_the_line_that_is_not_utf8() {
    let e = Machines::parse_bytes(b"a\nb\xff\nc\n").unwrap_err();
    assert_eq!(e.line, 2);
    assert!(e.message.contains("UTF-8"), "{e}");
    let m = Machines::parse_bytes(b"a:2\n").unwrap();
    assert_eq!(m.hosts[0].slots, Some(2));
}

#[test]
fn load_reads_bounded_files_and_names_the_path() {
    let dir = std::env::temp_dir().join(format!("gw-machines-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("good");
    std::fs::write(&good, "a:2\nb\n").unwrap();
    let m = Machines::load(&good).unwrap();
    assert_eq!(names(&m), ["a", "b"]);

    let bad = dir.join("bad");
    std::fs::write(&bad, "a\nb:zero\n").unwrap();
    let e = Machines::load(&bad).unwrap_err();
    assert!(
        e.contains(&bad.display().to_string()) && e.contains("line 2"),
        "{e}"
    );

    let missing = dir.join("missing");
    let e = Machines::load(&missing).unwrap_err();
    assert!(e.contains("missing") && e.contains("cannot open"), "{e}");

    // A sparse file one byte over the limit: refused without parsing.
    let huge = dir.join("huge");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(MAX_FILE_BYTES + 1)
        .unwrap();
    let e = Machines::load(&huge).unwrap_err();
    assert!(e.contains("larger than"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn this_machine_names() {
    let me = Some("node1.example.org");
    for yes in [
        "localhost",
        "LOCALHOST",
        "localhost.",
        "localhost.localdomain",
        "foo.localhost",
        "127.0.0.1",
        "127.1.2.3",
        "::1",
        "[::1]",
        "node1",
        "NODE1.example.org",
        "node1.example.org.",
    ] {
        assert!(is_this_machine_named(yes, me), "{yes}");
    }
    for no in [
        "node2",
        "node1.other.org",
        "128.0.0.1",
        "10.0.0.1",
        "localhost2",
        "node",
        "",
    ] {
        assert!(!is_this_machine_named(no, me), "{no}");
    }
    assert!(is_this_machine_named("node1.example.org", Some("node1")));
    assert!(!is_this_machine_named("node1", None));
    assert!(!is_this_machine_named("node1", Some("")));
    assert!(is_this_machine("localhost"));
    // The real host name of this UTS namespace.
    let real = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    assert!(is_this_machine(real.trim()), "{real:?}");
    assert!(!is_this_machine(&format!("{}-not-this-one", real.trim())));
}

// ---- properties ----

/// Fragments that make lines that are often almost right.
fn fragment() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "a",
        "b",
        "B",
        "h1",
        "s0h0",
        ":",
        "2",
        "0",
        "1000000",
        "1000001",
        " ",
        "\t",
        "slots",
        "=",
        "max_slots",
        "user",
        "alice",
        "[site ",
        "]",
        "[",
        "x",
        "start",
        "ssh",
        "slurm",
        "gateway",
        "prefix",
        "/opt",
        "\"",
        "'",
        "\\",
        "#",
        "ssh_options",
        "-o",
        "-f",
        "port",
        "22",
        ".",
        "-",
        "_",
        "é",
        "\u{0}",
        "\r",
        "::1",
        "127.0.0.1",
        "encrypt",
        "yes",
        "compress",
        "lz4",
    ])
}

fn almost_machines_file() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::collection::vec(fragment(), 0..10), 0..20).prop_map(|lines| {
        lines
            .into_iter()
            .map(|l| l.concat())
            .collect::<Vec<_>>()
            .join("\n")
    })
}

/// What every successful parse guarantees.
fn check_invariants(m: &Machines) {
    assert!(!m.hosts.is_empty());
    let by_site = m.hosts_by_site();
    assert_eq!(by_site.len(), m.sites.len());
    for (s, site) in m.sites.iter().enumerate() {
        assert!(!by_site[s].is_empty(), "site {} has no hosts", site.name);
        if let Some(gw) = &site.gateway {
            assert!(by_site[s]
                .iter()
                .any(|&h| m.hosts[h].name.eq_ignore_ascii_case(gw)));
        }
    }
    let mut seen = std::collections::HashSet::new();
    for h in &m.hosts {
        assert!(h.site < m.sites.len());
        assert!(seen.insert(h.name.to_ascii_lowercase()), "{} twice", h.name);
        assert!((1..=MAX_SLOTS).contains(&h.effective_slots()));
        if let Some(max) = h.max_slots {
            assert!(max >= h.effective_slots());
        }
        assert!(host_name_problem(&h.name).is_none(), "{}", h.name);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,300}") {
        if let Ok(m) = Machines::parse(&text) {
            check_invariants(&m);
        }
    }

    #[test]
    fn almost_right_files_parse_or_fail_on_a_real_line(text in almost_machines_file()) {
        let lines = text.lines().count();
        match Machines::parse(&text) {
            Ok(m) => check_invariants(&m),
            Err(e) => prop_assert!(e.line <= lines, "{e} but only {lines} lines"),
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        if let Ok(m) = Machines::parse_bytes(&bytes) {
            check_invariants(&m);
        }
    }
}

/// A machines file described as data: sites of hosts, each host written in
/// Hydra's or Open MPI's form.
/// One host: its slot count, and whether it is written as `slots=N`.
type HostForm = (Option<usize>, bool);

#[derive(Debug, Clone)]
struct Spec {
    implicit: Vec<HostForm>,
    sites: Vec<(StartKind, Vec<HostForm>)>,
}

fn hosts_spec() -> impl Strategy<Value = Vec<HostForm>> {
    prop::collection::vec((prop::option::of(1usize..=MAX_SLOTS), any::<bool>()), 1..6)
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        prop::collection::vec((prop::option::of(1usize..=MAX_SLOTS), any::<bool>()), 0..4),
        prop::collection::vec(
            (
                prop::sample::select(vec![StartKind::Ssh, StartKind::Slurm, StartKind::Local]),
                hosts_spec(),
            ),
            0..4,
        ),
    )
        .prop_filter("at least one host", |(i, s)| !i.is_empty() || !s.is_empty())
        .prop_map(|(implicit, sites)| Spec { implicit, sites })
}

fn render(spec: &Spec) -> String {
    let host = |name: String, (slots, open_mpi): HostForm| match (slots, open_mpi) {
        (None, _) => format!("{name}  # no count\n"),
        (Some(n), false) => format!("{name}:{n}\n"),
        (Some(n), true) => format!("\t{name} slots={n}\n"),
    };
    let mut text = String::from("# generated\n");
    for (i, &h) in spec.implicit.iter().enumerate() {
        text.push_str(&host(format!("d{i}"), h));
    }
    for (s, (start, hosts)) in spec.sites.iter().enumerate() {
        text.push_str(&format!("\n[site s{s}] start={start} gateway=s{s}h0\n"));
        for (i, &h) in hosts.iter().enumerate() {
            text.push_str(&host(format!("s{s}h{i}"), h));
        }
    }
    text
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    #[test]
    fn generated_files_parse_back_to_what_was_written(spec in spec()) {
        let text = render(&spec);
        let m = Machines::parse(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        check_invariants(&m);
        let mut expected: Vec<(String, usize, Option<usize>)> = Vec::new();
        let offset = usize::from(!spec.implicit.is_empty());
        for (i, &(slots, _)) in spec.implicit.iter().enumerate() {
            expected.push((format!("d{i}"), 0, slots));
        }
        for (s, (_, hosts)) in spec.sites.iter().enumerate() {
            for (i, &(slots, _)) in hosts.iter().enumerate() {
                expected.push((format!("s{s}h{i}"), s + offset, slots));
            }
        }
        let got: Vec<(String, usize, Option<usize>)> =
            m.hosts.iter().map(|h| (h.name.clone(), h.site, h.slots)).collect();
        prop_assert_eq!(got, expected);
        prop_assert_eq!(m.sites.len(), spec.sites.len() + offset);
        for (s, (start, _)) in spec.sites.iter().enumerate() {
            let site = &m.sites[s + offset];
            prop_assert_eq!(site.start, *start);
            prop_assert_eq!(site.name.clone(), format!("s{s}"));
            prop_assert_eq!(site.gateway.clone(), Some(format!("s{s}h0")));
        }
    }

    #[test]
    fn one_bad_line_is_the_line_reported(spec in spec(), at in any::<prop::sample::Index>(), bad in prop::sample::select(vec![
        "x:0", "x:y", "x slots=", "[site]", "-x", "x foo=1", "[site s0] start=rsh", "x:2 slots=2",
    ])) {
        let text = render(&spec);
        let mut lines: Vec<&str> = text.lines().collect();
        let pos = at.index(lines.len() + 1);
        lines.insert(pos, bad);
        let text = lines.join("\n");
        let e = Machines::parse(&text).expect_err("a bad line was inserted");
        prop_assert_eq!(e.line, pos + 1, "{} in\n{}", e, text);
    }
}

#[test]
fn the_messages_docs_machines_md_shows_are_the_real_ones() {
    let doc = include_str!("../../../../docs/machines.md");
    for (text, shown) in [
        ("a\nnode1:x\n", "line 2: bad slot count in \"node1:x\": \"x\" is not a number"),
        (
            "[site x]\na\n[site y]\nb\na\n",
            "line 5: host \"a\" is already in site \"x\" (line 2); a host belongs to one site",
        ),
        (
            "[site s0]\nh\n\n\n\n\n\n\n[site s1] gateway=gw\ns1h0\ns1h1\n",
            "line 9: site \"s1\": gateway=\"gw\" is not a host of the site (its hosts: s1h0, s1h1)",
        ),
        (
            "[site a] ssh_options=\"evil.example.org\"\nh\n",
            "line 1: site \"a\": ssh_options: \"evil.example.org\" is not an ssh option (ssh would take it for the host)",
        ),
    ] {
        let e = Machines::parse(text).expect_err(text);
        assert_eq!(e.to_string(), shown);
        assert!(
            doc.contains(&format!("machines file hosts: {shown}\n")),
            "docs/machines.md lacks {shown:?}"
        );
    }
}

#[test]
fn host_lines_are_bounded_too() {
    // 100 hosts on 10 001 lines each: not too many hosts or slots, but too
    // many lines.
    let mut text = String::with_capacity(8 * (MAX_HOST_LINES + 200));
    for i in 0..=MAX_HOST_LINES {
        text.push_str(&format!("h{}\n", i % 100));
    }
    fails(&text, MAX_HOST_LINES + 1, &["more than 1000000 host lines"]);
}
