//! libpvm3: PVM 3.4's C interface over gridwire.
//!
//! A PVM task is a gridwire context that joins the virtual machine's job at
//! its first `pvm_mytid` (the core's dynamic membership: `Context::join`);
//! a message is one remote service request to the PVM handler of the
//! destination's context, over whatever method the runtime selects for the
//! pair. A per-user coordinator ([`coord`]) keeps the membership and group
//! tables and is never on the data path. See docs/pvm.md.
// PVM's C names (PvmSum, pvm_errno) and signatures are fixed.
#![allow(
    non_upper_case_globals,
    non_snake_case,
    clippy::missing_safety_doc,
    clippy::too_many_arguments
)]

pub mod agent;
pub mod capi;
pub mod catchout;
pub mod client;
pub mod conn;
pub mod consts;
pub mod coord;
pub mod groups;
pub mod hosts;
pub mod mbox;
pub mod pack;
pub mod remote;
pub mod spawn;
pub mod task;
