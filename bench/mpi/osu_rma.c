/* osu-style one-sided (RMA) micro-benchmarks, one program for every MPI
 * (built with gwcc, mpicc.mpich, mpicc.openmpi), 2 ranks: rank 0 is the
 * origin, rank 1 the target.
 *
 *   osu_rma [allocate|create|dynamic]...   (no argument: all three)
 *
 * Prints "NAME-WINDOW SIZE VALUE" lines, WINDOW being the window's flavour
 * (MPI_Win_allocate, MPI_Win_create over malloc'ed memory,
 * MPI_Win_create_dynamic with the memory attached), NAME one of
 *   putlock   MPI_Put + MPI_Win_flush inside one MPI_Win_lock epoch, µs per op
 *   getlock   MPI_Get + MPI_Win_flush likewise, µs per op
 *   putfence  MPI_Put between two MPI_Win_fence (both ranks fence), µs per op
 *   getfence  MPI_Get likewise, µs per op
 *   putpscw   MPI_Put in a generalized active-target epoch: the origin's
 *             MPI_Win_start / put / MPI_Win_complete against the target's
 *             MPI_Win_post / MPI_Win_wait, µs per op
 *   getpscw   MPI_Get likewise, µs per op
 *   acclock   MPI_Accumulate (MPI_SUM of doubles) + flush, µs per op
 *   foplock   MPI_Fetch_and_op (MPI_SUM of one long) + flush, µs per op
 *   putbw     64 MPI_Put then one flush (lock epoch), MB/s (10^6 B/s)
 *   getbw     64 MPI_Get then one flush, MB/s
 * OSU_ONLY="NAME..." (optional) runs only the named rows (e.g. "putbw getbw").
 * Iteration counts as in osu.c: doubling warm-up rounds until one takes a
 * tenth of OSU_MS (default 60 ms), then the count that fills it. Results
 * are checked once per window (a put's bytes arrive, a get returns the
 * target's bytes, the accumulates and fetch-and-ops sum up). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WINDOW 64
#define MAXSZ (1L << 22)

static int rank;
static char *obuf, *rbuf;
static char *tmem; /* the target's window memory */
static MPI_Win win;
static MPI_Aint tbase; /* displacement of the target memory (dynamic: its address) */
static double budget = 0.06;
static const char *only; /* OSU_ONLY: the rows to run, NULL for all */

/* Whether row NAME is to run (OSU_ONLY unset, or NAME one of its words). */
static int wanted(const char *name) {
    if (!only) return 1;
    size_t n = strlen(name);
    for (const char *p = only; (p = strstr(p, name)) != NULL; p += n)
        if ((p == only || p[-1] == ' ') && (p[n] == 0 || p[n] == ' ')) return 1;
    return 0;
}

static const long lat_sizes[] = {8, 64, 512, 4096, 32768, 262144, 1048576};
static const long acc_sizes[] = {8, 64, 512, 4096, 32768};
static const long bw_sizes[] = {4096, 65536, 1048576, 4194304};
#define NELEM(a) ((int)(sizeof(a) / sizeof((a)[0])))

typedef double (*bench_fn)(long n, int iters);

static int calibrate(bench_fn f, long n, int lo, int hi) {
    int k = 1;
    double t;
    for (;;) {
        t = f(n, k);
        int more = rank == 0 && t < budget / 10 && k < hi / 2;
        MPI_Bcast(&more, 1, MPI_INT, 0, MPI_COMM_WORLD);
        if (!more) break;
        k *= 2;
    }
    int iters = 0;
    if (rank == 0) {
        double per = t / k, want = per > 0 ? budget / per : hi;
        iters = want > hi ? hi : want < lo ? lo : (int)want;
    }
    MPI_Bcast(&iters, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return iters;
}

/* Lock-epoch benchmarks: the target waits in the closing barrier. */
static double lock_loop(long n, int iters, int what) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    if (rank == 0) {
        MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win);
        for (int i = 0; i < iters; i++) {
            switch (what) {
            case 0: MPI_Put(obuf, (int)n, MPI_CHAR, 1, tbase, (int)n, MPI_CHAR, win); break;
            case 1: MPI_Get(rbuf, (int)n, MPI_CHAR, 1, tbase, (int)n, MPI_CHAR, win); break;
            case 2:
                MPI_Accumulate(obuf, (int)(n / 8), MPI_DOUBLE, 1, tbase, (int)(n / 8), MPI_DOUBLE, MPI_SUM, win);
                break;
            case 3: MPI_Fetch_and_op(obuf, rbuf, MPI_LONG, 1, tbase, MPI_SUM, win); break;
            }
            MPI_Win_flush(1, win);
        }
        MPI_Win_unlock(1, win);
    }
    double t = MPI_Wtime() - t0;
    MPI_Barrier(MPI_COMM_WORLD);
    return t;
}
static double putlock(long n, int iters) { return lock_loop(n, iters, 0); }
static double getlock(long n, int iters) { return lock_loop(n, iters, 1); }
static double acclock(long n, int iters) { return lock_loop(n, iters, 2); }
static double foplock(long n, int iters) { return lock_loop(n, iters, 3); }

static double fence_loop(long n, int iters, int get) {
    MPI_Win_fence(0, win);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++) {
        if (rank == 0) {
            if (get) MPI_Get(rbuf, (int)n, MPI_CHAR, 1, tbase, (int)n, MPI_CHAR, win);
            else MPI_Put(obuf, (int)n, MPI_CHAR, 1, tbase, (int)n, MPI_CHAR, win);
        }
        MPI_Win_fence(0, win);
    }
    return MPI_Wtime() - t0;
}
static double putfence(long n, int iters) { return fence_loop(n, iters, 0); }
static double getfence(long n, int iters) { return fence_loop(n, iters, 1); }

/* Post-start-complete-wait: each round one exposure epoch at the target
 * and one access epoch at the origin (the groups are the other rank). */
static MPI_Group peer;
static double pscw_loop(long n, int iters, int get) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++) {
        if (rank == 0) {
            MPI_Win_start(peer, 0, win);
            if (get) MPI_Get(rbuf, (int)n, MPI_CHAR, 1, tbase, (int)n, MPI_CHAR, win);
            else MPI_Put(obuf, (int)n, MPI_CHAR, 1, tbase, (int)n, MPI_CHAR, win);
            MPI_Win_complete(win);
        } else {
            MPI_Win_post(peer, 0, win);
            MPI_Win_wait(win);
        }
    }
    double t = MPI_Wtime() - t0;
    MPI_Barrier(MPI_COMM_WORLD);
    return t;
}
static double putpscw(long n, int iters) { return pscw_loop(n, iters, 0); }
static double getpscw(long n, int iters) { return pscw_loop(n, iters, 1); }

static double bw_loop(long n, int iters, int get) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    if (rank == 0) {
        MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win);
        for (int i = 0; i < iters; i++) {
            for (int w = 0; w < WINDOW; w++) {
                if (get) MPI_Get(rbuf, (int)n, MPI_CHAR, 1, tbase, (int)n, MPI_CHAR, win);
                else MPI_Put(obuf, (int)n, MPI_CHAR, 1, tbase, (int)n, MPI_CHAR, win);
            }
            MPI_Win_flush(1, win);
        }
        MPI_Win_unlock(1, win);
    }
    double t = MPI_Wtime() - t0;
    MPI_Barrier(MPI_COMM_WORLD);
    return t;
}
static double putbw(long n, int iters) { return bw_loop(n, iters, 0); }
static double getbw(long n, int iters) { return bw_loop(n, iters, 1); }

static void lat(const char *name, const char *flavour, bench_fn f, const long *sizes, int ns) {
    if (!wanted(name)) return;
    for (int s = 0; s < ns; s++) {
        int iters = calibrate(f, sizes[s], 10, 1000000);
        double t = f(sizes[s], iters);
        if (rank == 0) printf("%s-%s %ld %.3f\n", name, flavour, sizes[s], t / iters * 1e6);
    }
}

static void bw(const char *name, const char *flavour, bench_fn f) {
    if (!wanted(name)) return;
    for (int s = 0; s < NELEM(bw_sizes); s++) {
        long n = bw_sizes[s];
        int iters = calibrate(f, n, 2, 100000);
        double t = f(n, iters);
        if (rank == 0) printf("%s-%s %ld %.1f\n", name, flavour, n, (double)n * WINDOW * iters / t / 1e6);
    }
}

static int failed;
static void check(int ok, const char *what, const char *flavour) {
    if (!ok && rank == 0) {
        fprintf(stderr, "osu_rma: %s check failed on the %s window\n", what, flavour);
        failed = 1;
    }
}

/* One put, get, accumulate and fetch-and-op whose results are known. */
static void verify(const char *flavour) {
    memset(tmem, 0, 64);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        for (int i = 0; i < 16; i++) obuf[i] = (char)(i + 1);
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, win);
        MPI_Put(obuf, 16, MPI_CHAR, 1, tbase, 16, MPI_CHAR, win);
        MPI_Win_flush(1, win);
        memset(rbuf, 0, 16);
        MPI_Get(rbuf, 16, MPI_CHAR, 1, tbase, 16, MPI_CHAR, win);
        MPI_Win_flush(1, win);
        check(memcmp(rbuf, obuf, 16) == 0, "put/get", flavour);
        double two[2] = {1.5, 2.5};
        MPI_Accumulate(two, 2, MPI_DOUBLE, 1, tbase + 16, 2, MPI_DOUBLE, MPI_SUM, win);
        MPI_Accumulate(two, 2, MPI_DOUBLE, 1, tbase + 16, 2, MPI_DOUBLE, MPI_SUM, win);
        long one = 1, old = -1;
        MPI_Fetch_and_op(&one, &old, MPI_LONG, 1, tbase + 32, MPI_SUM, win);
        MPI_Fetch_and_op(&one, &old, MPI_LONG, 1, tbase + 32, MPI_SUM, win);
        MPI_Win_flush(1, win);
        check(old == 1, "fetch_and_op", flavour);
        double got[2];
        MPI_Get(got, 2, MPI_DOUBLE, 1, tbase + 16, 2, MPI_DOUBLE, win);
        MPI_Win_unlock(1, win);
        check(got[0] == 3.0 && got[1] == 5.0, "accumulate", flavour);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

static void run(const char *flavour) {
    tbase = 0;
    if (!strcmp(flavour, "allocate")) {
        MPI_Win_allocate(MAXSZ, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &tmem, &win);
    } else if (!strcmp(flavour, "create")) {
        tmem = malloc(MAXSZ);
        MPI_Win_create(tmem, MAXSZ, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    } else {
        tmem = malloc(MAXSZ);
        MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win);
        MPI_Win_attach(win, tmem, MAXSZ);
        MPI_Aint mine;
        MPI_Get_address(tmem, &mine);
        MPI_Bcast(&mine, 1, MPI_AINT, 1, MPI_COMM_WORLD);
        tbase = mine;
    }
    memset(tmem, 0, MAXSZ);
    verify(flavour);
    lat("putlock", flavour, putlock, lat_sizes, NELEM(lat_sizes));
    lat("getlock", flavour, getlock, lat_sizes, NELEM(lat_sizes));
    lat("putfence", flavour, putfence, lat_sizes, NELEM(lat_sizes));
    lat("getfence", flavour, getfence, lat_sizes, NELEM(lat_sizes));
    lat("putpscw", flavour, putpscw, lat_sizes, NELEM(lat_sizes));
    lat("getpscw", flavour, getpscw, lat_sizes, NELEM(lat_sizes));
    lat("acclock", flavour, acclock, acc_sizes, NELEM(acc_sizes));
    long eight[] = {8};
    lat("foplock", flavour, foplock, eight, 1);
    bw("putbw", flavour, putbw);
    bw("getbw", flavour, getbw);
    if (!strcmp(flavour, "dynamic")) MPI_Win_detach(win, tmem);
    MPI_Win_free(&win);
    if (strcmp(flavour, "allocate")) free(tmem);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) {
        if (rank == 0) fprintf(stderr, "osu_rma: run with 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char *ms = getenv("OSU_MS");
    if (ms && atof(ms) > 0) budget = atof(ms) / 1000.0;
    only = getenv("OSU_ONLY");
    if (only && !*only) only = NULL;
    obuf = malloc(MAXSZ);
    rbuf = malloc(MAXSZ);
    memset(obuf, 1, MAXSZ);
    memset(obuf, 0, 8); /* fetch-and-op adds a long of 0 in the timed loop */
    MPI_Group world;
    int other = 1 - rank;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, 1, &other, &peer);
    MPI_Group_free(&world);
    const char *all[] = {"allocate", "create", "dynamic"};
    if (argc > 1)
        for (int i = 1; i < argc; i++) run(argv[i]);
    else
        for (int i = 0; i < 3; i++) run(all[i]);
    MPI_Group_free(&peer);
    free(obuf);
    free(rbuf);
    MPI_Finalize();
    return failed;
}
