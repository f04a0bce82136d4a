/*
 * The staleness rule and the lookup sequence (answer.h): one copy, linked
 * by the daemon and by libbloomguard, and the arithmetic the rule needs
 * done without overflow.
 */
#include "answer.h"

#include <stdlib.h>
#include <time.h>

/* a - b, saturated: a horizon from a shared file may be INT64_MIN. */
static int64_t sat_sub(int64_t a, int64_t b)
{
    int64_t r;
    if (!__builtin_sub_overflow(a, b, &r))
        return r;
    return b < 0 ? INT64_MAX : INT64_MIN;
}

static int64_t sat_add(int64_t a, int64_t b)
{
    int64_t r;
    if (!__builtin_add_overflow(a, b, &r))
        return r;
    return b > 0 ? INT64_MAX : INT64_MIN;
}

int64_t answer_age(int64_t now, int64_t h)
{
    return sat_sub(now, h);
}

/* Whether no horizon can back an absent answer at any time: the age rule aside. */
static bool never_backed(int64_t h, int64_t max_stale_ns)
{
    return max_stale_ns < 0 || h <= 0;
}

bool answer_degraded(int64_t now, int64_t h, int64_t max_stale_ns, bool unsure)
{
    if (unsure)
        return true;
    if (max_stale_ns == 0)
        return false;
    if (never_backed(h, max_stale_ns))
        return true;
    /* Both tests compare against now: an age that overflows is simply huge. */
    return h > sat_add(now, ANSWER_FUTURE_SLACK_NS) || answer_age(now, h) > max_stale_ns;
}

/* The length of [a, b) (0 if empty), saturated. */
static int64_t span(int64_t a, int64_t b)
{
    return b > a ? sat_sub(b, a) : 0;
}

int64_t answer_degraded_ns(int64_t from, int64_t to, int64_t h, int64_t max_stale_ns)
{
    if (to <= from || max_stale_ns == 0)
        return 0;
    if (never_backed(h, max_stale_ns))
        return span(from, to);
    /*
     * answer_degraded holds for t < h - slack (a future horizon) and for
     * t > h + max_stale_ns (too old); h > 0 here, so h - slack cannot
     * overflow, and max_stale_ns > 0 makes the two stretches disjoint.
     */
    int64_t fresh_from = h - ANSWER_FUTURE_SLACK_NS, stale_after = sat_add(h, max_stale_ns);
    int64_t early = span(from, fresh_from < to ? fresh_from : to);
    int64_t late = span(stale_after > from ? stale_after : from, to);
    return sat_add(early, late);
}

void answer_query_begin(struct answer_query *q, enum spell_type sp, const void *id, size_t len)
{
    q->filter_maybe = false;
    q->denied = false;
    q->hash = 0;
    q->verdict = spell_key_buf(sp, id, len, q->buf, sizeof q->buf, &q->heap, &q->key, &q->klen);
    if (q->verdict == SPELL_KEY)
        q->hash = filter_hash(q->key, q->klen);
}

void answer_query_end(struct answer_query *q)
{
    free(q->heap);
    q->heap = NULL;
}

enum answer answer_lookup(struct answer_query *q, const struct filter *f,
                          const struct vset *denied, answer_stale_fn *stale, void *ctx)
{
    if (f == NULL)
        return ANSWER_NOT_READY;
    if (q->verdict == SPELL_MAYBE)
        return ANSWER_UNPROVABLE;
    if (q->verdict == SPELL_KEY && filter_contains_hash(f, q->hash)) {
        q->filter_maybe = true;
        /* An empty set (the usual one) answers without a call. */
        if (denied == NULL || vset_empty(denied) || !vset_has(denied, q->hash, q->key, q->klen))
            return ANSWER_MAYBE;
        q->denied = true;
    }
    return stale(ctx) ? ANSWER_DEGRADED : ANSWER_ABSENT;
}
