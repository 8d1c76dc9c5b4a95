/* Large puts whose data the target's transport reads straight into the
 * window (tcp: placed, not copied out of the connection's buffer) and
 * whose origin buffer is lent to the runtime (between hosts: no copy kept
 * for failover), checked byte by byte.
 *
 * Every rank owns a 2 MiB part of every other rank's window. In a
 * lock_all epoch it puts to every other rank at once: pieces of 8 B to
 * 1 MiB + 3 bytes at odd offsets of its part, with one guard byte after
 * each (32 KiB and up: placed and lent; the small ones travel as usual and
 * must keep their order with the large ones), one with a strided origin
 * type (packed, not lent) and one with a strided target type (not
 * placed). After MPI_Win_flush_all it overwrites its origin buffers at
 * once (the runtime must not read them any more), and before the unlock
 * it gets its first piece back from one target (a get behind the puts of
 * the same epoch sees them). Then every target checks every byte of its
 * window: the pieces, the guard bytes and the parts nobody wrote. Rounds
 * repeat with new patterns, on created, dynamic and allocated windows, and
 * then once more with an exclusive lock per target.
 *
 * GW_TEST_EXPECT_PLACED=1: the gridwire counter gw_mpi_rma_placed_puts
 * (MPI_T) must have grown on every rank (the ranks' other host is reached
 * by tcp); 0 or unset: not checked (shared memory, or another MPI). */
#include "check.h"
#include "pvar_counter.h"
#include <stdint.h>
#include <string.h>

#define PART (2 << 20)
#define PIECES 8
#define ROUNDS 2
#define GUARD 0xEE

static unsigned char pattern(int origin, int target, int round, size_t off) {
    uint32_t x = (uint32_t)off * 2654435761u ^ (uint32_t)(origin * 40503 + target * 7919 + round * 977);
    return (unsigned char)(x >> 11);
}

static const size_t piece_len[PIECES] = {1048576 + 3, 8, 32768, 100, 32768 + 1, 65536 + 5, 200000, 3};

/* Offset of piece i in an origin's part of a target's window (one guard
 * byte after each piece, the first at 7). */
static size_t offs[PIECES + 1];
static void init_offs(void) {
    offs[0] = 7;
    for (int k = 0; k < PIECES; k++) offs[k + 1] = offs[k] + piece_len[k] + 1;
}
static size_t piece_off(int i) { return offs[i]; }
/* Where the strided pieces go (after the plain ones). */
#define STRIDED_OFF (piece_off(PIECES) + 64)
#define STRIDED_BLOCKS 64
#define STRIDED_BLOCK 1024

/* What byte `off` of origin `o`'s part of `t`'s window must hold after
 * round `round` (GUARD where nothing was put). */
static unsigned char expected(int o, int t, int round, size_t off) {
    for (int i = 0; i < PIECES; i++) {
        size_t at = piece_off(i);
        if (off >= at && off < at + piece_len[i]) return pattern(o, t, round, off);
    }
    /* Origin strided: 64 blocks of 1 KiB every 2 KiB of the origin
     * buffer, packed into 64 KiB contiguous at STRIDED_OFF. Target
     * strided: the next 64 KiB of origin data into every other KiB of the
     * 127 KiB after that. */
    size_t packed = (size_t)STRIDED_BLOCKS * STRIDED_BLOCK;
    if (off >= STRIDED_OFF && off < STRIDED_OFF + packed) return pattern(o, t, round, 1000000 + (off - STRIDED_OFF));
    if (off >= STRIDED_OFF + packed) {
        size_t r = off - STRIDED_OFF - packed, blk = r / STRIDED_BLOCK;
        if (blk % 2 == 0 && blk / 2 < STRIDED_BLOCKS)
            return pattern(o, t, round, 2000000 + (blk / 2) * STRIDED_BLOCK + r % STRIDED_BLOCK);
    }
    return GUARD;
}

static void one_window(const char *flavour, int exclusive, int rank, int size, int expect_placed) {
    unsigned char *mem;
    MPI_Win win;
    size_t win_bytes = (size_t)PART * (size_t)size;
    MPI_Aint *base = calloc((size_t)size, sizeof(MPI_Aint));
    if (!strcmp(flavour, "allocate")) {
        MPI_Win_allocate((MPI_Aint)win_bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win);
    } else if (!strcmp(flavour, "create")) {
        mem = malloc(win_bytes);
        MPI_Win_create(mem, (MPI_Aint)win_bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    } else {
        mem = malloc(win_bytes);
        MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win);
        MPI_Win_attach(win, mem, (MPI_Aint)win_bytes);
        MPI_Aint mine;
        MPI_Get_address(mem, &mine);
        MPI_Allgather(&mine, 1, MPI_AINT, base, 1, MPI_AINT, MPI_COMM_WORLD);
    }
    /* One origin buffer per target (a part's worth of data: byte k of it
     * goes to offset k of the part), so every put to every target is in
     * flight at once from its own memory. */
    unsigned char **src = calloc((size_t)size, sizeof(*src));
    for (int t = 0; t < size; t++) src[t] = malloc(PART + 4 * STRIDED_BLOCKS * STRIDED_BLOCK);
    unsigned char *back = malloc(piece_len[0]);
    MPI_Datatype ostrided, tstrided;
    MPI_Type_vector(STRIDED_BLOCKS, STRIDED_BLOCK, 2 * STRIDED_BLOCK, MPI_BYTE, &ostrided);
    MPI_Type_commit(&ostrided);
    MPI_Type_vector(STRIDED_BLOCKS, STRIDED_BLOCK, 2 * STRIDED_BLOCK, MPI_BYTE, &tstrided);
    MPI_Type_commit(&tstrided);
    long long placed_before = gw_counter("gw_mpi_rma_placed_puts");
    for (int round = 0; round < ROUNDS; round++) {
        memset(mem, GUARD, win_bytes);
        for (int t = 0; t < size; t++) {
            for (size_t k = 0; k < PART; k++) src[t][k] = pattern(rank, t, round, k);
            /* The strided origin's blocks (at 2 KiB steps from 1 MiB of
             * the buffer's tail) and the target-strided data after them. */
            unsigned char *tail = src[t] + PART;
            for (size_t k = 0; k < 2 * STRIDED_BLOCKS * STRIDED_BLOCK; k++) {
                size_t blk = k / STRIDED_BLOCK, in = k % STRIDED_BLOCK;
                tail[k] = blk % 2 == 0 ? pattern(rank, t, round, 1000000 + (blk / 2) * STRIDED_BLOCK + in) : 0x55;
            }
            unsigned char *tdata = tail + 2 * STRIDED_BLOCKS * STRIDED_BLOCK;
            for (size_t k = 0; k < STRIDED_BLOCKS * STRIDED_BLOCK; k++)
                tdata[k] = pattern(rank, t, round, 2000000 + k);
        }
        memset(back, 0, piece_len[0]);
        MPI_Barrier(MPI_COMM_WORLD);
        int getter = (rank + 1) % size;
        if (!exclusive) MPI_Win_lock_all(0, win);
        for (int d = 1; d < size; d++) {
            int t = (rank + d) % size;
            if (exclusive) MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t, 0, win);
            MPI_Aint part = base[t] + (MPI_Aint)PART * rank;
            for (int i = 0; i < PIECES; i++)
                MPI_Put(src[t] + piece_off(i), (int)piece_len[i], MPI_BYTE, t, part + (MPI_Aint)piece_off(i),
                        (int)piece_len[i], MPI_BYTE, win);
            unsigned char *tail = src[t] + PART;
            MPI_Put(tail, 1, ostrided, t, part + (MPI_Aint)STRIDED_OFF, STRIDED_BLOCKS * STRIDED_BLOCK, MPI_BYTE,
                    win);
            MPI_Put(tail + 2 * STRIDED_BLOCKS * STRIDED_BLOCK, STRIDED_BLOCKS * STRIDED_BLOCK, MPI_BYTE, t,
                    part + (MPI_Aint)(STRIDED_OFF + STRIDED_BLOCKS * STRIDED_BLOCK), 1, tstrided, win);
            if (exclusive) {
                MPI_Win_flush(t, win);
                memset(src[t], 0xAB, PART);
                MPI_Win_unlock(t, win);
            }
        }
        if (!exclusive) {
            MPI_Win_flush_all(win);
            /* The puts are complete: their buffers are ours again. */
            for (int t = 0; t < size; t++) memset(src[t], 0xAB, PART);
            if (getter != rank) {
                MPI_Get(back, (int)piece_len[0], MPI_BYTE, getter, base[getter] + (MPI_Aint)PART * rank +
                        (MPI_Aint)piece_off(0), (int)piece_len[0], MPI_BYTE, win);
                MPI_Win_flush(getter, win);
                for (size_t b = 0; b < piece_len[0]; b++)
                    CHECK(back[b] == pattern(rank, getter, round, piece_off(0) + b),
                          "%s round %d: byte %zu got back from rank %d is %d, not %d", flavour, round, b, getter,
                          back[b], pattern(rank, getter, round, piece_off(0) + b));
            }
            MPI_Win_unlock_all(win);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        for (int o = 0; o < size; o++) {
            const unsigned char *p = mem + (size_t)PART * o;
            for (size_t b = 0; b < PART; b++) {
                unsigned char want = o == rank ? GUARD : expected(o, rank, round, b);
                CHECK(p[b] == want, "%s%s round %d: byte %zu of rank %d's part is %d, not %d", flavour,
                      exclusive ? " (exclusive)" : "", round, b, o, p[b], want);
            }
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    long long placed = gw_counter("gw_mpi_rma_placed_puts") - placed_before;
    if (expect_placed && size > 1) CHECK(placed > 0, "%s: no put was placed (%lld)", flavour, placed);
    if (rank == 0)
        printf("%s%s: %d rounds checked, %lld puts placed on rank 0\n", flavour, exclusive ? " (exclusive)" : "",
               ROUNDS, placed);
    MPI_Type_free(&ostrided);
    MPI_Type_free(&tstrided);
    for (int t = 0; t < size; t++) free(src[t]);
    free(src);
    free(back);
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
    init_offs();
    const char *e = getenv("GW_TEST_EXPECT_PLACED");
    int expect_placed = e && atoi(e) == 1;
    one_window("create", 0, rank, size, expect_placed);
    one_window("dynamic", 0, rank, size, expect_placed);
    one_window("allocate", 0, rank, size, expect_placed);
    one_window("create", 1, rank, size, expect_placed);
    gw_counter_done();
    PASS("rma_large_put");
    MPI_Finalize();
    return 0;
}
