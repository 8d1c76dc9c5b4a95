/* MPI_ERRORS_ARE_FATAL (the default): an invalid rank aborts the job with a
 * message naming the function, the error class and the rank. Expected to fail. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
    int rank, size, x = 1;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0) MPI_Send(&x, 1, MPI_INT, size + 1, 0, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    printf("NOT REACHED\n");
    MPI_Finalize();
    return 0;
}
