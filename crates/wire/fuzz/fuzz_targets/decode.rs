#![no_main]
//! Any bytes as a record file, and as a record of a fixed nested format with
//! variable fields, decoded into the native layout and reflected.
use libfuzzer_sys::fuzz_target;
use gridwire_wire::{vectors, Arch, RecordRef, Registry};

fuzz_target!(|data: &[u8]| {
    let _ = gridwire_wire::file::dump_json(data);
    let wire = vectors::nested(Arch::BE32).unwrap();
    let native = vectors::nested(Arch::NATIVE).unwrap();
    if let Ok((rec, _)) = RecordRef::parse(data) {
        let mut reg = Registry::new();
        reg.register(wire.clone());
        let _ = reg.decode(&rec, &native);
        let _ = reg.decode(&rec, &wire);
        let _ = gridwire_wire::value::read_value(&wire, rec.payload);
    }
});
