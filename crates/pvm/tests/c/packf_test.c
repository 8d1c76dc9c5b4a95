/* pvm_packf / pvm_unpackf (pvm_pack(3PVM)): a message packed with one
 * format (values, arrays with counts and strides, "*" taken from the
 * arguments, every conversion and modifier) goes to this task itself and
 * is unpacked with the matching format; then malformed formats must give
 * PvmBadParam (-2) without a crash. tests/examples.sh checks the output
 * (the first part also against Debian's PVM: `packf_test valid`). */
#include <stdio.h>
#include <string.h>
#include "pvm3.h"

int main(int argc, char **argv)
{
    int me = pvm_mytid(), n = 3, iarr[6] = {1, 2, 3, 4, 5, 6}, back[3] = {0}, count = 0;
    double darr[4] = {0.5, 1.5, 2.5, 3.5}, dback[4] = {0};
    float cplx[4] = {1, -1, 2, -2}, cback[4] = {0};
    char str[32] = "";
    short hs = 0;
    unsigned int ui = 0;
    long lv = 0;
    double dv = 0;
    float fv = 0;
    char c = 0;
    int rc = pvm_packf("%+ %d %*.2d %4lf %s %hd %ud %ld %lf %f %c %2x", PvmDataDefault, n, n, iarr,
                       darr, "hello packf", -7, 40000u, 1234567L, 2.25, 0.75, 'Z', cplx);
    printf("packf -> %d\n", rc);
    pvm_send(me, 5);
    pvm_recv(me, 5);
    rc = pvm_unpackf("%d %*d %4lf %s %hd %ud %ld %lf %f %c %2x", &count, n, back,
                     dback, str, &hs, &ui, &lv, &dv, &fv, &c, cback);
    printf("unpackf -> %d\n", rc);
    printf("count %d ints %d %d %d doubles %g %g %g %g\n", count, back[0], back[1], back[2],
           dback[0], dback[1], dback[2], dback[3]);
    printf("string '%s' short %d uint %u long %ld double %g float %g char %c complex %g %g %g %g\n",
           str, hs, ui, lv, dv, fv, c, cback[0], cback[1], cback[2], cback[3]);
    if (argc > 1 && strcmp(argv[1], "valid") == 0) {
        pvm_exit();
        return 0;
    }
    pvm_initsend(PvmDataDefault);
    const char *bad[] = {"%q", "%", "%99999999999d", "%.0d", "%hld", "%lc", "%uf", "%hs", "%3"};
    for (unsigned i = 0; i < sizeof bad / sizeof *bad; i++)
        printf("packf(\"%s\") -> %d\n", bad[i], pvm_packf(bad[i], iarr));
    printf("packf(\"%%*d\", -1) -> %d\n", pvm_packf("%*d", -1, iarr));
    printf("packf(NULL) -> %d\n", pvm_packf(NULL));
    printf("unpackf(\"%%+\") -> %d\n", pvm_unpackf("%+", PvmDataRaw));
    pvm_exit();
    return 0;
}
