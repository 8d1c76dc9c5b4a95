/* A real remote host (gridwire only; run by crates/testbed/tests/pvm_remote.rs):
 * the master adds the host named in argv[1] (a host of $GWPVM_MACHINES, so
 * the coordinator starts its agent over ssh), spawns a slave there with
 * PvmTaskHost, reads the host's clock (pvm_hostsync), exchanges a small and a 1 MiB message both ways (checked
 * word by word), kills a second task there and gets its PvmTaskExit notify,
 * then deletes the host and gets PvmHostDelete. One line per step. The
 * master catches its tasks' output (pvm_catchout): the slave's lines on
 * stdout and stderr come framed as [t<tid>] lines of the master's stdout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "pvm3.h"

#define WORDS (1 << 18) /* 1 MiB of ints */

static int slave(void)
{
    int parent = pvm_parent(), n = 0, *v;
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    pvm_recv(parent, 1);
    pvm_upkint(&n, 1, 1);
    if (n < 0 || n > WORDS || !(v = malloc(sizeof(int) * (n ? n : 1))))
        return 1;
    pvm_upkint(v, n, 1);
    for (int i = 0; i < n; i++)
        v[i] = v[i] * 3 + 1;
    pvm_initsend(PvmDataDefault);
    pvm_pkstr(host);
    pvm_pkint(&n, 1, 1);
    pvm_pkint(v, n, 1);
    pvm_send(parent, 2);
    pvm_recv(parent, 3); /* until told to go */
    printf("slave on %s: %d words\n", host, n);
    fflush(stdout); /* a pipe: in order with stderr */
    fprintf(stderr, "slave to stderr\n");
    pvm_exit();
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "slave") == 0)
        return slave();
    if (argc > 1 && strcmp(argv[1], "sleeper") == 0) {
        pvm_mytid();
        for (;;)
            pause();
    }
    if (argc < 3) {
        fprintf(stderr, "usage: remote_host HOST /path/to/remote_host\n");
        return 2;
    }
    char *names[] = {argv[1]}, here[256] = "";
    gethostname(here, sizeof here - 1);
    struct timeval tmo = {20, 0};
    int me = pvm_mytid(), info = 0;
    printf("master enrolled: %s\n", me > 0 ? "yes" : "no");
    printf("addhosts -> %d\n", pvm_addhosts(names, 1, &info));
    printf("host id %x\n", info);
    pvm_catchout(stdout);
    char *sargs[] = {"slave", NULL}, *kargs[] = {"sleeper", NULL};
    int s = 0, k = 0;
    printf("spawn slave -> %d\n", pvm_spawn(argv[2], sargs, PvmTaskHost, argv[1], 1, &s));
    printf("slave on the added host: %s\n", pvm_tidtohost(s) == info ? "yes" : "no");
    /* The added host's clock, read by its agent over ssh: the testbed's
     * hosts are namespaces of one machine, so it is ours. */
    struct timeval clk, delta;
    int hs = pvm_hostsync(info, &clk, &delta);
    long d_us = delta.tv_sec * 1000000L + delta.tv_usec;
    printf("hostsync -> %d, the testbed hosts share one clock: %s\n", hs,
           d_us > -100000 && d_us < 100000 ? "yes" : "no");
    int *v = malloc(sizeof(int) * WORDS), *back = malloc(sizeof(int) * WORDS), n = WORDS;
    for (int i = 0; i < WORDS; i++)
        v[i] = i * 7 - 12345;
    pvm_initsend(PvmDataDefault);
    pvm_pkint(&n, 1, 1);
    pvm_pkint(v, n, 1);
    printf("send 1 MiB -> %d\n", pvm_send(s, 1));
    char there[256] = "";
    int got = 0, bad = 0;
    if (pvm_trecv(s, 2, &tmo) > 0) {
        pvm_upkstr(there);
        pvm_upkint(&got, 1, 1);
        if (got == WORDS)
            pvm_upkint(back, got, 1);
        for (int i = 0; i < WORDS; i++)
            bad += got != WORDS || back[i] != v[i] * 3 + 1;
    }
    printf("reply: %d words, %d wrong, from %s host\n", got, bad,
           there[0] && strcmp(there, here) != 0 && strcmp(there, argv[1]) == 0 ? "the other" : "the WRONG");
    printf("spawn sleeper -> %d\n", pvm_spawn(argv[2], kargs, PvmTaskHost, argv[1], 1, &k));
    pvm_notify(PvmTaskExit, 40, 1, &k);
    printf("kill -> %d\n", pvm_kill(k));
    int dead = 0;
    if (pvm_trecv(-1, 40, &tmo) > 0)
        pvm_upkint(&dead, 1, 1);
    printf("task-exit notify for the killed task: %s\n", dead == k ? "yes" : "no");
    pvm_initsend(PvmDataDefault);
    pvm_send(s, 3);
    pvm_notify(PvmTaskExit, 41, 1, &s);
    dead = 0;
    if (pvm_trecv(-1, 41, &tmo) > 0)
        pvm_upkint(&dead, 1, 1);
    printf("slave exited: %s\n", dead == s ? "yes" : "no");
    pvm_notify(PvmHostDelete, 42, 1, &info);
    printf("delhosts -> %d\n", pvm_delhosts(names, 1, NULL));
    int deleted = 0;
    if (pvm_trecv(-1, 42, &tmo) > 0)
        pvm_upkint(&deleted, 1, 1);
    printf("host-delete notify: %s\n", deleted == info ? "yes" : "no");
    pvm_exit();
    return 0;
}
