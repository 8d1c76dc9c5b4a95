/* Intercommunicators: creation, point-to-point, merge, dup/split/create,
 * blocking and nonblocking collectives, and the argument checks.
 * The world splits into evens (group 0) and odds (group 1). */
#include "check.h"
#include <string.h>

static int wsize, wrank;

/* World rank of rank r of group g (g = 0 evens, 1 odds). */
static int world_of(int g, int r) { return 2 * r + g; }
static int group_size(int g) { return (wsize + 1 - g) / 2; }

static void test_p2p(MPI_Comm ic, int lsize, int rsize, int lrank) {
    /* Local rank r sends its local rank to remote rank r % rsize. */
    int v = lrank, tag = 5;
    MPI_Request sr;
    MPI_Isend(&v, 1, MPI_INT, lrank % rsize, tag, ic, &sr);
    int expect = 0;
    for (int j = 0; j < rsize; j++) if (j % lsize == lrank) expect++;
    for (int k = 0; k < expect; k++) {
        int got = -1;
        MPI_Status st;
        MPI_Recv(&got, 1, MPI_INT, MPI_ANY_SOURCE, tag, ic, &st);
        CHECK(st.MPI_SOURCE == got, "source %d payload %d", st.MPI_SOURCE, got);
        CHECK(got % lsize == lrank && got < rsize, "got %d", got);
        CHECK(st.MPI_TAG == tag, "tag %d", st.MPI_TAG);
    }
    MPI_Wait(&sr, MPI_STATUS_IGNORE);
    /* Sendrecv with remote rank 0 from each rank 0. */
    if (lrank == 0) {
        int out = wrank, in = -1, flag = 0;
        MPI_Status st;
        MPI_Sendrecv(&out, 1, MPI_INT, 0, 9, &in, 1, MPI_INT, 0, 9, ic, &st);
        CHECK(in == (wrank == 0 ? 1 : 0), "sendrecv got %d", in);
        CHECK(st.MPI_SOURCE == 0, "sendrecv source %d", st.MPI_SOURCE);
        /* Probe sees a message from the remote group. */
        MPI_Send(&out, 1, MPI_INT, 0, 11, ic);
        while (!flag) MPI_Iprobe(0, 11, ic, &flag, &st);
        CHECK(st.MPI_SOURCE == 0, "probe source");
        MPI_Recv(&in, 1, MPI_INT, 0, 11, ic, MPI_STATUS_IGNORE);
    }
}

static void test_merge(MPI_Comm ic, int color) {
    MPI_Comm m;
    int r, s;
    /* Evens low: world order. */
    MPI_Intercomm_merge(ic, color, &m);
    MPI_Comm_size(m, &s);
    MPI_Comm_rank(m, &r);
    CHECK(s == wsize, "merged size %d", s);
    int expect = color == 0 ? wrank / 2 : group_size(0) + wrank / 2;
    CHECK(r == expect, "merged rank %d expected %d", r, expect);
    int sum = 0;
    MPI_Allreduce(&wrank, &sum, 1, MPI_INT, MPI_SUM, m);
    CHECK(sum == wsize * (wsize - 1) / 2, "merged allreduce %d", sum);
    MPI_Comm_free(&m);
    /* Odds low. */
    MPI_Intercomm_merge(ic, !color, &m);
    MPI_Comm_rank(m, &r);
    expect = color == 1 ? wrank / 2 : group_size(1) + wrank / 2;
    CHECK(r == expect, "merged (odds low) rank %d expected %d", r, expect);
    MPI_Comm_free(&m);
    /* Same flag on both sides: a consistent order all the same. */
    MPI_Intercomm_merge(ic, 0, &m);
    MPI_Comm_rank(m, &r);
    int all[64];
    MPI_Allgather(&r, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
    int seen[64] = {0};
    for (int i = 0; i < wsize; i++) { CHECK(all[i] >= 0 && all[i] < wsize && !seen[all[i]], "ranks not a permutation"); seen[all[i]] = 1; }
    MPI_Comm_free(&m);
}

static void test_coll(MPI_Comm ic, int color, int lsize, int rsize, int lrank) {
    int rg = 1 - color; /* remote group */
    int remote_sum = 0, i;
    for (i = 0; i < rsize; i++) remote_sum += world_of(rg, i);
    MPI_Barrier(ic);

    /* Bcast from group 0's rank 0. */
    int v = color == 0 && lrank == 0 ? 4242 : -1;
    int root = color == 0 ? (lrank == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0;
    MPI_Bcast(&v, 1, MPI_INT, root, ic);
    if (color == 1) CHECK(v == 4242, "bcast got %d", v);
    else if (lrank != 0) CHECK(v == -1, "bcast touched a PROC_NULL buffer");

    /* Reduce to group 1's rank 0 of group 0's world ranks. */
    int sum = -1;
    root = color == 1 ? (lrank == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0;
    MPI_Reduce(&wrank, &sum, 1, MPI_INT, MPI_SUM, root, ic);
    if (color == 1 && lrank == 0) CHECK(sum == remote_sum, "reduce %d expected %d", sum, remote_sum);

    /* Allreduce: each group gets the other's sum. */
    int pair[2] = {wrank, 1}, out[2] = {0, 0};
    MPI_Allreduce(pair, out, 2, MPI_INT, MPI_SUM, ic);
    CHECK(out[0] == remote_sum && out[1] == rsize, "allreduce %d %d", out[0], out[1]);

    /* Gather to group 0's rank 0; gatherv with j+1 elements from remote j. */
    int buf[256], counts[64], displs[64];
    root = color == 0 ? (lrank == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0;
    for (i = 0; i < 256; i++) buf[i] = -1;
    MPI_Gather(&wrank, 1, MPI_INT, buf, 1, MPI_INT, root, ic);
    if (root == MPI_ROOT)
        for (i = 0; i < rsize; i++) CHECK(buf[i] == world_of(rg, i), "gather [%d]=%d", i, buf[i]);
    int mine[64];
    for (i = 0; i < lrank + 1; i++) mine[i] = wrank * 100 + i;
    int off = 0;
    for (i = 0; i < rsize; i++) { counts[i] = i + 1; displs[i] = off; off += i + 2; }
    MPI_Gatherv(mine, lrank + 1, MPI_INT, buf, counts, displs, MPI_INT, root, ic);
    if (root == MPI_ROOT)
        for (i = 0; i < rsize; i++)
            for (int k = 0; k <= i; k++)
                CHECK(buf[displs[i] + k] == world_of(rg, i) * 100 + k, "gatherv %d %d", i, k);

    /* Scatter from group 1's rank 0: 100 + j to remote j; scatterv j+1 elements. */
    root = color == 1 ? (lrank == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0;
    int src[256];
    for (i = 0; i < 256; i++) src[i] = 100 + i;
    v = -1;
    MPI_Scatter(src, 1, MPI_INT, &v, 1, MPI_INT, root, ic);
    if (color == 0) CHECK(v == 100 + lrank, "scatter %d", v);
    off = 0;
    for (i = 0; i < rsize; i++) { counts[i] = i + 1; displs[i] = off; off += i + 3; }
    for (i = 0; i < 64; i++) mine[i] = -1;
    MPI_Scatterv(src, counts, displs, MPI_INT, mine, lrank + 1, MPI_INT, root, ic);
    if (color == 0) {
        int d = 0;
        for (i = 0; i < lrank; i++) d += i + 3;
        for (i = 0; i <= lrank; i++) CHECK(mine[i] == 100 + d + i, "scatterv [%d]=%d", i, mine[i]);
    }

    /* Allgather: the remote world ranks; allgatherv: j+1 copies from remote j. */
    MPI_Allgather(&wrank, 1, MPI_INT, buf, 1, MPI_INT, ic);
    for (i = 0; i < rsize; i++) CHECK(buf[i] == world_of(rg, i), "allgather [%d]=%d", i, buf[i]);
    for (i = 0; i < lrank + 1; i++) mine[i] = wrank;
    off = 0;
    for (i = 0; i < rsize; i++) { counts[i] = i + 1; displs[i] = off; off += i + 1; }
    MPI_Allgatherv(mine, lrank + 1, MPI_INT, buf, counts, displs, MPI_INT, ic);
    for (i = 0; i < rsize; i++)
        for (int k = 0; k <= i; k++) CHECK(buf[displs[i] + k] == world_of(rg, i), "allgatherv");

    /* Alltoall: block j to remote j holds wrank*100 + j. */
    for (i = 0; i < rsize; i++) src[i] = wrank * 100 + i;
    MPI_Alltoall(src, 1, MPI_INT, buf, 1, MPI_INT, ic);
    for (i = 0; i < rsize; i++) CHECK(buf[i] == world_of(rg, i) * 100 + lrank, "alltoall [%d]=%d", i, buf[i]);
    /* Alltoallv: 2 elements each way. */
    int sc[64], sd[64], rc[64], rd[64];
    for (i = 0; i < rsize; i++) {
        sc[i] = 2; sd[i] = 2 * i; rc[i] = 2; rd[i] = 2 * (rsize - 1 - i);
        src[2 * i] = wrank; src[2 * i + 1] = i;
    }
    MPI_Alltoallv(src, sc, sd, MPI_INT, buf, rc, rd, MPI_INT, ic);
    for (i = 0; i < rsize; i++)
        CHECK(buf[rd[i]] == world_of(rg, i) && buf[rd[i] + 1] == lrank, "alltoallv %d", i);

    /* Reduce_scatter_block: vectors of T = lsize*rsize elements, v[k] = wrank + k;
     * each gets rsize elements of the other group's sum. */
    int T = lsize * rsize, blk = rsize;
    int *vec = malloc(sizeof(int) * T), *res = malloc(sizeof(int) * blk);
    for (i = 0; i < T; i++) vec[i] = wrank + i;
    MPI_Reduce_scatter_block(vec, res, blk, MPI_INT, MPI_SUM, ic);
    for (i = 0; i < blk; i++) {
        int k = lrank * blk + i;
        CHECK(res[i] == remote_sum + rsize * k, "reduce_scatter_block [%d]=%d", i, res[i]);
    }
    for (i = 0; i < lsize; i++) counts[i] = blk;
    MPI_Reduce_scatter(vec, res, counts, MPI_INT, MPI_SUM, ic);
    for (i = 0; i < blk; i++) {
        int k = lrank * blk + i;
        CHECK(res[i] == remote_sum + rsize * k, "reduce_scatter [%d]=%d", i, res[i]);
    }
    free(vec);
    free(res);

    /* Nonblocking forms, several in flight. */
    MPI_Request rq[4];
    MPI_Status sts[4];
    int nsum = 0;
    root = color == 0 ? (lrank == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0;
    int bv = color == 0 ? 77 : -1;
    MPI_Ibcast(&bv, 1, MPI_INT, root, ic, &rq[0]);
    MPI_Iallreduce(&wrank, &nsum, 1, MPI_INT, MPI_SUM, ic, &rq[1]);
    MPI_Ibarrier(ic, &rq[2]);
    for (i = 0; i < rsize; i++) src[i] = wrank * 100 + i;
    MPI_Ialltoall(src, 1, MPI_INT, buf, 1, MPI_INT, ic, &rq[3]);
    MPI_Waitall(4, rq, sts);
    if (color == 1) CHECK(bv == 77, "ibcast %d", bv);
    CHECK(nsum == remote_sum, "iallreduce %d", nsum);
    for (i = 0; i < rsize; i++) CHECK(buf[i] == world_of(rg, i) * 100 + lrank, "ialltoall");

    /* Alltoallw (byte displacements), Igather, Ireduce, Ireduce_scatter_block. */
    MPI_Datatype tw[64];
    for (i = 0; i < rsize; i++) {
        tw[i] = MPI_INT; sc[i] = 1; rc[i] = 1;
        sd[i] = i * (int)sizeof(int); rd[i] = (rsize - 1 - i) * (int)sizeof(int);
        src[i] = wrank * 1000 + i;
    }
    MPI_Alltoallw(src, sc, sd, tw, buf, rc, rd, tw, ic);
    for (i = 0; i < rsize; i++)
        CHECK(buf[rsize - 1 - i] == world_of(rg, i) * 1000 + lrank, "alltoallw %d", i);
    root = color == 1 ? (lrank == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0;
    int g2[64], rsum2 = -1, rsb2[64];
    for (i = 0; i < 64; i++) g2[i] = -1;
    int T2 = lsize * rsize;
    int *v2 = malloc(sizeof(int) * T2);
    for (i = 0; i < T2; i++) v2[i] = 2 * wrank + i;
    MPI_Igather(&wrank, 1, MPI_INT, g2, 1, MPI_INT, root, ic, &rq[0]);
    MPI_Ireduce(&wrank, &rsum2, 1, MPI_INT, MPI_MAX, root, ic, &rq[1]);
    MPI_Ireduce_scatter_block(v2, rsb2, rsize, MPI_INT, MPI_SUM, ic, &rq[2]);
    MPI_Waitall(3, rq, sts);
    if (root == MPI_ROOT) {
        for (i = 0; i < rsize; i++) CHECK(g2[i] == world_of(rg, i), "igather [%d]=%d", i, g2[i]);
        CHECK(rsum2 == world_of(rg, rsize - 1), "ireduce max %d", rsum2);
    }
    for (i = 0; i < rsize; i++) {
        int kk = lrank * rsize + i;
        CHECK(rsb2[i] == 2 * remote_sum + rsize * kk, "ireduce_scatter_block [%d]=%d", i, rsb2[i]);
    }
    free(v2);

    /* Scan is for intracommunicators only. */
    MPI_Comm_set_errhandler(ic, MPI_ERRORS_RETURN);
    int err = MPI_Scan(&wrank, &sum, 1, MPI_INT, MPI_SUM, ic), cls = -1;
    MPI_Error_class(err, &cls);
    CHECK(cls == MPI_ERR_COMM, "scan on an intercomm: class %d", cls);
    /* A bad root. */
    err = MPI_Bcast(&v, 1, MPI_INT, rsize + 5, ic);
    MPI_Error_class(err, &cls);
    CHECK(cls == MPI_ERR_ROOT, "bcast bad root: class %d", cls);
}

static void test_derived(MPI_Comm ic, int color, int lsize, int rsize, int lrank) {
    int rg = 1 - color, s, r, flag, i;
    /* Dup: same shape, separate traffic. */
    MPI_Comm d;
    MPI_Comm_dup(ic, &d);
    MPI_Comm_test_inter(d, &flag);
    MPI_Comm_remote_size(d, &s);
    CHECK(flag && s == rsize, "dup: inter %d remote size %d", flag, s);
    int res;
    MPI_Comm_compare(ic, d, &res);
    CHECK(res == MPI_CONGRUENT, "compare dup %d", res);
    MPI_Comm_compare(ic, MPI_COMM_WORLD, &res);
    CHECK(res == MPI_UNEQUAL, "compare with world %d", res);
    int out = 0, remote_sum = 0;
    for (i = 0; i < rsize; i++) remote_sum += world_of(rg, i);
    MPI_Allreduce(&wrank, &out, 1, MPI_INT, MPI_SUM, d);
    CHECK(out == remote_sum, "allreduce on dup %d", out);
    MPI_Comm_free(&d);
    CHECK(d == MPI_COMM_NULL, "free sets NULL");

    /* Idup. */
    MPI_Request rq;
    MPI_Comm_idup(ic, &d, &rq);
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
    MPI_Comm_remote_size(d, &s);
    CHECK(s == rsize, "idup remote size %d", s);
    MPI_Barrier(d);
    MPI_Comm_free(&d);

    /* Split by local rank parity, reversed order by key. */
    int c = lrank % 2;
    MPI_Comm sp;
    MPI_Comm_split(ic, c, -lrank, &sp);
    int rmatch = 0, lmatch = 0, rsum = 0;
    for (i = 0; i < rsize; i++) if (i % 2 == c) { rmatch++; rsum += world_of(rg, i); }
    for (i = 0; i < lsize; i++) if (i % 2 == c) lmatch++;
    if (rmatch == 0) {
        CHECK(sp == MPI_COMM_NULL, "split without remote partners is not NULL");
    } else {
        MPI_Comm_size(sp, &s);
        MPI_Comm_rank(sp, &r);
        CHECK(s == lmatch, "split local size %d expected %d", s, lmatch);
        /* key = -lrank: the highest local rank of the colour comes first. */
        int above = 0;
        for (i = lrank + 2; i < lsize; i += 2) above++;
        CHECK(r == above, "split rank %d expected %d", r, above);
        MPI_Comm_remote_size(sp, &s);
        CHECK(s == rmatch, "split remote size %d expected %d", s, rmatch);
        MPI_Allreduce(&wrank, &out, 1, MPI_INT, MPI_SUM, sp);
        CHECK(out == rsum, "allreduce on split %d expected %d", out, rsum);
        MPI_Comm_free(&sp);
    }

    /* Create from the local group's rank 0 alone. */
    MPI_Group lg, g0, remg;
    MPI_Comm_group(ic, &lg);
    int zero = 0;
    MPI_Group_incl(lg, 1, &zero, &g0);
    MPI_Comm cr;
    MPI_Comm_create(ic, g0, &cr);
    if (lrank == 0) {
        CHECK(cr != MPI_COMM_NULL, "create: rank 0 got NULL");
        MPI_Comm_size(cr, &s);
        MPI_Comm_remote_size(cr, &r);
        CHECK(s == 1 && r == 1, "create sizes %d %d", s, r);
        int in = -1;
        MPI_Sendrecv(&wrank, 1, MPI_INT, 0, 0, &in, 1, MPI_INT, 0, 0, cr, MPI_STATUS_IGNORE);
        CHECK(in == world_of(rg, 0), "create: exchange got %d", in);
        MPI_Comm_free(&cr);
    } else {
        CHECK(cr == MPI_COMM_NULL, "create: a non-member got a communicator");
    }
    /* The remote group names the other group's world ranks. */
    MPI_Comm_remote_group(ic, &remg);
    MPI_Group wg;
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    int rr[64], wr[64];
    for (i = 0; i < rsize; i++) rr[i] = i;
    MPI_Group_translate_ranks(remg, rsize, rr, wg, wr);
    for (i = 0; i < rsize; i++) CHECK(wr[i] == world_of(rg, i), "remote group [%d] = world %d", i, wr[i]);
    MPI_Group_free(&remg);
    MPI_Group_free(&wg);
    MPI_Group_free(&g0);
    MPI_Group_free(&lg);
}

static void test_errors(MPI_Comm local, MPI_Comm ic) {
    int err, cls, s, flag;
    MPI_Comm x = MPI_COMM_NULL;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(local, MPI_ERRORS_RETURN);
    MPI_Comm_test_inter(MPI_COMM_WORLD, &flag);
    CHECK(!flag, "world is not an intercomm");
#ifndef MPICH_VERSION /* MPICH answers 0 without an error */
    err = MPI_Comm_remote_size(MPI_COMM_WORLD, &s);
    MPI_Error_class(err, &cls);
    CHECK(cls == MPI_ERR_COMM, "remote_size of an intracomm: %d", cls);
#endif
    err = MPI_Intercomm_merge(MPI_COMM_WORLD, 0, &x);
    MPI_Error_class(err, &cls);
    CHECK(cls == MPI_ERR_COMM, "merge of an intracomm: %d", cls);
    err = MPI_Intercomm_create(ic, 0, MPI_COMM_WORLD, 0, 3, &x);
    MPI_Error_class(err, &cls);
    CHECK(cls == MPI_ERR_COMM, "create from an intercomm: %d", cls);
    err = MPI_Intercomm_create(local, 1000, MPI_COMM_WORLD, 0, 3, &x);
    MPI_Error_class(err, &cls);
    CHECK(cls == MPI_ERR_RANK, "bad local leader: %d", cls);
    /* Every rank in one group with itself as remote leader: the groups overlap. */
    err = MPI_Intercomm_create(MPI_COMM_WORLD, 0, MPI_COMM_WORLD, 0, 3, &x);
    CHECK(err != MPI_SUCCESS && x == MPI_COMM_NULL, "overlapping groups accepted");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

/* MPI 4.0 constructors from groups, with no parent communicator. */
static void test_from_groups(MPI_Comm local, MPI_Comm ic, int rsize) {
    MPI_Group lg, rg, wg, mine;
    MPI_Comm_group(local, &lg);
    MPI_Comm_remote_group(ic, &rg);
    MPI_Comm fg, cf;
    int res, out = 0, sum = 0, i;
    for (i = 0; i < rsize; i++) sum += world_of(wrank % 2 ? 0 : 1, i);
    /* Twice with one tag: successive calls stay apart. Each group's last
     * rank leads (the remote leader names the other group's leader). */
    int lsize;
    MPI_Group_size(lg, &lsize);
    for (int k = 0; k < 2; k++) {
        MPI_Intercomm_create_from_groups(lg, lsize - 1, rg, rsize - 1, "gw-test-inter", MPI_INFO_NULL, MPI_ERRORS_RETURN, &fg);
        MPI_Comm_compare(ic, fg, &res);
        CHECK(res == MPI_CONGRUENT, "from groups: compare %d", res);
        MPI_Allreduce(&wrank, &out, 1, MPI_INT, MPI_SUM, fg);
        CHECK(out == sum, "from groups: allreduce %d expected %d", out, sum);
        MPI_Comm_free(&fg);
    }
    MPI_Comm_create_from_group(lg, "gw-test-local", MPI_INFO_NULL, MPI_ERRORS_ARE_FATAL, &cf);
    MPI_Comm_compare(local, cf, &res);
    CHECK(res == MPI_CONGRUENT, "create_from_group: compare %d", res);
    MPI_Comm_free(&cf);
    /* Errors found before any message: overlapping groups, not a member, bad leader. */
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    int cls, err = MPI_Intercomm_create_from_groups(lg, 0, lg, 0, "x", MPI_INFO_NULL, MPI_ERRORS_RETURN, &fg);
    MPI_Error_class(err, &cls);
    CHECK(err != MPI_SUCCESS, "overlapping groups accepted");
    err = MPI_Intercomm_create_from_groups(rg, 0, lg, 0, "x", MPI_INFO_NULL, MPI_ERRORS_RETURN, &fg);
    MPI_Error_class(err, &cls);
    CHECK(cls == MPI_ERR_GROUP, "not in the local group: class %d", cls);
    err = MPI_Intercomm_create_from_groups(lg, 99, rg, 0, "x", MPI_INFO_NULL, MPI_ERRORS_RETURN, &fg);
    MPI_Error_class(err, &cls);
    CHECK(cls == MPI_ERR_RANK, "bad local leader: class %d", cls);
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    int me = wrank;
    MPI_Group_incl(wg, 1, &me, &mine);
    MPI_Comm_create_from_group(mine, "gw-test-self", MPI_INFO_NULL, MPI_ERRORS_RETURN, &cf);
    MPI_Comm_size(cf, &res);
    CHECK(res == 1, "create_from_group of one: size %d", res);
    MPI_Comm_free(&cf);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL);
    MPI_Group_free(&mine);
    MPI_Group_free(&wg);
    MPI_Group_free(&lg);
    MPI_Group_free(&rg);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    if (wsize < 2 || wsize > 64) {
        PASS("intercomm");
        MPI_Finalize();
        return 0;
    }
    int color = wrank % 2;
    MPI_Comm local, ic;
    MPI_Comm_split(MPI_COMM_WORLD, color, wrank, &local);
    MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, color == 0 ? 1 : 0, 7, &ic);
    int flag, lsize, rsize, lrank;
    MPI_Comm_test_inter(ic, &flag);
    MPI_Comm_size(ic, &lsize);
    MPI_Comm_rank(ic, &lrank);
    MPI_Comm_remote_size(ic, &rsize);
    CHECK(flag, "test_inter");
    CHECK(lsize == group_size(color) && rsize == group_size(1 - color), "sizes %d %d", lsize, rsize);
    CHECK(lrank == wrank / 2, "local rank %d", lrank);

    test_p2p(ic, lsize, rsize, lrank);
    test_merge(ic, color);
    test_coll(ic, color, lsize, rsize, lrank);
    test_derived(ic, color, lsize, rsize, lrank);
    test_errors(local, ic);
    test_from_groups(local, ic, rsize);

    MPI_Comm_free(&ic);
    MPI_Comm_free(&local);
    MPI_Barrier(MPI_COMM_WORLD);
    PASS("intercomm");
    MPI_Finalize();
    return 0;
}
