//! The committed test vectors in `testdata/` must be exactly what the writer
//! produces today, `gwrecord dump` must print exactly the committed JSON, and
//! every foreign vector must convert to the native layout with equal values.
//! Set `GW_BLESS=1` to rewrite the files after an intended format change.

use std::path::PathBuf;
use std::process::Command;

use gridwire_wire::file::{dump_json, FileReader, Item};
use gridwire_wire::value::read_value;
use gridwire_wire::{vectors, Arch, OverflowPolicy, Registry};

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testdata")
}

#[test]
fn vectors_are_reproducible_and_dump_matches() {
    let bless = std::env::var("GW_BLESS").is_ok();
    for (name, bytes) in vectors::all().unwrap() {
        let bin = dir().join(format!("{name}.bin"));
        let json = dir().join(format!("{name}.json"));
        let text = dump_json(&bytes).unwrap();
        if bless {
            std::fs::write(&bin, &bytes).unwrap();
            std::fs::write(&json, &text).unwrap();
        }
        assert_eq!(
            std::fs::read(&bin).unwrap(),
            bytes,
            "{name}.bin differs from the writer's output"
        );
        assert_eq!(
            std::fs::read_to_string(&json).unwrap(),
            text,
            "{name}.json differs from dump"
        );
        // And the CLI prints the same.
        let out = Command::new(env!("CARGO_BIN_EXE_gwrecord"))
            .arg("dump")
            .arg(&bin)
            .output()
            .unwrap();
        assert!(out.status.success());
        assert_eq!(
            String::from_utf8(out.stdout).unwrap(),
            text,
            "gwrecord dump {name}.bin"
        );
    }
}

#[test]
fn foreign_vectors_convert_to_native() {
    let native_mixed = vectors::mixed(Arch::NATIVE).unwrap();
    let native_nested = vectors::nested(Arch::NATIVE).unwrap();
    for (name, bytes) in vectors::all().unwrap() {
        let mut reg = Registry::with_policy(OverflowPolicy::Error);
        for item in FileReader::new(&bytes).unwrap() {
            match item.unwrap() {
                Item::Format(f) => {
                    reg.register(f);
                }
                Item::Record(r) => {
                    let wire = reg.get(r.id).unwrap().clone();
                    let native = if wire.name() == "track" {
                        &native_nested
                    } else {
                        &native_mixed
                    };
                    let d = reg.decode(&r, native).unwrap();
                    assert_eq!(d.is_borrowed(), wire.id() == native.id(), "{name}");
                    let got = read_value(native, &d.bytes).unwrap();
                    let want = read_value(&wire, r.payload).unwrap();
                    // Every field the receiver has must equal the sender's value
                    // (fields the sender lacks are zero).
                    let gridwire_wire::Value::Struct(fs) = &got else {
                        panic!()
                    };
                    for (fname, v) in fs {
                        match want.get(fname) {
                            Some(w) => {
                                assert_eq!(normalize(v), normalize(w), "{name}: field {fname}")
                            }
                            None => assert!(is_zero(v), "{name}: missing {fname} is {v:?}"),
                        }
                    }
                }
            }
        }
    }
}

fn is_zero(v: &gridwire_wire::Value) -> bool {
    use gridwire_wire::Value::*;
    match v {
        I(0) | U(0) | Char(0) | Bool(false) => true,
        F(x) => *x == 0.0,
        Array(xs) => xs.iter().all(is_zero),
        Struct(fs) => fs.iter().all(|(_, v)| is_zero(v)),
        _ => false,
    }
}

/// Compare numerically across int widths/signedness.
fn normalize(v: &gridwire_wire::Value) -> String {
    use gridwire_wire::Value::*;
    match v {
        I(x) => format!("{}", *x as f64),
        U(x) => format!("{}", *x as f64),
        F(x) => format!("{x}"),
        Array(xs) => xs.iter().map(normalize).collect::<Vec<_>>().join(","),
        Struct(fs) => fs
            .iter()
            .map(|(n, v)| format!("{n}={}", normalize(v)))
            .collect::<Vec<_>>()
            .join(";"),
        other => format!("{other:?}"),
    }
}
