/* A task killed mid-job (SIGKILL from outside PVM) must trigger the
 * parent's pvm_notify(PvmTaskExit). Run under gridwire's libpvm3 and under
 * Debian's PVM by tests/examples.sh, which compares the two outputs.
 * Started with no argument it is the parent; the child gets "child". */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "pvm3.h"

#define EXIT_TAG 77
#define READY_TAG 5

int main(int argc, char **argv)
{
    int me = pvm_mytid();
    if (me < 0) {
        printf("cannot enroll: %d\n", me);
        return 1;
    }
    if (argc > 1 && strcmp(argv[1], "child") == 0) {
        pvm_initsend(PvmDataDefault);
        pvm_pkint(&me, 1, 1);
        pvm_send(pvm_parent(), READY_TAG);
        for (;;)
            pause(); /* mid-job: waits to be killed */
    }
    char *args[] = {"child", NULL};
    int child;
    if (pvm_spawn("notify_kill", args, 0, "", 1, &child) != 1) {
        printf("spawn failed: %d\n", child);
        pvm_exit();
        return 1;
    }
    if (pvm_notify(PvmTaskExit, EXIT_TAG, 1, &child) < 0)
        printf("notify failed\n");
    int got;
    pvm_recv(child, READY_TAG);
    pvm_upkint(&got, 1, 1);
    printf("child ready: %s\n", got == child ? "same tid" : "other tid");
    int ntask;
    struct pvmtaskinfo *ti;
    if (pvm_tasks(child, &ntask, &ti) < 0 || ntask != 1) {
        printf("pvm_tasks does not know the child\n");
        pvm_exit();
        return 1;
    }
    kill(ti[0].ti_pid, SIGKILL);
    struct timeval tmo = {20, 0};
    int buf = pvm_trecv(-1, EXIT_TAG, &tmo);
    if (buf <= 0) {
        printf("no exit notification within 20 s\n");
    } else {
        int bytes, tag, src, dead = 0;
        pvm_bufinfo(buf, &bytes, &tag, &src);
        pvm_upkint(&dead, 1, 1);
        printf("notified: tag %d, %s\n", tag, dead == child ? "the killed child" : "another task");
    }
    /* The same for a task killed by pvm_sendsig and one by pvm_kill. */
    for (int way = 0; way < 2; way++) {
        int other;
        if (pvm_spawn("notify_kill", args, 0, "", 1, &other) != 1) {
            printf("spawn failed: %d\n", other);
            break;
        }
        pvm_notify(PvmTaskExit, EXIT_TAG + 1 + way, 1, &other);
        pvm_recv(other, READY_TAG);
        int rc = way == 0 ? pvm_sendsig(other, SIGKILL) : pvm_kill(other);
        buf = pvm_trecv(-1, EXIT_TAG + 1 + way, &tmo);
        int dead = 0;
        if (buf > 0)
            pvm_upkint(&dead, 1, 1);
        printf("%s -> %d; notified: %s\n", way == 0 ? "pvm_sendsig" : "pvm_kill", rc,
               buf > 0 && dead == other ? "yes" : "no");
    }
    /* A send to the dead task fails or is dropped, and never hangs. */
    pvm_initsend(PvmDataDefault);
    pvm_pkint(&me, 1, 1);
    pvm_send(child, 1);
    printf("send to the dead task returned\n");
    pvm_exit();
    return 0;
}
