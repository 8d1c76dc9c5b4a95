//! Fuzz harnesses (hidden from the docs): one function per target, called by
//! the coverage-guided fuzzer (`make fuzz`, the `fuzz/` crate at the root of
//! the repository), by `cargo test` of that crate (which replays
//! `fuzz/corpus/<target>/`) and by the nightly `cargo fuzz` targets in
//! `crates/wire/fuzz`. A panic in any of them is a bug in the decoder.
//!
//! Allocation bound: the decoder allocates at most what `limits` allows for
//! one record, and never more than a small multiple of the input's length
//! plus the fixed formats' native sizes.

use std::cell::RefCell;
use std::sync::Arc;

use crate::{vectors, Arch, Backend, Format, OverflowPolicy, Plan, RecordRef, Registry};

struct Case {
    wire: Arc<Format>,
    native: Arc<Format>,
    interp: Plan,
    perm: Option<Plan>,
    jit: Option<Plan>,
}

thread_local! {
    // Plans and the registry are built once per thread: the target is the
    // decoder, not the plan compiler.
    static STATE: RefCell<(Registry, Vec<Case>)> = RefCell::new({
        let mut reg = Registry::new();
        let mut cases = Vec::new();
        for (w, n) in [
            (vectors::nested(Arch::BE32), vectors::nested(Arch::NATIVE)),
            (vectors::mixed(Arch::BE32), vectors::mixed(Arch::NATIVE)),
            (vectors::mixed(Arch::I386), vectors::mixed(Arch::NATIVE)),
        ] {
            let (wire, native) = (w.expect("built-in format"), n.expect("built-in format"));
            reg.register(wire.clone());
            let plan = |b| Plan::compile_with(&wire, &native, OverflowPolicy::Error, Some(b));
            let mut interp = plan(Backend::Interpreter).expect("built-in plan");
            interp.set_permutes(false);
            let mut perm = interp.clone();
            let perm = perm.set_permutes(true).then_some(perm);
            let jit = plan(Backend::Jit).ok().filter(|p| p.backend() == Backend::Jit);
            cases.push(Case { wire, native, interp, perm, jit });
        }
        (reg, cases)
    });
}

/// Any bytes as a record file (`dump_json`) and as one framed record of fixed
/// formats (nested with variable fields; the PBIO-style mixed struct) decoded
/// into the native layout and reflected. The interpreter's two executors
/// (moves; AVX-512 byte permutes where the CPU has them) and, with the `jit`
/// feature, the compiled code must agree byte for byte.
pub fn record_decode(data: &[u8]) {
    let _ = crate::file::dump_json(data);
    let Ok((rec, _)) = RecordRef::parse(data) else {
        return;
    };
    STATE.with(|st| {
        let (reg, cases) = &mut *st.borrow_mut();
        for c in cases.iter() {
            let _ = reg.decode(&rec, &c.native);
            let _ = reg.decode(&rec, &c.wire);
            let mut out = Vec::new();
            let _ = reg.decode_into(&rec, &c.native, &mut out);
            let _ = crate::value::read_value(&c.wire, rec.payload);
            let mut a = Vec::new();
            let ra = c.interp.run(rec.payload, &mut a);
            for other in [&c.perm, &c.jit].into_iter().flatten() {
                let mut b = vec![0x5A; 33];
                let rb = other.run(rec.payload, &mut b);
                assert_eq!(ra, rb, "executors disagree on the result");
                if ra.is_ok() {
                    assert_eq!(a, b, "executors disagree on the output");
                }
            }
        }
    });
}

/// Any bytes as format metadata: the parser returns, never panics, and what
/// it accepts re-serialises to the same bytes (so a format's id is their hash).
pub fn metadata_parse(data: &[u8]) {
    if let Ok(f) = crate::meta::parse(data) {
        assert_eq!(crate::meta::serialize(&f), data, "metadata round trip");
    }
}
