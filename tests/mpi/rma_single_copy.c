/* Puts and gets by single copies (process_vm_writev / readv) on windows
 * created over the program's memory and on dynamic windows.
 *
 * Run with GW_MPI_RMA_PROGRESS=none, so the target applies nothing unless
 * it calls MPI; GW_TEST_EXPECT_DIRECT=1 says the origins (on rank 0's host,
 * over shared memory) should copy straight into rank 0's memory, 0 that
 * they should not (GW_MPI_RMA_DIRECT=0, or another method than shared
 * memory). Every other rank opens a lock epoch with MPI_MODE_NOCHECK (no
 * lock request), puts its flag, gets a value rank 0 wrote before, and
 * closes it; rank 0 computes without calling MPI meanwhile. With single
 * copies the flags land while it computes; without, not before it calls
 * MPI again. Either way every get returns rank 0's value and every flag is
 * in place afterwards. Last, on the dynamic window, a put just past the
 * attached memory is still refused with MPI_ERR_RMA_RANGE. */
#include "check.h"
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Slot 0 holds the value origins get; slots 1.. one flag per origin. */
static void round_trip(const char *flavour, MPI_Win win, int *mem, int rank, int size, int expect,
                       MPI_Aint dyn_base) {
    const int origins = size - 1;
    if (rank == 0) mem[0] = 4242;
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        /* Spins without MPI until every flag landed or the limit passes. */
        double t0 = now(), limit = expect ? 20.0 : 1.0;
        int seen = 0;
        while (now() - t0 < limit) {
            seen = 0;
            for (int i = 1; i <= origins; i++) seen += __atomic_load_n(&mem[i], __ATOMIC_ACQUIRE) != 0;
            if (seen == origins) break;
        }
        if (expect)
            CHECK(seen == origins, "%s: %d of %d flags landed while the target computed", flavour, seen, origins);
        else
            CHECK(seen == 0, "%s: %d flags landed without the target", flavour, seen);
    } else {
        int flag = rank, got = 0;
        MPI_Aint at = dyn_base ? MPI_Aint_add(dyn_base, rank * sizeof(int)) : rank;
        MPI_Aint at0 = dyn_base ? dyn_base : 0;
        /* Rank 0's last poll in the barrier above could apply a request
         * that already arrived: let it leave the barrier first. */
        struct timespec nap = {0, 200 * 1000 * 1000};
        nanosleep(&nap, NULL);
        MPI_Win_lock(MPI_LOCK_SHARED, 0, MPI_MODE_NOCHECK, win);
        MPI_Put(&flag, 1, MPI_INT, 0, at, 1, MPI_INT, win);
        MPI_Get(&got, 1, MPI_INT, 0, at0, 1, MPI_INT, win);
        MPI_Win_unlock(0, win);
        CHECK(got == 4242, "%s: rank %d got %d", flavour, rank, got);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        for (int i = 1; i <= origins; i++) CHECK(mem[i] == i, "%s: flag %d is %d", flavour, i, mem[i]);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *e = getenv("GW_TEST_EXPECT_DIRECT");
    int expect = e && strcmp(e, "1") == 0;
    if (size < 2) {
        PASS("rma_single_copy");
        MPI_Finalize();
        return 0;
    }
    int slots = size;

    int *mem = calloc(slots, sizeof(int));
    MPI_Win win;
    MPI_Win_create(mem, slots * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    round_trip("create", win, mem, rank, size, expect, 0);
    MPI_Win_free(&win);
    free(mem);

    int *dmem = calloc(slots, sizeof(int));
    MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    MPI_Aint addr = 0;
    if (rank == 0) {
        MPI_Win_attach(win, dmem, slots * sizeof(int));
        MPI_Get_address(dmem, &addr);
    }
    MPI_Bcast(&addr, 1, MPI_AINT, 0, MPI_COMM_WORLD);
    round_trip("dynamic", win, dmem, rank, size, expect, addr);
    /* Past the attached memory: the origin cannot copy there; the target
     * refuses the request (it is in MPI, in the fence). */
    MPI_Win_fence(0, win);
    if (rank == 1) {
        int v = 7, cls = MPI_SUCCESS;
        int rc = MPI_Put(&v, 1, MPI_INT, 0, MPI_Aint_add(addr, slots * sizeof(int)), 1, MPI_INT, win);
        if (rc == MPI_SUCCESS) rc = MPI_Win_fence(0, win);
        else MPI_Win_fence(0, win);
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_RMA_RANGE, "dynamic: put past the attached memory: class %d", cls);
    } else {
        MPI_Win_fence(0, win);
    }
    MPI_Win_fence(0, win);
    if (rank == 0) MPI_Win_detach(win, dmem);
    MPI_Win_free(&win);
    free(dmem);

    PASS("rma_single_copy");
    MPI_Finalize();
    return 0;
}
