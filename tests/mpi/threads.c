/* MPI_THREAD_MULTIPLE: several threads per rank exchange messages at once. */
#include "check.h"
#include <pthread.h>
#include <string.h>

enum { T = 4, ITERS = 200 };
static int rank, size;

static void *worker(void *arg) {
    int t = (int)(intptr_t)arg;
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    for (int i = 0; i < ITERS; i++) {
        int n = (i % 10 == 0) ? 20000 : 4;
        int *out = malloc(n * sizeof(int)), *in = malloc(n * sizeof(int));
        for (int j = 0; j < n; j++) out[j] = rank * 1000000 + t * 10000 + i + j;
        MPI_Request r;
        MPI_Irecv(in, n, MPI_INT, prev, t, MPI_COMM_WORLD, &r);
        MPI_Send(out, n, MPI_INT, next, t, MPI_COMM_WORLD);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        for (int j = 0; j < n; j++) CHECK(in[j] == prev * 1000000 + t * 10000 + i + j, "thread %d iter %d", t, i);
        free(out); free(in);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    CHECK(provided == MPI_THREAD_MULTIPLE, "provided %d", provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    pthread_t th[T];
    for (int t = 0; t < T; t++) pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t);
    for (int t = 0; t < T; t++) pthread_join(th[t], NULL);
    int flag;
    MPI_Is_thread_main(&flag);
    CHECK(flag, "main thread");
    MPI_Barrier(MPI_COMM_WORLD);
    PASS("threads");
    MPI_Finalize();
    return 0;
}
