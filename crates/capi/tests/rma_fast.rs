//! The fast path of the one-sided calls on windows from `MPI_Win_allocate`
//! (`tests/mpi/rma_fast.c`): values at scaled displacements, every error
//! class the general path gives (epochs, ranges, ranks, buffers, counts,
//! types, operations, user error handlers), freed window handles,
//! accumulates of different operations to one location staying atomic,
//! and derived datatypes. On one host with 1, 2 and 4 ranks (loads and
//! stores: the fast path), on two emulated hosts (the other host's targets
//! by requests) and with `GW_MPI_RMA_DIRECT=0` (the general path only:
//! the same program must pass both ways).

mod common;

use common::{compile_mpi_test, gwrun_case, have_cc};
use gridwire_testkit::skip;

#[test]
fn rma_fast_path_matches_the_general_path() {
    if !have_cc() {
        skip("rma_fast: no C compiler (cc or GWCC_CC)");
        return;
    }
    let exe = compile_mpi_test("mpi-tests-rma-fast", "rma_fast");
    // (ranks, emulated hosts, environment)
    type Case<'a> = (u32, u32, &'a [(&'a str, &'a str)]);
    let cases: &[Case] = &[
        (1, 1, &[]),
        (2, 1, &[]),
        (4, 1, &[]),
        (4, 2, &[("GW_TEST_ROUNDS", "40")]),
        (
            3,
            1,
            &[("GW_MPI_RMA_DIRECT", "0"), ("GW_TEST_ROUNDS", "60")],
        ),
    ];
    for &(n, hosts, env) in cases {
        let out = gwrun_case(&exe, n, hosts, env, 120);
        let so = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && so.contains("PASS rma_fast"),
            "rma_fast -n {n} on {hosts} hosts with {env:?}:\n{so}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
