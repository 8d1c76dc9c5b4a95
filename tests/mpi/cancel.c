/* MPI_Cancel of sends and receives: an unmatched send (eager, rendezvous or
 * synchronous) is withdrawn at the receiver (it never sees it), a matched
 * one completes normally, and messages after a cancel still arrive in
 * order. */
#include "check.h"
#include <string.h>

#define BIG (1 << 20)

static void expect_cancelled(MPI_Request *r, int want, const char *what) {
    MPI_Status st;
    int flag = -1;
    MPI_Wait(r, &st);
    MPI_Test_cancelled(&st, &flag);
    CHECK(flag == want, "%s: cancelled %d, want %d", what, flag, want);
}

int main(int argc, char **argv) {
    int rank, size, flag;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char *big = malloc(BIG), *in = malloc(BIG);
    memset(big, 7, BIG);
    MPI_Request r;
    /* Sender and receiver: 0 -> 1, or 0 -> 0 alone. */
    int peer = size > 1 ? 1 : 0;

    /* Cancel of a receive nobody sends to. */
    int x = 0;
    MPI_Irecv(&x, 1, MPI_INT, MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, &r);
    MPI_Cancel(&r);
    expect_cancelled(&r, 1, "unmatched receive");

    /* An unmatched rendezvous send (to itself a process sends every size
     * eagerly): withdrawn. */
    if (rank == 0) {
        MPI_Isend(big, BIG, MPI_CHAR, peer, 7, MPI_COMM_WORLD, &r);
        MPI_Cancel(&r);
        expect_cancelled(&r, 1, "unmatched large send");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == peer) {
        MPI_Iprobe(0, 7, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        CHECK(!flag, "the withdrawn message is not there");
    }

    /* An unmatched synchronous send, small: withdrawn too. */
    int small = 42;
    if (rank == 0) {
        MPI_Issend(&small, 1, MPI_INT, peer, 8, MPI_COMM_WORLD, &r);
        MPI_Cancel(&r);
        expect_cancelled(&r, 1, "unmatched synchronous send");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == peer) {
        MPI_Iprobe(0, 8, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        CHECK(!flag, "the withdrawn synchronous message is not there");
    }

    /* A matched send: not cancelled, the data arrives. */
    MPI_Request rr = MPI_REQUEST_NULL;
    if (rank == peer) {
        memset(in, 0, BIG);
        MPI_Irecv(in, BIG, MPI_CHAR, 0, 9, MPI_COMM_WORLD, &rr);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        MPI_Isend(big, BIG, MPI_CHAR, peer, 9, MPI_COMM_WORLD, &r);
        if (peer != 0) {
            MPI_Recv(&x, 1, MPI_INT, peer, 10, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Request_get_status(rr, &flag, MPI_STATUS_IGNORE);
        }
        MPI_Cancel(&r);
        expect_cancelled(&r, 0, "matched send");
    }
    if (rank == peer) {
        /* The receive was posted before the barrier: rank 0's envelope
         * matches it on arrival, before the cancel that follows it on the
         * same link. The message only orders the cancel after the send. */
        if (peer != 0) MPI_Send(&x, 1, MPI_INT, 0, 10, MPI_COMM_WORLD);
        MPI_Status st;
        MPI_Wait(&rr, &st);
        int n;
        MPI_Get_count(&st, MPI_CHAR, &n);
        CHECK(n == BIG && in[0] == 7 && in[BIG - 1] == 7, "matched data arrived");
        MPI_Test_cancelled(&st, &flag);
        CHECK(!flag, "the receive was not cancelled");
    }

    /* An unmatched eager send: withdrawn (its handle names the message). */
    if (rank == 0) {
        MPI_Isend(&small, 1, MPI_INT, peer, 11, MPI_COMM_WORLD, &r);
        MPI_Cancel(&r);
        CHECK(r != MPI_REQUEST_NULL, "the request stays until waited for");
        expect_cancelled(&r, 1, "unmatched eager send");
        CHECK(r == MPI_REQUEST_NULL, "freed by the wait");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == peer) {
        MPI_Iprobe(0, 11, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        CHECK(!flag, "the withdrawn eager message is not there");
    }

    /* A matched eager send: not cancelled, the data arrives; Testall sees it complete. */
    rr = MPI_REQUEST_NULL;
    if (rank == peer) {
        x = 0;
        MPI_Irecv(&x, 1, MPI_INT, 0, 13, MPI_COMM_WORLD, &rr);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        MPI_Isend(&small, 1, MPI_INT, peer, 13, MPI_COMM_WORLD, &r);
        if (peer == 0) MPI_Request_get_status(rr, &flag, MPI_STATUS_IGNORE);
        MPI_Cancel(&r);
        MPI_Status st;
        MPI_Testall(1, &r, &flag, &st);
        CHECK(flag, "testall on a completed eager send");
        MPI_Test_cancelled(&st, &flag);
        CHECK(!flag, "a matched eager send is not cancelled");
    }
    if (rank == peer) {
        MPI_Wait(&rr, MPI_STATUS_IGNORE);
        CHECK(x == 42, "matched eager message arrived: %d", x);
    }
    /* A completed eager send freed without a wait. */
    if (rank == 0) {
        MPI_Isend(&small, 1, MPI_INT, peer, 14, MPI_COMM_WORLD, &r);
        CHECK(MPI_Request_free(&r) == MPI_SUCCESS && r == MPI_REQUEST_NULL, "request_free");
    }
    if (rank == peer) MPI_Recv(&x, 1, MPI_INT, 0, 14, MPI_COMM_WORLD, MPI_STATUS_IGNORE);

    /* Order is intact after the withdrawn messages. */
    if (rank == 0) {
        for (int i = 0; i < 3; i++) MPI_Send(&i, 1, MPI_INT, peer, 12, MPI_COMM_WORLD);
    }
    if (rank == peer) {
        for (int i = 0; i < 3; i++) {
            MPI_Recv(&x, 1, MPI_INT, 0, 12, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            CHECK(x == i, "in order: %d, want %d", x, i);
        }
    }

    /* Cancelling MPI_REQUEST_NULL is an error, not a crash. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    r = MPI_REQUEST_NULL;
    CHECK(MPI_Cancel(NULL) == MPI_ERR_REQUEST, "NULL pointer");

    free(big);
    free(in);
    MPI_Barrier(MPI_COMM_WORLD);
    PASS("cancel");
    MPI_Finalize();
    return 0;
}
