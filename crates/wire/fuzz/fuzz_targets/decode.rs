#![no_main]
//! Any bytes as a record file, and as a record of fixed formats (nested with
//! variable fields; the PBIO-style mixed struct) decoded into the native
//! layout and reflected. Where a plan has machine code, the interpreter and
//! the JIT must agree byte for byte (same error or same output).
use gridwire_wire::{vectors, Arch, Backend, OverflowPolicy, Plan, RecordRef, Registry};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = gridwire_wire::file::dump_json(data);
    let Ok((rec, _)) = RecordRef::parse(data) else {
        return;
    };
    for (wire, native) in [
        (vectors::nested(Arch::BE32), vectors::nested(Arch::NATIVE)),
        (vectors::mixed(Arch::BE32), vectors::mixed(Arch::NATIVE)),
        (vectors::mixed(Arch::I386), vectors::mixed(Arch::NATIVE)),
    ] {
        let (wire, native) = (wire.unwrap(), native.unwrap());
        let mut reg = Registry::new();
        reg.register(wire.clone());
        let _ = reg.decode(&rec, &native);
        let _ = reg.decode(&rec, &wire);
        let _ = gridwire_wire::value::read_value(&wire, rec.payload);
        let mut p = Plan::compile(&wire, &native, OverflowPolicy::Error).unwrap();
        p.set_backend(Backend::Interpreter);
        let mut a = Vec::new();
        let ra = p.run(rec.payload, &mut a);
        if p.set_backend(Backend::Jit) {
            let mut b = vec![0xA5; 7];
            let rb = p.run(rec.payload, &mut b);
            assert_eq!(ra, rb);
            if ra.is_ok() {
                assert_eq!(a, b);
            }
        }
    }
});
