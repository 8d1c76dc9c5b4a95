/* Nonblocking collectives: overlap with point-to-point, several in flight on
 * one communicator, the NBX pattern (Issend + Iprobe + Ibarrier), Comm_idup. */
#include "check.h"
#include <string.h>

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int n = size;

    /* Several outstanding on one communicator, completed in reverse order. */
    {
        int a = rank, sum = -1, maxv = -1, b = rank == 0 ? 42 : 0;
        int all[64];
        MPI_Request r[4];
        MPI_Iallreduce(&a, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r[0]);
        MPI_Iallreduce(&a, &maxv, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &r[1]);
        MPI_Ibcast(&b, 1, MPI_INT, 0, MPI_COMM_WORLD, &r[2]);
        MPI_Iallgather(&a, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD, &r[3]);
        for (int i = 3; i >= 0; i--) MPI_Wait(&r[i], MPI_STATUS_IGNORE);
        CHECK(sum == n * (n - 1) / 2 && maxv == n - 1 && b == 42, "iallreduce/ibcast");
        for (int i = 0; i < n; i++) CHECK(all[i] == i, "iallgather");
    }

    /* Overlap with blocking point-to-point on the same communicator. */
    {
        double x = rank, y = 0;
        MPI_Request r;
        MPI_Ireduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD, &r);
        int next = (rank + 1) % n, prev = (rank + n - 1) % n, v = rank, w = -1;
        MPI_Sendrecv(&v, 1, MPI_INT, next, 0, &w, 1, MPI_INT, prev, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(w == prev, "p2p during ireduce");
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        if (rank == 0) CHECK(y == n * (n - 1) / 2.0, "ireduce %g", y);
    }

    /* NBX: sparse data exchange; every rank sends to (rank+1) and (rank+3). */
    {
        int targets[2] = {(rank + 1) % n, (rank + 3) % n};
        int nt = n > 1 ? (targets[0] == targets[1] ? 1 : 2) : 0;
        MPI_Request sr[2];
        int payload = rank * 7;
        for (int i = 0; i < nt; i++) MPI_Issend(&payload, 1, MPI_INT, targets[i], 77, MPI_COMM_WORLD, &sr[i]);
        MPI_Request bar = MPI_REQUEST_NULL;
        int done = 0, got = 0, barrier_started = 0;
        while (!done) {
            int flag;
            MPI_Status st;
            MPI_Iprobe(MPI_ANY_SOURCE, 77, MPI_COMM_WORLD, &flag, &st);
            if (flag) {
                int v;
                MPI_Recv(&v, 1, MPI_INT, st.MPI_SOURCE, 77, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                CHECK(v == st.MPI_SOURCE * 7, "nbx payload");
                got++;
            }
            if (!barrier_started) {
                int all;
                MPI_Testall(nt, sr, &all, MPI_STATUSES_IGNORE);
                if (all) { MPI_Ibarrier(MPI_COMM_WORLD, &bar); barrier_started = 1; }
            } else {
                MPI_Test(&bar, &done, MPI_STATUS_IGNORE);
            }
        }
        int expect = 0;
        for (int s = 0; s < n; s++) {
            int t0 = (s + 1) % n, t1 = (s + 3) % n;
            if (n > 1) { if (t0 == rank) expect++; if (t1 == rank && t1 != t0) expect++; }
        }
        CHECK(got == expect, "nbx got %d want %d", got, expect);
    }

    /* The other nonblocking forms once each. */
    {
        int mine[2] = {rank, -rank}, gat[128], sc[128], got2[2];
        MPI_Request r;
        MPI_Igather(mine, 2, MPI_INT, gat, 2, MPI_INT, n - 1, MPI_COMM_WORLD, &r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        if (rank == n - 1) for (int i = 0; i < n; i++) CHECK(gat[2 * i] == i && gat[2 * i + 1] == -i, "igather");
        for (int i = 0; i < 2 * n; i++) sc[i] = i;
        MPI_Iscatter(sc, 2, MPI_INT, got2, 2, MPI_INT, 0, MPI_COMM_WORLD, &r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        CHECK(got2[0] == 2 * rank && got2[1] == 2 * rank + 1, "iscatter");
        int s2[64], r2[64];
        for (int i = 0; i < n; i++) s2[i] = rank * 100 + i;
        MPI_Ialltoall(s2, 1, MPI_INT, r2, 1, MPI_INT, MPI_COMM_WORLD, &r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        for (int i = 0; i < n; i++) CHECK(r2[i] == i * 100 + rank, "ialltoall");
        int v = 1, sc1 = 0, ex = -1;
        MPI_Request rr[2];
        MPI_Iscan(&v, &sc1, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &rr[0]);
        MPI_Iexscan(&v, &ex, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &rr[1]);
        MPI_Waitall(2, rr, MPI_STATUSES_IGNORE);
        CHECK(sc1 == rank + 1, "iscan");
        if (rank > 0) CHECK(ex == rank, "iexscan");
        int ib[128], ob[1];
        for (int i = 0; i < n; i++) ib[i] = i;
        MPI_Ireduce_scatter_block(ib, ob, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        CHECK(ob[0] == n * rank, "ireduce_scatter_block");
    }

    /* Comm_idup */
    {
        MPI_Comm d;
        MPI_Request r;
        MPI_Comm_idup(MPI_COMM_WORLD, &d, &r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        int s, one = 1, tot;
        MPI_Comm_size(d, &s);
        CHECK(s == n, "idup size");
        MPI_Allreduce(&one, &tot, 1, MPI_INT, MPI_SUM, d);
        CHECK(tot == n, "idup works");
        MPI_Comm_free(&d);
    }
    /* Many nonblocking barriers in a row. */
    for (int i = 0; i < 100; i++) {
        MPI_Request r;
        MPI_Ibarrier(MPI_COMM_WORLD, &r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
    }
    /* Progress without a wait: rank 0 starts an allreduce and then blocks in
     * MPI_Recv for a message the last rank sends only after its own wait on
     * that allreduce returned. Legal MPI: the collective must complete
     * while rank 0 sits in the receive (it then runs in the background). */
    {
        int one = 1, tot = 0, token = 0;
        MPI_Request r;
        MPI_Iallreduce(&one, &tot, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r);
        if (n > 1 && rank == 0) {
            MPI_Recv(&token, 1, MPI_INT, n - 1, 91, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            CHECK(token == 42, "message sent after the peer's wait");
        }
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        CHECK(tot == n, "iallreduce completed while its starter was blocked elsewhere");
        if (n > 1 && rank == n - 1) {
            token = 42;
            MPI_Send(&token, 1, MPI_INT, 0, 91, MPI_COMM_WORLD);
        }
    }
    /* Two collectives in flight, waited for in opposite orders on even and
     * odd ranks; and one completed by MPI_Test alone. */
    {
        int a = rank, b = 1, sa = -1, sb = -1, flag = 0;
        MPI_Request ra, rb, rc;
        MPI_Iallreduce(&a, &sa, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &ra);
        MPI_Iallreduce(&b, &sb, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &rb);
        if (rank % 2) {
            MPI_Wait(&rb, MPI_STATUS_IGNORE);
            MPI_Wait(&ra, MPI_STATUS_IGNORE);
        } else {
            MPI_Wait(&ra, MPI_STATUS_IGNORE);
            MPI_Wait(&rb, MPI_STATUS_IGNORE);
        }
        CHECK(sa == n - 1 && sb == n, "two collectives waited for in different orders");
        MPI_Ibarrier(MPI_COMM_WORLD, &rc);
        double t0 = MPI_Wtime();
        while (!flag && MPI_Wtime() - t0 < 30) MPI_Test(&rc, &flag, MPI_STATUS_IGNORE);
        CHECK(flag, "ibarrier completed by MPI_Test alone");
    }
    PASS("nbc");
    MPI_Finalize();
    return 0;
}
