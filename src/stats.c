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

struct stripe {
    _Atomic uint64_t counter[ST_COUNT];
    _Atomic uint64_t requests[EP_COUNT][SS_COUNT];
    _Atomic uint64_t latency_bucket[EP_COUNT][STATS_BUCKETS + 1];
    _Atomic uint64_t latency_sum_ns[EP_COUNT];
} __attribute__((aligned(64)));

struct stats {
    struct stripe stripes[STRIPES];
};

static struct stripe *mine(struct stats *s)
{
    uint64_t x = (uint64_t)(uintptr_t)pthread_self();
    x ^= x >> 31;
    x *= UINT64_C(0x94d049bb133111eb);
    x ^= x >> 29;
    return &s->stripes[x % STRIPES];
}

struct stats *stats_new(void)
{
    struct stats *s = aligned_alloc(64, sizeof(struct stats));
    if (s != NULL)
        memset(s, 0, sizeof(*s));   /* all-zero is a valid atomic zero here */
    return s;
}

void stats_free(struct stats *s)
{
    free(s);
}

void stats_add(struct stats *s, enum stat_counter c, uint64_t n)
{
    atomic_fetch_add_explicit(&mine(s)->counter[c], n, memory_order_relaxed);
}

enum stat_status stats_status_index(unsigned code)
{
    switch (code) {
    case 200: return SS_200;
    case 202: return SS_202;
    case 204: return SS_204;
    case 400: return SS_400;
    case 401: return SS_401;
    case 403: return SS_403;
    case 404: return SS_404;
    case 405: return SS_405;
    case 410: return SS_410;
    case 413: return SS_413;
    case 414: return SS_414;
    case 415: return SS_415;
    case 500: return SS_500;
    case 503: return SS_503;
    default: return SS_OTHER;
    }
}

unsigned stats_status_code(enum stat_status st)
{
    static const unsigned code[SS_COUNT] = {
        200, 202, 204, 400, 401, 403, 404, 405, 410, 413, 414, 415, 500, 503, 0
    };
    return code[st];
}

const char *stats_endpoint_name(enum stat_endpoint ep)
{
    static const char *const name[EP_COUNT] = {
        "exists", "exists_batch", "ids", "auth", "healthz", "readyz",
        "stats", "metrics", "reload", "other"
    };
    return name[ep];
}

void stats_request(struct stats *s, enum stat_endpoint ep, unsigned status, uint64_t nanos)
{
    struct stripe *st = mine(s);
    atomic_fetch_add_explicit(&st->requests[ep][stats_status_index(status)], 1,
                              memory_order_relaxed);
    if (nanos == 0)
        return;                         /* latency not measured */
    unsigned b = 0;
    double sec = (double)nanos * 1e-9;
    while (b < STATS_BUCKETS && sec > stats_bucket_bounds[b])
        b++;
    atomic_fetch_add_explicit(&st->latency_bucket[ep][b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&st->latency_sum_ns[ep], nanos, memory_order_relaxed);
}

void stats_snapshot(struct stats *s, struct stats_snapshot *out)
{
    memset(out, 0, sizeof(*out));
    for (unsigned i = 0; i < STRIPES; i++) {
        struct stripe *st = &s->stripes[i];
        for (unsigned c = 0; c < ST_COUNT; c++)
            out->counter[c] += atomic_load_explicit(&st->counter[c], memory_order_relaxed);
        for (unsigned e = 0; e < EP_COUNT; e++) {
            for (unsigned k = 0; k < SS_COUNT; k++)
                out->requests[e][k] += atomic_load_explicit(&st->requests[e][k], memory_order_relaxed);
            for (unsigned b = 0; b <= STATS_BUCKETS; b++)
                out->latency_bucket[e][b] +=
                    atomic_load_explicit(&st->latency_bucket[e][b], memory_order_relaxed);
            out->latency_sum_ns[e] += atomic_load_explicit(&st->latency_sum_ns[e], memory_order_relaxed);
        }
    }
}
