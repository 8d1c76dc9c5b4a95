//! `cargo bench -p gridwire-wire --bench wire`: encode/decode costs for
//! PBIO-style records, next to memcpy and hand-written conversions.
//! Prints a markdown table. No external harness: min of several timed
//! batches, which is stable enough on a shared 2-core machine.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use gridwire_wire::value::{read_value, write_value};
use gridwire_wire::*;

#[repr(C)]
#[derive(WireRecord, Clone, Copy)]
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
#[derive(WireRecord, Clone, Copy)]
struct Ten {
    n: i32,
    items: [Mixed; 10],
}

#[repr(C)]
#[derive(WireRecord, Clone, Copy)]
struct Big {
    n: i64,
    data: [f64; 12800],
}

fn mixed(k: i64) -> Mixed {
    Mixed {
        id: k as i32,
        count: k * 3,
        temp: 1.5 * k as f64,
        flag: b'x',
        label: *b"hello world\0\0\0\0",
        small: -4,
        ratio: 0.25,
        vals: [k as f64; 6],
        seq: k as u64,
    }
}

fn bytes_of<T: Copy>(t: &T) -> &[u8] {
    // SAFETY: reading the initialised bytes of a Copy repr(C) value.
    unsafe { std::slice::from_raw_parts(t as *const T as *const u8, std::mem::size_of::<T>()) }
}

/// min over batches of mean ns per call
fn time<F: FnMut()>(mut f: F) -> f64 {
    let mut iters = 1u64;
    loop {
        let t = Instant::now();
        for _ in 0..iters {
            f();
        }
        if t.elapsed().as_millis() >= 20 || iters >= 1 << 26 {
            break;
        }
        iters *= 2;
    }
    let mut best = f64::MAX;
    for _ in 0..7 {
        let t = Instant::now();
        for _ in 0..iters {
            f();
        }
        best = best.min(t.elapsed().as_nanos() as f64 / iters as f64);
    }
    best
}

/// Re-lay a format out for another ABI, optionally reversing field order
/// (recursively) and putting an unexpected field first.
fn relayout(f: &Format, arch: Arch, reverse: bool, extra_first: bool) -> Arc<Format> {
    let mut b = FormatBuilder::with_arch(f.name(), arch);
    if extra_first {
        b = b.field("unexpected", FieldType::F64);
    }
    let mut fields: Vec<_> = f.fields().to_vec();
    if reverse {
        fields.reverse();
    }
    for fld in fields {
        b = b.field(fld.name.clone(), map_type(&fld.ty, arch, reverse));
    }
    b.build().unwrap()
}

fn map_type(t: &FieldType, arch: Arch, reverse: bool) -> FieldType {
    match t {
        // The 8-byte signed ints of these structs are C `long`.
        FieldType::Int {
            size: 8,
            signed: true,
        } => FieldType::Int {
            size: arch.long_size,
            signed: true,
        },
        FieldType::Nested(n) => FieldType::Nested(relayout(n, arch, reverse, false)),
        FieldType::Array { elem, count } => FieldType::array(map_type(elem, arch, reverse), *count),
        other => other.clone(),
    }
}

struct Row {
    record: &'static str,
    size: usize,
    op: String,
    ns: f64,
    memcpy: f64,
    hand: Option<f64>,
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

fn bench_record<T: WireRecord + Copy>(
    name: &'static str,
    rec: &T,
    hand_swap: fn(&[u8], &mut T),
    rows: &mut Vec<Row>,
) {
    let native = T::format();
    let bytes = bytes_of(rec);
    let size = bytes.len();
    let mut dst = vec![0u8; size];
    let memcpy = time(|| {
        dst.copy_from_slice(black_box(bytes));
        black_box(&dst);
    });
    let mut enc = Encoder::new(native.clone()).unwrap();
    let e = time(|| {
        let iov = enc.encode(black_box(bytes), &[]).unwrap();
        black_box(iov.len());
    });
    rows.push(Row {
        record: name,
        size,
        op: "encode (gather iovecs)".into(),
        ns: e,
        memcpy,
        hand: None,
    });

    let value = read_value(&native, bytes).unwrap();
    let variants: Vec<(&str, Arc<Format>, bool)> = vec![
        ("decode, same layout (in place)", native.clone(), false),
        (
            "decode, byte-swapped writer (be64)",
            relayout(&native, Arch::BE64, false, false),
            true,
        ),
        (
            "decode, 4-byte long + 4-byte double align (i386)",
            relayout(&native, Arch::I386, false, false),
            false,
        ),
        (
            "decode, unexpected extra field first",
            relayout(&native, Arch::X86_64, false, true),
            false,
        ),
        (
            "decode, fields in another order (nested too)",
            relayout(&native, Arch::X86_64, true, false),
            false,
        ),
    ];
    let mut out = Vec::with_capacity(size);
    for (label, wire, is_swap) in variants {
        let payload = write_value(&wire, &value).unwrap();
        let framed = record::frame(&wire, &payload).unwrap();
        let buf = aligned_copy(&framed);
        let framed = as_bytes(&buf, framed.len());
        let mut reg = Registry::new();
        reg.register(wire.clone());
        let (r, _) = RecordRef::parse(framed).unwrap();
        // Check once that the conversion is right before timing it.
        let d = reg.decode(&r, &native).unwrap();
        assert!(
            read_value(&native, &d.bytes).unwrap() == value,
            "{name}: {label}"
        );
        let ns = if wire.id() == native.id() {
            time(|| {
                let (r, _) = RecordRef::parse(black_box(framed)).unwrap();
                let d = reg.decode(&r, &native).unwrap();
                black_box(view_bytes::<T>(&d.bytes).unwrap());
            })
        } else {
            time(|| {
                let (r, _) = RecordRef::parse(black_box(framed)).unwrap();
                reg.decode_into(&r, &native, &mut out).unwrap();
                black_box(&out);
            })
        };
        let hand = if is_swap {
            let mut t = *rec;
            let p = &framed[HEADER_LEN..];
            Some(time(|| {
                hand_swap(black_box(p), &mut t);
                black_box(&t);
            }))
        } else {
            None
        };
        rows.push(Row {
            record: name,
            size,
            op: label.into(),
            ns,
            memcpy,
            hand,
        });
    }
}

fn be_f64(p: &[u8], o: usize) -> f64 {
    f64::from_bits(u64::from_be_bytes(p[o..o + 8].try_into().unwrap()))
}

fn hand_mixed_at(p: &[u8], base: usize, m: &mut Mixed) {
    use std::mem::offset_of;
    let b = base;
    m.id = i32::from_be_bytes(p[b + offset_of!(Mixed, id)..][..4].try_into().unwrap());
    m.count = i64::from_be_bytes(p[b + offset_of!(Mixed, count)..][..8].try_into().unwrap());
    m.temp = be_f64(p, b + offset_of!(Mixed, temp));
    m.flag = p[b + offset_of!(Mixed, flag)];
    m.label
        .copy_from_slice(&p[b + offset_of!(Mixed, label)..][..15]);
    m.small = i16::from_be_bytes(p[b + offset_of!(Mixed, small)..][..2].try_into().unwrap());
    m.ratio = f32::from_bits(u32::from_be_bytes(
        p[b + offset_of!(Mixed, ratio)..][..4].try_into().unwrap(),
    ));
    for i in 0..6 {
        m.vals[i] = be_f64(p, b + offset_of!(Mixed, vals) + 8 * i);
    }
    m.seq = u64::from_be_bytes(p[b + offset_of!(Mixed, seq)..][..8].try_into().unwrap());
}

fn hand_mixed(p: &[u8], m: &mut Mixed) {
    hand_mixed_at(p, 0, m)
}

fn hand_ten(p: &[u8], t: &mut Ten) {
    t.n = i32::from_be_bytes(p[..4].try_into().unwrap());
    for i in 0..10 {
        hand_mixed_at(
            p,
            std::mem::offset_of!(Ten, items) + i * std::mem::size_of::<Mixed>(),
            &mut t.items[i],
        );
    }
}

fn hand_big(p: &[u8], b: &mut Big) {
    b.n = i64::from_be_bytes(p[..8].try_into().unwrap());
    for (i, c) in p[8..8 + 8 * 12800].chunks_exact(8).enumerate() {
        b.data[i] = f64::from_bits(u64::from_be_bytes(c.try_into().unwrap()));
    }
}

fn bench_var(rows: &mut Vec<Row>) {
    let native = FormatBuilder::new("series")
        .field("n", FieldType::I64)
        .field("xs", FieldType::var_array(FieldType::F64))
        .build()
        .unwrap();
    let xs: Vec<f64> = (0..1000).map(|i| i as f64).collect();
    let xb: Vec<u8> = xs.iter().flat_map(|x| x.to_ne_bytes()).collect();
    let fixed = vec![0u8; native.size() as usize];
    let mut enc = Encoder::new(native.clone()).unwrap();
    let size = fixed.len() + xb.len();
    let mut dst = vec![0u8; size];
    let memcpy = time(|| {
        dst[..xb.len()].copy_from_slice(black_box(&xb));
        black_box(&dst);
    });
    let e = time(|| {
        let iov = enc.encode(black_box(&fixed), &[black_box(&xb)]).unwrap();
        black_box(iov.len());
    });
    rows.push(Row {
        record: "var f64[1000]",
        size,
        op: "encode (gather iovecs)".into(),
        ns: e,
        memcpy,
        hand: None,
    });
    let framed = enc.encode_to_vec(&fixed, &[&xb]).unwrap();
    let buf = aligned_copy(&framed);
    let framed = as_bytes(&buf, framed.len());
    let mut reg = Registry::new();
    reg.register(native.clone());
    let ns = time(|| {
        let (r, _) = RecordRef::parse(black_box(framed)).unwrap();
        black_box(reg.decode(&r, &native).unwrap().bytes.len());
    });
    rows.push(Row {
        record: "var f64[1000]",
        size,
        op: "decode, same layout (in place)".into(),
        ns,
        memcpy,
        hand: None,
    });
    let be = FormatBuilder::with_arch("series", Arch::BE64)
        .field("n", FieldType::I64)
        .field("xs", FieldType::var_array(FieldType::F64))
        .build()
        .unwrap();
    let payload = write_value(&be, &read_value(&native, &framed[HEADER_LEN..]).unwrap()).unwrap();
    let bf = record::frame(&be, &payload).unwrap();
    reg.register(be);
    let mut out = Vec::new();
    let ns = time(|| {
        let (r, _) = RecordRef::parse(black_box(&bf)).unwrap();
        reg.decode_into(&r, &native, &mut out).unwrap();
        black_box(&out);
    });
    let mut hv = vec![0f64; 1000];
    let p = &bf[HEADER_LEN + 24..HEADER_LEN + 24 + 8000];
    let hand = time(|| {
        for (i, c) in black_box(p).chunks_exact(8).enumerate() {
            hv[i] = f64::from_bits(u64::from_be_bytes(c.try_into().unwrap()));
        }
        black_box(&hv);
    });
    rows.push(Row {
        record: "var f64[1000]",
        size,
        op: "decode, byte-swapped writer (be64)".into(),
        ns,
        memcpy,
        hand: Some(hand),
    });
}

fn main() {
    let mut rows = Vec::new();
    let only = std::env::args().nth(1).filter(|a| !a.starts_with('-'));
    let want = |n: &str| only.as_deref().is_none_or(|o| n.contains(o));
    if want("mixed") {
        bench_record("mixed", &mixed(7), hand_mixed, &mut rows);
    }
    if want("ten") {
        let t = Ten {
            n: 10,
            items: std::array::from_fn(|i| mixed(i as i64)),
        };
        bench_record("ten mixed (nested array)", &t, hand_ten, &mut rows);
    }
    if want("big") {
        let mut b = Box::new(Big {
            n: 5,
            data: [0.0; 12800],
        });
        for (i, x) in b.data.iter_mut().enumerate() {
            *x = i as f64 * 0.5;
        }
        bench_record("f64[12800] (100 KiB)", &*b, hand_big, &mut rows);
    }
    if want("var") {
        bench_var(&mut rows);
    }
    println!("| record | bytes | operation | ns/op | × memcpy | × hand-written |");
    println!("| --- | ---: | --- | ---: | ---: | ---: |");
    for r in rows {
        let hand = r
            .hand
            .map(|h| format!("{:.2} (hand {:.0} ns)", r.ns / h, h))
            .unwrap_or_else(|| "–".into());
        println!(
            "| {} | {} | {} | {:.1} | {:.2} | {} |",
            r.record,
            r.size,
            r.op,
            r.ns,
            r.ns / r.memcpy,
            hand
        );
    }
}
