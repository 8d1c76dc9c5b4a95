//! `gwinfo`: what this build of gridwire has and would do here.
//!
//! Lists the built-in communication methods, their descriptors on this host,
//! the method the selection policy would choose from emulated host 0 to each
//! emulated host, and every parameter (name, type, default, current value,
//! help) — the same table the runtime reads, so it cannot go stale.
//!
//! `gwinfo -f MACHINES` does it across real hosts instead (see `grid`).

use gridwire_core::context::{measured, methods_from_params, real_host_identity};
use gridwire_core::descriptor::{DescriptorTable, Entry};
use gridwire_core::method::{self, JobInfo, Method, MethodEnv};
use gridwire_core::params::{all_decls, Kind, Params};
use gridwire_core::select::{FirstApplicable, SelectionPolicy};
use std::sync::Arc;

#[path = "gwinfo/grid.rs"]
mod grid;
#[path = "gwinfo/table.rs"]
mod table;

const USAGE: &str = "usage: gwinfo [--emulate-hosts K] [--params-only | --methods-only]
       gwinfo -f MACHINES [--json]
       gwinfo --mpi-t [--init]

Shows the built-in communication methods, their descriptors on this host,
which method would be selected between emulated hosts, and every GW_*
parameter with its default, current value and meaning.

With -f, runs one probe per host of the machines file under gwrun (gwrun
next to gwinfo, or GW_GWRUN) and prints, per host, its site, cores and
addresses; per pair of sites the method, round trip and bandwidth measured
between their first hosts; and the method selected between every two hosts.

With --mpi-t, runs gwtools (beside gwinfo): every control and performance
variable, category and event of the MPI library's tools interface (MPI_T),
as a tool sees them; --init starts MPI as a singleton first.";

/// `gwinfo --mpi-t`: the listing comes from the MPI library itself
/// (`gwtools`, built with it), which this crate cannot link.
fn mpi_t(rest: Vec<String>) -> ! {
    use std::os::unix::process::CommandExt;
    let tool = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(|d| d.join("gwtools")))
        .filter(|p| p.exists())
        .unwrap_or_else(|| {
            fail("gwtools is not beside gwinfo: build it with `cargo build -p gridwire-capi`")
        });
    let e = std::process::Command::new(&tool).args(rest).exec();
    fail(&format!("cannot run {}: {e}", tool.display()))
}

fn main() {
    // Behave like a Unix tool when piped into `head`: die quietly on SIGPIPE.
    // SAFETY: resetting a signal disposition to its default has no memory effects.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let mut hosts = 2u32;
    let mut params_only = false;
    let mut methods_only = false;
    let mut machines = None;
    let mut json = false;
    let mut probe = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--emulate-hosts" => {
                hosts = match args.next().and_then(|v| v.parse().ok()) {
                    Some(k) if (1..=64).contains(&k) => k,
                    _ => fail("--emulate-hosts needs a number between 1 and 64"),
                }
            }
            "--params-only" => params_only = true,
            "--methods-only" => methods_only = true,
            "-f" | "--machines" | "--hostfile" => match args.next() {
                Some(f) => machines = Some(std::path::PathBuf::from(f)),
                None => fail("-f needs a machines file"),
            },
            "--json" => json = true,
            "--mpi-t" => mpi_t(args.collect()),
            // Internal: a rank of `gwinfo -f`'s job.
            "--probe" => probe = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                return;
            }
            other => fail(&format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    if probe {
        std::process::exit(grid::probe(json));
    }
    if let Some(m) = machines {
        fail(&grid::front(&m, json));
    }
    if json {
        fail("--json goes with -f");
    }
    let params = Params::from_env().unwrap_or_else(|e| fail(&e.to_string()));
    methods_from_params(&params).unwrap_or_else(|e| fail(&e.to_string()));
    if !params_only {
        methods_section(&params, hosts);
    }
    if !methods_only {
        params_section(&params);
    }
}

fn fail(msg: &str) -> ! {
    eprintln!("gwinfo: {msg}");
    std::process::exit(2);
}

fn methods_section(params: &Params, hosts: u32) {
    println!("gridwire {}", env!("CARGO_PKG_VERSION"));
    println!("\nCommunication methods built in (default table order, fastest first):");
    for m in method::registry() {
        println!("  {:<5} {}", m.name, m.summary);
    }
    println!("\nTransforms (stack on tcp and udp, in this order: compress+encrypt+tcp):");
    for t in method::transform::registry() {
        println!("  {:<8} {}", t.name, t.summary);
    }
    let policy = method::transform::policy::Policy::from_params(params)
        .unwrap_or_else(|e| fail(&e.to_string()));
    let show = |same_site: bool| {
        let w = policy.wanted(same_site);
        if w.is_empty() {
            "plain".to_string()
        } else {
            w.join("+") + "+<method>"
        }
    };
    println!(
        "Transform policy (GW_ENCRYPT={}, GW_COMPRESS={}): between sites {}, between hosts of a site {}, within a host plain",
        params.text("ENCRYPT"),
        params.text("COMPRESS"),
        show(false),
        show(true)
    );
    let chosen = methods_from_params(params).unwrap_or_else(|e| fail(&e.to_string()));
    let real = real_host_identity();
    let job_id = format!("gwinfo{}", std::process::id());
    // One set of methods per emulated host, as a rank there would initialise them.
    let mut per_host: Vec<(Vec<Arc<dyn Method>>, DescriptorTable)> = Vec::new();
    for h in 0..hosts {
        let job = JobInfo {
            ctx_id: h,
            size: hosts,
            job_id: job_id.clone(),
            host_id: if hosts == 1 {
                real.clone()
            } else {
                format!("{real}#emu{h}")
            },
            secret: [0; 32],
            verbose: 0,
        };
        let env = MethodEnv { job: &job, params };
        let mut ms: Vec<Arc<dyn Method>> = Vec::new();
        for info in &chosen {
            match (info.init)(&env) {
                Ok(Some(m)) => ms.push(m),
                Ok(None) => {}
                Err(e) => eprintln!("gwinfo: method {} failed to initialise: {e}", info.name),
            }
        }
        match method::transform::policy::build_stacks(&env, &policy, &ms) {
            Ok(stacks) => ms.extend(stacks),
            Err(e) => eprintln!("gwinfo: transform stacks failed to initialise: {e}"),
        }
        let table = DescriptorTable {
            entries: ms
                .iter()
                .map(|m| Entry {
                    method: m.name().into(),
                    descriptor: m.descriptor(),
                })
                .collect(),
        };
        per_host.push((ms, table));
    }
    let (local, table) = &per_host[0];
    println!(
        "\nEnabled here{}: {}",
        if params.is_set("METHODS") {
            " (GW_METHODS)"
        } else {
            ""
        },
        table.names()
    );
    println!("Descriptors of a process on this host ({}):", real);
    for (m, e) in local.iter().zip(&table.entries) {
        println!("  {:<5} {}", e.method, m.describe(&e.descriptor));
    }
    println!("\nSelection from a process on emulated host 0 to a process on each emulated host:");
    for (h, (_, remote)) in per_host.iter().enumerate() {
        // Another process on the same host: `self` must not match, so compare
        // against a table whose self entry belongs to a different context.
        let remote_other = DescriptorTable {
            entries: remote
                .entries
                .iter()
                .filter(|e| !(h == 0 && e.method == "self"))
                .cloned()
                .collect(),
        };
        // Emulated hosts share a site: the policy's within-site transforms
        // apply between them, none within one.
        let wanted = if h == 0 || policy.explicit {
            Vec::new()
        } else {
            policy.wanted(true)
        };
        let pick = FirstApplicable
            .candidates(local, &remote_other)
            .into_iter()
            .map(|(mi, _)| local[mi].name())
            .find(|n| policy.explicit || method::transform::transforms_of(n) == wanted)
            .unwrap_or("none applicable");
        println!("  host 0 -> host {h}: {pick}");
    }
    if let Some((_, remote)) = per_host.get(1) {
        let between: Vec<&'static str> = FirstApplicable
            .candidates(local, remote)
            .into_iter()
            .map(|(mi, _)| local[mi].name())
            .filter(|n| {
                !matches!(*n, "self" | "shm")
                    && !method::relay::is_relayed(n)
                    && (policy.explicit
                        || method::transform::transforms_of(n) == policy.wanted(true))
            })
            .collect();
        selection_section(params, &between);
    }
    for (ms, _) in &per_host {
        for m in ms {
            m.shutdown();
        }
    }
}

/// The size-aware selection between two hosts: its candidates and, when
/// measured, what it would choose per size class.
fn selection_section(params: &Params, candidates: &[&'static str]) {
    let mode = params.text("SELECT");
    println!("\nSize-aware selection (GW_SELECT={mode}; per communicator: info key gw_select):");
    println!(
        "  candidates between hosts: {}",
        if candidates.is_empty() {
            "none".to_string()
        } else {
            candidates.join(", ")
        }
    );
    if mode != "measured" {
        println!(
            "  fixed: every message on {} (GW_SELECT=measured costs each candidate per pair)",
            candidates.first().copied().unwrap_or("none")
        );
        return;
    }
    let forced = measured::parse_forced(params.text("SELECT_ESTIMATES"))
        .unwrap_or_else(|e| fail(&format!("GW_SELECT_ESTIMATES: {e}")));
    let slots: Vec<(usize, &'static str)> = candidates.iter().map(|&n| (0, n)).collect();
    let estimates: Option<Vec<measured::Estimate>> = if forced.is_empty() {
        None
    } else {
        candidates
            .iter()
            .map(|n| measured::forced_for(&forced, n))
            .collect()
    };
    let Some(estimates) = estimates else {
        println!(
            "  measured at run time, per pair and size class: probes (messages sent alone and \
             acknowledged at once) time each stack (docs/wan.md); until then the first stack \
             ({}) takes every size. GW_SELECT_ESTIMATES=stack=LATENCY_US/MBPS,... fixes them (and shows \
             the choice here).",
            candidates.first().copied().unwrap_or("none")
        );
        return;
    };
    let sel = measured::Selector::new(&slots, Some(&estimates));
    println!(
        "  with the estimates of GW_SELECT_ESTIMATES: {}",
        sel.summary().bands_text()
    );
    let now = std::time::Instant::now();
    for (label, size) in [
        ("8 B", 8usize),
        ("256 B", 256),
        ("4 KiB", 4 << 10),
        ("64 KiB", 64 << 10),
        ("1 MiB", 1 << 20),
        ("4 MiB", 4 << 20),
    ] {
        let (k, _) = sel.pick(size, now, false);
        let cost = estimates[k].cost_ns(size as u64).unwrap_or(0.0);
        println!(
            "  {label:>7}: {:<14} (modelled {:.1} us)",
            candidates[k],
            cost / 1e3
        );
    }
}

fn params_section(params: &Params) {
    println!(
        "\nParameters (environment variable, type, default, value; * = set in the environment):"
    );
    for d in all_decls() {
        let kind = match d.kind {
            Kind::UInt { .. } => "uint".to_string(),
            Kind::Size { .. } => "size".to_string(),
            Kind::Bool => "bool".to_string(),
            Kind::Choice(w) => w.join("|"),
            Kind::Text => "text".to_string(),
        };
        let mark = if params.is_set(d.name) { "*" } else { " " };
        println!(
            "  {mark}{:<24} {:<10} default {:<12} value {}",
            d.var(),
            kind,
            format!("{:?}", d.default),
            params.display(d.name)
        );
        println!(
            "      {}",
            d.help.split_whitespace().collect::<Vec<_>>().join(" ")
        );
    }
}
