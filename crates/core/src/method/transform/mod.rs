//! Transforms: methods that wrap a method (Nexus's security and data
//! transforms). A *stack* such as `compress+encrypt+tcp` is a
//! [`TransformMethod`]: its own instance of the base method (its own
//! listening socket, so everything that arrives on it went through the
//! same transforms) plus the transforms, applied left to right on send
//! (`compress` sees the plaintext, `encrypt` the compressed bytes) and right
//! to left on receive. The base method still moves whole opaque messages;
//! a transform turns one message into one message.
//!
//! Links without transforms are untouched: a plain `tcp` link is the tcp
//! method's own link, with no wrapper, no copy and no extra call per message.
//!
//! Adding a transform is one file implementing [`Transform`] and one row in
//! [`registry`].

use super::{Cost, Link, Method, MethodEnv, PollClass, Sink, Waiter};
use crate::error::{Error, Result};
use crate::params::ParamDecl;
use std::io::IoSlice;
use std::os::fd::RawFd;
use std::sync::{Arc, Mutex};

pub mod compress;
pub mod encrypt;
pub mod policy;
mod replay;

#[cfg(test)]
mod tests;

/// What a transform made of a received frame.
#[derive(Debug, PartialEq, Eq)]
pub enum Opened {
    /// `data` now holds the message for the next layer up.
    Deliver,
    /// The frame was for the transform itself (encrypt's session hello).
    Consumed,
}

/// Why a received frame was refused. Refused frames are counted and never
/// delivered.
#[derive(Debug, PartialEq, Eq)]
pub enum Rejected {
    /// A frame seen before (or too old to tell): dropped, the link stays.
    Replay(String),
    /// A frame that fails authentication or does not parse: dropped, and
    /// the link from that peer fails hard (failure policy in docs/wan.md).
    Forged(String),
}

/// One transform of a stack. State is per peer and kept by the transform.
pub trait Transform: Send + Sync {
    fn name(&self) -> &'static str;
    /// Bytes this transform publishes in its stack's descriptor (encrypt:
    /// this process's receive nonce).
    fn descriptor(&self) -> Vec<u8> {
        Vec::new()
    }
    /// Prepares sending to `peer`, whose descriptor carries `remote` for
    /// this transform. Returns a frame to send before any message (encrypt's
    /// session hello), already in wire form for this transform.
    fn connect(&self, peer: u32, remote: &[u8]) -> Result<Option<Vec<u8>>>;
    /// Turns the message in `data` into this transform's wire form.
    /// `scratch` is a spare buffer the transform may fill and swap in.
    fn seal(&self, peer: u32, data: &mut Vec<u8>, scratch: &mut Vec<u8>) -> Result<()>;
    /// Like [`seal`](Self::seal) on the message the slices of `iov` hold,
    /// leaving the result in `data`: the first transform of a stack gets the
    /// message this way, so one that can read its input out of place
    /// (encrypt) saves the copy that gathers it.
    fn seal_gather(
        &self,
        peer: u32,
        iov: &[IoSlice<'_>],
        data: &mut Vec<u8>,
        scratch: &mut Vec<u8>,
    ) -> Result<()> {
        data.clear();
        data.reserve(super::iov_len(iov) + 64);
        for s in iov {
            data.extend_from_slice(s);
        }
        self.seal(peer, data, scratch)
    }
    /// The reverse of `seal`, on a frame from `src`.
    fn open(
        &self,
        src: u32,
        data: &mut Vec<u8>,
        scratch: &mut Vec<u8>,
    ) -> std::result::Result<Opened, Rejected>;
    /// Like [`open`](Self::open) on a frame still in the base method's
    /// buffer (`frame`), leaving the result in `data`: the outermost
    /// transform gets the frame this way, so one that can read its input
    /// out of place (encrypt) saves the copy into `data`.
    fn open_from(
        &self,
        src: u32,
        frame: &[u8],
        data: &mut Vec<u8>,
        scratch: &mut Vec<u8>,
    ) -> std::result::Result<Opened, Rejected> {
        data.clear();
        data.extend_from_slice(frame);
        self.open(src, data, scratch)
    }
    /// Counters for `gwinfo` and `--stats`.
    fn counters(&self) -> Vec<(&'static str, u64)>;
}

/// A transform's constructor.
pub type TransformInitFn = fn(&MethodEnv) -> Result<Arc<dyn Transform>>;

/// One built-in transform.
pub struct TransformInfo {
    pub name: &'static str,
    /// One line for `gwinfo`.
    pub summary: &'static str,
    pub params: &'static [ParamDecl],
    pub init: TransformInitFn,
}

/// The built-in transforms, in the order they stack (outermost data
/// processing first: compressing after encrypting would find nothing).
pub fn registry() -> &'static [TransformInfo] {
    static REG: &[TransformInfo] = &[compress::INFO, encrypt::INFO];
    REG
}

/// Splits a stack name (`compress+encrypt+tcp`) into its transforms and base.
pub fn parse_stack(name: &str) -> Option<(Vec<&'static TransformInfo>, &str)> {
    let mut parts: Vec<&str> = name.split('+').map(str::trim).collect();
    let base = parts.pop()?;
    let mut out: Vec<&'static TransformInfo> = Vec::new();
    for p in parts {
        let t = registry().iter().find(|t| t.name == p)?;
        if out.iter().any(|o| o.name == t.name) {
            return None;
        }
        out.push(t);
    }
    // Canonical order only: `encrypt+compress+tcp` would compress ciphertext.
    let order = |t: &&TransformInfo| registry().iter().position(|r| r.name == t.name);
    if !out.windows(2).all(|w| order(&w[0]) < order(&w[1])) {
        return None;
    }
    Some((out, base))
}

/// The transform names of a method name (`encrypt+tcp` → `["encrypt"]`,
/// `tcp` → `[]`).
pub fn transforms_of(method: &str) -> Vec<&str> {
    let mut v: Vec<&str> = method.split('+').collect();
    v.pop();
    // A relay is a way to the base method, not a transform of the data.
    v.retain(|p| *p != "relay" && !p.starts_with("relay("));
    v
}

/// A stack of transforms over its own instance of a base method.
pub struct TransformMethod {
    /// `compress+encrypt+tcp`; leaked once per stack and process, because
    /// method and link names are `&'static str` everywhere.
    name: &'static str,
    inner: Arc<dyn Method>,
    stack: Vec<Arc<dyn Transform>>,
    /// Receive buffers, reused across polls (poll runs under the progress
    /// lock, so this is uncontended; a nested poll allocates its own).
    rx_bufs: Mutex<(Vec<u8>, Vec<u8>)>,
}

impl TransformMethod {
    pub fn new(inner: Arc<dyn Method>, stack: Vec<Arc<dyn Transform>>) -> Self {
        let mut name = String::new();
        for t in &stack {
            name.push_str(t.name());
            name.push('+');
        }
        name.push_str(inner.name());
        TransformMethod {
            name: Box::leak(name.into_boxed_str()),
            inner,
            stack,
            rx_bufs: Mutex::new((Vec::new(), Vec::new())),
        }
    }

    /// Splits a stack descriptor into the transforms' parts and the base's.
    fn split_descriptor<'a>(&self, d: &'a [u8]) -> Option<(Vec<&'a [u8]>, &'a [u8])> {
        let mut pos = 0;
        let mut parts = Vec::with_capacity(self.stack.len());
        for _ in &self.stack {
            let n = *d.get(pos)? as usize;
            parts.push(d.get(pos + 1..pos + 1 + n)?);
            pos += 1 + n;
        }
        Some((parts, &d[pos..]))
    }
}

impl Method for TransformMethod {
    fn name(&self) -> &'static str {
        self.name
    }

    /// Per transform `u8 len, bytes`, then the base method's descriptor.
    fn descriptor(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for t in &self.stack {
            let d = t.descriptor();
            out.push(d.len() as u8);
            out.extend_from_slice(&d);
        }
        out.extend_from_slice(&self.inner.descriptor());
        out
    }

    fn describe(&self, descriptor: &[u8]) -> String {
        match self.split_descriptor(descriptor) {
            Some((_, base)) => format!("{} over {}", self.name, self.inner.describe(base)),
            None => "malformed transform descriptor".into(),
        }
    }

    fn reachable(&self, remote: &[u8]) -> bool {
        self.split_descriptor(remote)
            .is_some_and(|(_, base)| self.inner.reachable(base))
    }

    fn link_name(&self, remote: &[u8]) -> &'static str {
        let Some((_, base)) = self.split_descriptor(remote) else {
            return self.name;
        };
        let inner = self.inner.link_name(base);
        if inner == self.inner.name() {
            return self.name;
        }
        let prefix = &self.name[..self.name.len() - self.inner.name().len()];
        super::relay::intern(format!("{prefix}{inner}"))
    }

    fn connect(&self, peer: u32, remote: &[u8]) -> Result<Arc<dyn Link>> {
        let (parts, base) = self
            .split_descriptor(remote)
            .ok_or_else(|| Error::BadStartpoint(format!("{}: malformed descriptor", self.name)))?;
        let name = self.link_name(remote);
        let inner = self.inner.connect(peer, base)?;
        // Session frames (encrypt's hello) go first on the base link, which
        // keeps order, so the peer sees them before any message. A waiter
        // that never waits: the link queues what the kernel does not take.
        for (i, t) in self.stack.iter().enumerate() {
            if let Some(mut frame) = t.connect(peer, parts[i])? {
                let mut scratch = Vec::new();
                for later in &self.stack[i + 1..] {
                    later.seal(peer, &mut frame, &mut scratch)?;
                }
                inner.send(&[IoSlice::new(&frame)], &NoWait)?;
            }
        }
        Ok(Arc::new(TransformLink {
            name,
            peer,
            inner,
            stack: self.stack.clone(),
            pool: Mutex::new(Vec::new()),
        }))
    }

    fn poll(&self, sink: &mut dyn Sink) -> Result<usize> {
        self.with_open_sink(sink, |inner, s| inner.poll(s))
    }

    fn release_peer(&self, peer: u32) {
        self.inner.release_peer(peer)
    }

    fn poll_thorough(&self, sink: &mut dyn Sink) -> Result<usize> {
        self.with_open_sink(sink, |inner, s| inner.poll_thorough(s))
    }

    fn poll_class(&self) -> PollClass {
        self.inner.poll_class()
    }
    fn wait_fd(&self) -> Option<RawFd> {
        self.inner.wait_fd()
    }
    fn before_block(&self) {
        self.inner.before_block()
    }
    fn after_block(&self) {
        self.inner.after_block()
    }
    fn has_pending_output(&self) -> bool {
        self.inner.has_pending_output()
    }
    fn cost(&self) -> Cost {
        self.inner.cost()
    }
    fn counters(&self) -> Vec<(&'static str, u64)> {
        let mut v = self.inner.counters();
        for t in &self.stack {
            v.extend(t.counters());
        }
        v
    }
    fn shutdown(&self) {
        self.inner.shutdown()
    }
}

impl TransformMethod {
    fn with_open_sink(
        &self,
        sink: &mut dyn Sink,
        f: impl FnOnce(&dyn Method, &mut dyn Sink) -> Result<usize>,
    ) -> Result<usize> {
        let mut guard = self.rx_bufs.try_lock().ok();
        let mut own = (Vec::new(), Vec::new());
        let bufs = match guard.as_deref_mut() {
            Some(b) => b,
            None => &mut own,
        };
        let mut open = OpenSink {
            stack: &self.stack,
            outer: sink,
            data: &mut bufs.0,
            scratch: &mut bufs.1,
            delivered: 0,
        };
        let res = f(&*self.inner, &mut open);
        let delivered = open.delivered;
        // A huge message's buffers are not kept for the rest of the job.
        for b in [&mut bufs.0, &mut bufs.1] {
            if b.capacity() > POOL_KEEP_MAX {
                *b = Vec::new();
            }
        }
        res.map(|_| delivered)
    }
}

/// Runs received frames through the stack (right to left) before they
/// reach the context.
struct OpenSink<'a> {
    stack: &'a [Arc<dyn Transform>],
    outer: &'a mut dyn Sink,
    data: &'a mut Vec<u8>,
    scratch: &'a mut Vec<u8>,
    delivered: usize,
}

impl Sink for OpenSink<'_> {
    fn deliver(&mut self, src: u32, msg: &[u8]) {
        for (i, t) in self.stack.iter().enumerate().rev() {
            let opened = if i + 1 == self.stack.len() {
                t.open_from(src, msg, self.data, self.scratch)
            } else {
                t.open(src, self.data, self.scratch)
            };
            match opened {
                Ok(Opened::Deliver) => {}
                Ok(Opened::Consumed) => return,
                Err(Rejected::Replay(_)) => return,
                Err(Rejected::Forged(why)) => {
                    self.outer
                        .link_failed(src, format!("{} rejected a frame: {why}", t.name()));
                    return;
                }
            }
        }
        self.delivered += 1;
        self.outer.deliver(src, self.data);
    }

    fn link_failed(&mut self, src: u32, reason: String) {
        self.outer.link_failed(src, reason)
    }

    fn link_broken(&mut self, src: u32, reason: String) {
        self.outer.link_broken(src, reason)
    }
}

/// A waiter that never waits (for session frames sent from `connect`).
struct NoWait;
impl Waiter for NoWait {
    fn progress(&self) -> bool {
        false
    }
}

/// A link through a stack: gathers the message, seals it through every
/// transform, sends the result as one message on the base link.
struct TransformLink {
    name: &'static str,
    peer: u32,
    inner: Arc<dyn Link>,
    stack: Vec<Arc<dyn Transform>>,
    /// Spare buffer pairs. Not held across the base link's send: that send
    /// may run progress, whose handlers may send on this link again.
    pool: Mutex<Vec<(Vec<u8>, Vec<u8>)>>,
}

/// Buffers above this are not kept in the pool (a 1 GiB message would
/// otherwise stay allocated for the rest of the job).
const POOL_KEEP_MAX: usize = 64 << 20;

impl Link for TransformLink {
    fn method(&self) -> &'static str {
        self.name
    }

    fn rtt(&self) -> Option<std::time::Duration> {
        self.inner.rtt()
    }

    fn stalled(&self, for_at_least: std::time::Duration) -> bool {
        self.inner.stalled(for_at_least)
    }

    fn send(&self, iov: &[IoSlice<'_>], waiter: &dyn Waiter) -> Result<()> {
        let (mut data, mut scratch) = self
            .pool
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop()
            .unwrap_or_default();
        let mut res = Ok(());
        for (i, t) in self.stack.iter().enumerate() {
            res = if i == 0 {
                t.seal_gather(self.peer, iov, &mut data, &mut scratch)
            } else {
                t.seal(self.peer, &mut data, &mut scratch)
            };
            if res.is_err() {
                break;
            }
        }
        if res.is_ok() {
            res = self.inner.send(&[IoSlice::new(&data)], waiter);
        }
        if data.capacity() <= POOL_KEEP_MAX && scratch.capacity() <= POOL_KEEP_MAX {
            let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
            if pool.len() < 4 {
                pool.push((data, scratch));
            }
        }
        res
    }
}
