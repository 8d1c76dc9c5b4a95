//! `crates/wire/bench.sh` (= `cargo bench -p gridwire-wire --bench wire
//! --features bench-compare[,jit]`): encode/decode costs for PBIO-style
//! records next to memcpy, a hand-written conversion for each pair of
//! layouts, bincode/serde and prost. Prints a markdown table.
//!
//! Timing: this thread's CPU time, least over `RUNS` (default 7) rounds of
//! batches of >= 20 ms each; the runners of one table row (gridwire's
//! engines and the hand-written code) take turns within each round, so
//! they see the same machine. Every decode includes the header parse. gridwire's
//! converting decodes write into a reused buffer (`Registry::decode_into`);
//! the hand-written receiver parses the same header, checks the id it
//! expects and converts field by field into a reused struct, which is what a
//! C programmer would write for exactly one pair of layouts. bincode and
//! prost decode their own encoding of the same values (they have no notion
//! of a foreign layout, so their figure is the same on every decode row).

use std::hint::black_box;
use std::mem::offset_of;
use std::sync::Arc;

use gridwire_wire::value::{read_value, write_value, Value};
use gridwire_wire::*;
use prost::Message;
use serde::{Deserialize, Serialize};

// ---------- the receiver's records ----------

#[repr(C)]
#[derive(WireRecord, Clone, Copy, Serialize, Deserialize, Default)]
struct Mixed {
    id: i32,
    count: i64,
    temp: f64,
    flag: u8,
    label: [u8; 15],
    small: i16,
    ratio: f32,
    vals: [f64; 6],
    seq: u64,
}

#[repr(C)]
#[derive(WireRecord, Clone, Copy, Serialize, Deserialize, Default)]
struct Ten {
    n: i32,
    items: [Mixed; 10],
}

const BIG: usize = 12800;

#[repr(C)]
#[derive(WireRecord, Clone, Copy)]
struct Big {
    n: i64,
    data: [f64; BIG],
}

// ---------- writers' layouts (for the hand-written conversions) ----------

/// i386-like: 4-byte `long`, doubles 4-aligned.
#[repr(C, packed(4))]
#[derive(WireRecord, Clone, Copy)]
struct MixedI386 {
    id: i32,
    count: i32,
    temp: f64,
    flag: u8,
    label: [u8; 15],
    small: i16,
    ratio: f32,
    vals: [f64; 6],
    seq: u64,
}

#[repr(C)]
#[derive(WireRecord, Clone, Copy)]
struct MixedExtra {
    unexpected: f64,
    id: i32,
    count: i64,
    temp: f64,
    flag: u8,
    label: [u8; 15],
    small: i16,
    ratio: f32,
    vals: [f64; 6],
    seq: u64,
}

#[repr(C)]
#[derive(WireRecord, Clone, Copy)]
struct MixedRev {
    seq: u64,
    vals: [f64; 6],
    ratio: f32,
    small: i16,
    label: [u8; 15],
    flag: u8,
    temp: f64,
    count: i64,
    id: i32,
}

#[repr(C, packed(4))]
#[derive(WireRecord, Clone, Copy)]
struct TenI386 {
    n: i32,
    items: [MixedI386; 10],
}

#[repr(C)]
#[derive(WireRecord, Clone, Copy)]
struct TenExtra {
    unexpected: f64,
    n: i32,
    items: [Mixed; 10],
}

#[repr(C)]
#[derive(WireRecord, Clone, Copy)]
struct TenRev {
    items: [MixedRev; 10],
    n: i32,
}

#[repr(C, packed(4))]
#[derive(WireRecord, Clone, Copy)]
struct BigI386 {
    n: i32,
    data: [f64; BIG],
}

#[repr(C)]
#[derive(WireRecord, Clone, Copy)]
struct BigExtra {
    unexpected: f64,
    n: i64,
    data: [f64; BIG],
}

#[repr(C)]
#[derive(WireRecord, Clone, Copy)]
struct BigRev {
    data: [f64; BIG],
    n: i64,
}

// ---------- bincode / prost mirrors ----------

#[derive(Serialize, Deserialize)]
struct BigS {
    n: i64,
    data: Vec<f64>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct PMixed {
    #[prost(int32, tag = "1")]
    id: i32,
    #[prost(int64, tag = "2")]
    count: i64,
    #[prost(double, tag = "3")]
    temp: f64,
    #[prost(uint32, tag = "4")]
    flag: u32,
    #[prost(bytes = "vec", tag = "5")]
    label: Vec<u8>,
    #[prost(sint32, tag = "6")]
    small: i32,
    #[prost(float, tag = "7")]
    ratio: f32,
    #[prost(double, repeated, tag = "8")]
    vals: Vec<f64>,
    #[prost(uint64, tag = "9")]
    seq: u64,
}

#[derive(Clone, PartialEq, prost::Message)]
struct PTen {
    #[prost(int32, tag = "1")]
    n: i32,
    #[prost(message, repeated, tag = "2")]
    items: Vec<PMixed>,
}

/// Also the variable-length record (`n` plus a variable array of f64).
#[derive(Clone, PartialEq, prost::Message)]
struct PBig {
    #[prost(int64, tag = "1")]
    n: i64,
    #[prost(double, repeated, tag = "2")]
    data: Vec<f64>,
}

fn pmixed(m: &Mixed) -> PMixed {
    PMixed {
        id: m.id,
        count: m.count,
        temp: m.temp,
        flag: m.flag as u32,
        label: m.label.to_vec(),
        small: m.small as i32,
        ratio: m.ratio,
        vals: m.vals.to_vec(),
        seq: m.seq,
    }
}

// ---------- harness ----------

fn mixed(k: i64) -> Mixed {
    Mixed {
        id: k as i32,
        count: k * 3 - 100,
        temp: 1.5 * k as f64,
        flag: b'x',
        label: *b"hello world\0\0\0\0",
        small: -4,
        ratio: 0.25,
        vals: [k as f64 * 0.5; 6],
        seq: k as u64 * 1000,
    }
}

fn bytes_of<T: Copy>(t: &T) -> &[u8] {
    // SAFETY: reading the initialised bytes of a Copy repr(C) value (the
    // structs above have no padding bytes that are read as values).
    unsafe { std::slice::from_raw_parts(t as *const T as *const u8, std::mem::size_of::<T>()) }
}

/// Read a `T` (repr(C) records of this file or arrays of them: valid for
/// all bit patterns) from the start of `p`.
#[inline(always)]
fn read<T: Copy>(p: &[u8]) -> T {
    assert!(p.len() >= std::mem::size_of::<T>());
    // SAFETY: length checked; the types used here (derived WireRecords and
    // arrays of them) are valid for every bit pattern; read_unaligned has no
    // alignment requirement.
    unsafe { std::ptr::read_unaligned(p.as_ptr() as *const T) }
}

#[repr(C)]
struct Timespec {
    sec: i64,
    nsec: i64,
}

unsafe extern "C" {
    fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32;
}

/// This thread's CPU time in ns (`CLOCK_THREAD_CPUTIME_ID`): time the
/// scheduler gives to other processes on the shared machine is not
/// counted, so batches interrupted by them still measure the code.
fn cpu_ns() -> f64 {
    const CLOCK_THREAD_CPUTIME_ID: i32 = 3;
    let mut ts = Timespec { sec: 0, nsec: 0 };
    // SAFETY: clock_gettime writes one timespec (two longs on x86-64
    // Linux, the layout above) through a valid pointer.
    let rc = unsafe { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime");
    ts.sec as f64 * 1e9 + ts.nsec as f64
}

/// A batch runner: `n` calls of `f` (inlined into the loop), total CPU ns.
fn looped<'a, F: FnMut() + 'a>(mut f: F) -> Box<dyn FnMut(u64) -> f64 + 'a> {
    Box::new(move |n| {
        let t = cpu_ns();
        for _ in 0..n {
            f();
        }
        cpu_ns() - t
    })
}

/// Rounds of batches (`RUNS`, default 7).
fn rounds() -> usize {
    std::env::var("RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(7)
        .max(1)
}

/// Time several batch runners *interleaved*: each round runs one batch
/// (>= 20 ms) of every runner in turn, so all of them see the same load
/// on a shared machine; the result per runner is the least mean ns per
/// call over the rounds. Ratios between runners of one call are what the
/// tables compare.
fn time_all(runs: &mut [Box<dyn FnMut(u64) -> f64 + '_>]) -> Vec<f64> {
    let iters: Vec<u64> = runs
        .iter_mut()
        .map(|r| {
            let mut n = 1u64;
            while r(n) < 20e6 && n < 1 << 26 {
                n *= 2;
            }
            n
        })
        .collect();
    let mut best = vec![f64::MAX; runs.len()];
    for _ in 0..rounds() {
        for (i, r) in runs.iter_mut().enumerate() {
            best[i] = best[i].min(r(iters[i]) / iters[i] as f64);
        }
    }
    best
}

/// Least mean ns per call of `f` (see [`time_all`]).
fn time<F: FnMut()>(f: F) -> f64 {
    time_all(&mut [looped(f)])[0]
}

/// The native format laid out for another ABI (big-endian writer).
fn relayout(f: &Format, arch: Arch) -> Arc<Format> {
    let mut b = FormatBuilder::with_arch(f.name(), arch);
    for fld in f.fields() {
        b = b.field(fld.name.clone(), map_type(&fld.ty, arch));
    }
    b.build().unwrap()
}

fn map_type(t: &FieldType, arch: Arch) -> FieldType {
    match t {
        FieldType::Nested(n) => FieldType::Nested(relayout(n, arch)),
        FieldType::Array { elem, count } => FieldType::array(map_type(elem, arch), *count),
        other => other.clone(),
    }
}

#[derive(Default)]
struct Row {
    record: &'static str,
    size: usize,
    op: String,
    interp: f64,
    jit: Option<f64>,
    auto: &'static str,
    auto_ns: f64,
    hand: Option<f64>,
    memcpy: f64,
    bincode: f64,
    prost: f64,
}

fn aligned_copy(b: &[u8]) -> Vec<u64> {
    let mut v = vec![0u64; b.len().div_ceil(8)];
    // SAFETY: exclusive initialised u64 storage viewed as bytes.
    let s = unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr() as *mut u8, v.len() * 8) };
    s[..b.len()].copy_from_slice(b);
    v
}

fn as_bytes(v: &[u64], n: usize) -> &[u8] {
    // SAFETY: initialised u64 storage viewed as bytes, length within it.
    unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, n) }
}

/// A hand-written receiver: parse the header, check the id, convert.
/// `batch` runs it in a loop compiled for exactly this closure (no
/// indirect call per record), as gridwire's decode is timed.
struct Hand<T> {
    f: HandFn<T>,
    batch: HandBatch<T>,
}
type HandFn<T> = Box<dyn Fn(&[u8], &mut T)>;
type HandBatch<T> = Box<dyn Fn(&[u8], &mut T, u64) -> f64>;

/// A direct call (not inlined into the batch loop: inlined, LLVM turned
/// the nested receivers' copies into much slower code, 3-4x on `ten`).
#[inline(never)]
fn call_hand<T, F: Fn(&[u8], &mut T)>(f: &F, framed: &[u8], t: &mut T) {
    f(framed, t)
}

fn hand<T: 'static, F: Fn(&[u8], &mut T) + Clone + 'static>(f: F) -> Hand<T> {
    let g = f.clone();
    Hand {
        f: Box::new(f),
        batch: Box::new(move |framed, t, n| {
            let st = cpu_ns();
            for _ in 0..n {
                call_hand(&g, black_box(framed), t);
                black_box(&*t);
            }
            cpu_ns() - st
        }),
    }
}

struct Variant<T> {
    label: &'static str,
    wire: Arc<Format>,
    hand: Hand<T>,
}

/// Baselines shared by every decode row of one record.
struct Base {
    memcpy: f64,
    bincode: f64,
    prost: f64,
}

/// Time gridwire's decode of `framed` into `native` with each engine
/// (the engine `Plan::compile` picked, and each one forced), interleaved
/// with `hand` (a batch runner of the hand-written receiver). Returns
/// (interp ns, jit ns, auto's pick, auto ns, hand ns).
fn decode_rows<'h>(
    wire: &Arc<Format>,
    native: &Arc<Format>,
    framed: &[u8],
    check: &dyn Fn(&[u8]) -> bool,
    hand: Box<dyn FnMut(u64) -> f64 + 'h>,
) -> (f64, Option<f64>, &'static str, f64, f64) {
    let (r, _) = RecordRef::parse(framed).unwrap();
    let reg = || {
        let mut reg = Registry::new();
        reg.register(wire.clone());
        reg.register(native.clone());
        reg
    };
    let mut auto_reg = reg();
    let plan = auto_reg.plan(wire, native).unwrap();
    let auto = match (plan.backend(), plan.uses_permutes()) {
        (Backend::Jit, _) => "jit",
        (Backend::Interpreter, true) => "interp (permutes)",
        (Backend::Interpreter, false) => "interp",
    };
    let mut jit_reg = reg();
    let has_jit = jit_reg.set_backend(wire, native, Backend::Jit).unwrap();
    let mut int_reg = reg();
    int_reg
        .set_backend(wire, native, Backend::Interpreter)
        .unwrap();
    let runner = |mut reg: Registry| {
        let mut out = Vec::new();
        reg.decode_into(&r, native, &mut out).unwrap();
        assert!(check(&out), "{}: wrong conversion", wire.name());
        looped(move || {
            let (r, _) = RecordRef::parse(black_box(framed)).unwrap();
            reg.decode_into(&r, native, &mut out).unwrap();
            black_box(&out);
        })
    };
    let mut runs = vec![hand, runner(auto_reg), runner(int_reg)];
    if has_jit {
        runs.push(runner(jit_reg));
    }
    let t = time_all(&mut runs);
    // The auto registry runs the same engine and plan as the forced one it
    // picked: both timings measure that configuration; keep the lesser.
    let picked = if plan.backend() == Backend::Jit {
        t.get(3)
    } else {
        t.get(2)
    };
    let auto_ns = picked.map_or(t[1], |&p| p.min(t[1]));
    (t[2], t.get(3).copied(), auto, auto_ns, t[0])
}

fn bench_fixed<T: WireRecord + Copy>(
    name: &'static str,
    rec: &T,
    base: Base,
    variants: Vec<Variant<T>>,
    bincode_enc: f64,
    prost_enc: f64,
    rows: &mut Vec<Row>,
) {
    let native = T::format();
    let bytes = bytes_of(rec);
    let size = bytes.len();
    let mut enc = Encoder::new(native.clone()).unwrap();
    let e = time(|| {
        let iov = enc.encode(black_box(bytes), &[]).unwrap();
        black_box(iov.len());
    });
    let row = |op: &str| Row {
        record: name,
        size,
        op: op.into(),
        memcpy: base.memcpy,
        bincode: base.bincode,
        prost: base.prost,
        auto: "–",
        ..Default::default()
    };
    rows.push(Row {
        interp: e,
        bincode: bincode_enc,
        prost: prost_enc,
        ..row("encode (gather iovecs)")
    });
    // same layout: in place
    let framed = record::frame(&native, bytes).unwrap();
    let buf = aligned_copy(&framed);
    let framed = as_bytes(&buf, framed.len());
    let mut reg = Registry::new();
    reg.register(native.clone());
    let ns = time(|| {
        let (r, _) = RecordRef::parse(black_box(framed)).unwrap();
        let d = reg.decode_in_place(&r, &native).unwrap();
        black_box(view_bytes::<T>(d).unwrap());
    });
    rows.push(Row {
        interp: ns,
        ..row("decode, same layout (in place)")
    });

    let value = read_value(&native, bytes).unwrap();
    for v in variants {
        let payload = write_value(&v.wire, &value).unwrap();
        let framed = record::frame(&v.wire, &payload).unwrap();
        let buf = aligned_copy(&framed);
        let framed = as_bytes(&buf, framed.len());
        reg.register(v.wire.clone());
        let check = |out: &[u8]| {
            read_value(&native, out)
                .map(|x| x == value)
                .unwrap_or(false)
        };
        let mut t = *rec;
        (v.hand.f)(framed, &mut t);
        assert!(
            read_value(&native, bytes_of(&t)).unwrap() == value,
            "{name}: hand-written {} is wrong",
            v.label
        );
        let batch = &v.hand.batch;
        // `t` stays on this stack frame (moved into the runner it landed
        // on the heap, where its distance to the payload made the
        // hand-written code 2-3x slower through 4K aliasing of loads with
        // stores on some runs).
        let t = &mut t;
        let hand_run: Box<dyn FnMut(u64) -> f64 + '_> = Box::new(move |n| batch(framed, t, n));
        let (interp, jit, auto, auto_ns, hand) =
            decode_rows(&v.wire, &native, framed, &check, hand_run);
        rows.push(Row {
            interp,
            jit,
            auto,
            auto_ns,
            hand: Some(hand),
            ..row(v.label)
        });
    }
}

/// Header parse + id check, as any receiver must do; returns the payload.
#[inline(always)]
fn payload(framed: &[u8], id: FormatId) -> &[u8] {
    let (r, _) = RecordRef::parse(framed).unwrap();
    assert!(r.id == id);
    r.payload
}

fn rev_bytes<const N: usize>(p: &[u8], o: usize) -> [u8; N] {
    let mut a: [u8; N] = p[o..o + N].try_into().unwrap();
    a.reverse();
    a
}

fn hand_mixed_be(p: &[u8], b: usize, m: &mut Mixed) {
    m.id = i32::from_ne_bytes(rev_bytes(p, b + offset_of!(Mixed, id)));
    m.count = i64::from_ne_bytes(rev_bytes(p, b + offset_of!(Mixed, count)));
    m.temp = f64::from_ne_bytes(rev_bytes(p, b + offset_of!(Mixed, temp)));
    m.flag = p[b + offset_of!(Mixed, flag)];
    m.label
        .copy_from_slice(&p[b + offset_of!(Mixed, label)..][..15]);
    m.small = i16::from_ne_bytes(rev_bytes(p, b + offset_of!(Mixed, small)));
    m.ratio = f32::from_ne_bytes(rev_bytes(p, b + offset_of!(Mixed, ratio)));
    for i in 0..6 {
        m.vals[i] = f64::from_ne_bytes(rev_bytes(p, b + offset_of!(Mixed, vals) + 8 * i));
    }
    m.seq = u64::from_ne_bytes(rev_bytes(p, b + offset_of!(Mixed, seq)));
}

/// A field of type `V` at byte offset `o` of the payload (what a C
/// receiver does with `memcpy` from the wire struct's field offset).
#[inline(always)]
fn get<V: Copy>(p: &[u8], o: usize) -> V {
    read(&p[o..])
}

/// Field by field from the wire struct `$W` whose fields start at byte `$b`
/// of `$p`, read in place (no copy of the whole wire struct first: that
/// copy made the compiler reload odd-sized fields across its stores, a
/// store-forwarding stall per field on some builds).
macro_rules! fields_at {
    ($m:expr, $p:expr, $b:expr, $W:ty, $($f:ident),*) => {{
        $( $m.$f = get($p, $b + offset_of!($W, $f)); )*
    }};
}

fn mixed_from_i386(m: &mut Mixed, p: &[u8], b: usize) {
    fields_at!(m, p, b, MixedI386, id, temp, flag, label, small, ratio, vals, seq);
    m.count = get::<i32>(p, b + offset_of!(MixedI386, count)) as i64;
}

fn mixed_from_extra(m: &mut Mixed, p: &[u8], b: usize) {
    fields_at!(m, p, b, MixedExtra, id, count, temp, flag, label, small, ratio, vals, seq);
}

fn mixed_from_rev(m: &mut Mixed, p: &[u8], b: usize) {
    fields_at!(m, p, b, MixedRev, id, count, temp, flag, label, small, ratio, vals, seq);
}

fn mixed_variants() -> Vec<Variant<Mixed>> {
    let be = relayout(&Mixed::format(), Arch::BE64);
    let (i386, extra, rev) = (
        MixedI386::format(),
        MixedExtra::format(),
        MixedRev::format(),
    );
    vec![
        Variant {
            label: "decode, byte-swapped writer (be64)",
            hand: {
                let id = be.id();
                hand(move |f: &[u8], m: &mut Mixed| hand_mixed_be(payload(f, id), 0, m))
            },
            wire: be,
        },
        Variant {
            label: "decode, 4-byte long + 4-byte double align (i386)",
            hand: {
                let id = i386.id();
                hand(move |f: &[u8], m: &mut Mixed| mixed_from_i386(m, payload(f, id), 0))
            },
            wire: i386,
        },
        Variant {
            label: "decode, unexpected extra field first",
            hand: {
                let id = extra.id();
                hand(move |f: &[u8], m: &mut Mixed| mixed_from_extra(m, payload(f, id), 0))
            },
            wire: extra,
        },
        Variant {
            label: "decode, fields in another order",
            hand: {
                let id = rev.id();
                hand(move |f: &[u8], m: &mut Mixed| mixed_from_rev(m, payload(f, id), 0))
            },
            wire: rev,
        },
    ]
}

fn ten_variants() -> Vec<Variant<Ten>> {
    let be = relayout(&Ten::format(), Arch::BE64);
    let (i386, extra, rev) = (TenI386::format(), TenExtra::format(), TenRev::format());
    vec![
        Variant {
            label: "decode, byte-swapped writer (be64)",
            hand: {
                let id = be.id();
                hand(move |f: &[u8], t: &mut Ten| {
                    let p = payload(f, id);
                    t.n = i32::from_ne_bytes(rev_bytes(p, 0));
                    for i in 0..10 {
                        let b = offset_of!(Ten, items) + i * std::mem::size_of::<Mixed>();
                        hand_mixed_be(p, b, &mut t.items[i]);
                    }
                })
            },
            wire: be,
        },
        Variant {
            label: "decode, 4-byte long + 4-byte double align (i386)",
            hand: {
                let id = i386.id();
                hand(move |f: &[u8], t: &mut Ten| {
                    let p = payload(f, id);
                    t.n = read(p);
                    let (o, z) = (offset_of!(TenI386, items), std::mem::size_of::<MixedI386>());
                    for (i, m) in t.items.iter_mut().enumerate() {
                        mixed_from_i386(m, p, o + i * z);
                    }
                })
            },
            wire: i386,
        },
        Variant {
            label: "decode, unexpected extra field first",
            hand: {
                let id = extra.id();
                hand(move |f: &[u8], t: &mut Ten| {
                    let p = payload(f, id);
                    t.n = read(&p[offset_of!(TenExtra, n)..]);
                    let items = &p[offset_of!(TenExtra, items)..][..size_of::<[Mixed; 10]>()];
                    // SAFETY: `items` has exactly the bytes of `t.items`
                    // (sliced above), which is valid for any bit pattern
                    // (plain numbers); the regions do not overlap. One
                    // memcpy, as a C receiver would write it.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            items.as_ptr(),
                            t.items.as_mut_ptr() as *mut u8,
                            items.len(),
                        )
                    };
                })
            },
            wire: extra,
        },
        Variant {
            label: "decode, fields in another order (nested too)",
            hand: {
                let id = rev.id();
                hand(move |f: &[u8], t: &mut Ten| {
                    let p = payload(f, id);
                    t.n = read(&p[offset_of!(TenRev, n)..]);
                    let z = std::mem::size_of::<MixedRev>();
                    for (i, m) in t.items.iter_mut().enumerate() {
                        mixed_from_rev(m, p, i * z);
                    }
                })
            },
            wire: rev,
        },
    ]
}

/// `out.len()` doubles from `p[off..]`, byte-swapped or not; same order is
/// one `memcpy`, as a C receiver would write it.
#[inline(always)]
fn f64s_at(p: &[u8], off: usize, out: &mut [f64], swap: bool) {
    let src = &p[off..off + 8 * out.len()];
    if !swap {
        // SAFETY: `src` has exactly the bytes of `out` (sliced above); any
        // bit pattern is a valid f64; the regions do not overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), out.as_mut_ptr() as *mut u8, src.len())
        };
        return;
    }
    for (o, c) in out.iter_mut().zip(src.chunks_exact(8)) {
        let v = u64::from_ne_bytes(c.try_into().unwrap());
        *o = f64::from_bits(v.swap_bytes());
    }
}

fn big_variants() -> Vec<Variant<Big>> {
    let be = relayout(&Big::format(), Arch::BE64);
    let (i386, extra, rev) = (BigI386::format(), BigExtra::format(), BigRev::format());
    vec![
        Variant {
            label: "decode, byte-swapped writer (be64)",
            hand: {
                let id = be.id();
                hand(move |f: &[u8], b: &mut Big| {
                    let p = payload(f, id);
                    b.n = i64::from_ne_bytes(rev_bytes(p, 0));
                    f64s_at(p, 8, &mut b.data, true);
                })
            },
            wire: be,
        },
        Variant {
            label: "decode, 4-byte long + 4-byte double align (i386)",
            hand: {
                let id = i386.id();
                hand(move |f: &[u8], b: &mut Big| {
                    let p = payload(f, id);
                    b.n = i32::from_ne_bytes(p[..4].try_into().unwrap()) as i64;
                    f64s_at(p, offset_of!(BigI386, data), &mut b.data, false);
                })
            },
            wire: i386,
        },
        Variant {
            label: "decode, unexpected extra field first",
            hand: {
                let id = extra.id();
                hand(move |f: &[u8], b: &mut Big| {
                    let p = payload(f, id);
                    b.n = i64::from_ne_bytes(p[8..16].try_into().unwrap());
                    f64s_at(p, offset_of!(BigExtra, data), &mut b.data, false);
                })
            },
            wire: extra,
        },
        Variant {
            label: "decode, fields in another order",
            hand: {
                let id = rev.id();
                hand(move |f: &[u8], b: &mut Big| {
                    let p = payload(f, id);
                    let o = offset_of!(BigRev, n);
                    b.n = i64::from_ne_bytes(p[o..o + 8].try_into().unwrap());
                    f64s_at(p, 0, &mut b.data, false);
                })
            },
            wire: rev,
        },
    ]
}

fn base<S: Serialize + for<'de> Deserialize<'de>, P: Message + Default + PartialEq>(
    memcpy_bytes: &[u8],
    s: &S,
    p: &P,
) -> (Base, f64, f64) {
    let mut dst = vec![0u8; memcpy_bytes.len()];
    let memcpy = time(|| {
        dst.copy_from_slice(black_box(memcpy_bytes));
        black_box(&dst);
    });
    let mut v = Vec::new();
    let be = time(|| {
        v.clear();
        bincode::serialize_into(&mut v, black_box(s)).unwrap();
        black_box(&v);
    });
    let bd = time(|| {
        black_box(bincode::deserialize::<S>(black_box(&v)).unwrap());
    });
    let mut w = Vec::new();
    let pe = time(|| {
        w.clear();
        black_box(p).encode(&mut w).unwrap();
        black_box(&w);
    });
    assert!(P::decode(&w[..]).unwrap() == *p);
    let pd = time(|| {
        black_box(P::decode(black_box(&w[..])).unwrap());
    });
    (
        Base {
            memcpy,
            bincode: bd,
            prost: pd,
        },
        be,
        pe,
    )
}

/// The variable-length record: `n: i64` and a variable array of f64.
fn bench_var(rows: &mut Vec<Row>) {
    const N: usize = 1000;
    let native = FormatBuilder::new("series")
        .field("n", FieldType::I64)
        .field("xs", FieldType::var_array(FieldType::F64))
        .build()
        .unwrap();
    let xs: Vec<f64> = (0..N).map(|i| i as f64 * 0.5).collect();
    let xb: Vec<u8> = xs.iter().flat_map(|x| x.to_ne_bytes()).collect();
    let mut fixed = vec![0u8; native.size() as usize];
    fixed[..8].copy_from_slice(&7i64.to_ne_bytes());
    let mut enc = Encoder::new(native.clone()).unwrap();
    let size = fixed.len() + xb.len();
    let s = BigS {
        n: 7,
        data: xs.clone(),
    };
    let p = PBig {
        n: 7,
        data: xs.clone(),
    };
    let (b, be_, pe) = base(&xb, &s, &p);
    let row = |op: &str| Row {
        record: "var f64[1000]",
        size,
        op: op.into(),
        memcpy: b.memcpy,
        bincode: b.bincode,
        prost: b.prost,
        auto: "–",
        ..Default::default()
    };
    let e = time(|| {
        let iov = enc.encode(black_box(&fixed), &[black_box(&xb)]).unwrap();
        black_box(iov.len());
    });
    rows.push(Row {
        interp: e,
        bincode: be_,
        prost: pe,
        ..row("encode (gather iovecs)")
    });
    let framed = enc.encode_to_vec(&fixed, &[&xb]).unwrap();
    let buf = aligned_copy(&framed);
    let framed = as_bytes(&buf, framed.len());
    let mut reg = Registry::new();
    reg.register(native.clone());
    let ns = time(|| {
        let (r, _) = RecordRef::parse(black_box(framed)).unwrap();
        black_box(reg.decode_in_place(&r, &native).unwrap().len());
    });
    rows.push(Row {
        interp: ns,
        ..row("decode, same layout (in place)")
    });
    let value = read_value(&native, &framed[HEADER_LEN..]).unwrap();
    let mk = |arch: Arch, extra: bool, rev: bool| {
        let mut b = FormatBuilder::with_arch("series", arch);
        if extra {
            b = b.field("unexpected", FieldType::F64);
        }
        let long = FieldType::Int {
            size: arch.long_size,
            signed: true,
        };
        if rev {
            b.field("xs", FieldType::var_array(FieldType::F64))
                .field("n", long)
        } else {
            b.field("n", long)
                .field("xs", FieldType::var_array(FieldType::F64))
        }
        .build()
        .unwrap()
    };
    // (label, wire, offset of n, size of n, offset of slot, word size, swap)
    let cases = [
        (
            "decode, byte-swapped writer (be64)",
            mk(Arch::BE64, false, false),
        ),
        (
            "decode, 4-byte long + 4-byte pointers (i386)",
            mk(Arch::I386, false, false),
        ),
        (
            "decode, unexpected extra field first",
            mk(Arch::X86_64, true, false),
        ),
        (
            "decode, fields in another order",
            mk(Arch::X86_64, false, true),
        ),
    ];
    let mut hv = vec![0f64; N];
    for (label, wire) in cases {
        let payload_bytes = write_value(&wire, &value).unwrap();
        let f = record::frame(&wire, &payload_bytes).unwrap();
        let buf = aligned_copy(&f);
        let framed = as_bytes(&buf, f.len());
        reg.register(wire.clone());
        let check = |out: &[u8]| {
            read_value(&native, out)
                .map(|x| x == value)
                .unwrap_or(false)
        };
        // Hand-written: read n and the slot words at this layout's offsets.
        let swap = wire.byte_order() != ByteOrder::NATIVE;
        let w = wire.pointer_size() as usize;
        let nf = wire.field("n").unwrap();
        let (no, ns_) = (nf.offset as usize, nf.ty.size(8) as usize);
        let so = wire.field("xs").unwrap().offset as usize;
        let id = wire.id();
        let word = move |p: &[u8], o: usize, len: usize| -> u64 {
            let mut a = [0u8; 8];
            a[..len].copy_from_slice(&p[o..o + len]);
            if swap {
                a[..len].reverse();
            }
            u64::from_le_bytes(a)
        };
        let mut n_out = 0i64;
        let mut hand = |framed: &[u8], hv: &mut Vec<f64>| {
            let p = payload(framed, id);
            let n = word(p, no, ns_);
            n_out = if ns_ == 4 {
                n as u32 as i32 as i64
            } else {
                n as i64
            };
            let off = word(p, so, w) as usize;
            let len = word(p, so + w, w) as usize;
            hv.resize(len, 0.0);
            f64s_at(p, off, hv, swap);
            black_box(n_out);
        };
        hand(framed, &mut hv);
        assert!(hv == xs);
        let hand_run = looped(|| {
            hand(black_box(framed), &mut hv);
            black_box(&hv);
        });
        let (interp, jit, auto, auto_ns, h) = decode_rows(&wire, &native, framed, &check, hand_run);
        rows.push(Row {
            interp,
            jit,
            auto,
            auto_ns,
            hand: Some(h),
            ..row(label)
        });
    }
}

fn main() {
    let mut rows = Vec::new();
    let only = std::env::args().nth(1).filter(|a| !a.starts_with('-'));
    let want = |n: &str| only.as_deref().is_none_or(|o| n.contains(o));
    if want("mixed") {
        let m = mixed(7);
        let (b, be_, pe) = base(bytes_of(&m), &m, &pmixed(&m));
        bench_fixed("mixed", &m, b, mixed_variants(), be_, pe, &mut rows);
    }
    if want("ten") {
        let t = Ten {
            n: 10,
            items: std::array::from_fn(|i| mixed(i as i64)),
        };
        let p = PTen {
            n: 10,
            items: t.items.iter().map(pmixed).collect(),
        };
        let (b, be_, pe) = base(bytes_of(&t), &t, &p);
        bench_fixed(
            "ten mixed (nested array)",
            &t,
            b,
            ten_variants(),
            be_,
            pe,
            &mut rows,
        );
    }
    if want("big") {
        let mut b = Box::new(Big {
            n: 5,
            data: [0.0; BIG],
        });
        for (i, x) in b.data.iter_mut().enumerate() {
            *x = i as f64 * 0.5;
        }
        let s = BigS {
            n: 5,
            data: b.data.to_vec(),
        };
        let p = PBig {
            n: 5,
            data: b.data.to_vec(),
        };
        let (base_, be_, pe) = base(bytes_of(&*b), &s, &p);
        bench_fixed(
            "f64[12800] (100 KiB)",
            &*b,
            base_,
            big_variants(),
            be_,
            pe,
            &mut rows,
        );
    }
    if want("var") {
        bench_var(&mut rows);
    }
    let jit_on = rows.iter().any(|r| r.jit.is_some());
    println!(
        "| record | bytes | operation | gridwire interp ns | gridwire jit ns | auto | hand-written ns | auto × hand | memcpy ns | bincode ns | prost ns |"
    );
    println!("| --- | ---: | --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |");
    for r in rows {
        let jit = match r.jit {
            Some(j) => format!("{j:.1}"),
            None if jit_on || r.hand.is_none() => "–".into(),
            None => "(built without jit)".into(),
        };
        let (hand, ratio) = match r.hand {
            Some(h) => (format!("{h:.1}"), format!("{:.2}", r.auto_ns / h)),
            None => ("–".into(), "–".into()),
        };
        println!(
            "| {} | {} | {} | {:.1} | {} | {} | {} | {} | {:.1} | {:.1} | {:.1} |",
            r.record,
            r.size,
            r.op,
            r.interp,
            jit,
            r.auto,
            hand,
            ratio,
            r.memcpy,
            r.bincode,
            r.prost
        );
    }
    let _ = Value::Bool(true);
}
