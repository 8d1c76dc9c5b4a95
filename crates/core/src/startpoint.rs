//! Startpoints: global, serialisable references to an endpoint.
//!
//! A startpoint names a context and one of its endpoints. It is plain data;
//! [`Context::pack_startpoint`](crate::Context::pack_startpoint) serialises it
//! for a given destination (attaching the endpoint context's descriptor table
//! the first time), and the receiver's
//! [`Context::unpack_startpoint`](crate::Context::unpack_startpoint) caches
//! that table so it can connect on demand, by the method it selects itself,
//! even though it learned of the endpoint from a third party.

/// A reference to endpoint `endpoint` of context `ctx`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Startpoint {
    pub ctx: u32,
    pub endpoint: u32,
}
