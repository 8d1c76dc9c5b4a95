/* An MPICH-compiled program on gridwire: built with MPICH's mpicc (mpicc.mpich,
 * linked with libmpich.so.12) and run unchanged under gwrun, which puts the
 * MPICH-ABI shim first in LD_LIBRARY_PATH. Checks a token ring, Sendrecv with
 * wildcards and the status that comes back, Isend/Irecv + Waitall with statuses,
 * Allreduce (predefined and user operation, MPI_IN_PLACE), MPI_Comm_split,
 * MPI_PROC_NULL, attribute callbacks and MPI_COMM_DUP_FN, a user error handler,
 * a nonblocking MPI_Comm_idup,
 * an error class, and that the library is gridwire. Prints
 * "mpich_ring ok N" on rank 0; exits 1 on the first wrong result. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;

#define CHECK(cond, ...)                                                 \
    do {                                                                 \
        if (!(cond)) {                                                   \
            fprintf(stderr, "rank %d: line %d: ", rank, __LINE__);       \
            fprintf(stderr, __VA_ARGS__);                                \
            fprintf(stderr, "\n");                                       \
            MPI_Abort(MPI_COMM_WORLD, 1);                                \
        }                                                                \
    } while (0)

static void absmax(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    CHECK(*dt == MPI_INT, "user op got datatype %#x, not MPI_INT %#x", (unsigned)*dt, (unsigned)MPI_INT);
    int *a = in, *b = inout;
    for (int i = 0; i < *len; i++)
        if (abs(a[i]) > abs(b[i]))
            b[i] = a[i];
}

/* Attribute callbacks and error handlers see MPICH's handles and values. */
static int copies, deletes, copy_args_ok = 1;
static int copy_fn(MPI_Comm old, int key, void *extra, void *in, void *out, int *flag)
{
    (void)key;
    if (old != MPI_COMM_WORLD || extra != &copies)
        copy_args_ok = 0;
    copies++;
    *(void **)out = (char *)in + 1;
    *flag = 1;
    return MPI_SUCCESS;
}
static int delete_fn(MPI_Comm c, int key, void *val, void *extra)
{
    (void)c; (void)key; (void)val; (void)extra;
    deletes++;
    return MPI_SUCCESS;
}
static int eh_calls, eh_class = -1;
static MPI_Comm eh_comm = MPI_COMM_NULL;
static void my_errhandler(MPI_Comm *c, int *code, ...)
{
    eh_calls++;
    eh_comm = *c;
    MPI_Error_class(*code, &eh_class);
}

int main(int argc, char **argv)
{
    int provided = -1;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    CHECK(provided == MPI_THREAD_SINGLE || provided == MPI_THREAD_FUNNELED || provided == MPI_THREAD_SERIALIZED ||
              provided == MPI_THREAD_MULTIPLE, "provided %d", provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size >= 2, "needs 2 ranks or more");
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(lib, &len);
#ifndef MPICH_RING_ANY_MPI /* -DMPICH_RING_ANY_MPI: check the test itself under MPICH */
    CHECK(strstr(lib, "gridwire") != NULL, "library is not gridwire: %.60s", lib);
#endif
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;

    /* Token ring: rank 0 starts, each adds its rank. */
    int token = 0;
    MPI_Status st;
    if (rank == 0) {
        token = 1000;
        MPI_Send(&token, 1, MPI_INT, next, 1, MPI_COMM_WORLD);
        MPI_Recv(&token, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
        CHECK(token == 1000 + size * (size - 1) / 2, "token %d", token);
    } else {
        MPI_Recv(&token, 1, MPI_INT, prev, 1, MPI_COMM_WORLD, &st);
        token += rank;
        MPI_Send(&token, 1, MPI_INT, next, 1, MPI_COMM_WORLD);
    }
    int count = -1;
    MPI_Get_count(&st, MPI_INT, &count);
    CHECK(st.MPI_SOURCE == prev && st.MPI_TAG == 1 && count == 1, "status source %d tag %d count %d",
          st.MPI_SOURCE, st.MPI_TAG, count);

    /* Sendrecv of 100000 doubles (rendezvous) with wildcards. */
    enum { N = 100000 };
    double *out = malloc(N * sizeof *out), *in = malloc(N * sizeof *in);
    for (int i = 0; i < N; i++)
        out[i] = rank * 1e6 + i;
    MPI_Sendrecv(out, N, MPI_DOUBLE, next, 7, in, N, MPI_DOUBLE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
    MPI_Get_count(&st, MPI_DOUBLE, &count);
    CHECK(st.MPI_SOURCE == prev && st.MPI_TAG == 7 && count == N, "sendrecv status %d %d %d", st.MPI_SOURCE,
          st.MPI_TAG, count);
    for (int i = 0; i < N; i++)
        CHECK(in[i] == prev * 1e6 + i, "in[%d] = %g", i, in[i]);

    /* Isend/Irecv + Waitall with statuses. */
    int sv[3], rv[3] = {-1, -1, -1};
    MPI_Request reqs[6];
    MPI_Status sts[6];
    for (int k = 0; k < 3; k++) {
        sv[k] = rank * 10 + k;
        MPI_Irecv(&rv[k], 1, MPI_INT, prev, 20 + k, MPI_COMM_WORLD, &reqs[k]);
    }
    for (int k = 0; k < 3; k++)
        MPI_Isend(&sv[k], 1, MPI_INT, next, 20 + k, MPI_COMM_WORLD, &reqs[3 + k]);
    MPI_Waitall(6, reqs, sts);
    for (int k = 0; k < 3; k++) {
        CHECK(rv[k] == prev * 10 + k, "rv[%d] = %d", k, rv[k]);
        CHECK(sts[k].MPI_SOURCE == prev && sts[k].MPI_TAG == 20 + k, "waitall status %d", k);
    }
    for (int k = 0; k < 6; k++)
        CHECK(reqs[k] == MPI_REQUEST_NULL, "request %d not MPI_REQUEST_NULL", k);

    /* MPI_PROC_NULL. */
    MPI_Recv(in, 1, MPI_DOUBLE, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st);
    MPI_Get_count(&st, MPI_DOUBLE, &count);
    CHECK(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG && count == 0, "proc_null status");

    /* Allreduce: SUM, IN_PLACE MAX, a user operation. */
    long sum = 0;
    long mine = rank + 1;
    MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    CHECK(sum == (long)size * (size + 1) / 2, "sum %ld", sum);
    double mx[2] = {rank, -rank};
    MPI_Allreduce(MPI_IN_PLACE, mx, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    CHECK(mx[0] == size - 1 && mx[1] == 0, "max %g %g", mx[0], mx[1]);
    MPI_Op op;
    MPI_Op_create(absmax, 1, &op);
    int v[2] = {rank, -2 * rank}, r[2];
    MPI_Allreduce(v, r, 2, MPI_INT, op, MPI_COMM_WORLD);
    CHECK(r[0] == size - 1 && r[1] == -2 * (size - 1), "absmax %d %d", r[0], r[1]);
    MPI_Op_free(&op);
    CHECK(op == MPI_OP_NULL, "op not freed");

    /* Comm_split by parity; compare. */
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    int hsize, hrank, result;
    MPI_Comm_size(half, &hsize);
    MPI_Comm_rank(half, &hrank);
    CHECK(hsize == (size + 1 - rank % 2) / 2 && hrank == rank / 2, "split %d %d", hsize, hrank);
    MPI_Comm_compare(MPI_COMM_WORLD, half, &result);
    CHECK(result == MPI_UNEQUAL, "compare %d", result);
    MPI_Comm_compare(MPI_COMM_WORLD, MPI_COMM_WORLD, &result);
    CHECK(result == MPI_IDENT, "compare self %d", result);
    MPI_Comm_free(&half);
    CHECK(half == MPI_COMM_NULL, "comm not freed");

    /* Keyvals with callbacks, MPI_COMM_DUP_FN (MPICH's MPIR_Dup_fn). */
    static char base[4];
    int key = MPI_KEYVAL_INVALID, kdup = MPI_KEYVAL_INVALID, aflag = 0;
    void *val = NULL;
    MPI_Comm_create_keyval(copy_fn, delete_fn, &key, &copies);
    MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, &kdup, NULL);
    MPI_Comm_set_attr(MPI_COMM_WORLD, key, base);
    MPI_Comm_set_attr(MPI_COMM_WORLD, kdup, base + 2);
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_get_attr(dup, key, &val, &aflag);
    CHECK(aflag && val == base + 1 && copies == 1 && copy_args_ok, "copied attribute %d %d %d", aflag, copies,
          copy_args_ok);
    MPI_Comm_get_attr(dup, kdup, &val, &aflag);
    CHECK(aflag && val == base + 2, "MPI_COMM_DUP_FN attribute");
    MPI_Comm_free(&dup);
    CHECK(deletes == 1, "deletes %d after free", deletes);
    MPI_Comm_delete_attr(MPI_COMM_WORLD, key);
    CHECK(deletes == 2, "deletes %d after delete_attr", deletes);
    MPI_Comm_free_keyval(&key);
    CHECK(key == MPI_KEYVAL_INVALID, "keyval not freed");
    MPI_Comm_free_keyval(&kdup);

    /* A user error handler gets MPICH's communicator and error code. */
    MPI_Errhandler eh;
    MPI_Comm_create_errhandler(my_errhandler, &eh);
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_set_errhandler(dup, eh);
    MPI_Send(&token, 1, MPI_INT, size + 3, 0, dup);
    CHECK(eh_calls == 1 && eh_comm == dup && eh_class == MPI_ERR_RANK, "errhandler %d %#x %d", eh_calls,
          (unsigned)eh_comm, eh_class);
    MPI_Errhandler_free(&eh);
    CHECK(eh == MPI_ERRHANDLER_NULL, "errhandler not freed");
    MPI_Comm_free(&dup);

    /* MPI_Comm_idup is nonblocking: rank 0 sends to rank 1 before waiting
     * for its idup, which rank 1 starts only after receiving (a blocking
     * idup would deadlock here; gwrun's timeout ends the job). */
    MPI_Request ireq;
    MPI_Comm idc = MPI_COMM_NULL;
    int ping = 0;
    if (rank == 0) {
        MPI_Comm_idup(MPI_COMM_WORLD, &idc, &ireq);
        ping = 42;
        MPI_Send(&ping, 1, MPI_INT, 1, 99, MPI_COMM_WORLD);
    } else if (rank == 1) {
        MPI_Recv(&ping, 1, MPI_INT, 0, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(ping == 42, "ping %d", ping);
        MPI_Comm_idup(MPI_COMM_WORLD, &idc, &ireq);
    } else {
        MPI_Comm_idup(MPI_COMM_WORLD, &idc, &ireq);
    }
    MPI_Wait(&ireq, MPI_STATUS_IGNORE);
    int isz = 0, isum = 0;
    CHECK(idc != MPI_COMM_NULL, "idup gave MPI_COMM_NULL");
    MPI_Comm_size(idc, &isz);
    MPI_Allreduce(&rank, &isum, 1, MPI_INT, MPI_SUM, idc);
    CHECK(isz == size && isum == size * (size - 1) / 2, "idup comm size %d sum %d", isz, isum);
    MPI_Comm_free(&idc);

    /* Errors come back as MPICH's classes. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rc = MPI_Send(&token, 1, MPI_INT, size + 3, 0, MPI_COMM_WORLD), cls = -1;
    MPI_Error_class(rc, &cls);
    CHECK(rc != MPI_SUCCESS && cls == MPI_ERR_RANK, "rc %d class %d", rc, cls);
    int *tag_ub = NULL, flag = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag);
    CHECK(flag && *tag_ub >= 32767, "tag_ub");

    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        printf("mpich_ring ok %d\n", size);
    free(out);
    free(in);
    MPI_Finalize();
    return 0;
}
