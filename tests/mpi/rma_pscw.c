/* Post/start/complete/wait epochs whose data must all be in the target's
 * memory when MPI_Win_wait returns, checked byte by byte right then.
 *
 * gridwire sends MPI_Win_complete's message to a target right behind the
 * epoch's operations, before their answers are in (the target applies
 * each operation as it arrives, in order): this program is what would
 * see a target end its exposure epoch before a put or accumulate landed.
 *
 * Odd ranks are origins, even ranks targets (a target then waits for
 * nothing but the origins' completions, and rewrites part of its window
 * right after MPI_Win_wait, while an origin may still wait for its
 * answers). In each round an origin puts pieces of 8 B to 1 MiB + 3
 * bytes into its own part of each target's window (odd sizes and offsets,
 * a guard byte after each), adds its rank + 1 to an integer counter of
 * each target with MPI_Accumulate (MPI_SUM), and gets a 1 MiB region
 * that the target rewrites between its epochs: in gets of 257 B to 64 KiB
 * - 1 (answered from the target's window memory), then two (large gets
 * are paced: GW_MPI_RMA_GETS_IN_FLIGHT bounds how many bytes of them are
 * asked at once, so some are held by the origin when it completes), and
 * once more into a strided origin type (not paced; across hosts the
 * target answers it from its window's memory, which the runtime reads
 * while it sends: the origin's completion must not pass it). After
 * MPI_Win_wait the target checks its whole window: every origin's pieces
 * with this round's pattern, the guard bytes, and the counter (the sum of
 * the origins' contributions over the rounds so far). After
 * MPI_Win_complete the origin checks the gets. Rounds repeat on a window
 * of MPI_Win_create and one of MPI_Win_allocate.
 *
 * Then small epochs: EPOCHS epochs of one 8-byte put (the epoch number)
 * from each origin to each target, the target checking every one after
 * MPI_Win_wait, then as many of two puts and an accumulate (which must
 * send the held put before it) checked likewise, then epochs of gets of
 * values the target wrote before posting: one 8-byte get alone (held to
 * carry the complete), and one of BIG bytes followed by one of 8 (the
 * large get's answer is waited for before the complete, which must not
 * wait for the small one held behind it), checked after MPI_Win_complete. With
 * GW_TEST_EXPECT_EPOCH_MSGS set (gridwire, 2 ranks on 2 hosts over tcp),
 * each rank counts the tcp messages it sent during the one-put epochs
 * (MPI_T counter gw_tcp_sent_msgs): one per epoch each way (post; the
 * put carrying the complete), checked as at most 1.25 per epoch (it was
 * 2: post and the put's answer; put and complete). */
#include "check.h"
#include "pvar_counter.h"
#include <stdint.h>
#include <string.h>

#define PIECES 6
#define ROUNDS 8
#define GUARD 0xA5
#define STABLE (1 << 20)
#define BLOCK 1024 /* the strided get: blocks of BLOCK bytes, 2 * BLOCK apart */

static const size_t piece_len[PIECES] = {8, 100, 32769, 300001, 1048579, 3};
#define MEDIUM 5
static const size_t medium_len[MEDIUM] = {257, 4096, 8191, 40000, 65535};
static size_t offs[PIECES + 1]; /* each piece's offset in an origin's part */

static int rank, size;

static unsigned char pattern(int origin, int target, int round, size_t off) {
    uint32_t x = (uint32_t)off * 2654435761u ^ (uint32_t)(origin * 40503 + target * 7919 + round * 977);
    return (unsigned char)(x >> 13);
}

/* The region a target rewrites after each exposure epoch: a get that
 * reached it after MPI_Win_wait returned would read the next round's. */
static unsigned char stable_byte(int target, int round, size_t off) {
    return (unsigned char)((off * 31 + (size_t)target * 101 + (size_t)round * 59) >> 3);
}

/* Window layout: [counter: 8 bytes][stable: STABLE][one part per rank]. */
static size_t part_len(void) { return offs[PIECES] + 16; }
static size_t part_at(int origin) { return 8 + STABLE + (size_t)origin * part_len(); }
static size_t win_len(void) { return part_at(size); }

static int is_origin(int r) { return r % 2 == 1; }

static void check_window(const unsigned char *mem, int round, long long counter_want, const char *kind) {
    long long counter;
    memcpy(&counter, mem, sizeof counter);
    CHECK(counter == counter_want, "%s round %d: counter %lld, want %lld", kind, round, counter, counter_want);
    for (int o = 0; o < size; o++) {
        const unsigned char *part = mem + part_at(o);
        int i = 0;
        for (size_t off = 0; off < part_len(); off++) {
            while (i < PIECES && off >= offs[i] + piece_len[i]) i++;
            int in_piece = i < PIECES && off >= offs[i];
            unsigned char want = (is_origin(o) && in_piece) ? pattern(o, rank, round, off) : GUARD;
            if (part[off] != want) {
                CHECK(0, "%s round %d: origin %d's part, byte %zu (piece %d): %d, want %d", kind, round, o,
                      off, in_piece ? i : -1, part[off], want);
            }
        }
    }
}

/* The ranks on the other side (origins for a target, targets for an
 * origin): their world ranks (the caller frees them) and their group. */
static int *other_side(int *npeers, MPI_Group *peers) {
    MPI_Group world;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int *peer = malloc(sizeof(int) * (size_t)size);
    CHECK(peer, "malloc");
    *npeers = 0;
    for (int r = 0; r < size; r++)
        if (is_origin(r) != is_origin(rank)) peer[(*npeers)++] = r;
    MPI_Group_incl(world, *npeers, peer, peers);
    MPI_Group_free(&world);
    return peer;
}

/* Odd ranks are origins, even ranks targets: a target's MPI_Win_wait
 * returns as soon as the origins' completions arrive (it waits for
 * nothing else), and it then checks and rewrites its window while an
 * origin may still be waiting for the answers of its epoch. */
static void rounds(const char *kind, MPI_Win w, unsigned char *mem) {
    MPI_Group peers;
    int npeers = 0;
    int *peer = other_side(&npeers, &peers);
    size_t plen = part_len();
    unsigned char *src = malloc(plen * (size_t)npeers + 1), *got = malloc(STABLE * (size_t)npeers + 1);
    unsigned char *strided = malloc(2 * STABLE * (size_t)npeers + 1);
    CHECK(src && got && strided, "malloc");
    MPI_Datatype every_other;
    MPI_Type_vector(STABLE / BLOCK, BLOCK, 2 * BLOCK, MPI_BYTE, &every_other);
    MPI_Type_commit(&every_other);
    /* Before the first exposure: counter 0, the stable region, guards. */
    memset(mem, 0, 8);
    for (size_t k = 0; k < STABLE; k++) mem[8 + k] = stable_byte(rank, 0, k);
    memset(mem + part_at(0), GUARD, (size_t)size * plen);
    MPI_Barrier(MPI_COMM_WORLD);
    long long contributions = 0; /* of every origin, per round */
    for (int o = 0; o < size; o++)
        if (is_origin(o)) contributions += o + 1;
    for (int round = 0; round < ROUNDS; round++) {
        if (!is_origin(rank)) {
            MPI_Win_post(peers, 0, w);
            MPI_Win_wait(w);
            /* Outside any exposure epoch: the next round's region, at once
             * (a get still on its way would read it). */
            for (size_t k = 0; k < STABLE; k++) mem[8 + k] = stable_byte(rank, round + 1, k);
            check_window(mem, round, contributions * (round + 1), kind);
            continue;
        }
        MPI_Win_start(peers, 0, w);
        for (int j = 0; j < npeers; j++) {
            int t = peer[j];
            unsigned char *from = src + (size_t)j * plen, *into = got + (size_t)j * STABLE;
            for (size_t off = 0; off < plen; off++) from[off] = pattern(rank, t, round, off);
            for (int i = 0; i < PIECES; i++) {
                MPI_Put(from + offs[i], (int)piece_len[i], MPI_BYTE, t, (MPI_Aint)(part_at(rank) + offs[i]),
                        (int)piece_len[i], MPI_BYTE, w);
            }
            long long one = rank + 1;
            MPI_Accumulate(&one, 1, MPI_LONG_LONG, t, 0, 1, MPI_LONG_LONG, MPI_SUM, w);
            /* First gets of medium sizes (a target answers those of 257 B
             * to 64 KiB - 1 straight from its window's memory: read while
             * it sends, before it handles this origin's completion), then
             * two large ones over the rest: with a small
             * GW_MPI_RMA_GETS_IN_FLIGHT the second is held by the origin
             * until the first is answered. */
            memset(into, 0, STABLE);
            size_t at = 0;
            for (int i = 0; i < MEDIUM; i++) {
                MPI_Get(into + at, (int)medium_len[i], MPI_BYTE, t, (MPI_Aint)(8 + at), (int)medium_len[i], MPI_BYTE,
                        w);
                at += medium_len[i];
            }
            size_t half = (STABLE - at) / 2;
            MPI_Get(into + at, (int)half, MPI_BYTE, t, (MPI_Aint)(8 + at), (int)half, MPI_BYTE, w);
            MPI_Get(into + at + half, (int)(STABLE - at - half), MPI_BYTE, t, (MPI_Aint)(8 + at + half),
                    (int)(STABLE - at - half), MPI_BYTE, w);
            unsigned char *spread = strided + (size_t)j * 2 * STABLE;
            memset(spread, 0, 2 * STABLE);
            MPI_Get(spread, 1, every_other, t, 8, STABLE, MPI_BYTE, w);
        }
        MPI_Win_complete(w);
        for (int j = 0; j < npeers; j++) {
            const unsigned char *into = got + (size_t)j * STABLE;
            for (size_t k = 0; k < STABLE; k++)
                CHECK(into[k] == stable_byte(peer[j], round, k), "%s round %d: get from %d, byte %zu: %d", kind,
                      round, peer[j], k, into[k]);
            const unsigned char *spread = strided + (size_t)j * 2 * STABLE;
            for (size_t k = 0; k < 2 * STABLE; k++) {
                size_t block = k / (2 * BLOCK), in = k % (2 * BLOCK);
                unsigned char want = in < BLOCK ? stable_byte(peer[j], round, block * BLOCK + in) : 0;
                CHECK(spread[k] == want, "%s round %d: strided get from %d, byte %zu: %d, want %d", kind, round,
                      peer[j], k, spread[k], want);
            }
        }
    }
    MPI_Type_free(&every_other);
    free(src);
    free(got);
    free(strided);
    free(peer);
    MPI_Group_free(&peers);
}

#define EPOCHS 200

/* The small epochs of the header, on a created window of 64 bytes per
 * origin (2 longs: the put's, the second put's; 1 long: the sum). */
#define BIG (96 << 10)
static void small_epochs(void) {
    size_t nl = (size_t)size * 4 + BIG / sizeof(long);
    long *mem = calloc(nl, sizeof(long)), *big = malloc(BIG * (size_t)size);
    CHECK(mem && big, "calloc");
    MPI_Win w;
    MPI_Win_create(mem, (MPI_Aint)(nl * sizeof(long)), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &w);
    MPI_Group peers;
    int npeers = 0;
    int *peer = other_side(&npeers, &peers);
    const char *expect = getenv("GW_TEST_EXPECT_EPOCH_MSGS");
    int count_msgs = expect && *expect;
    for (int pass = 0; pass < 2; pass++) {
        long long before = count_msgs && pass == 0 ? gw_counter("gw_tcp_sent_msgs") : 0;
        for (long e = 1; e <= EPOCHS; e++) {
            if (is_origin(rank)) {
                long v = e * 1000 + rank, v2 = -e, one = 1;
                MPI_Win_start(peers, 0, w);
                for (int i = 0; i < npeers; i++) {
                    MPI_Put(&v, 1, MPI_LONG, peer[i], 4 * rank, 1, MPI_LONG, w);
                    if (pass == 1) {
                        MPI_Put(&v2, 1, MPI_LONG, peer[i], 4 * rank + 1, 1, MPI_LONG, w);
                        MPI_Accumulate(&one, 1, MPI_LONG, peer[i], 4 * rank + 2, 1, MPI_LONG, MPI_SUM, w);
                    }
                }
                MPI_Win_complete(w);
            } else {
                MPI_Win_post(peers, 0, w);
                MPI_Win_wait(w);
                for (int i = 0; i < npeers; i++) {
                    int o = peer[i];
                    CHECK(mem[4 * o] == e * 1000 + o, "pass %d epoch %ld: origin %d's put holds %ld", pass, e, o,
                          mem[4 * o]);
                    if (pass == 1) {
                        CHECK(mem[4 * o + 1] == -e, "epoch %ld: origin %d's second put holds %ld", e, o,
                              mem[4 * o + 1]);
                        CHECK(mem[4 * o + 2] == e, "epoch %ld: origin %d's sum is %ld", e, o, mem[4 * o + 2]);
                    }
                }
            }
        }
        if (count_msgs && pass == 0) {
            long long sent = gw_counter("gw_tcp_sent_msgs") - before;
            CHECK(sent * 4 <= EPOCHS * 5, "rank %d sent %lld tcp messages in %d one-put epochs (at most %d)", rank,
                  sent, EPOCHS, EPOCHS * 5 / 4);
            CHECK(sent >= EPOCHS, "rank %d sent %lld tcp messages in %d epochs: not over tcp?", rank, sent,
                  EPOCHS);
        }
    }
    long *got = malloc(sizeof(long) * (size_t)npeers);
    CHECK(got, "malloc");
    for (int pass = 0; pass < 2; pass++) {
        for (long e = 1; e <= EPOCHS / 4; e++) {
            if (is_origin(rank)) {
                MPI_Win_start(peers, 0, w);
                for (int i = 0; i < npeers; i++) {
                    long *b = big + (size_t)i * (BIG / sizeof(long));
                    got[i] = -1;
                    if (pass == 1) {
                        b[0] = b[BIG / sizeof(long) - 1] = 0;
                        MPI_Get(b, BIG, MPI_BYTE, peer[i], size * 4, BIG, MPI_BYTE, w);
                    }
                    MPI_Get(&got[i], 1, MPI_LONG, peer[i], 4 * rank + 3, 1, MPI_LONG, w);
                }
                MPI_Win_complete(w);
                for (int i = 0; i < npeers; i++) {
                    long *b = big + (size_t)i * (BIG / sizeof(long));
                    CHECK(got[i] == e * 7 + peer[i], "get pass %d epoch %ld from %d: %ld", pass, e, peer[i], got[i]);
                    if (pass == 1)
                        CHECK(b[0] == e && b[BIG / sizeof(long) - 1] == -e, "large get epoch %ld from %d: %ld %ld", e,
                              peer[i], b[0], b[BIG / sizeof(long) - 1]);
                }
            } else {
                for (int i = 0; i < npeers; i++) mem[4 * peer[i] + 3] = e * 7 + rank;
                mem[size * 4] = e;
                mem[nl - 1] = -e;
                MPI_Win_post(peers, 0, w);
                MPI_Win_wait(w);
            }
        }
    }
    free(got);
    gw_counter_done();
    free(big);
    MPI_Group_free(&peers);
    free(peer);
    MPI_Win_free(&w);
    free(mem);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    offs[0] = 7;
    for (int i = 0; i < PIECES; i++) offs[i + 1] = offs[i] + piece_len[i] + 1;

    unsigned char *mem = malloc(win_len());
    CHECK(mem, "malloc");
    MPI_Win w;
    MPI_Win_create(mem, (MPI_Aint)win_len(), 1, MPI_INFO_NULL, MPI_COMM_WORLD, &w);
    rounds("created", w, mem);
    MPI_Win_free(&w);
    free(mem);

    unsigned char *amem = NULL;
    MPI_Win_allocate((MPI_Aint)win_len(), 1, MPI_INFO_NULL, MPI_COMM_WORLD, &amem, &w);
    rounds("allocated", w, amem);
    MPI_Win_free(&w);

    small_epochs();

    PASS("rma_pscw");
    MPI_Finalize();
    return 0;
}
