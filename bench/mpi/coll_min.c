/* bench/mpi/coll_min.c CHUNK CHUNKS BYTES WHICH: the per-call time of one
 * collective on a loaded machine: the least over CHUNKS chunks of CHUNK calls
 * (a barrier between calls, as bench/mpi/osu.c), each chunk's figure the
 * per-call time averaged over the ranks (preemption only ever slows a chunk,
 * so the least is the unloaded cost). WHICH: a=allreduce (MPI_FLOAT sum)
 * r=reduce (root 0) g=allgather t=alltoall b=bcast (root 0) B=barrier.
 * Prints microseconds. Run by bench/mpi-coll-min.sh. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int r, np; MPI_Comm_rank(MPI_COMM_WORLD, &r); MPI_Comm_size(MPI_COMM_WORLD, &np);
    int chunk = atoi(argv[1]), chunks = atoi(argv[2]); long sz = atol(argv[3]); char w = argv[4][0];
    char *a = malloc(np * sz + 64), *b = malloc(np * sz + 64);
    memset(a, 1, np * sz + 64); memset(b, 0, np * sz + 64);
    double best = 1e9;
    for (int c = 0; c < chunks; c++) {
        double in = 0;
        MPI_Barrier(MPI_COMM_WORLD);
        for (int i = 0; i < chunk; i++) {
            double t1 = MPI_Wtime();
            switch (w) {
            case 'a': MPI_Allreduce(a, b, sz / 4, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
            case 'r': MPI_Reduce(a, b, sz / 4, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD); break;
            case 'g': MPI_Allgather(a, sz, MPI_CHAR, b, sz, MPI_CHAR, MPI_COMM_WORLD); break;
            case 't': MPI_Alltoall(a, sz, MPI_CHAR, b, sz, MPI_CHAR, MPI_COMM_WORLD); break;
            case 'b': MPI_Bcast(a, sz, MPI_CHAR, 0, MPI_COMM_WORLD); break;
            case 'B': MPI_Barrier(MPI_COMM_WORLD); break;
            }
            in += MPI_Wtime() - t1;
            if (w != 'B') MPI_Barrier(MPI_COMM_WORLD);
        }
        /* the chunk's per-call time averaged over the ranks */
        double mine = in / chunk, sum = 0;
        MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        if (sum / np < best) best = sum / np;
    }
    if (r == 0) printf("%.3f\n", best * 1e6);
    MPI_Finalize();
    return 0;
}
