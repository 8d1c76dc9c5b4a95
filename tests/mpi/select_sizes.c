/* Measured, size-aware selection and the routes of rendezvous answers
 * and RMA (issue 13), between two emulated hosts.
 *
 * GW_TEST_MODE=sizes (run with GW_SELECT=measured): rank 0 sends rank 1
 * many messages on one communicator, small and large interleaved (eager
 * ones of 64 B, 300 B and 24 KiB, rendezvous ones of 320 KiB), all posted
 * nonblocking with one tag, so each must match the receive posted in the
 * same place: any reordering across the pair's links shows as a wrong
 * size or number. Every message is numbered and checksummed. Rank 0
 * prints `SENT small_msgs=.. small_bytes=.. big_msgs=.. big_bytes=..`,
 * which the test compares with gwrun --stats per stack.
 *
 * GW_TEST_MODE=route (default selection): a communicator with
 * gw_methods=udp carries only rendezvous sends from rank 0 and one-sided
 * gets by rank 0 from rank 1's window on it; rank 1 sends nothing on it
 * itself, so everything rank 1 sends it (clear-to-send answers, RMA
 * answers with the data) must go on udp. Rank 0 prints
 * `SENT rndv=.. gets=.. get_bytes=..`. */
#include "check.h"
#include <stdint.h>
#include <string.h>

static void fill(unsigned char *b, long n, int i) {
    uint32_t x = 2654435761u * (uint32_t)(i + 1);
    memcpy(b, &i, sizeof i);
    for (long k = sizeof i; k < n; k++) {
        x = x * 1103515245u + 12345u;
        b[k] = (unsigned char)(x >> 16);
    }
}

static void verify(const unsigned char *b, long n, int i, const char *what) {
    int got;
    memcpy(&got, b, sizeof got);
    CHECK(got == i, "%s: message %d arrived where %d was next (order broken)", what, got, i);
    unsigned char *want = malloc(n);
    fill(want, n, i);
    CHECK(memcmp(want, b, n) == 0, "%s: message %d corrupted", what, i);
    free(want);
}

#define MSGS 480
#define WINDOW 24
#define BIG_MAX (320 * 1024)

/* The size of message i: mostly small, a large one now and then. */
static long size_of(int i) {
    switch (i % 12) {
    case 3: return 24 * 1024;   /* eager, above the forced crossing */
    case 8: return BIG_MAX;     /* rendezvous */
    case 5: case 10: return 300;
    default: return 64;
    }
}

static int is_big(long n) { return n >= 10000; }

static void sizes(int rank) {
    /* WINDOW messages in flight at a time, in order, one tag. */
    unsigned char *bufs = malloc((size_t)WINDOW * BIG_MAX);
    MPI_Request r[WINDOW];
    long small_msgs = 0, small_bytes = 0, big_msgs = 0, big_bytes = 0;
    for (int base = 0; base < MSGS; base += WINDOW) {
        for (int j = 0; j < WINDOW; j++) {
            int i = base + j;
            long n = size_of(i);
            unsigned char *b = bufs + (size_t)j * BIG_MAX;
            if (rank == 0) {
                fill(b, n, i);
                CHECK(MPI_Isend(b, (int)n, MPI_BYTE, 1, 5, MPI_COMM_WORLD, &r[j]) == MPI_SUCCESS,
                      "isend %d", i);
                if (is_big(n)) {
                    big_msgs++;
                    big_bytes += n;
                } else {
                    small_msgs++;
                    small_bytes += n;
                }
            } else {
                CHECK(MPI_Irecv(b, BIG_MAX, MPI_BYTE, 0, 5, MPI_COMM_WORLD, &r[j]) == MPI_SUCCESS,
                      "irecv %d", i);
            }
        }
        MPI_Status st[WINDOW];
        CHECK(MPI_Waitall(WINDOW, r, st) == MPI_SUCCESS, "waitall at %d", base);
        if (rank == 1) {
            for (int j = 0; j < WINDOW; j++) {
                int i = base + j, n;
                MPI_Get_count(&st[j], MPI_BYTE, &n);
                CHECK(n == size_of(i), "message %d: %d bytes, expected %ld (order broken)", i, n,
                      size_of(i));
                verify(bufs + (size_t)j * BIG_MAX, n, i, "world");
            }
        }
    }
    /* A reply, so the way back carries something too. */
    int ok = 1, got = 0;
    if (rank == 1) MPI_Send(&ok, 1, MPI_INT, 0, 6, MPI_COMM_WORLD);
    else MPI_Recv(&got, 1, MPI_INT, 1, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (rank == 0) {
        CHECK(got == 1, "reply %d", got);
        printf("SENT small_msgs=%ld small_bytes=%ld big_msgs=%ld big_bytes=%ld\n", small_msgs,
               small_bytes, big_msgs, big_bytes);
        fflush(stdout);
    }
    free(bufs);
}

#define RNDV 200
#define RNDV_SIZE (128 * 1024)
#define GETS 48
#define GET_SIZE (64 * 1024)

static void route(int rank) {
    MPI_Info want_udp;
    MPI_Info_create(&want_udp);
    MPI_Info_set(want_udp, "gw_methods", "udp");
    MPI_Comm udp;
    CHECK(MPI_Comm_dup_with_info(MPI_COMM_WORLD, want_udp, &udp) == MPI_SUCCESS, "dup udp");
    MPI_Info_free(&want_udp);
    unsigned char *b = malloc(RNDV_SIZE);
    for (int i = 0; i < RNDV; i++) {
        if (rank == 0) {
            fill(b, RNDV_SIZE, i);
            CHECK(MPI_Send(b, RNDV_SIZE, MPI_BYTE, 1, 3, udp) == MPI_SUCCESS, "send %d", i);
        } else {
            CHECK(MPI_Recv(b, RNDV_SIZE, MPI_BYTE, 0, 3, udp, MPI_STATUS_IGNORE) == MPI_SUCCESS,
                  "recv %d", i);
            verify(b, RNDV_SIZE, i, "udp communicator");
        }
    }
    free(b);
    /* One-sided: rank 0 gets rank 1's window in pieces. */
    long wsize = (long)GETS * GET_SIZE;
    unsigned char *mem = malloc(wsize), *into = malloc(wsize);
    for (long k = 0; k < wsize; k++) mem[k] = (unsigned char)(rank * 31 + k * 7);
    MPI_Win win;
    CHECK(MPI_Win_create(mem, wsize, 1, MPI_INFO_NULL, udp, &win) == MPI_SUCCESS, "win_create");
    CHECK(MPI_Win_fence(0, win) == MPI_SUCCESS, "fence");
    if (rank == 0) {
        for (int g = 0; g < GETS; g++) {
            CHECK(MPI_Get(into + (long)g * GET_SIZE, GET_SIZE, MPI_BYTE, 1, (MPI_Aint)g * GET_SIZE,
                          GET_SIZE, MPI_BYTE, win) == MPI_SUCCESS,
                  "get %d", g);
        }
    }
    CHECK(MPI_Win_fence(0, win) == MPI_SUCCESS, "fence");
    if (rank == 0) {
        for (long k = 0; k < wsize; k++)
            CHECK(into[k] == (unsigned char)(31 + k * 7), "got byte %ld wrong", k);
    }
    MPI_Win_free(&win);
    free(mem);
    free(into);
    MPI_Comm_free(&udp);
    if (rank == 0) {
        printf("SENT rndv=%d gets=%d get_bytes=%ld\n", RNDV, GETS, wsize);
        fflush(stdout);
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size == 2, "needs 2 ranks, got %d", size);
    const char *mode = getenv("GW_TEST_MODE");
    if (mode && strcmp(mode, "route") == 0) {
        route(rank);
    } else {
        sizes(rank);
    }
    PASS("select_sizes");
    MPI_Finalize();
    return 0;
}
