/*
 * The daemon's status, taken once per request as a snapshot and rendered in
 * one place: /stats and /readyz as JSON, /metrics as Prometheus text.
 * Handlers for those routes are here; the route table is api.c's.
 */
#ifndef BLOOMGUARD_STATUS_H
#define BLOOMGUARD_STATUS_H

#include <stdbool.h>
#include <time.h>

#include "api.h"
#include "filter.h"
#include "pending.h"
#include "source.h"
#include "stats.h"

/*
 * One filter's figures.  There is one filter today; a section per filter
 * (issue 13: named filters) is then a loop over an array of these.
 */
struct status_filter {
    bool ready;                 /* loaded and served */
    struct filter_info info;    /* zeros until ready (and in a light snapshot) */
    double target_fpp;          /* configured false_positive_rate */
};

/* Everything the status documents show, read once. */
struct status {
    time_t now, started;
    double max_staleness;       /* [sync] max_staleness, seconds */
    struct status_filter filter;
    struct source_status source;
    bool degraded;              /* ready and source.degraded: absent answers are "maybe" now */
    struct pending_info pending;
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

/* The route handlers: GET /stats, GET /readyz, GET /metrics. */
struct reply status_stats(struct app *a, const struct api_request *rq);
struct reply status_readyz(struct app *a, const struct api_request *rq);
struct reply status_metrics(struct app *a, const struct api_request *rq);

#endif
