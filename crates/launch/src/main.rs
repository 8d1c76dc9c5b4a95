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
mod stats;
mod sys;

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
    #[arg(long, value_name = "K", conflicts_with = "hostfile", value_parser = clap::value_parser!(u32).range(1..))]
    emulate_hosts: Option<u32>,

    /// Emulated hosts from a file: lines `name`, `name:slots` or `name slots=S`.
    #[arg(long, value_name = "FILE")]
    hostfile: Option<std::path::PathBuf>,

    /// Prefix every output line with `[rank] `.
    #[arg(long)]
    tag_output: bool,

    /// Kill the job after S seconds (also from MPIEXEC_TIMEOUT).
    #[arg(long, value_name = "S")]
    timeout: Option<f64>,

    /// Print the per-pair communication matrix at exit.
    #[arg(long)]
    stats: bool,

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
        "--hostfile",
        "--timeout",
        "--bind-to",
    ];
    let mut expect_value = false;
    for (i, a) in args.into_iter().enumerate() {
        if i == 0 || options_over {
            out.push(a);
            continue;
        }
        if expect_value {
            expect_value = false;
            out.push(a);
            continue;
        }
        if a == "--" {
            options_over = true;
            out.push(a);
            continue;
        }
        let a = if a == "-np" { "-n".to_string() } else { a };
        if takes_value.contains(&a.as_str()) {
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
    let cli = Cli::parse_from(normalize_args(std::env::args().collect()));
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
    } else if let Some(path) = &cli.hostfile {
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
    let timeout = match (cli.timeout, std::env::var("MPIEXEC_TIMEOUT")) {
        (Some(t), _) => Some(parse_timeout(&t.to_string(), "--timeout")?),
        (None, Ok(v)) if !v.trim().is_empty() => Some(parse_timeout(&v, "MPIEXEC_TIMEOUT")?),
        _ => None,
    };
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
        binding,
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
        assert!(Cli::try_parse_from(v("gwrun -n 2 --emulate-hosts 2 --hostfile f prog")).is_err());
        assert!(parse_timeout("-1", "x").is_err());
        assert!(parse_timeout("abc", "x").is_err());
        assert_eq!(
            parse_timeout("1.5", "x").unwrap(),
            Duration::from_millis(1500)
        );
    }
}
