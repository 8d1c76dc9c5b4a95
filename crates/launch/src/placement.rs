//! Where each rank runs: on this host, or on one of several *emulated*
//! hosts. Emulated hosts are what lets one machine exercise the
//! multimethod selection (shm within a host, tcp between hosts): each rank
//! gets `GW_HOST_ID=<real host id>#<emulated name>` and the runtime treats
//! different ids as different machines.

use std::fmt;

/// Where the ranks of a job go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// Emulated host names, in order of first use; empty = no emulation.
    pub hosts: Vec<String>,
    /// Host index of each rank (all zeros without emulation).
    pub rank_host: Vec<usize>,
    /// Whether hosts are emulated (so `GW_HOST_ID` is set).
    pub emulated: bool,
}

/// A problem with `--emulate-hosts` or the hostfile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacementError(pub String);

impl fmt::Display for PlacementError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Placement {
    /// Everything on the real host; the runtime computes `GW_HOST_ID` itself.
    pub fn local(n: usize) -> Self {
        Placement {
            hosts: vec!["localhost".into()],
            rank_host: vec![0; n],
            emulated: false,
        }
    }

    /// `--emulate-hosts K`: blocks of `ceil(n/k)` consecutive ranks per host.
    pub fn emulate(n: usize, k: usize) -> Result<Self, PlacementError> {
        if k == 0 {
            return Err(PlacementError(
                "--emulate-hosts needs at least 1 host".into(),
            ));
        }
        let per = n.div_ceil(k).max(1);
        Ok(Placement {
            hosts: (0..k).map(|h| format!("emu{h}")).collect(),
            rank_host: (0..n).map(|r| r / per).collect(),
            emulated: true,
        })
    }

    /// A hostfile: lines `name`, `name:slots` or `name slots=S`; `#` starts
    /// a comment. Ranks fill each host's slots in file order, wrapping
    /// around (oversubscribing) when there are more ranks than slots.
    pub fn from_hostfile(n: usize, text: &str) -> Result<Self, PlacementError> {
        let mut hosts: Vec<String> = Vec::new();
        let mut slots: Vec<usize> = Vec::new();
        for (lineno, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let bad =
                |why: &str| PlacementError(format!("hostfile line {}: {why}: {raw:?}", lineno + 1));
            let mut words = line.split_whitespace();
            let first = words.next().unwrap_or("");
            let (name, mut count) = match first.split_once(':') {
                Some((name, s)) => (
                    name,
                    Some(s.parse::<usize>().map_err(|_| bad("bad slot count"))?),
                ),
                None => (first, None),
            };
            for w in words {
                match w.split_once('=') {
                    Some(("slots", s)) | Some(("max_slots", s)) if count.is_none() => {
                        count = Some(s.parse::<usize>().map_err(|_| bad("bad slot count"))?)
                    }
                    _ => return Err(bad("unknown word (expected slots=N)")),
                }
            }
            if name.is_empty() {
                return Err(bad("empty host name"));
            }
            let count = count.unwrap_or(1);
            if count == 0 {
                return Err(bad("zero slots"));
            }
            match hosts.iter().position(|h| h == name) {
                Some(i) => slots[i] += count,
                None => {
                    hosts.push(name.to_string());
                    slots.push(count);
                }
            }
        }
        if hosts.is_empty() {
            return Err(PlacementError("the hostfile names no hosts".into()));
        }
        let mut rank_host = Vec::with_capacity(n);
        'fill: loop {
            for (h, &s) in slots.iter().enumerate() {
                for _ in 0..s {
                    if rank_host.len() == n {
                        break 'fill;
                    }
                    rank_host.push(h);
                }
            }
            if n == 0 {
                break;
            }
        }
        Ok(Placement {
            hosts,
            rank_host,
            emulated: true,
        })
    }

    /// `GW_HOST_ID` for `rank`, `None` when hosts are not emulated.
    pub fn host_id(&self, real: &str, rank: usize) -> Option<String> {
        if !self.emulated {
            return None;
        }
        self.rank_host
            .get(rank)
            .map(|&h| format!("{real}#{}", self.hosts[h]))
    }

    /// `(index of rank on its host, ranks on that host)`, as Hydra's
    /// `MPI_LOCALRANKID` / `MPI_LOCALNRANKS`.
    pub fn local_rank(&self, rank: usize) -> (usize, usize) {
        let h = self.rank_host[rank];
        let idx = self.rank_host[..rank].iter().filter(|&&x| x == h).count();
        let n = self.rank_host.iter().filter(|&&x| x == h).count();
        (idx, n)
    }

    /// MPICH's `PMI_process_mapping` value: `(vector,(node,nodes,ranks),…)`.
    pub fn process_mapping(&self) -> String {
        // Runs of consecutive ranks on one node…
        let mut runs: Vec<(usize, usize)> = Vec::new();
        for &h in &self.rank_host {
            match runs.last_mut() {
                Some((node, count)) if *node == h => *count += 1,
                _ => runs.push((h, 1)),
            }
        }
        // …merged into blocks of consecutive nodes with equal counts.
        let mut blocks: Vec<(usize, usize, usize)> = Vec::new();
        for (node, count) in runs {
            match blocks.last_mut() {
                Some((start, nodes, c)) if *c == count && *start + *nodes == node => *nodes += 1,
                _ => blocks.push((node, 1, count)),
            }
        }
        let parts: Vec<String> = blocks
            .iter()
            .map(|(s, n, c)| format!("({s},{n},{c})"))
            .collect();
        format!("(vector,{})", parts.join(","))
    }

    /// One line: which ranks are on which host.
    pub fn describe(&self) -> String {
        let mut out = Vec::new();
        for (h, name) in self.hosts.iter().enumerate() {
            let ranks: Vec<usize> = (0..self.rank_host.len())
                .filter(|&r| self.rank_host[r] == h)
                .collect();
            if ranks.is_empty() {
                continue;
            }
            out.push(format!("{name}: ranks {}", ranges(&ranks)));
        }
        out.join("; ")
    }
}

/// `[0,1,2,5]` → `"0-2,5"`.
fn ranges(v: &[usize]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            v[i].to_string()
        } else {
            format!("{}-{}", v[i], v[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

/// This machine's identity as the runtime computes it: hostname, `:`, and
/// the kernel boot id (so a rebooted or cloned machine is a different host).
pub fn real_host_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "localhost".into());
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    format!("{host}:{boot}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emulate_blocks() {
        let p = Placement::emulate(5, 2).unwrap();
        assert_eq!(p.rank_host, vec![0, 0, 0, 1, 1]);
        assert_eq!(p.process_mapping(), "(vector,(0,1,3),(1,1,2))");
        assert_eq!(p.describe(), "emu0: ranks 0-2; emu1: ranks 3-4");
        assert_eq!(p.local_rank(4), (1, 2));
        let p = Placement::emulate(4, 2).unwrap();
        assert_eq!(p.process_mapping(), "(vector,(0,2,2))");
        assert_eq!(p.host_id("h:b", 3).as_deref(), Some("h:b#emu1"));
        assert!(Placement::emulate(3, 0).is_err());
        let p = Placement::emulate(2, 4).unwrap();
        assert_eq!(p.rank_host, vec![0, 1]);
    }

    #[test]
    fn local_has_no_host_id() {
        let p = Placement::local(3);
        assert_eq!(p.host_id("h", 0), None);
        assert_eq!(p.process_mapping(), "(vector,(0,1,3))");
    }

    #[test]
    fn hostfile_forms() {
        let p =
            Placement::from_hostfile(7, "# comment\na:2\nb slots=3\n\nc # one slot\na\n").unwrap();
        assert_eq!(p.hosts, vec!["a", "b", "c"]);
        // a has 3 slots (2 + 1), b 3, c 1.
        assert_eq!(p.rank_host, vec![0, 0, 0, 1, 1, 1, 2]);
        let p = Placement::from_hostfile(3, "x\ny\n").unwrap();
        assert_eq!(p.rank_host, vec![0, 1, 0]);
        assert_eq!(p.describe(), "x: ranks 0,2; y: ranks 1");
    }

    #[test]
    fn hostfile_errors() {
        assert!(Placement::from_hostfile(1, "").is_err());
        assert!(Placement::from_hostfile(1, "a:x").is_err());
        assert!(Placement::from_hostfile(1, "a slots=").is_err());
        assert!(Placement::from_hostfile(1, "a foo=3").is_err());
        assert!(Placement::from_hostfile(1, "a:0").is_err());
        assert!(Placement::from_hostfile(1, ":3").is_err());
    }
}
