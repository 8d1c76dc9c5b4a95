! osu-style ping-pong latency between ranks 0 and 1 through `use mpi_f08`
! (bench/fortran.sh builds it with gwfort and with MPICH's mpifort).
!   latency_f08 [iterations]   prints "lat SIZE MICROSECONDS" per size (one-way),
!   then "bw SIZE MB/s" (osu_bw: windows of 64 nonblocking sends, one reply each)
program latency_f08
  use mpi_f08
  implicit none
  integer, parameter :: sizes(5) = [0, 8, 64, 1024, 8192]
  integer, parameter :: bw_sizes(3) = [65536, 1048576, 4194304], window = 64
  integer :: rank, s, i, n, iters, warm, w, loops
  type(MPI_Request) :: reqs(window)
  character(len=1), allocatable :: big(:)
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
  allocate (big(maxval(bw_sizes)))
  big = 'b'
  do s = 1, size(bw_sizes)
    n = bw_sizes(s)
    loops = max(4, 400 / (n / 65536))
    do i = 1, loops + 2
      if (i == 3) then
        call MPI_Barrier(MPI_COMM_WORLD)
        t0 = MPI_Wtime()
      end if
      if (rank == 0) then
        do w = 1, window
          call MPI_Isend(big, n, MPI_CHARACTER, 1, 2, MPI_COMM_WORLD, reqs(w))
        end do
        call MPI_Waitall(window, reqs, MPI_STATUSES_IGNORE)
        call MPI_Recv(rbuf, 0, MPI_CHARACTER, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE)
      else if (rank == 1) then
        do w = 1, window
          call MPI_Irecv(big, n, MPI_CHARACTER, 0, 2, MPI_COMM_WORLD, reqs(w))
        end do
        call MPI_Waitall(window, reqs, MPI_STATUSES_IGNORE)
        call MPI_Send(sbuf, 0, MPI_CHARACTER, 0, 3, MPI_COMM_WORLD)
      end if
    end do
    t = MPI_Wtime() - t0
    if (rank == 0) print '(a,i0,1x,f0.1)', 'bw ', n, dble(n) * window * loops / t / 1d6
  end do
  call MPI_Finalize()
end program latency_f08
