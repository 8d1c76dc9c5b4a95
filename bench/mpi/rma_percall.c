/* The per-call cost of one-sided operations, robust to a loaded machine:
 * rank 0 opens one lock epoch to rank 1 and times BATCHES batches of OPS
 * calls each (put + flush, get + flush, accumulate + flush, fetch-and-op +
 * flush at 8 bytes; 64 puts of 4 KiB + flush; an accumulate of 4096
 * doubles + flush), and the same for a put or get of 8 bytes between two
 * fences (both ranks fence), and prints the fastest
 * batch and the median batch per call, for each window flavour given
 * (allocate, create, dynamic). The fastest batch is the cost of the call
 * path when the scheduler left the process alone; osu_rma.c's averages
 * include every preemption and, on a loaded 2-core machine, mostly
 * measure those. Run by bench/rma_percall.sh.
 *
 * Prints "NAME-FLAVOUR min_ns median_ns" lines (bandwidth: MB/s, best and
 * median batch). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BATCHES = 300, OPS = 200, BW_SIZE = 4096, BW_WINDOW = 64, MEM = 1 << 20, ACC_BIG = 4096 };

static int rank;
static MPI_Win win;
static MPI_Aint tbase;
static char *obuf, *rbuf;

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void one(int what) {
    long one_l = 1, old;
    double d = 1.0;
    switch (what) {
    case 0: MPI_Put(obuf, 8, MPI_CHAR, 1, tbase, 8, MPI_CHAR, win); break;
    case 1: MPI_Get(rbuf, 8, MPI_CHAR, 1, tbase, 8, MPI_CHAR, win); break;
    case 2: MPI_Accumulate(&d, 1, MPI_DOUBLE, 1, tbase, 1, MPI_DOUBLE, MPI_SUM, win); break;
    case 3: MPI_Fetch_and_op(&one_l, &old, MPI_LONG, 1, tbase, MPI_SUM, win); break;
    case 4:
        for (int w = 0; w < BW_WINDOW; w++) MPI_Put(obuf, BW_SIZE, MPI_CHAR, 1, tbase, BW_SIZE, MPI_CHAR, win);
        break;
    case 5:
        MPI_Accumulate(obuf, ACC_BIG, MPI_DOUBLE, 1, tbase, ACC_BIG, MPI_DOUBLE, MPI_SUM, win);
        break;
    }
    MPI_Win_flush(1, win);
}

/* Between fences: rank 0 puts (6) or gets (7), both ranks fence. */
static void one_fence(int what) {
    if (rank == 0) {
        if (what == 6) MPI_Put(obuf, 8, MPI_CHAR, 1, tbase, 8, MPI_CHAR, win);
        else MPI_Get(rbuf, 8, MPI_CHAR, 1, tbase, 8, MPI_CHAR, win);
    }
    MPI_Win_fence(0, win);
}

static void bench(const char *name, const char *flavour, int what) {
    static double t[BATCHES];
    int ops = what == 4 || what == 5 ? OPS / 10 : OPS;
    MPI_Barrier(MPI_COMM_WORLD);
    if (what >= 6) {
        MPI_Win_fence(0, win);
        for (int i = 0; i < ops; i++) one_fence(what); /* warm-up */
        for (int b = 0; b < BATCHES; b++) {
            double t0 = MPI_Wtime();
            for (int i = 0; i < ops; i++) one_fence(what);
            t[b] = (MPI_Wtime() - t0) / ops;
        }
        MPI_Win_fence(MPI_MODE_NOSUCCEED, win);
        if (rank == 0) {
            qsort(t, BATCHES, sizeof t[0], cmp);
            printf("%s-%s %.1f %.1f\n", name, flavour, t[0] * 1e9, t[BATCHES / 2] * 1e9);
            fflush(stdout);
        }
    } else if (rank == 0) {
        MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win);
        for (int i = 0; i < ops; i++) one(what); /* warm-up */
        for (int b = 0; b < BATCHES; b++) {
            double t0 = MPI_Wtime();
            for (int i = 0; i < ops; i++) one(what);
            t[b] = (MPI_Wtime() - t0) / ops;
        }
        MPI_Win_unlock(1, win);
        qsort(t, BATCHES, sizeof t[0], cmp);
        if (what == 4)
            printf("%s-%s %.1f %.1f\n", name, flavour, BW_SIZE * BW_WINDOW / t[0] / 1e6,
                   BW_SIZE * BW_WINDOW / t[BATCHES / 2] / 1e6);
        else
            printf("%s-%s %.1f %.1f\n", name, flavour, t[0] * 1e9, t[BATCHES / 2] * 1e9);
        fflush(stdout);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

static void run(const char *flavour) {
    char *mem = NULL;
    if (!strcmp(flavour, "allocate")) {
        MPI_Win_allocate(MEM, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win);
        tbase = 0;
    } else if (!strcmp(flavour, "create")) {
        mem = calloc(MEM, 1);
        MPI_Win_create(mem, MEM, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
        tbase = 0;
    } else {
        mem = calloc(MEM, 1);
        MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win);
        MPI_Win_attach(win, mem, MEM);
        MPI_Get_address(mem, &tbase);
        MPI_Bcast(&tbase, 1, MPI_AINT, 1, MPI_COMM_WORLD);
    }
    bench("put8", flavour, 0);
    bench("get8", flavour, 1);
    bench("acc8", flavour, 2);
    bench("fop8", flavour, 3);
    bench("putbw4k", flavour, 4);
    bench("acc32k", flavour, 5);
    bench("putfence8", flavour, 6);
    bench("getfence8", flavour, 7);
    if (!strcmp(flavour, "dynamic")) MPI_Win_detach(win, mem);
    MPI_Win_free(&win);
    if (strcmp(flavour, "allocate")) free(mem);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    obuf = calloc(ACC_BIG, sizeof(double));
    rbuf = calloc(ACC_BIG, sizeof(double));
    const char *all[] = {"allocate", "create", "dynamic"};
    if (argc > 1)
        for (int i = 1; i < argc; i++) run(argv[i]);
    else
        for (int i = 0; i < 3; i++) run(all[i]);
    MPI_Finalize();
    return 0;
}
