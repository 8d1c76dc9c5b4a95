/* Cartesian topologies, Dims_create, and the large-count (_c) forms. */
#include "check.h"

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    int d2[2] = {0, 0};
    MPI_Dims_create(size, 2, d2);
    CHECK(d2[0] * d2[1] == size && d2[0] >= d2[1], "dims_create %d x %d", d2[0], d2[1]);
    int d3[3] = {0, 3, 0};
    MPI_Dims_create(12, 3, d3);
    CHECK(d3[0] == 2 && d3[1] == 3 && d3[2] == 2, "dims_create fixed %d %d %d", d3[0], d3[1], d3[2]);
    int d4[2] = {0, 0};
    MPI_Dims_create(12, 2, d4);
    CHECK(d4[0] == 4 && d4[1] == 3, "dims_create 12 -> %d x %d", d4[0], d4[1]);

    int periods[2] = {1, 0};
    MPI_Comm cart;
    MPI_Cart_create(MPI_COMM_WORLD, 2, d2, periods, 0, &cart);
    int st;
    MPI_Topo_test(cart, &st);
    CHECK(st == MPI_CART, "topo_test");
    int nd, dims[2], per[2], coords[2], r;
    MPI_Cartdim_get(cart, &nd);
    MPI_Cart_get(cart, 2, dims, per, coords);
    CHECK(nd == 2 && dims[0] == d2[0] && per[0] == 1 && per[1] == 0, "cart_get");
    CHECK(coords[0] == rank / d2[1] && coords[1] == rank % d2[1], "coords");
    MPI_Cart_rank(cart, coords, &r);
    CHECK(r == rank, "cart_rank");
    int src, dst;
    MPI_Cart_shift(cart, 0, 1, &src, &dst);
    CHECK(dst == ((coords[0] + 1) % d2[0]) * d2[1] + coords[1], "shift periodic dst %d", dst);
    MPI_Cart_shift(cart, 1, 1, &src, &dst);
    CHECK(dst == (coords[1] + 1 < d2[1] ? rank + 1 : MPI_PROC_NULL), "shift non-periodic");
    CHECK(src == (coords[1] > 0 ? rank - 1 : MPI_PROC_NULL), "shift non-periodic src");
    /* halo exchange along dim 1 with PROC_NULL at the edges */
    int mine = rank, left = -1, right = -1;
    MPI_Sendrecv(&mine, 1, MPI_INT, dst, 0, &left, 1, MPI_INT, src, 0, cart, MPI_STATUS_IGNORE);
    MPI_Sendrecv(&mine, 1, MPI_INT, src, 1, &right, 1, MPI_INT, dst, 1, cart, MPI_STATUS_IGNORE);
    CHECK(left == (src == MPI_PROC_NULL ? -1 : src) && right == (dst == MPI_PROC_NULL ? -1 : dst), "halo");
    int remain[2] = {0, 1};
    MPI_Comm row;
    MPI_Cart_sub(cart, remain, &row);
    int rs, rr;
    MPI_Comm_size(row, &rs);
    MPI_Comm_rank(row, &rr);
    CHECK(rs == d2[1] && rr == coords[1], "cart_sub %d %d", rs, rr);
    MPI_Comm_free(&row);
    MPI_Comm dup;
    MPI_Comm_dup(cart, &dup);
    MPI_Topo_test(dup, &st);
    CHECK(st == MPI_CART, "dup keeps topology");
    MPI_Comm_free(&dup);
    MPI_Comm_free(&cart);
    MPI_Topo_test(MPI_COMM_WORLD, &st);
    CHECK(st == MPI_UNDEFINED, "world has no topology");

    /* _c forms */
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    double v = rank, w = -1, sum = 0;
    MPI_Request q;
    MPI_Irecv_c(&w, 1, MPI_DOUBLE, prev, 5, MPI_COMM_WORLD, &q);
    MPI_Send_c(&v, (MPI_Count)1, MPI_DOUBLE, next, 5, MPI_COMM_WORLD);
    MPI_Wait(&q, MPI_STATUS_IGNORE);
    CHECK(w == prev, "_c p2p");
    MPI_Allreduce_c(&v, &sum, (MPI_Count)1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    CHECK(sum == size * (size - 1) / 2.0, "allreduce_c");
    MPI_Count cnt;
    MPI_Status s;
    MPI_Sendrecv_c(&v, 1, MPI_DOUBLE, next, 6, &w, 1, MPI_DOUBLE, prev, 6, MPI_COMM_WORLD, &s);
    MPI_Get_count_c(&s, MPI_DOUBLE, &cnt);
    CHECK(cnt == 1, "get_count_c");
    PASS("topo");
    MPI_Finalize();
    return 0;
}
