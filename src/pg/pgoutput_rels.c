/*
 * The relation cache of a logical replication stream (see pgoutput.h): the
 * Relation messages the server sent, kept by relid within a count and a
 * byte budget, so that a change's columns can be named.
 */
#include <stdlib.h>
#include <string.h>

#include "pgoutput.h"

/* --------------------------------------------------------- relation cache -- */

struct pgoutput_rels {
    struct relblock **slots;            /* open addressing, linear probing; NULL = free */
    size_t cap;                         /* a power of two, at least twice count */
    size_t count;
    size_t bytes;
    size_t max_rels, max_bytes;
};

/*
 * One allocation holds a relation, its columns and its strings, so that a
 * replacement is a pointer swap and a failure leaves nothing half-made;
 * size is what it counts against max_bytes.
 */
struct relblock {
    struct pgoutput_rel rel;
    size_t size;
};

struct pgoutput_rels *pgoutput_rels_new(size_t max_rels, size_t max_bytes)
{
    if (max_rels == 0 || max_bytes == 0 || max_rels > SIZE_MAX / 64)
        return NULL;
    struct pgoutput_rels *c = calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    c->cap = 16;
    c->slots = calloc(c->cap, sizeof *c->slots);
    if (c->slots == NULL) {
        free(c);
        return NULL;
    }
    c->max_rels = max_rels;
    c->max_bytes = max_bytes;
    return c;
}

void pgoutput_rels_free(struct pgoutput_rels *c)
{
    if (c == NULL)
        return;
    for (size_t i = 0; i < c->cap; i++)
        free(c->slots[i]);
    free(c->slots);
    free(c);
}

static size_t slot_of(const struct pgoutput_rels *c, uint32_t relid)
{
    /* Fibonacci hashing: relids are consecutive OIDs, so spread them. */
    size_t i = (size_t)(((uint64_t)relid * UINT64_C(11400714819323198485)) >> 32) & (c->cap - 1);
    while (c->slots[i] != NULL && c->slots[i]->rel.relid != relid)
        i = (i + 1) & (c->cap - 1);
    return i;
}

static bool grow(struct pgoutput_rels *c)
{
    size_t ncap = c->cap * 2;
    struct relblock **ns = calloc(ncap, sizeof *ns), **old = c->slots;
    if (ns == NULL)
        return false;
    size_t ocap = c->cap;
    c->slots = ns;
    c->cap = ncap;
    for (size_t i = 0; i < ocap; i++)
        if (old[i] != NULL)
            c->slots[slot_of(c, old[i]->rel.relid)] = old[i];
    free(old);
    return true;
}

static char *put_str(char **at, const char *s, size_t len)
{
    char *d = *at;
    memcpy(d, s, len);
    d[len] = 0;
    *at += len + 1;
    return d;
}

static struct relblock *rel_build(const struct pgoutput_msg *m, enum pgoutput_error *err)
{
    static const char catalog[] = "pg_catalog";
    const char *nsp = m->relation.nspname_len ? m->relation.nspname : catalog;
    size_t nsp_len = m->relation.nspname_len ? m->relation.nspname_len : sizeof catalog - 1;
    size_t names = nsp_len + 1 + m->relation.relname_len + 1;
    struct pgoutput_iter it;
    struct pgoutput_attr a;
    unsigned n = 0;

    pgoutput_attrs_iter(&m->relation.attrs, &it);
    while (pgoutput_attrs_next(&it, &a)) {
        names += a.name_len + 1;
        n++;
    }
    if (n != m->relation.attrs.natts) {
        *err = PGOUTPUT_TRUNCATED;      /* a hand-made message pgoutput_decode would refuse */
        return NULL;
    }
    size_t size = sizeof(struct relblock) + (size_t)n * sizeof(struct pgoutput_relcol) + names;
    struct relblock *b = malloc(size);
    if (b == NULL) {
        *err = PGOUTPUT_NO_MEMORY;
        return NULL;
    }
    struct pgoutput_rel *rel = &b->rel;
    b->size = size;
    rel->relid = m->relation.relid;
    rel->replident = m->relation.replident;
    rel->ncols = m->relation.attrs.natts;
    rel->cols = (struct pgoutput_relcol *)(b + 1);
    rel->version = 1;
    char *at = (char *)(rel->cols + rel->ncols);
    rel->nspname = put_str(&at, nsp, nsp_len);
    rel->relname = put_str(&at, m->relation.relname, m->relation.relname_len);
    pgoutput_attrs_iter(&m->relation.attrs, &it);
    for (unsigned i = 0; pgoutput_attrs_next(&it, &a); i++) {
        rel->cols[i].name = put_str(&at, a.name, a.name_len);
        rel->cols[i].typid = a.typid;
        rel->cols[i].typmod = a.typmod;
        rel->cols[i].flags = a.flags;
    }
    return b;
}

enum pgoutput_error pgoutput_rels_put(struct pgoutput_rels *c, const struct pgoutput_msg *m)
{
    enum pgoutput_error err;
    if (m->type != PGOUTPUT_RELATION)
        return PGOUTPUT_WRONG_TYPE;
    struct relblock *b = rel_build(m, &err);
    if (b == NULL)
        return err;
    size_t i = slot_of(c, b->rel.relid);
    struct relblock *old = c->slots[i];
    size_t old_size = old ? old->size : 0;
    if ((old == NULL && c->count >= c->max_rels) || c->bytes - old_size + b->size > c->max_bytes) {
        free(b);
        return PGOUTPUT_CACHE_FULL;
    }
    /* At most half full, so that probes stay short and always end. */
    if (old == NULL && (c->count + 1) * 2 > c->cap) {
        if (!grow(c)) {
            free(b);
            return PGOUTPUT_NO_MEMORY;
        }
        i = slot_of(c, b->rel.relid);
    }
    if (old != NULL)
        b->rel.version = old->rel.version + 1;
    else
        c->count++;
    c->slots[i] = b;
    c->bytes = c->bytes - old_size + b->size;
    free(old);
    return PGOUTPUT_OK;
}

const struct pgoutput_rel *pgoutput_rels_get(const struct pgoutput_rels *c, uint32_t relid)
{
    struct relblock *b = c->slots[slot_of(c, relid)];
    return b ? &b->rel : NULL;
}

int pgoutput_rels_column(const struct pgoutput_rels *c, uint32_t relid, const char *name)
{
    const struct pgoutput_rel *rel = pgoutput_rels_get(c, relid);
    if (rel == NULL)
        return PGOUTPUT_NO_REL;
    for (unsigned i = 0; i < rel->ncols; i++)
        if (strcmp(rel->cols[i].name, name) == 0)
            return (int)i;
    return PGOUTPUT_NO_COLUMN;
}

enum pgoutput_track_result pgoutput_rels_track(const struct pgoutput_rels *c, uint32_t relid,
                                               const char *name, struct pgoutput_track *tr)
{
    const struct pgoutput_rel *rel = pgoutput_rels_get(c, relid);
    if (rel == NULL)
        return PGOUTPUT_TRACK_NO_REL;
    if (tr->version == rel->version)
        return PGOUTPUT_TRACK_SAME;
    int col = pgoutput_rels_column(c, relid, name);
    bool had = tr->version != 0 && tr->col >= 0;
    uint32_t typid = col >= 0 ? rel->cols[col].typid : 0;
    int32_t typmod = col >= 0 ? rel->cols[col].typmod : -1;
    enum pgoutput_track_result r;
    if (col < 0)
        r = PGOUTPUT_TRACK_MISSING;
    else if (!had)
        r = PGOUTPUT_TRACK_FOUND;
    else if (col != tr->col)
        r = PGOUTPUT_TRACK_MOVED;
    else if (typid != tr->typid || typmod != tr->typmod)
        r = PGOUTPUT_TRACK_RETYPED;
    else
        r = PGOUTPUT_TRACK_SAME;
    *tr = (struct pgoutput_track){ rel->version, col, typid, typmod };
    return r;
}

size_t pgoutput_rels_count(const struct pgoutput_rels *c)
{
    return c->count;
}

size_t pgoutput_rels_bytes(const struct pgoutput_rels *c)
{
    return c->bytes;
}
