/* Eager messages placed straight into posted receives (shared memory: the
 * receiver copies from the ring into the receive buffer), around every size
 * threshold (placement 2 KiB, the shm eager limit 32 KiB, the ring's largest
 * record 64 KiB), interleaved with unexpected messages, an ANY_TAG receive,
 * truncated receives and two messages of one tag (no overtaking): every byte and
 * every status checked, and nothing written past a message. Ranks 0 and 1
 * talk; any others only wait at the barrier. */
#include "check.h"
#include <string.h>

static unsigned char pat(size_t i, int seed) { return (unsigned char)(i * 7 + seed * 13 + (i >> 8)); }

static unsigned char *filled(size_t n, int seed) {
    unsigned char *b = malloc(n ? n : 1);
    for (size_t i = 0; i < n; i++) b[i] = pat(i, seed);
    return b;
}

static void expect(const unsigned char *b, size_t n, int seed, const char *what, int size) {
    for (size_t i = 0; i < n; i++)
        CHECK(b[i] == pat(i, seed), "%s of %d bytes: byte %zu is %d, want %d", what, size, i, b[i], pat(i, seed));
}

#define GUARD 16
#define POISON 0xee

static unsigned char *poisoned(size_t n) {
    unsigned char *b = malloc(n + GUARD);
    memset(b, POISON, n + GUARD);
    return b;
}

static void untouched(const unsigned char *b, size_t from, size_t to, const char *what, int size) {
    for (size_t i = from; i < to; i++)
        CHECK(b[i] == POISON, "%s of %d bytes: byte %zu past the message written", what, size, i);
}

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    const int sizes[] = {0, 1, 64, 2047, 2048, 2049, 4095, 4096, 4097, 8192, 16384,
                         32767, 32768, 32769, 65535, 65536, 65537, 100000};
    const int nsizes = (int)(sizeof sizes / sizeof sizes[0]);
    for (int lap = 0; lap < 3 && rank < 2; lap++) {
        for (int k = 0; k < nsizes; k++) {
            int n = sizes[k];
            int seed = lap * 100 + k * 6;
            MPI_Status st;
            int cnt;
            if (rank == 1) {
                /* A: posted, larger than the message. T: one byte short.
                 * M1: the first of two with the same tag, from ANY_SOURCE.
                 * U, M2 and X find no receive: unexpected; X is taken by an
                 * ANY_TAG receive at the end. */
                unsigned char *a = poisoned(n + 8), *t = poisoned(n), *x = poisoned(n);
                unsigned char *m1 = poisoned(n), *u = poisoned(n), *m2 = poisoned(n);
                MPI_Request r[3];
                MPI_Irecv(a, n + 8, MPI_BYTE, 0, 1, comm, &r[0]);
                MPI_Irecv(t, n > 0 ? n - 1 : 0, MPI_BYTE, 0, 3, comm, &r[1]);
                MPI_Irecv(m1, n, MPI_BYTE, MPI_ANY_SOURCE, 5, comm, &r[2]);
                MPI_Send(NULL, 0, MPI_BYTE, 0, 9, comm);
                CHECK(MPI_Wait(&r[0], &st) == MPI_SUCCESS, "A of %d bytes", n);
                MPI_Get_count(&st, MPI_BYTE, &cnt);
                CHECK(cnt == n && st.MPI_SOURCE == 0 && st.MPI_TAG == 1, "A of %d: count %d source %d tag %d", n, cnt, st.MPI_SOURCE, st.MPI_TAG);
                expect(a, n, seed + 1, "A", n);
                untouched(a, n, n + 8 + GUARD, "A", n);
                /* U was sent first and had no receive. */
                CHECK(MPI_Recv(u, n, MPI_BYTE, 0, 2, comm, &st) == MPI_SUCCESS, "U of %d bytes", n);
                MPI_Get_count(&st, MPI_BYTE, &cnt);
                CHECK(cnt == n && st.MPI_TAG == 2, "U of %d: count %d", n, cnt);
                expect(u, n, seed, "U", n);
                untouched(u, n, n + GUARD, "U", n);
                int rc = MPI_Wait(&r[1], &st), cls = MPI_SUCCESS;
                if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
                if (n > 0) {
                    CHECK(cls == MPI_ERR_TRUNCATE, "T of %d bytes into %d: class %d", n, n - 1, cls);
                    expect(t, n - 1, seed + 2, "T", n);
                    untouched(t, n - 1, n + GUARD, "T", n);
                } else {
                    CHECK(rc == MPI_SUCCESS, "T of 0 bytes: rc %d", rc);
                }
                CHECK(MPI_Wait(&r[2], &st) == MPI_SUCCESS, "M1 of %d bytes", n);
                MPI_Get_count(&st, MPI_BYTE, &cnt);
                CHECK(cnt == n && st.MPI_SOURCE == 0 && st.MPI_TAG == 5, "M1 of %d: count %d", n, cnt);
                expect(m1, n, seed + 4, "M1 (non-overtaking)", n);
                untouched(m1, n, n + GUARD, "M1", n);
                CHECK(MPI_Recv(m2, n, MPI_BYTE, 0, 5, comm, &st) == MPI_SUCCESS, "M2 of %d bytes", n);
                expect(m2, n, seed + 5, "M2 (non-overtaking)", n);
                CHECK(MPI_Recv(x, n, MPI_BYTE, 0, MPI_ANY_TAG, comm, &st) == MPI_SUCCESS, "X of %d bytes", n);
                MPI_Get_count(&st, MPI_BYTE, &cnt);
                CHECK(cnt == n && st.MPI_TAG == 4, "X of %d: count %d tag %d", n, cnt, st.MPI_TAG);
                expect(x, n, seed + 3, "X", n);
                untouched(x, n, n + GUARD, "X", n);
                free(a); free(t); free(x); free(m1); free(u); free(m2);
            } else {
                unsigned char *m[6];
                for (int j = 0; j < 6; j++) m[j] = filled(n, seed + j);
                MPI_Recv(NULL, 0, MPI_BYTE, 1, 9, comm, MPI_STATUS_IGNORE);
                const int tags[6] = {2, 1, 3, 4, 5, 5};
                MPI_Request r[6];
                for (int j = 0; j < 6; j++) MPI_Isend(m[j], n, MPI_BYTE, 1, tags[j], comm, &r[j]);
                MPI_Waitall(6, r, MPI_STATUSES_IGNORE);
                for (int j = 0; j < 6; j++) free(m[j]);
            }
        }
    }
    MPI_Comm_free(&comm);
    MPI_Barrier(MPI_COMM_WORLD);
    PASS("eager_place");
    MPI_Finalize();
    return 0;
}
