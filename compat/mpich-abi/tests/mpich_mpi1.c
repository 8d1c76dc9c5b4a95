/* Deprecated MPI-1 names that MPICH 4.0 still exports, as old programs built
 * with mpicc.mpich call them, on gridwire through the MPICH-ABI shim:
 * MPI_Keyval_create/free with a copy callback, MPI_Attr_put/get/delete,
 * MPI_Attr_get(MPI_TAG_UB), MPI_Errhandler_create/set/get, MPI_Address,
 * MPI_Type_struct/hvector/extent/lb/ub. Prints "mpich_mpi1 ok N" on rank 0;
 * exits 1 on the first wrong result. Passes under MPICH itself with
 * -DMPICH_MPI1_ANY_MPI. */
#define MPICH_NO_DEPRECATED_WARNINGS 1
#include <mpi.h>
#include <stdio.h>
#include <string.h>

static int rank;
#define CHECK(cond, ...)                                                 \
    do {                                                                 \
        if (!(cond)) {                                                   \
            fprintf(stderr, "rank %d: line %d: ", rank, __LINE__);       \
            fprintf(stderr, __VA_ARGS__);                                \
            fprintf(stderr, "\n");                                       \
            MPI_Abort(MPI_COMM_WORLD, 1);                                \
        }                                                                \
    } while (0)

static int copies;
static int copy_fn(MPI_Comm old, int key, void *extra, void *in, void *out, int *flag)
{
    (void)key; (void)extra;
    if (old == MPI_COMM_WORLD)
        copies++;
    *(void **)out = in;
    *flag = 1;
    return MPI_SUCCESS;
}

static int eh_calls, eh_class = -1;
static void handler(MPI_Comm *c, int *code, ...)
{
    (void)c;
    eh_calls++;
    MPI_Error_class(*code, &eh_class);
}

int main(int argc, char **argv)
{
    int size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
#ifndef MPICH_MPI1_ANY_MPI
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len;
    MPI_Get_library_version(lib, &len);
    CHECK(strstr(lib, "gridwire") != NULL, "library is not gridwire");
#endif

    int key, flag = 0;
    static int value = 7;
    void *v = NULL;
    MPI_Keyval_create(copy_fn, MPI_NULL_DELETE_FN, &key, NULL);
    MPI_Attr_put(MPI_COMM_WORLD, key, &value);
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Attr_get(dup, key, &v, &flag);
    CHECK(flag && v == &value && copies == 1, "attribute copied: flag %d copies %d", flag, copies);
    MPI_Attr_delete(dup, key);
    MPI_Attr_get(dup, key, &v, &flag);
    CHECK(!flag, "attribute deleted");
    MPI_Comm_free(&dup);
    MPI_Keyval_free(&key);
    CHECK(key == MPI_KEYVAL_INVALID, "keyval freed");
    int *ub = NULL;
    MPI_Attr_get(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
    CHECK(flag && *ub >= 32767, "MPI_TAG_UB");

    MPI_Errhandler eh, got;
    MPI_Errhandler_create(handler, &eh);
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Errhandler_set(dup, eh);
    MPI_Errhandler_get(dup, &got);
    CHECK(got == eh, "Errhandler_get %#x != %#x", (unsigned)got, (unsigned)eh);
    MPI_Send(&value, 1, MPI_INT, size + 1, 0, dup);
    CHECK(eh_calls == 1 && eh_class == MPI_ERR_RANK, "handler calls %d class %d", eh_calls, eh_class);
    MPI_Errhandler_free(&got);
    MPI_Errhandler_free(&eh);
    MPI_Comm_free(&dup);

    /* { int a; double b[2]; } by MPI_Address and MPI_Type_struct. */
    struct { int a; double b[2]; } s[2];
    MPI_Aint base, ab;
    MPI_Address(&s[0], &base);
    MPI_Address(&s[0].b, &ab);
    int bl[2] = {1, 2};
    MPI_Aint disp[2] = {0, ab - base};
    MPI_Datatype types[2] = {MPI_INT, MPI_DOUBLE}, st, hv;
    MPI_Type_struct(2, bl, disp, types, &st);
    MPI_Type_commit(&st);
    MPI_Aint ext, lb, ubd;
    MPI_Type_extent(st, &ext);
    MPI_Type_lb(st, &lb);
    MPI_Type_ub(st, &ubd);
    CHECK(lb == 0 && ubd == (MPI_Aint)(ab - base + 2 * sizeof(double)) && ext == ubd - lb, "extent %ld lb %ld ub %ld",
          (long)ext, (long)lb, (long)ubd);
    MPI_Type_hvector(2, 1, sizeof s[0], st, &hv);
    MPI_Type_commit(&hv);
    for (int i = 0; i < 2; i++) {
        s[i].a = rank * 10 + i;
        s[i].b[0] = rank + 0.5;
        s[i].b[1] = -rank - i;
    }
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    typeof(s[0]) r[2];
    memset(r, 0, sizeof r);
    MPI_Sendrecv(s, 1, hv, next, 3, r, 1, hv, prev, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    for (int i = 0; i < 2; i++)
        CHECK(r[i].a == prev * 10 + i && r[i].b[0] == prev + 0.5 && r[i].b[1] == -prev - i, "struct %d", i);
    MPI_Type_free(&hv);
    MPI_Type_free(&st);

    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        printf("mpich_mpi1 ok %d\n", size);
    MPI_Finalize();
    return 0;
}
