/* pvm_catchout: the output of two spawned tasks comes to the parent's
 * stdout framed as PVM frames it ([tid] BEGIN, [tid] line, [tid] EOF), and
 * pvm_exit waits for it. tests/examples.sh compares it with Debian's PVM. */
#include <stdio.h>
#include "pvm3.h"

int main(int argc, char **argv)
{
    int me = pvm_mytid(), tids[2];
    if (argc > 1) {
        printf("child %s says hello\n", argv[1]);
        printf("child %s: second line\n", argv[1]);
        fflush(stdout);
        pvm_exit();
        return 0;
    }
    printf("catchout -> %d\n", pvm_catchout(stdout));
    fflush(stdout);
    char *a[] = {"one", NULL}, *b[] = {"two", NULL};
    pvm_spawn("catchout_test", a, PvmTaskDefault, "", 1, &tids[0]);
    pvm_spawn("catchout_test", b, PvmTaskDefault, "", 1, &tids[1]);
    pvm_exit();
    printf("parent t%x done after its children\n", me);
    return 0;
}
