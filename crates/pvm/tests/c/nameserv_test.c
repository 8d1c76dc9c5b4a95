/* PVM 3.3's name service, kept by PVM 3.4 over its mailbox: pvm_insert,
 * pvm_lookup and pvm_delete of integers under (class name, index), by one
 * task and by its child. Every return code is printed: the output under
 * gridwire and under Debian's PVM must agree. */
#include <stdio.h>
#include "pvm3.h"

static void lookup(char *who, char *cls, int index)
{
    int data = -777;
    int rc = pvm_lookup(cls, index, &data);
    printf("%s: lookup %s %d -> %d, data %d\n", who, cls, index, rc, rc >= 0 ? data : -777);
}

int main(int argc, char **argv)
{
    int kid;
    pvm_mytid();
    if (argc > 1) {
        /* The child's results go back to the parent, which prints them. */
        int r[5], data = -777;
        r[0] = pvm_lookup("gwns-a", 5, &data);
        r[1] = data;
        r[2] = pvm_insert("gwns-a", 7, 70);
        r[3] = pvm_delete("gwns-a", 0);
        r[4] = pvm_insert("gwns-a", 5, 55);
        pvm_initsend(PvmDataDefault);
        pvm_pkint(r, 5, 1);
        pvm_send(pvm_parent(), 1);
        /* Stays until the parent has looked at its entry. */
        pvm_recv(pvm_parent(), 2);
        pvm_exit();
        return 0;
    }
    printf("insert gwns-a -1 10 -> %d\n", pvm_insert("gwns-a", -1, 10));
    printf("insert gwns-a -1 11 -> %d\n", pvm_insert("gwns-a", -1, 11));
    printf("insert gwns-a 5 15 -> %d\n", pvm_insert("gwns-a", 5, 15));
    printf("insert gwns-a 5 16 -> %d\n", pvm_insert("gwns-a", 5, 16));
    printf("insert gwns-a 1 17 -> %d\n", pvm_insert("gwns-a", 1, 17));
    printf("insert gwns-a -1 12 -> %d\n", pvm_insert("gwns-a", -1, 12));
    lookup("parent", "gwns-a", 0);
    lookup("parent", "gwns-a", 1);
    lookup("parent", "gwns-a", 2);
    lookup("parent", "gwns-a", 5);
    lookup("parent", "gwns-a", 3);
    lookup("parent", "gwns-a", -1);
    lookup("parent", "gwns-none", 0);
    lookup("parent", "gwns-none", -1);
    printf("delete gwns-a 1 -> %d\n", pvm_delete("gwns-a", 1));
    printf("delete gwns-a 1 -> %d\n", pvm_delete("gwns-a", 1));
    printf("delete gwns-none 0 -> %d\n", pvm_delete("gwns-none", 0));
    printf("insert gwns-a -1 13 -> %d\n", pvm_insert("gwns-a", -1, 13));
    char *args[] = {"child", NULL};
    if (pvm_spawn("nameserv_test", args, PvmTaskDefault, "", 1, &kid) != 1) {
        printf("spawn failed\n");
        pvm_exit();
        return 1;
    }
    pvm_recv(kid, 1);
    int r[5];
    pvm_upkint(r, 5, 1);
    printf("child: lookup gwns-a 5 -> %d, data %d; insert gwns-a 7 70 -> %d; delete gwns-a 0 -> %d; "
           "insert gwns-a 5 55 -> %d\n", r[0], r[1], r[2], r[3], r[4]);
    lookup("parent", "gwns-a", 0);
    lookup("parent", "gwns-a", 7);
    pvm_initsend(PvmDataDefault);
    pvm_send(kid, 2);
    printf("insert gwns-a -2 1 -> %d\n", pvm_insert("gwns-a", -2, 1));
    /* The mailbox's direct index (pvm_putinfo), which the name service
     * builds on: the first free index from the one given. */
    int v = 1;
    int flags[] = {PvmMboxMultiInstance | PvmMboxDirectIndex(3), PvmMboxMultiInstance | PvmMboxDirectIndex(3),
                   PvmMboxMultiInstance | PvmMboxOverWritable | PvmMboxDirectIndex(3), PvmMboxDirectIndex(5),
                   PvmMboxMultiInstance, PvmMboxMultiInstance | PvmMboxDirectIndex(100000)};
    char *cls[] = {"gwns-di", "gwns-di", "gwns-di", "gwns-di2", "gwns-di", "gwns-di"};
    for (int i = 0; i < 6; i++, v++) {
        pvm_initsend(PvmDataDefault);
        pvm_pkint(&v, 1, 1);
        printf("putinfo %s value %d -> %d\n", cls[i], v, pvm_putinfo(cls[i], pvm_getsbuf(), flags[i]));
    }
    int data = -777;
    printf("lookup gwns-di 3 -> %d, data %d\n", pvm_lookup("gwns-di", 3, &data), data);
    pvm_exit();
    return 0;
}
