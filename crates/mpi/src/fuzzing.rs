//! Fuzz targets of the point-to-point engine (see the project's rule: one
//! library function per target, which must never panic, hang or grow memory
//! beyond a stated bound for any input). `cargo test` replays the corpus in
//! `fuzz/corpus/<target>/` and a property test; `make fuzz` runs them
//! coverage-guided.

use crate::datatype::{Basic, Datatype};
use crate::engine::Engine;
use crate::group::Group;
use crate::request::{Buf, Req};
use gridwire_core::bootstrap::pmi::Pmi;
use gridwire_core::params::Params;
use gridwire_core::Context;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// Ranks of the job the harness pretends to be: this process is rank 0
/// (a singleton with only the `self` method, so no sockets); ranks 1 and 2
/// are the hostile peers (sends to them fail, which the engine must take).
const JOB: u32 = 3;

/// At most this many operations are taken from one input: inputs are short,
/// and this keeps a run's time linear in a small bound.
const MAX_OPS: usize = 512;

/// Largest receive or send buffer the harness posts.
const MAX_BUF: usize = 4096;

/// The memory bound asserted after every operation: the engine's matching
/// state may hold what the input sent (its bytes, and a slot per message)
/// plus fixed tables (the dense context vector, at most
/// `MAX_PEER_QUEUES` peer-made queues, the spare-buffer pool).
fn bound(input_len: usize, ops: usize) -> usize {
    (4 << 20) + 4 * input_len + ops * 1024
}

/// A singleton context with only the `self` method: the lightest real
/// context (no sockets, no shared memory, no launcher).
pub(crate) fn self_only_context() -> Context {
    static N: AtomicU32 = AtomicU32::new(0);
    let job = format!(
        "fuzz{}x{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    );
    let params = Params::from_lookup(|k| match k {
        "GW_METHODS" => Some("self".into()),
        "GW_JOB_ID" => Some(job.clone()),
        "GW_JOB_SECRET" => Some(String::new()),
        _ => None,
    })
    .expect("fixed parameters are valid");
    Context::with(params, Pmi::singleton()).expect("a self-only singleton context starts")
}

/// An engine of a pretended job of `n` ranks (this process is rank 0).
///
/// The context is made once per thread and shared by the engines made
/// after each other (an engine unregisters its handlers when dropped): the
/// runtime's handler table for the engine's ids is 5 MB, and making it per
/// input cost 4 ms, most of a fuzz run. Nothing of one input stays in the
/// context: the harness never sends to rank 0, so the `self` method's queue
/// stays empty.
pub(crate) fn engine_of_job(n: u32) -> Arc<Engine> {
    thread_local! {
        static CONTEXT: Context = self_only_context();
    }
    Engine::with_job_size(CONTEXT.with(Context::clone), n)
}

/// Reads the input as a sequence of operations.
struct Input<'a> {
    data: &'a [u8],
}

impl Input<'_> {
    fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.data.split_first()?;
        self.data = rest;
        Some(b)
    }
    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_le_bytes([self.byte()?, self.byte()?]))
    }
    fn u32(&mut self) -> Option<u32> {
        Some(self.u16()? as u32 | (self.u16()? as u32) << 16)
    }
    fn u64(&mut self) -> Option<u64> {
        Some(self.u32()? as u64 | (self.u32()? as u64) << 32)
    }
    fn bytes(&mut self, n: usize) -> &[u8] {
        let n = n.min(self.data.len());
        let (a, b) = self.data.split_at(n);
        self.data = b;
        a
    }
}

/// A number the engine knows (small) or anything (from the input), so that
/// both valid and hostile values are reached often.
fn pick(sel: u8, known: &[u64], raw: u64) -> u64 {
    match known.get(sel as usize % (known.len() + 1)) {
        Some(&k) => k,
        None => raw,
    }
}

/// Fuzz target: incoming `H_MSG` (eager and rendezvous envelopes), `H_CTS`,
/// `H_DATA`, `H_FIN`, `H_CANCEL`, `H_CANCEL_ACK`, `H_ASSIST` and `H_ASSISTED` messages from peers of a 3-rank job, with posted
/// receives, probes and rendezvous sends in between. Never panics; the
/// engine's state stays within [`bound`] of the input's size.
pub fn engine_messages(data: &[u8]) {
    let engine = engine_of_job(JOB);
    let byte = Datatype::predefined(Basic::U8, "MPI_BYTE");
    // Bytes 0 and 2 of every 3 (size 2, extent 3): a noncontiguous receive
    // type; `len / 4` elements span at most `len` bytes.
    let strided = Datatype::vector(2, 1, 2, &byte).expect("valid vector");
    let world = Group::new((0..JOB).collect());
    let pair = Group::new(vec![2, 0]);
    // (context key, group): point-to-point and collective of each, and a
    // nonblocking-collective instance.
    let comms: [(u64, &Arc<Group>); 5] = [
        (0, &world),
        (1, &world),
        (4, &pair),
        (5, &pair),
        (1 | 3 << 32, &world),
    ];
    // Buffers outlive the engine (declared before it is dropped below):
    // pending requests point into them.
    let mut bufs: Vec<Box<[u8]>> = Vec::new();
    let mut reqs: Vec<Arc<Req>> = Vec::new();
    let mut send_ids: Vec<u64> = Vec::new();
    let mut input = Input { data };
    let mut ops = 0;
    while ops < MAX_OPS {
        let Some(op) = input.byte() else { break };
        ops += 1;
        // Mostly the real peers, sometimes ourselves' number or a rank the job lacks.
        let from = match input.byte().unwrap_or(0) % 8 {
            0..=3 => 1,
            4..=6 => 2,
            _ => 7,
        };
        let ctx_known: Vec<u64> = comms.iter().map(|c| c.0).collect();
        let ids: Vec<u64> = send_ids.iter().copied().chain(0..4).collect();
        let Some(sel) = input.byte() else { break };
        match op % 10 {
            // An envelope, eager or rendezvous, with fields near or far.
            0 | 1 => {
                let rts = op % 10 == 1;
                let mut env = vec![0u8; if rts { 56 } else { 24 }];
                env[0] = if rts { 1 } else { 0 };
                let raw_ctx = input.u64().unwrap_or(0);
                let ctx = pick(sel, &ctx_known, raw_ctx);
                env[4..8].copy_from_slice(&(ctx as u32).to_le_bytes());
                let hi = ((ctx >> 32) as u32).to_le_bytes();
                let src = pick(sel >> 3, &[0, 1, 2], input.u32().unwrap_or(0) as u64);
                env[8..12].copy_from_slice(&(src as u32).to_le_bytes());
                let tag = pick(sel >> 5, &[0, 1], input.u32().unwrap_or(0) as u64);
                env[12..16].copy_from_slice(&(tag as u32).to_le_bytes());
                let seq = input.u16().unwrap_or(0) as u32 % 8;
                let seq = if sel & 0x80 != 0 {
                    input.u32().unwrap_or(0)
                } else {
                    seq
                };
                env[16..20].copy_from_slice(&seq.to_le_bytes());
                if rts {
                    env[52..56].copy_from_slice(&hi);
                    let size = pick(sel >> 2, &[0, 8, 5000], input.u64().unwrap_or(0));
                    env[24..32].copy_from_slice(&size.to_le_bytes());
                    env[32..40].copy_from_slice(&input.u64().unwrap_or(0).to_le_bytes());
                    // addr and pid stay 0: a single copy from another
                    // process is the kernel's to check, not ours.
                } else {
                    env[20..24].copy_from_slice(&hi);
                    let n = input.byte().unwrap_or(0) as usize * 8;
                    env.extend_from_slice(input.bytes(n));
                }
                engine.handle_msg(from, &env);
            }
            2 => {
                let mut m = Vec::with_capacity(16);
                let raw = input.u64().unwrap_or(0);
                m.extend_from_slice(&pick(sel, &ids, raw).to_le_bytes());
                m.extend_from_slice(&input.u64().unwrap_or(0).to_le_bytes());
                engine.handle_cts(from, &m);
            }
            3 => {
                let mut m = Vec::new();
                let raw = input.u64().unwrap_or(0);
                m.extend_from_slice(&pick(sel & 7, &[0, 1, 2], raw).to_le_bytes());
                let off = pick(sel >> 3, &[0, 8, 4096], input.u64().unwrap_or(0));
                m.extend_from_slice(&off.to_le_bytes());
                let total = pick(sel >> 5, &[8, 5000], input.u64().unwrap_or(0));
                m.extend_from_slice(&total.to_le_bytes());
                let n = input.u16().unwrap_or(0) as usize % (2 * MAX_BUF);
                m.extend_from_slice(input.bytes(n));
                engine.handle_data(from, &m);
            }
            4 => {
                let raw = input.u64().unwrap_or(0);
                engine.handle_fin(from, &pick(sel, &ids, raw).to_le_bytes());
            }
            // Post a receive (contiguous or strided) on one of the communicators.
            5 => {
                let (ctx, g) = comms[sel as usize % comms.len()];
                let src = [crate::ANY_SOURCE, 0, 1][(sel as usize >> 3) % 3];
                let tag = [crate::ANY_TAG, 0, 1][(sel as usize >> 5) % 3];
                let len = input.u16().unwrap_or(0) as usize % (MAX_BUF + 1);
                let mut b = vec![0u8; MAX_BUF].into_boxed_slice();
                let addr = b.as_mut_ptr() as usize;
                bufs.push(b);
                // SAFETY: the buffer lives in `bufs` until after the
                // engine is dropped, and `len` bytes (or `len / 4` strided
                // elements of 3 bytes' extent) lie within its `MAX_BUF`.
                let buf = unsafe {
                    if sel & 0x80 != 0 {
                        Buf::new(addr, len / 4, strided.clone())
                    } else {
                        Buf::new(addr, len, byte.clone())
                    }
                };
                if let Ok(r) = engine.recv(ctx, g, src, tag, buf) {
                    reqs.push(r);
                }
            }
            6 => {
                let (ctx, g) = comms[sel as usize % comms.len()];
                let _ = engine.probe(ctx, g, crate::ANY_SOURCE, crate::ANY_TAG, sel & 1 != 0);
            }
            // A rendezvous send of ours waiting for peer `from`.
            7 => {
                let len = input.u16().unwrap_or(0) as usize % (MAX_BUF + 1);
                let b = vec![7u8; len].into_boxed_slice();
                // SAFETY: as for receives; the engine only reads it.
                let buf = unsafe { Buf::new(b.as_ptr() as usize, len, byte.clone()) };
                bufs.push(b);
                let (r, id) = engine.stage_send(from, buf);
                send_ids.push(id);
                reqs.push(r);
            }
            // Whatever bytes, to whichever handler.
            8 => {
                let n = input.byte().unwrap_or(0) as usize;
                let raw = input.bytes(n);
                // (A copy request is answered without a copy here: no
                // peer of this self-only context is on this host.)
                match sel % 8 {
                    0 => engine.handle_msg(from, raw),
                    1 => engine.handle_cts(from, raw),
                    2 => engine.handle_data(from, raw),
                    3 => engine.handle_fin(from, raw),
                    4 => engine.handle_cancel(from, raw),
                    5 => engine.handle_cancel_ack(from, raw),
                    6 => engine.handle_assist(from, raw),
                    _ => engine.handle_assisted(from, raw),
                }
            }
            // What became ready goes out (to peers that cannot be reached).
            _ => engine.poke(),
        }
        let held = engine.footprint();
        assert!(
            held <= bound(data.len(), ops),
            "the engine holds {held} bytes after {ops} operations of a {}-byte input",
            data.len()
        );
    }
    drop(reqs);
    drop(engine);
    drop(bufs);
}
