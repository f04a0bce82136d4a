/*
 * Striped counters.  Each thread hashes to a stripe (a separate set of cache
 * lines), so request threads rarely write the same line; readers add the
 * stripes up.
 */
#include "stats.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define STRIPES 16

const double stats_bucket_bounds[STATS_BUCKETS] = {
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25, 1.0
};

/* One stripe: the event counters, then one block per route slot. */
struct stripe {
    _Atomic uint64_t counter[ST_COUNT];
    struct route_stripe {
        _Atomic uint64_t requests[SS_COUNT];
        _Atomic uint64_t latency_bucket[STATS_BUCKETS + 1];
        _Atomic uint64_t latency_sum_ns;
    } route[];
};

struct stats {
    unsigned slots;
    stats_slot_name_fn *slot_name;
    size_t stride;              /* bytes per stripe: a whole number of cache lines */
    unsigned char *mem;         /* STRIPES stripes, 64-byte aligned */
};

static struct stripe *stripe_at(struct stats *s, unsigned i)
{
    return (struct stripe *)(void *)(s->mem + (size_t)i * s->stride);
}

static struct stripe *mine(struct stats *s)
{
    uint64_t x = (uint64_t)(uintptr_t)pthread_self();
    x ^= x >> 31;
    x *= UINT64_C(0x94d049bb133111eb);
    x ^= x >> 29;
    return stripe_at(s, (unsigned)(x % STRIPES));
}

struct stats *stats_new(unsigned slots, stats_slot_name_fn *slot_name)
{
    if (slots == 0)
        return NULL;
    struct stats *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    s->slots = slots;
    s->slot_name = slot_name;
    size_t bytes = sizeof(struct stripe) + (size_t)slots * sizeof(struct route_stripe);
    s->stride = (bytes + 63) / 64 * 64;
    s->mem = aligned_alloc(64, STRIPES * s->stride);
    if (s->mem == NULL) {
        free(s);
        return NULL;
    }
    memset(s->mem, 0, STRIPES * s->stride);   /* all-zero is a valid atomic zero here */
    return s;
}

void stats_free(struct stats *s)
{
    if (s == NULL)
        return;
    free(s->mem);
    free(s);
}

void stats_add(struct stats *s, enum stat_counter c, uint64_t n)
{
    atomic_fetch_add_explicit(&mine(s)->counter[c], n, memory_order_relaxed);
}

static const unsigned status_code[SS_COUNT] = {
#define STATS_SS_CODE(code) code,
    STATS_STATUS_CODES(STATS_SS_CODE)
#undef STATS_SS_CODE
    0
};

enum stat_status stats_status_index(unsigned code)
{
    switch (code) {
#define STATS_SS_CASE(c) case c: return SS_##c;
    STATS_STATUS_CODES(STATS_SS_CASE)
#undef STATS_SS_CASE
    default: return SS_OTHER;
    }
}

unsigned stats_status_code(enum stat_status st)
{
    return status_code[st];
}

void stats_request(struct stats *s, unsigned slot, unsigned status, uint64_t nanos)
{
    struct route_stripe *rs = &mine(s)->route[slot < s->slots ? slot : s->slots - 1];
    atomic_fetch_add_explicit(&rs->requests[stats_status_index(status)], 1, memory_order_relaxed);
    if (nanos == 0)
        return;                         /* latency not measured */
    unsigned b = 0;
    double sec = (double)nanos * 1e-9;
    while (b < STATS_BUCKETS && sec > stats_bucket_bounds[b])
        b++;
    atomic_fetch_add_explicit(&rs->latency_bucket[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&rs->latency_sum_ns, nanos, memory_order_relaxed);
}

void stats_counters(struct stats *s, uint64_t out[ST_COUNT])
{
    memset(out, 0, ST_COUNT * sizeof(out[0]));
    for (unsigned i = 0; i < STRIPES; i++) {
        struct stripe *st = stripe_at(s, i);
        for (unsigned c = 0; c < ST_COUNT; c++)
            out[c] += atomic_load_explicit(&st->counter[c], memory_order_relaxed);
    }
}

bool stats_snapshot(struct stats *s, struct stats_snapshot *out)
{
    memset(out, 0, sizeof(*out));
    stats_counters(s, out->counter);
    out->slot_name = s->slot_name;
    out->route = calloc(s->slots, sizeof(out->route[0]));
    if (out->route == NULL)
        return false;
    out->slots = s->slots;
    for (unsigned i = 0; i < STRIPES; i++) {
        struct stripe *st = stripe_at(s, i);
        for (unsigned e = 0; e < s->slots; e++) {
            struct route_stripe *rs = &st->route[e];
            struct stats_route *r = &out->route[e];
            for (unsigned k = 0; k < SS_COUNT; k++)
                r->requests[k] += atomic_load_explicit(&rs->requests[k], memory_order_relaxed);
            for (unsigned b = 0; b <= STATS_BUCKETS; b++)
                r->latency_bucket[b] += atomic_load_explicit(&rs->latency_bucket[b], memory_order_relaxed);
            r->latency_sum_ns += atomic_load_explicit(&rs->latency_sum_ns, memory_order_relaxed);
        }
    }
    return true;
}

void stats_snapshot_free(struct stats_snapshot *out)
{
    free(out->route);
    out->route = NULL;
    out->slots = 0;
}
