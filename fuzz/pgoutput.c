/*
 * Fuzz the logical replication decoder (src/pg/pgoutput.c) with arbitrary
 * CopyData payloads: the input is decoded as a frame and, either way, as a
 * bare pgoutput message.  What decodes must lie inside the input, walk to
 * exactly its stated column counts, and encode back to the very bytes it
 * came from (nothing lost, nothing skipped); a Relation goes through the
 * relation cache; the input is also tried as LSN text.  The seeds include
 * payloads captured from PostgreSQL 15 by tests/pgotool -D.
 */
#include <string.h>

#include "fuzz.h"
#include "pgoutput.h"

struct span {
    const char *lo, *hi;
};

#define INSIDE(s, p, n) \
    FUZZ_CHECK((const char *)(p) >= (s)->lo && (size_t)((s)->hi - (const char *)(p)) >= (size_t)(n))

/* The re-encoder: writes must end exactly at the input's length. */
struct out {
    unsigned char b[1 << 16];
    size_t n;
};

static void o_raw(struct out *o, const void *p, size_t n)
{
    FUZZ_CHECK(n <= sizeof o->b - o->n);
    if (n)
        memcpy(o->b + o->n, p, n);
    o->n += n;
}

static void o_be(struct out *o, uint64_t v, int bytes)
{
    unsigned char t[8];
    for (int i = 0; i < bytes; i++)
        t[i] = (unsigned char)(v >> (8 * (bytes - 1 - i)));
    o_raw(o, t, (size_t)bytes);
}

static void o_u8(struct out *o, unsigned v) { o_be(o, v, 1); }

static void o_str(struct out *o, const struct span *s, const char *p, size_t len)
{
    INSIDE(s, p, len + 1);
    FUZZ_CHECK(p[len] == 0 && memchr(p, 0, len) == NULL);
    o_raw(o, p, len + 1);
}

static void o_tuple(struct out *o, const struct span *s, const struct pgoutput_tuple *t)
{
    struct pgoutput_iter it;
    struct pgoutput_col col;
    unsigned n = 0;
    INSIDE(s, t->data, t->len);
    o_be(o, t->ncols, 2);
    pgoutput_tuple_iter(t, &it);
    while (pgoutput_tuple_next(&it, &col)) {
        o_u8(o, (unsigned char)col.kind);
        if (col.kind == 't' || col.kind == 'b') {
            INSIDE(s, col.value, col.len);
            FUZZ_CHECK(col.len <= INT32_MAX);
            o_be(o, col.len, 4);
            o_raw(o, col.value, col.len);
        } else {
            FUZZ_CHECK((col.kind == 'n' || col.kind == 'u') && col.value == NULL && col.len == 0);
        }
        struct pgoutput_col again;
        FUZZ_CHECK(pgoutput_tuple_get(t, n, &again));
        FUZZ_CHECK(again.kind == col.kind && again.value == col.value && again.len == col.len);
        n++;
    }
    FUZZ_CHECK(n == t->ncols);
    FUZZ_CHECK(!pgoutput_tuple_get(t, n, &col));
}

static void check_rels(const struct pgoutput_msg *m)
{
    struct pgoutput_rels *c = pgoutput_rels_new(4, 1 << 22);
    FUZZ_CHECK(c != NULL);
    FUZZ_CHECK(pgoutput_rels_put(c, m) == PGOUTPUT_OK);
    FUZZ_CHECK(pgoutput_rels_put(c, m) == PGOUTPUT_OK);      /* a replacement */
    const struct pgoutput_rel *r = pgoutput_rels_get(c, m->relation.relid);
    FUZZ_CHECK(r != NULL && r->version == 2 && r->ncols == m->relation.attrs.natts);
    FUZZ_CHECK(pgoutput_rels_count(c) == 1);
    FUZZ_CHECK(strcmp(r->relname, m->relation.relname) == 0);
    FUZZ_CHECK(strcmp(r->nspname, m->relation.nspname_len ? m->relation.nspname : "pg_catalog") == 0);
    struct pgoutput_iter it;
    struct pgoutput_attr a;
    pgoutput_attrs_iter(&m->relation.attrs, &it);
    for (unsigned i = 0; pgoutput_attrs_next(&it, &a); i++) {
        FUZZ_CHECK(strcmp(r->cols[i].name, a.name) == 0);
        FUZZ_CHECK(r->cols[i].typid == a.typid && r->cols[i].typmod == a.typmod && r->cols[i].flags == a.flags);
        /* The first column of that name. */
        int at = pgoutput_rels_column(c, m->relation.relid, a.name);
        FUZZ_CHECK(at >= 0 && (unsigned)at <= i && strcmp(r->cols[at].name, a.name) == 0);
    }
    FUZZ_CHECK(pgoutput_rels_get(c, m->relation.relid + 1) == NULL);
    FUZZ_CHECK(pgoutput_rels_column(c, m->relation.relid + 1, "id") == PGOUTPUT_NO_REL);
    pgoutput_rels_free(c);
}

/* Decode data[0..size) as a message; if it decodes, it must encode back to itself. */
static void one_message(const char *data, size_t size)
{
    struct pgoutput_msg m;
    struct span s = { data, data + size };
    static struct out o;
    if (pgoutput_decode(data, size, &m) != PGOUTPUT_OK)
        return;
    o.n = 0;
    o_u8(&o, (unsigned char)m.type);
    switch (m.type) {
    case PGOUTPUT_BEGIN:
        o_be(&o, m.begin.final_lsn, 8);
        o_be(&o, (uint64_t)m.begin.commit_time, 8);
        o_be(&o, m.begin.xid, 4);
        break;
    case PGOUTPUT_COMMIT:
        FUZZ_CHECK(m.commit.flags == 0);
        o_u8(&o, m.commit.flags);
        o_be(&o, m.commit.commit_lsn, 8);
        o_be(&o, m.commit.end_lsn, 8);
        o_be(&o, (uint64_t)m.commit.commit_time, 8);
        break;
    case PGOUTPUT_ORIGIN:
        o_be(&o, m.origin.lsn, 8);
        o_str(&o, &s, m.origin.name, m.origin.name_len);
        break;
    case PGOUTPUT_RELATION: {
        struct pgoutput_iter it;
        struct pgoutput_attr a;
        unsigned n = 0;
        o_be(&o, m.relation.relid, 4);
        o_str(&o, &s, m.relation.nspname, m.relation.nspname_len);
        o_str(&o, &s, m.relation.relname, m.relation.relname_len);
        o_u8(&o, (unsigned char)m.relation.replident);
        INSIDE(&s, m.relation.attrs.data, m.relation.attrs.len);
        o_be(&o, m.relation.attrs.natts, 2);
        pgoutput_attrs_iter(&m.relation.attrs, &it);
        while (pgoutput_attrs_next(&it, &a)) {
            o_u8(&o, a.flags);
            o_str(&o, &s, a.name, a.name_len);
            o_be(&o, a.typid, 4);
            o_be(&o, (uint32_t)a.typmod, 4);
            n++;
        }
        FUZZ_CHECK(n == m.relation.attrs.natts);
        check_rels(&m);
        break;
    }
    case PGOUTPUT_TYPE:
        o_be(&o, m.pgtype.typid, 4);
        o_str(&o, &s, m.pgtype.nspname, m.pgtype.nspname_len);
        o_str(&o, &s, m.pgtype.typname, m.pgtype.typname_len);
        break;
    case PGOUTPUT_INSERT:
        o_be(&o, m.insert.relid, 4);
        o_u8(&o, 'N');
        o_tuple(&o, &s, &m.insert.tuple);
        break;
    case PGOUTPUT_UPDATE:
        o_be(&o, m.update.relid, 4);
        if (m.update.old_kind != 0) {
            FUZZ_CHECK(m.update.old_kind == 'K' || m.update.old_kind == 'O');
            o_u8(&o, (unsigned char)m.update.old_kind);
            o_tuple(&o, &s, &m.update.old);
        } else {
            FUZZ_CHECK(m.update.old.ncols == 0 && m.update.old.data == NULL);
        }
        o_u8(&o, 'N');
        o_tuple(&o, &s, &m.update.tuple);
        break;
    case PGOUTPUT_DELETE:
        FUZZ_CHECK(m.delete.old_kind == 'K' || m.delete.old_kind == 'O');
        o_be(&o, m.delete.relid, 4);
        o_u8(&o, (unsigned char)m.delete.old_kind);
        o_tuple(&o, &s, &m.delete.old);
        break;
    case PGOUTPUT_TRUNCATE:
        FUZZ_CHECK(m.truncate.nrelids <= INT32_MAX);
        INSIDE(&s, m.truncate.relids, (size_t)m.truncate.nrelids * 4);
        o_be(&o, m.truncate.nrelids, 4);
        o_u8(&o, m.truncate.options);
        for (uint32_t i = 0; i < m.truncate.nrelids; i++)
            o_be(&o, pgoutput_truncate_relid(&m, i), 4);
        break;
    case PGOUTPUT_MESSAGE:
        o_u8(&o, m.message.flags);
        o_be(&o, m.message.lsn, 8);
        o_str(&o, &s, m.message.prefix, m.message.prefix_len);
        INSIDE(&s, m.message.content, m.message.content_len);
        FUZZ_CHECK(m.message.content_len <= INT32_MAX);
        o_be(&o, m.message.content_len, 4);
        o_raw(&o, m.message.content, m.message.content_len);
        break;
    default:
        FUZZ_CHECK(!"pgoutput_decode returned an unknown type");
    }
    FUZZ_CHECK(o.n == size && memcmp(o.b, data, size) == 0);
}

static void one_lsn(const char *data, size_t size)
{
    uint64_t v, back;
    char buf[PGOUTPUT_LSN_BUFSIZE];
    if (!pgoutput_lsn_parse(data, size, &v))
        return;
    size_t n = pgoutput_lsn_format(v, buf);
    FUZZ_CHECK(n < sizeof buf && buf[n] == 0 && n <= size);
    FUZZ_CHECK(pgoutput_lsn_parse(buf, n, &back) && back == v);
}

FUZZ_TARGET(pgoutput)
{
    const char *p = (const char *)data;
    struct pgoutput_frame f;
    if (size > (1 << 16))
        return 0;
    if (pgoutput_frame_decode(p, size, &f) == PGOUTPUT_OK) {
        if (f.type == PGOUTPUT_XLOGDATA) {
            FUZZ_CHECK(size >= 25 && f.data == p + 25 && f.len == size - 25);
            FUZZ_CHECK(f.reply_requested == 0);
            one_message(f.data, f.len);
        } else {
            FUZZ_CHECK(f.type == PGOUTPUT_KEEPALIVE && size == 18 && f.data == NULL);
            FUZZ_CHECK(f.reply_requested == (uint8_t)p[17]);
        }
    }
    one_message(p, size);
    one_lsn(p, size);
    return 0;
}
