/* Ports, names and MPI_Comm_join within one job: the two halves of
 * MPI_COMM_WORLD find each other by a published name and connect through a
 * port (a wrong token is refused with MPI_ERR_PORT, the accept goes on);
 * two ranks join over a TCP socket. With an argument it is one side of the
 * two-job test: "publish SERVICE" publishes a port and exits, "lookup
 * SERVICE" finds it (the name server outlived the first job) and checks
 * that connecting to the port of that job, which has ended, fails with
 * MPI_ERR_PORT (its socket is gone). */
#include "check.h"
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/socket.h>

static void two_jobs(const char *mode, const char *service) {
    int rank, cls, rc;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    char port[MPI_MAX_PORT_NAME];
    if (strcmp(mode, "publish") == 0) {
        if (rank == 0) {
            MPI_Open_port(MPI_INFO_NULL, port);
            CHECK(MPI_Publish_name(service, MPI_INFO_NULL, port) == MPI_SUCCESS, "publish");
            rc = MPI_Publish_name(service, MPI_INFO_NULL, port);
            MPI_Error_class(rc, &cls);
            CHECK(cls == MPI_ERR_SERVICE, "a second publish: class %d", cls);
        }
        PASS("dynproc-publish");
    } else {
        if (rank == 0) {
            CHECK(MPI_Lookup_name(service, MPI_INFO_NULL, port) == MPI_SUCCESS, "lookup in the second job");
            CHECK(strncmp(port, "gwport:", 7) == 0, "port %s", port);
            CHECK(MPI_Unpublish_name(service, MPI_INFO_NULL, port) == MPI_SUCCESS, "unpublish");
        }
        MPI_Comm ic;
        rc = MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &ic);
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_PORT && ic == MPI_COMM_NULL, "the port of an ended job: class %d", cls);
        PASS("dynproc-lookup");
    }
    MPI_Finalize();
}

static void ports(int rank, int size) {
    int low = rank < size / 2;
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, low, rank, &half);
    int hrank, hsize;
    MPI_Comm_rank(half, &hrank);
    MPI_Comm_size(half, &hsize);
    char port[MPI_MAX_PORT_NAME] = "";
    const char *svc = "gridwire test service";
    MPI_Comm ic;
    int cls, rc;
    if (low) {
        if (hrank == 0) {
            MPI_Open_port(MPI_INFO_NULL, port);
            CHECK(MPI_Publish_name(svc, MPI_INFO_NULL, port) == MPI_SUCCESS, "publish");
        }
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Comm_accept(port, MPI_INFO_NULL, 0, half, &ic);
    } else {
        MPI_Barrier(MPI_COMM_WORLD);
        if (hrank == 0) {
            CHECK(MPI_Lookup_name(svc, MPI_INFO_NULL, port) == MPI_SUCCESS, "lookup");
            CHECK(strncmp(port, "gwport:", 7) == 0, "port %s", port);
        }
        /* A wrong token is refused; the acceptor waits on. */
        char wrong[MPI_MAX_PORT_NAME];
        strcpy(wrong, port);
        if (hrank == 0) { /* the token is the fifth field */
            char *tok = wrong;
            for (int i = 0; i < 4; i++) tok = strchr(tok, ':') + 1;
            tok[0] = tok[0] == '0' ? '1' : '0';
        }
        MPI_Comm_set_errhandler(half, MPI_ERRORS_RETURN);
        rc = MPI_Comm_connect(wrong, MPI_INFO_NULL, 0, half, &ic);
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_PORT && ic == MPI_COMM_NULL, "wrong token: class %d", cls);
        rc = MPI_Comm_connect("not a port", MPI_INFO_NULL, 0, half, &ic);
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_PORT, "junk port: class %d", cls);
        MPI_Comm_connect(port, MPI_INFO_NULL, 0, half, &ic);
    }
    int rsize;
    MPI_Comm_remote_size(ic, &rsize);
    CHECK(rsize == size - hsize, "remote size %d", rsize);
    int mine = low ? 1 : 100, sum = 0;
    MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, ic);
    CHECK(sum == (low ? 100 * rsize : rsize), "allreduce %d", sum);
    if (hrank == 0) {
        int v = low ? 5 : 6, got;
        MPI_Sendrecv(&v, 1, MPI_INT, 0, 3, &got, 1, MPI_INT, 0, 3, ic, MPI_STATUS_IGNORE);
        CHECK(got == (low ? 6 : 5), "sendrecv %d", got);
    }
    MPI_Comm_disconnect(&ic);
    MPI_Barrier(MPI_COMM_WORLD);
    if (low && hrank == 0) {
        CHECK(MPI_Unpublish_name(svc, MPI_INFO_NULL, port) == MPI_SUCCESS, "unpublish");
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        rc = MPI_Lookup_name(svc, MPI_INFO_NULL, port);
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_NAME, "lookup after unpublish: class %d", cls);
        CHECK(MPI_Close_port(port) == MPI_SUCCESS, "close");
        rc = MPI_Close_port(port);
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_PORT, "closing twice: class %d", cls);
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    }
    MPI_Comm_free(&half);
}

static void join(int rank) {
    int fd = -1;
    if (rank == 0) {
        int l = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {0};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        CHECK(bind(l, (struct sockaddr *)&a, sizeof a) == 0, "bind");
        socklen_t len = sizeof a;
        getsockname(l, (struct sockaddr *)&a, &len);
        listen(l, 1);
        int p = ntohs(a.sin_port);
        MPI_Send(&p, 1, MPI_INT, 1, 9, MPI_COMM_WORLD);
        fd = accept(l, NULL, NULL);
        close(l);
    } else if (rank == 1) {
        int p;
        MPI_Recv(&p, 1, MPI_INT, 0, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {0};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons(p);
        CHECK(connect(fd, (struct sockaddr *)&a, sizeof a) == 0, "connect");
    }
    if (rank <= 1) {
        CHECK(fd >= 0, "socket");
        MPI_Comm ic;
        MPI_Comm_join(fd, &ic);
        int rs, v = rank + 40, got = -1;
        MPI_Comm_remote_size(ic, &rs);
        CHECK(rs == 1, "join remote size %d", rs);
        MPI_Sendrecv(&v, 1, MPI_INT, 0, 1, &got, 1, MPI_INT, 0, 1, ic, MPI_STATUS_IGNORE);
        CHECK(got == 41 - rank, "join exchange %d", got);
        MPI_Comm_disconnect(&ic);
        close(fd);
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    if (argc > 2) {
        two_jobs(argv[1], argv[2]);
        return 0;
    }
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size >= 2, "needs two ranks");
    ports(rank, size);
    join(rank);
    MPI_Barrier(MPI_COMM_WORLD);
    PASS("dynproc");
    MPI_Finalize();
    return 0;
}
