//! Where each rank runs: its host and its site, published once through the
//! bootstrap at start-up (`gw.place.<rank>` = `<host digest hex>/<site>`) and
//! read back on demand, so every rank can learn any rank's placement without
//! messages beyond the start-up exchange.

use crate::bootstrap::Pmi;
use crate::error::{Error, Result};
use crate::params::Params;

/// Longest site name accepted (from `GW_SITE` or from a peer).
pub const MAX_SITE_LEN: usize = 64;
/// The site of ranks whose `GW_SITE` is unset.
pub const DEFAULT_SITE: &str = "default";

/// A rank's host (a digest of its host identity, see `host_identity`) and site.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    pub host: [u8; 32],
    pub site: String,
}

fn place_key(rank: u32) -> String {
    format!("gw.place.{rank}")
}

/// Why `site` is not an acceptable site name, if it is not: 1 to
/// [`MAX_SITE_LEN`] printable ASCII characters, no spaces (a machines file's
/// site names are single words).
pub fn check_site_name(site: &str) -> std::result::Result<(), String> {
    if site.is_empty() || site.len() > MAX_SITE_LEN {
        return Err(format!(
            "site name of {} bytes (1 to {MAX_SITE_LEN} allowed)",
            site.len()
        ));
    }
    if let Some(c) = site.chars().find(|c| !c.is_ascii_graphic()) {
        return Err(format!(
            "site name {site:?} holds {c:?} (printable ASCII without spaces allowed)"
        ));
    }
    Ok(())
}

/// This process's placement, from its host identity and `GW_SITE`.
pub(super) fn own_placement(params: &Params, host_id: &str) -> Result<Placement> {
    use sha2::{Digest, Sha256};
    let site = match params.text("SITE") {
        "" => DEFAULT_SITE.to_string(),
        s => {
            check_site_name(s).map_err(|reason| Error::BadParam {
                var: "GW_SITE".into(),
                value: s.chars().take(MAX_SITE_LEN + 8).collect(),
                reason,
            })?;
            s.to_string()
        }
    };
    Ok(Placement {
        host: Sha256::digest(host_id.as_bytes()).into(),
        site,
    })
}

pub(super) fn publish_placement(pmi: &mut Pmi, rank: u32, p: &Placement) -> Result<()> {
    let hex: String = p.host.iter().map(|b| format!("{b:02x}")).collect();
    pmi.put(&place_key(rank), &format!("{hex}/{}", p.site))
}

/// Parses what a peer published; hostile input gives an error, not a panic.
pub(super) fn parse_placement(rank: u32, text: &str) -> Result<Placement> {
    let bad = |why: &str| Error::Bootstrap(format!("malformed placement of rank {rank}: {why}"));
    let (hex, site) = text.split_once('/').ok_or_else(|| bad("no '/'"))?;
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(bad("host digest is not 64 hex digits"));
    }
    let mut host = [0u8; 32];
    for (i, byte) in host.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|_| bad("hex"))?;
    }
    check_site_name(site).map_err(|why| bad(&why))?;
    Ok(Placement {
        host,
        site: site.to_string(),
    })
}

pub(super) fn lookup_placement(pmi: &mut Pmi, rank: u32) -> Result<Placement> {
    let text = pmi
        .get_from(rank, &place_key(rank))?
        .ok_or_else(|| Error::Bootstrap(format!("rank {rank} published no placement")))?;
    parse_placement(rank, &text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placements_round_trip_and_hostile_ones_are_refused() {
        let p = Placement {
            host: [0xab; 32],
            site: "site-a".into(),
        };
        let text = format!("{}/site-a", "ab".repeat(32));
        assert_eq!(parse_placement(3, &text).unwrap(), p);
        for bad in [
            "",
            "/a",
            &format!("{}/", "ab".repeat(32)),
            &format!("{}/a b", "ab".repeat(32)),
            &format!("{}/a", "zz".repeat(32)),
            &format!("{}/{}", "ab".repeat(32), "x".repeat(MAX_SITE_LEN + 1)),
            &format!("{}é/a", "ab".repeat(31)),
        ] {
            assert!(parse_placement(1, bad).is_err(), "accepted {bad:?}");
        }
        assert!(check_site_name(&"s".repeat(MAX_SITE_LEN)).is_ok());
    }
}
