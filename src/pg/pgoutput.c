/*
 * The decoder of PostgreSQL's logical replication stream (framing and
 * pgoutput protocol version 1) and the client's encoders; see pgoutput.h.
 * Every read goes through struct rd, which checks the bytes left before it
 * touches them, so no input can make it read outside the caller's buffer.
 * The relation cache is pgoutput_rels.c.
 */
#include <stdlib.h>
#include <string.h>

#include "pgoutput.h"

#include "hexdigit.h"

const char *pgoutput_strerror(enum pgoutput_error e)
{
    switch (e) {
    case PGOUTPUT_OK: return "ok";
    case PGOUTPUT_TRUNCATED: return "message truncated";
    case PGOUTPUT_TRAILING: return "trailing bytes after the message";
    case PGOUTPUT_UNKNOWN_TYPE: return "unknown message type";
    case PGOUTPUT_UNSUPPORTED: return "message of a protocol feature not requested (streaming, two-phase)";
    case PGOUTPUT_NO_NUL: return "string not terminated";
    case PGOUTPUT_BAD_LENGTH: return "negative length";
    case PGOUTPUT_BAD_COUNT: return "count larger than the message";
    case PGOUTPUT_BAD_KIND: return "unexpected column kind or tuple marker";
    case PGOUTPUT_BAD_FLAGS: return "unknown commit flags";
    case PGOUTPUT_WRONG_TYPE: return "not a Relation message";
    case PGOUTPUT_CACHE_FULL: return "relation cache full";
    case PGOUTPUT_NO_MEMORY: return "out of memory";
    }
    return "unknown pgoutput error";
}

/* ------------------------------------------------------------- reading -- */

/* A cursor over the input; the first failure sticks in err. */
struct rd {
    const unsigned char *p, *end;
    enum pgoutput_error err;
};

static size_t rd_left(const struct rd *r)
{
    return (size_t)(r->end - r->p);
}

static bool rd_fail(struct rd *r, enum pgoutput_error e)
{
    if (r->err == PGOUTPUT_OK)
        r->err = e;
    return false;
}

/*
 * A reader over the bytes at buf past the first, the message's type (in
 * *type); false for an empty buf, which has not even a type.
 */
static bool rd_open(struct rd *r, const void *buf, size_t len, uint8_t *type)
{
    const unsigned char *p = buf;
    if (len == 0)
        return false;
    *type = p[0];
    *r = (struct rd){ p + 1, p + len, PGOUTPUT_OK };
    return true;
}

/* The end of a message that was read whole: trailing bytes are an error. */
static enum pgoutput_error rd_end(const struct rd *r)
{
    return rd_left(r) == 0 ? PGOUTPUT_OK : PGOUTPUT_TRAILING;
}

static bool rd_need(struct rd *r, size_t n)
{
    return rd_left(r) >= n || rd_fail(r, PGOUTPUT_TRUNCATED);
}

static uint64_t be(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | p[i];
    return v;
}

/* An n-byte big-endian unsigned integer, when n bytes are left. */
static bool rd_be(struct rd *r, int n, uint64_t *v)
{
    if (!rd_need(r, (size_t)n))
        return false;
    *v = be(r->p, n);
    r->p += n;
    return true;
}

/* rd_u8, rd_u16, rd_u32, rd_u64: rd_be at that width. */
#define RD_UINT(bits)                                                        \
    static bool rd_u##bits(struct rd *r, uint##bits##_t *v)                  \
    {                                                                        \
        uint64_t u;                                                          \
        if (!rd_be(r, (bits) / 8, &u))                                       \
            return false;                                                    \
        *v = (uint##bits##_t)u;                                              \
        return true;                                                         \
    }
RD_UINT(8)
RD_UINT(16)
RD_UINT(32)
RD_UINT(64)
#undef RD_UINT

static bool rd_i64(struct rd *r, int64_t *v)
{
    uint64_t u;
    if (!rd_u64(r, &u))
        return false;
    *v = (int64_t)u;            /* two's complement on every platform we build for */
    return true;
}

/* A NUL-terminated string: the terminator must lie inside the input. */
static bool rd_str(struct rd *r, const char **s, size_t *len)
{
    const unsigned char *nul = memchr(r->p, 0, rd_left(r));
    if (nul == NULL)
        return rd_fail(r, PGOUTPUT_NO_NUL);
    *s = (const char *)r->p;
    *len = (size_t)(nul - r->p);
    r->p = nul + 1;
    return true;
}

/* An int32 length (>= 0) and that many bytes. */
static bool rd_counted(struct rd *r, const char **s, size_t *len)
{
    uint32_t n;
    if (!rd_u32(r, &n))
        return false;
    if (n > INT32_MAX)
        return rd_fail(r, PGOUTPUT_BAD_LENGTH);
    if (!rd_need(r, n))
        return false;
    *s = (const char *)r->p;
    *len = n;
    r->p += n;
    return true;
}

/* ---------------------------------------------------------------- framing -- */

enum pgoutput_error pgoutput_frame_decode(const void *buf, size_t len, struct pgoutput_frame *out)
{
    struct rd r;
    uint8_t type;
    memset(out, 0, sizeof *out);
    if (!rd_open(&r, buf, len, &type))
        return PGOUTPUT_TRUNCATED;
    switch (type) {
    case 'w':
        out->type = PGOUTPUT_XLOGDATA;
        if (rd_u64(&r, &out->wal_start) && rd_u64(&r, &out->wal_end) && rd_i64(&r, &out->send_time)) {
            out->data = (const char *)r.p;
            out->len = rd_left(&r);
            return PGOUTPUT_OK;
        }
        return r.err;
    case 'k':
        out->type = PGOUTPUT_KEEPALIVE;
        if (rd_u64(&r, &out->wal_end) && rd_i64(&r, &out->send_time) && rd_u8(&r, &out->reply_requested))
            return rd_end(&r);
        return r.err;
    default:
        return PGOUTPUT_UNKNOWN_TYPE;
    }
}

/* ----------------------------------------------------------------- tuples -- */

/*
 * One TupleData column at it->p: its kind and value, advancing past it.
 * Shared by decoding (which thereby validates every column once) and the
 * iterators (which then cannot disagree with it).
 */
static bool rd_col(struct rd *r, void *out)
{
    struct pgoutput_col *col = out;
    uint8_t kind;
    if (!rd_u8(r, &kind))
        return false;
    col->kind = (char)kind;
    col->value = NULL;
    col->len = 0;
    switch (kind) {
    case 'n':
    case 'u':
        return true;
    case 't':
    case 'b':
        return rd_counted(r, &col->value, &col->len);
    default:
        return rd_fail(r, PGOUTPUT_BAD_KIND);
    }
}

/* Reads one element of a list (a struct pgoutput_col or pgoutput_attr) into out. */
typedef bool rd_elem_fn(struct rd *r, void *out);

/*
 * A uint16 count and that many elements of at least min_bytes each, read
 * (so validated) once here: *data and *len say where they lie, for the
 * iterators to read again.  elem's output goes to scratch.
 */
static bool rd_list(struct rd *r, uint16_t *n, size_t min_bytes, rd_elem_fn *elem, void *scratch,
                    const char **data, size_t *len)
{
    if (!rd_u16(r, n))
        return false;
    if (*n > rd_left(r) / min_bytes)
        return rd_fail(r, PGOUTPUT_BAD_COUNT);
    *data = (const char *)r->p;
    for (unsigned i = 0; i < *n; i++)
        if (!elem(r, scratch))
            return false;
    *len = (size_t)((const char *)r->p - *data);
    return true;
}

static void list_iter(struct pgoutput_iter *it, const char *data, size_t len, uint16_t n)
{
    /* An Update's absent old tuple has no data: NULL + 0 is undefined. */
    it->p = data;
    it->end = data ? data + len : NULL;
    it->left = data ? n : 0;
}

static bool list_next(struct pgoutput_iter *it, rd_elem_fn *elem, void *out)
{
    if (it->left == 0)
        return false;
    struct rd r = { (const unsigned char *)it->p, (const unsigned char *)it->end, PGOUTPUT_OK };
    if (!elem(&r, out)) {
        it->left = 0;
        return false;
    }
    it->p = (const char *)r.p;
    it->left--;
    return true;
}

/* Each column takes at least its kind byte. */
static bool rd_tuple(struct rd *r, struct pgoutput_tuple *t)
{
    struct pgoutput_col col;
    return rd_list(r, &t->ncols, 1, rd_col, &col, &t->data, &t->len);
}

void pgoutput_tuple_iter(const struct pgoutput_tuple *t, struct pgoutput_iter *it)
{
    list_iter(it, t->data, t->len, t->ncols);
}

bool pgoutput_tuple_next(struct pgoutput_iter *it, struct pgoutput_col *col)
{
    return list_next(it, rd_col, col);
}

bool pgoutput_tuple_get(const struct pgoutput_tuple *t, unsigned idx, struct pgoutput_col *col)
{
    struct pgoutput_iter it;
    if (idx >= t->ncols)
        return false;
    pgoutput_tuple_iter(t, &it);
    for (unsigned i = 0; i <= idx; i++)
        if (!pgoutput_tuple_next(&it, col))
            return false;
    return true;
}

/* -------------------------------------------------------- relation attrs -- */

static bool rd_attr(struct rd *r, void *out)
{
    struct pgoutput_attr *a = out;
    uint32_t typmod;
    if (!rd_u8(r, &a->flags) || !rd_str(r, &a->name, &a->name_len) || !rd_u32(r, &a->typid)
        || !rd_u32(r, &typmod))
        return false;
    a->typmod = (int32_t)typmod;
    return true;
}

/* The smallest attribute: flags, an empty name's NUL, type and typmod. */
#define ATTR_MIN_BYTES (1 + 1 + 4 + 4)

static bool rd_attrs(struct rd *r, struct pgoutput_attrs *a)
{
    struct pgoutput_attr attr;
    return rd_list(r, &a->natts, ATTR_MIN_BYTES, rd_attr, &attr, &a->data, &a->len);
}

void pgoutput_attrs_iter(const struct pgoutput_attrs *a, struct pgoutput_iter *it)
{
    list_iter(it, a->data, a->len, a->natts);
}

bool pgoutput_attrs_next(struct pgoutput_iter *it, struct pgoutput_attr *attr)
{
    return list_next(it, rd_attr, attr);
}

uint32_t pgoutput_truncate_relid(const struct pgoutput_msg *m, uint32_t i)
{
    return (uint32_t)be((const unsigned char *)m->truncate.relids + (size_t)i * 4, 4);
}

/* --------------------------------------------------------------- messages -- */

static bool decode_begin(struct rd *r, struct pgoutput_msg *m)
{
    return rd_u64(r, &m->begin.final_lsn) && rd_i64(r, &m->begin.commit_time)
        && rd_u32(r, &m->begin.xid);
}

static bool decode_commit(struct rd *r, struct pgoutput_msg *m)
{
    if (!rd_u8(r, &m->commit.flags))
        return false;
    /* Unused so far; a subscriber refuses others rather than guess their meaning. */
    if (m->commit.flags != 0)
        return rd_fail(r, PGOUTPUT_BAD_FLAGS);
    return rd_u64(r, &m->commit.commit_lsn) && rd_u64(r, &m->commit.end_lsn)
        && rd_i64(r, &m->commit.commit_time);
}

static bool decode_relation(struct rd *r, struct pgoutput_msg *m)
{
    uint8_t ident;
    if (!rd_u32(r, &m->relation.relid)
        || !rd_str(r, &m->relation.nspname, &m->relation.nspname_len)
        || !rd_str(r, &m->relation.relname, &m->relation.relname_len) || !rd_u8(r, &ident))
        return false;
    m->relation.replident = (char)ident;
    return rd_attrs(r, &m->relation.attrs);
}

/* The byte before a tuple: one of the markers in want. */
static bool rd_marker(struct rd *r, const char *want, char *got)
{
    uint8_t b;
    if (!rd_u8(r, &b))
        return false;
    if (b == 0 || strchr(want, b) == NULL)
        return rd_fail(r, PGOUTPUT_BAD_KIND);
    *got = (char)b;
    return true;
}

static bool decode_update(struct rd *r, struct pgoutput_msg *m)
{
    char marker;
    if (!rd_u32(r, &m->update.relid) || !rd_marker(r, "KON", &marker))
        return false;
    m->update.old_kind = 0;
    m->update.old = (struct pgoutput_tuple){ 0, NULL, 0 };
    if (marker != 'N') {
        m->update.old_kind = marker;
        if (!rd_tuple(r, &m->update.old) || !rd_marker(r, "N", &marker))
            return false;
    }
    return rd_tuple(r, &m->update.tuple);
}

static bool decode_truncate(struct rd *r, struct pgoutput_msg *m)
{
    uint32_t n;
    if (!rd_u32(r, &n) || !rd_u8(r, &m->truncate.options))
        return false;
    if (n > INT32_MAX || n > rd_left(r) / 4)
        return rd_fail(r, PGOUTPUT_BAD_COUNT);
    m->truncate.nrelids = n;
    m->truncate.relids = (const char *)r->p;
    r->p += (size_t)n * 4;
    return true;
}

static bool decode_message(struct rd *r, struct pgoutput_msg *m)
{
    return rd_u8(r, &m->message.flags) && rd_u64(r, &m->message.lsn)
        && rd_str(r, &m->message.prefix, &m->message.prefix_len)
        && rd_counted(r, &m->message.content, &m->message.content_len);
}

static bool decode_origin(struct rd *r, struct pgoutput_msg *m)
{
    return rd_u64(r, &m->origin.lsn) && rd_str(r, &m->origin.name, &m->origin.name_len);
}

static bool decode_type(struct rd *r, struct pgoutput_msg *m)
{
    return rd_u32(r, &m->pgtype.typid) && rd_str(r, &m->pgtype.nspname, &m->pgtype.nspname_len)
        && rd_str(r, &m->pgtype.typname, &m->pgtype.typname_len);
}

static bool decode_insert(struct rd *r, struct pgoutput_msg *m)
{
    char marker;
    return rd_u32(r, &m->insert.relid) && rd_marker(r, "N", &marker)
        && rd_tuple(r, &m->insert.tuple);
}

static bool decode_delete(struct rd *r, struct pgoutput_msg *m)
{
    return rd_u32(r, &m->delete.relid) && rd_marker(r, "KO", &m->delete.old_kind)
        && rd_tuple(r, &m->delete.old);
}

/* The decoder of each message type this reader knows, by its type byte: a new type is one row. */
typedef bool decode_fn(struct rd *r, struct pgoutput_msg *m);
static decode_fn *const decoders[256] = {
    [PGOUTPUT_BEGIN] = decode_begin,
    [PGOUTPUT_COMMIT] = decode_commit,
    [PGOUTPUT_ORIGIN] = decode_origin,
    [PGOUTPUT_RELATION] = decode_relation,
    [PGOUTPUT_TYPE] = decode_type,
    [PGOUTPUT_INSERT] = decode_insert,
    [PGOUTPUT_UPDATE] = decode_update,
    [PGOUTPUT_DELETE] = decode_delete,
    [PGOUTPUT_TRUNCATE] = decode_truncate,
    [PGOUTPUT_MESSAGE] = decode_message,
};

/*
 * Stream start/stop/commit/abort, two-phase begin/prepare/commit/rollback,
 * stream prepare: types pgoutput sends only when asked for options this
 * reader never asks for.
 */
static const char unsupported_types[] = "SEcAbPKrp";

enum pgoutput_error pgoutput_decode(const void *buf, size_t len, struct pgoutput_msg *out)
{
    struct rd r;
    uint8_t type;
    memset(out, 0, sizeof *out);
    if (!rd_open(&r, buf, len, &type))
        return PGOUTPUT_TRUNCATED;
    out->type = (enum pgoutput_msg_type)type;
    decode_fn *decode = decoders[type];
    if (decode == NULL)
        return type != 0 && strchr(unsupported_types, type) != NULL ? PGOUTPUT_UNSUPPORTED
                                                                    : PGOUTPUT_UNKNOWN_TYPE;
    if (!decode(&r, out))
        return r.err;
    return rd_end(&r);
}

/* --------------------------------------------------------------- encoders -- */

static unsigned char *put_be(unsigned char *p, uint64_t v, int n)
{
    for (int i = n - 1; i >= 0; i--) {
        p[i] = (unsigned char)(v & 0xff);
        v >>= 8;
    }
    return p + n;
}

size_t pgoutput_status_encode(void *buf, size_t cap, uint64_t write_lsn, uint64_t flush_lsn,
                              uint64_t apply_lsn, int64_t send_time, bool reply_requested)
{
    if (cap < PGOUTPUT_STATUS_SIZE)
        return 0;
    unsigned char *p = buf;
    *p++ = 'r';
    p = put_be(p, write_lsn, 8);
    p = put_be(p, flush_lsn, 8);
    p = put_be(p, apply_lsn, 8);
    p = put_be(p, (uint64_t)send_time, 8);
    *p = reply_requested ? 1 : 0;
    return PGOUTPUT_STATUS_SIZE;
}

int64_t pgoutput_time_from_unix_us(int64_t unix_us)
{
    if (unix_us < INT64_MIN + PGOUTPUT_EPOCH_UNIX_US)
        return INT64_MIN;
    return unix_us - PGOUTPUT_EPOCH_UNIX_US;
}

int64_t pgoutput_time_to_unix_us(int64_t pg_us)
{
    if (pg_us > INT64_MAX - PGOUTPUT_EPOCH_UNIX_US)
        return INT64_MAX;
    return pg_us + PGOUTPUT_EPOCH_UNIX_US;
}

/* 1 to 8 hex digits from s[*i], stopping at the first other byte. */
static bool lsn_half(const char *s, size_t len, size_t *i, uint32_t *v)
{
    size_t start = *i;
    int d;
    *v = 0;
    while (*i < len && (d = hexdigit_value((unsigned char)s[*i])) >= 0) {
        if (*i - start == 8)
            return false;
        *v = *v << 4 | (uint32_t)d;
        (*i)++;
    }
    return *i > start;
}

bool pgoutput_lsn_parse(const char *s, size_t len, uint64_t *lsn)
{
    size_t i = 0;
    uint32_t hi, lo;
    if (!lsn_half(s, len, &i, &hi) || i >= len || s[i] != '/')
        return false;
    i++;
    if (!lsn_half(s, len, &i, &lo) || i != len)
        return false;
    *lsn = (uint64_t)hi << 32 | lo;
    return true;
}

static size_t put_hex(char *p, uint32_t v)
{
    static const char digits[] = "0123456789ABCDEF";
    char tmp[8];
    size_t n = 0;
    do {
        tmp[n++] = digits[v & 0xf];
        v >>= 4;
    } while (v != 0);
    for (size_t i = 0; i < n; i++)
        p[i] = tmp[n - 1 - i];
    return n;
}

size_t pgoutput_lsn_format(uint64_t lsn, char *buf)
{
    size_t n = put_hex(buf, (uint32_t)(lsn >> 32));
    buf[n++] = '/';
    n += put_hex(buf + n, (uint32_t)lsn);
    buf[n] = 0;
    return n;
}
