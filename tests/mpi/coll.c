/* Collectives: every operation, MPI_IN_PLACE, predefined ops incl. MINLOC/MAXLOC, user ops. */
#include "check.h"
#include <string.h>
#include <complex.h>

/* Non-commutative: 2x2 integer matrix product, row-major. */
static void matmul(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    int *a = in, *b = inout;
    for (int k = 0; k < *len; k++, a += 4, b += 4) {
        int c[4] = {a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3],
                    a[2] * b[0] + a[3] * b[2], a[2] * b[1] + a[3] * b[3]};
        memcpy(b, c, sizeof c);
    }
}

/* A commutative user op: element-wise sum of 3-int records. */
static void add_triples(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    int *a = in, *b = inout;
    for (int i = 0; i < 3 * *len; i++) b[i] += a[i];
}

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int n = size;

    /* Gather / Gatherv / Scatter / Scatterv, every root, in place too. */
    for (int root = 0; root < n; root++) {
        int mine[2] = {rank, rank * rank}, all[128];
        memset(all, -1, sizeof all);
        MPI_Gather(mine, 2, MPI_INT, all, 2, MPI_INT, root, MPI_COMM_WORLD);
        if (rank == root) for (int i = 0; i < n; i++) CHECK(all[2 * i] == i && all[2 * i + 1] == i * i, "gather");
        if (rank == root) {
            for (int i = 0; i < 2 * n; i++) all[i] = -1;
            all[2 * root] = root; all[2 * root + 1] = root * root;
            MPI_Gather(MPI_IN_PLACE, 2, MPI_INT, all, 2, MPI_INT, root, MPI_COMM_WORLD);
            for (int i = 0; i < n; i++) CHECK(all[2 * i] == i, "gather in place");
        } else {
            MPI_Gather(mine, 2, MPI_INT, NULL, 0, MPI_INT, root, MPI_COMM_WORLD);
        }
        int counts[64], displs[64], tot = 0;
        for (int i = 0; i < n; i++) { counts[i] = i % 3; displs[i] = tot + 1; tot += counts[i] + 1; }
        int vals[3] = {rank, rank + 100, rank + 200}, gv[256];
        memset(gv, -1, sizeof gv);
        MPI_Gatherv(vals, rank % 3, MPI_INT, gv, counts, displs, MPI_INT, root, MPI_COMM_WORLD);
        if (rank == root)
            for (int i = 0; i < n; i++)
                for (int j = 0; j < counts[i]; j++) CHECK(gv[displs[i] + j] == i + 100 * j, "gatherv");
        int sc[128], got[2] = {-1, -1};
        for (int i = 0; i < 2 * n; i++) sc[i] = i * 7;
        MPI_Scatter(sc, 2, MPI_INT, got, 2, MPI_INT, root, MPI_COMM_WORLD);
        CHECK(got[0] == 14 * rank && got[1] == 14 * rank + 7, "scatter");
        int sv[3] = {-1, -1, -1};
        for (int i = 0; i < n; i++) for (int j = 0; j < counts[i]; j++) gv[displs[i] + j] = i * 10 + j;
        MPI_Scatterv(gv, counts, displs, MPI_INT, sv, rank % 3, MPI_INT, root, MPI_COMM_WORLD);
        for (int j = 0; j < rank % 3; j++) CHECK(sv[j] == rank * 10 + j, "scatterv");
        if (rank == root) MPI_Scatter(sc, 2, MPI_INT, MPI_IN_PLACE, 2, MPI_INT, root, MPI_COMM_WORLD);
        else MPI_Scatter(NULL, 0, MPI_INT, got, 2, MPI_INT, root, MPI_COMM_WORLD);
    }

    /* Allgather(v), in place. */
    {
        long mine = rank * 3L, all[64];
        MPI_Allgather(&mine, 1, MPI_LONG, all, 1, MPI_LONG, MPI_COMM_WORLD);
        for (int i = 0; i < n; i++) CHECK(all[i] == i * 3L, "allgather");
        for (int i = 0; i < n; i++) all[i] = i == rank ? rank * 5L : -1;
        MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, 1, MPI_LONG, MPI_COMM_WORLD);
        for (int i = 0; i < n; i++) CHECK(all[i] == i * 5L, "allgather in place");
        int counts[64], displs[64], tot = 0, buf[512];
        for (int i = 0; i < n; i++) { counts[i] = i + 1; displs[i] = tot; tot += i + 1; }
        int vals[64];
        for (int j = 0; j <= rank; j++) vals[j] = rank * 100 + j;
        MPI_Allgatherv(vals, rank + 1, MPI_INT, buf, counts, displs, MPI_INT, MPI_COMM_WORLD);
        for (int i = 0; i < n; i++) for (int j = 0; j <= i; j++) CHECK(buf[displs[i] + j] == i * 100 + j, "allgatherv");
        /* large allgather (rendezvous blocks) */
        int m = 50000;
        int *big = malloc(sizeof(int) * m), *bigall = malloc(sizeof(int) * m * n);
        for (int i = 0; i < m; i++) big[i] = rank + i;
        MPI_Allgather(big, m, MPI_INT, bigall, m, MPI_INT, MPI_COMM_WORLD);
        for (int r = 0; r < n; r++) for (int i = 0; i < m; i += 997) CHECK(bigall[r * m + i] == r + i, "big allgather");
        free(big); free(bigall);
    }

    /* Alltoall(v,w), in place. */
    {
        int s[64], r[64];
        for (int i = 0; i < n; i++) s[i] = rank * 1000 + i;
        MPI_Alltoall(s, 1, MPI_INT, r, 1, MPI_INT, MPI_COMM_WORLD);
        for (int i = 0; i < n; i++) CHECK(r[i] == i * 1000 + rank, "alltoall");
        MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, s, 1, MPI_INT, MPI_COMM_WORLD);
        for (int i = 0; i < n; i++) CHECK(s[i] == i * 1000 + rank, "alltoall in place");
        int sc[64], sd[64], rc[64], rd[64], sb[1024], rb[1024], st = 0, rt = 0;
        for (int i = 0; i < n; i++) {
            sc[i] = (rank + i) % 3; sd[i] = st; st += sc[i];
            rc[i] = (rank + i) % 3; rd[i] = rt; rt += rc[i];
        }
        for (int i = 0; i < n; i++) for (int j = 0; j < sc[i]; j++) sb[sd[i] + j] = rank * 100 + i * 10 + j;
        MPI_Alltoallv(sb, sc, sd, MPI_INT, rb, rc, rd, MPI_INT, MPI_COMM_WORLD);
        for (int i = 0; i < n; i++) for (int j = 0; j < rc[i]; j++) CHECK(rb[rd[i] + j] == i * 100 + rank * 10 + j, "alltoallv");
        MPI_Datatype ts[64];
        int bd[64], brd[64];
        for (int i = 0; i < n; i++) { ts[i] = MPI_INT; bd[i] = sd[i] * (int)sizeof(int); brd[i] = rd[i] * (int)sizeof(int); }
        memset(rb, 0, sizeof rb);
        MPI_Alltoallw(sb, sc, bd, ts, rb, rc, brd, ts, MPI_COMM_WORLD);
        for (int i = 0; i < n; i++) for (int j = 0; j < rc[i]; j++) CHECK(rb[rd[i] + j] == i * 100 + rank * 10 + j, "alltoallw");
    }

    /* Every predefined op on a matching type. */
    {
        int iv = rank + 1, io;
        MPI_Allreduce(&iv, &io, 1, MPI_INT, MPI_PROD, MPI_COMM_WORLD);
        int f = 1; for (int i = 2; i <= n; i++) f *= i;
        CHECK(io == f, "prod");
        MPI_Allreduce(&iv, &io, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD); CHECK(io == 1, "min");
        unsigned bits = 1u << rank, bo;
        MPI_Allreduce(&bits, &bo, 1, MPI_UNSIGNED, MPI_BOR, MPI_COMM_WORLD); CHECK(bo == (1u << n) - 1, "bor");
        MPI_Allreduce(&bits, &bo, 1, MPI_UNSIGNED, MPI_BAND, MPI_COMM_WORLD); CHECK(bo == (n == 1 ? 1u : 0u), "band");
        MPI_Allreduce(&bits, &bo, 1, MPI_UNSIGNED, MPI_BXOR, MPI_COMM_WORLD); CHECK(bo == (1u << n) - 1, "bxor");
        int t = rank == 0, lo;
        MPI_Allreduce(&t, &lo, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD); CHECK(lo == 1, "lor");
        MPI_Allreduce(&t, &lo, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD); CHECK(lo == (n == 1), "land");
        MPI_Allreduce(&t, &lo, 1, MPI_INT, MPI_LXOR, MPI_COMM_WORLD); CHECK(lo == 1, "lxor");
        _Bool b = rank % 2, bb;
        MPI_Allreduce(&b, &bb, 1, MPI_C_BOOL, MPI_LOR, MPI_COMM_WORLD); CHECK(bb == (n > 1), "c_bool lor");
        float fl = rank * 0.5f, flo;
        MPI_Allreduce(&fl, &flo, 1, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD); CHECK(flo == (n - 1) * 0.5f, "float max");
        long long ll = rank, llo;
        MPI_Allreduce(&ll, &llo, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD); CHECK(llo == n * (n - 1) / 2, "ll sum");
        unsigned char uc = (unsigned char)(rank + 250), uco;
        MPI_Allreduce(&uc, &uco, 1, MPI_UNSIGNED_CHAR, MPI_MAX, MPI_COMM_WORLD); CHECK(uco == (unsigned char)(n - 1 + 250) || n > 6, "uchar");
        double _Complex z = rank + 1.0 * _Complex_I, zo;
        MPI_Allreduce(&z, &zo, 1, MPI_C_DOUBLE_COMPLEX, MPI_SUM, MPI_COMM_WORLD);
        CHECK(__real__ zo == n * (n - 1) / 2.0 && __imag__ zo == n, "complex sum");
        struct { double v; int i; } di = { (double)((rank * 7) % n), rank }, dio;
        MPI_Allreduce(&di, &dio, 1, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD);
        int wantr = 0; double best = -1;
        for (int r = 0; r < n; r++) if ((r * 7) % n > best) { best = (r * 7) % n; wantr = r; }
        CHECK(dio.v == best && dio.i == wantr, "maxloc %g %d", dio.v, dio.i);
        struct { int v; int i; } ii[2] = {{rank % 2, rank}, {-rank, rank}}, iio[2];
        MPI_Allreduce(ii, iio, 2, MPI_2INT, MPI_MINLOC, MPI_COMM_WORLD);
        CHECK(iio[0].v == 0 && iio[0].i == 0, "minloc ties: lowest index");
        CHECK(iio[1].v == -(n - 1) && iio[1].i == n - 1, "minloc");
        struct { short v; int i; } si = {(short)rank, rank}, sio;
        MPI_Reduce(&si, &sio, 1, MPI_SHORT_INT, MPI_MAXLOC, 0, MPI_COMM_WORLD);
        if (rank == 0) CHECK(sio.v == n - 1 && sio.i == n - 1, "short_int maxloc");
        int lr[2] = {3, rank}, lro[2] = {0, 0};
        MPI_Reduce_local(lr, lro, 2, MPI_INT, MPI_SUM);
        CHECK(lro[0] == 3 && lro[1] == rank, "reduce_local");
    }

    /* User op, non-commutative, through Reduce (every root), Allreduce and Scan. */
    {
        MPI_Op op;
        MPI_Op_create(matmul, 0, &op);
        int comm_flag;
        MPI_Op_commutative(op, &comm_flag);
        CHECK(comm_flag == 0, "commutative flag");
        int m[4] = {1, rank, 0, 1}; /* [[1,r],[0,1]]: products add the r's, but order matters with the next one */
        int m2[4] = {rank + 1, 0, rank, 1};
        int want[4] = {1, 0, 0, 1};
        for (int r = 0; r < n; r++) {
            int a[4] = {r + 1, 0, r, 1}, c[4];
            c[0] = want[0] * a[0] + want[1] * a[2]; c[1] = want[0] * a[1] + want[1] * a[3];
            c[2] = want[2] * a[0] + want[3] * a[2]; c[3] = want[2] * a[1] + want[3] * a[3];
            memcpy(want, c, sizeof c);
        }
        (void)m;
        for (int root = 0; root < n; root++) {
            int out[4] = {0};
            MPI_Datatype mat;
            MPI_Type_contiguous(4, MPI_INT, &mat);
            MPI_Type_commit(&mat);
            MPI_Reduce(m2, out, 1, mat, op, root, MPI_COMM_WORLD);
            if (rank == root) CHECK(memcmp(out, want, sizeof want) == 0, "noncommutative reduce root %d: %d %d %d %d", root, out[0], out[1], out[2], out[3]);
            int all[4];
            MPI_Allreduce(m2, all, 1, mat, op, MPI_COMM_WORLD);
            CHECK(memcmp(all, want, sizeof want) == 0, "noncommutative allreduce");
            MPI_Type_free(&mat);
        }
        MPI_Op_free(&op);
        CHECK(op == MPI_OP_NULL, "op free");
    }

    /* Large allreduce (reduce-scatter + allgather from 64 KiB with a
     * commutative op): a count that no power of two divides, every element
     * distinct, a user commutative op on a 3-int type, and in place. */
    {
        const int cnt = 20011; /* 80 KB of int: above the split */
        int *in = malloc(cnt * sizeof(int)), *out = malloc(cnt * sizeof(int));
        double *din = malloc(cnt * sizeof(double)), *dout = malloc(cnt * sizeof(double));
        for (int i = 0; i < cnt; i++) { in[i] = i * 7 + rank; din[i] = 0.5 * i + rank; }
        MPI_Allreduce(in, out, cnt, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        int bad = -1;
        for (int i = 0; i < cnt && bad < 0; i++)
            if (out[i] != n * i * 7 + n * (n - 1) / 2) bad = i;
        CHECK(bad < 0, "large int allreduce: element %d is %d", bad, bad < 0 ? 0 : out[bad]);
        MPI_Allreduce(MPI_IN_PLACE, din, cnt, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        for (int i = 0; i < cnt && bad < 0; i++)
            if (din[i] != 0.5 * i + (n - 1)) bad = i;
        CHECK(bad < 0, "large in-place double max: element %d", bad);
        MPI_Op add3;
        MPI_Op_create(add_triples, 1, &add3);
        MPI_Datatype triple;
        MPI_Type_contiguous(3, MPI_INT, &triple);
        MPI_Type_commit(&triple);
        int tcnt = cnt / 3;
        MPI_Allreduce(in, out, tcnt, triple, add3, MPI_COMM_WORLD);
        for (int i = 0; i < 3 * tcnt && bad < 0; i++)
            if (out[i] != n * i * 7 + n * (n - 1) / 2) bad = i;
        CHECK(bad < 0, "large user-op allreduce: element %d", bad);
        MPI_Type_free(&triple);
        MPI_Op_free(&add3);
        free(in); free(out); free(din); free(dout);
    }

    /* Large Reduce (a rendezvous on every link) from every root: a leaf
     * sends its own buffer, the root sums into its receive buffer (later
     * children through a temporary), in place, and a strided type (its
     * data packed first). */
    {
        const int cnt = 20011;
        int *in = malloc(2 * cnt * sizeof(int)), *out = malloc(2 * cnt * sizeof(int));
        MPI_Datatype strided;
        MPI_Type_vector(cnt, 1, 2, MPI_INT, &strided);
        MPI_Type_commit(&strided);
        for (int root = 0; root < n; root++) {
            int bad = -1;
            for (int i = 0; i < cnt; i++) { in[i] = i * 3 + rank; out[i] = -1; }
            MPI_Reduce(in, out, cnt, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD);
            if (rank == root)
                for (int i = 0; i < cnt && bad < 0; i++)
                    if (out[i] != n * i * 3 + n * (n - 1) / 2) bad = i;
            CHECK(bad < 0, "large reduce to %d: element %d", root, bad);
#ifdef GRIDWIRE_MPI
            /* In place at this size, Debian's MPICH 4.0 crashes in its own
             * memcpy (this file also runs under MPICH); gridwire only. */
            if (rank == root) {
                for (int i = 0; i < cnt; i++) out[i] = i * 3 + rank;
                MPI_Reduce(MPI_IN_PLACE, out, cnt, MPI_INT, MPI_MAX, root, MPI_COMM_WORLD);
                for (int i = 0; i < cnt && bad < 0; i++)
                    if (out[i] != i * 3 + n - 1) bad = i;
            } else {
                MPI_Reduce(in, NULL, cnt, MPI_INT, MPI_MAX, root, MPI_COMM_WORLD);
            }
            CHECK(bad < 0, "large in-place reduce to %d: element %d", root, bad);
#endif
#ifdef GRIDWIRE_MPI
            /* A predefined operation on a derived type of one predefined
             * type: gridwire takes it (MPI 4.1 allows it); MPICH refuses
             * it, and this file also runs under MPICH. */
            for (int i = 0; i < 2 * cnt; i++) { in[i] = i % 2 ? -5 : i * 3 + rank; out[i] = -1; }
            MPI_Reduce(in, out, 1, strided, MPI_SUM, root, MPI_COMM_WORLD);
            if (rank == root)
                for (int i = 0; i < 2 * cnt && bad < 0; i++)
                    if (out[i] != (i % 2 ? -1 : n * i * 3 + n * (n - 1) / 2)) bad = i;
            CHECK(bad < 0, "large strided reduce to %d: element %d", root, bad);
#endif
        }
        MPI_Type_free(&strided);
        free(in); free(out);
    }

    /* Scan / Exscan, in place. */
    {
        int v = rank + 1, s, e = -7;
        MPI_Scan(&v, &s, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        CHECK(s == (rank + 1) * (rank + 2) / 2, "scan %d", s);
        MPI_Exscan(&v, &e, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        if (rank > 0) CHECK(e == rank * (rank + 1) / 2, "exscan %d", e);
        s = v;
        MPI_Scan(MPI_IN_PLACE, &s, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        CHECK(s == (rank + 1) * (rank + 2) / 2, "scan in place");
    }

    /* Reduce_scatter(_block), in place. */
    {
        int counts[64], tot = 0;
        for (int i = 0; i < n; i++) { counts[i] = i % 2 + 1; tot += counts[i]; }
        int in[256], out[4];
        for (int i = 0; i < tot; i++) in[i] = i + rank;
        MPI_Reduce_scatter(in, out, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        int off = 0;
        for (int i = 0; i < rank; i++) off += counts[i];
        for (int j = 0; j < counts[rank]; j++) CHECK(out[j] == n * (off + j) + n * (n - 1) / 2, "reduce_scatter");
        int ib[128], ob[2];
        for (int i = 0; i < 2 * n; i++) ib[i] = i;
        MPI_Reduce_scatter_block(ib, ob, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        CHECK(ob[0] == 2 * rank && ob[1] == 2 * rank + 1, "reduce_scatter_block");
        MPI_Reduce_scatter_block(MPI_IN_PLACE, ib, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        CHECK(ib[0] == n * 2 * rank && ib[1] == n * (2 * rank + 1), "reduce_scatter_block in place");
    }

    /* Reduce in place at the root; bcast of a derived type. */
    {
        int v[2] = {rank, 1};
        for (int root = 0; root < n; root++) {
            int w[2] = {rank, 1};
            if (rank == root) MPI_Reduce(MPI_IN_PLACE, w, 2, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD);
            else MPI_Reduce(w, NULL, 2, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD);
            if (rank == root) CHECK(w[0] == n * (n - 1) / 2 && w[1] == n, "reduce in place");
        }
        (void)v;
        MPI_Datatype vec;
        MPI_Type_vector(3, 1, 2, MPI_INT, &vec);
        MPI_Type_commit(&vec);
        int a[6] = {-1, -1, -1, -1, -1, -1};
        if (rank == 0) for (int i = 0; i < 6; i++) a[i] = i;
        MPI_Bcast(a, 1, vec, 0, MPI_COMM_WORLD);
        if (rank != 0) CHECK(a[0] == 0 && a[2] == 2 && a[4] == 4 && a[1] == -1 && a[5] == -1, "bcast vector");
        MPI_Type_free(&vec);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    PASS("coll");
    MPI_Finalize();
    return 0;
}
