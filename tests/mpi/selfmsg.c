/* Messages a rank sends to itself on duplicates of MPI_COMM_SELF, as mpi4py's
 * test_util_pkl5 does: Issend to self, Mprobe/Improbe, Mrecv/Imrecv, repeated
 * on fresh duplicates, while the ranks also talk to each other on a duplicate
 * of MPI_COMM_WORLD with the same tag.
 *
 * Regression (mpi4py test_util_pkl5 hung with 2 ranks): a synchronous send to
 * self went through the rendezvous of the `self` method (RTS, then CTS and
 * DATA, each delivered at a later round of progress), so an Imrecv of it was
 * still pending after MPI_Test; mpi4py's test then dropped the request and
 * its buffer, and the data arrived later into freed memory (heap corruption,
 * then a hang in the next test's MPI_Mprobe). gridwire now copies a message
 * from the same process as soon as the receive matches, as other MPIs do:
 * the receive is complete when Imrecv/Irecv returns; this test asserts that
 * and that nothing writes into a receive buffer after its request completed. */
#include "check.h"
#include <string.h>

enum { TAG = 123, ROUNDS = 3 };
/* Eager and rendezvous sizes of every method (the self method's eager limit is 1 MiB). */
static const int sizes[] = {1, 100, 20000, 300000};
#define NSIZES ((int)(sizeof sizes / sizeof sizes[0]))

static void fill(int *b, int n, int seed) { for (int i = 0; i < n; i++) b[i] = seed * 7919 + i; }
static int check(const int *b, int n, int seed) {
    for (int i = 0; i < n; i++) if (b[i] != seed * 7919 + i) return i;
    return -1;
}

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    MPI_Comm world;
    MPI_Comm_dup(MPI_COMM_WORLD, &world);
    int maxn = sizes[NSIZES - 1];
    int *out = malloc(maxn * sizeof(int)), *in = malloc(maxn * sizeof(int));
    int *wout = malloc(maxn * sizeof(int)), *win = malloc(maxn * sizeof(int));
    MPI_Status st;
    int seed = 0;

    for (int round = 0; round < ROUNDS; round++) {
        /* Rank-to-rank traffic with the same tag, received only at the end of the round. */
        MPI_Request wreq;
        fill(wout, maxn, 1000 + rank);
        MPI_Issend(wout, maxn, MPI_INT, next, TAG, world, &wreq);

        MPI_Comm self;
        MPI_Comm_dup(MPI_COMM_SELF, &self);
        int r, s;
        MPI_Comm_rank(self, &r);
        MPI_Comm_size(self, &s);
        CHECK(r == 0 && s == 1, "dup of COMM_SELF: rank %d size %d", r, s);

        /* Mprobe + Imrecv: complete after one MPI_Test; Request_free on the send (as pkl5 does). */
        for (int k = 0; k < NSIZES; k++) {
            int n = sizes[k], flag = 0, cnt = -1;
            fill(out, n, ++seed);
            memset(in, 0xff, n * sizeof(int));
            MPI_Request sreq, rreq;
            MPI_Issend(out, n, MPI_INT, 0, TAG, self, &sreq);
            MPI_Message msg;
            MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, self, &msg, &st);
            MPI_Get_count(&st, MPI_INT, &cnt);
            CHECK(st.MPI_SOURCE == 0 && st.MPI_TAG == TAG && cnt == n,
                  "round %d mprobe: source %d tag %d count %d (want %d)", round, st.MPI_SOURCE, st.MPI_TAG, cnt, n);
            MPI_Imrecv(in, n, MPI_INT, &msg, &rreq);
            CHECK(msg == MPI_MESSAGE_NULL, "imrecv leaves MPI_MESSAGE_NULL");
            MPI_Test(&rreq, &flag, &st);
            CHECK(flag, "round %d size %d: receive of a message from itself not complete after Imrecv+Test", round, n);
            CHECK(check(in, n, seed) < 0, "round %d size %d: wrong data at %d", round, n, check(in, n, seed));
            MPI_Request_free(&sreq);
            /* Nothing may write into the buffer any more. */
            memset(in, 0xab, n * sizeof(int));
        }
        /* Drive progress (the sends' completions go through), then look at the buffer. */
        for (int i = 0; i < 100; i++) {
            int flag;
            MPI_Iprobe(0, TAG + 1, self, &flag, MPI_STATUS_IGNORE);
            CHECK(!flag, "no message with tag %d", TAG + 1);
        }
        for (int i = 0; i < sizes[NSIZES - 1]; i++)
            CHECK(in[i] == (int)0xabababab, "round %d: receive buffer written after completion at %d", round, i);

        /* Mprobe + Mrecv, and Improbe (nothing, then the message) + Mrecv; wait on the sends. */
        for (int k = 0; k < NSIZES; k++) {
            int n = sizes[k], flag = 1;
            MPI_Message msg;
            MPI_Request sreq;
            MPI_Improbe(0, TAG, self, &flag, &msg, &st);
            CHECK(!flag, "round %d: improbe found a message before any was sent", round);
            fill(out, n, ++seed);
            MPI_Issend(out, n, MPI_INT, 0, TAG, self, &sreq);
            while (!flag) MPI_Iprobe(0, TAG, self, &flag, &st);
            MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, self, &flag, &msg, &st);
            CHECK(flag && st.MPI_SOURCE == 0 && st.MPI_TAG == TAG, "round %d: improbe after iprobe", round);
            MPI_Mrecv(in, n, MPI_INT, &msg, &st);
            CHECK(check(in, n, seed) < 0, "round %d size %d: improbe/mrecv data", round, n);
            MPI_Wait(&sreq, MPI_STATUS_IGNORE);

            fill(out, n, ++seed);
            MPI_Issend(out, n, MPI_INT, 0, TAG, self, &sreq);
            MPI_Mprobe(0, TAG, self, &msg, &st);
            MPI_Mrecv(in, n, MPI_INT, &msg, &st);
            CHECK(check(in, n, seed) < 0, "round %d size %d: mprobe/mrecv data", round, n);
            MPI_Wait(&sreq, MPI_STATUS_IGNORE);

            /* Receive posted first, then the synchronous send to self. */
            MPI_Request rreq;
            fill(out, n, ++seed);
            MPI_Irecv(in, n, MPI_INT, 0, TAG, self, &rreq);
            MPI_Issend(out, n, MPI_INT, 0, TAG, self, &sreq);
            MPI_Wait(&sreq, MPI_STATUS_IGNORE);
            MPI_Wait(&rreq, &st);
            CHECK(check(in, n, seed) < 0, "round %d size %d: irecv then issend data", round, n);
        }
        MPI_Comm_free(&self);

        /* The rank-to-rank message was not taken by any self-communicator probe. */
        MPI_Recv(win, maxn, MPI_INT, prev, TAG, world, &st);
        CHECK(check(win, maxn, 1000 + prev) < 0, "round %d: world message", round);
        MPI_Wait(&wreq, MPI_STATUS_IGNORE);
    }
    MPI_Comm_free(&world);
    free(out); free(in); free(wout); free(win);
    PASS("selfmsg");
    MPI_Finalize();
    return 0;
}
