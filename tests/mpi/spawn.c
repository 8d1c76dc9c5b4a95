/* MPI_Comm_spawn, MPI_Comm_spawn_multiple and MPI_Comm_get_parent: the
 * parents spawn copies of this program, exchange messages and run
 * collectives over the intercommunicator, merge it, and disconnect;
 * spawn errors (no such program, too many processes) come back as
 * MPI_ERR_SPAWN with the error codes filled, and no process is left. */
#include "check.h"
#include <string.h>

static int child(MPI_Comm parent, const char *mode) {
    int rank, size, psize, appnum, *ap, flag;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_remote_size(parent, &psize);
    int inter;
    MPI_Comm_test_inter(parent, &inter);
    CHECK(inter, "the parent communicator is an intercommunicator");
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_APPNUM, &ap, &flag);
    appnum = flag ? *ap : -1;
    if (strcmp(mode, "multi") == 0) {
        /* Program 0 runs 1 process, program 1 runs 2. */
        CHECK(size == 3, "spawn_multiple world of 3, got %d", size);
        CHECK(appnum == (rank == 0 ? 0 : 1), "rank %d appnum %d", rank, appnum);
    } else {
        CHECK(size == 2, "spawned world of 2, got %d", size);
        CHECK(appnum == 0, "appnum %d", appnum);
    }
    /* Point-to-point with the parents' rank 0. */
    int v;
    MPI_Recv(&v, 1, MPI_INT, 0, 7, parent, MPI_STATUS_IGNORE);
    CHECK(v == 100 + rank, "got %d", v);
    v = 1000 + rank;
    MPI_Send(&v, 1, MPI_INT, 0, 8, parent);
    /* Collectives across the intercommunicator. */
    int b = -1;
    MPI_Bcast(&b, 1, MPI_INT, 0, parent);
    CHECK(b == 42, "bcast from the parents' root: %d", b);
    int mine = rank + 1, sum = 0;
    MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, parent);
    /* Sum over the parents' values: 1 + ... + psize. */
    CHECK(sum == psize * (psize + 1) / 2, "allreduce gave %d", sum);
    MPI_Comm merged;
    MPI_Intercomm_merge(parent, 1, &merged);
    int msize, mrank;
    MPI_Comm_size(merged, &msize);
    MPI_Comm_rank(merged, &mrank);
    CHECK(msize == psize + size && mrank == psize + rank, "merged %d/%d", mrank, msize);
    MPI_Barrier(merged);
    MPI_Comm_free(&merged);
    /* A communicator among the children works as usual. */
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    int one = 1, n = 0;
    MPI_Allreduce(&one, &n, 1, MPI_INT, MPI_SUM, dup);
    CHECK(n == size, "children's allreduce %d", n);
    MPI_Comm_free(&dup);
    MPI_Comm_disconnect(&parent);
    CHECK(parent == MPI_COMM_NULL, "disconnect sets MPI_COMM_NULL");
    MPI_Comm again;
    MPI_Comm_get_parent(&again);
    CHECK(again == MPI_COMM_NULL, "no parent after disconnect");
    MPI_Finalize();
    return 0;
}

static void talk(MPI_Comm ic, int rank, int nchildren) {
    int csize;
    MPI_Comm_remote_size(ic, &csize);
    CHECK(csize == nchildren, "remote size %d", csize);
    if (rank == 0) {
        for (int c = 0; c < nchildren; c++) {
            int v = 100 + c;
            MPI_Send(&v, 1, MPI_INT, c, 7, ic);
        }
        for (int c = 0; c < nchildren; c++) {
            int v;
            MPI_Recv(&v, 1, MPI_INT, c, 8, ic, MPI_STATUS_IGNORE);
            CHECK(v == 1000 + c, "child %d answered %d", c, v);
        }
    }
    int b = 42;
    MPI_Bcast(&b, 1, MPI_INT, rank == 0 ? MPI_ROOT : MPI_PROC_NULL, ic);
    int mine = rank + 1, sum = 0;
    MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, ic);
    CHECK(sum == nchildren * (nchildren + 1) / 2, "allreduce over the children %d", sum);
    MPI_Comm merged;
    MPI_Intercomm_merge(ic, 0, &merged);
    int msize, mrank, size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_size(merged, &msize);
    MPI_Comm_rank(merged, &mrank);
    CHECK(msize == size + nchildren && mrank == rank, "merged %d/%d", mrank, msize);
    MPI_Barrier(merged);
    MPI_Comm_free(&merged);
    MPI_Comm_disconnect(&ic);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm parent;
    MPI_Comm_get_parent(&parent);
    if (argc > 1) {
        CHECK(parent != MPI_COMM_NULL, "a spawned process has a parent");
        return child(parent, argv[1]);
    }
    CHECK(parent == MPI_COMM_NULL, "a process gwrun started has no parent");
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int *usize, flag;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_UNIVERSE_SIZE, &usize, &flag);
    CHECK(flag && *usize > size, "MPI_UNIVERSE_SIZE %d leaves room to spawn", flag ? *usize : -1);

    /* MPI_Comm_spawn: two copies of this program. */
    char *args[] = {"single", NULL};
    int codes[2] = {-1, -1};
    MPI_Comm ic;
    MPI_Comm_spawn(argv[0], args, 2, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &ic, codes);
    if (rank == 0)
        CHECK(codes[0] == MPI_SUCCESS && codes[1] == MPI_SUCCESS, "codes %d %d", codes[0], codes[1]);
    talk(ic, rank, 2);

    /* MPI_Comm_spawn_multiple: 1 + 2 processes, rooted at the last rank. */
    char *cmds[2] = {argv[0], argv[0]};
    char *margs[] = {"multi", NULL};
    char **argvs[2] = {margs, margs};
    int maxprocs[2] = {1, 2};
    MPI_Info infos[2] = {MPI_INFO_NULL, MPI_INFO_NULL};
    int mcodes[3] = {-1, -1, -1};
    MPI_Comm_spawn_multiple(2, cmds, argvs, maxprocs, infos, size - 1, MPI_COMM_WORLD, &ic, mcodes);
    if (rank == size - 1)
        for (int i = 0; i < 3; i++) CHECK(mcodes[i] == MPI_SUCCESS, "code %d: %d", i, mcodes[i]);
    talk(ic, rank, 3);

    /* Errors come back; nothing hangs. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int bad[2] = {-1, -1}, cls;
    ic = MPI_COMM_WORLD;
    int rc = MPI_Comm_spawn("/nonexistent/gridwire-prog", MPI_ARGV_NULL, 2, MPI_INFO_NULL, 0,
                            MPI_COMM_WORLD, &ic, bad);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_SPAWN, "missing program: class %d", cls);
    CHECK(ic == MPI_COMM_NULL, "no intercommunicator on failure");
    if (rank == 0) CHECK(bad[0] == MPI_ERR_SPAWN && bad[1] == MPI_ERR_SPAWN, "codes %d %d", bad[0], bad[1]);
    rc = MPI_Comm_spawn(argv[0], args, 1 << 20, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &ic,
                        MPI_ERRCODES_IGNORE);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_SPAWN, "too many processes: class %d", cls);
    PASS("spawn");
    MPI_Finalize();
    return 0;
}
