/* Communicators and groups. */
#include "check.h"
#include <string.h>

int main(int argc, char **argv) {
    int rank, size, r, s, res;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    /* COMM_SELF */
    MPI_Comm_rank(MPI_COMM_SELF, &r);
    MPI_Comm_size(MPI_COMM_SELF, &s);
    CHECK(r == 0 && s == 1, "self");
    int v = 3, w = 0;
    MPI_Sendrecv(&v, 1, MPI_INT, 0, 1, &w, 1, MPI_INT, 0, 1, MPI_COMM_SELF, MPI_STATUS_IGNORE);
    CHECK(w == 3, "self sendrecv");

    /* dup: same group, separate traffic. */
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_compare(MPI_COMM_WORLD, dup, &res);
    CHECK(res == MPI_CONGRUENT, "compare dup %d", res);
    MPI_Comm_compare(dup, dup, &res);
    CHECK(res == MPI_IDENT, "compare ident");
    if (size > 1) {
        int a = -1, b = -1;
        if (rank == 0) {
            int one = 1, two = 2;
            MPI_Send(&one, 1, MPI_INT, 1, 0, MPI_COMM_WORLD);
            MPI_Send(&two, 1, MPI_INT, 1, 0, dup);
        } else if (rank == 1) {
            MPI_Recv(&b, 1, MPI_INT, 0, 0, dup, MPI_STATUS_IGNORE);
            MPI_Recv(&a, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            CHECK(a == 1 && b == 2, "contexts separate a=%d b=%d", a, b);
        }
    }
    MPI_Comm_set_name(dup, "my dup");
    char name[MPI_MAX_OBJECT_NAME];
    int len;
    MPI_Comm_get_name(dup, name, &len);
    CHECK(strcmp(name, "my dup") == 0 && len == 6, "name %s", name);
    MPI_Comm_get_name(MPI_COMM_WORLD, name, &len);
    CHECK(strcmp(name, "MPI_COMM_WORLD") == 0, "world name %s", name);

    /* split: even/odd, reversed key. */
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half);
    MPI_Comm_rank(half, &r);
    MPI_Comm_size(half, &s);
    CHECK(s == (size + 1 - rank % 2) / 2, "split size %d", s);
    int sum = 0;
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, half);
    int want = 0;
    for (int i = rank % 2; i < size; i += 2) want += i;
    CHECK(sum == want, "split allreduce %d want %d", sum, want);
    int first;
    int top = rank;
    MPI_Bcast(&top, 1, MPI_INT, 0, half);
    first = (size - 1) - ((size - 1) % 2 != rank % 2); /* highest rank of my parity has rank 0 */
    CHECK(top == first, "split key order top %d want %d", top, first);

    MPI_Comm none;
    MPI_Comm_split(MPI_COMM_WORLD, rank == 0 ? MPI_UNDEFINED : 1, 0, &none);
    CHECK((rank == 0) == (none == MPI_COMM_NULL), "undefined colour");
    if (none != MPI_COMM_NULL) MPI_Comm_free(&none);

    /* split_type shared: same host. */
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &s);
    CHECK(s >= 1 && s <= size, "node size %d", s);
    int nsum;
    MPI_Allreduce(&s, &nsum, 1, MPI_INT, MPI_SUM, node);
    CHECK(nsum == s * s, "node consistent");

    /* split_type with MPI_UNDEFINED on some ranks (one root at a time joins),
     * shared and guided by mpi_hw_resource_type; then a collective on WORLD
     * must still match (every rank ran the same collectives inside). */
    MPI_Info hw;
    MPI_Info_create(&hw);
    MPI_Info_set(hw, "mpi_hw_resource_type", "mpi_shared_memory");
    for (int root = 0; root < size; root++) {
#ifdef GRIDWIRE_MPI
        const int kinds = 2; /* shared, and guided by the shared-memory resource type */
#else
        const int kinds = 1; /* what the resource types mean is up to each MPI */
#endif
        for (int kind = 0; kind < kinds; kind++) {
            int type = kind == 0 ? MPI_COMM_TYPE_SHARED : MPI_COMM_TYPE_HW_GUIDED;
            MPI_Comm one;
            MPI_Comm_split_type(MPI_COMM_WORLD, rank == root ? type : MPI_UNDEFINED, 0, hw, &one);
            if (rank == root) {
                CHECK(one != MPI_COMM_NULL, "split_type root %d kind %d: null", root, kind);
                MPI_Comm_size(one, &s);
                CHECK(s == 1, "split_type root %d kind %d: size %d", root, kind, s);
                MPI_Comm_free(&one);
            } else {
                CHECK(one == MPI_COMM_NULL, "split_type root %d kind %d: not null on %d", root, kind, rank);
            }
            int token = rank == root ? 1000 + root : -1;
            MPI_Bcast(&token, 1, MPI_INT, root, MPI_COMM_WORLD);
            CHECK(token == 1000 + root, "bcast after split_type: %d", token);
        }
    }
#ifdef GRIDWIRE_MPI
    /* Guided by an unknown resource type: MPI_COMM_NULL everywhere. */
    MPI_Info_set(hw, "mpi_hw_resource_type", "no-such-thing");
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_HW_GUIDED, 0, hw, &none);
    CHECK(none == MPI_COMM_NULL, "guided by an unknown resource");
    MPI_Info_free(&hw);
    MPI_Comm_get_name(MPI_COMM_NULL, name, &len);
    CHECK(strcmp(name, "MPI_COMM_NULL") == 0, "null name %s", name);
#else
    MPI_Info_free(&hw);
#endif

    /* groups */
    MPI_Group wg, g1, g2, gu, gi, gd;
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    MPI_Group_size(wg, &s);
    MPI_Group_rank(wg, &r);
    CHECK(s == size && r == rank, "world group");
    int evens[64], ne = 0;
    for (int i = 0; i < size; i += 2) evens[ne++] = i;
    MPI_Group_incl(wg, ne, evens, &g1);
    MPI_Group_excl(wg, ne, evens, &g2);
    MPI_Group_union(g1, g2, &gu);
    MPI_Group_intersection(g1, g2, &gi);
    MPI_Group_difference(wg, g1, &gd);
    MPI_Group_size(gu, &s);
    CHECK(s == size, "union");
    MPI_Group_compare(gu, wg, &res);
    CHECK(res == (size > 2 ? MPI_SIMILAR : MPI_IDENT), "union similar %d", res);
    MPI_Group_size(gi, &s);
    CHECK(s == 0 && gi == MPI_GROUP_EMPTY, "intersection empty");
    MPI_Group_compare(gd, g2, &res);
    CHECK(res == MPI_IDENT, "difference == excl");
    int ranges[1][3] = {{0, size - 1, 2}};
    MPI_Group g3;
    MPI_Group_range_incl(wg, 1, ranges, &g3);
    MPI_Group_compare(g3, g1, &res);
    CHECK(res == MPI_IDENT, "range_incl");
    int tr[64], trout[64];
    for (int i = 0; i < ne; i++) tr[i] = i;
    MPI_Group_translate_ranks(g1, ne, tr, wg, trout);
    for (int i = 0; i < ne; i++) CHECK(trout[i] == 2 * i, "translate");

    /* create: only evens get a communicator. */
    MPI_Comm ec;
    MPI_Comm_create(MPI_COMM_WORLD, g1, &ec);
    CHECK((rank % 2 == 0) == (ec != MPI_COMM_NULL), "create");
    if (ec != MPI_COMM_NULL) {
        MPI_Comm_rank(ec, &r);
        CHECK(r == rank / 2, "create rank");
        MPI_Barrier(ec);
        MPI_Comm_free(&ec);
        CHECK(ec == MPI_COMM_NULL, "free nulls");
    }
    /* create_group: only odd ranks take part. */
    if (rank % 2 == 1) {
        MPI_Comm oc;
        MPI_Comm_create_group(MPI_COMM_WORLD, g2, 5, &oc);
        int one = 1, n;
        MPI_Allreduce(&one, &n, 1, MPI_INT, MPI_SUM, oc);
        CHECK(n == size / 2, "create_group size %d", n);
        MPI_Comm_free(&oc);
    }
    int inter;
    MPI_Comm_test_inter(dup, &inter);
    CHECK(inter == 0, "not inter");

    MPI_Group_free(&g1); MPI_Group_free(&g2); MPI_Group_free(&g3);
    MPI_Group_free(&gu); MPI_Group_free(&gi); MPI_Group_free(&gd); MPI_Group_free(&wg);
    CHECK(wg == MPI_GROUP_NULL, "group free");
    /* many dups/frees: context ids keep working */
    for (int i = 0; i < 50; i++) {
        MPI_Comm t;
        MPI_Comm_dup(half, &t);
        MPI_Barrier(t);
        MPI_Comm_free(&t);
    }
    MPI_Comm_free(&half);
    MPI_Comm_free(&node);
    MPI_Comm_free(&dup);
    PASS("comm");
    MPI_Finalize();
    return 0;
}
