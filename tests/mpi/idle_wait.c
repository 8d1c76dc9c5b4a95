/* Idle waits give the core back to the ranks that have work. Every rank
 * pins itself to one CPU (the first it may run on) before MPI_Init, so the
 * job is oversubscribed on any machine: rank 0 computes ROUNDS bursts of
 * BURST_US of its own CPU time, and after each one completes a blocking
 * call with the others (a message to each, a barrier or a broadcast, in
 * turn), who wait in it meanwhile. A waiter that spins (or yields on a
 * schedule that keeps it running) takes that CPU from rank 0; one that
 * yields it and then sleeps takes little. Checked from CPU time
 * (getrusage: every thread of the process), not wall time: other load on
 * the CPU only lowers what the waiters get. Each waiter may use at most a
 * quarter of rank 0's computing time (spinners sharing the CPU with it
 * would take about as much as it, each). Rank 0 prints the figures. */
#define _GNU_SOURCE
#include "check.h"
#include <sched.h>
#include <sys/resource.h>
#include <time.h>

enum { ROUNDS = 30, BURST_US = 4000 };

static double cpu_now(clockid_t c) {
    struct timespec ts;
    clock_gettime(c, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* CPU time of the whole process (every thread), seconds. */
static double process_cpu(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec * 1e-6;
}

static volatile double sink;
/* BURST_US of this thread's CPU time (however long the CPU is shared). */
static void compute(void) {
    double t = cpu_now(CLOCK_THREAD_CPUTIME_ID);
    while ((cpu_now(CLOCK_THREAD_CPUTIME_ID) - t) * 1e6 < BURST_US) sink += 1.0;
}

static void pin_to_first_cpu(void) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) return;
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (CPU_ISSET(c, &set)) {
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(c, &one);
            sched_setaffinity(0, sizeof one, &one);
            return;
        }
    }
}

int main(int argc, char **argv) {
    /* Before MPI_Init: the runtime's threads inherit it. */
    pin_to_first_cpu();
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size >= 2, "needs 2 ranks, has %d", size);
    MPI_Barrier(MPI_COMM_WORLD);
    double cpu0 = process_cpu();
    double wall0 = MPI_Wtime();
    for (int r = 0; r < ROUNDS; r++) {
        if (rank == 0) compute();
        int v = rank == 0 ? r * 7 + 1 : -1;
        switch (r % 3) {
        case 0:
            if (rank == 0) {
                for (int p = 1; p < size; p++) MPI_Send(&v, 1, MPI_INT, p, r, MPI_COMM_WORLD);
            } else {
                MPI_Recv(&v, 1, MPI_INT, 0, r, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                CHECK(v == r * 7 + 1, "round %d: received %d", r, v);
            }
            break;
        case 1:
            MPI_Barrier(MPI_COMM_WORLD);
            break;
        default:
            MPI_Bcast(&v, 1, MPI_INT, 0, MPI_COMM_WORLD);
            CHECK(v == r * 7 + 1, "round %d: broadcast gave %d", r, v);
        }
    }
    double used = process_cpu() - cpu0;
    double wall = MPI_Wtime() - wall0;
    double all[64] = {0};
    CHECK(size <= 64, "at most 64 ranks, has %d", size);
    MPI_Gather(&used, 1, MPI_DOUBLE, all, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        double work = ROUNDS * BURST_US * 1e-6;
        printf("idle_wait: %d ranks on one CPU, %.0f ms of work in %.0f ms: rank 0 used %.0f ms of CPU, waiters",
               size, work * 1e3, wall * 1e3, all[0] * 1e3);
        for (int p = 1; p < size; p++) printf(" %.1f", all[p] * 1e3);
        printf(" ms\n");
        for (int p = 1; p < size; p++)
            CHECK(all[p] <= 0.25 * work, "waiter %d used %.1f ms of CPU while rank 0 computed %.0f ms",
                  p, all[p] * 1e3, work * 1e3);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    PASS("idle_wait");
    MPI_Finalize();
    return 0;
}
