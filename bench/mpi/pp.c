/* The smallest MPI ping-pong, for A/B checks of the latency path
 * (bench/mpi-ab.sh): ranks 0 and 1 exchange SIZE bytes (default 8) N times
 * (default 1000000), three times over, and rank 0 prints the one-way time of
 * each repetition in microseconds, one per line. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int n = argc > 1 ? atoi(argv[1]) : 1000000;
    int size = argc > 2 ? atoi(argv[2]) : 8;
    char *buf = calloc(1, (size_t)size + 1);
    for (int rep = 0; rep < 3; rep++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t = MPI_Wtime();
        for (int i = 0; i < n; i++) {
            if (rank == 0) {
                MPI_Send(buf, size, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
                MPI_Recv(buf, size, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else if (rank == 1) {
                MPI_Recv(buf, size, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(buf, size, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
            }
        }
        t = MPI_Wtime() - t;
        if (rank == 0) printf("%.4f\n", t * 1e6 / n / 2);
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
