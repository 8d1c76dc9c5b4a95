/* The message-rate loop of osu.c (`rate`: windows of 64 MPI_Isend against
 * 64 pre-posted MPI_Irecv, MPI_Waitall, a 4-byte ack), made countable in
 * instructions instead of timed (bench/rate-instr.sh runs it under
 * callgrind for gridwire, MPICH and Open MPI):
 *
 *   rate_count SIZE WINDOWS SYNCDIR
 *
 * The two ranks take turns through two named pipes in SYNCDIR (`to1`,
 * `to0`, made by the caller), outside MPI: the receiver posts its 64
 * receives and says so; the sender then makes its 64 sends and says so
 * (then calls MPI_Waitall); only then does the receiver call MPI_Waitall
 * (every message has been sent: the loop's posted-receive path, as in
 * osu_mbw_mr) and send the ack, and says so before the sender receives it.
 * So no rank spins in MPI waiting for the other: what is counted is the
 * work per message, not the polls of an idle wait (which depend on the
 * other rank's speed and the machine's load). A turn costs a blocking read
 * and a write of one byte (a few dozen user-space instructions, the same
 * for every MPI). Under callgrind only the WINDOWS measured windows are
 * counted (a dump of their own, after 8 windows of warm-up).
 *
 * RATE_THREAD=multiple: MPI_Init_thread(MPI_THREAD_MULTIPLE) instead of
 * MPI_Init, to count the thread-safe path.
 *
 * RATE_LOOP=latency: the one-way half of osu's latency ping-pong instead,
 * one message a turn: the receiver posts MPI_Irecv and polls it POLLS (8)
 * times with MPI_Test while nothing has come (what its MPI_Recv spins on),
 * says so; the sender makes one blocking MPI_Send and says so; the receiver
 * then calls MPI_Wait (the message is there). WINDOWS counts messages.
 * Per message: the sender's MPI_Send, the receiver's MPI_Irecv + MPI_Wait,
 * and one empty MPI_Test (the cost of a poll that finds nothing, which sets
 * how soon a spinning receiver sees a message). */
#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#endif
#endif
#ifndef CALLGRIND_ZERO_STATS
#define CALLGRIND_ZERO_STATS
#define CALLGRIND_DUMP_STATS_AT(s)
#endif

#define WINDOW 64

static int in_fd = -1, out_fd = -1;

static void say(void) {
    char b = 1;
    while (write(out_fd, &b, 1) != 1)
        if (errno != EINTR) { perror("rate_count: write"); exit(1); }
}

static void hear(void) {
    char b;
    ssize_t r;
    while ((r = read(in_fd, &b, 1)) != 1)
        if (r == 0 || errno != EINTR) { fprintf(stderr, "rate_count: the other rank is gone\n"); exit(1); }
}

static void window(int rank, long n, char *sbuf, char *rbuf) {
    MPI_Request req[WINDOW];
    if (rank == 1) {
        for (int w = 0; w < WINDOW; w++) MPI_Irecv(rbuf, (int)n, MPI_CHAR, 0, 10, MPI_COMM_WORLD, &req[w]);
        say();  /* posted */
        hear(); /* sent */
        MPI_Waitall(WINDOW, req, MPI_STATUSES_IGNORE);
        MPI_Send(sbuf, 4, MPI_CHAR, 0, 11, MPI_COMM_WORLD);
        say(); /* acked */
    } else if (rank == 0) {
        hear();
        for (int w = 0; w < WINDOW; w++) MPI_Isend(sbuf, (int)n, MPI_CHAR, 1, 10, MPI_COMM_WORLD, &req[w]);
        /* Said before MPI_Waitall: an MPI may hold sends back until the
         * receiver frees room (Open MPI's shared-memory fragments at 64 B),
         * and a receiver blocked in the pipe would never free it. Where
         * sends complete within MPI_Isend (gridwire, MPICH) the wait does
         * no polling; elsewhere the sender's count includes its polls. */
        say();
        MPI_Waitall(WINDOW, req, MPI_STATUSES_IGNORE);
        hear();
        MPI_Recv(rbuf, 4, MPI_CHAR, 1, 11, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
}

#define POLLS 8

/* RATE_LOOP=latency: one message a turn (see the top). */
static void one_way(int rank, long n, char *sbuf, char *rbuf) {
    MPI_Request req;
    if (rank == 1) {
        int flag = 0;
        MPI_Irecv(rbuf, (int)n, MPI_CHAR, 0, 10, MPI_COMM_WORLD, &req);
        for (int k = 0; k < POLLS; k++) MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
        if (flag) { fprintf(stderr, "rate_count: a receive completed before its send\n"); MPI_Abort(MPI_COMM_WORLD, 1); }
        say();  /* posted */
        hear(); /* sent */
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    } else if (rank == 0) {
        hear();
        MPI_Send(sbuf, (int)n, MPI_CHAR, 1, 10, MPI_COMM_WORLD);
        say();
    }
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: rate_count SIZE WINDOWS SYNCDIR\n");
        return 2;
    }
    long n = atol(argv[1]), windows = atol(argv[2]);
    const char *thr = getenv("RATE_THREAD");
    int rank, provided;
    if (thr && strcmp(thr, "multiple") == 0) {
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
        if (provided != MPI_THREAD_MULTIPLE) {
            fprintf(stderr, "rate_count: MPI_THREAD_MULTIPLE not granted (%d)\n", provided);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    } else {
        MPI_Init(&argc, &argv);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank <= 1) {
        char to1[4096], to0[4096];
        snprintf(to1, sizeof to1, "%s/to1", argv[3]);
        snprintf(to0, sizeof to0, "%s/to0", argv[3]);
        /* Opened in the same order on both sides (a FIFO's open waits for its other end). */
        if (rank == 0) {
            out_fd = open(to1, O_WRONLY);
            in_fd = open(to0, O_RDONLY);
        } else {
            in_fd = open(to1, O_RDONLY);
            out_fd = open(to0, O_WRONLY);
        }
        if (in_fd < 0 || out_fd < 0) {
            perror("rate_count: open the pipes");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    /* at least 4 bytes: the ack */
    char *sbuf = calloc(1, (size_t)(n < 4 ? 4 : n)), *rbuf = calloc(1, (size_t)(n < 4 ? 4 : n));
    const char *loop = getenv("RATE_LOOP");
    void (*turn)(int, long, char *, char *) = loop && strcmp(loop, "latency") == 0 ? one_way : window;
    for (int i = 0; i < 8; i++) turn(rank, n, sbuf, rbuf); /* warm-up: pools, caches */
    CALLGRIND_ZERO_STATS;
    for (long i = 0; i < windows; i++) turn(rank, n, sbuf, rbuf);
    CALLGRIND_DUMP_STATS_AT("measured windows");
    MPI_Barrier(MPI_COMM_WORLD);
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return 0;
}
