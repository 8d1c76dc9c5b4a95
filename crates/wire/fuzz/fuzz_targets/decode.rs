#![no_main]
//! Any bytes as a record file, and as a record of fixed formats (nested with
//! variable fields; the PBIO-style mixed struct) decoded into the native
//! layout and reflected. Where a plan has machine code, the interpreter and
//! the JIT must agree byte for byte (same error or same output), and so must
//! the interpreter's two executors (moves, AVX-512 byte permutes where the
//! CPU has them). Plans and
//! the registry are built once per thread: the target is the decoder, not
//! the compiler.
use std::cell::RefCell;
use std::sync::Arc;

use gridwire_wire::{vectors, Arch, Backend, Format, OverflowPolicy, Plan, RecordRef, Registry};
use libfuzzer_sys::fuzz_target;

struct Case {
    wire: Arc<Format>,
    native: Arc<Format>,
    interp: Plan,
    jit: Plan,
    perm: Option<Plan>,
}

thread_local! {
    static STATE: RefCell<(Registry, Vec<Case>)> = RefCell::new({
        let mut reg = Registry::new();
        let mut cases = Vec::new();
        for (w, n) in [
            (vectors::nested(Arch::BE32), vectors::nested(Arch::NATIVE)),
            (vectors::mixed(Arch::BE32), vectors::mixed(Arch::NATIVE)),
            (vectors::mixed(Arch::I386), vectors::mixed(Arch::NATIVE)),
        ] {
            let (wire, native) = (w.unwrap(), n.unwrap());
            reg.register(wire.clone());
            let p = |b| Plan::compile_with(&wire, &native, OverflowPolicy::Error, Some(b)).unwrap();
            let mut interp = p(Backend::Interpreter);
            interp.set_permutes(false);
            let mut perm = interp.clone();
            let perm = perm.set_permutes(true).then_some(perm);
            cases.push(Case { interp, jit: p(Backend::Jit), perm, wire, native });
        }
        (reg, cases)
    });
}

fuzz_target!(|data: &[u8]| {
    let _ = gridwire_wire::file::dump_json(data);
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
            let _ = gridwire_wire::value::read_value(&c.wire, rec.payload);
            let mut a = Vec::new();
            let ra = c.interp.run(rec.payload, &mut a);
            if let Some(p) = &c.perm {
                let mut b = vec![0x5A; 300];
                let rb = p.run(rec.payload, &mut b);
                assert_eq!(ra, rb);
                if ra.is_ok() {
                    assert_eq!(a, b);
                }
            }
            if c.jit.backend() == Backend::Jit {
                let mut b = vec![0xA5; 7];
                let rb = c.jit.run(rec.payload, &mut b);
                assert_eq!(ra, rb);
                if ra.is_ok() {
                    assert_eq!(a, b);
                }
            }
        }
    });
});
