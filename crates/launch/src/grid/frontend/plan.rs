//! Planning a grid job at the front end: the proxy tree (hosts, sites,
//! leaders), what is staged, the ranks' environment, the job's id, secret
//! and capacity.

use super::*;

fn job_id() -> Result<String, String> {
    let mut b = [0u8; 4];
    getrandom::getrandom(&mut b).map_err(|e| e.to_string())?;
    Ok(format!(
        "{}x{}",
        std::process::id(),
        crate::grid::bootstrap::hex(&b)
    ))
}

fn secret() -> Result<String, String> {
    let mut b = [0u8; 32];
    getrandom::getrandom(&mut b).map_err(|e| e.to_string())?;
    Ok(crate::grid::bootstrap::hex(&b))
}

/// Variables not passed from the front end's environment to the ranks:
/// the ones that describe the front end's own session or host (Hydra
/// passes everything else, and so do we).
const NOT_PROPAGATED: &[&str] = &[
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "PWD",
    "OLDPWD",
    "HOSTNAME",
    "TMPDIR",
    "DISPLAY",
    "TERM",
    "SSH_CLIENT",
    "SSH_CONNECTION",
    "SSH_TTY",
    "SSH_AUTH_SOCK",
    "_",
    "SHLVL",
    "MAIL",
    "XDG_RUNTIME_DIR",
    "XDG_SESSION_ID",
    "GW_JOB_SECRET",
    "GW_JOB_ID",
    "GW_HOST_ID",
];

fn propagated_env(extra: &[(String, String)]) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| {
            !NOT_PROPAGATED.contains(&k.as_str())
                && !k.starts_with("PMI_")
                && !k.starts_with("PMIX_")
                && !k.starts_with("SLURM_")
                && !k.starts_with("GW_TESTBED")
        })
        .collect();
    env.extend(extra.iter().cloned());
    env
}

/// The plan, the job's secret, the proxy image, the staged files' sources,
/// and the warm-site marker this run decides (see `warm`).
type Planned = (
    Plan,
    String,
    ProxyImage,
    HashMap<String, PathBuf>,
    Option<String>,
);

pub(super) fn plan_job(spec: &GridSpec) -> Result<Planned, String> {
    let m = &spec.machines;
    let map = map_ranks(m, spec.n, spec.map_by, spec.oversubscribe)?;
    let used = map.hosts_used();
    // Plan hosts: the used ones in file order, plus each site's gateway
    // (the leader must be reachable even when it runs no rank).
    let mut plan_hosts: Vec<usize> = Vec::new();
    for (i, h) in m.hosts.iter().enumerate() {
        let gateway = m.sites[h.site].gateway.as_deref() == Some(h.name.as_str())
            && used.iter().any(|&u| m.hosts[u].site == h.site);
        if used.contains(&i) || gateway {
            plan_hosts.push(i);
        }
    }
    let image = {
        let path =
            std::env::current_exe().map_err(|e| format!("cannot find gwrun's own binary: {e}"))?;
        let (hash, size) = crate::grid::bootstrap::hash_file(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        ProxyImage { path, hash, size }
    };
    // Staging: the program as found here, its gridwire libraries, and
    // --stage-files; sent only to hosts that lack the program (or all,
    // with --stage).
    let cwd = std::env::current_dir()
        .ok()
        .map(|d| d.display().to_string());
    let wdir = spec.wdir.clone().or(cwd);
    let mut stage = Vec::new();
    let mut sources = HashMap::new();
    if let Some(prog) = find_program(&spec.program, wdir.as_deref()) {
        let files = crate::stage::collect(&prog, &spec.stage_files)?;
        for f in files {
            sources.insert(f.hash.clone(), f.source.clone());
            stage.push(StageEntry {
                name: f.name,
                hash: f.hash,
                size: f.size,
                mode: f.mode,
            });
        }
    } else if spec.force_stage {
        return Err(format!(
            "--stage: cannot find '{}' here to stage it",
            spec.program
        ));
    }
    // Hosts of a big warm site the front end starts itself, beside the
    // leader (see `warm`).
    let staged: Vec<&str> = stage.iter().map(|e| e.hash.as_str()).collect();
    let (direct, warm_key) = direct_hosts(
        spec,
        &plan_hosts,
        &image.hash,
        &staged,
        super::warm::is_warm,
    );
    let mut sites: Vec<PlanSite> = Vec::new();
    let mut site_of: HashMap<(usize, usize), usize> = HashMap::new();
    let mut hosts: Vec<PlanHost> = Vec::new();
    for &i in &plan_hosts {
        let h = &m.hosts[i];
        let site = &m.sites[h.site];
        // Hosts outside any section that name this machine start locally
        // (as Hydra does); everything else as its site says.
        let local_default = site.line == 0 && is_this_machine(&h.name);
        // Flat: every host its own tree (one connection per host from the
        // front end), for comparison with the site tree; a direct host of a
        // warm site likewise.
        let key = (
            h.site,
            if spec.flat || direct.contains(&i) {
                i
            } else {
                usize::MAX
            },
        );
        let s = *site_of.entry(key).or_insert_with(|| {
            let (method, reach) = match (local_default, site.start) {
                (true, _) | (_, StartKind::Local) => ("local", Vec::new()),
                (_, StartKind::Slurm) => ("slurm", crate::grid::start::slurm::site_argv()),
                (_, StartKind::Ssh) => (
                    "ssh",
                    site_argv(
                        m.user_of(i).or(site.user.as_deref()),
                        site.port,
                        &site.ssh_options,
                    ),
                ),
            };
            sites.push(PlanSite {
                name: site.name.clone(),
                leader: hosts.len(),
                method: method.into(),
                reach,
                prefix: site.prefix.clone(),
                env: Vec::new(),
                relay: false,
            });
            sites.len() - 1
        });
        if site.gateway.as_deref() == Some(h.name.as_str()) && !spec.flat {
            sites[s].leader = hosts.len();
        }
        hosts.push(PlanHost {
            name: h.name.clone(),
            site: s,
            ranks: map.ranks_on(i),
        });
    }
    // The program runs under its staged name where it is staged; where it
    // exists, as given.
    let mut env = propagated_env(&spec.env);
    crate::grid::transforms::apply(m, &mut sites, &env);
    crate::grid::relay::apply(m, &mut sites, &mut env);
    let plan = Plan {
        job_id: job_id()?,
        n: spec.n,
        program: spec.program.clone(),
        args: spec.args.clone(),
        wdir,
        env,
        kvsname: String::new(),
        process_mapping: process_mapping(&hosts),
        heartbeat_ms: spec.heartbeat.as_millis().min(u64::MAX as u128) as u64,
        sites,
        hosts,
        stage,
        force_stage: spec.force_stage,
        proxy_hash: image.hash.clone(),
        proxy_size: image.size,
        iface: spec.iface.clone(),
        // A terminal is not passed on (as for single-host jobs): a rank
        // reading it would compete with the shell.
        // SAFETY: isatty and fcntl only inspect descriptor 0.
        stdin: unsafe { libc::isatty(0) == 0 && libc::fcntl(0, libc::F_GETFD) >= 0 },
        capacity: crate::server::job_capacity(spec.n)?,
    };
    let mut plan = plan;
    plan.kvsname = format!("kvs_{}", plan.job_id);
    plan.check()
        .map_err(|e| format!("internal: bad plan: {e}"))?;
    Ok((plan, secret()?, image, sources, warm_key))
}

/// A site's hosts after its leader that the front end starts itself when
/// the job lies in one big ssh site that was warm on its last run (see
/// `warm`): `GW_LAUNCH_DIRECT` of them (by default a quarter of the
/// site's hosts, at most 8, in sites of 8 hosts or more; `0` never), only
/// when the leader keeps at least two hosts below it. Also returns the site's
/// warm-marker key, for the front end to record this run's outcome, when
/// the site is one the rule could apply to.
fn direct_hosts(
    spec: &GridSpec,
    plan_hosts: &[usize],
    proxy_hash: &str,
    staged: &[&str],
    is_warm: impl Fn(&str) -> bool,
) -> (Vec<usize>, Option<String>) {
    let m = &spec.machines;
    let Some(&first) = plan_hosts.first() else {
        return (Vec::new(), None);
    };
    let site_ix = m.hosts[first].site;
    let site = &m.sites[site_ix];
    let one_site = plan_hosts.iter().all(|&i| m.hosts[i].site == site_ix);
    // A quarter of the site starts beside the leader by default: measured
    // on 16 and 32 hosts (docs/benchmarks.md), 4 and 8 fill the time of the
    // leader's wide-area login on 2 cores; at most 8 keeps the front end's
    // connections O(sites).
    let k = spec.direct.unwrap_or(if plan_hosts.len() >= 8 {
        (plan_hosts.len() / 4).min(8)
    } else {
        0
    });
    if spec.flat
        || k == 0
        || spec.force_stage
        || !one_site
        || site.start != StartKind::Ssh
        || site.gateway.is_some()
        || (site.line == 0 && is_this_machine(&m.hosts[first].name))
        || plan_hosts.len() < k + 3
    {
        return (Vec::new(), None);
    }
    let names: Vec<&str> = plan_hosts
        .iter()
        .map(|&i| m.hosts[i].name.as_str())
        .collect();
    let key = super::warm::key(&site.name, &names, proxy_hash, staged);
    let direct = if is_warm(&key) {
        plan_hosts[1..=k].to_vec()
    } else {
        Vec::new()
    };
    if !direct.is_empty() && std::env::var("GW_VERBOSE").is_ok_and(|v| v != "0" && !v.is_empty()) {
        let names: Vec<&str> = direct.iter().map(|&i| m.hosts[i].name.as_str()).collect();
        say(&format!(
            "site {} is warm: starting {} beside its leader {}",
            site.name,
            names.join(", "),
            m.hosts[first].name
        ));
    }
    (direct, Some(key))
}

/// PMI_process_mapping for the plan's hosts (vector form, blocks of
/// consecutive ranks per host).
fn process_mapping(hosts: &[PlanHost]) -> String {
    let mut parts = Vec::new();
    for (i, h) in hosts.iter().enumerate() {
        let mut r = h.ranks.clone();
        r.sort_unstable();
        let mut k = 0;
        while k < r.len() {
            let start = r[k];
            let mut len = 1;
            while k + len < r.len() && r[k + len] == start + len {
                len += 1;
            }
            parts.push((start, i, len));
            k += len;
        }
    }
    parts.sort_unstable();
    let body: Vec<String> = parts
        .iter()
        .map(|(_, node, len)| format!("({node},1,{len})"))
        .collect();
    format!("(vector,{})", body.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(machines: &str) -> GridSpec {
        GridSpec {
            n: 1,
            program: "true".into(),
            args: Vec::new(),
            wdir: None,
            env: Vec::new(),
            tag_output: false,
            timeout: None,
            stats: false,
            report: None,
            machines: Machines::parse(machines).expect("a valid machines file"),
            map_by: MapBy::Slot,
            oversubscribe: false,
            force_stage: false,
            stage_files: Vec::new(),
            iface: None,
            heartbeat: Duration::from_secs(10),
            flat: false,
            direct: Some(3),
        }
    }

    const SIX: &str = "[site s0] start=ssh\na\nb\nc\nd\ne\nf\n";

    #[test]
    fn a_warm_big_site_starts_three_hosts_beside_its_leader() {
        let s = spec(SIX);
        let all: Vec<usize> = (0..6).collect();
        let (direct, key) = direct_hosts(&s, &all, "p", &[], |_| true);
        assert_eq!(direct, vec![1, 2, 3]);
        let key = key.expect("the site has a marker");
        // Cold (no marker): the plain tree, but the marker is still named.
        let (direct, cold_key) = direct_hosts(&s, &all, "p", &[], |_| false);
        assert!(direct.is_empty());
        assert_eq!(cold_key.as_deref(), Some(key.as_str()));
        // Another proxy or other staged files: another marker.
        assert_ne!(
            direct_hosts(&s, &all, "q", &[], |_| true).1,
            Some(key.clone())
        );
        assert_ne!(direct_hosts(&s, &all, "p", &["x"], |_| true).1, Some(key));
    }

    #[test]
    fn by_default_a_quarter_of_a_site_of_eight_or_more_starts_directly() {
        let big = |n: usize| {
            let mut m = String::from("[site s0] start=ssh\n");
            for i in 0..n {
                m.push_str(&format!("h{i}\n"));
            }
            let mut s = spec(&m);
            s.direct = None;
            let all: Vec<usize> = (0..n).collect();
            direct_hosts(&s, &all, "p", &[], |_| true).0.len()
        };
        assert_eq!(big(7), 0);
        assert_eq!(big(8), 2);
        assert_eq!(big(16), 4);
        assert_eq!(big(32), 8);
        assert_eq!(big(64), 8);
    }

    #[test]
    fn small_gatewayed_several_site_or_forced_jobs_keep_the_tree() {
        let all: Vec<usize> = (0..6).collect();
        // Too small: the leader would keep fewer than two hosts below it.
        let s = spec(SIX);
        let (direct, key) = direct_hosts(&s, &all[..5], "p", &[], |_| true);
        assert!(direct.is_empty() && key.is_none());
        // A gateway (a firewalled site): only it is reachable.
        let s = spec("[site s0] start=ssh gateway=a\na\nb\nc\nd\ne\nf\n");
        assert!(direct_hosts(&s, &all, "p", &[], |_| true).0.is_empty());
        // Two sites: the tree's per-site staging and relays stay as they are.
        let s = spec("[site s0] start=ssh\na\nb\nc\n[site s1] start=ssh\nd\ne\nf\n");
        assert!(direct_hosts(&s, &all, "p", &[], |_| true).0.is_empty());
        // --stage, GW_LAUNCH_DIRECT=0 and the flat tree.
        for f in [
            |s: &mut GridSpec| s.force_stage = true,
            |s: &mut GridSpec| s.direct = Some(0),
            |s: &mut GridSpec| s.flat = true,
        ] {
            let mut s = spec(SIX);
            f(&mut s);
            assert!(direct_hosts(&s, &all, "p", &[], |_| true).0.is_empty());
        }
    }
}
