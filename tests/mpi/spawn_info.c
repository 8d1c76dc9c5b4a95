/* MPI_Comm_spawn's info keys: "wdir" (the children's working directory),
 * "path" (where to find the program), "host" (an emulated host of the
 * job, or this machine), and a key the launcher does not know (ignored).
 * A wdir that is no directory and a host that is not the job's are
 * MPI_ERR_SPAWN. Each child reports its working directory and host to the
 * parents' root over the parent intercommunicator. */
#include "check.h"
#include <libgen.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

static void child(MPI_Comm parent) {
    char msg[2 * PATH_MAX] = "";
    char cwd[PATH_MAX];
    CHECK(getcwd(cwd, sizeof cwd) != NULL, "getcwd");
    const char *h = getenv("GW_HOST_ID");
    const char *host = h && strchr(h, '#') ? strchr(h, '#') + 1 : "-";
    snprintf(msg, sizeof msg, "%s %s", cwd, host);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) MPI_Send(msg, (int)strlen(msg) + 1, MPI_CHAR, 0, 5, parent);
    MPI_Comm_disconnect(&parent);
    MPI_Finalize();
}

/* Spawns 2 children of `cmd` with `info`; returns the error class. At the
 * root, `report` gets the first child's "CWD HOST". */
static int spawn(const char *cmd, MPI_Info info, char *report) {
    MPI_Comm ic;
    int errs[2], rank, cls;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char *argv[] = {"child", NULL};
    int rc = MPI_Comm_spawn(cmd, argv, 2, info, 0, MPI_COMM_WORLD, &ic, errs);
    MPI_Error_class(rc, &cls);
    if (rc != MPI_SUCCESS) {
        CHECK(ic == MPI_COMM_NULL && errs[0] == rc, "a failed spawn leaves no communicator");
        return cls;
    }
    if (rank == 0) MPI_Recv(report, 2 * PATH_MAX, MPI_CHAR, 0, 5, ic, MPI_STATUS_IGNORE);
    MPI_Comm_disconnect(&ic);
    return cls;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm parent;
    MPI_Comm_get_parent(&parent);
    if (parent != MPI_COMM_NULL) {
        child(parent);
        return 0;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char self[PATH_MAX];
    CHECK(realpath(argv[0], self) != NULL, "realpath %s", argv[0]);
    char dir_buf[PATH_MAX], base_buf[PATH_MAX];
    strcpy(dir_buf, self);
    strcpy(base_buf, self);
    const char *dir = dirname(dir_buf), *base = basename(base_buf);
    char report[2 * PATH_MAX] = "", last_host[64] = "localhost";
    const char *emu = getenv("GW_HOST_ID");
    int emulated = emu && strchr(emu, '#'), size;
    /* The emulated host of the last rank: the children go there. */
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (emulated && rank == size - 1) snprintf(last_host, sizeof last_host, "%s", strchr(emu, '#') + 1);
    MPI_Bcast(last_host, sizeof last_host, MPI_CHAR, size - 1, MPI_COMM_WORLD);

    /* wdir and an unknown key. */
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "wdir", "/tmp");
    MPI_Info_set(info, "gw_no_such_key", "ignored");
    CHECK(spawn(self, info, report) == MPI_SUCCESS, "spawn with wdir");
    if (rank == 0) {
        CHECK(strncmp(report, "/tmp ", 5) == 0, "wdir: the child runs in %s", report);
    }
    MPI_Info_free(&info);

    /* path: the program by its bare name, found only through the key. */
    CHECK(spawn(base, MPI_INFO_NULL, report) == MPI_ERR_SPAWN, "%s is not in PATH", base);
    MPI_Info_create(&info);
    MPI_Info_set(info, "path", dir);
    CHECK(spawn(base, info, report) == MPI_SUCCESS, "spawn with path %s", dir);
    MPI_Info_free(&info);

    /* host: the last rank's emulated host, or this machine. */
    MPI_Info_create(&info);
    MPI_Info_set(info, "host", last_host);
    CHECK(spawn(self, info, report) == MPI_SUCCESS, "spawn with host");
    if (rank == 0) {
        const char *h = strrchr(report, ' ');
        CHECK(h && strcmp(h + 1, emulated ? last_host : "-") == 0, "host: the child reports %s", report);
    }
    MPI_Info_free(&info);

    /* Refusals: a wdir that is no directory, a host not of the job. */
    MPI_Info_create(&info);
    MPI_Info_set(info, "wdir", "/no/such/directory");
    CHECK(spawn(self, info, report) == MPI_ERR_SPAWN, "a missing wdir");
    MPI_Info_free(&info);
    MPI_Info_create(&info);
    MPI_Info_set(info, "host", "no-such-host.invalid");
    CHECK(spawn(self, info, report) == MPI_ERR_SPAWN, "an unknown host");
    MPI_Info_free(&info);

    PASS("spawn_info");
    MPI_Finalize();
    return 0;
}
