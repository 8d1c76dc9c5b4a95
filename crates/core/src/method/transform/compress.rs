//! `compress`: zstd per message, above a size threshold, skipped when the
//! data does not compress.
//!
//! Frame: `[payload][trailer]`, trailer = `0` (sent as is) or
//! `[u32 original length, little-endian][1]` (zstd frame). A trailer keeps
//! the raw case a single appended byte, with no copy.
//!
//! Whether data compresses is measured, not guessed: a message of
//! `SAMPLE_MIN` bytes or more is first judged by compressing a
//! `SAMPLE_LEN`-byte sample from its middle; below that the whole message
//! is compressed and kept only if it shrank by `MIN_SAVING`. Floating-point
//! arrays are not byte-shuffled (not measured to pay yet).

use super::{Opened, Rejected, Transform, TransformInfo};
use crate::error::{Error, Result};
use crate::method::MethodEnv;
use crate::params::{Kind, ParamDecl};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

pub const INFO: TransformInfo = TransformInfo {
    name: "compress",
    summary: "zstd per message above GW_COMPRESS_MIN, skipped when a sample does not compress",
    params: PARAMS,
    init,
};

const PARAMS: &[ParamDecl] = &[
    ParamDecl {
        name: "COMPRESS_MIN",
        default: "4k",
        kind: Kind::Size {
            min: 64,
            max: 1 << 30,
        },
        help: "Messages shorter than this are sent uncompressed by the compress transform.",
    },
    ParamDecl {
        name: "COMPRESS_LEVEL",
        default: "1",
        kind: Kind::UInt { min: 1, max: 19 },
        help: "zstd level of the compress transform (1 = fastest).",
    },
];

/// Messages this long are judged by a sample first.
const SAMPLE_MIN: usize = 64 << 10;
const SAMPLE_LEN: usize = 16 << 10;
/// Kept compressed only when at least 1/8 smaller.
fn saves_enough(original: usize, compressed: usize) -> bool {
    compressed + original / 8 <= original
}
/// The largest message a peer may announce: bounds what a hostile length
/// makes us allocate.
pub const MAX_ORIGINAL: usize = 1 << 31;

pub struct Compress {
    min: usize,
    compressor: Mutex<zstd::bulk::Compressor<'static>>,
    decompressor: Mutex<zstd::bulk::Decompressor<'static>>,
    msgs: AtomicU64,
    skipped: AtomicU64,
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
    compress_ns: AtomicU64,
    decompress_ns: AtomicU64,
}

fn init(env: &MethodEnv) -> Result<Arc<dyn Transform>> {
    Ok(Arc::new(Compress::new(
        env.params.num("COMPRESS_MIN") as usize,
        env.params.num("COMPRESS_LEVEL") as i32,
    )?))
}

fn zstd_err(what: &str, e: std::io::Error) -> Error {
    Error::io(format!("compress: {what}"), e)
}

impl Compress {
    pub fn new(min: usize, level: i32) -> Result<Self> {
        Ok(Compress {
            min,
            compressor: Mutex::new(
                zstd::bulk::Compressor::new(level).map_err(|e| zstd_err("init", e))?,
            ),
            decompressor: Mutex::new(
                zstd::bulk::Decompressor::new().map_err(|e| zstd_err("init", e))?,
            ),
            msgs: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
            bytes_in: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
            compress_ns: AtomicU64::new(0),
            decompress_ns: AtomicU64::new(0),
        })
    }

    /// Whether a sample from the middle of `data` compresses.
    fn sample_compresses(&self, c: &mut zstd::bulk::Compressor<'static>, data: &[u8]) -> bool {
        let mid = data.len() / 2 - SAMPLE_LEN / 2;
        let sample = &data[mid..mid + SAMPLE_LEN];
        match c.compress(sample) {
            Ok(out) => saves_enough(sample.len(), out.len()),
            Err(_) => false,
        }
    }
}

impl Transform for Compress {
    fn name(&self) -> &'static str {
        "compress"
    }

    fn connect(&self, _peer: u32, _remote: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(None)
    }

    fn seal(&self, _peer: u32, data: &mut Vec<u8>, scratch: &mut Vec<u8>) -> Result<()> {
        let n = data.len();
        if n < self.min || n > MAX_ORIGINAL {
            data.push(0);
            return Ok(());
        }
        let start = Instant::now();
        let mut c = self.compressor.lock().unwrap_or_else(|e| e.into_inner());
        let worth = n < SAMPLE_MIN || self.sample_compresses(&mut c, data);
        let mut kept = false;
        if worth {
            scratch.clear();
            scratch.reserve(zstd::zstd_safe::compress_bound(n) + 5);
            if let Ok(m) = c.compress_to_buffer(&data[..], scratch) {
                if saves_enough(n, m) {
                    scratch.extend_from_slice(&(n as u32).to_le_bytes());
                    scratch.push(1);
                    std::mem::swap(data, scratch);
                    kept = true;
                }
            }
        }
        drop(c);
        self.compress_ns
            .fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
        if kept {
            self.msgs.fetch_add(1, Ordering::Relaxed);
            self.bytes_in.fetch_add(n as u64, Ordering::Relaxed);
            self.bytes_out
                .fetch_add(data.len() as u64, Ordering::Relaxed);
        } else {
            self.skipped.fetch_add(1, Ordering::Relaxed);
            data.push(0);
        }
        Ok(())
    }

    fn open(
        &self,
        src: u32,
        data: &mut Vec<u8>,
        scratch: &mut Vec<u8>,
    ) -> std::result::Result<Opened, Rejected> {
        let forged = |why: String| Rejected::Forged(format!("from {src}: {why}"));
        match data.pop() {
            Some(0) => Ok(Opened::Deliver),
            Some(1) => {
                if data.len() < 4 {
                    return Err(forged("truncated compressed frame".into()));
                }
                let at = data.len() - 4;
                let n = u32::from_le_bytes(data[at..].try_into().expect("4 bytes")) as usize;
                data.truncate(at);
                if n > MAX_ORIGINAL {
                    return Err(forged(format!("announces {n} bytes")));
                }
                let start = Instant::now();
                scratch.clear();
                scratch.reserve(n);
                let got = self
                    .decompressor
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .decompress_to_buffer(&data[..], scratch)
                    .map_err(|e| forged(format!("bad zstd frame: {e}")))?;
                if got != n {
                    return Err(forged(format!("announced {n} bytes, held {got}")));
                }
                std::mem::swap(data, scratch);
                self.decompress_ns
                    .fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
                Ok(Opened::Deliver)
            }
            Some(m) => Err(forged(format!("unknown compression mode {m}"))),
            None => Err(forged("empty frame".into())),
        }
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("compress_msgs", self.msgs.load(Ordering::Relaxed)),
            ("compress_skipped", self.skipped.load(Ordering::Relaxed)),
            ("compress_bytes_in", self.bytes_in.load(Ordering::Relaxed)),
            ("compress_bytes_out", self.bytes_out.load(Ordering::Relaxed)),
            ("compress_ns", self.compress_ns.load(Ordering::Relaxed)),
            ("decompress_ns", self.decompress_ns.load(Ordering::Relaxed)),
        ]
    }
}
