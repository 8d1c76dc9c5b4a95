//! Parameters as data: every knob of the runtime is one [`ParamDecl`] row,
//! declared beside the code it tunes, collected in [`all_decls`], read from
//! the environment with the one prefix `GW_`, validated, and listed by `gwinfo`.
//!
//! Reading happens once, when a [`Params`] is built; the hot path looks values
//! up in a small vector, never in the environment.

use crate::error::{Error, Result};
use std::collections::HashMap;

/// The prefix of every environment variable the runtime reads.
pub const PREFIX: &str = "GW_";

/// What kind of value a parameter holds; decides parsing and validation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An unsigned integer in `min..=max`.
    UInt { min: u64, max: u64 },
    /// A byte size; accepts suffixes `k`, `m`, `g` (powers of 1024).
    Size { min: u64, max: u64 },
    /// `0/1`, `yes/no`, `true/false`, `on/off`.
    Bool,
    /// One of a fixed set of words.
    Choice(&'static [&'static str]),
    /// Free text (validated by the code that uses it).
    Text,
}

/// One row of the parameter table.
#[derive(Debug, Clone, Copy)]
pub struct ParamDecl {
    /// Name without prefix, upper case: `TCP_SNDBUF` is read from `GW_TCP_SNDBUF`.
    pub name: &'static str,
    /// Default, written as a user would write it.
    pub default: &'static str,
    pub kind: Kind,
    pub help: &'static str,
}

impl ParamDecl {
    /// The environment variable this parameter is read from.
    pub fn var(&self) -> String {
        format!("{PREFIX}{}", self.name)
    }
}

/// Parameters of the runtime itself (methods declare theirs in their own modules).
pub const CORE_PARAMS: &[ParamDecl] = &[
    ParamDecl {
        name: "METHODS",
        default: "",
        kind: Kind::Text,
        help: "Comma-separated communication methods to use, in order of preference \
               (e.g. `tcp` or `tcp,shm`). Empty = every built-in method, fastest first.",
    },
    ParamDecl {
        name: "FOREIGN_PEERS",
        default: "64",
        kind: Kind::UInt {
            min: 0,
            max: 65_536,
        },
        help: "Room for processes of other jobs this process talks to over the life of the job \
               (MPI_Comm_accept/connect between separately started jobs; ids are not reused).",
    },
    ParamDecl {
        name: "SKIP_POLL",
        default: "0",
        kind: Kind::UInt {
            min: 0,
            max: 1_000_000,
        },
        help: "Poll expensive methods (sockets) only every N progress iterations; shared memory \
               is polled every iteration. 0 = adaptive (grows while sockets are quiet).",
    },
    ParamDecl {
        name: "SPIN_US",
        default: "auto",
        kind: Kind::Text,
        help: "Microseconds of idleness a waiting thread keeps polling before it yields. \
               `auto` = 2000 when every rank on this machine has a core, else 0.",
    },
    ParamDecl {
        name: "SPIN_ITERS",
        default: "50",
        kind: Kind::UInt {
            min: 0,
            max: 100_000_000,
        },
        help: "After GW_SPIN_US, idle progress iterations spent spinning before a waiting thread \
               yields and then sleeps on the sockets, so oversubscribed jobs do not starve. \
               Small: a rank whose partner shares its core spins these before handing it over, \
               on every message (2000 made such a pair take 80 us per message).",
    },
    ParamDecl {
        name: "LINK_TIMEOUT",
        default: "10",
        kind: Kind::UInt { min: 1, max: 3600 },
        help: "Seconds a link between hosts may hold unacknowledged messages while its \
               transport also sees no acknowledgement before it is declared broken and failed \
               over (docs/wan.md). Large enough that a loaded machine does not fail over.",
    },
    ParamDecl {
        name: "FAILOVER",
        default: "on",
        kind: Kind::Bool,
        help: "Sequence messages between hosts end to end and replace a broken link by the next \
               applicable method or a relay (docs/wan.md). `off`: a broken link fails.",
    },
    ParamDecl {
        name: "YIELD_US",
        default: "20000",
        kind: Kind::UInt {
            min: 0,
            max: 10_000_000,
        },
        help: "After the spinning, microseconds of idleness a waiting thread spends yielding its \
               core (sched_yield) before it sleeps on the sockets in short slices. Yielding hands \
               the core straight to a peer rank that shares it, as MPICH does when \
               oversubscribed; sleeping costs up to a slice per message.",
    },
    ParamDecl {
        name: "HOST_ID",
        default: "",
        kind: Kind::Text,
        help: "Host identity used for shared-memory applicability, in place of hostname plus \
               boot id (the network, IPC and PID namespaces are always appended). \
               Set by `gwrun --emulate-hosts` to place ranks on emulated hosts.",
    },
    ParamDecl {
        name: "SITE",
        default: "",
        kind: Kind::Text,
        help: "Name of the site this process runs at (up to 64 printable ASCII characters, no \
               spaces); empty = \"default\". Set by `gwrun -f` from the machines file; under \
               Hydra or Slurm set it per host. `MPI_Comm_split_type` groups ranks by it.",
    },
    ParamDecl {
        name: "IFACE",
        default: "",
        kind: Kind::Text,
        help: "Network interfaces whose addresses tcp and udp publish and use to reach other \
               hosts: comma-separated names (`eth0,ib0`) to use only those, or `^name` to leave \
               one out (`^docker0,^virbr0`); a trailing `*` matches a prefix. Empty = every \
               interface that is up. Loopback is used only within one network namespace.",
    },
    ParamDecl {
        name: "JOB_SECRET",
        default: "",
        kind: Kind::Text,
        help: "Hex job secret for connection authentication, set by the launcher. \
               Empty = derived from the PMI kvs name (weak; a warning is printed).",
    },
    ParamDecl {
        name: "WORLD",
        default: "",
        kind: Kind::Text,
        help: "Set by the launcher: `FIRST:COUNT:CAPACITY` = this process's world is contexts \
               FIRST..FIRST+COUNT-1 of a job whose ids run up to CAPACITY-1 (the rest are for \
               processes spawned later, `MPI_Comm_spawn`). Empty = the PMI rank and size, no room.",
    },
    ParamDecl {
        name: "JOB_ID",
        default: "",
        kind: Kind::Text,
        help:
            "Job identifier used to name shared-memory segments (so the launcher can remove them). \
               Empty = derived from the PMI kvs name.",
    },
    ParamDecl {
        name: "PMI",
        default: "auto",
        kind: Kind::Choice(crate::bootstrap::PMI_CHOICES),
        help: "Bootstrap protocol: `pmi1`, `pmi2`, `pmix` (OpenPMIx's libpmix.so.2, loaded at \
               run time), or `auto` = PMI-1/PMI-2 when the launcher hands over a PMI socket \
               (PMI_FD; PMI-2 if PMI_VERSION=2 or SLURM_MPI_TYPE=pmi2), else PMIx when a PMIx \
               server announces itself (PMIX_NAMESPACE or PMIX_SERVER_URI*: Open MPI's mpirun, \
               `srun --mpi=pmix`), else a singleton.",
    },
    ParamDecl {
        name: "PMI_TIMEOUT",
        default: "300",
        kind: Kind::Text,
        help: "Seconds (a decimal number) the bootstrap client waits for one reply of the \
               launcher before it fails with an error: a barrier waits for the slowest rank's \
               start-up, and a launcher that never answers must end in an error, not a hang.",
    },
    ParamDecl {
        name: "VERBOSE",
        default: "0",
        kind: Kind::UInt { min: 0, max: 3 },
        help:
            "Diagnostics on stderr: 1 = method selection per peer, 2 = connections, 3 = everything.",
    },
];

/// Every parameter table built in, in the order `gwinfo` lists them.
pub fn all_decls() -> Vec<&'static ParamDecl> {
    let mut v: Vec<&'static ParamDecl> = CORE_PARAMS.iter().collect();
    for m in crate::method::registry() {
        v.extend(m.params.iter());
    }
    v.extend(crate::method::transform::policy::PARAMS.iter());
    v.extend(crate::method::relay::PARAMS.iter());
    v.extend(crate::context::measured::PARAMS.iter());
    for t in crate::method::transform::registry() {
        v.extend(t.params.iter());
    }
    v
}

/// Parsed values of every declared parameter.
#[derive(Debug, Clone)]
pub struct Params {
    values: HashMap<&'static str, Value>,
    /// Which values came from the environment rather than the default (for `gwinfo`).
    from_env: Vec<&'static str>,
}

#[derive(Debug, Clone, PartialEq)]
enum Value {
    Num(u64),
    Bool(bool),
    Text(String),
}

impl Params {
    /// Reads and validates every declared parameter from the process
    /// environment, where a value written through MPI_T ([`set_override`])
    /// takes the place of the variable.
    pub fn from_env() -> Result<Self> {
        Self::from_lookup(lookup_raw)
    }

    /// Reads parameters through `lookup` (tests pass a map instead of the environment).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let mut values = HashMap::new();
        let mut from_env = Vec::new();
        for d in all_decls() {
            let var = d.var();
            let (raw, env) = match lookup(&var) {
                Some(v) => (v, true),
                None => (d.default.to_string(), false),
            };
            let v = parse(d, &raw).map_err(|reason| Error::BadParam {
                var: var.clone(),
                value: raw.clone(),
                reason,
            })?;
            if env {
                from_env.push(d.name);
            }
            values.insert(d.name, v);
        }
        Ok(Params { values, from_env })
    }

    fn get(&self, name: &str) -> &Value {
        self.values.get(name).unwrap_or_else(|| {
            panic!("parameter {name} is not declared in any table (programming error)")
        })
    }

    /// A numeric (`UInt` or `Size`) parameter.
    pub fn num(&self, name: &str) -> u64 {
        match self.get(name) {
            Value::Num(n) => *n,
            other => panic!("parameter {name} is not numeric: {other:?} (programming error)"),
        }
    }

    /// A boolean parameter.
    pub fn flag(&self, name: &str) -> bool {
        match self.get(name) {
            Value::Bool(b) => *b,
            other => panic!("parameter {name} is not boolean: {other:?} (programming error)"),
        }
    }

    /// A text or choice parameter.
    pub fn text(&self, name: &str) -> &str {
        match self.get(name) {
            Value::Text(s) => s,
            other => panic!("parameter {name} is not text: {other:?} (programming error)"),
        }
    }

    /// Whether the value came from the environment.
    pub fn is_set(&self, name: &str) -> bool {
        self.from_env.contains(&name)
    }

    /// The value formatted for display.
    pub fn display(&self, name: &str) -> String {
        match self.get(name) {
            Value::Num(n) => n.to_string(),
            Value::Bool(b) => if *b { "1" } else { "0" }.to_string(),
            Value::Text(s) => s.clone(),
        }
    }
}

/// Values written at run time (by a tool through MPI_T), by variable name
/// (`GW_TCP_SNDBUF`). They win over the environment for every later read:
/// [`Params::from_env`] and [`lookup_raw`]. Rarely written and read only
/// when a setting is read (init, communicator creation), never per message.
static OVERRIDES: std::sync::Mutex<Vec<(String, String)>> = std::sync::Mutex::new(Vec::new());

/// The raw text of variable `var` (`GW_...`): its override, else the environment.
pub fn lookup_raw(var: &str) -> Option<String> {
    let o = OVERRIDES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, v)) = o.iter().find(|(k, _)| k == var) {
        return Some(v.clone());
    }
    drop(o);
    std::env::var(var).ok()
}

/// Validates `raw` for `d` and makes it the value of every later read.
pub fn set_override(d: &ParamDecl, raw: &str) -> std::result::Result<(), String> {
    parse(d, raw)?;
    let var = d.var();
    let mut o = OVERRIDES.lock().unwrap_or_else(|e| e.into_inner());
    match o.iter_mut().find(|(k, _)| *k == var) {
        Some(slot) => slot.1 = raw.to_string(),
        None => o.push((var, raw.to_string())),
    }
    Ok(())
}

/// The current value of `d` as text: override, environment or default. A value
/// that does not parse is reported as the error the runtime would give.
pub fn current(d: &ParamDecl) -> std::result::Result<String, String> {
    let raw = lookup_raw(&d.var()).unwrap_or_else(|| d.default.to_string());
    parse(d, &raw).map(|v| match v {
        Value::Num(n) => n.to_string(),
        Value::Bool(b) => if b { "1" } else { "0" }.to_string(),
        Value::Text(s) => s,
    })
}

/// The current value of a numeric or boolean `d` (override, environment,
/// default); a value that does not parse falls back to the default.
pub fn current_num(d: &ParamDecl) -> u64 {
    let num = |s: &str| match parse(d, s) {
        Ok(Value::Num(n)) => Some(n),
        Ok(Value::Bool(b)) => Some(b as u64),
        _ => None,
    };
    lookup_raw(&d.var())
        .and_then(|s| num(&s))
        .or_else(|| num(d.default))
        .unwrap_or(0)
}

fn parse(d: &ParamDecl, raw: &str) -> std::result::Result<Value, String> {
    let s = raw.trim();
    match d.kind {
        Kind::UInt { min, max } => {
            let n: u64 = s
                .parse()
                .map_err(|_| "expected an unsigned integer".to_string())?;
            check_range(n, min, max).map(Value::Num)
        }
        Kind::Size { min, max } => {
            let n = parse_size(s)?;
            check_range(n, min, max).map(Value::Num)
        }
        Kind::Bool => match s.to_ascii_lowercase().as_str() {
            "1" | "yes" | "true" | "on" => Ok(Value::Bool(true)),
            "0" | "no" | "false" | "off" => Ok(Value::Bool(false)),
            _ => Err("expected one of 0/1, yes/no, true/false, on/off".into()),
        },
        Kind::Choice(words) => {
            if words.contains(&s) {
                Ok(Value::Text(s.to_string()))
            } else {
                Err(format!("expected one of: {}", words.join(", ")))
            }
        }
        Kind::Text => Ok(Value::Text(s.to_string())),
    }
}

fn check_range(n: u64, min: u64, max: u64) -> std::result::Result<u64, String> {
    if n < min || n > max {
        Err(format!("must be between {min} and {max}"))
    } else {
        Ok(n)
    }
}

/// Parses `4096`, `64k`, `4M`, `1g` (powers of 1024).
pub fn parse_size(s: &str) -> std::result::Result<u64, String> {
    let s = s.trim();
    let (digits, mult) = match s.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m = match c.to_ascii_lowercase() {
                'k' => 1u64 << 10,
                'm' => 1 << 20,
                'g' => 1 << 30,
                _ => return Err(format!("unknown size suffix {c:?} (use k, m or g)")),
            };
            (&s[..i], m)
        }
        _ => (s, 1),
    };
    let n: u64 = digits
        .trim()
        .parse()
        .map_err(|_| "expected a byte size such as 65536, 64k or 4m".to_string())?;
    n.checked_mul(mult)
        .ok_or_else(|| "size overflows 64 bits".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(pairs: &[(&str, &str)]) -> Result<Params> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Params::from_lookup(|k| map.get(k).cloned())
    }

    #[test]
    fn defaults_parse() {
        let p = with(&[]).unwrap();
        assert_eq!(p.num("SKIP_POLL"), 0);
        assert!(!p.is_set("SKIP_POLL"));
    }

    #[test]
    fn env_overrides_and_sizes() {
        let p = with(&[("GW_SKIP_POLL", "7"), ("GW_TCP_SNDBUF", "64k")]).unwrap();
        assert_eq!(p.num("SKIP_POLL"), 7);
        assert_eq!(p.num("TCP_SNDBUF"), 65536);
        assert!(p.is_set("TCP_SNDBUF"));
    }

    #[test]
    fn bad_value_names_the_variable() {
        let e = with(&[("GW_SKIP_POLL", "lots")]).unwrap_err().to_string();
        assert!(e.contains("GW_SKIP_POLL"), "{e}");
        assert!(e.contains("lots"), "{e}");
        let e = with(&[("GW_SPIN_ITERS", "999999999999")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("between"), "{e}");
    }

    #[test]
    fn overrides_win_over_the_environment_and_are_validated() {
        let d = CORE_PARAMS.iter().find(|d| d.name == "YIELD_US").unwrap();
        assert_eq!(current(d).unwrap(), "20000");
        assert!(set_override(d, "many").is_err());
        assert_eq!(current_num(d), 20000);
        set_override(d, "77").unwrap();
        assert_eq!(current(d).unwrap(), "77");
        assert_eq!(current_num(d), 77);
        assert_eq!(Params::from_env().unwrap().num("YIELD_US"), 77);
        set_override(d, "20000").unwrap();
    }

    #[test]
    fn size_suffixes() {
        assert_eq!(parse_size("4M").unwrap(), 4 << 20);
        assert_eq!(parse_size("1g").unwrap(), 1 << 30);
        assert!(parse_size("4x").is_err());
        assert!(parse_size("").is_err());
    }
}
