/*
 * Request and event counters, cheap enough for the hot path: relaxed atomic
 * adds on per-thread-ish stripes, summed only when someone asks (/stats,
 * /metrics).  Requests are counted by route index, a number the caller
 * gives meaning to (http.c: the index of the route in routes_table[], the
 * last slot for requests no route took); stats knows no paths, and names a
 * slot only through the function its creator gave (so /stats and /metrics
 * need no route table).
 */
#ifndef BLOOMGUARD_STATS_H
#define BLOOMGUARD_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * The status codes the daemon answers with, counted one by one: the one
 * list (the enum, the code table, bloomguard -h and docs.test come from
 * it).  Others count as "other"; the 408 of header_timeout is written raw
 * by the sweeper and not counted (it never had a route).
 */
#define STATS_STATUS_CODES(X) \
    X(200) X(202) X(204) X(400) X(401) X(403) X(404) X(405) X(409) X(410) \
    X(413) X(414) X(415) X(500) X(503) X(507)

enum stat_status {
#define STATS_SS_ENUM(code) SS_##code,
    STATS_STATUS_CODES(STATS_SS_ENUM)
#undef STATS_SS_ENUM
    SS_OTHER, SS_COUNT
};

enum stat_counter {
    ST_LOOKUP_HIT, ST_LOOKUP_MISS, ST_INSERTS, ST_AUTH_HIT, ST_AUTH_MISS,
    ST_AUTH_BYPASS, ST_AUTH_NOT_READY,
    ST_AUTH_MALFORMED,      /* /auth: the template matched but the ID is not well-formed: allowed */
    ST_DEGRADED,            /* answers that would have been 404 or deny, given as 200 or allow */
    ST_UNPROVABLE,          /* answers given as "maybe" because the ID's spelling cannot be proven absent */
    ST_AUTH_DEGRADED,       /* /auth's share of ST_DEGRADED: allowed as degraded */
    /* The server's overrun (http.c, http_probe.c): what a proxy sees as no answer in time. */
    ST_CONN_REFUSED,        /* connections closed at accept: max_connections were open */
    ST_PROBE_LATE,          /* self-probes answered after HTTP_LATE_AFTER_MS, or not at all */
    ST_COUNT
};

/*
 * The server's load as it is now, set by the HTTP layer's one writer (its
 * probe thread) and read by /metrics; -1: not known (a unix socket has no
 * listen queue figures).
 */
enum stat_gauge {
    SG_CONNECTIONS,         /* open client connections */
    SG_CONNECTIONS_MAX,     /* max_connections in force (or the file descriptor limit's share) */
    SG_LISTEN_QUEUE,        /* connections the kernel accepted that wait for the daemon to take them */
    SG_LISTEN_QUEUE_MAX,    /* the listen backlog: past it the kernel drops new connections */
    SG_ANSWER_DELAY_US,     /* the last self-probe's wait for its answer (still waiting: so far) */
    SG_COUNT
};

/* Upper bounds (seconds) of the request-latency histogram; +Inf is implied. */
#define STATS_BUCKETS 11
extern const double stats_bucket_bounds[STATS_BUCKETS];

struct stats;

/* A route slot's name, as /stats and /metrics print it. */
typedef const char *stats_slot_name_fn(unsigned slot);

/*
 * Counters for requests in `slots` route slots (0 .. slots-1), named by
 * slot_name (NULL: every slot is "other").  NULL on allocation failure or
 * slots == 0.  stats_free(NULL) is a no-op.
 */
struct stats *stats_new(unsigned slots, stats_slot_name_fn *slot_name);
void stats_free(struct stats *s);

/* Thread-safe, lock-free.  A slot out of range counts in the last one. */
void stats_add(struct stats *s, enum stat_counter c, uint64_t n);
void stats_request(struct stats *s, unsigned slot, unsigned status, uint64_t nanos);
/* An answer of route slot given while the server answers late (its probe waited too long). */
void stats_late(struct stats *s, unsigned slot);
/* Set a gauge (one writer per gauge; readers see the last value).  Thread-safe. */
void stats_gauge_set(struct stats *s, enum stat_gauge g, int64_t v);

/* The requests of one route slot. */
struct stats_route {
    uint64_t requests[SS_COUNT];
    uint64_t late;              /* answered while the server answered late (http_probe.c) */
    uint64_t latency_bucket[STATS_BUCKETS + 1];     /* not cumulative; last is +Inf */
    uint64_t latency_sum_ns;
};

/*
 * A consistent-enough sum of all stripes (each counter read atomically).
 * route is allocated (slots entries): free it with stats_snapshot_free,
 * also after a failure (false: out of memory; counters are still filled,
 * route is NULL and slots 0).
 */
struct stats_snapshot {
    uint64_t counter[ST_COUNT];
    int64_t gauge[SG_COUNT];
    unsigned slots;
    struct stats_route *route;
    stats_slot_name_fn *slot_name;  /* the creator's (stats_new) */
};
bool stats_snapshot(struct stats *s, struct stats_snapshot *out);
void stats_snapshot_free(struct stats_snapshot *out);

/* The name of a snapshot's route slot ("other" when its creator gave no names). */
static inline const char *stats_slot_name(const struct stats_snapshot *s, unsigned slot)
{
    return s->slot_name != NULL ? s->slot_name(slot) : "other";
}

/* Only the event counters: no allocation (for /readyz). */
void stats_counters(struct stats *s, uint64_t out[ST_COUNT]);

unsigned stats_status_code(enum stat_status st);   /* 0 for SS_OTHER */
enum stat_status stats_status_index(unsigned code);

#endif
