//! `gwrun`: gridwire's launcher.
//!
//! Starts N processes of one program on this machine, optionally spread
//! over *emulated* hosts, and serves them the PMI-1 wire protocol over a
//! socket in `PMI_FD` (the same interface MPICH's Hydra offers, so programs
//! built on gridwire start under either). It forwards their output, tears
//! the job down as soon as one rank fails, and removes what the ranks leave
//! behind in `/dev/shm`. Its own messages go to stderr, prefixed `gwrun: `;
//! stdout carries only the ranks' output.

mod binding;
mod job;
mod mpich_abi;
mod placement;

use gridwire_launch::sys;

use std::time::Duration;

use clap::Parser;

use crate::job::{say, JobSpec};
use crate::placement::Placement;

#[derive(Parser, Debug)]
#[command(
    name = "gwrun",
    version,
    about = "Run an N-process gridwire (or any PMI-1) job on this machine",
    after_help = "Environment given to each rank: PMI_FD, PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS, \
                  GW_JOB_ID, GW_JOB_SECRET, and GW_HOST_ID with --emulate-hosts/--hostfile.\n\
                  MPIEXEC_TIMEOUT=S is honoured like --timeout S.\n\
                  Exit status: 0, or the status of the rank whose failure ended the job (128+signal when killed; \
                  a rank killed by a signal is taken as the cause of its peers' aborts), \
                  124 on timeout, 128+signal when gwrun itself is interrupted, 127/126 when the program cannot be run."
)]
struct Cli {
    /// Number of processes to start (`-np` is accepted too).
    #[arg(short = 'n', long = "np", value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100_000))]
    n: u32,

    /// Spread the ranks in consecutive blocks over K emulated hosts.
    #[arg(long, value_name = "K", conflicts_with_all = ["emulate_hostfile", "machines"], value_parser = clap::value_parser!(u32).range(1..))]
    emulate_hosts: Option<u32>,

    /// Emulated hosts from a file: lines `name`, `name:slots` or `name slots=S`.
    #[arg(long, value_name = "FILE", conflicts_with = "machines")]
    emulate_hostfile: Option<std::path::PathBuf>,

    /// Run on the real hosts of a machines file (Hydra `host[:N]` or Open
    /// MPI `host slots=N` lines, `[site NAME] start=ssh|local …` sections;
    /// see docs/machines.md). Also `--hostfile`, `--machinefile`.
    #[arg(short = 'f', long = "machines", visible_aliases = ["hostfile", "machinefile"], value_name = "FILE")]
    machines: Option<std::path::PathBuf>,

    /// With -f: `slot` (default) fills each host's slots in file order,
    /// `host` places ranks round-robin over the hosts.
    #[arg(
        long,
        value_name = "HOW",
        default_value = "slot",
        requires = "machines"
    )]
    map_by: String,

    /// With -f: allow more ranks than slots (they wrap around the hosts).
    #[arg(long, requires = "machines")]
    oversubscribe: bool,

    /// Working directory of the ranks (default: gwrun's own where a host
    /// has it, else the home directory). Also `-wdir`.
    #[arg(long, value_name = "DIR")]
    wdir: Option<String>,

    /// Set VAR=VAL in every rank's environment (`-env`, `-genv`; the rest
    /// of gwrun's environment is passed on as Hydra does).
    #[arg(long = "env", visible_alias = "genv", num_args = 2, value_names = ["VAR", "VAL"], action = clap::ArgAction::Append)]
    env: Vec<String>,

    /// With -f: stage the program (and its gridwire libraries) to every
    /// host, even where it exists. Without it, hosts that lack the program
    /// get it staged.
    #[arg(long, requires = "machines")]
    stage: bool,

    /// With -f: also stage these files (comma-separated) into the ranks'
    /// staging directory.
    #[arg(long, value_name = "F,…", value_delimiter = ',', requires = "machines")]
    stage_files: Vec<std::path::PathBuf>,

    /// Network interfaces the ranks use (GW_IFACE syntax: `eth0,eth1` to
    /// include, `^docker0` to exclude).
    #[arg(long, value_name = "LIST")]
    iface: Option<String>,

    /// Prefix every output line with `[rank] ` (`[rank@host] ` with -f).
    #[arg(long)]
    tag_output: bool,

    /// Kill the job after S seconds (also from MPIEXEC_TIMEOUT).
    #[arg(long, value_name = "S")]
    timeout: Option<f64>,

    /// Print the per-pair communication matrix at exit.
    #[arg(long)]
    stats: bool,

    /// Write the communication matrix as a picture at exit: FILE.svg, or
    /// FILE.html (the picture and a table of every link). Ranks grouped by
    /// site and host; each cell the method stack, messages, bytes and the
    /// round trip the transport measured.
    #[arg(long, value_name = "FILE")]
    report: Option<std::path::PathBuf>,

    /// Pin each rank to one CPU: none (default), core (rank r on the r-th
    /// CPU gwrun may use, cycling) or user:A,B,... (rank r on the r-th CPU
    /// of the list, cycling), as MPICH's -bind-to.
    #[arg(long, value_name = "HOW", default_value = "none")]
    bind_to: String,

    /// The program and its arguments.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "PROGRAM [ARGS]..."
    )]
    command: Vec<String>,
}

/// Accepts MPICH/Open MPI's `-np N` spelling: rewritten to `-n` as long as
/// it appears before the program.
fn normalize_args(args: Vec<String>) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut options_over = false;
    let takes_value = [
        "-n",
        "--np",
        "--emulate-hosts",
        "--emulate-hostfile",
        "-f",
        "--machines",
        "--hostfile",
        "--machinefile",
        "--timeout",
        "--bind-to",
        "--map-by",
        "--wdir",
        "--stage-files",
        "--iface",
    ];
    // Options that take two values (`-env VAR VAL`).
    let takes_two = ["--env", "--genv"];
    let mut expect_two = false;
    let mut expect_value = false;
    for (i, a) in args.into_iter().enumerate() {
        if i == 0 || options_over {
            out.push(a);
            continue;
        }
        if expect_value {
            expect_value = expect_two;
            expect_two = false;
            out.push(a);
            continue;
        }
        if a == "--" {
            options_over = true;
            out.push(a);
            continue;
        }
        // MPICH's single-dash long options.
        let a = match a.as_str() {
            "-np" => "-n".to_string(),
            "-wdir" => "--wdir".to_string(),
            "-env" => "--env".to_string(),
            "-genv" => "--genv".to_string(),
            "-hostfile" | "-machinefile" => "--hostfile".to_string(),
            _ => a,
        };
        if takes_two.contains(&a.as_str()) {
            expect_value = true;
            expect_two = true;
        } else if takes_value.contains(&a.as_str()) {
            expect_value = true;
        } else if !a.starts_with('-') {
            options_over = true;
        }
        out.push(a);
    }
    out
}

fn parse_timeout(s: &str, source: &str) -> Result<Duration, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() && v < 1e9 => Ok(Duration::from_secs_f64(v)),
        _ => Err(format!(
            "bad timeout {s:?} in {source}: expected a positive number of seconds"
        )),
    }
}

fn main() {
    if std::env::args().nth(1).as_deref() == Some("--proxy") {
        std::process::exit(gridwire_launch::grid::proxy::run());
    }
    if std::env::args().nth(1).as_deref() == Some("--relay") {
        std::process::exit(gridwire_launch::grid::relay::run());
    }
    let cli = Cli::parse_from(normalize_args(std::env::args().collect()));
    if cli.machines.is_some() {
        std::process::exit(match build_grid_spec(cli) {
            Ok(spec) => gridwire_launch::grid::frontend::run(spec),
            Err(msg) => {
                say(&msg);
                2
            }
        });
    }
    std::process::exit(match build_spec(cli) {
        Ok(spec) => job::run(spec),
        Err(msg) => {
            say(&msg);
            2
        }
    });
}

fn build_spec(cli: Cli) -> Result<JobSpec, String> {
    let n = cli.n as usize;
    let real = placement::real_host_id();
    let placement = if let Some(k) = cli.emulate_hosts {
        Placement::emulate(n, k as usize).map_err(|e| e.to_string())?
    } else if let Some(path) = &cli.emulate_hostfile {
        let text = std::fs::read_to_string(path).map_err(|e| {
            format!(
                "cannot read hostfile {}: {}",
                path.display(),
                sys::os_message(&e)
            )
        })?;
        Placement::from_hostfile(n, &text).map_err(|e| format!("{}: {e}", path.display()))?
    } else {
        let mut p = Placement::local(n);
        p.hosts[0] = real.split(':').next().unwrap_or("localhost").to_string();
        p
    };
    let timeout = job_timeout(&cli)?;
    if !cli.env.is_empty() || cli.wdir.is_some() || cli.iface.is_some() {
        return Err("-env/-genv, -wdir and --iface apply to -f jobs; for a job on this machine set them in gwrun's own environment and directory".into());
    }
    let binding = binding::Binding::parse(&cli.bind_to, &binding::allowed_cpus())
        .map_err(|e| e.to_string())?;
    let mut command = cli.command.into_iter();
    let program = command.next().ok_or("no program given")?;
    Ok(JobSpec {
        n,
        program,
        args: command.collect(),
        placement,
        real_host_id: real,
        tag_output: cli.tag_output,
        timeout,
        stats: cli.stats,
        report: report_path(cli.report.as_deref())?,
        binding,
    })
}

/// `--report FILE`, checked before the job starts (a bad name is an error
/// now, not after the job ran).
fn report_path(report: Option<&std::path::Path>) -> Result<Option<std::path::PathBuf>, String> {
    match report {
        Some(p) => {
            gridwire_launch::report::Format::of(p)?;
            Ok(Some(p.to_path_buf()))
        }
        None => Ok(None),
    }
}

fn job_timeout(cli: &Cli) -> Result<Option<Duration>, String> {
    Ok(match (cli.timeout, std::env::var("MPIEXEC_TIMEOUT")) {
        (Some(t), _) => Some(parse_timeout(&t.to_string(), "--timeout")?),
        (None, Ok(v)) if !v.trim().is_empty() => Some(parse_timeout(&v, "MPIEXEC_TIMEOUT")?),
        _ => None,
    })
}

/// The heartbeat timeout of grid jobs: `GW_HEARTBEAT_TIMEOUT` seconds, 10 by default.
fn heartbeat_timeout() -> Result<Duration, String> {
    match std::env::var("GW_HEARTBEAT_TIMEOUT") {
        Ok(v) if !v.trim().is_empty() => match v.trim().parse::<f64>() {
            Ok(s) if (0.5..=3600.0).contains(&s) => Ok(Duration::from_secs_f64(s)),
            _ => Err(format!(
                "bad GW_HEARTBEAT_TIMEOUT {v:?}: expected seconds between 0.5 and 3600"
            )),
        },
        _ => Ok(Duration::from_secs(10)),
    }
}

fn build_grid_spec(cli: Cli) -> Result<gridwire_launch::grid::frontend::GridSpec, String> {
    use gridwire_launch::hostmap::MapBy;
    use gridwire_launch::machines::Machines;
    let path = cli.machines.clone().ok_or("no machines file")?;
    let machines = Machines::load(&path)?;
    let map_by = MapBy::parse(&cli.map_by)?;
    if cli.bind_to != "none" {
        return Err("--bind-to is not supported with -f yet".into());
    }
    let timeout = job_timeout(&cli)?;
    let env = cli
        .env
        .chunks(2)
        .map(|kv| (kv[0].clone(), kv.get(1).cloned().unwrap_or_default()))
        .collect::<Vec<_>>();
    for (k, _) in &env {
        if k.is_empty() || k.contains('=') || k.contains('\0') {
            return Err(format!("-env: bad variable name {k:?}"));
        }
    }
    let mut command = cli.command.into_iter();
    let program = command.next().ok_or("no program given")?;
    Ok(gridwire_launch::grid::frontend::GridSpec {
        n: cli.n as usize,
        program,
        args: command.collect(),
        wdir: cli.wdir,
        env,
        tag_output: cli.tag_output,
        timeout,
        stats: cli.stats,
        report: report_path(cli.report.as_deref())?,
        machines,
        map_by,
        oversubscribe: cli.oversubscribe,
        force_stage: cli.stage,
        stage_files: cli.stage_files,
        iface: cli.iface,
        heartbeat: heartbeat_timeout()?,
        flat: match std::env::var("GW_LAUNCH_TREE").as_deref() {
            Ok("flat") => true,
            Ok("site") | Ok("") | Err(_) => false,
            Ok(other) => {
                return Err(format!(
                    "bad GW_LAUNCH_TREE {other:?}: expected site (default) or flat"
                ))
            }
        },
        direct: match std::env::var("GW_LAUNCH_DIRECT").as_deref() {
            Err(_) | Ok("") => None,
            Ok(v) => Some(
                v.parse::<usize>()
                    .ok()
                    .filter(|&d| d <= 64)
                    .ok_or_else(|| {
                        format!("bad GW_LAUNCH_DIRECT {v:?}: expected a number of hosts, 0 to 64")
                    })?,
            ),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn np_alias_only_before_program() {
        assert_eq!(
            normalize_args(v("gwrun -np 4 prog -np 3")),
            v("gwrun -n 4 prog -np 3")
        );
        assert_eq!(
            normalize_args(v("gwrun --tag-output -np 2 -- prog")),
            v("gwrun --tag-output -n 2 -- prog")
        );
        assert_eq!(
            normalize_args(v("gwrun -n 2 -- -np")),
            v("gwrun -n 2 -- -np")
        );
    }

    #[test]
    fn cli_parses() {
        let c = Cli::try_parse_from(normalize_args(v(
            "gwrun -np 3 --emulate-hosts 2 prog --flag x",
        )))
        .unwrap();
        assert_eq!(c.n, 3);
        assert_eq!(c.emulate_hosts, Some(2));
        assert_eq!(c.command, v("prog --flag x"));
        assert!(Cli::try_parse_from(v("gwrun -n 0 prog")).is_err());
        assert!(Cli::try_parse_from(v("gwrun -n 2")).is_err());
        assert!(
            Cli::try_parse_from(v("gwrun -n 2 --emulate-hosts 2 --emulate-hostfile f prog"))
                .is_err()
        );
        assert!(Cli::try_parse_from(v("gwrun -n 2 --emulate-hosts 2 -f f prog")).is_err());
        let c = Cli::try_parse_from(normalize_args(v(
            "gwrun -np 2 -f m -genv A 1 -env B 2 -wdir /tmp prog x",
        )))
        .unwrap();
        assert_eq!(c.env, v("A 1 B 2"));
        assert_eq!(c.wdir.as_deref(), Some("/tmp"));
        assert_eq!(c.command, v("prog x"));
        assert!(parse_timeout("-1", "x").is_err());
        assert!(parse_timeout("abc", "x").is_err());
        assert_eq!(
            parse_timeout("1.5", "x").unwrap(),
            Duration::from_millis(1500)
        );
    }
}
