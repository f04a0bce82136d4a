/*
 * The guarded table's loads and figures: a load's filter built off to the
 * side and committed with the horizon it proves, catch-ups and restored
 * snapshots, the position the next load resumes from, and the status the
 * endpoints report.
 */
#include "table_int.h"
#include "pgerror.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- loads -- */

struct table_load {
    struct table *t;
    struct filter *f;
    struct table_ident ident;
};

struct table_load *table_load_begin(struct table *t, uint64_t items,
                                    const struct table_ident *ident, enum filter_error *err)
{
    struct table_load *l = malloc(sizeof *l);
    if (l == NULL) {
        *err = FILTER_ENOMEM;
        return NULL;
    }
    l->t = t;
    l->ident = *ident;
    /* The sizing in force now: a SIGHUP may have changed it since start. */
    struct table_sizing sz = table_sizing(t);
    struct filter_growth g = table_growth_of(&sz);
    struct filter_alloc a;
    bool pub = t->pub.begin && t->pub.begin(t->pub.ctx, &a);
    l->f = filter_new_with(sz.kind, items, sz.false_positive_rate, &g, pub ? &a : NULL, err);
    if (l->f == NULL) {
        free(l);
        return NULL;
    }
    guard_begin_bulk(t->g, l->f);
    return l;
}

struct filter *table_load_filter(struct table_load *l)
{
    return l->f;
}

void table_load_seen(struct table_load *l, const char *id, size_t len, uint64_t h)
{
    pending_seen(l->t->pending, id, len, h);
    /* The row exists: whatever was verified of its ID before is over (table_adapt.h, step 3). */
    table_added(l->t, h);
}

/* The keys of the new filter are of spelling sp: entries of another spelling mean nothing. */
static void spelled(struct table *t, enum spell_type sp)
{
    enum spell_type was = (enum spell_type)atomic_load(&t->spell);
    if (t->ad != NULL && was != sp)
        adapt_reset(t->ad);
}

/* Whether the filter f still answers "maybe" for key: otherwise it denies it itself. */
static bool still_maybe(void *arg, const char *key, size_t len)
{
    return filter_contains((const struct filter *)arg, key, len);
}

/* Caller holds mu: a load or catch-up that started at start in epoch is live. */
static void covered_locked(struct table *t, uint64_t epoch, int64_t start, const char *pos)
{
    /* A gap since the load began is not covered by it: keep waiting for the next. */
    if (epoch == t->epoch)
        t->covered = epoch;
    table_advance_locked(t, epoch, start);
    snprintf(t->position, sizeof t->position, "%s", pos ? pos : "");
}

bool table_load_commit(struct table_load *l, uint64_t epoch, int64_t start, const char *pos)
{
    struct table *t = l->t;
    if (!guard_end_bulk(t->g)) {
        table_load_abort(l);
        return false;
    }
    /* POSTed IDs the table does not hold (yet) must survive the swap, until they expire. */
    pending_expire(t->pending, pending_clock());
    pending_replay(t->pending, l->f);
    if (t->pub.live) {
        pthread_mutex_lock(&t->mu);
        t->pub.live(t->pub.ctx, l->f, l->ident.spell, atomic_load(&t->horizon));
        pthread_mutex_unlock(&t->mu);
    }
    spelled(t, l->ident.spell);
    guard_commit(t->g);
    /* The keys of the new filter are of its load's spelling. */
    atomic_store_explicit(&t->spell, l->ident.spell, memory_order_release);
    /* Entries the new filter answers absent for are its own to deny (the scheduler's thread owns it). */
    if (t->ad != NULL)
        adapt_prune(t->ad, still_maybe, (void *)guard_live(t->g));
    struct table_ident ident = l->ident;
    free(l);
    table_set_saturated(t, guard_saturated(t->g));
    pthread_mutex_lock(&t->mu);
    t->ident = ident;
    t->loaded = true;
    /* The table's own COPY: whatever a peer's filter was, this one is believed. */
    atomic_store_explicit(&t->vet, TABLE_VET_NONE, memory_order_release);
    t->vet_horizon = 0;
    covered_locked(t, epoch, start, pos);
    t->st.copies++;
    pthread_mutex_unlock(&t->mu);
    return true;
}

void table_load_abort(struct table_load *l)
{
    if (l == NULL)
        return;
    guard_abort(l->t->g);           /* frees the filter */
    free(l);
}

void table_caught_up(struct table *t, uint64_t epoch, int64_t start, const char *pos,
                     uint64_t rows)
{
    pthread_mutex_lock(&t->mu);
    covered_locked(t, epoch, start, pos);
    t->st.catchups++;
    t->st.feed_rows_read += rows;
    t->st.last_feed_rows = rows;
    pthread_mutex_unlock(&t->mu);
}

void table_polled(struct table *t, uint64_t epoch, int64_t start, const char *pos,
                  uint64_t rows)
{
    pthread_mutex_lock(&t->mu);
    covered_locked(t, epoch, start, pos);
    t->st.notifications += rows;
    pthread_mutex_unlock(&t->mu);
}

void table_restored(struct table *t, const char *pos, const char *from, uint64_t items,
                    double seconds, const struct table_ident *ident)
{
    spelled(t, ident->spell);
    atomic_store_explicit(&t->spell, ident->spell, memory_order_release);
    if (t->pub.restored)
        t->pub.restored(t->pub.ctx, ident->spell);
    pthread_mutex_lock(&t->mu);
    t->ident = *ident;
    /* The horizon stays 0 (degraded) until a catch-up or a COPY. */
    t->loaded = true;

    snprintf(t->position, sizeof t->position, "%s", pos ? pos : "");
    t->st.attempted = true;
    t->st.last_rows = items;
    t->st.last_seconds = seconds;
    t->st.last_finished = time(NULL);
    snprintf(t->st.last_reason, sizeof t->st.last_reason, "start");
    snprintf(t->st.last_kind, sizeof t->st.last_kind, "%s", from);
    snprintf(t->st.restored_from, sizeof t->st.restored_from, "%s",
             strcmp(from, "peer") == 0 ? "peer" : "file");
    pthread_mutex_unlock(&t->mu);
}

void table_position(struct table *t, char *out, size_t cap)
{
    pthread_mutex_lock(&t->mu);
    snprintf(out, cap, "%s", t->position);
    pthread_mutex_unlock(&t->mu);
}

void table_drop_position(struct table *t)
{
    pthread_mutex_lock(&t->mu);
    t->position[0] = '\0';
    pthread_mutex_unlock(&t->mu);
}

bool table_loaded(struct table *t)
{
    pthread_mutex_lock(&t->mu);
    bool l = t->loaded;
    pthread_mutex_unlock(&t->mu);
    return l;
}

/* -------------------------------------------------------------- status -- */

void table_set_method(struct table *t, const char *method, const char *why)
{
    pthread_mutex_lock(&t->mu);
    snprintf(t->st.method, sizeof t->st.method, "%s", method);
    snprintf(t->st.method_why, sizeof t->st.method_why, "%s", why);
    pthread_mutex_unlock(&t->mu);
}

void table_set_error(struct table *t, const char *err)
{
    pthread_mutex_lock(&t->mu);
    snprintf(t->st.last_error, sizeof t->st.last_error, "%s", err);
    pgerror_take(t->st.last_error, t->st.last_sqlstate);
    pthread_mutex_unlock(&t->mu);
}

void table_snapshot_written(struct table *t, bool ok)
{
    pthread_mutex_lock(&t->mu);
    if (ok) {
        t->st.snapshot_writes++;
        t->st.snapshot_written = time(NULL);
    } else {
        t->st.snapshot_failures++;
    }
    pthread_mutex_unlock(&t->mu);
}

void table_count_too_old(struct table *t)
{
    pthread_mutex_lock(&t->mu);
    t->st.too_old++;
    t->position[0] = '\0';
    pthread_mutex_unlock(&t->mu);
}

void table_set_feed_available(struct table *t, bool available)
{
    pthread_mutex_lock(&t->mu);
    t->st.feed_available = available;
    pthread_mutex_unlock(&t->mu);
}

void table_status(struct table *t, struct table_status *out)
{
    int64_t now = table_now();
    pthread_mutex_lock(&t->mu);
    int64_t h = atomic_load(&t->horizon);
    table_account_locked(t, h, now);
    *out = t->st;
    out->ident = t->ident;
    out->not_a_value = atomic_load_explicit(&t->not_a_value, memory_order_relaxed);
    snprintf(out->position, sizeof out->position, "%s", t->position);
    out->horizon_age = h ? (double)(now - h) / (double)NS_PER_S : -1;
    /* h == 0 after a load: a gap overtook the first load's epoch. */
    out->saturated = atomic_load(&t->saturated);
    out->degraded = t->loaded && ((t->max_stale_ns > 0 && now - h > t->max_stale_ns)
                                  || out->saturated || atomic_load(&t->vet) != TABLE_VET_NONE);
    out->degraded_seconds = (double)t->degraded_ns / (double)NS_PER_S;
    out->next_rebuild_in = t->wanted > t->started && !table_may_catch_up_locked(t)
        ? (double)table_hold_back_locked(t, now) / (double)NS_PER_S : 0;
    pthread_mutex_unlock(&t->mu);
}
