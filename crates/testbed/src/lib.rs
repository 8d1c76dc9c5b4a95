//! gw-testbed as a library: only the [`harness`] that tests use to bring a
//! testbed up and down (the tool itself is the `gw-testbed` binary).

pub mod harness;
