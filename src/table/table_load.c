/*
 * The guarded table's loads and figures: a load's filter built off to the
 * side and committed with the horizon it proves, catch-ups and restored
 * snapshots, the position the next load resumes from, and the status the
 * endpoints report.
 */
#include "table_int.h"
#include "answer.h"
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

/* A filter for a load of t sized for items, its layers published if t is. */
static struct filter *load_filter(struct table *t, uint64_t items, enum filter_error *err)
{
    /* The sizing in force now: a SIGHUP may have changed it since start. */
    struct table_sizing sz = table_sizing(t);
    struct filter_growth g = table_growth_of(&sz);
    struct filter_alloc a;
    bool pub = t->pub.begin && t->pub.begin(t->pub.ctx, &a);
    struct filter *f = filter_new_with(sz.kind, items, sz.false_positive_rate, &g,
                                       pub ? &a : NULL, err);
    /* Sized for the rows the COPY reads: layer 0 takes them all (filter.h). */
    if (f != NULL)
        filter_loading(f);
    return f;
}

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
    l->f = load_filter(t, items, err);
    if (l->f == NULL) {
        free(l);
        return NULL;
    }
    guard_begin_bulk(t->g, l->f);
    return l;
}

struct filter *table_load_resize(struct table_load *l, uint64_t rows, uint64_t *items,
                                 enum filter_error *err)
{
    *items = table_plan_items(l->t, rows);
    /*
     * Rows within expected_items' tolerance plan to expected_items again,
     * which they just outgrew: the filter they need is one for the rows
     * counted (a load's layer takes a little more than its capacity, and
     * the next pass reads the same snapshot), and never one no larger than
     * this one's first layer, or the COPY would go round again.
     */
    struct filter_layer_info first;
    if (filter_layer_info(l->f, 0, &first) && *items <= first.capacity)
        *items = rows > first.capacity ? rows : first.capacity + first.capacity / 64 + 1;
    struct filter *f = load_filter(l->t, *items, err);
    if (f == NULL)
        return NULL;
    /* The inserts made since the load began wait in the backlog: none is lost. */
    guard_replace_bulk(l->t->g, f);
    l->f = f;
    return f;
}

struct filter *table_load_filter(struct table_load *l)
{
    return l->f;
}

void table_load_seen(struct table_load *l, const char *id, size_t len, uint64_t h)
{
    pending_seen(l->t->pending, id, len, h);
}

void table_load_added(struct table_load *l, const uint64_t *hs, size_t n)
{
    /* The rows exist: whatever was verified of their IDs before is over (adapt_added_bulk). */
    if (l->t->ad != NULL)
        adapt_added_bulk(l->t->ad, hs, n);
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

/*
 * Caller holds mu: the table has a filter from now on, which it may answer
 * from; its degraded time counts from here, not from before it could
 * answer at all.  The caller has set the new filter's saturation
 * (table_set_saturated) before.
 */
static void loaded_locked(struct table *t)
{
    table_account_locked(t, atomic_load(&t->horizon), monoclock_boot_ns());
    t->loaded = true;
}

/*
 * Caller holds mu: a load or catch-up that started at start in epoch is
 * live.  proof: a follower's (a poll), which table_schema may hold back; a
 * load's own start is a proof by itself.
 */
static void covered_locked(struct table *t, uint64_t epoch, int64_t start, const char *pos,
                           bool proof)
{
    /* A gap since the load began is not covered by it: keep waiting for the next. */
    if (epoch == t->epoch)
        t->covered = epoch;
    if (!proof || !t->schema_off)
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
    pending_expire(t->pending, monoclock_boot_s());
    pending_replay(t->pending, l->f);
    /* Loaded: keys from now on grow it as any filter (filter.h). */
    filter_loaded(l->f);
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
    loaded_locked(t);
    t->generation++;
    /* The table's own COPY: whatever a peer's filter was, this one is believed. */
    atomic_store_explicit(&t->vet, TABLE_VET_NONE, memory_order_release);
    t->vet_horizon = 0;
    table_tell_unsure_locked(t);
    t->layers_seen = 0;             /* a new filter: its growth is timed afresh */
    covered_locked(t, epoch, start, pos, false);
    /* Changes are the load's shape's from now on (what it read, not what a check saw before). */
    if (ident.shape[0] != '\0') {
        t->schema_seen_set = true;
        snprintf(t->schema_seen, sizeof t->schema_seen, "%s", ident.shape);
    }
    table_schema_eval_locked(t);
    t->st.copies++;
    pthread_mutex_unlock(&t->mu);
    table_tap_changed(t);
    return true;
}

/*
 * f's bits into a filter of the same parameters made by a (the
 * publisher's allocator, so that the filter that goes live is the
 * published one); NULL when it cannot be made.  f is no one else's yet:
 * nothing writes it meanwhile.
 */
static struct filter *copy_with(const struct filter *f, const struct filter_alloc *a)
{
    struct filter_params fp;
    enum filter_error fe;
    unsigned char buf[65536];
    filter_export(f, &fp);
    struct filter *c = filter_new_from_with(&fp, a, &fe);
    for (unsigned i = 0; c != NULL && i < fp.layers; i++) {
        uint64_t size = fp.layer[i].blocks * FILTER_BLOCK_BYTES;
        for (uint64_t off = 0; off < size; off += sizeof buf) {
            size_t n = size - off < sizeof buf ? (size_t)(size - off) : sizeof buf;
            if (!filter_bits_read(f, i, off, buf, n) || !filter_bits_write(c, i, off, buf, n)) {
                filter_free(c);
                return NULL;
            }
        }
    }
    return c;
}

struct table_load *table_load_adopt(struct table *t, struct filter *f,
                                    const struct table_ident *ident)
{
    struct filter_alloc a;
    /* Published (publish.h): the filter that goes live must be the one in the file. */
    if (t->pub.begin && t->pub.begin(t->pub.ctx, &a)) {
        struct filter *c = copy_with(f, &a);
        filter_free(f);
        if ((f = c) == NULL)
            return NULL;            /* the next begin drops the generation begun */
    }
    struct table_load *l = malloc(sizeof *l);
    if (l == NULL) {
        filter_free(f);
        return NULL;
    }
    *l = (struct table_load){ .t = t, .f = f, .ident = *ident };
    guard_begin(t->g, f);
    return l;
}

struct live_call {
    void (*fn)(void *arg, const struct filter *f);
    void *arg;
    bool called;
};

static void with_live(void *arg, const struct filter *f)
{
    struct live_call *c = arg;
    if (f == NULL)
        return;
    c->fn(c->arg, f);
    c->called = true;
}

bool table_with_live(struct table *t, void (*fn)(void *arg, const struct filter *f), void *arg)
{
    struct live_call c = { fn, arg, false };
    guard_with_live(t->g, with_live, &c);
    return c.called;
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
    covered_locked(t, epoch, start, pos, false);
    t->st.catchups++;
    t->st.feed_rows_read += rows;
    t->st.last_feed_rows = rows;
    pthread_mutex_unlock(&t->mu);
}

void table_polled(struct table *t, uint64_t epoch, int64_t start, const char *pos,
                  uint64_t rows)
{
    pthread_mutex_lock(&t->mu);
    covered_locked(t, epoch, start, pos, true);
    t->st.notifications += rows;
    pthread_mutex_unlock(&t->mu);
}

/* ---------------------------------------------------------- snapshots -- */

bool table_posts_export(struct table *t, table_posts_count_fn count, table_posts_each_fn each,
                        void *ctx)
{
    return pending_export(t->pending, monoclock_boot_s(), count, each, ctx);
}

bool table_posts_restore(struct table *t, const char *id, size_t len, uint64_t ttl_left)
{
    return pending_restore(t->pending, id, len, filter_hash(id, len), ttl_left,
                           monoclock_boot_s()) == PENDING_OK;
}

const struct filter *table_live_filter(struct table *t)
{
    return guard_live(t->g);
}

/*
 * f goes live on the committing thread before any load: published, as a
 * copy in the publisher's memory (copy_with: nothing writes f meanwhile,
 * it is no one else's yet), so that readers of the file see the filter
 * the daemon answers from; the journal replayed into it after guard_begin,
 * so that a POST is in it whether it was journalled before the replay or
 * accepted after (guard_writable is false until guard_begin: none is
 * accepted before).
 */
static bool restore_live(struct table *t, struct filter *f, enum spell_type spell)
{
    struct filter_alloc a;
    bool published = false, pub = t->pub.begin && t->pub.begin(t->pub.ctx, &a);
    if (pub) {
        struct filter *c = copy_with(f, &a);
        if (c != NULL) {
            filter_free(f);
            f = c;
            published = true;
        }                           /* else f, unpublished: the next begin drops the generation */
    }
    guard_begin(t->g, f);
    pending_replay(t->pending, f);
    if (published && t->pub.live) {
        /* A snapshot's filter proves no horizon: 0 until a catch-up or a COPY. */
        pthread_mutex_lock(&t->mu);
        t->pub.live(t->pub.ctx, f, spell, 0);
        pthread_mutex_unlock(&t->mu);
    }
    guard_commit(t->g);
    return published || !pub;
}

bool table_restore(struct table *t, struct filter *f, const char *pos, const char *from,
                   uint64_t items, double seconds, const struct table_ident *ident)
{
    /* Before the swap: a POST accepted once it is live spells its IDs as the snapshot's keys. */
    spelled(t, ident->spell);
    atomic_store_explicit(&t->spell, ident->spell, memory_order_release);
    bool ok = restore_live(t, f, ident->spell);
    table_set_saturated(t, guard_saturated(t->g));
    pthread_mutex_lock(&t->mu);
    t->ident = *ident;
    /* The horizon stays 0 (degraded) until a catch-up or a COPY. */
    loaded_locked(t);
    snprintf(t->position, sizeof t->position, "%s", pos ? pos : "");
    t->st.attempted = true;
    t->st.last_rows = items;
    t->st.last_seconds = seconds;
    t->st.last_finished = time(NULL);
    snprintf(t->st.last_reason, sizeof t->st.last_reason, "start");
    snprintf(t->st.last_kind, sizeof t->st.last_kind, "%s", from);
    snprintf(t->st.restored_from, sizeof t->st.restored_from, "%s",
             strcmp(from, "peer") == 0 ? "peer" : "file");
    t->generation++;
    pthread_mutex_unlock(&t->mu);
    table_tap_changed(t);
    return ok;
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

bool table_set_method(struct table *t, const char *method, const char *why)
{
    char m[sizeof t->st.method], w[sizeof t->st.method_why];
    /* Compared as stored: a reason longer than the field must not read as a change each time. */
    snprintf(m, sizeof m, "%s", method);
    snprintf(w, sizeof w, "%s", why);
    pthread_mutex_lock(&t->mu);
    bool changed = strcmp(t->st.method, m) != 0 || strcmp(t->st.method_why, w) != 0;
    if (changed) {
        memcpy(t->st.method, m, sizeof m);
        memcpy(t->st.method_why, w, sizeof w);
        t->st.method_since = time(NULL);
    }
    pthread_mutex_unlock(&t->mu);
    return changed;
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
    int64_t now = monoclock_boot_ns();
    pthread_mutex_lock(&t->mu);
    int64_t h = atomic_load(&t->horizon);
    table_account_locked(t, h, now);
    *out = t->st;
    out->ident = t->ident;
    out->not_a_value = atomic_load_explicit(&t->not_a_value, memory_order_relaxed);
    snprintf(out->position, sizeof out->position, "%s", t->position);
    out->horizon_age = h > 0 ? (double)answer_age(now, h) / (double)NS_PER_S : -1;
    /* h == 0 after a load: a gap overtook the first load's epoch. */
    out->saturated = atomic_load(&t->saturated);
    out->degraded = t->loaded && table_stale(t, h, now);
    out->held_for = table_held_for(t);
    out->degraded_seconds = (double)t->degraded_ns / (double)NS_PER_S;
    out->next_rebuild_in = t->wanted > t->started && !table_may_catch_up_locked(t)
        ? (double)table_hold_back_locked(t, now) / (double)NS_PER_S : 0;
    pthread_mutex_unlock(&t->mu);
}
