/* MPI_Comm_idup / MPI_Comm_idup_with_info while other nonblocking
 * collectives are pending on the parent and on a sub-communicator whose
 * members idup it at the same time: every duplicate gets its own context
 * (two concurrent agreements once handed two communicators the same id, and
 * the job hung). Run with 4 ranks under gwrun --timeout. */
#include "check.h"

#define ROUNDS 8

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm half, dups[ROUNDS], halfdups[ROUNDS];
    MPI_Request r[4 * ROUNDS];
    int in[ROUNDS], sum[ROUNDS], halfsum[ROUNDS], bc[ROUNDS];
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    int hsize;
    MPI_Comm_size(half, &hsize);
    for (int i = 0; i < ROUNDS; i++) {
        in[i] = rank + i;
        bc[i] = rank == 0 ? 1000 + i : -1;
        if (i % 2)
            MPI_Comm_idup(MPI_COMM_WORLD, &dups[i], &r[4 * i]);
        else
            MPI_Comm_idup_with_info(MPI_COMM_WORLD, MPI_INFO_NULL, &dups[i], &r[4 * i]);
        MPI_Iallreduce(&in[i], &sum[i], 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r[4 * i + 1]);
        /* The odd ranks duplicate their half while the even ones reduce on theirs. */
        if (rank % 2)
            MPI_Comm_idup(half, &halfdups[i], &r[4 * i + 2]);
        else
            MPI_Iallreduce(&in[i], &halfsum[i], 1, MPI_INT, MPI_SUM, half, &r[4 * i + 2]);
        MPI_Ibcast(&bc[i], 1, MPI_INT, 0, MPI_COMM_WORLD, &r[4 * i + 3]);
    }
    /* Wait for the later ones first: earlier jobs run in the runner meanwhile. */
    for (int i = 4 * ROUNDS - 1; i >= 2 * ROUNDS; i--) MPI_Wait(&r[i], MPI_STATUS_IGNORE);
    MPI_Waitall(2 * ROUNDS, r, MPI_STATUSES_IGNORE);
    for (int i = 0; i < ROUNDS; i++) {
        CHECK(sum[i] == size * (size - 1) / 2 + size * i, "iallreduce %d: %d", i, sum[i]);
        CHECK(bc[i] == 1000 + i, "ibcast %d: %d", i, bc[i]);
        /* Each duplicate works on its own: a ring exchange and a reduction. */
        int dsize, drank, got = -1, x;
        MPI_Comm_size(dups[i], &dsize);
        MPI_Comm_rank(dups[i], &drank);
        CHECK(dsize == size && drank == rank, "idup %d: size %d rank %d", i, dsize, drank);
        MPI_Sendrecv(&in[i], 1, MPI_INT, (rank + 1) % size, i, &got, 1, MPI_INT, (rank + size - 1) % size, i,
                     dups[i], MPI_STATUS_IGNORE);
        CHECK(got == (rank + size - 1) % size + i, "ring on idup %d: %d", i, got);
        MPI_Allreduce(&in[i], &x, 1, MPI_INT, MPI_SUM, dups[i]);
        CHECK(x == sum[i], "allreduce on idup %d: %d", i, x);
        if (rank % 2) {
            MPI_Allreduce(&in[i], &x, 1, MPI_INT, MPI_MAX, halfdups[i]);
            CHECK(x == size - 1 - (size % 2 == 1) + i, "allreduce on half idup %d: %d", i, x);
            MPI_Comm_free(&halfdups[i]);
        } else {
            int want = 0;
            for (int p = 0; p < size; p += 2) want += p + i;
            CHECK(halfsum[i] == want, "half iallreduce %d: %d want %d", i, halfsum[i], want);
        }
        MPI_Comm_free(&dups[i]);
    }
    MPI_Comm_free(&half);
    PASS("idup");
    MPI_Finalize();
    return 0;
}
