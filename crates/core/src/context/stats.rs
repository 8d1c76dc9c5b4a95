//! Per-link statistics: what `--stats`, `--report`, MPI_T and the tests read.

use super::*;

/// Per-link counters, as reported by [`Context::link_stats`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkStats {
    pub peer: u32,
    /// Method of the link this context opened to the peer ("" if it never sent).
    pub method: String,
    pub sent_msgs: u64,
    pub sent_bytes: u64,
    pub recv_msgs: u64,
    pub recv_bytes: u64,
    /// Round-trip time the link's transport measured, µs (0 = none).
    pub rtt_us: u64,
    /// Between hosts: the traffic of each method that carried some (more
    /// than one when a route, e.g. a communicator's `gw_methods`, put
    /// part of the pair's messages on a second link). Empty within a host.
    pub by_method: Vec<MethodStats>,
    /// Messages from the peer that arrived ahead of their turn on another
    /// of the pair's links and waited in the reorder buffer.
    pub reordered: u64,
    /// Between hosts, per measured route of the pair (`GW_SELECT`,
    /// `gw_select`): which stack takes which sizes, each stack's
    /// estimates and what it carried.
    pub select: Vec<super::measured::Summary>,
}

/// What one method carried for one pair (first transmissions, not resends).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MethodStats {
    pub method: String,
    pub sent_msgs: u64,
    pub sent_bytes: u64,
    pub recv_msgs: u64,
    pub recv_bytes: u64,
}

impl Context {
    /// Per-link statistics, one row per peer this context exchanged messages with.
    pub fn link_stats(&self) -> Vec<LinkStats> {
        self.inner
            .peers
            .iter()
            .enumerate()
            .filter_map(|(i, p)| {
                let (link_msgs, link_bytes) = p.link.get().map(|l| l.sent()).unwrap_or((0, 0));
                let now = p.link_now();
                let s = LinkStats {
                    peer: i as u32,
                    method: now
                        .as_ref()
                        .map(|l| l.method().to_string())
                        .unwrap_or_default(),
                    sent_msgs: p.sent_msgs.load(Ordering::Relaxed) + link_msgs,
                    sent_bytes: p.sent_bytes.load(Ordering::Relaxed) + link_bytes,
                    recv_msgs: p.recv_msgs.load(Ordering::Relaxed),
                    recv_bytes: p.recv_bytes.load(Ordering::Relaxed),
                    rtt_us: now
                        .as_ref()
                        .and_then(|l| l.rtt())
                        .map_or(0, |d| d.as_micros().max(1) as u64),
                    reordered: p
                        .seq
                        .get()
                        .map_or(0, |s| s.reordered.load(Ordering::Relaxed)),
                    select: p.seq.get().map(|s| s.selection()).unwrap_or_default(),
                    by_method: p
                        .seq
                        .get()
                        .map(|s| {
                            s.traffic_by_method()
                                .map(|(mi, t)| MethodStats {
                                    method: self.inner.methods[mi].name().to_string(),
                                    sent_msgs: t.sent_msgs.load(Ordering::Relaxed),
                                    sent_bytes: t.sent_bytes.load(Ordering::Relaxed),
                                    recv_msgs: t.recv_msgs.load(Ordering::Relaxed),
                                    recv_bytes: t.recv_bytes.load(Ordering::Relaxed),
                                })
                                .collect()
                        })
                        .unwrap_or_default(),
                };
                let mut s = s;
                // Between hosts, the one stack that carried every message
                // sent is the pair's method (the default link may carry
                // only acks, e.g. when a measured route put all on udp).
                // The link's own name stays when it is that stack: it says
                // more (`encrypt+relay(s1h0)+tcp` names the relay's host,
                // the stack only `encrypt+relay+tcp`).
                let mut sent_on = s.by_method.iter().filter(|m| m.sent_msgs > 0);
                if let (Some(only), None) = (sent_on.next(), sent_on.next()) {
                    if stack_of(&s.method) != only.method {
                        s.method = only.method.clone();
                    }
                }
                (s.sent_msgs + s.recv_msgs > 0 || !s.method.is_empty()).then_some(s)
            })
            .collect()
    }

    /// Each method's own counters (e.g. `tcp refused_connections`, `udp
    /// auth_failed`), as (method, counter, value).
    pub fn method_counters(&self) -> Vec<(&'static str, &'static str, u64)> {
        self.inner
            .methods
            .iter()
            .flat_map(|m| m.counters().into_iter().map(move |(k, v)| (m.name(), k, v)))
            .collect()
    }

    /// Requests dropped because their endpoint or handler did not exist.
    pub fn dropped_requests(&self) -> u64 {
        self.inner.dropped.load(Ordering::Relaxed)
    }

    /// This context's statistics as the compact JSON the launcher reads.
    pub fn stats_json(&self) -> String {
        let links: Vec<serde_json::Value> = self
            .link_stats()
            .into_iter()
            .map(|s| {
                let mut l = serde_json::json!({
                    "peer": s.peer, "method": s.method,
                    "sent_msgs": s.sent_msgs, "sent_bytes": s.sent_bytes,
                    "recv_msgs": s.recv_msgs, "recv_bytes": s.recv_bytes,
                    "rtt_us": s.rtt_us,
                });
                // Only pairs whose messages took several methods: the
                // record stays as it was for every other pair.
                if s.by_method.len() > 1 {
                    l["by_method"] = s
                        .by_method
                        .iter()
                        .map(|m| {
                            serde_json::json!({
                                "method": m.method,
                                "sent_msgs": m.sent_msgs, "sent_bytes": m.sent_bytes,
                                "recv_msgs": m.recv_msgs, "recv_bytes": m.recv_bytes,
                            })
                        })
                        .collect();
                }
                if s.reordered > 0 {
                    l["reordered"] = s.reordered.into();
                }
                if !s.select.is_empty() {
                    l["select"] = s.select.iter().map(|x| x.to_json()).collect();
                }
                l
            })
            .collect();
        serde_json::json!({ "rank": self.rank(), "host": self.inner.job.host_id, "links": links })
            .to_string()
    }
}

/// The stack a link's name stands for: the name without what parentheses
/// add (`encrypt+relay(s1h0)+tcp` → `encrypt+relay+tcp`).
fn stack_of(link_name: &str) -> String {
    let mut out = String::with_capacity(link_name.len());
    let mut depth = 0u32;
    for c in link_name.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod stack_name_tests {
    use super::stack_of;

    #[test]
    fn a_link_name_without_its_relay_host_is_its_stack() {
        assert_eq!(stack_of("encrypt+relay(s1h0)+tcp"), "encrypt+relay+tcp");
        assert_eq!(stack_of("tcp"), "tcp");
        assert_eq!(stack_of("relay(a(b))+udp"), "relay+udp");
        assert_eq!(stack_of(""), "");
    }
}
