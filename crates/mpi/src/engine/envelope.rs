//! A message envelope: what a send announces (kind, matching context,
//! source, tag, sequence, size, the sender's request and, for a single
//! copy, its address and pid), encoded in the long (rendezvous) or short
//! (eager) form and decoded from hostile bytes.

use super::*;

/// A message envelope.
#[derive(Debug, Clone, Copy)]
pub struct Env {
    pub kind: u8,
    /// Matching key: context id (low 32 bits) and nonblocking-collective instance (high 32).
    pub ctx: u64,
    pub src: i32,
    pub tag: i32,
    pub seq: u32,
    pub size: u64,
    pub sreq: u64,
    /// RTS: address of the sender's packed data and the sender's pid (0 = no single copy).
    pub addr: u64,
    pub pid: u32,
}

impl Env {
    /// The full envelope (rendezvous): 56 bytes.
    pub(super) fn encode(&self) -> [u8; ENV_LEN] {
        let mut b = [0u8; ENV_LEN];
        b[0] = self.kind;
        b[4..8].copy_from_slice(&(self.ctx as u32).to_le_bytes());
        b[52..56].copy_from_slice(&((self.ctx >> 32) as u32).to_le_bytes());
        b[8..12].copy_from_slice(&self.src.to_le_bytes());
        b[12..16].copy_from_slice(&self.tag.to_le_bytes());
        b[16..20].copy_from_slice(&self.seq.to_le_bytes());
        b[24..32].copy_from_slice(&self.size.to_le_bytes());
        b[32..40].copy_from_slice(&self.sreq.to_le_bytes());
        b[40..48].copy_from_slice(&self.addr.to_le_bytes());
        b[48..52].copy_from_slice(&self.pid.to_le_bytes());
        b
    }

    /// The short envelope of an eager message: 24 bytes, without the
    /// rendezvous fields (the size is the rest of the payload). Why: with the
    /// ring's record header and the runtime's request header, an 8-byte
    /// message then fits one 64-byte cache line, the unit the receiver waits
    /// for; the full envelope made it two.
    pub(super) fn encode_eager(&self) -> [u8; EAGER_ENV_LEN] {
        let mut b = [0u8; EAGER_ENV_LEN];
        b[0] = EAGER;
        b[4..8].copy_from_slice(&(self.ctx as u32).to_le_bytes());
        b[8..12].copy_from_slice(&self.src.to_le_bytes());
        b[12..16].copy_from_slice(&self.tag.to_le_bytes());
        b[16..20].copy_from_slice(&self.seq.to_le_bytes());
        b[20..24].copy_from_slice(&((self.ctx >> 32) as u32).to_le_bytes());
        b
    }

    /// The envelope at the start of `b` and its length.
    #[inline]
    pub(super) fn decode(b: &[u8]) -> Option<(Env, usize)> {
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
        match b.first() {
            Some(&EAGER) if b.len() >= EAGER_ENV_LEN => Some((
                Env {
                    kind: EAGER,
                    ctx: u32_at(4) as u64 | (u32_at(20) as u64) << 32,
                    src: u32_at(8) as i32,
                    tag: u32_at(12) as i32,
                    seq: u32_at(16),
                    size: (b.len() - EAGER_ENV_LEN) as u64,
                    sreq: 0,
                    addr: 0,
                    pid: 0,
                },
                EAGER_ENV_LEN,
            )),
            Some(&RTS) if b.len() >= ENV_LEN => Some((
                Env {
                    kind: RTS,
                    ctx: u32_at(4) as u64 | (u32_at(52) as u64) << 32,
                    src: u32_at(8) as i32,
                    tag: u32_at(12) as i32,
                    seq: u32_at(16),
                    size: u64_at(24),
                    sreq: u64_at(32),
                    addr: u64_at(40),
                    pid: u32_at(48),
                },
                ENV_LEN,
            )),
            _ => None,
        }
    }

    pub(super) fn matches(&self, src: i32, tag: i32) -> bool {
        (src == ANY_SOURCE || src == self.src) && (tag == ANY_TAG || tag == self.tag)
    }
}
