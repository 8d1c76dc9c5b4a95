/* The fast path of the one-sided calls (crates/capi/src/rma/fast.rs,
 * crates/mpi/src/rma/fast.rs) gives the general path's results and
 * errors in every case it could get wrong, on windows from
 * MPI_Win_allocate and MPI_Win_allocate_shared:
 *   - values: puts and gets of 1 to 4096 bytes at displacements scaled by
 *     a displacement unit of 8, to the right neighbour and to the rank
 *     itself, read back by MPI_Get and by the target from its memory;
 *   - errors: outside any epoch, after the unlock, after a fence with
 *     MPI_MODE_NOSUCCEED (MPI_ERR_RMA_SYNC); one byte past the window
 *     (MPI_ERR_RMA_RANGE) while the last bytes work; negative
 *     displacement (MPI_ERR_DISP); bad ranks (MPI_ERR_RANK); NULL buffers
 *     (MPI_ERR_BUFFER); negative counts (MPI_ERR_COUNT); different type
 *     signatures (MPI_ERR_TYPE); an operation the type lacks (MPI_ERR_OP);
 *     flush to a rank not locked; MPI_PROC_NULL succeeds; a user error
 *     handler sees exactly the failing calls;
 *   - a freed window's handle (used just before, so cached by the thread)
 *     is MPI_ERR_WIN, also after a new window took its slot;
 *   - accumulates of different operations to the same location stay
 *     atomic with respect to each other, fast ones (sum, max, fetch-and-op,
 *     get-accumulate, compare-and-swap) mixed with ones of a derived type
 *     (general path): every rank hammers rank 0, the totals are exact and
 *     each rank's fetched values increase;
 *   - derived datatypes on either side still move the right bytes.
 * Any rank count; on several hosts the targets elsewhere go by requests. */
#include "check.h"
#include <string.h>

static int rank, size, right;

static int class_of(int rc) {
    int c;
    MPI_Error_class(rc, &c);
    return c;
}

static unsigned char pattern(int origin, int piece, int i) {
    return (unsigned char)(origin * 31 + piece * 7 + i + 1);
}

/* Each piece: (datatype, count, bytes), at displacement piece * 520 (units of 8). */
#define PIECES 6
#define UNIT 8
#define STRIDE 520
static MPI_Datatype piece_type(int k) {
    MPI_Datatype t[PIECES] = {MPI_CHAR, MPI_INT, MPI_DOUBLE, MPI_INT, MPI_CHAR, MPI_CHAR};
    return t[k];
}
static const int piece_count[PIECES] = {1, 1, 1, 4, 24, 4096};
static const int piece_bytes[PIECES] = {1, 4, 8, 16, 24, 4096};

/* Puts every piece to `target` as origin `me` (its rank in the window). */
static void put_pieces(MPI_Win w, int me, int target, unsigned char *got) {
    unsigned char buf[4096];
    for (int k = 0; k < PIECES; k++) {
        for (int i = 0; i < piece_bytes[k]; i++) buf[i] = pattern(me, k, i);
        MPI_Aint disp = (MPI_Aint)k * STRIDE;
        if (k % 2)
            CHECK(MPI_Put(buf, piece_count[k], piece_type(k), target, disp, piece_count[k], piece_type(k), w) == MPI_SUCCESS, "put %d", k);
        else
            CHECK(MPI_Put_c(buf, piece_count[k], piece_type(k), target, disp, piece_count[k], piece_type(k), w) == MPI_SUCCESS, "put_c %d", k);
        CHECK(MPI_Win_flush(target, w) == MPI_SUCCESS, "flush");
        memset(got, 0, 4096);
        CHECK(MPI_Get(got, piece_count[k], piece_type(k), target, disp, piece_count[k], piece_type(k), w) == MPI_SUCCESS, "get %d", k);
        CHECK(MPI_Win_flush_local(target, w) == MPI_SUCCESS, "flush_local");
        for (int i = 0; i < piece_bytes[k]; i++)
            CHECK(got[i] == pattern(me, k, i), "piece %d byte %d: got %d want %d (target %d)", k, i, got[i], pattern(me, k, i), target);
    }
}

static void check_pieces(const unsigned char *mem, int origin) {
    for (int k = 0; k < PIECES; k++)
        for (int i = 0; i < piece_bytes[k]; i++) {
            unsigned char v = mem[(size_t)k * STRIDE * UNIT + i];
            CHECK(v == pattern(origin, k, i), "memory: piece %d byte %d from %d: %d", k, i, origin, v);
        }
}

static void values(int shared) {
    const MPI_Aint bytes = (PIECES - 1) * STRIDE * UNIT + 4096;
    unsigned char *mem, got[4096];
    MPI_Win w;
    if (shared) {
        MPI_Comm node;
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
        int nrank, nsize;
        MPI_Comm_rank(node, &nrank);
        MPI_Comm_size(node, &nsize);
        MPI_Win_allocate_shared(bytes, UNIT, MPI_INFO_NULL, node, &mem, &w);
        MPI_Win_lock_all(0, w);
        put_pieces(w, nrank, (nrank + 1) % nsize, got);
        MPI_Win_unlock_all(w);
        MPI_Barrier(node);
        MPI_Win_lock(MPI_LOCK_SHARED, nrank, 0, w);
        check_pieces(mem, (nrank + nsize - 1) % nsize);
        MPI_Win_unlock(nrank, w);
        MPI_Win_free(&w);
        MPI_Comm_free(&node);
        return;
    }
    MPI_Win_allocate(bytes, UNIT, MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &w);
    /* The rank itself first (its own memory), then the right neighbour. */
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, w);
    put_pieces(w, rank, rank, got);
    MPI_Win_unlock(rank, w);
    MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, w);
    check_pieces(mem, rank);
    MPI_Win_unlock(rank, w);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock(MPI_LOCK_SHARED, right, 0, w);
    put_pieces(w, rank, right, got);
    MPI_Win_unlock(right, w);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, w);
    check_pieces(mem, (rank + size - 1) % size);
    MPI_Win_unlock(rank, w);
    MPI_Win_free(&w);
}

static int handler_calls, handler_class;
static void count_errors(MPI_Win *w, int *code, ...) {
    (void)w;
    handler_calls++;
    MPI_Error_class(*code, &handler_class);
}

static void errors(void) {
    int *mem;
    MPI_Win w;
    /* 16 ints of 4 bytes, displacement unit 4. */
    MPI_Win_allocate(64, 4, MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &w);
    MPI_Win_set_errhandler(w, MPI_ERRORS_RETURN);
    int v[2] = {7, 8}, r = 0, cmp = 0;
    long lv = 1, lr = 0;
    /* No epoch yet. */
    CHECK(class_of(MPI_Put(v, 1, MPI_INT, right, 0, 1, MPI_INT, w)) == MPI_ERR_RMA_SYNC, "put outside an epoch");
    CHECK(class_of(MPI_Get(&r, 1, MPI_INT, right, 0, 1, MPI_INT, w)) == MPI_ERR_RMA_SYNC, "get outside an epoch");
    CHECK(class_of(MPI_Accumulate(v, 1, MPI_INT, right, 0, 1, MPI_INT, MPI_SUM, w)) == MPI_ERR_RMA_SYNC, "acc outside");
    CHECK(class_of(MPI_Fetch_and_op(&lv, &lr, MPI_LONG, right, 0, MPI_SUM, w)) == MPI_ERR_RMA_SYNC, "fop outside");
    CHECK(class_of(MPI_Compare_and_swap(v, &cmp, &r, MPI_INT, right, 0, w)) == MPI_ERR_RMA_SYNC, "cas outside");
    CHECK(class_of(MPI_Win_flush(right, w)) == MPI_ERR_RMA_SYNC, "flush outside");
    CHECK(class_of(MPI_Win_flush_all(w)) == MPI_ERR_RMA_SYNC, "flush_all outside");
    CHECK(class_of(MPI_Win_flush_local_all(w)) == MPI_ERR_RMA_SYNC, "flush_local_all outside");

    MPI_Win_lock(MPI_LOCK_SHARED, right, 0, w);
    /* The last bytes of the window work (displacements in units of 4). */
    CHECK(MPI_Put(v, 1, MPI_INT, right, 15, 1, MPI_INT, w) == MPI_SUCCESS, "the last int");
    CHECK(MPI_Put(v, 2, MPI_INT, right, 14, 2, MPI_INT, w) == MPI_SUCCESS, "the last two ints");
    CHECK(MPI_Put(v, 4, MPI_CHAR, right, 15, 4, MPI_CHAR, w) == MPI_SUCCESS, "the last four bytes");
    CHECK(MPI_Fetch_and_op(&lv, &lr, MPI_LONG, right, 14, MPI_SUM, w) == MPI_SUCCESS, "fop on the last long");
    CHECK(class_of(MPI_Put(v, 1, MPI_INT, right, 16, 1, MPI_INT, w)) == MPI_ERR_RMA_RANGE, "one int past the end");
    CHECK(class_of(MPI_Put(v, 2, MPI_INT, right, 15, 2, MPI_INT, w)) == MPI_ERR_RMA_RANGE, "two ints over the end");
    CHECK(class_of(MPI_Put(v, 1, MPI_CHAR, right, 16, 1, MPI_CHAR, w)) == MPI_ERR_RMA_RANGE, "a byte at unit 16");
    CHECK(class_of(MPI_Get(&r, 1, MPI_INT, right, 16, 1, MPI_INT, w)) == MPI_ERR_RMA_RANGE, "get past the end");
    CHECK(class_of(MPI_Accumulate(v, 1, MPI_INT, right, 16, 1, MPI_INT, MPI_SUM, w)) == MPI_ERR_RMA_RANGE, "acc past the end");
    CHECK(class_of(MPI_Fetch_and_op(&lv, &lr, MPI_LONG, right, 15, MPI_SUM, w)) == MPI_ERR_RMA_RANGE, "fop over the end");
    CHECK(class_of(MPI_Compare_and_swap(v, &cmp, &r, MPI_INT, right, 16, w)) == MPI_ERR_RMA_RANGE, "cas past the end");
    CHECK(class_of(MPI_Put(v, 1, MPI_INT, right, (MPI_Aint)1 << 62, 1, MPI_INT, w)) == MPI_ERR_RMA_RANGE, "huge displacement");
    CHECK(class_of(MPI_Put(v, 1, MPI_INT, right, -1, 1, MPI_INT, w)) == MPI_ERR_DISP, "negative displacement");
    CHECK(class_of(MPI_Put(v, 1, MPI_INT, size, 0, 1, MPI_INT, w)) == MPI_ERR_RANK, "rank = size");
    CHECK(class_of(MPI_Put(v, 1, MPI_INT, -5, 0, 1, MPI_INT, w)) == MPI_ERR_RANK, "rank -5");
    CHECK(class_of(MPI_Get(NULL, 1, MPI_INT, right, 0, 1, MPI_INT, w)) == MPI_ERR_BUFFER, "get into NULL");
    CHECK(class_of(MPI_Put(NULL, 1, MPI_INT, right, 0, 1, MPI_INT, w)) == MPI_ERR_BUFFER, "put from NULL");
    CHECK(class_of(MPI_Put(v, -1, MPI_INT, right, 0, -1, MPI_INT, w)) == MPI_ERR_COUNT, "negative count");
    CHECK(class_of(MPI_Put(v, 1, MPI_INT, right, 0, 1, MPI_DOUBLE, w)) == MPI_ERR_TYPE, "4 bytes to 8");
    CHECK(class_of(MPI_Put(v, 2, MPI_INT, right, 0, 1, MPI_INT, w)) == MPI_ERR_TYPE, "2 ints to 1");
    CHECK(class_of(MPI_Accumulate(v, 1, MPI_BYTE, right, 0, 1, MPI_BYTE, MPI_SUM, w)) == MPI_ERR_OP, "sum of bytes");
    CHECK(class_of(MPI_Fetch_and_op(&lv, NULL, MPI_LONG, right, 0, MPI_SUM, w)) == MPI_ERR_BUFFER, "fop into NULL");
    CHECK(class_of(MPI_Fetch_and_op(NULL, &lr, MPI_LONG, right, 0, MPI_SUM, w)) == MPI_ERR_BUFFER, "fop from NULL");
    CHECK(MPI_Fetch_and_op(NULL, &lr, MPI_LONG, right, 0, MPI_NO_OP, w) == MPI_SUCCESS, "MPI_NO_OP needs no origin");
    CHECK(class_of(MPI_Win_flush(size, w)) == MPI_ERR_RANK, "flush to rank = size");
    if (size > 2) {
        int other = (rank + 2) % size;
        CHECK(class_of(MPI_Put(v, 1, MPI_INT, other, 0, 1, MPI_INT, w)) == MPI_ERR_RMA_SYNC, "put to a rank not locked");
        CHECK(class_of(MPI_Win_flush(other, w)) == MPI_ERR_RMA_SYNC, "flush to a rank not locked");
    }
    CHECK(MPI_Put(v, 1, MPI_INT, MPI_PROC_NULL, 0, 1, MPI_INT, w) == MPI_SUCCESS, "put to MPI_PROC_NULL");
    CHECK(MPI_Accumulate(v, 1, MPI_INT, MPI_PROC_NULL, 0, 1, MPI_INT, MPI_SUM, w) == MPI_SUCCESS, "acc to MPI_PROC_NULL");
    CHECK(MPI_Win_flush(MPI_PROC_NULL, w) == MPI_SUCCESS, "flush MPI_PROC_NULL");
    CHECK(MPI_Win_flush_all(w) == MPI_SUCCESS, "flush_all in a lock epoch");
    CHECK(MPI_Win_flush_local_all(w) == MPI_SUCCESS, "flush_local_all in a lock epoch");
    /* A user error handler sees the failing calls, not the others. */
    MPI_Errhandler eh;
    MPI_Win_create_errhandler(count_errors, &eh);
    MPI_Win_set_errhandler(w, eh);
    CHECK(MPI_Put(v, 1, MPI_INT, right, 0, 1, MPI_INT, w) == MPI_SUCCESS, "put in range");
    CHECK(MPI_Win_flush(right, w) == MPI_SUCCESS, "flush");
    CHECK(handler_calls == 0, "handler called %d times on success", handler_calls);
    CHECK(class_of(MPI_Put(v, 1, MPI_INT, right, 16, 1, MPI_INT, w)) == MPI_ERR_RMA_RANGE, "past the end again");
    CHECK(handler_calls == 1 && handler_class == MPI_ERR_RMA_RANGE, "handler: %d calls, class %d", handler_calls, handler_class);
    MPI_Win_set_errhandler(w, MPI_ERRORS_RETURN);
    MPI_Errhandler_free(&eh);
    MPI_Win_unlock(right, w);
    /* The unlock closed the epoch: the next put must see it. */
    CHECK(class_of(MPI_Put(v, 1, MPI_INT, right, 0, 1, MPI_INT, w)) == MPI_ERR_RMA_SYNC, "put after unlock");
    CHECK(class_of(MPI_Win_flush(right, w)) == MPI_ERR_RMA_SYNC, "flush after unlock");
    CHECK(class_of(MPI_Win_flush_all(w)) == MPI_ERR_RMA_SYNC, "flush_all after unlock");

    /* lock_all: every rank; then closed again. */
    MPI_Win_lock_all(0, w);
    for (int t = 0; t < size; t++) {
        CHECK(MPI_Put(&rank, 1, MPI_INT, t, rank % 16, 1, MPI_INT, w) == MPI_SUCCESS, "lock_all put to %d", t);
        CHECK(MPI_Win_flush(t, w) == MPI_SUCCESS, "lock_all flush %d", t);
    }
    CHECK(MPI_Win_flush_all(w) == MPI_SUCCESS, "flush_all in lock_all");
    MPI_Win_unlock_all(w);
    CHECK(class_of(MPI_Put(v, 1, MPI_INT, right, 0, 1, MPI_INT, w)) == MPI_ERR_RMA_SYNC, "put after unlock_all");

    /* Fence epochs: open after a fence, closed after MPI_MODE_NOSUCCEED;
     * a flush is no passive-target epoch. */
    MPI_Win_fence(0, w);
    CHECK(MPI_Put(v, 1, MPI_INT, right, 1, 1, MPI_INT, w) == MPI_SUCCESS, "put in a fence epoch");
    CHECK(class_of(MPI_Win_flush(right, w)) == MPI_ERR_RMA_SYNC, "flush in a fence epoch");
    CHECK(class_of(MPI_Win_flush_all(w)) == MPI_ERR_RMA_SYNC, "flush_all in a fence epoch");
    MPI_Win_fence(MPI_MODE_NOSUCCEED, w);
    CHECK(class_of(MPI_Put(v, 1, MPI_INT, right, 0, 1, MPI_INT, w)) == MPI_ERR_RMA_SYNC, "put after the last fence");
    MPI_Win_free(&w);
}

static void freed(void) {
    int *mem, v = 1;
    MPI_Win w, old;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Win_allocate(64, 4, MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &w);
    MPI_Win_lock(MPI_LOCK_SHARED, right, 0, w);
    CHECK(MPI_Put(&v, 1, MPI_INT, right, 0, 1, MPI_INT, w) == MPI_SUCCESS, "put before the free");
    CHECK(MPI_Win_flush(right, w) == MPI_SUCCESS, "flush before the free");
    MPI_Win_unlock(right, w);
    old = w;
    MPI_Win_free(&w);
    CHECK(w == MPI_WIN_NULL, "MPI_Win_free sets MPI_WIN_NULL");
    CHECK(class_of(MPI_Put(&v, 1, MPI_INT, right, 0, 1, MPI_INT, old)) == MPI_ERR_WIN, "put on a freed window");
    CHECK(class_of(MPI_Win_flush(right, old)) == MPI_ERR_WIN, "flush on a freed window");
    /* A new window may take the slot: the old handle stays invalid. */
    MPI_Win_allocate(64, 4, MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &w);
    MPI_Win_lock(MPI_LOCK_SHARED, right, 0, w);
    CHECK(class_of(MPI_Put(&v, 1, MPI_INT, right, 0, 1, MPI_INT, old)) == MPI_ERR_WIN, "old handle, new window");
    CHECK(MPI_Put(&v, 1, MPI_INT, right, 0, 1, MPI_INT, w) == MPI_SUCCESS, "the new window works");
    MPI_Win_unlock(right, w);
    MPI_Win_free(&w);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

/* Rounds per rank (GW_TEST_ROUNDS, default 300). */
static int rounds = 300;
static void atomicity(void) {
    /* Rank 0's memory: longs [0] and [1] (also added to by a derived type
     * covering both), [2] a double, [3] a CAS counter. */
    long *mem;
    MPI_Win w;
    MPI_Win_allocate(4 * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &w);
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, w);
    memset(mem, 0, 4 * sizeof(long));
    MPI_Win_unlock(rank, w);
    MPI_Datatype two;
    MPI_Type_contiguous(2, MPI_LONG, &two);
    MPI_Type_commit(&two);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock_all(0, w);
    long one = 1, zero = 0, pair[2] = {1, 1}, prev = -1, got, old;
    double half = 0.5, dgot;
    for (int i = 0; i < rounds; i++) {
        MPI_Accumulate(&one, 1, MPI_LONG, 0, 0, 1, MPI_LONG, MPI_SUM, w);
        MPI_Fetch_and_op(&one, &got, MPI_LONG, 0, 0, MPI_SUM, w);
        MPI_Win_flush(0, w);
        CHECK(got > prev, "fetched %ld after %ld", got, prev);
        prev = got;
        /* A maximum with 0 changes nothing, unless it is not atomic with
         * the sums (it would write a stale value back). */
        MPI_Accumulate(&zero, 1, MPI_LONG, 0, 0, 1, MPI_LONG, MPI_MAX, w);
        MPI_Accumulate(pair, 1, two, 0, 0, 1, two, MPI_SUM, w);
        MPI_Get_accumulate(&one, 1, MPI_LONG, &got, 1, MPI_LONG, 0, 1, 1, MPI_LONG, MPI_SUM, w);
        MPI_Accumulate(&half, 1, MPI_DOUBLE, 0, 2, 1, MPI_DOUBLE, MPI_SUM, w);
        MPI_Fetch_and_op(&half, &dgot, MPI_DOUBLE, 0, 2, MPI_SUM, w);
        do {
            MPI_Fetch_and_op(NULL, &old, MPI_LONG, 0, 3, MPI_NO_OP, w);
            MPI_Win_flush(0, w);
            long next = old + 1;
            MPI_Compare_and_swap(&next, &old, &got, MPI_LONG, 0, 3, w);
            MPI_Win_flush(0, w);
        } while (got != old);
    }
    MPI_Win_unlock_all(w);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, w);
        long n = (long)size * rounds;
        CHECK(mem[0] == 3 * n, "sum at [0]: %ld, want %ld", mem[0], 3 * n);
        CHECK(mem[1] == 2 * n, "sum at [1]: %ld, want %ld", mem[1], 2 * n);
        double d;
        memcpy(&d, &mem[2], sizeof d);
        CHECK(d == (double)n, "double sum: %g, want %ld", d, n);
        CHECK(mem[3] == n, "compare-and-swap counter: %ld, want %ld", mem[3], n);
        MPI_Win_unlock(0, w);
    }
    MPI_Type_free(&two);
    MPI_Win_free(&w);
}

/* Accumulates beyond one stack chunk (the fast path applies them in
 * chunks under the target's lock): every rank adds its vector of BIG
 * longs to rank 0's, element i getting i + 1, and reads the old values
 * back with MPI_Get_accumulate; the sums and the fetched values (each a
 * whole number of additions, never fewer than the last time) must hold. */
#define BIG 1000
static void big_accumulates(void) {
    long *mem;
    MPI_Win w;
    MPI_Win_allocate(BIG * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &w);
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, w);
    memset(mem, 0, BIG * sizeof(long));
    MPI_Win_unlock(rank, w);
    static long add[BIG], old[BIG], seen[BIG];
    for (int i = 0; i < BIG; i++) add[i] = i + 1;
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock_all(0, w);
    int big_rounds = rounds / 10 + 1;
    for (int r = 0; r < big_rounds; r++) {
        MPI_Accumulate(add, BIG, MPI_LONG, 0, 0, BIG, MPI_LONG, MPI_SUM, w);
        MPI_Get_accumulate(add, BIG, MPI_LONG, old, BIG, MPI_LONG, 0, 0, BIG, MPI_LONG, MPI_SUM, w);
        MPI_Win_flush(0, w);
        /* MPI makes each element's update atomic: element i holds a whole
         * number of additions of i + 1, at least as many as seen before. */
        for (int i = 0; i < BIG; i++) {
            CHECK(old[i] % (i + 1) == 0 && old[i] / (i + 1) >= seen[i],
                  "fetched [%d] = %ld after %ld additions", i, old[i], seen[i]);
            seen[i] = old[i] / (i + 1);
        }
    }
    MPI_Win_unlock_all(w);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, w);
        long n = 2L * size * big_rounds;
        for (int i = 0; i < BIG; i++)
            CHECK(mem[i] == n * (i + 1), "big sum at [%d]: %ld, want %ld", i, mem[i], n * (i + 1));
        MPI_Win_unlock(0, w);
    }
    MPI_Win_free(&w);
}

static void derived(void) {
    int *mem;
    MPI_Win w;
    MPI_Win_allocate(16 * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &w);
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, w);
    for (int i = 0; i < 16; i++) mem[i] = -1;
    MPI_Win_unlock(rank, w);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Datatype every_other, four;
    MPI_Type_vector(3, 1, 2, MPI_INT, &every_other);
    MPI_Type_commit(&every_other);
    MPI_Type_contiguous(4, MPI_INT, &four);
    MPI_Type_commit(&four);
    int src[4] = {rank * 10 + 1, rank * 10 + 2, rank * 10 + 3, rank * 10 + 4}, got[4] = {0, 0, 0, 0};
    MPI_Win_lock(MPI_LOCK_SHARED, right, 0, w);
    /* Three ints into every other slot from 0; four ints as one element at 8. */
    MPI_Put(src, 3, MPI_INT, right, 0, 1, every_other, w);
    MPI_Put(src, 1, four, right, 8, 4, MPI_INT, w);
    MPI_Win_flush(right, w);
    MPI_Get(got, 3, MPI_INT, right, 0, 1, every_other, w);
    MPI_Win_flush(right, w);
    for (int i = 0; i < 3; i++) CHECK(got[i] == src[i], "vector get [%d]: %d", i, got[i]);
    MPI_Get(got, 4, MPI_INT, right, 8, 1, four, w);
    MPI_Win_flush(right, w);
    for (int i = 0; i < 4; i++) CHECK(got[i] == src[i], "contiguous-type get [%d]: %d", i, got[i]);
    MPI_Win_unlock(right, w);
    MPI_Barrier(MPI_COMM_WORLD);
    int left = (rank + size - 1) % size;
    MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, w);
    int want[16];
    for (int i = 0; i < 16; i++) want[i] = -1;
    for (int i = 0; i < 3; i++) want[2 * i] = left * 10 + 1 + i;
    for (int i = 0; i < 4; i++) want[8 + i] = left * 10 + 1 + i;
    for (int i = 0; i < 16; i++) CHECK(mem[i] == want[i], "memory [%d]: %d, want %d", i, mem[i], want[i]);
    MPI_Win_unlock(rank, w);
    MPI_Type_free(&every_other);
    MPI_Type_free(&four);
    MPI_Win_free(&w);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    right = (rank + 1) % size;
    const char *r = getenv("GW_TEST_ROUNDS");
    if (r && atoi(r) > 0) rounds = atoi(r);
    values(0);
    values(1);
    errors();
    freed();
    atomicity();
    big_accumulates();
    derived();
    PASS("rma_fast");
    MPI_Finalize();
    return 0;
}
