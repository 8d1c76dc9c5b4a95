/* MPI_Comm_join between two separately started gwrun jobs of 2 ranks:
 * rank 1 of each joins (rank 0 only waits). `listen FILE`: listens on a
 * TCP socket of 127.0.0.1 and writes its port to FILE; `connect FILE`:
 * reads the port and connects. Both call MPI_Comm_join, send each other
 * a short and a 1 MiB message whose checksum the receiver checks, merge
 * the intercommunicator and allreduce over it, disconnect, and then use
 * their socket again (join leaves it to the program). Prints
 * "PASS join-jobs-listen" / "PASS join-jobs-connect" at rank 1. */
#include "check.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define BIG (1 << 20)

static uint64_t checksum(const unsigned char *b, int n) {
    uint64_t sum = 1469598103934665603ull;
    for (int i = 0; i < n; i++) sum = (sum ^ b[i]) * 1099511628211ull;
    return sum;
}

static int open_socket(int listening, const char *file) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(s >= 0, "socket");
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (listening) {
        socklen_t len = sizeof a;
        CHECK(bind(s, (struct sockaddr *)&a, sizeof a) == 0, "bind");
        CHECK(listen(s, 1) == 0, "listen");
        CHECK(getsockname(s, (struct sockaddr *)&a, &len) == 0, "getsockname");
        char tmp[4096];
        snprintf(tmp, sizeof tmp, "%s.tmp", file);
        FILE *f = fopen(tmp, "w");
        CHECK(f, "cannot write %s", tmp);
        fprintf(f, "%d\n", ntohs(a.sin_port));
        fclose(f);
        CHECK(rename(tmp, file) == 0, "rename");
        int c = accept(s, NULL, NULL);
        CHECK(c >= 0, "accept");
        close(s);
        return c;
    }
    int port = -1;
    for (int tries = 0; tries < 6000 && port < 0; tries++) {
        FILE *f = fopen(file, "r");
        if (f) {
            if (fscanf(f, "%d", &port) != 1) port = -1;
            fclose(f);
        }
        if (port < 0) usleep(10000);
    }
    CHECK(port > 0, "no port in %s", file);
    a.sin_port = htons((uint16_t)port);
    CHECK(connect(s, (struct sockaddr *)&a, sizeof a) == 0, "connect");
    return s;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    CHECK(argc == 3, "usage: join_jobs listen|connect FILE");
    int listening = strcmp(argv[1], "listen") == 0;
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 1) {
        int fd = open_socket(listening, argv[2]);
        MPI_Comm ic;
        MPI_Comm_join(fd, &ic);
        CHECK(ic != MPI_COMM_NULL, "join gave MPI_COMM_NULL");
        int inter, rs;
        MPI_Comm_test_inter(ic, &inter);
        MPI_Comm_remote_size(ic, &rs);
        CHECK(inter && rs == 1, "an intercommunicator of 1 + 1, remote size %d", rs);
        unsigned char *out = malloc(BIG), *in = malloc(BIG);
        CHECK(out && in, "malloc");
        unsigned seed = listening ? 11u : 23u;
        for (int i = 0; i < BIG; i++) out[i] = (unsigned char)((i * 131u + seed * 7919u) >> 3);
        uint64_t sent[2] = {checksum(out, BIG), seed}, got[2];
        MPI_Request rq[4];
        MPI_Irecv(got, 2, MPI_UINT64_T, 0, 1, ic, &rq[0]);
        MPI_Irecv(in, BIG, MPI_BYTE, 0, 2, ic, &rq[1]);
        MPI_Isend(sent, 2, MPI_UINT64_T, 0, 1, ic, &rq[2]);
        MPI_Isend(out, BIG, MPI_BYTE, 0, 2, ic, &rq[3]);
        MPI_Waitall(4, rq, MPI_STATUSES_IGNORE);
        CHECK(got[1] == (listening ? 23u : 11u), "seed %llu", (unsigned long long)got[1]);
        CHECK(checksum(in, BIG) == got[0], "checksum of the 1 MiB message");
        MPI_Comm merged;
        MPI_Intercomm_merge(ic, !listening, &merged);
        int size, mrank, v, sum = 0;
        MPI_Comm_size(merged, &size);
        MPI_Comm_rank(merged, &mrank);
        CHECK(size == 2 && mrank == (listening ? 0 : 1), "merged %d/%d", mrank, size);
        v = listening ? 5 : 7;
        MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, merged);
        CHECK(sum == 12, "allreduce over both jobs: %d", sum);
        MPI_Comm_free(&merged);
        MPI_Comm_disconnect(&ic);
        CHECK(ic == MPI_COMM_NULL, "disconnect sets MPI_COMM_NULL");
        /* The socket is the program's again. */
        char b = listening ? 'L' : 'C', r = 0;
        CHECK(write(fd, &b, 1) == 1, "write on the joined socket");
        CHECK(read(fd, &r, 1) == 1 && r == (listening ? 'C' : 'L'), "read on the joined socket: %c", r);
        close(fd);
        free(out);
        free(in);
        printf("PASS join-jobs-%s\n", argv[1]);
        fflush(stdout);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
