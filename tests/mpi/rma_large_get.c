/* Large gets whose answers the transport reads straight into the result
 * buffer (tcp: the answer's data is placed, not copied out of the
 * connection's buffer), checked byte by byte.
 *
 * Every rank fills 4 MiB of window memory with a pattern of its rank and
 * the byte's offset, then in a lock_all epoch gets from every other rank
 * at once: 16 gets per target of 32 KiB to 1 MiB + 3 bytes at odd
 * offsets, into distinct parts of one result buffer, some as MPI_Rget,
 * one into a strided origin type (not placed: delivered whole and
 * unpacked), one smaller than the buffer it goes into (the rest of the
 * buffer must stay untouched); then flush_all and every byte is checked,
 * the guard bytes between the parts included. Rounds repeat with new
 * patterns, on created, dynamic and allocated windows.
 *
 * GW_TEST_EXPECT_PLACED=1: the gridwire counter gw_mpi_rma_placed_answers
 * (MPI_T) must have grown on every rank (the ranks' other host is reached
 * by tcp); 0 or unset: not checked (shared memory, or another MPI). */
#include "check.h"
#include "pvar_counter.h"
#include <stdint.h>
#include <string.h>

#define WIN_BYTES (4 << 20)
#define GETS 16
#define ROUNDS 2

static unsigned char pattern(int rank, int round, size_t off) {
    uint32_t x = (uint32_t)off * 2654435761u ^ (uint32_t)(rank * 40503 + round * 977);
    return (unsigned char)(x >> 13);
}

/* Size and target offset of get i (bytes). */
static size_t get_len(int i) { return i == 0 ? 1048576 + 3 : (size_t)(32768 + i * 61441); }
static size_t get_off(int i) { return (size_t)i * 131071 + 5; }

static void one_window(const char *flavour, int rank, int size, int expect_placed) {
    unsigned char *mem;
    MPI_Win win;
    MPI_Aint *base = calloc((size_t)size, sizeof(MPI_Aint));
    if (!strcmp(flavour, "allocate")) {
        MPI_Win_allocate(WIN_BYTES, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win);
    } else if (!strcmp(flavour, "create")) {
        mem = malloc(WIN_BYTES);
        MPI_Win_create(mem, WIN_BYTES, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    } else {
        mem = malloc(WIN_BYTES);
        MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win);
        MPI_Win_attach(win, mem, WIN_BYTES);
        MPI_Aint mine;
        MPI_Get_address(mem, &mine);
        MPI_Allgather(&mine, 1, MPI_AINT, base, 1, MPI_AINT, MPI_COMM_WORLD);
    }
    /* Each target's answers go to their own part of one buffer, with a
     * guard byte after each get; get 1 goes to a buffer twice its size. */
    size_t per_target = 0;
    for (int i = 0; i < GETS; i++) per_target += get_len(i) * (i == 1 ? 2 : 1) + 1;
    unsigned char *out = malloc(per_target * (size_t)size);
    /* The strided get: 64 blocks of 1 KiB every 2 KiB (from target offset 77). */
    MPI_Datatype strided;
    MPI_Type_vector(64, 1024, 2048, MPI_BYTE, &strided);
    MPI_Type_commit(&strided);
    unsigned char *sbuf = malloc(64 * 2048);
    long long placed_before = gw_counter("gw_mpi_rma_placed_answers");
    for (int round = 0; round < ROUNDS; round++) {
        for (size_t o = 0; o < WIN_BYTES; o++) mem[o] = pattern(rank, round, o);
        memset(out, 0xEE, per_target * (size_t)size);
        memset(sbuf, 0xEE, 64 * 2048);
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Win_lock_all(0, win);
        MPI_Request reqs[GETS];
        int nreq = 0;
        int strided_target = (rank + 1) % size;
        for (int t = 0; t < size; t++) {
            if (t == rank) continue;
            unsigned char *at = out + per_target * (size_t)t;
            for (int i = 0; i < GETS; i++) {
                size_t len = get_len(i);
                MPI_Aint disp = base[t] + (MPI_Aint)get_off(i);
                if (i % 5 == 2 && nreq < GETS)
                    MPI_Rget(at, (int)len, MPI_BYTE, t, disp, (int)len, MPI_BYTE, win, &reqs[nreq++]);
                else
                    MPI_Get(at, (int)len, MPI_BYTE, t, disp, (int)len, MPI_BYTE, win);
                at += len * (i == 1 ? 2 : 1) + 1;
            }
            if (t == strided_target)
                MPI_Get(sbuf, 1, strided, t, base[t] + 77, 64 * 1024, MPI_BYTE, win);
        }
        MPI_Waitall(nreq, reqs, MPI_STATUSES_IGNORE);
        MPI_Win_flush_all(win);
        MPI_Win_unlock_all(win);
        for (int t = 0; t < size; t++) {
            if (t == rank) continue;
            unsigned char *at = out + per_target * (size_t)t;
            for (int i = 0; i < GETS; i++) {
                size_t len = get_len(i), room = len * (i == 1 ? 2 : 1);
                for (size_t b = 0; b < len; b++)
                    CHECK(at[b] == pattern(t, round, get_off(i) + b),
                          "%s round %d: get %d from rank %d: byte %zu is %d, not %d", flavour, round, i, t, b,
                          at[b], pattern(t, round, get_off(i) + b));
                for (size_t b = len; b <= room; b++)
                    CHECK(at[b] == 0xEE, "%s round %d: get %d from rank %d wrote byte %zu past its %zu", flavour,
                          round, i, t, b, len);
                at += room + 1;
            }
            if (t == strided_target)
                for (size_t b = 0; b < 64 * 2048; b++) {
                    unsigned char want = (b % 2048) < 1024 ? pattern(t, round, 77 + (b / 2048) * 1024 + b % 2048)
                                                           : 0xEE;
                    CHECK(sbuf[b] == want, "%s round %d: strided get from rank %d: byte %zu is %d, not %d",
                          flavour, round, t, b, sbuf[b], want);
                }
        }
        /* Nobody refills its memory while another still gets from it. */
        MPI_Barrier(MPI_COMM_WORLD);
    }
    long long placed = gw_counter("gw_mpi_rma_placed_answers") - placed_before;
    if (expect_placed && size > 1)
        CHECK(placed > 0, "%s: no get answer was placed (%lld)", flavour, placed);
    if (rank == 0) printf("%s: %d rounds checked, %lld answers placed on rank 0\n", flavour, ROUNDS, placed);
    MPI_Type_free(&strided);
    free(sbuf);
    free(out);
    if (!strcmp(flavour, "dynamic")) MPI_Win_detach(win, mem);
    MPI_Win_free(&win);
    if (strcmp(flavour, "allocate")) free(mem);
    free(base);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *e = getenv("GW_TEST_EXPECT_PLACED");
    int expect_placed = e && atoi(e) == 1;
    one_window("create", rank, size, expect_placed);
    one_window("dynamic", rank, size, expect_placed);
    one_window("allocate", rank, size, expect_placed);
    gw_counter_done();
    PASS("rma_large_get");
    MPI_Finalize();
    return 0;
}
