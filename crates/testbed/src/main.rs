//! `gw-testbed`: real hosts on one machine, for tests, benchmarks and demos
//! of start-up across hosts and sites. See docs/testbed.md.
//!
//! A host is a set of namespaces (network, mount, UTS, PID, IPC) held by an
//! init process (this binary in `__init` mode, PID 1 of the host), running
//! its own sshd. Hosts of a site share a bridge; sites and the `login` host
//! are joined through a router by gw-linkemu links (delay, loss, rate).
//! State lives in /run/gw-testbed/<id>/; every name carries the id.

mod check;
mod exec;
mod init;
mod net;
mod plan;
mod ssh;
mod sys;
mod teardown;
mod users;

use clap::{Parser, Subcommand};
use plan::{Options, Plan};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use sys::Result;

#[derive(Parser, Debug)]
#[command(
    name = "gw-testbed",
    about = "Real hosts on one machine: S sites x H hosts plus login, each its own namespaces and sshd, sites joined by an emulated WAN (needs root)"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Create an instance; prints GW_TESTBED_ID, GW_TESTBED_MACHINES and GW_TESTBED_SSH_CONFIG (shell syntax).
    Up {
        #[arg(long, default_value = "1")]
        sites: u32,
        #[arg(long, default_value = "2")]
        hosts: u32,
        /// One-way delay in ms between hosts of different sites (login counts as a site).
        #[arg(long, default_value = "0")]
        wan_delay: f64,
        /// End-to-end packet loss in percent between sites.
        #[arg(long, default_value = "0")]
        wan_loss: f64,
        /// WAN rate in Mbit/s per direction (0 = unlimited).
        #[arg(long, default_value = "0")]
        wan_rate: f64,
        /// LAN rate in Mbit/s per host and direction (tbf; 0 = unlimited).
        #[arg(long, default_value = "0")]
        lan_rate: f64,
        /// A site (s1 or 1) whose hosts other sites and login cannot reach, except its first host (gateway). Repeatable.
        #[arg(long)]
        firewall: Vec<String>,
        /// Compute hosts see the machine's file system (except /tmp, /run, /dev/shm).
        #[arg(long)]
        shared_fs: bool,
        /// A non-root user who can log in to every host with the testbed key (the key is
        /// made theirs; compute hosts get their home). A name the machine does not know
        /// becomes a user of the testbed's hosts only.
        #[arg(long)]
        user: Option<String>,
        /// Also hide this path (file or directory) on compute hosts, e.g. an installed
        /// gridwire under /usr. Repeatable. /usr/local is always hidden.
        #[arg(long)]
        mask: Vec<String>,
        /// Tune the compute hosts' TCP for the WAN as an administrator would:
        /// net.ipv4.tcp_slow_start_after_idle=0 and initcwnd/initrwnd 64 on the
        /// route to other sites. Off by default: stock hosts restart from a
        /// 10-segment window after an idle retransmission timeout.
        #[arg(long)]
        tcp_tuning: bool,
        /// Instance id ([a-z0-9], at most 12); default: a fresh random one.
        #[arg(long)]
        id: Option<String>,
    },
    /// Run a command on a host (enters all its namespaces with setns).
    Exec {
        /// Instance id (default: $GW_TESTBED_ID, else the only instance up).
        #[arg(long)]
        id: Option<String>,
        host: String,
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        cmd: Vec<String>,
    },
    /// Cut a host off silently: it drops every packet it receives or would send (nftables in the host), until heal.
    Partition {
        /// Instance id (default: $GW_TESTBED_ID, else the only instance up).
        #[arg(long)]
        id: Option<String>,
        host: String,
    },
    /// Undo partition.
    Heal {
        /// Instance id (default: $GW_TESTBED_ID, else the only instance up).
        #[arg(long)]
        id: Option<String>,
        host: String,
    },
    /// Remove an instance (or, with --all, every instance and its leftovers).
    Down {
        /// Instance id (default: $GW_TESTBED_ID, else the only instance up).
        #[arg(long)]
        id: Option<String>,
        #[arg(long)]
        all: bool,
    },
    /// Name any missing kernel feature, tool or package.
    Check,
    /// List instances and their hosts.
    List,
    #[command(name = "__init", hide = true)]
    Init {
        #[arg(long)]
        id: String,
        #[arg(long)]
        host: String,
    },
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::Init { id, host } => init::main(&id, &host),
        Cmd::Up {
            sites,
            hosts,
            wan_delay,
            wan_loss,
            wan_rate,
            lan_rate,
            firewall,
            shared_fs,
            user,
            mask,
            tcp_tuning,
            id,
        } => (|| {
            let firewall = firewall
                .iter()
                .map(|s| plan::parse_site(s, sites))
                .collect::<Result<Vec<u32>>>()?;
            let opts = Options {
                sites,
                hosts,
                wan_delay_ms: wan_delay,
                wan_loss_pct: wan_loss,
                wan_rate_mbit: wan_rate,
                lan_rate_mbit: lan_rate,
                firewall,
                shared_fs,
                user,
                mask,
                tcp_tuning,
            };
            up(id, opts)
        })(),
        Cmd::Exec { id, host, cmd } => {
            resolve_id(id).and_then(|id| exec::exec(&Plan::load(&id)?, &host, &cmd))
        }
        Cmd::Partition { id, host } => {
            resolve_id(id).and_then(|id| net::partition(&Plan::load(&id)?, &host, true))
        }
        Cmd::Heal { id, host } => {
            resolve_id(id).and_then(|id| net::partition(&Plan::load(&id)?, &host, false))
        }
        Cmd::Down { id, all } => down(id, all),
        Cmd::Check => check::check(),
        Cmd::List => list(),
    };
    if let Err(e) = result {
        eprintln!("gw-testbed: {e}");
        std::process::exit(1);
    }
}

/// The instance a command is about: the one given, or the only one there is.
fn resolve_id(id: Option<String>) -> Result<String> {
    if let Some(id) = id.or_else(|| std::env::var("GW_TESTBED_ID").ok()) {
        return Ok(id);
    }
    let ids = plan::instance_ids();
    match ids.len() {
        1 => Ok(ids[0].clone()),
        0 => Err("no testbed instance is up (gw-testbed up ...)".into()),
        _ => Err(format!(
            "{} instances are up ({}): name one with --id or GW_TESTBED_ID",
            ids.len(),
            ids.join(", ")
        )),
    }
}

fn down(id: Option<String>, all: bool) -> Result<()> {
    let ids = if all {
        teardown::all_ids()
    } else {
        vec![resolve_id(id)?]
    };
    let mut errors = Vec::new();
    for id in ids {
        match teardown::down(&id) {
            Ok(()) => eprintln!("gw-testbed: instance {id} removed"),
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("\n"))
    }
}

fn up(id: Option<String>, opts: Options) -> Result<()> {
    if !sys::is_root() {
        return Err("up needs root (namespaces, mounts, bridges, nftables)".into());
    }
    let missing = check::missing_tools(&opts);
    if !missing.is_empty() {
        return Err(format!("missing: {}", missing.join("; ")));
    }
    if let Some(user) = &opts.user {
        users::check_name(user)?;
    }
    let linkemu = sys::find_program("gw-linkemu", "GW_LINKEMU").ok_or(
        "gw-linkemu not found (build it: cargo build -p gridwire-linkemu; or set GW_LINKEMU)",
    )?;
    let id = id.unwrap_or_else(plan::fresh_id);
    let plan = Plan::new(&id, opts)?;
    let dir = plan.dir();
    if dir.exists() || !teardown::netns_names(&id).is_empty() {
        return Err(format!(
            "instance {id} already exists (gw-testbed down --id {id})"
        ));
    }
    sys::mkdir(plan::STATE_ROOT, 0o755)?;
    sys::mkdir(&dir.to_string_lossy(), 0o755)?;
    sys::write_file(&dir.join("instance"), &plan.to_text(), 0o644)?;
    let started = Instant::now();
    if let Err(e) = build(&plan, &linkemu) {
        let undo = teardown::down(&id).err().unwrap_or_default();
        return Err(format!("up failed: {e}\n{undo}"));
    }
    eprintln!(
        "gw-testbed: instance {id} up in {:.1} s: {} site(s) x {} host(s) + login",
        started.elapsed().as_secs_f64(),
        plan.opts.sites,
        plan.opts.hosts
    );
    println!("GW_TESTBED_ID={id}");
    println!("GW_TESTBED_MACHINES={}", ssh::machines_path(&plan));
    println!("GW_TESTBED_HOSTFILE={}", ssh::hostfile_path(&plan));
    println!("GW_TESTBED_SSH_CONFIG={}", ssh::config_path(&plan));
    println!("GW_TESTBED_BIN={}", ssh::bin_path(&plan));
    let names: Vec<&str> = plan.hosts.iter().map(|h| h.name.as_str()).collect();
    println!("GW_TESTBED_HOSTS=\"{}\"", names.join(" "));
    Ok(())
}

fn build(plan: &Plan, linkemu: &str) -> Result<()> {
    ssh::prepare(plan)?;
    if let Some(user) = &plan.opts.user {
        users::prepare(plan, user)?;
    }
    let inits = start_hosts(plan)?;
    net::build(plan, &inits, linkemu)?;
    for h in &plan.hosts {
        let pid = inits
            .get(&h.name)
            .copied()
            .ok_or_else(|| format!("host {} has no init", h.name))?;
        wait_sshd(plan, &h.name, pid)?;
    }
    Ok(())
}

/// Starts every host's init and waits until each is set up.
fn start_hosts(plan: &Plan) -> Result<BTreeMap<String, i32>> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let (tx, rx) = mpsc::channel::<(String, Option<String>)>();
    let mut children = Vec::new();
    for h in &plan.hosts {
        let log_path = plan.host_dir(&h.name).join("init.log");
        let log = std::fs::File::create(&log_path)
            .map_err(|e| format!("create {}: {e}", log_path.display()))?;
        let mut cmd = Command::new(&exe);
        cmd.args(["__init", "--id", &plan.id, "--host", &h.name])
            .current_dir("/")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log);
        // SAFETY: setsid and unshare are async-signal-safe system calls.
        unsafe {
            cmd.pre_exec(|| {
                libc::setsid();
                let flags = libc::CLONE_NEWNS
                    | libc::CLONE_NEWNET
                    | libc::CLONE_NEWUTS
                    | libc::CLONE_NEWIPC
                    | libc::CLONE_NEWPID;
                if libc::unshare(flags) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start the init of {}: {e}", h.name))?;
        let out = child.stdout.take().ok_or("no stdout pipe")?;
        let tx = tx.clone();
        let name = h.name.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                let _ = tx.send((name.clone(), Some(line)));
            }
            let _ = tx.send((name, None));
        });
        children.push(child);
    }
    drop(tx);
    let mut pids = BTreeMap::new();
    let mut ready = 0usize;
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut first_error = None;
    while ready < plan.hosts.len() || pids.len() < plan.hosts.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok((name, line)) = rx.recv_timeout(left) else {
            first_error.get_or_insert_with(|| "hosts did not start within 30 s".to_string());
            break;
        };
        match line.as_deref() {
            Some(l) if l.starts_with("PID ") => {
                let pid: i32 = l[4..]
                    .trim()
                    .parse()
                    .map_err(|_| format!("bad line {l:?}"))?;
                sys::write_file(
                    &plan.host_dir(&name).join("init.pid"),
                    &format!("{pid}\n"),
                    0o644,
                )?;
                pids.insert(name, pid);
            }
            Some("READY") => ready += 1,
            Some(l) => {
                first_error.get_or_insert_with(|| format!("host {name}: {l}"));
            }
            None => {}
        }
        if first_error.is_some() {
            break;
        }
    }
    // The first stage of each init exits as soon as it has forked PID 1.
    for mut c in children {
        let _ = c.wait();
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(pids),
    }
}

/// Waits until the host's sshd listens on port 22 (seen in the host's own
/// /proc/net/tcp, through its init).
fn wait_sshd(plan: &Plan, host: &str, pid: i32) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let tcp = std::fs::read_to_string(format!("/proc/{pid}/net/tcp")).unwrap_or_default();
        let listening = tcp.lines().skip(1).any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 3 && f[1].ends_with(":0016") && f[3] == "0A"
        });
        if listening {
            return Ok(());
        }
        if Instant::now() > deadline {
            let log =
                std::fs::read_to_string(plan.host_dir(host).join("sshd.log")).unwrap_or_default();
            return Err(format!(
                "sshd of {host} does not listen on port 22 after 10 s; its log: {}",
                log.trim()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn list() -> Result<()> {
    let ids = teardown::all_ids();
    if ids.is_empty() {
        println!("no testbed instance");
    }
    for id in ids {
        match Plan::load(&id) {
            Ok(plan) => {
                let o = &plan.opts;
                println!(
                    "{id}: {} site(s) x {} host(s) + login; WAN delay {} ms, loss {} %, rate {} Mbit/s; LAN rate {} Mbit/s; firewall {:?}; shared fs {}",
                    o.sites, o.hosts, o.wan_delay_ms, o.wan_loss_pct, o.wan_rate_mbit, o.lan_rate_mbit,
                    o.firewall.iter().map(|s| plan::site_name(*s)).collect::<Vec<_>>(), o.shared_fs
                );
                println!("  machines   {}", ssh::machines_path(&plan));
                println!("  ssh config {}", ssh::config_path(&plan));
                for h in &plan.hosts {
                    let pid = exec::init_pid(&plan, &h.name).ok();
                    let state = match pid {
                        Some(p) if sys::alive(p) => format!("init pid {p}"),
                        _ => "DOWN".to_string(),
                    };
                    let site = h.site.map(plan::site_name).unwrap_or_else(|| "-".into());
                    println!("  {:<8} {:<4} {:<12} {state}", h.name, site, h.addr);
                }
            }
            Err(_) => println!("{id}: leftovers of a broken instance (gw-testbed down --id {id})"),
        }
    }
    Ok(())
}
