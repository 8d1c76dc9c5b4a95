/* MPI peer benchmark: ping-pong latency and streaming bandwidth between ranks
 * 0 and 1, built with each MPI's own mpicc. Prints "lat SIZE usec" lines (and "best SIZE usec", the least batch) and
 * "bw SIZE MB/s" lines (MB = 10^6 bytes). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const long sizes[] = {0, 8, 1024, 65536, 1048576};
    char *buf = calloc(1, 4 << 20);
    for (int s = 0; s < 5; s++) {
        long n = sizes[s];
        int iters = n >= 65536 ? 500 : 5000, warm = iters / 10;
        double t0 = 0, tb = 0, best = 1e9;
        int batch = n >= 65536 ? 50 : 500;
        MPI_Barrier(MPI_COMM_WORLD);
        for (int i = 0; i < iters; i++) {
            if (i == warm) t0 = MPI_Wtime();
            if (i >= warm && (i - warm) % batch == 0) {
                double t = MPI_Wtime();
                if (i > warm && (t - tb) / (2.0 * batch) < best) best = (t - tb) / (2.0 * batch);
                tb = t;
            }
            if (rank == 0) {
                MPI_Send(buf, (int)n, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
                MPI_Recv(buf, (int)n, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else if (rank == 1) {
                MPI_Recv(buf, (int)n, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(buf, (int)n, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
            }
        }
        if (rank == 0) printf("lat %ld %.2f\n", n, (MPI_Wtime() - t0) / (2.0 * (iters - warm)) * 1e6);
        /* The least one-way latency over batches: the undisturbed cost on a shared machine. */
        if (rank == 0) printf("best %ld %.3f\n", n, best * 1e6);
    }
    /* Streaming: a window of 16 x 4 MiB sends, acknowledged by one zero-byte reply. */
    long n = 4 << 20;
    int reps = 20;
    MPI_Request req[16];
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int r = 0; r < reps; r++) {
        for (int w = 0; w < 16; w++) {
            if (rank == 0) MPI_Isend(buf, (int)n, MPI_BYTE, 1, 2, MPI_COMM_WORLD, &req[w]);
            else if (rank == 1) MPI_Irecv(buf, (int)n, MPI_BYTE, 0, 2, MPI_COMM_WORLD, &req[w]);
        }
        if (rank <= 1) MPI_Waitall(16, req, MPI_STATUSES_IGNORE);
        if (rank == 0) MPI_Recv(buf, 0, MPI_BYTE, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        else if (rank == 1) MPI_Send(buf, 0, MPI_BYTE, 0, 3, MPI_COMM_WORLD);
    }
    if (rank == 0) printf("bw %ld %.0f\n", n, (double)n * 16 * reps / (MPI_Wtime() - t0) / 1e6);
    MPI_Finalize();
    return 0;
}
