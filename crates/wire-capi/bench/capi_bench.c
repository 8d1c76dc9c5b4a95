/* Records from C: gridwire.h's decode calls next to the Rust API, a
 * hand-written C receiver and memcpy, on the same records in one process
 * (run by crates/wire-capi/bench.sh, part of `make bench`).
 *
 * Records, as a C user would write them: a 96-byte mixed struct, a
 * 976-byte struct nesting ten of them, a 100 KB array. Senders: the same
 * layout, an extra field first, the fields in another order, a big-endian
 * machine, a 32-bit (i386) machine. The sender's formats reach the
 * receiver as metadata (gw_registry_learn), as they would over a network.
 *
 * Timing: this thread's CPU time; per round every runner of a row takes one
 * batch in turn (so all see the same machine), RUNS rounds (default 7);
 * each figure is the median over the rounds of ns per record.
 *
 * Runners: memcpy of the record; hand-written C (header check, then field
 * by field for exactly that pair of layouts); gw_decode (registry);
 * gw_decoder_decode (handle); gw_decode_in_place (zero-copy on the same
 * layout, else into the decoder's memory); Rust's Registry::decode_into
 * (decode_in_place on the same layout), driven through gw_bench_rust_run.
 * Built with -DBASELINE it times only what the old API had (gw_decode,
 * hand-written, memcpy), to measure a library from before the decoders. */
#define _GNU_SOURCE
#include "gridwire.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef BASELINE
typedef struct gw_decoder gw_decoder; /* not in the old header */
#else
typedef struct GwBenchRust GwBenchRust;
GwBenchRust *gw_bench_rust_new(const gw_format *wire, const gw_format *native);
void gw_bench_rust_free(GwBenchRust *b);
int gw_bench_rust_run(GwBenchRust *b, const void *buf, size_t len, uint64_t iters, int in_place);
#endif

#define DIE(...) (fprintf(stderr, "capi_bench: " __VA_ARGS__), fprintf(stderr, " (%s)\n", gw_last_error()), exit(1))
#define OK(call) do { if ((call) != GW_OK) DIE("%s failed", #call); } while (0)

/* ---------------- the records ---------------- */
struct mixed { int32_t id; long count; double temp; char flag; char label[15]; short small; float ratio; double vals[6]; };
struct mixed_extra { double unexpected; int32_t id; long count; double temp; char flag; char label[15]; short small; float ratio; double vals[6]; };
struct mixed_rev { double vals[6]; float ratio; short small; char label[15]; char flag; double temp; long count; int32_t id; };
#pragma pack(push, 4)
struct mixed_i386 { int32_t id; int32_t count; double temp; char flag; char label[15]; short small; float ratio; double vals[6]; };
#pragma pack(pop)

struct nested { int32_t n; double scale; struct mixed items[10]; };
struct nested_extra { double unexpected; int32_t n; double scale; struct mixed_extra items[10]; };
struct nested_rev { struct mixed_rev items[10]; double scale; int32_t n; };
#pragma pack(push, 4)
struct nested_i386 { int32_t n; double scale; struct mixed_i386 items[10]; };
#pragma pack(pop)

#define BIG 12800
struct big { long n; double data[BIG]; };
struct big_extra { double unexpected; long n; double data[BIG]; };
struct big_rev { double data[BIG]; long n; };
#pragma pack(push, 4)
struct big_i386 { int32_t n; double data[BIG]; };
#pragma pack(pop)

_Static_assert(sizeof(struct mixed) == 96, "mixed is 96 bytes");
_Static_assert(sizeof(struct nested) == 976, "nested is 976 bytes");

#define F(S, f, type, size) {#f, type, size, offsetof(struct S, f)}
#define MIXED(S, L) F(S, id, "integer", 4), F(S, count, "integer", L), F(S, temp, "double", 8), \
    F(S, flag, "char", 1), F(S, label, "char[15]", 1), F(S, small, "integer", 2),             \
    F(S, ratio, "float", 4), F(S, vals, "double[6]", 8)
static const gw_field mixed_f[] = {MIXED(mixed, 8)};
static const gw_field mixed_extra_f[] = {F(mixed_extra, unexpected, "double", 8), MIXED(mixed_extra, 8)};
static const gw_field mixed_rev_f[] = {MIXED(mixed_rev, 8)};
static const gw_field mixed_i386_f[] = {MIXED(mixed_i386, 4)};
#define NESTED(S, L, ITEM) F(S, n, "integer", 4), F(S, scale, "double", 8), F(S, items, "mixed[10]", ITEM)
static const gw_field nested_f[] = {NESTED(nested, 8, sizeof(struct mixed))};
static const gw_field nested_extra_f[] = {F(nested_extra, unexpected, "double", 8), NESTED(nested_extra, 8, sizeof(struct mixed_extra))};
static const gw_field nested_rev_f[] = {NESTED(nested_rev, 8, sizeof(struct mixed_rev))};
static const gw_field nested_i386_f[] = {NESTED(nested_i386, 4, sizeof(struct mixed_i386))};
#define BIGF(S, L) F(S, n, "integer", L), F(S, data, "double[12800]", 8)
static const gw_field big_f[] = {BIGF(big, 8)};
static const gw_field big_extra_f[] = {F(big_extra, unexpected, "double", 8), BIGF(big_extra, 8)};
static const gw_field big_rev_f[] = {BIGF(big_rev, 8)};
static const gw_field big_i386_f[] = {BIGF(big_i386, 4)};
#define N(a) (sizeof(a) / sizeof((a)[0]))

/* ---------------- hand-written receivers ---------------- */
/* What any receiver must do first: check the header it expects. */
static inline const void *payload(const unsigned char *b, size_t len, uint64_t id, uint32_t size) {
    uint64_t got;
    uint32_t fixed;
    memcpy(&got, b + 8, 8);
    memcpy(&fixed, b + 16, 4);
    if (len < 24 + (size_t)size || memcmp(b, "GWR\1", 4) != 0 || got != id || fixed != size) return NULL;
    return b + 24;
}
static inline double swap_d(double x) { uint64_t u; memcpy(&u, &x, 8); u = __builtin_bswap64(u); memcpy(&x, &u, 8); return x; }
static inline float swap_f(float x) { uint32_t u; memcpy(&u, &x, 4); u = __builtin_bswap32(u); memcpy(&x, &u, 4); return x; }

#define COPY_MIXED(d, s) do { (d)->id = (s)->id; (d)->count = (s)->count; (d)->temp = (s)->temp;   \
        (d)->flag = (s)->flag; memcpy((d)->label, (s)->label, 15); (d)->small = (s)->small;      \
        (d)->ratio = (s)->ratio; for (int k_ = 0; k_ < 6; k_++) (d)->vals[k_] = (s)->vals[k_]; } while (0)
static inline void swap_mixed(struct mixed *d, const struct mixed *s) {
    d->id = (int32_t)__builtin_bswap32((uint32_t)s->id);
    d->count = (long)__builtin_bswap64((uint64_t)s->count);
    d->temp = swap_d(s->temp);
    d->flag = s->flag;
    memcpy(d->label, s->label, 15);
    d->small = (short)__builtin_bswap16((uint16_t)s->small);
    d->ratio = swap_f(s->ratio);
    for (int k = 0; k < 6; k++) d->vals[k] = swap_d(s->vals[k]);
}

typedef int (*hand_fn)(const unsigned char *b, size_t len, uint64_t id, void *out);
#define HAND(name, SRC, DST, BODY)                                                   \
    static int name(const unsigned char *b, size_t len, uint64_t id, void *out) {    \
        const struct SRC *s = payload(b, len, id, sizeof(struct SRC));              \
        struct DST *d = out;                                                          \
        if (!s) return -1;                                                            \
        BODY;                                                                         \
        return 0;                                                                     \
    }
HAND(hand_mixed_same, mixed, mixed, memcpy(d, s, sizeof *d))
HAND(hand_mixed_extra, mixed_extra, mixed, COPY_MIXED(d, s))
HAND(hand_mixed_rev, mixed_rev, mixed, COPY_MIXED(d, s))
HAND(hand_mixed_be, mixed, mixed, swap_mixed(d, s))
HAND(hand_mixed_i386, mixed_i386, mixed, COPY_MIXED(d, s))
#define NEST_BODY(CONV) d->n = s->n; d->scale = s->scale; for (int i = 0; i < 10; i++) CONV(&d->items[i], &s->items[i])
#define COPY_MIXED_P(d, s) COPY_MIXED(d, s)
HAND(hand_nested_same, nested, nested, memcpy(d, s, sizeof *d))
HAND(hand_nested_extra, nested_extra, nested, NEST_BODY(COPY_MIXED_P))
HAND(hand_nested_rev, nested_rev, nested, NEST_BODY(COPY_MIXED_P))
HAND(hand_nested_be, nested, nested, d->n = (int32_t)__builtin_bswap32((uint32_t)s->n); d->scale = swap_d(s->scale);
     for (int i = 0; i < 10; i++) swap_mixed(&d->items[i], &s->items[i]))
HAND(hand_nested_i386, nested_i386, nested, NEST_BODY(COPY_MIXED_P))
HAND(hand_big_same, big, big, memcpy(d, s, sizeof *d))
HAND(hand_big_extra, big_extra, big, d->n = s->n; memcpy(d->data, s->data, sizeof d->data))
HAND(hand_big_rev, big_rev, big, d->n = s->n; memcpy(d->data, s->data, sizeof d->data))
HAND(hand_big_be, big, big, d->n = (long)__builtin_bswap64((uint64_t)s->n);
     for (int i = 0; i < BIG; i++) d->data[i] = swap_d(s->data[i]))
HAND(hand_big_i386, big_i386, big, d->n = s->n; memcpy(d->data, s->data, sizeof d->data))

/* ---------------- timing ---------------- */
static double cpu_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}
static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

enum { R_MEMCPY, R_HAND, R_DECODE, R_DECODER, R_INLINE, R_INPLACE, R_RUST, NRUN };
static const char *run_names[NRUN] = {"memcpy", "hand-written C", "gw_decode", "gw_decoder_decode", "gw_decoder_decode_inline", "gw_decode_in_place_inline", "Rust API"};

struct bench_case {
    const char *record, *sender;
    const unsigned char *framed;
    size_t len;
    uint64_t wire_id;
    size_t native_size;
    hand_fn hand;
    gw_registry *rx;
    const gw_format *native, *wire;
};

static void *out_buf, *copy_buf;
static int runs = 7;
#define MAXR 64

static double batch(int which, struct bench_case *c, uint64_t n, gw_decoder *dec, void *rust) {
    volatile int sink = 0;
    (void)dec; /* unused in a BASELINE build */
    (void)rust;
    double t0 = cpu_ns();
    switch (which) {
    case R_MEMCPY:
        for (uint64_t i = 0; i < n; i++) {
            memcpy(copy_buf, c->framed + 24, c->native_size);
            __asm__ volatile("" ::"r"(copy_buf) : "memory");
        }
        break;
    case R_HAND:
        for (uint64_t i = 0; i < n; i++) {
            sink += c->hand(c->framed, c->len, c->wire_id, out_buf);
            __asm__ volatile("" ::"r"(out_buf) : "memory");
        }
        break;
    case R_DECODE:
        for (uint64_t i = 0; i < n; i++)
            sink += gw_decode(c->rx, c->framed, c->len, c->native, out_buf, c->native_size, NULL, 0, NULL, NULL);
        break;
#ifndef BASELINE
    case R_DECODER:
        for (uint64_t i = 0; i < n; i++)
            sink += gw_decoder_decode(dec, c->framed, c->len, out_buf, c->native_size, NULL, 0, NULL, NULL);
        break;
    case R_INLINE:
        for (uint64_t i = 0; i < n; i++)
            sink += gw_decoder_decode_inline(dec, c->framed, c->len, out_buf, c->native_size, NULL, 0, NULL, NULL);
        break;
    case R_INPLACE:
        for (uint64_t i = 0; i < n; i++) {
            void *rec;
            sink += gw_decode_in_place_inline(dec, (void *)c->framed, c->len, &rec, NULL);
            __asm__ volatile("" ::"r"(rec) : "memory");
        }
        break;
    case R_RUST:
        sink += gw_bench_rust_run(rust, c->framed, c->len, n, c->wire_id == gw_format_id(c->native));
        break;
#endif
    }
    double t = cpu_ns() - t0;
    if (sink != 0) DIE("%s: %s failed on %s/%s", __func__, run_names[which], c->record, c->sender);
    return t;
}

static void bench(struct bench_case *c) {
    gw_decoder *dec = NULL;
    void *rust = NULL;
    int have[NRUN] = {1, 1, 1, 0, 0, 0, 0};
#ifndef BASELINE
    OK(gw_decoder_new(c->rx, c->native, &dec));
    rust = gw_bench_rust_new(c->wire, c->native);
    if (!rust) DIE("gw_bench_rust_new");
    have[R_DECODER] = have[R_INLINE] = have[R_INPLACE] = have[R_RUST] = 1;
#endif
    /* Correctness first: every runner must produce the hand-written result. */
    static unsigned char want[sizeof(struct big)];
    memset(want, 0, sizeof want);
    memset(out_buf, 0, c->native_size);
    if (c->hand(c->framed, c->len, c->wire_id, want) != 0) DIE("hand-written %s/%s", c->record, c->sender);
    OK(gw_decode(c->rx, c->framed, c->len, c->native, out_buf, c->native_size, NULL, 0, NULL, NULL));
    if (memcmp(out_buf, want, c->native_size) != 0) DIE("gw_decode differs from hand-written on %s/%s", c->record, c->sender);
#ifndef BASELINE
    memset(out_buf, 0xff, c->native_size);
    OK(gw_decoder_decode(dec, c->framed, c->len, out_buf, c->native_size, NULL, 0, NULL, NULL));
    if (memcmp(out_buf, want, c->native_size) != 0) DIE("gw_decoder_decode differs on %s/%s", c->record, c->sender);
    memset(out_buf, 0xff, c->native_size);
    OK(gw_decoder_decode_inline(dec, c->framed, c->len, out_buf, c->native_size, NULL, 0, NULL, NULL));
    if (memcmp(out_buf, want, c->native_size) != 0) DIE("gw_decoder_decode_inline differs on %s/%s", c->record, c->sender);
    void *rec = NULL;
    OK(gw_decode_in_place_inline(dec, (void *)c->framed, c->len, &rec, NULL));
    if (memcmp(rec, want, c->native_size) != 0) DIE("gw_decode_in_place differs on %s/%s", c->record, c->sender);
    if ((c->wire_id == gw_format_id(c->native)) != ((const unsigned char *)rec == c->framed + 24))
        DIE("gw_decode_in_place: zero-copy exactly on the same layout (%s/%s)", c->record, c->sender);
#endif
    /* Batch size: ~4 ms of the slowest runner. */
    uint64_t n = 1;
    for (;;) {
        double t = 0;
        for (int w = 0; w < NRUN; w++)
            if (have[w]) { double x = batch(w, c, n, dec, rust); if (x > t) t = x; }
        if (t > 4e6 || n > (1u << 26)) break;
        n *= 2;
    }
    double ns[NRUN][MAXR];
    for (int r = 0; r < runs; r++)
        for (int w = 0; w < NRUN; w++)
            if (have[w]) ns[w][r] = batch(w, c, n, dec, rust) / (double)n;
    double med[NRUN] = {0};
    for (int w = 0; w < NRUN; w++) {
        if (!have[w]) continue;
        qsort(ns[w], runs, sizeof(double), cmp_d);
        med[w] = ns[w][runs / 2];
    }
    /* | record | sender | memcpy | hand | gw_decode | decoder | in place | Rust | decoder × Rust | in place × Rust | decoder × hand | */
    printf("| %s | %s | %.1f | %.1f | %.1f |", c->record, c->sender, med[R_MEMCPY], med[R_HAND], med[R_DECODE]);
    if (have[R_RUST]) {
        int same = c->wire_id == gw_format_id(c->native);
        double best_c = same ? med[R_INPLACE] : med[R_INLINE];
        printf(" %.1f | %.1f | %.1f | %.1f | %.2f | %.2f | %.2f | %.2f |\n", med[R_DECODER], med[R_INLINE],
               med[R_INPLACE], med[R_RUST], best_c / med[R_RUST], med[R_DECODER] / med[R_RUST],
               med[R_DECODE] / med[R_RUST], best_c / med[R_HAND]);
    } else {
        printf(" %.2f |\n", med[R_DECODE] / med[R_HAND]);
    }
    fflush(stdout);
#ifndef BASELINE
    gw_decoder_free(dec);
    gw_bench_rust_free(rust);
#endif
}

/* ---------------- the senders' records ---------------- */
static void fill(struct nested *t, struct big *b) {
    t->n = 10;
    t->scale = 0.25;
    for (int i = 0; i < 10; i++) {
        struct mixed *m = &t->items[i];
        memset(m, 0, sizeof *m);
        m->id = 1000 + i;
        m->count = -1234567L * (i + 1); /* fits the 32-bit sender's long */
        m->temp = 21.5 + i;
        m->flag = 'y';
        memcpy(m->label, "hello world", 11);
        m->small = (short)(-300 + i);
        m->ratio = 0.125f * i;
        for (int k = 0; k < 6; k++) m->vals[k] = k * 1.5 + i;
    }
    b->n = 5;
    for (int i = 0; i < BIG; i++) b->data[i] = i * 0.5;
}

/* Frame `rec` (native layout) as a record of the sender's format: convert
 * it to the sender's layout in the sender's registry, encode it there, and
 * teach the receiver the sender's format through its metadata. */
static void make_case(struct bench_case *c, gw_registry *tx, const gw_format *tx_native, const gw_format *tx_wire,
                      const void *rec, gw_registry *rx, const gw_format *rx_native) {
    size_t wsize = gw_format_size(tx_wire), nsize = gw_format_size(tx_native), len = 0, mlen = 0;
    unsigned char *native_framed = malloc(nsize + 64), *sender_rec = malloc(wsize);
    gw_encoder *enc;
    OK(gw_encoder_new(tx_native, &enc));
    OK(gw_encode_to_buffer(enc, rec, native_framed, nsize + 64, &len));
    gw_encoder_free(enc);
    OK(gw_decode(tx, native_framed, len, tx_wire, sender_rec, wsize, NULL, 0, NULL, NULL));
    /* 8-aligned, as a receive buffer would be: the payload then is too. */
    unsigned char *framed = aligned_alloc(64, (wsize + 24 + 63) / 64 * 64);
    OK(gw_encoder_new(tx_wire, &enc));
    OK(gw_encode_to_buffer(enc, sender_rec, framed, wsize + 24, &len));
    gw_encoder_free(enc);
    unsigned char meta[4096];
    OK(gw_format_metadata(tx_wire, meta, sizeof meta, &mlen));
    OK(gw_registry_learn(rx, meta, mlen, &c->wire));
    c->framed = framed;
    c->len = len;
    c->wire_id = gw_format_id(tx_wire);
    c->native = rx_native;
    c->native_size = gw_format_size(rx_native);
    c->rx = rx;
    free(native_framed);
    free(sender_rec);
}

struct sender {
    const char *name;
    unsigned flags;
    const gw_field *m, *t, *b;
    size_t nm, nt, nb, sm, st, sb;
    hand_fn hm, ht, hb;
};

int main(int argc, char **argv) {
    const char *only = argc > 1 ? argv[1] : NULL;
    if (getenv("RUNS")) runs = atoi(getenv("RUNS"));
    if (runs < 1) runs = 1;
    if (runs > MAXR) runs = MAXR;
    out_buf = aligned_alloc(64, sizeof(struct big) + 64);
    copy_buf = aligned_alloc(64, sizeof(struct big) + 64);
    static struct nested ten;
    static struct big big;
    fill(&ten, &big);

    gw_registry *rx;
    const gw_format *rm, *rt, *rb;
    OK(gw_registry_new(&rx));
    OK(gw_format_register(rx, "mixed", mixed_f, N(mixed_f), sizeof(struct mixed), 0, &rm));
    OK(gw_format_register(rx, "nested", nested_f, N(nested_f), sizeof(struct nested), 0, &rt));
    OK(gw_format_register(rx, "big", big_f, N(big_f), sizeof(struct big), 0, &rb));

    const struct sender senders[] = {
        {"same layout", 0, mixed_f, nested_f, big_f, N(mixed_f), N(nested_f), N(big_f), sizeof(struct mixed),
         sizeof(struct nested), sizeof(struct big), hand_mixed_same, hand_nested_same, hand_big_same},
        {"extra field first", 0, mixed_extra_f, nested_extra_f, big_extra_f, N(mixed_extra_f), N(nested_extra_f),
         N(big_extra_f), sizeof(struct mixed_extra), sizeof(struct nested_extra), sizeof(struct big_extra),
         hand_mixed_extra, hand_nested_extra, hand_big_extra},
        {"fields reordered", 0, mixed_rev_f, nested_rev_f, big_rev_f, N(mixed_rev_f), N(nested_rev_f), N(big_rev_f),
         sizeof(struct mixed_rev), sizeof(struct nested_rev), sizeof(struct big_rev), hand_mixed_rev,
         hand_nested_rev, hand_big_rev},
        {"big-endian sender", GW_BIG_ENDIAN, mixed_f, nested_f, big_f, N(mixed_f), N(nested_f), N(big_f),
         sizeof(struct mixed), sizeof(struct nested), sizeof(struct big), hand_mixed_be, hand_nested_be, hand_big_be},
        {"32-bit sender (i386)", GW_PTR32, mixed_i386_f, nested_i386_f, big_i386_f, N(mixed_i386_f),
         N(nested_i386_f), N(big_i386_f), sizeof(struct mixed_i386), sizeof(struct nested_i386),
         sizeof(struct big_i386), hand_mixed_i386, hand_nested_i386, hand_big_i386},
    };
#ifdef BASELINE
    printf("| record | sender | memcpy ns | hand-written C ns | gw_decode ns | gw_decode × hand |\n");
    printf("| --- | --- | ---: | ---: | ---: | ---: |\n");
#else
    printf("| record | sender | memcpy ns | hand-written C ns | gw_decode ns | gw_decoder_decode ns "
           "| gw_decoder_decode_inline ns | gw_decode_in_place_inline ns | Rust API ns | C × Rust "
           "| gw_decoder_decode × Rust | gw_decode × Rust | C × hand |\n");
    printf("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
#endif
    const char *records[3] = {"mixed (96 B)", "nested (976 B)", "f64[12800] (100 KB)"};
    for (int ri = 0; ri < 3; ri++) {
        if (only && !strstr(records[ri], only)) continue;
        for (size_t si = 0; si < N(senders); si++) {
            const struct sender *s = &senders[si];
            gw_registry *tx;
            const gw_format *tm, *tt, *tb, *wm, *wt, *wb;
            OK(gw_registry_new(&tx));
            OK(gw_format_register(tx, "mixed", mixed_f, N(mixed_f), sizeof(struct mixed), 0, &tm));
            OK(gw_format_register(tx, "nested", nested_f, N(nested_f), sizeof(struct nested), 0, &tt));
            OK(gw_format_register(tx, "big", big_f, N(big_f), sizeof(struct big), 0, &tb));
            /* The sender's own names: its nested struct refers to its mixed. */
            OK(gw_format_register(tx, "mixed", s->m, s->nm, s->sm, s->flags, &wm));
            OK(gw_format_register(tx, "nested", s->t, s->nt, s->st, s->flags, &wt));
            OK(gw_format_register(tx, "big", s->b, s->nb, s->sb, s->flags, &wb));
            struct bench_case c;
            memset(&c, 0, sizeof c);
            c.record = records[ri];
            c.sender = s->name;
            if (ri == 0) { c.hand = s->hm; make_case(&c, tx, tm, wm, &ten.items[0], rx, rm); }
            if (ri == 1) { c.hand = s->ht; make_case(&c, tx, tt, wt, &ten, rx, rt); }
            if (ri == 2) { c.hand = s->hb; make_case(&c, tx, tb, wb, &big, rx, rb); }
            bench(&c);
            free((void *)c.framed);
            gw_registry_free(tx);
        }
    }
    gw_registry_free(rx);
    return 0;
}
