/* A ping-pong that runs for a set time and reports its latency per window,
 * for tests/reliability/flood.sh: ranks 0 and 1 exchange 8 bytes; every
 * WINDOW seconds rank 0 prints "window <end, seconds since the epoch>
 * <one-way microseconds> <round trips>", and after SECONDS in all it tells
 * rank 1 to stop (the first byte of its message). Each received message is
 * checked (a sequence number), so a corrupted or lost message fails the job.
 *   pingpong SECONDS [WINDOW]  */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

static double now(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return tv.tv_sec + tv.tv_usec * 1e-6;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    double seconds = argc > 1 ? atof(argv[1]) : 30;
    double window = argc > 2 ? atof(argv[2]) : 1;
    unsigned char buf[8];
    unsigned seq = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        double start = now(), wstart = start;
        long n = 0;
        for (;;) {
            int stop = now() - start >= seconds;
            memset(buf, 0, sizeof buf);
            buf[0] = (unsigned char)stop;
            memcpy(buf + 4, &seq, 4);
            MPI_Send(buf, 8, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
            if (stop) break;
            MPI_Recv(buf, 8, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            unsigned got;
            memcpy(&got, buf + 4, 4);
            if (got != seq) {
                fprintf(stderr, "pingpong: rank 0 got sequence %u, expected %u\n", got, seq);
                MPI_Abort(MPI_COMM_WORLD, 3);
            }
            seq++;
            n++;
            if ((n & 63) == 0) {
                double t = now();
                if (t - wstart >= window) {
                    printf("window %.3f %.3f %ld\n", t, (t - wstart) * 1e6 / n / 2, n);
                    fflush(stdout);
                    wstart = t;
                    n = 0;
                }
            }
        }
        printf("pingpong ok %u round trips\n", seq);
    } else if (rank == 1) {
        for (;;) {
            MPI_Recv(buf, 8, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            unsigned got;
            memcpy(&got, buf + 4, 4);
            if (got != seq) {
                fprintf(stderr, "pingpong: rank 1 got sequence %u, expected %u\n", got, seq);
                MPI_Abort(MPI_COMM_WORLD, 3);
            }
            if (buf[0]) break;
            MPI_Send(buf, 8, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
            seq++;
        }
    }
    MPI_Finalize();
    return 0;
}
