/* The C side of callcost_f.f90: ns per MPI_Comm_rank and MPI_Type_size call. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    enum { N = 10000000 };
    int r, sz;
    long acc = 0;
    MPI_Init(&argc, &argv);
    double t0 = MPI_Wtime();
    for (int i = 0; i < N; i++) {
        MPI_Comm_rank(MPI_COMM_WORLD, &r);
        acc += r;
    }
    printf("c comm_rank ns %.2f\n", (MPI_Wtime() - t0) / N * 1e9);
    t0 = MPI_Wtime();
    for (int i = 0; i < N; i++) {
        MPI_Type_size(MPI_DOUBLE_PRECISION, &sz); /* the type the Fortran loop asks about */
        acc += sz;
    }
    printf("c type_size ns %.2f\n", (MPI_Wtime() - t0) / N * 1e9);
    if (acc < 0) printf("%ld\n", acc);
    MPI_Finalize();
    return 0;
}
