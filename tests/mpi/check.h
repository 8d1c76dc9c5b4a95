/* Tiny self-checking helpers for gridwire's MPI tests. */
#ifndef GW_TEST_CHECK_H
#define GW_TEST_CHECK_H
#include <stdio.h>
#include <stdlib.h>
#include <mpi.h>

static int gw_rank_ = -1;
#define CHECK(cond, ...) do { \
    if (!(cond)) { \
        if (gw_rank_ < 0) MPI_Comm_rank(MPI_COMM_WORLD, &gw_rank_); \
        fprintf(stderr, "FAIL rank %d %s:%d: %s: ", gw_rank_, __FILE__, __LINE__, #cond); \
        fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); \
        MPI_Abort(MPI_COMM_WORLD, 1); \
    } } while (0)
#define PASS(name) do { int r_; MPI_Comm_rank(MPI_COMM_WORLD, &r_); \
    if (r_ == 0) { printf("PASS %s\n", name); fflush(stdout); } } while (0)
#endif
