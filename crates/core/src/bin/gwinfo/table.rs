//! What `gwinfo -f` found, and how it is printed (text or JSON).
//!
//! The records come from the probe ranks over the network, so parsing them
//! is bounded: strings are cut, lists capped, and a malformed record is an
//! error naming the rank it came from.

use serde_json::{json, Value};

/// Longest host, site or method name kept from a record.
const MAX_NAME: usize = 256;
/// Most addresses kept per host.
const MAX_ADDRS: usize = 16;

/// One probe rank's view of its host.
#[derive(Debug, Clone, PartialEq)]
pub struct HostInfo {
    pub rank: u32,
    pub host: String,
    pub site: String,
    pub cores: u32,
    pub addrs: Vec<String>,
    /// The method this rank's runtime would select to reach each rank
    /// (index = rank; `self` for itself).
    pub methods: Vec<String>,
}

impl HostInfo {
    pub fn to_json(&self) -> Value {
        json!({
            "rank": self.rank,
            "host": self.host,
            "site": self.site,
            "cores": self.cores,
            "addrs": self.addrs,
            "methods": self.methods,
        })
    }

    /// Parses a record sent by rank `src` of a job of `size` ranks.
    pub fn from_bytes(src: u32, size: u32, bytes: &[u8]) -> Result<HostInfo, String> {
        let bad = |what: &str| format!("rank {src} sent a bad host record: {what}");
        let v: Value = serde_json::from_slice(bytes).map_err(|e| bad(&e.to_string()))?;
        let text = |k: &str| -> Result<String, String> {
            v.get(k)
                .and_then(Value::as_str)
                .map(clip)
                .ok_or_else(|| bad(&format!("no {k}")))
        };
        let rank = v.get("rank").and_then(Value::as_u64);
        if rank != Some(u64::from(src)) {
            return Err(bad("rank does not match the sender"));
        }
        let cores = v
            .get("cores")
            .and_then(Value::as_u64)
            .and_then(|c| u32::try_from(c).ok())
            .ok_or_else(|| bad("no cores"))?;
        let list = |k: &str, max: usize| -> Result<Vec<String>, String> {
            let a = v
                .get(k)
                .and_then(Value::as_array)
                .ok_or_else(|| bad(&format!("no {k}")))?;
            if a.len() > max {
                return Err(bad(&format!("{} {k}, at most {max} expected", a.len())));
            }
            a.iter()
                .map(|x| x.as_str().map(clip).ok_or_else(|| bad(k)))
                .collect()
        };
        let methods = list("methods", size as usize)?;
        if methods.len() != size as usize {
            return Err(bad("methods: not one per rank"));
        }
        Ok(HostInfo {
            rank: src,
            host: text("host")?,
            site: text("site")?,
            cores,
            addrs: list("addrs", MAX_ADDRS)?,
            methods,
        })
    }
}

fn clip(s: &str) -> String {
    s.chars()
        .filter(|c| !c.is_control())
        .take(MAX_NAME)
        .collect()
}

/// A measurement between two hosts (the first of each site, or the first
/// two of one site).
#[derive(Debug, Clone, PartialEq)]
pub struct Measure {
    pub from_rank: u32,
    pub to_rank: u32,
    /// The method the link actually used.
    pub method: String,
    /// Median round trip of a small request and its reply, microseconds.
    pub rtt_us: Option<f64>,
    /// Bytes per second of a stream of large requests.
    pub bandwidth: Option<f64>,
    /// Why a number is missing.
    pub note: Option<String>,
}

impl Measure {
    pub fn to_json(&self) -> Value {
        json!({
            "from_rank": self.from_rank,
            "to_rank": self.to_rank,
            "method": self.method,
            "rtt_us": self.rtt_us,
            "bandwidth_bytes_per_s": self.bandwidth,
            "note": self.note,
        })
    }

    pub fn from_bytes(src: u32, bytes: &[u8]) -> Result<Measure, String> {
        let bad = |what: &str| format!("rank {src} sent a bad measurement: {what}");
        let v: Value = serde_json::from_slice(bytes).map_err(|e| bad(&e.to_string()))?;
        let rank = |k: &str| {
            v.get(k)
                .and_then(Value::as_u64)
                .and_then(|r| u32::try_from(r).ok())
                .ok_or_else(|| bad(k))
        };
        let num = |k: &str| v.get(k).and_then(Value::as_f64).filter(|x| x.is_finite());
        Ok(Measure {
            from_rank: rank("from_rank")?,
            to_rank: rank("to_rank")?,
            method: v
                .get("method")
                .and_then(Value::as_str)
                .map(clip)
                .ok_or_else(|| bad("method"))?,
            rtt_us: num("rtt_us"),
            bandwidth: num("bandwidth_bytes_per_s"),
            note: v.get("note").and_then(Value::as_str).map(clip),
        })
    }
}

/// Everything `gwinfo -f` prints.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// One per probe rank, in rank order.
    pub hosts: Vec<HostInfo>,
    /// Site names in order of first appearance.
    pub sites: Vec<String>,
    /// (site i, site j, measurement or why there is none), i <= j.
    pub pairs: Vec<(usize, usize, Result<Measure, String>)>,
}

impl Report {
    pub fn site_index(&self, name: &str) -> Option<usize> {
        self.sites.iter().position(|s| s == name)
    }

    pub fn to_json(&self) -> Value {
        json!({
            "hosts": self.hosts.iter().map(HostInfo::to_json).collect::<Vec<_>>(),
            "sites": self.sites,
            "site_pairs": self.pairs.iter().map(|(i, j, m)| {
                let mut v = json!({"a": self.sites[*i], "b": self.sites[*j]});
                match m {
                    Ok(m) => v["measure"] = m.to_json(),
                    Err(e) => v["error"] = json!(e),
                }
                v
            }).collect::<Vec<_>>(),
        })
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        let n = self.hosts.len();
        out.push_str(&format!(
            "gwinfo -f: {n} host(s) in {} site(s)\n\nHosts:\n",
            self.sites.len()
        ));
        let mut rows = vec![vec![
            "rank".to_string(),
            "site".into(),
            "host".into(),
            "cores".into(),
            "addresses".into(),
        ]];
        for h in &self.hosts {
            rows.push(vec![
                h.rank.to_string(),
                h.site.clone(),
                h.host.clone(),
                h.cores.to_string(),
                if h.addrs.is_empty() {
                    "-".into()
                } else {
                    h.addrs.join(" ")
                },
            ]);
        }
        out.push_str(&grid(&rows));

        out.push_str(
            "\nBetween sites (first host of each; within a site its first two hosts): \
             method, round trip, bandwidth\n",
        );
        let mut rows = vec![std::iter::once("".to_string())
            .chain(self.sites.iter().cloned())
            .collect::<Vec<_>>()];
        for (i, s) in self.sites.iter().enumerate() {
            let mut row = vec![s.clone()];
            for j in 0..self.sites.len() {
                let (a, b) = (i.min(j), i.max(j));
                let cell = match self.pairs.iter().find(|p| p.0 == a && p.1 == b) {
                    None => "-".to_string(),
                    Some((_, _, Err(e))) => format!("({e})"),
                    Some((_, _, Ok(m))) => format!(
                        "{} {} {}",
                        m.method,
                        m.rtt_us.map_or("?".into(), fmt_rtt),
                        m.bandwidth.map_or("?".into(), fmt_bw)
                    ),
                };
                row.push(cell);
            }
            rows.push(row);
        }
        out.push_str(&grid(&rows));
        for (_, _, m) in &self.pairs {
            if let Ok(Measure {
                note: Some(note),
                from_rank,
                to_rank,
                ..
            }) = m
            {
                out.push_str(&format!("  note {from_rank}->{to_rank}: {note}\n"));
            }
        }

        out.push_str("\nMethod selected between hosts (row: from, column: to):\n");
        let mut rows = vec![std::iter::once("".to_string())
            .chain(self.hosts.iter().map(|h| h.host.clone()))
            .collect::<Vec<_>>()];
        for h in &self.hosts {
            let mut row = vec![h.host.clone()];
            for to in &self.hosts {
                row.push(
                    h.methods
                        .get(to.rank as usize)
                        .cloned()
                        .unwrap_or_else(|| "?".into()),
                );
            }
            rows.push(row);
        }
        out.push_str(&grid(&rows));
        out
    }
}

pub fn fmt_rtt(us: f64) -> String {
    if us >= 1000.0 {
        format!("{:.1}ms", us / 1000.0)
    } else {
        format!("{us:.0}us")
    }
}

pub fn fmt_bw(bytes_per_s: f64) -> String {
    let mb = bytes_per_s / 1e6;
    if mb >= 1000.0 {
        format!("{:.1}GB/s", mb / 1000.0)
    } else {
        format!("{mb:.1}MB/s")
    }
}

/// Left-aligned columns separated by two spaces, indented by two.
fn grid(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let width: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let mut line = String::from(" ");
        for (c, cell) in r.iter().enumerate() {
            line.push(' ');
            line.push_str(cell);
            if c + 1 < r.len() {
                let pad = width[c].saturating_sub(cell.chars().count()) + 1;
                line.push_str(&" ".repeat(pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(rank: u32, host: &str, site: &str, methods: &[&str]) -> HostInfo {
        HostInfo {
            rank,
            host: host.into(),
            site: site.into(),
            cores: 4,
            addrs: vec![format!("10.0.{rank}.1/24")],
            methods: methods.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn sample() -> Report {
        let hosts = vec![
            host(0, "h1", "a", &["self", "tcp", "tcp"]),
            host(1, "h2", "a", &["tcp", "self", "tcp"]),
            host(2, "h3", "b", &["tcp", "tcp", "self"]),
        ];
        let m = |from, to, rtt, bw| Measure {
            from_rank: from,
            to_rank: to,
            method: "tcp".into(),
            rtt_us: Some(rtt),
            bandwidth: Some(bw),
            note: None,
        };
        Report {
            hosts,
            sites: vec!["a".into(), "b".into()],
            pairs: vec![
                (0, 0, Ok(m(0, 1, 80.0, 2.5e9))),
                (0, 1, Ok(m(0, 2, 40_500.0, 12.3e6))),
                (1, 1, Err("one host".into())),
            ],
        }
    }

    #[test]
    fn table_names_hosts_sites_and_numbers() {
        let t = sample().render();
        assert!(t.starts_with("gwinfo -f: 3 host(s) in 2 site(s)"), "{t}");
        // Host rows: rank, site, host, cores, address, in aligned columns.
        assert!(
            t.contains("  0     a     h1    4      10.0.0.1/24\n"),
            "{t}"
        );
        assert!(
            t.contains("  2     b     h3    4      10.0.2.1/24\n"),
            "{t}"
        );
        // Site matrix: symmetric, with units.
        assert!(
            t.contains("  a  tcp 80us 2.5GB/s     tcp 40.5ms 12.3MB/s\n"),
            "{t}"
        );
        assert!(t.contains("  b  tcp 40.5ms 12.3MB/s  (one host)\n"), "{t}");
        // Host matrix.
        assert!(t.contains("  h1  self  tcp   tcp\n"), "{t}");
        assert!(t.contains("  h3  tcp   tcp   self\n"), "{t}");
    }

    #[test]
    fn json_round_trips_records() {
        let r = sample();
        for h in &r.hosts {
            let bytes = serde_json::to_vec(&h.to_json()).unwrap();
            assert_eq!(&HostInfo::from_bytes(h.rank, 3, &bytes).unwrap(), h);
        }
        let v = r.to_json();
        assert_eq!(v["sites"], json!(["a", "b"]));
        assert_eq!(v["site_pairs"][1]["measure"]["rtt_us"], json!(40_500.0));
        assert_eq!(v["site_pairs"][2]["error"], json!("one host"));
    }

    #[test]
    fn hostile_records_are_errors() {
        let h = sample().hosts[1].clone();
        let bytes = serde_json::to_vec(&h.to_json()).unwrap();
        // Claims to be another rank.
        assert!(HostInfo::from_bytes(2, 3, &bytes)
            .unwrap_err()
            .contains("rank 2"));
        // Not one method per rank.
        assert!(HostInfo::from_bytes(1, 4, &bytes).is_err());
        assert!(HostInfo::from_bytes(1, 3, b"\xff{").is_err());
        let mut long = h.to_json();
        long["host"] = json!("x".repeat(10_000));
        long["addrs"] = json!(vec!["1.2.3.4/8"; 17]);
        let bytes = serde_json::to_vec(&long).unwrap();
        assert!(HostInfo::from_bytes(1, 3, &bytes)
            .unwrap_err()
            .contains("addrs"));
        long["addrs"] = json!([]);
        let bytes = serde_json::to_vec(&long).unwrap();
        assert_eq!(
            HostInfo::from_bytes(1, 3, &bytes).unwrap().host.len(),
            MAX_NAME
        );
        assert!(Measure::from_bytes(1, b"{\"from_rank\": -1}").is_err());
    }
}
