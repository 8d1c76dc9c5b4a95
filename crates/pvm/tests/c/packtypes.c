/* Every pvm_pkX / pvm_upkX type between two tasks (with strides, strings and
 * several runs unpacked by one call), printed by the receiver. The output
 * under gridwire and under Debian's PVM must be the same. */
#include <stdio.h>
#include <string.h>
#include "pvm3.h"

static void pack_all(int in_place)
{
    /* static: PvmDataInPlace reads them when the message is sent */
    static char b[4] = {1, -2, 3, 127};
    static short s[3] = {-300, 0, 300};
    static unsigned short us[2] = {65535, 7};
    static int i[6] = {1, -1, 2, -2, 2147483647, -2147483647};
    static unsigned int ui[2] = {4000000000u, 5};
    static long l[2] = {7L, 2000000000L}; /* PVM 3.4.6 XDR-packs longs in 32 bits, negatives unpack unsigned */
    static unsigned long ul[1] = {4000000000UL};
    static float f[2] = {1.5f, -2.25f};
    static double d[3] = {3.125, -1e300, 6.5};
    static float c[4] = {1, 2, 3, 4};
    static double dc[2] = {5.5, -6.5};
    static int one = 42, two[2] = {43, 44};
    pvm_pkbyte(b, 4, 1);
    pvm_pkshort(s, 3, 1);
    pvm_pkushort(us, 2, 1);
    static int i_contiguous[3] = {1, 2, 2147483647};
    /* PVM 3.4 packs only contiguous data in place: a stride elsewhere */
    if (in_place)
        pvm_pkint(i_contiguous, 3, 1);
    else
        pvm_pkint(i, 3, 2);
    pvm_pkuint(ui, 2, 1);
    /* Debian's PVM 3.4.6 mangles long, unsigned long and strings packed in
     * place (on 64-bit): those are compared for the copying encodings only. */
    if (!in_place) {
        pvm_pklong(l, 2, 1);
        pvm_pkulong(ul, 1, 1);
    }
    pvm_pkfloat(f, 2, 1);
    pvm_pkdouble(d, 3, 1);
    pvm_pkcplx(c, 2, 1);
    pvm_pkdcplx(dc, 1, 1);
    if (!in_place)
        pvm_pkstr("a string, with spaces");
    pvm_pkint(&one, 1, 1);
    pvm_pkint(two, 2, 1);
}

static void unpack_print(int in_place)
{
    char b[4], str[64];
    short s[3];
    unsigned short us[2];
    int i[6] = {0}, three[3];
    unsigned int ui[2];
    long l[2];
    unsigned long ul[1];
    float f[2], c[4];
    double d[3], dc[2];
    pvm_upkbyte(b, 4, 1);
    pvm_upkshort(s, 3, 1);
    pvm_upkushort(us, 2, 1);
    pvm_upkint(i, 3, 2);
    pvm_upkuint(ui, 2, 1);
    if (!in_place) {
        pvm_upklong(l, 2, 1);
        pvm_upkulong(ul, 1, 1);
    } else {
        l[0] = l[1] = 0;
        ul[0] = 0;
    }
    pvm_upkfloat(f, 2, 1);
    pvm_upkdouble(d, 3, 1);
    pvm_upkcplx(c, 2, 1);
    pvm_upkdcplx(dc, 1, 1);
    if (in_place)
        strcpy(str, "(not packed)");
    else
        pvm_upkstr(str);
    pvm_upkint(three, 3, 1);
    printf("byte %d %d %d %d\n", b[0], b[1], b[2], b[3]);
    printf("short %d %d %d ushort %u %u\n", s[0], s[1], s[2], us[0], us[1]);
    printf("int strided %d %d %d %d %d %d\n", i[0], i[1], i[2], i[3], i[4], i[5]);
    printf("uint %u %u long %ld %ld ulong %lu\n", ui[0], ui[1], l[0], l[1], ul[0]);
    printf("float %g %g double %g %g %g\n", f[0], f[1], d[0], d[1], d[2]);
    printf("cplx %g %g %g %g dcplx %g %g\n", c[0], c[1], c[2], c[3], dc[0], dc[1]);
    printf("str [%s] runs %d %d %d\n", str, three[0], three[1], three[2]);
}

int main(int argc, char **argv)
{
    int me = pvm_mytid(), child, enc;
    if (argc > 1) { /* the echoing child: sends back what it got, repacked */
        for (enc = 0; enc < 3; enc++) {
            pvm_recv(pvm_parent(), 1);
            pvm_setsbuf(pvm_getrbuf()); /* forward the received buffer as is */
            pvm_send(pvm_parent(), 2);
            pvm_setsbuf(0);
        }
        pvm_exit();
        return 0;
    }
    char *args[] = {"child", NULL};
    if (pvm_spawn("packtypes", args, 0, "", 1, &child) != 1) {
        printf("spawn failed\n");
        pvm_exit();
        return 1;
    }
    for (enc = 0; enc < 3; enc++) {
        static const char *names[] = {"PvmDataDefault", "PvmDataRaw", "PvmDataInPlace"};
        printf("== %s\n", names[enc]);
        pvm_initsend(enc);
        pack_all(enc == PvmDataInPlace);
        pvm_send(child, 1);
        pvm_recv(child, 2);
        unpack_print(enc == PvmDataInPlace);
    }
    pvm_exit();
    return 0;
}
