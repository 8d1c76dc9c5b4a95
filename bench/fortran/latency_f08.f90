! osu-style ping-pong latency between ranks 0 and 1 through `use mpi_f08`
! (bench/fortran.sh builds it with gwfort and with MPICH's mpifort).
!   latency_f08 [iterations]   prints "lat SIZE MICROSECONDS" per size (one-way)
program latency_f08
  use mpi_f08
  implicit none
  integer, parameter :: sizes(5) = [0, 8, 64, 1024, 8192]
  integer :: rank, s, i, n, iters, warm
  character(len=32) :: arg
  character(len=1), allocatable :: sbuf(:), rbuf(:)
  double precision :: t0, t

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  iters = 20000
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read (arg, *) iters
  end if
  warm = iters / 10
  allocate (sbuf(maxval(sizes) + 1), rbuf(maxval(sizes) + 1))
  sbuf = 'a'
  do s = 1, size(sizes)
    n = sizes(s)
    do i = 1, warm + iters
      if (i == warm + 1) then
        call MPI_Barrier(MPI_COMM_WORLD)
        t0 = MPI_Wtime()
      end if
      if (rank == 0) then
        call MPI_Send(sbuf, n, MPI_CHARACTER, 1, 1, MPI_COMM_WORLD)
        call MPI_Recv(rbuf, n, MPI_CHARACTER, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE)
      else if (rank == 1) then
        call MPI_Recv(rbuf, n, MPI_CHARACTER, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE)
        call MPI_Send(sbuf, n, MPI_CHARACTER, 0, 1, MPI_COMM_WORLD)
      end if
    end do
    t = MPI_Wtime() - t0
    if (rank == 0) print '(a,i0,1x,f0.3)', 'lat ', n, t / (2d0 * iters) * 1d6
  end do
  call MPI_Finalize()
end program latency_f08
