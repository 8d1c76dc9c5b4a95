/* An error found when a request completes is raised on the request's
 * communicator, as the standard says, not on MPI_COMM_WORLD: MPI_Wait,
 * MPI_Test, MPI_Waitall (also through its all-plain fast path),
 * MPI_Waitany, MPI_Waitsome and MPI_Testall on a receive truncated on a
 * duplicate of the world that has its own handler, while the world keeps
 * MPI_ERRORS_ARE_FATAL (so a wrong choice aborts the job).
 * Rank 0 receives 4 ints where rank 1 sends 16 (or 20000: rendezvous). */
#include "check.h"
#include <string.h>

static MPI_Comm called_on = MPI_COMM_NULL;
static int called_code = MPI_SUCCESS, calls = 0;

static void record(MPI_Comm *c, int *code, ...) {
    called_on = *c;
    called_code = *code;
    calls++;
}

static int class_of(int rc) {
    int c;
    MPI_Error_class(rc, &c);
    return c;
}

/* Sends the messages rank 0's next step truncates: `n` of them, each of `len` ints. */
static void send_round(MPI_Comm comm, int n, int len) {
    int *b = malloc(sizeof(int) * (size_t)len);
    for (int i = 0; i < len; i++) b[i] = i;
    for (int k = 0; k < n; k++) MPI_Send(b, len, MPI_INT, 0, k, comm);
    free(b);
}

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size >= 2, "needs 2 ranks, has %d", size);
    MPI_Comm ret, user;
    MPI_Comm_dup(MPI_COMM_WORLD, &ret);
    MPI_Comm_set_errhandler(ret, MPI_ERRORS_RETURN);
    MPI_Comm_dup(MPI_COMM_WORLD, &user);
    MPI_Errhandler eh;
    MPI_Comm_create_errhandler(record, &eh);
    MPI_Comm_set_errhandler(user, eh);
    const int lens[] = {16, 20000};
    for (int li = 0; li < 2; li++) {
        int len = lens[li];
        if (rank == 1) {
            send_round(ret, 1, len);  /* Wait */
            send_round(ret, 1, len);  /* Test */
            send_round(ret, 3, len);  /* Waitall */
            send_round(ret, 1, len);  /* Waitany */
            send_round(ret, 2, len);  /* Waitsome */
            send_round(ret, 2, len);  /* Testall */
            send_round(user, 1, len); /* Wait, user handler */
            send_round(user, 2, len); /* Waitall, user handler */
        } else if (rank == 0) {
            int b[8][4];
            MPI_Request r[8];
            MPI_Status st[8];
            int rc, flag, idx, outc, ids[8];

            MPI_Irecv(b[0], 4, MPI_INT, 1, 0, ret, &r[0]);
            rc = MPI_Wait(&r[0], &st[0]);
            CHECK(class_of(rc) == MPI_ERR_TRUNCATE, "len %d: MPI_Wait gave class %d", len, class_of(rc));
            CHECK(b[0][3] == 3, "MPI_Wait: the first 4 ints not delivered (%d)", b[0][3]);

            MPI_Irecv(b[0], 4, MPI_INT, 1, 0, ret, &r[0]);
            flag = 0;
            rc = MPI_SUCCESS;
            while (!flag && rc == MPI_SUCCESS) rc = MPI_Test(&r[0], &flag, &st[0]);
            CHECK(class_of(rc) == MPI_ERR_TRUNCATE, "len %d: MPI_Test gave class %d", len, class_of(rc));

            for (int k = 0; k < 3; k++) MPI_Irecv(b[k], 4, MPI_INT, 1, k, ret, &r[k]);
            rc = MPI_Waitall(3, r, st);
            CHECK(rc == MPI_ERR_IN_STATUS, "len %d: MPI_Waitall gave %d", len, rc);
            for (int k = 0; k < 3; k++) {
                CHECK(st[k].MPI_ERROR == MPI_ERR_TRUNCATE, "Waitall status %d: error %d", k, st[k].MPI_ERROR);
                CHECK(r[k] == MPI_REQUEST_NULL, "Waitall request %d not freed", k);
            }

            MPI_Irecv(b[0], 4, MPI_INT, 1, 0, ret, &r[0]);
            rc = MPI_Waitany(1, r, &idx, &st[0]);
            CHECK(class_of(rc) == MPI_ERR_TRUNCATE, "len %d: MPI_Waitany gave class %d", len, class_of(rc));
            CHECK(idx == 0, "MPI_Waitany index %d", idx);

            for (int k = 0; k < 2; k++) MPI_Irecv(b[k], 4, MPI_INT, 1, k, ret, &r[k]);
            int got = 0;
            while (got < 2) {
                rc = MPI_Waitsome(2, r, &outc, ids, st);
                CHECK(rc == MPI_ERR_IN_STATUS, "len %d: MPI_Waitsome gave %d", len, rc);
                for (int k = 0; k < outc; k++)
                    CHECK(st[k].MPI_ERROR == MPI_ERR_TRUNCATE, "Waitsome status %d: %d", k, st[k].MPI_ERROR);
                got += outc;
            }

            for (int k = 0; k < 2; k++) MPI_Irecv(b[k], 4, MPI_INT, 1, k, ret, &r[k]);
            flag = 0;
            while (!flag) {
                rc = MPI_Testall(2, r, &flag, st);
                CHECK(rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS, "MPI_Testall gave %d", rc);
            }
            CHECK(rc == MPI_ERR_IN_STATUS, "len %d: MPI_Testall gave %d", len, rc);

            calls = 0;
            called_on = MPI_COMM_NULL;
            MPI_Irecv(b[0], 4, MPI_INT, 1, 0, user, &r[0]);
            rc = MPI_Wait(&r[0], &st[0]);
            CHECK(calls == 1, "the user handler ran %d times for MPI_Wait", calls);
            CHECK(called_on == user, "the user handler got another communicator");
            CHECK(class_of(called_code) == MPI_ERR_TRUNCATE, "the handler got class %d", class_of(called_code));
            CHECK(class_of(rc) == MPI_ERR_TRUNCATE, "MPI_Wait under a user handler gave class %d", class_of(rc));

            calls = 0;
            for (int k = 0; k < 2; k++) MPI_Irecv(b[k], 4, MPI_INT, 1, k, user, &r[k]);
            rc = MPI_Waitall(2, r, st);
            CHECK(calls == 1 && called_on == user, "Waitall: handler calls %d", calls);
            CHECK(called_code == MPI_ERR_IN_STATUS, "Waitall: the handler got %d", called_code);
            CHECK(rc == MPI_ERR_IN_STATUS, "Waitall under a user handler gave %d", rc);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    MPI_Errhandler_free(&eh);
    MPI_Comm_free(&user);
    MPI_Comm_free(&ret);
    PASS("request_errors");
    MPI_Finalize();
    return 0;
}
