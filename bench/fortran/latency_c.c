/* The C twin of latency_f08.f90 (same loops, sizes and output: latency, then
 * bandwidth), so the two
 * differ only in the language binding. bench/fortran.sh builds it with gwcc. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    static const int sizes[] = {0, 8, 64, 1024, 8192};
    static char sbuf[8193], rbuf[8193];
    int rank, iters = argc > 1 ? atoi(argv[1]) : 20000, warm = iters / 10;
    double t0 = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int s = 0; s < 5; s++) {
        int n = sizes[s];
        for (int i = 1; i <= warm + iters; i++) {
            if (i == warm + 1) {
                MPI_Barrier(MPI_COMM_WORLD);
                t0 = MPI_Wtime();
            }
            if (rank == 0) {
                MPI_Send(sbuf, n, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
                MPI_Recv(rbuf, n, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else if (rank == 1) {
                MPI_Recv(rbuf, n, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(sbuf, n, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
            }
        }
        double t = MPI_Wtime() - t0;
        if (rank == 0) printf("lat %d %.3f\n", n, t / (2.0 * iters) * 1e6);
    }
    /* osu_bw: windows of 64 nonblocking sends, one zero-byte reply each. */
    static const int bw_sizes[] = {65536, 1048576, 4194304};
    enum { WINDOW = 64 };
    char *big = malloc(4194304);
    memset(big, 'b', 4194304); /* touched, as the Fortran twin's: untouched pages read as the zero page */
    MPI_Request reqs[WINDOW];
    for (int s = 0; s < 3; s++) {
        int n = bw_sizes[s], loops = 400 / (n / 65536);
        if (loops < 4) loops = 4;
        for (int i = 1; i <= loops + 2; i++) {
            if (i == 3) {
                MPI_Barrier(MPI_COMM_WORLD);
                t0 = MPI_Wtime();
            }
            if (rank == 0) {
                for (int w = 0; w < WINDOW; w++) MPI_Isend(big, n, MPI_CHAR, 1, 2, MPI_COMM_WORLD, &reqs[w]);
                MPI_Waitall(WINDOW, reqs, MPI_STATUSES_IGNORE);
                MPI_Recv(rbuf, 0, MPI_CHAR, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else if (rank == 1) {
                for (int w = 0; w < WINDOW; w++) MPI_Irecv(big, n, MPI_CHAR, 0, 2, MPI_COMM_WORLD, &reqs[w]);
                MPI_Waitall(WINDOW, reqs, MPI_STATUSES_IGNORE);
                MPI_Send(sbuf, 0, MPI_CHAR, 0, 3, MPI_COMM_WORLD);
            }
        }
        double t = MPI_Wtime() - t0;
        if (rank == 0) printf("bw %d %.1f\n", n, (double)n * WINDOW * loops / t / 1e6);
    }
    free(big);
    MPI_Finalize();
    return 0;
}
