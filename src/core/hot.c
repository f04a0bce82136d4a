/*
 * The hot-"maybe" sketch (hot.h): buckets of three Space-Saving counters,
 * one cache line each, taken by a try-lock that drops a hit rather than
 * wait.  Everything but the lock word is plain memory, read and written
 * only while the bucket is held.
 */
#include "hot.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define WAYS 3

enum { COUNTING = 0, QUEUED = 1, SETTLED = 2 };

/* 16 bytes; empty while cnt is 0 and it is COUNTING. */
struct entry {
    uint64_t hash;
    uint32_t cnt : 15;      /* hits counted, with those inherited (Space-Saving's estimate) */
    uint32_t err : 15;      /* of them, those inherited from the entry it replaced */
    uint32_t state : 2;
    uint32_t since;         /* ms: the window's start, or when it was queued or settled */
};

/* One cache line: the lock word and three entries. */
struct bucket {
    atomic_uint busy;
    uint32_t pad;
    struct entry e[WAYS];
    uint8_t fill[64 - 8 - WAYS * 16];
};
_Static_assert(sizeof(struct entry) == 16 && sizeof(struct bucket) == 64, "a bucket is a cache line");

static inline bool used(const struct entry *e)
{
    return e->cnt != 0 || e->state != COUNTING;
}

struct hot {
    struct bucket *b;
    uint64_t mask;
    uint32_t min_hits, window_ms, hold_ms, queue_ms;
};

struct hot *hot_new(uint32_t entries, uint32_t min_hits, uint32_t window_ms)
{
    if (min_hits < 1 || min_hits > HOT_MAX_HITS || window_ms == 0)
        return NULL;
    struct hot *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    uint64_t n = 1;
    while (n * WAYS < entries && n < (UINT64_C(1) << 30))
        n <<= 1;
    s->b = aligned_alloc(64, n * sizeof *s->b);
    if (s->b == NULL) {
        free(s);
        return NULL;
    }
    memset(s->b, 0, n * sizeof *s->b);
    for (uint64_t i = 0; i < n; i++)
        atomic_init(&s->b[i].busy, 0);
    s->mask = n - 1;
    s->min_hits = min_hits;
    s->window_ms = window_ms;
    uint64_t hold = (uint64_t)window_ms * HOT_HOLD_WINDOWS, queue = (uint64_t)window_ms * HOT_QUEUE_WINDOWS;
    s->hold_ms = hold > INT32_MAX ? INT32_MAX : (uint32_t)hold;
    s->queue_ms = queue > INT32_MAX ? INT32_MAX : (uint32_t)queue;
    return s;
}

void hot_free(struct hot *s)
{
    if (s == NULL)
        return;
    free(s->b);
    free(s);
}

uint32_t hot_capacity(const struct hot *s)
{
    return (uint32_t)((s->mask + 1) * WAYS);
}

static struct bucket *bucket_of(struct hot *s, uint64_t h)
{
    /* The high bits: the filter and the set index by the low ones. */
    return &s->b[(h >> 40) & s->mask];
}

static void lock(struct bucket *b)
{
    while (atomic_exchange_explicit(&b->busy, 1, memory_order_acquire))
        ;
}

static void unlock(struct bucket *b)
{
    atomic_store_explicit(&b->busy, 0, memory_order_release);
}

/* Hits the entry still counts for at now: what a newcomer must beat to take its place. */
static unsigned weight(const struct hot *s, const struct entry *e, uint32_t now)
{
    uint32_t age = now - e->since;
    if (!used(e))
        return 0;
    switch (e->state) {
    case QUEUED: return age < s->queue_ms ? HOT_MAX_HITS : 0;
    case SETTLED: return age < s->hold_ms ? HOT_MAX_HITS : 0;
    default: return age <= s->window_ms ? e->cnt : 0;
    }
}

static struct entry *find(struct bucket *b, uint64_t h)
{
    for (int i = 0; i < WAYS; i++)
        if (used(&b->e[i]) && b->e[i].hash == h)
            return &b->e[i];
    return NULL;
}

/* A new entry for h in place of the lightest one, inheriting its weight (Space-Saving). */
static struct entry *take(struct hot *s, struct bucket *b, uint64_t h, uint32_t now)
{
    struct entry *v = &b->e[0];
    unsigned vw = weight(s, v, now);
    for (int i = 1; i < WAYS; i++) {
        unsigned w = weight(s, &b->e[i], now);
        if (w < vw) {
            v = &b->e[i];
            vw = w;
        }
    }
    if (vw >= HOT_MAX_HITS)
        vw = HOT_MAX_HITS - 1;
    *v = (struct entry){ .hash = h, .cnt = vw, .err = vw, .state = COUNTING, .since = now };
    return v;
}

/* e is counting again from zero if its queue or hold time is over; whether it is counting. */
static bool counting(const struct hot *s, struct entry *e, uint32_t now)
{
    uint32_t age = now - e->since;
    if ((e->state == QUEUED && age >= s->queue_ms) || (e->state == SETTLED && age >= s->hold_ms)) {
        *e = (struct entry){ .hash = e->hash, .state = COUNTING, .since = now };
        return true;
    }
    return e->state == COUNTING;
}

bool hot_hit(struct hot *s, uint64_t h, uint32_t now)
{
    struct bucket *b = bucket_of(s, h);
    /* Another thread in this bucket right now: drop the hit rather than wait. */
    if (atomic_exchange_explicit(&b->busy, 1, memory_order_acquire))
        return false;
    bool cand = false;
    struct entry *e = find(b, h);
    if (e == NULL)
        e = take(s, b, h, now);
    if (counting(s, e, now)) {
        if (now - e->since > s->window_ms)
            *e = (struct entry){ .hash = h, .state = COUNTING, .since = now };
        if (e->cnt < HOT_MAX_HITS)
            e->cnt++;
        /* cnt - err: the hits this very ID made since it took the entry. */
        if ((unsigned)(e->cnt - e->err) >= s->min_hits) {
            e->state = QUEUED;
            e->since = now;
            cand = true;
        }
    }
    unlock(b);
    return cand;
}

bool hot_nominate(struct hot *s, uint64_t h, uint32_t now)
{
    struct bucket *b = bucket_of(s, h);
    lock(b);
    struct entry *e = find(b, h);
    if (e == NULL)
        e = take(s, b, h, now);
    bool cand = counting(s, e, now);
    if (cand) {
        e->state = QUEUED;
        e->since = now;
    }
    unlock(b);
    return cand;
}

void hot_settle(struct hot *s, uint64_t h, bool settled, uint32_t now)
{
    struct bucket *b = bucket_of(s, h);
    lock(b);
    struct entry *e = find(b, h);
    if (e != NULL)
        *e = (struct entry){ .hash = h, .state = settled ? SETTLED : COUNTING, .since = now };
    unlock(b);
}
