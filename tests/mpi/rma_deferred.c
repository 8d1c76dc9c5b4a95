/* Puts and gets by single copies wait for the next synchronization and go
 * out together (crates/mpi/src/rma/batch.rs). Every synchronization must
 * complete them, and everything else must keep its meaning:
 *   - flush (and, past IOV_MAX and the held limit, 5000 puts in one epoch),
 *   - flush_local: afterwards the origin may overwrite its buffer,
 *   - unlock, unlock_all, fence, post/start/complete/wait,
 *   - MPI_Rput: its request completing means the data left the buffer,
 *   - MPI_Rget: its request completing means the data arrived,
 *   - puts, gets and accumulates mixed in one epoch: applied in program
 *     order to one target (more than the standard asks of a put then an
 *     accumulate to the same place, which gridwire keeps anyway),
 *   - a put with a derived origin type among contiguous ones.
 * On a window from MPI_Win_create and on a dynamic one; rank 0 is the
 * target, every other rank an origin with its own part of the memory.
 * Deferral is on after a synchronization that completed more than one put
 * or get to the target (off after one that completed one); the rounds are
 * ordered so that each synchronization under test finds it on.
 * With GW_MPI_RMA_DIRECT=0 (requests) the results must be the same. */
#include "check.h"
#include <stdlib.h>
#include <string.h>

enum { PER = 6000, MANY = 5000 };

static int rank, size;
static MPI_Win win;
static int *mem;             /* rank 0's window memory: size * PER ints */
static MPI_Aint base;        /* address of slot 0 at the target (dynamic), else 0 */

static MPI_Aint at(int slot) { return base ? MPI_Aint_add(base, (MPI_Aint)slot * sizeof(int)) : slot; }
static int mine(int i) { return rank * PER + i; } /* this origin's slots */
static int value(int round, int i) { return round * 1000003 + rank * 10007 + i; }

/* Rank 0 checks slots [rank*PER, rank*PER+n) of every origin hold value(round). */
static void check_at_target(const char *what, int round, int n) {
    for (int r = 1; r < size; r++)
        for (int i = 0; i < n; i++) {
            int want = round * 1000003 + r * 10007 + i;
            CHECK(mem[r * PER + i] == want, "%s: slot %d of origin %d is %d, not %d", what, i, r,
                  mem[r * PER + i], want);
        }
}

/* Collective: rank 0 checks, and nobody writes the next round before. */
static void target_check(const char *what, int round, int n) {
    if (rank == 0) check_at_target(what, round, n);
    MPI_Barrier(MPI_COMM_WORLD);
}

/* The origin gets its n slots back (gets deferred too) and compares. */
static void get_back(const char *what, int round, int n) {
    int *back = malloc(n * sizeof(int));
    memset(back, 0xff, n * sizeof(int));
    for (int i = 0; i < n; i++) MPI_Get(&back[i], 1, MPI_INT, 0, at(mine(i)), 1, MPI_INT, win);
    MPI_Win_flush(0, win);
    for (int i = 0; i < n; i++)
        CHECK(back[i] == value(round, i), "%s: got %d back from slot %d, want %d", what, back[i], i,
              value(round, i));
    free(back);
}

static void run(const char *flavour) {
    char what[64];
    int *buf = malloc(MANY * sizeof(int));
    int round = 0;

    /* flush: many puts (past IOV_MAX and past the held limit). */
    snprintf(what, sizeof what, "%s flush", flavour);
    round++;
    if (rank != 0) {
        MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
        for (int i = 0; i < MANY; i++) {
            buf[i] = value(round, i);
            MPI_Put(&buf[i], 1, MPI_INT, 0, at(mine(i)), 1, MPI_INT, win);
        }
        MPI_Win_flush(0, win);
        get_back(what, round, MANY);
        MPI_Win_unlock(0, win);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    target_check(what, round, MANY);

    /* flush_local: the buffer is free afterwards; the data is what it held. */
    snprintf(what, sizeof what, "%s flush_local", flavour);
    round++;
    if (rank != 0) {
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
        for (int i = 0; i < 100; i++) buf[i] = value(round, i);
        MPI_Put(buf, 100, MPI_INT, 0, at(mine(0)), 100, MPI_INT, win);
        MPI_Win_flush_local(0, win);
        for (int i = 0; i < 100; i++) buf[i] = -1;
        MPI_Win_flush(0, win);
        get_back(what, round, 100);
        /* flush_local_all the same way. */
        for (int i = 0; i < 100; i++) buf[i] = value(round, i);
        MPI_Put(buf, 100, MPI_INT, 0, at(mine(0)), 100, MPI_INT, win);
        MPI_Win_flush_local_all(win);
        for (int i = 0; i < 100; i++) buf[i] = -2;
        MPI_Win_flush_all(win);
        get_back(what, round, 100);
        MPI_Win_unlock(0, win);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    target_check(what, round, 100);

    /* unlock alone completes them (no flush). Deferral is on only after a
     * synchronization that completed several: two puts and a flush first. */
    snprintf(what, sizeof what, "%s unlock", flavour);
    round++;
    if (rank != 0) {
        MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
        MPI_Put(&buf[0], 1, MPI_INT, 0, at(mine(PER - 1)), 1, MPI_INT, win);
        MPI_Put(&buf[0], 1, MPI_INT, 0, at(mine(PER - 2)), 1, MPI_INT, win);
        MPI_Win_flush(0, win);
        for (int i = 0; i < 1500; i++) {
            buf[i] = value(round, i);
            MPI_Put(&buf[i], 1, MPI_INT, 0, at(mine(i)), 1, MPI_INT, win);
        }
        MPI_Win_unlock(0, win);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    target_check(what, round, 1500);

    /* unlock_all. */
    snprintf(what, sizeof what, "%s unlock_all", flavour);
    round++;
    if (rank != 0) {
        MPI_Win_lock_all(0, win);
        for (int i = 0; i < 300; i++) {
            buf[i] = value(round, i);
            MPI_Put(&buf[i], 1, MPI_INT, 0, at(mine(i)), 1, MPI_INT, win);
        }
        MPI_Win_unlock_all(win);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    target_check(what, round, 300);

    /* fence: puts, then gets of what the puts wrote in the next epoch. */
    snprintf(what, sizeof what, "%s fence", flavour);
    round++;
    MPI_Win_fence(0, win);
    if (rank != 0)
        for (int i = 0; i < 1200; i++) {
            buf[i] = value(round, i);
            MPI_Put(&buf[i], 1, MPI_INT, 0, at(mine(i)), 1, MPI_INT, win);
        }
    MPI_Win_fence(0, win);
    target_check(what, round, 1200);
    int *back = calloc(1200, sizeof(int));
    if (rank != 0)
        for (int i = 0; i < 1200; i++) MPI_Get(&back[i], 1, MPI_INT, 0, at(mine(i)), 1, MPI_INT, win);
    MPI_Win_fence(0, win);
    if (rank != 0)
        for (int i = 0; i < 1200; i++)
            CHECK(back[i] == value(round, i), "%s: fence get %d: %d", what, i, back[i]);
    free(back);

    /* post/start/complete/wait. */
    snprintf(what, sizeof what, "%s pscw", flavour);
    round++;
    {
        MPI_Group world, g;
        MPI_Comm_group(MPI_COMM_WORLD, &world);
        if (rank == 0) {
            int n = size - 1, *ranks = malloc(n * sizeof(int));
            for (int i = 0; i < n; i++) ranks[i] = i + 1;
            MPI_Group_incl(world, n, ranks, &g);
            MPI_Win_post(g, 0, win);
            MPI_Win_wait(win);
            free(ranks);
            check_at_target(what, round, 700);
        } else {
            int zero = 0;
            MPI_Group_incl(world, 1, &zero, &g);
            MPI_Win_start(g, 0, win);
            for (int i = 0; i < 700; i++) {
                buf[i] = value(round, i);
                MPI_Put(&buf[i], 1, MPI_INT, 0, at(mine(i)), 1, MPI_INT, win);
            }
            MPI_Win_complete(win);
        }
        MPI_Group_free(&g);
        MPI_Group_free(&world);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    /* Rput / Rget: their requests mean what they say, with puts deferred around them. */
    snprintf(what, sizeof what, "%s rput", flavour);
    round++;
    if (rank != 0) {
        MPI_Request q;
        MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
        for (int i = 1; i < 50; i++) {
            buf[i] = value(round, i);
            MPI_Put(&buf[i], 1, MPI_INT, 0, at(mine(i)), 1, MPI_INT, win);
        }
        int v = value(round, 0);
        MPI_Rput(&v, 1, MPI_INT, 0, at(mine(0)), 1, MPI_INT, win, &q);
        MPI_Wait(&q, MPI_STATUS_IGNORE);
        v = -5; /* free to reuse: the target must still get the value before */
        int got = 0;
        MPI_Rget(&got, 1, MPI_INT, 0, at(mine(0)), 1, MPI_INT, win, &q);
        MPI_Wait(&q, MPI_STATUS_IGNORE);
        CHECK(got == value(round, 0), "%s: Rget after Rput: %d", what, got);
        MPI_Win_unlock(0, win);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    target_check(what, round, 50);

    /* Mixed in one epoch, no flush between: program order per target. */
    snprintf(what, sizeof what, "%s mixed", flavour);
    round++;
    if (rank != 0) {
        MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
        for (int i = 0; i < 40; i++) {
            buf[i] = value(round, i) - 1;
            MPI_Put(&buf[i], 1, MPI_INT, 0, at(mine(i)), 1, MPI_INT, win);
            int one = 1;
            MPI_Accumulate(&one, 1, MPI_INT, 0, at(mine(i)), 1, MPI_INT, MPI_SUM, win);
        }
        int fetched = 0, one = 1;
        MPI_Put(&buf[40], 0, MPI_INT, 0, at(mine(40)), 0, MPI_INT, win); /* empty: nothing */
        buf[40] = value(round, 40) - 1;
        MPI_Put(&buf[40], 1, MPI_INT, 0, at(mine(40)), 1, MPI_INT, win);
        MPI_Fetch_and_op(&one, &fetched, MPI_INT, 0, at(mine(40)), MPI_SUM, win);
        int got = 0;
        buf[41] = value(round, 41);
        MPI_Put(&buf[41], 1, MPI_INT, 0, at(mine(41)), 1, MPI_INT, win);
        MPI_Get(&got, 1, MPI_INT, 0, at(mine(41)), 1, MPI_INT, win);
        /* A derived (strided) origin type between contiguous ones. */
        int strided[6] = {value(round, 42), -7, value(round, 43), -7, value(round, 44), -7};
        MPI_Datatype every_other;
        MPI_Type_vector(3, 1, 2, MPI_INT, &every_other);
        MPI_Type_commit(&every_other);
        MPI_Put(strided, 1, every_other, 0, at(mine(42)), 3, MPI_INT, win);
        buf[45] = value(round, 45);
        MPI_Put(&buf[45], 1, MPI_INT, 0, at(mine(45)), 1, MPI_INT, win);
        MPI_Win_flush(0, win);
        MPI_Type_free(&every_other);
        CHECK(fetched == value(round, 40) - 1, "%s: fetch_and_op after a put fetched %d", what, fetched);
        CHECK(got == value(round, 41), "%s: get after a put got %d", what, got);
        get_back(what, round, 46);
        MPI_Win_unlock(0, win);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    target_check(what, round, 46);
    free(buf);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2) {
        PASS("rma_deferred");
        MPI_Finalize();
        return 0;
    }
    size_t bytes = (size_t)size * PER * sizeof(int);

    mem = calloc((size_t)size * PER, sizeof(int));
    base = 0;
    MPI_Win_create(mem, rank == 0 ? bytes : 0, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    run("create");
    MPI_Win_free(&win);
    free(mem);

    mem = calloc((size_t)size * PER, sizeof(int));
    MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    if (rank == 0) {
        MPI_Win_attach(win, mem, bytes);
        MPI_Get_address(mem, &base);
    }
    MPI_Bcast(&base, 1, MPI_AINT, 0, MPI_COMM_WORLD);
    run("dynamic");
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) MPI_Win_detach(win, mem);
    MPI_Win_free(&win);
    free(mem);

    PASS("rma_deferred");
    MPI_Finalize();
    return 0;
}
