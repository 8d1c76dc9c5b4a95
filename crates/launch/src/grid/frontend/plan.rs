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

type Planned = (Plan, String, ProxyImage, HashMap<String, PathBuf>);

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
        // front end), for comparison with the site tree.
        let key = (h.site, if spec.flat { i } else { usize::MAX });
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
    Ok((plan, secret()?, image, sources))
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
