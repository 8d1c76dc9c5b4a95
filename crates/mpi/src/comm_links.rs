//! Link hints of a communicator: the `gw_*` info keys, as MPICH-G let a
//! program choose methods and their parameters per communicator through
//! attributes.
//!
//! | key | value | effect |
//! | --- | --- | --- |
//! | `gw_methods` | `udp,tcp` (base methods or stacks such as `encrypt+udp`) | the stacks this communicator's traffic between hosts may use, in preference order, among those applicable for the pair |
//! | `gw_encrypt` | `yes` / `no` | encrypted even where the job's policy would not, or not even where it would (a relay is always encrypted) |
//! | `gw_compress` | `yes` / `no` | the same for compression |
//! | `gw_select` | `measured` / `fixed` | `measured`: per pair, a link per applicable stack and each message on the one cheapest for its size (round trip and bandwidth measured, docs/wan.md); `fixed`: the first applicable stack for every message; unset: as the job's `GW_SELECT` |
//! | `gw_tcp_sndbuf` | a size (`4M`) | checked; tcp keeps one connection per pair whose buffer is set when it opens, so the value in force is the job's `GW_TCP_SNDBUF`, and `MPI_Comm_get_info` says so |
//!
//! The keys become a runtime *route* ([`gridwire_core::RouteSpec`]); the
//! communicator's traffic keys (its two context ids) are mapped to it, and
//! the engine sends with the key ([`traffic_key`]). Between hosts the
//! runtime opens a second link to the peer on demand for the route and
//! keeps one end-to-end sequence across the pair's links; within a host
//! shared memory is used whatever the keys say (they are hints). Other
//! keys are kept as given and otherwise ignored, as the standard says;
//! a bad value of a `gw_` key is `MPI_ERR_INFO_VALUE` naming the key, the
//! value and why.

use crate::comm::Comm;
use crate::error::{class, err, Result};
use crate::info::Info;
use crate::Mpi;
use gridwire_core::{RouteId, RouteSpec, Select};

pub const KEY_METHODS: &str = "gw_methods";
pub const KEY_ENCRYPT: &str = "gw_encrypt";
pub const KEY_COMPRESS: &str = "gw_compress";
pub const KEY_TCP_SNDBUF: &str = "gw_tcp_sndbuf";
pub const KEY_SELECT: &str = "gw_select";

/// The link keys this layer understands.
pub const KEYS: &[&str] = &[
    KEY_METHODS,
    KEY_ENCRYPT,
    KEY_COMPRESS,
    KEY_SELECT,
    KEY_TCP_SNDBUF,
];

/// The largest `gw_tcp_sndbuf` accepted (as `GW_TCP_SNDBUF`).
const MAX_SNDBUF: u64 = 1 << 30;

/// The runtime traffic key of a message on matching context `ctx` (a
/// communicator's point-to-point or collective context id; a nonblocking
/// collective's shadow shares its communicator's).
#[inline]
pub fn traffic_key(ctx: u64) -> u32 {
    ctx as u32
}

fn bad(key: &str, value: &str, why: impl std::fmt::Display) -> crate::error::MpiError {
    err(
        class::INFO_VALUE,
        format!("info key {key}={value:?}: {why}"),
    )
}

fn yes_no(key: &str, value: &str) -> Result<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "yes" | "true" | "on" | "1" => Ok(true),
        "no" | "false" | "off" | "0" => Ok(false),
        _ => Err(bad(key, value, "expected yes or no")),
    }
}

/// A size with an optional K, M or G suffix (powers of 1024).
fn size(key: &str, value: &str) -> Result<u64> {
    let v = value.trim();
    let (digits, mult) = match v.char_indices().last() {
        Some((i, c)) if c.eq_ignore_ascii_case(&'k') => (&v[..i], 1u64 << 10),
        Some((i, c)) if c.eq_ignore_ascii_case(&'m') => (&v[..i], 1 << 20),
        Some((i, c)) if c.eq_ignore_ascii_case(&'g') => (&v[..i], 1 << 30),
        _ => (v, 1),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| bad(key, value, "expected a size in bytes (e.g. 4194304 or 4M)"))?;
    let bytes = n
        .checked_mul(mult)
        .filter(|&b| b <= MAX_SNDBUF)
        .ok_or_else(|| bad(key, value, format!("at most {MAX_SNDBUF} bytes")))?;
    Ok(bytes)
}

/// What the `gw_` keys of `info` ask for: the route, and the tcp send
/// buffer asked for (if any). Values are checked here; whether the
/// methods named run in this process is the runtime's to say.
pub fn link_spec(info: &Info) -> Result<(RouteSpec, Option<u64>)> {
    let mut spec = RouteSpec::default();
    if let Some(v) = info.get(KEY_METHODS) {
        for name in v.split(',').map(|n| n.trim().to_ascii_lowercase()) {
            if name.is_empty() {
                return Err(bad(KEY_METHODS, v, "an empty method name"));
            }
            if !spec.methods.contains(&name) {
                spec.methods.push(name);
            }
        }
    }
    if let Some(v) = info.get(KEY_ENCRYPT) {
        spec.encrypt = Some(yes_no(KEY_ENCRYPT, v)?);
    }
    if let Some(v) = info.get(KEY_COMPRESS) {
        let c = match v.trim().to_ascii_lowercase().as_str() {
            "zstd" | "lz4" => true,
            _ => yes_no(KEY_COMPRESS, v)?,
        };
        spec.compress = Some(c);
    }
    if let Some(v) = info.get(KEY_SELECT) {
        spec.select =
            Select::parse(v).ok_or_else(|| bad(KEY_SELECT, v, "expected measured or fixed"))?;
    }
    let sndbuf = match info.get(KEY_TCP_SNDBUF) {
        Some(v) => Some(size(KEY_TCP_SNDBUF, v)?),
        None => None,
    };
    Ok((spec, sndbuf))
}

impl Mpi {
    /// The route the `gw_` keys of `info` ask for, registered with the
    /// runtime (`MPI_ERR_INFO_VALUE` when it refuses them, e.g. a method
    /// this process does not run).
    pub fn link_route(&self, info: &Info) -> Result<RouteId> {
        let (spec, _) = link_spec(info)?;
        self.ctx().route(&spec).map_err(|e| {
            let (key, value) = match &e {
                gridwire_core::Error::BadParam { var, value, .. } => (var.clone(), value.clone()),
                _ => (KEY_METHODS.to_string(), spec.methods.join(",")),
            };
            let why = match e {
                gridwire_core::Error::BadParam { reason, .. } => reason,
                e => e.to_string(),
            };
            bad(&key, &value, why)
        })
    }

    /// `MPI_Comm_set_info` (`replace` = false: the keys of `info` update
    /// the communicator's) and the info of `MPI_Comm_dup_with_info`
    /// (`replace` = true: they are its only hints). Checked before anything
    /// changes: on an error the communicator keeps its hints and links.
    pub fn comm_set_info(&self, comm: &Comm, info: &Info, replace: bool) -> Result<()> {
        let mut merged = if replace {
            Info::default()
        } else {
            comm.info.lock().unwrap_or_else(|e| e.into_inner()).clone()
        };
        for (k, v) in &info.pairs {
            merged.set(k, v)?;
        }
        let route = self.link_route(&merged)?;
        self.in_force(&mut merged)?;
        self.set_comm_route(comm, route);
        *comm.info.lock().unwrap_or_else(|e| e.into_inner()) = merged;
        Ok(())
    }

    /// Rewrites the `gw_` keys of `info` to what is in force: normalised
    /// values, and the tcp send buffer the connections really have.
    fn in_force(&self, info: &mut Info) -> Result<()> {
        let (spec, sndbuf) = link_spec(info)?;
        if !spec.methods.is_empty() {
            info.set(KEY_METHODS, &spec.methods.join(","))?;
        }
        let word = |b: bool| if b { "yes" } else { "no" };
        if let Some(e) = spec.encrypt {
            info.set(KEY_ENCRYPT, word(e))?;
        }
        if let Some(c) = spec.compress {
            info.set(KEY_COMPRESS, word(c))?;
        }
        if spec.select != Select::Job {
            info.set(KEY_SELECT, spec.select.word())?;
        }
        if sndbuf.is_some() {
            // tcp has one connection per pair, its buffer set when it
            // opened: the job's setting is what this communicator gets.
            let job = self.ctx().params().num("TCP_SNDBUF");
            info.set(KEY_TCP_SNDBUF, &job.to_string())?;
        }
        Ok(())
    }

    /// Maps `comm`'s traffic (point-to-point and collective context ids,
    /// and those of an intercommunicator's hidden local communicator) to
    /// `route`.
    pub(crate) fn set_comm_route(&self, comm: &Comm, route: RouteId) {
        let ctx = self.ctx();
        let mut ids = vec![comm.ctx, comm.ctx + 1];
        if let Some(local) = comm.local_comm() {
            ids.extend([local.ctx, local.ctx + 1]);
        }
        for id in ids {
            ctx.set_traffic_route(traffic_key(id as u64), route);
        }
    }

    /// `MPI_Comm_dup`: the duplicate keeps `comm`'s hints, so its links too.
    pub(crate) fn inherit_links(&self, comm: &Comm, dup: &Comm) {
        let route = self.ctx().traffic_route(traffic_key(comm.ctx as u64));
        if route != RouteId::DEFAULT {
            self.set_comm_route(dup, route);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(pairs: &[(&str, &str)]) -> Info {
        let mut i = Info::default();
        for (k, v) in pairs {
            i.set(k, v).unwrap();
        }
        i
    }

    #[test]
    fn values_parse_and_bad_ones_name_the_key() {
        let (s, b) = link_spec(&info(&[
            ("gw_methods", " UDP, tcp ,udp"),
            ("gw_encrypt", "yes"),
            ("gw_compress", "zstd"),
            ("gw_select", " Measured"),
            ("gw_tcp_sndbuf", "4M"),
            ("other", "ignored"),
        ]))
        .unwrap();
        assert_eq!(s.methods, vec!["udp", "tcp"]);
        assert_eq!(s.select, Select::Measured);
        assert_eq!(
            (s.encrypt, s.compress, b),
            (Some(true), Some(true), Some(4 << 20))
        );
        let (s, b) = link_spec(&info(&[("gw_encrypt", "off")])).unwrap();
        assert_eq!((s.encrypt, s.methods.len(), b), (Some(false), 0, None));
        for (k, v) in [
            ("gw_methods", "udp,,tcp"),
            ("gw_encrypt", "maybe"),
            ("gw_compress", "gzip"),
            ("gw_select", "fastest"),
            ("gw_tcp_sndbuf", "-1"),
            ("gw_tcp_sndbuf", "2G"),
            ("gw_tcp_sndbuf", "lots"),
        ] {
            let e = link_spec(&info(&[(k, v)])).unwrap_err();
            assert_eq!(e.class, class::INFO_VALUE, "{k}={v}");
            assert!(e.msg.contains(k), "{k}={v}: {}", e.msg);
        }
    }
}
