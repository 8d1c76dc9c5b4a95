/* Topology levels: MPI_Comm_split_type by host and by site (GW_SITE), and
 * unguided splits stepping down the hierarchy. Each rank's expected place is
 * what its launcher told it (GW_HOST_ID for emulated or grid hosts, GW_SITE),
 * exchanged here with an allgather and compared with what the library did.
 * TOPO_EXPECT_SITES / TOPO_EXPECT_HOSTS (if set) say how many sites and
 * hosts the job must span, so a launcher that lost GW_SITE fails the test. */
#include "check.h"
#include "gridwire_mpi.h"
#include <string.h>

#define KEYLEN 256
static char sites[64][KEYLEN], hosts[64][KEYLEN];
static int size;

static void key_of(const char *var, const char *dflt, char *out) {
    const char *v = getenv(var);
    snprintf(out, KEYLEN, "%s", v && *v ? v : dflt);
}

static int distinct(char (*keys)[KEYLEN]) {
    int n = 0;
    for (int r = 0; r < size; r++) {
        int seen = 0;
        for (int q = 0; q < r; q++) seen |= strcmp(keys[q], keys[r]) == 0;
        n += !seen;
    }
    return n;
}

enum by { BY_SITE, BY_HOST_IN_SITE, BY_HOST_ONLY };

/* `c` holds exactly the world ranks at my site, on my host within my site,
 * or on my host (shared memory, whatever the sites), in world-rank order. */
static void check_members(MPI_Comm c, int rank, enum by by, const char *what) {
    CHECK(c != MPI_COMM_NULL, "%s: no communicator", what);
    int n, me;
    MPI_Comm_size(c, &n);
    MPI_Comm_rank(c, &me);
    MPI_Group g, wg;
    MPI_Comm_group(c, &g);
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    int expect = 0;
    for (int r = 0; r < size; r++) {
        int same_site = strcmp(sites[r], sites[rank]) == 0;
        int same_host = strcmp(hosts[r], hosts[rank]) == 0;
        int same = by == BY_SITE ? same_site
                 : by == BY_HOST_IN_SITE ? same_site && same_host : same_host;
        if (!same) continue;
        int wr = -1, lr = expect;
        if (lr < n) MPI_Group_translate_ranks(g, 1, &lr, wg, &wr);
        CHECK(wr == r, "%s: member %d is world rank %d, expected %d", what, lr, wr, r);
        expect++;
    }
    CHECK(n == expect, "%s: %d members, expected %d", what, n, expect);
    /* It works: a reduction over it counts its members. */
    int one = 1, sum = 0;
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, c);
    CHECK(sum == n, "%s: allreduce %d of %d", what, sum, n);
    MPI_Group_free(&g);
    MPI_Group_free(&wg);
}

static void check_info(MPI_Comm c, const char *expect) {
    MPI_Info info;
    char v[64];
    int flag = 0;
    MPI_Comm_get_info(c, &info);
    MPI_Info_get(info, "mpi_hw_resource_type", 63, v, &flag);
    CHECK(flag && strcmp(v, expect) == 0, "resource type %s, expected %s", flag ? v : "(none)", expect);
    MPI_Info_free(&info);
}

/* The topology attributes of `c` agree with the placement: depth 2 each;
 * equal site colours exactly where sites are equal, equal host colours
 * exactly where site and host are equal; colours numbered from 0 in order
 * of first appearance. `worlds[i]` is the world rank of member i. */
static void check_attrs(MPI_Comm c, const int *worlds, int n) {
    int *depths = NULL, **colors = NULL, flag = 0;
    MPI_Comm_get_attr(c, GW_TOPOLOGY_DEPTHS, &depths, &flag);
    CHECK(flag && depths, "no depths attribute");
    MPI_Comm_get_attr(c, GW_TOPOLOGY_COLORS, &colors, &flag);
    CHECK(flag && colors, "no colours attribute");
    int next_site = 0, next_host = 0;
    for (int i = 0; i < n; i++) {
        const char *si = sites[worlds[i]], *hi = hosts[worlds[i]];
        CHECK(depths[i] == 2, "member %d depth %d", i, depths[i]);
        int new_site = 1, new_host = 1;
        for (int j = 0; j < i; j++) {
            int same_site = strcmp(sites[worlds[j]], si) == 0;
            int same_host = same_site && strcmp(hosts[worlds[j]], hi) == 0;
            CHECK((colors[i][0] == colors[j][0]) == same_site, "site colours of %d and %d", i, j);
            CHECK((colors[i][1] == colors[j][1]) == same_host, "host colours of %d and %d", i, j);
            new_site &= !same_site;
            new_host &= !same_host;
        }
        if (new_site) CHECK(colors[i][0] == next_site++, "site colour %d of %d", colors[i][0], i);
        if (new_host) CHECK(colors[i][1] == next_host++, "host colour %d of %d", colors[i][1], i);
    }
    /* Read-only: setting a predefined keyval fails. */
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    CHECK(MPI_Comm_set_attr(c, GW_TOPOLOGY_COLORS, NULL) != MPI_SUCCESS, "set a predefined attribute");
    MPI_Comm_set_errhandler(c, MPI_ERRORS_ARE_FATAL);
}

static MPI_Comm guided(MPI_Comm parent, const char *type) {
    MPI_Info hw;
    MPI_Comm c;
    MPI_Info_create(&hw);
    MPI_Info_set(hw, "mpi_hw_resource_type", type);
    MPI_Comm_split_type(parent, MPI_COMM_TYPE_HW_GUIDED, 0, hw, &c);
    MPI_Info_free(&hw);
    return c;
}

int main(int argc, char **argv) {
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size <= 64, "at most 64 ranks");
    char mine[KEYLEN];
    key_of("GW_SITE", "default", mine);
    MPI_Allgather(mine, KEYLEN, MPI_CHAR, sites, KEYLEN, MPI_CHAR, MPI_COMM_WORLD);
    key_of("GW_HOST_ID", "", mine);
    MPI_Allgather(mine, KEYLEN, MPI_CHAR, hosts, KEYLEN, MPI_CHAR, MPI_COMM_WORLD);
    int nsites = distinct(sites), nhosts = distinct(hosts);
    const char *es = getenv("TOPO_EXPECT_SITES"), *eh = getenv("TOPO_EXPECT_HOSTS");
    CHECK(!es || atoi(es) == nsites, "%d sites, expected %s", nsites, es);
    CHECK(!eh || atoi(eh) == nhosts, "%d hosts, expected %s", nhosts, eh);

    int worlds[64];
    for (int r = 0; r < size; r++) worlds[r] = size - 1 - r;
    check_attrs(MPI_COMM_WORLD, worlds, 0); /* fetch, then check below */
    for (int r = 0; r < size; r++) worlds[r] = r;
    check_attrs(MPI_COMM_WORLD, worlds, size);
    /* Another communicator, members in reverse order: computed afresh. */
    MPI_Comm rev;
    MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &rev);
    for (int r = 0; r < size; r++) worlds[r] = size - 1 - r;
    check_attrs(rev, worlds, size);
    MPI_Comm_free(&rev);

    MPI_Comm host = guided(MPI_COMM_WORLD, "gw:host");
    check_members(host, rank, BY_HOST_IN_SITE, "gw:host");
    check_info(host, "gw:host");
    MPI_Comm site = guided(MPI_COMM_WORLD, "gw:site");
    check_members(site, rank, BY_SITE, "gw:site");
    check_info(site, "gw:site");
    MPI_Comm shared;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &shared);
    check_members(shared, rank, BY_HOST_ONLY, "shared");
    MPI_Comm none = guided(MPI_COMM_WORLD, "gw:no-such-level");
    CHECK(none == MPI_COMM_NULL, "unknown resource type gave a communicator");

    /* Unguided steps down: sites first when the parent spans several, then
     * hosts, then nothing (a strict subset is required). */
    MPI_Info out;
    MPI_Info_create(&out);
    MPI_Comm down;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_HW_UNGUIDED, 0, out, &down);
    if (nsites > 1) {
        check_members(down, rank, BY_SITE, "unguided from world (sites)");
        check_info(down, "gw:site");
        MPI_Comm below;
        MPI_Comm_split_type(down, MPI_COMM_TYPE_HW_UNGUIDED, 0, MPI_INFO_NULL, &below);
        int n;
        MPI_Comm_size(down, &n);
        int hosts_here = 0;
        for (int r = 0; r < size; r++)
            hosts_here += strcmp(sites[r], sites[rank]) == 0 && strcmp(hosts[r], hosts[rank]) == 0;
        if (hosts_here < n) {
            check_members(below, rank, BY_HOST_IN_SITE, "unguided from a site (hosts)");
            MPI_Comm_free(&below);
        } else {
            CHECK(below == MPI_COMM_NULL, "unguided on one host gave a communicator");
        }
        MPI_Comm_free(&down);
    } else if (nhosts > 1) {
        check_members(down, rank, BY_HOST_IN_SITE, "unguided from world (hosts)");
        check_info(down, "gw:host");
        MPI_Comm_free(&down);
    } else {
        CHECK(down == MPI_COMM_NULL, "unguided on one host gave a communicator");
    }
    MPI_Info_free(&out);

    /* MPI_UNDEFINED on some ranks while the others split by site. */
    MPI_Comm part;
    if (rank % 2) {
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_UNDEFINED, 0, MPI_INFO_NULL, &part);
        CHECK(part == MPI_COMM_NULL, "undefined gave a communicator");
    } else {
        part = guided(MPI_COMM_WORLD, "gw:site");
        CHECK(part != MPI_COMM_NULL, "site split with some ranks out");
        MPI_Comm_free(&part);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    MPI_Comm_free(&host);
    MPI_Comm_free(&site);
    MPI_Comm_free(&shared);
    PASS("topology_levels");
    MPI_Finalize();
    return 0;
}
