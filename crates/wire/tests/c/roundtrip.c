/* C API test (run by crates/wire/tests/extra.sh): records written by C
 * structs, sent as iovecs through a pipe, decoded into a differently laid
 * out receiver struct; a foreign (big-endian, 4-byte long, 4-byte double
 * alignment, extra field first, other order) writer; inspection; errors. */
#include "gridwire.h"

#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures = 0, checks = 0;
#define CHECK(c)                                                                 \
    do {                                                                         \
        checks++;                                                                \
        if (!(c)) {                                                              \
            failures++;                                                          \
            fprintf(stderr, "%s:%d: CHECK failed: %s (last error: %s)\n", __FILE__, \
                    __LINE__, #c, gw_last_error());                              \
        }                                                                        \
    } while (0)
#define OK(call) CHECK((call) == GW_OK)

/* ---- the sender's native layout ---- */
struct point { double x; float y; short tag; };
struct rec {
    int id;
    long count;
    double temp;
    char flag;
    char label[7];
    short small;
    float ratio;
    double vals[4];
    unsigned long long big;
    struct point pts[2];
    gw_slice name;    /* string */
    gw_slice samples; /* int32_t[] */
};
static const gw_field point_fields[] = {
    {"x", "double", sizeof(double), offsetof(struct point, x)},
    {"y", "float", sizeof(float), offsetof(struct point, y)},
    {"tag", "integer", sizeof(short), offsetof(struct point, tag)},
};
static const gw_field rec_fields[] = {
    {"id", "integer", sizeof(int), offsetof(struct rec, id)},
    {"count", "integer", sizeof(long), offsetof(struct rec, count)},
    {"temp", "double", sizeof(double), offsetof(struct rec, temp)},
    {"flag", "char", 1, offsetof(struct rec, flag)},
    {"label", "char[7]", 1, offsetof(struct rec, label)},
    {"small", "integer", sizeof(short), offsetof(struct rec, small)},
    {"ratio", "float", sizeof(float), offsetof(struct rec, ratio)},
    {"vals", "double[4]", sizeof(double), offsetof(struct rec, vals)},
    {"big", "unsigned integer", 8, offsetof(struct rec, big)},
    {"pts", "point[2]", sizeof(struct point), offsetof(struct rec, pts)},
    {"name", "string", 0, offsetof(struct rec, name)},
    {"samples", "integer[]", 4, offsetof(struct rec, samples)},
};

/* ---- the receiver's layout: other order, other sizes, a field the
 * sender lacks (`missing`), nested fields reordered too ---- */
struct point_rx { short tag; float y; double x; };
struct rec_rx {
    gw_slice samples; /* int64_t[]: widened element by element */
    double vals[4];
    long long id;     /* widened */
    struct point_rx pts[2];
    gw_slice name;
    double ratio;     /* f32 -> f64 */
    double temp;
    int count;        /* narrowed: overflow is an error unless saturating */
    char label[7];
    char flag;
    short small;
    int missing;      /* not sent: zero */
};
static const gw_field point_rx_fields[] = {
    {"tag", "integer", sizeof(short), offsetof(struct point_rx, tag)},
    {"y", "float", sizeof(float), offsetof(struct point_rx, y)},
    {"x", "double", sizeof(double), offsetof(struct point_rx, x)},
};
static const gw_field rec_rx_fields[] = {
    {"samples", "integer[]", 8, offsetof(struct rec_rx, samples)},
    {"vals", "double[4]", sizeof(double), offsetof(struct rec_rx, vals)},
    {"id", "integer", 8, offsetof(struct rec_rx, id)},
    {"pts", "point_rx[2]", sizeof(struct point_rx), offsetof(struct rec_rx, pts)},
    {"name", "string", 0, offsetof(struct rec_rx, name)},
    {"ratio", "double", 8, offsetof(struct rec_rx, ratio)},
    {"temp", "double", 8, offsetof(struct rec_rx, temp)},
    {"count", "integer", sizeof(int), offsetof(struct rec_rx, count)},
    {"label", "char[7]", 1, offsetof(struct rec_rx, label)},
    {"flag", "char", 1, offsetof(struct rec_rx, flag)},
    {"small", "integer", sizeof(short), offsetof(struct rec_rx, small)},
    {"missing", "integer", sizeof(int), offsetof(struct rec_rx, missing)},
};

/* ---- a foreign writer: big-endian, 4-byte long, doubles 4-aligned, an
 * unexpected field first, fields in another order. Written by hand with
 * byte swaps, as that machine's memory would hold it. ---- */
#pragma pack(push, 4)
struct point_be { float y; double x; short tag; };
struct rec_be {
    unsigned int unexpected;
    double temp;
    int count; /* `long` on that machine */
    int id;
    short small;
    char flag;
    char label[7];
    float ratio;
    double vals[4];
    unsigned long long big;
    struct point_be pts[2];
};
#pragma pack(pop)
static const gw_field point_be_fields[] = {
    {"y", "float", 4, offsetof(struct point_be, y)},
    {"x", "float", 8, offsetof(struct point_be, x)},
    {"tag", "integer", 2, offsetof(struct point_be, tag)},
};
static const gw_field rec_be_fields[] = {
    {"unexpected", "unsigned integer", 4, offsetof(struct rec_be, unexpected)},
    {"temp", "double", 8, offsetof(struct rec_be, temp)},
    {"count", "integer", 4, offsetof(struct rec_be, count)},
    {"id", "integer", 4, offsetof(struct rec_be, id)},
    {"small", "integer", 2, offsetof(struct rec_be, small)},
    {"flag", "char", 1, offsetof(struct rec_be, flag)},
    {"label", "char[7]", 1, offsetof(struct rec_be, label)},
    {"ratio", "float", 4, offsetof(struct rec_be, ratio)},
    {"vals", "double[4]", 8, offsetof(struct rec_be, vals)},
    {"big", "unsigned integer", 8, offsetof(struct rec_be, big)},
    {"pts", "point_be[2]", sizeof(struct point_be), offsetof(struct rec_be, pts)},
};

static unsigned short be16(unsigned short v) { return __builtin_bswap16(v); }
static unsigned int be32(unsigned int v) { return __builtin_bswap32(v); }
static unsigned long long be64(unsigned long long v) { return __builtin_bswap64(v); }
static double bed(double d) {
    unsigned long long u;
    memcpy(&u, &d, 8);
    u = be64(u);
    memcpy(&d, &u, 8);
    return d;
}
static float bef(float f) {
    unsigned int u;
    memcpy(&u, &f, 4);
    u = be32(u);
    memcpy(&f, &u, 4);
    return f;
}

/* Send the iovecs through a pipe (as writev to a socket would) and read the
 * record back into `buf`; returns its length. */
static size_t through_pipe(const struct iovec *iov, size_t n, unsigned char *buf, size_t cap) {
    int fds[2];
    if (pipe(fds) != 0) return 0;
    ssize_t w = writev(fds[1], iov, (int)n);
    close(fds[1]);
    size_t got = 0;
    ssize_t r;
    while (got < cap && (r = read(fds[0], buf + got, cap - got)) > 0) got += (size_t)r;
    close(fds[0]);
    return w < 0 ? 0 : got;
}

static void check_rx(const struct rec_rx *o, const struct rec *s, int have_var) {
    CHECK(o->id == s->id);
    CHECK(o->count == (int)s->count);
    CHECK(o->temp == s->temp);
    CHECK(o->flag == s->flag);
    CHECK(memcmp(o->label, s->label, 7) == 0);
    CHECK(o->small == s->small);
    CHECK(o->ratio == (double)s->ratio);
    for (int i = 0; i < 4; i++) CHECK(o->vals[i] == s->vals[i]);
    for (int i = 0; i < 2; i++) {
        CHECK(o->pts[i].x == s->pts[i].x);
        CHECK(o->pts[i].y == s->pts[i].y);
        CHECK(o->pts[i].tag == s->pts[i].tag);
    }
    CHECK(o->missing == 0);
    if (have_var) {
        CHECK(o->name.len == s->name.len);
        CHECK(o->name.ptr && memcmp(o->name.ptr, s->name.ptr, s->name.len) == 0);
        CHECK(o->samples.len == s->samples.len);
        CHECK(((uintptr_t)o->samples.ptr % 8) == 0);
        const long long *got = o->samples.ptr;
        const int *want = s->samples.ptr;
        for (size_t i = 0; i < s->samples.len; i++) CHECK(got[i] == want[i]);
    } else {
        CHECK(o->name.ptr == NULL && o->name.len == 0);
        CHECK(o->samples.ptr == NULL && o->samples.len == 0);
    }
}

int main(void) {
    gw_registry *tx = NULL, *rx = NULL;
    const gw_format *fpoint, *frec, *fpoint_rx, *frec_rx, *fpoint_be, *frec_be;
    OK(gw_registry_new(&tx));
    OK(gw_registry_new(&rx));
    OK(gw_format_register(tx, "point", point_fields, 3, sizeof(struct point), 0, &fpoint));
    OK(gw_format_register(tx, "rec", rec_fields, 12, sizeof(struct rec), 0, &frec));
    OK(gw_format_register(rx, "point_rx", point_rx_fields, 3, sizeof(struct point_rx), 0,
                          &fpoint_rx));
    OK(gw_format_register(rx, "rec", rec_rx_fields, 12, sizeof(struct rec_rx), 0, &frec_rx));
    CHECK(gw_format_id(frec) != gw_format_id(frec_rx));
    CHECK(gw_format_size(frec) == sizeof(struct rec));

    /* The receiver learns the sender's format from its metadata. */
    unsigned char meta[4096];
    size_t mlen = 0;
    CHECK(gw_format_metadata(frec, meta, 4, &mlen) == GW_ERR_SPACE && mlen > 4);
    OK(gw_format_metadata(frec, meta, sizeof meta, &mlen));

    int samples[5] = {-7, 0, 1, INT_MAX, INT_MIN};
    const char *name = "sensor \"7\"";
    struct rec s;
    memset(&s, 0, sizeof s);
    s.id = -42;
    s.count = 123456;
    s.temp = 273.15;
    s.flag = 'q';
    memcpy(s.label, "abcdef", 7);
    s.small = -300;
    s.ratio = 0.25f;
    for (int i = 0; i < 4; i++) s.vals[i] = i * 1.5 - 2;
    s.big = 18446744073709551615ULL;
    s.pts[0] = (struct point){1.25, -2.5f, 3};
    s.pts[1] = (struct point){-8.0, 16.5f, -32};
    s.name = (gw_slice){name, strlen(name)};
    s.samples = (gw_slice){samples, 5};

    gw_encoder *enc = NULL;
    OK(gw_encoder_new(frec, &enc));
    struct iovec iov[16];
    size_t n = 0;
    CHECK(gw_encode(enc, &s, iov, 2, &n) == GW_ERR_SPACE && n > 2);
    OK(gw_encode(enc, &s, iov, 16, &n));
    CHECK(iov[0].iov_len == 24);
    unsigned char wire[8192] __attribute__((aligned(8)));
    size_t len = through_pipe(iov, n, wire, sizeof wire);
    CHECK(len > sizeof(struct rec));

    /* Unknown until the metadata arrives. */
    struct rec_rx o;
    long long tail[64];
    size_t tail_used = 0, used = 0;
    CHECK(gw_decode(rx, wire, len, frec_rx, &o, sizeof o, tail, sizeof tail, &tail_used, &used) ==
          GW_ERR_UNKNOWN_FORMAT);
    CHECK(strstr(gw_last_error(), "unknown format") != NULL);
    const gw_format *learned = NULL;
    OK(gw_registry_learn(rx, meta, mlen, &learned));
    CHECK(gw_format_id(learned) == gw_format_id(frec));

    /* Tail too small: the needed size is reported. */
    CHECK(gw_decode(rx, wire, len, frec_rx, &o, sizeof o, tail, 8, &tail_used, &used) ==
          GW_ERR_SPACE);
    CHECK(tail_used >= strlen(name) + 5 * 8);
    memset(&o, 0x55, sizeof o);
    OK(gw_decode(rx, wire, len, frec_rx, &o, sizeof o, tail, sizeof tail, &tail_used, &used));
    CHECK(used == len);
    check_rx(&o, &s, 1);
    /* Same layout: decodes into the sender's own struct too. */
    struct rec same;
    char tail2[256] __attribute__((aligned(8)));
    gw_registry_learn(rx, meta, mlen, NULL);
    OK(gw_decode(rx, wire, len, learned, &same, sizeof same, tail2, sizeof tail2, NULL, NULL));
    CHECK(same.id == s.id && same.count == s.count && same.big == s.big);
    CHECK(same.samples.len == 5 && ((const int *)same.samples.ptr)[3] == INT_MAX);

    /* Truncated and corrupted input are errors, never crashes. */
    for (size_t cut = 0; cut < len; cut += 7)
        CHECK(gw_decode(rx, wire, cut, frec_rx, &o, sizeof o, tail, sizeof tail, NULL, NULL) !=
              GW_OK);
    CHECK(gw_decode(rx, wire, len - 1, frec_rx, &o, sizeof o, tail, sizeof tail, NULL, NULL) ==
          GW_ERR_TRUNCATED);
    unsigned char bad[8192] __attribute__((aligned(8)));
    memcpy(bad, wire, len);
    /* the name slot's length word: now points past the tail */
    size_t name_len_at = 24 + offsetof(struct rec, name) + 8;
    bad[name_len_at + 3] = 0x7f;
    CHECK(gw_decode(rx, bad, len, frec_rx, &o, sizeof o, tail, sizeof tail, NULL, NULL) ==
          GW_ERR_INVALID);
    CHECK(gw_decode(rx, wire, len, frec_rx, &o, sizeof o - 1, tail, sizeof tail, NULL, NULL) ==
          GW_ERR_SPACE);
    CHECK(gw_decode(rx, wire, len, fpoint, &o, sizeof o, tail, sizeof tail, NULL, NULL) ==
          GW_ERR_USAGE); /* a format of another registry */

    /* Narrowing overflow: error by default, saturating on request. */
    s.count = 1LL << 40;
    OK(gw_encode_to_buffer(enc, &s, wire, sizeof wire, &len));
    CHECK(gw_decode(rx, wire, len, frec_rx, &o, sizeof o, tail, sizeof tail, NULL, NULL) ==
          GW_ERR_OVERFLOW);
    CHECK(strstr(gw_last_error(), "count") != NULL);
    OK(gw_registry_set_saturate(rx, 1));
    OK(gw_decode(rx, wire, len, frec_rx, &o, sizeof o, tail, sizeof tail, NULL, NULL));
    CHECK(o.count == INT_MAX);
    OK(gw_registry_set_saturate(rx, 0));
    s.count = 123456;

    /* Inspection without an expected layout. */
    OK(gw_encode_to_buffer(enc, &s, wire, sizeof wire, &len));
    const gw_format *seen = NULL;
    OK(gw_record_format(rx, wire, len, &seen));
    CHECK(seen == learned);
    CHECK(strcmp(gw_format_name(seen), "rec") == 0);
    CHECK(gw_format_nfields(seen) == 12);
    gw_field fl[12];
    for (size_t i = 0; i < 12; i++) OK(gw_format_field(seen, i, &fl[i]));
    CHECK(strcmp(fl[9].name, "pts") == 0 && strcmp(fl[9].type, "point[2]") == 0);
    CHECK(strcmp(fl[11].type, "integer[]") == 0 && fl[11].size == 4);
    CHECK(gw_format_field(seen, 12, &fl[0]) == GW_ERR_USAGE);
    gw_value v;
    OK(gw_record_get(rx, wire, len, "pts[1].x", &v));
    CHECK(v.kind == GW_FLOAT && v.f == -8.0);
    OK(gw_record_get(rx, wire, len, "pts[1].tag", &v));
    CHECK(v.kind == GW_INT && v.i == -32);
    OK(gw_record_get(rx, wire, len, "big", &v));
    CHECK(v.kind == GW_UINT && v.u == 18446744073709551615ULL);
    OK(gw_record_get(rx, wire, len, "name", &v));
    CHECK(v.kind == GW_STRING && strcmp(v.str, name) == 0);
    OK(gw_record_get(rx, wire, len, "samples", &v));
    CHECK(v.kind == GW_ARRAY && v.count == 5);
    OK(gw_record_get(rx, wire, len, "samples[4]", &v));
    CHECK(v.kind == GW_INT && v.i == INT_MIN);
    OK(gw_record_get(rx, wire, len, "label", &v));
    CHECK(v.kind == GW_STRING && strcmp(v.str, "abcdef") == 0);
    CHECK(gw_record_get(rx, wire, len, "pts[2].x", &v) == GW_ERR_USAGE);
    CHECK(gw_record_get(rx, wire, len, "nosuch", &v) == GW_ERR_USAGE);
    char json[4096];
    size_t jlen = 0;
    CHECK(gw_record_json(rx, wire, len, json, 10, &jlen) == GW_ERR_SPACE && jlen > 10);
    OK(gw_record_json(rx, wire, len, json, sizeof json, &jlen));
    CHECK(strlen(json) == jlen);
    CHECK(strstr(json, "\"format\": \"rec\"") != NULL);
    CHECK(strstr(json, "sensor \\\"7\\\"") != NULL);
    /* The field list a format reports registers the same layout again. */
    gw_registry *again = NULL;
    const gw_format *p2 = NULL, *r2 = NULL;
    OK(gw_registry_new(&again));
    gw_field pl[3];
    for (size_t i = 0; i < 3; i++) OK(gw_format_field(fpoint, i, &pl[i]));
    OK(gw_format_register(again, "point", pl, 3, sizeof(struct point), 0, &p2));
    OK(gw_format_register(again, "rec", fl, 12, sizeof(struct rec), 0, &r2));
    CHECK(gw_format_id(r2) == gw_format_id(frec));
    gw_registry_free(again);

    /* The foreign writer. */
    OK(gw_format_register(tx, "point_be", point_be_fields, 3, sizeof(struct point_be),
                          GW_BIG_ENDIAN | GW_PTR32, &fpoint_be));
    OK(gw_format_register(tx, "rec", rec_be_fields, 11, sizeof(struct rec_be),
                          GW_BIG_ENDIAN | GW_PTR32, &frec_be));
    CHECK(sizeof(struct rec_be) % 4 == 0 && offsetof(struct rec_be, temp) == 4);
    struct rec_be b;
    memset(&b, 0, sizeof b);
    b.unexpected = be32(0xdeadbeef);
    b.temp = bed(s.temp);
    b.count = (int)be32((unsigned)s.count);
    b.id = (int)be32((unsigned)s.id);
    b.small = (short)be16((unsigned short)s.small);
    b.flag = s.flag;
    memcpy(b.label, s.label, 7);
    b.ratio = bef(s.ratio);
    for (int i = 0; i < 4; i++) b.vals[i] = bed(s.vals[i]);
    b.big = be64(s.big);
    for (int i = 0; i < 2; i++) {
        b.pts[i].x = bed(s.pts[i].x);
        b.pts[i].y = bef(s.pts[i].y);
        b.pts[i].tag = (short)be16((unsigned short)s.pts[i].tag);
    }
    gw_encoder *enc_be = NULL;
    OK(gw_encoder_new(frec_be, &enc_be));
    OK(gw_encode(enc_be, &b, iov, 16, &n));
    CHECK(n == 2); /* header + the struct itself, no copy */
    CHECK(iov[1].iov_base == (void *)&b);
    len = through_pipe(iov, n, wire, sizeof wire);
    OK(gw_format_metadata(frec_be, meta, sizeof meta, &mlen));
    OK(gw_registry_learn(rx, meta, mlen, NULL));
    memset(&o, 0x55, sizeof o);
    OK(gw_decode(rx, wire, len, frec_rx, &o, sizeof o, tail, sizeof tail, &tail_used, NULL));
    check_rx(&o, &s, 0);
    CHECK(tail_used == 0);
    OK(gw_record_get(rx, wire, len, "unexpected", &v));
    CHECK(v.kind == GW_UINT && v.u == 0xdeadbeef);
    OK(gw_record_get(rx, wire, len, "pts[0].x", &v));
    CHECK(v.f == 1.25);
    /* The foreign writer cannot hand us pointers: var fields need our layout. */
    const gw_format *fbad = NULL;
    static const gw_field str_be[] = {{"s", "string", 0, 0}};
    OK(gw_format_register(tx, "s_be", str_be, 1, 8, GW_BIG_ENDIAN | GW_PTR32, &fbad));
    gw_encoder *enc_bad = NULL;
    OK(gw_encoder_new(fbad, &enc_bad));
    CHECK(gw_encode(enc_bad, &b, iov, 16, &n) == GW_ERR_USAGE);
    gw_encoder_free(enc_bad);

    /* Bad descriptions. */
    static const gw_field badf[] = {{"x", "integer", 3, 0}};
    CHECK(gw_format_register(tx, "bad", badf, 1, 8, 0, NULL) == GW_ERR_INVALID);
    CHECK(strstr(gw_last_error(), "integer size") != NULL);
    static const gw_field overlap[] = {{"x", "double", 8, 0}, {"y", "integer", 4, 4}};
    CHECK(gw_format_register(tx, "bad", overlap, 2, 16, 0, NULL) == GW_ERR_INVALID);
    static const gw_field unknown[] = {{"x", "nosuch", 8, 0}};
    CHECK(gw_format_register(tx, "bad", unknown, 1, 8, 0, NULL) == GW_ERR_INVALID);
    static const gw_field past[] = {{"x", "double[2]", 8, 0}};
    CHECK(gw_format_register(tx, "bad", past, 1, 8, 0, NULL) == GW_ERR_INVALID);
    CHECK(gw_format_register(tx, "bad", NULL, 1, 8, 0, NULL) == GW_ERR_USAGE);
    CHECK(gw_format_register(tx, "bad", past, 1, 8, 3, NULL) == GW_ERR_USAGE);
    CHECK(gw_registry_learn(rx, meta, mlen - 1, NULL) != GW_OK);

    gw_encoder_free(enc);
    gw_encoder_free(enc_be);
    gw_registry_free(tx);
    gw_registry_free(rx);
    printf("%d passed, %d failed\n", checks - failures, failures);
    return failures ? 1 : 0;
}
