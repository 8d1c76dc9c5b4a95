! `use mpi` (Fortran 90) through gridwire: ring, allreduce, MPI_Type_vector,
! nonblocking requests with MPI_Waitall/MPI_Waitany and their statuses,
! MPI_STATUS_IGNORE, MPI_IN_PLACE, names, user handles, and a wrong handle
! giving an error class. Rank 0 prints "PASS f90_mpi" when every rank agreed.
program f90_mpi
  use mpi
  implicit none
  integer :: ierr, rank, nproc, left, right, i, cls, cnt, idx, dup, vec, bad
  integer :: reqs(2), stats(MPI_STATUS_SIZE, 2), st(MPI_STATUS_SIZE)
  integer :: sendv(5), recvv(5), mat(3, 4), col(4), total, resultlen, finfo
  double precision :: x
  logical :: flag
  character(len=MPI_MAX_OBJECT_NAME) :: name
  character(len=16) :: value
  integer(kind=MPI_ADDRESS_KIND) :: tagub
  integer :: op, vals(2), sums(2)
  external :: int_sum, on_error
  integer :: errh, seen_comm, seen_code
  common /errh_seen/ seen_comm, seen_code
  integer :: bsbuf(1000)

  call MPI_Init(ierr)
  call check(ierr == MPI_SUCCESS, 'MPI_Init')
  call MPI_Initialized(flag, ierr)
  call check(flag, 'MPI_Initialized is .true.')
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nproc, ierr)
  call MPI_Sizeof(x, i, ierr)
  call check(i == 8 .and. ierr == MPI_SUCCESS, 'MPI_Sizeof of DOUBLE PRECISION')
  call PMPI_Comm_size(MPI_COMM_WORLD, i, ierr)
  call check(i == nproc, 'the profiling name PMPI_Comm_size')
  right = mod(rank + 1, nproc)
  left = mod(rank - 1 + nproc, nproc)

  ! Ring with nonblocking requests; statuses checked.
  sendv = [(rank * 10 + i, i = 1, 5)]
  recvv = -1
  call MPI_Irecv(recvv, 5, MPI_INTEGER, left, 7, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Isend(sendv, 5, MPI_INTEGER, right, 7, MPI_COMM_WORLD, reqs(2), ierr)
  call MPI_Waitall(2, reqs, stats, ierr)
  call check(ierr == MPI_SUCCESS, 'MPI_Waitall')
  call check(all(reqs == MPI_REQUEST_NULL), 'requests are MPI_REQUEST_NULL after MPI_Waitall')
  call check(stats(MPI_SOURCE, 1) == left, 'status source')
  call check(stats(MPI_TAG, 1) == 7, 'status tag')
  call MPI_Get_count(stats(:, 1), MPI_INTEGER, cnt, ierr)
  call check(cnt == 5, 'MPI_Get_count')
  call check(all(recvv == [(left * 10 + i, i = 1, 5)]), 'ring data')

  ! MPI_Waitany: the index counts from 1.
  call MPI_Irecv(recvv, 1, MPI_INTEGER, left, 8, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Send(rank, 1, MPI_INTEGER, right, 8, MPI_COMM_WORLD, ierr)
  call MPI_Waitany(1, reqs, idx, st, ierr)
  call MPI_F_sync_reg(recvv)
  call check(idx == 1, 'MPI_Waitany index is 1-based')
  call check(recvv(1) == left .and. st(MPI_SOURCE) == left, 'MPI_Waitany data and status')

  ! Blocking ring with MPI_STATUS_IGNORE.
  call MPI_Sendrecv(rank, 1, MPI_INTEGER, right, 9, i, 1, MPI_INTEGER, left, 9, &
                    MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  call check(ierr == MPI_SUCCESS .and. i == left, 'MPI_Sendrecv with MPI_STATUS_IGNORE')

  ! Buffered send through an attached buffer, then detached.
  call MPI_Buffer_attach(bsbuf, 4000, ierr)
  call MPI_Bsend(rank, 1, MPI_INTEGER, right, 13, MPI_COMM_WORLD, ierr)
  call MPI_Recv(i, 1, MPI_INTEGER, left, 13, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  call check(ierr == MPI_SUCCESS .and. i == left, 'MPI_Bsend')
  call MPI_Buffer_detach(bsbuf, cnt, ierr)
  call check(ierr == MPI_SUCCESS .and. cnt == 4000, 'MPI_Buffer_detach size')

  ! Allreduce, and MPI_IN_PLACE.
  call MPI_Allreduce(rank, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call check(total == nproc * (nproc - 1) / 2, 'MPI_Allreduce sum')
  x = dble(rank) + 0.5d0
  call MPI_Allreduce(MPI_IN_PLACE, x, 1, MPI_DOUBLE_PRECISION, MPI_MAX, MPI_COMM_WORLD, ierr)
  call check(x == dble(nproc - 1) + 0.5d0, 'MPI_Allreduce MPI_IN_PLACE max')

  ! A strided row of a 3x4 matrix (column-major) with MPI_Type_vector.
  call MPI_Type_vector(4, 1, 3, MPI_INTEGER, vec, ierr)
  call MPI_Type_commit(vec, ierr)
  call check(vec /= MPI_DATATYPE_NULL, 'MPI_Type_vector handle')
  mat = reshape([(rank * 100 + i, i = 1, 12)], [3, 4])
  col = -1
  call MPI_Sendrecv(mat(2, 1), 1, vec, right, 10, col, 4, MPI_INTEGER, left, 10, &
                    MPI_COMM_WORLD, st, ierr)
  call check(all(col == [(left * 100 + 2 + 3 * i, i = 0, 3)]), 'vector type data')
  call MPI_Get_count(st, MPI_INTEGER, cnt, ierr)
  call check(cnt == 4, 'count of the vector message')
  call MPI_Type_free(vec, ierr)
  call check(vec == MPI_DATATYPE_NULL, 'MPI_Type_free sets MPI_DATATYPE_NULL')

  ! Names (CHARACTER arguments) and a user communicator.
  call MPI_Comm_get_name(MPI_COMM_WORLD, name, resultlen, ierr)
  call check(name == 'MPI_COMM_WORLD' .and. resultlen == 14, 'MPI_Comm_get_name')
  call MPI_Comm_dup(MPI_COMM_WORLD, dup, ierr)
  call MPI_Comm_set_name(dup, 'fortran dup  ', ierr)
  call MPI_Comm_get_name(dup, name, resultlen, ierr)
  call check(trim(name) == 'fortran dup' .and. resultlen == 11, 'name of a user communicator')
  call MPI_Barrier(dup, ierr)
  ! A Fortran error handler: called with the Fortran handle and the code.
  call MPI_Comm_create_errhandler(on_error, errh, ierr)
  call check(ierr == MPI_SUCCESS, 'MPI_Comm_create_errhandler')
  call MPI_Comm_set_errhandler(dup, errh, ierr)
  seen_comm = -1
  seen_code = -1
  call MPI_Comm_call_errhandler(dup, MPI_ERR_TAG, ierr)
  call check(seen_comm == dup .and. seen_code == MPI_ERR_TAG, 'the Fortran error handler ran')
  call MPI_Errhandler_free(errh, ierr)
  call MPI_Comm_free(dup, ierr)
  call check(dup == MPI_COMM_NULL, 'MPI_Comm_free sets MPI_COMM_NULL')

  ! A user-defined reduction: a Fortran subroutine called by the C library.
  call MPI_Op_create(int_sum, .true., op, ierr)
  call check(ierr == MPI_SUCCESS .and. op /= MPI_OP_NULL, 'MPI_Op_create')
  vals = [rank + 1, 2 * rank]
  call MPI_Allreduce(vals, sums, 2, MPI_INTEGER, op, MPI_COMM_WORLD, ierr)
  call check(all(sums == [nproc * (nproc + 1) / 2, nproc * (nproc - 1)]), 'user op')
  call MPI_Op_free(op, ierr)
  call check(op == MPI_OP_NULL, 'MPI_Op_free')

  ! A predefined attribute: the value, not C's pointer to it.
  call MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, tagub, flag, ierr)
  call check(flag .and. tagub >= 32767 .and. tagub <= huge(1), 'MPI_TAG_UB attribute')

  ! The MPI 5.0 ABI's Fortran information: libmpifort announced itself at MPI_Init.
  call MPI_Abi_get_fortran_info(finfo, ierr)
  call check(ierr == MPI_SUCCESS .and. finfo /= MPI_INFO_NULL, 'MPI_Abi_get_fortran_info')
  call MPI_Info_get(finfo, 'mpi_fortran_bindings', 16, value, flag, ierr)
  call check(flag .and. value == 'true', 'mpi_fortran_bindings is true')
  call MPI_Info_get(finfo, 'no_such_key', 16, value, flag, ierr)
  call check(.not. flag, 'MPI_Info_get of a missing key: flag is .false.')
  call MPI_Info_free(finfo, ierr)
  call check(finfo == MPI_INFO_NULL, 'MPI_Info_free')

  ! A wrong handle is an error class, not a crash.
  call MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN, ierr)
  bad = 12345
  call MPI_Send(rank, 1, MPI_INTEGER, right, 0, bad, ierr)
  call check(ierr /= MPI_SUCCESS, 'MPI_Send on an invalid communicator fails')
  call MPI_Error_class(ierr, cls, ierr)
  call check(cls == MPI_ERR_COMM, 'invalid communicator is MPI_ERR_COMM')
  call MPI_Send(rank, 1, bad, right, 0, MPI_COMM_WORLD, ierr)
  call MPI_Error_class(ierr, cls, ierr)
  call check(cls == MPI_ERR_TYPE, 'invalid datatype is MPI_ERR_TYPE')

  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  if (rank == 0) print '(a)', 'PASS f90_mpi'
  call MPI_Finalize(ierr)
contains
  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    integer :: e
    if (.not. ok) then
      print '(a,i0,a,a)', 'FAIL rank ', rank, ': ', what
      call MPI_Abort(MPI_COMM_WORLD, 1, e)
    end if
  end subroutine check
end program f90_mpi

! The user function of MPI_Op_create: elementwise sum of INTEGERs; a wrong
! datatype handle makes the result wrong, so the check above catches it.
subroutine int_sum(invec, inoutvec, len, datatype)
  use mpi, only: MPI_INTEGER
  implicit none
  integer :: len, datatype, i
  integer :: invec(len), inoutvec(len)
  do i = 1, len
    inoutvec(i) = invec(i) + inoutvec(i)
    if (datatype /= MPI_INTEGER) inoutvec(i) = -1
  end do
end subroutine int_sum

! The error handler of MPI_Comm_create_errhandler: records what it was given.
subroutine on_error(comm, code)
  implicit none
  integer :: comm, code, seen_comm, seen_code
  common /errh_seen/ seen_comm, seen_code
  seen_comm = comm
  seen_code = code
end subroutine on_error
