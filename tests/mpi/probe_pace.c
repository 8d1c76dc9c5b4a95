/* A program that computes and probes now and then (HPL's ring broadcasts:
 * MPI_Iprobe between blocks of work) sees a new sender's first message
 * after a few probes. The runtime counted rounds to decide when to look for
 * new shared-memory senders (every 16384): such a program, one probe per
 * 200 us of work, waited seconds for it. Rank 0 sends its first message to
 * rank 1 after 300 ms (rank 1 probing all along); rank 1 must see it
 * within 10000 probes (about 2 s of work; the old behaviour needed at least
 * 16384), then receives it whole. Other ranks only take part in the
 * final barrier. */
#include "check.h"
#include <string.h>
#include <time.h>

static volatile double sink;
static void work_us(int us) {
    double t = MPI_Wtime();
    while ((MPI_Wtime() - t) * 1e6 < us) sink += 1.0;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size >= 2, "needs 2 ranks, has %d", size);
    enum { N = 3000 };
    static int buf[N];
    if (rank == 0) {
        struct timespec ts = {0, 300 * 1000 * 1000};
        nanosleep(&ts, NULL);
        for (int i = 0; i < N; i++) buf[i] = i * 7 + 1;
        MPI_Send(buf, N, MPI_INT, 1, 42, MPI_COMM_WORLD);
    } else if (rank == 1) {
        int go = 0;
        long probes = 0;
        MPI_Status st;
        while (!go) {
            MPI_Iprobe(0, 42, MPI_COMM_WORLD, &go, &st);
            probes++;
            CHECK(probes < 10000 || go, "message not seen after %ld probes of 200 us", probes);
            if (!go) work_us(200);
        }
        int count = -1;
        MPI_Get_count(&st, MPI_INT, &count);
        CHECK(count == N && st.MPI_SOURCE == 0 && st.MPI_TAG == 42, "status %d/%d/%d", count,
              st.MPI_SOURCE, st.MPI_TAG);
        MPI_Recv(buf, N, MPI_INT, 0, 42, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (int i = 0; i < N; i++) CHECK(buf[i] == i * 7 + 1, "buf[%d] = %d", i, buf[i]);
        printf("probe_pace: seen after %ld probes\n", probes);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    PASS("probe_pace");
    MPI_Finalize();
    return 0;
}
