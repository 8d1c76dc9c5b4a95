/* Large messages within a host, copied by both processes (the receiver reads
 * the front part with process_vm_readv while the sender writes the back part
 * with process_vm_writev, GW_MPI_CMA_ASSIST_MIN; on two hosts the same
 * program takes the rendezvous through the runtime). Every byte checked and
 * nothing written around a message, for:
 *  - sizes around the thresholds (eager limit, assist minimum) up to 4 MiB + 3,
 *    with send and receive buffers at misaligned addresses;
 *  - a window of sends in flight (several two-part copies outstanding);
 *  - both directions at once (each process copies for the other meanwhile);
 *  - a truncated receive and noncontiguous receive and send types (which
 *    copy alone or from a packed copy);
 *  - a message that arrived before its receive was posted, and ANY_SOURCE.
 * Ranks 0 and 1 talk; any others only wait at the barrier. Each case runs
 * twice: a pair's first single copy is made alone, the next ones together. */
#include "check.h"
#include <string.h>

static unsigned char pat(size_t i, int seed) {
    return (unsigned char)((i * 2654435761u + (size_t)seed * 40503u) >> 11);
}

static void fill(unsigned char *b, size_t n, int seed) {
    for (size_t i = 0; i < n; i++) b[i] = pat(i, seed);
}

static void expect(const unsigned char *b, size_t n, int seed, const char *what, size_t size) {
    for (size_t i = 0; i < n; i++)
        CHECK(b[i] == pat(i, seed), "%s of %zu bytes: byte %zu is %d, want %d", what, size, i, b[i], pat(i, seed));
}

#define GUARD 64
#define POISON 0xee

/* A buffer of n bytes at offset `off` of a poisoned allocation. */
static unsigned char *poisoned(size_t n, size_t off, unsigned char **base) {
    *base = malloc(n + off + 2 * GUARD);
    memset(*base, POISON, n + off + 2 * GUARD);
    return *base + GUARD + off;
}

static void untouched(const unsigned char *base, size_t from, size_t to, const char *what, size_t size) {
    for (size_t i = from; i < to; i++)
        CHECK(base[i] == POISON, "%s of %zu bytes: byte %zu around the message written", what, size, i);
}

/* Rank `me` sends n bytes (seed) to `peer` from offset soff and receives n
 * bytes from it at offset roff; `both`: the peer sends at the same time. */
static void one(int me, int peer, size_t n, size_t soff, size_t roff, int seed, int both, MPI_Comm comm) {
    unsigned char *sbase, *rbase;
    unsigned char *s = poisoned(n, soff, &sbase);
    unsigned char *r = poisoned(n, roff, &rbase);
    fill(s, n, seed + me);
    MPI_Request q[2];
    MPI_Status st[2];
    int sender = both || me == 0, receiver = both || me == 1;
    int k = 0;
    if (receiver) MPI_Irecv(r, (int)n, MPI_BYTE, peer, 7, comm, &q[k++]);
    if (sender) MPI_Isend(s, (int)n, MPI_BYTE, peer, 7, comm, &q[k++]);
    CHECK(MPI_Waitall(k, q, st) == MPI_SUCCESS, "exchange of %zu bytes", n);
    if (receiver) {
        int cnt;
        MPI_Get_count(&st[0], MPI_BYTE, &cnt);
        CHECK((size_t)cnt == n && st[0].MPI_SOURCE == peer, "%zu bytes: count %d source %d", n, cnt, st[0].MPI_SOURCE);
        expect(r, n, seed + peer, "receive", n);
        untouched(rbase, 0, GUARD + roff, "receive", n);
        untouched(rbase, GUARD + roff + n, n + roff + 2 * GUARD, "receive", n);
    }
    /* The send buffer is only read. */
    expect(s, n, seed + me, "send buffer after the send", n);
    free(sbase);
    free(rbase);
}

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    /* Where an implementation raises a completion's error on the world. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    const size_t sizes[] = {4097, 32769, 65535, 65536, 65537, 100003, 262144, 1048576 + 1, (4u << 20) + 3};
    const int nsizes = (int)(sizeof sizes / sizeof sizes[0]);
    const size_t offs[][2] = {{0, 0}, {1, 3}, {7, 0}, {0, 5}, {4093, 13}};
    if (rank < 2) {
        int peer = 1 - rank;
        for (int lap = 0; lap < 2; lap++)
            for (int k = 0; k < nsizes; k++)
                for (int o = 0; o < 5; o++)
                    for (int both = 0; both < 2; both++)
                        one(rank, peer, sizes[k], offs[o][0], offs[o][1], lap * 1000 + k * 10 + o, both, comm);

        /* A window of 8 sends of 256 KiB + 1 in flight, received into one
         * buffer at misaligned offsets. */
        enum { W = 8 };
        size_t n = 262145;
        unsigned char *base = malloc(W * (n + 8));
        MPI_Request q[W];
        for (int lap = 0; lap < 3; lap++) {
            if (rank == 0) {
                for (int i = 0; i < W; i++) {
                    fill(base + i * (n + 8) + i, n, 500 + lap * W + i);
                    MPI_Isend(base + i * (n + 8) + i, (int)n, MPI_BYTE, 1, i, comm, &q[i]);
                }
            } else {
                memset(base, POISON, W * (n + 8));
                for (int i = 0; i < W; i++)
                    MPI_Irecv(base + i * (n + 8) + i, (int)n, MPI_BYTE, 0, i, comm, &q[i]);
            }
            CHECK(MPI_Waitall(W, q, MPI_STATUSES_IGNORE) == MPI_SUCCESS, "window");
            if (rank == 1)
                for (int i = 0; i < W; i++) {
                    unsigned char *p = base + i * (n + 8);
                    expect(p + i, n, 500 + lap * W + i, "window message", n);
                    for (int j = 0; j < i; j++) CHECK(p[j] == POISON, "window message %d: byte before written", i);
                }
        }
        free(base);

        /* Truncated: the receive holds one byte less; error and count as before. */
        for (int lap = 0; lap < 2; lap++) {
            n = 1 << 20;
            unsigned char *sbase, *rbase;
            unsigned char *s = poisoned(n, 0, &sbase), *r = poisoned(n, 1, &rbase);
            MPI_Status st;
            if (rank == 0) {
                fill(s, n, 77 + lap);
                CHECK(MPI_Send(s, (int)n, MPI_BYTE, 1, 8, comm) == MPI_SUCCESS, "truncated send");
            } else {
                int rc = MPI_Recv(r, (int)n - 1, MPI_BYTE, 0, 8, comm, &st), cls, cnt;
                MPI_Error_class(rc, &cls);
                CHECK(cls == MPI_ERR_TRUNCATE, "a truncated receive gave class %d", cls);
                MPI_Get_count(&st, MPI_BYTE, &cnt);
                CHECK(cnt == (int)n - 1, "truncated count %d", cnt);
                expect(r, n - 1, 77 + lap, "truncated receive", n);
                untouched(rbase, GUARD + 1 + n - 1, n + 1 + 2 * GUARD, "truncated receive", n);
            }
            free(sbase);
            free(rbase);
        }

        /* Noncontiguous: every other int of 2 * 150000 received into a
         * vector type, and sent from one. */
        MPI_Datatype vec;
        MPI_Type_vector(150000, 1, 2, MPI_INT, &vec);
        MPI_Type_commit(&vec);
        int *strided = malloc(300000 * sizeof(int)), *flat = malloc(150000 * sizeof(int));
        for (int lap = 0; lap < 2; lap++) {
            if (rank == 0) {
                for (int i = 0; i < 150000; i++) flat[i] = i * 3 + lap;
                for (int i = 0; i < 300000; i++) strided[i] = (i % 2) ? -1 : (i / 2) * 5 + lap;
                MPI_Send(flat, 150000, MPI_INT, 1, 10, comm);
                MPI_Send(strided, 1, vec, 1, 11, comm);
            } else {
                for (int i = 0; i < 300000; i++) strided[i] = -7;
                MPI_Recv(strided, 1, vec, 0, 10, comm, MPI_STATUS_IGNORE);
                for (int i = 0; i < 300000; i++)
                    CHECK(strided[i] == ((i % 2) ? -7 : (i / 2) * 3 + lap), "strided receive: int %d is %d", i, strided[i]);
                MPI_Recv(flat, 150000, MPI_INT, 0, 11, comm, MPI_STATUS_IGNORE);
                for (int i = 0; i < 150000; i++)
                    CHECK(flat[i] == i * 5 + lap, "from a strided send: int %d is %d", i, flat[i]);
            }
        }
        free(strided);
        free(flat);
        MPI_Type_free(&vec);

        /* Unexpected (the envelope waits until the receive is posted) and
         * from ANY_SOURCE. */
        for (int lap = 0; lap < 2; lap++) {
            n = 2u << 20;
            unsigned char *sbase, *rbase;
            unsigned char *s = poisoned(n, 3, &sbase), *r = poisoned(n, 0, &rbase);
            MPI_Request q1;
            if (rank == 0) {
                fill(s, n, 900 + lap);
                MPI_Isend(s, (int)n, MPI_BYTE, 1, 12, comm, &q1);
                MPI_Send(NULL, 0, MPI_BYTE, 1, 13, comm);
                CHECK(MPI_Wait(&q1, MPI_STATUS_IGNORE) == MPI_SUCCESS, "unexpected send");
            } else {
                MPI_Status st;
                MPI_Recv(NULL, 0, MPI_BYTE, 0, 13, comm, MPI_STATUS_IGNORE);
                MPI_Probe(MPI_ANY_SOURCE, 12, comm, &st);
                CHECK(MPI_Recv(r, (int)n, MPI_BYTE, MPI_ANY_SOURCE, 12, comm, &st) == MPI_SUCCESS, "unexpected receive");
                CHECK(st.MPI_SOURCE == 0, "source %d", st.MPI_SOURCE);
                expect(r, n, 900 + lap, "unexpected receive", n);
                untouched(rbase, GUARD + n, n + 2 * GUARD, "unexpected receive", n);
            }
            free(sbase);
            free(rbase);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Comm_free(&comm);
    PASS("cma_assist");
    MPI_Finalize();
    return 0;
}
