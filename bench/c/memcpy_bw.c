/* memcpy floor: single-thread copy bandwidth of SIZE-byte buffers (default
 * 4 MiB). Usage: memcpy_bw [SIZE [POOL]]: copies rotate over POOL bytes
 * (default SIZE: the same two buffers again and again, as the message
 * benchmarks reuse theirs; a large POOL measures cache-cold copies).
 * Prints MB/s (10^6 B/s). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    size_t size = argc > 1 ? (size_t)atol(argv[1]) : 4 << 20;
    size_t pool = argc > 2 ? (size_t)atol(argv[2]) : size;
    if (size > pool) pool = size;
    size_t slots = pool / size;
    char *src = malloc(pool), *dst = malloc(pool);
    memset(src, 1, pool);
    memset(dst, 2, pool);
    long iters = (long)((1L << 30) / size) + 8;
    double t0 = now();
    for (long i = 0; i < iters; i++) {
        size_t k = (size_t)i % slots;
        memcpy(dst + k * size, src + ((k + 1) % slots) * size, size);
    }
    double t = now() - t0;
    volatile char sink = dst[size / 2];
    (void)sink;
    printf("%.0f\n", (double)size * iters / t / 1e6);
    return 0;
}
