! Cost of one call through each binding, in one process: MPI_Comm_rank,
! MPI_Type_size and MPI_Send to MPI_PROC_NULL (a buffer argument) from `use mpi`
! (mpi_comm_rank_ ...) and from `use mpi_f08` (MPI_Comm_rank_f08 ...), ns per call;
! each loop of n calls is repeated reps times and every repetition printed
! (bench/fortran.sh keeps the fastest). callcost_c.c does the same in C; the
! difference is what the Fortran layer adds to a call (the goal: <= 5 ns).
program callcost_f
  use mpi_f08, only: MPI_Init, MPI_Finalize, MPI_Wtime, f08_comm_rank => MPI_Comm_rank, &
                     f08_type_size => MPI_Type_size, f08_world => MPI_COMM_WORLD, f08_double => MPI_DOUBLE_PRECISION, &
                     f08_send => MPI_Send, f08_integer => MPI_INTEGER
  use mpi, only: mpi_comm_rank, mpi_type_size, mpi_send, MPI_COMM_WORLD, MPI_DOUBLE_PRECISION, MPI_INTEGER, &
                 MPI_PROC_NULL
  implicit none
  integer, parameter :: n = 1000000, reps = 10
  integer :: i, rep, r, sz, ierr, acc, buf(8)
  double precision :: t0

  call MPI_Init()
  acc = 0
  buf = 1
  do rep = 1, reps
    t0 = MPI_Wtime()
    do i = 1, n
      call mpi_comm_rank(MPI_COMM_WORLD, r, ierr)
      acc = acc + r
    end do
    print '(a,f0.2)', 'use_mpi comm_rank ns ', (MPI_Wtime() - t0) / n * 1d9
    t0 = MPI_Wtime()
    do i = 1, n
      call f08_comm_rank(f08_world, r, ierr)
      acc = acc + r
    end do
    print '(a,f0.2)', 'mpi_f08 comm_rank ns ', (MPI_Wtime() - t0) / n * 1d9
    t0 = MPI_Wtime()
    do i = 1, n
      call mpi_type_size(MPI_DOUBLE_PRECISION, sz, ierr)
      acc = acc + sz
    end do
    print '(a,f0.2)', 'use_mpi type_size ns ', (MPI_Wtime() - t0) / n * 1d9
    t0 = MPI_Wtime()
    do i = 1, n
      call f08_type_size(f08_double, sz, ierr)
      acc = acc + sz
    end do
    print '(a,f0.2)', 'mpi_f08 type_size ns ', (MPI_Wtime() - t0) / n * 1d9
    t0 = MPI_Wtime()
    do i = 1, n
      call mpi_send(buf, 8, MPI_INTEGER, MPI_PROC_NULL, 0, MPI_COMM_WORLD, ierr)
      acc = acc + ierr
    end do
    print '(a,f0.2)', 'use_mpi send_proc_null ns ', (MPI_Wtime() - t0) / n * 1d9
    t0 = MPI_Wtime()
    do i = 1, n
      call f08_send(buf, 8, f08_integer, MPI_PROC_NULL, 0, f08_world, ierr)
      acc = acc + ierr
    end do
    print '(a,f0.2)', 'mpi_f08 send_proc_null ns ', (MPI_Wtime() - t0) / n * 1d9
  end do
  if (acc < 0) print *, acc
  call MPI_Finalize()
end program callcost_f
