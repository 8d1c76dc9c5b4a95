/* Per-communicator links (issue 13), measured: ranks 0 and 1 (on two
 * hosts) ping-pong SIZE-byte messages and stream large ones on
 *   tcp  - a duplicate of MPI_COMM_WORLD (the pair's default link),
 *   udp  - a duplicate with the info key gw_methods=udp (a second link),
 *   both - streaming only: messages alternate between the two, so the
 *          receiver's reorder buffer puts them back in order.
 * Cases are interleaved, REPS rounds (argv[1], default 9); rank 0 prints
 * one line per case and round: `case latency_us bandwidth_MBps`. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define LAT_N 2000
#define BW_SIZE (4 << 20)
#define BW_N 24

static double latency(MPI_Comm c, int rank, char *buf) {
    MPI_Barrier(c);
    double t = MPI_Wtime();
    for (int i = 0; i < LAT_N; i++) {
        if (rank == 0) {
            MPI_Send(buf, 8, MPI_CHAR, 1, 1, c);
            MPI_Recv(buf, 8, MPI_CHAR, 1, 1, c, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, 8, MPI_CHAR, 0, 1, c, MPI_STATUS_IGNORE);
            MPI_Send(buf, 8, MPI_CHAR, 0, 1, c);
        }
    }
    return (MPI_Wtime() - t) * 1e6 / LAT_N / 2;
}

/* Streams BW_N messages of BW_SIZE bytes, message i on comms[i % ncomms],
 * and waits for a one-byte answer; MB/s. */
static double bandwidth(MPI_Comm *comms, int ncomms, int rank, char *buf) {
    MPI_Request r[BW_N];
    MPI_Barrier(comms[0]);
    double t = MPI_Wtime();
    for (int i = 0; i < BW_N; i++) {
        MPI_Comm c = comms[i % ncomms];
        if (rank == 0) MPI_Isend(buf, BW_SIZE, MPI_CHAR, 1, 2, c, &r[i]);
        else MPI_Irecv(buf, BW_SIZE, MPI_CHAR, 0, 2, c, &r[i]);
    }
    MPI_Waitall(BW_N, r, MPI_STATUSES_IGNORE);
    if (rank == 0) MPI_Recv(buf, 1, MPI_CHAR, 1, 3, comms[0], MPI_STATUS_IGNORE);
    else MPI_Send(buf, 1, MPI_CHAR, 0, 3, comms[0]);
    return (double)BW_SIZE * BW_N / (MPI_Wtime() - t) / 1e6;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int reps = argc > 1 ? atoi(argv[1]) : 9;
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "gw_methods", "udp");
    MPI_Comm comms[2];
    MPI_Comm_dup(MPI_COMM_WORLD, &comms[0]);
    MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &comms[1]);
    char *buf = calloc(1, BW_SIZE);
    latency(comms[0], rank, buf); /* warm-up: both links open */
    latency(comms[1], rank, buf);
    for (int rep = 0; rep < reps; rep++) {
        double lt = latency(comms[0], rank, buf);
        double bt = bandwidth(&comms[0], 1, rank, buf);
        double lu = latency(comms[1], rank, buf);
        double bu = bandwidth(&comms[1], 1, rank, buf);
        double bb = bandwidth(comms, 2, rank, buf);
        if (rank == 0) {
            printf("tcp %.2f %.1f\nudp %.2f %.1f\nboth - %.1f\n", lt, bt, lu, bu, bb);
            fflush(stdout);
        }
    }
    free(buf);
    MPI_Info_free(&info);
    MPI_Comm_free(&comms[0]);
    MPI_Comm_free(&comms[1]);
    MPI_Finalize();
    return 0;
}
