/* The MPI tools interface (MPI_T) over gridwire's runtime, with 2 ranks.
 *
 *   mpi_t EXPECTED_METHOD [WRITE_METHODS]
 *
 * Lists every control variable, performance variable, category and event;
 * checks that every line "GW_NAME<TAB>default" of the file named by
 * $GW_MPI_T_EXPECT is a cvar reading that default (unless the environment
 * sets it); with WRITE_METHODS, writes GW_METHODS through MPI_T before
 * MPI_Init and so makes the runtime use it. Then counts traffic with the
 * per-method counters (they must grow by at least the bytes sent), sees the
 * link-selection event, writes GW_MPI_UNEXPECTED_LIMIT after MPI_Init and
 * observes the runtime dropping a message it would have held, and checks
 * the error classes of bad indices, names, handles and sessions. */
#include <string.h>
#include <unistd.h>
#include "check.h"

#define T(call) do { int e_ = (call); if (e_ != MPI_SUCCESS) { \
    fprintf(stderr, "FAIL %s:%d: %s returned %d\n", __FILE__, __LINE__, #call, e_); exit(1); } } while (0)
#define TEQ(call, want) do { int e_ = (call); if (e_ != (want)) { \
    fprintf(stderr, "FAIL %s:%d: %s returned %d, expected %s (%d)\n", __FILE__, __LINE__, #call, e_, #want, (want)); exit(1); } } while (0)
#define TCHECK(cond, ...) do { if (!(cond)) { fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
    fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); exit(1); } } while (0)

static int cvar_index(const char *name) {
    int i;
    T(MPI_T_cvar_get_index(name, &i));
    return i;
}

/* The value of cvar `i` as text (enum values as their item names). */
static void cvar_text(int i, char *out, size_t cap) {
    char name[256];
    int nlen = sizeof name, verb, bind, scope, count;
    MPI_Datatype dt;
    MPI_T_enum en;
    T(MPI_T_cvar_get_info(i, name, &nlen, &verb, &dt, &en, NULL, NULL, &bind, &scope));
    MPI_T_cvar_handle h;
    T(MPI_T_cvar_handle_alloc(i, NULL, &h, &count));
    if (dt == MPI_UNSIGNED_LONG_LONG) {
        unsigned long long v;
        T(MPI_T_cvar_read(h, &v));
        snprintf(out, cap, "%llu", v);
    } else if (dt == MPI_INT) {
        int v;
        T(MPI_T_cvar_read(h, &v));
        if (en != MPI_T_ENUM_NULL) {
            int val, len = (int)cap;
            T(MPI_T_enum_get_item(en, v, &val, out, &len));
        } else {
            snprintf(out, cap, "%d", v);
        }
    } else {
        TCHECK(dt == MPI_CHAR, "%s: unexpected datatype", name);
        char *buf = malloc(count);
        T(MPI_T_cvar_read(h, buf));
        snprintf(out, cap, "%s", buf);
        free(buf);
    }
    T(MPI_T_cvar_handle_free(&h));
    TCHECK(h == MPI_T_CVAR_HANDLE_NULL, "freed handle not nulled");
}

static int write_text_cvar(const char *name, const char *value) {
    MPI_T_cvar_handle h;
    int count, rc;
    T(MPI_T_cvar_handle_alloc(cvar_index(name), NULL, &h, &count));
    TCHECK((int)strlen(value) < count, "count %d", count);
    rc = MPI_T_cvar_write(h, value);
    T(MPI_T_cvar_handle_free(&h));
    return rc;
}

static int write_ull_cvar(const char *name, unsigned long long v) {
    MPI_T_cvar_handle h;
    int count, rc;
    T(MPI_T_cvar_handle_alloc(cvar_index(name), NULL, &h, &count));
    rc = MPI_T_cvar_write(h, &v);
    T(MPI_T_cvar_handle_free(&h));
    return rc;
}

/* Every "GW_NAME<TAB>default" line of $GW_MPI_T_EXPECT is a cvar with that default. */
static int check_defaults(void) {
    const char *path = getenv("GW_MPI_T_EXPECT");
    TCHECK(path, "GW_MPI_T_EXPECT is not set");
    FILE *f = fopen(path, "r");
    TCHECK(f, "cannot open %s", path);
    char line[4096], got[2048];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *tab = strchr(line, '\t');
        TCHECK(tab, "bad line %s", line);
        *tab = 0;
        const char *want = tab + 1;
        int i;
        TEQ(MPI_T_cvar_get_index(line, &i), MPI_SUCCESS);
        n++;
        if (getenv(line))
            continue; /* set by gwrun or the caller: not the default */
        cvar_text(i, got, sizeof got);
        TCHECK(strcmp(got, want) == 0, "%s reads '%s', default is '%s'", line, got, want);
    }
    fclose(f);
    int num;
    T(MPI_T_cvar_get_num(&num));
    TCHECK(num == n, "%d cvars, %d parameters declared", num, n);
    return n;
}

/* Prints nothing; walks every listing function once and checks it is consistent. */
static void list_everything(void) {
    int ncat, ncv, npv, nev, total_cv = 0, total_pv = 0;
    T(MPI_T_cvar_get_num(&ncv));
    T(MPI_T_pvar_get_num(&npv));
    T(MPI_T_event_get_num(&nev));
    T(MPI_T_category_get_num(&ncat));
    TCHECK(ncat >= 6 && npv >= 10 && nev == 3, "%d categories, %d pvars, %d events", ncat, npv, nev);
    for (int c = 0; c < ncat; c++) {
        char name[128], desc[1024];
        int nlen = sizeof name, dlen = sizeof desc, nc, np, nsub, ne, idx;
        T(MPI_T_category_get_info(c, name, &nlen, desc, &dlen, &nc, &np, &nsub));
        TCHECK(nlen == (int)strlen(name) + 1, "name_len %d for %s", nlen, name);
        T(MPI_T_category_get_index(name, &idx));
        TCHECK(idx == c, "%s: index %d != %d", name, idx, c);
        T(MPI_T_category_get_num_events(c, &ne));
        int *v = malloc(sizeof(int) * (nc + np + nsub + ne + 1));
        T(MPI_T_category_get_cvars(c, nc, v));
        for (int k = 0; k < nc; k++) TCHECK(v[k] >= 0 && v[k] < ncv, "cvar index %d", v[k]);
        T(MPI_T_category_get_pvars(c, np, v));
        for (int k = 0; k < np; k++) TCHECK(v[k] >= 0 && v[k] < npv, "pvar index %d", v[k]);
        T(MPI_T_category_get_categories(c, nsub, v));
        for (int k = 0; k < nsub; k++) TCHECK(v[k] > c && v[k] < ncat, "subcategory %d", v[k]);
        T(MPI_T_category_get_events(c, ne, v));
        for (int k = 0; k < ne; k++) TCHECK(v[k] >= 0 && v[k] < nev, "event %d", v[k]);
        free(v);
        total_cv += nc;
        total_pv += np;
    }
    TCHECK(total_cv == ncv && total_pv == npv, "categories hold %d/%d cvars, %d/%d pvars", total_cv, ncv, total_pv, npv);
    for (int i = 0; i < npv; i++) {
        char name[256];
        int nlen = sizeof name, verb, cls, bind, ro, cont, atomic, idx;
        MPI_Datatype dt;
        MPI_T_enum en;
        T(MPI_T_pvar_get_info(i, name, &nlen, &verb, &cls, &dt, &en, NULL, NULL, &bind, &ro, &cont, &atomic));
        T(MPI_T_pvar_get_index(name, cls, &idx));
        TCHECK(idx == i, "%s", name);
        TCHECK(bind == (strcmp(name, "gw_mpi_comm_unexpected_msgs") == 0 ? MPI_T_BIND_MPI_COMM : MPI_T_BIND_NO_OBJECT),
               "%s bound to %d", name, bind);
    }
}

/* Performance variable handles of one session. */
struct pv { MPI_T_pvar_handle h; int count; };

static struct pv pv_alloc(MPI_T_pvar_session s, const char *name, int cls) {
    struct pv p;
    int i;
    T(MPI_T_pvar_get_index(name, cls, &i));
    T(MPI_T_pvar_handle_alloc(s, i, NULL, &p.h, &p.count));
    return p;
}

static unsigned long long pv_read1(MPI_T_pvar_session s, struct pv p) {
    unsigned long long v;
    T(MPI_T_pvar_read(s, p.h, &v));
    return v;
}

static int events_seen, event_peer = -1, event_method = -1, dropped_seen;
static MPI_Count event_time;

static void on_selected(MPI_T_event_instance ev, MPI_T_event_registration reg, MPI_T_cb_safety safety, void *ud) {
    int peer, method, me = *(int *)ud, buf[2], src;
    MPI_Count ts;
    (void)reg;
    if (safety < MPI_T_CB_REQUIRE_MPI_RESTRICTED) abort();
    if (MPI_T_event_read(ev, 0, &peer) != MPI_SUCCESS || MPI_T_event_read(ev, 1, &method) != MPI_SUCCESS) abort();
    if (MPI_T_event_read(ev, 2, &peer) != MPI_T_ERR_INVALID_INDEX) abort();
    if (MPI_T_event_copy(ev, buf) != MPI_SUCCESS || buf[0] != peer || buf[1] != method) abort();
    if (MPI_T_event_get_timestamp(ev, &ts) != MPI_SUCCESS || MPI_T_event_get_source(ev, &src) != MPI_SUCCESS || src != 0) abort();
    events_seen++;
    if (peer != me) {
        event_peer = peer;
        event_method = method;
        event_time = ts;
    }
}

static void on_dropped(MPI_Count n, MPI_T_event_registration reg, int src, MPI_T_cb_safety safety, void *ud) {
    (void)reg; (void)src; (void)safety; (void)ud;
    dropped_seen += (int)n;
}

static void never_called(MPI_T_event_instance ev, MPI_T_event_registration reg, MPI_T_cb_safety safety, void *ud) {
    (void)ev; (void)reg; (void)safety; (void)ud;
    abort(); /* registered for MPI_T_CB_REQUIRE_NONE only: link events need MPI_RESTRICTED */
}

static int freed;
static void on_free(MPI_T_event_registration reg, MPI_T_cb_safety safety, void *ud) {
    (void)reg; (void)safety;
    freed = *(int *)ud;
}

int main(int argc, char **argv) {
    TCHECK(argc >= 2, "usage: mpi_t EXPECTED_METHOD [WRITE_METHODS]");
    const char *method = argv[1];
    int provided, n;

    /* Not initialised yet. */
    TEQ(MPI_T_cvar_get_num(&n), MPI_T_ERR_NOT_INITIALIZED);
    TEQ(MPI_T_finalize(), MPI_T_ERR_NOT_INITIALIZED);
    T(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided));
    T(MPI_T_init_thread(MPI_THREAD_MULTIPLE, &provided));
    TCHECK(provided == MPI_THREAD_MULTIPLE, "provided %d", provided);
    T(MPI_T_finalize()); /* still initialised once */

    /* Before MPI_Init: defaults, the listing, bad arguments. */
    int ncvars = check_defaults();
    char name[64];
    int len = 0;
    T(MPI_T_cvar_get_info(0, NULL, &len, NULL, NULL, NULL, NULL, NULL, NULL, NULL));
    TCHECK(len > 1, "needed name length %d", len);
    TEQ(MPI_T_cvar_get_info(-1, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL), MPI_T_ERR_INVALID_INDEX);
    TEQ(MPI_T_cvar_get_info(ncvars, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL), MPI_T_ERR_INVALID_INDEX);
    TEQ(MPI_T_cvar_get_index("GW_NO_SUCH_PARAMETER", &n), MPI_T_ERR_INVALID_NAME);
    TEQ(MPI_T_pvar_get_index("gw_no_such_counter", MPI_T_PVAR_CLASS_COUNTER, &n), MPI_T_ERR_INVALID_NAME);
    TEQ(MPI_T_pvar_get_index("gw_link_method", MPI_T_PVAR_CLASS_COUNTER, &n), MPI_T_ERR_INVALID_NAME);
    TEQ(MPI_T_category_get_index("gw_nothing", &n), MPI_T_ERR_INVALID_NAME);
    TEQ(MPI_T_event_get_index("gw_nothing", &n), MPI_T_ERR_INVALID_NAME);
    TEQ(MPI_T_category_get_info(999, NULL, NULL, NULL, NULL, NULL, NULL, NULL), MPI_T_ERR_INVALID_INDEX);
    TEQ(MPI_T_event_get_info(-1, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL), MPI_T_ERR_INVALID_INDEX);
    TEQ(MPI_T_cvar_read((MPI_T_cvar_handle)(intptr_t)12345, &n), MPI_T_ERR_INVALID_HANDLE);
    TEQ(MPI_T_enum_get_info((MPI_T_enum)(intptr_t)999, &n, NULL, NULL), MPI_T_ERR_INVALID_HANDLE);
    TEQ(MPI_T_source_get_timestamp(1, NULL), MPI_T_ERR_INVALID_INDEX);
    MPI_Count t0, t1;
    T(MPI_T_source_get_num(&n));
    TCHECK(n == 1, "%d sources", n);
    T(MPI_T_source_get_timestamp(0, &t0));
    MPI_T_pvar_session bad = (MPI_T_pvar_session)(intptr_t)4242;
    MPI_T_pvar_handle bh;
    TEQ(MPI_T_pvar_handle_alloc(bad, 0, NULL, &bh, &n), MPI_T_ERR_INVALID_SESSION);
    TEQ(MPI_T_pvar_session_free(&bad), MPI_T_ERR_INVALID_SESSION);
    /* The launcher's settings are never writable. */
    TEQ(write_text_cvar("GW_JOB_ID", "mine"), MPI_T_ERR_CVAR_SET_NEVER);
    /* A value the parameter refuses (GW_VERBOSE is 0..3) is an argument error. */
    TEQ(write_ull_cvar("GW_VERBOSE", 9), MPI_ERR_ARG);

    /* The method enum and the link-selection event, registered before MPI_Init. */
    int ev_sel, me_for_cb = -1, ud_free = 7;
    T(MPI_T_event_get_index("gw_link_selected", &ev_sel));
    MPI_T_event_registration reg, reg_none;
    T(MPI_T_event_handle_alloc(ev_sel, NULL, MPI_INFO_NULL, &reg));
    T(MPI_T_event_register_callback(reg, MPI_T_CB_REQUIRE_MPI_RESTRICTED, MPI_INFO_NULL, &me_for_cb, on_selected));
    T(MPI_T_event_handle_alloc(ev_sel, NULL, MPI_INFO_NULL, &reg_none));
    T(MPI_T_event_register_callback(reg_none, MPI_T_CB_REQUIRE_NONE, MPI_INFO_NULL, NULL, never_called));
    T(MPI_T_event_set_dropped_handler(reg_none, on_dropped));

    if (argc >= 3) {
        /* Read when MPI_Init builds the runtime: the write decides the method. */
        T(write_text_cvar("GW_METHODS", argv[2]));
        char got[256];
        cvar_text(cvar_index("GW_METHODS"), got, sizeof got);
        TCHECK(strcmp(got, argv[2]) == 0, "GW_METHODS reads %s", got);
    }

    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    me_for_cb = rank;
    CHECK(size == 2, "needs 2 ranks, got %d", size);
    int peer = 1 - rank;
    list_everything();

    /* The tools interface's error classes have names. */
    char estr[MPI_MAX_ERROR_STRING];
    int ecls;
    T(MPI_Error_string(MPI_T_ERR_INVALID_HANDLE, estr, &len));
    CHECK(strstr(estr, "MPI_T_ERR_INVALID_HANDLE") != NULL, "error string '%s'", estr);
    T(MPI_Error_class(MPI_T_ERR_PVAR_NO_ATOMIC, &ecls));
    CHECK(ecls == MPI_T_ERR_PVAR_NO_ATOMIC, "class %d", ecls);

    /* Too late for parameters read at MPI_Init. */
    CHECK(write_text_cvar("GW_METHODS", "tcp") == MPI_T_ERR_CVAR_SET_NEVER, "GW_METHODS written after MPI_Init");

    /* Counting traffic: the per-method counters grow by at least what was sent. */
    char cnt[64];
    MPI_T_pvar_session s;
    T(MPI_T_pvar_session_create(&s));
    snprintf(cnt, sizeof cnt, "gw_%s_sent_bytes", method);
    struct pv sent_b = pv_alloc(s, cnt, MPI_T_PVAR_CLASS_COUNTER);
    snprintf(cnt, sizeof cnt, "gw_%s_sent_msgs", method);
    struct pv sent_m = pv_alloc(s, cnt, MPI_T_PVAR_CLASS_COUNTER);
    snprintf(cnt, sizeof cnt, "gw_%s_recv_bytes", method);
    struct pv recv_b = pv_alloc(s, cnt, MPI_T_PVAR_CLASS_COUNTER);
    snprintf(cnt, sizeof cnt, "gw_%s_recv_msgs", method);
    struct pv recv_m = pv_alloc(s, cnt, MPI_T_PVAR_CLASS_COUNTER);
    struct pv link_b = pv_alloc(s, "gw_link_sent_bytes", MPI_T_PVAR_CLASS_COUNTER);
    struct pv link_m = pv_alloc(s, "gw_link_method", MPI_T_PVAR_CLASS_STATE);
    CHECK(sent_b.count == 1 && link_b.count == size && link_m.count == size, "counts %d %d %d", sent_b.count, link_b.count, link_m.count);
    CHECK(pv_read1(s, sent_b) == 0, "a counter that was not started reads 0");
    T(MPI_T_pvar_start(s, MPI_T_PVAR_ALL_HANDLES));
    enum { MSGS = 20, BYTES = 1000 };
    static char buf[BYTES];
    for (int k = 0; k < MSGS; k++) {
        if (rank == 0) {
            MPI_Send(buf, BYTES, MPI_BYTE, peer, 5, MPI_COMM_WORLD);
            MPI_Recv(buf, BYTES, MPI_BYTE, peer, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, BYTES, MPI_BYTE, peer, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, BYTES, MPI_BYTE, peer, 5, MPI_COMM_WORLD);
        }
    }
    unsigned long long sb = pv_read1(s, sent_b), sm = pv_read1(s, sent_m), rb = pv_read1(s, recv_b), rm = pv_read1(s, recv_m);
    CHECK(sb >= MSGS * BYTES && sm >= MSGS, "%s sent %llu bytes in %llu messages", method, sb, sm);
    CHECK(rb >= MSGS * BYTES && rm >= MSGS, "%s received %llu bytes in %llu messages", method, rb, rm);
    unsigned long long per_peer[2];
    T(MPI_T_pvar_read(s, link_b.h, per_peer));
    CHECK(per_peer[peer] >= MSGS * BYTES, "link to %d sent %llu", peer, per_peer[peer]);
    int methods[2];
    T(MPI_T_pvar_read(s, link_m.h, methods));
    MPI_T_enum men;
    int ml = sizeof name, mval, nitems;
    char ename[64];
    int elen = sizeof ename;
    {
        int i, v, c, b, ro, co, at;
        MPI_Datatype dt;
        T(MPI_T_pvar_get_index("gw_link_method", MPI_T_PVAR_CLASS_STATE, &i));
        T(MPI_T_pvar_get_info(i, NULL, NULL, &v, &c, &dt, &men, NULL, NULL, &b, &ro, &co, &at));
        CHECK(dt == MPI_INT && ro && co && !at, "gw_link_method info");
    }
    T(MPI_T_enum_get_info(men, &nitems, ename, &elen));
    CHECK(methods[peer] > 0 && methods[peer] < nitems, "method value %d of %d", methods[peer], nitems);
    T(MPI_T_enum_get_item(men, methods[peer], &mval, name, &ml));
    CHECK(strcmp(name, method) == 0, "the link to %d uses %s, expected %s", peer, name, method);
    CHECK(MPI_T_enum_get_item(men, nitems, &mval, NULL, NULL) == MPI_T_ERR_INVALID_ITEM, "item past the end");

    /* Stopped counters stay; reset zeroes; continuous and read-only ones refuse. */
    T(MPI_T_pvar_stop(s, MPI_T_PVAR_ALL_HANDLES));
    sb = pv_read1(s, sent_b);
    MPI_Sendrecv(buf, BYTES, MPI_BYTE, peer, 6, buf, BYTES, MPI_BYTE, peer, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(pv_read1(s, sent_b) == sb, "a stopped counter moved");
    unsigned long long v;
    T(MPI_T_pvar_readreset(s, sent_b.h, &v));
    CHECK(v == sb && pv_read1(s, sent_b) == 0, "readreset %llu %llu", v, sb);
    unsigned long long w = 42;
    T(MPI_T_pvar_write(s, sent_m.h, &w));
    CHECK(pv_read1(s, sent_m) == 42, "written counter");
    CHECK(MPI_T_pvar_start(s, link_m.h) == MPI_T_ERR_PVAR_NO_STARTSTOP, "start of a continuous variable");
    CHECK(MPI_T_pvar_write(s, link_m.h, methods) == MPI_T_ERR_PVAR_NO_WRITE, "write of a read-only variable");
    CHECK(MPI_T_pvar_readreset(s, link_b.h, per_peer) == MPI_T_ERR_PVAR_NO_ATOMIC, "readreset of a per-peer variable");

    /* Handles belong to their session. */
    MPI_T_pvar_session s2;
    T(MPI_T_pvar_session_create(&s2));
    CHECK(MPI_T_pvar_read(s2, sent_b.h, &v) == MPI_T_ERR_INVALID_HANDLE, "handle of another session");
    T(MPI_T_pvar_session_free(&s2));
    CHECK(s2 == MPI_T_PVAR_SESSION_NULL, "freed session not nulled");
    CHECK(MPI_T_pvar_read(s2, sent_b.h, &v) == MPI_T_ERR_INVALID_SESSION, "freed session");
    MPI_T_pvar_handle gone = recv_m.h;
    T(MPI_T_pvar_handle_free(s, &recv_m.h));
    CHECK(MPI_T_pvar_read(s, gone, &v) == MPI_T_ERR_INVALID_HANDLE, "freed handle");
    CHECK(MPI_T_pvar_handle_alloc(s, 99999, NULL, &bh, &n) == MPI_T_ERR_INVALID_INDEX, "bad pvar index");

    /* The selection of the link to the peer was an event. */
    CHECK(event_peer == peer, "link-selection event for peer %d (saw %d events)", event_peer, events_seen);
    CHECK(event_method == methods[peer], "event method %d, link method %d", event_method, methods[peer]);
    T(MPI_T_source_get_timestamp(0, &t1));
    CHECK(t0 <= event_time && event_time <= t1, "event time %lld not within %lld..%lld", (long long)event_time, (long long)t0, (long long)t1);
    CHECK(dropped_seen >= 1, "a callback for MPI_T_CB_REQUIRE_NONE only: its events are dropped");
    T(MPI_T_event_handle_free(reg, &ud_free, on_free));
    CHECK(freed == 7, "free callback");
    CHECK(MPI_T_event_register_callback(reg, MPI_T_CB_REQUIRE_NONE, MPI_INFO_NULL, NULL, on_selected) == MPI_T_ERR_INVALID_HANDLE, "freed registration");
    T(MPI_T_event_handle_free(reg_none, NULL, NULL));

    /* A cvar read again by the runtime: a tiny unexpected-message limit on
     * rank 0 makes it drop the peer's next unexpected message. */
    struct pv rejected = pv_alloc(s, "gw_mpi_rejected_messages", MPI_T_PVAR_CLASS_COUNTER);
    struct pv limit = pv_alloc(s, "gw_mpi_unexpected_limit", MPI_T_PVAR_CLASS_SIZE);
    T(MPI_T_pvar_start(s, rejected.h));
    /* A message nobody receives yet is held: the level and its high-water mark show it. */
    struct pv held = pv_alloc(s, "gw_mpi_unexpected_bytes", MPI_T_PVAR_CLASS_LEVEL);
    struct pv held_max = pv_alloc(s, "gw_mpi_unexpected_bytes_max", MPI_T_PVAR_CLASS_HIGHWATERMARK);
    /* Bound to a communicator: the unexpected messages of that one only. */
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    struct pv on_world, on_dup;
    int cu;
    T(MPI_T_pvar_get_index("gw_mpi_comm_unexpected_msgs", MPI_T_PVAR_CLASS_LEVEL, &cu));
    MPI_Comm world = MPI_COMM_WORLD;
    T(MPI_T_pvar_handle_alloc(s, cu, &world, &on_world.h, &on_world.count));
    T(MPI_T_pvar_handle_alloc(s, cu, &dup, &on_dup.h, &on_dup.count));
    CHECK(MPI_T_pvar_handle_alloc(s, cu, NULL, &bh, &n) == MPI_T_ERR_INVALID_HANDLE, "no communicator");
    MPI_Comm freed_comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &freed_comm);
    MPI_Comm stale = freed_comm;
    MPI_Comm_free(&freed_comm);
    CHECK(MPI_T_pvar_handle_alloc(s, cu, &stale, &bh, &n) == MPI_T_ERR_INVALID_HANDLE, "freed communicator");
    if (rank == 0) {
        MPI_Send(NULL, 0, MPI_BYTE, peer, 65, MPI_COMM_WORLD);
        double until = MPI_Wtime() + 20;
        int flag;
        while (pv_read1(s, held) < 100 && MPI_Wtime() < until)
            MPI_Iprobe(peer, 99, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        unsigned long long level = pv_read1(s, held);
        CHECK(level >= 100, "an unexpected 100-byte message: %llu bytes held", level);
        CHECK(pv_read1(s, held_max) >= level, "high-water mark %llu below the level %llu", pv_read1(s, held_max), level);
        CHECK(pv_read1(s, on_world) == 1 && pv_read1(s, on_dup) == 0, "unexpected on world %llu, on its dup %llu",
              pv_read1(s, on_world), pv_read1(s, on_dup));
        MPI_Recv(buf, 100, MPI_BYTE, peer, 66, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(pv_read1(s, held) < level && pv_read1(s, held_max) >= level, "after the receive: %llu held, max %llu",
              pv_read1(s, held), pv_read1(s, held_max));
        CHECK(pv_read1(s, on_world) == 0, "unexpected on world after the receive: %llu", pv_read1(s, on_world));
    } else {
        MPI_Recv(NULL, 0, MPI_BYTE, peer, 65, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(buf, 100, MPI_BYTE, peer, 66, MPI_COMM_WORLD);
    }
    if (rank == 0) {
        T(write_ull_cvar("GW_MPI_UNEXPECTED_LIMIT", 1));
        CHECK(pv_read1(s, limit) == 1, "limit in force %llu", pv_read1(s, limit));
        MPI_Send(NULL, 0, MPI_BYTE, peer, 7, MPI_COMM_WORLD); /* go */
        double until = MPI_Wtime() + 20;
        int flag;
        while (pv_read1(s, rejected) == 0 && MPI_Wtime() < until)
            MPI_Iprobe(peer, 99, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        CHECK(pv_read1(s, rejected) >= 1, "no message was dropped under a 1-byte limit");
        T(write_ull_cvar("GW_MPI_UNEXPECTED_LIMIT", 1ULL << 30));
        MPI_Send(NULL, 0, MPI_BYTE, peer, 8, MPI_COMM_WORLD); /* done */
    } else {
        MPI_Recv(NULL, 0, MPI_BYTE, peer, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(buf, 100, MPI_BYTE, peer, 77, MPI_COMM_WORLD);
        MPI_Recv(NULL, 0, MPI_BYTE, peer, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    T(MPI_T_pvar_session_free(&s));
    MPI_Comm_free(&dup);
    MPI_Barrier(MPI_COMM_WORLD);
    T(MPI_T_finalize());
    CHECK(MPI_T_cvar_get_num(&n) == MPI_T_ERR_NOT_INITIALIZED, "after the last MPI_T_finalize");
    PASS(argc >= 3 ? "mpi_t (GW_METHODS written)" : "mpi_t");
    MPI_Finalize();
    return 0;
}
