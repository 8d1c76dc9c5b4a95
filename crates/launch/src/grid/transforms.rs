//! The machines file's per-site `encrypt=` and `compress=` as the ranks'
//! transform policy (see gridwire-core's `method::transform::policy`).
//!
//! Each site's ranks get `GW_ENCRYPT` / `GW_COMPRESS` from their site's
//! keys (`encrypt=yes` → `sites`, `no` → `never`; `compress=yes|zstd|lz4`
//! → `sites`, `no` → `never`), else the job's value (`--env` or the front
//! end's environment). The policy is the *sender's*: a receiver must offer
//! the stacks any other site may send with, so every rank also gets
//! `GW_TRANSFORM_OFFER`, the union over the sites of what each sends
//! between sites, and `GW_SITES`, the number of sites of the job.

use super::protocol::PlanSite;
use crate::machines::Machines;

/// `(GW_ENCRYPT, GW_COMPRESS)` of a site whose keys are `encrypt` and `compress`.
fn site_policy(
    encrypt: Option<&str>,
    compress: Option<&str>,
    job_env: &[(String, String)],
) -> (String, String) {
    let job = |k: &str, default: &str| {
        job_env
            .iter()
            .rev()
            .find(|(n, _)| n == k)
            .map_or(default.to_string(), |(_, v)| v.clone())
    };
    let encrypt = match encrypt {
        Some("no") => "never".to_string(),
        Some(_) => "sites".to_string(),
        None => job("GW_ENCRYPT", "sites"),
    };
    let compress = match compress {
        Some("no") => "never".to_string(),
        Some(_) => "sites".to_string(),
        None => job("GW_COMPRESS", "never"),
    };
    (encrypt, compress)
}

/// The transforms a rank with these settings stacks on a link between sites.
fn between_sites(encrypt: &str, compress: &str) -> String {
    let mut v = Vec::new();
    if compress != "never" {
        v.push("compress");
    }
    if encrypt != "never" {
        v.push("encrypt");
    }
    v.join("+")
}

/// Fills each plan site's `env` with its ranks' transform policy.
pub fn apply(m: &Machines, sites: &mut [PlanSite], job_env: &[(String, String)]) {
    let policies: Vec<(String, String)> = sites
        .iter()
        .map(|ps| {
            let site = m.site_index(&ps.name).map(|i| &m.sites[i]);
            site_policy(
                site.and_then(|s| s.encrypt.as_deref()),
                site.and_then(|s| s.compress.as_deref()),
                job_env,
            )
        })
        .collect();
    let mut offer: Vec<String> = Vec::new();
    for (e, c) in &policies {
        let set = between_sites(e, c);
        if !set.is_empty() && !offer.contains(&set) {
            offer.push(set);
        }
    }
    let mut names: Vec<&str> = sites.iter().map(|s| s.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    let count = names.len().to_string();
    for (ps, (e, c)) in sites.iter_mut().zip(policies) {
        ps.env = vec![
            ("GW_ENCRYPT".into(), e),
            ("GW_COMPRESS".into(), c),
            ("GW_SITES".into(), count.clone()),
            ("GW_TRANSFORM_OFFER".into(), offer.join(",")),
        ];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn site_keys_win_over_the_job_setting() {
        let job = vec![("GW_COMPRESS".to_string(), "always".to_string())];
        assert_eq!(
            site_policy(None, None, &[]),
            ("sites".to_string(), "never".to_string())
        );
        assert_eq!(
            site_policy(Some("no"), None, &job),
            ("never".to_string(), "always".to_string())
        );
        assert_eq!(
            site_policy(Some("yes"), Some("zstd"), &job),
            ("sites".to_string(), "sites".to_string())
        );
        assert_eq!(between_sites("sites", "sites"), "compress+encrypt");
        assert_eq!(between_sites("never", "never"), "");
    }
}
