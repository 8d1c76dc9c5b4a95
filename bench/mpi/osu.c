/* osu-style MPI micro-benchmarks, one program for every MPI (built with each
 * MPI's own compiler wrapper: gridwire's gwcc, mpicc.mpich, mpicc.openmpi).
 *
 *   osu [latency] [latency_touch] [bw] [bibw] [rate] [allreduce] [bcast]
 *       [alltoall] [reduce] [allgather] [barrier]   (no argument: all of them)
 *
 * Prints one line per figure: "NAME SIZE VALUE", where NAME is one of
 *   lat        one-way ping-pong latency between ranks 0 and 1, µs (osu_latency:
 *              the buffers are written once, before the first size)
 *   lat_touch  the same at 4-64 KiB with each sender writing its whole buffer
 *              (memset, a new byte every time) before each MPI_Send, as an
 *              application does; the memset is inside the timed loop for every MPI
 *   bw         streaming bandwidth 0 -> 1, window of 64 MPI_Isend, MB/s (10^6 B/s)
 *   bibw       both directions at once, window of 64 each way, MB/s (sum of both)
 *   rate       message rate 0 -> 1 at 1, 8, 64 B as osu_mbw_mr with one pair:
 *              rounds of a window of 64 MPI_Isend (the receiver: 64 MPI_Irecv),
 *              MPI_Waitall, then a 4-byte ack from the receiver; millions of
 *              messages per second (the ack not counted as a message)
 *   allreduce  MPI_Allreduce of SIZE bytes of MPI_FLOAT (MPI_SUM), µs per call
 *   bcast      MPI_Bcast of SIZE bytes from rank 0, µs per call
 *   alltoall   MPI_Alltoall with SIZE bytes per pair, µs per call
 *   reduce     MPI_Reduce of SIZE bytes of MPI_FLOAT (MPI_SUM) to rank 0, µs per call
 *   allgather  MPI_Allgather of SIZE bytes per rank, µs per call
 *   barrier    MPI_Barrier (SIZE 0), µs per call
 * Collective times are per-call times averaged over the iterations and then
 * over the ranks; as in the OSU suite, a barrier separates the timed calls
 * and is not counted (except for the barrier benchmark itself).
 *
 * Iteration counts: after a warm-up of doubling rounds (1, 2, 4, ...
 * iterations, until a round takes OSU_MS/10), rank 0 picks the count that
 * makes each size run about OSU_MS milliseconds (default 60) and broadcasts
 * it, so fast and slow transports alike get a stable figure in bounded time. Each collective is checked once
 * per size for a correct result, so a wrong fast answer cannot pass for a
 * fast one. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WINDOW 64
#define MAXSZ (4L << 20)
#define COLL_MAX (1L << 20)

static int rank, nprocs;
static char *sbuf, *rbuf;
static double budget = 0.06; /* seconds per size */

static const long p2p_sizes[] = {0,     1,     8,      64,     512,     1024,    4096,
                                 8192,  16384, 32768,  65536,  262144,  1048576, 4194304};
static const long touch_sizes[] = {4096, 8192, 16384, 32768, 65536};
static const long rate_sizes[] = {1, 8, 64};
static const long coll_sizes[] = {8, 64, 512, 4096, 32768, 262144, 1048576};
#define NELEM(a) ((int)(sizeof(a) / sizeof((a)[0])))

typedef double (*bench_fn)(long n, int iters, int arg);

/* Warm-up and iteration count: rounds of 1, 2, 4, ... iterations until one
 * takes a tenth of the budget (so the warm-up is short however slow the
 * transport or loaded the machine), then the count that fills the budget at
 * that round's rate. Rank 0 decides; every rank learns it. */
static int calibrate(bench_fn f, long n, int arg, int lo, int hi) {
    int k = 1;
    double t;
    for (;;) {
        t = f(n, k, arg);
        int more = rank == 0 && t < budget / 10 && k < hi / 2;
        MPI_Bcast(&more, 1, MPI_INT, 0, MPI_COMM_WORLD);
        if (!more) break;
        k *= 2;
    }
    int iters = 0;
    if (rank == 0) {
        double per = t / k;
        double want = per > 0 ? budget / per : hi;
        iters = want > hi ? hi : want < lo ? lo : (int)want;
    }
    MPI_Bcast(&iters, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return iters;
}

/* TOUCH: the sender writes its buffer before each send (a different byte
 * each time, so no layer can keep a copy of the last one). */
static double pingpong(long n, int iters, int touch) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++) {
        if (rank == 0) {
            if (touch) memset(sbuf, i & 0x7f, (size_t)n);
            MPI_Send(sbuf, (int)n, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
            MPI_Recv(rbuf, (int)n, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Recv(rbuf, (int)n, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (touch) memset(sbuf, i & 0x7f, (size_t)n);
            MPI_Send(sbuf, (int)n, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
        }
    }
    return MPI_Wtime() - t0;
}

static void latency(int touch) {
    const long *sizes = touch ? touch_sizes : p2p_sizes;
    int count = touch ? NELEM(touch_sizes) : NELEM(p2p_sizes);
    for (int s = 0; s < count; s++) {
        long n = sizes[s];
        int iters = calibrate(pingpong, n, touch, 10, 1000000);
        double t = pingpong(n, iters, touch);
        if (rank == 0) printf("%s %ld %.3f\n", touch ? "lat_touch" : "lat", n, t / (2.0 * iters) * 1e6);
    }
    if (touch) memset(sbuf, 1, (size_t)touch_sizes[NELEM(touch_sizes) - 1]); /* as the others found it */
}

/* One round of the window: rank 0 (and rank 1 too when BI) posts WINDOW sends,
 * the peer WINDOW receives; a 4-byte reply closes the round. */
static double window(long n, int iters, int bi) {
    MPI_Request req[2 * WINDOW];
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters && rank <= 1; i++) {
        int k = 0, peer = 1 - rank;
        if (rank == 1 || bi)
            for (int w = 0; w < WINDOW; w++) MPI_Irecv(rbuf, (int)n, MPI_CHAR, peer, 10, MPI_COMM_WORLD, &req[k++]);
        if (rank == 0 || bi)
            for (int w = 0; w < WINDOW; w++) MPI_Isend(sbuf, (int)n, MPI_CHAR, peer, 10, MPI_COMM_WORLD, &req[k++]);
        MPI_Waitall(k, req, MPI_STATUSES_IGNORE);
        if (rank == 0) MPI_Recv(rbuf, 4, MPI_CHAR, 1, 11, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        else MPI_Send(sbuf, 4, MPI_CHAR, 0, 11, MPI_COMM_WORLD);
    }
    return MPI_Wtime() - t0;
}

static void bandwidth(int bi) {
    for (int s = 0; s < NELEM(p2p_sizes); s++) {
        long n = p2p_sizes[s];
        if (n == 0) continue;
        int iters = calibrate(window, n, bi, 2, 100000);
        double t = window(n, iters, bi);
        if (rank == 0)
            printf("%s %ld %.1f\n", bi ? "bibw" : "bw", n, (double)n * WINDOW * iters * (bi ? 2 : 1) / t / 1e6);
    }
}

/* osu_mbw_mr's loop with one pair is the window above, one way. */
static void rate(void) {
    for (int s = 0; s < NELEM(rate_sizes); s++) {
        long n = rate_sizes[s];
        int iters = calibrate(window, n, 0, 2, 1000000);
        double t = window(n, iters, 0);
        if (rank == 0) printf("rate %ld %.4f\n", n, (double)WINDOW * iters / t / 1e6);
    }
}

enum coll { ALLREDUCE, BCAST, ALLTOALL, REDUCE, ALLGATHER };
static const char *coll_name[] = {"allreduce", "bcast", "alltoall", "reduce", "allgather"};

static void call(enum coll c, long n) {
    switch (c) {
    case ALLREDUCE: MPI_Allreduce(sbuf, rbuf, (int)(n / 4), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
    case BCAST: MPI_Bcast(sbuf, (int)n, MPI_CHAR, 0, MPI_COMM_WORLD); break;
    case ALLTOALL: MPI_Alltoall(sbuf, (int)n, MPI_CHAR, rbuf, (int)n, MPI_CHAR, MPI_COMM_WORLD); break;
    case REDUCE: MPI_Reduce(sbuf, rbuf, (int)(n / 4), MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD); break;
    case ALLGATHER: MPI_Allgather(sbuf, (int)n, MPI_CHAR, rbuf, (int)n, MPI_CHAR, MPI_COMM_WORLD); break;
    }
}

static double op_time; /* sum of the per-call times of the last coll_time */

/* ITERS calls with a barrier between calls: leaves the sum of the per-call
 * times (barriers not counted) in op_time and returns the wall time of it all
 * (what the iteration count must fit into the budget). */
static double coll_time(long n, int iters, int c) {
    double sum = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    for (int i = 0; i < iters; i++) {
        double t0 = MPI_Wtime();
        call(c, n);
        sum += MPI_Wtime() - t0;
        MPI_Barrier(MPI_COMM_WORLD);
    }
    op_time = sum;
    return MPI_Wtime() - start;
}

static void check(enum coll c, long n) {
    int bad = 0;
    switch (c) {
    case ALLREDUCE:
    case REDUCE: {
        float *f = (float *)sbuf, *g = (float *)rbuf;
        for (long i = 0; i < n / 4; i++) f[i] = (float)(rank + 1 + (i & 7));
        call(c, n);
        if (c == ALLREDUCE || rank == 0)
            for (long i = 0; i < n / 4; i++)
                if (g[i] != (float)(nprocs * (nprocs + 1) / 2 + nprocs * (i & 7))) bad = 1;
        break;
    }
    case ALLGATHER:
        memset(sbuf, 16 + rank, (size_t)n);
        call(c, n);
        for (int p = 0; p < nprocs; p++)
            for (long i = 0; i < n; i++)
                if (rbuf[p * n + i] != (char)(16 + p)) bad = 1;
        break;
    case BCAST:
        for (long i = 0; i < n; i++) sbuf[i] = rank == 0 ? (char)(i * 7 + 3) : 0;
        call(c, n);
        for (long i = 0; i < n; i++)
            if (sbuf[i] != (char)(i * 7 + 3)) bad = 1;
        break;
    case ALLTOALL:
        for (int p = 0; p < nprocs; p++) memset(sbuf + p * n, 16 * rank + p, (size_t)n);
        call(c, n);
        for (int p = 0; p < nprocs; p++)
            for (long i = 0; i < n; i++)
                if (rbuf[p * n + i] != (char)(16 * p + rank)) bad = 1;
        break;
    }
    if (bad) {
        fprintf(stderr, "osu: rank %d: wrong %s result at %ld bytes\n", rank, coll_name[c], n);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

static void collective(enum coll c) {
    for (int s = 0; s < NELEM(coll_sizes); s++) {
        long n = coll_sizes[s];
        int iters = calibrate(coll_time, n, c, 5, 1000000);
        coll_time(n, iters, c);
        double mine = op_time / iters, sum = 0;
        MPI_Reduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        if (rank == 0) printf("%s %ld %.3f\n", coll_name[c], n, sum / nprocs * 1e6);
        check(c, n);
    }
}

static double barriers(long n, int iters, int unused) {
    (void)n, (void)unused;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++) MPI_Barrier(MPI_COMM_WORLD);
    return MPI_Wtime() - t0;
}

static void barrier(void) {
    int iters = calibrate(barriers, 0, 0, 10, 1000000);
    double mine = barriers(0, iters, 0) / iters, sum = 0;
    MPI_Reduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("barrier 0 %.3f\n", sum / nprocs * 1e6);
}

static int wanted(int argc, char **argv, const char *name) {
    if (argc <= 1) return 1;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], name) == 0) return 1;
    return 0;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    /* line by line: what was measured survives the bench script's timeout */
    setvbuf(stdout, NULL, _IOLBF, 0);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    const char *ms = getenv("OSU_MS");
    if (ms && atof(ms) > 0) budget = atof(ms) / 1000.0;
    long coll_bytes = COLL_MAX * (nprocs > 4 ? nprocs : 4);
    size_t bytes = (size_t)(coll_bytes > MAXSZ ? coll_bytes : MAXSZ);
    sbuf = malloc(bytes);
    rbuf = malloc(bytes);
    if (!sbuf || !rbuf) {
        fprintf(stderr, "osu: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(sbuf, 1, bytes);
    memset(rbuf, 0, bytes);
    if (nprocs < 2) {
        if (rank == 0) fprintf(stderr, "osu: needs at least 2 ranks\n");
        MPI_Finalize();
        return 1;
    }
    if (wanted(argc, argv, "latency")) latency(0);
    if (wanted(argc, argv, "latency_touch")) latency(1);
    if (wanted(argc, argv, "bw")) bandwidth(0);
    if (wanted(argc, argv, "bibw")) bandwidth(1);
    if (wanted(argc, argv, "rate")) rate();
    if (wanted(argc, argv, "allreduce")) collective(ALLREDUCE);
    if (wanted(argc, argv, "bcast")) collective(BCAST);
    if (wanted(argc, argv, "alltoall")) collective(ALLTOALL);
    if (wanted(argc, argv, "reduce")) collective(REDUCE);
    if (wanted(argc, argv, "allgather")) collective(ALLGATHER);
    if (wanted(argc, argv, "barrier")) barrier();
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
