/* Dynamic windows whose regions change between epochs: origins that cached
 * the target's attached regions must see every attach and detach.
 *
 * Rank 0 is the target, every other rank an origin. Round after round the
 * target attaches, over the same base address, 4096 bytes or only the
 * first 64, and every third round a second buffer at another address;
 * between rounds it detaches them again. Each round, in a fence epoch
 * and then in a lock epoch (alternating), every origin puts its value to
 * a slot in the first 64 bytes (always attached) and to a slot at byte
 * 1000 (attached only in the 4096-byte rounds), and to the second buffer,
 * attached or not. An access to memory not attached in that round must be
 * refused with MPI_ERR_RMA_RANGE (reported by the closing synchronization)
 * and leave the memory as it was; every other one must land, and a get of
 * the slot must return it. On one host the origins copy straight into the
 * target's memory (single copies), reading its regions only when they
 * changed: a stale copy of the regions would write into detached memory or
 * refuse attached memory. */
#include "check.h"
#include <stdlib.h>
#include <string.h>

#define ROUNDS 36
#define BIG 4096
#define SMALL 64
#define FAR 1000

static int refused(int rc) {
    int cls = MPI_SUCCESS;
    MPI_Error_class(rc, &cls);
    return cls == MPI_ERR_RMA_RANGE;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2 || size > 7) {
        PASS("rma_dyn_regions");
        MPI_Finalize();
        return 0;
    }
    long *big = calloc(BIG / sizeof(long), sizeof(long));
    long *other = calloc(SMALL / sizeof(long), sizeof(long));
    MPI_Win win;
    MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    MPI_Aint addr[2] = {0, 0};
    if (rank == 0) {
        MPI_Get_address(big, &addr[0]);
        MPI_Get_address(other, &addr[1]);
    }
    MPI_Bcast(addr, 2, MPI_AINT, 0, MPI_COMM_WORLD);
    /* Slots: origin r at byte 8r (near), byte FAR + 8r (far), and word r of `other`. */
    for (int round = 0; round < ROUNDS; round++) {
        int wide = round % 2 == 0, with_other = round % 3 == 0, fence = round % 4 < 2;
        if (rank == 0) {
            for (int r = 1; r < size; r++) {
                big[r] = -1;
                big[FAR / 8 + r] = -1;
                other[r] = -1;
            }
            MPI_Win_attach(win, big, wide ? BIG : SMALL);
            if (with_other) MPI_Win_attach(win, other, SMALL);
        }
        /* The attaches happen before any origin's access of this round. */
        MPI_Barrier(MPI_COMM_WORLD);
        if (fence) MPI_Win_fence(0, win);
        if (rank > 0) {
            long v = 1000L * round + rank, got = 0;
            MPI_Aint near = MPI_Aint_add(addr[0], 8 * rank);
            MPI_Aint far = MPI_Aint_add(addr[0], FAR + 8 * rank);
            MPI_Aint oth = MPI_Aint_add(addr[1], 8 * rank);
            if (!fence) MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
            /* Each access alone, closed by a flush (lock) or collected by
             * the closing fence, so that a refusal names its access. */
            int rc_near = MPI_Put(&v, 1, MPI_LONG, 0, near, 1, MPI_LONG, win);
            if (!fence && rc_near == MPI_SUCCESS) rc_near = MPI_Win_flush(0, win);
            CHECK(rc_near == MPI_SUCCESS, "round %d: put to the attached first 64 bytes failed", round);
            int rc_far = MPI_Put(&v, 1, MPI_LONG, 0, far, 1, MPI_LONG, win);
            CHECK(rc_far == MPI_SUCCESS || refused(rc_far), "round %d: put at byte %d: rc %d", round, FAR, rc_far);
            if (!fence) {
                if (rc_far == MPI_SUCCESS) rc_far = MPI_Win_flush(0, win);
                CHECK(wide ? rc_far == MPI_SUCCESS : refused(rc_far),
                      "round %d: put at byte %d with %d bytes attached: rc %d", round, FAR, wide ? BIG : SMALL,
                      rc_far);
                int rc_oth = MPI_Put(&v, 1, MPI_LONG, 0, oth, 1, MPI_LONG, win);
                if (rc_oth == MPI_SUCCESS) rc_oth = MPI_Win_flush(0, win);
                CHECK(with_other ? rc_oth == MPI_SUCCESS : refused(rc_oth),
                      "round %d: put to the second buffer (%s): rc %d", round,
                      with_other ? "attached" : "detached", rc_oth);
                rc_near = MPI_Get(&got, 1, MPI_LONG, 0, near, 1, MPI_LONG, win);
                if (rc_near == MPI_SUCCESS) rc_near = MPI_Win_flush(0, win);
                CHECK(rc_near == MPI_SUCCESS && got == v, "round %d: get returned %ld, not %ld", round, got, v);
                MPI_Win_unlock(0, win);
            } else {
                /* The closing fence reports whether any put of the
                 * epoch was refused. */
                int expect_refusal = !wide || !with_other;
                MPI_Put(&v, 1, MPI_LONG, 0, oth, 1, MPI_LONG, win);
                int rc = MPI_Win_fence(0, win);
                CHECK(expect_refusal ? refused(rc) : rc == MPI_SUCCESS,
                      "round %d (fence, %d bytes, second buffer %s): closing fence rc %d", round,
                      wide ? BIG : SMALL, with_other ? "attached" : "detached", rc);
            }
        } else if (fence) {
            MPI_Win_fence(0, win);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) {
            for (int r = 1; r < size; r++) {
                long v = 1000L * round + r;
                CHECK(big[r] == v, "round %d: near slot of %d is %ld", round, r, big[r]);
                CHECK(big[FAR / 8 + r] == (wide ? v : -1), "round %d: far slot of %d is %ld (%d bytes attached)",
                      round, r, big[FAR / 8 + r], wide ? BIG : SMALL);
                CHECK(other[r] == (with_other ? v : -1), "round %d: second buffer's slot of %d is %ld (%s)",
                      round, r, other[r], with_other ? "attached" : "detached");
            }
            MPI_Win_detach(win, big);
            if (with_other) MPI_Win_detach(win, other);
        }
    }
    MPI_Win_free(&win);
    free(big);
    free(other);
    PASS("rma_dyn_regions");
    MPI_Finalize();
    return 0;
}
