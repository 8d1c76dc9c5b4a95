/* Link hints per communicator (issue 13): MPI_Comm_dup_with_info with
 * gw_methods=udp gives one communicator its own link between two hosts
 * while a plain duplicate keeps the pair's default (tcp); messages on both
 * interleave, every one checksummed and numbered (each communicator's
 * order must hold: the runtime keeps one sequence across the pair's two
 * links). Also: MPI_Comm_get_info shows the keys in force, MPI_Comm_dup
 * inherits them, unknown keys are ignored, and bad values fail with
 * MPI_ERR_INFO_VALUE and leave the communicator as it was.
 *
 * Rank 0 prints `SENT udp_comm=<bytes> tcp_comm=<bytes>`: what it sent on
 * each communicator, which the test compares with gwrun --stats.
 * GW_TEST_NO_UDP=1: the job runs without udp, so gw_methods=udp must be
 * refused (MPI_ERR_INFO_VALUE) and nothing else is run. GW_TEST_FATAL=1:
 * errors are fatal (the job must end at the first bad value).
 * GW_TEST_PLAIN=1: the udp communicator also asks gw_encrypt=off. */
#include "check.h"
#include <stdint.h>
#include <string.h>

#define ROUNDS 300
#define SMALL_A 1500  /* eager on the udp communicator */
#define SMALL_B 5000  /* eager on the tcp communicator */
#define BIG_A (192 * 1024)  /* rendezvous (H_DATA pieces go on its link too) */
#define BIG_B (448 * 1024)
#define BIG_EVERY 60

static void fill(unsigned char *b, long n, int comm_id, int i) {
    uint32_t x = 2654435761u * (uint32_t)(i + 1) + 97u * (uint32_t)comm_id;
    memcpy(b, &i, sizeof i);
    for (long k = sizeof i; k < n; k++) {
        x = x * 1103515245u + 12345u;
        b[k] = (unsigned char)(x >> 16);
    }
}

static void verify(const unsigned char *b, long n, int comm_id, int i, const char *what) {
    int got;
    memcpy(&got, b, sizeof got);
    CHECK(got == i, "%s: message %d arrived where %d was next (order broken)", what, got, i);
    unsigned char *want = malloc(n);
    fill(want, n, comm_id, i);
    CHECK(memcmp(want, b, n) == 0, "%s: message %d corrupted", what, i);
    free(want);
}

static void expect_value(MPI_Comm c, const char *key, const char *want) {
    MPI_Info got;
    char v[256];
    int flag = 0;
    CHECK(MPI_Comm_get_info(c, &got) == MPI_SUCCESS, "get_info");
    MPI_Info_get(got, key, sizeof v - 1, v, &flag);
    if (want == NULL) {
        CHECK(!flag, "%s is set (%s) but should not be", key, v);
    } else {
        CHECK(flag, "%s not shown by MPI_Comm_get_info", key);
        CHECK(strcmp(v, want) == 0, "%s = %s, expected %s", key, v, want);
    }
    MPI_Info_free(&got);
}

/* Expects `rc` to be MPI_ERR_INFO_VALUE and prints its message. */
static void expect_info_value_error(int rc, const char *what) {
    const char *fatal = getenv("GW_TEST_FATAL");
    CHECK(!(fatal && fatal[0] == '1'), "%s returned (%d) under MPI_ERRORS_ARE_FATAL", what, rc);
    int cls = -1, len = 0;
    char msg[MPI_MAX_ERROR_STRING];
    CHECK(rc != MPI_SUCCESS, "%s was accepted", what);
    MPI_Error_class(rc, &cls);
    MPI_Error_string(rc, msg, &len);
    CHECK(cls == MPI_ERR_INFO_VALUE, "%s: class %d, expected MPI_ERR_INFO_VALUE (%s)", what, cls, msg);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) printf("REFUSED %s: MPI_ERR_INFO_VALUE: %s\n", what, msg);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size == 2, "needs 2 ranks, got %d", size);
    /* GW_TEST_FATAL=1: errors are fatal, so the first bad value ends the
     * job with the library's message (which names key, value and why);
     * otherwise they are returned and their class checked. */
    const char *fatal = getenv("GW_TEST_FATAL");
    int errors_fatal = fatal && fatal[0] == '1';
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, errors_fatal ? MPI_ERRORS_ARE_FATAL : MPI_ERRORS_RETURN);

    MPI_Info want_udp;
    MPI_Info_create(&want_udp);
    MPI_Info_set(want_udp, "gw_methods", "udp");
    MPI_Info_set(want_udp, "no_such_key_anywhere", "ignored");
    /* GW_TEST_PLAIN=1 (with GW_ENCRYPT=always): this communicator asks
     * for no encryption, the other keeps the policy's. */
    const char *plain_env = getenv("GW_TEST_PLAIN");
    int plain = plain_env && plain_env[0] == '1';
    if (plain) MPI_Info_set(want_udp, "gw_encrypt", "off");
    MPI_Comm udp_comm = MPI_COMM_NULL;
    int rc = MPI_Comm_dup_with_info(MPI_COMM_WORLD, want_udp, &udp_comm);
    const char *no_udp = getenv("GW_TEST_NO_UDP");
    if (no_udp && no_udp[0] == '1') {
        expect_info_value_error(rc, "gw_methods=udp without udp");
        MPI_Info_free(&want_udp);
        PASS("comm_links");
        MPI_Finalize();
        return 0;
    }
    CHECK(rc == MPI_SUCCESS, "dup_with_info(gw_methods=udp) failed (%d)", rc);

    /* Bad values: refused with MPI_ERR_INFO_VALUE, nothing created. */
    MPI_Info bad;
    MPI_Info_create(&bad);
    MPI_Info_set(bad, "gw_methods", "carrier-pigeon");
    MPI_Comm none = MPI_COMM_NULL;
    expect_info_value_error(MPI_Comm_dup_with_info(MPI_COMM_WORLD, bad, &none), "gw_methods=carrier-pigeon");
    MPI_Info_set(bad, "gw_methods", "udp");
    MPI_Info_set(bad, "gw_encrypt", "maybe");
    expect_info_value_error(MPI_Comm_set_info(udp_comm, bad), "gw_encrypt=maybe");
    MPI_Info_free(&bad);

    /* What is in force: the keys given (normalised), unknown ones kept as
     * given; the failed set changed nothing. */
    expect_value(udp_comm, "gw_methods", "udp");
    expect_value(udp_comm, "gw_encrypt", plain ? "no" : NULL);
    expect_value(udp_comm, "no_such_key_anywhere", "ignored");
    /* MPI_Comm_dup inherits the hints (and so the links). */
    MPI_Comm udp_dup;
    CHECK(MPI_Comm_dup(udp_comm, &udp_dup) == MPI_SUCCESS, "dup of the udp communicator");
    expect_value(udp_dup, "gw_methods", "udp");
    MPI_Comm_free(&udp_dup);
    /* MPI_Comm_idup_with_info applies the info's hints when it makes the
     * communicator (the parent's are not inherited). */
    MPI_Comm idup_udp, idup_plain;
    MPI_Request ir[2];
    MPI_Info empty;
    MPI_Info_create(&empty);
    CHECK(MPI_Comm_idup_with_info(MPI_COMM_WORLD, want_udp, &idup_udp, &ir[0]) == MPI_SUCCESS,
          "idup_with_info(gw_methods=udp)");
    CHECK(MPI_Comm_idup_with_info(udp_comm, empty, &idup_plain, &ir[1]) == MPI_SUCCESS,
          "idup_with_info(empty)");
    MPI_Waitall(2, ir, MPI_STATUSES_IGNORE);
    expect_value(idup_udp, "gw_methods", "udp");
    expect_value(idup_plain, "gw_methods", NULL);
    MPI_Comm_free(&idup_udp);
    MPI_Comm_free(&idup_plain);
    MPI_Info_free(&empty);

    MPI_Comm tcp_comm;
    CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &tcp_comm) == MPI_SUCCESS, "dup");
    expect_value(tcp_comm, "gw_methods", NULL);

    unsigned char *a = malloc(BIG_A), *b = malloc(BIG_B);
    long sent_a = 0, sent_b = 0;
    /* Interleaved: one message on each communicator per round, the two
     * communicators' messages in opposite order on the receiver, a large
     * one now and then (rendezvous). */
    for (int i = 0; i < ROUNDS; i++) {
        long na = (i % BIG_EVERY == BIG_EVERY - 1) ? BIG_A : SMALL_A;
        long nb = (i % BIG_EVERY == BIG_EVERY / 2) ? BIG_B : SMALL_B;
        if (rank == 0) {
            fill(a, na, 1, i);
            fill(b, nb, 2, i);
            /* Nonblocking: the receiver takes the tcp one first, and a
             * large message waits for its receive. */
            MPI_Request r[2];
            CHECK(MPI_Isend(a, (int)na, MPI_BYTE, 1, 7, udp_comm, &r[0]) == MPI_SUCCESS, "send udp %d", i);
            CHECK(MPI_Isend(b, (int)nb, MPI_BYTE, 1, 7, tcp_comm, &r[1]) == MPI_SUCCESS, "send tcp %d", i);
            CHECK(MPI_Waitall(2, r, MPI_STATUSES_IGNORE) == MPI_SUCCESS, "sends of round %d", i);
            sent_a += na;
            sent_b += nb;
        } else {
            MPI_Status st;
            int n;
            CHECK(MPI_Recv(b, (int)nb, MPI_BYTE, 0, 7, tcp_comm, &st) == MPI_SUCCESS, "recv tcp %d", i);
            MPI_Get_count(&st, MPI_BYTE, &n);
            CHECK(n == nb, "tcp message %d: %d bytes, expected %ld", i, n, nb);
            verify(b, nb, 2, i, "tcp communicator");
            CHECK(MPI_Recv(a, (int)na, MPI_BYTE, 0, 7, udp_comm, &st) == MPI_SUCCESS, "recv udp %d", i);
            MPI_Get_count(&st, MPI_BYTE, &n);
            CHECK(n == na, "udp message %d: %d bytes, expected %ld", i, n, na);
            verify(a, na, 1, i, "udp communicator");
        }
    }
    /* The way back, nonblocking and interleaved on both. */
    enum { BACK = 64 };
    static unsigned char back[2][BACK][700];
    MPI_Request reqs[2 * BACK];
    for (int i = 0; i < BACK; i++) {
        if (rank == 1) {
            fill(back[0][i], sizeof back[0][i], 3, i);
            fill(back[1][i], sizeof back[1][i], 4, i);
            MPI_Isend(back[0][i], sizeof back[0][i], MPI_BYTE, 0, 9, udp_comm, &reqs[2 * i]);
            MPI_Isend(back[1][i], sizeof back[1][i], MPI_BYTE, 0, 9, tcp_comm, &reqs[2 * i + 1]);
        } else {
            MPI_Irecv(back[0][i], sizeof back[0][i], MPI_BYTE, 1, 9, udp_comm, &reqs[2 * i]);
            MPI_Irecv(back[1][i], sizeof back[1][i], MPI_BYTE, 1, 9, tcp_comm, &reqs[2 * i + 1]);
        }
    }
    CHECK(MPI_Waitall(2 * BACK, reqs, MPI_STATUSES_IGNORE) == MPI_SUCCESS, "waitall back");
    if (rank == 0) {
        for (int i = 0; i < BACK; i++) {
            verify(back[0][i], sizeof back[0][i], 3, i, "udp communicator, back");
            verify(back[1][i], sizeof back[1][i], 4, i, "tcp communicator, back");
        }
    }
    /* A collective on the udp communicator checks out too. */
    long sum = rank + 1, total = 0;
    CHECK(MPI_Allreduce(&sum, &total, 1, MPI_LONG, MPI_SUM, udp_comm) == MPI_SUCCESS, "allreduce");
    CHECK(total == 3, "allreduce gave %ld", total);
    if (rank == 0) {
        printf("SENT udp_comm=%ld tcp_comm=%ld\n", sent_a, sent_b);
        fflush(stdout);
    }
    free(a);
    free(b);
    MPI_Info_free(&want_udp);
    MPI_Comm_free(&udp_comm);
    MPI_Comm_free(&tcp_comm);
    PASS("comm_links");
    MPI_Finalize();
    return 0;
}
