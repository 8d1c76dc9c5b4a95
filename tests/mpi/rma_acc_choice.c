/* Accumulates to a member of the host on windows over the program's memory
 * go as requests while the target polls inside MPI and by single copies
 * otherwise (crates/mpi/src/rma/polling.rs). Both must give the same
 * results, and switching between them in one epoch must keep the
 * accumulates of one origin in order.
 *
 * Rank 0 is the target of a counter (and a sum of doubles); every other
 * rank adds to them with MPI_Fetch_and_op, MPI_Accumulate and
 * MPI_Compare_and_swap in one lock epoch:
 *   phase 1: rank 0 waits in MPI_Barrier (polling: requests);
 *   phase 2: rank 0 computes without calling MPI until every addition
 *            landed or 60 s passed (single copies, or the progress thread);
 *   phase 3: rank 0 alternates 0.2 ms of computing and an MPI_Iprobe.
 * Each origin's fetched values must increase strictly (its own additions
 * in order), the counter must end at the total, and a compare-and-swap
 * chain per origin must see exactly its previous value.
 * GW_TEST_FLAVOUR=dynamic: on a dynamic window (else MPI_Win_create). */
#include "check.h"
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { OPS = 200 };

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Window layout (longs): [0] counter, [1] sum of doubles as a double,
 * [2 + r] origin r's compare-and-swap chain. */
static void origin_phase(MPI_Win win, int rank, int phase, long *last_fetched) {
    long one = 1, fetched = -1;
    double d = 1.0;
    MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
    for (int i = 0; i < OPS; i++) {
        MPI_Fetch_and_op(&one, &fetched, MPI_LONG, 0, 0, MPI_SUM, win);
        MPI_Accumulate(&d, 1, MPI_DOUBLE, 0, 1, 1, MPI_DOUBLE, MPI_SUM, win);
        long expect = (long)phase * OPS + i, next = expect + 1, seen = -1;
        MPI_Compare_and_swap(&next, &expect, &seen, MPI_LONG, 0, 2 + rank, win);
        MPI_Win_flush(0, win);
        CHECK(fetched > *last_fetched, "phase %d op %d: fetched %ld after %ld", phase, i, fetched,
              *last_fetched);
        CHECK(seen == expect, "phase %d op %d: compare-and-swap saw %ld, not %ld", phase, i, seen, expect);
        *last_fetched = fetched;
    }
    MPI_Win_unlock(0, win);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long *mem = calloc(2 + size, sizeof(long));
    MPI_Win win;
    const char *flavour = getenv("GW_TEST_FLAVOUR");
    int dynamic = flavour && !strcmp(flavour, "dynamic");
    MPI_Aint base = 0;
    if (dynamic) {
        MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win);
        if (rank == 0) {
            MPI_Win_attach(win, mem, (2 + size) * sizeof(long));
            MPI_Get_address(mem, &base);
        }
        MPI_Bcast(&base, 1, MPI_AINT, 0, MPI_COMM_WORLD);
    } else {
        MPI_Win_create(mem, (2 + size) * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    }
    if (size < 2) {
        PASS("rma_acc_choice");
        MPI_Win_free(&win);
        MPI_Finalize();
        return 0;
    }
    long last = -1;
    const long total = (long)(size - 1) * OPS;
    for (int phase = 0; phase < 3; phase++) {
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) {
            if (phase == 0) {
                MPI_Barrier(MPI_COMM_WORLD); /* polls until the origins are done */
            } else {
                double t0 = now();
                volatile long *counter = &mem[0];
                long want = total * (phase + 1);
                while (__atomic_load_n(counter, __ATOMIC_ACQUIRE) < want && now() - t0 < 40.0) {
                    if (phase == 2) {
                        /* Some MPI now and then (a short polling moment). */
                        double t1 = now();
                        while (now() - t1 < 0.0002) {
                        }
                        int flag;
                        MPI_Iprobe(MPI_ANY_SOURCE, 999, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
                    }
                }
                CHECK(*counter == want, "phase %d: counter %ld, want %ld", phase, *counter, want);
                MPI_Barrier(MPI_COMM_WORLD);
            }
        } else {
            if (dynamic) {
                /* Same program, displacements are addresses: shift by hand. */
                long one = 1, fetched = -1;
                double d = 1.0;
                MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
                for (int i = 0; i < OPS; i++) {
                    MPI_Fetch_and_op(&one, &fetched, MPI_LONG, 0, base, MPI_SUM, win);
                    MPI_Accumulate(&d, 1, MPI_DOUBLE, 0, MPI_Aint_add(base, sizeof(long)), 1, MPI_DOUBLE,
                                   MPI_SUM, win);
                    long expect = (long)phase * OPS + i, next = expect + 1, seen = -1;
                    MPI_Compare_and_swap(&next, &expect, &seen, MPI_LONG, 0,
                                         MPI_Aint_add(base, (2 + rank) * sizeof(long)), win);
                    MPI_Win_flush(0, win);
                    CHECK(fetched > last, "phase %d op %d: fetched %ld after %ld", phase, i, fetched, last);
                    CHECK(seen == expect, "phase %d op %d: CAS saw %ld, not %ld", phase, i, seen, expect);
                    last = fetched;
                }
                MPI_Win_unlock(0, win);
            } else {
                origin_phase(win, rank, phase, &last);
            }
            MPI_Barrier(MPI_COMM_WORLD);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        double sum;
        memcpy(&sum, &mem[1], sizeof sum);
        CHECK(mem[0] == 3 * total, "counter %ld, want %ld", mem[0], 3 * total);
        CHECK(sum == (double)(3 * total), "sum %g, want %ld", sum, 3 * total);
        for (int r = 1; r < size; r++) CHECK(mem[2 + r] == 3L * OPS, "chain %d at %ld", r, mem[2 + r]);
    }
    if (dynamic && rank == 0) MPI_Win_detach(win, mem);
    MPI_Win_free(&win);
    free(mem);
    PASS("rma_acc_choice");
    MPI_Finalize();
    return 0;
}
