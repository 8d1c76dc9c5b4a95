/* One gridwire MPI_T counter read by a test (gw_counter("gw_mpi_rma_placed_puts")):
 * the first read starts a session on it, gw_counter_done() ends it. Other
 * MPIs have no such counter: reads give 0, and the tests assert counts only
 * when told the library is gridwire's (GW_TEST_EXPECT_PLACED). One counter
 * per program. */
#ifndef GW_TEST_PVAR_COUNTER_H
#define GW_TEST_PVAR_COUNTER_H
#include "check.h"

#ifdef GRIDWIRE_MPI
static MPI_T_pvar_session gw_counter_session;
static MPI_T_pvar_handle gw_counter_handle;
static int gw_counter_ready;
#endif

static long long gw_counter(const char *name) {
#ifdef GRIDWIRE_MPI
    if (!gw_counter_ready) {
        int idx, count, provided;
        CHECK(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) == MPI_SUCCESS, "MPI_T_init_thread");
        CHECK(MPI_T_pvar_get_index(name, MPI_T_PVAR_CLASS_COUNTER, &idx) == MPI_SUCCESS, "no %s", name);
        CHECK(MPI_T_pvar_session_create(&gw_counter_session) == MPI_SUCCESS, "session");
        CHECK(MPI_T_pvar_handle_alloc(gw_counter_session, idx, NULL, &gw_counter_handle, &count) == MPI_SUCCESS,
              "handle");
        CHECK(MPI_T_pvar_start(gw_counter_session, gw_counter_handle) == MPI_SUCCESS, "start");
        gw_counter_ready = 1;
    }
    unsigned long long v = 0;
    CHECK(MPI_T_pvar_read(gw_counter_session, gw_counter_handle, &v) == MPI_SUCCESS, "read");
    return (long long)v;
#else
    (void)name;
    return 0;
#endif
}

static void gw_counter_done(void) {
#ifdef GRIDWIRE_MPI
    if (gw_counter_ready) {
        MPI_T_pvar_handle_free(gw_counter_session, &gw_counter_handle);
        MPI_T_pvar_session_free(&gw_counter_session);
        MPI_T_finalize();
    }
#endif
}
#endif
