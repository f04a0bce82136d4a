/*
 * The daemon's status, taken once per request as a snapshot and rendered in
 * one place: /stats and /readyz as JSON here, /metrics as Prometheus text
 * by metrics.c.  The route table that names the handlers is routes.c's.
 */
#ifndef BLOOMGUARD_STATUS_H
#define BLOOMGUARD_STATUS_H

#include <stdbool.h>
#include <time.h>

#include "api.h"
#include "config.h"
#include "fleethub.h"
#include "filter.h"
#include "publish.h"
#include "source.h"
#include "stats.h"

/*
 * Why a filter is degraded, one list: the enum, status_degraded_name's
 * names (the reason label of bloomguard_filter_degraded and /readyz's
 * degraded_reason) and the man page's list come from it.  The first that
 * holds is the reason: saturated (past [filter] max_layers),
 * peer_unchecked (a peer's snapshot on probation: table_vet), post_log_cut
 * (POSTs acknowledged before the start may be lost: table_hold_absent),
 * not_followed (method "none": nothing follows the table, or [sync]
 * enabled = no), stale (the horizon is older than max_staleness: the
 * follower is disconnected, partitioned, or a catch-up is still to come).
 */
#define STATUS_DEGRADED_LIST(X) X(SATURATED, "saturated") X(PEER_UNCHECKED, "peer_unchecked") \
    X(POST_LOG_CUT, "post_log_cut") X(NOT_FOLLOWED, "not_followed") X(STALE, "stale")

enum status_degraded {
    DEGRADED_NO,
#define STATUS_DEGRADED_ENUM(e, name) DEGRADED_##e,
    STATUS_DEGRADED_LIST(STATUS_DEGRADED_ENUM)
#undef STATUS_DEGRADED_ENUM
    DEGRADED_REASONS
};

/* The reason's name; NULL for DEGRADED_NO or a value out of range. */
const char *status_degraded_name(enum status_degraded r);

/* One guarded table's figures: its filter, its sync state, its journal. */
struct status_filter {
    const char *name;           /* [filter NAME], "default" for the global keys' */
    bool ready;                 /* loaded and served */
    bool degraded;              /* ready and table.degraded: absent answers are "maybe" now */
    enum status_degraded why;   /* DEGRADED_NO unless degraded */
    bool followed;              /* a follower took the table (method not "none", not unchosen) */
    struct filter_info info;    /* zeros until ready (and in a light snapshot) */
    unsigned n_layers;          /* entries of layer[]: 0 until ready (and in a light snapshot) */
    struct filter_layer_info layer[FILTER_MAX_LAYERS];
    double target_fpp;          /* configured false_positive_rate */
    struct table_status table;      /* loads, horizon, positions, snapshots */
    struct follow_status conn;      /* its follower's connection (shared by the tables it follows) */
    struct table_posts pending;     /* zeros in a light snapshot */
    bool posts_durable;             /* POSTs are logged on disk before their 2xx (postlog.h) */
    uint64_t behind_keys;           /* a replica: keys its upstream has that it has not applied */
    struct table_adaptive adaptive; /* verified-absent IDs (zeros in a light snapshot) */
    bool published;                 /* written in a file for readers (full snapshot only) */
    struct publish_status pub;      /* its file: generation, bytes resident and in huge pages */
};

/* Everything the status documents show, read once. */
struct status {
    time_t now, started;
    double max_staleness;       /* [sync] max_staleness, seconds */
    unsigned n;                 /* tables; filters[0] is the default one */
    struct status_filter filters[CONFIG_MAX_FILTERS];
    bool ready;                 /* every table is */
    bool degraded;              /* some table is */
    bool replica;               /* some table follows an upstream ([sync] method = upstream) */
    struct fleethub_info fleet; /* what it serves its replicas (zeros without a hub) */
    struct stats_snapshot stats;    /* requests by route: a full snapshot only */
};

/*
 * Take a snapshot: full for /stats and /metrics; light (no filter figures,
 * no journal, no requests by route: nothing allocated) for /readyz, which
 * probes poll often.  False when memory ran out (full only).  Release it
 * with status_release either way.
 */
bool status_take(struct app *a, struct status *st, bool full);
void status_release(struct status *st);

/*
 * A table's "published" in /stats (status_published.c): its file's path,
 * generation and bytes resident and in huge pages; JSON null when it is
 * not published, NULL when memory ran out.  The caller owns it.
 */
struct json_t *status_published_json(const struct status_filter *f);

/* The route handlers: GET /stats, GET /readyz, GET /healthz (/metrics is metrics.h's). */
struct reply status_stats(struct app *a, const struct api_request *rq);
struct reply status_readyz(struct app *a, const struct api_request *rq);
struct reply status_healthz(struct app *a, const struct api_request *rq);

#endif
