! MPI_T from Fortran. The standard gives the tools interface C bindings
! only (no MPI_T routines in mpif.h, mpi or mpi_f08), so a Fortran tool
! calls the C functions through ISO_C_BINDING interfaces, as below; the
! program itself uses mpi_f08. 2 ranks: lists every control and
! performance variable, checks that a GW_* parameter is a control variable,
! counts the bytes of a ping-pong with the per-link and per-method counters,
! and checks the error classes of a bad index and name.
module gw_mpi_t
  use iso_c_binding
  implicit none
  integer(c_int), parameter :: T_SUCCESS = 0
  integer(c_int), parameter :: T_ERR_INVALID_INDEX = 1007
  integer(c_int), parameter :: T_ERR_INVALID_NAME = 1011
  integer(c_int), parameter :: T_PVAR_CLASS_COUNTER = 7
  interface
    integer(c_int) function MPI_T_init_thread(required, provided) bind(C, name="MPI_T_init_thread")
      import :: c_int
      integer(c_int), value :: required
      integer(c_int) :: provided
    end function
    integer(c_int) function MPI_T_finalize() bind(C, name="MPI_T_finalize")
      import :: c_int
    end function
    integer(c_int) function MPI_T_cvar_get_num(num) bind(C, name="MPI_T_cvar_get_num")
      import :: c_int
      integer(c_int) :: num
    end function
    integer(c_int) function MPI_T_pvar_get_num(num) bind(C, name="MPI_T_pvar_get_num")
      import :: c_int
      integer(c_int) :: num
    end function
    integer(c_int) function MPI_T_category_get_num(num) bind(C, name="MPI_T_category_get_num")
      import :: c_int
      integer(c_int) :: num
    end function
    integer(c_int) function MPI_T_cvar_get_index(name, idx) bind(C, name="MPI_T_cvar_get_index")
      import :: c_int, c_char
      character(kind=c_char) :: name(*)
      integer(c_int) :: idx
    end function
    integer(c_int) function MPI_T_cvar_get_info(idx, name, name_len, verbosity, datatype, enumtype, &
        desc, desc_len, binding, scope) bind(C, name="MPI_T_cvar_get_info")
      import :: c_int, c_char, c_ptr
      integer(c_int), value :: idx
      character(kind=c_char) :: name(*), desc(*)
      integer(c_int) :: name_len, verbosity, desc_len, binding, scope
      type(c_ptr) :: datatype, enumtype
    end function
    integer(c_int) function MPI_T_pvar_get_info(idx, name, name_len, verbosity, var_class, datatype, enumtype, &
        desc, desc_len, binding, readonly, continuous, atomic) bind(C, name="MPI_T_pvar_get_info")
      import :: c_int, c_char, c_ptr
      integer(c_int), value :: idx
      character(kind=c_char) :: name(*), desc(*)
      integer(c_int) :: name_len, verbosity, var_class, desc_len, binding, readonly, continuous, atomic
      type(c_ptr) :: datatype, enumtype
    end function
    integer(c_int) function MPI_T_pvar_get_index(name, var_class, idx) bind(C, name="MPI_T_pvar_get_index")
      import :: c_int, c_char
      character(kind=c_char) :: name(*)
      integer(c_int), value :: var_class
      integer(c_int) :: idx
    end function
    integer(c_int) function MPI_T_pvar_session_create(session) bind(C, name="MPI_T_pvar_session_create")
      import :: c_int, c_ptr
      type(c_ptr) :: session
    end function
    integer(c_int) function MPI_T_pvar_session_free(session) bind(C, name="MPI_T_pvar_session_free")
      import :: c_int, c_ptr
      type(c_ptr) :: session
    end function
    integer(c_int) function MPI_T_pvar_handle_alloc(session, idx, obj, handle, count) &
        bind(C, name="MPI_T_pvar_handle_alloc")
      import :: c_int, c_ptr
      type(c_ptr), value :: session, obj
      integer(c_int), value :: idx
      type(c_ptr) :: handle
      integer(c_int) :: count
    end function
    integer(c_int) function MPI_T_pvar_handle_free(session, handle) bind(C, name="MPI_T_pvar_handle_free")
      import :: c_int, c_ptr
      type(c_ptr), value :: session
      type(c_ptr) :: handle
    end function
    integer(c_int) function MPI_T_pvar_start(session, handle) bind(C, name="MPI_T_pvar_start")
      import :: c_int, c_ptr
      type(c_ptr), value :: session, handle
    end function
    integer(c_int) function MPI_T_pvar_read(session, handle, buf) bind(C, name="MPI_T_pvar_read")
      import :: c_int, c_ptr
      type(c_ptr), value :: session, handle, buf
    end function
  end interface
end module gw_mpi_t

program f08_mpi_t
  use mpi_f08
  use gw_mpi_t
  implicit none
  integer, parameter :: MSGS = 20, BYTES = 1000
  integer :: rank, size, peer, k, errs
  integer(c_int) :: provided, ncvar, npvar, ncat, idx, rc, count, nlen, verb, dlen, bind, scope
  character(kind=c_char, len=256) :: cname, cdesc
  type(c_ptr) :: dtype, etype, session, handle, hshm, htcp
  integer(c_int) :: vclass, ro, cont, atom, cshm, ctcp
  integer(c_long_long), target :: per_peer(2), shm_bytes, tcp_bytes
  character(len=BYTES) :: buf

  errs = 0
  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, size)
  if (size /= 2) then
    print *, 'needs 2 ranks'
    call MPI_Abort(MPI_COMM_WORLD, 2)
  end if
  peer = 1 - rank

  call check(MPI_T_init_thread(0_c_int, provided) == T_SUCCESS, 'MPI_T_init_thread')
  call check(MPI_T_cvar_get_num(ncvar) == T_SUCCESS .and. ncvar > 10, 'cvars listed')
  call check(MPI_T_pvar_get_num(npvar) == T_SUCCESS .and. npvar > 10, 'pvars listed')
  call check(MPI_T_category_get_num(ncat) == T_SUCCESS .and. ncat >= 2, 'categories listed')
  ! Every control variable has a name, and GW_METHODS is one of them.
  do idx = 0, ncvar - 1
    nlen = len(cname); dlen = len(cdesc)
    rc = MPI_T_cvar_get_info(idx, cname, nlen, verb, dtype, etype, cdesc, dlen, bind, scope)
    call check(rc == T_SUCCESS .and. nlen > 1 .and. cname(1:3) == 'GW_', 'cvar info')
  end do
  call check(MPI_T_cvar_get_index('GW_METHODS' // c_null_char, idx) == T_SUCCESS, 'GW_METHODS is a cvar')
  call check(MPI_T_cvar_get_index('GW_NO_SUCH' // c_null_char, idx) == T_ERR_INVALID_NAME, &
       'unknown name -> MPI_T_ERR_INVALID_NAME')
  ! A bad index gets the standard's class.
  nlen = len(cname); dlen = len(cdesc)
  rc = MPI_T_cvar_get_info(ncvar + 5, cname, nlen, verb, dtype, etype, cdesc, dlen, bind, scope)
  call check(rc == T_ERR_INVALID_INDEX, 'bad index -> MPI_T_ERR_INVALID_INDEX')

  ! Every performance variable has a name and a class.
  do idx = 0, npvar - 1
    nlen = len(cname); dlen = len(cdesc)
    rc = MPI_T_pvar_get_info(idx, cname, nlen, verb, vclass, dtype, etype, cdesc, dlen, bind, ro, cont, atom)
    call check(rc == T_SUCCESS .and. nlen > 1 .and. cname(1:3) == 'gw_', 'pvar info')
  end do
  nlen = len(cname); dlen = len(cdesc)
  rc = MPI_T_pvar_get_info(npvar, cname, nlen, verb, vclass, dtype, etype, cdesc, dlen, bind, ro, cont, atom)
  call check(rc == T_ERR_INVALID_INDEX, 'bad pvar index -> MPI_T_ERR_INVALID_INDEX')

  ! Bytes on the link to the peer, and on the method carrying it (shm on one
  ! host, tcp between emulated hosts), grow by at least what was sent.
  call check(MPI_T_pvar_session_create(session) == T_SUCCESS, 'session')
  call check(MPI_T_pvar_get_index('gw_link_sent_bytes' // c_null_char, T_PVAR_CLASS_COUNTER, idx) &
       == T_SUCCESS, 'gw_link_sent_bytes')
  call check(MPI_T_pvar_handle_alloc(session, idx, c_null_ptr, handle, count) == T_SUCCESS &
       .and. count == 2, 'handle, one element per peer')
  call check(MPI_T_pvar_get_index('gw_shm_sent_bytes' // c_null_char, T_PVAR_CLASS_COUNTER, idx) &
       == T_SUCCESS, 'gw_shm_sent_bytes')
  call check(MPI_T_pvar_handle_alloc(session, idx, c_null_ptr, hshm, cshm) == T_SUCCESS .and. cshm == 1, 'shm handle')
  call check(MPI_T_pvar_get_index('gw_tcp_sent_bytes' // c_null_char, T_PVAR_CLASS_COUNTER, idx) &
       == T_SUCCESS, 'gw_tcp_sent_bytes')
  call check(MPI_T_pvar_handle_alloc(session, idx, c_null_ptr, htcp, ctcp) == T_SUCCESS .and. ctcp == 1, 'tcp handle')
  call check(MPI_T_pvar_start(session, handle) == T_SUCCESS, 'start')
  call check(MPI_T_pvar_start(session, hshm) == T_SUCCESS .and. MPI_T_pvar_start(session, htcp) == T_SUCCESS, &
       'start per-method counters')
  buf = repeat('x', BYTES)
  do k = 1, MSGS
    if (rank == 0) then
      call MPI_Send(buf, BYTES, MPI_CHARACTER, peer, 5, MPI_COMM_WORLD)
      call MPI_Recv(buf, BYTES, MPI_CHARACTER, peer, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE)
    else
      call MPI_Recv(buf, BYTES, MPI_CHARACTER, peer, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE)
      call MPI_Send(buf, BYTES, MPI_CHARACTER, peer, 5, MPI_COMM_WORLD)
    end if
  end do
  per_peer = -1
  call check(MPI_T_pvar_read(session, handle, c_loc(per_peer)) == T_SUCCESS, 'read')
  call check(per_peer(peer + 1) >= MSGS * BYTES, 'the link counted the bytes sent')
  call check(MPI_T_pvar_read(session, hshm, c_loc(shm_bytes)) == T_SUCCESS .and. &
       MPI_T_pvar_read(session, htcp, c_loc(tcp_bytes)) == T_SUCCESS, 'read per-method')
  call check(shm_bytes + tcp_bytes >= MSGS * BYTES, 'the methods counted the bytes sent')
  call check(MPI_T_pvar_handle_free(session, hshm) == T_SUCCESS .and. &
       MPI_T_pvar_handle_free(session, htcp) == T_SUCCESS, 'free per-method handles')
  call check(MPI_T_pvar_handle_free(session, handle) == T_SUCCESS, 'handle_free')
  call check(MPI_T_pvar_session_free(session) == T_SUCCESS, 'session_free')
  call check(MPI_T_finalize() == T_SUCCESS, 'MPI_T_finalize')

  call MPI_Allreduce(MPI_IN_PLACE, errs, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
  if (rank == 0 .and. errs == 0) print '(a)', 'PASS f08_mpi_t'
  call MPI_Finalize()
  if (errs /= 0) stop 1

contains
  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    if (.not. ok) then
      errs = errs + 1
      print '(a,i0,a,a)', 'rank ', rank, ': FAILED: ', what
    end if
  end subroutine
end program
