/* Fetch_and_op + flush to a target that computes without calling MPI (a
 * window from MPI_Win_create): rank 1 spins until rank 0 has done N
 * operations and put a flag into its memory; rank 0 times them. Without
 * progress at the target (MPICH, Open MPI) they never complete. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define N 2000
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank; MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    long *mem = calloc(2, sizeof(long));
    MPI_Win win;
    MPI_Win_create(mem, 2 * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {
        volatile double x = 0;
        while (__atomic_load_n(&mem[1], __ATOMIC_ACQUIRE) == 0) x += 1.0; /* computes, no MPI */
    } else {
        long one = 1, old, flag = 1;
        MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win);
        double t0 = MPI_Wtime();
        for (int i = 0; i < N; i++) {
            MPI_Fetch_and_op(&one, &old, MPI_LONG, 1, 0, MPI_SUM, win);
            MPI_Win_flush(1, win);
        }
        double t = MPI_Wtime() - t0;
        MPI_Put(&flag, 1, MPI_LONG, 1, 1, 1, MPI_LONG, win);
        MPI_Win_unlock(1, win);
        printf("fop+flush to a computing target: %.2f us per op (last value %ld)\n", t / N * 1e6, old);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_free(&win);
    MPI_Finalize();
    return 0;
}
