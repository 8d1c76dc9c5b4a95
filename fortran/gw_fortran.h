/* gw_fortran.h -- what the generated Fortran glue (mpifort_glue.c) calls.
 *
 * Handles: a Fortran handle is the INTEGER of MPI_x_c2f. Predefined handles
 * (below 0x1000 in the standard ABI) are the same number in C and Fortran, so
 * converting them is one compare, inline; user handles go through libmpi's
 * MPI_x_f2c/c2f (a table slot). An INTEGER that names no object becomes a
 * handle that libmpi rejects with MPI_ERR_COMM/MPI_ERR_TYPE/..., never a pointer.
 *
 * Sentinels: MPI_BOTTOM, MPI_IN_PLACE, MPI_STATUS_IGNORE ... are variables
 * (common blocks for mpif.h and `use mpi`, BIND(C) module variables for
 * mpi_f08) whose addresses the glue recognises and replaces with the C values.
 */
#ifndef GW_FORTRAN_H
#define GW_FORTRAN_H
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <ISO_Fortran_binding.h>
#include "mpi.h"

#define GW_EXPORT __attribute__((visibility("default")))
#define GW_HIDDEN __attribute__((visibility("hidden")))
/* Handle arrays up to this many entries are converted on the stack. */
#define GW_SMALL 32

/* MPI_BOTTOM, MPI_IN_PLACE, MPI_BUFFER_AUTOMATIC of all three bindings: one common
 * block /MPI_FORTRAN_BUFFERS/ (defined in gw_fortran.c), so one range check finds them. */
struct gw_buffer_sentinels {
    MPI_Fint bottom, in_place, automatic;
};
extern struct gw_buffer_sentinels mpi_fortran_buffers_;
/* Status sentinels of mpif.h / use mpi (common blocks /MPI_FORTRAN_x/, gw_fortran.c). */
extern MPI_Fint mpi_fortran_status_ignore_[MPI_F_STATUS_SIZE];
extern MPI_Fint mpi_fortran_statuses_ignore_[MPI_F_STATUS_SIZE];
/* Status sentinels of mpi_f08 (BIND(C) variables defined by the mpi_f08 module). */
extern MPI_F08_status mpi_f08_status_ignore, mpi_f08_statuses_ignore[1];

#define GW_CONV(stem, T)                                                           \
    static inline T gw_f2c_##stem(MPI_Fint v)                                      \
    {                                                                              \
        return (unsigned)v < 0x1000u ? (T)(intptr_t)v : MPI_##stem##_f2c(v);       \
    }                                                                              \
    static inline MPI_Fint gw_c2f_##stem(T h)                                      \
    {                                                                              \
        return (uintptr_t)h < 0x1000u ? (MPI_Fint)(intptr_t)h : MPI_##stem##_c2f(h); \
    }
GW_CONV(Comm, MPI_Comm)
GW_CONV(Type, MPI_Datatype)
GW_CONV(Group, MPI_Group)
GW_CONV(Op, MPI_Op)
GW_CONV(Request, MPI_Request)
GW_CONV(Errhandler, MPI_Errhandler)
GW_CONV(Info, MPI_Info)
GW_CONV(Message, MPI_Message)
GW_CONV(Win, MPI_Win)
GW_CONV(File, MPI_File)
GW_CONV(Session, MPI_Session)

/* A buffer: the address, or the C value of a sentinel (one subtract and compare
 * on the common path). */
static inline void *gw_buf(void *p)
{
    uintptr_t off = (uintptr_t)p - (uintptr_t)&mpi_fortran_buffers_;
    if (__builtin_expect(off < sizeof(struct gw_buffer_sentinels), 0)) {
        if (off < sizeof(MPI_Fint)) return MPI_BOTTOM;
        return off < 2 * sizeof(MPI_Fint) ? MPI_IN_PLACE : MPI_BUFFER_AUTOMATIC;
    }
    return p;
}

/* Whether an assumed-rank descriptor describes contiguous memory (dimensions of
 * extent 1 may have any stride; an empty array is contiguous). */
static inline int gw_desc_contiguous(const CFI_cdesc_t *d)
{
    CFI_index_t want = (CFI_index_t)d->elem_len;
    for (int i = 0; i < d->rank; i++) {
        CFI_index_t e = d->dim[i].extent;
        if (e == 0) return 1;
        if (e != 1 && d->dim[i].sm != want) return 0;
        want *= e;
    }
    return 1;
}

/* Fails (through MPI_COMM_WORLD's error handler) for a non-contiguous section. */
int gw_noncontiguous(const char *fn) GW_HIDDEN;

/* A TYPE(*), DIMENSION(..) buffer of mpi_f08: its address or a sentinel's C value.
 * MPI_SUBARRAYS_SUPPORTED is .FALSE.: a non-contiguous section is MPI_ERR_BUFFER. */
static inline int gw_desc_buf(const CFI_cdesc_t *d, void **out, const char *fn)
{
    if (__builtin_expect(d->rank > 0, 1) && !gw_desc_contiguous(d)) return gw_noncontiguous(fn);
    *out = gw_buf(d->base_addr);
    return MPI_SUCCESS;
}

/* Status arguments: the Fortran layouts (INTEGER(MPI_STATUS_SIZE), TYPE(MPI_Status))
 * are the C MPI_Status itself (8 ints), so only the sentinels need translating. */
static inline MPI_Status *gw_status_old(MPI_Fint *s)
{
    return s == mpi_fortran_status_ignore_ ? MPI_STATUS_IGNORE : (MPI_Status *)(void *)s;
}
static inline MPI_Status *gw_statuses_old(MPI_Fint *s)
{
    return s == mpi_fortran_statuses_ignore_ ? MPI_STATUSES_IGNORE : (MPI_Status *)(void *)s;
}
static inline MPI_Status *gw_status_f08(MPI_Fint *s)
{
    return (void *)s == (void *)&mpi_f08_status_ignore ? MPI_STATUS_IGNORE : (MPI_Status *)(void *)s;
}
static inline MPI_Status *gw_statuses_f08(MPI_Fint *s)
{
    return (void *)s == (void *)mpi_f08_statuses_ignore ? MPI_STATUSES_IGNORE : (MPI_Status *)(void *)s;
}

/* Indices C returns from 0 (MPI_Waitany, MPI_Waitsome ...) count from 1 in Fortran. */
static inline void gw_indices_to_f(MPI_Fint *idx, int n)
{
    for (int i = 0; i < n; i++)
        if (idx[i] >= 0) idx[i] += 1;
}

/* An attribute as Fortran sees it: the predefined ones (MPI_TAG_UB ... MPI_UNIVERSE_SIZE)
 * are stored in C as a pointer to an int, the others are the stored value itself. */
static inline MPI_Aint gw_attr_value(MPI_Fint keyval, void *v)
{
    if (keyval >= MPI_TAG_UB && keyval <= MPI_UNIVERSE_SIZE) return v ? *(int *)v : 0;
    return (MPI_Aint)(intptr_t)v;
}

static inline int gw_min_len(int n, size_t len)
{
    return (size_t)n < len || n < 0 ? n : (int)len;
}

/* *a = small when n fits, else malloc; MPI_ERR_NO_MEM when it fails. */
int gw_array(void *a, void *small, int n, size_t size) GW_HIDDEN;
/* A NUL-terminated copy of a Fortran string without its trailing blanks. */
int gw_cstr(const char *f, size_t len, char **out) GW_HIDDEN;
/* A buffer for a string the C function writes (the longest MPI string fits). */
int gw_strbuf(char **out, size_t len) GW_HIDDEN;
/* Copies a C string into a Fortran one, blank-padded, cut at its length. */
void gw_fstr(char *f, size_t len, const char *c) GW_HIDDEN;
int gw_comm_size(MPI_Comm comm) GW_HIDDEN;
/* After MPI_Init from Fortran: tells libmpi the LOGICAL values and that Fortran
 * bindings are present (MPI_Abi_set_fortran_booleans / _info). */
void gw_after_init(void) GW_HIDDEN;
/* A Fortran MPI_Op_create user function: (invec, inoutvec, len, datatype), all by
 * address, the datatype a Fortran handle (TYPE(C_PTR), VALUE in mpi_f08 is the same). */
typedef void (*gw_fortran_user_fn)(void *, void *, MPI_Fint *, MPI_Fint *);
/* The same with a large count (mpi_f08's MPI_User_function_c: len is
 * INTEGER(KIND=MPI_COUNT_KIND)). */
typedef void (*gw_fortran_user_c_fn)(void *, void *, MPI_Count *, MPI_Fint *);
/* A Fortran communicator error handler: (comm, error_code), by address. */
typedef void (*gw_fortran_errh_fn)(MPI_Fint *, MPI_Fint *);
/* The C MPI_User_function that calls the Fortran `fn` (one of GW_USER_OPS trampolines). */
int gw_user_op(void (*fn)(void), MPI_User_function **out) GW_HIDDEN;
/* MPI-1's attribute callbacks (MPI_Keyval_create from mpif.h and use mpi):
 * copy (comm, keyval, extra_state, value_in, value_out, flag, ierror) and
 * delete (comm, keyval, value, extra_state, ierror), all INTEGER, by address. */
typedef void (*gw_fortran_oldcopy_fn)(MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
                                      MPI_Fint *);
typedef void (*gw_fortran_olddelete_fn)(MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *);
int gw_old_copy(void (*fn)(void), MPI_Copy_function **out) GW_HIDDEN;
int gw_old_delete(void (*fn)(void), MPI_Delete_function **out) GW_HIDDEN;
/* The C MPI_User_function_c that calls the Fortran `fn` (MPI_Op_create_c). */
int gw_user_op_c(void (*fn)(void), MPI_User_function_c **out) GW_HIDDEN;
/* The C error handler that calls the Fortran `fn` (one of GW_USER_OPS trampolines). */
int gw_comm_errhandler(void (*fn)(void), MPI_Comm_errhandler_function **out) GW_HIDDEN;
/* Attribute callbacks of MPI_Comm/Type_create_keyval: copy (obj, keyval, extra_state,
 * value_in, value_out, flag, ierror) and delete (obj, keyval, value, extra_state,
 * ierror), values INTEGER(KIND=MPI_ADDRESS_KIND), all by address. */
typedef void (*gw_fortran_copy_fn)(MPI_Fint *, MPI_Fint *, MPI_Aint *, MPI_Aint *, MPI_Aint *, MPI_Fint *,
                                   MPI_Fint *);
typedef void (*gw_fortran_delete_fn)(MPI_Fint *, MPI_Fint *, MPI_Aint *, MPI_Aint *, MPI_Fint *);
int gw_comm_copy_attr(void (*fn)(void), MPI_Comm_copy_attr_function **out) GW_HIDDEN;
int gw_comm_delete_attr(void (*fn)(void), MPI_Comm_delete_attr_function **out) GW_HIDDEN;
int gw_type_copy_attr(void (*fn)(void), MPI_Type_copy_attr_function **out) GW_HIDDEN;
int gw_type_delete_attr(void (*fn)(void), MPI_Type_delete_attr_function **out) GW_HIDDEN;

#endif
