/*
 * The replication endpoints (replicate.c), for replicas ([sync] method =
 * upstream) that follow this daemon: the stream of each table's keys, the
 * horizon's round trips, a fresh snapshot.  The admin token or the
 * replication token (routes.c marks them) opens them.
 */
#ifndef BLOOMGUARD_REPLICATE_H
#define BLOOMGUARD_REPLICATE_H

#include "api.h"

/*
 * GET /replicate/NAME[?from=HISTORY:SEQ]: the stream (fleetwire.h);
 * GET /replicate/NAME/horizon: how fresh the filter is (JSON);
 * GET /replicate/NAME/snapshot: a snapshot made for the request, with
 * where it is exact in its metadata.
 */
struct reply replicate_get(struct app *a, const struct api_request *rq);
/*
 * Its fast form (api_fast_handler; http_fast.c takes the request only with
 * the replication right): GET /replicate/NAME/horizon, the question every
 * replica asks every quarter of its max_staleness; 0 for anything else.
 */
unsigned replicate_get_fast(struct app *a, const char *rest, size_t rest_len, char *out,
                            size_t cap, size_t *len);

#endif
