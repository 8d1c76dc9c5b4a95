/* The message mailbox between a parent and a child task: put, replace,
 * multiple instances, reads by index and first available, read-and-delete,
 * a stranger's put and delete refused, mailbox info. Every return code is
 * printed: the output under gridwire and under Debian's PVM must agree. */
#include <stdio.h>
#include <string.h>
#include "pvm3.h"

static int put(char *cls, int value, int flags)
{
    int me = pvm_mytid();
    pvm_initsend(PvmDataDefault);
    pvm_pkint(&value, 1, 1);
    pvm_pkint(&me, 1, 1);
    return pvm_putinfo(cls, pvm_getsbuf(), flags);
}

static void get(char *who, char *cls, int index, int flags)
{
    int buf = pvm_recvinfo(cls, index, flags);
    if (buf < 0) {
        printf("%s: recvinfo %s %d flags %d -> %d\n", who, cls, index, flags, buf);
        return;
    }
    int old = pvm_setrbuf(buf), value, owner;
    pvm_upkint(&value, 1, 1);
    pvm_upkint(&owner, 1, 1);
    printf("%s: recvinfo %s %d flags %d -> value %d from %s\n", who, cls, index, flags, value,
           owner == pvm_parent() ? "the parent" : owner == pvm_mytid() ? "me" : "another task");
    pvm_setrbuf(old);
    pvm_freebuf(buf);
}

int main(int argc, char **argv)
{
    pvm_mytid();
    if (argc > 1) {
        get("child", "gwtest-svc", 0, PvmMboxDefault);
        printf("child: put over the parent's entry -> %s\n",
               put("gwtest-svc", 99, PvmMboxDefault) < 0 ? "refused" : "accepted");
        printf("child: delete the parent's entry -> %s\n",
               pvm_delinfo("gwtest-svc", 0, PvmMboxDefault) < 0 ? "refused" : "accepted");
        get("child", "gwtest-none", 0, PvmMboxDefault);
        get("child", "gwtest-multi", 1, PvmMboxFirstAvail);
        get("child", "gwtest-multi", 0, PvmMboxReadAndDelete);
        get("child", "gwtest-multi", 0, PvmMboxDefault);
        get("child", "gwtest-open", 0, PvmMboxDefault);
        printf("child: put over an overwritable entry -> %d\n", put("gwtest-open", 8, PvmMboxDefault));
        pvm_initsend(PvmDataDefault);
        pvm_send(pvm_parent(), 1);
        pvm_exit();
        return 0;
    }
    printf("parent: put -> %d\n", put("gwtest-svc", 1, PvmMboxDefault));
    printf("parent: put again -> %s\n", put("gwtest-svc", 2, PvmMboxDefault) < 0 ? "refused" : "accepted");
    printf("parent: multi -> %d\n", put("gwtest-multi", 10, PvmMboxMultiInstance));
    printf("parent: multi -> %d\n", put("gwtest-multi", 11, PvmMboxMultiInstance));
    printf("parent: multi -> %d\n", put("gwtest-multi", 12, PvmMboxMultiInstance));
    printf("parent: overwritable -> %d\n", put("gwtest-open", 7, PvmMboxOverWritable));
    int n;
    struct pvmmboxinfo *classes;
    if (pvm_getmboxinfo("gwtest-multi", &n, &classes) >= 0 && n == 1)
        printf("parent: mboxinfo gwtest-multi: %d entries, first index %d\n", classes[0].mi_nentries,
               classes[0].mi_indices[0]);
    char *args[] = {"child", NULL};
    int child;
    if (pvm_spawn("mbox_test", args, 0, "", 1, &child) != 1) {
        printf("spawn failed\n");
        pvm_exit();
        return 1;
    }
    pvm_notify(PvmTaskExit, 2, 1, &child);
    pvm_recv(child, 1);
    pvm_recv(-1, 2); /* the child is gone: its entries with it */
    get("parent", "gwtest-svc", 0, PvmMboxDefault);
    get("parent", "gwtest-open", 0, PvmMboxDefault);
    printf("parent: delete -> %d\n", pvm_delinfo("gwtest-svc", 0, PvmMboxDefault));
    get("parent", "gwtest-svc", 0, PvmMboxDefault);
    pvm_delinfo("gwtest-multi", 1, 0);
    pvm_delinfo("gwtest-multi", 2, 0);
    pvm_delinfo("gwtest-open", 0, 0);
    pvm_exit();
    return 0;
}
