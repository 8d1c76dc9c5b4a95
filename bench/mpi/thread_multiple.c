/* MPI_THREAD_MULTIPLE ping-pong rate (issue 18, reported, not a target):
 * 2 ranks x THREADS threads (default 2); thread t of rank 0 ping-pongs 8 B
 * with thread t of rank 1 on a communicator of its own (one MPI_Comm_dup per
 * thread, made by the main thread before the threads start), so the threads
 * share no matching state in the MPI's interface.
 *
 *   thread_multiple [MILLISECONDS, default 1000] [THREADS]
 *
 * After a warm-up of 200 round trips per thread, each thread pair ping-pongs
 * for MILLISECONDS (rank 0's thread decides when and marks its last message,
 * so its partner stops with it; a slow MPI costs time, not a fixed count of
 * round trips), and rank 0 prints
 *   "tm 8 VALUE"   aggregate round trips per second of all threads, in
 *                  thousands (all threads' round trips / wall time from the
 *                  barrier before the threads start to the last thread's end)
 * An MPI that does not grant MPI_THREAD_MULTIPLE prints a line on stderr and
 * no figure (exit status 0: the bench script reports it as skipped). */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_THREADS 16
#define MSG 8

static int rank;
static double budget = 1.0; /* seconds of timed ping-pong */

struct pair {
    MPI_Comm comm;
    long round_trips; /* counted on rank 0 */
};
static struct pair pairs[MAX_THREADS];

/* Round trips until rank 0 sets buf[1] (the last one) once LIMIT round
 * trips are done or, with LIMIT 0, the budget has passed. */
static long pingpong(MPI_Comm comm, long limit) {
    char buf[MSG] = {0};
    long n = 0;
    double t0 = MPI_Wtime();
    for (int last = 0; !last; n++) {
        if (rank == 0) {
            buf[0] = (char)n;
            buf[1] = (char)(limit ? n + 1 >= limit : MPI_Wtime() - t0 >= budget);
            MPI_Send(buf, MSG, MPI_CHAR, 1, 7, comm);
            MPI_Recv(buf, MSG, MPI_CHAR, 1, 7, comm, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, MSG, MPI_CHAR, 0, 7, comm, MPI_STATUS_IGNORE);
            MPI_Send(buf, MSG, MPI_CHAR, 0, 7, comm);
        }
        last = buf[1];
    }
    return n;
}

static void *warm(void *arg) {
    pingpong(((struct pair *)arg)->comm, 200);
    return NULL;
}

static void *timed(void *arg) {
    struct pair *p = arg;
    p->round_trips = pingpong(p->comm, 0);
    return NULL;
}

/* Runs FN on every pair, one thread each, and waits for them all. */
static int run_threads(int threads, void *(*fn)(void *)) {
    pthread_t tid[MAX_THREADS];
    for (int t = 0; t < threads; t++)
        if (pthread_create(&tid[t], NULL, fn, &pairs[t]) != 0) return -1;
    for (int t = 0; t < threads; t++) pthread_join(tid[t], NULL);
    return 0;
}

int main(int argc, char **argv) {
    int provided = MPI_THREAD_SINGLE, nprocs;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (argc > 1 && atoi(argv[1]) > 0) budget = atoi(argv[1]) / 1000.0;
    int threads = argc > 2 ? atoi(argv[2]) : 2;
    if (threads < 1 || threads > MAX_THREADS) threads = 2;
    if (provided < MPI_THREAD_MULTIPLE || nprocs != 2) {
        if (rank == 0)
            fprintf(stderr, "thread_multiple: %s; no figure\n",
                    nprocs != 2 ? "needs exactly 2 ranks" : "MPI_THREAD_MULTIPLE not provided");
        MPI_Finalize();
        return 0;
    }
    for (int t = 0; t < threads; t++) MPI_Comm_dup(MPI_COMM_WORLD, &pairs[t].comm);
    int ok = run_threads(threads, warm) == 0;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    ok = ok && run_threads(threads, timed) == 0;
    double mine = MPI_Wtime() - t0, wall = 0;
    MPI_Reduce(&mine, &wall, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (!ok) {
        fprintf(stderr, "thread_multiple: rank %d: pthread_create failed\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    long total = 0;
    for (int t = 0; t < threads; t++) total += pairs[t].round_trips;
    if (rank == 0) printf("tm %d %.3f\n", MSG, (double)total / wall / 1e3);
    for (int t = 0; t < threads; t++) MPI_Comm_free(&pairs[t].comm);
    MPI_Finalize();
    return 0;
}
