//! `gwinfo -f MACHINES`: the information service across real hosts.
//!
//! gwinfo cannot link the launcher (gridwire-launch depends on this crate),
//! so it runs itself under `gwrun -f MACHINES -n HOSTS --map-by host`: one
//! probe rank per host (`gwinfo --probe`). Each probe reports its host
//! (`GW_HOST_NAME`, `GW_SITE` from its proxy), CPU count, interface addresses
//! and the method its runtime would select to every other rank; rank 0 then
//! has the first host of each pair of sites (the first two hosts of one
//! site, for the diagonal) measure round trip and bandwidth over the link
//! the runtime picks, and prints everything. Every wait is bounded; a host
//! that cannot be reached is reported by gwrun as for any job.

use super::table::{HostInfo, Measure, Report};
use gridwire_core::method::netaddr::{local_addrs, IfaceFilter};
use gridwire_core::params::Params;
use gridwire_core::{Context, Request};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A machines file larger than this is refused (gwrun applies its own rules).
const MAX_FILE: u64 = 4 << 20;
/// gwrun's limit on the whole job, seconds.
const JOB_TIMEOUT_S: &str = "300";
/// How long rank 0 waits for every host's record, and for one measurement.
const GATHER_TIME: Duration = Duration::from_secs(60);
const MEASURE_TIME: Duration = Duration::from_secs(30);
/// How long a probe waits for its next instruction.
const IDLE_TIME: Duration = Duration::from_secs(240);
/// Round trips: at most this many, or for at most this long.
const PINGS: usize = 20;
const PING_TIME: Duration = Duration::from_secs(1);
/// One pong may take this long (a WAN, a loaded host) before we give up.
const PONG_TIME: Duration = Duration::from_secs(5);
/// Bandwidth: this many messages of this size, sending stops after BULK_TIME.
const BULK_MSGS: usize = 8;
const BULK_SIZE: usize = 1 << 20;
const BULK_TIME: Duration = Duration::from_secs(3);
const BULK_ACK_TIME: Duration = Duration::from_secs(20);

const H_INFO: u32 = 1;
const H_CMD: u32 = 2;
const H_RESULT: u32 = 3;
const H_PING: u32 = 4;
const H_PONG: u32 = 5;
const H_BULK: u32 = 6;
const H_BULK_END: u32 = 7;
const H_BULK_ACK: u32 = 8;

const CMD_MEASURE: u8 = 1;
const CMD_DONE: u8 = 2;

/// Counts the distinct hosts of a machines file: the first word of every
/// line that is not blank, a comment or a `[site]` line, up to `:`, without
/// regard to case (docs/machines.md). gwrun parses the file for real; this
/// only sizes the job to one rank per host, and the probe checks that every
/// rank landed on a host of its own.
pub fn count_hosts(text: &str) -> usize {
    let mut seen: Vec<String> = Vec::new();
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with('[') {
            continue;
        }
        let t = t.split('#').next().unwrap_or("");
        let Some(word) = t.split_whitespace().next() else {
            continue;
        };
        let name = word.split(':').next().unwrap_or(word).to_ascii_lowercase();
        if !name.is_empty() && !seen.contains(&name) {
            seen.push(name);
        }
    }
    seen.len()
}

fn gwrun_path() -> PathBuf {
    if let Some(p) = std::env::var_os("GW_GWRUN").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
    {
        let p = dir.join("gwrun");
        if p.is_file() {
            return p;
        }
    }
    PathBuf::from("gwrun")
}

/// Replaces this process by `gwrun -f MACHINES … gwinfo --probe`.
pub fn front(machines: &Path, json: bool) -> String {
    use std::io::Read;
    let mut text = String::new();
    let read = std::fs::File::open(machines).and_then(|f| {
        f.take(MAX_FILE + 1).read_to_string(&mut text)?;
        Ok(())
    });
    if let Err(e) = read {
        return format!("{}: {e}", machines.display());
    }
    if text.len() as u64 > MAX_FILE {
        return format!("{}: larger than {MAX_FILE} bytes", machines.display());
    }
    let hosts = count_hosts(&text);
    if hosts == 0 {
        return format!("{}: names no host", machines.display());
    }
    let me = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => return format!("cannot find gwinfo's own binary: {e}"),
    };
    let gwrun = gwrun_path();
    let mut cmd = std::process::Command::new(&gwrun);
    cmd.arg("-f")
        .arg(machines)
        .args(["-n", &hosts.to_string(), "--map-by", "host"])
        .args(["--timeout", JOB_TIMEOUT_S])
        .arg(&me)
        .arg("--probe");
    if json {
        cmd.arg("--json");
    }
    use std::os::unix::process::CommandExt;
    let e = cmd.exec();
    format!(
        "cannot run {} (set GW_GWRUN to gwrun's path): {e}",
        gwrun.display()
    )
}

/// What rank 0's handlers collect and the probes' handlers are told.
#[derive(Default)]
struct Shared {
    infos: Mutex<Vec<Option<Result<HostInfo, String>>>>,
    results: Mutex<Option<Result<Measure, String>>>,
    commands: Mutex<VecDeque<(u8, u32)>>,
    pongs: AtomicU32,
    bulk_bytes: AtomicU64,
    bulk_acked: Mutex<Option<u64>>,
}

/// A probe rank; returns the exit status.
pub fn probe(json: bool) -> i32 {
    match run_probe(json) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("gwinfo --probe: {e}");
            1
        }
    }
}

fn my_info(ctx: &Context, params: &Params) -> Result<HostInfo, String> {
    let host = std::env::var("GW_HOST_NAME")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .unwrap_or_default()
                .trim()
                .to_string()
        });
    let site = std::env::var("GW_SITE").unwrap_or_else(|_| "-".into());
    // SAFETY: sysconf has no memory effects.
    let cores = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    let filter = IfaceFilter::from_params(params).map_err(|e| e.to_string())?;
    let addrs = local_addrs(&filter)
        .iter()
        .map(|a| format!("{}/{}", a.ip, a.prefix))
        .collect();
    let methods = (0..ctx.size())
        .map(|r| {
            if r == ctx.rank() {
                "self".to_string()
            } else {
                ctx.would_select(r)
                    .map(str::to_string)
                    .unwrap_or_else(|_| "none".into())
            }
        })
        .collect();
    Ok(HostInfo {
        rank: ctx.rank(),
        host,
        site,
        cores: u32::try_from(cores.max(0)).unwrap_or(u32::MAX),
        addrs,
        methods,
    })
}

fn register(ctx: &Context, sh: &Arc<Shared>) -> gridwire_core::Result<()> {
    let size = ctx.size();
    let s = sh.clone();
    ctx.register_handler(H_INFO, move |_, req: Request| {
        let rec = HostInfo::from_bytes(req.src, size, req.payload);
        if let Some(slot) = s.infos.lock().unwrap().get_mut(req.src as usize) {
            slot.get_or_insert(rec);
        }
    })?;
    let s = sh.clone();
    ctx.register_handler(H_CMD, move |_, req: Request| {
        if let [kind, a, b, c, d] = *req.payload {
            s.commands
                .lock()
                .unwrap()
                .push_back((kind, u32::from_le_bytes([a, b, c, d])));
        }
    })?;
    let s = sh.clone();
    ctx.register_handler(H_RESULT, move |_, req: Request| {
        *s.results.lock().unwrap() = Some(Measure::from_bytes(req.src, req.payload));
    })?;
    ctx.register_handler(H_PING, |ctx, req: Request| {
        if let Ok(sp) = ctx.startpoint(req.src) {
            let _ = ctx.rsr(&sp, H_PONG, req.payload);
        }
    })?;
    let s = sh.clone();
    ctx.register_handler(H_PONG, move |_, _| {
        s.pongs.fetch_add(1, Ordering::AcqRel);
    })?;
    let s = sh.clone();
    ctx.register_handler(H_BULK, move |_, req: Request| {
        s.bulk_bytes
            .fetch_add(req.payload.len() as u64, Ordering::AcqRel);
    })?;
    let s = sh.clone();
    ctx.register_handler(H_BULK_END, move |ctx, req: Request| {
        let got = s.bulk_bytes.swap(0, Ordering::AcqRel);
        if let Ok(sp) = ctx.startpoint(req.src) {
            let _ = ctx.rsr(&sp, H_BULK_ACK, &got.to_le_bytes());
        }
    })?;
    let s = sh.clone();
    ctx.register_handler(H_BULK_ACK, move |_, req: Request| {
        if let Ok(b) = <[u8; 8]>::try_from(req.payload) {
            *s.bulk_acked.lock().unwrap() = Some(u64::from_le_bytes(b));
        }
    })?;
    Ok(())
}

/// Round trip and bandwidth from this rank to `peer`, over the link the
/// runtime selects.
fn measure(ctx: &Context, sh: &Shared, peer: u32) -> Measure {
    let mut m = Measure {
        from_rank: ctx.rank(),
        to_rank: peer,
        method: "?".into(),
        rtt_us: None,
        bandwidth: None,
        note: None,
    };
    let sp = match ctx.startpoint(peer) {
        Ok(sp) => sp,
        Err(e) => {
            m.note = Some(e.to_string());
            return m;
        }
    };
    let mut trips = Vec::new();
    // The first trip may include connecting: it is not counted.
    let mut warm = false;
    let start = Instant::now();
    while trips.len() < PINGS && (trips.len() < 3 || start.elapsed() < PING_TIME) {
        let before = sh.pongs.load(Ordering::Acquire);
        let t = Instant::now();
        if let Err(e) = ctx.rsr(&sp, H_PING, &[0u8; 8]) {
            m.note = Some(format!("ping: {e}"));
            break;
        }
        if !ctx.wait_timeout(PONG_TIME, || sh.pongs.load(Ordering::Acquire) > before) {
            m.note = Some(format!("no reply to a ping within {PONG_TIME:?}"));
            break;
        }
        if warm {
            trips.push(t.elapsed().as_secs_f64() * 1e6);
        } else {
            warm = true;
            m.method = ctx.method_to(peer).unwrap_or("?").to_string();
        }
    }
    if !trips.is_empty() {
        trips.sort_by(f64::total_cmp);
        m.rtt_us = Some(trips[trips.len() / 2]);
    }
    if m.note.is_some() {
        return m;
    }
    let buf = vec![0x5au8; BULK_SIZE];
    *sh.bulk_acked.lock().unwrap() = None;
    let t = Instant::now();
    let mut sent = 0u64;
    for _ in 0..BULK_MSGS {
        if t.elapsed() > BULK_TIME {
            break;
        }
        if let Err(e) = ctx.rsr(&sp, H_BULK, &buf) {
            m.note = Some(format!("bandwidth: {e}"));
            return m;
        }
        sent += BULK_SIZE as u64;
    }
    if let Err(e) = ctx.rsr(&sp, H_BULK_END, &[]) {
        m.note = Some(format!("bandwidth: {e}"));
        return m;
    }
    if !ctx.wait_timeout(BULK_ACK_TIME, || sh.bulk_acked.lock().unwrap().is_some()) {
        m.note = Some(format!("no bandwidth reply within {BULK_ACK_TIME:?}"));
        return m;
    }
    let got = sh.bulk_acked.lock().unwrap().unwrap_or(0);
    if got != sent {
        m.note = Some(format!("peer received {got} of {sent} bytes"));
        return m;
    }
    let secs = t.elapsed().as_secs_f64();
    if secs > 0.0 {
        m.bandwidth = Some(sent as f64 / secs);
    }
    m
}

fn cmd(ctx: &Context, to: u32, kind: u8, arg: u32) -> gridwire_core::Result<()> {
    let mut msg = [kind, 0, 0, 0, 0];
    msg[1..].copy_from_slice(&arg.to_le_bytes());
    ctx.rsr(&ctx.startpoint(to)?, H_CMD, &msg)
}

fn run_probe(json: bool) -> Result<(), String> {
    let params = Params::from_env().map_err(|e| e.to_string())?;
    let ctx = Context::init().map_err(|e| e.to_string())?;
    let sh = Arc::new(Shared::default());
    *sh.infos.lock().unwrap() = vec![None; ctx.size() as usize];
    register(&ctx, &sh).map_err(|e| e.to_string())?;
    ctx.bootstrap_barrier().map_err(|e| e.to_string())?;
    let info = my_info(&ctx, &params)?;
    let result = if ctx.rank() == 0 {
        sh.infos.lock().unwrap()[0] = Some(Ok(info));
        let r = lead(&ctx, &sh);
        // Told even when rank 0 failed, so nobody waits out IDLE_TIME.
        for peer in 1..ctx.size() {
            cmd(&ctx, peer, CMD_DONE, 0).map_err(|e| e.to_string())?;
        }
        r.map(Some)
    } else {
        let bytes = serde_json::to_vec(&info.to_json()).map_err(|e| e.to_string())?;
        ctx.rsr(
            &ctx.startpoint(0).map_err(|e| e.to_string())?,
            H_INFO,
            &bytes,
        )
        .map_err(|e| e.to_string())?;
        follow(&ctx, &sh).map(|()| None)
    };
    // Everyone leaves together, so no probe exits while a peer still talks.
    ctx.barrier().map_err(|e| e.to_string())?;
    let report = result?;
    if let Some(r) = report {
        if json {
            println!("{}", r.to_json());
        } else {
            print!("{}", r.render());
        }
    }
    ctx.finalize().map_err(|e| e.to_string())
}

/// A probe other than rank 0: measure when told to, until told it is done.
fn follow(ctx: &Context, sh: &Shared) -> Result<(), String> {
    loop {
        let mut next = None;
        let got = ctx.wait_timeout(IDLE_TIME, || {
            next = sh.commands.lock().unwrap().pop_front();
            next.is_some()
        });
        match next {
            Some((CMD_MEASURE, peer)) if peer < ctx.size() => {
                let m = measure(ctx, sh, peer);
                let bytes = serde_json::to_vec(&m.to_json()).map_err(|e| e.to_string())?;
                ctx.rsr(
                    &ctx.startpoint(0).map_err(|e| e.to_string())?,
                    H_RESULT,
                    &bytes,
                )
                .map_err(|e| e.to_string())?;
            }
            Some((CMD_DONE, _)) => return Ok(()),
            Some((kind, arg)) => return Err(format!("rank 0 sent a bad command {kind} {arg}")),
            None if !got => return Err(format!("no word from rank 0 for {IDLE_TIME:?}")),
            None => {}
        }
    }
}

/// Rank 0: gather, measure pair by pair, tell everyone it is done.
fn lead(ctx: &Context, sh: &Shared) -> Result<Report, String> {
    let all_in = ctx.wait_timeout(GATHER_TIME, || {
        sh.infos.lock().unwrap().iter().all(Option::is_some)
    });
    let infos = sh.infos.lock().unwrap().clone();
    if !all_in {
        let missing: Vec<String> = infos
            .iter()
            .enumerate()
            .filter(|(_, i)| i.is_none())
            .map(|(r, _)| r.to_string())
            .collect();
        return Err(format!(
            "no host record from rank(s) {} within {GATHER_TIME:?}",
            missing.join(", ")
        ));
    }
    let mut report = Report::default();
    for i in infos.into_iter().flatten() {
        report.hosts.push(i?);
    }
    for h in &report.hosts {
        if let Some(other) = report
            .hosts
            .iter()
            .find(|o| o.rank < h.rank && o.host == h.host)
        {
            eprintln!(
                "gwinfo: host {} has ranks {} and {} (count the machines file's hosts again)",
                h.host, other.rank, h.rank
            );
        }
        if report.site_index(&h.site).is_none() {
            report.sites.push(h.site.clone());
        }
    }
    let members = |s: usize| -> Vec<u32> {
        report
            .hosts
            .iter()
            .filter(|h| h.site == report.sites[s])
            .map(|h| h.rank)
            .collect()
    };
    let nsites = report.sites.len();
    for i in 0..nsites {
        for j in i..nsites {
            let (a, b) = if i == j {
                match members(i)[..] {
                    [a, b, ..] => (a, b),
                    _ => continue,
                }
            } else {
                (members(i)[0], members(j)[0])
            };
            let m = if a == ctx.rank() {
                Ok(measure(ctx, sh, b))
            } else {
                *sh.results.lock().unwrap() = None;
                cmd(ctx, a, CMD_MEASURE, b).map_err(|e| e.to_string())?;
                // Only this pair's result counts: a late one from a pair that
                // timed out earlier is dropped.
                let mut got = None;
                ctx.wait_timeout(MEASURE_TIME, || {
                    match sh.results.lock().unwrap().take() {
                        Some(Ok(m)) if m.from_rank != a || m.to_rank != b => {}
                        Some(r) => got = Some(r),
                        None => {}
                    }
                    got.is_some()
                });
                got.unwrap_or_else(|| {
                    Err(format!("no result from rank {a} within {MEASURE_TIME:?}"))
                })
            };
            report.pairs.push((i, j, m));
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::count_hosts;

    #[test]
    fn hosts_are_counted_as_gwrun_merges_them() {
        let f = "# c\nnode1:2\nNODE1 slots=3\n\n[site a] start=local ssh_options=\"-o x#y\"\n\
                 h1   # comment\nh2:4\n[site b] start=local\nh3 slots=1 max_slots=2\n";
        assert_eq!(count_hosts(f), 4);
        assert_eq!(count_hosts("# nothing\n\n[site x]\n"), 0);
    }
}
