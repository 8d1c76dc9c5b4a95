//! Support for `#[derive(WireRecord)]`: the mapping from Rust field types to
//! wire field types. Only types valid for every bit pattern implement it, so a
//! derived struct can be viewed in place from untrusted bytes.

use crate::decode::WireRecord;
use crate::format::FieldType;

/// A Rust type that can be a field of a derived record.
///
/// # Safety
/// Implementors must be valid for every bit pattern and contain no pointers.
pub unsafe trait WireField {
    fn field_type() -> FieldType;
}

macro_rules! scalar {
    ($($t:ty => $ft:expr),*) => {$(
        // SAFETY: primitive integers and floats are valid for all bit patterns.
        unsafe impl WireField for $t { fn field_type() -> FieldType { $ft } }
    )*};
}
scalar!(i8 => FieldType::I8, i16 => FieldType::I16, i32 => FieldType::I32, i64 => FieldType::I64,
        u8 => FieldType::U8, u16 => FieldType::U16, u32 => FieldType::U32, u64 => FieldType::U64,
        f32 => FieldType::F32, f64 => FieldType::F64);

// SAFETY: an array of all-bit-patterns-valid elements is itself valid for all bit patterns.
unsafe impl<T: WireField, const N: usize> WireField for [T; N] {
    fn field_type() -> FieldType {
        FieldType::array(T::field_type(), N as u32)
    }
}

// SAFETY: WireRecord's contract is stronger than WireField's.
unsafe impl<T: WireRecord> WireField for T {
    fn field_type() -> FieldType {
        FieldType::Nested(T::format())
    }
}

/// Compile-time check used by the derive: fails to compile for other types.
pub const fn assert_wire_field<T: WireField>() {}
