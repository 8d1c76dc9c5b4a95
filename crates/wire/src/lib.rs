//! Self-describing records for gridwire: natural data representation with
//! receiver-side conversion by field name (after PBIO).
//!
//! A sender ships its in-memory bytes as they are, tagged with a [`FormatId`]
//! (a content hash of the layout's canonical description). A receiver states
//! the layout it wants; if the ids are equal it reads the bytes in place
//! ([`decode::view`]), otherwise a [`Plan`] matched by field name (byte swaps,
//! widening/narrowing, f32↔f64, defaults, ignored extras, nested records and
//! arrays, merged moves) is built once per pair of formats and reused.
//!
//! Module map: [`mod@format`] (model, builder, ABI layouts), [`meta`] (canonical
//! metadata and ids), [`record`] (framing, gather encode), [`plan`]
//! (conversion), [`decode`] (registry, views), [`value`] (reflection, JSON,
//! foreign writer), [`mod@file`] (record files); with the `jit` feature, a
//! Cranelift back end for plans.
//!
//! The derive refuses structs whose in-place view would be unsound:
//! ```compile_fail
//! #[derive(gridwire_wire::WireRecord)]
//! struct NoRepr { x: i32 } // no #[repr(C)]: layout is not defined
//! ```
//! ```compile_fail
//! #[repr(C)]
//! #[derive(gridwire_wire::WireRecord)]
//! struct HasBool { b: bool } // bool is not valid for every bit pattern
//! ```
//! ```
//! #[repr(C)]
//! #[derive(gridwire_wire::WireRecord)]
//! struct Ok { a: [u8; 3], b: f64 }
//! use gridwire_wire::WireRecord as _;
//! assert_eq!(<Ok as gridwire_wire::decode::WireRecord>::format().size(), 16);
//! ```

pub mod decode;
pub mod derive_support;
pub mod error;
pub mod file;
pub mod format;
#[doc(hidden)]
pub mod fuzzing;
#[cfg(feature = "jit")]
mod jit;
pub mod limits;
pub mod meta;
pub mod plan;
mod prog;
pub mod record;
pub mod value;
pub mod vectors;

pub use decode::{view, view_bytes, Decoded, IdHasher, Registry, WireRecord};
pub use error::{Result, WireError};
pub use format::{Arch, ByteOrder, CType, Field, FieldType, Format, FormatBuilder, FormatId};
/// `#[derive(WireRecord)]` for `#[repr(C)]` structs (see `gridwire-wire-derive`).
pub use gridwire_wire_derive::WireRecord;
pub use plan::{Backend, OverflowPolicy, Plan};
pub use record::{Encoder, RecordRef, HEADER_LEN};
pub use value::Value;
