//! The C interface with hostile sizes, in process (a singleton job over the
//! `self` method): counts whose byte size wraps, datatypes whose size or
//! extent overflows, and a panic inside a C function's body. Each must come
//! back as an MPI error code (the world's handler set to MPI_ERRORS_RETURN),
//! never wrap, hang or abort.

extern crate mpi as capi;

use capi::abi::*;
use std::ffi::{c_char, c_int, c_void};

extern "C" {
    fn PMPI_Init(argc: *mut c_int, argv: *mut *mut *mut c_char) -> c_int;
    fn PMPI_Finalize() -> c_int;
    fn PMPI_Comm_set_errhandler(comm: MPI_Comm, eh: MPI_Errhandler) -> c_int;
    fn PMPI_Type_contiguous_c(n: MPI_Count, old: MPI_Datatype, out: *mut MPI_Datatype) -> c_int;
    fn PMPI_Type_vector_c(
        n: MPI_Count,
        bl: MPI_Count,
        stride: MPI_Count,
        old: MPI_Datatype,
        out: *mut MPI_Datatype,
    ) -> c_int;
    fn PMPI_Type_create_hvector_c(
        n: MPI_Count,
        bl: MPI_Count,
        stride: MPI_Count,
        old: MPI_Datatype,
        out: *mut MPI_Datatype,
    ) -> c_int;
    fn PMPI_Type_create_struct_c(
        n: MPI_Count,
        bls: *const MPI_Count,
        ds: *const MPI_Count,
        ts: *const MPI_Datatype,
        out: *mut MPI_Datatype,
    ) -> c_int;
    fn PMPI_Send_c(
        b: *const c_void,
        count: MPI_Count,
        dt: MPI_Datatype,
        dest: c_int,
        tag: c_int,
        c: MPI_Comm,
    ) -> c_int;
    fn PMPI_Pack_c(
        inb: *const c_void,
        n: MPI_Count,
        t: MPI_Datatype,
        outb: *mut c_void,
        outsize: MPI_Count,
        pos: *mut MPI_Count,
        c: MPI_Comm,
    ) -> c_int;
    fn PMPI_Unpack_c(
        inb: *const c_void,
        insize: MPI_Count,
        pos: *mut MPI_Count,
        outb: *mut c_void,
        n: MPI_Count,
        t: MPI_Datatype,
        c: MPI_Comm,
    ) -> c_int;
    fn PMPI_Pack_size_c(n: MPI_Count, t: MPI_Datatype, c: MPI_Comm, size: *mut MPI_Count) -> c_int;
    fn PMPI_Recv_c(
        b: *mut c_void,
        count: MPI_Count,
        dt: MPI_Datatype,
        src: c_int,
        tag: c_int,
        c: MPI_Comm,
        status: *mut MPI_Status,
    ) -> c_int;
}

const MPI_INT: MPI_Datatype = 521;
const MPI_BYTE: MPI_Datatype = 583;
const MPI_DOUBLE: MPI_Datatype = 532;
const MPI_ERR_COUNT: c_int = 2;
const MPI_ERR_INTERN: c_int = 17;
const MPI_ERR_TRUNCATE: c_int = 15;

/// One test: MPI is initialised once per process.
#[test]
fn hostile_sizes_through_the_c_interface_are_errors() {
    std::env::set_var("GW_METHODS", "self");
    std::env::set_var("GW_JOB_ID", format!("limits{}", std::process::id()));
    // SAFETY: the C interface called as a C program would, with valid
    // pointers to locals; no other thread calls MPI.
    unsafe {
        assert_eq!(PMPI_Init(std::ptr::null_mut(), std::ptr::null_mut()), 0);
        assert_eq!(
            PMPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN),
            0
        );
        let mut t: MPI_Datatype = MPI_DATATYPE_NULL;

        // 2^61 doubles: 2^64 bytes, which wrapped to 0.
        let huge = 1i64 << 61;
        assert_eq!(
            PMPI_Type_contiguous_c(huge, MPI_DOUBLE, &mut t),
            MPI_ERR_COUNT
        );
        // 2^40 strided pieces: a loop and a vector of 2^40 before.
        assert_eq!(
            PMPI_Type_vector_c(1 << 40, 1, 2, MPI_INT, &mut t),
            MPI_ERR_COUNT
        );
        // A stride whose displacements overflow.
        assert_eq!(
            PMPI_Type_create_hvector_c(4, 1, i64::MAX / 2, MPI_INT, &mut t),
            MPI_ERR_COUNT
        );
        // A struct whose sizes sum past the address space.
        let bls = [huge, huge, huge, huge];
        let ds = [0, 0, 0, 0];
        let ts = [MPI_DOUBLE; 4];
        assert_eq!(
            PMPI_Type_create_struct_c(4, bls.as_ptr(), ds.as_ptr(), ts.as_ptr(), &mut t),
            MPI_ERR_COUNT
        );
        // Big but representable contiguous types stay cheap (one block).
        assert_eq!(PMPI_Type_contiguous_c(1 << 40, MPI_INT, &mut t), 0);

        // Counts whose byte size wraps: refused before anything is sent.
        let x = [0u8; 8];
        assert_eq!(
            PMPI_Send_c(x.as_ptr().cast(), huge, MPI_DOUBLE, 0, 0, MPI_COMM_WORLD),
            MPI_ERR_COUNT
        );
        let mut y = [0u8; 8];
        let mut st = MPI_Status::default();
        assert_eq!(
            PMPI_Recv_c(
                y.as_mut_ptr().cast(),
                huge,
                MPI_DOUBLE,
                0,
                0,
                MPI_COMM_WORLD,
                &mut st
            ),
            MPI_ERR_COUNT
        );

        // A position near i64::MAX wrapped `pos + size` below the buffer's
        // size and the copy went past it.
        let mut out = [0u8; 16];
        let mut pos = i64::MAX - 4;
        assert_eq!(
            PMPI_Pack_c(
                x.as_ptr().cast(),
                8,
                MPI_BYTE,
                out.as_mut_ptr().cast(),
                16,
                &mut pos,
                MPI_COMM_WORLD
            ),
            MPI_ERR_TRUNCATE
        );
        let mut pos = i64::MAX - 4;
        assert_eq!(
            PMPI_Unpack_c(
                out.as_ptr().cast(),
                16,
                &mut pos,
                y.as_mut_ptr().cast(),
                2,
                MPI_INT,
                MPI_COMM_WORLD
            ),
            MPI_ERR_TRUNCATE
        );
        let mut size: MPI_Count = 0;
        assert_eq!(
            PMPI_Pack_size_c(huge, MPI_DOUBLE, MPI_COMM_WORLD, &mut size),
            MPI_ERR_COUNT
        );

        // A panic inside a C function's body comes back as MPI_ERR_INTERN.
        let code = capi::errors::no_unwind("MPI_Test", || -> c_int { panic!("a test panic") });
        assert_eq!(code, MPI_ERR_INTERN);

        assert_eq!(PMPI_Finalize(), 0);
    }
}
