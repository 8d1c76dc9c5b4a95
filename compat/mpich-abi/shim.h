/* shim.h -- the MPICH-ABI compatibility shim's internal interface.
 *
 * The shim (libmpi.so.12) exports MPICH-ABI MPI_x/PMPI_x functions and implements
 * each by converting arguments to gridwire's MPI 5.0 standard ABI and calling
 * gridwire's PMPI_x, which it finds with dlopen/dlsym (so the two libraries'
 * same-named symbols never meet). No MPI header is included: MPICH handles are
 * `int` here, standard-ABI handles `void *`, and the two status layouts are
 * spelled out below. gen.py writes gen_consts.h (the constant tables, taken from
 * both headers by compiling probes) and gen_wrappers.c (one wrapper per function).
 */
#ifndef GW_MPICH_SHIM_H
#define GW_MPICH_SHIM_H

#include <stddef.h>
#include <stdint.h>

#define EXPORT __attribute__((visibility("default")))

typedef int mh;     /* an MPICH handle */
typedef void *ah;   /* a standard-ABI handle */

/* MPICH's MPI_Status (mpich/mpi.h): the byte count in count_lo and the upper
 * 31 bits of count_hi_and_cancelled, the cancelled flag in its bit 0. */
typedef struct {
    int count_lo;
    int count_hi_and_cancelled;
    int MPI_SOURCE;
    int MPI_TAG;
    int MPI_ERROR;
} mstatus;

/* The standard ABI's MPI_Status; gridwire keeps the byte count in internal[0..1]
 * and the cancelled flag in internal[2] (crates/capi/src/abi.rs). */
typedef struct {
    int MPI_SOURCE;
    int MPI_TAG;
    int MPI_ERROR;
    int internal[5];
} astatus;

enum { K_COMM, K_GROUP, K_TYPE, K_OP, K_ERRH, K_REQ, K_INFO, K_WIN, K_FILE, K_MSG, K_SESSION, K_N };

struct ipair { int m, a; };   /* an MPICH value and its standard-ABI value */

/* Pointer constants. */
#define M_IN_PLACE ((void *)(intptr_t)-1)
#define A_IN_PLACE ((void *)(intptr_t)1)
#define M_STATUS_IGNORE ((mstatus *)(intptr_t)1)
#define A_UNWEIGHTED ((int *)(intptr_t)10)
#define A_WEIGHTS_EMPTY ((int *)(intptr_t)11)

/* Resolving gridwire's functions: NULL (and a message once) when it cannot be loaded. */
void *gw_sym(const char *name);
/* The MPICH error class to return when a gridwire function is missing. */
int gw_missing(const char *name);

/* Handles. */
ah h2a(int kind, mh v);
mh h2m(int kind, ah v);

/* Integers with different special values. */
int vmap_m2a(const struct ipair *t, int n, int v);
int vmap_a2m(const struct ipair *t, int n, int v);
int bits_m2a(const struct ipair *t, int n, int v);
int bits_a2m(const struct ipair *t, int n, int v);
int err_a2m(int rc);
int err_m2a(int rc);

/* Statuses. */
void st_a2m(const astatus *a, mstatus *m);
void st_m2a(const mstatus *m, astatus *a);

/* Buffers and weights. */
static inline void *buf_m2a(const void *p) { return p == M_IN_PLACE ? A_IN_PLACE : (void *)p; }
int *weights_m2a(const int *p);

/* Scratch arrays: on the stack when small, else malloc'ed (NULL on failure). */
void *scratch(size_t bytes, void *stackbuf, size_t stackbytes);
void scratch_free(void *p, void *stackbuf);

/* Completes the MPI_Comm_idup whose requests completed (after every wait/test). */
void idup_poll(void);

/* The number of entries of a datatype array of an alltoallw-like call. */
int peer_count(mh comm, int *n);
int neighbor_counts(mh comm, int *indeg, int *outdeg);

#endif
