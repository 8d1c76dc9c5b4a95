/* MPI_Type_create_darray: block, cyclic and undistributed dimensions, C and
 * Fortran order, default and explicit dargs. Each case is checked element
 * by element against an independent computation of what a process owns,
 * and the parts of all ranks, sent to rank 0 with their darray types,
 * must rebuild the whole array. */
#include "check.h"
#include <string.h>

#define G0 5
#define G1 7

static int owns(int i, int g, int p, int c, int dist, int darg) {
    if (dist == MPI_DISTRIBUTE_NONE) return 1;
    if (dist == MPI_DISTRIBUTE_BLOCK) {
        int b = darg == MPI_DISTRIBUTE_DFLT_DARG ? (g + p - 1) / p : darg;
        return i >= c * b && i < (c + 1) * b;
    }
    int b = darg == MPI_DISTRIBUTE_DFLT_DARG ? 1 : darg;
    return (i / b) % p == c;
}

static void run_case(int rank, int size, int p0, int p1, int d0, int a0, int d1, int a1, int order) {
    int gs[2] = {G0, G1}, ds[2] = {d0, d1}, as[2] = {a0, a1}, ps[2] = {p0, p1};
    int glob[G0 * G1];
    /* Element (i, j) holds 100 i + j wherever the order puts it. */
    for (int i = 0; i < G0; i++)
        for (int j = 0; j < G1; j++)
            glob[order == MPI_ORDER_C ? i * G1 + j : j * G0 + i] = 100 * i + j;
    MPI_Datatype t;
    CHECK(MPI_Type_create_darray(size, rank, 2, gs, ds, as, ps, order, MPI_INT, &t) == MPI_SUCCESS, "create");
    MPI_Type_commit(&t);
    MPI_Aint lb, ext;
    MPI_Type_get_extent(t, &lb, &ext);
    CHECK(lb == 0 && ext == (MPI_Aint)sizeof glob, "extent %ld", (long)ext);
    /* Expected elements in the order of the local array. */
    int c0 = rank / p1, c1 = rank % p1, want[G0 * G1], n = 0;
    if (order == MPI_ORDER_C) {
        for (int i = 0; i < G0; i++)
            for (int j = 0; j < G1; j++)
                if (owns(i, G0, p0, c0, d0, a0) && owns(j, G1, p1, c1, d1, a1)) want[n++] = 100 * i + j;
    } else {
        for (int j = 0; j < G1; j++)
            for (int i = 0; i < G0; i++)
                if (owns(i, G0, p0, c0, d0, a0) && owns(j, G1, p1, c1, d1, a1)) want[n++] = 100 * i + j;
    }
    int sz;
    MPI_Type_size(t, &sz);
    CHECK(sz == n * (int)sizeof(int), "size %d, want %d elements", sz, n);
    int packed[G0 * G1], pos = 0;
    MPI_Pack(glob, 1, t, packed, sizeof packed, &pos, MPI_COMM_WORLD);
    CHECK(pos == sz, "packed %d", pos);
    for (int k = 0; k < n; k++) CHECK(packed[k] == want[k], "element %d: %d, want %d", k, packed[k], want[k]);
    /* Everyone's part to rank 0, received with that rank's darray type. */
    MPI_Request rq;
    MPI_Isend(glob, 1, t, 0, 9, MPI_COMM_WORLD, &rq);
    if (rank == 0) {
        int rebuilt[G0 * G1], hits[G0 * G1];
        memset(rebuilt, 0xff, sizeof rebuilt);
        memset(hits, 0, sizeof hits);
        for (int r = 0; r < size; r++) {
            MPI_Datatype tr;
            MPI_Type_create_darray(size, r, 2, gs, ds, as, ps, order, MPI_INT, &tr);
            MPI_Type_commit(&tr);
            int tmp[G0 * G1];
            memset(tmp, 0xff, sizeof tmp);
            MPI_Recv(tmp, 1, tr, r, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            for (int k = 0; k < G0 * G1; k++)
                if (tmp[k] != -1) { rebuilt[k] = tmp[k]; hits[k]++; }
            MPI_Type_free(&tr);
        }
        for (int k = 0; k < G0 * G1; k++)
            CHECK(rebuilt[k] == glob[k] && hits[k] == 1, "element %d: %d (%d owners)", k, rebuilt[k], hits[k]);
    }
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
    /* The envelope and contents give the arguments back. */
    int ni, na, nt, comb;
    MPI_Type_get_envelope(t, &ni, &na, &nt, &comb);
    CHECK(comb == MPI_COMBINER_DARRAY && ni == 12 && na == 0 && nt == 1, "envelope");
    int iv[12];
    MPI_Aint av[1];
    MPI_Datatype tv[1];
    MPI_Type_get_contents(t, 12, 0, 1, iv, av, tv);
    CHECK(iv[0] == size && iv[1] == rank && iv[2] == 2 && iv[3] == G0 && iv[5] == d0 && iv[7] == a0 && iv[9] == p0 && iv[11] == order, "contents");
    MPI_Type_free(&t);
}

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int dims[2] = {0, 0};
    MPI_Dims_create(size, 2, dims);
    const int B = MPI_DISTRIBUTE_BLOCK, C = MPI_DISTRIBUTE_CYCLIC, N = MPI_DISTRIBUTE_NONE, D = MPI_DISTRIBUTE_DFLT_DARG;
    for (int o = 0; o < 2; o++) {
        int order = o ? MPI_ORDER_FORTRAN : MPI_ORDER_C;
        run_case(rank, size, dims[0], dims[1], B, D, B, D, order);
        run_case(rank, size, dims[0], dims[1], C, D, C, 2, order);
        run_case(rank, size, dims[0], dims[1], B, D, C, D, order);
        run_case(rank, size, size, 1, C, 2, N, D, order);
        /* An explicit block size larger than the default one. */
        run_case(rank, size, 1, size, N, D, B, (G1 + size - 1) / size + 1, order);
    }

    /* Bad arguments. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Datatype t;
    int gs[2] = {G0, G1}, bb[2] = {B, B}, dd[2] = {D, D}, ps[2] = {dims[0], dims[1]};
    CHECK(MPI_Type_create_darray(size, size, 2, gs, bb, dd, ps, MPI_ORDER_C, MPI_INT, &t) == MPI_ERR_ARG, "rank out of range");
    int wrong[2] = {size + 1, 1};
    CHECK(MPI_Type_create_darray(size, rank, 2, gs, bb, dd, wrong, MPI_ORDER_C, MPI_INT, &t) == MPI_ERR_ARG, "grid of the wrong size");
    int nn[2] = {N, N};
    if (size > 1) {
        int grid[2] = {1, size};
        CHECK(MPI_Type_create_darray(size, rank, 2, gs, nn, dd, grid, MPI_ORDER_C, MPI_INT, &t) == MPI_ERR_ARG, "NONE over several processes");
    }
    int small[2] = {1, 1}, one[2] = {1, 1};
    if (size == 1) {
        CHECK(MPI_Type_create_darray(1, 0, 2, gs, bb, small, one, MPI_ORDER_C, MPI_INT, &t) == MPI_ERR_ARG, "blocks do not cover");
    }
    int bogus[2] = {99, B};
    CHECK(MPI_Type_create_darray(size, rank, 2, gs, bogus, dd, ps, MPI_ORDER_C, MPI_INT, &t) == MPI_ERR_ARG, "bad distribution");
    CHECK(MPI_Type_create_darray(size, rank, 2, gs, bb, dd, ps, 3, MPI_INT, &t) == MPI_ERR_ARG, "bad order");
    CHECK(MPI_Type_create_darray(size, rank, 0, gs, bb, dd, ps, MPI_ORDER_C, MPI_INT, &t) == MPI_ERR_ARG, "ndims 0");
    CHECK(MPI_Type_create_darray(size, rank, 2, gs, bb, dd, ps, MPI_ORDER_C, MPI_DATATYPE_NULL, &t) == MPI_ERR_TYPE, "null type");

    MPI_Barrier(MPI_COMM_WORLD);
    PASS("darray");
    MPI_Finalize();
    return 0;
}
