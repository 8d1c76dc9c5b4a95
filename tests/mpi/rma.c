/* One-sided communication: every window flavor, every synchronization
 * mode, the communication calls with contiguous and derived datatypes,
 * and the error classes of misuse. Any rank count. */
#include "check.h"
#include <string.h>
#include <stdint.h>

static int rank, size;

static void fence_ring(void) {
    int buf[4] = {-1, rank * 10, -1, -1};
    MPI_Win w;
    MPI_Win_create(buf, sizeof buf, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &w);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int got = -1;
    MPI_Win_fence(MPI_MODE_NOPRECEDE, w);
    MPI_Put(&rank, 1, MPI_INT, right, 0, 1, MPI_INT, w);
    MPI_Get(&got, 1, MPI_INT, right, 1, 1, MPI_INT, w);
    MPI_Win_fence(0, w);
    CHECK(buf[0] == left, "put from left: %d, want %d", buf[0], left);
    CHECK(got == right * 10, "get from right: %d, want %d", got, right * 10);
    /* Accumulate from every rank into rank 0: sums and maxima. */
    int one[2] = {rank + 1, rank};
    buf[2] = 0;
    buf[3] = -5;
    MPI_Win_fence(0, w);
    MPI_Accumulate(&one[0], 1, MPI_INT, 0, 2, 1, MPI_INT, MPI_SUM, w);
    MPI_Accumulate(&one[1], 1, MPI_INT, 0, 3, 1, MPI_INT, MPI_MAX, w);
    MPI_Win_fence(MPI_MODE_NOSUCCEED, w);
    if (rank == 0) {
        CHECK(buf[2] == size * (size + 1) / 2, "sum %d, want %d", buf[2], size * (size + 1) / 2);
        CHECK(buf[3] == size - 1, "max %d, want %d", buf[3], size - 1);
    }
    MPI_Win_free(&w);
    CHECK(w == MPI_WIN_NULL, "MPI_Win_free sets MPI_WIN_NULL");
}

static void attributes(void) {
    void *base;
    MPI_Win w;
    MPI_Win_allocate(3 * sizeof(double), sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &w);
    void *v; int flag;
    MPI_Win_get_attr(w, MPI_WIN_BASE, &v, &flag);
    CHECK(flag && v == base, "MPI_WIN_BASE");
    MPI_Aint *sz; MPI_Win_get_attr(w, MPI_WIN_SIZE, &sz, &flag);
    CHECK(flag && *sz == 3 * (MPI_Aint)sizeof(double), "MPI_WIN_SIZE %ld", (long)*sz);
    int *du; MPI_Win_get_attr(w, MPI_WIN_DISP_UNIT, &du, &flag);
    CHECK(flag && *du == (int)sizeof(double), "MPI_WIN_DISP_UNIT");
    int *fl; MPI_Win_get_attr(w, MPI_WIN_CREATE_FLAVOR, &fl, &flag);
    CHECK(flag && *fl == MPI_WIN_FLAVOR_ALLOCATE, "MPI_WIN_CREATE_FLAVOR");
    int *model; MPI_Win_get_attr(w, MPI_WIN_MODEL, &model, &flag);
    CHECK(flag && *model == MPI_WIN_UNIFIED, "MPI_WIN_MODEL");
    MPI_Win_set_name(w, "counters");
    char name[MPI_MAX_OBJECT_NAME]; int len;
    MPI_Win_get_name(w, name, &len);
    CHECK(strcmp(name, "counters") == 0 && len == 8, "name %s", name);
    MPI_Group g, wg; int cmp;
    MPI_Win_get_group(w, &g);
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    MPI_Group_compare(g, wg, &cmp);
    CHECK(cmp == MPI_IDENT, "window group");
    MPI_Group_free(&g); MPI_Group_free(&wg);
    int kv; MPI_Win_create_keyval(MPI_WIN_NULL_COPY_FN, MPI_WIN_NULL_DELETE_FN, &kv, NULL);
    static int payload = 7;
    MPI_Win_set_attr(w, kv, &payload);
    int *p; MPI_Win_get_attr(w, kv, &p, &flag);
    CHECK(flag && p == &payload, "user attribute");
    MPI_Win_delete_attr(w, kv);
    MPI_Win_get_attr(w, kv, &p, &flag);
    CHECK(!flag, "deleted attribute");
    MPI_Win_free_keyval(&kv);
    MPI_Win_free(&w);
}

/* Passive target: a shared-lock fetch-and-op counter, exclusive-lock
 * read-modify-write increments, and a compare-and-swap spin lock. */
static void passive(void) {
    long *mem;
    MPI_Win w;
    MPI_Win_allocate(4 * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &w);
    mem[0] = mem[1] = mem[2] = mem[3] = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    enum { K = 8 };
    long seen[K], one = 1;
    MPI_Win_lock_all(0, w);
    for (int i = 0; i < K; i++) {
        MPI_Fetch_and_op(&one, &seen[i], MPI_LONG, 0, 0, MPI_SUM, w);
        MPI_Win_flush(0, w);
    }
    MPI_Win_unlock_all(w);
    for (int i = 1; i < K; i++)
        CHECK(seen[i] > seen[i - 1], "fetch_and_op values increase: %ld then %ld", seen[i - 1], seen[i]);
    long *all = malloc(sizeof(long) * K * size);
    MPI_Allgather(seen, K, MPI_LONG, all, K, MPI_LONG, MPI_COMM_WORLD);
    /* Every value 0..K*size-1 fetched exactly once. */
    for (long v = 0; v < (long)K * size; v++) {
        int n = 0;
        for (int i = 0; i < K * size; i++) n += all[i] == v;
        CHECK(n == 1, "value %ld fetched %d times", v, n);
    }
    free(all);
    /* Exclusive lock: get, flush, put: no increment lost. */
    for (int i = 0; i < 5; i++) {
        long v;
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, w);
        MPI_Get(&v, 1, MPI_LONG, 0, 1, 1, MPI_LONG, w);
        MPI_Win_flush(0, w);
        v++;
        MPI_Put(&v, 1, MPI_LONG, 0, 1, 1, MPI_LONG, w);
        MPI_Win_unlock(0, w);
    }
    /* Compare-and-swap spin lock guarding mem[3] on the last rank. */
    int target = size - 1;
    MPI_Win_lock_all(0, w);
    for (int i = 0; i < 3; i++) {
        long mine = rank + 1, zero = 0, prev = -1;
        do {
            MPI_Compare_and_swap(&mine, &zero, &prev, MPI_LONG, target, 2, w);
            MPI_Win_flush(target, w);
        } while (prev != 0);
        long v;
        MPI_Get(&v, 1, MPI_LONG, target, 3, 1, MPI_LONG, w);
        MPI_Win_flush(target, w);
        v++;
        MPI_Put(&v, 1, MPI_LONG, target, 3, 1, MPI_LONG, w);
        MPI_Win_flush(target, w);
        MPI_Compare_and_swap(&zero, &mine, &prev, MPI_LONG, target, 2, w);
        MPI_Win_flush(target, w);
        CHECK(prev == mine, "the spin lock was held by %ld, not us", prev);
    }
    MPI_Win_unlock_all(w);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, w);
    if (rank == 0) {
        CHECK(mem[0] == (long)K * size, "counter %ld, want %ld", mem[0], (long)K * size);
        CHECK(mem[1] == 5L * size, "exclusive increments %ld, want %ld", mem[1], 5L * size);
    }
    if (rank == target) {
        CHECK(mem[3] == 3L * size, "spin-locked increments %ld, want %ld", mem[3], 3L * size);
        CHECK(mem[2] == 0, "spin lock released");
    }
    MPI_Win_unlock(rank, w);
    /* Request-based calls and get-accumulate with MPI_NO_OP. */
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock_all(0, w);
    long got = -1, old = -1, add = 2;
    MPI_Request r[3];
    MPI_Rget(&got, 1, MPI_LONG, 0, 0, 1, MPI_LONG, w, &r[0]);
    MPI_Rget_accumulate(NULL, 0, MPI_LONG, &old, 1, MPI_LONG, 0, 1, 1, MPI_LONG, MPI_NO_OP, w, &r[1]);
    MPI_Raccumulate(&add, 1, MPI_LONG, (rank + 1) % size, 3, 1, MPI_LONG, MPI_SUM, w, &r[2]);
    MPI_Waitall(3, r, MPI_STATUSES_IGNORE);
    CHECK(got == (long)K * size, "Rget %ld", got);
    CHECK(old == 5L * size, "Rget_accumulate NO_OP %ld", old);
    MPI_Win_unlock_all(w);
    MPI_Win_free(&w);
}

static void pscw(void) {
    int buf[2] = {-1, -1};
    MPI_Win w;
    MPI_Win_create(buf, sizeof buf, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &w);
    MPI_Group world, from, to;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    MPI_Group_incl(world, 1, &left, &from);
    MPI_Group_incl(world, 1, &right, &to);
    for (int round = 0; round < 3; round++) {
        MPI_Win_post(from, 0, w);
        MPI_Win_start(to, 0, w);
        int v = rank * 100 + round;
        MPI_Put(&v, 1, MPI_INT, right, 0, 1, MPI_INT, w);
        MPI_Win_complete(w);
        int flag = 0;
        while (!flag) MPI_Win_test(w, &flag);
        CHECK(buf[0] == left * 100 + round, "PSCW round %d: %d", round, buf[0]);
    }
    MPI_Group_free(&world); MPI_Group_free(&from); MPI_Group_free(&to);
    MPI_Win_free(&w);
}

static void dynamic(void) {
    MPI_Win w;
    MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &w);
    int *mem = calloc(4, sizeof(int));
    MPI_Win_attach(w, mem, 4 * sizeof(int));
    MPI_Aint mine, *addrs = malloc(sizeof(MPI_Aint) * size);
    MPI_Get_address(mem, &mine);
    MPI_Allgather(&mine, 1, MPI_AINT, addrs, 1, MPI_AINT, MPI_COMM_WORLD);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int v = rank + 1000;
    MPI_Win_fence(0, w);
    MPI_Put(&v, 1, MPI_INT, right, addrs[right] + 2 * sizeof(int), 1, MPI_INT, w);
    MPI_Win_fence(0, w);
    CHECK(mem[2] == left + 1000, "dynamic put %d", mem[2]);
    /* Outside the attached memory: refused at the target too. */
    MPI_Win_set_errhandler(w, MPI_ERRORS_RETURN);
    int rc = MPI_Put(&v, 1, MPI_INT, right, addrs[right] + 4 * sizeof(int), 1, MPI_INT, w);
    int rc2 = MPI_Win_fence(0, w);
    int cls = MPI_SUCCESS;
    MPI_Error_class(rc == MPI_SUCCESS ? rc2 : rc, &cls);
    CHECK(cls == MPI_ERR_RMA_RANGE, "put past the attached memory: class %d", cls);
    MPI_Win_fence(0, w);
    MPI_Win_detach(w, mem);
    MPI_Win_free(&w);
    free(mem); free(addrs);
}

static void shared(void) {
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    int nr, ns;
    MPI_Comm_rank(node, &nr);
    MPI_Comm_size(node, &ns);
    int *mine;
    MPI_Win w;
    MPI_Win_allocate_shared((nr + 1) * sizeof(int), sizeof(int), MPI_INFO_NULL, node, &mine, &w);
    MPI_Win_lock_all(0, w);
    for (int i = 0; i <= nr; i++) mine[i] = nr * 10 + i;
    MPI_Win_sync(w);
    MPI_Barrier(node);
    MPI_Win_sync(w);
    int peer = (nr + 1) % ns;
    MPI_Aint sz; int du; int *theirs;
    MPI_Win_shared_query(w, peer, &sz, &du, &theirs);
    CHECK(sz == (MPI_Aint)((peer + 1) * sizeof(int)) && du == (int)sizeof(int), "shared_query size %ld unit %d", (long)sz, du);
    for (int i = 0; i <= peer; i++)
        CHECK(theirs[i] == peer * 10 + i, "load from the peer's segment: %d", theirs[i]);
    /* The same memory through a one-sided get. */
    int got = -1;
    MPI_Get(&got, 1, MPI_INT, peer, peer, 1, MPI_INT, w);
    MPI_Win_flush(peer, w);
    CHECK(got == peer * 11, "get from the shared window: %d", got);
    MPI_Win_unlock_all(w);
    MPI_Win_free(&w);
    /* Over all of MPI_COMM_WORLD: works on one host, refused (by every
     * rank alike) when the ranks are on several. */
    int ws, cls, *p;
    MPI_Comm_size(MPI_COMM_WORLD, &ws);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rc = MPI_Win_allocate_shared(sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &p, &w);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Error_class(rc, &cls);
    if (ns == ws) {
        CHECK(rc == MPI_SUCCESS, "shared window over one host: class %d", cls);
        MPI_Win_free(&w);
    } else {
        CHECK(cls == MPI_ERR_RMA_SHARED, "shared window over several hosts: class %d", cls);
    }
    MPI_Comm_free(&node);
}

static void derived(void) {
    int mem[16];
    for (int i = 0; i < 16; i++) mem[i] = -1;
    MPI_Win w;
    MPI_Win_create(mem, sizeof mem, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &w);
    MPI_Datatype every_other;
    MPI_Type_vector(4, 1, 2, MPI_INT, &every_other);
    MPI_Type_commit(&every_other);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int src[4] = {rank, rank + 1, rank + 2, rank + 3};
    MPI_Win_fence(0, w);
    /* Contiguous at the origin, strided at the target. */
    MPI_Put(src, 4, MPI_INT, right, 0, 1, every_other, w);
    MPI_Win_fence(0, w);
    for (int i = 0; i < 8; i++)
        CHECK(mem[i] == (i % 2 ? -1 : left + i / 2), "strided put: mem[%d] = %d", i, mem[i]);
    /* Strided at the origin, contiguous at the target; accumulate strided. */
    int back[8] = {0};
    MPI_Get(back, 1, every_other, right, 0, 4, MPI_INT, w);
    MPI_Win_fence(0, w);
    /* mem[0..4] at the right neighbour after the put: rank, -1, rank+1, -1. */
    CHECK(back[0] == rank && back[2] == -1 && back[4] == rank + 1 && back[6] == -1, "strided get: %d %d %d %d", back[0], back[2], back[4], back[6]);
    int ones[4] = {1, 1, 1, 1};
    MPI_Accumulate(ones, 4, MPI_INT, right, 0, 1, every_other, MPI_SUM, w);
    MPI_Win_fence(0, w);
    for (int i = 0; i < 8; i += 2)
        CHECK(mem[i] == left + i / 2 + 1, "strided accumulate: mem[%d] = %d", i, mem[i]);
    MPI_Win_fence(MPI_MODE_NOSUCCEED, w);
    MPI_Type_free(&every_other);
    MPI_Win_free(&w);
}

static int class_of(int rc) { int c; MPI_Error_class(rc, &c); return c; }

static void errors(void) {
    int mem[2] = {0, 0};
    MPI_Win w;
    MPI_Win_create(mem, sizeof mem, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &w);
    MPI_Win_set_errhandler(w, MPI_ERRORS_RETURN);
    int v = 1, right = (rank + 1) % size;
    CHECK(class_of(MPI_Put(&v, 1, MPI_INT, right, 0, 1, MPI_INT, w)) == MPI_ERR_RMA_SYNC, "put outside an epoch");
    CHECK(class_of(MPI_Win_unlock(right, w)) == MPI_ERR_RMA_SYNC, "unlock without lock");
    CHECK(class_of(MPI_Win_complete(w)) == MPI_ERR_RMA_SYNC, "complete without start");
    CHECK(class_of(MPI_Win_lock(12345, right, 0, w)) == MPI_ERR_LOCKTYPE, "bad lock type");
    CHECK(class_of(MPI_Win_fence(1 << 30, w)) == MPI_ERR_ASSERT, "bad assertion");
    MPI_Win_fence(0, w);
    CHECK(class_of(MPI_Put(&v, 1, MPI_INT, right, 2, 1, MPI_INT, w)) == MPI_ERR_RMA_RANGE, "put past the end");
    CHECK(class_of(MPI_Put(&v, 1, MPI_INT, size, 0, 1, MPI_INT, w)) == MPI_ERR_RANK, "bad rank");
    CHECK(class_of(MPI_Accumulate(&v, 1, MPI_INT, right, 0, 1, MPI_FLOAT, MPI_SUM, w)) == MPI_ERR_TYPE, "mixed types");
    CHECK(MPI_Put(&v, 1, MPI_INT, MPI_PROC_NULL, 0, 1, MPI_INT, w) == MPI_SUCCESS, "MPI_PROC_NULL target");
    MPI_Win_fence(0, w);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Win bad = MPI_WIN_NULL;
    CHECK(class_of(MPI_Win_fence(0, bad)) == MPI_ERR_WIN, "MPI_WIN_NULL");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Win_free(&w);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    fence_ring();
    attributes();
    passive();
    pscw();
    dynamic();
    shared();
    derived();
    errors();
    PASS("rma");
    MPI_Finalize();
    return 0;
}
