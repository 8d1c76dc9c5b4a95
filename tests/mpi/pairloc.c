/* MPI_MINLOC / MPI_MAXLOC on every predefined pair type, with ties (the
 * smaller index wins), several elements (the C struct's extent, padding
 * included), MPI_Allreduce and MPI_Reduce to the last rank. MPI_LONG_DOUBLE_INT
 * uses values that differ only beyond a double's precision (x87 80-bit). */
#include "check.h"

#define NELEM 3
static int rank, size;

/* The value of element k at rank r. */
static long double value(int r, int k) {
    switch (k) {
    case 0: return r % 2;                      /* ties among the odd and the even ranks */
    case 1: return size - r;                   /* decreasing */
    default: return 1.0L + r / 1152921504606846976.0L; /* r * 2^-60: only long double tells them apart */
    }
}

/* The expected (value index) of element k: smaller index on ties. */
static void expect(int k, int max, long double *v, int *idx) {
    *v = value(0, k); *idx = 0;
    for (int r = 1; r < size; r++) {
        long double x = value(r, k);
        if (max ? x > *v : x < *v) { *v = x; *idx = r; }
    }
}

#define CHECK_PAIR(T, IT, DT, NAME) do { \
    struct { T v; IT i; } in[NELEM], out[NELEM]; \
    for (int max = 0; max < 2; max++) { \
        MPI_Op op = max ? MPI_MAXLOC : MPI_MINLOC; \
        for (int root = -1; root < 1; root++) { \
            for (int k = 0; k < NELEM; k++) { \
                in[k].v = (T)value(rank, k); in[k].i = (IT)rank; \
                out[k].v = (T)-77; out[k].i = (IT)-77; \
            } \
            if (root < 0) \
                CHECK(MPI_Allreduce(in, out, NELEM, DT, op, MPI_COMM_WORLD) == MPI_SUCCESS, "%s allreduce", NAME); \
            else \
                CHECK(MPI_Reduce(in, out, NELEM, DT, op, size - 1, MPI_COMM_WORLD) == MPI_SUCCESS, "%s reduce", NAME); \
            if (root >= 0 && rank != size - 1) continue; \
            for (int k = 0; k < NELEM; k++) { \
                long double ev; int ei; expect(k, max, &ev, &ei); \
                /* Compare in T: types narrower than long double round ties together. */ \
                T want = (T)ev; \
                int wi = ei; \
                if (sizeof(T) < sizeof(long double)) { \
                    /* Recompute the expected index with values rounded to T. */ \
                    for (int r = 0; r < size; r++) if ((T)value(r, k) == want) { wi = r; break; } \
                } \
                CHECK(out[k].v == want && (int)out[k].i == wi, "%s %s elem %d: got (%Lg, %d) want (%Lg, %d)", \
                      NAME, max ? "MAXLOC" : "MINLOC", k, (long double)out[k].v, (int)out[k].i, (long double)want, wi); \
            } \
        } \
    } } while (0)

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    /* The pair types' extents are their C structs' (padding included). */
    MPI_Aint lb, ext;
    MPI_Type_get_extent(MPI_LONG_DOUBLE_INT, &lb, &ext);
    CHECK(ext == sizeof(struct { long double v; int i; }), "long_double_int extent %ld", (long)ext);
    MPI_Type_get_extent(MPI_SHORT_INT, &lb, &ext);
    CHECK(ext == sizeof(struct { short v; int i; }), "short_int extent %ld", (long)ext);

    CHECK_PAIR(float, int, MPI_FLOAT_INT, "MPI_FLOAT_INT");
    CHECK_PAIR(double, int, MPI_DOUBLE_INT, "MPI_DOUBLE_INT");
    CHECK_PAIR(long, int, MPI_LONG_INT, "MPI_LONG_INT");
    CHECK_PAIR(int, int, MPI_2INT, "MPI_2INT");
    CHECK_PAIR(short, int, MPI_SHORT_INT, "MPI_SHORT_INT");
    CHECK_PAIR(long double, int, MPI_LONG_DOUBLE_INT, "MPI_LONG_DOUBLE_INT");
    /* The Fortran pair types (value and index of the same type). */
    if (MPI_2REAL != MPI_DATATYPE_NULL) CHECK_PAIR(float, float, MPI_2REAL, "MPI_2REAL");
    if (MPI_2DOUBLE_PRECISION != MPI_DATATYPE_NULL) CHECK_PAIR(double, double, MPI_2DOUBLE_PRECISION, "MPI_2DOUBLE_PRECISION");
    if (MPI_2INTEGER != MPI_DATATYPE_NULL) CHECK_PAIR(int, int, MPI_2INTEGER, "MPI_2INTEGER");

    PASS("pairloc");
    MPI_Finalize();
    return 0;
}
