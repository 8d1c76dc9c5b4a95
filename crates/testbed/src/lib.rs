//! gw-testbed as a library: the [`harness`] that tests use to bring a
//! testbed up and down (the tool itself is the `gw-testbed` binary), and
//! [`slurm`], which runs Slurm on a testbed.

pub mod harness;
pub mod slurm;
