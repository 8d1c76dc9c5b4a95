//! `--stats`: the per-pair communication matrix printed at exit.
//!
//! Each rank's runtime puts `gw.stats.<rank>` at finalize: compact JSON
//! `{"rank":0,"links":[{"peer":1,"method":"shm","sent_msgs":…,"sent_bytes":…,
//! "recv_msgs":…,"recv_bytes":…}]}`. Records may be missing (rank killed) or
//! garbage (other runtime version); the matrix then shows `?` rather than
//! failing.

use serde_json::Value;

/// What one sender sent to one receiver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    pub method: String,
    pub msgs: u64,
    pub bytes: u64,
    /// Round-trip time the sender's transport measured on the link, µs (0 = none).
    pub rtt_us: u64,
}

/// One method's part of a pair's traffic: (method, messages, bytes).
pub type MethodShare = (String, u64, u64);

/// `cells[from][to]`, plus which ranks had a readable record.
#[derive(Debug)]
pub struct Matrix {
    pub cells: Vec<Vec<Option<Cell>>>,
    pub have: Vec<bool>,
    /// Pairs whose messages took several methods at once (a communicator's
    /// `gw_methods` beside the pair's default link): (from, to, [(method,
    /// msgs, bytes) sent]), from the sender's record.
    pub split: Vec<(usize, usize, Vec<MethodShare>)>,
    /// Messages of `from` that waited in `to`'s reorder buffer (they came
    /// ahead of their turn on another link), from the receiver's record:
    /// (from, to, count).
    pub reordered: Vec<(usize, usize, u64)>,
    /// Pairs on a measured, size-aware route (`GW_SELECT=measured`,
    /// `gw_select`): (from, to, what the sender's selection chose), one
    /// entry per measured route.
    pub selected: Vec<(usize, usize, String)>,
}

fn num(v: &Value, k: &str) -> u64 {
    v.get(k).and_then(Value::as_u64).unwrap_or(0)
}

/// Builds the matrix from each rank's record (`None` = no record). The
/// sender's `sent_*` counts are used; when the sender has no record, the
/// receiver's `recv_*` counts fill in.
pub fn build(records: &[Option<String>]) -> Matrix {
    let n = records.len();
    let mut cells = vec![vec![None; n]; n];
    let mut have = vec![false; n];
    let mut split = Vec::new();
    let mut reordered = Vec::new();
    let mut selected = Vec::new();
    let parsed: Vec<Option<Value>> = records
        .iter()
        .map(|r| {
            r.as_deref()
                .and_then(|s| serde_json::from_str::<Value>(s).ok())
                .filter(|v| v.get("links").is_some_and(Value::is_array))
        })
        .collect();
    let links = |v: &Value| -> Vec<(usize, Value)> {
        v.get("links")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|l| {
                        let p = usize::try_from(l.get("peer")?.as_u64()?).ok()?;
                        (p < n).then(|| (p, l.clone()))
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    for (r, v) in parsed.iter().enumerate() {
        let Some(v) = v else { continue };
        have[r] = true;
        for (p, l) in links(v) {
            let method = l
                .get("method")
                .and_then(Value::as_str)
                .unwrap_or("?")
                .to_string();
            let (msgs, bytes) = (num(&l, "sent_msgs"), num(&l, "sent_bytes"));
            if msgs > 0 || bytes > 0 {
                cells[r][p] = Some(Cell {
                    method,
                    msgs,
                    bytes,
                    rtt_us: num(&l, "rtt_us"),
                });
            }
            let by: Vec<MethodShare> = l
                .get("by_method")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|m| {
                            let name = m.get("method")?.as_str()?.to_string();
                            let (msgs, bytes) = (num(m, "sent_msgs"), num(m, "sent_bytes"));
                            (msgs > 0).then_some((name, msgs, bytes))
                        })
                        .collect()
                })
                .unwrap_or_default();
            if by.len() > 1 {
                split.push((r, p, by));
            }
            for choice in l
                .get("select")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(gridwire_core::context::measured::Summary::from_json)
            {
                selected.push((r, p, choice.to_string()));
            }
            let held = num(&l, "reordered");
            if held > 0 {
                reordered.push((p, r, held));
            }
        }
    }
    for (r, v) in parsed.iter().enumerate() {
        let Some(v) = v else { continue };
        for (p, l) in links(v) {
            if have[p] {
                continue;
            }
            let method = l
                .get("method")
                .and_then(Value::as_str)
                .unwrap_or("?")
                .to_string();
            let (msgs, bytes) = (num(&l, "recv_msgs"), num(&l, "recv_bytes"));
            if msgs > 0 || bytes > 0 {
                cells[p][r] = Some(Cell {
                    method,
                    msgs,
                    bytes,
                    rtt_us: num(&l, "rtt_us"),
                });
            }
        }
    }
    Matrix {
        cells,
        have,
        split,
        reordered,
        selected,
    }
}

pub(crate) fn human(b: u64) -> String {
    const U: [(u64, &str); 3] = [(1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")];
    for (s, u) in U {
        if b >= 10 * s {
            return format!("{}{u}", b / s);
        }
    }
    b.to_string()
}

pub(crate) fn method_meaning(name: &str) -> String {
    // A transform stack (`compress+encrypt+tcp`): the base, then what wraps it.
    if let Some((transforms, base)) = name.rsplit_once('+') {
        let mut s = method_meaning(base);
        for t in transforms.split('+') {
            if let Some(gw) = t.strip_prefix("relay(").and_then(|r| r.strip_suffix(')')) {
                s.push_str(&format!(", through the relay on {gw}"));
                continue;
            }
            s.push_str(match t {
                "encrypt" => ", encrypted (AEAD)",
                "compress" => ", compressed (zstd)",
                "relay" => ", through a relay",
                _ => ", transformed (see gwinfo)",
            });
        }
        return s;
    }
    match name {
        "self" => "within the process",
        "shm" => "shared memory (same host)",
        "tcp" => "TCP sockets",
        "udp" => "reliable UDP",
        _ => "see gwinfo",
    }
    .to_string()
}

/// The lines to print (without the `gwrun: ` prefix).
pub fn render(m: &Matrix, placement: &str) -> Vec<String> {
    let n = m.cells.len();
    let text = |from: usize, to: usize| -> String {
        match &m.cells[from][to] {
            Some(c) => format!("{} {}/{}", c.method, c.msgs, human(c.bytes)),
            None if !m.have[from] && !m.have[to] => "?".into(),
            None => "-".into(),
        }
    };
    let mut width = 6;
    for f in 0..n {
        for t in 0..n {
            width = width.max(text(f, t).len());
        }
    }
    let head = "from\\to";
    let mut lines = vec!["communication matrix (row = sender, column = receiver)".to_string()];
    let mut h = format!("{head:>8}");
    for t in 0..n {
        h.push_str(&format!("  {:>width$}", t));
    }
    lines.push(h);
    for f in 0..n {
        let mut l = format!("{f:>8}");
        for t in 0..n {
            l.push_str(&format!("  {:>width$}", text(f, t)));
        }
        lines.push(l);
    }
    lines.push("legend: cell = method msgs/bytes sent (K/M/G = KiB/MiB/GiB); - = no traffic; ? = no statistics from either rank".into());
    for (from, to, by) in &m.split {
        let parts: Vec<String> = by
            .iter()
            .map(|(name, msgs, bytes)| format!("{name} {msgs}/{}", human(*bytes)))
            .collect();
        let held = m
            .reordered
            .iter()
            .find(|r| (r.0, r.1) == (*from, *to))
            .map_or(String::new(), |r| {
                format!("; {} held for order by the receiver", r.2)
            });
        lines.push(format!(
            "links {from}->{to} (several at once): {} (bytes: {}){held}",
            parts.join(", "),
            by.iter()
                .map(|(name, _, bytes)| format!("{name}={bytes}"))
                .collect::<Vec<_>>()
                .join(" ")
        ));
    }
    for (from, to, choice) in &m.selected {
        lines.push(format!("size-aware {from}->{to}: {choice}"));
    }
    let mut seen: Vec<&str> = m
        .cells
        .iter()
        .flatten()
        .flatten()
        .map(|c| c.method.as_str())
        .chain(
            m.split
                .iter()
                .flat_map(|(_, _, by)| by.iter().map(|b| b.0.as_str())),
        )
        .collect();
    seen.sort_unstable();
    seen.dedup();
    if !seen.is_empty() {
        let described: Vec<String> = seen
            .iter()
            .map(|name| format!("{name} = {}", method_meaning(name)))
            .collect();
        lines.push(format!("methods: {}", described.join(", ")));
    }
    let missing: Vec<String> = (0..n)
        .filter(|&r| !m.have[r])
        .map(|r| r.to_string())
        .collect();
    if !missing.is_empty() {
        lines.push(format!(
            "no (readable) statistics from rank(s) {}",
            missing.join(",")
        ));
    }
    lines.push(format!("placement: {placement}"));
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matrix_from_records() {
        let r0 = r#"{"rank":0,"links":[{"peer":1,"method":"shm","sent_msgs":10,"sent_bytes":80,"recv_msgs":3,"recv_bytes":24},{"peer":2,"method":"tcp","sent_msgs":1,"sent_bytes":20480,"recv_msgs":5,"recv_bytes":50}]}"#;
        let m = build(&[Some(r0.into()), Some("garbage".into()), None]);
        assert_eq!(m.have, vec![true, false, false]);
        assert_eq!(
            m.cells[0][1],
            Some(Cell {
                method: "shm".into(),
                msgs: 10,
                bytes: 80,
                rtt_us: 0
            })
        );
        // Rank 1 and 2 have no record: filled from rank 0's receive counts.
        assert_eq!(
            m.cells[1][0],
            Some(Cell {
                method: "shm".into(),
                msgs: 3,
                bytes: 24,
                rtt_us: 0
            })
        );
        assert_eq!(
            m.cells[2][0],
            Some(Cell {
                method: "tcp".into(),
                msgs: 5,
                bytes: 50,
                rtt_us: 0
            })
        );
        let lines = render(&m, "emu0: ranks 0-1; emu1: ranks 2");
        let all = lines.join("\n");
        assert!(all.contains("shm 10/80"), "{all}");
        assert!(all.contains("tcp 1/20K"), "{all}");
        assert!(all.contains("?"), "{all}");
        assert!(all.contains("rank(s) 1,2"), "{all}");
    }

    #[test]
    fn pairs_on_several_methods_get_a_line() {
        let r0 = r#"{"rank":0,"links":[{"peer":1,"method":"tcp","sent_msgs":30,"sent_bytes":9000,"by_method":[{"method":"tcp","sent_msgs":10,"sent_bytes":8000},{"method":"udp","sent_msgs":20,"sent_bytes":1000}],"select":[{"bands":[[0,10000,"udp"],[10000,18446744073709551615,"tcp"]],"forced":false,"slots":[{"stack":"udp","rtt_ns":20000,"bytes_per_s":50000000,"msgs":20,"bytes":1000},{"stack":"tcp","rtt_ns":null,"bytes_per_s":null,"msgs":10,"bytes":8000}]}]}]}"#;
        let r1 = r#"{"rank":1,"links":[{"peer":0,"method":"tcp","sent_msgs":3,"sent_bytes":30,"reordered":4}]}"#;
        let m = build(&[Some(r0.into()), Some(r1.into())]);
        assert_eq!(
            m.split,
            vec![(
                0,
                1,
                vec![("tcp".into(), 10, 8000), ("udp".into(), 20, 1000)]
            )]
        );
        let text = render(&m, "").join("\n");
        assert!(
            text.contains(
                "links 0->1 (several at once): tcp 10/8000, udp 20/1000 (bytes: tcp=8000 udp=1000); 4 held for order by the receiver"
            ),
            "{text}"
        );
        assert!(text.contains("udp = reliable UDP"), "{text}");
        assert!(
            text.contains("size-aware 0->1: udp below 10000 B, tcp from 10000 B (measured); udp: rtt 20 us, 50.0 MB/s, 20 msgs/1000 B; tcp: rtt ?, ?, 10 msgs/8000 B"),
            "{text}"
        );
    }

    #[test]
    fn tolerates_junk() {
        let bad = [
            r#"{"links":"x"}"#,
            r#"{"links":[{"peer":99,"method":"shm","sent_msgs":1}]}"#,
            r#"{"links":[{"peer":-1}]}"#,
            r#"{"links":[{"method":7,"peer":0,"sent_msgs":"x"}]}"#,
            "",
            "[]",
        ];
        for b in bad {
            let m = build(&[Some(b.into()), None]);
            let _ = render(&m, "");
        }
        let _ = render(&build(&[]), "");
    }
}
