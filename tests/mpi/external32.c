/* MPI_Pack_external / MPI_Unpack_external / MPI_Pack_external_size with
 * "external32": big-endian bytes of the standard's sizes, round trips of
 * basic, derived and struct types, a message in that format between
 * ranks, and the errors of bad arguments. */
#include "check.h"
#include <stddef.h>
#include <string.h>

struct rec { int i; double d; short s; };

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    unsigned char buf[256];
    MPI_Aint pos = 0, sz;

    /* Sizes: the standard's external32 table. */
    MPI_Pack_external_size("external32", 3, MPI_INT, &sz);
    CHECK(sz == 12, "3 ints: %ld", (long)sz);
    MPI_Pack_external_size("external32", 1, MPI_LONG, &sz);
    CHECK(sz == 4, "long: %ld", (long)sz);
    MPI_Pack_external_size("external32", 1, MPI_LONG_LONG, &sz);
    CHECK(sz == 8, "long long: %ld", (long)sz);
    MPI_Pack_external_size("external32", 1, MPI_LONG_INT, &sz);
    CHECK(sz == 8, "long_int: %ld", (long)sz);
    MPI_Pack_external_size("external32", 1, MPI_LONG_DOUBLE, &sz);
    CHECK(sz == 16, "long double: %ld", (long)sz);
    MPI_Pack_external_size("external32", 2, MPI_DOUBLE_INT, &sz);
    CHECK(sz == 24, "double_int: %ld", (long)sz);

    /* Big-endian bytes. */
    int iv[2] = {0x01020304, -2};
    MPI_Pack_external("external32", iv, 2, MPI_INT, buf, sizeof buf, &pos);
    CHECK(pos == 8, "position %ld", (long)pos);
    unsigned char want_i[8] = {1, 2, 3, 4, 0xff, 0xff, 0xff, 0xfe};
    CHECK(memcmp(buf, want_i, 8) == 0, "ints big-endian");
    double dv = 1.0;
    MPI_Pack_external("external32", &dv, 1, MPI_DOUBLE, buf, sizeof buf, &pos);
    unsigned char want_d[8] = {0x3f, 0xf0, 0, 0, 0, 0, 0, 0};
    CHECK(pos == 16 && memcmp(buf + 8, want_d, 8) == 0, "double big-endian");
    long double lv = 1.0L;
    MPI_Pack_external("external32", &lv, 1, MPI_LONG_DOUBLE, buf, sizeof buf, &pos);
    CHECK(pos == 32 && buf[16] == 0x3f && buf[17] == 0xff && buf[18] == 0, "long double as binary128");
    /* ... and back. */
    MPI_Aint upos = 0;
    int iback[2];
    double dback;
    long double lback;
    MPI_Unpack_external("external32", buf, pos, &upos, iback, 2, MPI_INT);
    MPI_Unpack_external("external32", buf, pos, &upos, &dback, 1, MPI_DOUBLE);
    MPI_Unpack_external("external32", buf, pos, &upos, &lback, 1, MPI_LONG_DOUBLE);
    CHECK(upos == 32 && iback[0] == iv[0] && iback[1] == iv[1] && dback == 1.0 && lback == 1.0L, "round trip");

    /* A long is 4 bytes in external32: cut going out, sign-extended back. */
    long lv2[2] = {-3, 0x01020304};
    unsigned char lb[8];
    MPI_Aint lpos = 0;
    MPI_Pack_external("external32", lv2, 2, MPI_LONG, lb, sizeof lb, &lpos);
    unsigned char want_l[8] = {0xff, 0xff, 0xff, 0xfd, 1, 2, 3, 4};
    CHECK(lpos == 8 && memcmp(lb, want_l, 8) == 0, "longs as 4 bytes");
    long lback2[2] = {0, 0};
    MPI_Aint lup = 0;
    MPI_Unpack_external("external32", lb, lpos, &lup, lback2, 2, MPI_LONG);
    CHECK(lup == 8 && lback2[0] == -3 && lback2[1] == 0x01020304, "longs back");

    /* A struct with holes and a vector: converted member by member. */
    MPI_Datatype st, vec;
    int bl[3] = {1, 1, 1};
    MPI_Aint disp[3] = {offsetof(struct rec, i), offsetof(struct rec, d), offsetof(struct rec, s)};
    MPI_Datatype types[3] = {MPI_INT, MPI_DOUBLE, MPI_SHORT};
    MPI_Type_create_struct(3, bl, disp, types, &st);
    MPI_Type_commit(&st);
    MPI_Type_vector(2, 1, 2, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    struct rec r[2] = {{7, -0.5, 3}, {-9, 1e10, -4}}, rb[2];
    memset(rb, 0, sizeof rb);
    pos = 0;
    MPI_Pack_external_size("external32", 2, st, &sz);
    CHECK(sz == 28, "struct size %ld", (long)sz);
    MPI_Pack_external("external32", r, 2, st, buf, sizeof buf, &pos);
    CHECK(pos == 28 && buf[3] == 7 && buf[4] == 0xbf && buf[5] == 0xe0 && buf[12] == 0 && buf[13] == 3, "struct bytes");
    upos = 0;
    MPI_Unpack_external("external32", buf, pos, &upos, rb, 2, st);
    CHECK(rb[0].i == 7 && rb[0].d == -0.5 && rb[0].s == 3 && rb[1].i == -9 && rb[1].d == 1e10 && rb[1].s == -4, "struct round trip");
    int strided[3] = {0x0a0b0c0d, 5, 0x11223344}, sb[3] = {0, 0, 0};
    pos = 0;
    MPI_Pack_external("external32", strided, 1, vec, buf, sizeof buf, &pos);
    CHECK(pos == 8 && buf[0] == 0x0a && buf[7] == 0x44, "vector bytes");
    upos = 0;
    MPI_Unpack_external("external32", buf, pos, &upos, sb, 1, vec);
    CHECK(sb[0] == strided[0] && sb[1] == 0 && sb[2] == strided[2], "vector round trip");

    /* A message in external32 between ranks. */
    if (size > 1 && rank < 2) {
        double data[3] = {3.25, -1.0, 65536.0};
        if (rank == 0) {
            pos = 0;
            MPI_Pack_external("external32", data, 3, MPI_DOUBLE, buf, sizeof buf, &pos);
            MPI_Send(buf, (int)pos, MPI_BYTE, 1, 4, MPI_COMM_WORLD);
        } else {
            double got[3];
            MPI_Recv(buf, sizeof buf, MPI_BYTE, 0, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            CHECK(buf[0] == 0x40 && buf[1] == 0x0a, "big-endian on the wire");
            upos = 0;
            MPI_Unpack_external("external32", buf, 24, &upos, got, 3, MPI_DOUBLE);
            CHECK(got[0] == 3.25 && got[1] == -1.0 && got[2] == 65536.0, "received values");
        }
    }

    /* Bad arguments. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    pos = 0;
    CHECK(MPI_Pack_external("native", iv, 1, MPI_INT, buf, sizeof buf, &pos) == MPI_ERR_UNSUPPORTED_DATAREP, "datarep");
    CHECK(MPI_Pack_external_size("little", 1, MPI_INT, &sz) == MPI_ERR_UNSUPPORTED_DATAREP, "datarep of size");
    CHECK(MPI_Pack_external("external32", iv, 2, MPI_INT, buf, 6, &pos) == MPI_ERR_TRUNCATE, "no room");
    CHECK(pos == 0, "position unchanged after an error");
    CHECK(MPI_Pack_external("external32", iv, 1, MPI_INT, buf, sizeof buf, NULL) == MPI_ERR_ARG, "NULL position");
    pos = 0;
    CHECK(MPI_Pack_external("external32", iv, 1, MPI_INT, NULL, 64, &pos) == MPI_ERR_BUFFER, "NULL output");
    upos = 0;
    CHECK(MPI_Unpack_external("external32", NULL, 64, &upos, iback, 1, MPI_INT) == MPI_ERR_BUFFER, "NULL input");
    upos = 4;
    CHECK(MPI_Unpack_external("external32", buf, 6, &upos, iback, 1, MPI_INT) == MPI_ERR_TRUNCATE, "input too short");
    CHECK(MPI_Unpack_external("external32", buf, 6, &upos, iback, -1, MPI_INT) == MPI_ERR_COUNT, "negative count");
    CHECK(MPI_Pack_external("external32", iv, 1, MPI_DATATYPE_NULL, buf, sizeof buf, &pos) == MPI_ERR_TYPE, "null type");
    MPI_Count csz;
    MPI_Pack_external_size_c("external32", 5, MPI_SHORT, &csz);
    CHECK(csz == 10, "_c size");

    MPI_Type_free(&st);
    MPI_Type_free(&vec);
    MPI_Barrier(MPI_COMM_WORLD);
    PASS("external32");
    MPI_Finalize();
    return 0;
}
