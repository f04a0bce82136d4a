/*
 * Fuzz the logical follower's schema rules with an oracle: the input is a
 * program of DDL on one table (rename, retype, drop, add, reorder the
 * columns a Relation message lists), rows inserted and updated, COPYs and
 * probes.  A model keeps the table as the catalog has it (each column's
 * number, name, type and catalog row version) and its rows; the stream is
 * made of real pgoutput bytes, sent as PostgreSQL sends them (a Relation
 * message before the first change after a DDL, never for the DDL itself),
 * decoded by pgoutput_decode, kept by the relation cache and read through
 * pgoutput_rels_track, as logical_stream.c reads them.  A probe compares
 * the column's identity with the last COPY's, as table_schema does with
 * LOADER_SHAPE_SQL's fingerprint.
 *
 * The oracle is the contract: after a probe that found no change, with no
 * gap reported since the last COPY (by the tracker: MISSING, MOVED,
 * RETYPED; or by a probe), every row's ID, spelled as its column's type
 * now spells it, is in the filter.  A follower that reads the wrong column,
 * or a renamed one's rows as nothing, without saying so fails it.
 */
#include <string.h>

#include "fuzz.h"
#include "pgoutput.h"

#define RELID 42
#define MAX_ATTS 6
#define MAX_ROWS 64
#define MAX_KEYS 512
#define VAL_LEN 24

static const char *const names[] = { "id", "uid", "a", "b", "pk" };
static const uint32_t types[] = { 23, 20, 25, 1043 };

struct att {
    int attnum;
    char name[8];
    uint32_t typid;
    unsigned version;           /* pg_attribute's xmin: every ALTER of the column */
};

struct row {
    bool live;
    char val[MAX_ATTS + 1][VAL_LEN];    /* by attnum slot; "" = NULL */
};

struct model {
    struct att att[MAX_ATTS];
    unsigned natts;
    int next_attnum;
    unsigned rotate;            /* the order a Relation lists them in (a column list's) */
    bool dirty;                 /* a DDL since the last Relation message */
    struct row rows[MAX_ROWS];
    unsigned nrows;
    /* The filter: spelled keys. */
    char keys[MAX_KEYS][VAL_LEN + 8];
    unsigned nkeys;
    uint32_t spell;             /* the type the live filter's load spelled with */
    char loaded[32];            /* the shape the last COPY read */
    bool gap;                   /* reported since the last COPY */
    struct pgoutput_rels *rels;
    struct pgoutput_track tr;
};

/* ------------------------------------------------------------ the bytes -- */

struct out {
    unsigned char b[4096];
    size_t n;
};

static void o_raw(struct out *o, const void *p, size_t n)
{
    FUZZ_CHECK(o->n + n <= sizeof o->b);
    memcpy(o->b + o->n, p, n);
    o->n += n;
}

static void o_be(struct out *o, uint64_t v, int bytes)
{
    for (int i = bytes - 1; i >= 0; i--) {
        unsigned char c = (unsigned char)(v >> (8 * i));
        o_raw(o, &c, 1);
    }
}

static void o_str(struct out *o, const char *s)
{
    o_raw(o, s, strlen(s) + 1);
}

/* The i-th column in the order the Relation (and every tuple) lists them. */
static const struct att *sent(const struct model *m, unsigned i)
{
    return &m->att[(i + m->rotate) % m->natts];
}

static void decode_put(struct model *m, const struct out *o)
{
    struct pgoutput_msg msg;
    FUZZ_CHECK(pgoutput_decode(o->b, o->n, &msg) == PGOUTPUT_OK);
    FUZZ_CHECK(msg.type == PGOUTPUT_RELATION && msg.relation.attrs.natts == m->natts);
    FUZZ_CHECK(pgoutput_rels_put(m->rels, &msg) == PGOUTPUT_OK);
}

static void send_relation(struct model *m)
{
    struct out o = { .n = 0 };
    o_raw(&o, "R", 1);
    o_be(&o, RELID, 4);
    o_str(&o, "public");
    o_str(&o, "users");
    o_raw(&o, "d", 1);
    o_be(&o, m->natts, 2);
    for (unsigned i = 0; i < m->natts; i++) {
        const struct att *a = sent(m, i);
        o_be(&o, 0, 1);
        o_str(&o, a->name);
        o_be(&o, a->typid, 4);
        o_be(&o, UINT32_MAX, 4);                /* typmod -1 */
    }
    decode_put(m, &o);
    m->dirty = false;
}

/* ------------------------------------------------------------ the model -- */

static int att_named(const struct model *m, const char *name)
{
    for (unsigned i = 0; i < m->natts; i++)
        if (strcmp(m->att[i].name, name) == 0)
            return (int)i;
    return -1;
}

/* A value spelled as type typid spells it (a type change respells every ID). */
static void spelled(char *out, size_t cap, const char *val, uint32_t typid)
{
    snprintf(out, cap, "%s:%u", val, (unsigned)typid);
}

static bool in_filter(const struct model *m, const char *key)
{
    for (unsigned i = 0; i < m->nkeys; i++)
        if (strcmp(m->keys[i], key) == 0)
            return true;
    return false;
}

static void add_key(struct model *m, const char *val)
{
    char key[VAL_LEN + 8];
    spelled(key, sizeof key, val, m->spell);
    if (!in_filter(m, key) && m->nkeys < MAX_KEYS)
        snprintf(m->keys[m->nkeys++], sizeof m->keys[0], "%s", key);
}

/* The column's identity the daemon's probe compares: number, type, catalog row version. */
static void shape(const struct model *m, char *out, size_t cap)
{
    int k = att_named(m, "id");
    if (k < 0)
        snprintf(out, cap, "none");
    else
        snprintf(out, cap, "%d.%u.%u", m->att[k].attnum, (unsigned)m->att[k].typid,
                 m->att[k].version);
}

/* A COPY: every row's ID, spelled as the column is now; fails without the column. */
static void copy(struct model *m)
{
    int k = att_named(m, "id");
    if (k < 0)
        return;
    m->nkeys = 0;
    m->spell = m->att[k].typid;
    for (unsigned r = 0; r < m->nrows; r++) {
        const char *v = m->rows[r].val[m->att[k].attnum];
        if (m->rows[r].live && v[0] != '\0')
            add_key(m, v);
    }
    shape(m, m->loaded, sizeof m->loaded);
    m->gap = false;
}

/* A change of row r as the stream carries it: the tuple, then what the follower reads. */
static void stream_row(struct model *m, unsigned r, bool update)
{
    if (m->dirty || pgoutput_rels_get(m->rels, RELID) == NULL)
        send_relation(m);
    struct out o = { .n = 0 };
    o_raw(&o, update ? "U" : "I", 1);
    o_be(&o, RELID, 4);
    o_raw(&o, "N", 1);
    o_be(&o, m->natts, 2);
    for (unsigned i = 0; i < m->natts; i++) {
        const char *v = m->rows[r].val[sent(m, i)->attnum];
        if (v[0] == '\0') {
            o_raw(&o, "n", 1);
        } else {
            o_raw(&o, "t", 1);
            o_be(&o, strlen(v), 4);
            o_raw(&o, v, strlen(v));
        }
    }
    struct pgoutput_msg msg;
    FUZZ_CHECK(pgoutput_decode(o.b, o.n, &msg) == PGOUTPUT_OK);
    const struct pgoutput_tuple *t = update ? &msg.update.tuple : &msg.insert.tuple;
    /* logical_stream.c's apply_tuple, without the table. */
    enum pgoutput_track_result res = pgoutput_rels_track(m->rels, RELID, "id", &m->tr);
    FUZZ_CHECK(res != PGOUTPUT_TRACK_NO_REL);
    if (res == PGOUTPUT_TRACK_MISSING || res == PGOUTPUT_TRACK_MOVED
        || res == PGOUTPUT_TRACK_RETYPED)
        m->gap = true;
    struct pgoutput_col c;
    if (m->tr.col >= 0 && pgoutput_tuple_get(t, (unsigned)m->tr.col, &c) && c.kind == 't') {
        char v[VAL_LEN];
        FUZZ_CHECK(c.len < sizeof v);
        memcpy(v, c.value, c.len);
        v[c.len] = '\0';
        add_key(m, v);
    }
}

/* The probe, then the oracle when it proves the filter fresh. */
static void probe(struct model *m)
{
    char now[32];
    shape(m, now, sizeof now);
    if (strcmp(now, m->loaded) != 0)
        m->gap = true;
    if (m->gap)
        return;                 /* degraded: "maybe" until a COPY */
    int k = att_named(m, "id");
    FUZZ_CHECK(k >= 0);         /* the loaded shape had it, and it is unchanged */
    for (unsigned r = 0; r < m->nrows; r++) {
        const char *v = m->rows[r].val[m->att[k].attnum];
        char key[VAL_LEN + 8];
        if (!m->rows[r].live || v[0] == '\0')
            continue;
        spelled(key, sizeof key, v, m->att[k].typid);
        if (!in_filter(m, key)) {
            fprintf(stderr, "row %u's id %s is not in the filter, and nothing said so\n", r, key);
            FUZZ_CHECK(!"a row the SELECT finds would answer 404");
        }
    }
}

/* ------------------------------------------------------------ the program -- */

static void ddl_or_dml(struct model *m, unsigned op, unsigned arg, unsigned step)
{
    struct att *a = m->natts ? &m->att[arg % m->natts] : NULL;
    switch (op % 9) {
    case 0: {                   /* ALTER TABLE ... RENAME COLUMN */
        const char *to = names[(arg / 8) % (sizeof names / sizeof *names)];
        if (a != NULL && att_named(m, to) < 0) {
            snprintf(a->name, sizeof a->name, "%s", to);
            a->version++;
            m->dirty = true;
        }
        break;
    }
    case 1:                     /* ALTER COLUMN ... TYPE */
        if (a != NULL) {
            a->typid = types[(arg / 8) % (sizeof types / sizeof *types)];
            a->version++;
            m->dirty = true;
        }
        break;
    case 2:                     /* DROP COLUMN */
        if (a != NULL && m->natts > 1) {
            for (unsigned r = 0; r < m->nrows; r++)
                m->rows[r].val[a->attnum][0] = '\0';
            *a = m->att[--m->natts];
            /* Catalog order is by number: keep the array sorted. */
            for (unsigned i = 1; i < m->natts; i++)
                for (unsigned j = i; j > 0 && m->att[j - 1].attnum > m->att[j].attnum; j--) {
                    struct att t = m->att[j];
                    m->att[j] = m->att[j - 1];
                    m->att[j - 1] = t;
                }
            m->dirty = true;
        }
        break;
    case 3: {                   /* ADD COLUMN (a new number; NULL in every row) */
        const char *name = names[(arg / 8) % (sizeof names / sizeof *names)];
        if (m->natts < MAX_ATTS && m->next_attnum <= MAX_ATTS && att_named(m, name) < 0) {
            struct att *n = &m->att[m->natts++];
            n->attnum = m->next_attnum++;
            snprintf(n->name, sizeof n->name, "%s", name);
            n->typid = types[arg % (sizeof types / sizeof *types)];
            n->version = 0;
            m->dirty = true;
        }
        break;
    }
    case 4:                     /* another column list order */
        m->rotate = arg;
        m->dirty = true;
        break;
    case 5:                     /* INSERT */
        if (m->nrows < MAX_ROWS) {
            struct row *r = &m->rows[m->nrows];
            memset(r, 0, sizeof *r);
            r->live = true;
            for (unsigned i = 0; i < m->natts; i++)
                snprintf(r->val[m->att[i].attnum], VAL_LEN, "r%u.%d", step, m->att[i].attnum);
            stream_row(m, m->nrows++, false);
        }
        break;
    case 6: {                   /* UPDATE of the column named id */
        int k = att_named(m, "id");
        if (k >= 0 && m->nrows > 0) {
            unsigned r = arg % m->nrows;
            snprintf(m->rows[r].val[m->att[k].attnum], VAL_LEN, "u%u", step);
            stream_row(m, r, true);
        }
        break;
    }
    case 7:
        copy(m);
        break;
    default:
        probe(m);
        break;
    }
}

FUZZ_TARGET(relschema)
{
    static struct model m;
    memset(&m, 0, sizeof m);
    m.rels = pgoutput_rels_new(4, 1 << 20);
    FUZZ_CHECK(m.rels != NULL);
    /* users(pk int4, id text) with three rows, loaded and streamed from. */
    m.att[0] = (struct att){ 1, "pk", 23, 0 };
    m.att[1] = (struct att){ 2, "id", 25, 0 };
    m.natts = 2;
    m.next_attnum = 3;
    for (unsigned r = 0; r < 3; r++) {
        m.rows[r].live = true;
        snprintf(m.rows[r].val[1], VAL_LEN, "%u", r);
        snprintf(m.rows[r].val[2], VAL_LEN, "base%u", r);
    }
    m.nrows = 3;
    copy(&m);
    for (size_t i = 0; i + 1 < size && i < 400; i += 2)
        ddl_or_dml(&m, data[i], data[i + 1], (unsigned)i);
    probe(&m);
    pgoutput_rels_free(m.rels);
    return 0;
}
