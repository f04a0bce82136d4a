/*
 * The guarded table: its life, and the answer path's lookups (its inserts
 * and their journal are table_insert.c's).  Why each rule holds is in
 * table.h; table_follow.c and table_load.c keep the rest, under one lock
 * per table that no lookup ever takes.
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
    [WANT_REPUBLISH] = { "republish", false },
};

const char *table_want_name(enum table_want w)
{
    return w > WANT_NONE && w < WANT_COUNT ? wants[w].name : "none";
}

bool table_want_may_catch_up(enum table_want w)
{
    return w > WANT_NONE && w < WANT_COUNT && wants[w].may_catch_up;
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
    if (cfg->adaptive_enabled)
        t->ad = adapt_new(cfg->adaptive_max_entries, cfg->adaptive_min_hits,
                          (uint32_t)(cfg->adaptive_window * 1000.0));
    if (t->g == NULL || t->pending == NULL || (cfg->adaptive_enabled && t->ad == NULL)) {
        guard_free(t->g);
        pending_free(t->pending);
        adapt_free(t->ad);
        free(t);
        return NULL;
    }
    t->verified = t->ad != NULL ? adapt_set(t->ad) : NULL;
    t->door = t->ad != NULL ? adapt_door(t->ad) : NULL;
    t->vtags = t->ad != NULL ? adapt_tags(t->ad) : NULL;
    t->max_stale_ns = (int64_t)(cfg->max_staleness * (double)NS_PER_S);
    t->min_interval = cfg->min_rebuild_interval;
    atomic_init(&t->horizon, 0);
    atomic_init(&t->saturated, false);
    atomic_init(&t->held_until, 0);
    atomic_init(&t->spell, SPELL_TEXT);
    atomic_init(&t->vet, TABLE_VET_NONE);
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
    /*
     * The set readers of the published filter deny from: in memory they
     * map too; without a publisher (publish_free), back in the table's own.
     */
    if (t->ad != NULL) {
        size_t bytes = adapt_set_bytes(t->ad);
        void *mem = p->verified != NULL ? p->verified(p->ctx, bytes) : NULL;
        if (mem != NULL || p->verified == NULL)
            adapt_move_set(t->ad, mem, bytes);
        t->verified = adapt_set(t->ad);
    }
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
    adapt_free(t->ad);
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

bool table_ready(struct table *t)
{
    return guard_ready(t->g);
}

bool table_filter_info(struct table *t, struct filter_info *info,
                       struct filter_layer_info *layer, unsigned cap, unsigned *n_layers)
{
    *n_layers = guard_layers(t->g, layer, cap);
    if (guard_info(t->g, info))
        return true;
    memset(info, 0, sizeof *info);
    *n_layers = 0;
    return false;
}

void table_posts(struct table *t, struct table_posts *out)
{
    struct pending_info pi;
    pending_info(t->pending, &pi);
    *out = (struct table_posts){ .count = pi.count, .bytes = pi.bytes, .refused = pi.refused,
                                 .expired = pi.expired, .limit = pi.limit,
                                 .max_bytes = pi.max_bytes, .ttl = pi.ttl };
}

/* ------------------------------------------------------------ answers -- */

bool table_unsure(struct table *t, int64_t now)
{
    /* A peer's filter on probation: its "absent" is not believed yet, whatever max_staleness. */
    return atomic_load_explicit(&t->vet, memory_order_acquire) != TABLE_VET_NONE
        || atomic_load_explicit(&t->saturated, memory_order_relaxed)
        || now < atomic_load_explicit(&t->held_until, memory_order_relaxed);
}

bool table_stale(struct table *t, int64_t h, int64_t now)
{
    return answer_degraded(now, h, t->max_stale_ns, table_unsure(t, now));
}

void table_hold_absent(struct table *t, int64_t until)
{
    int64_t was = atomic_load(&t->held_until);
    while (until > was && !atomic_compare_exchange_weak(&t->held_until, &was, until)) {
    }
}

double table_held_for(struct table *t)
{
    int64_t left = atomic_load(&t->held_until) - monoclock_boot_ns();
    return left > 0 ? (double)left / (double)NS_PER_S : 0;
}

/* After inserts: a filter that just lost its rate degrades its absent answers at once. */
void table_check_saturated(struct table *t)
{
    if (!atomic_load_explicit(&t->saturated, memory_order_relaxed) && guard_saturated(t->g))
        table_set_saturated(t, true);
}

void table_tell_unsure_locked(struct table *t)
{
    if (t->pub.unsure)
        t->pub.unsure(t->pub.ctx, table_unsure(t, monoclock_boot_ns()));
}

void table_set_saturated(struct table *t, bool saturated)
{
    if (atomic_load_explicit(&t->saturated, memory_order_relaxed) == saturated)
        return;
    /*
     * Under mu: the publisher's current generation changes only under it,
     * so the flag never lands in a generation that is no longer live.
     */
    pthread_mutex_lock(&t->mu);
    atomic_store(&t->saturated, saturated);
    table_tell_unsure_locked(t);
    pthread_mutex_unlock(&t->mu);
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

/*
 * Whether an absent answer resting on the horizon a lookup read is degraded,
 * judged once (a batch shares its first judgement, as it shares h).
 */
struct staleness {
    struct table *t;
    int64_t h;
    int known;                      /* 0: not judged yet; 1: fresh; 2: stale */
};

static bool stale_once(void *ctx)
{
    struct staleness *s = ctx;
    if (s->known == 0)
        s->known = table_stale(s->t, s->h, monoclock_boot_ns()) ? 2 : 1;
    return s->known == 2;
}

/*
 * One ID through answer.h's sequence against the live filter f (inside the
 * caller's read section) and the verified-absent set, with the table's
 * own steps around it: the count of values the column's type refuses, of
 * denials, and the hot sketch, which hears of every "maybe" of the
 * filter's that the set did not deny.
 */
/* A query begun (answer_query_begin) answered from f, then ended. */
static enum table_answer lookup_query(struct table *t, const struct filter *f, struct answer_query *q,
                                      struct staleness *st)
{
    /* A set that holds entries, but none of this hash's tag (adapt.h): not asked. */
    const struct vset *set = t->verified;
    if (set != NULL && !vset_empty(set) && !adapt_tag_may(t->vtags, q->hash))
        set = NULL;
    enum answer a = answer_lookup(q, f, set, stale_once, st);
    if (a != ANSWER_NOT_READY && q->verdict == SPELL_NOT_A_VALUE)
        atomic_fetch_add_explicit(&t->not_a_value, 1, memory_order_relaxed);
    /*
     * Only the filter's "maybe" answers MAYBE (answer.h): the sketch needs
     * no other test.  Its door inline (adapt.h): most end there, no call.
     */
    if (a == ANSWER_MAYBE) {
        int carry;
        if (t->door != NULL && (carry = hot_door_hit(t->door, q->hash)) >= 0)
            adapt_maybe(t->ad, q, carry);
        else if (t->door == NULL && t->ad != NULL)
            adapt_maybe(t->ad, q, 0);           /* no door (min_hits 1): every hit goes on */
    } else if (t->ad != NULL && a == ANSWER_ABSENT && q->denied)
        adapt_denied(t->ad);
    answer_query_end(q);
    return (enum table_answer)a;
}

static enum table_answer lookup_in(struct table *t, enum spell_type sp, const struct filter *f,
                                   const void *id, size_t len, struct staleness *st)
{
    struct answer_query q;
    answer_query_begin(&q, sp, id, len);
    return lookup_query(t, f, &q, st);
}

_Static_assert((int)TABLE_NOT_READY == (int)ANSWER_NOT_READY && (int)TABLE_ABSENT == (int)ANSWER_ABSENT
               && (int)TABLE_MAYBE == (int)ANSWER_MAYBE && (int)TABLE_DEGRADED == (int)ANSWER_DEGRADED
               && (int)TABLE_UNPROVABLE == (int)ANSWER_UNPROVABLE,
               "enum table_answer is answer.h's enum answer");

enum table_answer table_lookup(struct table *t, const void *id, size_t len)
{
    /* Before the filter: a filter read after it is at least as new as h promises. */
    struct staleness st = { t, atomic_load_explicit(&t->horizon, memory_order_acquire), 0 };
    enum spell_type sp = table_spell(t);
    const struct filter *f;
    struct rcu_read r = guard_read_enter(t->g, &f);
    enum table_answer a = lookup_in(t, sp, f, id, len, &st);
    guard_read_exit(r);
    return a;
}

/* How many IDs ahead table_lookup_many begins and prefetches. */
#define LOOKAHEAD 8

bool table_lookup_many(struct table *t, size_t n, const char *const *ids, const size_t *lens,
                       enum table_answer *out)
{
    struct staleness st = { t, atomic_load_explicit(&t->horizon, memory_order_acquire), 0 };
    enum spell_type sp = table_spell(t);
    const struct filter *f;
    struct rcu_read r = guard_read_enter(t->g, &f);
    /*
     * Query i begun (its key spelled and hashed) and its blocks in every
     * layer prefetched while query i - LOOKAHEAD is answered, so that the
     * cache misses of a batch's keys overlap (filter_contains_hashes has
     * the figures: 4-32 ahead tried, 8 kept).  The same answers, in order.
     */
    struct answer_query q[LOOKAHEAD];
    for (size_t i = 0; f != NULL && i < n + LOOKAHEAD; i++) {
        if (i >= LOOKAHEAD)
            out[i - LOOKAHEAD] = lookup_query(t, f, &q[i % LOOKAHEAD], &st);
        if (i < n) {
            answer_query_begin(&q[i % LOOKAHEAD], sp, ids[i], lens[i]);
            if (q[i % LOOKAHEAD].verdict == SPELL_KEY)
                filter_prefetch_hash(f, q[i % LOOKAHEAD].hash);
        }
    }
    guard_read_exit(r);
    return f != NULL;
}
