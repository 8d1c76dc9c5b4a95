//! Fuzz targets of the core crate: one `pub fn TARGET(data: &[u8])` per
//! target, which must never panic, hang or allocate beyond its stated bound
//! for any input. The coverage-guided runner (`make fuzz`) and the corpus
//! replay tests call them; they are not part of the API.

pub mod tcp;
pub use tcp::tcp_frames;
