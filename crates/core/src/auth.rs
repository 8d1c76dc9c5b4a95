//! Challenge-response authentication of connections with the job secret.
//!
//! Both sides prove knowledge of the secret without sending it: each sends a
//! fresh nonce and answers the other's with an HMAC-SHA256 over both nonces,
//! a direction label and both context ids. Binding the context ids means a
//! proof cannot be replayed to impersonate another rank, and fresh nonces on
//! both sides mean a recorded handshake cannot be replayed at all.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Length of a nonce and of a proof.
pub const NONCE_LEN: usize = 16;
pub const PROOF_LEN: usize = 32;

type HmacSha256 = Hmac<Sha256>;

/// Which side of the handshake computes a proof; part of the MAC input so the
/// acceptor's proof cannot be reflected back as the connector's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Acceptor,
    Connector,
}

/// A fresh random nonce.
pub fn nonce() -> [u8; NONCE_LEN] {
    // getrandom only fails if the OS has no entropy source at all; a runtime
    // without one cannot authenticate anything, so that is a fatal setup error.
    try_nonce().expect("the operating system provides no random numbers")
}

/// A fresh random nonce, or the reason the system could not give one: for
/// callers that must not panic (a connection handshake reached from an MPI
/// call fails that connection instead).
pub fn try_nonce() -> std::io::Result<[u8; NONCE_LEN]> {
    let mut n = [0u8; NONCE_LEN];
    getrandom::getrandom(&mut n)
        .map_err(|e| std::io::Error::other(format!("no random numbers for a nonce: {e}")))?;
    Ok(n)
}

/// The proof a `role` sends: MAC(secret, label | own nonce | other nonce | own id | other id).
pub fn proof(
    secret: &[u8; 32],
    role: Role,
    own_nonce: &[u8; NONCE_LEN],
    other_nonce: &[u8; NONCE_LEN],
    own_id: u32,
    other_id: u32,
) -> [u8; PROOF_LEN] {
    mac_for(secret, role, own_nonce, other_nonce, own_id, other_id)
        .finalize()
        .into_bytes()
        .into()
}

/// Checks a proof received from the other side in constant time.
pub fn verify(
    secret: &[u8; 32],
    their_role: Role,
    their_nonce: &[u8; NONCE_LEN],
    our_nonce: &[u8; NONCE_LEN],
    their_id: u32,
    our_id: u32,
    proof: &[u8],
) -> bool {
    mac_for(secret, their_role, their_nonce, our_nonce, their_id, our_id)
        .verify_slice(proof)
        .is_ok()
}

fn mac_for(
    secret: &[u8; 32],
    role: Role,
    a_nonce: &[u8; NONCE_LEN],
    b_nonce: &[u8; NONCE_LEN],
    a_id: u32,
    b_id: u32,
) -> HmacSha256 {
    let mut mac = HmacSha256::new_from_slice(secret).expect("HMAC takes keys of any length");
    mac.update(match role {
        Role::Acceptor => b"gridwire-acceptor",
        Role::Connector => b"gridwire-connector",
    });
    mac.update(a_nonce);
    mac.update(b_nonce);
    mac.update(&a_id.to_le_bytes());
    mac.update(&b_id.to_le_bytes());
    mac
}

/// Parses a 64-hex-digit secret.
pub fn parse_secret(hex: &str) -> Option<[u8; 32]> {
    let hex = hex.trim();
    if hex.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// The PMI key under which rank 0 publishes the job secret when the
/// launcher gave none (`GW_JOB_SECRET` unset: Hydra, Slurm, …).
pub const SECRET_KEY: &str = "gw.job_secret";

/// 32 fresh random bytes.
pub fn random_secret() -> crate::Result<[u8; 32]> {
    let mut s = [0u8; 32];
    getrandom::getrandom(&mut s).map_err(|e| {
        crate::Error::Bootstrap(format!(
            "no random numbers from the operating system for the job secret: {e}"
        ))
    })?;
    Ok(s)
}

/// The job secret when the launcher passed none: rank 0 draws 32 random
/// bytes and puts them in the PMI key-value space, which only the job's
/// processes and its launcher can read (a name visible in `ps`, such as
/// the kvsname, would let any local user authenticate). The others read
/// it after a PMI barrier. The barrier is an extra one: every method takes
/// the secret when it starts, before the descriptor exchange that the
/// start-up's own barrier completes.
pub fn exchange_secret(pmi: &mut crate::bootstrap::Pmi) -> crate::Result<[u8; 32]> {
    if pmi.is_singleton() {
        return random_secret();
    }
    if pmi.rank() == 0 {
        let s = random_secret()?;
        let hex: String = s.iter().map(|b| format!("{b:02x}")).collect();
        pmi.put(SECRET_KEY, &hex)?;
        pmi.commit()?;
        pmi.barrier()?;
        return Ok(s);
    }
    pmi.commit()?;
    pmi.barrier()?;
    let v = pmi.get_from(0, SECRET_KEY)?.ok_or_else(|| {
        crate::Error::Bootstrap(format!(
            "rank 0 published no job secret ({SECRET_KEY}) in the PMI key-value space"
        ))
    })?;
    parse_secret(&v).ok_or_else(|| {
        crate::Error::Bootstrap(format!(
            "the job secret in the PMI key-value space ({SECRET_KEY}) is not 64 hex digits"
        ))
    })
}

/// A short public digest of a secret, for tests and diagnostics (it does
/// not reveal the secret).
pub fn fingerprint(secret: &[u8; 32]) -> String {
    use sha2::Digest;
    let mut h = Sha256::new();
    h.update(b"gridwire-secret-fingerprint");
    h.update(secret);
    h.finalize()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Derives a secret from public job data (used only when no launcher secret
/// exists, e.g. under a foreign launcher; it keeps unrelated jobs apart but is
/// not a secret from local users, and the runtime says so when verbose).
pub fn derive_secret(material: &str) -> [u8; 32] {
    use sha2::Digest;
    let mut h = Sha256::new();
    h.update(b"gridwire-derived-secret");
    h.update(material.as_bytes());
    h.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proofs_verify_only_with_same_secret_role_and_ids() {
        let s = [7u8; 32];
        let (na, nb) = (nonce(), nonce());
        let p = proof(&s, Role::Acceptor, &na, &nb, 1, 2);
        assert!(verify(&s, Role::Acceptor, &na, &nb, 1, 2, &p));
        assert!(
            !verify(&[8u8; 32], Role::Acceptor, &na, &nb, 1, 2, &p),
            "wrong secret"
        );
        assert!(
            !verify(&s, Role::Connector, &na, &nb, 1, 2, &p),
            "reflected role"
        );
        assert!(
            !verify(&s, Role::Acceptor, &na, &nb, 3, 2, &p),
            "other identity"
        );
        assert!(
            !verify(&s, Role::Acceptor, &nb, &na, 1, 2, &p),
            "swapped nonces"
        );
        assert!(
            !verify(&s, Role::Acceptor, &na, &nb, 1, 2, &p[..31]),
            "truncated"
        );
    }

    #[test]
    fn secret_hex_parsing() {
        let hex = "00ff".repeat(16);
        let s = parse_secret(&hex).unwrap();
        assert_eq!(s[0], 0);
        assert_eq!(s[1], 0xff);
        assert!(parse_secret("abc").is_none());
        assert!(parse_secret(&"zz".repeat(32)).is_none());
    }
}
