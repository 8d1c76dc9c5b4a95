/* Hosts added at run time (gridwire only: Debian's PVM would start a pvmd
 * over rsh): pvm_addhosts adds an emulated host, PvmHostAdd fires, a task
 * spawned there answers across it, pvm_delhosts ends the host's tasks and
 * fires PvmHostDelete and PvmTaskExit. tests/examples.sh checks the output. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "pvm3.h"

static int nhosts(void)
{
    int n, na;
    struct pvmhostinfo *h;
    return pvm_config(&n, &na, &h) < 0 ? -1 : n;
}

int main(int argc, char **argv)
{
    int me = pvm_mytid();
    if (argc > 1) {
        int host = pvm_tidtohost(me);
        pvm_initsend(PvmDataDefault);
        pvm_pkint(&host, 1, 1);
        pvm_send(pvm_parent(), 1);
        for (;;)
            pause();
    }
    struct timeval tmo = {10, 0};
    printf("hosts at start: %d\n", nhosts());
    pvm_notify(PvmHostAdd, 30, -1, NULL);
    char *names[] = {"emu1"};
    int info;
    int added_count = pvm_addhosts(names, 1, &info);
    printf("addhosts -> %d, info %x\n", added_count, info);
    int count = 0, added = 0;
    if (pvm_trecv(-1, 30, &tmo) > 0) {
        pvm_upkint(&count, 1, 1);
        pvm_upkint(&added, 1, 1);
    }
    printf("host-add notify: %d host(s), %x\n", count, added);
    printf("hosts now: %d\n", nhosts());
    printf("mstat emu1 -> %d\n", pvm_mstat("emu1"));
    int again;
    pvm_addhosts(names, 1, &again);
    printf("adding it again -> %d\n", again);
    char *args[] = {"child", NULL};
    int child;
    if (pvm_spawn("hosts_test", args, PvmTaskHost, "emu1", 1, &child) != 1) {
        printf("spawn on emu1 failed: %d\n", child);
        pvm_exit();
        return 1;
    }
    int where = 0;
    pvm_recv(child, 1);
    pvm_upkint(&where, 1, 1);
    printf("child says its host is %x; pvm_tidtohost says %x\n", where, pvm_tidtohost(child));
    int nowhere;
    printf("spawn on a host not in the machine -> %d\n",
           pvm_spawn("hosts_test", args, PvmTaskHost, "nosuchhost", 1, &nowhere));
    pvm_notify(PvmHostDelete, 31, 1, &info);
    pvm_notify(PvmTaskExit, 32, 1, &child);
    printf("delhosts -> %d\n", pvm_delhosts(names, 1, NULL));
    int deleted = 0, dead = 0;
    if (pvm_trecv(-1, 31, &tmo) > 0)
        pvm_upkint(&deleted, 1, 1);
    if (pvm_trecv(-1, 32, &tmo) > 0)
        pvm_upkint(&dead, 1, 1);
    printf("host-delete notify: %x; its task exited: %s\n", deleted, dead == child ? "yes" : "no");
    printf("hosts at end: %d\n", nhosts());
    pvm_exit();
    return 0;
}
