/*
 * The guarded table's verified-absent IDs as the verifier, POST /absent
 * and the status documents see them (table_adapt.h, which argues why a
 * denial is safe); adapt.c keeps the orders the argument needs.
 */
#include "table_int.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(TABLE_KEY_MAX == VSET_KEY_MAX, "a candidate's key fits the set's slot");

bool table_adaptive(const struct table *t)
{
    return t->ad != NULL;
}

void table_set_verifier_wake(struct table *t, void (*wake)(void *arg), void *arg)
{
    if (t->ad != NULL)
        adapt_set_wake(t->ad, wake, arg);
}

/* Whether the POST journal may hold an ID of hash h (such an ID is never verified). */
static bool posted(void *arg, uint64_t h)
{
    return pending_holds(arg, h);
}

size_t table_candidates(struct table *t, struct table_candidate *out, size_t max)
{
    if (t->ad == NULL || max == 0)
        return 0;
    struct adapt_candidate *c = malloc(max * sizeof *c);
    if (c == NULL)
        return 0;
    size_t n = adapt_take(t->ad, c, max, posted, t->pending);
    for (size_t i = 0; i < n; i++) {
        memcpy(out[i].key, c[i].key, c[i].klen);
        out[i].klen = c[i].klen;
        out[i].hash = c[i].hash;
        out[i].ticket = c[i].ticket;
        out[i].generation = c[i].generation;
    }
    free(c);
    return n;
}

bool table_candidates_waiting(struct table *t)
{
    struct adapt_info ai;
    if (t->ad == NULL)
        return false;
    adapt_info(t->ad, &ai);
    return ai.queued > 0;
}

enum table_verified table_verified(struct table *t, const struct table_candidate *c,
                                   enum table_verdict v)
{
    if (t->ad == NULL)
        return TABLE_GIVEN_BACK;
    struct adapt_candidate ac = { .hash = c->hash, .ticket = c->ticket,
                                  .generation = c->generation,
                                  .klen = c->klen < VSET_KEY_MAX ? c->klen : VSET_KEY_MAX };
    memcpy(ac.key, c->key, ac.klen);
    enum adapt_verdict av = v == TABLE_VERIFIED_ABSENT ? ADAPT_ABSENT
                          : v == TABLE_VERIFIED_PRESENT ? ADAPT_PRESENT : ADAPT_FAILED;
    switch (adapt_verified(t->ad, &ac, av)) {
    case ADAPT_ENTERED: return TABLE_ENTERED;
    case ADAPT_RACED: return TABLE_RACED;
    case ADAPT_SETTLED: return TABLE_SETTLED;
    case ADAPT_GIVEN_BACK: break;
    }
    return TABLE_GIVEN_BACK;
}

enum table_verified table_enter_verified(struct table *t, uint64_t hash, const char *key,
                                         size_t klen)
{
    /* The upstream's key, spelled as this table spells (the HELLO matched): its hash must agree. */
    if (t->ad == NULL || klen == 0 || klen > VSET_KEY_MAX || filter_hash(key, klen) != hash)
        return TABLE_GIVEN_BACK;
    switch (adapt_enter(t->ad, hash, key, klen, posted, t->pending)) {
    case ADAPT_ENTERED: return TABLE_ENTERED;
    case ADAPT_RACED: return TABLE_RACED;
    default: return TABLE_GIVEN_BACK;
    }
}

void table_forget_verified(struct table *t)
{
    if (t->ad != NULL)
        adapt_reset(t->ad);
}

void table_forwarded(struct table *t, const struct table_candidate *c)
{
    if (t->ad != NULL)
        adapt_forwarded(t->ad, c->hash);
}

size_t table_verified_log(struct table *t, uint64_t *cursor, struct table_candidate *out,
                          size_t max)
{
    struct adapt_candidate c[16];
    if (t->ad == NULL || max == 0)
        return 0;
    size_t n = adapt_log_read(t->ad, cursor, c, max < 16 ? max : 16);
    for (size_t i = 0; i < n; i++) {
        memcpy(out[i].key, c[i].key, c[i].klen);
        out[i].klen = c[i].klen;
        out[i].hash = c[i].hash;
        out[i].ticket = out[i].generation = 0;
    }
    return n;
}

void table_set_verified_wake(struct table *t, void (*wake)(void *arg), void *arg)
{
    if (t->ad != NULL)
        adapt_set_entered(t->ad, wake, arg);
}

bool table_verified_ahead(struct table *t, uint64_t cursor)
{
    return t->ad != NULL && adapt_log_ahead(t->ad, cursor);
}

/* A report's answer under the live filter: whether it is worth a candidate. */
static bool never_stale(void *ctx)
{
    (void)ctx;
    return false;
}

enum table_report table_report(struct table *t, const void *id, size_t len)
{
    if (t->ad == NULL)
        return TABLE_REPORT_OFF;
    struct answer_query q;
    enum spell_type sp = table_spell(t);
    answer_query_begin(&q, sp, id, len);
    const struct filter *f;
    struct rcu_read r = guard_read_enter(t->g, &f);
    /* Degraded or not: the question is only whether the filter and the set already deny it. */
    enum answer a = answer_lookup(&q, f, adapt_set(t->ad), never_stale, NULL);
    guard_read_exit(r);
    enum table_report out;
    if (a == ANSWER_NOT_READY)
        out = TABLE_REPORT_NOT_READY;
    else if (a == ANSWER_UNPROVABLE || (a == ANSWER_MAYBE && q.klen > VSET_KEY_MAX))
        out = TABLE_REPORT_UNPROVABLE;
    else if (a != ANSWER_MAYBE)
        out = TABLE_REPORT_ABSENT;
    else
        out = adapt_report(t->ad, q.hash, q.key, q.klen) ? TABLE_REPORT_QUEUED : TABLE_REPORT_HELD;
    /* Denied by the set: a replica that asks may have missed the entry (table_adapt.h, "Down a tree"). */
    if (out == TABLE_REPORT_ABSENT && q.denied)
        adapt_resend(t->ad, q.hash, q.key, q.klen);
    answer_query_end(&q);
    return out;
}

void table_adaptive_info(struct table *t, struct table_adaptive *out)
{
    memset(out, 0, sizeof *out);
    if (t->ad == NULL)
        return;
    struct adapt_info ai;
    adapt_info(t->ad, &ai);
    *out = (struct table_adaptive){
        .enabled = true, .entries = ai.entries, .max_entries = ai.max_entries,
        .queued = ai.queued, .candidates = ai.candidates, .reported = ai.reported,
        .dropped = ai.dropped, .verified_absent = ai.verified_absent,
        .verified_present = ai.verified_present, .verify_failed = ai.verify_failed,
        .raced = ai.raced, .posted = ai.posted, .evictions = ai.evictions,
        .invalidations = ai.invalidations, .denied = ai.denied,
        .received = ai.received, .forwarded = ai.forwarded,
    };
}
