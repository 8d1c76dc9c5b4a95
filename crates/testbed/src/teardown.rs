//! `down`: removes everything an instance made, from whatever is left of it
//! (also after `up` or the machine's processes crashed half-way). It does
//! not trust the state directory alone: processes are also found by their
//! command line (which names the instance id) and namespaces by their name
//! prefix, so a run whose state files were never written is still removed.
//!
//! Mounts, bridges, veths, TUN devices and nftables rules all live inside
//! the instance's namespaces, so they go with them: killing a host's init
//! (PID 1) kills its processes and frees its namespaces; the named ones
//! (router, edges, login) are deleted with `ip netns del`.

use crate::plan::{check_id, instance_dir, NETNS_DIR, STATE_ROOT};
use crate::sys;
use std::time::{Duration, Instant};

fn is_init_of(args: &[String], id: &str) -> bool {
    args.iter().any(|a| a == "__init") && args.windows(2).any(|w| w[0] == "--id" && w[1] == id)
}

fn is_linkemu_of(args: &[String], id: &str) -> bool {
    let prefix = format!("gwtb-{id}-");
    args.first()
        .is_some_and(|a| a.rsplit('/').next() == Some("gw-linkemu"))
        && args.iter().any(|a| a.starts_with(&prefix))
}

/// Live processes of instance `id`: its inits and its link emulators.
pub fn processes(id: &str) -> Vec<i32> {
    sys::pids()
        .into_iter()
        .filter(|&p| {
            let args = sys::cmdline(p);
            (is_init_of(&args, id) || is_linkemu_of(&args, id)) && sys::alive(p)
        })
        .collect()
}

pub fn netns_names(id: &str) -> Vec<String> {
    let prefix = format!("gwtb-{id}-");
    let mut v: Vec<String> = std::fs::read_dir(NETNS_DIR)
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str().map(String::from))
                .filter(|n| n.starts_with(&prefix))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Every instance id with anything left: state, namespaces or processes.
pub fn all_ids() -> Vec<String> {
    let mut ids = crate::plan::instance_ids();
    if let Ok(d) = std::fs::read_dir(NETNS_DIR) {
        for e in d.flatten() {
            if let Some(rest) = e.file_name().to_str().and_then(|n| n.strip_prefix("gwtb-")) {
                if let Some((id, _)) = rest.split_once('-') {
                    ids.push(id.to_string());
                }
            }
        }
    }
    for p in sys::pids() {
        let args = sys::cmdline(p);
        if args.iter().any(|a| a == "__init") {
            if let Some(w) = args.windows(2).find(|w| w[0] == "--id") {
                ids.push(w[1].clone());
            }
        }
        if args
            .first()
            .is_some_and(|a| a.rsplit('/').next() == Some("gw-linkemu"))
        {
            for a in &args {
                if let Some((id, _)) = a.strip_prefix("gwtb-").and_then(|r| r.split_once('-')) {
                    ids.push(id.to_string());
                }
            }
        }
    }
    ids.retain(|i| check_id(i).is_ok());
    ids.sort();
    ids.dedup();
    ids
}

fn wait_gone(pids: &[i32], limit: Duration) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if pids.iter().all(|&p| !sys::alive(p)) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    pids.iter().all(|&p| !sys::alive(p))
}

/// Removes instance `id`; the error lists whatever could not be removed.
pub fn down(id: &str) -> Result<(), String> {
    check_id(id)?;
    // Emulators first (they hold TUN devices in the namespaces), then hosts.
    let emus: Vec<i32> = processes(id)
        .into_iter()
        .filter(|&p| is_linkemu_of(&sys::cmdline(p), id))
        .collect();
    for &p in &emus {
        sys::kill(p, libc::SIGTERM);
    }
    if !wait_gone(&emus, Duration::from_secs(2)) {
        for &p in &emus {
            sys::kill(p, libc::SIGKILL);
        }
        wait_gone(&emus, Duration::from_secs(2));
    }
    let inits = processes(id);
    for &p in &inits {
        // SIGKILL of a PID 1 from outside its namespace: the kernel then
        // kills every process of that host.
        sys::kill(p, libc::SIGKILL);
    }
    wait_gone(&inits, Duration::from_secs(5));
    let mut problems = Vec::new();
    for name in netns_names(id) {
        if let Err(e) = sys::run(std::process::Command::new("ip").args(["netns", "del", &name])) {
            problems.push(e);
        }
    }
    let dir = instance_dir(id);
    if dir.exists() {
        if let Err(e) = std::fs::remove_dir_all(&dir) {
            problems.push(format!("remove {}: {e}", dir.display()));
        }
    }
    // The common directory goes when the last instance does.
    let _ = std::fs::remove_dir(STATE_ROOT);
    for p in processes(id) {
        problems.push(format!(
            "process {p} ({}) is still alive",
            sys::cmdline(p).join(" ")
        ));
    }
    for n in netns_names(id) {
        problems.push(format!("network namespace {n} is still there"));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "instance {id} not fully removed:\n  {}",
            problems.join("\n  ")
        ))
    }
}
