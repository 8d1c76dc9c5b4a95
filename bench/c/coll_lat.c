/* Collective latency, osu-style: for each operation and size, ITERS timed
 * calls after 2 untimed ones; the figure is the median over the calls of
 * the slowest rank's time (µs), each call started by every rank at one
 * agreed moment.
 *
 * Why an agreed moment and not "a barrier, then time the call": across a
 * wide-area link no barrier releases every process at the same moment. In a
 * one-hop barrier between two sites each site's leader leaves when the
 * other's message arrives, one delay after the other arrived, so the sites
 * leave as far apart as they arrived, only in the other order: a skew of up
 * to one delay, once there, is never removed (a trace of 2 sites x 2 hosts x
 * 2 ranks at 100 ms showed the sites starting each timed call 100 ms apart,
 * alternately). Other MPIs' barriers leave such skews too (a tree's root
 * site leaves a delay before the others). The slowest rank's time then
 * counts the skew — up to a delay that is no part of the operation (run 4
 * of docs/benchmarks.md: Barrier 1.67 delays for a one-hop algorithm).
 *
 * So: a barrier (the previous call's messages are done), then rank 0 sends
 * everyone a start time T = its clock + a margin (MPI_Bcast), every rank
 * sleeps until T (clock_nanosleep, absolute) and calls the operation; a
 * rank's time is its end minus T. That needs one clock for all ranks:
 * CLOCK_REALTIME of one kernel (gw-testbed's hosts are namespaces of one
 * machine), or hosts synchronized far better than the delays measured. The
 * margin is 2 x the slowest rank's time to receive that broadcast,
 * measured at start-up (+ 2 ms; at least COLL_MARGIN_MS if set); a call
 * where some rank got T after T is not counted, the margin doubled, and the
 * count of such calls said on stderr; every call started in time shrinks it
 * by a fifth again, down to the measured one. (It used to only grow: one
 * loaded moment left every later call hundreds of ms of idle time, longer
 * than TCP's retransmission timeout, after which a stock sender restarts
 * from its initial window: the later rows then measured that restart.) The
 * same for every MPI.
 *
 *   coll_lat LABEL [ITERS] [info|plain] [MAXBYTES]
 *
 * `info`: run everything twice, on duplicates of MPI_COMM_WORLD with the
 * info key gw_coll=flat and gw_coll=hier (gridwire), labelled LABEL-flat and
 * LABEL-hier; otherwise once on MPI_COMM_WORLD, labelled LABEL (any MPI).
 * Output lines: "coll OP BYTES ROOT LABEL MICROSECONDS". */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <errno.h>

static const char *ops[] = {"barrier", "bcast", "reduce", "allreduce", "allgather", "alltoall"};
static const int sizes[] = {8, 4096, 65536, 1 << 20};

static void one(const char *op, MPI_Comm c, char *a, char *b, int bytes, int root, int size) {
    if (!strcmp(op, "barrier")) MPI_Barrier(c);
    else if (!strcmp(op, "bcast")) MPI_Bcast(a, bytes, MPI_BYTE, root, c);
    else if (!strcmp(op, "reduce")) MPI_Reduce(a, b, bytes / 4, MPI_INT, MPI_SUM, root, c);
    else if (!strcmp(op, "allreduce")) MPI_Allreduce(a, b, bytes / 4, MPI_INT, MPI_SUM, c);
    else if (!strcmp(op, "allgather")) MPI_Allgather(a, bytes / size, MPI_BYTE, b, bytes / size, MPI_BYTE, c);
    else if (!strcmp(op, "alltoall")) MPI_Alltoall(a, bytes / size, MPI_BYTE, b, bytes / size, MPI_BYTE, c);
}

static int max_bytes = 1 << 20;

/* The shared clock, seconds. */
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Sleeps until `t` on the shared clock. */
static void sleep_until(double t) {
    struct timespec ts;
    ts.tv_sec = (time_t)t;
    ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
    if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
    while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &ts, NULL) == EINTR) {}
}

/* Seconds between rank 0 and the others starting a call together, and
 * the measured one it shrinks back to. */
static double margin, base_margin;

/* The barrier and the start-time broadcast before a timed call; returns
 * the agreed start T, having slept until it, and whether T came too late. */
static double agreed_start(MPI_Comm c, int rank, int *late) {
    double t;
    MPI_Barrier(c);
    if (rank == 0) t = now() + margin;
    MPI_Bcast(&t, 1, MPI_DOUBLE, 0, c);
    *late = now() > t;
    sleep_until(t);
    return t;
}

/* The margin: 2 x the slowest rank's wait for rank 0's broadcast (its time
 * stamp travels with it), the worst of 3 tries, + 2 ms. */
static void measure_margin(MPI_Comm c, int rank) {
    double worst = 0;
    for (int k = 0; k < 3; k++) {
        double t, lag, max;
        MPI_Barrier(c);
        if (rank == 0) t = now();
        MPI_Bcast(&t, 1, MPI_DOUBLE, 0, c);
        lag = now() - t;
        MPI_Allreduce(&lag, &max, 1, MPI_DOUBLE, MPI_MAX, c);
        if (max > worst) worst = max;
    }
    margin = 2 * worst + 0.002;
    const char *floor_ms = getenv("COLL_MARGIN_MS");
    if (floor_ms && atof(floor_ms) / 1e3 > margin) margin = atof(floor_ms) / 1e3;
    base_margin = margin;
}

static int cmp(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* Whether NAME is one of the comma-separated words of LIST. */
static int listed(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && !strncmp(p, name, n)) return 1;
        if (!e) break;
        p = e + 1;
    }
    return 0;
}

static void run(MPI_Comm c, const char *label, int iters, int warm) {
    int rank, size;
    MPI_Comm_rank(c, &rank);
    MPI_Comm_size(c, &size);
    measure_margin(c, rank);
    char *a = calloc(1 << 20, 1), *b = calloc(1 << 20, 1);
    /* COLL_OPS (e.g. "bcast,reduce"): only those operations (a quick look
     * at one case; the benchmark runs them all). */
    const char *only = getenv("COLL_OPS");
    for (unsigned o = 0; o < sizeof ops / sizeof *ops; o++) {
        if (only && !listed(only, ops[o])) continue;
        for (unsigned s = 0; s < sizeof sizes / sizeof *sizes; s++) {
            int bytes = sizes[s];
            if (bytes > max_bytes) break;
            if (!strcmp(ops[o], "barrier") && s > 0) break;
            /* Allgather, alltoall: BYTES is a rank's whole receive buffer
             * (BYTES/size from each rank). */
            if ((!strcmp(ops[o], "allgather") || !strcmp(ops[o], "alltoall")) && bytes / size == 0) continue;
            int nroots = (!strcmp(ops[o], "bcast") || !strcmp(ops[o], "reduce")) ? 2 : 1;
            for (int ri = 0; ri < nroots; ri++) {
                int root = ri ? size - 1 : 0;
                double *t = malloc(iters * sizeof(double)), *worst = malloc(iters * sizeof(double));
                int dropped = 0;
                double widest = margin;
                for (int i = 0; i < warm + iters;) {
                    int late, any_late;
                    double t0 = agreed_start(c, rank, &late);
                    one(ops[o], c, a, b, bytes, root, size);
                    double spent = (now() - t0) * 1e6;
                    MPI_Allreduce(&late, &any_late, 1, MPI_INT, MPI_MAX, c);
                    if (any_late) {
                        /* Some rank started late: not this call's time. */
                        margin *= 2;
                        if (margin > widest) widest = margin;
                        if (++dropped > 2 * (warm + iters)) {
                            if (rank == 0) fprintf(stderr, "coll_lat: %s %d: ranks keep starting late\n", ops[o], bytes);
                            MPI_Abort(c, 1);
                        }
                        continue;
                    }
                    if (i >= warm) t[i - warm] = spent;
                    i++;
                    margin *= 0.8;
                    if (margin < base_margin) margin = base_margin;
                }
                /* Per call the slowest rank; the median over the calls (the
                 * machine may be shared: a mean would carry its hiccups). */
                MPI_Reduce(t, worst, iters, MPI_DOUBLE, MPI_MAX, 0, c);
                if (rank == 0) {
                    qsort(worst, iters, sizeof(double), cmp);
                    printf("coll %s %d %d %s %.1f\n", ops[o], !strcmp(ops[o], "barrier") ? 0 : bytes, root, label, worst[iters / 2]);
                    fflush(stdout);
                    if (dropped) fprintf(stderr, "coll_lat: %s %d root %d %s: %d calls started late, not counted (margin up to %.0f ms, now %.0f, measured %.0f)\n", ops[o], bytes, root, label, dropped, widest * 1e3, margin * 1e3, base_margin * 1e3);
                }
                free(t);
                free(worst);
            }
        }
    }
    free(a);
    free(b);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    const char *label = argc > 1 ? argv[1] : "mpi";
    int iters = argc > 2 ? atoi(argv[2]) : 10;
    if (iters < 1) iters = 1;
    if (argc > 4) max_bytes = atoi(argv[4]);
    if (argc > 3 && !strcmp(argv[3], "info")) {
        const char *algs[2] = {"flat", "hier"};
        MPI_Comm c[2];
        for (int k = 0; k < 2; k++) {
            MPI_Info info;
            MPI_Info_create(&info);
            MPI_Info_set(info, "gw_coll", algs[k]);
            MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &c[k]);
            MPI_Info_free(&info);
        }
        for (int k = 0; k < 2; k++) {
            char l[64];
            snprintf(l, sizeof l, "%s-%s", label, algs[k]);
            run(c[k], l, iters, 2);
        }
        for (int k = 0; k < 2; k++) MPI_Comm_free(&c[k]);
    } else {
        run(MPI_COMM_WORLD, label, iters, 2);
    }
    MPI_Finalize();
    return 0;
}
