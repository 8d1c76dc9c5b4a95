//! Accumulates racing on one target (`tests/mpi/rma_acc_race.c`): every
//! rank applies `MPI_Accumulate` (sum, max, a 64-double vector),
//! `MPI_Fetch_and_op` and a `MPI_Compare_and_swap` loop to rank 0's memory
//! at once, on created, dynamic and allocated windows; every result must
//! be exact and every fetched value unique. On one host the origins of
//! rank 0's host apply them by single copies (created, dynamic) or loads
//! and stores (allocated) under the target's lock word; the first case
//! checks that they complete while rank 0 computes without MPI and without
//! the progress thread (so they cannot be requests). On two emulated hosts
//! the other host's origins send requests, which rank 0's handler applies
//! under the same lock word; `GW_MPI_RMA_DIRECT=0` sends everything.

mod common;

use common::{compile_mpi_test, gwrun_case, have_cc};
use gridwire_testkit::skip;

#[test]
fn rma_accumulates_race_on_one_target() {
    if !have_cc() {
        skip("rma_acc_race: no C compiler (cc or GWCC_CC)");
        return;
    }
    let exe = compile_mpi_test("mpi-tests-rma-acc", "rma_acc_race");
    // (ranks, emulated hosts, environment)
    type Case<'a> = (u32, u32, &'a [(&'a str, &'a str)]);
    let cases: &[Case] = &[
        (
            4,
            1,
            &[
                ("GW_TEST_EXPECT_DIRECT", "1"),
                ("GW_MPI_RMA_PROGRESS", "none"),
                // Single copies only: with the choice on, an origin that
                // saw the target polling a moment before sends requests,
                // which a computing target without a progress thread
                // applies only later (the choice has its own test,
                // c_suite::rma_acc_choice).
                ("GW_MPI_RMA_ACC_CHOICE", "0"),
            ],
        ),
        (4, 2, &[("GW_TEST_ROUNDS", "50")]),
        (3, 1, &[("GW_MPI_RMA_DIRECT", "0")]),
    ];
    for &(n, hosts, env) in cases {
        let rounds: u32 = env
            .iter()
            .find(|(k, _)| *k == "GW_TEST_ROUNDS")
            .map_or(200, |(_, v)| v.parse().unwrap());
        let out = gwrun_case(&exe, n, hosts, env, 90);
        let so = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && so.contains("PASS rma_acc_race"),
            "rma_acc_race -n {n} on {hosts} hosts with {env:?}:\n{so}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        for flavour in ["create", "dynamic", "allocate"] {
            assert!(
                so.contains(&format!("{flavour}: {} accumulates", n * rounds)),
                "{flavour} missing:\n{so}"
            );
        }
    }
}
