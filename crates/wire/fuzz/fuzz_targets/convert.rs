#![no_main]
//! A format from the fuzzer (metadata) and a payload: plans between it and
//! fixed native formats (both directions, both overflow policies) must
//! compile or fail cleanly, and running them on any payload must never read
//! or write out of bounds; interpreter and JIT must agree, and so must the
//! interpreter's two executors (moves, AVX-512 byte permutes).
//! Input: len:u16le metadata[len] payload.
use gridwire_wire::{meta, vectors, Arch, Backend, OverflowPolicy, Plan};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let k = u16::from_le_bytes([data[0], data[1]]) as usize;
    let rest = &data[2..];
    if k > rest.len() {
        return;
    }
    let Ok(fuzzed) = meta::parse(&rest[..k]) else {
        return;
    };
    let payload = &rest[k..];
    // Cranelift compiles dominate the run time (≈100 inputs/s), so the JIT
    // comparison runs on one input in eight; the plan compiler and the
    // interpreter run on all.
    let with_jit = data[data.len() - 1] & 7 == 0;
    let natives = [
        vectors::mixed(Arch::NATIVE).unwrap(),
        vectors::nested(Arch::NATIVE).unwrap(),
        vectors::evolved(Arch::BE64).unwrap(),
        fuzzed.clone(),
    ];
    for n in &natives {
        for (w, t) in [(&fuzzed, n), (n, &fuzzed)] {
            for policy in [OverflowPolicy::Error, OverflowPolicy::Saturate] {
                let Ok(mut p) = Plan::compile_with(w, t, policy, Some(Backend::Interpreter)) else {
                    continue;
                };
                p.set_permutes(false);
                let mut a = Vec::new();
                let ra = p.run(payload, &mut a);
                let mut q = p.clone();
                if q.set_permutes(true) {
                    let mut b = vec![0x5A; 33];
                    let rb = q.run(payload, &mut b);
                    assert_eq!(ra.is_ok(), rb.is_ok());
                    if ra.is_ok() {
                        assert_eq!(a, b);
                    }
                }
                let jit = if with_jit {
                    Plan::compile_with(w, t, policy, Some(Backend::Jit)).ok()
                } else {
                    None
                };
                if let Some(p) = jit.filter(|p| p.backend() == Backend::Jit) {
                    let mut b = Vec::new();
                    let rb = p.run(payload, &mut b);
                    assert_eq!(ra.is_ok(), rb.is_ok());
                    if ra.is_ok() && a != b {
                        // f32<->f64 of NaNs may differ in payload bits only
                        let va = gridwire_wire::value::read_value(t, &a).map(|v| format!("{v:?}"));
                        let vb = gridwire_wire::value::read_value(t, &b).map(|v| format!("{v:?}"));
                        assert_eq!(va, vb);
                    }
                }
            }
        }
    }
});
