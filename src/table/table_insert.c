/*
 * The guarded table's inserts (table_insert, table_insert_later): a POST's
 * IDs keyed by the table's spelling, journalled (and written durably first
 * when a POST log is set, table_set_durable), then added to the live
 * filter.  Why the order holds is in table.h.
 */
#include "table.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "table_int.h"

/* The filter's part of an insert, once the journal and the disk have the IDs. */
static enum table_insert_result add_hashes(struct table *t, size_t n, const uint64_t *hs,
                                          size_t *inserted)
{
    *inserted = 0;
    for (size_t i = 0; i < n; i++) {
        *inserted += guard_add_hash(t->g, hs[i]);
        table_added(t, hs[i]);
    }
    table_posted(t, hs, n, *inserted);
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
    /*
     * One ID (most POSTs) is kept in the keyset itself, its spelled key in
     * key1_bytes when it fits: no allocation on the memory-only path.  A
     * keyset so filled must not be copied (its pointers point into it).
     */
    const char *key1;
    size_t len1;
    uint64_t h1;
    char key1_bytes[64];
};

static void keyset_free(struct keyset *k)
{
    if (k->keys != &k->key1) {
        free(k->keys);
        free(k->lens);
        free(k->hs);
    }
    if (k->bytes != k->key1_bytes)
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
    if (n == 1) {
        k->keys = &k->key1;
        k->lens = &k->len1;
        k->hs = &k->h1;
    } else {
        k->keys = malloc((n ? n : 1) * sizeof *k->keys);
        k->lens = malloc((n ? n : 1) * sizeof *k->lens);
        k->hs = malloc((n ? n : 1) * sizeof *k->hs);
    }
    size_t total = 0;
    for (size_t i = 0; sp != SPELL_TEXT && i < n; i++)
        total += spell_key_cap(sp, lens[i]);
    if (sp != SPELL_TEXT)
        k->bytes = n == 1 && total <= sizeof k->key1_bytes ? k->key1_bytes : malloc(total ? total : 1);
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

/*
 * Own copies of k's keys (for text they are the caller's IDs), for an
 * insert that outlives its call.  False on no memory.
 */
static bool keyset_own(struct keyset *k)
{
    size_t total = 0;
    for (size_t i = 0; i < k->n; i++)
        total += k->lens[i];
    char *b = malloc(total ? total : 1), *at = b;
    if (b == NULL)
        return false;
    for (size_t i = 0; i < k->n; i++) {
        memcpy(at, k->keys[i], k->lens[i]);
        k->keys[i] = at;
        at += k->lens[i];
    }
    if (k->bytes != k->key1_bytes)
        free(k->bytes);
    k->bytes = b;
    return true;
}

/*
 * Journal first, all or nothing: the IDs are held (pending_reserve) until
 * the insert is acknowledged or refused (journal_end).  TABLE_INSERTED:
 * held.  at_once: one ID that nothing can refuse any more once it is in
 * the journal (no durable step), put there acknowledged in one step
 * (pending_add_many: for one ID all or nothing too); no journal_end.
 */
static enum table_insert_result journal(struct table *t, const struct keyset *k, bool at_once)
{
    if (!guard_writable(t->g))
        return TABLE_INSERT_NOT_READY;
    uint64_t now = monoclock_boot_s();
    switch (at_once ? pending_add_many(t->pending, k->n, k->keys, k->lens, k->hs, now)
                    : pending_reserve(t->pending, k->n, k->keys, k->lens, k->hs, now)) {
    case PENDING_OK: return TABLE_INSERTED;
    case PENDING_FULL_COUNT: return TABLE_INSERT_FULL_COUNT;
    case PENDING_FULL_BYTES: return TABLE_INSERT_FULL_BYTES;
    case PENDING_NOMEM: break;
    }
    return TABLE_INSERT_NOMEM;
}

/*
 * The journal's part once the insert is decided: acknowledged, the IDs join
 * it (rebuilds replay them, snapshots and rewrites of the POST log keep
 * them); refused, they leave without a trace, so that nothing refused
 * answers 200 later, after a rebuild or a restart.
 */
static void journal_end(struct table *t, const struct keyset *k, bool acknowledged)
{
    if (acknowledged)
        pending_commit(t->pending, k->n, k->keys, k->lens, k->hs, monoclock_boot_s());
    else
        pending_cancel(t->pending, k->n, k->keys, k->lens, k->hs);
}

/*
 * The start both inserts share: *inserted and *err cleared, the ids spelled
 * and hashed into *k (keyset_free it), and held in the journal
 * (journal_end ends that).  TABLE_INSERTED to go on; else nothing is held,
 * and *err names the first bad id for TABLE_INSERT_NOT_A_VALUE.
 */
static enum table_insert_result insert_begin(struct table *t, size_t n, const char *const *ids,
                                             const size_t *lens, struct keyset *k, bool at_once,
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
        r = journal(t, k, at_once);
    return r;
}

/* An insert with no durable step, or with a blocking one (fn, no submit): decided here. */
static enum table_insert_result insert_now(struct table *t, size_t n, const char *const *ids,
                                           const size_t *lens, size_t *inserted, int *err)
{
    struct keyset k;
    /* Nothing between the journal and the filter: one ID goes in at once (journal's at_once). */
    bool at_once = t->durable == NULL && n == 1;
    enum table_insert_result r = insert_begin(t, n, ids, lens, &k, at_once, inserted, err);
    if (r != TABLE_INSERTED) {
        keyset_free(&k);
        return r;
    }
    if (t->durable != NULL && n > 0) {
        /* On disk before the journal, the filter and the 2xx. */
        int e = t->durable(t->durable_arg, n, k.keys, k.lens, t->fc->pending_ttl);
        if (e != 0) {
            if (err)
                *err = e;
            r = TABLE_INSERT_NOT_DURABLE;
        }
    }
    if (!at_once)
        journal_end(t, &k, r == TABLE_INSERTED);
    if (r == TABLE_INSERTED)
        r = add_hashes(t, n, k.hs, inserted);
    keyset_free(&k);
    return r;
}

/* An insert waiting for the disk; its keys are its own. */
struct insert_op {
    struct table *t;
    struct keyset k;
    table_insert_done_fn done;
    void *arg;
};

/*
 * The log's answer, on its thread: the journal takes the IDs here, before
 * the log lets a rewrite read the journal (postlog_submit), so a rewrite
 * keeps every acknowledged ID and none refused.
 */
static void insert_durable(void *arg, int err)
{
    struct insert_op *op = arg;
    size_t inserted = 0;
    journal_end(op->t, &op->k, err == 0);
    enum table_insert_result r = err != 0 ? TABLE_INSERT_NOT_DURABLE
                                          : add_hashes(op->t, op->k.n, op->k.hs, &inserted);
    op->done(op->arg, r, inserted, err);
    keyset_free(&op->k);
    free(op);
}

enum table_insert_result table_insert_later(struct table *t, size_t n, const char *const *ids,
                                            const size_t *lens, size_t *inserted, int *err,
                                            table_insert_done_fn done, void *arg)
{
    if (t->durable_submit == NULL || n == 0)
        return insert_now(t, n, ids, lens, inserted, err);
    struct insert_op *op = malloc(sizeof *op);
    if (op == NULL)
        return TABLE_INSERT_NOMEM;
    enum table_insert_result r = insert_begin(t, n, ids, lens, &op->k, false, inserted, err);
    if (r == TABLE_INSERTED && !keyset_own(&op->k)) {
        journal_end(t, &op->k, false);
        r = TABLE_INSERT_NOMEM;
    }
    if (r != TABLE_INSERTED) {
        keyset_free(&op->k);
        free(op);
        return r;
    }
    op->t = t;
    op->done = done;
    op->arg = arg;
    int e = t->durable_submit(t->durable_arg, n, op->k.keys, op->k.lens, t->fc->pending_ttl,
                              insert_durable, op);
    if (e != 0) {
        journal_end(t, &op->k, false);
        keyset_free(&op->k);
        free(op);
        if (err)
            *err = e;
        return TABLE_INSERT_NOT_DURABLE;
    }
    return TABLE_INSERT_LATER;
}

/* table_insert's wait for a submitted insert. */
struct insert_wait {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    enum table_insert_result r;
    size_t inserted;
    int err;
};

static void insert_waited(void *arg, enum table_insert_result r, size_t inserted, int err)
{
    struct insert_wait *w = arg;
    pthread_mutex_lock(&w->mu);
    w->r = r;
    w->inserted = inserted;
    w->err = err;
    w->done = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

enum table_insert_result table_insert(struct table *t, size_t n, const char *const *ids,
                                      const size_t *lens, size_t *inserted, int *err)
{
    if (t->durable_submit == NULL || n == 0)
        return insert_now(t, n, ids, lens, inserted, err);
    /* Through the log's callback, as table_insert_later: see insert_durable. */
    struct insert_wait w = { .done = false };
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    enum table_insert_result r = table_insert_later(t, n, ids, lens, inserted, err,
                                                    insert_waited, &w);
    if (r == TABLE_INSERT_LATER) {
        pthread_mutex_lock(&w.mu);
        while (!w.done)
            pthread_cond_wait(&w.cv, &w.mu);
        pthread_mutex_unlock(&w.mu);
        r = w.r;
        *inserted = w.inserted;
        if (err && r == TABLE_INSERT_NOT_DURABLE)
            *err = w.err;
    }
    pthread_cond_destroy(&w.cv);
    pthread_mutex_destroy(&w.mu);
    return r;
}
