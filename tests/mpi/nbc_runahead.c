/* Members that run ahead by thousands of nonblocking collectives: the root
 * of MPI_Ibcast completes each call as soon as it is sent, and the other
 * members of MPI_Ireduce as soon as they have sent theirs, so one side can
 * start 3000 instances while the other sleeps. Every instance's data must
 * arrive and be matched to its own instance (an earlier bound of 1024
 * instances a peer could open ahead dropped messages and hung). */
#include "check.h"
#include <unistd.h>

#define N 3000

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    /* Ibcast: the root runs ahead. */
    if (rank != 0) usleep(300 * 1000);
    for (int i = 0; i < N; i++) {
        int v = rank == 0 ? i * 7 + 1 : -1;
        MPI_Request r;
        MPI_Ibcast(&v, 1, MPI_INT, 0, MPI_COMM_WORLD, &r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        CHECK(v == i * 7 + 1, "Ibcast %d: got %d", i, v);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    /* Ireduce: the members other than the root run ahead. */
    if (rank == 0) usleep(300 * 1000);
    for (int i = 0; i < N; i++) {
        long v = (long)i * (rank + 1), sum = -1;
        MPI_Request r;
        MPI_Ireduce(&v, &sum, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD, &r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        if (rank == 0) {
            long want = (long)i * size * (size + 1) / 2;
            CHECK(sum == want, "Ireduce %d: got %ld, want %ld", i, sum, want);
        }
    }
    PASS("nbc_runahead");
    MPI_Finalize();
    return 0;
}
