/* Hierarchical collectives against the flat ones: every rank runs each
 * collective on two duplicates of a communicator, one with the info key
 * gw_coll=flat and one with gw_coll=hier, and checks both give the
 * expected result (integer data, so exactly the same bits). On
 * MPI_COMM_WORLD and on a split communicator whose ranks are permuted.
 *
 * `coll_hier wan` instead counts, with the MPI_T per-peer counter
 * gw_link_sent_msgs, the messages that cross sites (sites from the
 * GW_TOPOLOGY_COLORS attribute) during one small call of each collective
 * the hierarchical algorithms cover, and checks the number each algorithm
 * sends (one per remote site for Bcast, Reduce, Gather, Scatter); and that
 * MPI_COMM_WORLD, which has no info key, follows GW_COLL. */
#include <mpi.h>
#include <gridwire_mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"

#define T(call) do { int rc_ = (call); CHECK(rc_ == MPI_SUCCESS, "%s returned %d", #call, rc_); } while (0)

static MPI_Comm with_algorithm(MPI_Comm base, const char *which) {
    MPI_Info info;
    MPI_Comm c;
    T(MPI_Info_create(&info));
    T(MPI_Info_set(info, "gw_coll", which));
    T(MPI_Comm_dup_with_info(base, info, &c));
    T(MPI_Info_free(&info));
    return c;
}

static int value(int rank, int i, int salt) { return (rank + 1) * 7 + i * 3 + salt; }

/* A commutative user op on ints: bitwise xor. */
static void xor_op(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    for (int i = 0; i < *len; i++) ((int *)inout)[i] ^= ((int *)in)[i];
}

/* A non-commutative user op on int pairs: (a,b) o (c,d) = (a*c... ) kept
 * small: affine maps x -> a*x+b composed, mod 1000003. */
static void affine_op(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    int *a = in, *b = inout;
    for (int i = 0; i < *len; i += 2) {
        long long m = (long long)a[i] * b[i] % 1000003;
        long long c = ((long long)a[i + 1] * b[i] + b[i + 1]) % 1000003;
        b[i] = (int)m;
        b[i + 1] = (int)c;
    }
}

static void run_on(MPI_Comm base, const char *label) {
    MPI_Comm flat = with_algorithm(base, "flat"), hier = with_algorithm(base, "hier");
    MPI_Comm both[2] = {flat, hier};
    int rank, size;
    MPI_Comm_rank(base, &rank);
    MPI_Comm_size(base, &size);
    const int counts[] = {1, 7, 1000, 70000};
    int roots[3] = {0, size - 1, size / 2};
    MPI_Op xor, affine;
    T(MPI_Op_create(xor_op, 1, &xor));
    T(MPI_Op_create(affine_op, 0, &affine));
    for (unsigned ci = 0; ci < sizeof counts / sizeof *counts; ci++) {
        int n = counts[ci];
        int *out[2], *in = malloc(n * sizeof(int)), *exp = malloc(n * sizeof(int));
        out[0] = malloc(n * sizeof(int));
        out[1] = malloc(n * sizeof(int));
        for (int i = 0; i < n; i++) in[i] = value(rank, i, 0);
        for (int ri = 0; ri < 3; ri++) {
            int root = roots[ri];
            /* Bcast. */
            for (int a = 0; a < 2; a++) {
                for (int i = 0; i < n; i++) out[a][i] = rank == root ? value(root, i, 1) : -1;
                T(MPI_Bcast(out[a], n, MPI_INT, root, both[a]));
                for (int i = 0; i < n; i++)
                    CHECK(out[a][i] == value(root, i, 1), "%s: bcast %s n=%d root=%d [%d]=%d", label, a ? "hier" : "flat", n, root, i, out[a][i]);
            }
            /* Reduce: SUM, MAX, a commutative user op, MPI_IN_PLACE at the root. */
            MPI_Op ops[3] = {MPI_SUM, MPI_MAX, xor};
            for (int oi = 0; oi < 3; oi++) {
                for (int a = 0; a < 2; a++) {
                    memset(out[a], 0, n * sizeof(int));
                    if (rank == root && oi == 0) {
                        memcpy(out[a], in, n * sizeof(int));
                        T(MPI_Reduce(MPI_IN_PLACE, out[a], n, MPI_INT, ops[oi], root, both[a]));
                    } else {
                        T(MPI_Reduce(in, out[a], n, MPI_INT, ops[oi], root, both[a]));
                    }
                }
                if (rank == root) {
                    for (int i = 0; i < n; i++) {
                        int e = oi == 1 ? value(size - 1, i, 0) : 0;
                        if (oi == 0) for (int r = 0; r < size; r++) e += value(r, i, 0);
                        if (oi == 2) for (int r = 0; r < size; r++) e ^= value(r, i, 0);
                        exp[i] = e;
                    }
                    CHECK(memcmp(out[0], exp, n * sizeof(int)) == 0, "%s: flat reduce op %d n=%d root=%d", label, oi, n, root);
                    CHECK(memcmp(out[1], exp, n * sizeof(int)) == 0, "%s: hier reduce op %d n=%d root=%d", label, oi, n, root);
                }
            }
        }
        /* Allreduce: SUM (also in place), xor; a non-commutative op (falls back to flat, same order). */
        for (int a = 0; a < 2; a++) {
            T(MPI_Allreduce(in, out[a], n, MPI_INT, MPI_SUM, both[a]));
            for (int i = 0; i < n; i++) {
                int e = 0;
                for (int r = 0; r < size; r++) e += value(r, i, 0);
                CHECK(out[a][i] == e, "%s: allreduce %s n=%d [%d]=%d want %d", label, a ? "hier" : "flat", n, i, out[a][i], e);
            }
            memcpy(out[a], in, n * sizeof(int));
            T(MPI_Allreduce(MPI_IN_PLACE, out[a], n, MPI_INT, MPI_SUM, both[a]));
            for (int i = 0; i < n; i++) {
                int e = 0;
                for (int r = 0; r < size; r++) e += value(r, i, 0);
                CHECK(out[a][i] == e, "%s: in-place allreduce %s n=%d", label, a ? "hier" : "flat", n);
            }
            T(MPI_Allreduce(in, out[a], n, MPI_INT, xor, both[a]));
        }
        CHECK(memcmp(out[0], out[1], n * sizeof(int)) == 0, "%s: allreduce xor n=%d differs", label, n);
        if (n % 2 == 0) {
            for (int i = 0; i < n; i++) in[i] = value(rank, i, 0) % 1000;
            for (int a = 0; a < 2; a++) T(MPI_Allreduce(in, out[a], n, MPI_INT, affine, both[a]));
            CHECK(memcmp(out[0], out[1], n * sizeof(int)) == 0, "%s: non-commutative allreduce n=%d differs", label, n);
        }
        free(in);
        free(exp);
        free(out[0]);
        free(out[1]);
    }
    /* Gather/scatter/allgather families, alltoall, reduce_scatter, scans:
     * both algorithms against the expected values. */
    for (unsigned ci = 0; ci < 3; ci++) {
        int n = counts[ci];
        int *mine = malloc(n * sizeof(int)), *all = malloc((size_t)size * (n + 3) * sizeof(int));
        int *got = malloc((size_t)size * (n + 3) * sizeof(int));
        int *cnt = malloc(size * sizeof(int)), *dsp = malloc(size * sizeof(int));
        int total = 0;
        for (int r = 0; r < size; r++) { cnt[r] = n + r % 3; dsp[r] = total; total += cnt[r]; }
        for (int a = 0; a < 2; a++) {
            MPI_Comm c = both[a];
            const char *alg = a ? "hier" : "flat";
            for (int ri = 0; ri < 3; ri++) {
                int root = roots[ri];
                for (int i = 0; i < n; i++) mine[i] = value(rank, i, 10);
                for (int i = 0; i < size * n; i++) got[i] = -1;
                if (rank == root && ri == 1) {
                    for (int i = 0; i < n; i++) got[rank * n + i] = mine[i];
                    T(MPI_Gather(MPI_IN_PLACE, n, MPI_INT, got, n, MPI_INT, root, c));
                } else {
                    T(MPI_Gather(mine, n, MPI_INT, got, n, MPI_INT, root, c));
                }
                if (rank == root)
                    for (int r = 0; r < size; r++)
                        for (int i = 0; i < n; i++)
                            CHECK(got[r * n + i] == value(r, i, 10), "%s: %s gather n=%d root=%d [%d][%d]=%d", label, alg, n, root, r, i, got[r * n + i]);
                for (int r = 0; r < size; r++)
                    for (int i = 0; i < n; i++) all[r * n + i] = rank == root ? value(r, i, 11) : -2;
                for (int i = 0; i < n; i++) mine[i] = -3;
                if (rank == root && ri == 1) {
                    T(MPI_Scatter(all, n, MPI_INT, MPI_IN_PLACE, n, MPI_INT, root, c));
                    for (int i = 0; i < n; i++) mine[i] = all[rank * n + i];
                } else {
                    T(MPI_Scatter(all, n, MPI_INT, mine, n, MPI_INT, root, c));
                }
                for (int i = 0; i < n; i++)
                    CHECK(mine[i] == value(rank, i, 11), "%s: %s scatter n=%d root=%d [%d]=%d", label, alg, n, root, i, mine[i]);
                /* Gatherv/Scatterv with uneven counts. */
                for (int i = 0; i < cnt[rank]; i++) mine[i % n] = 0;
                int *v = malloc((n + 3) * sizeof(int));
                for (int i = 0; i < cnt[rank]; i++) v[i] = value(rank, i, 12);
                for (int i = 0; i < total; i++) got[i] = -1;
                T(MPI_Gatherv(v, cnt[rank], MPI_INT, got, cnt, dsp, MPI_INT, root, c));
                if (rank == root)
                    for (int r = 0; r < size; r++)
                        for (int i = 0; i < cnt[r]; i++)
                            CHECK(got[dsp[r] + i] == value(r, i, 12), "%s: %s gatherv root=%d", label, alg, root);
                for (int i = 0; i < total; i++) all[i] = -4;
                if (rank == root)
                    for (int r = 0; r < size; r++)
                        for (int i = 0; i < cnt[r]; i++) all[dsp[r] + i] = value(r, i, 13);
                T(MPI_Scatterv(all, cnt, dsp, MPI_INT, v, cnt[rank], MPI_INT, root, c));
                for (int i = 0; i < cnt[rank]; i++)
                    CHECK(v[i] == value(rank, i, 13), "%s: %s scatterv root=%d", label, alg, root);
                free(v);
            }
            /* Allgather, in place too, and allgatherv with uneven counts. */
            for (int i = 0; i < n; i++) mine[i] = value(rank, i, 14);
            T(MPI_Allgather(mine, n, MPI_INT, got, n, MPI_INT, c));
            for (int r = 0; r < size; r++)
                for (int i = 0; i < n; i++)
                    CHECK(got[r * n + i] == value(r, i, 14), "%s: %s allgather n=%d [%d][%d]=%d", label, alg, n, r, i, got[r * n + i]);
            for (int i = 0; i < size * n; i++) got[i] = i / n == rank ? value(rank, i % n, 15) : -1;
            T(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, got, n, MPI_INT, c));
            for (int r = 0; r < size; r++)
                for (int i = 0; i < n; i++)
                    CHECK(got[r * n + i] == value(r, i, 15), "%s: %s in-place allgather n=%d", label, alg, n);
            int *v = malloc((n + 3) * sizeof(int));
            for (int i = 0; i < cnt[rank]; i++) v[i] = value(rank, i, 16);
            T(MPI_Allgatherv(v, cnt[rank], MPI_INT, got, cnt, dsp, MPI_INT, c));
            for (int r = 0; r < size; r++)
                for (int i = 0; i < cnt[r]; i++)
                    CHECK(got[dsp[r] + i] == value(r, i, 16), "%s: %s allgatherv n=%d [%d][%d]", label, alg, n, r, i);
            free(v);
            /* Alltoall: block r of rank q's send is value(q, r*n+i). */
            for (int r = 0; r < size; r++)
                for (int i = 0; i < n; i++) all[r * n + i] = value(rank, r * n + i, 17);
            T(MPI_Alltoall(all, n, MPI_INT, got, n, MPI_INT, c));
            for (int r = 0; r < size; r++)
                for (int i = 0; i < n; i++)
                    CHECK(got[r * n + i] == value(r, rank * n + i, 17), "%s: %s alltoall", label, alg);
            memcpy(got, all, (size_t)size * n * sizeof(int));
            T(MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, got, n, MPI_INT, c));
            for (int r = 0; r < size; r++)
                for (int i = 0; i < n; i++)
                    CHECK(got[r * n + i] == value(r, rank * n + i, 17), "%s: %s in-place alltoall", label, alg);
            /* Reduce_scatter_block (sum), Scan and Exscan (sum). */
            for (int i = 0; i < size * n; i++) all[i] = value(rank, i, 18);
            T(MPI_Reduce_scatter_block(all, got, n, MPI_INT, MPI_SUM, c));
            for (int i = 0; i < n; i++) {
                int e = 0;
                for (int q = 0; q < size; q++) e += value(q, rank * n + i, 18);
                CHECK(got[i] == e, "%s: %s reduce_scatter_block", label, alg);
            }
            for (int i = 0; i < n; i++) mine[i] = value(rank, i, 19);
            T(MPI_Scan(mine, got, n, MPI_INT, MPI_SUM, c));
            T(MPI_Exscan(mine, got + n, n, MPI_INT, MPI_SUM, c));
            for (int i = 0; i < n; i++) {
                int e = 0;
                for (int q = 0; q < rank; q++) e += value(q, i, 19);
                CHECK(got[i] == e + value(rank, i, 19), "%s: %s scan", label, alg);
                CHECK(rank == 0 || got[n + i] == e, "%s: %s exscan", label, alg);
            }
        }
        free(mine); free(all); free(got); free(cnt); free(dsp);
    }
    /* A derived datatype: every other int of a buffer (not contiguous). */
    {
        enum { N = 5000 };
        MPI_Datatype every_other;
        T(MPI_Type_vector(N, 1, 2, MPI_INT, &every_other));
        T(MPI_Type_commit(&every_other));
        int *b = malloc(2 * N * sizeof(int)), *s = malloc(2 * N * sizeof(int)), *r = malloc(2 * N * sizeof(int));
        for (int ri = 0; ri < 3; ri++) {
            int root = roots[ri];
            for (int i = 0; i < 2 * N; i++) b[i] = rank == root ? value(root, i, 2) : -5;
            T(MPI_Bcast(b, 1, every_other, root, hier));
            for (int i = 0; i < 2 * N; i++)
                CHECK(b[i] == (i % 2 == 0 || rank == root ? value(root, i, 2) : -5), "%s: vector bcast root=%d [%d]=%d", label, root, i, b[i]);
            for (int i = 0; i < 2 * N; i++) { s[i] = value(rank, i, 3); r[i] = -7; }
            T(MPI_Reduce(s, r, 1, every_other, MPI_SUM, root, hier));
            if (rank == root)
                for (int i = 0; i < 2 * N; i++) {
                    int e = -7;
                    if (i % 2 == 0) { e = 0; for (int q = 0; q < size; q++) e += value(q, i, 3); }
                    CHECK(r[i] == e, "%s: vector reduce root=%d [%d]=%d want %d", label, root, i, r[i], e);
                }
        }
        T(MPI_Type_free(&every_other));
        free(b); free(s); free(r);
    }
    /* Barriers, and nonblocking collectives several in flight at once. */
    for (int k = 0; k < 20; k++) T(MPI_Barrier(k % 2 ? hier : flat));
    {
        enum { N = 3000 };
        int *a = malloc(N * sizeof(int)), *b = malloc(N * sizeof(int)), *c = malloc(N * sizeof(int));
        MPI_Request rq[3];
        int root = size - 1;
        for (int i = 0; i < N; i++) { a[i] = rank == root ? value(root, i, 4) : 0; b[i] = value(rank, i, 5); c[i] = 0; }
        T(MPI_Ibcast(a, N, MPI_INT, root, hier, &rq[0]));
        T(MPI_Iallreduce(b, c, N, MPI_INT, MPI_SUM, hier, &rq[1]));
        T(MPI_Ibarrier(hier, &rq[2]));
        T(MPI_Waitall(3, rq, MPI_STATUSES_IGNORE));
        for (int i = 0; i < N; i++) {
            int e = 0;
            for (int q = 0; q < size; q++) e += value(q, i, 5);
            CHECK(a[i] == value(root, i, 4) && c[i] == e, "%s: nonblocking [%d] = %d, %d", label, i, a[i], c[i]);
        }
        free(a); free(b); free(c);
    }
    T(MPI_Op_free(&xor));
    T(MPI_Op_free(&affine));
    T(MPI_Comm_free(&flat));
    T(MPI_Comm_free(&hier));
}

/* ---- counting wide-area messages ---------------------------------------- */

static MPI_T_pvar_session session;
static MPI_T_pvar_handle sent;
static int wsize, *site_of;

/* Messages this rank has sent to ranks at other sites so far. */
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

/* The wide-area messages of one call of `op` on `c`, summed over all ranks. */
static unsigned long long count_wan(MPI_Comm c, MPI_Comm quiet, void (*op)(MPI_Comm, int), int root) {
    T(MPI_Barrier(quiet));
    unsigned long long before = wan_sent();
    op(c, root);
    unsigned long long mine = wan_sent() - before, all;
    T(MPI_Allreduce(&mine, &all, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, quiet));
    /* The count of `quiet`'s own traffic is taken before and after, never during `op`. */
    return all;
}

static void do_bcast(MPI_Comm c, int root) { int x[2] = {root, 5}; T(MPI_Bcast(x, 2, MPI_INT, root, c)); }
static void do_reduce(MPI_Comm c, int root) { int x = 1, y = 0; T(MPI_Reduce(&x, &y, 1, MPI_INT, MPI_SUM, root, c)); }
static void do_barrier(MPI_Comm c, int root) { (void)root; T(MPI_Barrier(c)); }
static void do_allreduce(MPI_Comm c, int root) { (void)root; int x = 1, y = 0; T(MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, c)); }
/* 64 KiB: pipelined in 4 pieces of 16 KiB (docs/mpi.md, "Pieces"). */
#define BIG (65536 / (int)sizeof(int))
static void do_reduce_big(MPI_Comm c, int root) {
    int *x = calloc(BIG, sizeof(int)), *y = malloc(BIG * sizeof(int));
    T(MPI_Reduce(x, y, BIG, MPI_INT, MPI_SUM, root, c));
    free(x); free(y);
}
static void do_allreduce_big(MPI_Comm c, int root) {
    (void)root;
    int *x = calloc(BIG, sizeof(int)), *y = malloc(BIG * sizeof(int));
    T(MPI_Allreduce(x, y, BIG, MPI_INT, MPI_SUM, c));
    free(x); free(y);
}

static void do_gather(MPI_Comm c, int root) { int x = 1, *y = malloc(wsize * sizeof(int)); T(MPI_Gather(&x, 1, MPI_INT, y, 1, MPI_INT, root, c)); free(y); }
static void do_scatter(MPI_Comm c, int root) { int x = 1, *y = calloc(wsize, sizeof(int)); T(MPI_Scatter(y, 1, MPI_INT, &x, 1, MPI_INT, root, c)); free(y); }
static void do_allgather(MPI_Comm c, int root) { (void)root; int x = 1, *y = malloc(wsize * sizeof(int)); T(MPI_Allgather(&x, 1, MPI_INT, y, 1, MPI_INT, c)); free(y); }

static void do_alltoall(MPI_Comm c, int root) { (void)root; int *x = calloc(wsize, sizeof(int)), *y = malloc(wsize * sizeof(int)); T(MPI_Alltoall(x, 1, MPI_INT, y, 1, MPI_INT, c)); free(x); free(y); }

static void wan_counts(void) {
    int provided, idx, count, flag, *depths, **colors, rank;
    T(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided));
    T(MPI_T_pvar_session_create(&session));
    T(MPI_T_pvar_get_index("gw_link_sent_msgs", MPI_T_PVAR_CLASS_COUNTER, &idx));
    T(MPI_T_pvar_handle_alloc(session, idx, NULL, &sent, &count));
    T(MPI_T_pvar_start(session, sent));
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    CHECK(count == wsize, "gw_link_sent_msgs has %d elements", count);
    T(MPI_Comm_get_attr(MPI_COMM_WORLD, GW_TOPOLOGY_DEPTHS, &depths, &flag));
    T(MPI_Comm_get_attr(MPI_COMM_WORLD, GW_TOPOLOGY_COLORS, &colors, &flag));
    CHECK(flag, "no GW_TOPOLOGY_COLORS");
    site_of = malloc(wsize * sizeof(int));
    int nsites = 0;
    for (int r = 0; r < wsize; r++) {
        site_of[r] = colors[r][0];
        if (site_of[r] + 1 > nsites) nsites = site_of[r] + 1;
    }
    CHECK(nsites >= 2, "the wan test needs ranks at 2 sites or more, got %d", nsites);
    MPI_Comm flat = with_algorithm(MPI_COMM_WORLD, "flat"), hier = with_algorithm(MPI_COMM_WORLD, "hier");
    /* Warm up: every link the collectives use is connected before counting. */
    for (int k = 0; k < 2; k++) {
        for (int r = 0; r < wsize; r++) { do_bcast(flat, r); do_bcast(hier, r); do_reduce(hier, r); do_bcast(MPI_COMM_WORLD, r); }
        do_reduce_big(hier, wsize - 1);
        do_allreduce_big(hier, 0);
        do_barrier(hier, 0);
        do_barrier(flat, 0);
        do_allreduce(flat, 0);
        do_allreduce(hier, 0);
        do_allgather(hier, 0);
        do_alltoall(hier, 0);
        for (int r = 0; r < wsize; r++) { do_gather(hier, r); do_scatter(hier, r); }
    }
    int roots[3] = {0, wsize - 1, wsize / 2};
    for (int i = 0; i < 3; i++) {
        int root = roots[i];
        unsigned long long hb = count_wan(hier, flat, do_bcast, root), fb = count_wan(flat, flat, do_bcast, root);
        unsigned long long hr = count_wan(hier, flat, do_reduce, root), fr = count_wan(flat, flat, do_reduce, root);
        if (rank == 0)
            printf("wan messages root %d: bcast hier %llu flat %llu, reduce hier %llu flat %llu\n", root, hb, fb, hr, fr);
        CHECK(hb == (unsigned long long)(nsites - 1), "hier bcast root %d: %llu wide-area messages, want %d", root, hb, nsites - 1);
        CHECK(hr == (unsigned long long)(nsites - 1), "hier reduce root %d: %llu wide-area messages, want %d", root, hr, nsites - 1);
        unsigned long long hg = count_wan(hier, flat, do_gather, root), hs = count_wan(hier, flat, do_scatter, root);
        CHECK(hg == (unsigned long long)(nsites - 1), "hier gather root %d: %llu wide-area messages, want %d", root, hg, nsites - 1);
        CHECK(hs == (unsigned long long)(nsites - 1), "hier scatter root %d: %llu wide-area messages, want %d", root, hs, nsites - 1);
    }
    unsigned long long hbar = count_wan(hier, flat, do_barrier, 0), fbar = count_wan(flat, flat, do_barrier, 0);
    unsigned long long hall = count_wan(hier, flat, do_allreduce, 0), fall = count_wan(flat, flat, do_allreduce, 0);
    if (rank == 0)
        printf("wan messages: barrier hier %llu flat %llu, allreduce hier %llu flat %llu (%d sites)\n", hbar, fbar, hall, fall, nsites);
    /* One hop among the site leaders: each tells every other site it has
     * arrived, one message per remote site. */
    CHECK(hbar == (unsigned long long)(nsites * (nsites - 1)), "hier barrier: %llu wide-area messages, want %d", hbar, nsites * (nsites - 1));
    /* Small allreduce: the site leaders exchange their partials all-to-all. */
    int want_all = nsites * (nsites - 1);
    CHECK(hall == (unsigned long long)want_all, "hier allreduce: %llu wide-area messages, want %d", hall, want_all);
    /* 64 KiB: the same hops, each carrying 4 pieces. */
    unsigned long long hrb = count_wan(hier, flat, do_reduce_big, wsize - 1), hab = count_wan(hier, flat, do_allreduce_big, 0);
    if (rank == 0) printf("wan messages, 64 KiB: reduce hier %llu, allreduce hier %llu\n", hrb, hab);
    CHECK(hrb == (unsigned long long)(4 * (nsites - 1)), "hier reduce 64 KiB: %llu wide-area messages, want %d", hrb, 4 * (nsites - 1));
    CHECK(hab == (unsigned long long)(4 * want_all), "hier allreduce 64 KiB: %llu wide-area messages, want %d", hab, 4 * want_all);
    /* Allgather: each site's blocks go once to each other site. */
    unsigned long long hag = count_wan(hier, flat, do_allgather, 0), fag = count_wan(flat, flat, do_allgather, 0);
    if (rank == 0) printf("wan messages: allgather hier %llu flat %llu\n", hag, fag);
    CHECK(hag == (unsigned long long)(nsites * (nsites - 1)), "hier allgather: %llu wide-area messages, want %d", hag, nsites * (nsites - 1));
    /* Alltoall: each site's leader sends each other site's its blocks in one message. */
    unsigned long long hat = count_wan(hier, flat, do_alltoall, 0), fat = count_wan(flat, flat, do_alltoall, 0);
    if (rank == 0) printf("wan messages: alltoall hier %llu flat %llu\n", hat, fat);
    CHECK(hat == (unsigned long long)(nsites * (nsites - 1)), "hier alltoall: %llu wide-area messages, want %d", hat, nsites * (nsites - 1));
    /* MPI_COMM_WORLD has no info: GW_COLL (or auto = hierarchical) decides. */
    const char *env = getenv("GW_COLL");
    int want_flat = env && strcmp(env, "flat") == 0;
    unsigned long long wb = count_wan(MPI_COMM_WORLD, flat, do_bcast, wsize - 1);
    unsigned long long fb = count_wan(flat, flat, do_bcast, wsize - 1);
    if (rank == 0) printf("wan messages: world bcast root %d %llu (GW_COLL=%s)\n", wsize - 1, wb, env ? env : "");
    CHECK(wb == (want_flat ? fb : (unsigned long long)(nsites - 1)), "world bcast: %llu wide-area messages with GW_COLL=%s (flat %llu)", wb, env ? env : "", fb);
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
        PASS("coll_hier wan");
    } else {
        run_on(MPI_COMM_WORLD, "world");
        /* Odd and even ranks, in reverse order: spans the same sites, ranks permuted. */
        MPI_Comm split;
        T(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, size - rank, &split));
        run_on(split, "split");
        T(MPI_Comm_free(&split));
        PASS("coll_hier");
    }
    MPI_Finalize();
    return 0;
}
