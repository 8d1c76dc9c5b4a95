//! Setting a context up: descriptor tables through the bootstrap, the
//! methods to start, the host identity, the spin budget, the job facts
//! each method gets.

use super::*;

pub(super) fn desc_key(rank: u32) -> String {
    format!("gw.desc.{rank}")
}

/// Publishes a descriptor table as `gw.desc.<rank>` = `<parts>:<hex>`, split
/// over `gw.desc.<rank>.<i>` keys when it exceeds the launcher's value limit
/// (Hydra allows only 1023 bytes).
pub(super) fn publish_table(pmi: &mut Pmi, rank: u32, hex: &str) -> Result<()> {
    let room = pmi.max_value_len().saturating_sub(8).max(16);
    let chunks: Vec<&str> = hex
        .as_bytes()
        .chunks(room)
        .map(|c| std::str::from_utf8(c).expect("hex is ASCII"))
        .collect();
    let chunks = if chunks.is_empty() { vec![""] } else { chunks };
    pmi.put(&desc_key(rank), &format!("{}:{}", chunks.len(), chunks[0]))?;
    for (i, c) in chunks.iter().enumerate().skip(1) {
        pmi.put(&format!("{}.{i}", desc_key(rank)), c)?;
    }
    Ok(())
}

/// Reads back what [`publish_table`] wrote.
pub(super) fn lookup_table(pmi: &mut Pmi, rank: u32) -> Result<String> {
    let missing = || Error::Bootstrap(format!("rank {rank} published no descriptor table"));
    let first = pmi.get_from(rank, &desc_key(rank))?.ok_or_else(missing)?;
    let (n, head) = first
        .split_once(':')
        .and_then(|(n, h)| Some((n.parse::<usize>().ok()?, h)))
        .ok_or_else(|| Error::Bootstrap(format!("malformed descriptor table of rank {rank}")))?;
    if n == 0 || n > 1024 {
        return Err(Error::Bootstrap(format!(
            "descriptor table of rank {rank} claims {n} parts"
        )));
    }
    let mut hex = head.to_string();
    for i in 1..n {
        hex.push_str(
            &pmi.get_from(rank, &format!("{}.{i}", desc_key(rank)))?
                .ok_or_else(missing)?,
        );
    }
    Ok(hex)
}

/// The methods to initialise, in order: `GW_METHODS` if set, else all built in.
pub fn methods_from_params(params: &Params) -> Result<Vec<&'static method::MethodInfo>> {
    let reg = method::registry();
    let spec = params.text("METHODS").trim().to_ascii_lowercase();
    if spec.is_empty() {
        return Ok(reg.iter().collect());
    }
    let mut out: Vec<&'static method::MethodInfo> = Vec::new();
    // Stacks (`encrypt+tcp`) are built by `transform::policy::build_stacks`.
    let mut stacks = 0;
    for name in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if name.contains('+') {
            stacks += 1;
            continue;
        }
        let info = reg
            .iter()
            .find(|m| m.name == name)
            .ok_or_else(|| Error::UnknownMethod {
                var: "GW_METHODS".into(),
                name: name.into(),
                valid: reg.iter().map(|m| m.name).collect::<Vec<_>>().join(", "),
            })?;
        if !out.iter().any(|m| m.name == name) {
            out.push(info);
        }
    }
    if out.is_empty() && stacks == 0 {
        return Err(Error::BadParam {
            var: "GW_METHODS".into(),
            value: spec,
            reason: "names no method".into(),
        });
    }
    Ok(out)
}

/// The host identity: who can share memory with whom. Two processes get the
/// same identity only when shm and CMA work between them: the same kernel
/// (boot id), the same network namespace (shm's handoff sockets are
/// abstract unix sockets, which live in a network namespace), the same IPC
/// namespace and the same PID namespace (CMA and the liveness checks name
/// peers by pid). Containers and `gw-testbed` hosts share a kernel and a
/// boot id, so the boot id alone would take them for one host.
///
/// `GW_HOST_ID` (set by `gwrun --emulate-hosts`) names the host *within*
/// that: its value replaces the hostname and boot id, but the namespaces
/// are still appended, so an emulated-host id never makes processes that
/// cannot map each other's segments look co-located.
pub fn host_identity(params: &Params) -> String {
    let set = params.text("HOST_ID");
    if !set.is_empty() {
        return format!("{set}/{}", namespace_key(&read_namespace));
    }
    real_host_identity()
}

/// hostname:boot-id/namespaces of this process (see [`host_identity`]).
pub fn real_host_identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    format!(
        "{}:{}/{}",
        host.trim(),
        boot.trim(),
        namespace_key(&read_namespace)
    )
}

/// The link `/proc/self/ns/KIND` (`net:[4026531840]`), or `None`.
pub(super) fn read_namespace(kind: &str) -> Option<String> {
    std::fs::read_link(format!("/proc/self/ns/{kind}"))
        .ok()
        .map(|p| p.to_string_lossy().into_owned())
}

/// `n<net>i<ipc>p<pid>` from the namespace inode numbers `read` reports
/// (`net:[4026531840]` → `4026531840`); a namespace that cannot be read
/// (no /proc) counts as `?`, the same for every process of such a system.
pub(super) fn namespace_key(read: &dyn Fn(&str) -> Option<String>) -> String {
    let ino = |kind: &str| -> String {
        read(kind)
            .and_then(|l| {
                let inner = l
                    .strip_prefix(kind)?
                    .strip_prefix(":[")?
                    .strip_suffix(']')?;
                inner.parse::<u64>().ok().map(|n| n.to_string())
            })
            .unwrap_or_else(|| "?".into())
    };
    format!("n{}i{}p{}", ino("net"), ino("ipc"), ino("pid"))
}

/// `GW_SPIN_US`: a number of microseconds, or `auto` = 2 ms when every rank
/// on this machine can have a core, else 0 (an oversubscribed job yields early).
pub(super) fn spin_budget(params: &Params, size: u32) -> Result<Duration> {
    let v = params.text("SPIN_US");
    if v != "auto" {
        let us: u64 = v.parse().map_err(|_| Error::BadParam {
            var: "GW_SPIN_US".into(),
            value: v.into(),
            reason: "expected `auto` or a number of microseconds".into(),
        })?;
        return Ok(Duration::from_micros(us.min(10_000_000)));
    }
    let num = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u32>().ok());
    // Emulated hosts share one real machine: every rank of the job counts then.
    let local = if params.text("HOST_ID").is_empty() {
        num("MPI_LOCALNRANKS").unwrap_or(size)
    } else {
        size
    };
    let cores = super::spin_guard::cores_for_ranks();
    Ok(if local <= cores {
        Duration::from_millis(2)
    } else {
        Duration::ZERO
    })
}

pub(super) fn job_info(params: &Params, pmi: &mut Pmi, rank: u32, size: u32) -> Result<JobInfo> {
    let verbose = params.num("VERBOSE") as u8;
    let kvs = pmi.kvsname().to_string();
    let job_id = match params.text("JOB_ID") {
        "" => {
            // Under a foreign launcher: derive a file-name-safe id from the kvs
            // name, which every rank of the job shares.
            let safe: String = kvs
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                .collect();
            if safe.is_empty() {
                format!("single{}", std::process::id())
            } else {
                safe
            }
        }
        s => s.to_string(),
    };
    let secret = match crate::auth::parse_secret(params.text("JOB_SECRET")) {
        Some(s) => s,
        None => {
            if verbose >= 1 && rank == 0 {
                crate::say!("gw[0]: no GW_JOB_SECRET from the launcher; rank 0 makes a random one and passes it through PMI");
            }
            crate::auth::exchange_secret(pmi)?
        }
    };
    Ok(JobInfo {
        ctx_id: rank,
        size,
        job_id,
        host_id: host_identity(params),
        secret,
        verbose,
    })
}
