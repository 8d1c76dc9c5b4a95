/* Graph and distributed-graph topologies: creation, queries, Topo_test,
 * messages along the edges, and the errors of bad arguments. */
#include "check.h"
#include <string.h>

int main(int argc, char **argv) {
    int rank, size, st;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    /* A ring over all ranks: node i's neighbours are i-1 and i+1 (mod size). */
    int index[64], edges[128];
    for (int i = 0; i < size; i++) {
        index[i] = 2 * (i + 1);
        edges[2 * i] = (i + size - 1) % size;
        edges[2 * i + 1] = (i + 1) % size;
    }
    MPI_Comm ring;
    CHECK(MPI_Graph_create(MPI_COMM_WORLD, size, index, edges, 0, &ring) == MPI_SUCCESS, "graph_create");
    MPI_Topo_test(ring, &st);
    CHECK(st == MPI_GRAPH, "topo_test graph: %d", st);
    int nn, ne;
    MPI_Graphdims_get(ring, &nn, &ne);
    CHECK(nn == size && ne == 2 * size, "graphdims %d %d", nn, ne);
    int gi[64], ge[128];
    MPI_Graph_get(ring, 64, 128, gi, ge);
    CHECK(memcmp(gi, index, size * sizeof(int)) == 0 && memcmp(ge, edges, 2 * size * sizeof(int)) == 0, "graph_get");
    int cnt, nb[2];
    MPI_Graph_neighbors_count(ring, rank, &cnt);
    CHECK(cnt == 2, "neighbors_count %d", cnt);
    MPI_Graph_neighbors(ring, rank, 2, nb);
    CHECK(nb[0] == (rank + size - 1) % size && nb[1] == (rank + 1) % size, "neighbors %d %d", nb[0], nb[1]);
    /* A message around the ring along the graph's edges. */
    int from = -1;
    MPI_Sendrecv(&rank, 1, MPI_INT, nb[1], 5, &from, 1, MPI_INT, nb[0], 5, ring, MPI_STATUS_IGNORE);
    CHECK(from == nb[0], "ring message from %d", from);
    int newrank;
    MPI_Graph_map(MPI_COMM_WORLD, size, index, edges, &newrank);
    CHECK(newrank == rank, "graph_map keeps the rank");
    /* Dup keeps the topology. */
    MPI_Comm dup;
    MPI_Comm_dup(ring, &dup);
    MPI_Topo_test(dup, &st);
    CHECK(st == MPI_GRAPH, "dup keeps the graph");
    MPI_Comm_free(&dup);

    /* The wrong kind of topology, bad ranks, bad arrays. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(ring, MPI_ERRORS_RETURN);
    int dims[1];
    CHECK(MPI_Cartdim_get(ring, dims) == MPI_ERR_TOPOLOGY, "cart call on a graph");
    CHECK(MPI_Graphdims_get(MPI_COMM_WORLD, &nn, &ne) == MPI_ERR_TOPOLOGY, "graph call without a graph");
    CHECK(MPI_Graph_neighbors_count(ring, size, &cnt) == MPI_ERR_RANK, "neighbors of a non-node");
    CHECK(MPI_Graph_neighbors(ring, -1, 2, nb) == MPI_ERR_RANK, "neighbors of -1");
    CHECK(MPI_Graph_neighbors(ring, rank, 2, NULL) == MPI_ERR_ARG, "NULL neighbors array");
    CHECK(MPI_Graph_get(ring, 2, 2, NULL, ge) == MPI_ERR_ARG, "NULL index array");
    int bad_index[2] = {2, 1}, bad_edges[2] = {0, 0};
    MPI_Comm none = MPI_COMM_NULL;
    CHECK(MPI_Graph_create(MPI_COMM_WORLD, 2, bad_index, bad_edges, 0, &none) == MPI_ERR_ARG, "decreasing index");
    int idx1[1] = {1}, far[1] = {size + 3};
    CHECK(MPI_Graph_create(MPI_COMM_WORLD, 1, idx1, far, 0, &none) == MPI_ERR_ARG, "edge to a non-node");
    CHECK(MPI_Graph_create(MPI_COMM_WORLD, size + 1, index, edges, 0, &none) == MPI_ERR_ARG, "more nodes than processes");
    CHECK(MPI_Graph_create(MPI_COMM_WORLD, -1, index, edges, 0, &none) == MPI_ERR_ARG, "negative nnodes");
    CHECK(none == MPI_COMM_NULL, "no communicator from a failed call");

    /* A graph on fewer nodes: the rest get MPI_COMM_NULL. */
    int one_index[1] = {0};
    MPI_Comm solo;
    MPI_Graph_create(MPI_COMM_WORLD, 1, one_index, NULL, 0, &solo);
    CHECK((rank == 0) == (solo != MPI_COMM_NULL), "only rank 0 is in a 1-node graph");
    if (solo != MPI_COMM_NULL) {
        MPI_Graph_neighbors_count(solo, 0, &cnt);
        CHECK(cnt == 0, "isolated node");
        MPI_Comm_free(&solo);
    }
    MPI_Comm_free(&ring);

    /* Distributed graph, adjacent form: receive from rank-1, send to rank+1, weighted. */
    int left = (rank + size - 1) % size, right = (rank + 1) % size;
    int wl = 10 + left, wr = 10 + rank;
    MPI_Comm dg;
    CHECK(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, &left, &wl, 1, &right, &wr, MPI_INFO_NULL, 0, &dg) == MPI_SUCCESS, "adjacent");
    MPI_Topo_test(dg, &st);
    CHECK(st == MPI_DIST_GRAPH, "topo_test dist graph");
    int in, out, weighted;
    MPI_Dist_graph_neighbors_count(dg, &in, &out, &weighted);
    CHECK(in == 1 && out == 1 && weighted, "counts %d %d %d", in, out, weighted);
    int s, sw, d, dw;
    MPI_Dist_graph_neighbors(dg, 1, &s, &sw, 1, &d, &dw);
    CHECK(s == left && sw == wl && d == right && dw == wr, "adjacent neighbours");
    MPI_Comm_free(&dg);

    /* General form: rank 0 gives every edge i -> (i+1) % size, weight i; others give none. */
    int srcs[64], degs[64], dsts[64], ws[64];
    int n = 0;
    if (rank == 0) {
        for (int i = 0; i < size; i++) { srcs[i] = i; degs[i] = 1; dsts[i] = (i + 1) % size; ws[i] = i; }
        n = size;
    }
    CHECK(MPI_Dist_graph_create(MPI_COMM_WORLD, n, srcs, degs, dsts, ws, MPI_INFO_NULL, 0, &dg) == MPI_SUCCESS, "dist_graph_create");
    MPI_Dist_graph_neighbors_count(dg, &in, &out, &weighted);
    CHECK(in == 1 && out == 1, "general: counts %d %d", in, out);
    MPI_Dist_graph_neighbors(dg, 1, &s, &sw, 1, &d, &dw);
    CHECK(s == left && sw == left && d == right && dw == rank, "general: %d(%d) -> me -> %d(%d)", s, sw, d, dw);
    MPI_Comm_free(&dg);

    /* Unweighted, with MPI_UNWEIGHTED everywhere. */
    MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, &left, MPI_UNWEIGHTED, 1, &right, MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &dg);
    MPI_Dist_graph_neighbors_count(dg, &in, &out, &weighted);
    CHECK(!weighted, "unweighted");
    MPI_Comm_set_errhandler(dg, MPI_ERRORS_RETURN);
    CHECK(MPI_Graph_neighbors_count(dg, 0, &cnt) == MPI_ERR_TOPOLOGY, "graph call on a dist graph");
    MPI_Comm_free(&dg);
    int bad = size;
    CHECK(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, &bad, MPI_UNWEIGHTED, 0, NULL, MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &dg) == MPI_ERR_RANK, "source out of range");
    CHECK(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, -1, &left, MPI_UNWEIGHTED, 0, NULL, MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &dg) == MPI_ERR_ARG, "negative degree");
    CHECK(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, &left, MPI_WEIGHTS_EMPTY, 0, NULL, MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &dg) == MPI_ERR_ARG, "WEIGHTS_EMPTY with a degree");

    MPI_Barrier(MPI_COMM_WORLD);
    PASS("graph");
    MPI_Finalize();
    return 0;
}
