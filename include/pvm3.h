/* pvm3.h -- gridwire's PVM face: source-compatible with PVM 3.4.
 *
 * Programs written for PVM 3.4 compile against this header unchanged and
 * link with -lpvm3 (groups: -lgpvm3, the same library). Tasks are gridwire
 * contexts that join a virtual machine kept by a per-user coordinator; see
 * docs/pvm.md. Functions this library declares but does not support return
 * PvmNotImpl.
 */
#ifndef GRIDWIRE_PVM3_H
#define GRIDWIRE_PVM3_H

#include <stdio.h>
#include <sys/time.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PVM_VER "3.4.6"
#define PVM_MAJOR_VERSION 3
#define PVM_MINOR_VERSION 4
#define PVM_PATCH_VERSION 6

/* Encodings for pvm_initsend and pvm_mkbuf. */
enum {
    PvmDataDefault = 0, /* any sender to any receiver: tagged, converted only when needed */
    PvmDataRaw = 1,     /* the same representation here */
    PvmDataInPlace = 2, /* contiguous data is read from the program's memory at send time */
    PvmDataTrace = 4
};
#define PvmDataFoo PvmDataDefault

/* pvm_spawn flags. */
#define PvmTaskDefault 0
#define PvmTaskHost 1
#define PvmTaskArch 2
#define PvmTaskDebug 4
#define PvmTaskTrace 8
#define PvmMppFront 16
#define PvmHostCompl 32
#define PvmNoSpawnParent 64

/* pvm_notify events, and the flag that cancels a request. */
#define PvmTaskExit 1
#define PvmHostDelete 2
#define PvmHostAdd 3
#define PvmRouteAdd 4
#define PvmRouteDelete 5
#define PvmNotifyCancel 256

/* pvm_setopt / pvm_getopt. PvmRoute is accepted with any value: the
 * runtime selects every route itself. */
#define PvmRoute 1
#define PvmDontRoute 1
#define PvmAllowDirect 2
#define PvmRouteDirect 3
#define PvmDebugMask 2
#define PvmAutoErr 3
#define PvmOutputTid 4
#define PvmOutputCode 5
#define PvmTraceTid 6
#define PvmTraceCode 7
#define PvmTraceBuffer 8
#define PvmTraceOptions 9
#define PvmTraceFull 1
#define PvmTraceTime 2
#define PvmTraceCount 3
#define PvmFragSize 10
#define PvmResvTids 11
#define PvmSelfOutputTid 12
#define PvmSelfOutputCode 13
#define PvmSelfTraceTid 14
#define PvmSelfTraceCode 15
#define PvmSelfTraceBuffer 16
#define PvmSelfTraceOptions 17
#define PvmShowTids 18
#define PvmPollType 19
#define PvmPollConstant 1
#define PvmPollSleep 2
#define PvmPollTime 20
#define PvmOutputContext 21
#define PvmTraceContext 22
#define PvmSelfOutputContext 23
#define PvmSelfTraceContext 24
#define PvmNoReset 25

#define PvmTaskSelf 0
#define PvmTaskChild 1
#define PvmBaseContext 0

/* Mailbox flags (pvm_putinfo, pvm_recvinfo, pvm_delinfo). */
#define PvmMboxDefault 0
#define PvmMboxPersistent 1
#define PvmMboxMultiInstance 2
#define PvmMboxOverWritable 4
#define PvmMboxFirstAvail 8
#define PvmMboxReadAndDelete 16
#define PvmMboxWaitForInfo 32
#define PvmMboxMaxFlag 512
/* A direct index travels in the flags' bits from 10 up: the entry goes to
 * the first free index from it on. This library takes indices up to
 * 131072; larger ones are PvmBadParam. */
#define PvmMboxDirectIndexShift 10
#define PvmMboxMaxDirectIndex (1u << (31 - PvmMboxDirectIndexShift))
#define PvmMboxDirectIndex(index) ((int)((unsigned)(index) << PvmMboxDirectIndexShift))
#define PvmMboxDirectIndexOf(flags) \
    ((int)(((unsigned)(flags) >> PvmMboxDirectIndexShift) & (PvmMboxMaxDirectIndex - 1)))
#define PvmMboxDirectIndexShift 10

/* Return codes. */
#define PvmOk 0
#define PvmBadParam (-2)
#define PvmMismatch (-3)
#define PvmOverflow (-4)
#define PvmNoData (-5)
#define PvmNoHost (-6)
#define PvmNoFile (-7)
#define PvmDenied (-8)
#define PvmNoMem (-10)
#define PvmBadMsg (-12)
#define PvmSysErr (-14)
#define PvmNoBuf (-15)
#define PvmNoSuchBuf (-16)
#define PvmNullGroup (-17)
#define PvmDupGroup (-18)
#define PvmNoGroup (-19)
#define PvmNotInGroup (-20)
#define PvmNoInst (-21)
#define PvmHostFail (-22)
#define PvmNoParent (-23)
#define PvmNotImpl (-24)
#define PvmDSysErr (-25)
#define PvmBadVersion (-26)
#define PvmOutOfRes (-27)
#define PvmDupHost (-28)
#define PvmCantStart (-29)
#define PvmAlready (-30)
#define PvmNoTask (-31)
#define PvmNotFound (-32)
#define PvmExists (-33)
#define PvmHostrNMstr (-34)
#define PvmParentNotSet (-35)
#define PvmIPLoopback (-36)
#define PvmNoEntry PvmNotFound
#define PvmDupEntry PvmDenied

/* Data types (pvm_psend, pvm_precv, pvm_reduce, pvm_gather, pvm_scatter). */
#define PVM_STR 0
#define PVM_BYTE 1
#define PVM_SHORT 2
#define PVM_INT 3
#define PVM_FLOAT 4
#define PVM_CPLX 5
#define PVM_DOUBLE 6
#define PVM_DCPLX 7
#define PVM_LONG 8
#define PVM_USHORT 9
#define PVM_UINT 10
#define PVM_ULONG 11

struct pvmhostinfo {
    int hi_tid;
    char *hi_name;
    char *hi_arch;
    int hi_speed;
    int hi_dsig;
};

struct pvmtaskinfo {
    int ti_tid;
    int ti_ptid;
    int ti_host;
    int ti_flag;
    char *ti_a_out;
    int ti_pid;
};

struct pvmmboxinfo {
    char *mi_name;
    int mi_nentries;
    int *mi_indices;
    int *mi_owners;
    int *mi_flags;
};

extern int pvm_errno;

/* Tasks and the virtual machine. */
int pvm_mytid(void);
int pvm_parent(void);
int pvm_exit(void);
int pvm_spawn(char *file, char **argv, int flags, char *where, int count, int *tids);
int pvm_kill(int tid);
int pvm_sendsig(int tid, int sig);
int pvm_tasks(int which, int *ntask, struct pvmtaskinfo **taskp);
int pvm_config(int *nhost, int *narch, struct pvmhostinfo **hostp);
int pvm_siblings(int **tids);
int pvm_tidtohost(int tid);
int pvm_pstat(int tid);
int pvm_mstat(char *host);
int pvm_addhosts(char **hosts, int count, int *infos);
int pvm_delhosts(char **hosts, int count, int *infos);
int pvm_halt(void);
int pvm_notify(int what, int msgtag, int count, int *tids);
int pvm_catchout(FILE *f);
int pvm_archcode(char *arch);
int pvmsleep(int secs);
int pvmgetclock(struct timeval *tv);
char *pvm_version(void);
int pvm_perror(char *msg);
int pvm_setopt(int what, int val);
int pvm_getopt(int what);
int pvm_export(char *name);
int pvm_unexport(char *name);
int pvm_start_pvmd(int argc, char **argv, int block);
/* One descriptor, readable while a message waits (see docs/pvm.md). */
int pvm_getfds(int **fds);
int pvm_hostsync(int host, struct timeval *clk, struct timeval *delta);

/* Message contexts. */
int pvm_newcontext(void);
int pvm_setcontext(int ctx);
int pvm_getcontext(void);
int pvm_freecontext(int ctx);

/* Buffers. */
int pvm_initsend(int encoding);
int pvm_mkbuf(int encoding);
int pvm_freebuf(int bufid);
int pvm_getsbuf(void);
int pvm_getrbuf(void);
int pvm_setsbuf(int bufid);
int pvm_setrbuf(int bufid);
int pvm_bufinfo(int bufid, int *bytes, int *msgtag, int *tid);

/* Message header fields (pvm_getminfo(3PVM)): all can be read; ctx, tag,
 * wid, src and dst set. len is the body's length in this library's packed
 * form (with its type tags); crc is 0, as in a PVM built without checksums. */
struct pvmminfo {
    int len;
    int ctx;
    int tag;
    int wid;
    int enc;
    int crc;
    int src;
    int dst;
};
int pvm_getminfo(int bufid, struct pvmminfo *mi);
int pvm_setminfo(int bufid, struct pvmminfo *mi);
int pvm_getmwid(int bufid);
int pvm_setmwid(int bufid, int waitid);

/* Packing and unpacking: count elements, every stride-th one. */
int pvm_pkbyte(char *p, int count, int stride);
int pvm_pkcplx(float *p, int count, int stride);
int pvm_pkdcplx(double *p, int count, int stride);
int pvm_pkdouble(double *p, int count, int stride);
int pvm_pkfloat(float *p, int count, int stride);
int pvm_pkint(int *p, int count, int stride);
int pvm_pklong(long *p, int count, int stride);
int pvm_pkshort(short *p, int count, int stride);
int pvm_pkuint(unsigned int *p, int count, int stride);
int pvm_pkulong(unsigned long *p, int count, int stride);
int pvm_pkushort(unsigned short *p, int count, int stride);
int pvm_pkstr(char *s);
int pvm_upkbyte(char *p, int count, int stride);
int pvm_upkcplx(float *p, int count, int stride);
int pvm_upkdcplx(double *p, int count, int stride);
int pvm_upkdouble(double *p, int count, int stride);
int pvm_upkfloat(float *p, int count, int stride);
int pvm_upkint(int *p, int count, int stride);
int pvm_upklong(long *p, int count, int stride);
int pvm_upkshort(short *p, int count, int stride);
int pvm_upkuint(unsigned int *p, int count, int stride);
int pvm_upkulong(unsigned long *p, int count, int stride);
int pvm_upkushort(unsigned short *p, int count, int stride);
int pvm_upkstr(char *s);
/* Messages inside messages: with their header, or only the body spliced in. */
int pvm_pkmesg(int bufid);
int pvm_pkmesgbody(int bufid);
int pvm_upkmesg(void);

/* Sending and receiving. */
int pvm_send(int tid, int msgtag);
int pvm_mcast(int *tids, int count, int msgtag);
int pvm_psend(int tid, int msgtag, void *buf, int count, int datatype);
int pvm_recv(int tid, int msgtag);
int pvm_nrecv(int tid, int msgtag);
int pvm_trecv(int tid, int msgtag, struct timeval *timeout);
int pvm_probe(int tid, int msgtag);
int pvm_precv(int tid, int msgtag, void *buf, int count, int datatype,
              int *rtid, int *rtag, int *rcount);
/* The program's own matching function for pvm_recv/nrecv/trecv/probe, and
 * message handlers; both are called on the program's thread, inside the
 * PVM call that looks for messages. */
int (*pvm_recvf(int (*newf)(int bufid, int tid, int tag)))(int, int, int);
int pvm_addmhf(int src, int tag, int ctx, int (*func)(int mid));
int pvm_delmhf(int mhid);

/* The message mailbox. */
int pvm_putinfo(char *name, int bufid, int flags);
int pvm_recvinfo(char *name, int index, int flags);
int pvm_delinfo(char *name, int index, int flags);
int pvm_getmboxinfo(char *pattern, int *nclasses, struct pvmmboxinfo **classes);
/* PVM 3.3's name service over the mailbox: integers under (class, index). */
int pvm_insert(char *name, int index, int data);
int pvm_lookup(char *name, int index, int *data);
int pvm_delete(char *name, int index);

/* Groups. */
int pvm_joingroup(char *group);
int pvm_lvgroup(char *group);
int pvm_gsize(char *group);
int pvm_getinst(char *group, int tid);
int pvm_gettid(char *group, int inst);
int pvm_barrier(char *group, int count);
int pvm_freezegroup(char *group, int size);
int pvm_bcast(char *group, int msgtag);
int pvm_reduce(void (*func)(int *, void *, void *, int *, int *), void *data,
               int count, int datatype, int msgtag, char *group, int root);
int pvm_gather(void *result, void *data, int count, int datatype, int msgtag,
               char *group, int root);
int pvm_scatter(void *result, void *data, int count, int datatype, int msgtag,
                char *group, int root);
void PvmMax(int *datatype, void *x, void *y, int *count, int *info);
void PvmMin(int *datatype, void *x, void *y, int *count, int *info);
void PvmSum(int *datatype, void *x, void *y, int *count, int *info);
void PvmProduct(int *datatype, void *x, void *y, int *count, int *info);

/* pvm_packf / pvm_unpackf: PVM's printf-like packing (pvm_pack(3PVM)):
 *   format : [ "%+" ] { "%" [count] ["." stride] {h|l|u} (c|d|f|x|s) }
 * count and stride are digits or "*" (an int argument). With a count or a
 * stride the argument is a pointer to the data, otherwise (pvm_packf) the
 * value itself; pvm_unpackf always takes pointers. "%+" takes an int
 * encoding and calls pvm_initsend. Characters outside conversions are
 * ignored. A malformed format (unknown conversion, a count or stride that
 * overflows or is negative, a modifier that does not apply, a format ending
 * inside a conversion) returns PvmBadParam before anything further is
 * packed; as with printf, the arguments must match the format. C variadic
 * functions cannot be written in stable Rust, so they live here, static in
 * every translation unit, over the library's pvm_pk and pvm_upk functions. */
#include <stdarg.h>

__attribute__((unused)) static int gwpvm_fmt_number(const char **p, va_list *ap, int *out)
{
    long v = 0;
    if (**p == '*') {
        (*p)++;
        *out = va_arg(*ap, int);
        return *out < 0 ? -2 : 0;
    }
    if (**p < '0' || **p > '9')
        return -2;
    while (**p >= '0' && **p <= '9') {
        v = v * 10 + (**p - '0');
        if (v > 0x7fffffffL)
            return -2;
        (*p)++;
    }
    *out = (int)v;
    return 0;
}

__attribute__((unused)) static int gwpvm_packf_v(int unpack, const char *fmt, va_list *ap)
{
    const char *p = fmt;
    int rc = 0;
    if (!fmt)
        return PvmBadParam;
    while (*p) {
        int count = 1, stride = 1, isv, h = 0, l = 0, u = 0;
        if (*p++ != '%')
            continue;
        if (*p == '+') {
            p++;
            if (unpack)
                return PvmBadParam;
            if ((rc = pvm_initsend(va_arg(*ap, int))) < 0)
                return rc;
            continue;
        }
        isv = !unpack;
        if ((*p >= '0' && *p <= '9') || *p == '*') {
            if (gwpvm_fmt_number(&p, ap, &count) < 0)
                return PvmBadParam;
            isv = 0;
        }
        if (*p == '.') {
            p++;
            if (gwpvm_fmt_number(&p, ap, &stride) < 0 || stride < 1)
                return PvmBadParam;
            isv = 0;
        }
        for (;; p++) {
            if (*p == 'h') h++;
            else if (*p == 'l') l++;
            else if (*p == 'u') u++;
            else break;
        }
        if (h > 1 || l > 1 || u > 1 || (h && l))
            return PvmBadParam;
        switch (*p) {
        case 'c':
            if (h || l)
                return PvmBadParam;
            if (isv) {
                char c = (char)va_arg(*ap, int);
                rc = pvm_pkbyte(&c, 1, 1);
            } else {
                char *cp = va_arg(*ap, char *);
                rc = unpack ? pvm_upkbyte(cp, count, stride) : pvm_pkbyte(cp, count, stride);
            }
            break;
        case 'd':
            if (isv) {
                if (h) {
                    short s = (short)va_arg(*ap, int);
                    unsigned short us = (unsigned short)s;
                    rc = u ? pvm_pkushort(&us, 1, 1) : pvm_pkshort(&s, 1, 1);
                } else if (l) {
                    long lv = va_arg(*ap, long);
                    unsigned long ul = (unsigned long)lv;
                    rc = u ? pvm_pkulong(&ul, 1, 1) : pvm_pklong(&lv, 1, 1);
                } else {
                    int iv = va_arg(*ap, int);
                    unsigned int ui = (unsigned int)iv;
                    rc = u ? pvm_pkuint(&ui, 1, 1) : pvm_pkint(&iv, 1, 1);
                }
            } else if (h) {
                void *vp = va_arg(*ap, void *);
                rc = unpack ? (u ? pvm_upkushort((unsigned short *)vp, count, stride)
                                 : pvm_upkshort((short *)vp, count, stride))
                            : (u ? pvm_pkushort((unsigned short *)vp, count, stride)
                                 : pvm_pkshort((short *)vp, count, stride));
            } else if (l) {
                void *vp = va_arg(*ap, void *);
                rc = unpack ? (u ? pvm_upkulong((unsigned long *)vp, count, stride)
                                 : pvm_upklong((long *)vp, count, stride))
                            : (u ? pvm_pkulong((unsigned long *)vp, count, stride)
                                 : pvm_pklong((long *)vp, count, stride));
            } else {
                void *vp = va_arg(*ap, void *);
                rc = unpack ? (u ? pvm_upkuint((unsigned int *)vp, count, stride)
                                 : pvm_upkint((int *)vp, count, stride))
                            : (u ? pvm_pkuint((unsigned int *)vp, count, stride)
                                 : pvm_pkint((int *)vp, count, stride));
            }
            break;
        case 'f':
            if (h || u)
                return PvmBadParam;
            if (isv) {
                double d = va_arg(*ap, double);
                float f = (float)d;
                rc = l ? pvm_pkdouble(&d, 1, 1) : pvm_pkfloat(&f, 1, 1);
            } else {
                void *vp = va_arg(*ap, void *);
                rc = unpack ? (l ? pvm_upkdouble((double *)vp, count, stride)
                                 : pvm_upkfloat((float *)vp, count, stride))
                            : (l ? pvm_pkdouble((double *)vp, count, stride)
                                 : pvm_pkfloat((float *)vp, count, stride));
            }
            break;
        case 'x': {
            /* complex numbers travel by address even without a count */
            void *vp = va_arg(*ap, void *);
            if (h || u)
                return PvmBadParam;
            rc = unpack ? (l ? pvm_upkdcplx((double *)vp, count, stride)
                             : pvm_upkcplx((float *)vp, count, stride))
                        : (l ? pvm_pkdcplx((double *)vp, count, stride)
                             : pvm_pkcplx((float *)vp, count, stride));
            break;
        }
        case 's': {
            char *sp = va_arg(*ap, char *);
            if (h || l || u)
                return PvmBadParam;
            rc = unpack ? pvm_upkstr(sp) : pvm_pkstr(sp);
            break;
        }
        default: /* an unknown conversion, or the end of the format */
            return PvmBadParam;
        }
        if (rc < 0)
            return rc;
        p++;
    }
    return 0;
}

__attribute__((unused)) static int pvm_packf(const char *fmt, ...)
{
    va_list ap;
    int rc;
    va_start(ap, fmt);
    rc = gwpvm_packf_v(0, fmt, &ap);
    va_end(ap);
    return rc;
}

__attribute__((unused)) static int pvm_unpackf(const char *fmt, ...)
{
    va_list ap;
    int rc;
    va_start(ap, fmt);
    rc = gwpvm_packf_v(1, fmt, &ap);
    va_end(ap);
    return rc;
}

#ifdef __cplusplus
}
#endif
#endif
