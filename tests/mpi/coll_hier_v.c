/* Hierarchical collectives, part two (part one: coll_hier.c): the
 * v/w variants, non-commutative operations, scans and nonblocking forms,
 * on `gw_coll=flat` and `gw_coll=hier` duplicates of a communicator,
 * against values computed here (integer data: exactly the same bits).
 *
 * The non-commutative operation composes affine maps x -> a*x + b (mod a
 * prime), so any change of MPI's rank order changes the result.
 *
 * `coll_hier_v wan` counts the messages that cross sites (MPI_T
 * gw_link_sent_msgs) during one call of Gatherv, Scatterv, Alltoallv,
 * a non-commutative Reduce, Scan and nonblocking Ibcast/Ialltoallv. */
#include <mpi.h>
#include <gridwire_mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"

#define T(call) do { int rc_ = (call); CHECK(rc_ == MPI_SUCCESS, "%s returned %d", #call, rc_); } while (0)
#define P 1000003LL

static MPI_Comm with_algorithm(MPI_Comm base, const char *which) {
    MPI_Info info;
    MPI_Comm c;
    T(MPI_Info_create(&info));
    T(MPI_Info_set(info, "gw_coll", which));
    T(MPI_Comm_dup_with_info(base, info, &c));
    T(MPI_Info_free(&info));
    return c;
}

static int value(int rank, int i, int salt) { return ((rank + 1) * 7 + i * 3 + salt) % 997 + 1; }

/* inout = in o inout on pairs (a, b): (a_in*a_io, b_in*a_io + b_io). */
static void affine_op(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    int *a = in, *b = inout;
    for (int i = 0; i + 1 < *len; i += 2) {
        long long m = (long long)a[i] * b[i] % P;
        long long c = ((long long)a[i + 1] * b[i] + b[i + 1]) % P;
        b[i] = (int)m;
        b[i + 1] = (int)c;
    }
}

/* acc = acc o v, the way MPI combines lower ranks (acc) with a higher one. */
static void compose(int *acc, const int *v, int n) {
    int *t = malloc(n * sizeof(int));
    memcpy(t, v, n * sizeof(int));
    affine_op(acc, t, &n, NULL);
    memcpy(acc, t, n * sizeof(int));
    free(t);
}

/* The ordered combination of value(r, i, salt) for r in [0, upto). */
static void expect_prefix(int *e, int n, int upto, int salt) {
    for (int i = 0; i < n; i++) e[i] = value(0, i, salt);
    int *v = malloc(n * sizeof(int));
    for (int r = 1; r < upto; r++) {
        for (int i = 0; i < n; i++) v[i] = value(r, i, salt);
        compose(e, v, n);
    }
    free(v);
}

static void run_on(MPI_Comm base, const char *label) {
    MPI_Comm both[2] = {with_algorithm(base, "flat"), with_algorithm(base, "hier")};
    int rank, size;
    MPI_Comm_rank(base, &rank);
    MPI_Comm_size(base, &size);
    MPI_Op affine;
    T(MPI_Op_create(affine_op, 0, &affine));
    int roots[3] = {0, size - 1, size / 2};
    const int lens[] = {2, 600};
    for (int a = 0; a < 2; a++) {
        MPI_Comm c = both[a];
        const char *alg = a ? "hier" : "flat";
        for (unsigned li = 0; li < 2; li++) {
            int n = lens[li];
            int *in = malloc(n * sizeof(int)), *out = malloc(n * sizeof(int)), *e = malloc(n * sizeof(int));
            /* Non-commutative Reduce (each root; in place at one), Allreduce. */
            for (int i = 0; i < n; i++) in[i] = value(rank, i, 1);
            expect_prefix(e, n, size, 1);
            for (int ri = 0; ri < 3; ri++) {
                int root = roots[ri];
                for (int i = 0; i < n; i++) out[i] = -1;
                if (rank == root && ri == 1) {
                    memcpy(out, in, n * sizeof(int));
                    T(MPI_Reduce(MPI_IN_PLACE, out, n, MPI_INT, affine, root, c));
                } else {
                    T(MPI_Reduce(in, out, n, MPI_INT, affine, root, c));
                }
                if (rank == root)
                    CHECK(memcmp(out, e, n * sizeof(int)) == 0, "%s: %s non-commutative reduce n=%d root=%d", label, alg, n, root);
            }
            T(MPI_Allreduce(in, out, n, MPI_INT, affine, c));
            CHECK(memcmp(out, e, n * sizeof(int)) == 0, "%s: %s non-commutative allreduce n=%d", label, alg, n);
            /* Scan and Exscan, non-commutative (Scan in place too). */
            expect_prefix(e, n, rank + 1, 1);
            memcpy(out, in, n * sizeof(int));
            T(MPI_Scan(MPI_IN_PLACE, out, n, MPI_INT, affine, c));
            CHECK(memcmp(out, e, n * sizeof(int)) == 0, "%s: %s non-commutative scan n=%d", label, alg, n);
            if (rank > 0) {
                expect_prefix(e, n, rank, 1);
                for (int i = 0; i < n; i++) out[i] = -1;
            }
            T(MPI_Exscan(in, out, n, MPI_INT, affine, c));
            if (rank > 0)
                CHECK(memcmp(out, e, n * sizeof(int)) == 0, "%s: %s non-commutative exscan n=%d", label, alg, n);
            free(in); free(out); free(e);
        }
        /* Reduce_scatter with uneven counts (pairs), non-commutative. */
        {
            int *cnt = malloc(size * sizeof(int)), total = 0, off = 0;
            for (int r = 0; r < size; r++) { cnt[r] = 2 * (r % 3 + 1); total += cnt[r]; }
            for (int r = 0; r < rank; r++) off += cnt[r];
            int *in = malloc(total * sizeof(int)), *out = malloc(total * sizeof(int)), *e = malloc(total * sizeof(int));
            for (int i = 0; i < total; i++) in[i] = value(rank, i, 2);
            expect_prefix(e, total, size, 2);
            T(MPI_Reduce_scatter(in, out, cnt, MPI_INT, affine, c));
            CHECK(memcmp(out, e + off, cnt[rank] * sizeof(int)) == 0, "%s: %s reduce_scatter", label, alg);
            memcpy(out, in, total * sizeof(int));
            T(MPI_Reduce_scatter(MPI_IN_PLACE, out, cnt, MPI_INT, affine, c));
            CHECK(memcmp(out, e + off, cnt[rank] * sizeof(int)) == 0, "%s: %s in-place reduce_scatter", label, alg);
            free(cnt); free(in); free(out); free(e);
        }
        /* Gatherv into a strided type at the root (in place at one root),
         * Scatterv out of it, uneven counts including zero. */
        {
            MPI_Datatype strided;
            T(MPI_Type_vector(1, 1, 2, MPI_INT, &strided));
            MPI_Datatype every_other;
            T(MPI_Type_create_resized(strided, 0, 2 * sizeof(int), &every_other));
            T(MPI_Type_commit(&every_other));
            T(MPI_Type_free(&strided));
            int *cnt = malloc(size * sizeof(int)), *dsp = malloc(size * sizeof(int)), total = 0;
            for (int r = 0; r < size; r++) { cnt[r] = (r * 5) % 7; dsp[r] = total; total += cnt[r]; }
            int *mine = malloc(8 * sizeof(int)), *all = malloc((2 * total + 2) * sizeof(int));
            for (int ri = 0; ri < 3; ri++) {
                int root = roots[ri];
                for (int i = 0; i < cnt[rank]; i++) mine[i] = value(rank, i, 3 + ri);
                for (int i = 0; i < 2 * total + 2; i++) all[i] = -9;
                if (rank == root && ri == 2) {
                    for (int i = 0; i < cnt[rank]; i++) all[2 * (dsp[rank] + i)] = mine[i];
                    T(MPI_Gatherv(MPI_IN_PLACE, 0, MPI_INT, all, cnt, dsp, every_other, root, c));
                } else {
                    T(MPI_Gatherv(mine, cnt[rank], MPI_INT, all, cnt, dsp, every_other, root, c));
                }
                if (rank == root)
                    for (int r = 0; r < size; r++)
                        for (int i = 0; i < cnt[r]; i++) {
                            CHECK(all[2 * (dsp[r] + i)] == value(r, i, 3 + ri), "%s: %s gatherv root=%d [%d][%d]", label, alg, root, r, i);
                            CHECK(all[2 * (dsp[r] + i) + 1] == -9, "%s: %s gatherv wrote a hole", label, alg);
                        }
                if (rank == root)
                    for (int r = 0; r < size; r++)
                        for (int i = 0; i < cnt[r]; i++) all[2 * (dsp[r] + i)] = value(r, i, 6 + ri);
                for (int i = 0; i < 8; i++) mine[i] = -3;
                if (rank == root && ri == 1) {
                    T(MPI_Scatterv(all, cnt, dsp, every_other, MPI_IN_PLACE, 0, MPI_INT, root, c));
                } else {
                    T(MPI_Scatterv(all, cnt, dsp, every_other, mine, cnt[rank], MPI_INT, root, c));
                    for (int i = 0; i < cnt[rank]; i++)
                        CHECK(mine[i] == value(rank, i, 6 + ri), "%s: %s scatterv root=%d [%d]=%d", label, alg, root, i, mine[i]);
                    CHECK(cnt[rank] == 8 || mine[cnt[rank]] == -3, "%s: %s scatterv wrote past its count", label, alg);
                }
            }
            T(MPI_Type_free(&every_other));
            free(cnt); free(dsp); free(mine); free(all);
        }
        /* Alltoallv: rank q sends rank d (q + d) % 4 ints; in place too;
         * Alltoallw: pairs sent as a contiguous type, received as ints. */
        {
            int *sc = malloc(size * sizeof(int)), *sd = malloc(size * sizeof(int));
            int *rc = malloc(size * sizeof(int)), *rd = malloc(size * sizeof(int));
            int st = 0, rt = 0;
            for (int r = 0; r < size; r++) {
                sc[r] = (rank + r) % 4; sd[r] = st; st += sc[r] + 1;
                rc[r] = (r + rank) % 4; rd[r] = rt; rt += rc[r] + 1;
            }
            int *s = malloc((st + 1) * sizeof(int)), *r = malloc((rt + 1) * sizeof(int));
            for (int d = 0; d < size; d++)
                for (int i = 0; i < sc[d]; i++) s[sd[d] + i] = value(rank, 50 * d + i, 9);
            for (int i = 0; i < rt; i++) r[i] = -1;
            T(MPI_Alltoallv(s, sc, sd, MPI_INT, r, rc, rd, MPI_INT, c));
            for (int q = 0; q < size; q++) {
                for (int i = 0; i < rc[q]; i++)
                    CHECK(r[rd[q] + i] == value(q, 50 * rank + i, 9), "%s: %s alltoallv from %d [%d]=%d", label, alg, q, i, r[rd[q] + i]);
                CHECK(r[rd[q] + rc[q]] == -1, "%s: %s alltoallv wrote a gap", label, alg);
            }
            for (int q = 0; q < size; q++)
                for (int i = 0; i < rc[q]; i++) r[rd[q] + i] = value(rank, 50 * q + i, 10);
            T(MPI_Alltoallv(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, r, rc, rd, MPI_INT, c));
            for (int q = 0; q < size; q++)
                for (int i = 0; i < rc[q]; i++)
                    CHECK(r[rd[q] + i] == value(q, 50 * rank + i, 10), "%s: %s in-place alltoallv", label, alg);
            MPI_Datatype pair;
            T(MPI_Type_contiguous(2, MPI_INT, &pair));
            T(MPI_Type_commit(&pair));
            MPI_Datatype *sts = malloc(size * sizeof(MPI_Datatype)), *rts = malloc(size * sizeof(MPI_Datatype));
            int *swc = malloc(size * sizeof(int)), *sbd = malloc(size * sizeof(int));
            int *rwc = malloc(size * sizeof(int)), *rbd = malloc(size * sizeof(int));
            int *ws = malloc(size * 8 * sizeof(int)), *wr = malloc(size * 8 * sizeof(int));
            for (int d = 0; d < size; d++) {
                swc[d] = (rank + d) % 3; sbd[d] = d * 8 * sizeof(int); sts[d] = pair;
                rwc[d] = 2 * ((d + rank) % 3); rbd[d] = d * 8 * sizeof(int); rts[d] = MPI_INT;
                for (int i = 0; i < 8; i++) { ws[d * 8 + i] = value(rank, 10 * d + i, 11); wr[d * 8 + i] = -1; }
            }
            T(MPI_Alltoallw(ws, swc, sbd, sts, wr, rwc, rbd, rts, c));
            for (int q = 0; q < size; q++)
                for (int i = 0; i < 8; i++)
                    CHECK(wr[q * 8 + i] == (i < rwc[q] ? value(q, 10 * rank + i, 11) : -1), "%s: %s alltoallw from %d [%d]", label, alg, q, i);
            T(MPI_Type_free(&pair));
            free(sts); free(rts); free(swc); free(sbd); free(rwc); free(rbd); free(ws); free(wr);
            free(sc); free(sd); free(rc); free(rd); free(s); free(r);
        }
        /* Nonblocking, several in flight: Igatherv, Ialltoallv,
         * non-commutative Ireduce and Iscan. */
        {
            enum { N = 40 };
            int *cnt = malloc(size * sizeof(int)), *dsp = malloc(size * sizeof(int));
            for (int r = 0; r < size; r++) { cnt[r] = r % 3; dsp[r] = 3 * r; }
            int g[3], *ga = malloc(3 * size * sizeof(int)), *ones = malloc(size * sizeof(int)), *ds = malloc(size * sizeof(int));
            int *ts = malloc(size * sizeof(int)), *tr = malloc(size * sizeof(int));
            int in[N], red[N], scn[N], e[N];
            for (int i = 0; i < 3; i++) g[i] = value(rank, i, 12);
            for (int r = 0; r < size; r++) { ones[r] = 1; ds[r] = r; ts[r] = value(rank, r, 13); tr[r] = -1; }
            for (int i = 0; i < N; i++) in[i] = value(rank, i, 14);
            MPI_Request rq[4];
            int root = size - 1;
            T(MPI_Igatherv(g, cnt[rank], MPI_INT, ga, cnt, dsp, MPI_INT, root, c, &rq[0]));
            T(MPI_Ialltoallv(ts, ones, ds, MPI_INT, tr, ones, ds, MPI_INT, c, &rq[1]));
            T(MPI_Ireduce(in, red, N, MPI_INT, affine, root, c, &rq[2]));
            T(MPI_Iscan(in, scn, N, MPI_INT, affine, c, &rq[3]));
            T(MPI_Waitall(4, rq, MPI_STATUSES_IGNORE));
            if (rank == root) {
                for (int r = 0; r < size; r++)
                    for (int i = 0; i < cnt[r]; i++)
                        CHECK(ga[dsp[r] + i] == value(r, i, 12), "%s: %s igatherv", label, alg);
                expect_prefix(e, N, size, 14);
                CHECK(memcmp(red, e, sizeof e) == 0, "%s: %s non-commutative ireduce", label, alg);
            }
            for (int q = 0; q < size; q++)
                CHECK(tr[q] == value(q, rank, 13), "%s: %s ialltoallv from %d", label, alg, q);
            expect_prefix(e, N, rank + 1, 14);
            CHECK(memcmp(scn, e, sizeof e) == 0, "%s: %s non-commutative iscan", label, alg);
            free(cnt); free(dsp); free(ga); free(ones); free(ds); free(ts); free(tr);
        }
    }
    T(MPI_Op_free(&affine));
    T(MPI_Comm_free(&both[0]));
    T(MPI_Comm_free(&both[1]));
}

/* ---- counting wide-area messages ---------------------------------------- */

static MPI_T_pvar_session session;
static MPI_T_pvar_handle sent;
static int wsize, *site_of;
static MPI_Op affine_wan;

static unsigned long long wan_sent(void) {
    unsigned long long *v = malloc(wsize * sizeof *v), total = 0;
    int me;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    T(MPI_T_pvar_read(session, sent, v));
    for (int r = 0; r < wsize; r++)
        if (site_of[r] != site_of[me]) total += v[r];
    free(v);
    return total;
}

/* Bytes this rank has sent so far to the other ranks of its host. */
static MPI_T_pvar_handle sent_bytes;
static int **colors_of;
static unsigned long long host_bytes(void) {
    unsigned long long *v = malloc(wsize * sizeof *v), total = 0;
    int me;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    T(MPI_T_pvar_read(session, sent_bytes, v));
    for (int r = 0; r < wsize; r++)
        if (r != me && colors_of[r][0] == colors_of[me][0] && colors_of[r][1] == colors_of[me][1]) total += v[r];
    free(v);
    return total;
}

static unsigned long long count_wan(MPI_Comm c, MPI_Comm quiet, void (*op)(MPI_Comm, int), int root) {
    T(MPI_Barrier(quiet));
    unsigned long long before = wan_sent();
    op(c, root);
    unsigned long long mine = wan_sent() - before, all;
    T(MPI_Allreduce(&mine, &all, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, quiet));
    return all;
}

static void do_gatherv(MPI_Comm c, int root) {
    int x[2] = {1, 2}, *y = malloc(2 * wsize * sizeof(int)), *cnt = malloc(wsize * sizeof(int)), *d = malloc(wsize * sizeof(int));
    for (int r = 0; r < wsize; r++) { cnt[r] = r % 2 + 1; d[r] = 2 * r; }
    int me; MPI_Comm_rank(c, &me);
    T(MPI_Gatherv(x, cnt[me], MPI_INT, y, cnt, d, MPI_INT, root, c));
    free(y); free(cnt); free(d);
}
static void do_scatterv(MPI_Comm c, int root) {
    int x[2], *y = calloc(2 * wsize, sizeof(int)), *cnt = malloc(wsize * sizeof(int)), *d = malloc(wsize * sizeof(int));
    for (int r = 0; r < wsize; r++) { cnt[r] = r % 2 + 1; d[r] = 2 * r; }
    int me; MPI_Comm_rank(c, &me);
    T(MPI_Scatterv(y, cnt, d, MPI_INT, x, cnt[me], MPI_INT, root, c));
    free(y); free(cnt); free(d);
}
static void do_alltoallv(MPI_Comm c, int root) {
    (void)root;
    int *x = calloc(wsize, sizeof(int)), *y = malloc(wsize * sizeof(int)), *one = malloc(wsize * sizeof(int)), *d = malloc(wsize * sizeof(int));
    for (int r = 0; r < wsize; r++) { one[r] = 1; d[r] = r; }
    T(MPI_Alltoallv(x, one, d, MPI_INT, y, one, d, MPI_INT, c));
    free(x); free(y); free(one); free(d);
}
static void do_reduce_nc(MPI_Comm c, int root) { int x[2] = {1, 2}, y[2]; T(MPI_Reduce(x, y, 2, MPI_INT, affine_wan, root, c)); }
static void do_scan(MPI_Comm c, int root) { (void)root; int x = 1, y; T(MPI_Scan(&x, &y, 1, MPI_INT, MPI_SUM, c)); }
static void do_ibcast(MPI_Comm c, int root) {
    int x[2] = {root, 3};
    MPI_Request rq;
    T(MPI_Ibcast(x, 2, MPI_INT, root, c, &rq));
    T(MPI_Wait(&rq, MPI_STATUS_IGNORE));
}
static void do_ialltoallv(MPI_Comm c, int root) {
    (void)root;
    int *x = calloc(wsize, sizeof(int)), *y = malloc(wsize * sizeof(int)), *one = malloc(wsize * sizeof(int)), *d = malloc(wsize * sizeof(int));
    for (int r = 0; r < wsize; r++) { one[r] = 1; d[r] = r; }
    MPI_Request rq;
    T(MPI_Ialltoallv(x, one, d, MPI_INT, y, one, d, MPI_INT, c, &rq));
    T(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    free(x); free(y); free(one); free(d);
}

/* Whether every site's and every host's ranks are consecutive in
 * MPI_COMM_WORLD (then ordered reductions go level by level). */
static int contiguous(int **colors) {
    for (int r = 1; r < wsize; r++) {
        int new_site = colors[r][0] != colors[r - 1][0];
        int new_host = new_site || colors[r][1] != colors[r - 1][1];
        /* Entering a site or host that appeared before: not consecutive. */
        for (int q = 0; q + 1 < r; q++) {
            if (new_site && colors[q][0] == colors[r][0]) return 0;
            if (new_host && colors[q][0] == colors[r][0] && colors[q][1] == colors[r][1]) return 0;
        }
    }
    return 1;
}

static void wan_counts(void) {
    int provided, idx, count, flag, **colors, rank;
    T(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided));
    T(MPI_T_pvar_session_create(&session));
    T(MPI_T_pvar_get_index("gw_link_sent_msgs", MPI_T_PVAR_CLASS_COUNTER, &idx));
    T(MPI_T_pvar_handle_alloc(session, idx, NULL, &sent, &count));
    T(MPI_T_pvar_start(session, sent));
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    T(MPI_Comm_get_attr(MPI_COMM_WORLD, GW_TOPOLOGY_COLORS, &colors, &flag));
    CHECK(flag, "no GW_TOPOLOGY_COLORS");
    colors_of = colors;
    T(MPI_T_pvar_get_index("gw_link_sent_bytes", MPI_T_PVAR_CLASS_COUNTER, &idx));
    T(MPI_T_pvar_handle_alloc(session, idx, NULL, &sent_bytes, &count));
    T(MPI_T_pvar_start(session, sent_bytes));
    T(MPI_Op_create(affine_op, 0, &affine_wan));
    site_of = malloc(wsize * sizeof(int));
    int nsites = 0;
    for (int r = 0; r < wsize; r++) {
        site_of[r] = colors[r][0];
        if (site_of[r] + 1 > nsites) nsites = site_of[r] + 1;
    }
    CHECK(nsites >= 2, "the wan test needs ranks at 2 sites or more, got %d", nsites);
    int contig = contiguous(colors);
    MPI_Comm flat = with_algorithm(MPI_COMM_WORLD, "flat"), hier = with_algorithm(MPI_COMM_WORLD, "hier");
    void (*all_ops[])(MPI_Comm, int) = {do_gatherv, do_scatterv, do_alltoallv, do_reduce_nc, do_scan, do_ibcast, do_ialltoallv};
    /* Warm up: every link is connected before counting. */
    for (int k = 0; k < 2; k++)
        for (unsigned o = 0; o < sizeof all_ops / sizeof *all_ops; o++)
            for (int r = 0; r < wsize; r++) { all_ops[o](hier, r); all_ops[o](flat, r); }
    unsigned long long want_s1 = nsites - 1, want_ss = nsites * (nsites - 1);
    int roots[3] = {0, wsize - 1, wsize / 2};
    for (int i = 0; i < 3; i++) {
        int root = roots[i];
        unsigned long long hg = count_wan(hier, flat, do_gatherv, root), fg = count_wan(flat, flat, do_gatherv, root);
        unsigned long long hs = count_wan(hier, flat, do_scatterv, root);
        unsigned long long hr = count_wan(hier, flat, do_reduce_nc, root), fr = count_wan(flat, flat, do_reduce_nc, root);
        unsigned long long hb = count_wan(hier, flat, do_ibcast, root), fb = count_wan(flat, flat, do_ibcast, root);
        if (rank == 0)
            printf("wan messages root %d: gatherv hier %llu flat %llu, non-commutative reduce hier %llu flat %llu, ibcast hier %llu flat %llu\n",
                   root, hg, fg, hr, fr, hb, fb);
        CHECK(hg == want_s1, "hier gatherv root %d: %llu wide-area messages, want %llu", root, hg, want_s1);
        CHECK(hs == want_s1, "hier scatterv root %d: %llu wide-area messages, want %llu", root, hs, want_s1);
        CHECK(hb == want_s1, "hier ibcast root %d: %llu wide-area messages, want %llu", root, hb, want_s1);
        /* Non-commutative: level by level where the placement keeps rank order, else flat. */
        CHECK(hr == (contig ? want_s1 : fr), "hier non-commutative reduce root %d: %llu wide-area messages, want %llu (contiguous %d)", root, hr, contig ? want_s1 : fr, contig);
    }
    unsigned long long ha = count_wan(hier, flat, do_alltoallv, 0), fa = count_wan(flat, flat, do_alltoallv, 0);
    unsigned long long hia = count_wan(hier, flat, do_ialltoallv, 0);
    unsigned long long hsc = count_wan(hier, flat, do_scan, 0), fsc = count_wan(flat, flat, do_scan, 0);
    if (rank == 0)
        printf("wan messages: alltoallv hier %llu flat %llu, ialltoallv hier %llu, scan hier %llu flat %llu (%d sites, contiguous %d)\n",
               ha, fa, hia, hsc, fsc, nsites, contig);
    CHECK(ha == want_ss, "hier alltoallv: %llu wide-area messages, want %llu", ha, want_ss);
    CHECK(hia == want_ss, "hier ialltoallv: %llu wide-area messages, want %llu", hia, want_ss);
    /* Scan: each site leader sends its total to each later site's leader. */
    unsigned long long want_scan = contig ? want_ss / 2 : fsc;
    CHECK(hsc == want_scan, "hier scan: %llu wide-area messages, want %llu", hsc, want_scan);
    /* Within a host a blocking commutative reduction goes through the
     * host's shared segment: a member sends its reader an empty wake-up,
     * not its data (4000 bytes here). (The flat binomial tree may or may
     * not pair ranks of one host, depending on the placement.) */
    {
        enum { N = 1000 };
        int *x = malloc(N * sizeof(int)), *y = malloc(N * sizeof(int));
        for (int i = 0; i < N; i++) x[i] = i;
        unsigned long long hb[2], fb[2], mine, before;
        for (int k = 0; k < 2; k++) {
            MPI_Comm c = k ? flat : hier;
            unsigned long long *out = k ? fb : hb;
            for (int w = 0; w < 3; w++) T(MPI_Reduce(x, y, N, MPI_INT, MPI_SUM, 0, c));
            T(MPI_Barrier(flat));
            before = host_bytes();
            T(MPI_Reduce(x, y, N, MPI_INT, MPI_SUM, 0, c));
            mine = host_bytes() - before;
            T(MPI_Allreduce(&mine, &out[0], 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, flat));
            T(MPI_Barrier(flat));
            before = host_bytes();
            T(MPI_Allreduce(x, y, N, MPI_INT, MPI_SUM, c));
            mine = host_bytes() - before;
            T(MPI_Allreduce(&mine, &out[1], 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, flat));
            if (k == 0)
                for (int i = 0; i < N; i++) CHECK(y[i] == i * wsize, "shared-segment allreduce [%d]=%d", i, y[i]);
        }
        if (rank == 0)
            printf("same-host bytes of a 4000-byte reduce: hier %llu flat %llu; allreduce: hier %llu flat %llu\n", hb[0], fb[0], hb[1], fb[1]);
        /* Allreduce: the result comes back down through the segment too. */
        CHECK(hb[0] < 4000, "hier reduce: %llu bytes within hosts, want less than one contribution", hb[0]);
        CHECK(hb[1] < 4000, "hier allreduce: %llu bytes within hosts, want less than one contribution", hb[1]);
        free(x); free(y);
    }
    T(MPI_T_pvar_handle_free(session, &sent_bytes));
    T(MPI_Op_free(&affine_wan));
    T(MPI_Comm_free(&flat));
    T(MPI_Comm_free(&hier));
    T(MPI_T_pvar_handle_free(session, &sent));
    T(MPI_T_pvar_session_free(&session));
    T(MPI_T_finalize());
    free(site_of);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc > 1 && strcmp(argv[1], "wan") == 0) {
        wan_counts();
        PASS("coll_hier_v wan");
    } else {
        run_on(MPI_COMM_WORLD, "world");
        /* Ranks permuted (odd, then even, reversed): not contiguous. */
        MPI_Comm split;
        T(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, size - rank, &split));
        run_on(split, "split");
        T(MPI_Comm_free(&split));
        PASS("coll_hier_v");
    }
    MPI_Finalize();
    return 0;
}
