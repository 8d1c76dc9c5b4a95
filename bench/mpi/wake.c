/* Wake-up latency of a sleeping receiver: rank 1 waits in MPI_Recv while
 * rank 0 sleeps (outside MPI) long enough for rank 1 to stop spinning and
 * yielding and go to sleep, then sends its clock; rank 1 prints the median
 * and 90th percentile of (arrival - send) in microseconds. Both ranks on
 * one host (one clock). Not a test: bench/wake.sh runs it. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int rounds = argc > 1 ? atoi(argv[1]) : 21;
    int idle_ms = argc > 2 ? atoi(argv[2]) : 30;
    double *lat = malloc(rounds * sizeof(double));
    for (int i = 0; i < rounds; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) {
            struct timespec d = {0, idle_ms * 1000000L};
            nanosleep(&d, NULL);
            double t = now_us();
            MPI_Send(&t, 1, MPI_DOUBLE, 1, 0, MPI_COMM_WORLD);
        } else if (rank == 1) {
            double t;
            MPI_Recv(&t, 1, MPI_DOUBLE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            lat[i] = now_us() - t;
        }
    }
    if (rank == 1) {
        qsort(lat, rounds, sizeof(double), cmp);
        printf("wake median %.1f us p90 %.1f us (%d rounds, %d ms idle)\n", lat[rounds / 2],
               lat[rounds * 9 / 10], rounds, idle_ms);
    }
    free(lat);
    MPI_Finalize();
    return 0;
}
