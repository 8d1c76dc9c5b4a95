/* Shared-memory floor: two processes ping-pong a counter on one cache line.
 * Prints the one-way latency in nanoseconds. This is the least any
 * shared-memory transport can cost per message on this machine.
 * Usage: cacheline ITERS [best]: with "best", the least one-way latency of
 * batches of 1000 round trips (what the runs would cost undisturbed on a
 * shared machine; the benchmarks report the same statistic). */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    long iters = argc > 1 ? atol(argv[1]) : 200000;
    int best_mode = argc > 2 && argv[2][0] == 'b';
    _Atomic uint64_t *line = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (line == MAP_FAILED) { perror("mmap"); return 1; }
    atomic_store(line, 0);
    pid_t pid = fork();
    if (pid < 0) { perror("fork"); return 1; }
    if (pid == 0) {
        for (uint64_t i = 1; i <= (uint64_t)iters; i++) {
            while (atomic_load_explicit(line, memory_order_acquire) != 2 * i - 1) { }
            atomic_store_explicit(line, 2 * i, memory_order_release);
        }
        _exit(0);
    }
    double t0 = 0, tb = 0, best = 1e9;
    for (uint64_t i = 1; i <= (uint64_t)iters; i++) {
        if (i == 1000) t0 = now(); /* warm-up */
        if (i % 1000 == 0) {
            double t = now();
            if (i > 1000 && (t - tb) / 2000.0 < best) best = (t - tb) / 2000.0;
            tb = t;
        }
        atomic_store_explicit(line, 2 * i - 1, memory_order_release);
        while (atomic_load_explicit(line, memory_order_acquire) != 2 * i) { }
    }
    double t = now() - t0;
    waitpid(pid, NULL, 0);
    if (best_mode) printf("%.1f\n", best * 1e9);
    else printf("%.1f\n", t / (2.0 * (iters - 999)) * 1e9);
    return 0;
}
