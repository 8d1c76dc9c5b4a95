//! `gwrun --report FILE.svg|FILE.html`: the communication matrix as a
//! picture. Ranks are grouped by site, then host (as the launcher placed
//! them); each cell is the link from the row's rank to the column's, coloured
//! by its method stack, with the stack, messages, bytes and the round-trip
//! time the transport measured in its tooltip (and written in the cell when
//! the matrix is small enough to read it). Thick lines separate hosts,
//! coloured bands name sites. The HTML form wraps the same SVG with a table
//! of every link, so the figures can be read and searched without hovering.
//!
//! Every string that reaches the picture (host and site names from the
//! machines file, method names from the ranks' records) is escaped: a record
//! is the ranks' word, not trusted markup.

use crate::stats::{human, method_meaning, Cell, Matrix};
use std::fmt::Write as _;
use std::path::Path;

/// Where one rank ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankPlace {
    pub host: String,
    pub site: String,
}

/// The output format, from the file name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Svg,
    Html,
}

impl Format {
    /// `.svg`, `.html` or `.htm` (any case); anything else is an error
    /// saying what is accepted.
    pub fn of(path: &Path) -> Result<Format, String> {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        match ext.as_deref() {
            Some("svg") => Ok(Format::Svg),
            Some("html") | Some("htm") => Ok(Format::Html),
            _ => Err(format!(
                "--report {}: the file name must end in .svg or .html",
                path.display()
            )),
        }
    }
}

/// Writes the report for `m` (ranks placed as `places` says) to `path`.
pub fn write(path: &Path, m: &Matrix, places: &[RankPlace]) -> Result<(), String> {
    let text = match Format::of(path)? {
        Format::Svg => svg(m, places),
        Format::Html => html(m, places),
    };
    std::fs::write(path, text).map_err(|e| format!("--report {}: {e}", path.display()))
}

fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c if c.is_control() => o.push('?'),
            c => o.push(c),
        }
    }
    o
}

/// A colour per method stack: fixed for the base methods and the common
/// stacks, otherwise derived from the name (stable across runs).
fn colour(method: &str) -> String {
    let fixed = match method {
        "self" => Some("#bdbdbd"),
        "shm" => Some("#66bb6a"),
        "tcp" => Some("#42a5f5"),
        "udp" => Some("#ffa726"),
        "encrypt+tcp" => Some("#7e57c2"),
        "encrypt+udp" => Some("#ec407a"),
        _ => None,
    };
    if let Some(c) = fixed {
        return c.to_string();
    }
    // FNV-1a of the name picks a hue; saturation and lightness stay readable.
    let mut h: u32 = 0x811c_9dc5;
    for b in method.bytes() {
        h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    format!("hsl({}, 55%, 60%)", h % 360)
}

/// The ranks in display order: by site, then host, in order of first
/// appearance, ranks ascending within a host.
fn order(places: &[RankPlace], n: usize) -> Vec<usize> {
    let unknown = RankPlace {
        host: "?".into(),
        site: "?".into(),
    };
    let place = |r: usize| places.get(r).unwrap_or(&unknown);
    let mut sites: Vec<&str> = Vec::new();
    let mut hosts: Vec<(&str, &str)> = Vec::new();
    for r in 0..n {
        let p = place(r);
        if !sites.contains(&p.site.as_str()) {
            sites.push(&p.site);
        }
        if !hosts.contains(&(p.site.as_str(), p.host.as_str())) {
            hosts.push((&p.site, &p.host));
        }
    }
    let mut out: Vec<usize> = (0..n).collect();
    out.sort_by_key(|&r| {
        let p = place(r);
        let s = sites.iter().position(|x| *x == p.site).unwrap_or(0);
        let h = hosts
            .iter()
            .position(|x| *x == (p.site.as_str(), p.host.as_str()))
            .unwrap_or(0);
        (s, h, r)
    });
    out
}

fn describe(from: usize, to: usize, c: &Cell) -> String {
    let rtt = if c.rtt_us > 0 {
        format!(", rtt {} µs", c.rtt_us)
    } else {
        String::new()
    };
    format!(
        "{from} → {to}: {} ({}), {} msgs, {} bytes{rtt}",
        c.method,
        method_meaning(&c.method),
        c.msgs,
        c.bytes
    )
}

/// The SVG document.
pub fn svg(m: &Matrix, places: &[RankPlace]) -> String {
    let n = m.cells.len();
    let ord = order(places, n);
    let unknown = RankPlace {
        host: "?".into(),
        site: "?".into(),
    };
    let place = |r: usize| places.get(r).unwrap_or(&unknown);
    // Cells shrink with the rank count; text goes in only where it fits.
    let cell = if n <= 8 {
        64
    } else if n <= 16 {
        40
    } else if n <= 32 {
        22
    } else {
        14
    };
    let text_in_cells = cell >= 40;
    let (left, top) = (170, 150);
    let grid = cell * n;
    let methods = used_methods(m);
    let legend_h = 24 * (methods.len() + 3);
    let (w, h) = (left + grid + 40, top + grid + 30 + legend_h);
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(
        o,
        r#"<title>gridwire communication report: {n} ranks</title><rect width="{w}" height="{h}" fill="white"/>"#
    );
    let _ = writeln!(
        o,
        r#"<text x="10" y="20" font-size="14" font-weight="bold">Communication matrix: {n} ranks (row = sender, column = receiver)</text>"#
    );
    // Site bands and host labels along both axes.
    let mut i = 0;
    while i < n {
        let p = place(ord[i]);
        let mut j = i;
        while j + 1 < n && place(ord[j + 1]).site == p.site {
            j += 1;
        }
        let (a, len) = (i * cell, (j - i + 1) * cell);
        let c = colour(&format!("site:{}", p.site));
        let _ = writeln!(
            o,
            r#"<g class="site"><rect x="{}" y="{}" width="{len}" height="18" fill="{c}" opacity="0.35"/><text x="{}" y="{}">site {}</text>"#,
            left + a,
            top - 44,
            left + a + 4,
            top - 31,
            esc(&p.site)
        );
        let _ = writeln!(
            o,
            r#"<rect x="{}" y="{}" width="18" height="{len}" fill="{c}" opacity="0.35"/><text x="4" y="{}">site {}</text></g>"#,
            left - 40,
            top + a,
            top + a + 12,
            esc(&p.site)
        );
        i = j + 1;
    }
    let mut i = 0;
    while i < n {
        let p = place(ord[i]);
        let mut j = i;
        while j + 1 < n && place(ord[j + 1]).site == p.site && place(ord[j + 1]).host == p.host {
            j += 1;
        }
        let a = i * cell;
        let _ = writeln!(
            o,
            r#"<g class="host"><text x="{}" y="{}" transform="rotate(-35 {} {})">{}</text><text x="4" y="{}" font-style="italic">{}</text></g>"#,
            left + a + 2,
            top - 52,
            left + a + 2,
            top - 52,
            esc(&p.host),
            top + a + 26,
            esc(&p.host)
        );
        if i > 0 {
            let _ = writeln!(
                o,
                r##"<line x1="{left}" y1="{}" x2="{}" y2="{}" stroke="#333" stroke-width="2"/><line x1="{}" y1="{top}" x2="{}" y2="{}" stroke="#333" stroke-width="2"/>"##,
                top + a,
                left + grid,
                top + a,
                left + a,
                left + a,
                top + grid
            );
        }
        i = j + 1;
    }
    // Rank numbers.
    for (k, &r) in ord.iter().enumerate() {
        let _ = writeln!(
            o,
            r#"<text x="{}" y="{}" text-anchor="middle">{r}</text><text x="{}" y="{}" text-anchor="end">{r}</text>"#,
            left + k * cell + cell / 2,
            top - 4,
            left - 4,
            top + k * cell + cell / 2 + 4
        );
    }
    // The cells.
    for (row, &from) in ord.iter().enumerate() {
        for (col, &to) in ord.iter().enumerate() {
            let (x, y) = (left + col * cell, top + row * cell);
            match &m.cells[from][to] {
                Some(c) => {
                    let _ = write!(
                        o,
                        r##"<g class="link"><rect x="{x}" y="{y}" width="{cell}" height="{cell}" fill="{}" stroke="#fff"><title>{}</title></rect>"##,
                        colour(&c.method),
                        esc(&describe(from, to, c))
                    );
                    if text_in_cells {
                        let _ = write!(
                            o,
                            r#"<text x="{}" y="{}" text-anchor="middle" font-size="9">{}</text><text x="{}" y="{}" text-anchor="middle" font-size="9">{}B</text>"#,
                            x + cell / 2,
                            y + cell / 2 - 2,
                            esc(&c.method),
                            x + cell / 2,
                            y + cell / 2 + 9,
                            human(c.bytes)
                        );
                        if c.rtt_us > 0 && cell >= 64 {
                            let _ = write!(
                                o,
                                r#"<text x="{}" y="{}" text-anchor="middle" font-size="9">{} µs</text>"#,
                                x + cell / 2,
                                y + cell / 2 + 20,
                                c.rtt_us
                            );
                        }
                    }
                    let _ = writeln!(o, "</g>");
                }
                None => {
                    let unknown = !m.have[from] && !m.have[to];
                    let _ = writeln!(
                        o,
                        r##"<rect x="{x}" y="{y}" width="{cell}" height="{cell}" fill="{}" stroke="#eee"><title>{from} → {to}: {}</title></rect>"##,
                        if unknown { "#fff3e0" } else { "#fafafa" },
                        if unknown {
                            "no statistics from either rank"
                        } else {
                            "no traffic"
                        }
                    );
                }
            }
        }
    }
    // Legend.
    let mut y = top + grid + 30;
    let _ = writeln!(
        o,
        r#"<text x="10" y="{y}" font-weight="bold">Methods (hover a cell for its messages, bytes and measured round trip)</text>"#
    );
    for meth in &methods {
        y += 24;
        let _ = writeln!(
            o,
            r##"<g class="legend"><rect x="10" y="{}" width="16" height="16" fill="{}" stroke="#333"/><text x="32" y="{}">{} — {}</text></g>"##,
            y - 12,
            colour(meth),
            y,
            esc(meth),
            method_meaning(meth)
        );
    }
    let missing: Vec<String> = (0..n)
        .filter(|&r| !m.have[r])
        .map(|r| r.to_string())
        .collect();
    if !missing.is_empty() {
        y += 24;
        let _ = writeln!(
            o,
            r#"<text x="10" y="{y}">No statistics from rank(s) {}</text>"#,
            missing.join(",")
        );
    }
    o.push_str("</svg>\n");
    o
}

fn used_methods(m: &Matrix) -> Vec<String> {
    let mut v: Vec<String> = m
        .cells
        .iter()
        .flatten()
        .flatten()
        .map(|c| c.method.clone())
        .collect();
    v.sort();
    v.dedup();
    v
}

/// The HTML document: the SVG, then a table of every link.
pub fn html(m: &Matrix, places: &[RankPlace]) -> String {
    let n = m.cells.len();
    let mut o = String::from(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>gridwire communication report</title>\n\
         <style>body{font-family:sans-serif} table{border-collapse:collapse} td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}</style>\n\
         </head><body>\n",
    );
    let _ = writeln!(o, "<h1>gridwire communication report: {n} ranks</h1>");
    o.push_str(&svg(m, places));
    o.push_str("<h2>Links</h2>\n<table><tr><th>from</th><th>host</th><th>site</th><th>to</th><th>host</th><th>site</th><th>method</th><th>messages</th><th>bytes</th><th>round trip (µs)</th></tr>\n");
    let unknown = RankPlace {
        host: "?".into(),
        site: "?".into(),
    };
    let place = |r: usize| places.get(r).unwrap_or(&unknown);
    for from in 0..n {
        for to in 0..n {
            if let Some(c) = &m.cells[from][to] {
                let (a, b) = (place(from), place(to));
                let _ = writeln!(
                    o,
                    "<tr><td>{from}</td><td>{}</td><td>{}</td><td>{to}</td><td>{}</td><td>{}</td><td style=\"background:{}\">{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                    esc(&a.host),
                    esc(&a.site),
                    esc(&b.host),
                    esc(&b.site),
                    colour(&c.method),
                    esc(&c.method),
                    c.msgs,
                    c.bytes,
                    if c.rtt_us > 0 {
                        c.rtt_us.to_string()
                    } else {
                        "–".into()
                    }
                );
            }
        }
    }
    o.push_str("</table>\n</body></html>\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::build;

    fn two_sites() -> (Matrix, Vec<RankPlace>) {
        let rec = |r: usize, links: &str| Some(format!(r#"{{"rank":{r},"links":[{links}]}}"#));
        let l = |p: usize, m: &str, b: u64, rtt: u64| {
            format!(
                r#"{{"peer":{p},"method":"{m}","sent_msgs":2,"sent_bytes":{b},"recv_msgs":2,"recv_bytes":{b},"rtt_us":{rtt}}}"#
            )
        };
        let records = vec![
            rec(
                0,
                &[l(1, "shm", 100, 0), l(2, "encrypt+tcp", 5000, 40123)].join(","),
            ),
            rec(1, &l(0, "shm", 100, 0)),
            rec(
                2,
                &[l(0, "encrypt+tcp", 5000, 40100), l(3, "tcp", 64, 55)].join(","),
            ),
            None,
        ];
        let places = vec![
            RankPlace {
                host: "a0".into(),
                site: "anl".into(),
            },
            RankPlace {
                host: "a0".into(),
                site: "anl".into(),
            },
            RankPlace {
                host: "n0".into(),
                site: "ncsa<x>".into(),
            },
            RankPlace {
                host: "n1".into(),
                site: "ncsa<x>".into(),
            },
        ];
        (build(&records), places)
    }

    #[test]
    fn svg_shows_sites_hosts_stacks_bytes_and_round_trips() {
        let (m, places) = two_sites();
        let s = svg(&m, &places);
        assert!(s.starts_with("<svg"), "{s}");
        assert!(
            s.contains("site anl") && s.contains("site ncsa&lt;x&gt;"),
            "site names, escaped"
        );
        assert!(!s.contains("ncsa<x>"), "unescaped site name");
        assert!(s.contains(">a0<") && s.contains(">n1<"), "host labels");
        assert!(
            s.contains("0 → 2: encrypt+tcp (TCP sockets, encrypted (AEAD)), 2 msgs, 5000 bytes, rtt 40123 µs"),
            "{s}"
        );
        assert!(s.contains("2 → 3: tcp"), "{s}");
        assert!(
            s.contains("no statistics from either rank")
                || s.contains("No statistics from rank(s) 3")
        );
        assert!(s.contains("No statistics from rank(s) 3"));
        // The legend names each stack once, with its colour.
        assert_eq!(s.matches("encrypt+tcp — TCP sockets").count(), 1);
        assert!(s.contains(&colour("encrypt+tcp")));
        // Small matrix: the figures are written in the cells too.
        assert!(s.contains(">40123 µs<"), "{s}");
        // Three hosts: two separators each way.
        assert_eq!(s.matches(r##"stroke="#333" stroke-width="2""##).count(), 4);
    }

    #[test]
    fn ranks_are_grouped_by_site_then_host() {
        let places: Vec<RankPlace> = (0..6)
            .map(|r| RankPlace {
                host: format!("h{}", r % 3),
                site: if r % 3 == 1 { "s1".into() } else { "s0".into() },
            })
            .collect();
        // s0: h0 (0, 3), h2 (2, 5); s1: h1 (1, 4).
        assert_eq!(order(&places, 6), vec![0, 3, 2, 5, 1, 4]);
    }

    #[test]
    fn html_lists_every_link_and_large_matrices_stay_compact() {
        let (m, places) = two_sites();
        let h = html(&m, &places);
        assert!(h.contains("<svg") && h.contains("</html>"));
        assert_eq!(
            h.matches("<tr><td>").count(),
            6,
            "one row per link with traffic"
        );
        assert!(h.contains("<td>40123</td>"));
        // 64 ranks: small cells, no text in them, still every cell present.
        let n = 64;
        let records: Vec<Option<String>> = (0..n)
            .map(|r| {
                Some(format!(
                    r#"{{"rank":{r},"links":[{{"peer":{},"method":"tcp","sent_msgs":1,"sent_bytes":8}}]}}"#,
                    (r + 1) % n
                ))
            })
            .collect();
        let m = build(&records);
        let places: Vec<RankPlace> = (0..n)
            .map(|r| RankPlace {
                host: format!("h{}", r / 8),
                site: format!("s{}", r / 32),
            })
            .collect();
        let s = svg(&m, &places);
        assert_eq!(
            s.matches("<rect x=").count()
                - s.matches("class=\"site\"").count() * 2
                - s.matches("class=\"legend\"").count(),
            n * n
        );
        assert!(!s.contains("font-size=\"9\""), "no text in 14-pixel cells");
        assert!(s.contains("width=\"1106\""), "{}", &s[..200]);
    }

    #[test]
    fn format_from_the_file_name() {
        assert_eq!(Format::of(Path::new("r.svg")), Ok(Format::Svg));
        assert_eq!(Format::of(Path::new("R.HTML")), Ok(Format::Html));
        assert!(Format::of(Path::new("r.png"))
            .unwrap_err()
            .contains(".svg or .html"));
        assert!(Format::of(Path::new("report")).is_err());
    }
}
