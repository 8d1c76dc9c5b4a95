/* shim.c -- the hand-written half of gridwire's MPICH-ABI shim (libmpi.so.12):
 * loading gridwire's standard-ABI library, handle/constant/status conversion,
 * and the functions with callbacks or attribute values. See shim.h and gen.py. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "shim.h"
#include "gen_consts.h"

/* ---- loading gridwire ---- */

static void *gw_lib;
static pthread_once_t gw_once = PTHREAD_ONCE_INIT;
static char gw_err[PATH_MAX + 256];

static int try_open(const char *path)
{
    /* RTLD_DEEPBIND: gridwire's references to its own MPI_x/PMPI_x must bind
     * to itself even when this shim (same names, other ABI) is global. */
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (!h) {
        snprintf(gw_err, sizeof gw_err, "%.2000s", dlerror());
        return 0;
    }
    if (!dlsym(h, "PMPI_Abi_get_version") || !dlsym(h, "PMPI_Comm_fromint")) {
        snprintf(gw_err, sizeof gw_err, "%.2000s is not a standard-ABI MPI library", path);
        dlclose(h);
        return 0;
    }
    gw_lib = h;
    return 1;
}

static void gw_load(void)
{
    const char *env = getenv("GW_MPICH_ABI_LIBMPI");
    if (env && *env) {
        try_open(env);
        return;
    }
    Dl_info info;
    if (dladdr((void *)gw_load, &info) && info.dli_fname) {
        char paths[2][PATH_MAX];
        snprintf(paths[0], PATH_MAX, "%s", info.dli_fname);
        if (!realpath(info.dli_fname, paths[1]))
            paths[1][0] = 0;
        for (int i = 0; i < 2; i++) {
            char *slash = strrchr(paths[i], '/');
            if (!slash)
                continue;
            *slash = 0;
            /* installed: lib/mpich-abi/libmpi.so.12 beside lib/libmpi_abi.so;
             * build tree: target/<profile>/mpich-abi/ beside target/<profile>/libmpi.so */
            static const char *const names[] = {"libmpi_abi.so", "libmpi.so"};
            for (int j = 0; j < 2; j++) {
                char p[PATH_MAX + 32];
                if (snprintf(p, sizeof p, "%.*s/../%s", PATH_MAX - 1, paths[i], names[j]) >= (int)sizeof p)
                    continue;
                if (access(p, F_OK) == 0 && try_open(p))
                    return;
            }
        }
    }
    try_open("libmpi_abi.so");
}

void *gw_sym(const char *name)
{
    pthread_once(&gw_once, gw_load);
    if (!gw_lib) {
        static int said;
        if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
            fprintf(stderr, "gridwire MPICH-ABI shim: cannot load gridwire's libmpi_abi.so (%s); "
                            "set GW_MPICH_ABI_LIBMPI to its path\n", gw_err);
        return NULL;
    }
    return dlsym(gw_lib, name);
}

int gw_missing(const char *name)
{
    if (gw_lib)
        fprintf(stderr, "gridwire MPICH-ABI shim: %s is missing from gridwire's library\n", name);
    return M_ERR_INTERN;
}

#define GW(ret, name, args)                                                     \
    static ret(*p_##name) args;                                                 \
    if (!p_##name) {                                                            \
        p_##name = (ret(*) args)gw_sym("P" #name);                              \
        if (!p_##name)                                                          \
            return gw_missing(#name);                                           \
    }

/* ---- handles ---- */

#define HASH_SIZE 1024
static struct { int kind, m, a; } hash_m2a[HASH_SIZE]; /* MPICH values repeat across kinds (MPI_MESSAGE_NULL == MPI_REQUEST_NULL) */
static int rev_a2m[4096];
static ah (*fromint[K_N])(int);
static int (*toint[K_N])(ah);
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;
static const char *const kind_name[K_N] = {"Comm", "Group", "Type", "Op", "Errhandler", "Request",
                                           "Info", "Win", "File", "Message", "Session"};

static unsigned hslot(int kind, int m) { return (((unsigned)m ^ (unsigned)kind) * 2654435761u) >> 22; }

static void tables_init(void)
{
    for (size_t i = 0; i < N_HANDLES; i++) {
        const struct hpair *p = &HANDLES[i];
        unsigned s = hslot(p->kind, p->m) % HASH_SIZE;
        while (hash_m2a[s].a && (hash_m2a[s].m != p->m || hash_m2a[s].kind != p->kind))
            s = (s + 1) % HASH_SIZE;
        if (!hash_m2a[s].a) {
            hash_m2a[s].kind = p->kind;
            hash_m2a[s].m = p->m;
            hash_m2a[s].a = p->a;
        }
        if (p->a > 0 && p->a < 4096 && !rev_a2m[p->a])
            rev_a2m[p->a] = p->m;
    }
    for (int k = 0; k < K_N; k++) {
        char n[64];
        snprintf(n, sizeof n, "PMPI_%s_fromint", kind_name[k]);
        fromint[k] = (ah(*)(int))gw_sym(n);
        snprintf(n, sizeof n, "PMPI_%s_toint", kind_name[k]);
        toint[k] = (int (*)(ah))gw_sym(n);
    }
}

ah h2a(int kind, mh v)
{
    pthread_once(&tables_once, tables_init);
    unsigned s = hslot(kind, v) % HASH_SIZE;
    while (hash_m2a[s].a) {
        if (hash_m2a[s].m == v && hash_m2a[s].kind == kind)
            return (ah)(intptr_t)hash_m2a[s].a;
        s = (s + 1) % HASH_SIZE;
    }
    /* A user handle: MPICH's int is gridwire's toint value (0x1000 + a reused
     * slot; MPICH's predefined values are negative or >= 0x04000000). */
    if (kind >= 0 && kind < K_N && fromint[kind] && v >= 0x1000)
        return fromint[kind](v);
    /* A standard-ABI predefined handle MPICH has no name for (passed back as is). */
    if (v >= 0 && v < 0x1000)
        return (ah)(intptr_t)v;
    /* Anything else is invalid: a value gridwire rejects as a handle of any kind. */
    return (ah)(intptr_t)0x7fffffff;
}

mh h2m(int kind, ah v)
{
    pthread_once(&tables_once, tables_init);
    intptr_t x = (intptr_t)v;
    if (x >= 0 && x < 4096)
        return rev_a2m[x] ? rev_a2m[x] : (int)x;
    if (kind >= 0 && kind < K_N && toint[kind])
        return toint[kind](v);
    return (int)x;
}

/* ---- integer constants ---- */

int vmap_m2a(const struct ipair *t, int n, int v)
{
    for (int i = 0; i < n; i++)
        if (t[i].m == v)
            return t[i].a;
    return v;
}

int vmap_a2m(const struct ipair *t, int n, int v)
{
    for (int i = 0; i < n; i++)
        if (t[i].a == v)
            return t[i].m;
    return v;
}

int bits_m2a(const struct ipair *t, int n, int v)
{
    int r = 0;
    for (int i = 0; i < n; i++)
        if (v & t[i].m) {
            r |= t[i].a;
            v &= ~t[i].m;
        }
    return r | v; /* unknown bits pass through, for gridwire to reject */
}

int bits_a2m(const struct ipair *t, int n, int v)
{
    int r = 0;
    for (int i = 0; i < n; i++)
        if (v & t[i].a) {
            r |= t[i].m;
            v &= ~t[i].a;
        }
    return r | v;
}

/* Error codes: the classes by table; codes added with MPI_Add_error_class/code
 * (gridwire: above its MPI_ERR_LASTCODE) move above MPICH's MPI_ERR_LASTCODE,
 * where MPICH puts its own dynamic codes. */
#define M_DYN 0x40000000
int err_a2m(int rc)
{
    if (rc == 0)
        return 0;
    if (rc > A_ERR_LASTCODE)
        return M_DYN + (rc - A_ERR_LASTCODE - 1);
    for (int i = 0; i < N_err; i++)
        if (MAP_err[i].a == rc)
            return MAP_err[i].m;
    /* A class MPICH's ABI lacks (MPI_ERR_ERRHANDLER, MPI_ERR_ABI, ...); other
     * values (a program's own MPI_ERROR in a status) pass unchanged. */
    int top = 0; /* the largest standard-ABI class below the MPI_T range */
    for (int i = 0; i < N_err; i++)
        if (MAP_err[i].a < 1000 && MAP_err[i].a > top)
            top = MAP_err[i].a;
    if ((rc > 0 && rc <= top + 2) || (rc > 1000 && rc < 1100))
        return M_ERR_OTHER;
    return rc;
}

int err_m2a(int rc)
{
    if (rc == 0)
        return 0;
    if (rc >= M_DYN)
        return A_ERR_LASTCODE + 1 + (rc - M_DYN);
    for (int i = 0; i < N_err; i++)
        if (MAP_err[i].m == rc)
            return MAP_err[i].a;
    return rc; /* not a code: gridwire reports it */
}

/* ---- statuses ---- */

void st_a2m(const astatus *a, mstatus *m)
{
    uint64_t bytes = (uint64_t)(uint32_t)a->internal[0] | ((uint64_t)(uint32_t)a->internal[1] << 32);
    m->count_lo = (int)(uint32_t)bytes;
    m->count_hi_and_cancelled = (int)(((bytes >> 32) << 1) | (uint64_t)(a->internal[2] & 1));
    m->MPI_SOURCE = vmap_a2m(MAP_rank, N_rank, a->MPI_SOURCE);
    m->MPI_TAG = vmap_a2m(MAP_tag, N_tag, a->MPI_TAG);
    m->MPI_ERROR = err_a2m(a->MPI_ERROR);
}

void st_m2a(const mstatus *m, astatus *a)
{
    uint64_t bytes = (uint64_t)(uint32_t)m->count_lo | ((uint64_t)((uint32_t)m->count_hi_and_cancelled >> 1) << 32);
    a->internal[0] = (int)(uint32_t)bytes;
    a->internal[1] = (int)(uint32_t)(bytes >> 32);
    a->internal[2] = m->count_hi_and_cancelled & 1;
    a->internal[3] = 0;
    a->internal[4] = 0;
    a->MPI_SOURCE = vmap_m2a(MAP_rank, N_rank, m->MPI_SOURCE);
    a->MPI_TAG = vmap_m2a(MAP_tag, N_tag, m->MPI_TAG);
    a->MPI_ERROR = err_m2a(m->MPI_ERROR);
}

/* ---- pointers, scratch, counts ---- */

/* MPICH's MPI_UNWEIGHTED / MPI_WEIGHTS_EMPTY are addresses of these. */
static int unweighted_, weights_empty_;
EXPORT int *const MPI_UNWEIGHTED = &unweighted_;
EXPORT int *const MPI_WEIGHTS_EMPTY = &weights_empty_;
/* MPICH's MPI_F_STATUS(ES)_IGNORE. */
static int f_status_ignore_[5], f_statuses_ignore_[5];
EXPORT int *MPI_F_STATUS_IGNORE = f_status_ignore_;
EXPORT int *MPI_F_STATUSES_IGNORE = f_statuses_ignore_;

int *weights_m2a(const int *p)
{
    if (p == &unweighted_)
        return A_UNWEIGHTED;
    if (p == &weights_empty_)
        return A_WEIGHTS_EMPTY;
    return (int *)p;
}

void *scratch(size_t bytes, void *stackbuf, size_t stackbytes)
{
    return bytes <= stackbytes ? stackbuf : malloc(bytes);
}

void scratch_free(void *p, void *stackbuf)
{
    if (p && p != stackbuf)
        free(p);
}

int peer_count(mh comm, int *n)
{
    GW(int, MPI_Comm_test_inter, (ah, int *));
    GW(int, MPI_Comm_size, (ah, int *));
    GW(int, MPI_Comm_remote_size, (ah, int *));
    ah c = h2a(K_COMM, comm);
    int inter = 0;
    int rc = p_MPI_Comm_test_inter(c, &inter);
    if (rc == 0)
        rc = inter ? p_MPI_Comm_remote_size(c, n) : p_MPI_Comm_size(c, n);
    return err_a2m(rc);
}

int neighbor_counts(mh comm, int *indeg, int *outdeg)
{
    GW(int, MPI_Topo_test, (ah, int *));
    GW(int, MPI_Cartdim_get, (ah, int *));
    GW(int, MPI_Comm_rank, (ah, int *));
    GW(int, MPI_Graph_neighbors_count, (ah, int, int *));
    GW(int, MPI_Dist_graph_neighbors_count, (ah, int *, int *, int *));
    ah c = h2a(K_COMM, comm);
    int topo = 0, rc = p_MPI_Topo_test(c, &topo);
    if (rc)
        return err_a2m(rc);
    int t = vmap_a2m(MAP_topo, N_topo, topo);
    int cart = vmap_m2a(MAP_topo, N_topo, 2), graph = vmap_m2a(MAP_topo, N_topo, 1);
    (void)t;
    if (topo == cart) {
        int nd = 0;
        rc = p_MPI_Cartdim_get(c, &nd);
        *indeg = *outdeg = 2 * nd;
    } else if (topo == graph) {
        int r = 0;
        rc = p_MPI_Comm_rank(c, &r);
        if (rc == 0)
            rc = p_MPI_Graph_neighbors_count(c, r, indeg);
        *outdeg = *indeg;
    } else {
        int w = 0;
        rc = p_MPI_Dist_graph_neighbors_count(c, indeg, outdeg, &w);
    }
    return err_a2m(rc);
}

/* ---- handle <-> integer: identities in MPICH's ABI (handles are ints) ---- */

#define IDENT(Kind)                                                              \
    EXPORT int PMPI_##Kind##_c2f(int h) { return h; }                            \
    EXPORT int PMPI_##Kind##_f2c(int h) { return h; }                            \
    EXPORT int PMPI_##Kind##_toint(int h) { return h; }                          \
    EXPORT int PMPI_##Kind##_fromint(int h) { return h; }                        \
    EXPORT int MPI_##Kind##_c2f(int h) __attribute__((alias("PMPI_" #Kind "_c2f")));         \
    EXPORT int MPI_##Kind##_f2c(int h) __attribute__((alias("PMPI_" #Kind "_f2c")));         \
    EXPORT int MPI_##Kind##_toint(int h) __attribute__((alias("PMPI_" #Kind "_toint")));     \
    EXPORT int MPI_##Kind##_fromint(int h) __attribute__((alias("PMPI_" #Kind "_fromint")));
IDENT(Comm)
IDENT(Group)
IDENT(Type)
IDENT(Op)
IDENT(Errhandler)
IDENT(Request)
IDENT(Info)
IDENT(Win)
IDENT(File)
IDENT(Message)
IDENT(Session)

/* MPICH's Fortran status is its C status (MPI_F_STATUS_SIZE 5). */
EXPORT int PMPI_Status_c2f(const mstatus *c, int *f)
{
    if (!c || !f || c == M_STATUS_IGNORE)
        return M_ERR_ARG;
    memcpy(f, c, sizeof *c);
    return 0;
}
EXPORT int MPI_Status_c2f(const mstatus *c, int *f) __attribute__((alias("PMPI_Status_c2f")));
EXPORT int PMPI_Status_f2c(const int *f, mstatus *c)
{
    if (!c || !f || c == M_STATUS_IGNORE)
        return M_ERR_ARG;
    memcpy(c, f, sizeof *c);
    return 0;
}
EXPORT int MPI_Status_f2c(const int *f, mstatus *c) __attribute__((alias("PMPI_Status_f2c")));

/* The MPI version of the MPICH ABI this shim provides (MPICH's mpi.h it was built with). */
EXPORT int PMPI_Get_version(int *version, int *subversion)
{
    if (!version || !subversion)
        return M_ERR_ARG;
    *version = M_VERSION;
    *subversion = M_SUBVERSION;
    return 0;
}
EXPORT int MPI_Get_version(int *v, int *s) __attribute__((alias("PMPI_Get_version")));

EXPORT int PMPI_Pcontrol(const int level, ...)
{
    GW(int, MPI_Pcontrol, (int, ...));
    return err_a2m(p_MPI_Pcontrol(level));
}
EXPORT int MPI_Pcontrol(const int level, ...) __attribute__((alias("PMPI_Pcontrol")));

/* ---- user reduction operations: a fixed set of trampolines ---- */

#define NOPS 64
typedef void (*m_user_fn)(void *, void *, int *, int *);
typedef void (*m_user_fn_c)(void *, void *, int64_t *, int *);
static struct { void *fn; int big; int op; int used; } ops[NOPS];
static pthread_mutex_t ops_lock = PTHREAD_MUTEX_INITIALIZER;

static void op_call(int i, void *in, void *inout, void *len, ah *dt)
{
    int mdt = h2m(K_TYPE, dt ? *dt : 0);
    if (i < 0 || i >= NOPS || !ops[i].fn)
        return; /* cannot happen: gridwire only calls trampolines it was given */
    if (ops[i].big)
        ((m_user_fn_c)ops[i].fn)(in, inout, (int64_t *)len, &mdt);
    else
        ((m_user_fn)ops[i].fn)(in, inout, (int *)len, &mdt);
}
/* Trampoline op_t<h><l> calls user operation 8 * h + l. */
#define OPT(h, l) static void op_t##h##l(void *a, void *b, void *n, ah *d) { op_call(8 * h + l, a, b, n, d); }
#define OPT8(h) OPT(h, 0) OPT(h, 1) OPT(h, 2) OPT(h, 3) OPT(h, 4) OPT(h, 5) OPT(h, 6) OPT(h, 7)
OPT8(0) OPT8(1) OPT8(2) OPT8(3) OPT8(4) OPT8(5) OPT8(6) OPT8(7)
#define OPN(h, l) op_t##h##l,
#define OPN8(h) OPN(h, 0) OPN(h, 1) OPN(h, 2) OPN(h, 3) OPN(h, 4) OPN(h, 5) OPN(h, 6) OPN(h, 7)
static void (*const op_tramp[NOPS])(void *, void *, void *, ah *) = {OPN8(0) OPN8(1) OPN8(2) OPN8(3) OPN8(4) OPN8(5) OPN8(6) OPN8(7)};

static int op_create(void *fn, int big, int commute, int *op)
{
    GW(int, MPI_Op_create, (void *, int, ah *));
    GW(int, MPI_Op_create_c, (void *, int, ah *));
    if (!fn || !op)
        return M_ERR_ARG;
    /* The free slot after the last one taken, round-robin: a slot freed by
     * MPI_Op_free is reused as late as possible (an operation may be freed
     * while a nonblocking collective still uses it). */
    static int next;
    pthread_mutex_lock(&ops_lock);
    int i = NOPS;
    for (int k = 0; k < NOPS; k++)
        if (!ops[(next + k) % NOPS].used) {
            i = (next + k) % NOPS;
            break;
        }
    if (i == NOPS) {
        pthread_mutex_unlock(&ops_lock);
        fprintf(stderr, "gridwire MPICH-ABI shim: more than %d user operations at once\n", NOPS);
        return M_ERR_INTERN;
    }
    next = (i + 1) % NOPS;
    ops[i].used = 1;
    ops[i].fn = fn;
    ops[i].big = big;
    pthread_mutex_unlock(&ops_lock);
    ah aop = 0;
    int rc = big ? p_MPI_Op_create_c((void *)op_tramp[i], commute, &aop)
                 : p_MPI_Op_create((void *)op_tramp[i], commute, &aop);
    if (rc) {
        __atomic_store_n(&ops[i].used, 0, __ATOMIC_RELEASE);
        return err_a2m(rc);
    }
    *op = h2m(K_OP, aop);
    ops[i].op = *op;
    return 0;
}

EXPORT int PMPI_Op_create(m_user_fn fn, int commute, int *op) { return op_create((void *)fn, 0, commute, op); }
EXPORT int MPI_Op_create(m_user_fn fn, int commute, int *op) __attribute__((alias("PMPI_Op_create")));
EXPORT int PMPI_Op_create_c(m_user_fn_c fn, int commute, int *op) { return op_create((void *)fn, 1, commute, op); }
EXPORT int MPI_Op_create_c(m_user_fn_c fn, int commute, int *op) __attribute__((alias("PMPI_Op_create_c")));

EXPORT int PMPI_Op_free(int *op)
{
    GW(int, MPI_Op_free, (ah *));
    if (!op)
        return M_ERR_ARG;
    int old = *op;
    ah a = h2a(K_OP, old);
    int rc = p_MPI_Op_free(&a);
    if (rc == 0) {
        pthread_mutex_lock(&ops_lock);
        for (int i = 0; i < NOPS; i++)
            if (ops[i].used && ops[i].op == old) {
                ops[i].used = 0;
                break;
            }
        pthread_mutex_unlock(&ops_lock);
        *op = h2m(K_OP, a);
    }
    return err_a2m(rc);
}
EXPORT int MPI_Op_free(int *op) __attribute__((alias("PMPI_Op_free")));

/* ---- error handlers: trampolines per kind ---- */

#define NERRH 32
typedef void (*m_errh_fn)(int *, int *, ...);
static void *errh_fn[4][NERRH];
static int errh_n[4];
static pthread_mutex_t errh_lock = PTHREAD_MUTEX_INITIALIZER;
static const int errh_kind[4] = {K_COMM, K_WIN, K_FILE, K_SESSION};

static void errh_call(int k, int i, ah *h, int *code)
{
    if (k < 0 || k >= 4 || i < 0 || i >= NERRH || !errh_fn[k][i])
        return;
    int m = h2m(errh_kind[k], h ? *h : 0);
    int c = err_a2m(code ? *code : 0);
    ((m_errh_fn)errh_fn[k][i])(&m, &c);
}
/* Trampoline eh_t<k>_<h><l> calls error handler function 8 * h + l of kind k. */
#define EHT(k, h, l) static void eh_t##k##_##h##l(ah *x, int *c, ...) { errh_call(k, 8 * h + l, x, c); }
#define EHT8(k, h) EHT(k, h, 0) EHT(k, h, 1) EHT(k, h, 2) EHT(k, h, 3) EHT(k, h, 4) EHT(k, h, 5) EHT(k, h, 6) EHT(k, h, 7)
#define EHTK(k) EHT8(k, 0) EHT8(k, 1) EHT8(k, 2) EHT8(k, 3)
EHTK(0) EHTK(1) EHTK(2) EHTK(3)
#define EHN(k, h, l) eh_t##k##_##h##l,
#define EHN8(k, h) EHN(k, h, 0) EHN(k, h, 1) EHN(k, h, 2) EHN(k, h, 3) EHN(k, h, 4) EHN(k, h, 5) EHN(k, h, 6) EHN(k, h, 7)
#define EHNK(k) {EHN8(k, 0) EHN8(k, 1) EHN8(k, 2) EHN8(k, 3)}
static void (*const errh_tramp[4][NERRH])(ah *, int *, ...) = {EHNK(0), EHNK(1), EHNK(2), EHNK(3)};

static int errh_create(int k, const char *abi_name, void *fn, int *eh)
{
    if (!fn || !eh)
        return M_ERR_ARG;
    int (*create)(void *, ah *) = (int (*)(void *, ah *))gw_sym(abi_name);
    if (!create)
        return gw_missing(abi_name);
    pthread_mutex_lock(&errh_lock);
    /* The same function twice shares a trampoline. */
    int i = 0;
    while (i < errh_n[k] && errh_fn[k][i] != fn)
        i++;
    if (i == errh_n[k]) {
        if (i == NERRH) {
            pthread_mutex_unlock(&errh_lock);
            fprintf(stderr, "gridwire MPICH-ABI shim: more than %d error handler functions\n", NERRH);
            return M_ERR_INTERN;
        }
        errh_fn[k][i] = fn;
        errh_n[k]++;
    }
    pthread_mutex_unlock(&errh_lock);
    ah a = 0;
    int rc = create((void *)errh_tramp[k][i], &a);
    if (rc == 0)
        *eh = h2m(K_ERRH, a);
    return err_a2m(rc);
}

#define ERRH_CREATE(Kind, k)                                                                      \
    EXPORT int PMPI_##Kind##_create_errhandler(m_errh_fn fn, int *eh)                             \
    { return errh_create(k, "PMPI_" #Kind "_create_errhandler", (void *)fn, eh); }               \
    EXPORT int MPI_##Kind##_create_errhandler(m_errh_fn fn, int *eh)                              \
        __attribute__((alias("PMPI_" #Kind "_create_errhandler")));
ERRH_CREATE(Comm, 0)
ERRH_CREATE(Win, 1)
ERRH_CREATE(File, 2)
ERRH_CREATE(Session, 3)

/* ---- attribute keyvals: the closure travels as extra_state ---- */

typedef int (*m_copy_fn)(int, int, void *, void *, void *, int *);
typedef int (*m_delete_fn)(int, int, void *, void *);
struct kv { m_copy_fn copy; m_delete_fn del; void *extra; int kind; };

EXPORT int MPIR_Dup_fn(int oldcomm, int keyval, void *extra, void *in, void *out, int *flag)
{
    (void)oldcomm; (void)keyval; (void)extra;
    *(void **)out = in;
    *flag = 1;
    return 0;
}

static int kv_copy(ah old, int keyval, void *extra, void *in, void *out, int *flag)
{
    struct kv *k = extra;
    int rc = k->copy(h2m(k->kind, old), vmap_a2m(MAP_keyval, N_keyval, keyval), k->extra, in, out, flag);
    return err_m2a(rc);
}

static int kv_delete(ah h, int keyval, void *val, void *extra)
{
    struct kv *k = extra;
    int rc = k->del(h2m(k->kind, h), vmap_a2m(MAP_keyval, N_keyval, keyval), val, k->extra);
    return err_m2a(rc);
}

static int keyval_create(int kind, const char *abi_name, m_copy_fn copy, m_delete_fn del, int *keyval, void *extra)
{
    int (*create)(void *, void *, int *, void *) = (int (*)(void *, void *, int *, void *))gw_sym(abi_name);
    if (!create)
        return gw_missing(abi_name);
    if (!keyval)
        return M_ERR_ARG;
    struct kv *k = malloc(sizeof *k); /* lives as long as the keyval's attributes may */
    if (!k)
        return M_ERR_NO_MEM;
    *k = (struct kv){copy, del, extra, kind};
    void *acopy = copy == NULL ? (void *)0 : copy == MPIR_Dup_fn ? (void *)1 : (void *)kv_copy;
    void *adel = del == NULL ? (void *)0 : (void *)kv_delete;
    int akv = 0;
    int rc = create(acopy, adel, &akv, k);
    if (rc) {
        free(k);
        return err_a2m(rc);
    }
    *keyval = vmap_a2m(MAP_keyval, N_keyval, akv);
    return 0;
}

#define KEYVAL_CREATE(Kind, kind)                                                                       \
    EXPORT int PMPI_##Kind##_create_keyval(m_copy_fn c, m_delete_fn d, int *kv, void *extra)            \
    { return keyval_create(kind, "PMPI_" #Kind "_create_keyval", c, d, kv, extra); }                    \
    EXPORT int MPI_##Kind##_create_keyval(m_copy_fn c, m_delete_fn d, int *kv, void *extra)             \
        __attribute__((alias("PMPI_" #Kind "_create_keyval")));
KEYVAL_CREATE(Comm, K_COMM)
KEYVAL_CREATE(Type, K_TYPE)
KEYVAL_CREATE(Win, K_WIN)

/* Predefined attributes whose values are constants that differ between the ABIs. */
static int attr_host, attr_io, attr_lastcode, attr_flavor, attr_model;

static int get_attr(int kind, const char *abi_name, int h, int keyval, void *val, int *flag)
{
    int (*get)(ah, int, void *, int *) = (int (*)(ah, int, void *, int *))gw_sym(abi_name);
    if (!get)
        return gw_missing(abi_name);
    int akv = vmap_m2a(MAP_keyval, N_keyval, keyval);
    int rc = get(h2a(kind, h), akv, val, flag);
    if (rc || !flag || !*flag || !val)
        return err_a2m(rc);
    int **pp = (int **)val;
    int *slot = NULL, v = 0;
    if (keyval == M_HOST) {
        v = vmap_a2m(MAP_rank, N_rank, **pp);
        slot = &attr_host;
    } else if (keyval == M_IO) {
        v = vmap_a2m(MAP_rank, N_rank, **pp);
        slot = &attr_io;
    } else if (keyval == M_LASTUSEDCODE) {
        v = err_a2m(**pp);
        slot = &attr_lastcode;
    } else if (kind == K_WIN && keyval == M_WIN_CREATE_FLAVOR) {
        v = vmap_a2m(MAP_flavor, N_flavor, **pp);
        slot = &attr_flavor;
    } else if (kind == K_WIN && keyval == M_WIN_MODEL) {
        v = vmap_a2m(MAP_model, N_model, **pp);
        slot = &attr_model;
    }
    if (slot) {
        __atomic_store_n(slot, v, __ATOMIC_RELAXED);
        *pp = slot;
    }
    return 0;
}

#define GET_ATTR(Kind, kind)                                                                    \
    EXPORT int PMPI_##Kind##_get_attr(int h, int keyval, void *val, int *flag)                  \
    { return get_attr(kind, "PMPI_" #Kind "_get_attr", h, keyval, val, flag); }                 \
    EXPORT int MPI_##Kind##_get_attr(int h, int keyval, void *val, int *flag)                   \
        __attribute__((alias("PMPI_" #Kind "_get_attr")));
GET_ATTR(Comm, K_COMM)
GET_ATTR(Type, K_TYPE)
GET_ATTR(Win, K_WIN)

/* ---- generalized requests ---- */

typedef int (*m_query_fn)(void *, mstatus *);
typedef int (*m_free_fn)(void *);
typedef int (*m_cancel_fn)(void *, int);
struct greq { m_query_fn query; m_free_fn free; m_cancel_fn cancel; void *extra; };

static int greq_query(void *extra, astatus *s)
{
    struct greq *g = extra;
    mstatus m;
    memset(&m, 0, sizeof m);
    if (s)
        st_a2m(s, &m);
    int rc = g->query(g->extra, &m);
    if (s)
        st_m2a(&m, s);
    return err_m2a(rc);
}

static int greq_free(void *extra)
{
    struct greq *g = extra;
    int rc = g->free(g->extra);
    free(g);
    return err_m2a(rc);
}

static int greq_cancel(void *extra, int complete)
{
    struct greq *g = extra;
    return err_m2a(g->cancel(g->extra, complete));
}

EXPORT int PMPI_Grequest_start(m_query_fn q, m_free_fn f, m_cancel_fn c, void *extra, int *request)
{
    GW(int, MPI_Grequest_start, (void *, void *, void *, void *, ah *));
    if (!q || !f || !c || !request)
        return M_ERR_ARG;
    struct greq *g = malloc(sizeof *g);
    if (!g)
        return M_ERR_NO_MEM;
    *g = (struct greq){q, f, c, extra};
    ah r = 0;
    int rc = p_MPI_Grequest_start((void *)greq_query, (void *)greq_free, (void *)greq_cancel, g, &r);
    if (rc) {
        free(g);
        return err_a2m(rc);
    }
    *request = h2m(K_REQ, r);
    return 0;
}
EXPORT int MPI_Grequest_start(m_query_fn q, m_free_fn f, m_cancel_fn c, void *extra, int *request)
    __attribute__((alias("PMPI_Grequest_start")));

/* ---- data representations: not translated ---- */

EXPORT int PMPI_Register_datarep(const char *rep, void *r, void *w, void *e, void *extra)
{
    (void)rep; (void)r; (void)w; (void)e; (void)extra;
    return M_ERR_UNSUPPORTED_OPERATION;
}
EXPORT int MPI_Register_datarep(const char *rep, void *r, void *w, void *e, void *extra)
    __attribute__((alias("PMPI_Register_datarep")));
EXPORT int PMPI_Register_datarep_c(const char *rep, void *r, void *w, void *e, void *extra)
{
    (void)rep; (void)r; (void)w; (void)e; (void)extra;
    return M_ERR_UNSUPPORTED_OPERATION;
}
EXPORT int MPI_Register_datarep_c(const char *rep, void *r, void *w, void *e, void *extra)
    __attribute__((alias("PMPI_Register_datarep_c")));

/* ---- MPI_Comm_idup: gridwire writes the new 64-bit handle into the MPI_Comm
 * it was given when the request completes; the MPICH caller has an int. The
 * shim gives gridwire a cell of its own and remembers (cell, caller's int);
 * every wait/test/get_status wrapper calls idup_poll() after gridwire returns,
 * which converts the handles of the cells gridwire has written. A cell is
 * written before its request completes, so the caller's int is set by the
 * time a wait or test reports the request complete. ---- */

struct idup { ah cell; int *user; struct idup *next; };
static struct idup *idups;
static int idup_pending;
static pthread_mutex_t idup_lock = PTHREAD_MUTEX_INITIALIZER;

void idup_poll(void)
{
    if (!__atomic_load_n(&idup_pending, __ATOMIC_ACQUIRE))
        return;
    pthread_mutex_lock(&idup_lock);
    for (struct idup **pp = &idups; *pp;) {
        struct idup *d = *pp;
        ah v = __atomic_load_n(&d->cell, __ATOMIC_ACQUIRE);
        if (v != A_COMM_NULL) {
            *d->user = h2m(K_COMM, v);
            *pp = d->next;
            free(d);
            __atomic_sub_fetch(&idup_pending, 1, __ATOMIC_RELEASE);
        } else {
            pp = &d->next;
        }
    }
    pthread_mutex_unlock(&idup_lock);
}

static int idup(ah comm, ah info, int with_info, int *newcomm, int *request)
{
    GW(int, MPI_Comm_idup, (ah, ah *, ah *));
    GW(int, MPI_Comm_idup_with_info, (ah, ah, ah *, ah *));
    if (!newcomm || !request)
        return M_ERR_ARG;
    struct idup *d = malloc(sizeof *d);
    if (!d)
        return M_ERR_NO_MEM;
    d->cell = A_COMM_NULL;
    d->user = newcomm;
    *newcomm = M_COMM_NULL;
    ah req = 0;
    int rc = with_info ? p_MPI_Comm_idup_with_info(comm, info, &d->cell, &req) : p_MPI_Comm_idup(comm, &d->cell, &req);
    if (rc) {
        free(d);
        return err_a2m(rc);
    }
    /* Listed after the call (gridwire may already have written the cell: the
     * next poll converts it). */
    pthread_mutex_lock(&idup_lock);
    d->next = idups;
    idups = d;
    __atomic_add_fetch(&idup_pending, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&idup_lock);
    *request = h2m(K_REQ, req);
    idup_poll();
    return 0;
}

EXPORT int PMPI_Comm_idup(int comm, int *newcomm, int *request)
{
    return idup(h2a(K_COMM, comm), 0, 0, newcomm, request);
}
EXPORT int MPI_Comm_idup(int comm, int *newcomm, int *request) __attribute__((alias("PMPI_Comm_idup")));
EXPORT int PMPI_Comm_idup_with_info(int comm, int info, int *newcomm, int *request)
{
    return idup(h2a(K_COMM, comm), h2a(K_INFO, info), 1, newcomm, request);
}
EXPORT int MPI_Comm_idup_with_info(int comm, int info, int *newcomm, int *request)
    __attribute__((alias("PMPI_Comm_idup_with_info")));

/* ---- error classes MPICH has and the standard ABI lacks (newer MPICH classes
 * compiled into a program): their own class, with a string that says so. ---- */

static int mpich_only_class(int code)
{
    if (code <= 0 || code >= 128)
        return 0;
    for (int i = 0; i < N_err; i++)
        if (MAP_err[i].m == code)
            return 0;
    return 1;
}

EXPORT int PMPI_Error_class(int code, int *cls)
{
    GW(int, MPI_Error_class, (int, int *));
    if (!cls)
        return M_ERR_ARG;
    if (mpich_only_class(code)) {
        *cls = code;
        return 0;
    }
    int a = 0, rc = p_MPI_Error_class(err_m2a(code), &a);
    if (rc == 0)
        *cls = err_a2m(a);
    return err_a2m(rc);
}
EXPORT int MPI_Error_class(int code, int *cls) __attribute__((alias("PMPI_Error_class")));

EXPORT int PMPI_Error_string(int code, char *s, int *len)
{
    GW(int, MPI_Error_string, (int, char *, int *));
    if (!s || !len)
        return M_ERR_ARG;
    if (mpich_only_class(code)) {
        /* MPICH's MPI_MAX_ERROR_STRING is 512, as the standard ABI's. */
        *len = snprintf(s, 512, "MPI error class %d (MPICH ABI; no gridwire counterpart)", code);
        return 0;
    }
    return err_a2m(p_MPI_Error_string(err_m2a(code), s, len));
}
EXPORT int MPI_Error_string(int code, char *s, int *len) __attribute__((alias("PMPI_Error_string")));

/* ---- Bsend buffers: MPICH's MPI_BSEND_OVERHEAD (compiled into programs,
 * which size their buffers with it) is smaller than gridwire's, so the shim
 * attaches a buffer of its own with room for gridwire's overhead on as many
 * messages as the program's buffer could hold, and gives the program's buffer
 * back on detach. MPI_BUFFER_AUTOMATIC ((void *)-2 in MPICH 4.2+, 2 in the
 * standard ABI) is passed on. One buffer per process, communicator, session. */

#define M_BUFFER_AUTOMATIC ((void *)(intptr_t)-2)
#define A_BUFFER_AUTOMATIC ((void *)(intptr_t)2)
enum { BB_PROC, BB_COMM, BB_SESSION };
struct bbuf { int scope, h; void *user; int64_t size; void *ours; struct bbuf *next; };
static struct bbuf *bbufs;
static pthread_mutex_t bbuf_lock = PTHREAD_MUTEX_INITIALIZER;

static int bb_attach_call(int scope, int h, void *b, int64_t size)
{
    GW(int, MPI_Buffer_attach_c, (void *, int64_t));
    GW(int, MPI_Comm_attach_buffer_c, (ah, void *, int64_t));
    GW(int, MPI_Session_attach_buffer_c, (ah, void *, int64_t));
    if (scope == BB_COMM)
        return p_MPI_Comm_attach_buffer_c(h2a(K_COMM, h), b, size);
    if (scope == BB_SESSION)
        return p_MPI_Session_attach_buffer_c(h2a(K_SESSION, h), b, size);
    return p_MPI_Buffer_attach_c(b, size);
}

static int bb_detach_call(int scope, int h, void **b, int64_t *size)
{
    GW(int, MPI_Buffer_detach_c, (void *, int64_t *));
    GW(int, MPI_Comm_detach_buffer_c, (ah, void *, int64_t *));
    GW(int, MPI_Session_detach_buffer_c, (ah, void *, int64_t *));
    if (scope == BB_COMM)
        return p_MPI_Comm_detach_buffer_c(h2a(K_COMM, h), b, size);
    if (scope == BB_SESSION)
        return p_MPI_Session_detach_buffer_c(h2a(K_SESSION, h), b, size);
    return p_MPI_Buffer_detach_c(b, size);
}

static int buffer_attach(int scope, int h, void *b, int64_t size)
{
    if (b == M_BUFFER_AUTOMATIC)
        return err_a2m(bb_attach_call(scope, h, A_BUFFER_AUTOMATIC, size));
    if (size < 0 || (!b && size > 0))
        return err_a2m(bb_attach_call(scope, h, b, size)); /* gridwire reports it */
    int64_t extra = A_BSEND_OVERHEAD > M_BSEND_OVERHEAD ? A_BSEND_OVERHEAD - M_BSEND_OVERHEAD : 0;
    int64_t want = size + (size / M_BSEND_OVERHEAD + 1) * extra;
    struct bbuf *e = malloc(sizeof *e);
    void *ours = malloc(want > 0 ? want : 1);
    if (!ours || !e) {
        free(ours);
        free(e);
        return M_ERR_NO_MEM;
    }
    *e = (struct bbuf){scope, h, b, size, ours, NULL};
    pthread_mutex_lock(&bbuf_lock);
    int rc = bb_attach_call(scope, h, ours, want);
    if (rc == 0) {
        e->next = bbufs;
        bbufs = e;
    } else {
        free(ours);
        free(e);
    }
    pthread_mutex_unlock(&bbuf_lock);
    return err_a2m(rc);
}

static int buffer_detach(int scope, int h, void **addr, int64_t *size)
{
    if (!addr || !size)
        return M_ERR_ARG;
    void *a = NULL;
    int64_t n = 0;
    pthread_mutex_lock(&bbuf_lock);
    int rc = bb_detach_call(scope, h, &a, &n);
    if (rc == 0 && a == A_BUFFER_AUTOMATIC) {
        a = M_BUFFER_AUTOMATIC;
    } else if (rc == 0 && a) {
        for (struct bbuf **pp = &bbufs; *pp; pp = &(*pp)->next) {
            struct bbuf *e = *pp;
            if (e->ours == a) {
                a = e->user;
                n = e->size;
                *pp = e->next;
                free(e->ours);
                free(e);
                break;
            }
        }
    }
    pthread_mutex_unlock(&bbuf_lock);
    if (rc == 0) {
        *addr = a;
        *size = n;
    }
    return err_a2m(rc);
}

static int detach_int(int scope, int h, void *addr, int *size)
{
    if (!size)
        return M_ERR_ARG;
    int64_t n = 0;
    int rc = buffer_detach(scope, h, (void **)addr, &n);
    if (rc == 0)
        *size = n > INT_MAX ? INT_MAX : (int)n;
    return rc;
}

EXPORT int PMPI_Buffer_attach(void *b, int size) { return buffer_attach(BB_PROC, 0, b, size); }
EXPORT int MPI_Buffer_attach(void *b, int size) __attribute__((alias("PMPI_Buffer_attach")));
EXPORT int PMPI_Buffer_attach_c(void *b, int64_t size) { return buffer_attach(BB_PROC, 0, b, size); }
EXPORT int MPI_Buffer_attach_c(void *b, int64_t size) __attribute__((alias("PMPI_Buffer_attach_c")));
EXPORT int PMPI_Buffer_detach(void *addr, int *size) { return detach_int(BB_PROC, 0, addr, size); }
EXPORT int MPI_Buffer_detach(void *addr, int *size) __attribute__((alias("PMPI_Buffer_detach")));
EXPORT int PMPI_Buffer_detach_c(void *addr, int64_t *size) { return buffer_detach(BB_PROC, 0, (void **)addr, size); }
EXPORT int MPI_Buffer_detach_c(void *addr, int64_t *size) __attribute__((alias("PMPI_Buffer_detach_c")));

#define SCOPED_BUFFER(Kind, scope)                                                                            \
    EXPORT int PMPI_##Kind##_attach_buffer(int h, void *b, int size) { return buffer_attach(scope, h, b, size); } \
    EXPORT int MPI_##Kind##_attach_buffer(int h, void *b, int size)                                           \
        __attribute__((alias("PMPI_" #Kind "_attach_buffer")));                                               \
    EXPORT int PMPI_##Kind##_attach_buffer_c(int h, void *b, int64_t size) { return buffer_attach(scope, h, b, size); } \
    EXPORT int MPI_##Kind##_attach_buffer_c(int h, void *b, int64_t size)                                     \
        __attribute__((alias("PMPI_" #Kind "_attach_buffer_c")));                                             \
    EXPORT int PMPI_##Kind##_detach_buffer(int h, void *addr, int *size) { return detach_int(scope, h, addr, size); } \
    EXPORT int MPI_##Kind##_detach_buffer(int h, void *addr, int *size)                                       \
        __attribute__((alias("PMPI_" #Kind "_detach_buffer")));                                               \
    EXPORT int PMPI_##Kind##_detach_buffer_c(int h, void *addr, int64_t *size)                                \
    { return buffer_detach(scope, h, (void **)addr, size); }                                                  \
    EXPORT int MPI_##Kind##_detach_buffer_c(int h, void *addr, int64_t *size)                                 \
        __attribute__((alias("PMPI_" #Kind "_detach_buffer_c")));
SCOPED_BUFFER(Comm, BB_COMM)
SCOPED_BUFFER(Session, BB_SESSION)

/* ---- strings whose maximum length is smaller in MPICH's ABI ---- */

static void copy_out(const char *from, int n, char *to, int *len, int max)
{
    if (n < 0)
        n = 0;
    if (n > max - 1)
        n = max - 1;
    memcpy(to, from, n);
    to[n] = 0;
    if (len)
        *len = n;
}

EXPORT int PMPI_Get_processor_name(char *name, int *len)
{
    GW(int, MPI_Get_processor_name, (char *, int *));
    if (!name || !len)
        return M_ERR_ARG;
    char tmp[A_MAX_PROCESSOR_NAME + 1];
    int n = 0, rc = p_MPI_Get_processor_name(tmp, &n);
    if (rc == 0)
        copy_out(tmp, n, name, len, M_MAX_PROCESSOR_NAME);
    return err_a2m(rc);
}
EXPORT int MPI_Get_processor_name(char *name, int *len) __attribute__((alias("PMPI_Get_processor_name")));

EXPORT int PMPI_Info_get_nthkey(int info, int n, char *key)
{
    GW(int, MPI_Info_get_nthkey, (ah, int, char *));
    if (!key)
        return M_ERR_ARG;
    char tmp[A_MAX_INFO_KEY + 1];
    int rc = p_MPI_Info_get_nthkey(h2a(K_INFO, info), n, tmp);
    if (rc == 0)
        copy_out(tmp, (int)strnlen(tmp, A_MAX_INFO_KEY), key, NULL, M_MAX_INFO_KEY + 1);
    return err_a2m(rc);
}
EXPORT int MPI_Info_get_nthkey(int info, int n, char *key) __attribute__((alias("PMPI_Info_get_nthkey")));

/* ---- MPI_Type_get_contents: the integers of a subarray or darray type hold
 * constants (order, distributions, MPI_DISTRIBUTE_DFLT_DARG) ---- */

static void contents_ints(int combiner, int *ints, int64_t ni)
{
    if (!ints || ni < 1)
        return;
    int sub = vmap_m2a(MAP_combiner, N_combiner, M_COMBINER_SUBARRAY);
    int dar = vmap_m2a(MAP_combiner, N_combiner, M_COMBINER_DARRAY);
    if (combiner != sub && combiner != dar)
        return;
    ints[ni - 1] = vmap_a2m(MAP_order, N_order, ints[ni - 1]); /* order is last in both */
    if (combiner == dar && ni >= 4) {
        int64_t nd = ints[2];
        /* [size, rank, ndims, gsizes?, distribs, dargs, psizes, order]: gsizes
         * are integers, or large counts in the _c form */
        int64_t at = ni == 4 * nd + 4 ? 3 + nd : ni == 3 * nd + 4 ? 3 : -1;
        for (int64_t i = 0; at >= 0 && i < 2 * nd && at + i < ni - 1; i++)
            ints[at + i] = vmap_a2m(MAP_distrib, N_distrib, ints[at + i]);
    }
}

EXPORT int PMPI_Type_get_contents(int type, int ni, int na, int nt, int ints[], intptr_t addrs[], int types[])
{
    GW(int, MPI_Type_get_contents, (ah, int, int, int, int *, intptr_t *, ah *));
    GW(int, MPI_Type_get_envelope, (ah, int *, int *, int *, int *));
    ah t = h2a(K_TYPE, type);
    ah sb[16];
    ah *at = nt > 0 && types ? scratch(sizeof(ah) * nt, sb, sizeof sb) : NULL;
    if (nt > 0 && types && !at)
        return M_ERR_NO_MEM;
    int rc = p_MPI_Type_get_contents(t, ni, na, nt, ints, addrs, at ? at : (ah *)types);
    if (rc == 0) {
        int e_ni = 0, e_na = 0, e_nt = 0, comb = 0;
        if (p_MPI_Type_get_envelope(t, &e_ni, &e_na, &e_nt, &comb) == 0)
            contents_ints(comb, ints, e_ni < ni ? e_ni : ni);
        for (int i = 0; at && i < nt && i < e_nt; i++)
            types[i] = h2m(K_TYPE, at[i]);
    }
    scratch_free(at, sb);
    return err_a2m(rc);
}
EXPORT int MPI_Type_get_contents(int type, int ni, int na, int nt, int ints[], intptr_t addrs[], int types[])
    __attribute__((alias("PMPI_Type_get_contents")));

EXPORT int PMPI_Type_get_contents_c(int type, int64_t ni, int64_t na, int64_t nc, int64_t nt, int ints[],
                                    intptr_t addrs[], int64_t counts[], int types[])
{
    GW(int, MPI_Type_get_contents_c, (ah, int64_t, int64_t, int64_t, int64_t, int *, intptr_t *, int64_t *, ah *));
    GW(int, MPI_Type_get_envelope_c, (ah, int64_t *, int64_t *, int64_t *, int64_t *, int *));
    ah t = h2a(K_TYPE, type);
    ah sb[16];
    ah *at = nt > 0 && types ? scratch(sizeof(ah) * nt, sb, sizeof sb) : NULL;
    if (nt > 0 && types && !at)
        return M_ERR_NO_MEM;
    int rc = p_MPI_Type_get_contents_c(t, ni, na, nc, nt, ints, addrs, counts, at ? at : (ah *)types);
    if (rc == 0) {
        int64_t e_ni = 0, e_na = 0, e_nc = 0, e_nt = 0;
        int comb = 0;
        if (p_MPI_Type_get_envelope_c(t, &e_ni, &e_na, &e_nc, &e_nt, &comb) == 0)
            contents_ints(comb, ints, e_ni < ni ? e_ni : ni);
        for (int64_t i = 0; at && i < nt && i < e_nt; i++)
            types[i] = h2m(K_TYPE, at[i]);
    }
    scratch_free(at, sb);
    return err_a2m(rc);
}
EXPORT int MPI_Type_get_contents_c(int type, int64_t ni, int64_t na, int64_t nc, int64_t nt, int ints[],
                                   intptr_t addrs[], int64_t counts[], int types[])
    __attribute__((alias("PMPI_Type_get_contents_c")));

/* ---- MPI-1 names MPICH 4.0 still exports (deprecated): the communicator
 * versions under their old names ---- */

EXPORT int PMPI_Keyval_create(m_copy_fn c, m_delete_fn d, int *kv, void *extra)
{
    return keyval_create(K_COMM, "PMPI_Comm_create_keyval", c, d, kv, extra);
}
EXPORT int MPI_Keyval_create(m_copy_fn c, m_delete_fn d, int *kv, void *extra)
    __attribute__((alias("PMPI_Keyval_create")));
EXPORT int PMPI_Attr_get(int comm, int keyval, void *val, int *flag)
{
    return get_attr(K_COMM, "PMPI_Comm_get_attr", comm, keyval, val, flag);
}
EXPORT int MPI_Attr_get(int comm, int keyval, void *val, int *flag) __attribute__((alias("PMPI_Attr_get")));
EXPORT int PMPI_Errhandler_create(m_errh_fn fn, int *eh)
{
    return errh_create(0, "PMPI_Comm_create_errhandler", (void *)fn, eh);
}
EXPORT int MPI_Errhandler_create(m_errh_fn fn, int *eh) __attribute__((alias("PMPI_Errhandler_create")));

static int old_extent(int type, intptr_t *lb, intptr_t *ub, intptr_t *extent)
{
    GW(int, MPI_Type_get_extent, (ah, intptr_t *, intptr_t *));
    intptr_t l = 0, e = 0;
    int rc = p_MPI_Type_get_extent(h2a(K_TYPE, type), &l, &e);
    if (rc == 0) {
        if (lb)
            *lb = l;
        if (ub)
            *ub = l + e;
        if (extent)
            *extent = e;
    }
    return err_a2m(rc);
}
EXPORT int PMPI_Type_extent(int type, intptr_t *extent)
{
    return extent ? old_extent(type, NULL, NULL, extent) : M_ERR_ARG;
}
EXPORT int MPI_Type_extent(int type, intptr_t *extent) __attribute__((alias("PMPI_Type_extent")));
EXPORT int PMPI_Type_lb(int type, intptr_t *lb) { return lb ? old_extent(type, lb, NULL, NULL) : M_ERR_ARG; }
EXPORT int MPI_Type_lb(int type, intptr_t *lb) __attribute__((alias("PMPI_Type_lb")));
EXPORT int PMPI_Type_ub(int type, intptr_t *ub) { return ub ? old_extent(type, NULL, ub, NULL) : M_ERR_ARG; }
EXPORT int MPI_Type_ub(int type, intptr_t *ub) __attribute__((alias("PMPI_Type_ub")));
