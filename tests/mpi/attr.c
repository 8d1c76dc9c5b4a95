/* Attributes (with copy/delete callbacks), predefined attributes, info,
 * error handlers and invalid-argument detection. */
#include "check.h"
#include <string.h>

static int copies, deletes;
static int copy_fn(MPI_Comm c, int k, void *extra, void *in, void *out, int *flag) {
    (void)c; (void)k; (void)extra;
    copies++;
    *(void **)out = (char *)in + 1;
    *flag = 1;
    return MPI_SUCCESS;
}
static int delete_fn(MPI_Comm c, int k, void *val, void *extra) {
    (void)c; (void)k; (void)val; (void)extra;
    deletes++;
    return MPI_SUCCESS;
}
/* MPI_COMM_SELF's attributes at MPI_Finalize: deleted first, last set
 * first, with MPI_Finalized still false (MPI-4.1 section 11.2.4). The keyvals
 * are set in an order unlike their creation order; the last delete callback
 * checks the whole sequence and only then says PASS. */
static int self_keys[3], self_order[3], self_deleted;
static int self_delete_fn(MPI_Comm c, int k, void *val, void *extra) {
    (void)extra;
    int fin = 1;
    MPI_Finalized(&fin);
    CHECK(c == MPI_COMM_SELF && !fin, "self delete callback: comm %d finalized %d", c == MPI_COMM_SELF, fin);
    CHECK(self_deleted < 3 && k == self_keys[(long)val], "self delete callback: keyval %d value %ld", k, (long)val);
    self_order[self_deleted++] = (int)(long)val;
    if (self_deleted == 3) {
        CHECK(self_order[0] == 2 && self_order[1] == 0 && self_order[2] == 1,
              "self attributes deleted in order %d %d %d, want 2 0 1 (last set first)",
              self_order[0], self_order[1], self_order[2]);
        PASS("attr");
    }
    return MPI_SUCCESS;
}
static int failing_copy_fn(MPI_Comm c, int k, void *extra, void *in, void *out, int *flag) {
    (void)c; (void)k; (void)extra; (void)in; (void)out;
    *flag = 0;
    return MPI_ERR_OTHER;
}
static int type_deletes;
static int type_delete_fn(MPI_Datatype t, int k, void *val, void *extra) {
    (void)t; (void)k; (void)extra;
    type_deletes += (int)(long)val;
    return MPI_SUCCESS;
}

static int handler_calls, handler_code;
static void my_handler(MPI_Comm *c, int *code, ...) {
    (void)c;
    handler_calls++;
    handler_code = *code;
}

int main(int argc, char **argv) {
    int rank, size, flag, cls;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    /* Predefined attributes. */
    int *tub;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tub, &flag);
    CHECK(flag && *tub >= 32767, "tag_ub");
    int *wg;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_WTIME_IS_GLOBAL, &wg, &flag);
    CHECK(flag && (*wg == 0 || *wg == 1), "wtime_is_global");
    int *us;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_UNIVERSE_SIZE, &us, &flag);
    CHECK(!flag || *us >= size, "universe size");

    /* User keyvals: set, get, copy on dup, delete on free. */
    int key;
    MPI_Comm_create_keyval(copy_fn, delete_fn, &key, NULL);
    static char base[4];
    MPI_Comm_set_attr(MPI_COMM_WORLD, key, base);
    void *v;
    MPI_Comm_get_attr(MPI_COMM_WORLD, key, &v, &flag);
    CHECK(flag && v == base, "get attr");
    MPI_Comm d;
    MPI_Comm_dup(MPI_COMM_WORLD, &d);
    CHECK(copies == 1, "copy callback %d", copies);
    MPI_Comm_get_attr(d, key, &v, &flag);
    CHECK(flag && v == base + 1, "copied value");
    MPI_Comm_free(&d);
    CHECK(deletes == 1, "delete on free %d", deletes);
    MPI_Comm_delete_attr(MPI_COMM_WORLD, key);
    CHECK(deletes == 2, "delete_attr");
    MPI_Comm_get_attr(MPI_COMM_WORLD, key, &v, &flag);
    CHECK(!flag, "deleted");
    MPI_Comm_free_keyval(&key);
    CHECK(key == MPI_KEYVAL_INVALID, "free keyval");
    /* MPI_COMM_DUP_FN / NULL_COPY_FN */
    int k2, k3;
    MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, &k2, NULL);
    MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &k3, NULL);
    MPI_Comm_set_attr(MPI_COMM_WORLD, k2, base);
    MPI_Comm_set_attr(MPI_COMM_WORLD, k3, base);
    MPI_Comm_dup(MPI_COMM_WORLD, &d);
    MPI_Comm_get_attr(d, k2, &v, &flag); CHECK(flag && v == base, "dup_fn");
    MPI_Comm_get_attr(d, k3, &v, &flag); CHECK(!flag, "null_copy_fn");
    MPI_Comm_free(&d);
    /* Type attributes */
    int tk;
    MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, MPI_TYPE_NULL_DELETE_FN, &tk, NULL);
    MPI_Datatype t;
    MPI_Type_contiguous(2, MPI_INT, &t);
    MPI_Type_set_attr(t, tk, base);
    MPI_Type_get_attr(t, tk, &v, &flag);
    CHECK(flag && v == base, "type attr");
    MPI_Type_free(&t);
    MPI_Type_free_keyval(&tk);

    /* Info */
    MPI_Info info, info2;
    MPI_Info_create(&info);
    MPI_Info_set(info, "color", "blue");
    MPI_Info_set(info, "shape", "round");
    MPI_Info_set(info, "color", "red");
    int nkeys, vlen;
    MPI_Info_get_nkeys(info, &nkeys);
    CHECK(nkeys == 2, "nkeys %d", nkeys);
    char val[MPI_MAX_INFO_VAL], key0[MPI_MAX_INFO_KEY];
    MPI_Info_get(info, "color", MPI_MAX_INFO_VAL - 1, val, &flag);
    CHECK(flag && strcmp(val, "red") == 0, "info get %s", val);
    MPI_Info_get_valuelen(info, "shape", &vlen, &flag);
    CHECK(flag && vlen == 5, "valuelen");
    MPI_Info_get_nthkey(info, 1, key0);
    CHECK(strcmp(key0, "shape") == 0, "nthkey %s", key0);
    int buflen = sizeof val;
    MPI_Info_get_string(info, "shape", &buflen, val, &flag);
    CHECK(flag && buflen == 6 && strcmp(val, "round") == 0, "get_string");
    MPI_Info_dup(info, &info2);
    MPI_Info_delete(info, "color");
    MPI_Info_get(info, "color", 10, val, &flag); CHECK(!flag, "deleted key");
    MPI_Info_get(info2, "color", 10, val, &flag); CHECK(flag, "dup independent");
    MPI_Comm_dup_with_info(MPI_COMM_WORLD, info2, &d);
    MPI_Info got;
    MPI_Comm_get_info(d, &got);
    MPI_Info_get(got, "shape", 10, val, &flag); CHECK(flag && strcmp(val, "round") == 0, "comm info");
    MPI_Info_free(&got); MPI_Info_free(&info); MPI_Info_free(&info2);
    CHECK(info == MPI_INFO_NULL, "info free");
    MPI_Comm_free(&d);

    /* Errors: MPI_ERRORS_RETURN reports invalid arguments instead of aborting. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Errhandler eh;
    MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh);
    CHECK(eh == MPI_ERRORS_RETURN, "get errhandler");
    int x = 0, rc;
    rc = MPI_Send(&x, 1, MPI_INT, size, 0, MPI_COMM_WORLD); MPI_Error_class(rc, &cls); CHECK(cls == MPI_ERR_RANK, "bad rank %d", rc);
    rc = MPI_Send(&x, 1, MPI_INT, 0, -5, MPI_COMM_WORLD); MPI_Error_class(rc, &cls); CHECK(cls == MPI_ERR_TAG, "bad tag");
    rc = MPI_Send(&x, -1, MPI_INT, 0, 0, MPI_COMM_WORLD); MPI_Error_class(rc, &cls); CHECK(cls == MPI_ERR_COUNT, "bad count");
    rc = MPI_Send(NULL, 3, MPI_INT, 0, 0, MPI_COMM_WORLD); MPI_Error_class(rc, &cls); CHECK(cls == MPI_ERR_BUFFER, "null buffer");
    rc = MPI_Send(&x, 1, MPI_DATATYPE_NULL, 0, 0, MPI_COMM_WORLD); CHECK(rc == MPI_ERR_TYPE, "null type");
    MPI_Datatype unc;
    MPI_Type_contiguous(1, MPI_INT, &unc);
    rc = MPI_Send(&x, 1, unc, 0, 0, MPI_COMM_WORLD); CHECK(rc == MPI_ERR_TYPE, "uncommitted type");
    MPI_Datatype freed = unc;
    MPI_Type_free(&unc);
    rc = MPI_Send(&x, 1, freed, 0, 0, MPI_COMM_WORLD); CHECK(rc == MPI_ERR_TYPE, "freed type");
    MPI_Comm fc;
    MPI_Comm_dup(MPI_COMM_WORLD, &fc);
    MPI_Comm stale = fc;
    MPI_Comm_free(&fc);
    rc = MPI_Barrier(stale); CHECK(rc == MPI_ERR_COMM, "freed comm %d", rc);
    rc = MPI_Barrier(MPI_COMM_NULL); CHECK(rc == MPI_ERR_COMM, "null comm");
    rc = MPI_Bcast(&x, 1, MPI_INT, size + 3, MPI_COMM_WORLD); CHECK(rc == MPI_ERR_ROOT, "bad root");
    rc = MPI_Allreduce(&x, &x, 1, MPI_INT, MPI_MINLOC, MPI_COMM_WORLD); CHECK(rc == MPI_ERR_OP, "bad op/type");
    MPI_Request bad = (MPI_Request)(intptr_t)0x123456789;
    rc = MPI_Wait(&bad, MPI_STATUS_IGNORE); CHECK(rc == MPI_ERR_REQUEST, "bad request");
    rc = MPI_Comm_free_keyval(&(int){424242}); CHECK(rc == MPI_ERR_KEYVAL, "bad keyval");
    /* A declared-but-unsupported function reports itself. */
    rc = MPI_File_delete("/nonexistent/gridwire-test", MPI_INFO_NULL);
    CHECK(rc == MPI_ERR_UNSUPPORTED_OPERATION, "unsupported %d", rc);
    char msg[MPI_MAX_ERROR_STRING]; int mlen;
    MPI_Error_string(MPI_ERR_RANK, msg, &mlen);
    CHECK(mlen > 0 && strstr(msg, "rank") != NULL, "error string %s", msg);

    /* User error handler. */
    MPI_Errhandler mine;
    MPI_Comm_create_errhandler(my_handler, &mine);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, mine);
    rc = MPI_Send(&x, 1, MPI_INT, -7, 0, MPI_COMM_WORLD);
    CHECK(handler_calls == 1 && handler_code == rc && rc == MPI_ERR_RANK, "user handler %d %d", handler_calls, handler_code);
    MPI_Comm_call_errhandler(MPI_COMM_WORLD, MPI_ERR_OTHER);
    CHECK(handler_calls == 2 && handler_code == MPI_ERR_OTHER, "call_errhandler");
    MPI_Errhandler_free(&mine);
    /* User error classes/codes. */
    int ncls, ncode;
    MPI_Add_error_class(&ncls);
    MPI_Add_error_code(ncls, &ncode);
    MPI_Add_error_string(ncode, "my very own error");
    MPI_Error_string(ncode, msg, &mlen);
    CHECK(strcmp(msg, "my very own error") == 0, "added error string");
    MPI_Error_class(ncode, &cls); CHECK(cls == ncls, "added class");
    /* Removing them: not while a string or (for a class) codes remain, not twice. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    CHECK(MPI_Remove_error_class(ncls) != MPI_SUCCESS, "removed a class that has a code");
    CHECK(MPI_Remove_error_code(ncode) != MPI_SUCCESS, "removed a code that has a string");
    CHECK(MPI_Remove_error_code(ncls) != MPI_SUCCESS, "removed a class as a code");
    CHECK(MPI_Remove_error_class(MPI_ERR_ARG) != MPI_SUCCESS, "removed a predefined class");
    CHECK(MPI_Remove_error_string(ncode) == MPI_SUCCESS, "remove string");
    MPI_Error_string(ncode, msg, &mlen);
    CHECK(mlen == 0, "removed string still there: %s", msg);
    CHECK(MPI_Remove_error_code(ncode) == MPI_SUCCESS, "remove code");
    CHECK(MPI_Remove_error_code(ncode) != MPI_SUCCESS, "removed a code twice");
    CHECK(MPI_Remove_error_class(ncls) == MPI_SUCCESS, "remove class");
    CHECK(MPI_Remove_error_class(ncls) != MPI_SUCCESS, "removed a class twice");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);

    /* Environment queries. */
    char pname[MPI_MAX_PROCESSOR_NAME]; int plen;
    MPI_Get_processor_name(pname, &plen);
    CHECK(plen > 0 && (int)strlen(pname) == plen, "processor name");
    char lib[MPI_MAX_LIBRARY_VERSION_STRING]; int llen;
    MPI_Get_library_version(lib, &llen);
    CHECK(strstr(lib, "gridwire") != NULL, "library version %s", lib);
    int major, minor;
    MPI_Abi_get_version(&major, &minor);
    CHECK(major == 1 && minor == 0, "abi version");
    int prov, main_;
    MPI_Query_thread(&prov);
    MPI_Is_thread_main(&main_);
    CHECK(main_ == 1 && prov == MPI_THREAD_SINGLE, "threads");

    /* A copy callback that fails makes MPI_Comm_dup fail with its error and
     * give MPI_COMM_NULL; the attributes already copied are deleted again. */
    {
        MPI_Comm base, d = MPI_COMM_WORLD;
        int kgood, kbad, before;
        MPI_Comm_dup(MPI_COMM_WORLD, &base);
        MPI_Comm_create_keyval(copy_fn, delete_fn, &kgood, NULL);
        MPI_Comm_create_keyval(failing_copy_fn, MPI_COMM_NULL_DELETE_FN, &kbad, NULL);
        MPI_Comm_set_attr(base, kgood, (void *)100);
        MPI_Comm_set_attr(base, kbad, (void *)200);
        MPI_Comm_set_errhandler(base, MPI_ERRORS_RETURN);
        before = deletes;
        int rc = MPI_Comm_dup(base, &d);
        MPI_Error_class(rc, &cls);
        CHECK(rc != MPI_SUCCESS && cls == MPI_ERR_OTHER, "dup with a failing copy callback: rc %d class %d", rc, cls);
        CHECK(d == MPI_COMM_NULL, "dup with a failing copy callback gave a communicator");
        CHECK(deletes == before + 1, "the attribute copied before the failure was not deleted (%d deletes)", deletes - before);
        MPI_Comm_delete_attr(base, kbad);
        MPI_Comm_free(&base);
        MPI_Comm_free_keyval(&kgood);
        MPI_Comm_free_keyval(&kbad);
    }

    /* Freeing a datatype runs its attributes' delete callbacks. */
    {
        MPI_Datatype t;
        int kt;
        MPI_Type_contiguous(3, MPI_INT, &t);
        MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, type_delete_fn, &kt, NULL);
        MPI_Type_set_attr(t, kt, (void *)5);
        type_deletes = 0;
        MPI_Type_free(&t);
        CHECK(type_deletes == 5, "type free ran %d delete callbacks' worth", type_deletes);
        MPI_Type_free_keyval(&kt);
    }

    /* Set in the order 1, 0, 2 (keyvals made 0, 1, 2): deleted 2, 0, 1. */
    for (int i = 0; i < 3; i++)
        MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, self_delete_fn, &self_keys[i], NULL);
    MPI_Comm_set_attr(MPI_COMM_SELF, self_keys[1], (void *)1);
    MPI_Comm_set_attr(MPI_COMM_SELF, self_keys[0], (void *)0);
    MPI_Comm_set_attr(MPI_COMM_SELF, self_keys[2], (void *)2);
    /* PASS comes from the last delete callback, inside MPI_Finalize. */
    MPI_Finalize();
    return 0;
}
