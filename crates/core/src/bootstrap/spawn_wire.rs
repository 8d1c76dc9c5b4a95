//! The PMI-1 spawn request (`PMI_Spawn_multiple`), shared by the client
//! ([`super::pmi::Pmi1::spawn`]) and `gwrun`'s server: one `mcmd=spawn …
//! endcmd` block per program, each `key=value` on a line of its own (so an
//! argument may hold spaces), numbered by `totspawns`/`spawnssofar`; the
//! launcher answers the last block with one `cmd=spawn_result`. The
//! key-value pairs to put into the new processes' space before they start
//! (`preput_*`) ride in every block, as MPICH's client sends them.

use super::pmi_wire::Command;

/// One program of a spawn: what `MPI_Comm_spawn_multiple` names per entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnApp {
    pub command: String,
    pub args: Vec<String>,
    pub maxprocs: u32,
    pub info: Vec<(String, String)>,
}

/// Most programs, arguments or info pairs one spawn request may carry:
/// the launcher parses what a process sends, so everything is bounded.
pub const MAX_SPAWN_ITEMS: usize = 1024;

fn line_safe(s: &str) -> bool {
    !s.bytes().any(|b| b == b'\n' || b == b'\r' || b == 0)
}

/// The `mcmd=spawn` blocks for `apps`; an argument or value holding a
/// newline (which the wire cannot carry) is an error.
pub fn encode_spawn(apps: &[SpawnApp], preput: &[(String, String)]) -> Result<String, String> {
    if apps.is_empty() || apps.len() > MAX_SPAWN_ITEMS || preput.len() > MAX_SPAWN_ITEMS {
        return Err(format!(
            "a spawn names 1 to {MAX_SPAWN_ITEMS} programs (got {})",
            apps.len()
        ));
    }
    let mut out = String::new();
    for (i, app) in apps.iter().enumerate() {
        let mut lines = vec![
            format!("nprocs={}", app.maxprocs),
            format!("execname={}", app.command),
            format!("totspawns={}", apps.len()),
            format!("spawnssofar={}", i + 1),
            format!("argcnt={}", app.args.len()),
        ];
        for (k, a) in app.args.iter().enumerate() {
            lines.push(format!("arg{}={a}", k + 1));
        }
        lines.push(format!("preput_num={}", preput.len()));
        for (k, (key, val)) in preput.iter().enumerate() {
            lines.push(format!("preput_key_{k}={key}"));
            lines.push(format!("preput_val_{k}={val}"));
        }
        lines.push(format!("info_num={}", app.info.len()));
        for (k, (key, val)) in app.info.iter().enumerate() {
            lines.push(format!("info_key_{k}={key}"));
            lines.push(format!("info_val_{k}={val}"));
        }
        if let Some(bad) = lines.iter().find(|l| !line_safe(l)) {
            return Err(format!("a spawn argument cannot be sent: {bad:?}"));
        }
        if app.command.is_empty() || app.args.len() > MAX_SPAWN_ITEMS {
            return Err("a spawned program needs a name and at most 1024 arguments".into());
        }
        out.push_str("mcmd=spawn\n");
        for l in lines {
            out.push_str(&l);
            out.push('\n');
        }
        out.push_str("endcmd\n");
    }
    Ok(out)
}

/// The PMI-2 `spawn` command for `apps` (what MPICH's `PMI2_Job_Spawn`
/// sends and Slurm's pmi2 plugin parses, strictly in this order): `ncmds`,
/// `preputcount`, `ppkeyI`/`ppvalI`, then per program `subcmd`,
/// `maxprocs`, `argc`, `argvJ` (from 0), `infokeycount`,
/// `infokeyJ`/`infovalJ`. The wire's own limits (no `;`, the frame's
/// length) are checked when it is encoded.
pub fn encode_pmi2_spawn(
    apps: &[SpawnApp],
    preput: &[(String, String)],
) -> Result<Command, String> {
    if apps.is_empty() || apps.len() > MAX_SPAWN_ITEMS || preput.len() > MAX_SPAWN_ITEMS {
        return Err(format!(
            "a spawn names 1 to {MAX_SPAWN_ITEMS} programs (got {})",
            apps.len()
        ));
    }
    let mut c = Command::new("spawn")
        .arg("ncmds", apps.len())
        .arg("preputcount", preput.len());
    for (i, (k, v)) in preput.iter().enumerate() {
        c = c.arg(&format!("ppkey{i}"), k).arg(&format!("ppval{i}"), v);
    }
    for app in apps {
        if app.command.is_empty()
            || app.args.len() > MAX_SPAWN_ITEMS
            || app.info.len() > MAX_SPAWN_ITEMS
        {
            return Err(
                "a spawned program needs a name and at most 1024 arguments and info pairs".into(),
            );
        }
        c = c
            .arg("subcmd", &app.command)
            .arg("maxprocs", app.maxprocs)
            .arg("argc", app.args.len());
        for (j, a) in app.args.iter().enumerate() {
            c = c.arg(&format!("argv{j}"), a);
        }
        c = c.arg("infokeycount", app.info.len());
        for (j, (k, v)) in app.info.iter().enumerate() {
            c = c
                .arg(&format!("infokey{j}"), k)
                .arg(&format!("infoval{j}"), v);
        }
    }
    Ok(c)
}

/// One parsed block: the program, the block's number and total, and the
/// pairs to put for the new processes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnBlock {
    pub app: SpawnApp,
    pub total: usize,
    pub index: usize,
    pub preput: Vec<(String, String)>,
}

fn count(cmd: &Command, key: &str) -> Result<usize, String> {
    let n = cmd.require_int(key)?;
    usize::try_from(n)
        .ok()
        .filter(|&n| n <= MAX_SPAWN_ITEMS)
        .ok_or_else(|| format!("spawn: {key}={n} is out of range (0..={MAX_SPAWN_ITEMS})"))
}

fn pairs(cmd: &Command, what: &str, n: usize) -> Result<Vec<(String, String)>, String> {
    (0..n)
        .map(|k| {
            Ok((
                cmd.require(&format!("{what}_key_{k}"))?.to_string(),
                cmd.require(&format!("{what}_val_{k}"))?.to_string(),
            ))
        })
        .collect()
}

/// Reads one `mcmd=spawn` block (as [`super::pmi_wire::LineBuffer`] returns it).
pub fn parse_spawn(cmd: &Command) -> Result<SpawnBlock, String> {
    let maxprocs = u32::try_from(cmd.require_int("nprocs")?)
        .map_err(|_| "spawn: nprocs is negative or too large".to_string())?;
    let command = cmd.require("execname")?.to_string();
    let total = count(cmd, "totspawns")?.max(1);
    let index = count(cmd, "spawnssofar")?;
    if index == 0 || index > total {
        return Err(format!("spawn: spawnssofar={index} of totspawns={total}"));
    }
    let argc = count(cmd, "argcnt")?;
    let args = (1..=argc)
        .map(|k| cmd.require(&format!("arg{k}")).map(str::to_string))
        .collect::<Result<Vec<_>, _>>()?;
    let preput = pairs(cmd, "preput", count(cmd, "preput_num").unwrap_or(0))?;
    let info = pairs(cmd, "info", count(cmd, "info_num").unwrap_or(0))?;
    Ok(SpawnBlock {
        app: SpawnApp {
            command,
            args,
            maxprocs,
            info,
        },
        total,
        index,
        preput,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bootstrap::pmi_wire::LineBuffer;

    #[test]
    fn spawn_blocks_roundtrip() {
        let apps = vec![
            SpawnApp {
                command: "/bin/echo".into(),
                args: vec!["a b".into(), "c=d".into()],
                maxprocs: 2,
                info: vec![("wdir".into(), "/tmp".into())],
            },
            SpawnApp {
                command: "./x".into(),
                args: vec![],
                maxprocs: 1,
                info: vec![],
            },
        ];
        let pre = vec![("gw_parent".into(), "8:0,1".into())];
        let text = encode_spawn(&apps, &pre).unwrap();
        let mut lb = LineBuffer::new();
        lb.push(text.as_bytes());
        for (i, app) in apps.iter().enumerate() {
            let cmd = lb.next_command().unwrap().unwrap();
            let b = parse_spawn(&cmd).unwrap();
            assert_eq!(&b.app, app);
            assert_eq!((b.index, b.total), (i + 1, 2));
            assert_eq!(b.preput, pre);
        }
        assert!(lb.next_command().is_none());
    }

    /// The PMI-2 form keeps Slurm's order (it parses by position).
    #[test]
    fn pmi2_spawn_is_in_slurms_order() {
        let apps = vec![
            SpawnApp {
                command: "/bin/prog".into(),
                args: vec!["child".into(), "x".into()],
                maxprocs: 2,
                info: vec![("wdir".into(), "/tmp".into())],
            },
            SpawnApp {
                command: "other".into(),
                args: vec![],
                maxprocs: 1,
                info: vec![],
            },
        ];
        let pre = vec![("gw_parent_port".to_string(), "gwport:1:2".to_string())];
        let c = encode_pmi2_spawn(&apps, &pre).unwrap();
        assert_eq!(c.name, "spawn");
        let keys: Vec<&str> = c.args.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "ncmds",
                "preputcount",
                "ppkey0",
                "ppval0",
                "subcmd",
                "maxprocs",
                "argc",
                "argv0",
                "argv1",
                "infokeycount",
                "infokey0",
                "infoval0",
                "subcmd",
                "maxprocs",
                "argc",
                "infokeycount"
            ]
        );
        assert_eq!(c.get("ncmds"), Some("2"));
        assert_eq!(c.get("ppval0"), Some("gwport:1:2"));
        assert_eq!(c.get("argv1"), Some("x"));
        assert!(encode_pmi2_spawn(&[], &pre).is_err());
        let nameless = SpawnApp {
            command: String::new(),
            args: vec![],
            maxprocs: 1,
            info: vec![],
        };
        assert!(encode_pmi2_spawn(&[nameless], &[]).is_err());
    }

    #[test]
    fn hostile_blocks_are_errors() {
        let bad = SpawnApp {
            command: "x".into(),
            args: vec!["a\nb".into()],
            maxprocs: 1,
            info: vec![],
        };
        assert!(encode_spawn(&[bad], &[]).is_err());
        assert!(encode_spawn(&[], &[]).is_err());
        let c = Command::new("spawn")
            .arg("nprocs", 1)
            .arg("execname", "x")
            .arg("totspawns", 1)
            .arg("spawnssofar", 1)
            .arg("argcnt", 99999);
        assert!(parse_spawn(&c).is_err());
        let c = Command::new("spawn").arg("nprocs", -1).arg("execname", "x");
        assert!(parse_spawn(&c).is_err());
        let c = Command::new("spawn")
            .arg("nprocs", 1)
            .arg("execname", "x")
            .arg("totspawns", 1)
            .arg("spawnssofar", 2)
            .arg("argcnt", 0);
        assert!(parse_spawn(&c).is_err());
    }
}
