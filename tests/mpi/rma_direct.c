/* Puts and gets as loads and stores on windows from MPI_Win_allocate.
 *
 * Run with GW_MPI_RMA_PROGRESS=none, so the target applies nothing unless
 * it calls MPI; GW_TEST_EXPECT_DIRECT=1 says the members on rank 0's host
 * should reach its memory directly (0: they should not: GW_MPI_RMA_DIRECT=0
 * or another method than shared memory). The test tells the two apart:
 * with direct access, origins on rank 0's host see its memory through
 * MPI_Win_shared_query and their puts land while rank 0 computes without
 * calling MPI; without it, MPI_Win_shared_query shows nothing. Then
 * it checks the data paths (contiguous, strided target, strided origin,
 * gets) and that exclusive locks still exclude: every origin increments one
 * counter by get + put under MPI_LOCK_EXCLUSIVE, and none is lost. Last,
 * accumulates stay atomic when origins of the host apply theirs directly
 * and others' requests are applied by the target: every rank adds to one
 * counter with MPI_Fetch_and_op and to an array with MPI_Accumulate, all at
 * once under MPI_Win_lock_all, and races a compare-and-swap. */
#include "check.h"
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

enum { SLOTS = 64, ROUNDS = 20, ADDS = 200, ARRAY = 40 };

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *e = getenv("GW_TEST_EXPECT_DIRECT");
    int expect = e && strcmp(e, "1") == 0;

    /* Which ranks share rank 0's host. */
    MPI_Comm host;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host);
    MPI_Group wg, hg;
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    MPI_Comm_group(host, &hg);
    int zero = 0, zero_in_host;
    MPI_Group_translate_ranks(wg, 1, &zero, hg, &zero_in_host);
    int near = zero_in_host != MPI_UNDEFINED;
    int *near_all = malloc(size * sizeof(int));
    MPI_Allgather(&near, 1, MPI_INT, near_all, 1, MPI_INT, MPI_COMM_WORLD);

    int *base;
    MPI_Win win;
    /* Slot layout at every rank: [0, size) flags, then SLOTS strided data, then the counter. */
    /* Then a fetch-and-op counter, the accumulate array and the CAS slot (longs). */
    MPI_Aint bytes = (size + 2 * SLOTS + 1) * sizeof(int) + (2 + ARRAY) * sizeof(long);
    MPI_Win_allocate(bytes, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    memset(base, 0, bytes);
    MPI_Barrier(MPI_COMM_WORLD);

    /* 1. Shared query: an allocated window's memory on the same host is
     * visible (MPI 4.1 allows it for any flavour) exactly when direct. */
    MPI_Aint qsize;
    int qunit;
    int *qbase = NULL;
    MPI_Win_shared_query(win, 0, &qsize, &qunit, &qbase);
    if (rank != 0) {
        int want = expect && near;
        CHECK((qbase != NULL) == want, "rank 0's memory %s mapped here (expected %s)", qbase ? "is" : "is not",
              want ? "mapped" : "not mapped");
        if (want) CHECK(qsize == bytes && qunit == (int)sizeof(int), "query gave %ld bytes unit %d", (long)qsize, qunit);
    }

    /* 2. Puts land while the target computes (no progress thread). */
    int direct_origins = 0;
    for (int r = 1; r < size; r++) direct_origins += expect && near_all[r];
    if (rank == 0) {
        volatile int *flags = base;
        double limit = direct_origins ? 20.0 : 0.2, t0 = now();
        int seen = 0;
        while (now() - t0 < limit) {
            seen = 0;
            for (int r = 1; r < size; r++) seen += __atomic_load_n(&flags[r], __ATOMIC_ACQUIRE) != 0;
            if (seen >= direct_origins && direct_origins > 0) break;
        }
        /* Without direct access nothing is asserted here: a request may
         * still be applied by a library thread of the target's. */
        if (direct_origins)
            CHECK(seen >= direct_origins, "%d of %d puts landed while the target computed", seen, direct_origins);
    } else {
        int me = rank;
        MPI_Win_lock_all(MPI_MODE_NOCHECK, win);
        MPI_Put(&me, 1, MPI_INT, 0, rank, 1, MPI_INT, win);
        MPI_Win_flush(0, win);
        int back = -1;
        MPI_Get(&back, 1, MPI_INT, 0, rank, 1, MPI_INT, win);
        MPI_Win_flush(0, win);
        CHECK(back == me, "got back %d after putting %d", back, me);
        MPI_Win_unlock_all(win);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        for (int r = 1; r < size; r++) CHECK(base[r] == r, "flag %d is %d", r, base[r]);

    /* 3. Derived types: each rank puts SLOTS values into every other slot
     * of its right neighbour (strided target), reads them back into a
     * strided origin buffer, under a fence. */
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    MPI_Datatype every_other;
    MPI_Type_vector(SLOTS, 1, 2, MPI_INT, &every_other);
    MPI_Type_commit(&every_other);
    int src[SLOTS], wide[2 * SLOTS];
    for (int i = 0; i < SLOTS; i++) src[i] = 1000 * rank + i;
    MPI_Win_fence(0, win);
    MPI_Put(src, SLOTS, MPI_INT, right, size, 1, every_other, win);
    MPI_Win_fence(0, win);
    for (int i = 0; i < 2 * SLOTS; i++) {
        int want = i % 2 == 0 ? 1000 * left + i / 2 : 0;
        CHECK(base[size + i] == want, "slot %d from %d is %d, want %d", i, left, base[size + i], want);
    }
    memset(wide, 0xff, sizeof wide);
    MPI_Get(wide, 1, every_other, right, size, 1, every_other, win);
    MPI_Win_fence(0, win);
    for (int i = 0; i < 2 * SLOTS; i++) {
        int want = i % 2 == 0 ? 1000 * rank + i / 2 : -1;
        CHECK(wide[i] == want, "strided get slot %d is %d, want %d", i, wide[i], want);
    }
    MPI_Type_free(&every_other);

    /* 4. Exclusive locks exclude: read-modify-write of rank 0's counter. */
    int counter = size + 2 * SLOTS;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < ROUNDS; i++) {
        int v;
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
        MPI_Get(&v, 1, MPI_INT, 0, counter, 1, MPI_INT, win);
        MPI_Win_flush(0, win);
        v += 1;
        MPI_Put(&v, 1, MPI_INT, 0, counter, 1, MPI_INT, win);
        MPI_Win_unlock(0, win);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
        CHECK(base[counter] == ROUNDS * size, "counter is %d after %d increments", base[counter], ROUNDS * size);
        MPI_Win_unlock(0, win);
    }

    /* 5. Accumulates from every rank at once, direct and through the target. */
    MPI_Win acc;
    long *abase;
    MPI_Win_allocate((2 + ARRAY) * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &abase, &acc);
    abase[0] = 0;
    abase[1] = -1;
    for (int i = 0; i < ARRAY; i++) abase[2 + i] = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock_all(0, acc);
    long one = 1, old = -5;
    long adds[ARRAY];
    for (int i = 0; i < ARRAY; i++) adds[i] = i + 1;
    for (int i = 0; i < ADDS; i++) {
        MPI_Fetch_and_op(&one, &old, MPI_LONG, 0, 0, MPI_SUM, acc);
        MPI_Win_flush(0, acc);
        CHECK(old >= 0 && old < (long)ADDS * size, "fetch-and-op fetched %ld", old);
        if (i % 20 == 0) {
            MPI_Accumulate(adds, ARRAY, MPI_LONG, 0, 2, ARRAY, MPI_LONG, MPI_SUM, acc);
            MPI_Win_flush(0, acc);
        }
    }
    long mine = rank, was = -7, minus = -1;
    MPI_Compare_and_swap(&mine, &minus, &was, MPI_LONG, 0, 1, acc);
    MPI_Win_flush(0, acc);
    MPI_Win_unlock_all(acc);
    int won = was == -1, winners = 0;
    MPI_Allreduce(&won, &winners, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    CHECK(winners == 1, "%d ranks won the compare-and-swap", winners);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        CHECK(abase[0] == (long)ADDS * size, "the counter is %ld after %d adds", abase[0], ADDS * size);
        for (int i = 0; i < ARRAY; i++)
            CHECK(abase[2 + i] == (long)(i + 1) * (ADDS / 20) * size, "element %d is %ld", i, abase[2 + i]);
        CHECK(abase[1] >= 0 && abase[1] < size, "the CAS slot holds %ld", abase[1]);
    }
    MPI_Win_free(&acc);

    MPI_Win_free(&win);
    MPI_Comm_free(&host);
    MPI_Group_free(&wg);
    MPI_Group_free(&hg);
    free(near_all);
    PASS("rma_direct");
    MPI_Finalize();
    return 0;
}
