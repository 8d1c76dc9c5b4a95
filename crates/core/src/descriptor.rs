//! Descriptor tables: the ordered list of (method, address) by which a
//! context can be reached, fastest first. Published through the bootstrap
//! (hex, because PMI values may not contain spaces) and attached to
//! startpoints the first time they travel to a peer.

use crate::error::{Error, Result};

/// One way to reach a context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub method: String,
    pub descriptor: Vec<u8>,
}

/// A context's descriptor table.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DescriptorTable {
    pub entries: Vec<Entry>,
}

/// Upper bounds that keep a hostile table from making us allocate much.
const MAX_ENTRIES: usize = 32;
const MAX_NAME: usize = 64;

impl DescriptorTable {
    /// Binary form: `u8 count`, then per entry `u8 name_len, name, u16 len, descriptor`.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![self.entries.len() as u8];
        for e in &self.entries {
            out.push(e.method.len() as u8);
            out.extend_from_slice(e.method.as_bytes());
            out.extend_from_slice(&(e.descriptor.len() as u16).to_le_bytes());
            out.extend_from_slice(&e.descriptor);
        }
        out
    }

    /// Parses the binary form; returns the table and the bytes consumed.
    pub fn decode(buf: &[u8]) -> Result<(Self, usize)> {
        let bad = |what: &str| Error::BadStartpoint(format!("descriptor table: {what}"));
        let n = *buf.first().ok_or_else(|| bad("empty"))? as usize;
        if n > MAX_ENTRIES {
            return Err(bad("too many entries"));
        }
        let mut pos = 1;
        let mut entries = Vec::with_capacity(n);
        for _ in 0..n {
            let nl = *buf.get(pos).ok_or_else(|| bad("truncated"))? as usize;
            pos += 1;
            if nl == 0 || nl > MAX_NAME {
                return Err(bad("bad method name length"));
            }
            let name = buf
                .get(pos..pos + nl)
                .ok_or_else(|| bad("truncated name"))?;
            let method = std::str::from_utf8(name)
                .map_err(|_| bad("method name is not UTF-8"))?
                .to_string();
            pos += nl;
            let dl = buf
                .get(pos..pos + 2)
                .ok_or_else(|| bad("truncated length"))?;
            let dl = u16::from_le_bytes([dl[0], dl[1]]) as usize;
            pos += 2;
            let descriptor = buf
                .get(pos..pos + dl)
                .ok_or_else(|| bad("truncated descriptor"))?
                .to_vec();
            pos += dl;
            entries.push(Entry { method, descriptor });
        }
        Ok((DescriptorTable { entries }, pos))
    }

    pub fn to_hex(&self) -> String {
        self.encode().iter().map(|b| format!("{b:02x}")).collect()
    }

    pub fn from_hex(s: &str) -> Result<Self> {
        if !s.len().is_multiple_of(2) {
            return Err(Error::BadStartpoint(
                "descriptor table: odd hex length".into(),
            ));
        }
        let bytes: Option<Vec<u8>> = (0..s.len())
            .step_by(2)
            .map(|i| s.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
            .collect();
        let bytes =
            bytes.ok_or_else(|| Error::BadStartpoint("descriptor table: bad hex".into()))?;
        let (t, used) = Self::decode(&bytes)?;
        if used != bytes.len() {
            return Err(Error::BadStartpoint(
                "descriptor table: trailing bytes".into(),
            ));
        }
        Ok(t)
    }

    /// Method names in order, for messages.
    pub fn names(&self) -> String {
        let v: Vec<&str> = self.entries.iter().map(|e| e.method.as_str()).collect();
        if v.is_empty() {
            "nothing".into()
        } else {
            v.join(", ")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> DescriptorTable {
        DescriptorTable {
            entries: vec![
                Entry {
                    method: "shm".into(),
                    descriptor: b"host-a".to_vec(),
                },
                Entry {
                    method: "tcp".into(),
                    descriptor: b"127.0.0.1:5000".to_vec(),
                },
            ],
        }
    }

    #[test]
    fn roundtrip_binary_and_hex() {
        let t = table();
        let (d, used) = DescriptorTable::decode(&t.encode()).unwrap();
        assert_eq!(d, t);
        assert_eq!(used, t.encode().len());
        assert_eq!(DescriptorTable::from_hex(&t.to_hex()).unwrap(), t);
        assert_eq!(t.names(), "shm, tcp");
    }

    #[test]
    fn every_truncation_is_an_error() {
        let bytes = table().encode();
        for cut in 0..bytes.len() {
            assert!(
                DescriptorTable::decode(&bytes[..cut]).is_err(),
                "cut at {cut}"
            );
        }
        assert!(DescriptorTable::from_hex("zz").is_err());
        assert!(DescriptorTable::from_hex(&(table().to_hex() + "00")).is_err());
        assert!(DescriptorTable::decode(&[200]).is_err());
    }
}
