/* Measured, size-aware selection (issue 13), measured: ranks 0 and 1 (on
 * two hosts) ping-pong and stream messages of 8 B ... 4 MiB on three
 * communicators:
 *   tcp      - gw_methods=tcp, gw_select=fixed
 *   udp      - gw_methods=udp, gw_select=fixed
 *   measured - gw_select=measured (each message on the stack cheapest for
 *              its size, from round trip and bandwidth measured per pair)
 * A warm-up round first (it opens every link and gives the measured
 * selection its estimates), then REPS rounds (argv[1], default 5), the
 * three cases interleaved at every size. Rank 0 prints one line per case,
 * size and round: `case size latency_us bandwidth_MBps`. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_SIZE (4 << 20)

/* Round-trip iterations and streamed messages for a size: about 8 MiB
 * per figure, at least 20 and at most `max_iters` (argv[2], default
 * 2000; across a WAN delay of milliseconds 200 round trips say as much
 * as 2000 and take a tenth of the time). */
static int max_iters = 2000;

static int iters(long size, int lo, int hi) {
    long n = (8L << 20) / (size > 0 ? size : 1);
    if (hi > max_iters) hi = max_iters;
    if (lo > hi) lo = hi;
    return (int)(n < lo ? lo : n > hi ? hi : n);
}

static double latency(MPI_Comm c, int rank, char *buf, long size) {
    int n = iters(size, 20, 2000);
    MPI_Barrier(c);
    double t = MPI_Wtime();
    for (int i = 0; i < n; i++) {
        if (rank == 0) {
            MPI_Send(buf, (int)size, MPI_CHAR, 1, 1, c);
            MPI_Recv(buf, (int)size, MPI_CHAR, 1, 1, c, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, (int)size, MPI_CHAR, 0, 1, c, MPI_STATUS_IGNORE);
            MPI_Send(buf, (int)size, MPI_CHAR, 0, 1, c);
        }
    }
    return (MPI_Wtime() - t) * 1e6 / n / 2;
}

static double bandwidth(MPI_Comm c, int rank, char *buf, long size) {
    enum { WIN = 64 };
    int n = iters(size, 20, 4000);
    MPI_Request r[WIN];
    MPI_Barrier(c);
    double t = MPI_Wtime();
    for (int done = 0; done < n; done += WIN) {
        int k = n - done < WIN ? n - done : WIN;
        for (int i = 0; i < k; i++) {
            if (rank == 0) MPI_Isend(buf, (int)size, MPI_CHAR, 1, 2, c, &r[i]);
            else MPI_Irecv(buf, (int)size, MPI_CHAR, 0, 2, c, &r[i]);
        }
        MPI_Waitall(k, r, MPI_STATUSES_IGNORE);
    }
    if (rank == 0) MPI_Recv(buf, 1, MPI_CHAR, 1, 3, c, MPI_STATUS_IGNORE);
    else MPI_Send(buf, 1, MPI_CHAR, 0, 3, c);
    return (double)size * n / (MPI_Wtime() - t) / 1e6;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int reps = argc > 1 ? atoi(argv[1]) : 5;
    if (argc > 2 && atoi(argv[2]) >= 10) max_iters = atoi(argv[2]);
    const char *names[3] = {"tcp", "udp", "measured"};
    MPI_Comm comms[3];
    for (int c = 0; c < 3; c++) {
        MPI_Info info;
        MPI_Info_create(&info);
        if (c < 2) {
            MPI_Info_set(info, "gw_methods", names[c]);
            MPI_Info_set(info, "gw_select", "fixed");
        } else {
            MPI_Info_set(info, "gw_select", "measured");
        }
        MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &comms[c]);
        MPI_Info_free(&info);
    }
    long sizes[] = {8, 64, 1024, 8192, 65536, 1 << 20, MAX_SIZE};
    int nsizes = sizeof sizes / sizeof sizes[0];
    char *buf = calloc(1, MAX_SIZE);
    for (int rep = -1; rep < reps; rep++) {
        for (int s = 0; s < nsizes; s++) {
            for (int c = 0; c < 3; c++) {
                double l = latency(comms[c], rank, buf, sizes[s]);
                double b = bandwidth(comms[c], rank, buf, sizes[s]);
                if (rank == 0 && rep >= 0) {
                    printf("%s %ld %.2f %.1f\n", names[c], sizes[s], l, b);
                    fflush(stdout);
                }
            }
        }
    }
    free(buf);
    for (int c = 0; c < 3; c++) MPI_Comm_free(&comms[c]);
    MPI_Finalize();
    return 0;
}
