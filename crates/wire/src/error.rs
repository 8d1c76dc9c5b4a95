//! Typed errors. Every failure caused by input bytes (records, metadata,
//! files) is reported here; the decoder never panics on hostile data.

use thiserror::Error;

/// Errors from format construction, metadata parsing, encoding and decoding.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum WireError {
    /// The input ended before a structure it announced was complete.
    #[error("truncated input: needed {needed} bytes at offset {at}, have {have}")]
    Truncated {
        at: usize,
        needed: usize,
        have: usize,
    },
    /// A magic number or version did not match.
    #[error("bad magic or version in {what}")]
    BadMagic { what: &'static str },
    /// A format description is internally inconsistent.
    #[error("invalid format `{format}`: {reason}")]
    InvalidFormat { format: String, reason: String },
    /// A limit that bounds memory or time use was exceeded.
    #[error("limit exceeded: {what} ({value} > {limit})")]
    Limit {
        what: &'static str,
        value: u64,
        limit: u64,
    },
    /// Metadata bytes are not in canonical form (so their hash would not be the id).
    #[error("metadata is not canonical")]
    NotCanonical,
    /// A record names a format id that is not known to the registry.
    #[error("unknown format id {0}")]
    UnknownFormat(crate::FormatId),
    /// Two fields of the same name have types that cannot be converted.
    #[error("field `{field}`: cannot convert {from} to {to}")]
    TypeMismatch {
        field: String,
        from: String,
        to: String,
    },
    /// A narrowing conversion lost information and the policy says error.
    #[error("field `{field}`: value {value} does not fit in the receiver's type")]
    Overflow { field: String, value: String },
    /// A variable-length slot points outside the record or is misaligned.
    #[error("variable-length field `{field}`: {reason}")]
    BadVarField { field: String, reason: String },
    /// The record header disagrees with the format (size, lengths).
    #[error("record header: {0}")]
    BadHeader(String),
    /// A zero-copy view was requested but cannot be given (layout or alignment).
    #[error("cannot view in place: {0}")]
    NotViewable(String),
    /// Caller supplied inconsistent arguments (e.g. wrong number of var parts).
    #[error("usage: {0}")]
    Usage(String),
    /// An I/O error (files, CLI), stored as text so the error stays `Clone + Eq`.
    #[error("i/o: {0}")]
    Io(String),
}

impl From<std::io::Error> for WireError {
    fn from(e: std::io::Error) -> Self {
        WireError::Io(e.to_string())
    }
}

/// Result alias for this crate.
pub type Result<T> = std::result::Result<T, WireError>;
