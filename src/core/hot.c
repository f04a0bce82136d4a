/*
 * The hot-"maybe" sketch (hot.h): a doorkeeper of small counters in front of
 * buckets of three Space-Saving counters, one cache line each, taken by a
 * try-lock that drops a hit rather than wait.  Everything in a bucket but
 * the lock word is plain memory, read and written only while the bucket is
 * held; the doorkeeper is atomic bytes, loaded and stored without a lock.
 */
#include "hot.h"

#include <limits.h>
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
    /* The doorkeeper (hot.h: struct hot_door); cells NULL when min_hits is 1. */
    struct hot_door door;
    _Atomic uint32_t door_since;
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
    if (min_hits > 1) {
        /*
         * 32 cells (bytes) per entry, at least 2^17: a cell is shared by
         * the IDs asked within two windows, and a random ID whose cell
         * others filled to door_pass goes on to a bucket as if it came
         * back (bench/lookup_ir: 2^15 words of bitmaps were full at 10^5
         * distinct IDs a window).  The memory of the words of fourteen
         * 2-bit counter pairs before (2026-11-30), a byte a cell: no
         * counter's place to compute, no variable shift.
         */
        uint64_t cells = UINT64_C(1) << 17;
        uint32_t shift = 64 - 17;
        while (cells < n * WAYS * 32 && shift > 34) {
            cells <<= 1;
            shift--;
        }
        s->door.cells = aligned_alloc(64, cells);
        if (s->door.cells == NULL) {
            free(s->b);
            free(s);
            return NULL;
        }
        s->door.shift = shift;
        s->door.pass = min_hits / 2 < HOT_DOOR_PASS ? min_hits / 2 : HOT_DOOR_PASS;
        for (uint64_t i = 0; i < cells; i++)
            atomic_init(&s->door.cells[i], 0);
        atomic_init(&s->door_since, 0);
        /* Any start: a cell of zeros counts nothing, whatever generation its tag reads as. */
        atomic_init(&s->door.gen, 0);
    }
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
    free(s->door.cells);
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

/*
 * A new entry for h in place of the lightest one, inheriting its weight
 * (Space-Saving), with `carry` hits of h's own that the sketch did not see
 * (the doorkeeper's, hot.h).
 */
static struct entry *take_at(struct entry *v, unsigned vw, uint64_t h, uint32_t now, unsigned carry)
{
    if (vw + carry >= HOT_MAX_HITS - 1)
        vw = HOT_MAX_HITS - 2 - carry;
    *v = (struct entry){ .hash = h, .cnt = vw + carry, .err = vw, .state = COUNTING, .since = now };
    return v;
}

static struct entry *take(struct hot *s, struct bucket *b, uint64_t h, uint32_t now, unsigned carry)
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
    return take_at(v, vw, h, now, carry);
}

/*
 * e is counting again if its queue or hold time is over, from `carry`
 * (hits the doorkeeper kept from it meanwhile); whether it is counting.
 */
static bool counting(const struct hot *s, struct entry *e, uint32_t now, unsigned carry)
{
    uint32_t age = now - e->since;
    if ((e->state == QUEUED && age >= s->queue_ms) || (e->state == SETTLED && age >= s->hold_ms)) {
        *e = (struct entry){ .hash = e->hash, .cnt = carry, .state = COUNTING, .since = now };
        return true;
    }
    return e->state == COUNTING;
}

/*
 * The doorkeeper's generation at now: when window_ms has passed since the
 * current one began, the thread that wins the turn starts the next.
 * Nothing is cleared:
 * a cell's tag says which generation its counters are of.  Turned by
 * every call that has the clock (not hot_door: hot.h says what that
 * costs).
 */
__attribute__((noinline)) static void door_turn_at(struct hot *s, uint32_t since, uint32_t now)
{
    /*
     * One generation on, however long ago the last turn was: the one
     * ending may hold hits of a moment ago (the door turns only when a
     * hit goes on), which the next window must still count.  Two on
     * forgot them: an ID the sketch held then lost the hits the door kept
     * of it afterwards (tests/adaptive.test: a hot false positive's 4th
     * hit was no candidate).
     */
    if (atomic_compare_exchange_strong_explicit(&s->door_since, &since, now, memory_order_relaxed,
                                                memory_order_relaxed))
        atomic_fetch_add_explicit(&s->door.gen, 16, memory_order_relaxed);
}

static inline void door_turn(struct hot *s, uint32_t now)
{
    uint32_t since = atomic_load_explicit(&s->door_since, memory_order_relaxed);
    if (now - since >= s->window_ms)
        door_turn_at(s, since, now);
}

/* A hit past the door, with the hits it carries: out of line, the door's path stays short. */
__attribute__((noinline)) static bool count(struct hot *s, uint64_t h, uint32_t now, int carry)
{
    struct bucket *b = bucket_of(s, h);
    /* Another thread in this bucket right now: drop the hit rather than wait. */
    if (atomic_exchange_explicit(&b->busy, 1, memory_order_acquire))
        return false;
    bool cand = false;
    /*
     * One pass over the bucket: h's entry, or else the lightest one (the
     * first of the lightest, as take() picks it), which take_at replaces.
     * find() then take() read the bucket twice, and most hits past the
     * door are of IDs the bucket does not hold (bench/lookup_ir).
     */
    struct entry *e = NULL, *v = NULL;
    unsigned vw = UINT_MAX;
    for (int i = 0; i < WAYS; i++) {
        struct entry *x = &b->e[i];
        if (x->hash == h && used(x)) {
            e = x;
            break;
        }
        unsigned w = weight(s, x, now);
        if (w < vw) {
            v = x;
            vw = w;
        }
    }
    /*
     * The door's hits are carried where the sketch does not count h: a
     * new entry, or one whose window or hold is over.  Within an entry's
     * window they are not: every hit of h since it took the entry came
     * here (the door forgets h a window after its last hit at the
     * earliest, hot_door_hit in hot.h).
     */
    if (e == NULL)
        e = take_at(v, vw, h, now, (unsigned)carry);
    else if (e->state != COUNTING)
        counting(s, e, now, (unsigned)carry);       /* counts again, from carry, if its time is over */
    else if (now - e->since > s->window_ms)
        *e = (struct entry){ .hash = h, .cnt = (unsigned)carry, .state = COUNTING, .since = now };
    if (e->state == COUNTING) {
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

const struct hot_door *hot_doorkeeper(const struct hot *s)
{
    return s->door.cells != NULL ? &s->door : NULL;
}

int hot_door(struct hot *s, uint64_t h)
{
    /* Most "maybe" answers end here: one byte, no bucket, no lock, no clock. */
    return s->door.cells != NULL ? hot_door_hit(&s->door, h) : 0;
}

bool hot_count(struct hot *s, uint64_t h, int carry, uint32_t now)
{
    if (s->door.cells != NULL)
        door_turn(s, now);
    return carry >= 0 && count(s, h, now, carry);
}

bool hot_hit(struct hot *s, uint64_t h, uint32_t now)
{
    /* As adapt_maybe calls it: the door turns only when a hit goes on. */
    return hot_count(s, h, hot_door(s, h), now);
}

bool hot_nominate(struct hot *s, uint64_t h, uint32_t now)
{
    struct bucket *b = bucket_of(s, h);
    lock(b);
    struct entry *e = find(b, h);
    if (e == NULL)
        e = take(s, b, h, now, 0);
    bool cand = counting(s, e, now, 0);
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
