/* The C side of callcost_f.f90: ns per MPI_Comm_rank, MPI_Type_size and
 * MPI_Send-to-MPI_PROC_NULL call; each loop of N calls is repeated REPS times and
 * every repetition printed (bench/fortran.sh keeps the fastest: the machine is shared). */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    enum { N = 1000000, REPS = 10 };
    int r, sz, buf[8] = {1};
    long acc = 0;
    MPI_Init(&argc, &argv);
    for (int rep = 0; rep < REPS; rep++) {
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
        t0 = MPI_Wtime();
        for (int i = 0; i < N; i++) acc += MPI_Send(buf, 8, MPI_INTEGER, MPI_PROC_NULL, 0, MPI_COMM_WORLD);
        printf("c send_proc_null ns %.2f\n", (MPI_Wtime() - t0) / N * 1e9);
    }
    if (acc < 0) printf("%ld\n", acc);
    MPI_Finalize();
    return 0;
}
