//! Every type round-trips between a sender that declares big-endian data
//! (it byte-swaps as a big-endian host's natural representation would be)
//! and a native one, with strides, across runs, and hostile bodies fail.

use super::*;

/// Bytes of a packed message, as they would travel.
fn wire(b: &Buffer) -> Vec<u8> {
    if b.parts.is_empty() {
        return b.data.clone();
    }
    let mut out = Vec::new();
    for p in &b.parts {
        match *p {
            Part::Copied { start, end } => out.extend_from_slice(&b.data[start..end]),
            // SAFETY: the tests keep the packed arrays alive until here.
            Part::InPlace { ptr, len } => {
                out.extend_from_slice(unsafe { std::slice::from_raw_parts(ptr, len) })
            }
        }
    }
    out
}

fn roundtrip<T: Copy + PartialEq + std::fmt::Debug + Default>(kind: Kind, vals: &[T]) {
    for order in [Order::Big, Order::Little] {
        for enc in [PVM_DATA_DEFAULT, PVM_DATA_RAW, PVM_DATA_IN_PLACE] {
            let mut b = Buffer::new(enc);
            b.order = order;
            // SAFETY: vals is a live slice of `vals.len()` elements of T.
            let rc = unsafe { b.pack(kind, vals.as_ptr() as *const u8, vals.len() as i32, 1) };
            assert_eq!(rc, PVM_OK);
            let bytes = wire(&b);
            assert_eq!(bytes.len(), b.len());
            if order != Order::NATIVE && kind.unit() > 1 && !vals.is_empty() {
                // The declared order really is in the bytes.
                assert_ne!(
                    &bytes[RUN_HEADER..RUN_HEADER + std::mem::size_of::<T>()],
                    // SAFETY: reading the first element's bytes.
                    unsafe {
                        std::slice::from_raw_parts(
                            vals.as_ptr() as *const u8,
                            std::mem::size_of::<T>(),
                        )
                    },
                    "{kind:?} {order:?}"
                );
            }
            let mut r = Buffer::received(bytes, 1, 2, 0, enc);
            let mut out = vec![T::default(); vals.len()];
            // SAFETY: out has vals.len() elements.
            let rc = unsafe { r.unpack(kind, out.as_mut_ptr() as *mut u8, out.len() as i32, 1) };
            assert_eq!(rc, PVM_OK, "{kind:?} {order:?} enc {enc}");
            assert_eq!(out, vals, "{kind:?} {order:?} enc {enc}");
            let mut extra = [T::default()];
            // SAFETY: one element.
            let rc = unsafe { r.unpack(kind, extra.as_mut_ptr() as *mut u8, 1, 1) };
            assert_eq!(rc, PVM_NO_DATA);
        }
    }
}

#[test]
fn every_type_roundtrips_from_a_big_endian_and_a_native_sender() {
    roundtrip(Kind::Byte, &[1u8, 0xff, 7]);
    roundtrip(Kind::Short, &[1i16, -2, i16::MAX, i16::MIN]);
    roundtrip(Kind::Ushort, &[1u16, 0xfffe, 0x1234]);
    roundtrip(Kind::Int, &[1i32, -1, 0x1234_5678, i32::MIN]);
    roundtrip(Kind::Uint, &[1u32, 0xdead_beef]);
    roundtrip(Kind::Long, &[1 as libc::c_long, -5, libc::c_long::MAX]);
    roundtrip(Kind::Ulong, &[3 as libc::c_ulong, libc::c_ulong::MAX - 1]);
    roundtrip(Kind::Float, &[1.5f32, -0.0, f32::MAX, 3.25e-7]);
    roundtrip(Kind::Double, &[1.5f64, -2.0e300, f64::MIN_POSITIVE]);
    roundtrip(Kind::Cplx, &[[1.0f32, -2.0], [3.5, 4.25]]);
    roundtrip(Kind::Dcplx, &[[1.0f64, -2.0], [3.5e100, 4.25]]);
    roundtrip::<i32>(Kind::Int, &[]);
}

#[test]
fn strings_and_strides_roundtrip_across_runs() {
    for order in [Order::Big, Order::Little] {
        let mut b = Buffer::new(PVM_DATA_DEFAULT);
        b.order = order;
        let a = [10i32, 11, 12, 13, 14, 15];
        // SAFETY: strided reads stay inside `a` (3 elements, stride 2).
        unsafe {
            assert_eq!(b.pack(Kind::Int, a.as_ptr() as *const u8, 3, 2), PVM_OK);
        }
        assert_eq!(b.pack_str(b"hello, world"), PVM_OK);
        let one = 99i32;
        let two = [-7i32, -8];
        // SAFETY: live locals of the counts given.
        unsafe {
            b.pack(Kind::Int, &one as *const i32 as *const u8, 1, 1);
            b.pack(Kind::Int, two.as_ptr() as *const u8, 2, 1);
        }
        let mut r = Buffer::received(b.data.clone(), 0, 0, 0, 0);
        let mut got = [0u32; 5];
        let mut s = [0xaau8; 32];
        // SAFETY: out arrays are big enough (3 slots at stride 2 in 5; string < 32).
        unsafe {
            assert_eq!(
                r.unpack(Kind::Uint, got.as_mut_ptr() as *mut u8, 3, 2),
                PVM_OK
            );
            assert_eq!(got, [10, 0, 12, 0, 14]);
            assert_eq!(r.unpack_str(s.as_mut_ptr()), PVM_OK);
            // Three ints packed by two calls, unpacked by one.
            let mut three = [0i32; 3];
            assert_eq!(
                r.unpack(Kind::Int, three.as_mut_ptr() as *mut u8, 3, 1),
                PVM_OK
            );
            assert_eq!(three, [99, -7, -8]);
        }
        assert_eq!(&s[..13], b"hello, world\0");
    }
}

#[test]
fn a_type_mismatch_and_hostile_bodies_are_errors() {
    let mut b = Buffer::new(PVM_DATA_DEFAULT);
    let d = 1.0f64;
    // SAFETY: one live double.
    unsafe { b.pack(Kind::Double, &d as *const f64 as *const u8, 1, 1) };
    let mut r = Buffer::received(b.data.clone(), 0, 0, 0, 0);
    let mut i = [0i32; 2];
    // SAFETY: two ints of room.
    unsafe {
        assert_eq!(
            r.unpack(Kind::Int, i.as_mut_ptr() as *mut u8, 2, 1),
            PVM_BAD_MSG
        );
        let mut s = [0u8; 8];
        assert_eq!(r.unpack_str(s.as_mut_ptr()), PVM_BAD_MSG);
    }
    // Every truncation, and a count that claims more than there is.
    for cut in 0..b.data.len() {
        let mut r = Buffer::received(b.data[..cut].to_vec(), 0, 0, 0, 0);
        let mut out = 0f64;
        // SAFETY: one double of room.
        let rc = unsafe { r.unpack(Kind::Double, &mut out as *mut f64 as *mut u8, 1, 1) };
        assert!(rc == PVM_NO_DATA || rc == PVM_BAD_MSG, "cut {cut}: {rc}");
    }
    let mut evil = b.data.clone();
    evil[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
    let mut r = Buffer::received(evil, 0, 0, 0, 0);
    let mut out = 0f64;
    // SAFETY: one double of room.
    assert_eq!(
        unsafe { r.unpack(Kind::Double, &mut out as *mut f64 as *mut u8, 1, 1) },
        PVM_BAD_MSG
    );
    // A string without its NUL is still terminated.
    let mut r = Buffer::received(vec![0, 0, 1, 0, 3, 0, 0, 0, b'a', b'b', b'c'], 0, 0, 0, 0);
    let mut s = [0xffu8; 8];
    // SAFETY: 8 bytes of room for a 3-byte string.
    assert_eq!(unsafe { r.unpack_str(s.as_mut_ptr()) }, PVM_OK);
    assert_eq!(&s[..4], b"abc\0");
}
