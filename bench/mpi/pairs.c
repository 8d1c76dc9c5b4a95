#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
/* Oversubscription: every rank ping-pongs 8 bytes with rank^1, all pairs at
 * once, so with more ranks than cores partners share cores and each message
 * waits for the scheduler. Prints rank 0's one-way latency in µs.
 *   pairs ITERS      (run with an even number of ranks) */
int main(int c, char **v) { MPI_Init(&c, &v); char b[8]; int n = c > 1 ? atoi(v[1]) : 2000, r; MPI_Comm_rank(MPI_COMM_WORLD, &r);
  int p = r ^ 1;
  MPI_Barrier(MPI_COMM_WORLD);
  double t = MPI_Wtime();
  for (int i = 0; i < n; i++) {
    if (r < p) { MPI_Send(b, 8, MPI_BYTE, p, 1, MPI_COMM_WORLD); MPI_Recv(b, 8, MPI_BYTE, p, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE); }
    else { MPI_Recv(b, 8, MPI_BYTE, p, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE); MPI_Send(b, 8, MPI_BYTE, p, 1, MPI_COMM_WORLD); }
  }
  t = MPI_Wtime() - t;
  if (r == 0) printf("%.3f\n", t / n / 2 * 1e6);
  MPI_Finalize(); return 0; }
