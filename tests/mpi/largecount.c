/* Large counts (MPI_Count, the `_c` functions): datatypes whose count or size
 * is above INT_MAX are described, not materialised (creating, committing and
 * freeing one costs little memory and time), receives accept counts above
 * INT_MAX, MPI_Get_count_c/MPI_Get_elements_c report counts beyond an int, a
 * type of too many separate pieces fails with MPI_ERR_COUNT instead of
 * aborting, and (when the machine has the memory) a message of more than
 * 2 GiB really travels. */
#include "check.h"
#include <limits.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>

static long maxrss_kib(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_maxrss;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Virtual memory for `n` bytes: only the pages written are ever backed. */
static char *reserve(MPI_Count n) {
    void *p = mmap(NULL, (size_t)n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    CHECK(p != MAP_FAILED, "mmap of %lld bytes", (long long)n);
    return p;
}

static long long mem_available_kib(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    long long kib = 0;
    if (!f) return 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lld kB", &kib) == 1) break;
    fclose(f);
    return kib;
}

static void huge_types(void) {
    const MPI_Count big = 3000000000LL;
    long rss0 = maxrss_kib();
    double t0 = now();
    MPI_Datatype t;
    CHECK(MPI_Type_contiguous_c(big, MPI_BYTE, &t) == MPI_SUCCESS, "contiguous_c");
    CHECK(MPI_Type_commit(&t) == MPI_SUCCESS, "commit");
    MPI_Count size, lb, extent;
    CHECK(MPI_Type_size_c(t, &size) == MPI_SUCCESS && size == big, "size_c %lld", (long long)size);
    CHECK(MPI_Type_get_extent_c(t, &lb, &extent) == MPI_SUCCESS && lb == 0 && extent == big,
          "extent_c %lld %lld", (long long)lb, (long long)extent);
    int isize = 0;
    CHECK(MPI_Type_size(t, &isize) == MPI_SUCCESS && isize == MPI_UNDEFINED, "int size %d", isize);
    CHECK(MPI_Type_free(&t) == MPI_SUCCESS, "free");

    /* 2^28 doubles: 2 GiB of type map, one block. */
    CHECK(MPI_Type_contiguous(1 << 28, MPI_DOUBLE, &t) == MPI_SUCCESS, "contiguous doubles");
    CHECK(MPI_Type_commit(&t) == MPI_SUCCESS, "commit doubles");
    CHECK(MPI_Type_size_c(t, &size) == MPI_SUCCESS && size == (MPI_Count)8 << 28, "size %lld", (long long)size);
    CHECK(MPI_Type_free(&t) == MPI_SUCCESS, "free doubles");

    /* A vector whose stride is its block length: also one run. */
    CHECK(MPI_Type_vector_c(big, 2, 2, MPI_DOUBLE, &t) == MPI_SUCCESS, "vector_c");
    CHECK(MPI_Type_commit(&t) == MPI_SUCCESS, "commit vector");
    CHECK(MPI_Type_size_c(t, &size) == MPI_SUCCESS && size == big * 16, "vector size %lld", (long long)size);
    CHECK(MPI_Type_free(&t) == MPI_SUCCESS, "free vector");

    /* Contiguous of a contiguous of a huge count stays cheap too. */
    MPI_Datatype inner;
    CHECK(MPI_Type_contiguous(1 << 30, MPI_BYTE, &inner) == MPI_SUCCESS, "inner");
    CHECK(MPI_Type_contiguous_c(1 << 20, inner, &t) == MPI_SUCCESS, "outer");
    CHECK(MPI_Type_size_c(t, &size) == MPI_SUCCESS && size == (MPI_Count)1 << 50, "outer size %lld", (long long)size);
    CHECK(MPI_Type_free(&t) == MPI_SUCCESS && MPI_Type_free(&inner) == MPI_SUCCESS, "free outer");

    double secs = now() - t0;
    long grown = maxrss_kib() - rss0;
    CHECK(grown < 100 * 1024, "huge types grew the resident set by %ld KiB", grown);
    CHECK(secs < 2.0, "huge types took %.3f s", secs);

    /* 2^30 separate strided pieces: refused with a count error, not an abort. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rc = MPI_Type_vector(1 << 30, 1, 2, MPI_DOUBLE, &t);
    int cls = -1;
    MPI_Error_class(rc, &cls);
    CHECK(rc != MPI_SUCCESS && cls == MPI_ERR_COUNT, "strided vector: rc %d class %d", rc, cls);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    grown = maxrss_kib() - rss0;
    CHECK(grown < 100 * 1024, "refusing grew the resident set by %ld KiB", grown);
}

/* A small message received with counts above INT_MAX: the receive accepts
 * them and the status reports what arrived. */
static void huge_receive_counts(int rank, int size) {
    const MPI_Count big = 3000000000LL;
    int peer = (rank + 1) % size, from = (rank + size - 1) % size;
    char msg[4096];
    for (int i = 0; i < 4096; i++) msg[i] = (char)(i * 7 + rank);
    char *buf = reserve(big);
    MPI_Request req;
    MPI_Status st;
    CHECK(MPI_Isend_c(msg, 4096, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &req) == MPI_SUCCESS, "isend");
    CHECK(MPI_Recv_c(buf, big, MPI_BYTE, from, 1, MPI_COMM_WORLD, &st) == MPI_SUCCESS, "recv_c big count");
    CHECK(MPI_Wait(&req, MPI_STATUS_IGNORE) == MPI_SUCCESS, "wait");
    MPI_Count n = -1;
    CHECK(MPI_Get_count_c(&st, MPI_BYTE, &n) == MPI_SUCCESS && n == 4096, "count %lld", (long long)n);
    for (int i = 0; i < 4096; i++) CHECK(buf[i] == (char)(i * 7 + from), "byte %d", i);

    /* One element of a 3e9-byte type, of which 4096 bytes arrive. */
    MPI_Datatype t;
    MPI_Type_contiguous_c(big, MPI_BYTE, &t);
    MPI_Type_commit(&t);
    CHECK(MPI_Irecv_c(buf, 1, t, from, 2, MPI_COMM_WORLD, &req) == MPI_SUCCESS, "irecv_c");
    CHECK(MPI_Send_c(msg, 4096, MPI_BYTE, peer, 2, MPI_COMM_WORLD) == MPI_SUCCESS, "send_c");
    CHECK(MPI_Wait(&req, &st) == MPI_SUCCESS, "wait irecv");
    CHECK(MPI_Get_count_c(&st, t, &n) == MPI_SUCCESS && n == MPI_UNDEFINED, "partial count %lld", (long long)n);
    CHECK(MPI_Get_elements_c(&st, t, &n) == MPI_SUCCESS && n == 4096, "elements %lld", (long long)n);
    MPI_Type_free(&t);
    munmap(buf, (size_t)big);

    /* Counts beyond an int in a status: the _c queries report them, the int ones cannot. */
    CHECK(MPI_Status_set_elements_c(&st, MPI_DOUBLE, 5000000000LL) == MPI_SUCCESS, "set elements");
    CHECK(MPI_Get_count_c(&st, MPI_DOUBLE, &n) == MPI_SUCCESS && n == 5000000000LL, "count_c %lld", (long long)n);
    CHECK(MPI_Get_elements_c(&st, MPI_DOUBLE, &n) == MPI_SUCCESS && n == 5000000000LL, "elements_c %lld", (long long)n);
    int in = 0;
    CHECK(MPI_Get_count(&st, MPI_DOUBLE, &in) == MPI_SUCCESS && in == MPI_UNDEFINED, "int count %d", in);
}

/* Collectives whose `_c` counts exceed INT_MAX. Without the memory for
 * such buffers in every `make test`, the elements are of a committed type
 * of size 0 (the counts travel through every check and algorithm; no byte
 * moves); huge_transfer moves real bytes when asked. */
static void huge_collective_counts(int rank, int size) {
    const MPI_Count big = 3000000000LL;
    MPI_Datatype z;
    CHECK(MPI_Type_contiguous(0, MPI_INT, &z) == MPI_SUCCESS, "empty type");
    MPI_Type_commit(&z);
    char sb[8] = {0}, rb[8] = {0};
    MPI_Request req;
    CHECK(MPI_Bcast_c(rb, big, z, 0, MPI_COMM_WORLD) == MPI_SUCCESS, "bcast_c > INT_MAX");
    CHECK(MPI_Allgather_c(sb, big, z, rb, big, z, MPI_COMM_WORLD) == MPI_SUCCESS, "allgather_c > INT_MAX");
    CHECK(MPI_Alltoall_c(sb, big, z, rb, big, z, MPI_COMM_WORLD) == MPI_SUCCESS, "alltoall_c > INT_MAX");
    CHECK(MPI_Gather_c(sb, big, z, rb, big, z, 0, MPI_COMM_WORLD) == MPI_SUCCESS, "gather_c > INT_MAX");
    CHECK(MPI_Scatter_c(sb, big, z, rb, big, z, size - 1, MPI_COMM_WORLD) == MPI_SUCCESS, "scatter_c > INT_MAX");
    CHECK(MPI_Ibcast_c(rb, big, z, 0, MPI_COMM_WORLD, &req) == MPI_SUCCESS, "ibcast_c > INT_MAX");
    CHECK(MPI_Wait(&req, MPI_STATUS_IGNORE) == MPI_SUCCESS, "ibcast_c wait");
    CHECK(MPI_Bcast_init_c(rb, big, z, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &req) == MPI_SUCCESS, "bcast_init_c");
    CHECK(MPI_Start(&req) == MPI_SUCCESS && MPI_Wait(&req, MPI_STATUS_IGNORE) == MPI_SUCCESS, "bcast_init_c run");
    MPI_Request_free(&req);
    /* Counts whose sum or product with the group size overflows are refused. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int cls = 0, rc = MPI_Reduce_scatter_block_c(sb, rb, (MPI_Count)1 << 62, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Error_class(rc, &cls);
    CHECK(size == 1 || cls == MPI_ERR_COUNT, "reduce_scatter_block_c overflow: rc %d class %d", rc, cls);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Type_free(&z);
    (void)rank;
}

/* A real message of more than INT_MAX bytes (count > INT_MAX of MPI_BYTE).
 * Opt-in (GW_LARGECOUNT_TRANSFER=1), and only when the host has the memory
 * for every rank's two buffers: it takes 4 GiB per rank and, with the debug
 * library the test suite builds, 9 s to self and 23 s between two ranks on
 * a 2-core host, too much for every `make test`. docs/mpi.md has figures. */
static void huge_transfer(int rank, int size) {
    const MPI_Count n = ((MPI_Count)1 << 31) + 4096;
    long long need_kib = (long long)size * 2 * (n >> 10) + (1 << 20);
    const char *want = getenv("GW_LARGECOUNT_TRANSFER");
    if (!want || strcmp(want, "1") != 0) {
        if (rank == 0) printf("largecount: %lld-byte transfer not run (set GW_LARGECOUNT_TRANSFER=1)\n", (long long)n);
        return;
    }
    int enough = mem_available_kib() > 2 * need_kib;
    MPI_Allreduce(MPI_IN_PLACE, &enough, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!enough) {
        if (rank == 0) printf("largecount: %lld-byte transfer not run (not enough memory)\n", (long long)n);
        return;
    }
    int peer = (rank + 1) % size, from = (rank + size - 1) % size;
    char *s = reserve(n), *r = reserve(n);
    /* Marks every 4 KiB page (so the whole buffer is really sent). */
    for (MPI_Count i = 0; i < n; i += 4096) s[i] = (char)((i >> 12) * 31 + rank);
    s[n - 1] = (char)(rank + 5);
    double t0 = now();
    MPI_Request req;
    MPI_Status st;
    CHECK(MPI_Irecv_c(r, n, MPI_BYTE, from, 3, MPI_COMM_WORLD, &req) == MPI_SUCCESS, "irecv big");
    CHECK(MPI_Send_c(s, n, MPI_BYTE, peer, 3, MPI_COMM_WORLD) == MPI_SUCCESS, "send big");
    CHECK(MPI_Wait(&req, &st) == MPI_SUCCESS, "wait big");
    double secs = now() - t0;
    MPI_Count got = 0;
    CHECK(MPI_Get_count_c(&st, MPI_BYTE, &got) == MPI_SUCCESS && got == n, "big count %lld", (long long)got);
    for (MPI_Count i = 0; i < n; i += 4096)
        CHECK(r[i] == (char)((i >> 12) * 31 + from), "page at %lld", (long long)i);
    CHECK(r[n - 1] == (char)(from + 5), "last byte");
    if (rank == 0) printf("largecount: %lld bytes in %.2f s\n", (long long)n, secs);
    /* The same buffer broadcast from the last rank (MPI_Bcast_c > INT_MAX). */
    for (MPI_Count i = 0; i < n; i += 4096) r[i] = (char)((i >> 12) * 17 + (rank == size - 1));
    CHECK(MPI_Bcast_c(r, n, MPI_BYTE, size - 1, MPI_COMM_WORLD) == MPI_SUCCESS, "bcast big");
    for (MPI_Count i = 0; i < n; i += 4096)
        CHECK(r[i] == (char)((i >> 12) * 17 + 1), "bcast page at %lld", (long long)i);
    CHECK(secs < 30, "transfer took %.1f s", secs);
    munmap(s, (size_t)n);
    munmap(r, (size_t)n);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    huge_types();
    huge_receive_counts(rank, size);
    huge_collective_counts(rank, size);
    huge_transfer(rank, size);
    MPI_Finalize();
    PASS("largecount");
    return 0;
}
