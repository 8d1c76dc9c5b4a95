//! `compress`: zstd per message, above a size threshold, skipped when the
//! data does not compress.
//!
//! Frame: `[payload][trailer]`, trailer = `0` (sent as is),
//! `[u32 original length, little-endian][1]` (zstd frame) or
//! `[u32 original length][width][2]` (zstd frame of the byte-shuffled
//! message). A trailer keeps the raw case a single appended byte, with no
//! copy.
//!
//! Whether data compresses is measured, not guessed: a message of
//! `SAMPLE_MIN` bytes or more is first judged by compressing a
//! `SAMPLE_LEN`-byte sample from its middle; below that the whole message
//! is compressed and kept only if it shrank by an eighth (`saves_enough`).
//!
//! **Byte shuffle.** Arrays of floating-point numbers compress badly byte
//! by byte: sign and exponent bytes repeat, mantissa bytes are noise, and
//! they alternate. Regrouping byte 0 of every element, then byte 1, … (the
//! "shuffle" filter of HDF5 and Blosc) puts the repeating bytes together.
//! The transform does not know the data's type, so for messages that are
//! sampled it also compresses the sample shuffled with widths 8 and 4
//! (when the length is a multiple) and shuffles the whole message only
//! when that sample came out at least `SHUFFLE_GAIN` smaller than the
//! plain one. `bench/compress.sh` measures what it gains.

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
/// Shuffled only when the shuffled sample is at most 7/8 of the plain one.
fn shuffle_pays(plain: usize, shuffled: usize) -> bool {
    shuffled + plain / 8 <= plain
}
/// Element widths tried by the shuffle, widest first.
const SHUFFLE_WIDTHS: [usize; 2] = [8, 4];

/// Byte-shuffles `src` (a whole number of `w`-byte elements) into `out`:
/// byte `b` of element `i` goes to `out[b * n + i]`.
pub fn shuffle(src: &[u8], w: usize, out: &mut Vec<u8>) {
    let n = src.len() / w;
    out.clear();
    out.resize(src.len(), 0);
    for (b, plane) in out.chunks_exact_mut(n.max(1)).take(w).enumerate() {
        for (o, e) in plane.iter_mut().zip(src.chunks_exact(w)) {
            *o = e[b];
        }
    }
}

/// The inverse of [`shuffle`].
pub fn unshuffle(src: &[u8], w: usize, out: &mut Vec<u8>) {
    let n = src.len() / w;
    out.clear();
    out.resize(src.len(), 0);
    for (b, plane) in src.chunks_exact(n.max(1)).take(w).enumerate() {
        for (e, i) in out.chunks_exact_mut(w).zip(plane) {
            e[b] = *i;
        }
    }
}

/// The largest message a peer may announce: bounds what a hostile length
/// makes us allocate.
pub const MAX_ORIGINAL: usize = 1 << 31;

pub struct Compress {
    min: usize,
    /// The compressor and the buffer a message is shuffled into.
    compressor: Mutex<(zstd::bulk::Compressor<'static>, Vec<u8>)>,
    decompressor: Mutex<zstd::bulk::Decompressor<'static>>,
    msgs: AtomicU64,
    shuffled: AtomicU64,
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
            compressor: Mutex::new((
                zstd::bulk::Compressor::new(level).map_err(|e| zstd_err("init", e))?,
                Vec::new(),
            )),
            decompressor: Mutex::new(
                zstd::bulk::Decompressor::new().map_err(|e| zstd_err("init", e))?,
            ),
            msgs: AtomicU64::new(0),
            shuffled: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
            bytes_in: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
            compress_ns: AtomicU64::new(0),
            decompress_ns: AtomicU64::new(0),
        })
    }

    /// How a message of `SAMPLE_MIN` bytes or more should go, judged by a
    /// sample from its middle: `None` (it does not compress), `Some(0)`
    /// (plain) or `Some(w)` (shuffled with width `w`).
    fn judge_sample(
        c: &mut zstd::bulk::Compressor<'static>,
        buf: &mut Vec<u8>,
        data: &[u8],
    ) -> Option<usize> {
        // Aligned to the widest element, so the sample's elements are the
        // message's.
        let mid = (data.len() / 2 - SAMPLE_LEN / 2) & !7;
        let sample = &data[mid..mid + SAMPLE_LEN];
        let plain = c.compress(sample).map(|o| o.len()).unwrap_or(usize::MAX);
        let mut best = (plain, 0);
        for w in SHUFFLE_WIDTHS {
            if !data.len().is_multiple_of(w) {
                continue;
            }
            shuffle(sample, w, buf);
            if let Ok(o) = c.compress(buf) {
                if o.len() < best.0 && shuffle_pays(plain.min(SAMPLE_LEN), o.len()) {
                    best = (o.len(), w);
                }
            }
        }
        saves_enough(SAMPLE_LEN, best.0).then_some(best.1)
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
        let mut g = self.compressor.lock().unwrap_or_else(|e| e.into_inner());
        let (c, buf) = &mut *g;
        let how = if n < SAMPLE_MIN {
            Some(0)
        } else {
            Self::judge_sample(c, buf, data)
        };
        let mut kept = false;
        if let Some(w) = how {
            let input: &[u8] = if w > 0 {
                shuffle(data, w, buf);
                buf
            } else {
                data
            };
            scratch.clear();
            scratch.reserve(zstd::zstd_safe::compress_bound(n) + 6);
            if let Ok(m) = c.compress_to_buffer(input, scratch) {
                if saves_enough(n, m) {
                    scratch.extend_from_slice(&(n as u32).to_le_bytes());
                    if w > 0 {
                        scratch.push(w as u8);
                        scratch.push(2);
                    } else {
                        scratch.push(1);
                    }
                    std::mem::swap(data, scratch);
                    kept = true;
                }
            }
            if w > 0 && kept {
                self.shuffled.fetch_add(1, Ordering::Relaxed);
            }
        }
        // A shuffle buffer of a huge message is not kept for ever.
        if buf.capacity() > 4 * SAMPLE_MIN {
            *buf = Vec::new();
        }
        drop(g);
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
            Some(mode @ (1 | 2)) => {
                let width = if mode == 2 {
                    match data.pop() {
                        Some(w) if SHUFFLE_WIDTHS.contains(&(w as usize)) => w as usize,
                        w => return Err(forged(format!("bad shuffle width {w:?}"))),
                    }
                } else {
                    0
                };
                if data.len() < 4 {
                    return Err(forged("truncated compressed frame".into()));
                }
                let at = data.len() - 4;
                let n = u32::from_le_bytes(data[at..].try_into().expect("4 bytes")) as usize;
                data.truncate(at);
                if n > MAX_ORIGINAL {
                    return Err(forged(format!("announces {n} bytes")));
                }
                if width > 0 && !n.is_multiple_of(width) {
                    return Err(forged(format!("{n} bytes are no {width}-byte elements")));
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
                if width > 0 {
                    unshuffle(scratch, width, data);
                } else {
                    std::mem::swap(data, scratch);
                }
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
            ("compress_shuffled", self.shuffled.load(Ordering::Relaxed)),
            ("compress_skipped", self.skipped.load(Ordering::Relaxed)),
            ("compress_bytes_in", self.bytes_in.load(Ordering::Relaxed)),
            ("compress_bytes_out", self.bytes_out.load(Ordering::Relaxed)),
            ("compress_ns", self.compress_ns.load(Ordering::Relaxed)),
            ("decompress_ns", self.decompress_ns.load(Ordering::Relaxed)),
        ]
    }
}
