/* The C twin of latency_f08.f90 (same loop, sizes and output), so the two
 * differ only in the language binding. bench/fortran.sh builds it with gwcc. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

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
    MPI_Finalize();
    return 0;
}
