/* One-sided calls from several threads at once (MPI_THREAD_MULTIPLE):
 * each thread of every rank adds to counters in its right neighbour's
 * windows with MPI_Fetch_and_op and MPI_Accumulate, puts into its own slot
 * and flushes, alternating between two windows from MPI_Win_allocate and
 * one from MPI_Win_create, all inside one MPI_Win_lock_all epoch per
 * window. The calls share the per-thread window cache and the lock-free
 * epoch checks; every add must land exactly once and every put in place.
 * Then the windows are freed and made again, and the rounds repeat on the
 * new ones (a freed handle's cache entries must not reach them). */
#include "check.h"
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { THREADS = 3, WINS = 3, SLOTS = 1 + THREADS };
/* Rounds per thread: GW_TEST_ROUNDS, default 300 (requests between hosts
 * cost more: the test asks fewer there). */
static int ROUNDS = 300;

static MPI_Win wins[WINS];
static int rank, size;

static void *worker(void *arg) {
    int t = (int)(intptr_t)arg, right = (rank + 1) % size;
    for (int i = 0; i < ROUNDS; i++) {
        MPI_Win w = wins[(i + t) % WINS];
        long one = 1, old = -1;
        long mine = (long)rank * 1000000 + t * 10000 + i;
        CHECK(MPI_Fetch_and_op(&one, &old, MPI_LONG, right, 0, MPI_SUM, w) == MPI_SUCCESS, "fetch_and_op");
        CHECK(MPI_Put(&mine, 1, MPI_LONG, right, 1 + t, 1, MPI_LONG, w) == MPI_SUCCESS, "put");
        CHECK(MPI_Win_flush(right, w) == MPI_SUCCESS, "flush");
        /* The fetched value is there once the flush returned. */
        CHECK(old >= 0 && old < (long)THREADS * ROUNDS, "thread %d: fetched %ld", t, old);
        long got = -1;
        CHECK(MPI_Get(&got, 1, MPI_LONG, right, 1 + t, 1, MPI_LONG, w) == MPI_SUCCESS, "get");
        CHECK(MPI_Win_flush(right, w) == MPI_SUCCESS, "flush");
        CHECK(got == mine, "thread %d round %d: got %ld, put %ld", t, i, got, mine);
    }
    return NULL;
}

static void round_of(const char *what, long *create_mem) {
    long *bases[WINS];
    for (int k = 0; k < WINS - 1; k++) {
        MPI_Win_allocate(SLOTS * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &bases[k], &wins[k]);
        memset(bases[k], 0, SLOTS * sizeof(long));
    }
    memset(create_mem, 0, SLOTS * sizeof(long));
    bases[WINS - 1] = create_mem;
    MPI_Win_create(create_mem, SLOTS * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &wins[WINS - 1]);
    for (int k = 0; k < WINS; k++) MPI_Win_set_errhandler(wins[k], MPI_ERRORS_RETURN);
    MPI_Barrier(MPI_COMM_WORLD);
    for (int k = 0; k < WINS; k++) MPI_Win_lock_all(0, wins[k]);
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t);
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
    for (int k = 0; k < WINS; k++) MPI_Win_unlock_all(wins[k]);
    MPI_Barrier(MPI_COMM_WORLD);
    long total = 0;
    for (int k = 0; k < WINS; k++) {
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, wins[k]);
        total += bases[k][0];
        MPI_Win_unlock(rank, wins[k]);
    }
    CHECK(total == (long)THREADS * ROUNDS, "%s: %ld adds landed of %d", what, total, THREADS * ROUNDS);
    MPI_Barrier(MPI_COMM_WORLD);
    for (int k = 0; k < WINS; k++) MPI_Win_free(&wins[k]);
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(provided == MPI_THREAD_MULTIPLE, "provided %d", provided);
    const char *r = getenv("GW_TEST_ROUNDS");
    if (r && atoi(r) > 0) ROUNDS = atoi(r);
    long *mem = calloc(SLOTS, sizeof(long));
    round_of("first windows", mem);
    round_of("windows made after a free", mem);
    free(mem);
    PASS("rma_threads");
    MPI_Finalize();
    return 0;
}
