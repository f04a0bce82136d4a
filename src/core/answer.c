/*
 * The staleness rule and the lookup sequence (answer.h): one copy, linked
 * by the daemon and by libbloomguard.
 */
#include "answer.h"

#include <stdlib.h>
#include <time.h>

bool answer_degraded(int64_t now, int64_t h, int64_t max_stale_ns, bool saturated)
{
    return (max_stale_ns != 0 && now - h > max_stale_ns) || saturated;
}

int64_t answer_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (int64_t)ts.tv_sec * INT64_C(1000000000) + ts.tv_nsec;
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
        if (denied == NULL || !vset_has(denied, q->hash, q->key, q->klen))
            return ANSWER_MAYBE;
        q->denied = true;
    }
    return stale(ctx) ? ANSWER_DEGRADED : ANSWER_ABSENT;
}
