//! Hard limits that bound the memory and time a hostile peer can make us
//! spend. They are generous for real records and small enough that a lying
//! length cannot make us allocate gigabytes.

/// Longest format or field name, bytes (names are length-prefixed with one byte).
pub const MAX_NAME: usize = 255;
/// Most fields in one format (not counting nested formats' fields).
pub const MAX_FIELDS: usize = 4096;
/// Deepest nesting of formats.
pub const MAX_DEPTH: u32 = 16;
/// Deepest nesting of types while parsing metadata (arrays of arrays count too).
pub const MAX_TYPE_DEPTH: u32 = 48;
/// Largest fixed part of a record, bytes.
pub const MAX_RECORD_FIXED: u64 = 1 << 30;
/// Largest metadata blob, bytes.
pub const MAX_META: usize = 1 << 20;
/// Largest variable tail of one record, bytes (also bounds what a decoder allocates).
pub const MAX_VAR_TAIL: u64 = 1 << 31;
/// Most plan operations a conversion may compile to.
pub const MAX_PLAN_OPS: usize = 1 << 16;
