//! Per-traffic link choice: *routes*.
//!
//! By default all messages of a pair go on one link, the selection's first
//! applicable stack. A route is another choice an upper layer asks for
//! (MPI: a communicator's `gw_methods`, `gw_encrypt`, `gw_compress` info
//! keys): the stacks its traffic may use, in preference order, and whether
//! they are encrypted or compressed. The upper layer registers a route
//! ([`Context::route`]), maps its traffic keys to it
//! ([`Context::set_traffic_route`]; MPI's key is the communicator's context
//! id) and sends with the key ([`Context::rsr_v_keyed`]).
//!
//! A route only changes links between hosts, which are sequenced
//! (`failover.rs`): the pair then has one live link per route in use, all
//! carrying the pair's one end-to-end sequence, and the receiver's reorder
//! buffer (`reliable/reorder.rs`) delivers what the links bring in the
//! sender's order. Within a host (shared memory, the process itself) the
//! route is not even looked at: that path is untouched.

use super::*;
use std::collections::HashMap;

/// A route: 0 is the pair's default link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RouteId(pub(super) u32);

impl RouteId {
    pub const DEFAULT: RouteId = RouteId(0);

    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// The traffic key that names no route (the default link).
pub const NO_TRAFFIC_KEY: u32 = u32::MAX;

/// At most this many distinct routes per process (each may be one more
/// live link per peer).
pub const MAX_ROUTES: usize = 16;

/// What a route asks for. The empty spec is the default link.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RouteSpec {
    /// Method stacks in preference order. A base name (`udp`) stands for
    /// that transport with the transforms the policy (and `encrypt` /
    /// `compress` below) asks for; a stack name (`encrypt+udp`) for that
    /// stack exactly. Empty: the selection's own order.
    pub methods: Vec<String>,
    /// `Some(true)`: encrypted even where the policy would not;
    /// `Some(false)`: not encrypted even where it would (except through a
    /// relay, always encrypted). `None`: as the policy says.
    pub encrypt: Option<bool>,
    /// The same for compression.
    pub compress: Option<bool>,
    /// How a message picks among the route's stacks (`measured.rs`).
    pub select: Select,
    /// This stack or base method first, then the others in the route's
    /// order: the per-stack links of a measured route (set by the
    /// runtime; a failed one falls over to the next like any route).
    pub prefer: Option<String>,
}

/// How the messages of a route pick their stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum Select {
    /// As the job says (`GW_SELECT`).
    #[default]
    Job,
    /// The first applicable stack of the route, for every message.
    Fixed,
    /// Per message, the stack whose measured cost is the lowest for its
    /// size (`measured.rs`).
    Measured,
}

impl Select {
    /// `fixed` / `measured` (the `GW_SELECT` and `gw_select` words).
    pub fn parse(word: &str) -> Option<Select> {
        match word.trim().to_ascii_lowercase().as_str() {
            "fixed" | "first" => Some(Select::Fixed),
            "measured" | "size" => Some(Select::Measured),
            _ => None,
        }
    }

    pub fn word(self) -> &'static str {
        match self {
            Select::Job => "job",
            Select::Fixed => "fixed",
            Select::Measured => "measured",
        }
    }
}

impl RouteSpec {
    pub fn is_default(&self) -> bool {
        *self == RouteSpec::default()
    }
}

/// The routes of a context and the traffic keys mapped to them.
pub(super) struct Routes {
    /// By id; `specs[0]` is the default (empty) spec.
    specs: RwLock<Vec<RouteSpec>>,
    by_key: RwLock<HashMap<u32, u32>>,
    /// Some key maps to a route other than the default: only then does a
    /// sequenced send look its key up.
    any: AtomicBool,
    /// Bit per route that is measured (a send on it picks a sub-route by
    /// size): one load on the send path.
    measured: AtomicU32,
    /// A measured route's sub-routes: (stack or base, sub-route), in the
    /// route's order. Read when a pair first sends on the route.
    subs: RwLock<HashMap<u32, Vec<(String, u32)>>>,
    /// `GW_SELECT_ESTIMATES`, parsed (empty: measure).
    pub(super) forced: Vec<(String, super::measured::Estimate)>,
}

impl Routes {
    pub(super) fn new(forced: Vec<(String, super::measured::Estimate)>) -> Routes {
        Routes {
            specs: RwLock::new(vec![RouteSpec::default()]),
            by_key: RwLock::new(HashMap::new()),
            any: AtomicBool::new(false),
            measured: AtomicU32::new(0),
            subs: RwLock::new(HashMap::new()),
            forced,
        }
    }

    /// Whether `route` picks a sub-route per message by size.
    #[inline]
    pub(super) fn is_measured(&self, route: usize) -> bool {
        self.measured.load(Ordering::Relaxed) & (1 << route) != 0
    }

    /// The sub-routes of measured `route`.
    pub(super) fn subs_of(&self, route: usize) -> Vec<(String, u32)> {
        self.subs
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(route as u32))
            .cloned()
            .unwrap_or_default()
    }

    /// The route of traffic `key` (the default when none was set).
    #[inline]
    pub(super) fn of_key(&self, key: u32) -> usize {
        if key == NO_TRAFFIC_KEY || !self.any.load(Ordering::Relaxed) {
            return 0;
        }
        self.by_key
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .map_or(0, |&r| r as usize)
    }

    pub(super) fn spec(&self, route: usize) -> RouteSpec {
        self.specs
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(route)
            .cloned()
            .unwrap_or_default()
    }
}

/// The base transport of a stack name (`compress+encrypt+udp` → `udp`).
fn base_of(name: &str) -> &str {
    name.rsplit('+').next().unwrap_or(name)
}

impl Context {
    /// Registers (or finds) the route `spec` asks for. Refused, with a
    /// reason naming the value, when it names a method or stack this
    /// process does not run, or asks for encryption or compression that no
    /// stack of this process offers.
    pub fn route(&self, spec: &RouteSpec) -> Result<RouteId> {
        if spec.is_default() {
            return Ok(RouteId::DEFAULT);
        }
        let id = self.register_route(spec)?;
        let measured = match spec.select {
            Select::Measured => true,
            Select::Fixed => false,
            Select::Job => self.job_select() == Select::Measured,
        };
        if measured && spec.prefer.is_none() {
            self.make_measured(id, spec)?;
        }
        Ok(id)
    }

    /// The job's selection (`GW_SELECT`).
    pub fn job_select(&self) -> Select {
        Select::parse(self.inner.params.text("SELECT")).unwrap_or(Select::Fixed)
    }

    /// Registers the per-stack sub-routes of measured route `id` (once):
    /// one per base method between hosts the route may use, in its order.
    pub(super) fn make_measured(&self, id: RouteId, spec: &RouteSpec) -> Result<()> {
        let routes = &self.inner.routes;
        if routes.is_measured(id.index()) {
            return Ok(());
        }
        let mut bases: Vec<String> = Vec::new();
        let between_hosts = self
            .inner
            .methods
            .iter()
            .enumerate()
            .filter(|&(mi, m)| self.is_sequenced(mi) && !method::relay::is_relayed(m.name()))
            .map(|(_, m)| m.name());
        if spec.methods.is_empty() {
            for name in between_hosts {
                let b = base_of(name).to_string();
                if !bases.contains(&b) {
                    bases.push(b);
                }
            }
        } else {
            let running: Vec<&str> = between_hosts.collect();
            for m in &spec.methods {
                if running.iter().any(|r| r == m || base_of(r) == m) && !bases.contains(m) {
                    bases.push(m.clone());
                }
            }
        }
        let mut subs = Vec::new();
        for b in bases.into_iter().take(super::measured::MAX_SLOTS) {
            let sub = RouteSpec {
                select: Select::Fixed,
                prefer: Some(b.clone()),
                ..spec.clone()
            };
            subs.push((b, self.register_route(&sub)?.0));
        }
        routes
            .subs
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.0, subs);
        routes.measured.fetch_or(1 << id.index(), Ordering::Relaxed);
        Ok(())
    }

    /// Checks `spec` and registers it (or finds it) without looking at
    /// its selection.
    fn register_route(&self, spec: &RouteSpec) -> Result<RouteId> {
        let running = self.method_names();
        let bad = |var: &str, value: &str, reason: String| Error::BadParam {
            var: var.into(),
            value: value.into(),
            reason,
        };
        let list = spec.methods.join(",");
        for m in &spec.methods {
            if m.contains('+') {
                if method::transform::parse_stack(m).is_none() {
                    return Err(bad(
                        "gw_methods",
                        &list,
                        format!(
                            "{m:?} is not a stack (transforms in the order compress+encrypt, \
                             then a base method)"
                        ),
                    ));
                }
                if !running.contains(&m.as_str()) {
                    return Err(bad(
                        "gw_methods",
                        &list,
                        format!(
                            "this process offers no {m} stack (it runs: {})",
                            running.join(", ")
                        ),
                    ));
                }
            } else if !method::registry().iter().any(|r| r.name == m.as_str()) {
                return Err(bad(
                    "gw_methods",
                    &list,
                    format!(
                        "unknown method {m:?} (methods: {})",
                        method::registry()
                            .iter()
                            .map(|r| r.name)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ));
            } else if !running.iter().any(|r| base_of(r) == m.as_str()) {
                return Err(bad(
                    "gw_methods",
                    &list,
                    format!(
                        "method {m} does not run in this process (it runs: {})",
                        running.join(", ")
                    ),
                ));
            }
        }
        for (t, want) in [("encrypt", spec.encrypt), ("compress", spec.compress)] {
            if want == Some(true)
                && !running
                    .iter()
                    .any(|r| method::transform::transforms_of(r).contains(&t))
            {
                return Err(bad(
                    &format!("gw_{t}"),
                    "yes",
                    format!(
                        "this process built no {t} stack (it runs: {}); start the job with \
                         GW_{}=always to offer one",
                        running.join(", "),
                        t.to_ascii_uppercase()
                    ),
                ));
            }
        }
        let mut specs = self
            .inner
            .routes
            .specs
            .write()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(i) = specs.iter().position(|s| s == spec) {
            return Ok(RouteId(i as u32));
        }
        if specs.len() >= MAX_ROUTES {
            return Err(bad(
                "gw_methods",
                &list,
                format!("at most {MAX_ROUTES} different link choices per process"),
            ));
        }
        specs.push(spec.clone());
        Ok(RouteId(specs.len() as u32 - 1))
    }

    /// What route `id` asks for.
    pub fn route_spec(&self, id: RouteId) -> RouteSpec {
        self.inner.routes.spec(id.index())
    }

    /// Sends traffic with `key` (see [`rsr_v_keyed`](Self::rsr_v_keyed))
    /// on `route` from now on; [`RouteId::DEFAULT`] forgets the key.
    pub fn set_traffic_route(&self, key: u32, route: RouteId) {
        if key == NO_TRAFFIC_KEY {
            return;
        }
        let routes = &self.inner.routes;
        let mut map = routes.by_key.write().unwrap_or_else(|e| e.into_inner());
        if route == RouteId::DEFAULT {
            map.remove(&key);
        } else {
            map.insert(key, route.0);
        }
        routes.any.store(!map.is_empty(), Ordering::Relaxed);
    }

    /// The route traffic `key` takes.
    pub fn traffic_route(&self, key: u32) -> RouteId {
        RouteId(self.inner.routes.of_key(key) as u32)
    }

    /// The candidates of `route` for `rank`, best first: the default
    /// route's are the selection's ([`Context::candidates_for`]); another
    /// route keeps those whose transforms its `encrypt`/`compress` ask for
    /// and orders them by its `methods`.
    pub(super) fn route_candidates(
        &self,
        rank: u32,
        table: &DescriptorTable,
        route: usize,
    ) -> Result<Vec<(usize, usize)>> {
        if route == 0 {
            return self.candidates_for(rank, table);
        }
        let spec = self.inner.routes.spec(route);
        let mut out = self.spec_candidates(rank, table, &spec)?;
        if let Some(first) = &spec.prefer {
            let name = |c: &(usize, usize)| self.inner.methods[c.0].name();
            // Stable: the others keep the route's order behind it.
            out.sort_by_key(|c| !(name(c) == first.as_str() || base_of(name(c)) == first.as_str()));
        }
        Ok(out)
    }

    /// The candidates `spec` asks for, in its order.
    fn spec_candidates(
        &self,
        rank: u32,
        table: &DescriptorTable,
        spec: &RouteSpec,
    ) -> Result<Vec<(usize, usize)>> {
        let filtered = self.candidates_with(rank, table, spec.encrypt, spec.compress)?;
        if spec.methods.is_empty() {
            return Ok(filtered);
        }
        let all = self.ordered_candidates(rank, table)?;
        let name = |c: &(usize, usize)| self.inner.methods[c.0].name();
        let mut out: Vec<(usize, usize)> = Vec::new();
        for want in &spec.methods {
            let picked: Vec<(usize, usize)> = if want.contains('+') {
                // A stack named exactly is taken as named.
                all.iter()
                    .filter(|&&c| name(&c) == want.as_str())
                    .copied()
                    .collect()
            } else {
                filtered
                    .iter()
                    .filter(|&&c| base_of(name(&c)) == want.as_str())
                    .copied()
                    .collect()
            };
            for c in picked {
                if !out.contains(&c) {
                    out.push(c);
                }
            }
        }
        Ok(out)
    }

    /// Why `route` has nothing for `rank` (for the error of a send on it).
    pub(super) fn no_route_error(&self, rank: u32, table: &DescriptorTable, route: usize) -> Error {
        let spec = self.inner.routes.spec(route);
        let mut asked = Vec::new();
        if !spec.methods.is_empty() {
            asked.push(format!("gw_methods={}", spec.methods.join(",")));
        }
        for (k, v) in [("gw_encrypt", spec.encrypt), ("gw_compress", spec.compress)] {
            if let Some(v) = v {
                asked.push(format!("{k}={}", if v { "yes" } else { "no" }));
            }
        }
        Error::NoMethod {
            peer: rank,
            offered: format!(
                "{}; none of them is what {} asks for",
                table.names(),
                asked.join(" ")
            ),
        }
    }
}

// The selection's candidates, which routes filter and order.
impl Context {
    /// The selection policy's choices for `rank`, restricted to the stacks
    /// the transform policy asks for (`encrypt+tcp` between sites, …): a
    /// link that must be encrypted is never opened in the clear.
    pub(super) fn candidates_for(
        &self,
        rank: u32,
        table: &DescriptorTable,
    ) -> Result<Vec<(usize, usize)>> {
        self.candidates_with(rank, table, None, None)
    }

    /// The selection policy's choices for `rank`, a relay first or last
    /// as where `rank` runs says, before any transform filtering.
    pub(super) fn ordered_candidates(
        &self,
        rank: u32,
        table: &DescriptorTable,
    ) -> Result<Vec<(usize, usize)>> {
        let mut c = self.inner.policy.candidates(&self.inner.methods, table);
        let relayed = |mi: usize| method::relay::is_relayed(self.inner.methods[mi].name());
        if c.iter().any(|&(mi, _)| relayed(mi)) {
            // `rank` sits behind a firewall: from another site its relay
            // comes first (a direct connect would hang until the connect
            // timeout); within its site it is reached directly first, and
            // so is a host of a site whose relay is only a fallback
            // (`GW_RELAYS=all`). The other kind stays behind as the
            // fallback failover takes when the first breaks or its connect
            // fails (failover.rs).
            let theirs = self.placement_of(rank)?.site;
            let same_site = rank == self.rank() || self.placement_of(self.rank())?.site == theirs;
            let relay_first =
                !same_site && !method::relay::is_fallback_site(&self.inner.params, &theirs);
            c.sort_by_key(|&(mi, _)| relayed(mi) != relay_first);
        }
        Ok(c)
    }

    /// [`Context::candidates_for`] with the policy's encryption and
    /// compression overridden where `encrypt` / `compress` say (a route's
    /// choice, `routes.rs`).
    pub(super) fn candidates_with(
        &self,
        rank: u32,
        table: &DescriptorTable,
        encrypt: Option<bool>,
        compress: Option<bool>,
    ) -> Result<Vec<(usize, usize)>> {
        let mut c = self.ordered_candidates(rank, table)?;
        let relayed = |mi: usize| method::relay::is_relayed(self.inner.methods[mi].name());
        let overridden = encrypt.is_some() || compress.is_some();
        if (!self.inner.transforms.filters() && !overridden) || rank == self.rank() {
            return Ok(c);
        }
        let (mine, theirs) = (self.placement_of(self.rank())?, self.placement_of(rank)?);
        let mut wanted = if mine.host == theirs.host || !self.inner.transforms.filters() {
            Vec::new()
        } else {
            self.inner.transforms.wanted(mine.site == theirs.site)
        };
        if overridden {
            let has = |w: &Vec<&str>, t: &str| w.contains(&t);
            let comp = compress.unwrap_or(has(&wanted, "compress"));
            let enc = encrypt.unwrap_or(has(&wanted, "encrypt"));
            // In stack order (`transform::registry`).
            wanted = [("compress", comp), ("encrypt", enc)]
                .iter()
                .filter(|(_, on)| *on)
                .map(|(t, _)| *t)
                .collect();
        }
        // A relayed link is always encrypted end to end (method::relay).
        let mut wanted_relayed = wanted.clone();
        if !wanted_relayed.contains(&"encrypt") {
            wanted_relayed.push("encrypt");
        }
        c.retain(|&(mi, _)| {
            let name = self.inner.methods[mi].name();
            // Within a host (self, shm) no transform applies.
            let want = if relayed(mi) {
                &wanted_relayed
            } else {
                &wanted
            };
            &method::transform::transforms_of(name) == want
        });
        if c.is_empty() && !wanted.is_empty() {
            return Err(Error::NoMethod {
                peer: rank,
                offered: format!(
                    "{}; the link needs {} (GW_ENCRYPT/GW_COMPRESS) and no such stack applies",
                    table.names(),
                    wanted.join("+")
                ),
            });
        }
        Ok(c)
    }
}
