/*
 * Request and event counters, cheap enough for the hot path: relaxed atomic
 * adds on per-thread-ish stripes, summed only when someone asks (/stats,
 * /metrics).
 */
#ifndef BLOOMGUARD_STATS_H
#define BLOOMGUARD_STATS_H

#include <stdbool.h>
#include <stdint.h>

enum stat_endpoint {
    EP_EXISTS, EP_EXISTS_BATCH, EP_IDS, EP_AUTH, EP_HEALTHZ, EP_READYZ,
    EP_STATS, EP_METRICS, EP_RELOAD, EP_OTHER, EP_COUNT
};

/* Status codes the daemon answers with, counted one by one. */
enum stat_status {
    SS_200, SS_202, SS_204, SS_400, SS_401, SS_403, SS_404, SS_405, SS_410,
    SS_413, SS_414, SS_415, SS_500, SS_503, SS_OTHER, SS_COUNT
};

enum stat_counter {
    ST_LOOKUP_HIT, ST_LOOKUP_MISS, ST_INSERTS, ST_AUTH_HIT, ST_AUTH_MISS,
    ST_AUTH_BYPASS, ST_AUTH_NOT_READY, ST_NOTIFY_APPLIED,
    ST_AUTH_MALFORMED,      /* /auth: the template matched but the ID is not well-formed: allowed */
    ST_DEGRADED,            /* answers that would have been 404 or deny, given as 200 or allow */
    ST_INSERTS_REFUSED,     /* IDs of POSTs refused because the journal was full */
    ST_COUNT
};

/* Upper bounds (seconds) of the request-latency histogram; +Inf is implied. */
#define STATS_BUCKETS 11
extern const double stats_bucket_bounds[STATS_BUCKETS];

struct stats;

/* NULL on allocation failure.  stats_free(NULL) is a no-op. */
struct stats *stats_new(void);
void stats_free(struct stats *s);

/* Thread-safe, lock-free. */
void stats_add(struct stats *s, enum stat_counter c, uint64_t n);
void stats_request(struct stats *s, enum stat_endpoint ep, unsigned status, uint64_t nanos);

/* A consistent-enough sum of all stripes (each counter read atomically). */
struct stats_snapshot {
    uint64_t counter[ST_COUNT];
    uint64_t requests[EP_COUNT][SS_COUNT];
    uint64_t latency_bucket[EP_COUNT][STATS_BUCKETS + 1];   /* not cumulative; last is +Inf */
    uint64_t latency_sum_ns[EP_COUNT];
};
void stats_snapshot(struct stats *s, struct stats_snapshot *out);

/* Names used in JSON and Prometheus labels. */
const char *stats_endpoint_name(enum stat_endpoint ep);
unsigned stats_status_code(enum stat_status st);   /* 0 for SS_OTHER */
enum stat_status stats_status_index(unsigned code);

#endif
