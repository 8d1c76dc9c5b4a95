//! `encrypt`: every message sealed with an AEAD (AES-256-GCM where the CPU
//! has AES instructions, else ChaCha20-Poly1305; aws-lc-rs, chosen over
//! ring by measurement, see docs/benchmarks.md).
//!
//! # Keys
//! Each process publishes a fresh 16-byte *receive nonce* in its stack's
//! descriptor. Opening a link to `peer`, the sender draws a fresh 16-byte
//! *send nonce* and sends a hello `[alg][send nonce][tag][counter 0]` first
//! on the base link. Both sides then derive the direction's keys:
//! `prk = HKDF-Extract(salt = send nonce ‖ receive nonce, ikm = job secret)`,
//! `key(epoch) = HKDF-Expand(prk, "gridwire encrypt v1" ‖ alg ‖ sender ‖
//! receiver ‖ epoch)`. So keys are per link and direction, bound to both
//! sides' nonces (a new receiving process has a new nonce: nothing recorded
//! from another process opens), and the secret never leaves the processes.
//!
//! # Frames
//! `[ciphertext][16-byte tag][u64 counter, little-endian]` (a trailer: the
//! ciphertext starts where the message would, and sealing and opening read
//! their input out of place, in one pass). The counter counts
//! this direction's frames from 1; the AEAD nonce is `0u32 ‖ counter` (big
//! endian), the key that of epoch `counter >> epoch_bits`: the sender
//! rekeys every 2^24 frames, and earlier if 2^36 bytes went under one key
//! (it then jumps the counter to the next epoch), well inside AES-GCM's
//! usage limits. The receiver accepts a counter inside its replay window
//! (see `replay`) only once and only if the tag checks out; anything else
//! is counted and never delivered.

use super::replay::ReplayWindow;
use super::{Opened, Rejected, Transform, TransformInfo};
use crate::error::{Error, Result};
use crate::method::MethodEnv;
use crate::params::{Kind, ParamDecl};
use aws_lc_rs::aead::{self, Aad, LessSafeKey, Nonce, UnboundKey};
use aws_lc_rs::hkdf;
use std::collections::HashMap;
use std::io::IoSlice;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

pub const INFO: TransformInfo = TransformInfo {
    name: "encrypt",
    summary: "AEAD per message (AES-256-GCM or ChaCha20-Poly1305), keys per link and direction",
    params: PARAMS,
    init,
};

const PARAMS: &[ParamDecl] = &[ParamDecl {
    name: "ENCRYPT_CIPHER",
    default: "auto",
    kind: Kind::Choice(&["auto", "aes-256-gcm", "chacha20-poly1305"]),
    help: "AEAD the encrypt transform seals with. `auto` = AES-256-GCM where the CPU has AES \
           instructions, else ChaCha20-Poly1305. The receiver follows the sender's choice.",
}];

const NONCE_LEN: usize = 16;
const TAG_LEN: usize = 16;
const CTR_LEN: usize = 8;
/// Bytes `seal` adds to a message.
pub const OVERHEAD: usize = TAG_LEN + CTR_LEN;
const LABEL: &[u8] = b"gridwire encrypt v1";

/// Frames per key: 2^24 (the rekey interval).
pub const EPOCH_BITS: u32 = 24;
/// Bytes sealed under one key before the sender moves to the next epoch.
pub const BYTES_PER_KEY: u64 = 1 << 36;

/// The AEADs, by their id in the hello.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cipher {
    Aes256Gcm = 1,
    ChaCha20Poly1305 = 2,
}

impl Cipher {
    fn alg(self) -> &'static aead::Algorithm {
        match self {
            Cipher::Aes256Gcm => &aead::AES_256_GCM,
            Cipher::ChaCha20Poly1305 => &aead::CHACHA20_POLY1305,
        }
    }
    fn from_id(id: u8) -> Option<Cipher> {
        match id {
            1 => Some(Cipher::Aes256Gcm),
            2 => Some(Cipher::ChaCha20Poly1305),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Cipher::Aes256Gcm => "aes-256-gcm",
            Cipher::ChaCha20Poly1305 => "chacha20-poly1305",
        }
    }
    /// AES-256-GCM where the CPU accelerates AES and carry-less multiply.
    pub fn auto() -> Cipher {
        #[cfg(target_arch = "x86_64")]
        let accelerated = std::arch::is_x86_feature_detected!("aes")
            && std::arch::is_x86_feature_detected!("pclmulqdq");
        #[cfg(target_arch = "aarch64")]
        let accelerated = std::arch::is_aarch64_feature_detected!("aes")
            && std::arch::is_aarch64_feature_detected!("pmull");
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        let accelerated = false;
        if accelerated {
            Cipher::Aes256Gcm
        } else {
            Cipher::ChaCha20Poly1305
        }
    }
}

/// Keys of one direction: the extracted secret and the current epoch's key.
struct Keys {
    cipher: Cipher,
    prk: hkdf::Prk,
    sender: u32,
    receiver: u32,
    epoch: u64,
    key: LessSafeKey,
    /// The previous epoch's key (receive side: frames reordered across a rekey).
    prev: Option<(u64, LessSafeKey)>,
}

impl Keys {
    fn new(cipher: Cipher, secret: &[u8; 32], salt: &[u8], sender: u32, receiver: u32) -> Self {
        let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, salt).extract(secret);
        let key = derive(&prk, cipher, sender, receiver, 0);
        Keys {
            cipher,
            prk,
            sender,
            receiver,
            epoch: 0,
            key,
            prev: None,
        }
    }

    /// Moves to `epoch` (newer than the current one), keeping the current
    /// key as the previous one when `keep_prev` (receive side).
    fn advance(&mut self, epoch: u64, keep_prev: bool) {
        let key = derive(&self.prk, self.cipher, self.sender, self.receiver, epoch);
        let old = std::mem::replace(&mut self.key, key);
        self.prev = keep_prev.then_some((self.epoch, old));
        self.epoch = epoch;
    }
}

fn derive(prk: &hkdf::Prk, cipher: Cipher, sender: u32, receiver: u32, epoch: u64) -> LessSafeKey {
    let id = [cipher as u8];
    let (s, r, e) = (
        sender.to_le_bytes(),
        receiver.to_le_bytes(),
        epoch.to_le_bytes(),
    );
    let info: [&[u8]; 5] = [LABEL, &id, &s, &r, &e];
    let okm = prk
        .expand(&info, cipher.alg())
        .expect("HKDF output of one AEAD key length is always valid");
    LessSafeKey::new(UnboundKey::from(okm))
}

fn nonce(ctr: u64) -> Nonce {
    let mut n = [0u8; 12];
    n[4..].copy_from_slice(&ctr.to_be_bytes());
    Nonce::assume_unique_for_key(n)
}

struct Tx {
    keys: Keys,
    /// Last counter used.
    ctr: u64,
    bytes_in_epoch: u64,
}

struct Rx {
    keys: Keys,
    window: ReplayWindow,
}

/// Usage limits, adjustable for tests (rekeying every 2^24 frames cannot be
/// exercised otherwise).
#[derive(Clone, Copy)]
pub struct Limits {
    pub epoch_bits: u32,
    pub bytes_per_key: u64,
}

pub struct Encrypt {
    me: u32,
    secret: [u8; 32],
    cipher: Cipher,
    limits: Limits,
    /// Published in the descriptor: senders to us mix it into their keys.
    recv_nonce: [u8; NONCE_LEN],
    tx: Mutex<HashMap<u32, Tx>>,
    rx: Mutex<HashMap<u32, Rx>>,
    sealed: AtomicU64,
    opened: AtomicU64,
    forged: AtomicU64,
    replayed: AtomicU64,
    rekeys: AtomicU64,
}

fn init(env: &MethodEnv) -> Result<Arc<dyn Transform>> {
    let cipher = match env.params.text("ENCRYPT_CIPHER") {
        "aes-256-gcm" => Cipher::Aes256Gcm,
        "chacha20-poly1305" => Cipher::ChaCha20Poly1305,
        _ => Cipher::auto(),
    };
    Ok(Arc::new(Encrypt::new(
        env.job.ctx_id,
        env.job.secret,
        cipher,
        Limits {
            epoch_bits: EPOCH_BITS,
            bytes_per_key: BYTES_PER_KEY,
        },
    )?))
}

impl Encrypt {
    pub fn new(me: u32, secret: [u8; 32], cipher: Cipher, limits: Limits) -> Result<Self> {
        let recv_nonce = crate::auth::try_nonce().map_err(|e| Error::io("encrypt: nonce", e))?;
        Ok(Encrypt {
            me,
            secret,
            cipher,
            limits,
            recv_nonce,
            tx: Mutex::new(HashMap::new()),
            rx: Mutex::new(HashMap::new()),
            sealed: AtomicU64::new(0),
            opened: AtomicU64::new(0),
            forged: AtomicU64::new(0),
            replayed: AtomicU64::new(0),
            rekeys: AtomicU64::new(0),
        })
    }

    pub fn cipher(&self) -> Cipher {
        self.cipher
    }

    fn forged(&self, why: String) -> Rejected {
        self.forged.fetch_add(1, Ordering::Relaxed);
        Rejected::Forged(why)
    }

    fn replay(&self, why: String) -> Rejected {
        self.replayed.fetch_add(1, Ordering::Relaxed);
        Rejected::Replay(why)
    }

    fn open_hello(&self, src: u32, data: &mut [u8]) -> std::result::Result<Opened, Rejected> {
        let mut rx = self.rx.lock().unwrap_or_else(|e| e.into_inner());
        if rx.contains_key(&src) {
            return Err(self.replay(format!("second session hello from {src}")));
        }
        // [alg][send nonce][tag]
        if data.len() != 1 + NONCE_LEN + TAG_LEN {
            return Err(self.forged(format!("hello of {} bytes", data.len())));
        }
        let cipher = Cipher::from_id(data[0])
            .ok_or_else(|| self.forged(format!("unknown cipher id {}", data[0])))?;
        let mut salt = [0u8; 2 * NONCE_LEN];
        salt[..NONCE_LEN].copy_from_slice(&data[1..1 + NONCE_LEN]);
        salt[NONCE_LEN..].copy_from_slice(&self.recv_nonce);
        let keys = Keys::new(cipher, &self.secret, &salt, src, self.me);
        let (head, tag) = data.split_at_mut(1 + NONCE_LEN);
        keys.key
            .open_in_place(nonce(0), Aad::from(&*head), tag)
            .map_err(|_| self.forged(format!("hello from {src} does not authenticate")))?;
        rx.insert(
            src,
            Rx {
                keys,
                window: ReplayWindow::new(),
            },
        );
        Ok(Opened::Consumed)
    }
}

impl Transform for Encrypt {
    fn name(&self) -> &'static str {
        "encrypt"
    }

    fn descriptor(&self) -> Vec<u8> {
        self.recv_nonce.to_vec()
    }

    fn connect(&self, peer: u32, remote: &[u8]) -> Result<Option<Vec<u8>>> {
        let their: [u8; NONCE_LEN] = remote.try_into().map_err(|_| {
            Error::BadStartpoint(format!(
                "encrypt: receive nonce of rank {peer} has {} bytes",
                remote.len()
            ))
        })?;
        let send_nonce = crate::auth::try_nonce().map_err(|e| Error::io("encrypt: nonce", e))?;
        let mut salt = [0u8; 2 * NONCE_LEN];
        salt[..NONCE_LEN].copy_from_slice(&send_nonce);
        salt[NONCE_LEN..].copy_from_slice(&their);
        let keys = Keys::new(self.cipher, &self.secret, &salt, self.me, peer);
        let mut hello = Vec::with_capacity(1 + NONCE_LEN + OVERHEAD);
        hello.push(self.cipher as u8);
        hello.extend_from_slice(&send_nonce);
        let tag = keys
            .key
            .seal_in_place_separate_tag(nonce(0), Aad::from(&hello[..]), &mut [])
            .map_err(|_| Error::Protocol {
                peer: format!("rank {peer}"),
                what: "encrypt: cannot seal the hello".into(),
            })?;
        hello.extend_from_slice(tag.as_ref());
        hello.extend_from_slice(&0u64.to_le_bytes());
        self.tx.lock().unwrap_or_else(|e| e.into_inner()).insert(
            peer,
            Tx {
                keys,
                ctr: 0,
                bytes_in_epoch: 0,
            },
        );
        Ok(Some(hello))
    }

    fn seal(&self, peer: u32, data: &mut Vec<u8>, scratch: &mut Vec<u8>) -> Result<()> {
        // In place: the plaintext is moved aside first (a swap, no copy).
        std::mem::swap(data, scratch);
        let r = self.seal_gather(peer, &[IoSlice::new(scratch)], data, &mut Vec::new());
        scratch.clear();
        r
    }

    /// Encrypts straight from the caller's slices into `data`: the copy that
    /// gathers them and the encryption are one pass. All slices but the last
    /// (headers, in practice) are gathered into `scratch` first; the last
    /// (the payload) is read where it is.
    fn seal_gather(
        &self,
        peer: u32,
        iov: &[IoSlice<'_>],
        data: &mut Vec<u8>,
        scratch: &mut Vec<u8>,
    ) -> Result<()> {
        let (last, head) = match iov.split_last() {
            Some((l, h)) => (&l[..], h),
            None => (&[][..], &[][..]),
        };
        scratch.clear();
        for s in head {
            scratch.extend_from_slice(s);
        }
        let len = scratch.len() + last.len();
        // Reuse what the buffer holds: only growth is zeroed (same-size
        // messages: nothing).
        data.resize(len + OVERHEAD, 0);
        let mut map = self.tx.lock().unwrap_or_else(|e| e.into_inner());
        let tx = map.get_mut(&peer).ok_or_else(|| Error::LinkFailed {
            peer,
            method: "encrypt",
            reason: "no session (the link was not opened through encrypt)".into(),
        })?;
        let bits = self.limits.epoch_bits;
        let mut ctr = tx.ctr + 1;
        if tx.bytes_in_epoch + len as u64 > self.limits.bytes_per_key && tx.bytes_in_epoch > 0 {
            // Too much under this key: jump to the first counter of the next epoch.
            ctr = ((ctr >> bits) + 1) << bits;
        }
        let epoch = ctr >> bits;
        if epoch != tx.keys.epoch {
            tx.keys.advance(epoch, false);
            tx.bytes_in_epoch = 0;
            self.rekeys.fetch_add(1, Ordering::Relaxed);
        }
        tx.ctr = ctr;
        tx.bytes_in_epoch += len as u64;
        let (head_out, rest) = data.split_at_mut(scratch.len());
        let (last_out_and_tag, ctr_out) = rest.split_at_mut(last.len() + TAG_LEN);
        tx.keys
            .key
            .seal_out_of_place_scatter(
                nonce(ctr),
                Aad::empty(),
                scratch,
                head_out,
                last,
                last_out_and_tag,
            )
            .map_err(|_| Error::Protocol {
                peer: format!("rank {peer}"),
                what: "encrypt: message too long for one AEAD invocation".into(),
            })?;
        drop(map);
        ctr_out.copy_from_slice(&ctr.to_le_bytes());
        self.sealed.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn open(
        &self,
        src: u32,
        data: &mut Vec<u8>,
        scratch: &mut Vec<u8>,
    ) -> std::result::Result<Opened, Rejected> {
        // In place: the frame is moved aside first (a swap, no copy).
        std::mem::swap(data, scratch);
        self.open_from(src, scratch, data, &mut Vec::new())
    }

    /// Decrypts straight from the base method's buffer into `data`.
    fn open_from(
        &self,
        src: u32,
        frame: &[u8],
        data: &mut Vec<u8>,
        _scratch: &mut Vec<u8>,
    ) -> std::result::Result<Opened, Rejected> {
        if frame.len() < OVERHEAD {
            return Err(self.forged(format!("frame of {} bytes", frame.len())));
        }
        let at = frame.len() - CTR_LEN;
        let ctr = u64::from_le_bytes(frame[at..].try_into().expect("8 bytes"));
        if ctr == 0 {
            data.clear();
            data.extend_from_slice(&frame[..at]);
            return self.open_hello(src, data);
        }
        let (ciphertext, tag) = frame[..at].split_at(at - TAG_LEN);
        let mut map = self.rx.lock().unwrap_or_else(|e| e.into_inner());
        let Some(rx) = map.get_mut(&src) else {
            drop(map);
            return Err(self.forged(format!("frame from {src} before its session hello")));
        };
        if !rx.window.check(ctr) {
            drop(map);
            return Err(self.replay(format!("counter {ctr} from {src} replayed or too old")));
        }
        let epoch = ctr >> self.limits.epoch_bits;
        // A newer epoch's key is derived on the side and kept only once a
        // frame authenticates under it: a forged counter cannot retire the
        // key in use.
        let fresh;
        let key = if epoch == rx.keys.epoch {
            &rx.keys.key
        } else if let Some((_, k)) = rx.keys.prev.as_ref().filter(|(e, _)| *e == epoch) {
            k
        } else if epoch > rx.keys.epoch {
            let k = &rx.keys;
            fresh = derive(&k.prk, k.cipher, k.sender, k.receiver, epoch);
            &fresh
        } else {
            drop(map);
            return Err(self.replay(format!("counter {ctr} from {src}: key already retired")));
        };
        // Only the part not already there is zeroed (same-size messages: none).
        data.resize(ciphertext.len(), 0);
        let ok = key
            .open_separate_gather(nonce(ctr), Aad::empty(), ciphertext, tag, data)
            .is_ok();
        if !ok {
            drop(map);
            data.clear();
            return Err(self.forged(format!("frame {ctr} from {src} does not authenticate")));
        }
        rx.window.mark(ctr);
        if epoch > rx.keys.epoch {
            rx.keys.advance(epoch, true);
            self.rekeys.fetch_add(1, Ordering::Relaxed);
        }
        drop(map);
        self.opened.fetch_add(1, Ordering::Relaxed);
        Ok(Opened::Deliver)
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("encrypt_sealed", self.sealed.load(Ordering::Relaxed)),
            ("encrypt_opened", self.opened.load(Ordering::Relaxed)),
            (
                "encrypt_rejected_forged",
                self.forged.load(Ordering::Relaxed),
            ),
            (
                "encrypt_rejected_replay",
                self.replayed.load(Ordering::Relaxed),
            ),
            ("encrypt_rekeys", self.rekeys.load(Ordering::Relaxed)),
        ]
    }
}
