/* Small collectives of a communicator on one host, through its shared
 * segment (crates/mpi/src/coll_sm): every result against values computed
 * here, over hundreds of calls in a row (the segment's two buffers
 * alternate), with a broadcast root that runs ahead of slow members, roots
 * that rotate, non-contiguous types, MPI_IN_PLACE, a non-commutative user
 * op, sizes on both sides of the segment's limits and
 * sub-communicators. On one host, MPI_T's shm message counter says whether
 * the segment carried 1000 small allreduces (no shm message) or messages did
 * (GW_MPI_COLL_SM=0). Any rank count, one host or several. */
#include "check.h"
#include <string.h>
#include <unistd.h>
#include <stdlib.h>
#include <time.h>

/* 2x2 integer matrices, row-major: inout = in * inout (non-commutative). */
static void matmul(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    long *a = in, *b = inout;
    for (int k = 0; k < *len; k++, a += 4, b += 4) {
        long c[4] = {a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3],
                     a[2] * b[0] + a[3] * b[2], a[2] * b[1] + a[3] * b[3]};
        memcpy(b, c, sizeof c);
    }
}

static void matrix_of(int r, int i, long m[4]) {
    m[0] = 1; m[1] = (r + i) % 3 + 1; m[2] = r % 2; m[3] = 1 + (i % 2);
}

static double mono_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static long shm_sent(MPI_T_pvar_session s, MPI_T_pvar_handle h) {
    unsigned long long v = 0;
    CHECK(MPI_T_pvar_read(s, h, &v) == MPI_SUCCESS, "pvar read");
    return (long)v;
}

/* Every operation on `comm`, `iters` times, checked. */
static void exercise(MPI_Comm comm, int iters, const char *what) {
    int rank, n;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &n);
    for (int i = 0; i < iters; i++) {
        /* Allreduce: sum and max of ints, in place every third call. */
        int v[3] = {(rank + 1) * i, rank, -rank * i}, out[3];
        if (i % 3 == 0) {
            memcpy(out, v, sizeof v);
            MPI_Allreduce(MPI_IN_PLACE, out, 3, MPI_INT, MPI_SUM, comm);
        } else {
            MPI_Allreduce(v, out, 3, MPI_INT, MPI_SUM, comm);
        }
        CHECK(out[0] == n * (n + 1) / 2 * i && out[1] == n * (n - 1) / 2 && out[2] == -(n * (n - 1) / 2) * i,
              "%s allreduce %d: %d %d %d", what, i, out[0], out[1], out[2]);
        double d = rank + 0.5 * i, dm;
        MPI_Allreduce(&d, &dm, 1, MPI_DOUBLE, MPI_MAX, comm);
        CHECK(dm == n - 1 + 0.5 * i, "%s allreduce max %d: %g", what, i, dm);

        /* Bcast from a rotating root; every 7th call from root 0 while the
         * others sleep now and then (root 0 runs ahead). */
        int root = i % 7 == 0 ? 0 : i % n;
        long b[5];
        for (int k = 0; k < 5; k++) b[k] = rank == root ? 1000L * i + k : -1;
        if (i % 7 == 0 && rank != 0 && i % 140 == 0) usleep(2000);
        MPI_Bcast(b, 5, MPI_LONG, root, comm);
        for (int k = 0; k < 5; k++) CHECK(b[k] == 1000L * i + k, "%s bcast %d root %d: [%d] %ld", what, i, root, k, b[k]);

        /* Reduce to a rotating root, non-commutative: A0 * A1 * ... */
        long m[4], got[4] = {0, 0, 0, 0};
        matrix_of(rank, i, m);
        MPI_Op mm;
        MPI_Op_create(matmul, 0, &mm);
        MPI_Datatype mat;
        MPI_Type_contiguous(4, MPI_LONG, &mat);
        MPI_Type_commit(&mat);
        MPI_Reduce(m, got, 1, mat, mm, root, comm);
        long want[4] = {1, 0, 0, 1};
        for (int r = n - 1; r >= 0; r--) { long a[4]; int one = 1; matrix_of(r, i, a); matmul(a, want, &one, NULL); }
        if (rank == root)
            for (int k = 0; k < 4; k++) CHECK(got[k] == want[k], "%s reduce matmul %d: [%d] %ld != %ld", what, i, k, got[k], want[k]);
        long all[4];
        MPI_Allreduce(m, all, 1, mat, mm, comm);
        for (int k = 0; k < 4; k++) CHECK(all[k] == want[k], "%s allreduce matmul %d: [%d] %ld != %ld", what, i, k, all[k], want[k]);
        MPI_Type_free(&mat);
        MPI_Op_free(&mm);

        /* Allgather: 3 ints each into a strided receive type (gaps stay -1). */
        int mine[3] = {rank, i, rank * i}, strided[16 * 6];
        MPI_Datatype vec, every_other;
        MPI_Type_vector(3, 1, 2, MPI_INT, &vec);
        MPI_Type_create_resized(vec, 0, 6 * sizeof(int), &every_other);
        MPI_Type_commit(&every_other);
        for (int k = 0; k < 6 * n; k++) strided[k] = -1;
        MPI_Allgather(mine, 3, MPI_INT, strided, 1, every_other, comm);
        for (int r = 0; r < n; r++) {
            CHECK(strided[6 * r] == r && strided[6 * r + 2] == i && strided[6 * r + 4] == r * i,
                  "%s allgather %d from %d", what, i, r);
            CHECK(strided[6 * r + 1] == -1 && strided[6 * r + 3] == -1 && strided[6 * r + 5] == -1,
                  "%s allgather %d: a gap was written", what, i);
        }
        MPI_Type_free(&every_other);
        MPI_Type_free(&vec);
        int ag[16 * 2];
        ag[2 * rank] = rank * 3; ag[2 * rank + 1] = i;
        MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, ag, 2, MPI_INT, comm);
        for (int r = 0; r < n; r++) CHECK(ag[2 * r] == r * 3 && ag[2 * r + 1] == i, "%s allgather in place %d", what, i);

        /* Alltoall: 2 ints to each, and in place. */
        int to[16 * 2], from[16 * 2];
        for (int r = 0; r < n; r++) { to[2 * r] = rank * 100 + r; to[2 * r + 1] = i; }
        MPI_Alltoall(to, 2, MPI_INT, from, 2, MPI_INT, comm);
        for (int r = 0; r < n; r++) CHECK(from[2 * r] == r * 100 + rank && from[2 * r + 1] == i, "%s alltoall %d from %d", what, i, r);
        MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, to, 2, MPI_INT, comm);
        for (int r = 0; r < n; r++) CHECK(to[2 * r] == r * 100 + rank, "%s alltoall in place %d from %d", what, i, r);

        if (i % 50 == 0) MPI_Barrier(comm);
    }
}

/* Sizes on both sides of the segment's limits (a buffer's room, 8 KiB,
 * above which calls go piece by piece; GW_MPI_COLL_SM, 32 KiB by default,
 * above which messages carry them): the results agree. */
static void sizes(MPI_Comm comm) {
    int rank, n;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &n);
    static int a[8300], b[8300];
    int counts[] = {1, 63, 64, 65, 511, 512, 513, 1024, 1025, 2047, 2048, 2049, 5000, 8191, 8192, 8193};
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        int cnt = counts[c];
        for (int k = 0; k < cnt; k++) a[k] = rank * 7 + k;
        MPI_Allreduce(a, b, cnt, MPI_INT, MPI_SUM, comm);
        for (int k = 0; k < cnt; k++) CHECK(b[k] == 7 * n * (n - 1) / 2 + n * k, "allreduce of %d ints: [%d] = %d", cnt, k, b[k]);
        memcpy(b, a, sizeof(int) * cnt);
        MPI_Allreduce(MPI_IN_PLACE, b, cnt, MPI_INT, MPI_MAX, comm);
        for (int k = 0; k < cnt; k++) CHECK(b[k] == 7 * (n - 1) + k, "allreduce in place of %d ints: [%d] = %d", cnt, k, b[k]);
        for (int root = 0; root < n; root += n > 2 ? 2 : 1) {
            for (int k = 0; k < cnt; k++) b[k] = -3;
            MPI_Reduce(a, b, cnt, MPI_INT, MPI_SUM, root, comm);
            if (rank == root)
                for (int k = 0; k < cnt; k++) CHECK(b[k] == 7 * n * (n - 1) / 2 + n * k, "reduce of %d ints to %d: [%d] = %d", cnt, root, k, b[k]);
        }
        /* Non-commutative, many elements (pieces hold whole matrices). */
        if (cnt % 4 == 0) {
            int mats = cnt / 4;
            long *m = malloc(sizeof(long) * 4 * mats), *got = malloc(sizeof(long) * 4 * mats);
            for (int j = 0; j < mats; j++) matrix_of(rank, j, m + 4 * j);
            MPI_Op mm;
            MPI_Op_create(matmul, 0, &mm);
            MPI_Datatype mat;
            MPI_Type_contiguous(4, MPI_LONG, &mat);
            MPI_Type_commit(&mat);
            MPI_Allreduce(m, got, mats, mat, mm, comm);
            for (int j = 0; j < mats; j++) {
                long want[4] = {1, 0, 0, 1};
                for (int r = n - 1; r >= 0; r--) { long x[4]; int one = 1; matrix_of(r, j, x); matmul(x, want, &one, NULL); }
                for (int q = 0; q < 4; q++) CHECK(got[4 * j + q] == want[q], "allreduce of %d matrices: [%d][%d] %ld != %ld", mats, j, q, got[4 * j + q], want[q]);
            }
            MPI_Type_free(&mat);
            MPI_Op_free(&mm);
            free(m);
            free(got);
        }
        for (int rep = 0; rep < 3; rep++) {
            int root = (n - 1 + rep) % n;
            for (int k = 0; k < cnt; k++) b[k] = rank == root ? k * 3 + rep : -5;
            MPI_Bcast(b, cnt, MPI_INT, root, comm);
            for (int k = 0; k < cnt; k++) CHECK(b[k] == k * 3 + rep, "bcast of %d ints from %d: [%d] = %d", cnt, root, k, b[k]);
        }
        int *all = malloc(sizeof(int) * (size_t)n * cnt);
        for (int k = 0; k < n * cnt; k++) all[k] = -1;
        MPI_Allgather(a, cnt, MPI_INT, all, cnt, MPI_INT, comm);
        for (int r = 0; r < n; r++)
            for (int k = 0; k < cnt; k++) CHECK(all[r * cnt + k] == r * 7 + k, "allgather of %d ints: [%d][%d] = %d", cnt, r, k, all[r * cnt + k]);
        /* In place, and into a non-contiguous type (pairs of ints, strided). */
        for (int k = 0; k < n * cnt; k++) all[k] = k / cnt == rank ? 11 * k : -1;
        MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, cnt, MPI_INT, comm);
        for (int k = 0; k < n * cnt; k++) CHECK(all[k] == 11 * k, "allgather in place of %d ints: [%d] = %d", cnt, k, all[k]);
        free(all);
        if (cnt % 2 == 0) {
            MPI_Datatype pair, spaced;
            MPI_Type_vector(2, 1, 2, MPI_INT, &pair);
            MPI_Type_create_resized(pair, 0, 4 * sizeof(int), &spaced);
            MPI_Type_commit(&spaced);
            int *sp = malloc(sizeof(int) * 2 * (size_t)n * cnt);
            for (int k = 0; k < 2 * n * cnt; k++) sp[k] = -1;
            MPI_Allgather(a, cnt, MPI_INT, sp, cnt / 2, spaced, comm);
            for (int r = 0; r < n; r++)
                for (int k = 0; k < cnt; k++) {
                    int at = 2 * r * cnt + (k / 2) * 4 + (k % 2) * 2;
                    CHECK(sp[at] == r * 7 + k && sp[at + 1] == -1, "allgather of %d ints into a strided type: [%d][%d]", cnt, r, k);
                }
            /* A strided broadcast too. */
            for (int k = 0; k < 2 * cnt; k++) sp[k] = rank == 0 ? k : -1;
            MPI_Bcast(sp, cnt / 2, spaced, 0, comm);
            for (int k = 0; k < 2 * cnt; k++) CHECK(sp[k] == ((k % 4 == 0 || k % 4 == 2) ? k : (rank == 0 ? k : -1)), "strided bcast of %d ints: [%d] = %d", cnt, k, sp[k]);
            free(sp);
            MPI_Type_free(&spaced);
            MPI_Type_free(&pair);
        }
    }
}

int main(int argc, char **argv) {
    int rank, n, provided;
    MPI_Init(&argc, &argv);
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    CHECK(n <= 16, "at most 16 ranks");

    exercise(MPI_COMM_WORLD, 600, "world");
    sizes(MPI_COMM_WORLD);

    /* Sub-communicators: odd/even halves and a duplicate, interleaved. */
    MPI_Comm half, dup;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half);
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    for (int round = 0; round < 3; round++) {
        exercise(half, 40, "half");
        exercise(dup, 40, "dup");
        exercise(MPI_COMM_WORLD, 20, "world again");
    }
    MPI_Comm_free(&half);
    MPI_Comm_free(&dup);

    /* A barrier holds everyone until the last member arrives: no member
     * leaves it before rank 0, 30 ms late, entered it (one clock for all
     * the processes of a machine: CLOCK_MONOTONIC). */
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) usleep(30000);
    double entered = mono_now();
    MPI_Barrier(MPI_COMM_WORLD);
    double left = mono_now(), lefts[16];
    MPI_Bcast(&entered, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Gather(&left, 1, MPI_DOUBLE, lefts, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank == 0)
        for (int r = 0; r < n; r++) CHECK(lefts[r] >= entered, "rank %d left the barrier %.6f s before rank 0 entered it", r, entered - lefts[r]);

    /* On one host: did the segment carry small allreduces (no shm message)? */
    MPI_Comm node;
    int node_size;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &node_size);
    MPI_Comm_free(&node);
    if (n > 1 && node_size == n) {
        const char *env = getenv("GW_MPI_COLL_SM");
        int on = !(env && strcmp(env, "0") == 0);
        MPI_T_pvar_session s;
        MPI_T_pvar_handle h;
        int idx, cnt;
        CHECK(MPI_T_pvar_session_create(&s) == MPI_SUCCESS, "session");
        CHECK(MPI_T_pvar_get_index("gw_shm_sent_msgs", MPI_T_PVAR_CLASS_COUNTER, &idx) == MPI_SUCCESS, "gw_shm_sent_msgs");
        CHECK(MPI_T_pvar_handle_alloc(s, idx, NULL, &h, &cnt) == MPI_SUCCESS, "handle");
        CHECK(MPI_T_pvar_start(s, h) == MPI_SUCCESS, "start");
        int x = rank, y;
        MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        long before = shm_sent(s, h);
        for (int i = 0; i < 1000; i++) {
            x = rank + i;
            MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
            CHECK(y == n * (n - 1) / 2 + n * i, "allreduce %d", i);
        }
        /* Pieces: 32 KiB Allreduce, Reduce, Bcast and Allgather. */
        static int big[8192], big_out[8192 * 16];
        for (int i = 0; i < 20; i++) {
            for (int k = 0; k < 8192; k++) big[k] = k + rank + i;
            MPI_Allreduce(big, big_out, 8192, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
            CHECK(big_out[8191] == n * (8191 + i) + n * (n - 1) / 2, "32 KiB allreduce %d", i);
            MPI_Reduce(big, big_out, 8192, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
            MPI_Bcast(big, 8192, MPI_INT, i % n, MPI_COMM_WORLD);
            CHECK(big[17] == 17 + i % n + i, "32 KiB bcast %d", i);
            MPI_Allgather(big, 8192, MPI_INT, big_out, 8192, MPI_INT, MPI_COMM_WORLD);
        }
        long sent = shm_sent(s, h) - before;
        if (on)
            CHECK(sent == 0, "1000 small allreduces and 20 rounds of 32 KiB collectives on one host sent %ld shm messages (the segment should carry them)", sent);
        else
            CHECK(sent >= 1000, "with GW_MPI_COLL_SM=0, 1000 allreduces sent only %ld shm messages", sent);
        MPI_T_pvar_handle_free(s, &h);
        MPI_T_pvar_session_free(&s);
        if (rank == 0) printf("coll_sm: %s, %ld shm messages for 1000 allreduces\n", on ? "segment" : "messages", sent);
    }
    MPI_T_finalize();
    PASS("coll_sm");
    MPI_Finalize();
    return 0;
}
