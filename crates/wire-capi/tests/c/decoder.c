/* gw_decoder, gw_decode_in_place and their inline fast paths (run by
 * crates/wire-capi/tests/extra.sh, with and without the JIT): conversions
 * from foreign senders, zero-copy in place (variable fields too), the
 * remembered pair switching between senders, the policy generation, and
 * hostile input — every truncation and forged header or slot of a record
 * must give an error status, never a crash, and leave an in-place buffer
 * as it was. Built with AddressSanitizer where available: every record
 * sits in an allocation of exactly its size. */
#include "gridwire.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0, checks = 0;
#define CHECK(c)                                                                          \
    do {                                                                                  \
        checks++;                                                                         \
        if (!(c)) {                                                                       \
            failures++;                                                                   \
            fprintf(stderr, "%s:%d: CHECK failed: %s (last error: %s)\n", __FILE__,       \
                    __LINE__, #c, gw_last_error());                                       \
        }                                                                                 \
    } while (0)
#define OK(call) CHECK((call) == GW_OK)

/* The receiver's struct. */
struct rx { int32_t id; long count; double temp; char label[6]; short small; float vals[3]; };
#define F(S, f, t, n) {#f, t, n, offsetof(struct S, f)}
static const gw_field rx_f[] = {F(rx, id, "integer", 4), F(rx, count, "integer", sizeof(long)),
                                F(rx, temp, "double", 8), F(rx, label, "char[6]", 1),
                                F(rx, small, "integer", 2), F(rx, vals, "float[3]", 4)};
/* Senders: fields reordered with an extra one; a 32-bit machine. */
struct rev { float vals[3]; double extra; short small; char label[6]; double temp; long count; int32_t id; };
static const gw_field rev_f[] = {F(rev, vals, "float[3]", 4), F(rev, extra, "double", 8),
                                 F(rev, small, "integer", 2), F(rev, label, "char[6]", 1),
                                 F(rev, temp, "double", 8), F(rev, count, "integer", sizeof(long)),
                                 F(rev, id, "integer", 4)};
#pragma pack(push, 4)
struct i386 { int32_t id; int32_t count; double temp; char label[6]; short small; float vals[3]; };
#pragma pack(pop)
static const gw_field i386_f[] = {F(i386, id, "integer", 4), F(i386, count, "integer", 4),
                                  F(i386, temp, "double", 8), F(i386, label, "char[6]", 1),
                                  F(i386, small, "integer", 2), F(i386, vals, "float[3]", 4)};
/* With variable-length fields, for in place. */
struct var { int32_t id; gw_slice name; gw_slice samples; double temp; };
static const gw_field var_f[] = {F(var, id, "integer", 4), F(var, name, "string", 0),
                                 F(var, samples, "integer[]", 4), F(var, temp, "double", 8)};
#define N(a) (sizeof(a) / sizeof((a)[0]))

static const struct rx want = {7, -1234567, 21.5, "hello", -300, {0.5f, 1.5f, 2.5f}};

/* A framed record of `fmt` from struct bytes, in a malloc of exactly its size. */
static unsigned char *frame(const gw_format *fmt, const void *rec, size_t *len) {
    gw_encoder *enc;
    size_t n = 0;
    OK(gw_encoder_new(fmt, &enc));
    CHECK(gw_encode_to_buffer(enc, rec, NULL, 0, &n) == GW_ERR_SPACE);
    unsigned char *b = malloc(n);
    OK(gw_encode_to_buffer(enc, rec, b, n, len));
    gw_encoder_free(enc);
    return b;
}

/* Teach `rx` the format `fmt` of another registry, through its metadata. */
static const gw_format *teach(gw_registry *rx, const gw_format *fmt) {
    unsigned char meta[2048];
    size_t n = 0;
    const gw_format *out = NULL;
    OK(gw_format_metadata(fmt, meta, sizeof meta, &n));
    OK(gw_registry_learn(rx, meta, n, &out));
    return out;
}

static int same_rx(const struct rx *a, const struct rx *b) {
    return a->id == b->id && a->count == b->count && a->temp == b->temp &&
           memcmp(a->label, b->label, 6) == 0 && a->small == b->small &&
           memcmp(a->vals, b->vals, sizeof a->vals) == 0;
}

/* Every decode entry point on one record must give `st`; on GW_OK the
 * struct must equal `want`. */
static void all_decodes(gw_registry *reg, gw_decoder *dec, const gw_format *native,
                        const unsigned char *b, size_t len, int st, const char *what) {
    struct rx out;
    size_t used = 0;
    int r[5];
    memset(&out, 0x55, sizeof out);
    r[0] = gw_decode(reg, b, len, native, &out, sizeof out, NULL, 0, NULL, &used);
    if (r[0] == GW_OK) CHECK(same_rx(&out, &want) && used == len);
    memset(&out, 0x55, sizeof out);
    r[1] = gw_decoder_decode(dec, b, len, &out, sizeof out, NULL, 0, NULL, &used);
    if (r[1] == GW_OK) CHECK(same_rx(&out, &want) && used == len);
    memset(&out, 0x55, sizeof out);
    r[2] = gw_decoder_decode_inline(dec, b, len, &out, sizeof out, NULL, 0, NULL, &used);
    if (r[2] == GW_OK) CHECK(same_rx(&out, &want) && used == len);
    /* In place may write the buffer (slots): work on a copy of exactly len. */
    unsigned char *c = malloc(len ? len : 1);
    memcpy(c, b, len);
    void *p = NULL;
    r[3] = gw_decode_in_place(dec, c, len, &p, &used);
    if (r[3] == GW_OK) CHECK(same_rx((const struct rx *)p, &want));
    else CHECK(memcmp(c, b, len) == 0);
    memcpy(c, b, len);
    r[4] = gw_decode_in_place_inline(dec, c, len, &p, &used);
    if (r[4] == GW_OK) CHECK(same_rx((const struct rx *)p, &want));
    else CHECK(memcmp(c, b, len) == 0);
    free(c);
    for (int i = 0; i < 5; i++) {
        if (r[i] != st) {
            failures++;
            fprintf(stderr, "%s: entry point %d gave %d, want %d (%s)\n", what, i, r[i], st,
                    gw_last_error());
        }
        checks++;
    }
}

static void conversions(void) {
    gw_registry *rx, *tx;
    const gw_format *native, *t_native, *t_rev, *t_i386, *w_rev, *w_i386;
    OK(gw_registry_new(&rx));
    OK(gw_registry_new(&tx));
    OK(gw_format_register(rx, "rec", rx_f, N(rx_f), sizeof(struct rx), 0, &native));
    OK(gw_format_register(tx, "rec", rx_f, N(rx_f), sizeof(struct rx), 0, &t_native));
    OK(gw_format_register(tx, "rec", rev_f, N(rev_f), sizeof(struct rev), 0, &t_rev));
    OK(gw_format_register(tx, "rec", i386_f, N(i386_f), sizeof(struct i386), GW_PTR32, &t_i386));
    w_rev = teach(rx, t_rev);
    w_i386 = teach(rx, t_i386);
    CHECK(gw_format_id(w_rev) == gw_format_id(t_rev) && gw_format_id(w_i386) == gw_format_id(t_i386));

    struct rev r = {{0.5f, 1.5f, 2.5f}, 99.0, -300, "hello", 21.5, -1234567, 7};
    struct i386 s = {7, -1234567, 21.5, "hello", -300, {0.5f, 1.5f, 2.5f}};
    size_t lr, ls, ln;
    unsigned char *br = frame(t_rev, &r, &lr), *bs = frame(t_i386, &s, &ls);
    unsigned char *bn = frame(t_native, &want, &ln);

    gw_decoder *dec;
    CHECK(gw_decoder_new(rx, NULL, &dec) == GW_ERR_USAGE);
    CHECK(gw_decoder_new(rx, t_native, &dec) == GW_ERR_USAGE); /* another registry's format */
    CHECK(strstr(gw_last_error(), "registry") != NULL);
    OK(gw_decoder_new(rx, native, &dec));

    /* With the JIT, the inline path must really be taken for a plain
     * conversion (the suite sets GW_EXPECT_JIT when it built the JIT). */
    {
        struct rx o;
        OK(gw_decoder_decode(dec, br, lr, &o, sizeof o, NULL, 0, NULL, NULL));
        const struct gw_decoder_head *h = (const struct gw_decoder_head *)dec;
        CHECK(h->ready == 1 && h->wire_id == gw_format_id(t_rev));
        const char *e = getenv("GW_EXPECT_JIT");
        if (e && *e) CHECK(h->code != NULL);
    }
    /* Alternating senders: the remembered pair follows, results stay right. */
    for (int i = 0; i < 6; i++) {
        all_decodes(rx, dec, native, br, lr, GW_OK, "reordered sender");
        all_decodes(rx, dec, native, bs, ls, GW_OK, "32-bit sender");
        all_decodes(rx, dec, native, bn, ln, GW_OK, "same layout");
    }

    /* In place: zero-copy exactly for the native layout. */
    void *p = NULL;
    unsigned char *c = malloc(ln);
    memcpy(c, bn, ln);
    OK(gw_decode_in_place(dec, c, ln, &p, NULL));
    CHECK(p == c + 24);
    OK(gw_decode_in_place_inline(dec, c, ln, &p, NULL));
    CHECK(p == c + 24);
    OK(gw_decode_in_place(dec, br, lr, &p, NULL));
    CHECK((unsigned char *)p < br || (unsigned char *)p >= br + lr);
    CHECK(same_rx(p, &want));
    /* A misaligned payload is refused (the struct holds doubles). */
    unsigned char *m = malloc(ln + 1);
    memcpy(m + 1, bn, ln);
    CHECK(gw_decode_in_place(dec, m + 1, ln, &p, NULL) == GW_ERR_USAGE);
    CHECK(strstr(gw_last_error(), "aligned") != NULL);
    CHECK(gw_decode_in_place_inline(dec, m + 1, ln, &p, NULL) == GW_ERR_USAGE);
    /* ... but decoding it by copy works. */
    struct rx out;
    OK(gw_decoder_decode_inline(dec, m + 1, ln, &out, sizeof out, NULL, 0, NULL, NULL));
    CHECK(same_rx(&out, &want));
    free(m);

    /* Output checks: short, NULL, overlapping the record. */
    CHECK(gw_decoder_decode(dec, br, lr, &out, sizeof out - 1, NULL, 0, NULL, NULL) == GW_ERR_SPACE);
    CHECK(gw_decoder_decode_inline(dec, br, lr, &out, sizeof out - 1, NULL, 0, NULL, NULL) == GW_ERR_SPACE);
    CHECK(gw_decoder_decode_inline(dec, br, lr, NULL, sizeof out, NULL, 0, NULL, NULL) == GW_ERR_USAGE);
    unsigned char *ov = malloc(lr + sizeof(struct rx));
    memcpy(ov, br, lr);
    CHECK(gw_decoder_decode(dec, ov, lr, ov + 8, sizeof(struct rx), NULL, 0, NULL, NULL) == GW_ERR_USAGE);
    CHECK(strstr(gw_last_error(), "overlaps") != NULL);
    free(ov);
    CHECK(gw_decoder_decode(NULL, br, lr, &out, sizeof out, NULL, 0, NULL, NULL) == GW_ERR_USAGE);
    CHECK(gw_decoder_decode_inline(NULL, br, lr, &out, sizeof out, NULL, 0, NULL, NULL) == GW_ERR_USAGE);
    CHECK(gw_decode_in_place(dec, c, ln, NULL, NULL) == GW_ERR_USAGE);
    CHECK(gw_decode_in_place_inline(dec, NULL, ln, &p, NULL) == GW_ERR_USAGE);

    /* The message is that of the last FAILED call: a success keeps it. */
    CHECK(gw_decoder_decode(dec, br, 3, &out, sizeof out, NULL, 0, NULL, NULL) == GW_ERR_TRUNCATED);
    char msg[256];
    snprintf(msg, sizeof msg, "%s", gw_last_error());
    OK(gw_decoder_decode(dec, br, lr, &out, sizeof out, NULL, 0, NULL, NULL));
    CHECK(strcmp(msg, gw_last_error()) == 0 && msg[0] != 0);

    /* Hostile: every truncation, then forged headers. */
    for (size_t k = 0; k < lr; k++) {
        unsigned char *t = malloc(k ? k : 1);
        memcpy(t, br, k);
        all_decodes(rx, dec, native, t, k, GW_ERR_TRUNCATED, "truncated");
        free(t);
    }
    unsigned char *f = malloc(lr);
    struct { size_t at; unsigned char v; int st; } forge[] = {
        {0, 'X', GW_ERR_INVALID},         /* magic */
        {4, 1, GW_ERR_INVALID},           /* reserved word */
        {8, 0x5a, GW_ERR_UNKNOWN_FORMAT}, /* id */
        {17, 1, GW_ERR_TRUNCATED},        /* fixed length: more than the buffer */
        {19, 0x80, GW_ERR_LIMIT},         /* fixed length beyond the limit */
        {20, 1, GW_ERR_TRUNCATED},        /* a variable tail that is not there */
        {23, 0xff, GW_ERR_LIMIT},         /* a huge one */
    };
    for (size_t i = 0; i < N(forge); i++) {
        memcpy(f, br, lr);
        f[forge[i].at] ^= forge[i].v;
        all_decodes(rx, dec, native, f, lr, forge[i].st, "forged header");
    }
    /* A shorter fixed length that still fits: the plan's size is checked. */
    memcpy(f, br, lr);
    f[16] -= 8;
    all_decodes(rx, dec, native, f, lr, GW_ERR_INVALID, "fixed length below the format's");
    /* Random byte flips anywhere: any status, never a crash; a success is
     * only possible with the header intact (payload flips). */
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < 3000; i++) {
        memcpy(f, br, lr);
        for (int j = 0; j < 1 + i % 4; j++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            f[(seed >> 33) % lr] ^= (unsigned char)(seed >> 20) | 1;
        }
        struct rx o;
        void *q;
        int a = gw_decoder_decode_inline(dec, f, lr, &o, sizeof o, NULL, 0, NULL, NULL);
        int b2 = gw_decode(rx, f, lr, native, &o, sizeof o, NULL, 0, NULL, NULL);
        CHECK(a == b2);
        int d = gw_decode_in_place_inline(dec, f, lr, &q, NULL);
        CHECK(d <= 0 && d >= GW_ERR_INTERNAL && d != GW_ERR_INTERNAL);
        if (a == GW_OK) CHECK(memcmp(f, br, 24) == 0);
    }
    free(f);

    free(c);
    free(br);
    free(bs);
    free(bn);
    gw_decoder_free(dec);
    gw_decoder_free(NULL);
    gw_registry_free(tx);
    gw_registry_free(rx);
}

/* A narrowing sender: the overflow policy is part of the plan, and a
 * decoder that remembered the pair must follow a policy change. */
struct wide { long long v; };
struct narrow { short v; };
static void policy(void) {
    gw_registry *rx, *tx;
    const gw_format *n, *w, *ww;
    static const gw_field wide_f[] = {F(wide, v, "integer", 8)};
    static const gw_field narrow_f[] = {F(narrow, v, "integer", 2)};
    OK(gw_registry_new(&rx));
    OK(gw_registry_new(&tx));
    OK(gw_format_register(rx, "v", narrow_f, 1, sizeof(struct narrow), 0, &n));
    OK(gw_format_register(tx, "v", wide_f, 1, sizeof(struct wide), 0, &w));
    ww = teach(rx, w);
    (void)ww;
    struct wide small = {1234}, big = {100000};
    size_t l1, l2;
    unsigned char *b1 = frame(w, &small, &l1), *b2 = frame(w, &big, &l2);
    gw_decoder *dec;
    OK(gw_decoder_new(rx, n, &dec));
    struct narrow o = {0};
    OK(gw_decoder_decode_inline(dec, b1, l1, &o, sizeof o, NULL, 0, NULL, NULL));
    CHECK(o.v == 1234);
    CHECK(gw_decoder_decode_inline(dec, b2, l2, &o, sizeof o, NULL, 0, NULL, NULL) == GW_ERR_OVERFLOW);
    OK(gw_registry_set_saturate(rx, 1));
    OK(gw_decoder_decode_inline(dec, b2, l2, &o, sizeof o, NULL, 0, NULL, NULL));
    CHECK(o.v == 32767);
    OK(gw_decoder_decode(dec, b1, l1, &o, sizeof o, NULL, 0, NULL, NULL));
    CHECK(o.v == 1234);
    free(b1);
    free(b2);
    gw_decoder_free(dec);
    gw_registry_free(tx);
    gw_registry_free(rx);
}

/* In place with variable-length fields: the slots become pointers into
 * the buffer; lying slots are refused and leave the buffer untouched. */
static void variable(void) {
    gw_registry *reg;
    const gw_format *fmt;
    OK(gw_registry_new(&reg));
    OK(gw_format_register(reg, "var", var_f, N(var_f), sizeof(struct var), 0, &fmt));
    int32_t samples[5] = {1, -2, 3, -4, 5};
    struct var v = {42, {"grid", 4}, {samples, 5}, 2.5};
    size_t len;
    unsigned char *b = frame(fmt, &v, &len);
    gw_decoder *dec;
    OK(gw_decoder_new(reg, fmt, &dec));
    unsigned char *c = malloc(len);
    memcpy(c, b, len);
    void *p = NULL;
    size_t used = 0;
    OK(gw_decode_in_place_inline(dec, c, len, &p, &used));
    CHECK(p == c + 24 && used == len);
    const struct var *r = p;
    CHECK(r->id == 42 && r->temp == 2.5);
    CHECK(r->name.len == 4 && memcmp(r->name.ptr, "grid", 4) == 0);
    CHECK((const unsigned char *)r->name.ptr > c && (const unsigned char *)r->name.ptr < c + len);
    CHECK(r->samples.len == 5 && memcmp(r->samples.ptr, samples, sizeof samples) == 0);
    CHECK(((uintptr_t)r->samples.ptr & 3) == 0);
    /* Decoded once: the rewritten buffer is no longer a valid record. */
    CHECK(gw_decode_in_place(dec, c, len, &p, NULL) == GW_ERR_INVALID);
    /* By copy, the tail goes to the caller's tail buffer. */
    struct var o;
    char tail[64];
    size_t tu = 0;
    OK(gw_decoder_decode_inline(dec, b, len, &o, sizeof o, tail, sizeof tail, &tu, NULL));
    CHECK(tu > 0 && o.samples.len == 5 && memcmp(o.samples.ptr, samples, sizeof samples) == 0);
    CHECK(gw_decoder_decode(dec, b, len, &o, sizeof o, tail, 3, &tu, NULL) == GW_ERR_SPACE);
    /* Forged slots: offset and length pointing outside the tail. */
    size_t slot = 24 + offsetof(struct var, samples);
    for (int k = 0; k < 4; k++) {
        memcpy(c, b, len);
        uint64_t x = k == 0 ? 0 : k == 1 ? len : k == 2 ? (uint64_t)-8 : 3; /* offset */
        uint64_t n = k == 3 ? 5 : 1u << 30;                                 /* count */
        memcpy(c + slot, &x, 8);
        memcpy(c + slot + 8, &n, 8);
        unsigned char *keep = malloc(len);
        memcpy(keep, c, len);
        CHECK(gw_decode_in_place_inline(dec, c, len, &p, NULL) == GW_ERR_INVALID);
        CHECK(memcmp(keep, c, len) == 0);
        CHECK(gw_decoder_decode(dec, c, len, &o, sizeof o, tail, sizeof tail, NULL, NULL) == GW_ERR_INVALID);
        free(keep);
    }
    /* Every truncation. */
    for (size_t k = 0; k < len; k++) {
        unsigned char *t = malloc(k ? k : 1);
        memcpy(t, b, k);
        CHECK(gw_decode_in_place_inline(dec, t, k, &p, NULL) < 0);
        CHECK(gw_decoder_decode_inline(dec, t, k, &o, sizeof o, tail, sizeof tail, NULL, NULL) < 0);
        free(t);
    }
    free(c);
    free(b);
    gw_decoder_free(dec);
    gw_registry_free(reg);
}

int main(void) {
    conversions();
    policy();
    variable();
    printf("%d passed, %d failed\n", checks - failures, failures);
    return failures != 0;
}
