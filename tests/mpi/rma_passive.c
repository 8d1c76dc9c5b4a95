/* Passive-target progress: the target computes without calling MPI while
 * every other rank locks its window, puts a flag into it and unlocks. With
 * the one-sided progress thread (GW_MPI_RMA_PROGRESS=thread, the default)
 * the puts land and the unlocks complete while the target still computes;
 * with GW_MPI_RMA_PROGRESS=none (MPICH's default behaviour) they wait until
 * the target enters the library, which the test checks too (so it can tell
 * the two apart). Windows of each flavour that needs the target: created
 * over the program's memory, allocated, and dynamic. */
#include "check.h"
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Spins (no MPI call) until every origin's flag is in `flags` or `limit`
 * seconds pass; returns how many flags were seen. */
static int compute_until_flags(volatile int *flags, int n, double limit) {
    double t0 = now();
    int seen = 0;
    while (now() - t0 < limit) {
        seen = 0;
        for (int i = 0; i < n; i++) seen += __atomic_load_n(&flags[i], __ATOMIC_ACQUIRE) != 0;
        if (seen == n) break;
    }
    return seen;
}

static void round_trip(const char *flavour, MPI_Win win, int *flags, int rank, int size, int threaded,
                       MPI_Aint dyn_base) {
    const int target = 0, origins = size - 1;
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == target) {
        /* Generous for a loaded 2-core machine; without the thread the
         * flags cannot come before the target calls MPI again. */
        double limit = threaded ? 20.0 : 1.0;
        int seen = compute_until_flags(flags, origins, limit);
        if (threaded)
            CHECK(seen == origins, "%s: %d of %d origins' puts landed while the target computed", flavour, seen,
                  origins);
        else
            CHECK(seen == 0, "%s: %d puts landed without a progress thread", flavour, seen);
    } else {
        int one = rank;
        /* Without the thread: the target's last poll inside the barrier
         * above may grant a lock request that already arrived, and then a
         * put into an allocated window (a store on one host) lands while
         * it computes. Give it time to leave the barrier first. */
        if (!threaded) {
            struct timespec nap = {0, 200 * 1000 * 1000};
            nanosleep(&nap, NULL);
        }
        double t0 = now();
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, target, 0, win);
        MPI_Aint disp = dyn_base ? MPI_Aint_add(dyn_base, (rank - 1) * sizeof(int)) : rank - 1;
        MPI_Put(&one, 1, MPI_INT, target, disp, 1, MPI_INT, win);
        MPI_Win_unlock(target, win);
        double took = now() - t0;
        if (threaded) CHECK(took < 20.0, "%s: rank %d's epoch took %.2f s", flavour, rank, took);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == target)
        for (int i = 0; i < origins; i++) CHECK(flags[i] == i + 1, "%s: flag %d is %d", flavour, i, flags[i]);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *mode = getenv("GW_MPI_RMA_PROGRESS");
    int threaded = !(mode && strcmp(mode, "none") == 0);
    if (size < 2) {
        PASS("rma_passive");
        MPI_Finalize();
        return 0;
    }
    int n = size - 1;

    int *mem = calloc(n, sizeof(int));
    MPI_Win win;
    MPI_Win_create(mem, n * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    round_trip("create", win, mem, rank, size, threaded, 0);
    MPI_Win_free(&win);
    free(mem);

    int *base;
    MPI_Win_allocate(n * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    memset(base, 0, n * sizeof(int));
    round_trip("allocate", win, base, rank, size, threaded, 0);
    MPI_Win_free(&win);

    int *dmem = calloc(n, sizeof(int));
    MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Aint addr = 0;
    if (rank == 0) {
        MPI_Win_attach(win, dmem, n * sizeof(int));
        MPI_Get_address(dmem, &addr);
    }
    MPI_Bcast(&addr, 1, MPI_AINT, 0, MPI_COMM_WORLD);
    round_trip("dynamic", win, dmem, rank, size, threaded, addr);
    if (rank == 0) MPI_Win_detach(win, dmem);
    MPI_Win_free(&win);
    free(dmem);

    PASS("rma_passive");
    MPI_Finalize();
    return 0;
}
