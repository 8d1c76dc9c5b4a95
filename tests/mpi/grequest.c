/* Generalized requests: the callbacks are called when and as often as the
 * standard says, with every wait and test function, from this thread and
 * from another one. */
#include "check.h"
#include <pthread.h>
#include <string.h>

typedef struct {
    int queried, freed, cancelled, cancel_complete_arg;
    int query_rc, free_rc;
    int bytes;
} state_t;

static int query_fn(void *extra, MPI_Status *st) {
    state_t *s = extra;
    s->queried++;
    MPI_Status_set_elements(st, MPI_BYTE, s->bytes);
    MPI_Status_set_cancelled(st, s->cancelled > 0);
    st->MPI_SOURCE = 7;
    st->MPI_TAG = 42;
    return s->query_rc;
}

static int free_fn(void *extra) {
    state_t *s = extra;
    s->freed++;
    return s->free_rc;
}

static int cancel_fn(void *extra, int complete) {
    state_t *s = extra;
    s->cancelled++;
    s->cancel_complete_arg = complete;
    return MPI_SUCCESS;
}

static void *completer(void *arg) {
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    MPI_Grequest_complete(*(MPI_Request *)arg);
    return NULL;
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Request r;
    MPI_Status st;
    int flag, count;

    /* Wait: query then free, once each; the status is query_fn's. */
    state_t a = {0};
    a.bytes = 12;
    MPI_Grequest_start(query_fn, free_fn, cancel_fn, &a, &r);
    CHECK(r != MPI_REQUEST_NULL, "a handle");
    MPI_Test(&r, &flag, &st);
    CHECK(!flag && a.queried == 0 && a.freed == 0, "not complete yet: flag %d queried %d", flag, a.queried);
    MPI_Request_get_status(r, &flag, &st);
    CHECK(!flag && a.queried == 0, "get_status before completion");
    CHECK(MPI_Grequest_complete(r) == MPI_SUCCESS, "complete");
    CHECK(MPI_Grequest_complete(r) == MPI_ERR_REQUEST, "a second complete is an error");
    MPI_Request_get_status(r, &flag, &st);
    CHECK(flag && a.queried == 1 && a.freed == 0, "get_status queries, does not free");
    CHECK(MPI_Wait(&r, &st) == MPI_SUCCESS, "wait");
    CHECK(r == MPI_REQUEST_NULL, "handle nulled");
    CHECK(a.queried == 2 && a.freed == 1, "queried %d freed %d", a.queried, a.freed);
    MPI_Get_count(&st, MPI_BYTE, &count);
    CHECK(count == 12 && st.MPI_SOURCE == 7 && st.MPI_TAG == 42, "status from query_fn: %d %d %d", count, st.MPI_SOURCE, st.MPI_TAG);

    /* Request_free before complete: free_fn runs at complete, not before. */
    state_t b = {0};
    MPI_Grequest_start(query_fn, free_fn, cancel_fn, &b, &r);
    MPI_Request keep = r;
    CHECK(MPI_Request_free(&r) == MPI_SUCCESS && r == MPI_REQUEST_NULL, "request_free");
    CHECK(b.freed == 0, "not freed before complete");
    CHECK(MPI_Grequest_complete(keep) == MPI_SUCCESS, "complete after free");
    CHECK(b.freed == 1 && b.queried == 0, "freed at complete, never queried");
    CHECK(MPI_Grequest_complete(keep) == MPI_ERR_REQUEST, "gone after both");

    /* Request_free after complete: free_fn runs in Request_free. */
    state_t b2 = {0};
    MPI_Grequest_start(query_fn, free_fn, cancel_fn, &b2, &r);
    MPI_Grequest_complete(r);
    CHECK(b2.freed == 0, "not freed at complete while the handle lives");
    MPI_Request_free(&r);
    CHECK(b2.freed == 1, "freed by request_free");

    /* Cancel: cancel_fn with complete = 0, then 1; the status says cancelled. */
    state_t c = {0};
    MPI_Grequest_start(query_fn, free_fn, cancel_fn, &c, &r);
    MPI_Cancel(&r);
    CHECK(c.cancelled == 1 && c.cancel_complete_arg == 0, "cancel before complete");
    MPI_Grequest_complete(r);
    MPI_Cancel(&r);
    CHECK(c.cancelled == 2 && c.cancel_complete_arg == 1, "cancel after complete");
    MPI_Wait(&r, &st);
    MPI_Test_cancelled(&st, &flag);
    CHECK(flag, "test_cancelled after cancel");

    /* Error of query_fn: returned by Wait, MPI_ERR_IN_STATUS from Waitall. */
    state_t e = {0};
    e.query_rc = MPI_ERR_OTHER;
    MPI_Grequest_start(query_fn, free_fn, cancel_fn, &e, &r);
    MPI_Grequest_complete(r);
    CHECK(MPI_Wait(&r, &st) == MPI_ERR_OTHER, "wait returns query_fn's error");
    CHECK(e.freed == 1, "freed even after an error");
    state_t e1 = {0}, e2 = {0};
    e2.query_rc = MPI_ERR_OTHER;
    MPI_Request two[2];
    MPI_Status sts[2];
    MPI_Grequest_start(query_fn, free_fn, cancel_fn, &e1, &two[0]);
    MPI_Grequest_start(query_fn, free_fn, cancel_fn, &e2, &two[1]);
    MPI_Grequest_complete(two[0]);
    MPI_Grequest_complete(two[1]);
    CHECK(MPI_Waitall(2, two, sts) == MPI_ERR_IN_STATUS, "waitall: in status");
    CHECK(sts[0].MPI_ERROR == MPI_SUCCESS && sts[1].MPI_ERROR == MPI_ERR_OTHER, "per-status errors");

    /* Mixed with point-to-point: Waitany, Testsome, Testall. */
    state_t m[3];
    memset(m, 0, sizeof m);
    MPI_Request rs[4];
    int x = 5, y = 0, idx, out, ind[4];
    for (int i = 0; i < 3; i++) MPI_Grequest_start(query_fn, free_fn, cancel_fn, &m[i], &rs[i]);
    MPI_Irecv(&y, 1, MPI_INT, 0, 3, MPI_COMM_SELF, &rs[3]);
    MPI_Grequest_complete(rs[1]);
    MPI_Waitany(4, rs, &idx, &st);
    CHECK(idx == 1 && m[1].freed == 1 && rs[1] == MPI_REQUEST_NULL, "waitany picks the completed one: %d", idx);
    MPI_Testall(4, rs, &flag, MPI_STATUSES_IGNORE);
    CHECK(!flag && m[0].queried == 0, "testall: not all complete");
    MPI_Send(&x, 1, MPI_INT, 0, 3, MPI_COMM_SELF);
    MPI_Grequest_complete(rs[2]);
    MPI_Testsome(4, rs, &out, ind, MPI_STATUSES_IGNORE);
    CHECK(out == 2 && m[2].freed == 1 && y == 5, "testsome: %d", out);
    MPI_Grequest_complete(rs[0]);
    MPI_Testall(4, rs, &flag, MPI_STATUSES_IGNORE);
    CHECK(flag && m[0].freed == 1, "testall at the end");

    /* Completed by another thread while this one waits. */
    if (provided == MPI_THREAD_MULTIPLE) {
        state_t t = {0};
        pthread_t th;
        MPI_Grequest_start(query_fn, free_fn, cancel_fn, &t, &r);
        MPI_Request copy = r;
        pthread_create(&th, NULL, completer, &copy);
        MPI_Wait(&r, &st);
        pthread_join(th, NULL);
        CHECK(t.queried == 1 && t.freed == 1, "completed by a thread");
    }

    /* Bad arguments: errors, not crashes. */
    CHECK(MPI_Grequest_start(query_fn, free_fn, cancel_fn, NULL, NULL) == MPI_ERR_ARG, "NULL request");
    CHECK(MPI_Grequest_complete(MPI_REQUEST_NULL) == MPI_ERR_REQUEST, "complete of NULL");
    CHECK(MPI_Grequest_complete((MPI_Request)0x12345) == MPI_ERR_REQUEST, "complete of garbage");

    MPI_Barrier(MPI_COMM_WORLD);
    PASS("grequest");
    MPI_Finalize();
    return 0;
}
