/*
 * gridwire.h — C API of gridwire's self-describing records (crate
 * gridwire-wire-capi; link with -lgridwire_wire_capi -lpthread -ldl -lm).
 *
 * A sender ships its struct's bytes as they are, tagged with a format id (a
 * content hash of the layout); a receiver names the layout it wants and gets
 * its own struct back, converted field by field *by name* when the layouts
 * differ (byte order, sizes, alignment, order, extra or missing fields).
 *
 * Formats are described like PBIO/FFS field lists:
 *
 *     static const gw_field point_fields[] = {
 *         {"x",   "double",  sizeof(double), offsetof(struct point, x)},
 *         {"tag", "integer", sizeof(short),  offsetof(struct point, tag)},
 *     };
 *     gw_format_register(reg, "point", point_fields, 2, sizeof(struct point), 0, &fmt);
 *
 * Type names: "integer" (signed), "unsigned integer" (or "unsigned"),
 * "float" (size 4 or 8), "double", "char", "boolean", "string", or the name
 * of a format registered earlier in the same registry (a nested struct).
 * Suffixes: "T[N]" is a fixed array of N elements (may repeat: "T[2][3]"),
 * "T[]" a variable-length array. `size` is the size of ONE element (as in
 * FFS); it is ignored for "string".
 * Variable-length fields ("string", "T[]") occupy a gw_slice in the struct:
 * a pointer and a count (bytes for strings, elements for arrays).
 *
 * Errors: every function returns GW_OK (0) or a negative gw_status; the
 * message of the calling thread's last failed call is returned by
 * gw_last_error() (a successful call leaves it as it was). No function
 * aborts or unwinds on bad input. A registry (and everything that
 * hangs off it) must not be used by two threads at once.
 */
#ifndef GRIDWIRE_H
#define GRIDWIRE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h> /* memcpy, in the inline fast paths */
#include <sys/uio.h> /* struct iovec */

#ifdef __cplusplus
extern "C" {
#endif

typedef enum gw_status {
    GW_OK = 0,
    GW_ERR_USAGE = -1,          /* bad arguments (NULL pointer, wrong format, ...) */
    GW_ERR_TRUNCATED = -2,      /* input ended early */
    GW_ERR_INVALID = -3,        /* malformed record, metadata or format description */
    GW_ERR_UNKNOWN_FORMAT = -4, /* record of a format id this registry has not learned */
    GW_ERR_MISMATCH = -5,       /* a field of the same name has an unconvertible type */
    GW_ERR_OVERFLOW = -6,       /* narrowing conversion lost a value (policy: error) */
    GW_ERR_LIMIT = -7,          /* a size limit was exceeded */
    GW_ERR_SPACE = -8,          /* caller buffer too small; the needed size is reported */
    GW_ERR_INTERNAL = -9        /* a bug in gridwire (caught, never unwound into C) */
} gw_status;

/* One field of a C struct: name, type name, element size, byte offset. */
typedef struct gw_field {
    const char *name;
    const char *type;
    size_t size;
    size_t offset;
} gw_field;

/* The in-struct representation of "string" and "T[]" fields. */
typedef struct gw_slice {
    const void *ptr;
    size_t len; /* bytes for strings, elements for arrays */
} gw_slice;

/* Flags for gw_format_register: the layout's writer, for describing a
 * foreign layout (default: this machine's byte order and pointer size). */
#define GW_BIG_ENDIAN 0x1u
#define GW_LITTLE_ENDIAN 0x2u
#define GW_PTR32 0x4u /* 4-byte pointers: var slots are two 4-byte words */

typedef struct gw_registry gw_registry; /* formats, cached plans, scratch */
typedef struct gw_format gw_format;     /* owned by its registry */
typedef struct gw_encoder gw_encoder;

/* The message of the calling thread's last failed call ("" if none has
 * failed). Valid until the thread's next failed gridwire call. */
const char *gw_last_error(void);

int gw_registry_new(gw_registry **out);
/* Saturate narrowing overflows instead of failing (default: fail). */
int gw_registry_set_saturate(gw_registry *reg, int saturate);
void gw_registry_free(gw_registry *reg);

/* Describe a struct (see the header comment). Registering the same layout
 * twice returns the same format. `*out` lives as long as the registry. */
int gw_format_register(gw_registry *reg, const char *name, const gw_field *fields,
                       size_t nfields, size_t record_size, unsigned flags,
                       const gw_format **out);
/* Canonical metadata (send it once per peer before the first record).
 * Writes at most `cap` bytes; `*len` is always set to the full length. */
int gw_format_metadata(const gw_format *fmt, void *buf, size_t cap, size_t *len);
/* Learn a peer's format from its metadata. */
int gw_registry_learn(gw_registry *reg, const void *meta, size_t len,
                      const gw_format **out);

uint64_t gw_format_id(const gw_format *fmt);
const char *gw_format_name(const gw_format *fmt);
size_t gw_format_size(const gw_format *fmt);
size_t gw_format_nfields(const gw_format *fmt);
/* Field `i` (in offset order) as a field-list entry: type names use the
 * syntax above, so the list can be registered again. Strings live as long
 * as the format. */
int gw_format_field(const gw_format *fmt, size_t i, gw_field *out);

/* Encoding: the iovecs are [24-byte header, struct bytes, var data...];
 * the struct and var data are NOT copied unless the struct has var fields
 * (then its bytes are copied once so pointers can become offsets). The
 * iovecs stay valid until the next gw_encode on this encoder, while `rec`
 * and the data it points to live. Var fields need a format with this
 * machine's byte order and pointer size. */
int gw_encoder_new(const gw_format *fmt, gw_encoder **out);
void gw_encoder_free(gw_encoder *enc);
/* `*iovcnt` receives the number of iovecs; GW_ERR_SPACE if `cap` is short. */
int gw_encode(gw_encoder *enc, const void *rec, struct iovec *iov, size_t cap,
              size_t *iovcnt);
/* Encode into one buffer; `*len` receives the full length (also on GW_ERR_SPACE). */
int gw_encode_to_buffer(gw_encoder *enc, const void *rec, void *buf, size_t cap,
                        size_t *len);

/* Decoding: parse the record at `buf` (header + payload, `len` bytes) and
 * write it into `out` (record_size of `native` bytes) converted to `native`.
 * Var data goes to `tail` (`tail_cap` bytes) and the struct's gw_slices point
 * into it. `*tail_used` (may be NULL) receives the tail bytes needed, also on
 * GW_ERR_SPACE; `*consumed` (may be NULL) the record's length in `buf`. */
int gw_decode(gw_registry *reg, const void *buf, size_t len, const gw_format *native,
              void *out, size_t out_size, void *tail, size_t tail_cap,
              size_t *tail_used, size_t *consumed);

/* Decoders: the fast way to receive a stream of records. A decoder is
 * bound to one native format of a registry and remembers the plan of the
 * last (sender's format, native format) pair, so after the first record of
 * a pair a decode is a header check and the conversion itself: no look-up,
 * no allocation. (gw_decode keeps one such pair per registry, which serves
 * a single stream as well; use one decoder per stream when several
 * streams or native formats interleave.) A decoder holds its registry by
 * pointer: free it before the registry, and use both from one thread at a
 * time. Formats learned by the registry after the decoder was made are
 * decoded too. */
typedef struct gw_decoder gw_decoder;
int gw_decoder_new(gw_registry *reg, const gw_format *native, gw_decoder **out);
void gw_decoder_free(gw_decoder *dec);
/* As gw_decode, into the decoder's native format. `out` must not overlap
 * `buf` (except that a same-layout record may be copied over itself). */
int gw_decoder_decode(gw_decoder *dec, const void *buf, size_t len, void *out,
                      size_t out_size, void *tail, size_t tail_cap, size_t *tail_used,
                      size_t *consumed);
/* In-place (zero-copy) decode of the record at `buf` (`len` bytes):
 * `*rec` receives a pointer to the native struct.
 * - Record written in exactly the native layout (the common case between
 *   like machines): `*rec` points INTO `buf` (24 bytes after its start),
 *   nothing is copied. Its gw_slices are rewritten in place to point into
 *   `buf`, so `buf` must be writable and is no longer a valid record
 *   afterwards (decode it once). `buf` + 24 must be aligned for the struct
 *   (an 8-byte aligned `buf` is enough for ordinary structs): GW_ERR_USAGE
 *   otherwise.
 * - Another layout: the record is converted into memory owned by the
 *   decoder and `*rec` points there; `buf` is not written.
 * Either way `*rec` is valid until the next call on this decoder (or while
 * `buf` lives, for the first case). A refused record leaves `buf` as it was. */
int gw_decode_in_place(gw_decoder *dec, void *buf, size_t len, void **rec,
                       size_t *consumed);

/* Inline fast paths. gw_decoder_decode_inline and gw_decode_in_place_inline
 * take the same arguments and give the same results as the calls they
 * are named after, which they fall back to for anything but the hot case:
 * a record of the decoder's remembered pair whose conversion is compiled
 * (JIT) and has no variable-length parts, or, in place, a record in the
 * native layout without variable-length fields. The hot case is checked
 * and converted here, in the caller, without a call into the library but
 * the compiled conversion itself: for small records the call's own cost
 * is most of a decode. (For the inline decode, `out` must not overlap
 * `buf`.) The head below is what they read; a gw_decoder starts with it.
 * Read-only for callers. */
struct gw_decoder_head {
    uint64_t wire_id;          /* remembered pair: the sender's format id */
    uint64_t fixed_len;        /* and its size (the header's fixed length) */
    uint64_t native_id;        /* the decoder's native format: id, */
    uint64_t native_size;      /* size, */
    uint64_t align_mask;       /* and the alignment an in-place payload needs, minus 1 */
    const uint64_t *generation; /* the registry's plan generation ... */
    uint64_t seen_generation;  /* ... when the pair's plan was fetched */
    uint32_t (*code)(const void *payload, void *out); /* compiled conversion or NULL */
    uint32_t plain;            /* native format without variable-length fields */
    uint32_t ready;            /* the pair fields are set */
};

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define GW_INLINE_HEADER_ 1
#else
#define GW_INLINE_HEADER_ 0 /* the header is little-endian: leave it to the library */
#endif

/* Parse a record header as the library does; 0 if it is not a well-formed
 * header of a record that lies within `len` bytes. */
static inline int gw_header_(const void *buf, size_t len, uint64_t *id, uint32_t *fixed,
                             size_t *total) {
    const unsigned char *b = (const unsigned char *)buf;
    uint32_t magic, zero, fix, var;
    if (!GW_INLINE_HEADER_ || b == NULL || len < 24) return 0;
    memcpy(&magic, b, 4);
    memcpy(&zero, b + 4, 4);
    memcpy(id, b + 8, 8);
    memcpy(&fix, b + 16, 4);
    memcpy(&var, b + 20, 4);
    if (magic != 0x01525747u || zero != 0 || fix > (1u << 30) || var > (1u << 31) ||
        (uint64_t)fix + var > len - 24)
        return 0;
    *fixed = fix;
    *total = 24 + (size_t)fix + var;
    return 1;
}

static inline int gw_decoder_decode_inline(gw_decoder *dec, const void *buf, size_t len,
                                           void *out, size_t out_size, void *tail,
                                           size_t tail_cap, size_t *tail_used,
                                           size_t *consumed) {
    const struct gw_decoder_head *h = (const struct gw_decoder_head *)dec;
    uint64_t id;
    uint32_t fixed;
    size_t total;
    if (h != NULL && h->code != NULL && out != NULL && out_size >= h->native_size &&
        *h->generation == h->seen_generation && gw_header_(buf, len, &id, &fixed, &total) &&
        id == h->wire_id && fixed == h->fixed_len) {
        h->code((const unsigned char *)buf + 24, out);
        if (tail_used) *tail_used = 0;
        if (consumed) *consumed = total;
        return GW_OK;
    }
    return gw_decoder_decode(dec, buf, len, out, out_size, tail, tail_cap, tail_used, consumed);
}

static inline int gw_decode_in_place_inline(gw_decoder *dec, void *buf, size_t len, void **rec,
                                            size_t *consumed) {
    const struct gw_decoder_head *h = (const struct gw_decoder_head *)dec;
    uint64_t id;
    uint32_t fixed;
    size_t total;
    if (h != NULL && h->plain && rec != NULL && gw_header_(buf, len, &id, &fixed, &total) &&
        id == h->native_id && fixed == h->native_size &&
        (((uintptr_t)buf + 24) & h->align_mask) == 0) {
        *rec = (unsigned char *)buf + 24;
        if (consumed) *consumed = total;
        return GW_OK;
    }
    return gw_decode_in_place(dec, buf, len, rec, consumed);
}

/* Inspection without an expected layout. */
typedef enum gw_kind {
    GW_INT = 1,
    GW_UINT = 2,
    GW_FLOAT = 3,
    GW_CHAR = 4,
    GW_BOOL = 5,
    GW_STRING = 6, /* also fixed char arrays, cut at the first NUL */
    GW_ARRAY = 7,  /* `count` elements; address them as "path[i]" */
    GW_STRUCT = 8  /* `count` fields; address them as "path.name" */
} gw_kind;

typedef struct gw_value {
    int kind; /* gw_kind */
    int64_t i;
    uint64_t u;
    double f;            /* also set for INT/UINT/CHAR/BOOL */
    const char *str;     /* GW_STRING: NUL-terminated; valid until the next call on reg */
    size_t str_len;
    size_t count;
} gw_value;

/* The format of a received record (NULL-safe: GW_ERR_UNKNOWN_FORMAT if not learned). */
int gw_record_format(gw_registry *reg, const void *buf, size_t len, const gw_format **out);
/* One value by path, e.g. "id", "pts[1].x", "name". */
int gw_record_get(gw_registry *reg, const void *buf, size_t len, const char *path,
                  gw_value *out);
/* The record as JSON ({"format":..., "id":..., "value":...}, as gwrecord
 * dump prints each record). `*len` receives the length without the NUL. */
int gw_record_json(gw_registry *reg, const void *buf, size_t len, char *out, size_t cap,
                   size_t *json_len);

#ifdef __cplusplus
}
#endif
#endif /* GRIDWIRE_H */
