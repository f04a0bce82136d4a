/*
 * Unit tests of the logical replication decoder (src/pg/pgoutput.c): every
 * frame and message type from hand-built bytes, every error path, every
 * truncation of every valid message (decoded from exact-size heap copies,
 * so an overread shows under ASan or valgrind), the relation cache, the
 * status update, the time helpers and LSN text.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "check_main.h"
#include "pgoutput.h"

/* ---- building messages by hand ---- */

struct buf {
    unsigned char b[8192];
    size_t n;
};

static struct buf *b_u8(struct buf *b, unsigned v)
{
    ck_assert_uint_lt(b->n, sizeof b->b);
    b->b[b->n++] = (unsigned char)v;
    return b;
}

static struct buf *b_be(struct buf *b, uint64_t v, int bytes)
{
    for (int i = bytes - 1; i >= 0; i--)
        b_u8(b, (unsigned)(v >> (8 * i)) & 0xff);
    return b;
}

static struct buf *b_u16(struct buf *b, unsigned v) { return b_be(b, v, 2); }
static struct buf *b_u32(struct buf *b, uint32_t v) { return b_be(b, v, 4); }
static struct buf *b_u64(struct buf *b, uint64_t v) { return b_be(b, v, 8); }

static struct buf *b_raw(struct buf *b, const void *p, size_t n)
{
    ck_assert_uint_le(b->n + n, sizeof b->b);
    memcpy(b->b + b->n, p, n);
    b->n += n;
    return b;
}

/* A string with its terminator, as pq_sendstring writes it. */
static struct buf *b_str(struct buf *b, const char *s)
{
    return b_raw(b, s, strlen(s) + 1);
}

/* A 't' column: kind, int32 length, the bytes. */
static struct buf *b_text(struct buf *b, const void *p, size_t n)
{
    b_u8(b, 't');
    b_u32(b, (uint32_t)n);
    return b_raw(b, p, n);
}

/* Decode b[0..len) from an exact-size heap copy (NULL for 0 bytes). */
static enum pgoutput_error decode_n(const struct buf *b, size_t len, struct pgoutput_msg *m, char **copy)
{
    *copy = len ? malloc(len) : NULL;
    if (len)
        memcpy(*copy, b->b, len);
    return pgoutput_decode(*copy, len, m);
}

/* Decode all of b, expecting PGOUTPUT_OK; the copy stays alive in *copy. */
static void decode_ok(const struct buf *b, struct pgoutput_msg *m, char **copy)
{
    enum pgoutput_error e = decode_n(b, b->n, m, copy);
    ck_assert_msg(e == PGOUTPUT_OK, "decode: %s", pgoutput_strerror(e));
}

static enum pgoutput_error decode_err(const struct buf *b)
{
    struct pgoutput_msg m;
    char *copy;
    enum pgoutput_error e = decode_n(b, b->n, &m, &copy);
    free(copy);
    return e;
}

/*
 * Every proper prefix of a valid message is an error and reads nothing
 * beyond itself; one extra byte is PGOUTPUT_TRAILING.
 */
static void check_truncations(const struct buf *b)
{
    struct pgoutput_msg m;
    char *copy;
    for (size_t len = 0; len < b->n; len++) {
        enum pgoutput_error e = decode_n(b, len, &m, &copy);
        ck_assert_msg(e != PGOUTPUT_OK, "message '%c' cut to %zu of %zu bytes decoded", b->b[0], len, b->n);
        free(copy);
    }
    struct buf more = *b;
    b_u8(&more, 0);
    ck_assert_int_eq(decode_err(&more), PGOUTPUT_TRAILING);
    b_u8(&more, 'x');
    ck_assert_int_eq(decode_err(&more), PGOUTPUT_TRAILING);
}

/* Checks that p[0..len) lies inside copy[0..total). */
#define ck_inside(p, len, copy, total)                                                   \
    ck_assert((const char *)(p) >= (copy) && (const char *)(p) + (len) <= (copy) + (total))

/* ---- framing ---- */

START_TEST(test_strerror)
{
    for (int e = PGOUTPUT_OK; e <= PGOUTPUT_NO_MEMORY; e++) {
        ck_assert_ptr_nonnull(pgoutput_strerror((enum pgoutput_error)e));
        ck_assert_str_ne(pgoutput_strerror((enum pgoutput_error)e), "unknown pgoutput error");
    }
    ck_assert_str_eq(pgoutput_strerror(PGOUTPUT_TRUNCATED), "message truncated");
    ck_assert_str_eq(pgoutput_strerror((enum pgoutput_error)999), "unknown pgoutput error");
}
END_TEST

START_TEST(test_frame_xlogdata)
{
    struct buf b = { .n = 0 };
    b_u8(&b, 'w');
    b_u64(&b, UINT64_C(0x16B374D848));
    b_u64(&b, UINT64_C(0x16B374D900));
    b_u64(&b, (uint64_t)INT64_C(-5));
    b_raw(&b, "B123", 4);
    char *copy = malloc(b.n);
    memcpy(copy, b.b, b.n);
    struct pgoutput_frame f;
    ck_assert_int_eq(pgoutput_frame_decode(copy, b.n, &f), PGOUTPUT_OK);
    ck_assert_int_eq(f.type, PGOUTPUT_XLOGDATA);
    ck_assert_uint_eq(f.wal_start, UINT64_C(0x16B374D848));
    ck_assert_uint_eq(f.wal_end, UINT64_C(0x16B374D900));
    ck_assert_int_eq(f.send_time, -5);
    ck_assert_uint_eq(f.reply_requested, 0);
    ck_assert_ptr_eq(f.data, copy + 25);
    ck_assert_uint_eq(f.len, 4);
    /* No data at all is still a frame (the message decoder refuses it). */
    ck_assert_int_eq(pgoutput_frame_decode(copy, 25, &f), PGOUTPUT_OK);
    ck_assert_uint_eq(f.len, 0);
    for (size_t len = 0; len < 25; len++)
        ck_assert_int_eq(pgoutput_frame_decode(copy, len, &f), PGOUTPUT_TRUNCATED);
    free(copy);
}
END_TEST

START_TEST(test_frame_keepalive)
{
    static const unsigned char k[] = {
        'k', 0, 0, 0, 0x16, 0xB3, 0x74, 0xD8, 0x48,     /* walEnd */
        0, 0, 0, 0, 0, 0, 0x03, 0xE8,                   /* sendTime 1000 */
        1,                                              /* reply requested */
        0xAA                                            /* one too many */
    };
    unsigned char *copy = malloc(sizeof k);
    memcpy(copy, k, sizeof k);
    struct pgoutput_frame f;
    ck_assert_int_eq(pgoutput_frame_decode(copy, 18, &f), PGOUTPUT_OK);
    ck_assert_int_eq(f.type, PGOUTPUT_KEEPALIVE);
    ck_assert_uint_eq(f.wal_end, UINT64_C(0x16B374D848));
    ck_assert_int_eq(f.send_time, 1000);
    ck_assert_uint_eq(f.reply_requested, 1);
    ck_assert_ptr_null(f.data);
    ck_assert_uint_eq(f.wal_start, 0);
    ck_assert_int_eq(pgoutput_frame_decode(copy, sizeof k, &f), PGOUTPUT_TRAILING);
    for (size_t len = 0; len < 18; len++)
        ck_assert_int_eq(pgoutput_frame_decode(copy, len, &f), PGOUTPUT_TRUNCATED);
    copy[0] = 'r';      /* what the client sends, never the server */
    ck_assert_int_eq(pgoutput_frame_decode(copy, 18, &f), PGOUTPUT_UNKNOWN_TYPE);
    copy[0] = 0;
    ck_assert_int_eq(pgoutput_frame_decode(copy, 18, &f), PGOUTPUT_UNKNOWN_TYPE);
    ck_assert_int_eq(pgoutput_frame_decode(NULL, 0, &f), PGOUTPUT_TRUNCATED);
    free(copy);
}
END_TEST

/* ---- transaction messages ---- */

START_TEST(test_begin_commit_origin)
{
    struct pgoutput_msg m;
    char *copy;
    struct buf b = { .n = 0 };
    b_u64(b_u8(&b, 'B'), UINT64_C(0x100000028));
    b_u32(b_u64(&b, UINT64_C(765432101234)), 4000000001u);
    decode_ok(&b, &m, &copy);
    ck_assert_int_eq(m.type, PGOUTPUT_BEGIN);
    ck_assert_uint_eq(m.begin.final_lsn, UINT64_C(0x100000028));
    ck_assert_int_eq(m.begin.commit_time, INT64_C(765432101234));
    ck_assert_uint_eq(m.begin.xid, 4000000001u);
    free(copy);
    check_truncations(&b);

    b.n = 0;
    b_u8(b_u8(&b, 'C'), 0);
    b_u64(b_u64(&b, UINT64_C(0x100000028)), UINT64_C(0x100000058));
    b_u64(&b, (uint64_t)INT64_C(-1));
    decode_ok(&b, &m, &copy);
    ck_assert_int_eq(m.type, PGOUTPUT_COMMIT);
    ck_assert_uint_eq(m.commit.flags, 0);
    ck_assert_uint_eq(m.commit.commit_lsn, UINT64_C(0x100000028));
    ck_assert_uint_eq(m.commit.end_lsn, UINT64_C(0x100000058));
    ck_assert_int_eq(m.commit.commit_time, -1);
    free(copy);
    check_truncations(&b);
    b.b[1] = 1;
    ck_assert_int_eq(decode_err(&b), PGOUTPUT_BAD_FLAGS);

    b.n = 0;
    b_str(b_u64(b_u8(&b, 'O'), 77), "node_a");
    decode_ok(&b, &m, &copy);
    ck_assert_int_eq(m.type, PGOUTPUT_ORIGIN);
    ck_assert_uint_eq(m.origin.lsn, 77);
    ck_assert_str_eq(m.origin.name, "node_a");
    ck_assert_uint_eq(m.origin.name_len, 6);
    ck_inside(m.origin.name, m.origin.name_len + 1, copy, b.n);
    free(copy);
    check_truncations(&b);
    /* Cut inside the name: the NUL is missing. */
    b.n -= 1;
    ck_assert_int_eq(decode_err(&b), PGOUTPUT_NO_NUL);
}
END_TEST

/* ---- relation, type ---- */

/* A Relation: users(id int8 key, email text, note varchar(20)). */
static void build_relation(struct buf *b, uint32_t relid, const char *nsp)
{
    b->n = 0;
    b_u32(b_u8(b, 'R'), relid);
    b_str(b, nsp);
    b_str(b, "users");
    b_u8(b, 'd');
    b_u16(b, 3);
    b_u32(b_str(b_u8(b, 1), "id"), 20);
    b_u32(b, (uint32_t)-1);
    b_u32(b_str(b_u8(b, 0), "email"), 25);
    b_u32(b, (uint32_t)-1);
    b_u32(b_str(b_u8(b, 0), "note"), 1043);
    b_u32(b, 24);
}

START_TEST(test_relation)
{
    struct pgoutput_msg m;
    char *copy;
    struct buf b;
    build_relation(&b, 16384, "public");
    decode_ok(&b, &m, &copy);
    ck_assert_int_eq(m.type, PGOUTPUT_RELATION);
    ck_assert_uint_eq(m.relation.relid, 16384);
    ck_assert_str_eq(m.relation.nspname, "public");
    ck_assert_uint_eq(m.relation.nspname_len, 6);
    ck_assert_str_eq(m.relation.relname, "users");
    ck_assert_uint_eq(m.relation.relname_len, 5);
    ck_assert_int_eq(m.relation.replident, 'd');
    ck_assert_uint_eq(m.relation.attrs.natts, 3);
    ck_inside(m.relation.attrs.data, m.relation.attrs.len, copy, b.n);

    static const struct { uint8_t flags; const char *name; uint32_t typid; int32_t typmod; } want[] = {
        { 1, "id", 20, -1 }, { 0, "email", 25, -1 }, { 0, "note", 1043, 24 },
    };
    struct pgoutput_iter it;
    struct pgoutput_attr a;
    unsigned n = 0;
    pgoutput_attrs_iter(&m.relation.attrs, &it);
    while (pgoutput_attrs_next(&it, &a)) {
        ck_assert_uint_lt(n, 3);
        ck_assert_uint_eq(a.flags, want[n].flags);
        ck_assert_str_eq(a.name, want[n].name);
        ck_assert_uint_eq(a.name_len, strlen(want[n].name));
        ck_assert_uint_eq(a.typid, want[n].typid);
        ck_assert_int_eq(a.typmod, want[n].typmod);
        ck_inside(a.name, a.name_len + 1, copy, b.n);
        n++;
    }
    ck_assert_uint_eq(n, 3);
    ck_assert(!pgoutput_attrs_next(&it, &a));
    free(copy);
    check_truncations(&b);

    /* pg_catalog travels as "": passed through. */
    build_relation(&b, 1, "");
    decode_ok(&b, &m, &copy);
    ck_assert_str_eq(m.relation.nspname, "");
    free(copy);

    /* No columns at all (a table whose publication lists none is impossible, but the format allows it). */
    b.n = 0;
    b_u16(b_u8(b_str(b_str(b_u32(b_u8(&b, 'R'), 5), "s"), "t"), 'n'), 0);
    decode_ok(&b, &m, &copy);
    ck_assert_uint_eq(m.relation.attrs.natts, 0);
    pgoutput_attrs_iter(&m.relation.attrs, &it);
    ck_assert(!pgoutput_attrs_next(&it, &a));
    free(copy);
    check_truncations(&b);

    /* A count the bytes cannot hold: refused before any column is read. */
    b.n -= 2;
    b_u16(&b, 65535);
    b_u32(b_str(b_u8(&b, 0), "a"), 23);
    b_u32(&b, 0);
    ck_assert_int_eq(decode_err(&b), PGOUTPUT_BAD_COUNT);
    /* A count of 2 with bytes enough for two, but only one column: truncated. */
    b.n -= 2 + 11;
    b_u16(&b, 2);
    b_u32(b_str(b_u8(&b, 0), "abcdefghijk"), 23);
    b_u32(&b, 0);
    ck_assert_int_eq(decode_err(&b), PGOUTPUT_TRUNCATED);
}
END_TEST

START_TEST(test_type)
{
    struct pgoutput_msg m;
    char *copy;
    struct buf b = { .n = 0 };
    b_str(b_str(b_u32(b_u8(&b, 'Y'), 16390), "public"), "mood");
    decode_ok(&b, &m, &copy);
    ck_assert_int_eq(m.type, PGOUTPUT_TYPE);
    ck_assert_uint_eq(m.pgtype.typid, 16390);
    ck_assert_str_eq(m.pgtype.nspname, "public");
    ck_assert_str_eq(m.pgtype.typname, "mood");
    ck_assert_uint_eq(m.pgtype.typname_len, 4);
    free(copy);
    check_truncations(&b);
}
END_TEST

/* ---- tuples ---- */

static const char odd_bytes[] = { 'a', 0, (char)0xff, '\n', (char)0xc3, (char)0xa9 };

/* A tuple of 5 columns: text "42", null, unchanged, binary odd_bytes, text "". */
static void build_tuple(struct buf *b)
{
    b_u16(b, 5);
    b_text(b, "42", 2);
    b_u8(b, 'n');
    b_u8(b, 'u');
    b_u8(b, 'b');
    b_u32(b, sizeof odd_bytes);
    b_raw(b, odd_bytes, sizeof odd_bytes);
    b_text(b, "", 0);
}

static void check_tuple(const struct pgoutput_tuple *t, const char *copy, size_t total)
{
    ck_assert_uint_eq(t->ncols, 5);
    ck_inside(t->data, t->len, copy, total);
    struct pgoutput_col c[6];
    struct pgoutput_iter it;
    unsigned n = 0;
    pgoutput_tuple_iter(t, &it);
    while (n < 6 && pgoutput_tuple_next(&it, &c[n]))
        n++;
    ck_assert_uint_eq(n, 5);
    ck_assert_int_eq(c[0].kind, 't');
    ck_assert_uint_eq(c[0].len, 2);
    ck_assert_mem_eq(c[0].value, "42", 2);
    ck_assert_int_eq(c[1].kind, 'n');
    ck_assert_ptr_null(c[1].value);
    ck_assert_uint_eq(c[1].len, 0);
    ck_assert_int_eq(c[2].kind, 'u');
    ck_assert_ptr_null(c[2].value);
    ck_assert_int_eq(c[3].kind, 'b');
    ck_assert_uint_eq(c[3].len, sizeof odd_bytes);
    ck_assert_mem_eq(c[3].value, odd_bytes, sizeof odd_bytes);
    ck_assert_int_eq(c[4].kind, 't');
    ck_assert_uint_eq(c[4].len, 0);
    ck_assert_ptr_nonnull(c[4].value);
    for (unsigned i = 0; i < 5; i++) {
        if (c[i].value != NULL)
            ck_inside(c[i].value, c[i].len, copy, total);
        struct pgoutput_col g;
        ck_assert(pgoutput_tuple_get(t, i, &g));
        ck_assert_int_eq(g.kind, c[i].kind);
        ck_assert_ptr_eq(g.value, c[i].value);
        ck_assert_uint_eq(g.len, c[i].len);
    }
    struct pgoutput_col g;
    ck_assert(!pgoutput_tuple_get(t, 5, &g));
    ck_assert(!pgoutput_tuple_get(t, 65535, &g));
}

/* b with byte at set to kind: refused as PGOUTPUT_BAD_KIND.  b keeps the byte. */
static void assert_bad_kind(struct buf *b, size_t at, unsigned char kind)
{
    b->b[at] = kind;
    enum pgoutput_error e = decode_err(b);
    ck_assert_msg(e == PGOUTPUT_BAD_KIND, "kind 0x%02x at byte %zu: error %d", kind, at, (int)e);
}

/* b emptied, then a row message's head: its type, relation and the marker of its first tuple. */
static struct buf *b_row_head(struct buf *b, unsigned char type, uint32_t relid, unsigned char marker)
{
    b->n = 0;
    return b_u8(b_u32(b_u8(b, type), relid), marker);
}

/* The relation a decoded Insert, Update or Delete names. */
static uint32_t row_relid(const struct pgoutput_msg *m)
{
    switch (m->type) {
    case PGOUTPUT_INSERT:
        return m->insert.relid;
    case PGOUTPUT_UPDATE:
        return m->update.relid;
    default:
        ck_assert_int_eq(m->type, PGOUTPUT_DELETE);
        return m->delete.relid;
    }
}

/*
 * A row message: the head (for relid) and what else comes before its last
 * tuple already in b, then build_tuple's tuple, decoded into m as the type
 * its first byte names, for relid.
 */
static void decode_built_row(struct buf *b, uint32_t relid, struct pgoutput_msg *m, char **copy)
{
    build_tuple(b);
    decode_ok(b, m, copy);
    ck_assert_int_eq(m->type, b->b[0]);
    ck_assert_uint_eq(row_relid(m), relid);
}

/* A row message of type for relid whose one tuple, marked marker, is build_tuple's, decoded. */
static void decode_row(struct buf *b, unsigned char type, uint32_t relid, unsigned char marker,
                       struct pgoutput_msg *m, char **copy)
{
    b_row_head(b, type, relid, marker);
    decode_built_row(b, relid, m, copy);
}

/* The end of a row message's checks: its last tuple is build_tuple's; every truncation is refused. */
static void end_row(const struct buf *b, const struct pgoutput_tuple *t, char *copy)
{
    check_tuple(t, copy, b->n);
    free(copy);
    check_truncations(b);
}

START_TEST(test_insert)
{
    struct pgoutput_msg m;
    char *copy;
    struct buf b;
    decode_row(&b, 'I', 16384, 'N', &m, &copy);
    end_row(&b, &m.insert.tuple, copy);

    /* Only 'N' may introduce an insert's tuple. */
    assert_bad_kind(&b, 5, 'K');
    assert_bad_kind(&b, 5, 0);
}
END_TEST

START_TEST(test_tuple_errors)
{
    struct buf b;
    const size_t head = b_row_head(&b, 'I', 1, 'N')->n;

    /* Zero columns is a valid tuple. */
    b_u16(&b, 0);
    ck_assert_int_eq(decode_err(&b), PGOUTPUT_OK);

    /* An unknown column kind. */
    b.n = head;
    b_u8(b_u16(&b, 1), 'x');
    ck_assert_int_eq(decode_err(&b), PGOUTPUT_BAD_KIND);

    /* A negative length, and the largest. */
    b.n = head;
    b_u32(b_u8(b_u16(&b, 1), 't'), 0xFFFFFFFFu);
    ck_assert_int_eq(decode_err(&b), PGOUTPUT_BAD_LENGTH);
    b.n = head;
    b_u32(b_u8(b_u16(&b, 1), 'b'), 0x80000000u);
    ck_assert_int_eq(decode_err(&b), PGOUTPUT_BAD_LENGTH);

    /* A length past the end, by one and by a lot. */
    b.n = head;
    b_raw(b_u32(b_u8(b_u16(&b, 1), 't'), 4), "abc", 3);
    ck_assert_int_eq(decode_err(&b), PGOUTPUT_TRUNCATED);
    b.n = head;
    b_raw(b_u32(b_u8(b_u16(&b, 1), 't'), 0x7FFFFFFF), "abc", 3);
    ck_assert_int_eq(decode_err(&b), PGOUTPUT_TRUNCATED);

    /* More columns than bytes. */
    b.n = head;
    b_u8(b_u8(b_u16(&b, 3), 'n'), 'n');
    ck_assert_int_eq(decode_err(&b), PGOUTPUT_BAD_COUNT);
    b.n = head;
    b_u8(b_u8(b_u16(&b, 65535), 'n'), 'n');
    ck_assert_int_eq(decode_err(&b), PGOUTPUT_BAD_COUNT);
    /* Fewer columns than bytes: the rest is trailing garbage. */
    b.n = head;
    b_u8(b_u8(b_u16(&b, 1), 'n'), 'n');
    ck_assert_int_eq(decode_err(&b), PGOUTPUT_TRAILING);
}
END_TEST

START_TEST(test_iter_defensive)
{
    /* Hand-made structs that pgoutput_decode would never return. */
    static const char bad[] = { 't', 0, 0, 0, 9, 'a' };
    struct pgoutput_tuple t = { 2, bad, sizeof bad };
    struct pgoutput_iter it;
    struct pgoutput_col c;
    pgoutput_tuple_iter(&t, &it);
    ck_assert(!pgoutput_tuple_next(&it, &c));
    ck_assert(!pgoutput_tuple_next(&it, &c));
    ck_assert(!pgoutput_tuple_get(&t, 0, &c));
    static const char one[] = { 'n' };
    t = (struct pgoutput_tuple){ 2, one, sizeof one };
    ck_assert(pgoutput_tuple_get(&t, 0, &c));
    ck_assert(!pgoutput_tuple_get(&t, 1, &c));
    static const char noname[] = { 0, 'a', 'b' };
    struct pgoutput_attrs a = { 1, noname, sizeof noname };
    struct pgoutput_attr at;
    pgoutput_attrs_iter(&a, &it);
    ck_assert(!pgoutput_attrs_next(&it, &at));
}
END_TEST

START_TEST(test_update)
{
    struct pgoutput_msg m;
    char *copy;
    struct buf b;

    /* No old tuple. */
    decode_row(&b, 'U', 7, 'N', &m, &copy);
    ck_assert_int_eq(m.update.old_kind, 0);
    ck_assert_uint_eq(m.update.old.ncols, 0);
    ck_assert_ptr_null(m.update.old.data);
    struct pgoutput_iter it;
    struct pgoutput_col none;
    pgoutput_tuple_iter(&m.update.old, &it);
    ck_assert(!pgoutput_tuple_next(&it, &none));
    ck_assert(!pgoutput_tuple_get(&m.update.old, 0, &none));
    end_row(&b, &m.update.tuple, copy);

    /* The old key ('K': the key, others null) or the whole old row ('O'). */
    for (const char *k = "KO"; *k; k++) {
        b_row_head(&b, 'U', 7, (unsigned char)*k);
        b_u8(b_u8(b_text(b_u16(&b, 5), "41", 2), 'n'), 'n');
        b_u8(b_u8(&b, 'n'), 'n');
        b_u8(&b, 'N');
        decode_built_row(&b, 7, &m, &copy);
        ck_assert_int_eq(m.update.old_kind, *k);
        ck_assert_uint_eq(m.update.old.ncols, 5);
        struct pgoutput_col c;
        ck_assert(pgoutput_tuple_get(&m.update.old, 0, &c));
        ck_assert_int_eq(c.kind, 't');
        ck_assert_mem_eq(c.value, "41", 2);
        ck_assert(pgoutput_tuple_get(&m.update.old, 4, &c));
        ck_assert_int_eq(c.kind, 'n');
        end_row(&b, &m.update.tuple, copy);
    }

    /* The old tuple must be followed by 'N', not by another old one. */
    size_t n_at = 5 + 1 + 2 + 7 + 4;
    ck_assert_int_eq(b.b[n_at], 'N');
    assert_bad_kind(&b, n_at, 'K');
    assert_bad_kind(&b, n_at, 'O');
    assert_bad_kind(&b, 5, 'X');
}
END_TEST

START_TEST(test_delete)
{
    struct pgoutput_msg m;
    char *copy;
    struct buf b;
    for (const char *k = "KO"; *k; k++) {
        decode_row(&b, 'D', 9, (unsigned char)*k, &m, &copy);
        ck_assert_int_eq(m.delete.old_kind, *k);
        end_row(&b, &m.delete.old, copy);
    }
    /* A delete always carries the old key or row. */
    assert_bad_kind(&b, 5, 'N');
}
END_TEST

/* ---- truncate, message ---- */

START_TEST(test_truncate)
{
    struct pgoutput_msg m;
    char *copy;
    struct buf b = { .n = 0 };
    b_u8(b_u32(b_u8(&b, 'T'), 3), PGOUTPUT_TRUNCATE_CASCADE | PGOUTPUT_TRUNCATE_RESTART_IDENTITY);
    b_u32(b_u32(b_u32(&b, 16384), 16390), 0xFFFFFFF0u);
    decode_ok(&b, &m, &copy);
    ck_assert_int_eq(m.type, PGOUTPUT_TRUNCATE);
    ck_assert_uint_eq(m.truncate.nrelids, 3);
    ck_assert_uint_eq(m.truncate.options, 3);
    ck_inside(m.truncate.relids, 12, copy, b.n);
    ck_assert_uint_eq(pgoutput_truncate_relid(&m, 0), 16384);
    ck_assert_uint_eq(pgoutput_truncate_relid(&m, 1), 16390);
    ck_assert_uint_eq(pgoutput_truncate_relid(&m, 2), 0xFFFFFFF0u);
    free(copy);
    check_truncations(&b);

    /* More relids than bytes; a negative count. */
    b.b[4] = 4;
    ck_assert_int_eq(decode_err(&b), PGOUTPUT_BAD_COUNT);
    b.b[1] = 0xFF;
    b.b[4] = 0xFF;
    ck_assert_int_eq(decode_err(&b), PGOUTPUT_BAD_COUNT);
    b.b[1] = 0x7F;
    ck_assert_int_eq(decode_err(&b), PGOUTPUT_BAD_COUNT);
    /* Fewer: trailing. */
    b.b[1] = 0;
    b.b[4] = 2;
    ck_assert_int_eq(decode_err(&b), PGOUTPUT_TRAILING);
    /* Zero relids. */
    b.n = 0;
    b_u8(b_u32(b_u8(&b, 'T'), 0), 0);
    decode_ok(&b, &m, &copy);
    ck_assert_uint_eq(m.truncate.nrelids, 0);
    free(copy);
}
END_TEST

START_TEST(test_message)
{
    struct pgoutput_msg m;
    char *copy;
    struct buf b = { .n = 0 };
    b_u64(b_u8(b_u8(&b, 'M'), PGOUTPUT_MESSAGE_TRANSACTIONAL), UINT64_C(0x1600001000));
    b_str(&b, "bloomguard");
    b_u32(&b, sizeof odd_bytes);
    b_raw(&b, odd_bytes, sizeof odd_bytes);
    decode_ok(&b, &m, &copy);
    ck_assert_int_eq(m.type, PGOUTPUT_MESSAGE);
    ck_assert_uint_eq(m.message.flags, PGOUTPUT_MESSAGE_TRANSACTIONAL);
    ck_assert_uint_eq(m.message.lsn, UINT64_C(0x1600001000));
    ck_assert_str_eq(m.message.prefix, "bloomguard");
    ck_assert_uint_eq(m.message.prefix_len, 10);
    ck_assert_uint_eq(m.message.content_len, sizeof odd_bytes);
    ck_assert_mem_eq(m.message.content, odd_bytes, sizeof odd_bytes);
    ck_inside(m.message.content, m.message.content_len, copy, b.n);
    free(copy);
    check_truncations(&b);

    /* Non-transactional, empty prefix and content. */
    b.n = 0;
    b_u32(b_str(b_u64(b_u8(b_u8(&b, 'M'), 0), 1), ""), 0);
    decode_ok(&b, &m, &copy);
    ck_assert_uint_eq(m.message.flags, 0);
    ck_assert_uint_eq(m.message.prefix_len, 0);
    ck_assert_uint_eq(m.message.content_len, 0);
    free(copy);
    check_truncations(&b);

    /* A negative content length; one past the end. */
    b.n -= 4;
    b_u32(&b, 0xFFFFFFFEu);
    ck_assert_int_eq(decode_err(&b), PGOUTPUT_BAD_LENGTH);
    b.n -= 4;
    b_u32(&b, 1);
    ck_assert_int_eq(decode_err(&b), PGOUTPUT_TRUNCATED);
    /* A prefix without its NUL: everything after it is swallowed, then the end. */
    b.n = 0;
    b_raw(b_u64(b_u8(b_u8(&b, 'M'), 1), 1), "bloomguard", 10);
    ck_assert_int_eq(decode_err(&b), PGOUTPUT_NO_NUL);
}
END_TEST

START_TEST(test_unknown_types)
{
    struct buf b = { .n = 0 };
    struct pgoutput_msg m;
    ck_assert_int_eq(pgoutput_decode(NULL, 0, &m), PGOUTPUT_TRUNCATED);
    /* Streaming and two-phase: known, but never asked for. */
    for (const char *t = "SEcAbPKrp"; *t; t++) {
        b.n = 0;
        b_u32(b_u8(&b, (unsigned char)*t), 1);
        ck_assert_int_eq(decode_err(&b), PGOUTPUT_UNSUPPORTED);
    }
    for (unsigned t = 0; t < 256; t++) {
        if (strchr("BCORYIUDTMSEcAbPKrp", (int)t) != NULL && t != 0)
            continue;
        b.n = 0;
        b_u32(b_u8(&b, t), 1);
        ck_assert_int_eq(decode_err(&b), PGOUTPUT_UNKNOWN_TYPE);
    }
}
END_TEST

/* ---- relation cache ---- */

static enum pgoutput_error put_relation(struct pgoutput_rels *c, const struct buf *b)
{
    struct pgoutput_msg m;
    char *copy;
    decode_ok(b, &m, &copy);
    enum pgoutput_error e = pgoutput_rels_put(c, &m);
    memset(copy, 0x5A, b->n);   /* the cache must have copied what it keeps */
    free(copy);
    return e;
}

START_TEST(test_rels_basic)
{
    struct pgoutput_rels *c = pgoutput_rels_new(16, 1 << 20);
    ck_assert_ptr_nonnull(c);
    ck_assert_ptr_null(pgoutput_rels_get(c, 16384));
    ck_assert_int_eq(pgoutput_rels_column(c, 16384, "id"), PGOUTPUT_NO_REL);

    struct buf b;
    build_relation(&b, 16384, "public");
    ck_assert_int_eq(put_relation(c, &b), PGOUTPUT_OK);
    ck_assert_uint_eq(pgoutput_rels_count(c), 1);
    const struct pgoutput_rel *r = pgoutput_rels_get(c, 16384);
    ck_assert_ptr_nonnull(r);
    ck_assert_uint_eq(r->relid, 16384);
    ck_assert_str_eq(r->nspname, "public");
    ck_assert_str_eq(r->relname, "users");
    ck_assert_int_eq(r->replident, 'd');
    ck_assert_uint_eq(r->ncols, 3);
    ck_assert_uint_eq(r->version, 1);
    ck_assert_str_eq(r->cols[0].name, "id");
    ck_assert_uint_eq(r->cols[0].typid, 20);
    ck_assert_int_eq(r->cols[0].typmod, -1);
    ck_assert_uint_eq(r->cols[0].flags, PGOUTPUT_ATTR_KEY);
    ck_assert_str_eq(r->cols[2].name, "note");
    ck_assert_uint_eq(r->cols[2].typid, 1043);
    ck_assert_int_eq(r->cols[2].typmod, 24);
    ck_assert_uint_eq(r->cols[2].flags, 0);
    ck_assert_int_eq(pgoutput_rels_column(c, 16384, "id"), 0);
    ck_assert_int_eq(pgoutput_rels_column(c, 16384, "email"), 1);
    ck_assert_int_eq(pgoutput_rels_column(c, 16384, "note"), 2);
    ck_assert_int_eq(pgoutput_rels_column(c, 16384, "ID"), PGOUTPUT_NO_COLUMN);
    ck_assert_int_eq(pgoutput_rels_column(c, 16384, "i"), PGOUTPUT_NO_COLUMN);
    ck_assert_int_eq(pgoutput_rels_column(c, 16384, ""), PGOUTPUT_NO_COLUMN);
    ck_assert_int_eq(pgoutput_rels_column(c, 16385, "id"), PGOUTPUT_NO_REL);
    ck_assert_int_eq(pgoutput_rels_column(c, 0, "id"), PGOUTPUT_NO_REL);
    size_t bytes = pgoutput_rels_bytes(c);
    ck_assert_uint_gt(bytes, 3 * sizeof(struct pgoutput_relcol));

    /* After an ALTER TABLE: other columns, same relid; replaced, not added. */
    b.n = 0;
    b_u32(b_u8(&b, 'R'), 16384);
    b_str(b_str(&b, "public"), "users");
    b_u16(b_u8(&b, 'f'), 2);
    b_u32(b_u32(b_str(b_u8(&b, 1), "email"), 25), (uint32_t)-1);
    b_u32(b_u32(b_str(b_u8(&b, 1), "id"), 2950), (uint32_t)-1);
    ck_assert_int_eq(put_relation(c, &b), PGOUTPUT_OK);
    ck_assert_uint_eq(pgoutput_rels_count(c), 1);
    r = pgoutput_rels_get(c, 16384);
    ck_assert_uint_eq(r->version, 2);
    ck_assert_uint_eq(r->ncols, 2);
    ck_assert_int_eq(r->replident, 'f');
    ck_assert_int_eq(pgoutput_rels_column(c, 16384, "id"), 1);
    ck_assert_uint_eq(r->cols[1].typid, 2950);
    ck_assert_int_eq(pgoutput_rels_column(c, 16384, "note"), PGOUTPUT_NO_COLUMN);
    ck_assert_uint_lt(pgoutput_rels_bytes(c), bytes);

    /* pg_catalog's empty namespace is spelled out. */
    build_relation(&b, 99, "");
    ck_assert_int_eq(put_relation(c, &b), PGOUTPUT_OK);
    ck_assert_str_eq(pgoutput_rels_get(c, 99)->nspname, "pg_catalog");
    ck_assert_uint_eq(pgoutput_rels_count(c), 2);
    ck_assert_str_eq(pgoutput_rels_get(c, 16384)->relname, "users");

    /* Only Relation messages go in. */
    struct pgoutput_msg m = { .type = PGOUTPUT_INSERT };
    ck_assert_int_eq(pgoutput_rels_put(c, &m), PGOUTPUT_WRONG_TYPE);
    ck_assert_uint_eq(pgoutput_rels_count(c), 2);
    pgoutput_rels_free(c);
    pgoutput_rels_free(NULL);
    ck_assert_ptr_null(pgoutput_rels_new(0, 100));
    ck_assert_ptr_null(pgoutput_rels_new(100, 0));
}
END_TEST

START_TEST(test_rels_bounds)
{
    struct buf b;
    /* By count: the third relation is refused, the first two stay, replacing one still works. */
    struct pgoutput_rels *c = pgoutput_rels_new(2, 1 << 20);
    build_relation(&b, 1, "a");
    ck_assert_int_eq(put_relation(c, &b), PGOUTPUT_OK);
    build_relation(&b, 2, "a");
    ck_assert_int_eq(put_relation(c, &b), PGOUTPUT_OK);
    build_relation(&b, 3, "a");
    ck_assert_int_eq(put_relation(c, &b), PGOUTPUT_CACHE_FULL);
    ck_assert_ptr_null(pgoutput_rels_get(c, 3));
    ck_assert_uint_eq(pgoutput_rels_count(c), 2);
    build_relation(&b, 2, "b");
    ck_assert_int_eq(put_relation(c, &b), PGOUTPUT_OK);
    ck_assert_str_eq(pgoutput_rels_get(c, 2)->nspname, "b");
    ck_assert_uint_eq(pgoutput_rels_get(c, 2)->version, 2);
    pgoutput_rels_free(c);

    /* By bytes: room for exactly one; a bigger replacement is refused and the old one kept. */
    build_relation(&b, 1, "a");
    c = pgoutput_rels_new(100, 1 << 20);
    ck_assert_int_eq(put_relation(c, &b), PGOUTPUT_OK);
    size_t one = pgoutput_rels_bytes(c);
    pgoutput_rels_free(c);
    c = pgoutput_rels_new(100, one);
    ck_assert_int_eq(put_relation(c, &b), PGOUTPUT_OK);
    ck_assert_uint_eq(pgoutput_rels_bytes(c), one);
    build_relation(&b, 2, "a");
    ck_assert_int_eq(put_relation(c, &b), PGOUTPUT_CACHE_FULL);
    build_relation(&b, 1, "ab");
    ck_assert_int_eq(put_relation(c, &b), PGOUTPUT_CACHE_FULL);
    ck_assert_str_eq(pgoutput_rels_get(c, 1)->nspname, "a");
    ck_assert_uint_eq(pgoutput_rels_get(c, 1)->version, 1);
    build_relation(&b, 1, "b");         /* the same size fits */
    ck_assert_int_eq(put_relation(c, &b), PGOUTPUT_OK);
    ck_assert_str_eq(pgoutput_rels_get(c, 1)->nspname, "b");
    pgoutput_rels_free(c);
}
END_TEST

START_TEST(test_rels_many)
{
    /* Enough relids (consecutive, as OIDs are, and scattered) to grow the table several times. */
    struct pgoutput_rels *c = pgoutput_rels_new(5000, SIZE_MAX);
    struct buf b;
    for (uint32_t i = 0; i < 2000; i++) {
        uint32_t relid = i < 1000 ? 16384 + i : i * 2654435761u;
        build_relation(&b, relid, i % 2 ? "odd" : "even");
        ck_assert_int_eq(put_relation(c, &b), PGOUTPUT_OK);
    }
    ck_assert_uint_eq(pgoutput_rels_count(c), 2000);
    for (uint32_t i = 0; i < 2000; i++) {
        uint32_t relid = i < 1000 ? 16384 + i : i * 2654435761u;
        const struct pgoutput_rel *r = pgoutput_rels_get(c, relid);
        ck_assert_ptr_nonnull(r);
        ck_assert_uint_eq(r->relid, relid);
        ck_assert_str_eq(r->nspname, i % 2 ? "odd" : "even");
        ck_assert_int_eq(pgoutput_rels_column(c, relid, "note"), 2);
    }
    ck_assert_ptr_null(pgoutput_rels_get(c, 16384 + 1000));
    pgoutput_rels_free(c);
}
END_TEST

/* ---- encoders ---- */

START_TEST(test_status)
{
    unsigned char buf[40];
    memset(buf, 0xEE, sizeof buf);
    ck_assert_uint_eq(pgoutput_status_encode(buf, 33, 1, 2, 3, 4, true), 0);
    ck_assert_uint_eq(buf[0], 0xEE);
    ck_assert_uint_eq(pgoutput_status_encode(buf, sizeof buf, UINT64_C(0x16B374D848),
                                             UINT64_C(0x0102030405060708), 0, INT64_C(-2), true),
                      PGOUTPUT_STATUS_SIZE);
    static const unsigned char want[PGOUTPUT_STATUS_SIZE] = {
        'r',
        0, 0, 0, 0x16, 0xB3, 0x74, 0xD8, 0x48,
        1, 2, 3, 4, 5, 6, 7, 8,
        0, 0, 0, 0, 0, 0, 0, 0,
        0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFE,
        1
    };
    ck_assert_mem_eq(buf, want, sizeof want);
    ck_assert_uint_eq(buf[PGOUTPUT_STATUS_SIZE], 0xEE);
    ck_assert_uint_eq(pgoutput_status_encode(buf, PGOUTPUT_STATUS_SIZE, 0, 0, 0, 0, false), 34);
    ck_assert_uint_eq(buf[33], 0);
}
END_TEST

START_TEST(test_time)
{
    ck_assert_int_eq(pgoutput_time_from_unix_us(PGOUTPUT_EPOCH_UNIX_US), 0);
    ck_assert_int_eq(pgoutput_time_from_unix_us(0), -INT64_C(946684800000000));
    /* 2024-01-01 00:00:00 UTC. */
    ck_assert_int_eq(pgoutput_time_from_unix_us(INT64_C(1704067200000000)), INT64_C(757382400000000));
    ck_assert_int_eq(pgoutput_time_to_unix_us(INT64_C(757382400000000)), INT64_C(1704067200000000));
    ck_assert_int_eq(pgoutput_time_to_unix_us(0), PGOUTPUT_EPOCH_UNIX_US);
    ck_assert_int_eq(pgoutput_time_from_unix_us(INT64_MIN), INT64_MIN);
    ck_assert_int_eq(pgoutput_time_from_unix_us(INT64_MIN + PGOUTPUT_EPOCH_UNIX_US), INT64_MIN);
    ck_assert_int_eq(pgoutput_time_from_unix_us(INT64_MAX), INT64_MAX - PGOUTPUT_EPOCH_UNIX_US);
    ck_assert_int_eq(pgoutput_time_to_unix_us(INT64_MAX), INT64_MAX);
    ck_assert_int_eq(pgoutput_time_to_unix_us(INT64_MAX - PGOUTPUT_EPOCH_UNIX_US), INT64_MAX);
    ck_assert_int_eq(pgoutput_time_to_unix_us(INT64_MIN), INT64_MIN + PGOUTPUT_EPOCH_UNIX_US);
}
END_TEST

START_TEST(test_lsn)
{
    static const struct { const char *s; uint64_t v; } ok[] = {
        { "16/B374D848", UINT64_C(0x16B374D848) },
        { "0/0", 0 },
        { "0/1", 1 },
        { "00000000/00000001", 1 },
        { "0/00000000", 0 },
        { "ffffffff/FFFFFFFF", UINT64_MAX },
        { "aBc/dEf", UINT64_C(0xABC00000DEF) },
        { "1/0", UINT64_C(0x100000000) },
    };
    /* What pg_lsn_in refuses (checked against PostgreSQL 15). */
    static const char *bad[] = {
        "", "/", "0/", "/0", " 0/1", "0/1 ", "0 /1", "0/ 1", "0x1/1", "+1/1", "1/-1",
        "123456789/1", "1/123456789", "0/1/2", "g/1", "1/g", "01", "0//1", "1\n/1",
        "-0/0", "0/1\n",
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        uint64_t v = 42;
        ck_assert_msg(pgoutput_lsn_parse(ok[i].s, strlen(ok[i].s), &v), "parse %s", ok[i].s);
        ck_assert_uint_eq(v, ok[i].v);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t v = 42;
        ck_assert_msg(!pgoutput_lsn_parse(bad[i], strlen(bad[i]), &v), "parse %s", bad[i]);
        ck_assert_uint_eq(v, 42);
    }
    /* The length is what counts, not a terminator: not NUL-terminated, and a NUL inside. */
    uint64_t v = 0;
    ck_assert(pgoutput_lsn_parse("1/2345", 4, &v));
    ck_assert_uint_eq(v, UINT64_C(0x100000023));
    ck_assert(!pgoutput_lsn_parse("1/2\0" "3", 5, &v));
    ck_assert(!pgoutput_lsn_parse(NULL, 0, &v));

    static const struct { uint64_t v; const char *s; } fmt[] = {
        { 0, "0/0" }, { 1, "0/1" }, { UINT64_C(0x16B374D848), "16/B374D848" },
        { UINT64_MAX, "FFFFFFFF/FFFFFFFF" }, { UINT64_C(0x100000000), "1/0" },
        { UINT64_C(0xABC00000DEF), "ABC/DEF" },
    };
    char buf[PGOUTPUT_LSN_BUFSIZE + 1];
    for (size_t i = 0; i < sizeof fmt / sizeof fmt[0]; i++) {
        memset(buf, 'Z', sizeof buf);
        ck_assert_uint_eq(pgoutput_lsn_format(fmt[i].v, buf), strlen(fmt[i].s));
        ck_assert_str_eq(buf, fmt[i].s);
    }
    memset(buf, 'Z', sizeof buf);
    ck_assert_uint_eq(pgoutput_lsn_format(UINT64_MAX, buf), PGOUTPUT_LSN_BUFSIZE - 1);
    ck_assert_int_eq(buf[PGOUTPUT_LSN_BUFSIZE], 'Z');

    /* Round trips over values of every digit count. */
    uint64_t x = UINT64_C(0x9E3779B97F4A7C15);
    for (int i = 0; i < 20000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        uint64_t val = x >> (i % 64), back = 0;
        size_t n = pgoutput_lsn_format(val, buf);
        ck_assert(pgoutput_lsn_parse(buf, n, &back));
        ck_assert_uint_eq(back, val);
    }
}
END_TEST

/* A Relation of relid 7 from "name:typid[:typmod] ..." (space-separated), in that order. */
static void build_columns(struct buf *b, const char *spec)
{
    char copy[256], *save = NULL;
    unsigned n = 0;
    snprintf(copy, sizeof copy, "%s", spec);
    b->n = 0;
    b_u32(b_u8(b, 'R'), 7);
    b_str(b, "public");
    b_str(b, "users");
    b_u8(b, 'd');
    size_t count_at = b->n;
    b_u16(b, 0);
    for (char *tok = strtok_r(copy, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
        char *typ = strchr(tok, ':');
        ck_assert_ptr_nonnull(typ);
        *typ++ = '\0';
        char *mod = strchr(typ, ':');
        if (mod)
            *mod++ = '\0';
        b_u32(b_str(b_u8(b, 0), tok), (uint32_t)strtoul(typ, NULL, 10));
        b_u32(b, mod ? (uint32_t)strtol(mod, NULL, 10) : (uint32_t)-1);
        n++;
    }
    b->b[count_at] = (unsigned char)(n >> 8);
    b->b[count_at + 1] = (unsigned char)n;
}

/*
 * The column "id" followed across a stream's Relation messages of one
 * relation: each step a new message and what the tracker must say (rename
 * of others, columns added after it: the same; the column renamed away,
 * dropped, moved, retyped: a gap), and where it then reads.
 */
static const struct track_step {
    const char *columns;
    enum pgoutput_track_result want;
    int col;
} track_steps[] = {
    { "pk:23 id:25", PGOUTPUT_TRACK_FOUND, 1 },
    { "pk:23 id:25", PGOUTPUT_TRACK_SAME, 1 },              /* resent after an unrelated ALTER */
    { "key:23 id:25 extra:16", PGOUTPUT_TRACK_SAME, 1 },    /* another renamed, one added after */
    { "pk:23 uid:25", PGOUTPUT_TRACK_MISSING, -1 },         /* ALTER ... RENAME id TO uid */
    { "pk:23 uid:25", PGOUTPUT_TRACK_MISSING, -1 },         /* still gone: another version */
    { "pk:23 id:25", PGOUTPUT_TRACK_FOUND, 1 },             /* renamed back */
    { "id:25 pk:23", PGOUTPUT_TRACK_MOVED, 0 },             /* reordered: another column? */
    { "id:1043:44", PGOUTPUT_TRACK_RETYPED, 0 },            /* ALTER COLUMN TYPE varchar(40) */
    { "id:1043:84", PGOUTPUT_TRACK_RETYPED, 0 },            /* varchar(80): the typmod */
    { "x:23 y:23 z:23", PGOUTPUT_TRACK_MISSING, -1 },       /* dropped */
    { "x:23 id:20", PGOUTPUT_TRACK_FOUND, 1 },              /* a new id, after MISSING */
};

START_TEST(test_rels_track)
{
    struct pgoutput_rels *c = pgoutput_rels_new(4, 1 << 20);
    struct pgoutput_track tr = { 0 };
    struct buf b;
    ck_assert_int_eq(pgoutput_rels_track(c, 7, "id", &tr), PGOUTPUT_TRACK_NO_REL);
    ck_assert_uint_eq(tr.version, 0);
    for (size_t i = 0; i < sizeof track_steps / sizeof *track_steps; i++) {
        const struct track_step *st = &track_steps[i];
        build_columns(&b, st->columns);
        ck_assert_int_eq(put_relation(c, &b), PGOUTPUT_OK);
        enum pgoutput_track_result r = pgoutput_rels_track(c, 7, "id", &tr);
        bool at = st->col < 0 ? tr.col < 0 : tr.col == st->col;
        ck_assert_msg(r == st->want && at,
                      "step %zu (%s): result %d at %d, want %d at %d", i, st->columns, (int)r,
                      tr.col, (int)st->want, st->col);
        /* Until the next message nothing changes: every row of this version reads there. */
        ck_assert_int_eq(pgoutput_rels_track(c, 7, "id", &tr), PGOUTPUT_TRACK_SAME);
        ck_assert(st->col < 0 ? tr.col < 0 : tr.col == st->col);
    }
    pgoutput_rels_free(c);
}
END_TEST

CHECK_SUITE("pgoutput",
    CHECK_CASE("decode"),
    CHECK_TEST(test_strerror),
    CHECK_TEST(test_frame_xlogdata),
    CHECK_TEST(test_frame_keepalive),
    CHECK_TEST(test_begin_commit_origin),
    CHECK_TEST(test_relation),
    CHECK_TEST(test_type),
    CHECK_TEST(test_insert),
    CHECK_TEST(test_tuple_errors),
    CHECK_TEST(test_iter_defensive),
    CHECK_TEST(test_update),
    CHECK_TEST(test_delete),
    CHECK_TEST(test_truncate),
    CHECK_TEST(test_message),
    CHECK_TEST(test_unknown_types),
    CHECK_CASE("rels"),
    CHECK_TEST(test_rels_basic),
    CHECK_TEST(test_rels_bounds),
    CHECK_TEST(test_rels_many),
    CHECK_TEST(test_rels_track),
    CHECK_CASE("encode"),
    CHECK_TEST(test_status),
    CHECK_TEST(test_time),
    CHECK_TEST(test_lsn),
)
