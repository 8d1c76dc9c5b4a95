//! Which sites were warm on the last run: every host had the proxy and
//! needed nothing staged.
//!
//! Inside one big site the front end's one login to the leader runs alone
//! while the machine's cores wait on the wide area's round trips. The
//! leader's own logins to the other hosts start only after it. Starting a
//! few of the site's hosts directly from the front end, beside the leader,
//! fills that time (see `plan::direct_hosts`). It costs nothing only when
//! those hosts need nothing sent: a direct host that needs the proxy or
//! staged files gets them over the wide area, not once per site from its
//! leader. So the front end starts hosts directly only when the same site,
//! with the same hosts, proxy and files, needed nothing on its last
//! successful run. A first run, or one after gwrun or the program changed,
//! uses the plain site tree and stages once per site.
//!
//! The memory is one empty file per warm configuration under
//! `$XDG_CACHE_HOME/gridwire/warm` (else `~/.cache/gridwire/warm`), named
//! by a SHA-256 of what it covers. A wrong guess costs time, never
//! correctness: the direct host is sent what it asks for, and the marker
//! is removed.

use sha2::{Digest, Sha256};
use std::path::PathBuf;

/// How many warm markers are kept (the oldest are removed beyond it).
const KEEP: usize = 64;

fn dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("gridwire").join("warm"))
}

/// The marker's name for `site` with `hosts`, the proxy's hash and the
/// staged files' hashes.
pub(super) fn key(site: &str, hosts: &[&str], proxy_hash: &str, staged: &[&str]) -> String {
    let mut h = Sha256::new();
    for part in [site]
        .iter()
        .chain(hosts)
        .chain([proxy_hash].iter())
        .chain(staged)
    {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    crate::grid::bootstrap::hex(&h.finalize())
}

pub(super) fn is_warm(key: &str) -> bool {
    dir().is_some_and(|d| d.join(key).is_file())
}

/// Records the outcome of a run for `key`. Failures to write are ignored:
/// the memory only decides how fast the next start is.
pub(super) fn record(key: &str, warm: bool) {
    let Some(d) = dir() else {
        return;
    };
    let path = d.join(key);
    if !warm {
        let _ = std::fs::remove_file(path);
        return;
    }
    if std::fs::create_dir_all(&d).is_err() || std::fs::write(&path, b"").is_err() {
        return;
    }
    // Bounded: keep the most recently written.
    let Ok(entries) = std::fs::read_dir(&d) else {
        return;
    };
    let mut all: Vec<(std::time::SystemTime, PathBuf)> = entries
        .flatten()
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    if all.len() > KEEP {
        all.sort();
        for (_, p) in &all[..all.len() - KEEP] {
            let _ = std::fs::remove_file(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_differ_by_every_part() {
        let k = key("s0", &["a", "b"], "p", &["x"]);
        assert_ne!(k, key("s0", &["a", "b"], "p", &[]));
        assert_ne!(k, key("s0", &["ab"], "p", &["x"]));
        assert_ne!(k, key("s1", &["a", "b"], "p", &["x"]));
        assert_ne!(k, key("s0", &["a", "b"], "q", &["x"]));
        assert_eq!(k, key("s0", &["a", "b"], "p", &["x"]));
    }
}
