/* Dynamic-process timings, portable MPI (gridwire, MPICH, Open MPI):
 *   dynproc spawn ITERS    -- 1 parent: MPI_Comm_spawn of 4 copies of this
 *                             program + a barrier over the intercommunicator
 *                             + MPI_Comm_disconnect, ITERS times;
 *                             prints "spawn4 MEDIAN_MS MIN_MS"
 *   dynproc connect ITERS  -- 2 ranks of one job: rank 0 opens a port and
 *                             accepts, rank 1 connects, a barrier over the
 *                             intercommunicator, disconnect, ITERS times;
 *                             prints "connect MEDIAN_MS MIN_MS"
 *   dynproc jobs-accept ITERS FILE, dynproc jobs-connect ITERS FILE
 *                          -- two separately started one-rank jobs: the
 *                             first opens a port, writes it to FILE and
 *                             accepts ITERS times; the second reads FILE
 *                             and connects ITERS times (+ a barrier over
 *                             the intercommunicator, disconnect); the
 *                             second prints "jobs MEDIAN_MS MIN_MS"
 * (a spawned copy runs with the argument "child"). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *what, double *t, int n) {
    qsort(t, n, sizeof *t, cmp);
    printf("%s %.3f %.3f\n", what, t[n / 2] * 1e3, t[0] * 1e3);
    fflush(stdout);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm parent;
    MPI_Comm_get_parent(&parent);
    if (parent != MPI_COMM_NULL) {
        MPI_Barrier(parent);
        MPI_Comm_disconnect(&parent);
        MPI_Finalize();
        return 0;
    }
    const char *mode = argc > 1 ? argv[1] : "spawn";
    int iters = argc > 2 ? atoi(argv[2]) : 5;
    if (iters < 1) iters = 1;
    double *t = malloc(sizeof(double) * iters);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (strcmp(mode, "spawn") == 0) {
        char *args[] = {"child", NULL};
        for (int i = 0; i < iters; i++) {
            MPI_Comm ic;
            double t0 = MPI_Wtime();
            MPI_Comm_spawn(argv[0], args, 4, MPI_INFO_NULL, 0, MPI_COMM_SELF, &ic, MPI_ERRCODES_IGNORE);
            MPI_Barrier(ic);
            MPI_Comm_disconnect(&ic);
            t[i] = MPI_Wtime() - t0;
        }
        if (rank == 0) report("spawn4", t, iters);
    } else if (strncmp(mode, "jobs-", 5) == 0 && argc > 3) {
        char port[MPI_MAX_PORT_NAME] = "", tmp[4096];
        int accepting = strcmp(mode, "jobs-accept") == 0;
        if (accepting) {
            MPI_Open_port(MPI_INFO_NULL, port);
            snprintf(tmp, sizeof tmp, "%s.tmp", argv[3]);
            FILE *f = fopen(tmp, "w");
            if (!f) MPI_Abort(MPI_COMM_WORLD, 2);
            fprintf(f, "%s\n", port);
            fclose(f);
            rename(tmp, argv[3]);
        } else {
            FILE *f = NULL;
            for (int w = 0; w < 3000 && !(f = fopen(argv[3], "r")); w++) usleep(10000);
            if (!f || !fgets(port, sizeof port, f)) MPI_Abort(MPI_COMM_WORLD, 2);
            fclose(f);
            port[strcspn(port, "\n")] = 0;
        }
        for (int i = 0; i < iters; i++) {
            MPI_Comm ic;
            double t0 = MPI_Wtime();
            if (accepting)
                MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &ic);
            else
                MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &ic);
            MPI_Barrier(ic);
            MPI_Comm_disconnect(&ic);
            t[i] = MPI_Wtime() - t0;
        }
        if (accepting) MPI_Close_port(port);
        else report("jobs", t, iters);
    } else {
        char port[MPI_MAX_PORT_NAME];
        for (int i = 0; i < iters; i++) {
            MPI_Comm ic;
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            if (rank == 0) {
                MPI_Open_port(MPI_INFO_NULL, port);
                MPI_Send(port, MPI_MAX_PORT_NAME, MPI_CHAR, 1, 0, MPI_COMM_WORLD);
                MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &ic);
            } else {
                MPI_Recv(port, MPI_MAX_PORT_NAME, MPI_CHAR, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &ic);
            }
            MPI_Barrier(ic);
            MPI_Comm_disconnect(&ic);
            t[i] = MPI_Wtime() - t0;
            if (rank == 0) MPI_Close_port(port);
        }
        if (rank == 0) report("connect", t, iters);
    }
    free(t);
    MPI_Finalize();
    return 0;
}
