//! The MPI 5.0 standard ABI values this library needs (from constants.json).

use std::ffi::c_int;

/// Every MPI handle type: a pointer-sized value (passed exactly like the C pointer).
pub type Handle = usize;
pub type MPI_Comm = Handle;
pub type MPI_Datatype = Handle;
pub type MPI_Group = Handle;
pub type MPI_Op = Handle;
pub type MPI_Request = Handle;
pub type MPI_Errhandler = Handle;
pub type MPI_Info = Handle;
pub type MPI_Message = Handle;
pub type MPI_Aint = isize;
pub type MPI_Count = i64;
pub type MPI_Fint = c_int;

/// `MPI_Status` of the standard ABI: 8 ints.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct MPI_Status {
    pub MPI_SOURCE: c_int,
    pub MPI_TAG: c_int,
    pub MPI_ERROR: c_int,
    /// [0], [1]: received bytes (low, high 32 bits); [2]: cancelled.
    pub internal: [c_int; 5],
}

pub const MPI_SUCCESS: c_int = 0;
pub const MPI_OP_NULL: Handle = 32;
pub const MPI_COMM_NULL: Handle = 256;
pub const MPI_COMM_WORLD: Handle = 257;
pub const MPI_COMM_SELF: Handle = 258;
pub const MPI_GROUP_NULL: Handle = 264;
pub const MPI_GROUP_EMPTY: Handle = 265;
pub const MPI_MESSAGE_NULL: Handle = 296;
pub const MPI_MESSAGE_NO_PROC: Handle = 297;
pub const MPI_INFO_NULL: Handle = 304;
pub const MPI_INFO_ENV: Handle = 305;
pub const MPI_ERRHANDLER_NULL: Handle = 320;
pub const MPI_ERRORS_ARE_FATAL: Handle = 321;
pub const MPI_ERRORS_ABORT: Handle = 322;
pub const MPI_ERRORS_RETURN: Handle = 323;
pub const MPI_REQUEST_NULL: Handle = 384;
/// Not in the ABI tables: our own predefined value (below 0x1000) for a send
/// that completed inside its `MPI_Isend` (eager), so it needs no table slot.
pub const REQUEST_DONE_SEND: Handle = 385;
pub const MPI_DATATYPE_NULL: Handle = 512;
pub const MPI_BOTTOM: usize = 0;
pub const MPI_IN_PLACE: usize = 1;
pub const MPI_UNDEFINED: c_int = -32766;
pub const MPI_THREAD_SINGLE: c_int = 0;
pub const MPI_THREAD_FUNNELED: c_int = 1024;
pub const MPI_THREAD_SERIALIZED: c_int = 2048;
pub const MPI_THREAD_MULTIPLE: c_int = 4096;
pub const MPI_COMM_TYPE_SHARED: c_int = 221;
pub const MPI_COMM_TYPE_HW_UNGUIDED: c_int = 222;
pub const MPI_COMM_TYPE_HW_GUIDED: c_int = 223;
pub const MPI_COMM_TYPE_RESOURCE_GUIDED: c_int = 224;
pub const MPI_KEYVAL_INVALID: c_int = 0;
pub const MPI_TAG_UB: c_int = 501;
pub const MPI_IO: c_int = 502;
pub const MPI_HOST: c_int = 503;
pub const MPI_WTIME_IS_GLOBAL: c_int = 504;
pub const MPI_APPNUM: c_int = 505;
pub const MPI_LASTUSEDCODE: c_int = 506;
pub const MPI_UNIVERSE_SIZE: c_int = 507;
pub const MPI_MAX_PROCESSOR_NAME: usize = 256;
pub const MPI_MAX_ERROR_STRING: usize = 512;
pub const MPI_MAX_OBJECT_NAME: usize = 128;
/// As in mpi.h (MPI 5.0 ABI).
pub const MPI_MAX_PORT_NAME: usize = 1024;
pub const MPI_MAX_LIBRARY_VERSION_STRING: usize = 8192;
pub const MPI_ORDER_C: c_int = 12;
pub const MPI_ORDER_FORTRAN: c_int = 15;
pub const MPI_COMBINER_NAMED: c_int = 101;
pub const MPI_COMBINER_F90_REAL: c_int = 113;
pub const MPI_COMBINER_F90_COMPLEX: c_int = 114;
pub const MPI_COMBINER_F90_INTEGER: c_int = 115;
