/* MPI_Comm_accept/connect between two separately started gwrun jobs.
 *   dynproc_jobs server SERVICE   opens a port, publishes it as SERVICE
 *                                 (gw-nameserver) and accepts once;
 *   dynproc_jobs client SERVICE   looks SERVICE up, first connects with a
 *                                 wrong token (MPI_ERR_PORT within seconds,
 *                                 the server goes on accepting), then with
 *                                 the right one.
 * Over the intercommunicator every process of each job sends every
 * process of the other a short and a long (rendezvous) message whose
 * checksums the receiver checks; then Intercomm_merge, an allreduce and a
 * bcast over the merged communicator, and disconnect. */
#include "check.h"
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SHORT_N 100
#define LONG_N (256 * 1024)

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static unsigned value(int job, int from, int to, int k) {
    return (unsigned)(job * 1000003 + from * 7919 + to * 104729) ^ (unsigned)k * 2654435761u;
}

static void traffic(MPI_Comm ic, int job) {
    int me, rsize;
    MPI_Comm_rank(ic, &me);
    MPI_Comm_remote_size(ic, &rsize);
    unsigned *out = malloc(sizeof(unsigned) * LONG_N);
    unsigned *in = malloc(sizeof(unsigned) * LONG_N);
    for (int r = 0; r < rsize; r++) {
        for (int len = SHORT_N; len <= LONG_N; len = (len == SHORT_N ? LONG_N : LONG_N + 1)) {
            for (int k = 0; k < len; k++) out[k] = value(job, me, r, k);
            MPI_Request rq;
            MPI_Isend(out, len, MPI_UNSIGNED, r, len, ic, &rq);
            MPI_Status st;
            MPI_Recv(in, len, MPI_UNSIGNED, r, len, ic, &st);
            MPI_Wait(&rq, MPI_STATUS_IGNORE);
            unsigned long sum = 0, want = 0;
            for (int k = 0; k < len; k++) {
                sum += in[k] * (unsigned long)(k + 1);
                want += value(1 - job, r, me, k) * (unsigned long)(k + 1);
            }
            CHECK(sum == want && st.MPI_SOURCE == r, "checksum of %d values from remote %d", len, r);
        }
    }
    free(out);
    free(in);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    CHECK(argc == 3, "usage: dynproc_jobs server|client SERVICE");
    int rank, size, cls, rc;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    int server = strcmp(argv[1], "server") == 0;
    const char *svc = argv[2];
    char port[MPI_MAX_PORT_NAME] = "";
    MPI_Comm ic = MPI_COMM_NULL;
    if (server) {
        if (rank == 0) {
            MPI_Open_port(MPI_INFO_NULL, port);
            CHECK(MPI_Publish_name(svc, MPI_INFO_NULL, port) == MPI_SUCCESS, "publish");
        }
        rc = MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &ic);
        CHECK(rc == MPI_SUCCESS && ic != MPI_COMM_NULL, "accept: %d", rc);
    } else {
        if (rank == 0) {
            double t0 = now();
            while (MPI_Lookup_name(svc, MPI_INFO_NULL, port) != MPI_SUCCESS) {
                CHECK(now() - t0 < 30, "%s was not published within 30 s", svc);
                usleep(20000);
            }
            /* The same port with one digit of the token changed. */
            char bad[MPI_MAX_PORT_NAME];
            strcpy(bad, port);
            char *tok = bad;
            for (int i = 0; i < 4; i++) tok = strchr(tok, ':') + 1;
            tok[0] = tok[0] == '0' ? '1' : '0';
            double t1 = now();
            rc = MPI_Comm_connect(bad, MPI_INFO_NULL, 0, MPI_COMM_SELF, &ic);
            MPI_Error_class(rc, &cls);
            CHECK(cls == MPI_ERR_PORT && ic == MPI_COMM_NULL, "a wrong token: class %d", cls);
            CHECK(now() - t1 < 10, "the refusal took %.1f s", now() - t1);
            printf("wrong token refused in %.3f s\n", now() - t1);
        }
        double t2 = now();
        rc = MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &ic);
        CHECK(rc == MPI_SUCCESS && ic != MPI_COMM_NULL, "connect: %d", rc);
        if (rank == 0) printf("connected in %.3f s\n", now() - t2);
    }
    int inter, lsize, rsize;
    MPI_Comm_test_inter(ic, &inter);
    MPI_Comm_size(ic, &lsize);
    MPI_Comm_remote_size(ic, &rsize);
    CHECK(inter && lsize == size, "intercommunicator: inter %d size %d", inter, lsize);
    traffic(ic, server);

    MPI_Comm merged;
    CHECK(MPI_Intercomm_merge(ic, !server, &merged) == MPI_SUCCESS, "merge");
    int mrank, msize;
    MPI_Comm_rank(merged, &mrank);
    MPI_Comm_size(merged, &msize);
    CHECK(msize == size + rsize, "merged size %d", msize);
    CHECK(server ? mrank == rank : mrank == rsize + rank, "merged rank %d", mrank);
    int sum = 0, from_client = 0;
    MPI_Allreduce(&mrank, &sum, 1, MPI_INT, MPI_SUM, merged);
    CHECK(sum == msize * (msize - 1) / 2, "allreduce over both jobs: %d", sum);
    if (mrank == msize - 1) from_client = 4242 + msize;
    MPI_Bcast(&from_client, 1, MPI_INT, msize - 1, merged);
    CHECK(from_client == 4242 + msize, "bcast from the client job: %d", from_client);
    MPI_Comm_free(&merged);

    CHECK(MPI_Comm_disconnect(&ic) == MPI_SUCCESS && ic == MPI_COMM_NULL, "disconnect");
    if (server && rank == 0) {
        MPI_Unpublish_name(svc, MPI_INFO_NULL, port);
        CHECK(MPI_Close_port(port) == MPI_SUCCESS, "close port");
    }
    PASS(server ? "dynproc-jobs-server" : "dynproc-jobs-client");
    MPI_Finalize();
    return 0;
}
