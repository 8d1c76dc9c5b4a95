/* Counting program for one-sided operations (docs/benchmarks.md, rma8's
 * section): 2 ranks, rank 0 the origin, rank 1 the target.
 *
 *   rma_count MODE FLAVOUR N SIZE
 *
 * MODE putlock/getlock/foplock: op + MPI_Win_flush in one shared lock
 * epoch while the target waits in MPI_Barrier (as bench/mpi/osu_rma.c);
 * putpscw/getpscw: one op per post/start/complete/wait epoch. FLAVOUR
 * allocate or create. 100 warm-up ops, then N counted; the counted loop
 * is framed by write(99, "B"/"E") calls (EBADF) to find it under strace.
 * Per-op counts: the difference of runs with N and 2N (perf stat,
 * gwrun --stats). Prints µs per op. */
#include <unistd.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank; MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const char *mode = argv[1], *fl = argv[2];
    int n = atoi(argv[3]); long sz = atol(argv[4]);
    char *tmem; MPI_Win win; MPI_Aint tbase = 0;
    char *obuf = calloc(1, 1 << 20), *rbuf = calloc(1, 1 << 20);
    if (!strcmp(fl, "allocate")) MPI_Win_allocate(1 << 20, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &tmem, &win);
    else { tmem = calloc(1, 1 << 20); MPI_Win_create(tmem, 1 << 20, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win); }
    MPI_Group wg, peer; MPI_Comm_group(MPI_COMM_WORLD, &wg);
    int other = 1 - rank; MPI_Group_incl(wg, 1, &other, &peer);
    for (int pass = 0; pass < 2; pass++) {
        int iters = pass == 0 ? 100 : n;
        MPI_Barrier(MPI_COMM_WORLD);
        if (pass == 1 && rank == 0) { fprintf(stderr, "MARK-BEGIN\n"); write(99, "B", 1); }
        double t0 = MPI_Wtime();
        if (!strncmp(mode, "pscw", 4) || strstr(mode, "pscw")) {
            int get = mode[0] == 'g';
            for (int i = 0; i < iters; i++) {
                if (rank == 0) {
                    MPI_Win_start(peer, 0, win);
                    if (get) MPI_Get(rbuf, sz, MPI_CHAR, 1, tbase, sz, MPI_CHAR, win);
                    else MPI_Put(obuf, sz, MPI_CHAR, 1, tbase, sz, MPI_CHAR, win);
                    MPI_Win_complete(win);
                } else { MPI_Win_post(peer, 0, win); MPI_Win_wait(win); }
            }
        } else if (rank == 0) {
            MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win);
            for (int i = 0; i < iters; i++) {
                if (mode[0] == 'p') MPI_Put(obuf, sz, MPI_CHAR, 1, tbase, sz, MPI_CHAR, win);
                else if (mode[0] == 'g') MPI_Get(rbuf, sz, MPI_CHAR, 1, tbase, sz, MPI_CHAR, win);
                else MPI_Fetch_and_op(obuf, rbuf, MPI_LONG, 1, tbase, MPI_SUM, win);
                MPI_Win_flush(1, win);
            }
            MPI_Win_unlock(1, win);
        }
        double t = MPI_Wtime() - t0;
        if (pass == 1 && rank == 0) { write(99, "E", 1); fprintf(stderr, "MARK-END\n"); printf("%s %s %ld: %.3f us/op\n", mode, fl, sz, t / iters * 1e6); }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    MPI_Win_free(&win);
    MPI_Finalize();
    return 0;
}
