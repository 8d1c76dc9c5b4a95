/* Neighbourhood collectives over Cartesian, graph and distributed-graph
 * topologies, blocking and nonblocking, including the periodic dimensions
 * of 1 and 2 processes where both neighbours are the same process. */
#include "check.h"
#include <string.h>

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int left = (rank + size - 1) % size, right = (rank + 1) % size;

    /* 1-D periodic ring as a Cartesian topology. */
    MPI_Comm ring;
    int dims1[1] = {size}, per1[1] = {1};
    MPI_Cart_create(MPI_COMM_WORLD, 1, dims1, per1, 0, &ring);
    int got[2] = {-1, -1};
    MPI_Neighbor_allgather(&rank, 1, MPI_INT, got, 1, MPI_INT, ring);
    CHECK(got[0] == left && got[1] == right, "cart allgather: %d %d", got[0], got[1]);
    /* Alltoall: slot 0 holds what the negative neighbour sent in its positive direction. */
    int out[2] = {rank * 10 + 0, rank * 10 + 1};
    got[0] = got[1] = -1;
    MPI_Neighbor_alltoall(out, 1, MPI_INT, got, 1, MPI_INT, ring);
    CHECK(got[0] == left * 10 + 1 && got[1] == right * 10 + 0, "cart alltoall: %d %d", got[0], got[1]);
    /* Nonblocking form. */
    MPI_Request rq;
    got[0] = got[1] = -1;
    MPI_Ineighbor_alltoall(out, 1, MPI_INT, got, 1, MPI_INT, ring, &rq);
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
    CHECK(got[0] == left * 10 + 1 && got[1] == right * 10 + 0, "cart ialltoall: %d %d", got[0], got[1]);
    /* Nonblocking w form: its datatype arrays have one entry per neighbour,
     * not one per process: on a periodic ring of one process (MPI_COMM_SELF)
     * there are 2 neighbours, both itself. Through the MPICH-ABI shim the
     * nonblocking form once translated only comm-size entries (1 here). */
    {
        MPI_Comm self_ring;
        int d1[1] = {1};
        MPI_Cart_create(MPI_COMM_SELF, 1, d1, per1, 0, &self_ring);
        int one2[2] = {1, 1};
        MPI_Aint sd2[2] = {0, sizeof(int)}, rd2[2] = {0, sizeof(int)};
        MPI_Datatype t2[2] = {MPI_INT, MPI_INT};
        got[0] = got[1] = -1;
        MPI_Ineighbor_alltoallw(out, one2, sd2, t2, got, one2, rd2, t2, self_ring, &rq);
        MPI_Wait(&rq, MPI_STATUS_IGNORE);
        CHECK(got[0] == rank * 10 + 1 && got[1] == rank * 10 + 0, "self ring ialltoallw: %d %d", got[0], got[1]);
        MPI_Comm_free(&self_ring);
    }
    MPI_Comm_free(&ring);

    /* 2-D non-periodic grid: edge slots (MPI_PROC_NULL) stay untouched. */
    int d2[2] = {0, 0}, per2[2] = {0, 0};
    MPI_Dims_create(size, 2, d2);
    MPI_Comm grid;
    MPI_Cart_create(MPI_COMM_WORLD, 2, d2, per2, 0, &grid);
    int g4[4] = {-1, -1, -1, -1}, nbr[4];
    MPI_Cart_shift(grid, 0, 1, &nbr[0], &nbr[1]);
    MPI_Cart_shift(grid, 1, 1, &nbr[2], &nbr[3]);
    MPI_Neighbor_allgather(&rank, 1, MPI_INT, g4, 1, MPI_INT, grid);
    for (int k = 0; k < 4; k++)
        CHECK(g4[k] == (nbr[k] == MPI_PROC_NULL ? -1 : nbr[k]), "grid slot %d: %d want %d", k, g4[k], nbr[k]);
    MPI_Comm_free(&grid);

    /* Graph ring: neighbours left then right. */
    int index[64], edges[128];
    for (int i = 0; i < size; i++) {
        index[i] = 2 * (i + 1);
        edges[2 * i] = (i + size - 1) % size;
        edges[2 * i + 1] = (i + 1) % size;
    }
    MPI_Comm gr;
    MPI_Graph_create(MPI_COMM_WORLD, size, index, edges, 0, &gr);
    got[0] = got[1] = -1;
    MPI_Neighbor_allgather(&rank, 1, MPI_INT, got, 1, MPI_INT, gr);
    CHECK(got[0] == left && got[1] == right, "graph allgather: %d %d", got[0], got[1]);
    if (size >= 3) {
        got[0] = got[1] = -1;
        MPI_Neighbor_alltoall(out, 1, MPI_INT, got, 1, MPI_INT, gr);
        /* My left neighbour sent me (its right) its block 1. */
        CHECK(got[0] == left * 10 + 1 && got[1] == right * 10 + 0, "graph alltoall: %d %d", got[0], got[1]);
    }
    MPI_Comm_free(&gr);

    /* Distributed graph: receive from left, send to right (a directed ring). */
    MPI_Comm dg;
    MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, &left, MPI_UNWEIGHTED, 1, &right, MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &dg);
    int v = -1;
    MPI_Neighbor_allgather(&rank, 1, MPI_INT, &v, 1, MPI_INT, dg);
    CHECK(v == left, "dist allgather: %d", v);
    /* Allgatherv: 3 ints at displacement 2. */
    int three[3] = {rank, rank + 1, rank + 2}, wide[5] = {-1, -1, -1, -1, -1};
    int rc[1] = {3}, rd[1] = {2};
    MPI_Ineighbor_allgatherv(three, 3, MPI_INT, wide, rc, rd, MPI_INT, dg, &rq);
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
    CHECK(wide[0] == -1 && wide[1] == -1 && wide[2] == left && wide[4] == left + 2, "dist allgatherv");
    /* Alltoallv: 2 ints from displacement 1. */
    int sv[3] = {-5, rank * 2, rank * 2 + 1}, rv[4] = {-1, -1, -1, -1};
    int scs[1] = {2}, sds[1] = {1}, rcs[1] = {2}, rds[1] = {2};
    MPI_Neighbor_alltoallv(sv, scs, sds, MPI_INT, rv, rcs, rds, MPI_INT, dg);
    CHECK(rv[1] == -1 && rv[2] == left * 2 && rv[3] == left * 2 + 1, "dist alltoallv");
    /* Alltoallw: a double sent, received at byte displacement 8. */
    double dv = rank + 0.5, dr[2] = {-1, -1};
    int one[1] = {1};
    MPI_Aint sdb[1] = {0}, rdb[1] = {8};
    MPI_Datatype dt[1] = {MPI_DOUBLE};
    MPI_Neighbor_alltoallw(&dv, one, sdb, dt, dr, one, rdb, dt, dg);
    CHECK(dr[0] == -1 && dr[1] == left + 0.5, "dist alltoallw");
    /* Large-count form. */
    MPI_Count c1 = 1;
    v = -1;
    MPI_Neighbor_alltoall_c(&rank, c1, MPI_INT, &v, c1, MPI_INT, dg);
    CHECK(v == left, "alltoall_c");
    /* Persistent forms (MPI 4.0): started three times, each start reading
     * the send buffer as it is then. */
    MPI_Request pr[2];
    int pv = -1, pin = 0, pw[5];
    MPI_Neighbor_allgather_init(&pin, 1, MPI_INT, &pv, 1, MPI_INT, dg, MPI_INFO_NULL, &pr[0]);
    MPI_Neighbor_allgatherv_init(three, 3, MPI_INT, wide, rc, rd, MPI_INT, dg, MPI_INFO_NULL, &pr[1]);
    for (int round = 0; round < 3; round++) {
        pin = rank * 100 + round;
        pv = -1;
        three[0] = rank + round;
        memset(wide, 0xff, sizeof wide);
        MPI_Startall(2, pr);
        MPI_Waitall(2, pr, MPI_STATUSES_IGNORE);
        CHECK(pv == left * 100 + round, "allgather_init round %d: %d", round, pv);
        CHECK(wide[1] == -1 && wide[2] == left + round && wide[3] == left + 1, "allgatherv_init round %d", round);
    }
    MPI_Request_free(&pr[0]);
    MPI_Request_free(&pr[1]);
    MPI_Neighbor_alltoallv_init(sv, scs, sds, MPI_INT, rv, rcs, rds, MPI_INT, dg, MPI_INFO_NULL, &pr[0]);
    MPI_Neighbor_alltoallw_init(&dv, one, sdb, dt, dr, one, rdb, dt, dg, MPI_INFO_NULL, &pr[1]);
    for (int round = 0; round < 2; round++) {
        sv[1] = rank * 2 + round * 1000;
        dv = rank + 0.5 + round;
        rv[2] = -1;
        dr[1] = -1;
        MPI_Start(&pr[0]);
        MPI_Start(&pr[1]);
        MPI_Waitall(2, pr, MPI_STATUSES_IGNORE);
        CHECK(rv[2] == left * 2 + round * 1000 && rv[3] == left * 2 + 1, "alltoallv_init round %d", round);
        CHECK(dr[1] == left + 0.5 + round, "alltoallw_init round %d", round);
    }
    MPI_Request_free(&pr[0]);
    MPI_Request_free(&pr[1]);
    MPI_Count cc = 1;
    MPI_Neighbor_alltoall_init_c(&pin, cc, MPI_INT, &pw[0], cc, MPI_INT, dg, MPI_INFO_NULL, &pr[0]);
    pin = rank + 7;
    MPI_Start(&pr[0]);
    MPI_Wait(&pr[0], MPI_STATUS_IGNORE);
    CHECK(pw[0] == left + 7, "alltoall_init_c: %d", pw[0]);
    MPI_Request_free(&pr[0]);
    MPI_Comm_free(&dg);

    /* Errors. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    CHECK(MPI_Neighbor_allgather(&rank, 1, MPI_INT, got, 1, MPI_INT, MPI_COMM_WORLD) == MPI_ERR_TOPOLOGY, "no topology");
    MPI_Comm r2;
    MPI_Cart_create(MPI_COMM_WORLD, 1, dims1, per1, 0, &r2);
    MPI_Comm_set_errhandler(r2, MPI_ERRORS_RETURN);
    CHECK(MPI_Neighbor_allgather(MPI_IN_PLACE, 1, MPI_INT, got, 1, MPI_INT, r2) == MPI_ERR_ARG, "in place");
    CHECK(MPI_Neighbor_alltoall(out, -1, MPI_INT, got, 1, MPI_INT, r2) == MPI_ERR_COUNT, "negative count");
    CHECK(MPI_Neighbor_alltoall_init(out, -1, MPI_INT, got, 1, MPI_INT, r2, MPI_INFO_NULL, &rq) == MPI_ERR_COUNT,
          "persistent: negative count");
    CHECK(MPI_Neighbor_allgather_init(&rank, 1, MPI_INT, got, 1, MPI_INT, r2, MPI_INFO_NULL, NULL) == MPI_ERR_REQUEST,
          "persistent: NULL request");
    MPI_Comm_free(&r2);

    MPI_Barrier(MPI_COMM_WORLD);
    PASS("neighbor");
    MPI_Finalize();
    return 0;
}
