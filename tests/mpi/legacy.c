/* The MPI-1 names removed in MPI-3 that programs still call: each must act
 * as its successor does. */
#include "check.h"
#include <stddef.h>

static int handler_calls = 0, handler_class = -1;
static void on_error(MPI_Comm *comm, int *code, ...) {
    (void)comm;
    handler_calls++;
    MPI_Error_class(*code, &handler_class);
}

struct item { int a; double b; char c; };

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    /* Errhandler_create/set/get: the handler runs on an error. */
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Errhandler eh, got;
    CHECK(MPI_Errhandler_create(on_error, &eh) == MPI_SUCCESS, "errhandler_create");
    CHECK(MPI_Errhandler_set(dup, eh) == MPI_SUCCESS, "errhandler_set");
    CHECK(MPI_Errhandler_get(dup, &got) == MPI_SUCCESS, "errhandler_get");
    int v = 0;
    MPI_Send(&v, 1, MPI_INT, size + 3, 0, dup);
    CHECK(handler_calls == 1 && handler_class == MPI_ERR_RANK, "handler calls %d class %d", handler_calls, handler_class);
    MPI_Errhandler_free(&got);
    MPI_Errhandler_free(&eh);

    /* Address, Type_struct, extent/lb/ub. */
    struct item items[2];
    MPI_Aint base, addr[3];
    MPI_Address(&items[0], &base);
    MPI_Address(&items[0].a, &addr[0]);
    MPI_Address(&items[0].b, &addr[1]);
    MPI_Address(&items[0].c, &addr[2]);
    CHECK(addr[1] - base == offsetof(struct item, b), "address offset %ld", (long)(addr[1] - base));
    for (int i = 0; i < 3; i++) addr[i] -= base;
    int bl[3] = {1, 1, 1};
    MPI_Datatype types[3] = {MPI_INT, MPI_DOUBLE, MPI_CHAR}, st, hv, hi;
    CHECK(MPI_Type_struct(3, bl, addr, types, &st) == MPI_SUCCESS, "type_struct");
    MPI_Type_commit(&st);
    MPI_Aint ext, lb, ub;
    MPI_Type_extent(st, &ext);
    MPI_Type_lb(st, &lb);
    MPI_Type_ub(st, &ub);
    CHECK(lb == 0, "lb %ld", (long)lb);
    CHECK(ub == offsetof(struct item, c) + 1 || ub == (MPI_Aint)sizeof(struct item), "ub %ld", (long)ub);
    CHECK(ext == ub - lb, "extent %ld ub %ld", (long)ext, (long)ub);
    if (size > 1 && rank < 2) {
        struct item in = {0, 0, 0}, out = {7, 2.5, 'x'};
        MPI_Sendrecv(&out, 1, st, 1 - rank, 0, &in, 1, st, 1 - rank, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(in.a == 7 && in.b == 2.5 && in.c == 'x', "struct sendrecv");
    }
    MPI_Type_free(&st);

    /* hvector: every other int of 6; hindexed: ints 1 and 4. */
    int src[6] = {0, 1, 2, 3, 4, 5}, dst[6] = {0}, packed[3] = {0};
    MPI_Type_hvector(3, 1, 2 * sizeof(int), MPI_INT, &hv);
    MPI_Type_commit(&hv);
    MPI_Sendrecv(src, 1, hv, 0, 1, packed, 3, MPI_INT, 0, 1, MPI_COMM_SELF, MPI_STATUS_IGNORE);
    CHECK(packed[0] == 0 && packed[1] == 2 && packed[2] == 4, "hvector %d %d %d", packed[0], packed[1], packed[2]);
    MPI_Type_extent(hv, &ext);
    CHECK(ext == 5 * (MPI_Aint)sizeof(int), "hvector extent %ld", (long)ext);
    int hbl[2] = {1, 1};
    MPI_Aint hd[2] = {sizeof(int), 4 * sizeof(int)};
    MPI_Type_hindexed(2, hbl, hd, MPI_INT, &hi);
    MPI_Type_commit(&hi);
    MPI_Sendrecv(src, 1, hi, 0, 2, dst, 2, MPI_INT, 0, 2, MPI_COMM_SELF, MPI_STATUS_IGNORE);
    CHECK(dst[0] == 1 && dst[1] == 4, "hindexed %d %d", dst[0], dst[1]);
    MPI_Type_lb(hi, &lb);
    CHECK(lb == sizeof(int), "hindexed lb %ld", (long)lb);
    MPI_Type_free(&hv);
    MPI_Type_free(&hi);

    /* Keyval_create / Attr_put / Attr_get / Attr_delete / Keyval_free. */
    int key, flag = 0;
    static int payload = 99;
    int *gotp = NULL;
    CHECK(MPI_Keyval_create(MPI_NULL_COPY_FN, MPI_NULL_DELETE_FN, &key, NULL) == MPI_SUCCESS, "keyval_create");
    MPI_Attr_put(dup, key, &payload);
    MPI_Attr_get(dup, key, &gotp, &flag);
    CHECK(flag && gotp == &payload, "attr_get flag %d", flag);
    MPI_Attr_delete(dup, key);
    MPI_Attr_get(dup, key, &gotp, &flag);
    CHECK(!flag, "attr deleted");
    MPI_Keyval_free(&key);
    CHECK(key == MPI_KEYVAL_INVALID, "keyval_free");

    /* A bad datatype is reported as by the successor. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int cls, err = MPI_Type_extent(MPI_DATATYPE_NULL, &ext);
    MPI_Error_class(err, &cls);
    CHECK(cls == MPI_ERR_TYPE, "extent of MPI_DATATYPE_NULL: class %d", cls);
    MPI_Comm_free(&dup);
    PASS("legacy");
    MPI_Finalize();
    return 0;
}
