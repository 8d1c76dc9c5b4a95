/* The rest of the message interface between a parent and a child task:
 * wait ids and header fields (pvm_getminfo/setminfo; Debian's library
 * declares pvm_getmwid/setmwid but has not got them), a
 * matching function of the program's own (pvm_recvf), message handlers
 * (pvm_addmhf/delmhf), messages inside messages (pvm_pkmesg, pvm_upkmesg,
 * pvm_pkmesgbody), PVM_EXPORT (pvm_export/unexport) and waiting for a
 * message with select on pvm_getfds' first descriptor; and pvm_hostsync. Every return code
 * that PVM defines is printed: the output under gridwire and under Debian's
 * PVM must agree. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include "pvm3.h"

/* Whether descriptor fd becomes readable within `secs` seconds. */
static int readable(int fd, int secs)
{
    fd_set r;
    struct timeval tv = {secs, 0};
    FD_ZERO(&r);
    FD_SET(fd, &r);
    return select(fd + 1, &r, NULL, NULL, &tv) == 1;
}

static int want_wid;
static int handled;

/* Picks the message whose wait id is `want_wid`. */
static int match_wid(int bufid, int tid, int tag)
{
    struct pvmminfo mi;
    if (pvm_getminfo(bufid, &mi) < 0)
        return -1;
    return mi.wid == want_wid ? 1 : 0;
}

static int on_tag6(int mid)
{
    int v, bytes, tag, tid;
    pvm_bufinfo(mid, &bytes, &tag, &tid);
    pvm_upkint(&v, 1, 1);
    printf("handler: tag %d value %d from %s; active receive buffer is the message: %s\n", tag, v,
           tid != pvm_mytid() ? "the child" : "me",
           pvm_getrbuf() == mid ? "yes" : "no");
    handled++;
    return 0;
}

static void set_wid(int buf, int wid)
{
    struct pvmminfo mi;
    pvm_getminfo(buf, &mi);
    mi.wid = wid;
    pvm_setminfo(buf, &mi);
}

static int wid_of(int buf)
{
    struct pvmminfo mi;
    return pvm_getminfo(buf, &mi) < 0 ? -1 : mi.wid;
}

static void child(void)
{
    int parent = pvm_parent(), i, v;
    for (i = 0; i < 3; i++) {
        v = i * 10;
        pvm_initsend(PvmDataDefault);
        pvm_pkint(&v, 1, 1);
        set_wid(pvm_getsbuf(), 100 + i);
        pvm_send(parent, 5);
    }
    v = 99;
    pvm_initsend(PvmDataDefault);
    pvm_pkint(&v, 1, 1);
    pvm_send(parent, 6);

    int inner = pvm_mkbuf(PvmDataDefault), body = pvm_mkbuf(PvmDataDefault);
    int old = pvm_setsbuf(inner);
    pvm_pkstr("inner");
    v = 7;
    pvm_pkint(&v, 1, 1);
    set_wid(inner, 42);
    pvm_setsbuf(body);
    pvm_pkstr("spliced");
    pvm_setsbuf(old);
    pvm_initsend(PvmDataDefault);
    v = 1;
    pvm_pkint(&v, 1, 1);
    pvm_pkmesg(inner);
    pvm_pkmesgbody(body);
    pvm_send(parent, 7);
    pvm_freebuf(inner);
    pvm_freebuf(body);
    /* Stay until the parent has read everything, then answer once more. */
    pvm_recv(parent, 8);
    pvm_initsend(PvmDataDefault);
    pvm_send(parent, 9);
}

int main(int argc, char **argv)
{
    char *env;
    int me = pvm_mytid(), kid, i, v, mh;
    if (argc > 1) {
        child();
        pvm_exit();
        return 0;
    }
    mh = pvm_addmhf(-1, 6, pvm_getcontext(), on_tag6);
    printf("addmhf -> %s\n", mh >= 0 ? "an id" : "an error");
    printf("addmhf again -> %d\n", pvm_addmhf(-1, 6, pvm_getcontext(), on_tag6));
    char *args[] = {"child", NULL};
    if (pvm_spawn("msgapi_test", args, PvmTaskDefault, "", 1, &kid) != 1) {
        printf("spawn failed: %d\n", kid);
        pvm_exit();
        return 1;
    }

    int (*def)(int, int, int) = pvm_recvf(match_wid);
    printf("recvf(match_wid) -> %s\n", def == NULL ? "null" : "a function");
    int order[3] = {102, 100, 101};
    for (i = 0; i < 3; i++) {
        struct pvmminfo mi;
        want_wid = order[i];
        int b = pvm_recv(-1, -1);
        pvm_upkint(&v, 1, 1);
        pvm_getminfo(b, &mi);
        printf("wid %d: value %d, wid %d, tag %d, from the child %s, to me %s, my context %s\n",
               want_wid, v, mi.wid, mi.tag, mi.src == kid ? "yes" : "no",
               mi.dst == me ? "yes" : "no", mi.ctx == pvm_getcontext() ? "yes" : "no");
    }
    printf("recvf(NULL) -> %s\n", pvm_recvf(NULL) == match_wid ? "match_wid" : "another");
    printf("recvf(the first default) -> %s\n", pvm_recvf(def) == def ? "the same" : "another");

    pvm_recv(kid, 7);
    printf("handled before tag 7: %d\n", handled);
    pvm_upkint(&v, 1, 1);
    int nested = pvm_upkmesg();
    char s[32] = "";
    pvm_upkstr(s);
    printf("outer: %d, then spliced body \"%s\"\n", v, s);
    int outer = pvm_setrbuf(nested);
    pvm_upkstr(s);
    pvm_upkint(&v, 1, 1);
    printf("nested message: \"%s\" %d, wait id %d\n", s, v, wid_of(nested));
    pvm_setrbuf(outer);
    pvm_freebuf(nested);

    struct pvmminfo mi;
    int got = pvm_getminfo(12345, &mi), set = pvm_setminfo(12345, &mi);
    printf("getminfo(bad buffer) -> %d, setminfo(bad buffer) -> %d\n", got, set);
    printf("pkmesg(the send buffer) -> %d\n", pvm_pkmesg(pvm_initsend(PvmDataDefault)));
    int first = pvm_delmhf(mh), again = pvm_delmhf(mh), negative = pvm_delmhf(-1);
    printf("delmhf -> %d, again -> %d, negative -> %d\n", first, again, negative);

    struct timeval clk, delta;
    int hs = pvm_hostsync(pvm_tidtohost(me), &clk, &delta);
    long d_us = delta.tv_sec * 1000000L + delta.tv_usec;
    printf("hostsync(my host) -> %d, delta within 10 ms: %s, clock set: %s\n", hs,
           d_us > -10000 && d_us < 10000 ? "yes" : "no", clk.tv_sec > 1000000000 ? "yes" : "no");
    printf("hostsync(not a host) -> %d\n", pvm_hostsync(0x123, &clk, &delta));
    unsetenv("PVM_EXPORT");
    pvm_export("GWTEST_A");
    pvm_export("GWTEST_B");
    pvm_export("GWTEST_A");
    env = getenv("PVM_EXPORT");
    printf("PVM_EXPORT after exports: %s\n", env ? env : "(unset)");
    pvm_unexport("GWTEST_A");
    pvm_unexport("GWTEST_C");
    env = getenv("PVM_EXPORT");
    printf("PVM_EXPORT after unexports: %s\n", env ? env : "(unset)");

    int *fds;
    int nfds = pvm_getfds(&fds);
    printf("getfds -> %s\n", nfds >= 1 ? "at least one" : "none");
    printf("readable with no message waiting: %s\n", readable(fds[0], 0) ? "yes" : "no");
    pvm_initsend(PvmDataDefault);
    pvm_send(kid, 8);
    /* On stderr, not compared: Debian's first descriptor (its pvmd socket)
     * does not become readable for this answer; tests/examples.sh checks
     * that gridwire's does. */
    fprintf(stderr, "readable once the child answers: %s\n", readable(fds[0], 3) ? "yes" : "no");
    printf("the answer: %s\n", pvm_recv(kid, 9) > 0 ? "received" : "missing");
    pvm_exit();
    return 0;
}
