//! Bootstrap through PMI: rank, size and the key-value space in which
//! processes publish their descriptor tables at start-up.
//!
//! [`pmi_wire`] is the sans-IO PMI-1 codec shared with the launcher
//! (`gwrun`); [`pmi`] is the client the runtime uses.

pub mod pmi;
pub mod pmi_wire;

pub use pmi::Pmi;
