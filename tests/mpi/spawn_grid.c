/* MPI_Comm_spawn in a job started with `gwrun -f` (one proxy per host):
 * the parents, one per host, spawn 4 copies of this program, which the
 * front end places round the hosts (every slot is taken by a parent);
 * each child says where it runs; every parent sends every child a short
 * and a 1 MiB message whose checksum the child checks, and every child
 * answers every parent likewise; then merge, allreduce over the merged
 * communicator, disconnect. A second spawn puts both children on the
 * host the `host` info key names, and a spawn of a missing program, or of
 * one that exits before it initialises (`true`), is MPI_ERR_SPAWN at
 * every parent. Prints, at parent rank 0,
 * "CHILD <i> HOST <name>" and "PINNED <i> HOST <name>" lines and
 * "PASS spawn_grid"; each child prints "SPAWNED <rank> OF <size> ON <host>".
 * With the argument `once` (under mpiexec.mpich or mpirun.openmpi) only
 * the first spawn, `two` the same with 2 children (under srun);
 * with `missing`, only a spawn of a missing program (MPI_ERR_SPAWN). */
#include "check.h"
#include <stdint.h>
#include <string.h>

#define BIG (1 << 20)
#define NAME 64

static uint64_t fill(unsigned char *b, int n, unsigned seed) {
    uint64_t sum = 1469598103934665603ull;
    for (int i = 0; i < n; i++) {
        b[i] = (unsigned char)((i * 131u + seed * 7919u) >> 3);
        sum = (sum ^ b[i]) * 1099511628211ull;
    }
    return sum;
}

static uint64_t checksum(const unsigned char *b, int n) {
    uint64_t sum = 1469598103934665603ull;
    for (int i = 0; i < n; i++) sum = (sum ^ b[i]) * 1099511628211ull;
    return sum;
}

/* Every process of `mine` sends every process of the other group a short
 * and a big message, and checks what comes the other way. */
static void exchange(MPI_Comm ic, int i_am_parent) {
    int rank, rsize;
    MPI_Comm_rank(ic, &rank);
    MPI_Comm_remote_size(ic, &rsize);
    unsigned char *out = malloc(BIG), *in = malloc(BIG);
    CHECK(out && in, "malloc");
    for (int peer = 0; peer < rsize; peer++) {
        /* Seeds name sender and receiver, so a misrouted message fails. */
        unsigned seed = (unsigned)(i_am_parent ? 1000 + rank * 100 + peer : 5000 + rank * 100 + peer);
        unsigned rseed = (unsigned)(i_am_parent ? 5000 + peer * 100 + rank : 1000 + peer * 100 + rank);
        uint64_t sent[2];
        sent[0] = fill(out, BIG, seed);
        sent[1] = seed;
        MPI_Request rq[4];
        uint64_t got[2];
        MPI_Irecv(got, 2, MPI_UINT64_T, peer, 1, ic, &rq[0]);
        MPI_Irecv(in, BIG, MPI_BYTE, peer, 2, ic, &rq[1]);
        MPI_Isend(sent, 2, MPI_UINT64_T, peer, 1, ic, &rq[2]);
        MPI_Isend(out, BIG, MPI_BYTE, peer, 2, ic, &rq[3]);
        MPI_Waitall(4, rq, MPI_STATUSES_IGNORE);
        CHECK(got[1] == rseed, "seed %llu from %d, want %u", (unsigned long long)got[1], peer, rseed);
        CHECK(checksum(in, BIG) == got[0], "checksum of the 1 MiB message from %d", peer);
    }
    free(out);
    free(in);
}

static void merge_and_reduce(MPI_Comm ic, int high, int total) {
    MPI_Comm merged;
    MPI_Intercomm_merge(ic, high, &merged);
    int size, one = 1, sum = 0;
    MPI_Comm_size(merged, &size);
    CHECK(size == total, "merged size %d, want %d", size, total);
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, merged);
    CHECK(sum == total, "allreduce over the merged communicator %d", sum);
    MPI_Comm_free(&merged);
}

static int child(MPI_Comm parent) {
    int rank, psize, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_remote_size(parent, &psize);
    char host[NAME] = {0};
    const char *h = getenv("GW_HOST_NAME");
    snprintf(host, NAME, "%s", h ? h : "?");
    MPI_Send(host, NAME, MPI_CHAR, 0, 9, parent);
    /* The launcher forwards a spawned process's output like a rank's. */
    printf("SPAWNED %d OF %d ON %s\n", rank, size, host);
    fflush(stdout);
    exchange(parent, 0);
    merge_and_reduce(parent, 1, psize + size);
    MPI_Comm_disconnect(&parent);
    MPI_Finalize();
    return 0;
}

/* Spawns `n` children (on `host` if given); returns their hosts' names. */
static void spawn_and_talk(char *prog, int n, const char *host, char names[][NAME]) {
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Info info = MPI_INFO_NULL;
    if (host) {
        MPI_Info_create(&info);
        MPI_Info_set(info, "host", host);
    }
    char *args[] = {"child", NULL};
    int codes[8];
    MPI_Comm ic;
    MPI_Comm_spawn(prog, args, n, info, 0, MPI_COMM_WORLD, &ic, codes);
    for (int i = 0; i < n; i++) CHECK(codes[i] == MPI_SUCCESS, "code %d: %d", i, codes[i]);
    if (info != MPI_INFO_NULL) MPI_Info_free(&info);
    int rsize;
    MPI_Comm_remote_size(ic, &rsize);
    CHECK(rsize == n, "remote size %d", rsize);
    if (rank == 0)
        for (int c = 0; c < n; c++)
            MPI_Recv(names[c], NAME, MPI_CHAR, c, 9, ic, MPI_STATUS_IGNORE);
    exchange(ic, 1);
    merge_and_reduce(ic, 0, size + n);
    MPI_Comm_disconnect(&ic);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm parent;
    MPI_Comm_get_parent(&parent);
    if (argc > 1 && strcmp(argv[1], "child") == 0) {
        CHECK(parent != MPI_COMM_NULL, "a spawned process has a parent");
        return child(parent);
    }
    CHECK(parent == MPI_COMM_NULL, "a process the launcher started has no parent");
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc > 1 && strcmp(argv[1], "missing") == 0) {
        /* Under Hydra: a program that cannot start never connects. */
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        MPI_Comm ic = MPI_COMM_WORLD;
        int cls, rc = MPI_Comm_spawn("/nonexistent/gridwire-prog", MPI_ARGV_NULL, 1, MPI_INFO_NULL,
                                     0, MPI_COMM_WORLD, &ic, MPI_ERRCODES_IGNORE);
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_SPAWN && ic == MPI_COMM_NULL, "missing program: class %d", cls);
        PASS("spawn_grid missing");
        MPI_Finalize();
        return 0;
    }
    char names[4][NAME];
    /* `two` (under Slurm, whose allocation is small): 2 children. */
    int two = argc > 1 && strcmp(argv[1], "two") == 0;
    int kids = two ? 2 : 4;
    spawn_and_talk(argv[0], kids, NULL, names);
    if (rank == 0)
        for (int c = 0; c < kids; c++) printf("CHILD %d HOST %s\n", c, names[c]);
    if (two || (argc > 1 && strcmp(argv[1], "once") == 0)) {
        /* Under another launcher (Hydra, mpirun, srun): the first spawn only. */
        PASS(two ? "spawn_grid two" : "spawn_grid once");
        MPI_Finalize();
        return 0;
    }
    /* Both children on the host of the last parent. */
    char last[NAME] = {0};
    const char *h = getenv("GW_HOST_NAME");
    snprintf(last, NAME, "%s", h ? h : "?");
    MPI_Bcast(last, NAME, MPI_CHAR, size - 1, MPI_COMM_WORLD);
    spawn_and_talk(argv[0], 2, last, names);
    if (rank == 0)
        for (int c = 0; c < 2; c++) {
            CHECK(strcmp(names[c], last) == 0, "host key: child %d on %s, want %s", c, names[c], last);
            printf("PINNED %d HOST %s\n", c, names[c]);
        }
    /* A program no host has: MPI_ERR_SPAWN at every parent. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int bad[2] = {-1, -1}, cls;
    MPI_Comm ic = MPI_COMM_WORLD;
    int rc = MPI_Comm_spawn("/nonexistent/gridwire-prog", MPI_ARGV_NULL, 2, MPI_INFO_NULL, 0,
                            MPI_COMM_WORLD, &ic, bad);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_SPAWN, "missing program: class %d", cls);
    CHECK(ic == MPI_COMM_NULL, "no intercommunicator on failure");
    CHECK(bad[0] == MPI_ERR_SPAWN && bad[1] == MPI_ERR_SPAWN, "codes %d %d", bad[0], bad[1]);
    /* A program that starts but exits before it initialises (found in
     * PATH on its host): MPI_ERR_SPAWN too, and the job goes on. */
    ic = MPI_COMM_WORLD;
    rc = MPI_Comm_spawn("true", MPI_ARGV_NULL, 2, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &ic,
                        MPI_ERRCODES_IGNORE);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_SPAWN && ic == MPI_COMM_NULL, "a program that exits at once: class %d", cls);
    MPI_Barrier(MPI_COMM_WORLD);
    fflush(stdout);
    PASS("spawn_grid");
    MPI_Finalize();
    return 0;
}
