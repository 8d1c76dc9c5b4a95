/* The vertical slice: init, ranks, blocking and nonblocking point-to-point
 * (eager and rendezvous), wait/test, barrier, bcast, reduce, allreduce. */
#include "check.h"
#include <string.h>

int main(int argc, char **argv) {
    int rank, size, provided, flag, v;
    MPI_Init(&argc, &argv);
    MPI_Initialized(&flag);
    CHECK(flag == 1, "Initialized");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Get_version(&v, &provided);
#ifdef GRIDWIRE_MPI
    CHECK(v == 5 && MPI_VERSION == 5 && MPI_ABI_VERSION == 1, "version %d", v);
#else
    CHECK(v == MPI_VERSION, "version %d", v);
#endif

    /* Ring of ints: eager. */
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    int token = rank * 10, got = -1;
    MPI_Status st;
    MPI_Request rq[2];
    MPI_Irecv(&got, 1, MPI_INT, prev, 7, MPI_COMM_WORLD, &rq[0]);
    MPI_Isend(&token, 1, MPI_INT, next, 7, MPI_COMM_WORLD, &rq[1]);
    MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
    CHECK(got == prev * 10, "ring got %d want %d", got, prev * 10);
    CHECK(rq[0] == MPI_REQUEST_NULL && rq[1] == MPI_REQUEST_NULL, "requests nulled");

    /* Large messages (rendezvous) in both directions at once, several sizes. */
    for (size_t n = 1000; n <= 4u << 20; n *= 7) {
        double *a = malloc(n * sizeof(double)), *b = malloc(n * sizeof(double));
        for (size_t i = 0; i < n; i++) { a[i] = rank * 1e6 + i; b[i] = -1; }
        MPI_Sendrecv(a, (int)n, MPI_DOUBLE, next, 3, b, (int)n, MPI_DOUBLE, prev, 3, MPI_COMM_WORLD, &st);
        int cnt;
        MPI_Get_count(&st, MPI_DOUBLE, &cnt);
        CHECK(cnt == (int)n, "count %d want %zu", cnt, n);
        CHECK(st.MPI_SOURCE == prev && st.MPI_TAG == 3, "status %d %d", st.MPI_SOURCE, st.MPI_TAG);
        for (size_t i = 0; i < n; i++) CHECK(b[i] == prev * 1e6 + i, "b[%zu]=%g", i, b[i]);
        free(a); free(b);
    }

    /* Blocking send/recv with ANY_SOURCE to rank 0, ordered per pair. */
    if (rank != 0) {
        for (int i = 0; i < 50; i++) {
            int m[2] = {rank, i};
            MPI_Send(m, 2, MPI_INT, 0, 5, MPI_COMM_WORLD);
        }
    } else {
        int last[64];
        for (int r = 0; r < size; r++) last[r] = -1;
        for (int k = 0; k < 50 * (size - 1); k++) {
            int m[2];
            MPI_Recv(m, 2, MPI_INT, MPI_ANY_SOURCE, 5, MPI_COMM_WORLD, &st);
            CHECK(st.MPI_SOURCE == m[0] && st.MPI_TAG == 5, "src %d tag %d", st.MPI_SOURCE, st.MPI_TAG);
            CHECK(m[1] == last[m[0]] + 1, "order from %d: %d after %d", m[0], m[1], last[m[0]]);
            last[m[0]] = m[1];
        }
    }

    /* Test loop. */
    if (size > 1) {
        int x = -1, y = 42;
        if (rank == 0) {
            MPI_Request r;
            MPI_Irecv(&x, 1, MPI_INT, 1, MPI_ANY_TAG, MPI_COMM_WORLD, &r);
            int done = 0;
            while (!done) MPI_Test(&r, &done, &st);
            CHECK(x == 43, "test got %d", x);
        } else if (rank == 1) {
            y = 43;
            MPI_Send(&y, 1, MPI_INT, 0, 9, MPI_COMM_WORLD);
        }
    }

    MPI_Barrier(MPI_COMM_WORLD);

    /* Bcast from every root, small and large. */
    for (int root = 0; root < size; root++) {
        int n = 100000;
        int *buf = malloc(n * sizeof(int));
        for (int i = 0; i < n; i++) buf[i] = rank == root ? i + root : -1;
        MPI_Bcast(buf, n, MPI_INT, root, MPI_COMM_WORLD);
        for (int i = 0; i < n; i++) CHECK(buf[i] == i + root, "bcast root %d [%d]=%d", root, i, buf[i]);
        free(buf);
        long s = rank == root ? 77 : 0;
        MPI_Bcast(&s, 1, MPI_LONG, root, MPI_COMM_WORLD);
        CHECK(s == 77, "bcast long");
    }

    /* Reduce / Allreduce. */
    for (int root = 0; root < size; root++) {
        int in[3] = {rank, rank * 2, 1}, out[3] = {0, 0, 0};
        MPI_Reduce(in, out, 3, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD);
        if (rank == root) {
            CHECK(out[0] == size * (size - 1) / 2 && out[1] == size * (size - 1) && out[2] == size, "reduce");
        }
    }
    double d = rank + 0.5, dmax, dsum;
    MPI_Allreduce(&d, &dmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(&d, &dsum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    CHECK(dmax == size - 0.5, "max %g", dmax);
    CHECK(dsum == size * size / 2.0, "sum %g", dsum);
    int big = 1 << 18;
    int *bi = malloc(big * sizeof(int)), *bo = malloc(big * sizeof(int));
    for (int i = 0; i < big; i++) bi[i] = i + rank;
    MPI_Allreduce(bi, bo, big, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    for (int i = 0; i < big; i++) CHECK(bo[i] == size * i + size * (size - 1) / 2, "allreduce big [%d]", i);
    MPI_Allreduce(MPI_IN_PLACE, bi, big, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    for (int i = 0; i < big; i++) CHECK(bi[i] == i, "allreduce in place [%d]", i);
    free(bi); free(bo);

    double t0 = MPI_Wtime();
    CHECK(t0 >= 0 && MPI_Wtick() > 0, "wtime");
    MPI_Finalize();
    MPI_Finalized(&flag);
    CHECK(flag == 1, "Finalized");
    if (rank == 0) printf("PASS basic (%d ranks)\n", size);
    return 0;
}
