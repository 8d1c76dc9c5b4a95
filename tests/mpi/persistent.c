/* Persistent collectives (MPI 4.0 MPI_X_init): each start runs the
 * collective again on the buffers' current contents. */
#include "check.h"
#include <string.h>

#define ROUNDS 3

int main(int argc, char **argv) {
    int rank, size, i, k;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm c = MPI_COMM_WORLD;
    MPI_Info info = MPI_INFO_NULL;
    int n = size, tri = size * (size - 1) / 2;

    int bval = -1, sv = 0, ar = 0, red = 0, sc = 0, ex = -1;
    int *gat = malloc(sizeof(int) * n), *all = malloc(sizeof(int) * n);
    int *src = malloc(sizeof(int) * n), *a2a = malloc(sizeof(int) * n);
    int *cnt = malloc(sizeof(int) * n), *dsp = malloc(sizeof(int) * n);
    MPI_Datatype *types = malloc(sizeof(MPI_Datatype) * n);
    int *bdsp = malloc(sizeof(int) * n);
    int *agv = malloc(sizeof(int) * n), *a2v = malloc(sizeof(int) * n), *a2w = malloc(sizeof(int) * n);
    int *rsv = malloc(sizeof(int) * n), rsb = 0, rs = 0, scat = -1, scatv = -1;
    for (i = 0; i < n; i++) { cnt[i] = 1; dsp[i] = i; bdsp[i] = i * (int)sizeof(int); types[i] = MPI_INT; }

    enum { BAR, BC, AR, RED, GAT, GATV, SCT, SCTV, AG, AGV, A2A, A2V, A2W, RS, RSB, SCAN, EXSCAN, NREQ };
    MPI_Request rq[NREQ];
    MPI_Barrier_init(c, info, &rq[BAR]);
    MPI_Bcast_init(&bval, 1, MPI_INT, 0, c, info, &rq[BC]);
    MPI_Allreduce_init(&sv, &ar, 1, MPI_INT, MPI_SUM, c, info, &rq[AR]);
    MPI_Reduce_init(&sv, &red, 1, MPI_INT, MPI_SUM, n - 1, c, info, &rq[RED]);
    MPI_Gather_init(&sv, 1, MPI_INT, gat, 1, MPI_INT, 0, c, info, &rq[GAT]);
    MPI_Gatherv_init(&sv, 1, MPI_INT, all, cnt, dsp, MPI_INT, n - 1, c, info, &rq[GATV]);
    MPI_Scatter_init(src, 1, MPI_INT, &scat, 1, MPI_INT, 0, c, info, &rq[SCT]);
    MPI_Scatterv_init(src, cnt, dsp, MPI_INT, &scatv, 1, MPI_INT, 0, c, info, &rq[SCTV]);
    MPI_Allgather_init(&sv, 1, MPI_INT, agv, 1, MPI_INT, c, info, &rq[AG]);
    MPI_Allgatherv_init(&sv, 1, MPI_INT, a2v, cnt, dsp, MPI_INT, c, info, &rq[AGV]);
    MPI_Alltoall_init(src, 1, MPI_INT, a2a, 1, MPI_INT, c, info, &rq[A2A]);
    MPI_Alltoallv_init(src, cnt, dsp, MPI_INT, rsv, cnt, dsp, MPI_INT, c, info, &rq[A2V]);
    MPI_Alltoallw_init(src, cnt, bdsp, types, a2w, cnt, bdsp, types, c, info, &rq[A2W]);
    MPI_Reduce_scatter_init(src, &rs, cnt, MPI_INT, MPI_SUM, c, info, &rq[RS]);
    MPI_Reduce_scatter_block_init(src, &rsb, 1, MPI_INT, MPI_SUM, c, info, &rq[RSB]);
    MPI_Scan_init(&sv, &sc, 1, MPI_INT, MPI_SUM, c, info, &rq[SCAN]);
    MPI_Exscan_init(&sv, &ex, 1, MPI_INT, MPI_SUM, c, info, &rq[EXSCAN]);

    for (k = 0; k < ROUNDS; k++) {
        /* New contents before each start. */
        sv = rank + 10 * k;
        if (rank == 0) bval = 1000 + k;
        for (i = 0; i < n; i++) src[i] = 100 * k + 10 * rank + i;
        if (k % 2 == 0) {
            MPI_Startall(NREQ, rq);
        } else {
            for (i = 0; i < NREQ; i++) MPI_Start(&rq[i]);
        }
        MPI_Waitall(NREQ, rq, MPI_STATUSES_IGNORE);
        for (i = 0; i < NREQ; i++) CHECK(rq[i] != MPI_REQUEST_NULL, "persistent request %d became NULL", i);
        int sum = tri + 10 * k * n;
        CHECK(bval == 1000 + k, "round %d bcast %d", k, bval);
        CHECK(ar == sum, "round %d allreduce %d expected %d", k, ar, sum);
        if (rank == n - 1) CHECK(red == sum, "round %d reduce %d", k, red);
        for (i = 0; i < n; i++) {
            if (rank == 0) CHECK(gat[i] == i + 10 * k, "round %d gather[%d]=%d", k, i, gat[i]);
            if (rank == n - 1) CHECK(all[i] == i + 10 * k, "round %d gatherv[%d]", k, i);
            CHECK(agv[i] == i + 10 * k, "round %d allgather[%d]=%d", k, i, agv[i]);
            CHECK(a2v[i] == i + 10 * k, "round %d allgatherv[%d]", k, i);
            int expect = 100 * k + 10 * i + rank;
            CHECK(a2a[i] == expect, "round %d alltoall[%d]=%d expected %d", k, i, a2a[i], expect);
            CHECK(rsv[i] == expect, "round %d alltoallv[%d]", k, i);
            CHECK(a2w[i] == expect, "round %d alltoallw[%d]", k, i);
        }
        CHECK(scat == 100 * k + rank && scatv == 100 * k + rank, "round %d scatter %d %d", k, scat, scatv);
        int rsum = 100 * k * n + 10 * tri + n * rank;
        CHECK(rs == rsum && rsb == rsum, "round %d reduce_scatter %d %d expected %d", k, rs, rsb, rsum);
        int pre = rank * (rank + 1) / 2 + 10 * k * (rank + 1);
        CHECK(sc == pre, "round %d scan %d expected %d", k, sc, pre);
        if (rank > 0) CHECK(ex == pre - sv, "round %d exscan %d", k, ex);
    }

    /* An inactive persistent request: wait and test return at once with an empty status. */
    MPI_Status st;
    st.MPI_SOURCE = 12345;
    MPI_Wait(&rq[AR], &st);
    CHECK(st.MPI_SOURCE == MPI_ANY_SOURCE && st.MPI_TAG == MPI_ANY_TAG, "inactive wait status %d %d", st.MPI_SOURCE, st.MPI_TAG);
    int flag = 0, count = -1;
    MPI_Get_count(&st, MPI_INT, &count);
    CHECK(count == 0, "inactive wait count %d", count);
    MPI_Test(&rq[AR], &flag, MPI_STATUS_IGNORE);
    CHECK(flag, "inactive test flag");
    CHECK(rq[AR] != MPI_REQUEST_NULL, "inactive wait freed the request");
    /* Starting an active request again is an error. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Start(&rq[AR]);
    int err = MPI_Start(&rq[AR]), cls = -1;
    MPI_Error_class(err, &cls);
    CHECK(cls == MPI_ERR_REQUEST, "double start: class %d", cls);
    MPI_Wait(&rq[AR], MPI_STATUS_IGNORE);
    for (i = 0; i < NREQ; i++) {
        MPI_Request_free(&rq[i]);
        CHECK(rq[i] == MPI_REQUEST_NULL, "free %d", i);
    }

    /* On an intercommunicator: evens and odds. */
    if (size >= 2) {
        int color = rank % 2, rsize = (size + color) / 2, lrank = rank / 2;
        MPI_Comm local, ic;
        MPI_Comm_split(MPI_COMM_WORLD, color, rank, &local);
        MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, 1 - color, 3, &ic);
        MPI_Comm_remote_size(ic, &rsize);
        int root = color == 0 ? (lrank == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0;
        MPI_Request ir[2];
        int v = -1, out = 0;
        MPI_Bcast_init(&v, 1, MPI_INT, root, ic, info, &ir[0]);
        MPI_Allreduce_init(&v, &out, 1, MPI_INT, MPI_SUM, ic, info, &ir[1]);
        for (k = 0; k < ROUNDS; k++) {
            if (root == MPI_ROOT) v = 50 + k;
            MPI_Start(&ir[0]);
            MPI_Wait(&ir[0], MPI_STATUS_IGNORE);
            if (color == 1) CHECK(v == 50 + k, "intercomm bcast_init round %d: %d", k, v);
            v = k + 1;
            MPI_Start(&ir[1]);
            MPI_Wait(&ir[1], MPI_STATUS_IGNORE);
            CHECK(out == rsize * (k + 1), "intercomm allreduce_init round %d: %d", k, out);
        }
        MPI_Request_free(&ir[0]);
        MPI_Request_free(&ir[1]);
        MPI_Comm_free(&ic);
        MPI_Comm_free(&local);
    }
    free(gat); free(all); free(src); free(a2a); free(cnt); free(dsp); free(types);
    free(bdsp); free(agv); free(a2v); free(a2w); free(rsv);
    PASS("persistent");
    MPI_Finalize();
    return 0;
}
