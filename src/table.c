/*
 * The guarded table: its life, and the answer path (lookups, inserts,
 * their journal).  Why each rule holds is in table.h; table_follow.c and
 * table_load.c keep the rest, under one lock per table that no lookup ever
 * takes.
 */
#include "table.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "answer.h"
#include "table_int.h"

static const struct {
    const char *name;
    bool may_catch_up;
} wants[WANT_COUNT] = {
    [WANT_NONE] = { "none", false },
    [WANT_START] = { "start", true },
    [WANT_RECONNECT] = { "reconnect", true },
    [WANT_LONG_ID] = { "long id", true },
    [WANT_POSITION] = { "position", false },
    [WANT_API] = { "api", false },
    [WANT_SIGHUP] = { "SIGHUP", false },
    [WANT_INTERVAL] = { "interval", false },
    [WANT_DELETES] = { "deletes", false },
    [WANT_GROWTH] = { "growth", false },
    [WANT_SCHEMA] = { "schema", false },
};

const char *table_want_name(enum table_want w)
{
    return w > WANT_NONE && w < WANT_COUNT ? wants[w].name : "none";
}

bool table_want_may_catch_up(enum table_want w)
{
    return w > WANT_NONE && w < WANT_COUNT && wants[w].may_catch_up;
}

int64_t table_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

static void table_sizing_from(struct table_sizing *sz, const struct filter_config *fc)
{
    *sz = (struct table_sizing){ .expected_items = fc->expected_items,
                                 .false_positive_rate = fc->false_positive_rate,
                                 .headroom = fc->headroom, .max_layers = fc->max_layers,
                                 .growth = fc->growth, .kind = (enum filter_kind)fc->kind };
}

struct table *table_new(const struct config *cfg, const struct filter_config *fc)
{
    struct table *t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    t->fc = fc;
    t->g = guard_new();
    t->pending = pending_new(fc->pending_limit, fc->pending_max_bytes, fc->pending_ttl);
    if (t->g == NULL || t->pending == NULL) {
        guard_free(t->g);
        pending_free(t->pending);
        free(t);
        return NULL;
    }
    t->max_stale_ns = (int64_t)(cfg->max_staleness * (double)NS_PER_S);
    t->min_interval = cfg->min_rebuild_interval;
    atomic_init(&t->horizon, 0);
    atomic_init(&t->saturated, false);
    atomic_init(&t->spell, SPELL_TEXT);
    atomic_init(&t->not_a_value, 0);
    pthread_mutex_init(&t->mu, NULL);
    table_sizing_from(&t->size, fc);
    t->epoch = 1;
    t->covered = 0;
    t->wanted = 1;                  /* the first load */
    t->want = WANT_START;
    t->st.requested_id = 1;
    return t;
}

void table_set_wake(struct table *t, void (*wake)(void *arg), void *arg)
{
    t->wake = wake;
    t->wake_arg = arg;
}

void table_set_durable(struct table *t, table_durable_fn fn, table_durable_submit_fn submit,
                       void *arg)
{
    t->durable = fn;
    t->durable_submit = submit;
    t->durable_arg = arg;
}

void table_set_publisher(struct table *t, const struct table_publisher *p)
{
    t->pub = *p;
}

bool table_durable(const struct table *t)
{
    return t->durable != NULL;
}

void table_free(struct table *t)
{
    if (t == NULL)
        return;
    guard_free(t->g);
    pending_free(t->pending);
    pthread_mutex_destroy(&t->mu);
    free(t);
}

void table_set_sizing(struct table *t, const struct filter_config *fc)
{
    struct table_sizing sz;
    table_sizing_from(&sz, fc);
    pthread_mutex_lock(&t->mu);
    t->size = sz;
    pthread_mutex_unlock(&t->mu);
}

struct table_sizing table_sizing(struct table *t)
{
    pthread_mutex_lock(&t->mu);
    struct table_sizing sz = t->size;
    pthread_mutex_unlock(&t->mu);
    return sz;
}

const struct filter_config *table_config(const struct table *t)
{
    return t->fc;
}

const char *table_name(const struct table *t)
{
    return t->fc->name;
}

struct guard *table_guard(struct table *t)
{
    return t->g;
}

struct pending *table_pending(struct table *t)
{
    return t->pending;
}

/* ------------------------------------------------------------ answers -- */

bool table_stale(struct table *t, int64_t h)
{
    return answer_degraded(table_now(), h, t->max_stale_ns,
                           atomic_load_explicit(&t->saturated, memory_order_relaxed));
}

/* After inserts: a filter that just lost its rate degrades its absent answers at once. */
void table_check_saturated(struct table *t)
{
    if (!atomic_load_explicit(&t->saturated, memory_order_relaxed) && guard_saturated(t->g))
        atomic_store(&t->saturated, true);
}

enum spell_type table_spell(const struct table *t)
{
    return (enum spell_type)atomic_load_explicit(&((struct table *)t)->spell, memory_order_acquire);
}

void table_ident(struct table *t, struct table_ident *out)
{
    pthread_mutex_lock(&t->mu);
    *out = t->ident;
    pthread_mutex_unlock(&t->mu);
}

/*
 * The key of id for spelling sp into *key (id itself for text, else buf,
 * or *heap when it does not fit: free it).  The verdict of spell_key; a
 * key that cannot be made (no memory) is SPELL_MAYBE, never a wrong key.
 */
enum spell_verdict table_key_of(enum spell_type sp, const char *id, size_t len, char *buf,
                                char **heap, const char **key, size_t *klen)
{
    return spell_key_buf(sp, id, len, buf, KEY_STACK, heap, key, klen);
}

enum table_answer table_lookup(struct table *t, const void *id, size_t len)
{
    /* Before the lookup: a filter read after it is at least as new as h promises. */
    int64_t h = atomic_load_explicit(&t->horizon, memory_order_acquire);
    char buf[KEY_STACK], *heap;
    const char *key;
    size_t klen;
    enum spell_verdict v = table_key_of(table_spell(t), id, len, buf, &heap, &key, &klen);
    enum guard_answer g = v == SPELL_KEY ? guard_lookup(t->g, key, klen)
                        : guard_ready(t->g) ? GUARD_ABSENT : GUARD_NOT_READY;
    free(heap);
    if (g == GUARD_NOT_READY)
        return TABLE_NOT_READY;
    if (v == SPELL_MAYBE)
        return TABLE_UNPROVABLE;
    if (v == SPELL_NOT_A_VALUE)
        atomic_fetch_add_explicit(&t->not_a_value, 1, memory_order_relaxed);
    if (g == GUARD_MAYBE)
        return TABLE_MAYBE;
    return table_stale(t, h) ? TABLE_DEGRADED : TABLE_ABSENT;
}

bool table_lookup_many(struct table *t, size_t n, const char *const *ids, const size_t *lens,
                       bool *maybe, bool *degraded, size_t *absent_seen)
{
    int64_t h = atomic_load_explicit(&t->horizon, memory_order_acquire);
    enum spell_type sp = table_spell(t);
    if (!guard_ready(t->g))
        return false;
    size_t absent = 0;
    for (size_t i = 0; i < n; i++) {
        char buf[KEY_STACK], *heap;
        const char *key;
        size_t klen;
        enum spell_verdict v = table_key_of(sp, ids[i], lens[i], buf, &heap, &key, &klen);
        enum guard_answer g = v == SPELL_KEY ? guard_lookup(t->g, key, klen)
                            : v == SPELL_MAYBE ? GUARD_MAYBE : GUARD_ABSENT;
        free(heap);
        maybe[i] = g != GUARD_ABSENT;
        absent += !maybe[i];
        if (v == SPELL_NOT_A_VALUE)
            atomic_fetch_add_explicit(&t->not_a_value, 1, memory_order_relaxed);
    }
    bool deg = absent > 0 && table_stale(t, h);
    if (deg)
        for (size_t i = 0; i < n; i++)
            maybe[i] = true;
    if (degraded)
        *degraded = deg;
    if (absent_seen)
        *absent_seen = absent;
    return true;
}

/* The filter's part of an insert, once the journal and the disk have the IDs. */
static enum table_insert_result add_hashes(struct table *t, size_t n, const uint64_t *hs,
                                          size_t *inserted)
{
    *inserted = 0;
    for (size_t i = 0; i < n; i++)
        *inserted += guard_add_hash(t->g, hs[i]);
    table_check_saturated(t);
    return *inserted < n ? TABLE_INSERT_NOT_READY : TABLE_INSERTED;
}

/*
 * The keys of a POST's IDs (spell.h), their hashes, and where they live:
 * for text the IDs themselves, else one block for all the keys.
 */
struct keyset {
    size_t n;
    const char **keys;
    size_t *lens;
    uint64_t *hs;
    char *bytes;
};

static void keyset_free(struct keyset *k)
{
    free(k->keys);
    free(k->lens);
    free(k->hs);
    free(k->bytes);
}

/*
 * The keys of ids; TABLE_INSERT_NOT_A_VALUE (*bad its index) for an ID
 * the column's type refuses.  A spelling whose key cannot be known is kept
 * as it came (lookups of it answer "maybe" anyway).
 */
static enum table_insert_result keyset_make(struct table *t, size_t n, const char *const *ids,
                                            const size_t *lens, struct keyset *k, int *bad)
{
    enum spell_type sp = table_spell(t);
    memset(k, 0, sizeof *k);
    k->n = n;
    k->keys = malloc((n ? n : 1) * sizeof *k->keys);
    k->lens = malloc((n ? n : 1) * sizeof *k->lens);
    k->hs = malloc((n ? n : 1) * sizeof *k->hs);
    size_t total = 0;
    for (size_t i = 0; sp != SPELL_TEXT && i < n; i++)
        total += spell_key_cap(sp, lens[i]);
    if (sp != SPELL_TEXT)
        k->bytes = malloc(total ? total : 1);
    if (!k->keys || !k->lens || !k->hs || (sp != SPELL_TEXT && !k->bytes))
        return TABLE_INSERT_NOMEM;
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        if (sp == SPELL_TEXT) {
            k->keys[i] = ids[i];
            k->lens[i] = lens[i];
        } else {
            size_t cap = spell_key_cap(sp, lens[i]);
            switch (spell_key(sp, ids[i], lens[i], k->bytes + used, cap, &k->lens[i])) {
            case SPELL_KEY:
                k->keys[i] = k->bytes + used;
                used += k->lens[i];
                break;
            case SPELL_NOT_A_VALUE:
                atomic_fetch_add_explicit(&t->not_a_value, 1, memory_order_relaxed);
                if (bad)
                    *bad = (int)i;
                return TABLE_INSERT_NOT_A_VALUE;
            case SPELL_MAYBE:
                k->keys[i] = ids[i];
                k->lens[i] = lens[i];
                break;
            }
        }
        k->hs[i] = filter_hash(k->keys[i], k->lens[i]);
    }
    return TABLE_INSERTED;
}

/* Journal first, all or nothing.  TABLE_INSERTED: journalled. */
static enum table_insert_result journal(struct table *t, const struct keyset *k)
{
    if (!guard_writable(t->g))
        return TABLE_INSERT_NOT_READY;
    switch (pending_add_many(t->pending, k->n, k->keys, k->lens, k->hs, pending_clock())) {
    case PENDING_OK: return TABLE_INSERTED;
    case PENDING_FULL_COUNT: return TABLE_INSERT_FULL_COUNT;
    case PENDING_FULL_BYTES: return TABLE_INSERT_FULL_BYTES;
    case PENDING_NOMEM: break;
    }
    return TABLE_INSERT_NOMEM;
}

/*
 * The start both inserts share: *inserted and *err cleared, the ids spelled
 * and hashed into *k (keyset_free it), and journaled for a rebuild in
 * flight.  TABLE_INSERTED to go on; else *err names the first bad id for
 * TABLE_INSERT_NOT_A_VALUE.
 */
static enum table_insert_result insert_begin(struct table *t, size_t n, const char *const *ids,
                                             const size_t *lens, struct keyset *k,
                                             size_t *inserted, int *err)
{
    int bad = 0;
    *inserted = 0;
    if (err)
        *err = 0;
    enum table_insert_result r = keyset_make(t, n, ids, lens, k, &bad);
    if (r == TABLE_INSERT_NOT_A_VALUE && err)
        *err = bad;
    if (r == TABLE_INSERTED)
        r = journal(t, k);
    return r;
}

enum table_insert_result table_insert(struct table *t, size_t n, const char *const *ids,
                                      const size_t *lens, size_t *inserted, int *err)
{
    struct keyset k;
    enum table_insert_result r = insert_begin(t, n, ids, lens, &k, inserted, err);
    if (r == TABLE_INSERTED && t->durable != NULL && n > 0) {
        /* On disk before the filter and the 2xx; the journal's copy is harmless. */
        int e = t->durable(t->durable_arg, n, k.keys, k.lens, t->fc->pending_ttl);
        if (e != 0) {
            if (err)
                *err = e;
            r = TABLE_INSERT_NOT_DURABLE;
        }
    }
    if (r == TABLE_INSERTED)
        r = add_hashes(t, n, k.hs, inserted);
    keyset_free(&k);
    return r;
}

/* An insert waiting for the disk. */
struct insert_op {
    struct table *t;
    uint64_t *hs;
    size_t n;
    table_insert_done_fn done;
    void *arg;
};

static void insert_durable(void *arg, int err)
{
    struct insert_op *op = arg;
    size_t inserted = 0;
    enum table_insert_result r = err != 0 ? TABLE_INSERT_NOT_DURABLE
                                          : add_hashes(op->t, op->n, op->hs, &inserted);
    op->done(op->arg, r, inserted, err);
    free(op->hs);
    free(op);
}

enum table_insert_result table_insert_later(struct table *t, size_t n, const char *const *ids,
                                            const size_t *lens, size_t *inserted, int *err,
                                            table_insert_done_fn done, void *arg)
{
    if (t->durable_submit == NULL || n == 0)
        return table_insert(t, n, ids, lens, inserted, err);
    struct keyset k;
    enum table_insert_result r = insert_begin(t, n, ids, lens, &k, inserted, err);
    struct insert_op *op = r == TABLE_INSERTED ? malloc(sizeof *op) : NULL;
    if (r == TABLE_INSERTED && op == NULL)
        r = TABLE_INSERT_NOMEM;
    if (r != TABLE_INSERTED) {
        keyset_free(&k);
        return r;
    }
    *op = (struct insert_op){ t, k.hs, n, done, arg };
    k.hs = NULL;                    /* the op's now */
    int e = t->durable_submit(t->durable_arg, n, k.keys, k.lens, t->fc->pending_ttl,
                              insert_durable, op);
    keyset_free(&k);                /* the log copied the keys */
    if (e != 0) {
        free(op->hs);
        free(op);
        if (err)
            *err = e;
        return TABLE_INSERT_NOT_DURABLE;
    }
    return TABLE_INSERT_LATER;
}
