! More argument kinds of the generated `use mpi` bindings: LOGICAL arrays
! (MPI_Cart_create/get/sub), handle arrays in and out (MPI_Type_create_struct,
! MPI_Type_get_contents, MPI_Alltoallw), indices from MPI_Waitsome and
! MPI_Testany (1-based), MPI_Gatherv, groups, MPI_Comm_split, a nonblocking
! collective polled with MPI_Test, and output strings. Rank 0 prints "PASS f90_more".
program f90_more
  use mpi
  implicit none
  integer :: ierr, rank, nproc, i, cart, sub, row, dims(2), coords(2), src, dst, newtype
  integer :: types(2), blens(2), reqs(4), outcount, idx(4), stats(MPI_STATUS_SIZE, 4)
  integer :: ni, na, nd, comb, ints(4), otypes(2), wtypes(64), sc(64), sd(64), rc(64), rd(64)
  integer :: grp, sgrp, ranks(1), tr(1), split, ssize, sbuf(64), rbuf(64), counts(64), displs(64)
  integer :: req, total, resultlen, cls, anyidx
  integer(kind=MPI_ADDRESS_KIND) :: disps(2), addrs(2), a0, a1
  logical :: periods(2), remain(2), flag
  character(len=MPI_MAX_PROCESSOR_NAME) :: host
  character(len=MPI_MAX_ERROR_STRING) :: msg
  type pair
    integer :: k
    double precision :: v
  end type pair
  type(pair) :: p(2), q(2)
  integer :: kv, kv2, cdup, deleted
  integer(kind=MPI_ADDRESS_KIND) :: aval
  external :: copy_plus_extra, delete_sum, old_copy_plus_extra, old_delete_sum
  integer :: ival
  common /attr_seen/ deleted

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nproc, ierr)

  ! Cartesian topology: LOGICAL arrays in and out.
  dims = 0
  call MPI_Dims_create(nproc, 2, dims, ierr)
  call check(dims(1) * dims(2) == nproc, 'MPI_Dims_create')
  periods = [.true., .false.]
  call MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, .false., cart, ierr)
  call check(ierr == MPI_SUCCESS .and. cart /= MPI_COMM_NULL, 'MPI_Cart_create')
  periods = [.false., .true.]
  call MPI_Cart_get(cart, 2, dims, periods, coords, ierr)
  call check(periods(1) .and. .not. periods(2), 'MPI_Cart_get periods (LOGICAL out)')
  call MPI_Cart_shift(cart, 0, 1, src, dst, ierr)
  call check(src >= 0 .and. dst >= 0, 'MPI_Cart_shift in a periodic dimension')
  remain = [.false., .true.]
  call MPI_Cart_sub(cart, remain, row, ierr)
  call MPI_Comm_size(row, ssize, ierr)
  call check(ssize == dims(2), 'MPI_Cart_sub (LOGICAL in)')
  call MPI_Comm_free(row, ierr)
  call MPI_Comm_free(cart, ierr)

  ! A struct datatype (handle array in) and its contents (handle array out).
  call MPI_Get_address(p(1)%k, a0, ierr)
  call MPI_Get_address(p(1)%v, a1, ierr)
  blens = [1, 1]
  disps = [0_MPI_ADDRESS_KIND, a1 - a0]
  types = [MPI_INTEGER, MPI_DOUBLE_PRECISION]
  call MPI_Type_create_struct(2, blens, disps, types, sub, ierr)
  call MPI_Get_address(p(2)%k, a1, ierr)
  call MPI_Type_create_resized(sub, 0_MPI_ADDRESS_KIND, a1 - a0, newtype, ierr)
  call MPI_Type_commit(newtype, ierr)
  call MPI_Type_get_envelope(sub, ni, na, nd, comb, ierr)
  call check(comb == MPI_COMBINER_STRUCT .and. nd == 2 .and. na == 2, 'MPI_Type_get_envelope')
  call MPI_Type_get_contents(sub, 4, 2, 2, ints, addrs, otypes, ierr)
  call check(all(otypes == types) .and. ints(1) == 2 .and. addrs(2) == disps(2), 'MPI_Type_get_contents')
  p = [pair(rank, rank + 0.25d0), pair(-rank, -0.5d0)]
  call MPI_Sendrecv(p, 2, newtype, mod(rank + 1, nproc), 1, q, 2, newtype, &
                    mod(rank - 1 + nproc, nproc), 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  i = mod(rank - 1 + nproc, nproc)
  call check(q(1)%k == i .and. q(1)%v == i + 0.25d0 .and. q(2)%k == -i, 'struct type data')
  call MPI_Type_free(newtype, ierr)
  call MPI_Type_free(sub, ierr)

  ! MPI_Waitsome and MPI_Testany: indices count from 1.
  do i = 1, 2
    call MPI_Irecv(rbuf(i), 1, MPI_INTEGER, mod(rank - 1 + nproc, nproc), 20 + i, MPI_COMM_WORLD, reqs(i), ierr)
  end do
  call MPI_Send(rank, 1, MPI_INTEGER, mod(rank + 1, nproc), 22, MPI_COMM_WORLD, ierr)
  call MPI_Waitsome(2, reqs, outcount, idx, stats, ierr)
  call check(outcount == 1 .and. idx(1) == 2 .and. stats(MPI_TAG, 1) == 22, 'MPI_Waitsome index')
  ! (Tag 21 is sent only when every rank's MPI_Waitsome has returned.)
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  call MPI_Send(rank, 1, MPI_INTEGER, mod(rank + 1, nproc), 21, MPI_COMM_WORLD, ierr)
  flag = .false.
  do while (.not. flag)
    call MPI_Testany(2, reqs, anyidx, flag, stats(:, 1), ierr)
  end do
  call check(anyidx == 1 .and. rbuf(1) == mod(rank - 1 + nproc, nproc), 'MPI_Testany index')

  ! MPI_Alltoallw: handle arrays as long as the communicator.
  do i = 1, nproc
    sbuf(i) = rank * 100 + i
    sc(i) = 1
    rc(i) = 1
    sd(i) = 4 * (i - 1)
    rd(i) = 4 * (i - 1)
    wtypes(i) = MPI_INTEGER
  end do
  call MPI_Alltoallw(sbuf, sc, sd, wtypes, rbuf, rc, rd, wtypes, MPI_COMM_WORLD, ierr)
  call check(all(rbuf(1:nproc) == [((i - 1) * 100 + rank + 1, i = 1, nproc)]), 'MPI_Alltoallw')

  ! MPI_Gatherv: rank r sends r+1 values.
  sbuf(1:rank + 1) = rank
  do i = 1, nproc
    counts(i) = i
    displs(i) = (i - 1) * i / 2
  end do
  call MPI_Gatherv(sbuf, rank + 1, MPI_INTEGER, rbuf, counts, displs, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  if (rank == 0) call check(rbuf(displs(nproc) + 1) == nproc - 1 .and. (nproc == 1 .or. rbuf(2) == 1), 'MPI_Gatherv')

  ! Groups and MPI_Comm_split.
  call MPI_Comm_group(MPI_COMM_WORLD, grp, ierr)
  ranks(1) = nproc - 1
  call MPI_Group_incl(grp, 1, ranks, sgrp, ierr)
  tr = -5
  call MPI_Group_translate_ranks(sgrp, 1, [0], grp, tr, ierr)
  call check(tr(1) == nproc - 1, 'MPI_Group_translate_ranks')
  call MPI_Group_free(sgrp, ierr)
  call MPI_Group_free(grp, ierr)
  call MPI_Comm_split(MPI_COMM_WORLD, mod(rank, 2), -rank, split, ierr)
  call MPI_Comm_rank(split, i, ierr)
  call MPI_Comm_size(split, ssize, ierr)
  call check(i == ssize - 1 - rank / 2, 'MPI_Comm_split key order')
  call MPI_Comm_free(split, ierr)

  ! A nonblocking collective polled with MPI_Test (LOGICAL flag).
  call MPI_Iallreduce(rank, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, req, ierr)
  flag = .false.
  do while (.not. flag)
    call MPI_Test(req, flag, MPI_STATUS_IGNORE, ierr)
  end do
  call check(total == nproc * (nproc - 1) / 2 .and. req == MPI_REQUEST_NULL, 'MPI_Iallreduce + MPI_Test')

  ! Attribute caching with Fortran callbacks: the copy adds extra_state, the
  ! delete sums what it deletes; and the predefined MPI_COMM_DUP_FN / NULL_COPY_FN.
  deleted = 0
  call MPI_Comm_create_keyval(copy_plus_extra, delete_sum, kv, 7_MPI_ADDRESS_KIND, ierr)
  call MPI_Comm_set_attr(MPI_COMM_WORLD, kv, 41_MPI_ADDRESS_KIND, ierr)
  call MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, kv2, 0_MPI_ADDRESS_KIND, ierr)
  call MPI_Comm_set_attr(MPI_COMM_WORLD, kv2, 5_MPI_ADDRESS_KIND, ierr)
  call MPI_Comm_dup(MPI_COMM_WORLD, cdup, ierr)
  call MPI_Comm_get_attr(cdup, kv, aval, flag, ierr)
  call check(flag .and. aval == 48, 'the Fortran copy callback ran with extra_state')
  call MPI_Comm_get_attr(cdup, kv2, aval, flag, ierr)
  call check(.not. flag, 'MPI_COMM_NULL_COPY_FN copies nothing')
  call MPI_Comm_free(cdup, ierr)
  call MPI_Comm_delete_attr(MPI_COMM_WORLD, kv, ierr)
  call check(deleted == 48 + 41, 'the Fortran delete callback ran for both values')
  call MPI_Comm_free_keyval(kv, ierr)
  call MPI_Comm_delete_attr(MPI_COMM_WORLD, kv2, ierr)
  call MPI_Comm_free_keyval(kv2, ierr)
  call MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, kv2, 0_MPI_ADDRESS_KIND, ierr)
  call MPI_Comm_set_attr(MPI_COMM_WORLD, kv2, 6_MPI_ADDRESS_KIND, ierr)
  call MPI_Comm_dup(MPI_COMM_WORLD, cdup, ierr)
  call MPI_Comm_get_attr(cdup, kv2, aval, flag, ierr)
  call check(flag .and. aval == 6, 'MPI_COMM_DUP_FN copies the value')
  call MPI_Comm_free(cdup, ierr)
  call MPI_Comm_delete_attr(MPI_COMM_WORLD, kv2, ierr)
  call MPI_Comm_free_keyval(kv2, ierr)

  ! MPI-1's MPI_Keyval_create / MPI_Attr_put / MPI_Attr_get (INTEGER values
  ! and extra state) with Fortran callbacks, and MPI_NULL_COPY_FN / MPI_DUP_FN.
  deleted = 0
  call MPI_Keyval_create(old_copy_plus_extra, old_delete_sum, kv, 3, ierr)
  call check(ierr == MPI_SUCCESS, 'MPI_Keyval_create')
  call MPI_Attr_put(MPI_COMM_WORLD, kv, 20, ierr)
  call MPI_Comm_dup(MPI_COMM_WORLD, cdup, ierr)
  call MPI_Attr_get(cdup, kv, ival, flag, ierr)
  call check(flag .and. ival == 23, 'the MPI-1 copy callback ran with extra_state')
  call MPI_Comm_free(cdup, ierr)
  call check(deleted == 23, 'the MPI-1 delete callback ran at MPI_Comm_free')
  call MPI_Attr_delete(MPI_COMM_WORLD, kv, ierr)
  call check(deleted == 43, 'the MPI-1 delete callback ran at MPI_Attr_delete')
  call MPI_Keyval_free(kv, ierr)
  call MPI_Keyval_create(MPI_DUP_FN, MPI_NULL_DELETE_FN, kv, 0, ierr)
  call MPI_Keyval_create(MPI_NULL_COPY_FN, MPI_NULL_DELETE_FN, kv2, 0, ierr)
  call MPI_Attr_put(MPI_COMM_WORLD, kv, 8, ierr)
  call MPI_Attr_put(MPI_COMM_WORLD, kv2, 9, ierr)
  call MPI_Comm_dup(MPI_COMM_WORLD, cdup, ierr)
  call MPI_Attr_get(cdup, kv, ival, flag, ierr)
  call check(flag .and. ival == 8, 'MPI_DUP_FN copies the value')
  call MPI_Attr_get(cdup, kv2, ival, flag, ierr)
  call check(.not. flag, 'MPI_NULL_COPY_FN copies nothing')
  call MPI_Comm_free(cdup, ierr)
  call MPI_Attr_delete(MPI_COMM_WORLD, kv, ierr)
  call MPI_Attr_delete(MPI_COMM_WORLD, kv2, ierr)
  call MPI_Keyval_free(kv, ierr)
  call MPI_Keyval_free(kv2, ierr)

  ! Output strings.
  call MPI_Get_processor_name(host, resultlen, ierr)
  call check(resultlen > 0 .and. len_trim(host) == resultlen, 'MPI_Get_processor_name')
  call MPI_Error_string(MPI_ERR_RANK, msg, resultlen, ierr)
  call MPI_Error_class(MPI_ERR_RANK, cls, ierr)
  call check(resultlen > 0 .and. len_trim(msg) == resultlen .and. cls == MPI_ERR_RANK, 'MPI_Error_string')

  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  if (rank == 0) print '(a)', 'PASS f90_more'
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
end program f90_more

subroutine copy_plus_extra(oldcomm, keyval, extra_state, val_in, val_out, flag, ierror)
  use mpi, only: MPI_ADDRESS_KIND, MPI_SUCCESS
  implicit none
  integer :: oldcomm, keyval, ierror
  integer(kind=MPI_ADDRESS_KIND) :: extra_state, val_in, val_out
  logical :: flag
  val_out = val_in + extra_state
  flag = .true.
  ierror = MPI_SUCCESS
end subroutine copy_plus_extra

subroutine delete_sum(comm, keyval, val, extra_state, ierror)
  use mpi, only: MPI_ADDRESS_KIND, MPI_SUCCESS
  implicit none
  integer :: comm, keyval, ierror, deleted
  integer(kind=MPI_ADDRESS_KIND) :: val, extra_state
  common /attr_seen/ deleted
  deleted = deleted + int(val)
  ierror = MPI_SUCCESS
end subroutine delete_sum

subroutine old_copy_plus_extra(oldcomm, keyval, extra_state, val_in, val_out, flag, ierror)
  use mpi, only: MPI_SUCCESS
  implicit none
  integer :: oldcomm, keyval, extra_state, val_in, val_out, ierror
  logical :: flag
  val_out = val_in + extra_state
  flag = .true.
  ierror = MPI_SUCCESS
end subroutine old_copy_plus_extra

subroutine old_delete_sum(comm, keyval, val, extra_state, ierror)
  use mpi, only: MPI_SUCCESS
  implicit none
  integer :: comm, keyval, val, extra_state, ierror, deleted
  common /attr_seen/ deleted
  deleted = deleted + val
  ierror = MPI_SUCCESS
end subroutine old_delete_sum
