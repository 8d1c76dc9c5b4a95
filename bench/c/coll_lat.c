/* Collective latency, osu-style: for each operation and size, ITERS timed
 * calls after 2 untimed ones, each call preceded by two barriers; the
 * figure is the median over the calls of the slowest rank's time (µs).
 *
 * Why two: across a wide-area link no barrier releases every process at
 * the same moment. In a one-hop barrier among sites (each site tells every
 * other it arrived), the site that arrives last hears from the others at
 * once and leaves up to one wide-area delay before them. The previous
 * call decides which site that is — for Reduce, the root's, which waited
 * for the data — so a single barrier would add a delay to the next call's
 * slowest rank (Reduce measured ~2 delays, not the one its algorithm
 * takes). A second barrier starts from those uneven exits and releases all
 * sites together (each waits one delay for the latest). MPICH and Open
 * MPI run the same program.
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

static int cmp(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

static void run(MPI_Comm c, const char *label, int iters, int warm) {
    int rank, size;
    MPI_Comm_rank(c, &rank);
    MPI_Comm_size(c, &size);
    char *a = calloc(1 << 20, 1), *b = calloc(1 << 20, 1);
    for (unsigned o = 0; o < sizeof ops / sizeof *ops; o++) {
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
                for (int i = 0; i < warm + iters; i++) {
                    MPI_Barrier(c);
                    MPI_Barrier(c);
                    double t0 = MPI_Wtime();
                    one(ops[o], c, a, b, bytes, root, size);
                    if (i >= warm) t[i - warm] = (MPI_Wtime() - t0) * 1e6;
                }
                /* Per call the slowest rank; the median over the calls (the
                 * machine may be shared: a mean would carry its hiccups). */
                MPI_Reduce(t, worst, iters, MPI_DOUBLE, MPI_MAX, 0, c);
                if (rank == 0) {
                    qsort(worst, iters, sizeof(double), cmp);
                    printf("coll %s %d %d %s %.1f\n", ops[o], !strcmp(ops[o], "barrier") ? 0 : bytes, root, label, worst[iters / 2]);
                    fflush(stdout);
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
