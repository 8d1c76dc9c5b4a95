/* Accumulates racing on one target: every rank (rank 0, the target,
 * included) hammers rank 0's memory at once, in a shared lock_all epoch,
 * on a window created over the program's memory, a dynamic window and an
 * allocated one, and the results must be exact:
 *   - MPI_Accumulate(MPI_SUM) of 1 to one long (sum = ranks x rounds);
 *   - MPI_Fetch_and_op(MPI_SUM) of 1 to another: every value 0 .. N-1 is
 *     fetched exactly once over all ranks (checked by gathering them);
 *   - an increment by a Compare_and_swap loop (none lost);
 *   - MPI_Accumulate(MPI_SUM) of 64 doubles (every element exact);
 *   - MPI_Accumulate(MPI_MAX) (the largest value sent);
 *   - MPI_Get_accumulate(MPI_NO_OP) reads never see a torn value of the
 *     64-element vector: all its elements were added the same number of
 *     times (every accumulate of the vector is applied as a whole).
 * With GW_TEST_EXPECT_DIRECT=1 (and GW_MPI_RMA_PROGRESS=none) the
 * origins on rank 0's host must do their Fetch_and_op without rank 0:
 * it computes without calling MPI until they are done (single copies
 * under the lock word), which would never end if they were requests. */
#include "check.h"
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define VEC 64

/* Rounds per rank (GW_TEST_ROUNDS, default 200). */
static int rounds = 200;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* The target's layout: longs [0] sum, [1] fetch-and-op, [2] CAS counter,
 * [3] max, [4] phase-1 counter; then VEC doubles. */
#define LONGS 5
#define BYTES (LONGS * sizeof(long) + VEC * sizeof(double))

static int cmp_long(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

static void race(const char *flavour, MPI_Win win, char *mem, MPI_Aint base, int rank, int size,
                 int expect_direct) {
    /* Displacements: bytes from `base` (dynamic windows: addresses). */
    MPI_Aint d_sum = base, d_fop = base + sizeof(long), d_cas = base + 2 * sizeof(long),
             d_max = base + 3 * sizeof(long), d_ph1 = base + 4 * sizeof(long),
             d_vec = base + LONGS * sizeof(long);
    if (rank == 0) memset(mem, 0, BYTES);
    MPI_Barrier(MPI_COMM_WORLD);

    /* Phase 1: with single copies the target need not take part. */
    if (expect_direct) {
        const long one = 1;
        long old;
        if (rank == 0) {
            double t0 = now();
            long want = (long)(size - 1) * 20, seen = 0;
            while (now() - t0 < 20.0) {
                seen = __atomic_load_n((long *)(mem + 4 * sizeof(long)), __ATOMIC_ACQUIRE);
                if (seen == want) break;
            }
            CHECK(seen == want, "%s: %ld of %ld fetch-and-ops landed while the target computed",
                  flavour, seen, want);
        } else {
            MPI_Win_lock(MPI_LOCK_SHARED, 0, MPI_MODE_NOCHECK, win);
            for (int i = 0; i < 20; i++) {
                MPI_Fetch_and_op(&one, &old, MPI_LONG, 0, d_ph1, MPI_SUM, win);
                MPI_Win_flush(0, win);
            }
            MPI_Win_unlock(0, win);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }

    /* Phase 2: everyone at once. */
    long *fetched = malloc(rounds * sizeof(long));
    double vec[VEC], seen_vec[VEC];
    for (int i = 0; i < VEC; i++) vec[i] = rank + 1;
    const long one = 1;
    int torn = 0;
    MPI_Win_lock_all(0, win);
    for (int i = 0; i < rounds; i++) {
        MPI_Accumulate(&one, 1, MPI_LONG, 0, d_sum, 1, MPI_LONG, MPI_SUM, win);
        MPI_Fetch_and_op(&one, &fetched[i], MPI_LONG, 0, d_fop, MPI_SUM, win);
        long mx = (long)rank * rounds + i;
        MPI_Accumulate(&mx, 1, MPI_LONG, 0, d_max, 1, MPI_LONG, MPI_MAX, win);
        MPI_Accumulate(vec, VEC, MPI_DOUBLE, 0, d_vec, VEC, MPI_DOUBLE, MPI_SUM, win);
        MPI_Win_flush(0, win);
        for (;;) {
            long cur, prev, next;
            MPI_Fetch_and_op(NULL, &cur, MPI_LONG, 0, d_cas, MPI_NO_OP, win);
            MPI_Win_flush(0, win);
            next = cur + 1;
            MPI_Compare_and_swap(&next, &cur, &prev, MPI_LONG, 0, d_cas, win);
            MPI_Win_flush(0, win);
            if (prev == cur) break;
        }
        if (i % 10 == 0) {
            MPI_Get_accumulate(NULL, 0, MPI_DOUBLE, seen_vec, VEC, MPI_DOUBLE, 0, d_vec, VEC,
                               MPI_DOUBLE, MPI_NO_OP, win);
            MPI_Win_flush(0, win);
            /* Each element is a sum of whole vectors of (r + 1): the
             * elements may differ only if a vector was applied in part. */
            for (int k = 1; k < VEC; k++) torn += seen_vec[k] != seen_vec[0];
        }
    }
    MPI_Win_unlock_all(win);
    CHECK(torn == 0, "%s: %d torn reads of the vector", flavour, torn);
    MPI_Barrier(MPI_COMM_WORLD);

    long *all = rank == 0 ? malloc((size_t)size * rounds * sizeof(long)) : NULL;
    MPI_Gather(fetched, rounds, MPI_LONG, all, rounds, MPI_LONG, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        long n = (long)size * rounds, *l = (long *)mem;
        CHECK(l[0] == n, "%s: accumulate sum %ld, want %ld", flavour, l[0], n);
        CHECK(l[1] == n, "%s: fetch-and-op sum %ld, want %ld", flavour, l[1], n);
        CHECK(l[2] == n, "%s: compare-and-swap counter %ld, want %ld", flavour, l[2], n);
        CHECK(l[3] == (long)(size - 1) * rounds + rounds - 1, "%s: max %ld", flavour, l[3]);
        qsort(all, (size_t)n, sizeof(long), cmp_long);
        for (long k = 0; k < n; k++)
            CHECK(all[k] == k, "%s: fetch-and-op values: position %ld holds %ld", flavour, k,
                  all[k]);
        double want = 0;
        for (int r = 0; r < size; r++) want += (double)(r + 1) * rounds;
        double *v = (double *)(mem + LONGS * sizeof(long));
        for (int k = 0; k < VEC; k++)
            CHECK(v[k] == want, "%s: vector element %d is %g, want %g", flavour, k, v[k], want);
        printf("%s: %ld accumulates, fetch-and-ops and swaps exact\n", flavour, n);
        free(all);
    }
    free(fetched);
    MPI_Barrier(MPI_COMM_WORLD);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *e = getenv("GW_TEST_EXPECT_DIRECT");
    const char *rounds_env = getenv("GW_TEST_ROUNDS");
    if (rounds_env && atoi(rounds_env) > 0) rounds = atoi(rounds_env);
    int expect = e && strcmp(e, "1") == 0;

    /* Created over the program's memory. */
    char *mem = calloc(1, BYTES);
    MPI_Win win;
    MPI_Win_create(mem, BYTES, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    race("create", win, mem, 0, rank, size, expect);
    MPI_Win_free(&win);

    /* Dynamic: displacements are rank 0's addresses. */
    MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Win_attach(win, mem, BYTES);
    MPI_Aint addr;
    MPI_Get_address(mem, &addr);
    MPI_Bcast(&addr, 1, MPI_AINT, 0, MPI_COMM_WORLD);
    race("dynamic", win, mem, addr, rank, size, expect);
    MPI_Win_detach(win, mem);
    MPI_Win_free(&win);
    free(mem);

    /* Allocated (loads and stores in the host segment). */
    char *amem;
    MPI_Win_allocate(BYTES, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &amem, &win);
    race("allocate", win, amem, 0, rank, size, expect);
    MPI_Win_free(&win);

    PASS("rma_acc_race");
    MPI_Finalize();
    return 0;
}
