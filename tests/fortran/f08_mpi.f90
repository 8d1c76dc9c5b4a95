! `use mpi_f08` through gridwire: TYPE(MPI_Comm)/TYPE(MPI_Status) handles,
! TYPE(*), DIMENSION(..) buffers, optional ierror; ring, allreduce,
! MPI_Type_vector, nonblocking requests with MPI_Waitall and statuses,
! MPI_STATUS_IGNORE, MPI_IN_PLACE, a wrong handle giving an error class, and
! a non-contiguous section refused with MPI_ERR_BUFFER. Rank 0 prints "PASS f08_mpi".
program f08_mpi
  use mpi_f08
  use, intrinsic :: iso_c_binding, only: c_int, c_ptr, c_loc, c_intptr_t, c_f_pointer
  implicit none
  ! The C library's status conversions (C-only functions, called here through BIND(C)).
  interface
    integer(c_int) function status_f082f(s08, sf) bind(C, name="MPI_Status_f082f")
      import :: MPI_Status, c_int
      type(MPI_Status), intent(in) :: s08
      integer(c_int), intent(out) :: sf(*)
    end function status_f082f
    integer(c_int) function status_f2f08(sf, s08) bind(C, name="MPI_Status_f2f08")
      import :: MPI_Status, c_int
      integer(c_int), intent(in) :: sf(*)
      type(MPI_Status), intent(out) :: s08
    end function status_f2f08
  end interface
  integer(c_int) :: fstat(MPI_STATUS_SIZE)
  procedure(MPI_User_function) :: f08_int_sum
  procedure(MPI_User_function_c) :: f08_int_sum_c
  type(MPI_Op) :: op
  integer :: vals(2), sums(2)
  integer(kind=MPI_COUNT_KIND) :: ccount
  type(MPI_Info) :: inf
  integer :: buflen
  character(len=32) :: val
  character(len=8) :: short
  integer, target :: bsbuf(1000)
  type(c_ptr) :: detached
  integer :: kv
  integer(kind=MPI_ADDRESS_KIND) :: aval
  type(c_ptr) :: mem
  integer, pointer :: arr(:)
  type(MPI_Info) :: envinfo
  type(MPI_Status) :: st2
  integer :: ierr, rank, nproc, left, right, i, cls, cnt, total, resultlen
  type(MPI_Request) :: reqs(2)
  type(MPI_Status) :: stats(2), st
  type(MPI_Datatype) :: vec, dupt
  type(MPI_Comm) :: dup
  integer :: sendv(5), recvv(5), mat(3, 4), col(4)
  real(8) :: x(3)
  logical :: flag
  character(len=MPI_MAX_OBJECT_NAME) :: name

  call MPI_Init()
  call MPI_Initialized(flag)
  call check(flag, 'MPI_Initialized is .true.')
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nproc, ierr)
  call check(ierr == MPI_SUCCESS, 'ierror present')
  call MPI_Sizeof(x, i)
  call check(i == 8, 'MPI_Sizeof of REAL(8) array')
  call MPI_Sizeof(ierr, i)
  call check(i == 4, 'MPI_Sizeof of INTEGER')
  call PMPI_Comm_size(MPI_COMM_WORLD, i)
  call check(i == nproc, 'the profiling name PMPI_Comm_size')
  right = mod(rank + 1, nproc)
  left = mod(rank - 1 + nproc, nproc)

  ! Ring with nonblocking requests; statuses checked.
  sendv = [(rank * 10 + i, i = 1, 5)]
  recvv = -1
  call MPI_Irecv(recvv, 5, MPI_INTEGER, left, 7, MPI_COMM_WORLD, reqs(1))
  call MPI_Isend(sendv, 5, MPI_INTEGER, right, 7, MPI_COMM_WORLD, reqs(2))
  call MPI_Waitall(2, reqs, stats, ierr)
  call check(ierr == MPI_SUCCESS, 'MPI_Waitall')
  call check(reqs(1) == MPI_REQUEST_NULL .and. reqs(2) == MPI_REQUEST_NULL, 'requests are null')
  call check(stats(1)%MPI_SOURCE == left .and. stats(1)%MPI_TAG == 7, 'status source and tag')
  call MPI_Get_count(stats(1), MPI_INTEGER, cnt)
  call check(cnt == 5, 'MPI_Get_count')
  call check(all(recvv == [(left * 10 + i, i = 1, 5)]), 'ring data')

  ! The large-count forms (MPI_Sendrecv_f08c, MPI_Get_count_f08c) by the kind of the counts.
  recvv = -1
  call MPI_Sendrecv(sendv, 5_MPI_COUNT_KIND, MPI_INTEGER, right, 12, recvv, 5_MPI_COUNT_KIND, &
                    MPI_INTEGER, left, 12, MPI_COMM_WORLD, st)
  call MPI_Get_count(st, MPI_INTEGER, ccount)
  call check(ccount == 5_MPI_COUNT_KIND .and. all(recvv == [(left * 10 + i, i = 1, 5)]), &
             'large-count MPI_Sendrecv and MPI_Get_count')

  ! Blocking ring with MPI_STATUS_IGNORE (and MPI_STATUSES_IGNORE).
  call MPI_Irecv(i, 1, MPI_INTEGER, left, 9, MPI_COMM_WORLD, reqs(1))
  call MPI_Send(rank, 1, MPI_INTEGER, right, 9, MPI_COMM_WORLD)
  call MPI_Wait(reqs(1), MPI_STATUS_IGNORE)
  call MPI_F_sync_reg(i)
  call check(i == left, 'MPI_Wait with MPI_STATUS_IGNORE')
  call MPI_Irecv(i, 1, MPI_INTEGER, left, 11, MPI_COMM_WORLD, reqs(1))
  call MPI_Isend(rank, 1, MPI_INTEGER, right, 11, MPI_COMM_WORLD, reqs(2))
  call MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE)
  call check(i == left, 'MPI_Waitall with MPI_STATUSES_IGNORE')

  ! Allreduce, and MPI_IN_PLACE on an array.
  call MPI_Allreduce(rank, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
  call check(total == nproc * (nproc - 1) / 2, 'MPI_Allreduce sum')
  x = [dble(rank), -dble(rank), 1d0]
  call MPI_Allreduce(MPI_IN_PLACE, x, 3, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD)
  call check(all(x == [dble(total), -dble(total), dble(nproc)]), 'MPI_Allreduce MPI_IN_PLACE')

  ! A strided row of a 3x4 matrix with MPI_Type_vector.
  call MPI_Type_vector(4, 1, 3, MPI_INTEGER, vec)
  call MPI_Type_commit(vec)
  mat = reshape([(rank * 100 + i, i = 1, 12)], [3, 4])
  col = -1
  call MPI_Sendrecv(mat(2, 1), 1, vec, right, 10, col, 4, MPI_INTEGER, left, 10, &
                    MPI_COMM_WORLD, st)
  call check(all(col == [(left * 100 + 2 + 3 * i, i = 0, 3)]), 'vector type data')
  call MPI_Get_count(st, MPI_INTEGER, cnt)
  call check(cnt == 4 .and. st%MPI_SOURCE == left, 'count and source of the vector message')
  call check(status_f082f(st, fstat) == MPI_SUCCESS, 'MPI_Status_f082f')
  call check(fstat(MPI_SOURCE) == left .and. fstat(MPI_TAG) == 10, 'MPI_Status_f082f fields')
  call check(status_f2f08(fstat, st2) == MPI_SUCCESS, 'MPI_Status_f2f08')
  call MPI_Get_count(st2, MPI_INTEGER, cnt)
  call check(st2%MPI_SOURCE == left .and. cnt == 4, 'status after f082f and f2f08')
  ! The same through mpi_f08's own MPI_Status_f082f / MPI_Status_f2f08.
  fstat = -1
  call MPI_Status_f082f(st, fstat)
  call check(fstat(MPI_SOURCE) == left .and. fstat(MPI_TAG) == 10, 'MPI_Status_f082f (Fortran)')
  st2%MPI_SOURCE = -1
  call MPI_Status_f2f08(fstat, st2, ierr)
  call check(ierr == MPI_SUCCESS .and. st2%MPI_SOURCE == left .and. st2%MPI_TAG == 10, 'MPI_Status_f2f08 (Fortran)')
  call MPI_Type_free(vec)
  call check(vec == MPI_DATATYPE_NULL, 'MPI_Type_free sets MPI_DATATYPE_NULL')

  ! A user-defined reduction through the mpi_f08 interface of MPI_User_function.
  call MPI_Op_create(f08_int_sum, .true., op)
  vals = [rank + 1, 2 * rank]
  call MPI_Allreduce(vals, sums, 2, MPI_INTEGER, op, MPI_COMM_WORLD, ierr)
  call check(ierr == MPI_SUCCESS, 'MPI_Allreduce with a user op')
  call check(all(sums == [nproc * (nproc + 1) / 2, nproc * (nproc - 1)]), 'user op')
  call MPI_Op_free(op)
  call check(op == MPI_OP_NULL, 'MPI_Op_free')

  ! The same with a large-count user function (MPI_Op_create_c, mpi_f08 only).
  call MPI_Op_create_c(f08_int_sum_c, .true., op)
  call MPI_Allreduce(vals, sums, 2, MPI_INTEGER, op, MPI_COMM_WORLD, ierr)
  call check(ierr == MPI_SUCCESS .and. all(sums == [nproc * (nproc + 1) / 2, nproc * (nproc - 1)]), &
       'user op with MPI_COUNT_KIND length')
  call MPI_Op_free(op)

  ! MPI_Info_get_string: buflen counts no NUL in Fortran, and a short string is cut.
  call MPI_Info_create(inf)
  call MPI_Info_set(inf, 'colour', 'ultramarine')
  buflen = len(val)
  call MPI_Info_get_string(inf, 'colour', buflen, val, flag)
  call check(flag .and. buflen == 11 .and. val == 'ultramarine', 'MPI_Info_get_string')
  buflen = len(short)
  call MPI_Info_get_string(inf, 'colour', buflen, short, flag)
  call check(flag .and. buflen == 11 .and. short == 'ultramar', 'MPI_Info_get_string into a short string')
  call MPI_Info_get_string(inf, 'shade', buflen, short, flag)
  call check(.not. flag, 'MPI_Info_get_string of a missing key')
  call MPI_Info_free(inf)

  ! Buffered send; MPI_Buffer_detach gives the buffer's address as TYPE(C_PTR).
  call MPI_Buffer_attach(bsbuf, 4000)
  call MPI_Bsend(rank, 1, MPI_INTEGER, right, 13, MPI_COMM_WORLD)
  call MPI_Recv(i, 1, MPI_INTEGER, left, 13, MPI_COMM_WORLD, MPI_STATUS_IGNORE)
  call MPI_Buffer_detach(detached, cnt)
  ! (Compared as integers: gfortran may fold c_associated(detached, c_loc(bsbuf)) to
  ! .false., reasoning that bsbuf's address did not outlive the attach call.)
  call check(i == left .and. cnt == 4000 .and. &
             transfer(detached, 0_c_intptr_t) == transfer(c_loc(bsbuf), 0_c_intptr_t), 'MPI_Buffer_detach')

  ! MPI_Alloc_mem gives TYPE(C_PTR); the memory is a receive buffer, then freed.
  call MPI_Alloc_mem(4000_MPI_ADDRESS_KIND, MPI_INFO_NULL, mem, ierr)
  call check(ierr == MPI_SUCCESS, 'MPI_Alloc_mem')
  call c_f_pointer(mem, arr, [1000])
  arr = -1
  call MPI_Sendrecv(sendv, 5, MPI_INTEGER, right, 14, arr, 5, MPI_INTEGER, left, 14, &
                    MPI_COMM_WORLD, MPI_STATUS_IGNORE)
  call check(all(arr(1:5) == [(left * 10 + i, i = 1, 5)]) .and. arr(6) == -1, 'receive into MPI_Alloc_mem memory')
  call MPI_Free_mem(arr, ierr)
  call check(ierr == MPI_SUCCESS, 'MPI_Free_mem')
  call MPI_Info_create_env(envinfo, ierr)
  call check(ierr == MPI_SUCCESS .and. envinfo /= MPI_INFO_NULL, 'MPI_Info_create_env')
  call MPI_Info_free(envinfo)

  ! A datatype attribute copied by the predefined MPI_TYPE_DUP_FN.
  call MPI_Type_create_keyval(MPI_TYPE_DUP_FN, MPI_TYPE_NULL_DELETE_FN, kv, 0_MPI_ADDRESS_KIND)
  call MPI_Type_contiguous(2, MPI_INTEGER, vec)
  call MPI_Type_set_attr(vec, kv, 99_MPI_ADDRESS_KIND)
  call MPI_Type_dup(vec, dupt)
  call MPI_Type_get_attr(dupt, kv, aval, flag)
  call check(flag .and. aval == 99, 'MPI_TYPE_DUP_FN')
  call MPI_Type_free(dupt)
  call MPI_Type_free(vec)
  call MPI_Type_free_keyval(kv)

  ! Names and a user communicator.
  call MPI_Comm_dup(MPI_COMM_WORLD, dup)
  call MPI_Comm_set_name(dup, 'f08 dup')
  call MPI_Comm_get_name(dup, name, resultlen)
  call check(trim(name) == 'f08 dup' .and. resultlen == 7, 'MPI_Comm_get_name')
  call MPI_Comm_free(dup)
  call check(dup == MPI_COMM_NULL, 'MPI_Comm_free sets MPI_COMM_NULL')

  ! Wrong arguments are error classes, not crashes.
  call MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN)
  call MPI_Send(rank, 1, MPI_INTEGER, right, 0, MPI_Comm(12345), ierr)
  call check(ierr /= MPI_SUCCESS, 'MPI_Send on an invalid communicator fails')
  call MPI_Error_class(ierr, cls)
  call check(cls == MPI_ERR_COMM, 'invalid communicator is MPI_ERR_COMM')
  call MPI_Send(mat(1, :), 4, MPI_INTEGER, right, 0, MPI_COMM_WORLD, ierr)
  call MPI_Error_class(ierr, cls)
  call check(cls == MPI_ERR_BUFFER, 'non-contiguous section is MPI_ERR_BUFFER')

  call MPI_Barrier(MPI_COMM_WORLD)
  if (rank == 0) print '(a)', 'PASS f08_mpi'
  call MPI_Finalize()
contains
  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    if (.not. ok) then
      print '(a,i0,a,a)', 'FAIL rank ', rank, ': ', what
      call MPI_Abort(MPI_COMM_WORLD, 1)
    end if
  end subroutine check
end program f08_mpi

! MPI_User_function of mpi_f08: TYPE(C_PTR) buffers, TYPE(MPI_Datatype).
subroutine f08_int_sum(invec, inoutvec, len, datatype)
  use mpi_f08, only: MPI_Datatype, MPI_INTEGER, operator(==)
  use, intrinsic :: iso_c_binding, only: c_ptr, c_f_pointer
  implicit none
  type(c_ptr), value :: invec, inoutvec
  integer :: len
  type(MPI_Datatype) :: datatype
  integer, pointer :: a(:), b(:)
  call c_f_pointer(invec, a, [len])
  call c_f_pointer(inoutvec, b, [len])
  b = a + b
  if (.not. (datatype == MPI_INTEGER)) b = -1
end subroutine f08_int_sum

subroutine f08_int_sum_c(invec, inoutvec, len, datatype)
  use mpi_f08, only: MPI_Datatype, MPI_INTEGER, MPI_COUNT_KIND, operator(==)
  use, intrinsic :: iso_c_binding, only: c_ptr, c_f_pointer
  implicit none
  type(c_ptr), value :: invec, inoutvec
  integer(kind=MPI_COUNT_KIND) :: len
  type(MPI_Datatype) :: datatype
  integer, pointer :: a(:), b(:)
  call c_f_pointer(invec, a, [len])
  call c_f_pointer(inoutvec, b, [len])
  b = a + b
  if (.not. (datatype == MPI_INTEGER)) b = -1
end subroutine f08_int_sum_c
