/* Pack and unpack cost of PvmDataDefault messages (PVM: XDR; gridwire: the
 * sender's own representation with a type tag per packed run, converted by
 * the receiver only when its representation differs), for ints and doubles
 * of 100 B to 1 MB. Built against either library by bench/pvm.sh.
 *
 * Per size and type: the median of REPS rounds of (pvm_initsend +
 * pvm_pk*), each message then sent to this task itself, and of pvm_upk*
 * of each of them once received, in nanoseconds per call.
 * Prints "pack <type> <bytes> <ns>" and "unpack <type> <bytes> <ns>". The
 * unpacked values are checked. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "pvm3.h"

#define REPS 41

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v)
{
    qsort(v, REPS, sizeof *v, cmp);
    return v[REPS / 2];
}

int main(void)
{
    int me = pvm_mytid(), sizes[] = {100, 10000, 1000000};
    if (me < 0)
        return 1;
    for (int s = 0; s < 3; s++) {
        int bytes = sizes[s];
        for (int dbl = 0; dbl < 2; dbl++) {
            int n = bytes / (dbl ? 8 : 4);
            void *src = malloc(bytes), *dst = malloc(bytes);
            for (int i = 0; i < n; i++) {
                if (dbl)
                    ((double *)src)[i] = i * 0.5;
                else
                    ((int *)src)[i] = i * 7 - 3;
            }
            double pk[REPS], upk[REPS];
            int bad = 0;
            for (int r = 0; r < REPS; r++) {
                double t0 = now_ns();
                pvm_initsend(PvmDataDefault);
                if (dbl)
                    pvm_pkdouble(src, n, 1);
                else
                    pvm_pkint(src, n, 1);
                pk[r] = now_ns() - t0;
                pvm_send(me, 1);
            }
            for (int r = 0; r < REPS; r++) {
                int buf = pvm_recv(me, 1);
                memset(dst, 0, bytes);
                double t0 = now_ns();
                if (dbl)
                    pvm_upkdouble(dst, n, 1);
                else
                    pvm_upkint(dst, n, 1);
                upk[r] = now_ns() - t0;
                bad |= memcmp(src, dst, (size_t)n * (dbl ? 8 : 4)) != 0;
                pvm_freebuf(buf);
            }
            if (bad) {
                fprintf(stderr, "pvm_pack: %s %d: unpacked values differ\n", dbl ? "double" : "int", bytes);
                return 1;
            }
            printf("pack %s %d %.0f\n", dbl ? "double" : "int", bytes, median(pk));
            printf("unpack %s %d %.0f\n", dbl ? "double" : "int", bytes, median(upk));
            free(src);
            free(dst);
        }
    }
    pvm_exit();
    return 0;
}
